/*
 * moe/cuda: mixture of experts on an NVIDIA GPU (the portable variant
 * `auto` falls back to; arch-specific wgmma / block-scaled FP4 variants
 * would be further plugins with higher probe scores).
 *
 * Per pass of up to max_tokens tokens:
 *   1. the router logits come to the host and each token is routed there
 *      by the CPU plugin's own routing code (moe/cpu/moe_route.c, in
 *      double): the choice of experts is discrete, so both plugin sets pick
 *      the same experts bit for bit;
 *   2. the host groups the (token, expert) assignments by expert and cuts
 *      each group into row tiles, which go to the device with the weights;
 *   3. on the device: gather the rows, grouped GEMMs for gate and up,
 *      silu * up, grouped GEMM for down, and a weighted combine per token
 *      in top-k order.
 * Expert weights are uploaded once per layer into one [E, rows, cols]
 * buffer per matrix, in their own dtype (F32, F16, BF16). With expert
 * parallelism (set_expert_range) only the range's experts are uploaded;
 * every token is still routed among all experts, and assignments to the
 * others' experts are dropped before the GEMMs (the combine skips them).
 *
 * The grouped GEMM's tile is one of the compiled variants (moe_kern.h): the
 * `tile` key, else per token-count bucket from the tuning table for this
 * shape and GPU (plugins/common/moe/sytune.h; <arch> "cuda-sm<major><minor>",
 * <sku> the device name), else the default. Every variant a table or the key
 * names is checked against the device's limits at prepare, so none fails to
 * launch mid-run.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include "moe_cpu.h"
#include "moe_kern.h"
#include "moe_tiles.h"
#include "sycuda.h"
#include "symoe_range.h"
#include "sytune.h"

#define SY_MOE_CUDA_NAME "cuda"

typedef struct moe_cuda_layer {
    void *gate, *up, *down; /* device [E, inter, hidden], [E, inter, hidden], [E, hidden, inter] */
    double *bias;           /* host [E] or NULL */
} moe_cuda_layer;

/* The `tile` key: the tables, the default variant, or one variant for every pass. */
enum { TILE_TABLES = -2, TILE_BUILTIN = -1 };

typedef struct moe_cuda {
    const sy_host *host;
    int64_t chunk_tokens;
    int prepared;
    sy_moe_problem p;
    int32_t e_first, e_count; /* the experts this instance holds (expert parallelism) */
    int tile_key;             /* TILE_TABLES, TILE_BUILTIN or a variant index */
    char tuning_dir[4096];
    sytune_table tune;        /* entry[b][0]: bucket b's variant */
    uint64_t logged_buckets;  /* bit b: bucket b's first pass was logged (debug); bit 63: the default's */
    moe_cuda_layer *layers;
    /* Host scratch for one pass (A = chunk_tokens * top_k). */
    float *logits;      /* [chunk, E] */
    int32_t *ids;       /* [chunk, K] */
    float *wts;         /* [chunk, K] */
    int32_t *counts, *offsets; /* [E + 1] */
    int32_t *meta;      /* assign_tok [A] | slot_of [A] | tiles [n_tiles * 3] */
    /* Device scratch for one pass. */
    int32_t *d_meta;
    float *d_wts, *d_xe, *d_act, *d_up, *d_ye;
    size_t max_tiles;
} moe_cuda;

static const sy_key_decl keys[] = {
    {"max_tokens", SY_KEY_INT, "1024",
     "tokens per pass, which sizes the device scratch (about max_tokens x top_k x (2 hidden + 2 inter) floats); "
     "larger batches run in several passes",
     1, 1048576, NULL},
    {"tile", SY_KEY_STRING, "",
     "the grouped GEMM's tile variant (colsxrowsxk) for every pass, overriding the tables (switchyard tune-moe "
     "sweeps them): 64x32x32 (the default), 64x8x32, 128x8x32, 64x16x32, 64x64x32, 128x32x32, 128x64x16; "
     "builtin: the default; empty or auto: the tables",
     0, 0, NULL},
    {"tuning_dir", SY_KEY_STRING, SY_MOE_TUNING_DIR,
     "MoE tuning tables: <dir>/cuda-sm<cc>/<gpu name>/E=..,N=..,K=..,dtype=...ini (docs/moe-tuning.md)", 0, 0, NULL},
    {NULL, 0, NULL, NULL, 0, 0, NULL},
};

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The installed tables, or the source tree's before `make install` (as moe/cpu). */
static const char *default_tuning_dir(void)
{
    return !is_dir(SY_MOE_TUNING_DIR) && is_dir(SY_MOE_TUNING_SRCDIR) ? SY_MOE_TUNING_SRCDIR : SY_MOE_TUNING_DIR;
}

