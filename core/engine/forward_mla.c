/*
 * Multi-head latent attention (DeepSeek-V3, GLM-5) and GLM-5's DSA indexer.
 *
 * The cache holds, per layer and token, only the normalised KV latent and
 * the roped shared key: kv_lora_rank + qk_rope_head_dim floats (GLM-5's
 * indexer layers add index_head_dim floats of indexer key), in the engine's
 * paged KV blocks and addressed through the same block tables as the GQA
 * path. Per-head keys and values are never materialised: each head's query
 * is absorbed into the latent space (q_lat = W_UK^T q_nope, W_UK the head's
 * first qk_nope rows of kv_b_proj), attention runs as one shared KV head
 * over [latent | k_rope] with the latent itself as the value, and the
 * result goes back through the head's W_UV (the next v_head_dim rows).
 *
 * Why the core computes this instead of the attention plugin: DSA needs a
 * per-query list of the positions to attend to, which attention ABI 1.0
 * cannot carry; an appended sy_attn_batch field would be silently ignored by
 * a plugin built against the older header and attend densely. Here the
 * projections still go through the device plugin (linear, rmsnorm), and the
 * attention itself runs on host copies of the activations on the host's
 * worker pool. The cost: a device without host-visible memory pays a
 * download and an upload per layer; a plugin op for MLA with a selection
 * list is the way to move this onto accelerators.
 */
#include "config.h"

#include "engine/engine_internal.h"
#include "plugin/loader_config.h"
#include "util/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* transformers builds q_a_layernorm and kv_a_layernorm with the RMSNorm default, not rms_norm_eps. */
#define LATENT_NORM_EPS 1e-6f

struct sy_mla {
    int32_t R, P, nope, V, NH, QK; /* kv_lora_rank, qk_rope, qk_nope, v_head_dim, heads, nope + rope */
    int32_t IH, ID, topk;          /* indexer heads, head dim, positions kept; topk 0: dense attention */
    bool interleave;     /* the main attention's RoPE layout */
    bool idx_interleave; /* the DSA indexer's: GLM-5 interleaves, DeepSeek-V3.2 rotates halves */
    int32_t bs, n_blocks;
    float *lat;          /* [n_layers][n_blocks * bs][R + P] */
    float *ikey;         /* [n_idx_layers][n_blocks * bs][ID] */
    int32_t *ikey_slot;  /* [n_layers]: layer -> its indexer key cache, -1 if it reuses a choice */
    float *inv_freq;     /* [P / 2] */
    float *kvb;          /* [n_layers][NH * (nope + V)][R]: kv_b_proj in F32, read per head for W_UK and W_UV */
    float cs_scale;      /* multiplies cos and sin (yarn's attention factor) */
    float scale;         /* softmax scale */
    /* Device activations, [max_batch_tokens, width]. */
    sy_tensor qa, q, kva, iq, ik, iw, att;
    /* Host copies of this layer's activations. */
    float *hq, *hkva, *hiq, *hik, *hiw, *hatt;
    int32_t *seq_of;     /* [T]: sequence of each row of the step */
    int32_t *sel, *n_sel; /* [T][topk] positions each query attends to, and how many */
    int n_workers;
    size_t wf;           /* floats of scratch per worker */
    float *scratch;      /* [n_workers][wf] */
    int32_t *iscratch;   /* [n_workers][topk] */
};

/* ------------------------------------------------------------- helpers */

/* Element i of a host weight view in its own dtype. */
static inline float wat(const sy_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case SY_DTYPE_BF16: return sy_bf16_to_f32(((const uint16_t *)t->data)[i]);
    case SY_DTYPE_F16: return sy_f16_to_f32(((const uint16_t *)t->data)[i]);
    default: return ((const float *)t->data)[i];
    }
}

