/*
 * AVX-512 quantised kernels (sykquant.h). Weights are dequantised in
 * registers, 16 elements at a time:
 *  - FP8 E4M3 -> F16 is a shift (sign to bit 15, exponent and mantissa to
 *    bits 7..14: the F16 value is q * 2^-8, subnormals included), then
 *    vcvtph2ps; the 2^8 is folded into the scale;
 *  - E2M1 nibbles index a 16-entry table with vpermps (NVFP4 and MXFP4
 *    alike: only the block scale's decode, E4M3 or E8M0, differs).
 * Each vector is multiplied by its block's scale and fed to the FMAs of up
 * to QNR rows of x. Compiled for the target by pragma; only called after
 * syk_isa_usable() said yes.
 */
#include "config.h"

#include <string.h>

#include "sykquant.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

#ifdef __clang__
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")
#endif
#include <immintrin.h>

#define INL static inline __attribute__((always_inline))
#define QNR 4 /* rows of x per tile: 4 x 4 accumulators + 4 weights + x */
#define QMR 8 /* weight rows of the single-row (decode) tile */

#define FP8 SY_DTYPE_FP8_E4M3
#define NVF4 SY_DTYPE_FP4_E2M1
/* MXFP4: FP4 data like NVFP4, E8M0 scales per 32 (a kernel instance of its own, so NVFP4's code is unchanged). */
#define MXF4 (SY_DTYPE_COUNT + 1)

/* 16 elements of a weight row starting at element e (not yet scaled). */
INL __m512 deq16(const uint8_t *row, int64_t e, const int dt)
{
    if (dt == FP8) {
        const __m256i h = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(row + e)));
        const __m256i f16 = _mm256_or_si256(_mm256_slli_epi16(_mm256_and_si256(h, _mm256_set1_epi16(0x80)), 8),
                                            _mm256_slli_epi16(_mm256_and_si256(h, _mm256_set1_epi16(0x7f)), 7));
        return _mm512_cvtph_ps(f16);
    }
    const __m512 lut = _mm512_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, -0.0f, -0.5f, -1.0f, -1.5f,
                                      -2.0f, -3.0f, -4.0f, -6.0f);
    const __m128i b = _mm_loadl_epi64((const __m128i *)(row + e / 2));
    const __m128i lo = _mm_and_si128(b, _mm_set1_epi8(0x0f));
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), _mm_set1_epi8(0x0f));
    return _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm_unpacklo_epi8(lo, hi)), lut);
}

/* The last cnt (< 16) elements: copied into a zeroed buffer, so nothing past the row is read. */
INL __m512 deq16_part(const uint8_t *row, int64_t e, int64_t cnt, const int dt)
{
    uint8_t buf[16] = {0};
    if (dt == FP8) {
        memcpy(buf, row + e, (size_t)cnt);
        return deq16(buf, 0, dt);
    }
    memcpy(buf, row + e / 2, (size_t)(cnt + 1) / 2);
    return deq16(buf, 0, dt);
}

/* Block scale of weight row `row`, block column bc, as the vectors need it (FP8: times 2^8, see above). */
INL float blk_scale(const sy_tensor *w, int64_t srow, int64_t bc, const int dt)
{
    if (dt == FP8)
        return ((const float *)w->scale)[srow + bc] * w->global_scale * 256.0f;
    if (dt == MXF4)
        return syk_e8m0_to_f32(((const uint8_t *)w->scale)[srow + bc]) * w->global_scale;
    return syk_fp8_e4m3_to_f32(((const uint8_t *)w->scale)[srow + bc]) * w->global_scale;
}