static int probe(const sy_host *host, sy_err *why)
{
    (void)host;
    return syc_probe_gpu0(why) ? 50 : 0; /* the portable variant: an arch-specific one should score higher */
}

static int create(const sy_host *host, const sy_kv *cfg, size_t n_cfg, void **inst, sy_err *err)
{
    const long long mt = sy_kv_int(cfg, n_cfg, "max_tokens", 1024);
    if (mt < 1 || mt > 1048576)
        return sy_err_set(err, SY_ERR_INVALID, "max_tokens = %lld: expected 1..1048576", mt);
    const char *tile = sy_kv_get(cfg, n_cfg, "tile"), *td = sy_kv_get(cfg, n_cfg, "tuning_dir");
    int tile_key = TILE_TABLES;
    if (tile && strcmp(tile, "builtin") == 0)
        tile_key = TILE_BUILTIN;
    else if (tile && *tile && strcmp(tile, "auto") != 0 && (tile_key = symt_find(tile)) < 0) {
        char names[256];
        symt_names(names, sizeof names);
        return sy_err_set(err, SY_ERR_INVALID, "tile = '%s': expected one of %s, builtin, auto or empty", tile, names);
    }
    moe_cuda *m = calloc(1, sizeof *m);
    if (!m)
        return sy_err_set(err, SY_ERR_NOMEM, "moe cuda: cannot allocate the instance");
    m->host = host;
    m->chunk_tokens = mt;
    m->tile_key = tile_key;
    snprintf(m->tuning_dir, sizeof m->tuning_dir, "%s",
             !td || strcmp(td, SY_MOE_TUNING_DIR) == 0 ? default_tuning_dir() : td);
    *inst = m;
    return SY_OK;
}

/* cudaFree(NULL) is a no-op, so a partly uploaded layer frees the same way. */
static void layer_free(moe_cuda_layer *L)
{
    cudaFree(L->gate);
    cudaFree(L->up);
    cudaFree(L->down);
    free(L->bias);
}

static void release(moe_cuda *m)
{
    if (m->layers) {
        for (int32_t l = 0; l < m->p.n_layers; l++)
            layer_free(&m->layers[l]);
        free(m->layers);
        m->layers = NULL;
    }
    void *host[] = {m->logits, m->ids, m->wts, m->counts, m->offsets, m->meta};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++)
        free(host[i]);
    void *dev[] = {m->d_meta, m->d_wts, m->d_xe, m->d_act, m->d_up, m->d_ye};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        if (dev[i])
            cudaFree(dev[i]);
    m->logits = m->wts = NULL;
    m->ids = m->counts = m->offsets = m->meta = m->d_meta = NULL;
    m->d_wts = m->d_xe = m->d_act = m->d_up = m->d_ye = NULL;
    m->prepared = 0;
}

static void destroy(void *inst)
{
    moe_cuda *m = inst;
    if (!m)
        return;
    release(m);
    free(m);
}

static int check(const sy_moe_problem *p, sy_err *why)
{
    int rc = sy__moe_check_problem(p, why);
    if (rc)
        return rc;
    if (p->weight_dtype != SY_DTYPE_F32 && p->weight_dtype != SY_DTYPE_F16 && p->weight_dtype != SY_DTYPE_BF16)
        return sy_err_set(why, SY_ERR_UNSUPPORTED, "expert weights %s: moe cuda reads F32, F16 and BF16",
                          sy_dtype_name(p->weight_dtype));
    return SY_OK;
}

static int supports(void *inst, const sy_moe_problem *p, sy_err *why)
{
    (void)inst;
    return check(p, why) == SY_OK;
}

