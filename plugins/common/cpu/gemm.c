/*
 * GEMM driver: cache blocking and the split over workers, around the ISA's
 * serial gemm_nt micro-kernels.
 *
 * k is cut into fixed KC-element slices whose partial sums accumulate in
 * out, in slice order. KC never depends on n or on the thread count, so one
 * output element sees the same operations whether its row was computed
 * alone (decode) or in a batch (prefill, batched decode): batch-invariant.
 *
 * Two loop orders, same arithmetic:
 *  - few rows (decode, n <= FEW): one kernel call over the whole k, which
 *    slices k internally, so each weight row streams once from memory,
 *    sequentially and without interruption;
 *  - many rows: per NB-row block of x (L2-resident) and k slice, all the
 *    chunk's weight rows; a group of weight rows (MR x KC) stays in L1 while
 *    the kernel runs over every NR-row group of the block, so each weight
 *    tile is read from memory once per NB tokens.
 */
#include "config.h"

#include "sykconv.h"
#include "sykern.h"
#include "sykquant.h"

/* Blocking; NB and FEW overridable with -D for tuning runs of tools/bench_kernels. */
#ifndef SYK_NB
#define SYK_NB 128 /* x rows per block: NB x KC floats = 512 KB, L2-resident */
#endif
#ifndef SYK_FEW
#define SYK_FEW 8 /* up to this many x rows, the few-rows order */
#endif
#define KC SYK_KC /* fixed for every ISA: see sykern.h */
#define NB SYK_NB
#define FEW SYK_FEW

static inline float bias_at(const syk_gemm *g, int64_t j)
{
    if (g->bias_dtype == SY_DTYPE_F32)
        return ((const float *)g->bias)[j];
    if (g->bias_dtype == SY_DTYPE_BF16)
        return syk_bf16_to_f32(((const uint16_t *)g->bias)[j]);
    return syk_f16_to_f32(((const uint16_t *)g->bias)[j]);
}

static inline const void *wptr(const syk_gemm *g, int64_t row, int64_t col)
{
    return (const char *)g->w + ((size_t)row * (size_t)g->ldw + (size_t)col) * syk_wdtype_size(g->wdtype);
}

static void add_bias(const syk_gemm *g, int64_t r0, int64_t r1, int64_t c0, int64_t c1)
{
    for (int64_t r = r0; r < r1; r++) {
        float *o = g->out + r * g->ldo;
        for (int64_t j = c0; j < c1; j++)
            o[j] += bias_at(g, j);
    }
}

/* The BF16 path: the same two loop orders as the F32 path below, on the rounded x. */
static void bdot_tile(const syk_gemm *g, int64_t r0, int64_t r1, int64_t c0, int64_t c1)
{
    const syk_gemm_nt_xbf16_fn nt = g->bdot->gemm_nt;
    const uint16_t *w = (const uint16_t *)g->w + (size_t)c0 * (size_t)g->ldw;
    if (r1 - r0 <= FEW) {
        nt(g->xb + r0 * g->ldxb, g->ldxb, w, g->ldw, g->out + r0 * g->ldo + c0, g->ldo, r1 - r0, c1 - c0, g->k, 0);
    } else {
        for (int64_t rb = r0; rb < r1; rb += NB) {
            const int64_t nr = r1 - rb < NB ? r1 - rb : NB;
            for (int64_t kb = 0; kb < g->k; kb += KC) {
                const int64_t kc = g->k - kb < KC ? g->k - kb : KC;
                nt(g->xb + rb * g->ldxb + kb, g->ldxb, w + kb, g->ldw, g->out + rb * g->ldo + c0, g->ldo, nr, c1 - c0,
                   kc, kb > 0);
            }
        }
    }
    if (g->bias)
        add_bias(g, r0, r1, c0, c1);
}

typedef struct to_bf16_job {
    const syk_bf16dot *b;
    uint16_t *xb;
    int64_t ldxb;
    const float *x;
    int64_t ldx, k;
} to_bf16_job;

static void to_bf16_rows(void *arg, int64_t begin, int64_t end, int worker)
{
    (void)worker;
    const to_bf16_job *j = arg;
    for (int64_t i = begin; i < end; i++)
        j->b->to_bf16(j->xb + i * j->ldxb, j->x + i * j->ldx, j->k);
}

