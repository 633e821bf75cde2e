/*
 * attn/cpu forward: first every new k/v row goes into its cache slot (one
 * parallel pass), then attention runs per work item = (sequence, KV head,
 * chunk of query tokens). An item packs its query rows (the chunk's tokens
 * x the KV head's group of query heads) and walks the sequence's KV blocks
 * once: scores = Q . K_block^T, online softmax per row, acc += P . V_block.
 * So each K/V block is read once per item for all the heads that share it
 * (GQA), and prefill and decode rows mix freely in one call.
 *
 * Every query row's arithmetic depends only on its own position and the
 * cache, never on which other rows share its item: a sequence decodes to
 * the same bits alone or in a batch.
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include "attn_cpu.h"

typedef struct fwd_job {
    const attn_cpu *a;
    int32_t layer;
    const sy_attn_batch *b;
    syk_attn_io io;
    int64_t group;     /* query heads per KV head */
    int64_t tokens;    /* query tokens per item */
} fwd_job;

static inline size_t tile_index(const attn_cpu *a, int32_t layer, int32_t block, int64_t kvh)
{
    return ((size_t)layer * (size_t)a->p.n_kv_heads + (size_t)kvh) * (size_t)a->p.n_blocks + (size_t)block;
}

/* ------------------------------------------------------------ cache write */

static void write_rows(void *arg, int64_t begin, int64_t end, int worker)
{
    (void)worker;
    const fwd_job *j = arg;
    const attn_cpu *a = j->a;
    const sy_attn_batch *b = j->b;
    const int64_t bs = a->p.block_size, D = a->p.head_dim, DV = a->p.v_head_dim;
    int32_t s = 0;
    for (int64_t t = begin; t < end; t++) {
        while (b->tok_start[s + 1] <= t) /* sequences are few and ranges are contiguous: a forward scan */
            s++;
        const int64_t pos = (int64_t)b->ctx_len[s] + (t - b->tok_start[s]);
        const int32_t blk = b->block_table[(size_t)s * (size_t)b->max_blocks + (size_t)(pos / bs)];
        const int64_t slot = pos % bs;
        for (int64_t h = 0; h < a->p.n_kv_heads; h++) {
            const size_t ti = tile_index(a, j->layer, blk, h);
            syk_row_from_f32(a->kc + (ti * a->k_tile + (size_t)(slot * D)) * a->es, a->kvt, j->io.k + t * j->io.ldk + h * D,
                             D);
            syk_row_from_f32(a->vc + (ti * a->v_tile + (size_t)(slot * DV)) * a->es, a->kvt,
                             j->io.v + t * j->io.ldv + h * DV, DV);
        }
    }
}

/* --------------------------------------------------------------- attention */

typedef struct item {
    int32_t s;   /* sequence */
    int64_t kvh; /* KV head */
    int64_t t0;  /* first query token (row of q) */
    int64_t nt;  /* tokens */
} item;

/* Query chunks of sequence s: its new tokens, j->tokens to an item. */
static int64_t chunks_of(const fwd_job *j, int32_t s)
{
    const int64_t len = j->b->tok_start[s + 1] - j->b->tok_start[s];
    return (len + j->tokens - 1) / j->tokens;
}

static int64_t items_of(const fwd_job *j, int32_t s)
{
    return chunks_of(j, s) * j->a->p.n_kv_heads;
}

/*
 * Touches every cache line of the next block's K and V tiles while this
 * block computes: independent loads whose misses the out-of-order core
 * overlaps with the math. A tile is a few KB in its own page (blocks are
 * scattered by the block table) and hardware prefetchers stop at page
 * boundaries. Real loads, because prefetch hints measured no gain on the
 * development machine, where touching took a decode of 8 sequences x 4096
 * tokens (32/8 heads, d 128, BF16, shuffled block table) from 10.7 to 7.9 ms.
 */