/* This GPU's <arch> and <sku> for the tables: "cuda-sm90", "NVIDIA-H200". */
static int tune_device(char *arch, size_t arch_len, char *sku, size_t sku_len, sy_err *err)
{
    int dev = 0;
    struct cudaDeviceProp prop;
    SYC_TRY(err, cudaGetDevice(&dev), "moe cuda: cudaGetDevice");
    SYC_TRY(err, cudaGetDeviceProperties(&prop, dev), "moe cuda: cudaGetDeviceProperties");
    snprintf(arch, arch_len, "cuda-sm%d%d", prop.major, prop.minor);
    sytune_sanitise(sku, sku_len, prop.name);
    return SY_OK;
}

/* Every variant's needs (cudaFuncGetAttributes) and this device's limits. */
static int tile_fit_query(symt_fit *f, sy_err *err)
{
    int dev = 0, smem = 0, regs = 0, thr = 0;
    SYC_TRY(err, cudaGetDevice(&dev), "moe cuda: cudaGetDevice");
    SYC_TRY(err, cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev),
            "moe cuda: shared memory per block");
    SYC_TRY(err, cudaDeviceGetAttribute(&regs, cudaDevAttrMaxRegistersPerBlock, dev), "moe cuda: registers per block");
    SYC_TRY(err, cudaDeviceGetAttribute(&thr, cudaDevAttrMaxThreadsPerBlock, dev), "moe cuda: threads per block");
    f->lim = (symt_limits){smem, regs, thr};
    for (int v = 0; v < SYMK_N_VARIANTS; v++) {
        symk_attrs a;
        const int e = symk_variant_attrs(v, &a);
        if (e)
            return syc_fail(err, (cudaError_t)e, "moe cuda: cudaFuncGetAttributes of a grouped GEMM variant");
        f->needs[v] = (symt_needs){a.static_smem, 0, a.regs};
    }
    return SY_OK;
}

/* The tiles of the grouped GEMM: the `tile` key, else the tuning table for this shape and GPU. */
static int load_tiles(moe_cuda *m, sy_err *err)
{
    const sy_moe_problem *p = &m->p;
    memset(&m->tune, 0, sizeof m->tune);
    m->logged_buckets = 0;
    symt_fit fit;
    int rc = tile_fit_query(&fit, err);
    if (rc)
        return rc;
    if (m->tile_key == TILE_BUILTIN) {
        snprintf(m->tune.source, sizeof m->tune.source, "built-in (tile = builtin)");
        return SY_OK;
    }
    if (m->tile_key >= 0) {
        const int64_t entry[SYTUNE_MAX_KEYS] = {m->tile_key};
        char why[400];
        if ((rc = symt_check_entry(&fit, entry, why, sizeof why)))
            return sy_err_set(err, rc, "moe cuda: tile = %s %s", symt_variants[m->tile_key].name, why);
        m->tune.n = 1;
        m->tune.tokens[0] = 1;
        m->tune.entry[0][0] = m->tile_key;
        snprintf(m->tune.source, sizeof m->tune.source, "the tile key");
        return SY_OK;
    }
    char arch[64], sku[256];
    if ((rc = tune_device(arch, sizeof arch, sku, sizeof sku, err)))
        return rc;
    const sytune_schema s = symt_schema(&fit, SY_MOE_CUDA_NAME);
    return sytune_load(m->tuning_dir, arch, sku, p->n_experts, p->inter, p->hidden, p->weight_dtype, &s, m->host,
                       &m->tune, err);
}

/* The variant a pass of n tokens runs with (logged at debug on a bucket's first pass). */
static int pass_variant(moe_cuda *m, int64_t n)
{
    const int b = sytune_bucket(m->tune.tokens, m->tune.n, n);
    const int v = b < 0 ? 0 : (int)m->tune.entry[b][0];
    const uint64_t bit = (uint64_t)1 << (b < 0 ? 63 : b);
    if (!(m->logged_buckets & bit)) {
        m->logged_buckets |= bit;
        if (b < 0)
            sy_logf(m->host, SY_LOG_DEBUG, SY_MOE_CUDA_NAME, "pass of %lld tokens: default tile %s", (long long)n,
                    symt_variants[v].name);
        else
            sy_logf(m->host, SY_LOG_DEBUG, SY_MOE_CUDA_NAME, "pass of %lld tokens: bucket tokens=%lld, tile %s (%s)",
                    (long long)n, (long long)m->tune.tokens[b], symt_variants[v].name, m->tune.source);
    }
    return v;
}

