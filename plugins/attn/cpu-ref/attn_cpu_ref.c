/*
 * attn/cpu-ref: the reference attention. Deliberately plain: one thread,
 * the whole score row of each query, softmax in double with two passes
 * (max, then exp and sum), output accumulated in double. Its only job is
 * to be obviously right, so the swap test can hold attn/cpu against it.
 *
 * Cache layout (private to this plugin): per layer, per block, per slot,
 * per KV head, head_dim (K) or v_head_dim (V) elements of kv_dtype.
 */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "switchyard/plugin.h"
#include "sykattn.h"
#include "sykconv.h"
#include "sykern.h"

#define NAME "cpu-ref"

static const sy_key_decl keys[] = {
    {"kv_dtype", SY_KEY_ENUM, "f32",
     "KV cache element type when the engine has no preference (the problem's F16/BF16 wins)", 1, 0,
     SYK_KV_DTYPE_CHOICES},
    {NULL, 0, NULL, NULL, 0, 0, NULL},
};

typedef struct attn_ref {
    const sy_host *host;
    char kv_key[8];
    int prepared;
    sy_attn_problem p;
    sy_dtype kvt;
    size_t es;         /* bytes per cache element */
    size_t k_slot, v_slot; /* elements per (block slot): n_kv_heads * head_dim / v_head_dim */
    char *kc, *vc;     /* [n_layers][n_blocks][block_size][k_slot or v_slot] */
    double *score;     /* one query's scores over a whole context */
    double *acc;       /* v_head_dim */
    int64_t score_cap;
} attn_ref;

static int probe(const sy_host *host, sy_err *why)
{
    (void)host;
    (void)why;
    return 1; /* runs everywhere; any real attention plugin should outrank it */
}

static int create(const sy_host *host, const sy_kv *cfg, size_t n_cfg, void **inst, sy_err *err)
{
    const char *kv = sy_kv_get(cfg, n_cfg, "kv_dtype");
    sy_dtype dt;
    int rc = syk_attn_kv_dtype(kv, SY_DTYPE_F32, &dt, err);
    if (rc)
        return rc;
    attn_ref *a = calloc(1, sizeof *a);
    if (!a)
        return sy_err_set(err, SY_ERR_NOMEM, NAME ": cannot allocate the instance");
    a->host = host;
    snprintf(a->kv_key, sizeof a->kv_key, "%s", kv ? kv : "f32");
    *inst = a;
    return SY_OK;
}

static void release(attn_ref *a)
{
    syk_free(a->host, a->kc);
    syk_free(a->host, a->vc);
    syk_free(a->host, a->score);
    syk_free(a->host, a->acc);
    a->kc = a->vc = NULL;
    a->score = a->acc = NULL;
    a->prepared = 0;
}

static void destroy(void *inst)
{
    attn_ref *a = inst;
    if (!a)
        return;
    release(a);
    free(a);
}

static int supports(void *inst, const sy_attn_problem *p, sy_err *why)
{
    attn_ref *a = inst;
    sy_dtype dt;
    if (syk_attn_check_problem(p, why) || syk_attn_kv_dtype(a->kv_key, p->kv_dtype, &dt, why))
        return 0;
    return 1;
}

static int prepare(void *inst, const sy_attn_problem *p, sy_err *err)
{
    attn_ref *a = inst;
    int rc;
    sy_dtype dt;
    if ((rc = syk_attn_check_problem(p, err)) || (rc = syk_attn_kv_dtype(a->kv_key, p->kv_dtype, &dt, err)))
        return rc;
    release(a);
    a->p = *p;
    a->kvt = dt;
    a->es = syk_wdtype_size(dt);
    a->k_slot = (size_t)p->n_kv_heads * (size_t)p->head_dim;
    a->v_slot = (size_t)p->n_kv_heads * (size_t)p->v_head_dim;
    const size_t slots = (size_t)p->n_layers * (size_t)p->n_blocks * (size_t)p->block_size;
    a->score_cap = (int64_t)p->n_blocks * p->block_size;
    a->kc = syk_alloc(a->host, slots * a->k_slot * a->es, 64);
    a->vc = syk_alloc(a->host, slots * a->v_slot * a->es, 64);
    a->score = syk_alloc(a->host, sizeof(double) * (size_t)a->score_cap, 64);
    a->acc = syk_alloc(a->host, sizeof(double) * (size_t)p->v_head_dim, 64);
    if (!a->kc || !a->vc || !a->score || !a->acc) {
        release(a);
        return sy_err_set(err, SY_ERR_NOMEM, NAME ": cannot allocate a KV cache of %zu slots", slots);
    }
    /* Zeroed so a read of a never-written slot (a caller bug) is at least deterministic. */
    memset(a->kc, 0, slots * a->k_slot * a->es);
    memset(a->vc, 0, slots * a->v_slot * a->es);
    a->prepared = 1;
    return SY_OK;
}