static void rmsnorm_host(float *x, int32_t n, const sy_tensor *w, float eps)
{
    double ss = 0.0;
    for (int32_t i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    const float inv = (float)(1.0 / sqrt(ss / n + (double)eps));
    for (int32_t i = 0; i < n; i++)
        x[i] = x[i] * inv * wat(w, i);
}

/* torch.nn.LayerNorm: biased variance, weight and bias. */
static void layernorm_host(float *x, int32_t n, const sy_tensor *w, const sy_tensor *b, float eps)
{
    double mean = 0.0, var = 0.0;
    for (int32_t i = 0; i < n; i++)
        mean += x[i];
    mean /= n;
    for (int32_t i = 0; i < n; i++)
        var += ((double)x[i] - mean) * ((double)x[i] - mean);
    const double inv = 1.0 / sqrt(var / n + (double)eps);
    for (int32_t i = 0; i < n; i++)
        x[i] = (float)(((double)x[i] - mean) * inv) * wat(w, i) + wat(b, i);
}

/*
 * RoPE of one P-wide slice at pos. Interleaved (DeepSeek's checkpoints,
 * GLM-5, and GLM-5's indexer) rotates pairs (2i, 2i+1); transformers also
 * de-interleaves the result, a permutation shared by queries and keys that
 * leaves every dot product as it is, so it is not reproduced here. Halves
 * (DeepSeek-V3.2's indexer) rotate (i, i + P/2).
 */
static void rope_slice(const struct sy_mla *m, float *x, int32_t pos, bool interleave)
{
    const int32_t half = m->P / 2;
    for (int32_t i = 0; i < half; i++) {
        const double ang = (double)pos * (double)m->inv_freq[i];
        const float c = (float)cos(ang) * m->cs_scale, s = (float)sin(ang) * m->cs_scale;
        const int32_t a = interleave ? 2 * i : i, b = interleave ? 2 * i + 1 : i + half;
        const float xa = x[a], xb = x[b];
        x[a] = xa * c - xb * s;
        x[b] = xb * c + xa * s;
    }
}

static inline int32_t pos_of(const sy_attn_batch *b, int32_t s, int64_t t)
{
    return b->ctx_len[s] + (int32_t)(t - b->tok_start[s]);
}

/* Row of a per-token cache (stride floats per token) for position pos of sequence s. */
static inline float *cache_row(const struct sy_mla *m, float *base, size_t stride, const sy_attn_batch *b, int32_t s,
                               int32_t pos)
{
    const int32_t blk = b->block_table[(size_t)s * (size_t)b->max_blocks + (size_t)(pos / m->bs)];
    return base + ((size_t)blk * (size_t)m->bs + (size_t)(pos % m->bs)) * stride;
}

static double dot(const float *a, const float *b, int32_t n)
{
    double acc = 0.0;
    for (int32_t i = 0; i < n; i++)
        acc += (double)a[i] * b[i];
    return acc;
}

/* ------------------------------------------------------------ rope set-up */

static double yarn_mscale(double factor, double mscale)
{
    return factor <= 1.0 ? 1.0 : 0.1 * mscale * log(factor) + 1.0;
}

/* transformers' _compute_default_rope_parameters / _compute_yarn_parameters over the rope slice. */
static void mla_rope_tables(const sy_model_config *c, struct sy_mla *m)
{
    const int32_t dim = c->qk_rope_dim, half = dim / 2;
    const double base = c->rope_theta;
    m->cs_scale = 1.0f;
    m->scale = (float)(1.0 / sqrt((double)c->qk_nope_dim + c->qk_rope_dim));
    for (int32_t i = 0; i < half; i++)
        m->inv_freq[i] = (float)(1.0 / pow(base, (2.0 * i) / dim));
    if (c->rope_scaling != SY_ROPE_SCALING_YARN)
        return;
    const double f = c->rope_factor, orig = c->rope_original_max_pos;
    const double two_pi = 2.0 * M_PI;
    double lo = floor(dim * log(orig / (c->rope_beta_fast * two_pi)) / (2.0 * log(base)));
    double hi = ceil(dim * log(orig / (c->rope_beta_slow * two_pi)) / (2.0 * log(base)));
    lo = lo < 0 ? 0 : lo;
    hi = hi > dim - 1 ? dim - 1 : hi;
    if (lo == hi)
        hi += 0.001;
    for (int32_t i = 0; i < half; i++) {
        const double extra = 1.0 / pow(base, (2.0 * i) / dim), inter = extra / f;
        double ramp = (i - lo) / (hi - lo);
        ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
        const double keep = 1.0 - ramp; /* share of the extrapolated (unscaled) frequency */
        m->inv_freq[i] = (float)(inter * (1.0 - keep) + extra * keep);
    }
    if (c->rope_mscale > 0 && c->rope_mscale_all_dim > 0)
        m->cs_scale = (float)(yarn_mscale(f, c->rope_mscale) / yarn_mscale(f, c->rope_mscale_all_dim));
    else
        m->cs_scale = (float)yarn_mscale(f, 1.0);
    if (c->rope_mscale_all_dim > 0) {
        const double ms = yarn_mscale(f, c->rope_mscale_all_dim);
        m->scale = (float)(m->scale * ms * ms);
    }
}

/* ------------------------------------------------------------ open / close */

static int alloc_dev(sy_engine *e, sy_tensor *t, int64_t rows, int64_t cols, sy_err *err)
{
    int64_t shape[2] = {rows, cols > 0 ? cols : 1};
    sy_tensor_init(t, NULL, SY_DTYPE_F32, 2, shape);
    return e->dev->alloc(e->device->inst, t, err);
}

/*
 * One layer's kv_b_proj [rows, R] in F32. Float dtypes are widened here;
 * quantised ones (DeepSeek-V3 ships FP8) go through the device's own
 * dequantisation as I . W^T, so any format the device reads works here.
 */
static int kvb_to_f32(sy_engine *e, int32_t layer, const sy_tensor *w, int64_t rows, int64_t R, float *out,
                      sy_err *err)
{
    if (w->dtype == SY_DTYPE_F32 || w->dtype == SY_DTYPE_F16 || w->dtype == SY_DTYPE_BF16) {
        for (int64_t i = 0; i < rows * R; i++)
            out[i] = wat(w, i);
        return SY_OK;
    }
    void *di = e->device->inst;
    char name[64];
    snprintf(name, sizeof name, "layer %d kv_b_proj", layer);
    sy_tensor pw, eye = {0}, res = {0};
    int rc = e->dev->prepare_weight(di, name, w, &pw, err);
    if (rc)
        return rc;
    float *host = calloc((size_t)(R * (R > rows ? R : rows)), sizeof(float));
    if (!host)
        rc = sy_err_set(err, SY_ERR_NOMEM, "cannot dequantise %s", name);
    for (int64_t r = 0; !rc && r < R; r++)
        host[r * R + r] = 1.0f;
    if (!rc && !(rc = alloc_dev(e, &eye, R, R, err)) && !(rc = alloc_dev(e, &res, R, rows, err)) &&
        !(rc = e->dev->upload(di, &eye, host, sizeof(float) * (size_t)(R * R), err)) &&
        !(rc = e->dev->linear(di, &eye, &pw, NULL, &res, err)) &&
        !(rc = e->dev->download(di, host, &res, sizeof(float) * (size_t)(R * rows), err)))
        for (int64_t r = 0; r < R; r++) /* res [R, rows] = W^T */
            for (int64_t i = 0; i < rows; i++)
                out[i * R + r] = host[r * rows + i];
    free(host);
    if (eye.data)
        e->dev->free(di, &eye);
    if (res.data)
        e->dev->free(di, &res);
    if (e->dev->release_weight)
        e->dev->release_weight(di, &pw);
    return rc;
}

/* What mla_rope_tables does not compute (the config reads every layout for every family): refuse it here. */
static int mla_rope_supported(const sy_engine *e, const sy_model_config *c, sy_err *err)
{
    const char *dir = e->model->dir;
    if (c->rope_scaling == SY_ROPE_SCALING_LINEAR || c->rope_scaling == SY_ROPE_SCALING_LLAMA3)
        return sy_err_set(err, SY_ERR_UNSUPPORTED,
                          "%s: %s '%s' is not supported for %s (MLA models run the default RoPE or yarn)", dir,
                          c->rope_type_field, c->rope_scaling == SY_ROPE_SCALING_LINEAR ? "linear" : "llama3",
                          c->arch_name);
    if (c->rope_scaling != SY_ROPE_SCALING_YARN)
        return SY_OK;
    if (!c->rope_truncate)
        return sy_err_set(err, SY_ERR_UNSUPPORTED,
                          "%s: %s 'yarn' with truncate false is not supported for %s (its MLA RoPE table always "
                          "floors and ceils the correction range)",
                          dir, c->rope_type_field, c->arch_name);
    if (c->rope_attention_factor > 0)
        return sy_err_set(err, SY_ERR_UNSUPPORTED,
                          "%s: %s 'yarn' with attention_factor %g is not supported for %s (its MLA RoPE table "
                          "derives the factor from factor, mscale and mscale_all_dim)",
                          dir, c->rope_type_field, (double)c->rope_attention_factor, c->arch_name);
    return SY_OK;
}

int sy__mla_open(sy_engine *e, const sy_kv *sk, size_t nsk, sy_err *err)
{
    const sy_model_config *c = e->mc;
    int rc0 = mla_rope_supported(e, c, err);
    if (rc0)
        return rc0;
    struct sy_mla *m = calloc(1, sizeof *m);
    if (!m)
        return sy_err_set(err, SY_ERR_NOMEM, "cannot allocate the MLA state");
    e->mla = m;
    m->R = c->kv_lora_rank;
    m->P = c->qk_rope_dim;
    m->nope = c->qk_nope_dim;
    m->V = c->v_head_dim;
    m->NH = c->n_heads / e->tp_size; /* this rank's heads (tp_shard.c gives it their q_b rows and o_proj columns) */
    m->QK = m->nope + m->P;
    m->IH = c->index_n_heads;
    m->ID = c->index_head_dim;
    /* Keeping more positions than a sequence can have is keeping them all: size the lists by what can occur. */
    m->topk = c->index_topk < e->max_seq_len ? c->index_topk : e->max_seq_len;
    m->interleave = c->rope_interleave;
    m->idx_interleave = c->indexer_rope_interleave;
    m->bs = (int32_t)sy_kv_int(sk, nsk, "kv_block_size", 16);

    int32_t n_idx = 0;
    /* Every per-layer table covers the MTP layer too when it is on (layer index n_layers, e->n_kv_layers). */
    const int32_t L = e->n_kv_layers;
    m->ikey_slot = malloc(sizeof(int32_t) * (size_t)L);
    m->inv_freq = malloc(sizeof(float) * (size_t)(m->P / 2 + 1));
    if (!m->ikey_slot || !m->inv_freq)
        return sy_err_set(err, SY_ERR_NOMEM, "cannot allocate the MLA tables");
    for (int32_t l = 0; l < L; l++) /* an MTP layer has its own indexer (model_arch.c binds one) */
        m->ikey_slot[l] = m->topk > 0 && c->layer_has_indexer && (l >= c->n_layers || c->layer_has_indexer[l])
                              ? n_idx++
                              : -1;
    mla_rope_tables(c, m);
    /* Each rank keeps the kv_b_proj rows of its own heads: the whole matrix is widened one layer at a time (a
     * block-scaled one only dequantises whole), then the rank's rows are kept. */
    const size_t kvb_n = (size_t)m->NH * (size_t)(m->nope + m->V) * (size_t)m->R;
    const size_t kvb_all = kvb_n * (size_t)e->tp_size;
    m->kvb = malloc(sizeof(float) * kvb_n * (size_t)L);
    float *whole = e->tp_size > 1 ? malloc(sizeof(float) * kvb_all) : NULL;
    if (!m->kvb || (e->tp_size > 1 && !whole)) {
        free(whole);
        return sy_err_set(err, SY_ERR_NOMEM, "cannot allocate kv_b_proj in F32 (%d layers of %zu values)", L, kvb_n);
    }
    for (int32_t l = 0; l < L; l++) {
        float *dst = m->kvb + (size_t)l * kvb_n;
        int rc = kvb_to_f32(e, l, &sy__engine_host_layer(e, l)->kv_b, (int64_t)c->n_heads * (m->nope + m->V), m->R,
                            whole ? whole : dst, err);
        if (rc) {
            free(whole);
            return rc;
        }
        if (whole)
            memcpy(dst, whole + (size_t)e->tp_rank * kvb_n, sizeof(float) * kvb_n);
    }
    free(whole);

    /* The pool: every layer's latent + rope key, and the indexer keys, per token. */
    unsigned long long cache_bytes = 0;
    const char *size_s = sy_kv_get(sk, nsk, "kv_cache_size");
    sy_parse_size(size_s ? size_s : "256M", &cache_bytes);
    const unsigned long long per_token =
        4ull * ((unsigned long long)L * (unsigned long long)(m->R + m->P) +
                (unsigned long long)n_idx * (unsigned long long)m->ID);
    const unsigned long long per_block = per_token * (unsigned long long)m->bs;
    unsigned long long n_blocks = cache_bytes / per_block;
    const unsigned long long useful = (unsigned long long)e->max_seqs * (unsigned long long)e->max_blocks_per_seq;
    if (n_blocks > useful)
        n_blocks = useful;
    if (n_blocks < (unsigned long long)e->max_blocks_per_seq)
        return sy_err_set(err, SY_ERR_INVALID,
                          "[scheduler] kv_cache_size %s holds %llu latent KV blocks of %d tokens (%llu bytes each), "
                          "but one sequence of max_seq_len %d needs %d; raise kv_cache_size or lower [model] "
                          "max_seq_len",
                          size_s ? size_s : "256M", n_blocks, m->bs, per_block, e->max_seq_len, e->max_blocks_per_seq);
    if (n_blocks > INT32_MAX)
        n_blocks = INT32_MAX;
    m->n_blocks = (int32_t)n_blocks;
    const size_t slots = (size_t)m->n_blocks * (size_t)m->bs;
    m->lat = calloc(slots * (size_t)L, sizeof(float) * (size_t)(m->R + m->P));
    if (n_idx)
        m->ikey = calloc(slots * (size_t)n_idx, sizeof(float) * (size_t)m->ID);
    if (!m->lat || (n_idx && !m->ikey))
        return sy_err_set(err, SY_ERR_NOMEM, "cannot allocate the latent KV cache (%d blocks of %d tokens)",
                          m->n_blocks, m->bs);

    /* What the rest of the engine reads: one shared KV head of [latent | rope key]. */
    sy_attn_problem *p = &e->attn_problem;
    memset(p, 0, sizeof *p);
    p->struct_size = sizeof *p;
    p->n_layers = L;
    p->n_heads = m->NH;
    p->n_kv_heads = 1;
    p->head_dim = m->R + m->P;
    p->v_head_dim = m->R;
    p->block_size = m->bs;
    p->n_blocks = m->n_blocks;
    p->kv_dtype = SY_DTYPE_F32;
    p->scale = m->scale;

    const int64_t T = e->max_batch_tokens;
    int rc;
    if ((rc = alloc_dev(e, &m->qa, T, c->q_lora_rank, err)) ||
        (rc = alloc_dev(e, &m->q, T, (int64_t)m->NH * m->QK, err)) ||
        (rc = alloc_dev(e, &m->kva, T, m->R + m->P, err)) ||
        (rc = alloc_dev(e, &m->att, T, (int64_t)m->NH * m->V, err)))
        return rc;
    if (n_idx && ((rc = alloc_dev(e, &m->iq, T, (int64_t)m->IH * m->ID, err)) ||
                  (rc = alloc_dev(e, &m->ik, T, m->ID, err)) || (rc = alloc_dev(e, &m->iw, T, m->IH, err))))
        return rc;
    m->hq = malloc(sizeof(float) * (size_t)T * (size_t)m->NH * (size_t)m->QK);
    m->hkva = malloc(sizeof(float) * (size_t)T * (size_t)(m->R + m->P));
    m->hatt = malloc(sizeof(float) * (size_t)T * (size_t)m->NH * (size_t)m->V);
    m->seq_of = malloc(sizeof(int32_t) * (size_t)T);
    if (!m->hq || !m->hkva || !m->hatt || !m->seq_of)
        return sy_err_set(err, SY_ERR_NOMEM, "cannot allocate the MLA activations for %lld tokens", (long long)T);
    if (n_idx) {
        m->hiq = malloc(sizeof(float) * (size_t)T * (size_t)m->IH * (size_t)m->ID);
        m->hik = malloc(sizeof(float) * (size_t)T * (size_t)m->ID);
        m->hiw = malloc(sizeof(float) * (size_t)T * (size_t)m->IH);
        m->sel = malloc(sizeof(int32_t) * (size_t)T * (size_t)m->topk);
        m->n_sel = malloc(sizeof(int32_t) * (size_t)T);
        if (!m->hiq || !m->hik || !m->hiw || !m->sel || !m->n_sel)
            return sy_err_set(err, SY_ERR_NOMEM, "cannot allocate the DSA indexer state for %lld tokens (index_topk "
                                                 "%d)",
                              (long long)T, m->topk);
    }
    const sy_host *h = &e->host.api;
    m->n_workers = h->n_workers ? h->n_workers(h->ctx) : 1;
    if (m->n_workers < 1)
        m->n_workers = 1;
    /* Scores over the whole context, the absorbed query and the latent output. */
    m->wf = (size_t)e->max_seq_len + 2u * (size_t)m->R;
    m->scratch = malloc(sizeof(float) * m->wf * (size_t)m->n_workers);
    m->iscratch = n_idx ? malloc(sizeof(int32_t) * (size_t)m->topk * (size_t)m->n_workers) : NULL;
    if (!m->scratch || (n_idx && !m->iscratch))
        return sy_err_set(err, SY_ERR_NOMEM, "cannot allocate MLA scratch for %d workers", m->n_workers);
    return sy_kv_blocks_init(&e->kv, m->n_blocks, m->bs, err);
}

void sy__mla_close(sy_engine *e)
{
    struct sy_mla *m = e->mla;
    if (!m)
        return;
    sy_tensor *ts[] = {&m->qa, &m->q, &m->kva, &m->iq, &m->ik, &m->iw, &m->att};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
        if (ts[i]->data && e->dev)
            e->dev->free(e->device->inst, ts[i]);
    free(m->lat);
    free(m->ikey);
    free(m->ikey_slot);
    free(m->inv_freq);
    free(m->kvb);
    free(m->hq);
    free(m->hkva);
    free(m->hatt);
    free(m->seq_of);
    free(m->hiq);
    free(m->hik);
    free(m->hiw);
    free(m->sel);
    free(m->n_sel);
    free(m->scratch);
    free(m->iscratch);
    free(m);
    e->mla = NULL;
}

int sy__mla_copy_blocks(sy_engine *e, const int32_t *src, const int32_t *dst, int32_t n, sy_err *err)
{
    struct sy_mla *m = e->mla;
    const size_t slots = (size_t)m->n_blocks * (size_t)m->bs, lat = (size_t)(m->R + m->P);
    for (int32_t i = 0; i < n; i++) {
        if (src[i] < 0 || src[i] >= m->n_blocks || dst[i] < 0 || dst[i] >= m->n_blocks)
            return sy_err_set(err, SY_ERR_INVALID, "copy of KV block %d to %d: blocks are 0..%d", src[i], dst[i],
                              m->n_blocks - 1);
        for (int32_t l = 0; l < e->n_kv_layers; l++) {
            float *base = m->lat + (size_t)l * slots * lat;
            memcpy(base + (size_t)dst[i] * (size_t)m->bs * lat, base + (size_t)src[i] * (size_t)m->bs * lat,
                   sizeof(float) * (size_t)m->bs * lat);
            if (m->ikey_slot[l] < 0)
                continue;
            float *kb = m->ikey + (size_t)m->ikey_slot[l] * slots * (size_t)m->ID;
            const size_t per_block = (size_t)m->bs * (size_t)m->ID;
            memcpy(kb + (size_t)dst[i] * per_block, kb + (size_t)src[i] * per_block, sizeof(float) * per_block);
        }
    }
    return SY_OK;
}

/* -------------------------------------------------------------- indexer */

typedef struct mla_job {
    const sy_engine *e;
    struct sy_mla *m;
    const sy_layer_weights *mw; /* the model's host views of this layer */
    const sy_attn_batch *b;
    int32_t layer;
} mla_job;

/* Min-heap order: lower score first; on equal scores the later position is "lower", so earlier positions win ties. */
static inline bool heap_less(const float *sc, int32_t a, int32_t b)
{
    return sc[a] < sc[b] || (sc[a] == sc[b] && a > b);
}

static void heap_down(int32_t *hp, int32_t n, int32_t i, const float *sc)
{
    for (;;) {
        int32_t l = 2 * i + 1, r = l + 1, s = i;
        if (l < n && heap_less(sc, hp[l], hp[s]))
            s = l;
        if (r < n && heap_less(sc, hp[r], hp[s]))
            s = r;
        if (s == i)
            return;
        const int32_t t = hp[i];
        hp[i] = hp[s];
        hp[s] = t;
        i = s;
    }
}

/*
 * Query t's index score of every past position, sum over indexer heads of
 * w_h * relu(q_h . k * index_head_dim^-1/2) (w_h = weights_proj * heads^-1/2),
 * and the index_topk best positions (all of them when fewer).
 */
static void index_rows(void *arg, int64_t begin, int64_t end, int worker)
{
    const mla_job *j = arg;
    struct sy_mla *m = j->m;
    float *sc = m->scratch + (size_t)worker * m->wf;
    int32_t *hp = m->iscratch + (size_t)worker * (size_t)m->topk;
    const float *kbase = m->ikey + (size_t)m->ikey_slot[j->layer] * (size_t)m->n_blocks * (size_t)m->bs * (size_t)m->ID;
    const double kscale = 1.0 / sqrt((double)m->ID), hscale = 1.0 / sqrt((double)m->IH);
    for (int64_t t = begin; t < end; t++) {
        const int32_t s = m->seq_of[t], pos = pos_of(j->b, s, t);
        const float *q = m->hiq + t * (int64_t)m->IH * m->ID, *w = m->hiw + t * (int64_t)m->IH;
        int32_t *sel = m->sel + t * (int64_t)m->topk;
        if (pos + 1 <= m->topk) { /* every position is kept */
            for (int32_t p = 0; p <= pos; p++)
                sel[p] = p;
            m->n_sel[t] = pos + 1;
            continue;
        }
        for (int32_t p = 0; p <= pos; p++) {
            const float *k = cache_row(m, (float *)kbase, (size_t)m->ID, j->b, s, p);
            double acc = 0.0;
            for (int32_t h = 0; h < m->IH; h++) {
                const double d = dot(q + (int64_t)h * m->ID, k, m->ID) * kscale;
                acc += (double)w[h] * hscale * (d > 0.0 ? d : 0.0);
            }
            sc[p] = (float)acc;
        }
        int32_t n = 0;
        for (int32_t p = 0; p <= pos; p++) {
            if (n < m->topk) {
                hp[n++] = p;
                for (int32_t i = n / 2 - 1; n == m->topk && i >= 0; i--)
                    heap_down(hp, n, i, sc);
            } else if (heap_less(sc, hp[0], p)) {
                hp[0] = p;
                heap_down(hp, n, 0, sc);
            }
        }
        memcpy(sel, hp, sizeof(int32_t) * (size_t)n);
        m->n_sel[t] = n;
    }
}

/* ------------------------------------------------------------ attention */

/*
 * One (token, head): the absorbed query, softmax over the attended
 * positions' [latent | rope key], the latent average, W_UV.
 */
static void attend_items(void *arg, int64_t begin, int64_t end, int worker)
{
    const mla_job *j = arg;
    struct sy_mla *m = j->m;
    const int32_t R = m->R, P = m->P, NOPE = m->nope, V = m->V, QK = m->QK;
    float *sc = m->scratch + (size_t)worker * m->wf, *ql = sc + (size_t)j->e->max_seq_len, *ol = ql + R;
    const size_t stride = (size_t)(R + P);
    float *lbase = m->lat + (size_t)j->layer * (size_t)m->n_blocks * (size_t)m->bs * stride;
    for (int64_t it = begin; it < end; it++) {
        const int64_t t = it / m->NH;
        const int32_t h = (int32_t)(it % m->NH), s = m->seq_of[t], pos = pos_of(j->b, s, t);
        const float *qn = m->hq + t * (int64_t)m->NH * QK + (int64_t)h * QK, *qp = qn + NOPE;
        /* This head's rows of kv_b_proj: W_UK [nope, R], then W_UV [V, R]. */
        const float *wuk = m->kvb + ((size_t)j->layer * (size_t)m->NH + (size_t)h) * (size_t)(NOPE + V) * (size_t)R;
        const float *wuv = wuk + (size_t)NOPE * (size_t)R;
        for (int32_t r = 0; r < R; r++)
            ql[r] = 0.0f;
        for (int32_t d = 0; d < NOPE; d++) {
            const float coef = qn[d], *wr = wuk + (size_t)d * (size_t)R;
            for (int32_t r = 0; r < R; r++)
                ql[r] += coef * wr[r];
        }
        const bool sparse = m->topk > 0;
        const int32_t n = sparse ? m->n_sel[t] : pos + 1;
        const int32_t *sel = sparse ? m->sel + t * (int64_t)m->topk : NULL;
        double mx = -INFINITY;
        for (int32_t i = 0; i < n; i++) {
            const float *kv = cache_row(m, lbase, stride, j->b, s, sparse ? sel[i] : i);
            sc[i] = (float)((dot(ql, kv, R) + dot(qp, kv + R, P)) * m->scale);
            mx = sc[i] > mx ? sc[i] : mx;
        }
        double sum = 0.0;
        for (int32_t i = 0; i < n; i++) {
            sc[i] = (float)exp(sc[i] - mx);
            sum += sc[i];
        }
        for (int32_t r = 0; r < R; r++)
            ol[r] = 0.0f;
        for (int32_t i = 0; i < n; i++) {
            const float *kv = cache_row(m, lbase, stride, j->b, s, sparse ? sel[i] : i);
            const float p = (float)(sc[i] / sum);
            for (int32_t r = 0; r < R; r++)
                ol[r] += p * kv[r];
        }
        float *out = m->hatt + t * (int64_t)m->NH * V + (int64_t)h * V;
        for (int32_t v = 0; v < V; v++)
            out[v] = (float)dot(wuv + (size_t)v * (size_t)R, ol, R);
    }
}

static sy_tensor rows_of(const sy_tensor *t, int64_t n)
{
    sy_tensor v = *t;
    v.shape[0] = n;
    return v;
}

static int download(sy_engine *e, float *dst, const sy_tensor *src, int64_t T, sy_err *err)
{
    return e->dev->download(e->device->inst, dst, src, sizeof(float) * (size_t)T * (size_t)src->shape[1], err);
}

/* The DSA indexer (GLM-5, DeepSeek-V3.2): queries from the query latent, keys (LayerNorm, RoPE) cached, then the
 * choice per query. */
static int run_indexer(sy_engine *e, const mla_job *j, int32_t T, const sy_tensor *xn, const sy_tensor *qa,
                       sy_err *err)
{
    struct sy_mla *m = j->m;
    const sy_layer_weights *w = &e->layers[j->layer];
    sy_tensor iq = rows_of(&m->iq, T), ik = rows_of(&m->ik, T), iw = rows_of(&m->iw, T);
    void *di = e->device->inst;
    int rc;
    if ((rc = e->dev->linear(di, qa, &w->idx_wq_b, NULL, &iq, err)) ||
        (rc = e->dev->linear(di, xn, &w->idx_wk, NULL, &ik, err)) ||
        (rc = e->dev->linear(di, xn, &w->idx_wproj, NULL, &iw, err)) || (rc = download(e, m->hiq, &iq, T, err)) ||
        (rc = download(e, m->hik, &ik, T, err)) || (rc = download(e, m->hiw, &iw, T, err)))
        return rc;
    float *kbase = m->ikey + (size_t)m->ikey_slot[j->layer] * (size_t)m->n_blocks * (size_t)m->bs * (size_t)m->ID;
    for (int32_t t = 0; t < T; t++) {
        const int32_t s = m->seq_of[t], pos = pos_of(j->b, s, t);
        float *k = m->hik + (int64_t)t * m->ID;
        layernorm_host(k, m->ID, &j->mw->idx_k_norm, &j->mw->idx_k_norm_b, 1e-6f);
        rope_slice(m, k, pos, m->idx_interleave);
        memcpy(cache_row(m, kbase, (size_t)m->ID, j->b, s, pos), k, sizeof(float) * (size_t)m->ID);
        for (int32_t h = 0; h < m->IH; h++)
            rope_slice(m, m->hiq + ((int64_t)t * m->IH + h) * m->ID, pos, m->idx_interleave);
    }
    e->host.api.parallel_for(e->host.api.ctx, T, 1, index_rows, (void *)j);
    return SY_OK;
}

int sy__mla_attention(sy_engine *e, int32_t layer, const sy_attn_batch *b, int32_t T, const sy_tensor *xn,
                      sy_tensor *proj, sy_err *err)
{
    struct sy_mla *m = e->mla;
    const sy_model_config *c = e->mc;
    const sy_layer_weights *w = &e->layers[layer];
    const sy_device_ops *dev = e->dev;
    void *di = e->device->inst;
    const sy_host *h = &e->host.api;
    if (h->n_workers && h->n_workers(h->ctx) > m->n_workers)
        return sy_err_set(err, SY_ERR_INTERNAL, "the worker pool grew from %d to %d workers after the MLA set-up",
                          m->n_workers, h->n_workers(h->ctx));
    mla_job j = {.e = e, .m = m, .mw = sy__engine_host_layer(e, layer), .b = b, .layer = layer};
    for (int32_t s = 0; s < b->n_seqs; s++)
        for (int32_t t = b->tok_start[s]; t < b->tok_start[s + 1]; t++)
            m->seq_of[t] = s;

    /* q [T, Nh*(nope+rope)], through the query latent when there is one; kva [T, R+P] */
    sy_tensor qa = rows_of(&m->qa, T), q = rows_of(&m->q, T), kva = rows_of(&m->kva, T);
    int rc;
    if (c->q_lora_rank > 0) {
        if ((rc = dev->linear(di, xn, &w->q_a, NULL, &qa, err)) ||
            (rc = dev->rmsnorm(di, &qa, &w->q_a_norm, LATENT_NORM_EPS, &qa, err)) ||
            (rc = dev->linear(di, &qa, &w->q_b, NULL, &q, err)))
            return rc;
    } else if ((rc = dev->linear(di, xn, &w->wq, NULL, &q, err))) {
        return rc;
    }
    if ((rc = dev->linear(di, xn, &w->kv_a, NULL, &kva, err)) || (rc = download(e, m->hq, &q, T, err)) ||
        (rc = download(e, m->hkva, &kva, T, err)))
        return rc;

    /* The cache row of each new token: normalised latent, roped key; the queries' rope slices. */
    const size_t stride = (size_t)(m->R + m->P);
    float *lbase = m->lat + (size_t)layer * (size_t)m->n_blocks * (size_t)m->bs * stride;
    for (int32_t t = 0; t < T; t++) {
        const int32_t s = m->seq_of[t], pos = pos_of(b, s, t);
        float *row = m->hkva + (int64_t)t * (int64_t)stride;
        rmsnorm_host(row, m->R, &j.mw->kv_a_norm, LATENT_NORM_EPS);
        rope_slice(m, row + m->R, pos, m->interleave);
        memcpy(cache_row(m, lbase, stride, b, s, pos), row, sizeof(float) * stride);
        for (int32_t hh = 0; hh < m->NH; hh++)
            rope_slice(m, m->hq + ((int64_t)t * m->NH + hh) * m->QK + m->nope, pos, m->interleave);
    }
    /* DSA: a full layer chooses; a shared one keeps the previous layer's choice (same tokens, same step). */
    if (m->topk > 0 && m->ikey_slot[layer] >= 0 && (rc = run_indexer(e, &j, T, xn, &qa, err)))
        return rc;

    h->parallel_for(h->ctx, (int64_t)T * m->NH, 1, attend_items, &j);
    sy_tensor att = rows_of(&m->att, T);
    if ((rc = dev->upload(di, &att, m->hatt, sizeof(float) * (size_t)T * (size_t)m->NH * (size_t)m->V, err)))
        return rc;
    return dev->linear(di, &att, &w->wo, NULL, proj, err);
}