static int prepare(void *inst, const sy_moe_problem *p, sy_err *err)
{
    moe_cuda *m = inst;
    int rc = check(p, err);
    if (rc)
        return rc;
    release(m);
    m->p = *p;
    m->e_first = 0;
    m->e_count = p->n_experts;
    if ((rc = load_tiles(m, err)))
        return rc;
    const size_t C = (size_t)m->chunk_tokens, K = (size_t)p->top_k, A = C * K, E = (size_t)p->n_experts;
    const size_t H = (size_t)p->hidden, F = (size_t)p->inter;
    /* Row tiles: at most one partial tile per expert beyond A / rows full ones, rows >= the smallest variant's. */
    int min_rows = symt_variants[0].rows;
    for (int v = 1; v < SYMK_N_VARIANTS; v++)
        min_rows = symt_variants[v].rows < min_rows ? symt_variants[v].rows : min_rows;
    m->max_tiles = A / (size_t)min_rows + E + 1;
    m->layers = calloc((size_t)p->n_layers, sizeof *m->layers);
    m->logits = malloc(sizeof(float) * C * E);
    m->ids = malloc(sizeof(int32_t) * A);
    m->wts = malloc(sizeof(float) * A);
    m->counts = malloc(sizeof(int32_t) * (E + 1));
    m->offsets = malloc(sizeof(int32_t) * (E + 1));
    m->meta = malloc(sizeof(int32_t) * (2 * A + 3 * m->max_tiles));
    if (!m->layers || !m->logits || !m->ids || !m->wts || !m->counts || !m->offsets || !m->meta) {
        release(m);
        return sy_err_set(err, SY_ERR_NOMEM, "moe cuda: cannot allocate host scratch for %zu tokens", C);
    }
    cudaError_t e = cudaMalloc((void **)&m->d_meta, sizeof(int32_t) * (2 * A + 3 * m->max_tiles));
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&m->d_wts, sizeof(float) * A);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&m->d_xe, sizeof(float) * A * H);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&m->d_act, sizeof(float) * A * F);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&m->d_up, sizeof(float) * A * F);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&m->d_ye, sizeof(float) * A * H);
    if (e != cudaSuccess) {
        release(m);
        return sy_err_set(err, SY_ERR_NOMEM, "moe cuda: device scratch for %zu tokens x top_k %zu (%.1f MiB): %s; "
                          "lower max_tokens", C, K, (double)(sizeof(float) * A * (2 * H + 2 * F)) / 1048576.0,
                          cudaGetErrorString(e));
    }
    m->prepared = 1;
    sy_logf(m->host, SY_LOG_INFO, SY_MOE_CUDA_NAME, "%d experts top-%d, device scratch for %zu tokens per pass "
            "(%.1f MiB), expert GEMM tiles: %s (%d buckets)", p->n_experts, p->top_k, C,
            (double)(sizeof(float) * A * (2 * H + 2 * F)) / 1048576.0, m->tune.source, m->tune.n);
    return SY_OK;
}

/* Uploads n_experts [rows, cols] views into one device buffer. */
static int upload_experts(const sy_moe_problem *p, int32_t E, int32_t e0, const sy_tensor *v, const char *what,
                          int64_t rows, int64_t cols, void **out, sy_err *err)
{
    const size_t es = (size_t)sy_dtype_bits(p->weight_dtype) / 8;
    const size_t mat = (size_t)rows * (size_t)cols * es;
    for (int32_t e = 0; e < E; e++) {
        const sy_tensor *t = &v[e];
        if (t->dtype != p->weight_dtype)
            return sy_err_set(err, SY_ERR_INVALID, "moe prepare_layer: expert %d %s is %s; the problem says %s", e0 + e,
                              what, sy_dtype_name(t->dtype), sy_dtype_name(p->weight_dtype));
        if (t->ndim != 2 || t->shape[0] != rows || t->shape[1] != cols || t->stride[1] != 1 || t->stride[0] < cols ||
            !t->data)
            return sy_err_set(err, SY_ERR_INVALID,
                              "moe prepare_layer: expert %d %s must be a [%lld, %lld] matrix with contiguous rows, "
                              "found ndim %d [%lld, %lld]", e0 + e, what, (long long)rows, (long long)cols, t->ndim,
                              (long long)t->shape[0], (long long)(t->ndim > 1 ? t->shape[1] : 0));
    }
    SYC_TRY(err, cudaMalloc(out, mat * (size_t)E), "moe prepare_layer: expert weights");
    for (int32_t e = 0; e < E; e++)
        SYC_TRY(err,
                cudaMemcpy2D((char *)*out + mat * (size_t)e, (size_t)cols * es, v[e].data, (size_t)v[e].stride[0] * es,
                             (size_t)cols * es, (size_t)rows, cudaMemcpyHostToDevice),
                "moe prepare_layer: expert upload");
    return SY_OK;
}

