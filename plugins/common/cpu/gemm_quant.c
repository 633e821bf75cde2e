/*
 * Quantised GEMM driver and layout checks (sykquant.h): the same loop
 * orders as gemm.c (a few rows: each weight row streamed end to end; many
 * rows: NB-row blocks of x times SYK_KC slices of k), around the ISA's
 * dequantising kernels.
 */
#include "config.h"

#include <stdio.h>

#include "sykconv.h"
#include "sykquant.h"

#define NB 128 /* x rows per block, as gemm.c */
#define FEW 8  /* up to this many x rows: one kernel call over the whole k */

int syk_qweight_check(const sy_tensor *w, char *why, size_t why_len)
{
    if (!syk_wdtype_quant(w->dtype)) {
        snprintf(why, why_len, "dtype %s is not quantised", sy_dtype_name(w->dtype));
        return -1;
    }
    if (w->ndim != 2 || w->stride[1] != 1 || w->stride[0] != w->shape[1]) {
        snprintf(why, why_len, "expected a contiguous [N, K] weight, found ndim %d", w->ndim);
        return -1;
    }
    const int64_t N = w->shape[0], K = w->shape[1];
    const int64_t b0 = w->scale_block[0], b1 = w->scale_block[1];
    if (!w->scale) {
        snprintf(why, why_len, "%s weight [%lld, %lld] has no scales bound", sy_dtype_name(w->dtype), (long long)N,
                 (long long)K);
        return -1;
    }
    if (b0 < 1 || b1 < 1 || (b1 % 16 != 0 && b1 < K)) {
        snprintf(why, why_len,
                 "scale block must be [>= 1, a multiple of 16 or >= K = %lld], found [%lld, %lld]", (long long)K,
                 (long long)b0, (long long)b1);
        return -1;
    }
    if (w->dtype == SY_DTYPE_FP8_E4M3 && w->scale_dtype != SY_DTYPE_F32) {
        snprintf(why, why_len, "FP8 weights take F32 scales, found %s", sy_dtype_name(w->scale_dtype));
        return -1;
    }
    if (w->dtype == SY_DTYPE_FP4_E2M1) {
        /* NVFP4: E4M3 scales per 16; MXFP4: E8M0 per 32. */
        const int mx = w->scale_dtype == SY_DTYPE_E8M0, blk = mx ? 32 : 16;
        if ((w->scale_dtype != SY_DTYPE_FP8_E4M3 && !mx) || b0 != 1 || b1 != blk) {
            snprintf(why, why_len,
                     "FP4 weights take F8_E4M3 scales per 16 elements of a row (NVFP4) or E8M0 per 32 (MXFP4), "
                     "found %s per [%lld, %lld]",
                     sy_dtype_name(w->scale_dtype), (long long)b0, (long long)b1);
            return -1;
        }
        if (K % blk != 0) {
            snprintf(why, why_len, "%s rows must hold a multiple of %d elements, found K = %lld", mx ? "MXFP4" : "NVFP4",
                     blk, (long long)K);
            return -1;
        }
    }
    if (!(w->global_scale == w->global_scale) || w->global_scale == 0.0f) {
        snprintf(why, why_len, "global scale must be finite and non-zero, found %g", (double)w->global_scale);
        return -1;
    }
    return 0;
}

void syk_qweight_row(const sy_tensor *w, int64_t row, int64_t k0, int64_t n, float *dst)
{
    const int64_t b1 = w->scale_block[1];
    const int64_t K = w->shape[1];
    const uint8_t *q = (const uint8_t *)w->data + (size_t)row * (size_t)(w->dtype == SY_DTYPE_FP4_E2M1 ? K / 2 : K);
    int64_t i = 0;
    while (i < n) {
        const int64_t kc = k0 + i;
        const int64_t bend = (kc / b1 + 1) * b1 - k0; /* end of this scale block, relative to k0 */
        const int64_t stop = bend < n ? bend : n;
        const float s = syk__qscale(w, row, kc);
        if (w->dtype == SY_DTYPE_FP8_E4M3)
            for (; i < stop; i++)
                dst[i] = syk_fp8_e4m3_to_f32(q[k0 + i]) * s;
        else
            for (; i < stop; i++) {
                const int64_t e = k0 + i;
                dst[i] = syk_e2m1_to_f32((unsigned)(q[e / 2] >> ((e & 1) * 4)) & 0xfu) * s;
            }
    }
}

syk_qgemm_fn syk_qgemm_for(syk_isa isa, sy_dtype dt)
{
    if (!syk_wdtype_quant(dt))
        return NULL;
    switch (isa) {
    case SYK_ISA_AVX512: return syk__qgemm_avx512(dt);
    case SYK_ISA_AVX2: return syk__qgemm_avx2(dt);
    default: return syk__qgemm_portable(dt);
    }
}

static inline float bias_at(const syk_gemm *g, int64_t j)
{
    if (g->bias_dtype == SY_DTYPE_F32)
        return ((const float *)g->bias)[j];
    if (g->bias_dtype == SY_DTYPE_BF16)
        return syk_bf16_to_f32(((const uint16_t *)g->bias)[j]);
    return syk_f16_to_f32(((const uint16_t *)g->bias)[j]);
}

void syk_gemm_tile_q(const syk_kernels *kern, const syk_gemm *g, int64_t r0, int64_t r1, int64_t c0, int64_t c1)
{
    if (r1 <= r0 || c1 <= c0)
        return;
    syk_qgemm_fn fn = syk_qgemm_for(kern->isa, g->wdtype);
    if (!fn)
        fn = syk__qgemm_portable(g->wdtype);
    syk_qcall c = {.ldx = g->ldx, .w = g->wq, .j0 = c0, .ldo = g->ldo, .m = c1 - c0};
    if (g->k == 0) {
        for (int64_t r = r0; r < r1; r++)
            for (int64_t j = c0; j < c1; j++)
                g->out[r * g->ldo + j] = 0.0f;
    } else if (r1 - r0 <= FEW) {
        c.x = g->x + r0 * g->ldx;
        c.out = g->out + r0 * g->ldo + c0;
        c.n = r1 - r0;
        c.k = g->k;
        fn(&c);
    } else {
        for (int64_t rb = r0; rb < r1; rb += NB) {
            c.n = r1 - rb < NB ? r1 - rb : NB;
            c.out = g->out + rb * g->ldo + c0;
            for (int64_t kb = 0; kb < g->k; kb += SYK_KC) {
                c.x = g->x + rb * g->ldx + kb;
                c.k0 = kb;
                c.k = g->k - kb < SYK_KC ? g->k - kb : SYK_KC;
                c.accumulate = kb > 0;
                fn(&c);
            }
        }
    }
    if (g->bias)
        for (int64_t r = r0; r < r1; r++) {
            float *o = g->out + r * g->ldo;
            for (int64_t j = c0; j < c1; j++)
                o[j] += bias_at(g, j);
        }
}
