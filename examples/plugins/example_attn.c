/*
 * example-attn: a small, clear paged attention for the CPU.
 *
 * The KV cache is n_layers x n_blocks blocks of block_size slots; each slot
 * holds the K (and V) rows of all KV heads of one token. A step first writes
 * each new token's K/V into its sequence's blocks (block_table), then each
 * query row attends over its sequence's positions 0..pos with a one-pass
 * (online) softmax, spread over the host's workers by (token, head); ABI
 * 1.1's per-layer windows and attention sinks are honoured when the host's
 * problem struct carries them.
 *
 * Build: cc -shared -fPIC $(pkg-config --cflags switchyard-plugin) example_attn.c -o example-attn.so -lm
 * Use:   [attention]
 *        plugin = /path/to/example-attn.so
 */
#include <switchyard/plugin.h>

#include <math.h>
#include <stddef.h>

#define MAX_DIM 256 /* head_dim and v_head_dim; the accumulator lives on the stack */

typedef struct attn {
    const sy_host *host;
    sy_attn_problem p;
    float *kc, *vc; /* [layer][block][slot][kv_head][dim] */
} attn;

static int probe(const sy_host *host, sy_err *why)
{
    (void)host;
    (void)why;
    return 5; /* runs anywhere; below the in-tree cpu plugin, so `auto` keeps that one */
}

static int create(const sy_host *host, const sy_kv *cfg, size_t n_cfg, void **out, sy_err *err)
{
    (void)cfg;
    (void)n_cfg;
    attn *a = host->alloc(host->ctx, sizeof *a, sizeof(void *));
    if (!a)
        return sy_err_set(err, SY_ERR_NOMEM, "example-attn: out of memory");
    memset(a, 0, sizeof *a);
    a->host = host;
    *out = a;
    return SY_OK;
}

static void release(attn *a)
{
    a->host->free(a->host->ctx, a->kc);
    a->host->free(a->host->ctx, a->vc);
    a->kc = a->vc = NULL;
}

static void destroy(void *inst)
{
    attn *a = inst;
    release(a);
    a->host->free(a->host->ctx, a);
}

static int supports(void *inst, const sy_attn_problem *p, sy_err *why)
{
    (void)inst;
    if (p->kv_dtype != SY_DTYPE_F32)
        return sy_err_set(why, 0, "example-attn keeps its KV cache in F32, the problem asks for %s",
                          sy_dtype_name(p->kv_dtype));
    if (p->head_dim > MAX_DIM || p->v_head_dim > MAX_DIM)
        return sy_err_set(why, 0, "example-attn handles head dims up to %d, found %d/%d", MAX_DIM, p->head_dim,
                          p->v_head_dim);
    if (p->n_kv_heads <= 0 || p->n_heads % p->n_kv_heads)
        return sy_err_set(why, 0, "n_heads %d is not a multiple of n_kv_heads %d", p->n_heads, p->n_kv_heads);
    return 1;
}

static int prepare(void *inst, const sy_attn_problem *p, sy_err *err)
{
    attn *a = inst;
    if (!supports(inst, p, err))
        return SY_ERR_UNSUPPORTED;
    release(a);
    a->p = *p;
    size_t slots = (size_t)p->n_layers * (size_t)p->n_blocks * (size_t)p->block_size * (size_t)p->n_kv_heads;
    a->kc = a->host->alloc(a->host->ctx, slots * (size_t)p->head_dim * sizeof(float), 64);
    a->vc = a->host->alloc(a->host->ctx, slots * (size_t)p->v_head_dim * sizeof(float), 64);
    if (!a->kc || !a->vc) {
        release(a);
        return sy_err_set(err, SY_ERR_NOMEM, "example-attn: no memory for a KV cache of %zu slots", slots);
    }
    return SY_OK;
}