static int prepare_layer(void *inst, int32_t layer, const sy_tensor *gate, const sy_tensor *up, const sy_tensor *down,
                         const sy_tensor *score_bias, sy_err *err)
{
    moe_cuda *m = inst;
    if (!m->prepared)
        return sy_err_set(err, SY_ERR_INVALID, "moe cuda: prepare_layer before prepare");
    if (layer < 0 || layer >= m->p.n_layers)
        return sy_err_set(err, SY_ERR_INVALID, "moe prepare_layer: layer %d outside [0, %d)", layer, m->p.n_layers);
    if (!gate || !up || !down)
        return sy_err_set(err, SY_ERR_INVALID, "moe prepare_layer: gate, up and down arrays are required");
    const int32_t E = m->p.n_experts;
    double *bias = NULL;
    if (score_bias) {
        if (score_bias->ndim != 1 || score_bias->shape[0] != E || !score_bias->data ||
            (score_bias->dtype != SY_DTYPE_F32 && score_bias->dtype != SY_DTYPE_F16 &&
             score_bias->dtype != SY_DTYPE_BF16))
            return sy_err_set(err, SY_ERR_INVALID, "moe prepare_layer: score_bias must be [%d] F32/F16/BF16", E);
        float *tmp = malloc(sizeof(float) * (size_t)E);
        if (!tmp || !(bias = malloc(sizeof(double) * (size_t)E))) {
            free(tmp);
            return sy_err_set(err, SY_ERR_NOMEM, "moe prepare_layer: cannot allocate the score bias");
        }
        syk_row_to_f32(tmp, score_bias->data, score_bias->dtype, E);
        for (int32_t e = 0; e < E; e++)
            bias[e] = tmp[e];
        free(tmp);
    }
    moe_cuda_layer L = {NULL, NULL, NULL, bias};
    int rc;
    const int32_t EL = m->e_count, e0 = m->e_first;
    if ((rc = upload_experts(&m->p, EL, e0, gate, "gate", m->p.inter, m->p.hidden, &L.gate, err)) ||
        (rc = upload_experts(&m->p, EL, e0, up, "up", m->p.inter, m->p.hidden, &L.up, err)) ||
        (rc = upload_experts(&m->p, EL, e0, down, "down", m->p.hidden, m->p.inter, &L.down, err))) {
        layer_free(&L);
        return rc;
    }
    layer_free(&m->layers[layer]);
    m->layers[layer] = L;
    return SY_OK;
}

static int f32_2d(const sy_tensor *t, const char *what, int64_t cols, int64_t *rows, int64_t *ld, sy_err *err)
{
    if (!t || t->dtype != SY_DTYPE_F32 || t->ndim != 2 || t->stride[1] != 1 || t->shape[1] != cols ||
        (t->shape[0] > 1 && t->stride[0] < cols) || (!t->data && t->shape[0] > 0))
        return sy_err_set(err, SY_ERR_INVALID, "moe forward: %s must be F32 [n, %lld] with contiguous rows", what,
                          (long long)cols);
    *rows = t->shape[0];
    *ld = t->shape[0] > 1 ? t->stride[0] : cols;
    return SY_OK;
}