/* One k slice (k <= SYK_KC) of an nr x mr tile; x and out already offset; kabs: absolute k of x[0]. */
INL void qslice(const syk_qcall *c, const float *x, float *out, int64_t j0, int64_t kabs, int64_t k, int acc,
                const int nr, const int mr, const int dt)
{
    const sy_tensor *w = c->w;
    const int64_t K = w->shape[1], b0 = w->scale_block[0], b1 = w->scale_block[1];
    const int64_t ldsc = (K + b1 - 1) / b1;
    const size_t rowb = (size_t)(dt == FP8 ? K : K / 2);
    const uint8_t *wr[QMR];
    int64_t srow[QMR];
#pragma GCC unroll 8
    for (int j = 0; j < mr; j++) {
        wr[j] = (const uint8_t *)w->data + (size_t)(j0 + j) * rowb;
        srow[j] = ((j0 + j) / b0) * ldsc;
    }
    __m512 cacc[QNR][QMR];
#pragma GCC unroll 8
    for (int i = 0; i < nr; i++)
#pragma GCC unroll 8
        for (int j = 0; j < mr; j++)
            cacc[i][j] = _mm512_setzero_ps();
    int64_t kk = 0, bc = kabs / b1;
    if (dt == NVF4 && b1 == 16 && kabs % 16 == 0) {
        /* NVFP4 has a scale per 16 elements: converting each one alone (and broadcasting it) cost as much as
         * the products. Here 16 blocks' FP8 scales become one vector, the way deq16 turns FP8 into F32, and
         * each block takes its lane: the same value, the same products in the same order. */
        const __m512 k256 = _mm512_set1_ps(256.0f), gs = _mm512_set1_ps(w->global_scale);
        for (; kk + 256 <= k; kk += 256, bc += 16) {
            __m512 sv[QMR];
#pragma GCC unroll 8
            for (int j = 0; j < mr; j++)
                sv[j] = _mm512_mul_ps(_mm512_mul_ps(deq16((const uint8_t *)w->scale + srow[j], bc, FP8), k256), gs);
            for (int b = 0; b < 16; b++) {
                const __m512i lane = _mm512_set1_epi32(b);
                __m512 wv[QMR];
#pragma GCC unroll 8
                for (int j = 0; j < mr; j++)
                    wv[j] = _mm512_mul_ps(deq16(wr[j], kabs + kk + 16 * b, dt), _mm512_permutexvar_ps(lane, sv[j]));
#pragma GCC unroll 4
                for (int i = 0; i < nr; i++) {
                    const __m512 xv = _mm512_loadu_ps(x + i * c->ldx + kk + 16 * b);
#pragma GCC unroll 8
                    for (int j = 0; j < mr; j++)
                        cacc[i][j] = _mm512_fmadd_ps(xv, wv[j], cacc[i][j]);
                }
            }
        }
    }
    while (kk < k) {
        int64_t bend = (bc + 1) * b1 - kabs;
        if (bend > k)
            bend = k;
        float s[QMR];
#pragma GCC unroll 8
        for (int j = 0; j < mr; j++)
            s[j] = blk_scale(w, srow[j], bc, dt);
        for (; kk + 16 <= bend; kk += 16) {
            __m512 wv[QMR];
#pragma GCC unroll 8
            for (int j = 0; j < mr; j++)
                wv[j] = _mm512_mul_ps(deq16(wr[j], kabs + kk, dt), _mm512_set1_ps(s[j]));
#pragma GCC unroll 4
            for (int i = 0; i < nr; i++) {
                const __m512 xv = _mm512_loadu_ps(x + i * c->ldx + kk);
#pragma GCC unroll 8
                for (int j = 0; j < mr; j++)
                    cacc[i][j] = _mm512_fmadd_ps(xv, wv[j], cacc[i][j]);
            }
        }
        if (kk < bend) { /* the row's tail: only at the end of k */
            const int64_t cnt = bend - kk;
            const __mmask16 mk = (__mmask16)((1u << cnt) - 1u);
            __m512 wv[QMR];
#pragma GCC unroll 8
            for (int j = 0; j < mr; j++)
                wv[j] = _mm512_mul_ps(deq16_part(wr[j], kabs + kk, cnt, dt), _mm512_set1_ps(s[j]));
#pragma GCC unroll 4
            for (int i = 0; i < nr; i++) {
                const __m512 xv = _mm512_maskz_loadu_ps(mk, x + i * c->ldx + kk);
#pragma GCC unroll 8
                for (int j = 0; j < mr; j++)
                    cacc[i][j] = _mm512_fmadd_ps(xv, wv[j], cacc[i][j]);
            }
            kk = bend;
        }
        bc++;
    }
#pragma GCC unroll 4
    for (int i = 0; i < nr; i++)
#pragma GCC unroll 8
        for (int j = 0; j < mr; j++) {
            const float v = _mm512_reduce_add_ps(cacc[i][j]);
            float *o = out + i * c->ldo + j;
            *o = acc ? *o + v : v;
        }
}