/* Slot of (layer, physical block, offset in block). */
static size_t slot_index(const attn_ref *a, int32_t layer, int32_t block, int64_t off)
{
    return ((size_t)layer * (size_t)a->p.n_blocks + (size_t)block) * (size_t)a->p.block_size + (size_t)off;
}

static double load(const attn_ref *a, const char *base, size_t elem)
{
    if (a->kvt == SY_DTYPE_F32)
        return ((const float *)(const void *)base)[elem];
    const uint16_t h = ((const uint16_t *)(const void *)base)[elem];
    return a->kvt == SY_DTYPE_BF16 ? syk_bf16_to_f32(h) : syk_f16_to_f32(h);
}

static void store(const attn_ref *a, char *base, size_t elem, float v)
{
    if (a->kvt == SY_DTYPE_F32)
        ((float *)(void *)base)[elem] = v;
    else if (a->kvt == SY_DTYPE_BF16)
        ((uint16_t *)(void *)base)[elem] = syk_f32_to_bf16(v);
    else
        ((uint16_t *)(void *)base)[elem] = syk_f32_to_f16(v);
}

static int forward(void *inst, int32_t layer, const sy_attn_batch *b, const sy_tensor *q, const sy_tensor *k,
                   const sy_tensor *v, sy_tensor *out, sy_err *err)
{
    attn_ref *a = inst;
    if (!a->prepared)
        return sy_err_set(err, SY_ERR_INVALID, NAME ": forward before prepare");
    syk_attn_io io;
    int rc = syk_attn_check_forward(&a->p, layer, b, q, k, v, out, &io, err);
    if (rc)
        return rc;
    const sy_attn_problem *p = &a->p;
    const int64_t bs = p->block_size, D = p->head_dim, DV = p->v_head_dim;
    const int group = p->n_heads / p->n_kv_heads;
    for (int32_t s = 0; s < b->n_seqs; s++) {
        const int64_t end = (int64_t)b->ctx_len[s] + (b->tok_start[s + 1] - b->tok_start[s]);
        if (end > a->score_cap)
            return sy_err_set(err, SY_ERR_INVALID, NAME ": sequence %d spans %lld positions, more than the %lld the "
                              "whole cache holds", s, (long long)end, (long long)a->score_cap);
    }

    /* 1. Store every new k/v row at its position. */
    for (int32_t s = 0; s < b->n_seqs; s++) {
        const int32_t *bt = b->block_table + (size_t)s * (size_t)b->max_blocks;
        for (int32_t t = b->tok_start[s]; t < b->tok_start[s + 1]; t++) {
            const int64_t pos = (int64_t)b->ctx_len[s] + (t - b->tok_start[s]);
            const size_t slot = slot_index(a, layer, bt[pos / bs], pos % bs);
            for (size_t e = 0; e < a->k_slot; e++)
                store(a, a->kc, slot * a->k_slot + e, io.k[t * io.ldk + (int64_t)e]);
            for (size_t e = 0; e < a->v_slot; e++)
                store(a, a->vc, slot * a->v_slot + e, io.v[t * io.ldv + (int64_t)e]);
        }
    }

    /* 2. Each query row against its sequence's positions lo..pos (this layer's window). */
    const int64_t W = syk_attn_window(p, layer);
    const float *sinks = syk_attn_sinks(p, layer);
    for (int32_t s = 0; s < b->n_seqs; s++) {
        const int32_t *bt = b->block_table + (size_t)s * (size_t)b->max_blocks;
        for (int32_t t = b->tok_start[s]; t < b->tok_start[s + 1]; t++) {
            const int64_t pos = (int64_t)b->ctx_len[s] + (t - b->tok_start[s]);
            const int64_t lo = W > 0 && pos - W + 1 > 0 ? pos - W + 1 : 0;
            for (int32_t h = 0; h < p->n_heads; h++) {
                const int32_t kvh = h / group;
                const float *qh = io.q + t * io.ldq + (int64_t)h * D;
                double mx = -INFINITY;
                for (int64_t j = lo; j <= pos; j++) {
                    const size_t slot = slot_index(a, layer, bt[j / bs], j % bs);
                    const size_t base = slot * a->k_slot + (size_t)kvh * (size_t)D;
                    double dot = 0.0;
                    for (int64_t d = 0; d < D; d++)
                        dot += (double)qh[d] * load(a, a->kc, base + (size_t)d);
                    a->score[j - lo] = dot * (double)p->scale;
                    if (a->score[j - lo] > mx)
                        mx = a->score[j - lo];
                }
                if (sinks && sinks[h] > mx) /* the sink joins the max: exp never overflows */
                    mx = sinks[h];
                double sum = sinks ? exp((double)sinks[h] - mx) : 0.0;
                for (int64_t j = lo; j <= pos; j++) {
                    a->score[j - lo] = exp(a->score[j - lo] - mx);
                    sum += a->score[j - lo];
                }
                for (int64_t d = 0; d < DV; d++)
                    a->acc[d] = 0.0;
                for (int64_t j = lo; j <= pos; j++) {
                    const size_t slot = slot_index(a, layer, bt[j / bs], j % bs);
                    const size_t base = slot * a->v_slot + (size_t)kvh * (size_t)DV;
                    for (int64_t d = 0; d < DV; d++)
                        a->acc[d] += a->score[j - lo] * load(a, a->vc, base + (size_t)d);
                }
                float *oh = io.out + t * io.ldo + (int64_t)h * DV;
                for (int64_t d = 0; d < DV; d++)
                    oh[d] = (float)(a->acc[d] / sum);
            }
        }
    }
    return SY_OK;
}