void syk_rows_to_bf16(const syk_bf16dot *b, uint16_t *xb, int64_t ldxb, const float *x, int64_t ldx, int64_t n,
                      int64_t k, const syk_par *par)
{
    to_bf16_job j = {b, xb, ldxb, x, ldx, k};
    /* ~64k elements per chunk: below that a pool pass costs more than the conversion. */
    const int64_t grain = k >= 65536 ? 1 : 65536 / (k > 0 ? k : 1);
    if (n <= grain)
        to_bf16_rows(&j, 0, n, 0);
    else
        syk_par_for(par, n, grain, to_bf16_rows, &j);
}

void syk_gemm_tile(const syk_kernels *kern, const syk_gemm *g, int64_t r0, int64_t r1, int64_t c0, int64_t c1)
{
    if (r1 <= r0 || c1 <= c0)
        return;
    if (syk_wdtype_quant(g->wdtype)) {
        syk_gemm_tile_q(kern, g, r0, r1, c0, c1);
        return;
    }
    if (g->bdot && g->xb && g->wdtype == SY_DTYPE_BF16 && g->k > 0) {
        if (g->amx && g->amx_w) {
            /* One call over all rows: the kernel blocks rows and k itself, M = 1 through the same tiles. */
            g->amx->gemm(g->xb + r0 * g->ldxb, g->ldxb, g->amx_w, g->out + r0 * g->ldo, g->ldo, r1 - r0, c0, c1);
            if (g->bias)
                add_bias(g, r0, r1, c0, c1);
        } else
            bdot_tile(g, r0, r1, c0, c1);
        return;
    }
    const syk_gemm_nt_fn nt = kern->gemm_nt[g->wdtype];
    const int64_t k = g->k;
    if (k == 0) {
        for (int64_t r = r0; r < r1; r++)
            for (int64_t j = c0; j < c1; j++)
                g->out[r * g->ldo + j] = 0.0f;
    } else if (r1 - r0 <= FEW) {
        /* The kernel slices k itself, so each group of weight rows streams from memory end to end. */
        nt(g->x + r0 * g->ldx, g->ldx, wptr(g, c0, 0), g->ldw, g->out + r0 * g->ldo + c0, g->ldo, r1 - r0, c1 - c0, k, 0);
    } else {
        for (int64_t rb = r0; rb < r1; rb += NB) {
            const int64_t nr = r1 - rb < NB ? r1 - rb : NB;
            for (int64_t kb = 0; kb < k; kb += KC) {
                const int64_t kc = k - kb < KC ? k - kb : KC;
                nt(g->x + rb * g->ldx + kb, g->ldx, wptr(g, c0, kb), g->ldw, g->out + rb * g->ldo + c0, g->ldo, nr,
                   c1 - c0, kc, kb > 0);
            }
        }
    }
    if (g->bias)
        add_bias(g, r0, r1, c0, c1);
}

typedef struct gemm_job {
    const syk_kernels *kern;
    const syk_gemm *g;
    int64_t n_cchunks, groups_per_chunk, n_groups;
} gemm_job;

/* Output columns per group of the split: the AMX kernel's panels, else the kernels' 4-column reductions. */
static int64_t col_group(const syk_gemm *g)
{
    return g->amx && g->amx_w && g->bdot && g->xb ? SYK_AMX_PANEL : 4;
}

static void gemm_items(void *arg, int64_t begin, int64_t end, int worker)
{
    (void)worker;
    const gemm_job *j = arg;
    const syk_gemm *g = j->g;
    for (int64_t it = begin; it < end; it++) {
        const int64_t rb = it / j->n_cchunks, cc = it % j->n_cchunks;
        const int64_t r0 = rb * NB, r1 = r0 + NB < g->n ? r0 + NB : g->n;
        const int64_t g0 = cc * j->groups_per_chunk;
        const int64_t g1 = g0 + j->groups_per_chunk < j->n_groups ? g0 + j->groups_per_chunk : j->n_groups;
        const int64_t cg = col_group(g), c0 = g0 * cg, c1 = g1 * cg < g->m ? g1 * cg : g->m;
        syk_gemm_tile(j->kern, g, r0, r1, c0, c1);
    }
}

