/*
 * Tensor-parallel sharding at load: which slice of each weight a rank
 * keeps (Megatron-style).
 *
 *   column-parallel (output rows split): q/k/v (whole heads), gate/up, their
 *     biases, each expert's gate/up: a row slice is a contiguous view of the
 *     checkpoint's mmap, so it costs no memory;
 *   row-parallel (input columns split): o, down, each expert's down: the
 *     slice is strided, so the rank keeps a contiguous copy (every device
 *     reads contiguous rows); their outputs are partial sums, allreduced;
 *   vocab-parallel: the embedding's and lm_head's rows by vocab slice; the
 *     embedding copy gets one extra zero row that ids of other ranks look
 *     up, so the allreduce of the lookups is exact; logits are allgathered.
 *   replicated: norms (Q/K norms are per head, the same for every head
 *     slice), the MoE router and its score bias (every rank routes the
 *     same way); shared experts are split like a dense MLP.
 *   expert parallel ([model] moe_parallel = expert): instead of a slice of
 *     every routed expert, a rank keeps whole experts [r*E/N, (r+1)*E/N) as
 *     views (no copy); the others' pages are dropped from the rank's
 *     mapping. Its moe output is the sum over its own experts only, so the
 *     allreduce after the MoE layer adds the ranks' experts together.
 *   gpt-oss: the o_proj bias and each expert's down bias go to rank 0 only
 *     (their outputs are partial sums); expert gate/up biases are sliced
 *     like their rows; sinks follow their heads (engine.c). Experts in a
 *     block-scaled dtype (MXFP4, FP8) are not sliced: expert parallel only.
 *   multi-head latent attention (DeepSeek-V3, GLM-5): whole heads, their
 *     q_b_proj rows, kv_b_proj rows (forward_mla.c) and o_proj columns; the
 *     query and KV latents' projections and the DSA indexer are replicated,
 *     so every rank caches the same latents and picks the same positions.
 */
#include "config.h"

#include "engine/engine_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int check_div(const char *what, int64_t n, int tp, sy_err *err)
{
    if (n % tp == 0)
        return SY_OK;
    return sy_err_set(err, SY_ERR_INVALID,
                      "tensor parallel size %d does not divide %s %lld; choose --tp from the common divisors of "
                      "the attention heads, KV heads, intermediate sizes and vocabulary",
                      tp, what, (long long)n);
}

int sy_engine_tp_check(const sy_model_config *c, int tp, sy_err *err)
{
    return sy_engine_parallel_check(c, tp, false, err);
}

int sy_engine_parallel_check(const sy_model_config *c, int tp, bool expert_parallel, sy_err *err)
{
    if (tp <= 1)
        return SY_OK;
    if (expert_parallel && c->n_experts == 0)
        return sy_err_set(err, SY_ERR_INVALID,
                          "[model] moe_parallel = expert with %d ranks: %s is a dense model, it has no routed experts "
                          "to split; set moe_parallel = tensor (the default)",
                          tp, c->arch_name);
    if (expert_parallel && c->n_experts % tp)
        return sy_err_set(err, SY_ERR_INVALID,
                          "expert parallel size %d does not divide n_routed_experts %d; choose --tp from the divisors "
                          "of the expert count that also divide the heads, KV heads and vocabulary, or set [model] "
                          "moe_parallel = tensor",
                          tp, c->n_experts);
    int rc;
    /* MLA has one shared latent instead of KV heads (it is replicated): only the query heads are split. */
    if ((rc = check_div("num_attention_heads", c->n_heads, tp, err)) ||
        (!c->mla && (rc = check_div("num_key_value_heads", c->n_kv_heads, tp, err))) ||
        (rc = check_div("vocab_size", c->vocab, tp, err)))
        return rc;
    /* A model whose every layer is MoE never uses the dense intermediate size. */
    bool dense = c->n_experts == 0;
    for (int32_t l = 0; !dense && l < c->n_layers; l++)
        dense = c->layer_is_moe && !c->layer_is_moe[l];
    if (dense && (rc = check_div("intermediate_size", c->intermediate, tp, err)))
        return rc;
    /* Expert parallel keeps routed experts whole; the shared experts' MLP is still split. */
    if (expert_parallel)
        return c->n_shared_experts > 0 ? check_div("the shared experts' intermediate size (n_shared_experts x "
                                                   "moe_intermediate_size)",
                                                   (int64_t)c->n_shared_experts * c->moe_inter, tp, err)
                                       : SY_OK;
    if (c->n_experts > 0 && c->moe_inter % tp)
        return sy_err_set(err, SY_ERR_INVALID,
                          "tensor parallel size %d does not divide the experts' intermediate size "
                          "(moe_intermediate_size) %d; choose --tp from the common divisors of the attention heads, KV "
                          "heads, intermediate sizes and vocabulary, or set [model] moe_parallel = expert to keep "
                          "experts whole (then --tp must divide the %d experts instead)",
                          tp, c->moe_inter, c->n_experts);
    return SY_OK;
}

