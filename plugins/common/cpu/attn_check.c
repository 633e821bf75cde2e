/*
 * Argument checks for the cpu attention plugins (see sykattn.h). A bad
 * block index or ctx_len would otherwise be a silent write into another
 * sequence's cache, so every index the step touches is checked up front.
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include "sykattn.h"
#include "sykern.h"

int syk_attn_kv_dtype(const char *key, sy_dtype problem, sy_dtype *out, sy_err *err)
{
    if (problem == SY_DTYPE_F16 || problem == SY_DTYPE_BF16) {
        *out = problem;
        return SY_OK;
    }
    if (problem != SY_DTYPE_F32)
        return sy_err_set(err, SY_ERR_UNSUPPORTED, "kv_dtype %s: the cpu attention plugins store F32, BF16 or F16",
                          sy_dtype_name(problem));
    if (!key || strcmp(key, "f32") == 0)
        *out = SY_DTYPE_F32;
    else if (strcmp(key, "bf16") == 0)
        *out = SY_DTYPE_BF16;
    else if (strcmp(key, "f16") == 0)
        *out = SY_DTYPE_F16;
    else
        return sy_err_set(err, SY_ERR_INVALID, "kv_dtype = %s: expected one of %s", key, SYK_KV_DTYPE_CHOICES);
    return SY_OK;
}

int syk_attn_check_problem(const sy_attn_problem *p, sy_err *why)
{
    if (!p || p->struct_size < offsetof(sy_attn_problem, sliding_window) + sizeof p->sliding_window)
        return sy_err_set(why, SY_ERR_INVALID, "attention problem missing or too old (struct_size %u)",
                          p ? p->struct_size : 0u);
    if (p->n_layers <= 0 || p->n_heads <= 0 || p->n_kv_heads <= 0 || p->head_dim <= 0 || p->v_head_dim <= 0 ||
        p->block_size <= 0 || p->n_blocks <= 0)
        return sy_err_set(why, SY_ERR_INVALID,
                          "attention problem: every count must be > 0, found n_layers %d, n_heads %d, n_kv_heads %d, "
                          "head_dim %d, v_head_dim %d, block_size %d, n_blocks %d",
                          p->n_layers, p->n_heads, p->n_kv_heads, p->head_dim, p->v_head_dim, p->block_size,
                          p->n_blocks);
    if (p->n_heads % p->n_kv_heads)
        return sy_err_set(why, SY_ERR_UNSUPPORTED, "n_heads %d is not a multiple of n_kv_heads %d", p->n_heads,
                          p->n_kv_heads);
    if (!(p->scale > 0.0f) || isinf(p->scale))
        return sy_err_set(why, SY_ERR_INVALID, "softmax scale must be finite and > 0, found %g", (double)p->scale);
    if (p->sliding_window < 0)
        return sy_err_set(why, SY_ERR_INVALID, "sliding_window %d: expected 0 (none) or a window > 0",
                          p->sliding_window);
    for (int32_t l = 0; l < p->n_layers; l++)
        if (syk_attn_window(p, l) < 0)
            return sy_err_set(why, SY_ERR_INVALID, "layer_window[%d] = %d: expected 0 (full attention) or a window > 0",
                              l, syk_attn_window(p, l));
    return SY_OK;
}

static int rows_of(const sy_tensor *t, const char *what, int64_t rows, int64_t cols, const float **data, int64_t *ld,
                   sy_err *err)
{
    if (!t)
        return sy_err_set(err, SY_ERR_INVALID, "attn forward: %s is NULL", what);
    if (t->dtype != SY_DTYPE_F32)
        return sy_err_set(err, SY_ERR_INVALID, "attn forward: %s must be F32, found %s", what,
                          sy_dtype_name(t->dtype));
    int64_t r, c;
    if (syk_view2d(t, &r, &c, ld))
        return sy_err_set(err, SY_ERR_INVALID, "attn forward: %s must be rows of contiguous elements (last stride 1)",
                          what);
    if (r != rows || c != cols)
        return sy_err_set(err, SY_ERR_INVALID, "attn forward: %s must be [%lld, %lld], found [%lld, %lld]", what,
                          (long long)rows, (long long)cols, (long long)r, (long long)c);
    if (!t->data && rows * cols > 0)
        return sy_err_set(err, SY_ERR_INVALID, "attn forward: %s has no data", what);
    *data = t->data;
    return SY_OK;
}

static int overlap(const float *a, int64_t rows_a, int64_t lda, int64_t cols_a, const float *b, int64_t rows_b,
                   int64_t ldb, int64_t cols_b)
{
    if (rows_a == 0 || rows_b == 0 || cols_a == 0 || cols_b == 0)
        return 0;
    const float *ea = a + (rows_a - 1) * lda + cols_a, *eb = b + (rows_b - 1) * ldb + cols_b;
    return a < eb && b < ea;
}

int syk_attn_check_forward(const sy_attn_problem *p, int32_t layer, const sy_attn_batch *b, const sy_tensor *q,
                           const sy_tensor *k, const sy_tensor *v, const sy_tensor *out, syk_attn_io *io,
                           sy_err *err)
{
    if (layer < 0 || layer >= p->n_layers)
        return sy_err_set(err, SY_ERR_INVALID, "attn forward: layer %d outside [0, %d)", layer, p->n_layers);
    if (!b || b->struct_size < offsetof(sy_attn_batch, max_blocks) + sizeof b->max_blocks)
        return sy_err_set(err, SY_ERR_INVALID, "attn forward: batch missing or too old (struct_size %u)",
                          b ? b->struct_size : 0u);
    if (b->n_seqs < 0 || b->n_tokens < 0)
        return sy_err_set(err, SY_ERR_INVALID, "attn forward: n_seqs %d, n_tokens %d", b->n_seqs, b->n_tokens);
    if (b->n_seqs > 0 && (!b->tok_start || !b->ctx_len || !b->block_table))
        return sy_err_set(err, SY_ERR_INVALID, "attn forward: tok_start, ctx_len and block_table are required");
    if (b->n_seqs > 0 && (b->tok_start[0] != 0 || b->tok_start[b->n_seqs] != b->n_tokens))
        return sy_err_set(err, SY_ERR_INVALID, "attn forward: tok_start must run from 0 to n_tokens %d, found %d..%d",
                          b->n_tokens, b->tok_start[0], b->tok_start[b->n_seqs]);
    if (b->n_seqs == 0 && b->n_tokens != 0)
        return sy_err_set(err, SY_ERR_INVALID, "attn forward: %d tokens but no sequences", b->n_tokens);
    const int64_t bs = p->block_size;
    for (int32_t s = 0; s < b->n_seqs; s++) {
        const int32_t len = b->tok_start[s + 1] - b->tok_start[s];
        if (len < 0)
            return sy_err_set(err, SY_ERR_INVALID, "attn forward: tok_start decreases at sequence %d (%d -> %d)", s,
                              b->tok_start[s], b->tok_start[s + 1]);
        if (b->ctx_len[s] < 0)
            return sy_err_set(err, SY_ERR_INVALID, "attn forward: ctx_len[%d] = %d", s, b->ctx_len[s]);
        const int64_t end = (int64_t)b->ctx_len[s] + len;
        const int64_t need = (end + bs - 1) / bs;
        if (need > b->max_blocks)
            return sy_err_set(err, SY_ERR_INVALID,
                              "attn forward: sequence %d reaches position %lld, which needs %lld blocks of %lld; the "
                              "block table holds %d",
                              s, (long long)end, (long long)need, (long long)bs, b->max_blocks);
        const int32_t *bt = b->block_table + (size_t)s * (size_t)b->max_blocks;
        for (int64_t i = 0; i < need; i++)
            if (bt[i] < 0 || bt[i] >= p->n_blocks)
                return sy_err_set(err, SY_ERR_INVALID,
                                  "attn forward: block_table[%d][%lld] = %d is outside the cache's [0, %d) blocks", s,
                                  (long long)i, bt[i], p->n_blocks);
    }
    const int64_t T = b->n_tokens;
    int rc;
    const float *o = NULL;
    if ((rc = rows_of(q, "q", T, (int64_t)p->n_heads * p->head_dim, &io->q, &io->ldq, err)) ||
        (rc = rows_of(k, "k", T, (int64_t)p->n_kv_heads * p->head_dim, &io->k, &io->ldk, err)) ||
        (rc = rows_of(v, "v", T, (int64_t)p->n_kv_heads * p->v_head_dim, &io->v, &io->ldv, err)) ||
        (rc = rows_of(out, "out", T, (int64_t)p->n_heads * p->v_head_dim, &o, &io->ldo, err)))
        return rc;
    io->out = (float *)o;
    const int64_t oc = (int64_t)p->n_heads * p->v_head_dim;
    if (overlap(o, T, io->ldo, oc, io->q, T, io->ldq, (int64_t)p->n_heads * p->head_dim) ||
        overlap(o, T, io->ldo, oc, io->k, T, io->ldk, (int64_t)p->n_kv_heads * p->head_dim) ||
        overlap(o, T, io->ldo, oc, io->v, T, io->ldv, (int64_t)p->n_kv_heads * p->v_head_dim))
        return sy_err_set(err, SY_ERR_INVALID, "attn forward: out overlaps q, k or v");
    return SY_OK;
}

int syk_attn_check_copy(const sy_attn_problem *p, const int32_t *src, const int32_t *dst, int32_t n, sy_err *err)
{
    if (n < 0)
        return sy_err_set(err, SY_ERR_INVALID, "copy_blocks: n = %d", n);
    if (n > 0 && (!src || !dst))
        return sy_err_set(err, SY_ERR_INVALID, "copy_blocks: src and dst are required");
    for (int32_t i = 0; i < n; i++)
        if (src[i] < 0 || src[i] >= p->n_blocks || dst[i] < 0 || dst[i] >= p->n_blocks)
            return sy_err_set(err, SY_ERR_INVALID, "copy_blocks: pair %d (%d -> %d) outside the cache's [0, %d) blocks",
                              i, src[i], dst[i], p->n_blocks);
    return SY_OK;
}