/* The K (or V) row of KV head 0 of one token's slot. */
static float *slot(const attn *a, float *cache, int dim, int32_t layer, int32_t block, int32_t s)
{
    const sy_attn_problem *p = &a->p;
    return cache + (((size_t)layer * p->n_blocks + (size_t)block) * p->block_size + (size_t)s) * p->n_kv_heads * dim;
}

typedef struct job {
    const attn *a;
    int32_t layer;
    const sy_attn_batch *b;
    const float *q;
    float *out;
} job;

/* Work items are (token, head) pairs; items [begin, end) of them. */
static void attend(void *arg, int64_t begin, int64_t end, int worker)
{
    (void)worker;
    const job *j = arg;
    const attn *a = j->a;
    const sy_attn_problem *p = &a->p;
    const int D = p->head_dim, DV = p->v_head_dim, BS = p->block_size, G = p->n_heads / p->n_kv_heads;
    /* ABI 1.1's window per layer, read only when the host's struct covers it; else the one window. */
    const int per_layer = p->struct_size >= offsetof(sy_attn_problem, layer_window) + sizeof p->layer_window &&
                          p->layer_window;
    const int32_t W = per_layer ? p->layer_window[j->layer] : p->sliding_window;
    /* ABI 1.1's attention sinks (gpt-oss): one more logit per head in the softmax's sum, with no value. */
    const float *sinks = p->struct_size >= offsetof(sy_attn_problem, sinks) + sizeof p->sinks && p->sinks
                             ? p->sinks + (size_t)j->layer * (size_t)p->n_heads
                             : NULL;
    for (int64_t it = begin; it < end; it++) {
        const int32_t t = (int32_t)(it / p->n_heads), h = (int32_t)(it % p->n_heads);
        int32_t s = 0;
        while (j->b->tok_start[s + 1] <= t)
            s++;
        const int32_t *bt = j->b->block_table + (size_t)s * j->b->max_blocks;
        const int32_t pos = j->b->ctx_len[s] + (t - j->b->tok_start[s]);
        const int32_t lo = W > 0 && pos - W + 1 > 0 ? pos - W + 1 : 0;
        const float *q = j->q + ((size_t)t * p->n_heads + h) * D;
        float acc[MAX_DIM] = {0};
        float mx = -INFINITY, sum = 0;
        for (int32_t i = lo; i <= pos; i++) {
            const float *k = slot(a, a->kc, D, j->layer, bt[i / BS], i % BS) + (size_t)(h / G) * D;
            const float *v = slot(a, a->vc, DV, j->layer, bt[i / BS], i % BS) + (size_t)(h / G) * DV;
            float dot = 0;
            for (int x = 0; x < D; x++)
                dot += q[x] * k[x];
            dot *= p->scale;
            /* Online softmax: rescale what was summed when the max grows. */
            float m2 = dot > mx ? dot : mx, old = expf(mx - m2), w = expf(dot - m2);
            for (int x = 0; x < DV; x++)
                acc[x] = acc[x] * old + w * v[x];
            sum = sum * old + w;
            mx = m2;
        }
        if (sinks) { /* the same rescaling as a position's, so that a large sink cannot overflow */
            float m2 = sinks[h] > mx ? sinks[h] : mx, old = expf(mx - m2);
            for (int x = 0; x < DV; x++)
                acc[x] *= old;
            sum = sum * old + expf(sinks[h] - m2);
        }
        float *o = j->out + ((size_t)t * p->n_heads + h) * DV;
        for (int x = 0; x < DV; x++)
            o[x] = acc[x] / sum;
    }
}