/* One pass over tokens [t0, t0 + n). */
static int run_pass(moe_cuda *m, const moe_cuda_layer *L, const float *x, int64_t ldx, const float *logits,
                    int64_t ldl, float *out, int64_t ldo, int64_t t0, int64_t n, sy_err *err)
{
    const int64_t E = m->p.n_experts, K = m->p.top_k, H = m->p.hidden, F = m->p.inter, A = n * K;
    const int64_t e0 = m->e_first, EL = m->e_count;
    SYC_TRY(err,
            cudaMemcpy2D(m->logits, sizeof(float) * (size_t)E, logits + t0 * ldl, sizeof(float) * (size_t)ldl,
                         sizeof(float) * (size_t)E, (size_t)n, cudaMemcpyDeviceToHost),
            "moe forward: router logits download");
    for (int64_t i = 0; i < n; i++)
        sy__moe_route(&m->p, m->logits + i * E, L->bias, m->ids + i * K, m->wts + i * K);
    /* Group the assignments to this instance's experts by (local) expert, tokens ascending within one; the
     * others' (expert parallelism) get slot -1 and add nothing in the combine. */
    memset(m->counts, 0, sizeof(int32_t) * (size_t)(EL + 1));
    for (int64_t a = 0; a < A; a++)
        if (m->ids[a] >= e0 && m->ids[a] < e0 + EL)
            m->counts[m->ids[a] - e0]++;
    m->offsets[0] = 0;
    for (int64_t e = 0; e < EL; e++)
        m->offsets[e + 1] = m->offsets[e] + m->counts[e];
    int32_t *assign_tok = m->meta, *slot_of = m->meta + A;
    symk_tile *tiles = (symk_tile *)(m->meta + 2 * A);
    memset(m->counts, 0, sizeof(int32_t) * (size_t)(EL + 1));
    for (int64_t a = 0; a < A; a++) {
        const int32_t e = m->ids[a] - (int32_t)e0;
        if (e < 0 || e >= EL) {
            slot_of[a] = -1;
            continue;
        }
        const int32_t row = m->offsets[e] + m->counts[e]++;
        assign_tok[row] = (int32_t)(a / K);
        slot_of[a] = row;
    }
    const int64_t AL = m->offsets[EL]; /* rows this instance computes */
    const int variant = pass_variant(m, n), vr = symt_variants[variant].rows;
    int64_t nt = 0;
    for (int64_t e = 0; e < EL; e++)
        for (int32_t r = 0; r < m->counts[e]; r += vr) {
            const int32_t left = m->counts[e] - r;
            tiles[nt++] = (symk_tile){(int32_t)e, m->offsets[e] + r, left < vr ? left : vr};
        }
    SYC_TRY(err, cudaMemcpy(m->d_meta, m->meta, sizeof(int32_t) * (size_t)(2 * A + 3 * nt), cudaMemcpyHostToDevice),
            "moe forward: assignment upload");
    SYC_TRY(err, cudaMemcpy(m->d_wts, m->wts, sizeof(float) * (size_t)A, cudaMemcpyHostToDevice),
            "moe forward: weight upload");
    const int wdt = (int)m->p.weight_dtype;
    const symk_tile *d_tiles = (const symk_tile *)(m->d_meta + 2 * A);
    symk_gather(x + t0 * ldx, ldx, m->d_meta, AL, H, m->d_xe);
    symk_grouped_gemm(variant, m->d_xe, H, L->gate, wdt, F, d_tiles, nt, m->d_act);
    symk_grouped_gemm(variant, m->d_xe, H, L->up, wdt, F, d_tiles, nt, m->d_up);
    symk_silu_mul(m->d_act, m->d_up, AL * F);
    symk_grouped_gemm(variant, m->d_act, F, L->down, wdt, H, d_tiles, nt, m->d_ye);
    symk_combine(m->d_ye, H, m->d_meta + A, m->d_wts, n, (int)K, out + t0 * ldo, ldo);
    return syc_launched(err, "moe forward");
}