/* An nr x mr tile over the call's whole k, in SYK_KC slices (sykern.h). */
INL void qtile(const syk_qcall *c, int64_t i0, int64_t j, const int nr, const int mr, const int dt)
{
    for (int64_t s = 0; s < c->k; s += SYK_KC) {
        const int64_t len = c->k - s < SYK_KC ? c->k - s : SYK_KC;
        qslice(c, c->x + i0 * c->ldx + s, c->out + i0 * c->ldo + j, c->j0 + j, c->k0 + s, len,
               c->accumulate || s > 0, nr, mr, dt);
    }
}

/*
 * Many rows of x (one SYK_KC slice): each group of weight rows is dequantised
 * once into wb (row stride SYK_KC), exactly as qslice computes it in
 * registers, then every tile of rows reads it from L1. Same products, same
 * sums, so a row's bits do not depend on which path ran it.
 */
INL void deq_rows(const syk_qcall *c, int64_t j0, int64_t kabs, int64_t k, const int mr, const int dt, float *wb)
{
    const sy_tensor *w = c->w;
    const int64_t K = w->shape[1], b0 = w->scale_block[0], b1 = w->scale_block[1];
    const int64_t ldsc = (K + b1 - 1) / b1;
    const size_t rowb = (size_t)(dt == FP8 ? K : K / 2);
    for (int j = 0; j < mr; j++) {
        const uint8_t *row = (const uint8_t *)w->data + (size_t)(j0 + j) * rowb;
        const int64_t srow = ((j0 + j) / b0) * ldsc;
        float *dst = wb + (size_t)j * SYK_KC;
        int64_t kk = 0, bc = kabs / b1;
        while (kk < k) {
            int64_t bend = (bc + 1) * b1 - kabs;
            if (bend > k)
                bend = k;
            const float s = blk_scale(w, srow, bc, dt);
            for (; kk + 16 <= bend; kk += 16)
                _mm512_storeu_ps(dst + kk, _mm512_mul_ps(deq16(row, kabs + kk, dt), _mm512_set1_ps(s)));
            if (kk < bend) {
                const int64_t cnt = bend - kk;
                _mm512_mask_storeu_ps(dst + kk, (__mmask16)((1u << cnt) - 1u), _mm512_mul_ps(deq16_part(row, kabs + kk, cnt, dt), _mm512_set1_ps(s)));
                kk = bend;
            }
            bc++;
        }
    }
}