static void touch_tiles(const attn_cpu *a, size_t ti)
{
    const char *k = a->kc + ti * a->k_tile * a->es, *v = a->vc + ti * a->v_tile * a->es;
    const size_t kb = a->k_tile * a->es, vb = a->v_tile * a->es;
    unsigned acc = 0;
    for (size_t off = 0; off < kb; off += 64)
        acc += *(const volatile unsigned char *)(k + off);
    for (size_t off = 0; off < vb; off += 64)
        acc += *(const volatile unsigned char *)(v + off);
    __asm__ volatile("" ::"r"(acc));
}

static void attend(const fwd_job *j, const item *it, float *scratch)
{
    const attn_cpu *a = j->a;
    const syk_kernels *kern = a->kern;
    const sy_attn_batch *b = j->b;
    const int64_t bs = a->p.block_size, D = a->p.head_dim, DV = a->p.v_head_dim, G = j->group;
    const int64_t rows = it->nt * G;
    const int32_t *bt = b->block_table + (size_t)it->s * (size_t)b->max_blocks;
    const int64_t first_pos = (int64_t)b->ctx_len[it->s] + (it->t0 - b->tok_start[it->s]);
    const int64_t W = syk_attn_window(&a->p, j->layer);

    /* Scratch: Q [rows, D] | S [rows, bs] | O [rows, DV] | m [rows] | l [rows], each 64-byte aligned. */
#define ALIGN16(n) (((size_t)(n) + 15) & ~(size_t)15)
    float *Q = scratch;
    float *S = Q + ALIGN16(rows * D);
    float *O = S + ALIGN16(rows * bs);
    float *M = O + ALIGN16(rows * DV);
    float *L = M + ALIGN16(rows);
#undef ALIGN16

    /* Row r = token (r / G), query head kvh * G + r % G; the softmax scale is folded into q. */
    const float scale = a->p.scale;
    for (int64_t r = 0; r < rows; r++) {
        const float *src = j->io.q + (it->t0 + r / G) * j->io.ldq + (it->kvh * G + r % G) * D;
        for (int64_t d = 0; d < D; d++)
            Q[r * D + d] = src[d] * scale;
        M[r] = -INFINITY;
        L[r] = 0.0f;
    }
    memset(O, 0, sizeof(float) * (size_t)(rows * DV));

    const int64_t last_pos = first_pos + it->nt - 1;
    const int64_t lo_pos = W > 0 && first_pos - W + 1 > 0 ? first_pos - W + 1 : 0;
    for (int64_t blk = lo_pos / bs; blk <= last_pos / bs; blk++) {
        const int64_t j0 = blk * bs;
        const int64_t nv = last_pos + 1 - j0 < bs ? last_pos + 1 - j0 : bs; /* positions of the block in use */
        const size_t ti = tile_index(a, j->layer, bt[blk], it->kvh);
        const void *K = a->kc + ti * a->k_tile * a->es;
        const void *V = a->vc + ti * a->v_tile * a->es;
        if (blk < last_pos / bs)
            touch_tiles(a, tile_index(a, j->layer, bt[blk + 1], it->kvh));

        kern->gemm_nt[a->kvt](Q, D, K, D, S, bs, rows, nv, D, 0);

        for (int64_t r = 0; r < rows; r++) {
            const int64_t pos = first_pos + r / G;
            const int64_t lo = W > 0 && pos - W + 1 > 0 ? pos - W + 1 : 0;
            const int64_t jl = lo > j0 ? lo - j0 : 0;
            const int64_t jh = pos - j0 < nv - 1 ? pos - j0 : nv - 1; /* inclusive */
            kern->softmax_step(S + r * bs, nv, jl, jh, M + r, L + r, O + r * DV, DV);
        }

        kern->gemm_nn_acc[a->kvt](S, bs, V, DV, O, DV, rows, nv, DV);
    }

    /* gpt-oss's sinks: one more exp(sink - m) in each row's denominator, no value. Rescaled to the larger of
     * the row's max and the sink, so neither exponential overflows. */
    const float *sinks = syk_attn_sinks(&a->p, j->layer);
    for (int64_t r = 0; r < rows; r++) {
        float *dst = j->io.out + (it->t0 + r / G) * j->io.ldo + (it->kvh * G + r % G) * DV;
        float inv = 1.0f / L[r];
        if (sinks) {
            const float sk = sinks[it->kvh * G + r % G], m = M[r] > sk ? M[r] : sk;
            const float a_row = expf(M[r] - m);
            inv = a_row / (L[r] * a_row + expf(sk - m));
        }
        for (int64_t d = 0; d < DV; d++)
            dst[d] = O[r * DV + d] * inv;
    }
}