static int copy_blocks(void *inst, const int32_t *src, const int32_t *dst, int32_t n, sy_err *err)
{
    attn_ref *a = inst;
    if (!a->prepared)
        return sy_err_set(err, SY_ERR_INVALID, NAME ": copy_blocks before prepare");
    int rc = syk_attn_check_copy(&a->p, src, dst, n, err);
    if (rc)
        return rc;
    const size_t kb = (size_t)a->p.block_size * a->k_slot * a->es, vb = (size_t)a->p.block_size * a->v_slot * a->es;
    for (int32_t i = 0; i < n; i++) {
        if (src[i] == dst[i])
            continue;
        for (int32_t l = 0; l < a->p.n_layers; l++) {
            memcpy(a->kc + slot_index(a, l, dst[i], 0) * a->k_slot * a->es,
                   a->kc + slot_index(a, l, src[i], 0) * a->k_slot * a->es, kb);
            memcpy(a->vc + slot_index(a, l, dst[i], 0) * a->v_slot * a->es,
                   a->vc + slot_index(a, l, src[i], 0) * a->v_slot * a->es, vb);
        }
    }
    return SY_OK;
}

static const sy_attn_ops ops = {
    .struct_size = sizeof(sy_attn_ops),
    .supports = supports,
    .prepare = prepare,
    .forward = forward,
    .copy_blocks = copy_blocks,
};

static const sy_plugin_desc desc = {
    .struct_size = sizeof(sy_plugin_desc),
    .abi_major = SY_ABI_MAJOR,
    .abi_minor = SY_ABI_MINOR,
    .kind = SY_KIND_ATTN,
    .name = NAME,
    .version = PACKAGE_VERSION,
    .device = "cpu",
    .description = "reference paged attention: single-threaded, full score rows, softmax in double",
    .keys = keys,
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