INL void bslice(const syk_qcall *c, const float *x, float *out, const float *wb, int64_t k, int acc, const int nr,
                const int mr)
{
    __m512 cacc[6][4];
#pragma GCC unroll 8
    for (int i = 0; i < nr; i++)
#pragma GCC unroll 4
        for (int j = 0; j < mr; j++)
            cacc[i][j] = _mm512_setzero_ps();
    int64_t kk = 0;
    for (; kk + 16 <= k; kk += 16) {
        __m512 wv[4];
#pragma GCC unroll 4
        for (int j = 0; j < mr; j++)
            wv[j] = _mm512_loadu_ps(wb + j * SYK_KC + kk);
#pragma GCC unroll 8
        for (int i = 0; i < nr; i++) {
            const __m512 xv = _mm512_loadu_ps(x + i * c->ldx + kk);
#pragma GCC unroll 4
            for (int j = 0; j < mr; j++)
                cacc[i][j] = _mm512_fmadd_ps(xv, wv[j], cacc[i][j]);
        }
    }
    if (kk < k) {
        const __mmask16 mk = (__mmask16)((1u << (k - kk)) - 1u);
        __m512 wv[4];
#pragma GCC unroll 4
        for (int j = 0; j < mr; j++)
            wv[j] = _mm512_maskz_loadu_ps(mk, wb + j * SYK_KC + kk);
#pragma GCC unroll 8
        for (int i = 0; i < nr; i++) {
            const __m512 xv = _mm512_maskz_loadu_ps(mk, x + i * c->ldx + kk);
#pragma GCC unroll 4
            for (int j = 0; j < mr; j++)
                cacc[i][j] = _mm512_fmadd_ps(xv, wv[j], cacc[i][j]);
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < nr; i++)
#pragma GCC unroll 4
        for (int j = 0; j < mr; j++) {
            const float v = _mm512_reduce_add_ps(cacc[i][j]);
            float *o = out + i * c->ldo + j;
            *o = acc ? *o + v : v;
        }
}

INL void brows(const syk_qcall *c, int64_t j, const float *wb, const int mr)
{
    int64_t i = 0;
    for (; i + 6 <= c->n; i += 6)
        bslice(c, c->x + i * c->ldx, c->out + i * c->ldo + j, wb, c->k, c->accumulate, 6, mr);
    for (; i < c->n; i++)
        bslice(c, c->x + i * c->ldx, c->out + i * c->ldo + j, wb, c->k, c->accumulate, 1, mr);
}

/* The many-rows order (see deq_rows). */
INL void qgemm_buffered(const syk_qcall *c, const int dt)
{
    float wb[4 * SYK_KC] __attribute__((aligned(64)));
    int64_t j = 0;
    for (; j + 4 <= c->m; j += 4) {
        deq_rows(c, c->j0 + j, c->k0, c->k, 4, dt, wb);
        brows(c, j, wb, 4);
    }
    for (; j < c->m; j++) {
        deq_rows(c, c->j0 + j, c->k0, c->k, 1, dt, wb);
        brows(c, j, wb, 1);
    }
}

INL void qgemm(const syk_qcall *c, const int dt)
{
    if (c->n > QNR && c->k <= SYK_KC) {
        qgemm_buffered(c, dt);
        return;
    }
    int64_t j = 0;
    if (c->n == 1)
        for (; j + QMR <= c->m; j += QMR)
            qtile(c, 0, j, 1, QMR, dt);
    for (; j + 4 <= c->m; j += 4) {
        int64_t i = 0;
        for (; i + QNR <= c->n; i += QNR)
            qtile(c, i, j, QNR, 4, dt);
        switch (c->n - i) {
        case 3: qtile(c, i, j, 3, 4, dt); break;
        case 2: qtile(c, i, j, 2, 4, dt); break;
        case 1: qtile(c, i, j, 1, 4, dt); break;
        default: break;
        }
    }
    for (; j < c->m; j++) {
        int64_t i = 0;
        for (; i + QNR <= c->n; i += QNR)
            qtile(c, i, j, QNR, 1, dt);
        for (; i < c->n; i++)
            qtile(c, i, j, 1, 1, dt);
    }
}

static void qgemm_fp8(const syk_qcall *c)
{
    qgemm(c, SY_DTYPE_FP8_E4M3);
}

static void qgemm_fp4(const syk_qcall *c)
{
    if (c->w->scale_dtype == SY_DTYPE_E8M0)
        qgemm(c, MXF4);
    else
        qgemm(c, NVF4);
}

#ifdef __clang__
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

syk_qgemm_fn syk__qgemm_avx512(sy_dtype dt)
{
    return dt == SY_DTYPE_FP8_E4M3 ? qgemm_fp8 : dt == SY_DTYPE_FP4_E2M1 ? qgemm_fp4 : NULL;
}

#else /* not x86-64 */

syk_qgemm_fn syk__qgemm_avx512(sy_dtype dt)
{
    (void)dt;
    return NULL;
}

#endif