static int forward(void *inst, int32_t layer, const sy_attn_batch *b, const sy_tensor *q, const sy_tensor *k,
                   const sy_tensor *v, sy_tensor *out, sy_err *err)
{
    attn *a = inst;
    const sy_attn_problem *p = &a->p;
    if (!a->kc)
        return sy_err_set(err, SY_ERR_INVALID, "example-attn: forward before prepare");
    if (layer < 0 || layer >= p->n_layers)
        return sy_err_set(err, SY_ERR_INVALID, "example-attn: layer %d, expected 0..%d", (int)layer, p->n_layers - 1);
    if (q->dtype != SY_DTYPE_F32 || k->dtype != SY_DTYPE_F32 || v->dtype != SY_DTYPE_F32 || out->dtype != SY_DTYPE_F32)
        return sy_err_set(err, SY_ERR_INVALID, "example-attn: q, k, v and out must be F32");
    const size_t kd = (size_t)p->n_kv_heads * p->head_dim, vd = (size_t)p->n_kv_heads * p->v_head_dim;
    for (int32_t s = 0; s < b->n_seqs; s++) {
        const int32_t *bt = b->block_table + (size_t)s * b->max_blocks;
        for (int32_t t = b->tok_start[s]; t < b->tok_start[s + 1]; t++) {
            int32_t pos = b->ctx_len[s] + (t - b->tok_start[s]), blk = bt[pos / p->block_size];
            if (blk < 0 || blk >= p->n_blocks)
                return sy_err_set(err, SY_ERR_INVALID, "example-attn: sequence %d position %d is in block %d, expected "
                                  "0..%d", (int)s, (int)pos, (int)blk, p->n_blocks - 1);
            memcpy(slot(a, a->kc, p->head_dim, layer, blk, pos % p->block_size), (const float *)k->data + t * kd,
                   kd * sizeof(float));
            memcpy(slot(a, a->vc, p->v_head_dim, layer, blk, pos % p->block_size), (const float *)v->data + t * vd,
                   vd * sizeof(float));
        }
    }
    job j = {a, layer, b, q->data, out->data};
    a->host->parallel_for(a->host->ctx, (int64_t)b->n_tokens * p->n_heads, 4, attend, &j);
    return SY_OK;
}

static int copy_blocks(void *inst, const int32_t *src, const int32_t *dst, int32_t n, sy_err *err)
{
    attn *a = inst;
    const sy_attn_problem *p = &a->p;
    const size_t kb = (size_t)p->block_size * p->n_kv_heads * p->head_dim;
    const size_t vb = (size_t)p->block_size * p->n_kv_heads * p->v_head_dim;
    for (int32_t i = 0; i < n; i++) {
        if (src[i] < 0 || src[i] >= p->n_blocks || dst[i] < 0 || dst[i] >= p->n_blocks)
            return sy_err_set(err, SY_ERR_INVALID, "example-attn: copy_blocks %d -> %d, expected blocks 0..%d",
                              (int)src[i], (int)dst[i], p->n_blocks - 1);
        for (int32_t l = 0; l < p->n_layers; l++) {
            memcpy(slot(a, a->kc, p->head_dim, l, dst[i], 0), slot(a, a->kc, p->head_dim, l, src[i], 0),
                   kb * sizeof(float));
            memcpy(slot(a, a->vc, p->v_head_dim, l, dst[i], 0), slot(a, a->vc, p->v_head_dim, l, src[i], 0),
                   vb * sizeof(float));
        }
    }
    return SY_OK;
}

static const sy_attn_ops ops = {sizeof(sy_attn_ops), supports, prepare, forward, copy_blocks, NULL};

static const sy_plugin_desc desc = {
    .struct_size = sizeof(sy_plugin_desc),
    .abi_major = SY_ABI_MAJOR,
    .abi_minor = SY_ABI_MINOR,
    .kind = SY_KIND_ATTN,
    .name = "example-attn",
    .version = "1.0.0",
    .device = "cpu",
    .description = "example: paged attention with an online softmax, F32 KV cache",
    .keys = NULL,
    .probe = probe,
    .create = create,
    .destroy = destroy,
    .ops = &ops,
    .get_proc = NULL,
};

SY_EXPORT const sy_plugin_desc *SY_PLUGIN_ENTRY(void);
SY_EXPORT const sy_plugin_desc *SY_PLUGIN_ENTRY(void)
{
    return &desc;
}