static int keep(sy_engine *e, void *p, sy_err *err)
{
    if (e->n_tp_bufs == e->cap_tp_bufs) {
        size_t cap = e->cap_tp_bufs ? e->cap_tp_bufs * 2 : 64;
        void **nb = realloc(e->tp_bufs, sizeof *nb * cap);
        if (!nb) {
            free(p);
            return sy_err_set(err, SY_ERR_NOMEM, "tensor parallel: cannot track %zu weight copies", cap);
        }
        e->tp_bufs = nb;
        e->cap_tp_bufs = cap;
    }
    e->tp_bufs[e->n_tp_bufs++] = p;
    return SY_OK;
}

static int elem_bytes(const sy_tensor *t, const char *name, sy_err *err)
{
    if (t->dtype != SY_DTYPE_F32 && t->dtype != SY_DTYPE_F16 && t->dtype != SY_DTYPE_BF16)
        return sy_err_set(err, SY_ERR_UNSUPPORTED,
                          "tensor parallel: %s is %s; slicing is implemented for F32, F16 and BF16 weights", name,
                          sy_dtype_name(t->dtype));
    if (t->ndim < 1 || t->ndim > 2 || t->stride[t->ndim - 1] != 1)
        return sy_err_set(err, SY_ERR_UNSUPPORTED,
                          "tensor parallel: %s has %d dims with last stride %lld; expected rows of contiguous elements",
                          name, t->ndim, t->ndim ? (long long)t->stride[t->ndim - 1] : 0LL);
    return sy_dtype_bits(t->dtype) / 8;
}

/* Rows [r0, r0 + n) of a 1-D or 2-D weight, as a view. */
static int row_slice(const sy_tensor *t, int64_t r0, int64_t n, const char *name, sy_tensor *out, sy_err *err)
{
    if (!t->data) {
        *out = *t;
        return SY_OK;
    }
    int eb = elem_bytes(t, name, err);
    if (eb < 0)
        return eb;
    if (t->shape[0] < r0 + n)
        return sy_err_set(err, SY_ERR_INVALID, "tensor parallel: %s has %lld rows, expected at least %lld", name,
                          (long long)t->shape[0], (long long)(r0 + n));
    *out = *t;
    out->data = (char *)t->data + (size_t)r0 * (size_t)(t->ndim == 2 ? t->stride[0] : 1) * (size_t)eb;
    out->shape[0] = n;
    return SY_OK;
}