static int forward(void *inst, int32_t layer, const sy_tensor *x, const sy_tensor *router_logits, sy_tensor *out,
                   sy_err *err)
{
    moe_cuda *m = inst;
    if (!m->prepared)
        return sy_err_set(err, SY_ERR_INVALID, "moe cuda: forward before prepare");
    if (layer < 0 || layer >= m->p.n_layers || !m->layers[layer].gate)
        return sy_err_set(err, SY_ERR_INVALID, "moe forward: layer %d has no experts (prepare_layer first)", layer);
    int64_t n, nl, no, ldx, ldl, ldo;
    int rc;
    if ((rc = f32_2d(x, "x", m->p.hidden, &n, &ldx, err)) ||
        (rc = f32_2d(router_logits, "router_logits", m->p.n_experts, &nl, &ldl, err)) ||
        (rc = f32_2d(out, "out", m->p.hidden, &no, &ldo, err)))
        return rc;
    if (nl != n || no != n)
        return sy_err_set(err, SY_ERR_INVALID, "moe forward: x has %lld rows, router_logits %lld, out %lld; expected "
                          "the same", (long long)n, (long long)nl, (long long)no);
    for (int64_t t0 = 0; t0 < n; t0 += m->chunk_tokens) {
        const int64_t len = n - t0 < m->chunk_tokens ? n - t0 : m->chunk_tokens;
        if ((rc = run_pass(m, &m->layers[layer], x->data, ldx, router_logits->data, ldl, out->data, ldo, t0, len, err)))
            return rc;
    }
    return SY_OK;
}

/* Expert parallelism: routing stays global, only the range's experts are uploaded and computed. */
static int set_expert_range(void *inst, int32_t first, int32_t count, sy_err *err)
{
    moe_cuda *m = inst;
    int32_t loaded = -1;
    for (int32_t l = 0; m->prepared && l < m->p.n_layers && loaded < 0; l++)
        loaded = m->layers[l].gate ? l : -1;
    const int rc = symoe_check_range(SY_MOE_CUDA_NAME, m->prepared, &m->p, first, count, loaded, err);
    if (rc)
        return rc;
    m->e_first = first;
    m->e_count = count;
    return SY_OK;
}

static const sy_moe_ops ops = {
    .struct_size = sizeof(sy_moe_ops),
    .supports = supports,
    .prepare = prepare,
    .prepare_layer = prepare_layer,
    .forward = forward,
    .set_expert_range = set_expert_range,
};

/*
 * get_proc("tuning_table"): the path this GPU's table for the prepared
 * shape has (where `switchyard tune-moe` writes it) and, in *source, where
 * the instance took its tiles from. Same signature as moe/cpu's.
 */
static int tuning_table(void *inst, char *path, size_t cap, const char **source)
{
    const moe_cuda *m = inst;
    char arch[64], sku[256], fname[128];
    sy_err err = {{0}};
    if (!m->prepared || tune_device(arch, sizeof arch, sku, sizeof sku, &err))
        return -1;
    sytune_file_name(fname, sizeof fname, m->p.n_experts, m->p.inter, m->p.hidden, m->p.weight_dtype);
    if (snprintf(path, cap, "%s/%s/%s/%s", m->tuning_dir, arch, sku, fname) >= (int)cap)
        return -1;
    if (source)
        *source = m->tune.source;
    return 0;
}

/*
 * get_proc("tile_candidates"): the values of the `tile` key tune-moe times,
 * default first; returns how many it wrote into names (at most cap).
 */
static int tile_candidates(void *inst, const char **names, int cap)
{
    (void)inst;
    int n = 0;
    for (int v = 0; v < SYMK_N_VARIANTS && n < cap; v++)
        names[n++] = symt_variants[v].name;
    return n;
}

static void *get_proc(const char *name)
{
    if (strcmp(name, "tuning_table") == 0)
        return (void *)tuning_table;
    return strcmp(name, "tile_candidates") == 0 ? (void *)tile_candidates : NULL;
}

static const sy_plugin_desc desc = {
    .struct_size = sizeof(sy_plugin_desc),
    .abi_major = SY_ABI_MAJOR,
    .abi_minor = SY_ABI_MINOR,
    .kind = SY_KIND_MOE,
    .name = SY_MOE_CUDA_NAME,
    .version = PACKAGE_VERSION,
    .device = "cuda",
    .description = "mixture of experts on NVIDIA GPUs (portable): the CPU plugin's routing, grouped expert GEMMs on "
                   "F32/F16/BF16 weights with F32 accumulation, tiles from tuning tables, expert parallelism",
    .keys = keys,
    .probe = probe,
    .create = create,
    .destroy = destroy,
    .ops = &ops,
    .get_proc = get_proc,
};

SY_EXPORT const sy_plugin_desc *SY_PLUGIN_ENTRY(void);
SY_EXPORT const sy_plugin_desc *SY_PLUGIN_ENTRY(void)
{
    return &desc;
}