static void attend_items(void *arg, int64_t begin, int64_t end, int worker)
{
    const fwd_job *j = arg;
    const attn_cpu *a = j->a;
    float *scratch = a->scratch + (size_t)worker * a->scratch_floats;
    /* Find the sequence of item `begin` (a scan: ranges are few per step). */
    int32_t s = 0;
    int64_t base = 0;
    while (s < j->b->n_seqs && base + items_of(j, s) <= begin)
        base += items_of(j, s++);
    for (int64_t i = begin; i < end; i++) {
        while (i - base >= items_of(j, s))
            base += items_of(j, s++);
        const int64_t local = i - base;
        item it;
        it.s = s;
        /* A KV head's chunks are consecutive items, so a worker's next item mostly reads the K/V its last one
         * left in L2 (heads innermost had every item of a step sweep all heads' caches), and the last chunk,
         * which attends to the most positions, goes first: the costliest items are handed out earliest. */
        const int64_t len = j->b->tok_start[s + 1] - j->b->tok_start[s];
        const int64_t chunks = chunks_of(j, s);
        it.kvh = local / chunks;
        const int64_t chunk = chunks - 1 - local % chunks;
        it.t0 = j->b->tok_start[s] + chunk * j->tokens;
        it.nt = len - chunk * j->tokens < j->tokens ? len - chunk * j->tokens : j->tokens;
        attend(j, &it, scratch);
    }
}

int sy__attn_cpu_forward(void *inst, int32_t layer, const sy_attn_batch *b, const sy_tensor *q, const sy_tensor *k,
                         const sy_tensor *v, sy_tensor *out, sy_err *err)
{
    attn_cpu *a = inst;
    if (!a->prepared)
        return sy_err_set(err, SY_ERR_INVALID, "attn cpu: forward before prepare");
    fwd_job j;
    memset(&j, 0, sizeof j);
    int rc = syk_attn_check_forward(&a->p, layer, b, q, k, v, out, &j.io, err);
    if (rc)
        return rc;
    if (b->n_tokens == 0)
        return SY_OK;
    const syk_par par = syk_par_from_host(a->host);
    if (par.n_workers > a->n_scratch) {
        /* The host's pool grew after prepare (a device created later): one-off growth. */
        sy_logf(a->host, SY_LOG_INFO, SY_ATTN_CPU_NAME, "growing attention scratch from %d to %d workers",
                a->n_scratch, par.n_workers);
        if ((rc = sy__attn_cpu_scratch(a, par.n_workers, err)))
            return rc;
    }
    j.a = a;
    j.layer = layer;
    j.b = b;
    j.group = a->p.n_heads / a->p.n_kv_heads;
    j.tokens = a->rows_max / j.group;

    /* Cache writes first: a query may read rows written by earlier tokens of this step. */
    syk_par_for(&par, b->n_tokens, 16, write_rows, &j);

    int64_t n_items = 0;
    for (int32_t s = 0; s < b->n_seqs; s++)
        n_items += items_of(&j, s);
    syk_par_for(&par, n_items, 1, attend_items, &j);
    return SY_OK;
}