/* Columns [c0, c0 + n) of a 2-D weight, as a contiguous copy kept in e->tp_bufs. */
static int col_slice(sy_engine *e, const sy_tensor *t, int64_t c0, int64_t n, const char *name, sy_tensor *out,
                     sy_err *err)
{
    int eb = elem_bytes(t, name, err);
    if (eb < 0)
        return eb;
    if (t->ndim != 2 || t->shape[1] < c0 + n)
        return sy_err_set(err, SY_ERR_INVALID, "tensor parallel: %s has %lld columns, expected at least %lld", name,
                          t->ndim == 2 ? (long long)t->shape[1] : 0LL, (long long)(c0 + n));
    const int64_t rows = t->shape[0];
    char *dst = malloc((size_t)rows * (size_t)n * (size_t)eb + 64);
    if (!dst)
        return sy_err_set(err, SY_ERR_NOMEM, "tensor parallel: cannot copy %lld x %lld of %s", (long long)rows,
                          (long long)n, name);
    const char *src = t->data;
    for (int64_t r = 0; r < rows; r++)
        memcpy(dst + (size_t)r * (size_t)n * (size_t)eb, src + ((size_t)r * (size_t)t->stride[0] + (size_t)c0) * (size_t)eb,
               (size_t)n * (size_t)eb);
    int rc = keep(e, dst, err);
    if (rc)
        return rc;
    sy_tensor v = sy_tensor_2d(dst, t->dtype, rows, n);
    *out = v;
    return SY_OK;
}

int sy__tp_vocab_embed(sy_engine *e, const sy_tensor *src, const char *name, sy_tensor *out, sy_err *err)
{
    const int64_t Vl = e->vocab_local, v0 = e->vocab_start, H = src->shape[1];
    int eb = elem_bytes(src, name, err);
    if (eb < 0)
        return eb;
    if (src->ndim != 2 || src->shape[0] < v0 + Vl)
        return sy_err_set(err, SY_ERR_INVALID, "tensor parallel: %s has %lld rows, expected the vocabulary's %lld",
                          name, (long long)src->shape[0], (long long)(v0 + Vl));
    /* Vl rows of this rank's slice, then a zero row for every other id. */
    char *buf = calloc((size_t)(Vl + 1) * (size_t)H * (size_t)eb + 64, 1);
    if (!buf)
        return sy_err_set(err, SY_ERR_NOMEM, "tensor parallel: cannot copy %lld rows of %s", (long long)Vl, name);
    for (int64_t r = 0; r < Vl; r++)
        memcpy(buf + (size_t)r * (size_t)H * (size_t)eb,
               (const char *)src->data + (size_t)(v0 + r) * (size_t)src->stride[0] * (size_t)eb,
               (size_t)H * (size_t)eb);
    int rc = keep(e, buf, err);
    if (rc)
        return rc;
    *out = sy_tensor_2d(buf, src->dtype, Vl + 1, H);
    return SY_OK;
}

int sy__tp_vocab_head(sy_engine *e, const sy_tensor *src, const char *name, sy_tensor *out, sy_err *err)
{
    return row_slice(src, e->vocab_start, e->vocab_local, name, out, err);
}

int sy__tp_shard_vocab(sy_engine *e, sy_tensor *embed, sy_tensor *lm_head, sy_err *err)
{
    const sy_model *m = e->model;
    int rc = sy__tp_vocab_embed(e, &m->embed, "model.embed_tokens.weight", embed, err);
    if (rc)
        return rc;
    if (m->lm_head.data == m->embed.data) {
        *lm_head = sy_tensor_2d(embed->data, m->embed.dtype, e->vocab_local, m->embed.shape[1]);
        return SY_OK;
    }
    return sy__tp_vocab_head(e, &m->lm_head, "lm_head.weight", lm_head, err);
}

/*
 * The whole pages of t, dropped from this process's private read-only
 * mapping: the file stays in the page cache (other ranks may use it), but
 * this rank's RSS no longer counts it, and nothing here reads it again.
 * Only pages entirely inside t, so a neighbour's bytes are never touched.
 */
static void drop_pages(const sy_tensor *t)
{
    if (!t->data || t->ndim < 1)
        return;
    const long ps = sysconf(_SC_PAGESIZE);
    const uintptr_t page = ps > 0 ? (uintptr_t)ps : 4096;
    const int64_t bits = sy_dtype_bits(t->dtype);
    const int64_t rows = t->ndim == 2 ? t->shape[0] : 1, cols = t->shape[t->ndim - 1];
    const int64_t ld = t->ndim == 2 ? t->stride[0] : cols;
    const uintptr_t start = (uintptr_t)t->data;
    const uintptr_t end = start + (uintptr_t)(((rows - 1) * ld + cols) * bits / 8);
    const uintptr_t first = (start + page - 1) & ~(page - 1), last = end & ~(page - 1);
    if (last > first)
        (void)madvise((void *)first, last - first, MADV_DONTNEED);
}

