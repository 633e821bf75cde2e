/*
 * The tensor-core prefill kernel's self-check (attn_tc_check.h): two
 * steps of a seeded random problem of the instance's shape, each run with
 * every row on k_attend and then with the plan's tiles on k_attend_tc, on
 * a cache of its own; the outputs compared with syat_compare.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn_kern.h"
#include "attn_plan.h"
#include "attn_tc_check.h"
#include "sycuda.h"

/* A seeded xorshift in [-1, 1): the check's problem is the same on every run. */
static float check_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (float)((double)(*s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

enum { CK_SEQS = 3, CK_HEADS = 2, CK_STEPS = 2, CK_MAX_POS = 88 };

/*
 * Step 1: prefills of 50 and 70 tokens (full and partial tiles) beside a
 * 3-token one (k_attend's); step 2: a 37-token chunk after 50 cached
 * positions (rows of one tile at different positions, the window if the
 * problem has one) beside two decode tokens.
 */
static const int32_t ck_lens[CK_STEPS][CK_SEQS] = {{50, 70, 3}, {37, 1, 1}};

int syat_tc_selfcheck(const syat_tc_check_in *in, int *tc_opted_in, int *pass, double *worst, sy_err *err)
{
    const int G = in->group, D = in->head_dim, H = CK_HEADS;
    const int bs = in->block_size, MB = (CK_MAX_POS + bs - 1) / bs, NB = CK_SEQS * MB;
    const int64_t qc = (int64_t)H * G * D, kc = (int64_t)H * D, T_MAX = 123;
    const size_t es = in->kvt == SY_DTYPE_F32 ? 4 : 2, cache = (size_t)H * NB * bs * D * es;
    const size_t n_meta = (size_t)(T_MAX + CK_SEQS + 1 + CK_SEQS + CK_SEQS * MB + 3 * T_MAX);
    const size_t sizes[7] = {sizeof(float) * (size_t)(T_MAX * qc), sizeof(float) * (size_t)(T_MAX * kc),
                             sizeof(float) * (size_t)(T_MAX * kc), sizeof(float) * (size_t)(T_MAX * qc), cache, cache,
                             sizeof(int32_t) * n_meta};
    void *d[7] = {NULL};
    float *q = malloc(sizes[0]), *k = malloc(sizes[1]), *v = malloc(sizes[2]);
    float *ref = malloc(sizes[3]), *got = malloc(sizes[3]);
    int32_t *meta = malloc(sizes[6]), bt[CK_SEQS * CK_MAX_POS];
    int rc = SY_OK;
    *pass = 0;
    *worst = INFINITY;
    if (!q || !k || !v || !ref || !got || !meta) {
        rc = sy_err_set(err, SY_ERR_NOMEM, "attn %s: self-check of the tensor-core prefill kernel: host memory",
                        in->name);
        goto out;
    }
    cudaError_t ce = cudaSuccess;
    for (int i = 0; i < 7 && ce == cudaSuccess; i++)
        ce = cudaMalloc(&d[i], sizes[i]);
    for (int i = 4; i < 6 && ce == cudaSuccess; i++)
        ce = cudaMemset(d[i], 0, cache);
    /* Each sequence's blocks in reverse order: a tile's positions cross blocks that are not adjacent. */
    for (int s = 0; s < CK_SEQS; s++)
        for (int b = 0; b < MB; b++)
            bt[s * MB + b] = s * MB + (MB - 1 - b);
    uint64_t seed = 0x243f6a8885a308d3ull;
    int32_t ctx[CK_SEQS] = {0, 0, 0};
    double w = 0;
    int ok = 1;
    for (int step = 0; step < CK_STEPS && ce == cudaSuccess; step++) {
        int32_t tok_start[CK_SEQS + 1] = {0};
        for (int s = 0; s < CK_SEQS; s++)
            tok_start[s + 1] = tok_start[s] + ck_lens[step][s];
        const int32_t T = tok_start[CK_SEQS];
        for (int64_t i = 0; i < T * qc; i++)
            q[i] = check_rand(&seed);
        for (int64_t i = 0; i < T * kc; i++) {
            k[i] = check_rand(&seed);
            v[i] = check_rand(&seed);
        }
        /* seq_of | tok_start | ctx_len | block_table | rows | tiles, as the glue packs them. */
        int32_t *m = meta;
        for (int s = 0; s < CK_SEQS; s++)
            for (int32_t t = tok_start[s]; t < tok_start[s + 1]; t++)
                m[t] = s;
        memcpy(m + T, tok_start, sizeof tok_start);
        memcpy(m + T + CK_SEQS + 1, ctx, sizeof ctx);
        memcpy(m + T + 2 * CK_SEQS + 1, bt, sizeof(int32_t) * CK_SEQS * MB);
        const size_t base = (size_t)T + 2 * CK_SEQS + 1 + (size_t)CK_SEQS * MB;
        int32_t n_rows = 0, n_tiles = 0;
        syat_plan(CK_SEQS, tok_start, G, SYAT_TC_MIN_TOKENS, m + base, &n_rows, m + base + T, &n_tiles);
        /* The tiles right after the rows, where the device copy is read. */
        memmove(m + base + n_rows, m + base + T, sizeof(int32_t) * 2 * (size_t)n_tiles);
        const size_t n = base + (size_t)n_rows + 2 * (size_t)n_tiles;
        if (ce == cudaSuccess)
            ce = cudaMemcpy(d[0], q, sizeof(float) * (size_t)(T * qc), cudaMemcpyHostToDevice);
        if (ce == cudaSuccess)
            ce = cudaMemcpy(d[1], k, sizeof(float) * (size_t)(T * kc), cudaMemcpyHostToDevice);
        if (ce == cudaSuccess)
            ce = cudaMemcpy(d[2], v, sizeof(float) * (size_t)(T * kc), cudaMemcpyHostToDevice);
        if (ce == cudaSuccess)
            ce = cudaMemcpy(d[6], meta, sizeof(int32_t) * n, cudaMemcpyHostToDevice);
        if (ce != cudaSuccess)
            break;
        const int32_t *md = d[6];
        syat_params prm = {
            .q = d[0], .k = d[1], .v = d[2], .out = d[3],
            .ldq = qc, .ldk = kc, .ldv = kc, .ldo = qc,
            .kc = d[4], .vc = d[5], .kvt = (int)in->kvt,
            .meta = md,
            .n_tokens = T, .n_seqs = CK_SEQS, .max_blocks = MB,
            .n_kv_heads = H, .group = G,
            .head_dim = D, .v_head_dim = D, .block_size = bs,
            .n_blocks = NB, .layer = 0, .window = in->window,
            .scale = in->scale,
            .n_splits = 1, .split_len = 0, .part = NULL,
            .rows = NULL, .n_rows = 0, .tiles = NULL, .n_tiles = 0,
        };
        int smem = 0;
        /* The reference (every row on k_attend) first: it writes the step's k/v, the second run rewrites the same. */
        if (syat_forward(&prm, &smem, tc_opted_in) < 0) {
            rc = sy_err_set(err, SY_ERR_UNSUPPORTED, "attn %s: self-check: k_attend cannot get its shared memory",
                            in->name);
            goto out;
        }
        ce = cudaMemcpy(ref, d[3], sizeof(float) * (size_t)(T * qc), cudaMemcpyDeviceToHost);
        if (ce != cudaSuccess)
            break;
        ce = cudaMemset(d[3], 0xff, sizeof(float) * (size_t)(T * qc)); /* NaN: a row no kernel writes fails */
        prm.rows = md + base;
        prm.n_rows = n_rows;
        prm.tiles = md + base + n_rows;
        prm.n_tiles = n_tiles;
        if (ce == cudaSuccess && syat_forward(&prm, &smem, tc_opted_in) < 0) {
            rc = sy_err_set(err, SY_ERR_UNSUPPORTED, "attn %s: self-check: the tensor-core prefill kernel cannot get "
                            "its shared memory", in->name);
            goto out;
        }
        if (ce == cudaSuccess)
            ce = cudaGetLastError();
        if (ce == cudaSuccess)
            ce = cudaMemcpy(got, d[3], sizeof(float) * (size_t)(T * qc), cudaMemcpyDeviceToHost);
        if (ce != cudaSuccess)
            break;
        double ws = 0;
        if (syat_compare(got, ref, (size_t)(T * qc), SYAT_TC_BOUND, &ws) != 0)
            ok = 0;
        w = ws > w ? ws : w;
        for (int s = 0; s < CK_SEQS; s++)
            ctx[s] += ck_lens[step][s];
    }
    if (ce != cudaSuccess) {
        rc = syc_fail(err, ce, "attn: self-check of the tensor-core prefill kernel");
        goto out;
    }
    *pass = ok;
    *worst = w;
out:
    for (int i = 0; i < 7; i++)
        if (d[i])
            cudaFree(d[i]);
    free(q), free(k), free(v), free(ref), free(got), free(meta);
    return rc;
}