void syk_gemm_run(const syk_kernels *kern, const syk_gemm *g, const syk_par *par)
{
    if (g->n <= 0 || g->m <= 0)
        return;
    const int workers = par && par->run ? par->n_workers : 1;
    const double flops = 2.0 * (double)g->n * (double)g->m * (double)g->k;
    /* Below ~100k flops, waking the pool costs more than it saves. */
    if (workers <= 1 || flops < 1e5) {
        syk_gemm_tile(kern, g, 0, g->n, 0, g->m);
        return;
    }
    gemm_job j;
    j.kern = kern;
    j.g = g;
    j.n_groups = (g->m + col_group(g) - 1) / col_group(g);
    const int64_t n_rb = (g->n + NB - 1) / NB;
    /* Enough column chunks that every worker gets about four items. */
    int64_t want = ((int64_t)workers * 4 + n_rb - 1) / n_rb;
    if (want > j.n_groups)
        want = j.n_groups;
    if (want < 1)
        want = 1;
    j.groups_per_chunk = (j.n_groups + want - 1) / want;
    j.n_cchunks = (j.n_groups + j.groups_per_chunk - 1) / j.groups_per_chunk;
    syk_par_for(par, n_rb * j.n_cchunks, 1, gemm_items, &j);
}

/* -------------------------------------------------------- several products */

typedef struct gemm_multi_job {
    const syk_kernels *kern;
    int n;
    gemm_job part[SYK_GEMM_MULTI_MAX];
    int64_t first[SYK_GEMM_MULTI_MAX + 1]; /* first item of each product */
} gemm_multi_job;

static void gemm_multi_items(void *arg, int64_t begin, int64_t end, int worker)
{
    const gemm_multi_job *j = arg;
    int p = 0;
    for (int64_t it = begin; it < end; it++) {
        while (it >= j->first[p + 1])
            p++;
        gemm_items((void *)&j->part[p], it - j->first[p], it - j->first[p] + 1, worker);
    }
}

void syk_gemm_run_multi(const syk_kernels *kern, const syk_gemm *g, int n, const syk_par *par)
{
    if (n <= 0)
        return;
    if (n == 1 || n > SYK_GEMM_MULTI_MAX) {
        for (int i = 0; i < n; i++)
            syk_gemm_run(kern, &g[i], par);
        return;
    }
    const int workers = par && par->run ? par->n_workers : 1;
    double flops = 0;
    for (int i = 0; i < n; i++)
        if (g[i].n > 0 && g[i].m > 0)
            flops += 2.0 * (double)g[i].n * (double)g[i].m * (double)g[i].k;
    if (workers <= 1 || flops < 1e5) {
        for (int i = 0; i < n; i++)
            if (g[i].n > 0 && g[i].m > 0)
                syk_gemm_tile(kern, &g[i], 0, g[i].n, 0, g[i].m);
        return;
    }
    gemm_multi_job j;
    j.kern = kern;
    j.n = n;
    j.first[0] = 0;
    for (int i = 0; i < n; i++) {
        gemm_job *pj = &j.part[i];
        pj->kern = kern;
        pj->g = &g[i];
        pj->n_groups = g[i].m > 0 ? (g[i].m + col_group(&g[i]) - 1) / col_group(&g[i]) : 0;
        pj->n_cchunks = pj->groups_per_chunk = 0;
        int64_t items = 0;
        if (g[i].n > 0 && g[i].m > 0) {
            /* Each product cut exactly as syk_gemm_run cuts it alone; the pool then deals the
             * union out in about four claims per worker, all of a similar size. */
            const int64_t n_rb = (g[i].n + NB - 1) / NB;
            int64_t want = ((int64_t)workers * 4 + n_rb - 1) / n_rb;
            if (want > pj->n_groups)
                want = pj->n_groups;
            if (want < 1)
                want = 1;
            pj->groups_per_chunk = (pj->n_groups + want - 1) / want;
            pj->n_cchunks = (pj->n_groups + pj->groups_per_chunk - 1) / pj->groups_per_chunk;
            items = n_rb * pj->n_cchunks;
        }
        j.first[i + 1] = j.first[i] + items;
    }
    syk_par_for(par, j.first[n], 1, gemm_multi_items, &j);
}