/* Expert parallel: this rank's routed experts, whole views; the others' pages leave the rank's mapping. */
static void whole_experts(const sy_engine *e, const sy_layer_weights *s, sy_layer_weights *d)
{
    const int32_t x0 = e->ep_first, x1 = e->ep_first + e->ep_count;
    d->exp_gate = s->exp_gate + x0;
    d->exp_up = s->exp_up + x0;
    d->exp_down = s->exp_down + x0;
    for (int32_t x = 0; x < e->mc->n_experts; x++)
        if (x < x0 || x >= x1) {
            drop_pages(&s->exp_gate[x]);
            drop_pages(&s->exp_up[x]);
            drop_pages(&s->exp_down[x]);
        }
}

int sy__tp_shard_layer(sy_engine *e, int32_t l, const sy_layer_weights *s, sy_layer_weights *d, sy_err *err)
{
    const sy_model_config *c = e->mc;
    const int tp = e->tp_size, r = e->tp_rank;
    const int64_t D = c->head_dim;
    const int64_t nq = (int64_t)c->n_heads / tp * D, nkv = (int64_t)c->n_kv_heads / tp * D;
    char nm[160];
    int rc;
    *d = *s;
    d->exp_gate = d->exp_up = d->exp_down = NULL;
#define ROWS(field, n, what)                                                                  \
    do {                                                                                      \
        snprintf(nm, sizeof nm, "layer %d %s", l, what);                                      \
        if ((rc = row_slice(&s->field, (int64_t)r * (n), (n), nm, &d->field, err)))           \
            return rc;                                                                        \
    } while (0)
    if (c->mla) {
        /* Whole heads: their q_b_proj (or q_proj) rows and o_proj columns; the latents are every head's, so
         * q_a/kv_a and the DSA indexer stay whole and every rank caches the same latent (forward_mla.c keeps
         * the kv_b_proj rows of its heads). */
        const int64_t nh = c->n_heads / tp, qk = (int64_t)c->qk_nope_dim + c->qk_rope_dim;
        ROWS(q_b, nh * qk, "q_b_proj");
        ROWS(wq, nh * qk, "q_proj");
        snprintf(nm, sizeof nm, "layer %d o_proj", l);
        if ((rc = col_slice(e, &s->wo, (int64_t)r * nh * c->v_head_dim, nh * c->v_head_dim, nm, &d->wo, err)))
            return rc;
    } else {
        ROWS(wq, nq, "q_proj");
        ROWS(wk, nkv, "k_proj");
        ROWS(wv, nkv, "v_proj");
        ROWS(bq, nq, "q_proj.bias");
        ROWS(bk, nkv, "k_proj.bias");
        ROWS(bv, nkv, "v_proj.bias");
        snprintf(nm, sizeof nm, "layer %d o_proj", l);
        if ((rc = col_slice(e, &s->wo, (int64_t)r * nq, nq, nm, &d->wo, err)))
            return rc;
    }
    if (r != 0) /* o_proj's outputs are partial sums: its bias (gpt-oss) is added by rank 0 alone */
        memset(&d->bo, 0, sizeof d->bo);
    if (s->sh_gate.data) { /* shared experts: one dense MLP, split like the dense one */
        const int64_t Fs = s->sh_gate.shape[0] / tp;
        ROWS(sh_gate, Fs, "shared_experts.gate_proj");
        ROWS(sh_up, Fs, "shared_experts.up_proj");
        snprintf(nm, sizeof nm, "layer %d shared_experts.down_proj", l);
        if ((rc = col_slice(e, &s->sh_down, (int64_t)r * Fs, Fs, nm, &d->sh_down, err)))
            return rc;
    }
    if (!s->is_moe) {
        const int64_t F = s->w_gate.shape[0] / tp;
        ROWS(w_gate, F, "gate_proj");
        ROWS(w_up, F, "up_proj");
        snprintf(nm, sizeof nm, "layer %d down_proj", l);
        return col_slice(e, &s->w_down, (int64_t)r * F, F, nm, &d->w_down, err);
    }
    if (e->expert_parallel) {
        whole_experts(e, s, d);
        if (s->exp_gate_bias) { /* each rank adds the biases of the experts it holds */
            d->exp_gate_bias = s->exp_gate_bias + e->ep_first;
            d->exp_up_bias = s->exp_up_bias + e->ep_first;
            d->exp_down_bias = s->exp_down_bias + e->ep_first;
        }
        return SY_OK;
    }
    const sy_dtype xdt = s->exp_gate[0].dtype;
    if (xdt == SY_DTYPE_FP4_E2M1 || xdt == SY_DTYPE_FP8_E4M3)
        return sy_err_set(err, SY_ERR_UNSUPPORTED,
                          "tensor parallel: layer %d's routed experts are %s with block scales, which are not sliced "
                          "across ranks; set [model] moe_parallel = expert to give each rank whole experts",
                          l, sy_dtype_name(xdt));
    /* Three arrays of n_experts views in one allocation, kept until close (the moe plugin holds them). */
    const int32_t E = c->n_experts;
    sy_tensor *ex = calloc((size_t)E * 3, sizeof *ex);
    if (!ex || (rc = keep(e, ex, err)))
        return ex ? rc : sy_err_set(err, SY_ERR_NOMEM, "tensor parallel: cannot allocate %d expert views", E);
    d->exp_gate = ex;
    d->exp_up = ex + E;
    d->exp_down = ex + 2 * E;
    const int64_t F = c->moe_inter / tp;
    if (s->exp_gate_bias) { /* gpt-oss: gate/up biases sliced like their rows; down's on rank 0 only (partial sums) */
        sy_tensor *bx = calloc((size_t)E * 3, sizeof *bx);
        if (!bx || (rc = keep(e, bx, err)))
            return bx ? rc : sy_err_set(err, SY_ERR_NOMEM, "tensor parallel: cannot allocate %d expert bias views", E);
        d->exp_gate_bias = bx;
        d->exp_up_bias = bx + E;
        d->exp_down_bias = r == 0 ? s->exp_down_bias : NULL;
        for (int32_t x = 0; x < E; x++) {
            snprintf(nm, sizeof nm, "layer %d expert %d gate_up_proj_bias", l, x);
            if ((rc = row_slice(&s->exp_gate_bias[x], (int64_t)r * F, F, nm, &d->exp_gate_bias[x], err)) ||
                (rc = row_slice(&s->exp_up_bias[x], (int64_t)r * F, F, nm, &d->exp_up_bias[x], err)))
                return rc;
        }
    }
    for (int32_t x = 0; x < E; x++) {
        snprintf(nm, sizeof nm, "layer %d expert %d gate_proj", l, x);
        if ((rc = row_slice(&s->exp_gate[x], (int64_t)r * F, F, nm, &d->exp_gate[x], err)))
            return rc;
        snprintf(nm, sizeof nm, "layer %d expert %d up_proj", l, x);
        if ((rc = row_slice(&s->exp_up[x], (int64_t)r * F, F, nm, &d->exp_up[x], err)))
            return rc;
        snprintf(nm, sizeof nm, "layer %d expert %d down_proj", l, x);
        if ((rc = col_slice(e, &s->exp_down[x], (int64_t)r * F, F, nm, &d->exp_down[x], err)))
            return rc;
    }
#undef ROWS
    return SY_OK;
}

void sy__tp_free_bufs(sy_engine *e)
{
    for (size_t i = 0; i < e->n_tp_bufs; i++)
        free(e->tp_bufs[i]);
    free(e->tp_bufs);
    e->tp_bufs = NULL;
    e->n_tp_bufs = e->cap_tp_bufs = 0;
}
