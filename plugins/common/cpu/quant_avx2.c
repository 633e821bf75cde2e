/*
 * AVX2 quantised kernels (sykquant.h): the algorithm of quant_avx512.c with
 * 8 lanes and 16 registers. Weights are dequantised in registers:
 *  - FP8 E4M3 -> F16 by shifts (q * 2^-8, the 2^8 folded into the scale
 *    unless that overflows), then vcvtph2ps;
 *  - E2M1: in the main loops a vpermps table of |q| * s per block, the sign
 *    xor'ed in; in tails and the many-rows path a vpshufb table of F16 high
 *    bytes, then vcvtph2ps (NVFP4 and MXFP4 alike: only the block scale's
 *    decode, E4M3 or E8M0, differs).
 * Each vector is multiplied by its block's scale and fed to the FMAs of up
 * to QNR rows of x. Compiled for the target by pragma; only called after
 * syk_isa_usable() said yes.
 */
#include "config.h"

#include <string.h>

#include "sykquant.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

#ifdef __clang__
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif
#include <immintrin.h>

#define INL static inline __attribute__((always_inline))
#define QNR 2 /* rows of x per tile: 2 x 4 accumulators + 4 weights + x */
#define QMR 8 /* weight rows of the single-row (decode) tile */

#define FP8 SY_DTYPE_FP8_E4M3
#define NVF4 SY_DTYPE_FP4_E2M1
/* MXFP4: FP4 data like NVFP4, E8M0 scales per 32 (a kernel instance of its own, so NVFP4's code is unchanged). */
#define MXF4 (SY_DTYPE_COUNT + 1)

/*
 * 8 elements of a weight row starting at element e (not yet scaled). Both
 * formats become F16 bits, then vcvtph2ps (the cheap widening on Zen and
 * Intel alike; the integer ops before it are what decode costs):
 *  - FP8: sign-extended to 16 bits and shifted by 7, exponent and mantissa
 *    land in bits 7..13 and the sign (copied into 14 and 15) is masked to
 *    bit 15: q * 2^-8, subnormals included, three ops for 8 weights;
 *  - E2M1: every value's F16 has a zero low byte, so one vpshufb of the
 *    nibbles through a 16-entry table of high bytes (sign included) and an
 *    interleave with zero give the F16 bits: the same F32 values as the
 *    8-entry vpermps table plus sign it replaces (-0 stays -0).
 */
INL __m256 deq8(const uint8_t *row, int64_t e, const int dt)
{
    if (dt == FP8) {
        const __m128i h = _mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i *)(row + e)));
        return _mm256_cvtph_ps(_mm_and_si128(_mm_slli_epi16(h, 7), _mm_set1_epi16((short)0xbf80)));
    }
    const __m128i hib = _mm_setr_epi8(0x00, 0x38, 0x3c, 0x3e, 0x40, 0x42, 0x44, 0x46, (char)0x80, (char)0xb8,
                                      (char)0xbc, (char)0xbe, (char)0xc0, (char)0xc2, (char)0xc4, (char)0xc6);
    uint32_t u;
    memcpy(&u, row + e / 2, sizeof u);
    const __m128i b = _mm_cvtsi32_si128((int)u);
    const __m128i nib = _mm_set1_epi8(0x0f);
    const __m128i lo = _mm_and_si128(b, nib);
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), nib);
    const __m128i t = _mm_shuffle_epi8(hib, _mm_unpacklo_epi8(lo, hi)); /* element order: low nibble first */
    return _mm256_cvtph_ps(_mm_unpacklo_epi8(_mm_setzero_si128(), t));
}

/* The last cnt (< 8) elements: copied into a zeroed buffer, so nothing past the row is read. */
INL __m256 deq8_part(const uint8_t *row, int64_t e, int64_t cnt, const int dt)
{
    uint8_t buf[8] = {0};
    if (dt == FP8) {
        memcpy(buf, row + e, (size_t)cnt);
        return deq8(buf, 0, dt);
    }
    memcpy(buf, row + e / 2, (size_t)(cnt + 1) / 2);
    return deq8(buf, 0, dt);
}

INL __m256i lane_mask(int64_t cnt)
{
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)cnt), idx);
}

/* A fixed tree: the same bits for a column whichever tile computed it. */
INL float hsum8(__m256 a)
{
    const __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)));
}

/* Block scale of weight row `row`, block column bc: syk__qscale's value (FP8 without the 2^8, see wscale). */
INL float blk_scale(const sy_tensor *w, int64_t srow, int64_t bc, const int dt)
{
    if (dt == FP8)
        return ((const float *)w->scale)[srow + bc] * w->global_scale;
    if (dt == MXF4)
        return syk_e8m0_to_f32(((const uint8_t *)w->scale)[srow + bc]) * w->global_scale;
    return syk_fp8_e4m3_to_f32(((const uint8_t *)w->scale)[srow + bc]) * w->global_scale;
}

/*
 * The multiplier of a decoded vector: FP8's d is q * 2^-8, so s * 2^8 (exact,
 * a power of two) makes one multiply round the same real product q * s.
 * Where s * 2^8 overflows (|s| > ~2^120) that would give inf or NaN for a
 * finite q * s, so such a block sets *big and is done as (d * 2^8) * s
 * instead (d * 2^8 is q exactly), as quant_avx512.c does.
 */
INL float fold(float s, const int dt, int *big)
{
    if (dt != FP8)
        return s;
    const float sf = s * 256.0f;
    *big |= !(sf <= 0x1.fffffep127f && sf >= -0x1.fffffep127f);
    return sf;
}

/* q * s for a decoded vector d: one multiply by sf, or (big, FP8 only) by 2^8 then by s. */
INL __m256 wscale(__m256 d, float sf, float s, const int dt, const int big)
{
    if (dt == FP8 && big)
        return _mm256_mul_ps(_mm256_mul_ps(d, _mm256_set1_ps(256.0f)), _mm256_set1_ps(s));
    return _mm256_mul_ps(d, _mm256_set1_ps(sf));
}

/* 16 FP8 elements at p as two vectors of q * 2^-8 (deq8's decode, one widening for both). */
INL void deq16_fp8(const uint8_t *p, __m256 f[2])
{
    const __m256i h = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)p));
    const __m256i b = _mm256_and_si256(_mm256_slli_epi16(h, 7), _mm256_set1_epi16((short)0xbf80));
    f[0] = _mm256_cvtph_ps(_mm256_castsi256_si128(b));
    f[1] = _mm256_cvtph_ps(_mm256_extracti128_si256(b, 1));
}

/*
 * pf, when set, is the next mr weight rows (one contiguous block of rows of
 * rowb bytes): each 8-element step prefetches its share of it in address
 * order, as the float GEMV does (README "GEMV streaming").
 */
INL void qprefetch(const uint8_t *pf, int64_t kabs, int64_t kk, const int mr, const int dt)
{
    if (!pf)
        return;
    /* mr rows of 8 elements: 64 bytes of FP8 a step, 32 of FP4 (one line every other step) */
    if (dt != FP8 && ((kabs + kk) & 15))
        return;
    _mm_prefetch((const char *)(pf + (size_t)(kabs + kk) * (size_t)mr / (dt == FP8 ? 1u : 2u)), _MM_HINT_T0);
}

/*
 * The 16-element FP8 steps of one scale block, from kk toward bend: each
 * row's weights are decoded, scaled and fed to its FMAs before the next
 * row's, so one row's vectors are live at a time (decoding all mr rows first
 * spilled to the stack). Returns where it stopped (< 16 left: the caller's
 * 8-element step, shared with FP4, takes the rest).
 */
INL int64_t fp8_block(const syk_qcall *c, const float *x, const uint8_t *const *wr, int64_t kabs, int64_t kk,
                      int64_t bend, const float *sf, const float *s, const uint8_t *pf, __m256 (*cacc)[QMR],
                      const int nr, const int mr, const int big)
{
    for (; kk + 16 <= bend; kk += 16) {
        qprefetch(pf, kabs, kk, mr, FP8);
        qprefetch(pf, kabs, kk + 8, mr, FP8);
#pragma GCC unroll 8
        for (int j = 0; j < mr; j++) {
            __m256 f[2];
            deq16_fp8(wr[j] + kabs + kk, f);
            const __m256 w0 = wscale(f[0], sf[j], s[j], FP8, big), w1 = wscale(f[1], sf[j], s[j], FP8, big);
#pragma GCC unroll 4
            for (int i = 0; i < nr; i++) {
                cacc[i][j] = _mm256_fmadd_ps(_mm256_loadu_ps(x + i * c->ldx + kk), w0, cacc[i][j]);
                cacc[i][j] = _mm256_fmadd_ps(_mm256_loadu_ps(x + i * c->ldx + kk + 8), w1, cacc[i][j]);
            }
        }
    }
    return kk;
}

/*
 * 32 FP4 elements of every row from e (relative to x), row j's two 16-element
 * halves scaled by s0[j] and s1[j]. The scale goes into an 8-entry table of
 * magnitudes (|q| * s, the product deq8's q times s rounds to; negation is
 * exact, so the sign bit is then xor'ed in): per 8 weights a broadcast load,
 * vpsrlvd, vpermps and the sign, no widening or multiply (10% faster in L2
 * on Zen 3 than a vpshufb decode of 32 elements and vcvtph2ps plus multiply).
 */
INL void fp4_step(const syk_qcall *c, const float *x, const uint8_t *const *wr, int64_t kabs, int64_t e,
                  const float *s0, const float *s1, const int ss, const uint8_t *pf, __m256 (*cacc)[QMR],
                  const int nr, const int mr, const int dt)
{
    qprefetch(pf, kabs, e, mr, dt);
    qprefetch(pf, kabs, e + 16, mr, dt);
    const __m256 mag = _mm256_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f);
    const __m256i sh = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28), sgn = _mm256_set1_epi32((int)0x80000000u);
#pragma GCC unroll 8
    for (int j = 0; j < mr; j++) {
        const __m256 t0 = _mm256_mul_ps(mag, _mm256_broadcast_ss(s0 + j * ss));
        const __m256 t1 = s0 == s1 ? t0 : _mm256_mul_ps(mag, _mm256_broadcast_ss(s1 + j * ss));
        const uint8_t *p = wr[j] + (kabs + e) / 2;
#pragma GCC unroll 4
        for (int q = 0; q < 4; q++) {
            uint32_t u;
            memcpy(&u, p + 4 * q, sizeof u);
            const __m256i n = _mm256_srlv_epi32(_mm256_set1_epi32((int)u), sh);
            __m256 v = _mm256_permutevar8x32_ps(q < 2 ? t0 : t1, n);
            v = _mm256_xor_ps(v, _mm256_castsi256_ps(_mm256_and_si256(_mm256_slli_epi32(n, 28), sgn)));
#pragma GCC unroll 4
            for (int i = 0; i < nr; i++)
                cacc[i][j] = _mm256_fmadd_ps(_mm256_loadu_ps(x + i * c->ldx + e + 8 * q), v, cacc[i][j]);
        }
    }
}

/* One k slice (k <= SYK_KC) of an nr x mr tile; x and out already offset; kabs: absolute k of x[0]; pf: see
 * qprefetch. Every (row of x, weight row) pair sums its products in k order, 8 lanes, whichever loop below ran
 * them: the same bits for any tile shape. */
INL void qslice(const syk_qcall *c, const float *x, float *out, int64_t j0, int64_t kabs, int64_t k, int acc,
                const uint8_t *pf, const int nr, const int mr, const int dt)
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
    __m256 cacc[QNR][QMR];
#pragma GCC unroll 8
    for (int i = 0; i < nr; i++)
#pragma GCC unroll 8
        for (int j = 0; j < mr; j++)
            cacc[i][j] = _mm256_setzero_ps();
    int64_t kk = 0, bc = kabs / b1;
    if (dt == NVF4 && b1 == 16 && kabs % 16 == 0) {
        /* NVFP4: 8 blocks' FP8 scales are decoded as one vector (as deq8 decodes FP8 weights) and each block
         * broadcasts its own, instead of a scalar conversion per block and row: the same values, products and
         * order. */
        const __m256 k256 = _mm256_set1_ps(256.0f), gs = _mm256_set1_ps(w->global_scale);
        for (; kk + 128 <= k; kk += 128, bc += 8) {
            /* row j's 8 block scales at sv[j], in L1 (16 registers cannot hold them): one vector store per row,
             * where a [block][row] layout took 8 scalar extracts per row (~10% of NVFP4's decode time) */
            float sv[QMR][8] __attribute__((aligned(32)));
#pragma GCC unroll 8
            for (int j = 0; j < mr; j++)
                _mm256_store_ps(sv[j], _mm256_mul_ps(_mm256_mul_ps(deq8((const uint8_t *)w->scale + srow[j], bc, FP8), k256), gs));
            for (int b = 0; b < 8; b += 2)
                fp4_step(c, x, wr, kabs, kk + 16 * b, &sv[0][b], &sv[0][b + 1], 8, pf, cacc, nr, mr, dt);
        }
    }
    if (dt == MXF4 && b1 == 32 && kabs % 32 == 0) {
        /* As NVFP4 above: 8 blocks' E8M0 scales decoded as one vector (syk_e8m0_to_f32's values, 0 and 0xff
         * included), times the global scale, one store per row. */
        const __m256 gs = _mm256_set1_ps(w->global_scale);
        const __m256i zero = _mm256_setzero_si256(), ff = _mm256_set1_epi32(0xff);
        for (; kk + 256 <= k; kk += 256, bc += 8) {
            float sv[QMR][8] __attribute__((aligned(32)));
#pragma GCC unroll 8
            for (int j = 0; j < mr; j++) {
                const __m256i e = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)((const uint8_t *)w->scale + srow[j] + bc)));
                __m256i u = _mm256_slli_epi32(e, 23);
                u = _mm256_blendv_epi8(u, _mm256_set1_epi32(0x00400000), _mm256_cmpeq_epi32(e, zero));
                u = _mm256_blendv_epi8(u, _mm256_set1_epi32(0x7fc00000), _mm256_cmpeq_epi32(e, ff));
                _mm256_store_ps(sv[j], _mm256_mul_ps(_mm256_castsi256_ps(u), gs));
            }
            for (int b = 0; b < 8; b++)
                fp4_step(c, x, wr, kabs, kk + 32 * b, &sv[0][b], &sv[0][b], 8, pf, cacc, nr, mr, dt);
        }
        for (; kk + 32 <= k; kk += 32, bc++) {
            float s[QMR];
#pragma GCC unroll 8
            for (int j = 0; j < mr; j++)
                s[j] = blk_scale(w, srow[j], bc, dt);
            fp4_step(c, x, wr, kabs, kk, s, s, 1, pf, cacc, nr, mr, dt);
        }
    }
    while (kk < k) {
        int64_t bend = (bc + 1) * b1 - kabs;
        if (bend > k)
            bend = k;
        float s[QMR], sf[QMR];
        int big = 0;
#pragma GCC unroll 8
        for (int j = 0; j < mr; j++) {
            s[j] = blk_scale(w, srow[j], bc, dt);
            sf[j] = fold(s[j], dt, &big);
        }
        if (dt == FP8)
            kk = big ? fp8_block(c, x, wr, kabs, kk, bend, sf, s, pf, cacc, nr, mr, 1)
                     : fp8_block(c, x, wr, kabs, kk, bend, sf, s, pf, cacc, nr, mr, 0);
        for (; kk + 8 <= bend; kk += 8) {
            qprefetch(pf, kabs, kk, mr, dt);
#pragma GCC unroll 8
            for (int j = 0; j < mr; j++) {
                const __m256 wv = wscale(deq8(wr[j], kabs + kk, dt), sf[j], s[j], dt, big);
#pragma GCC unroll 4
                for (int i = 0; i < nr; i++)
                    cacc[i][j] = _mm256_fmadd_ps(_mm256_loadu_ps(x + i * c->ldx + kk), wv, cacc[i][j]);
            }
        }
        if (kk < bend) { /* the row's tail: only at the end of k */
            const int64_t cnt = bend - kk;
            const __m256i mk = lane_mask(cnt);
#pragma GCC unroll 8
            for (int j = 0; j < mr; j++) {
                const __m256 wv = wscale(deq8_part(wr[j], kabs + kk, cnt, dt), sf[j], s[j], dt, big);
#pragma GCC unroll 4
                for (int i = 0; i < nr; i++)
                    cacc[i][j] = _mm256_fmadd_ps(_mm256_maskload_ps(x + i * c->ldx + kk, mk), wv, cacc[i][j]);
            }
            kk = bend;
        }
        bc++;
    }
#pragma GCC unroll 4
    for (int i = 0; i < nr; i++)
#pragma GCC unroll 8
        for (int j = 0; j < mr; j++) {
            const float v = hsum8(cacc[i][j]);
            float *o = out + i * c->ldo + j;
            *o = acc ? *o + v : v;
        }
}

/* An nr x mr tile over the call's whole k, in SYK_KC slices (sykern.h). */
INL void qtile(const syk_qcall *c, int64_t i0, int64_t j, const uint8_t *pf, const int nr, const int mr,
               const int dt)
{
    for (int64_t s = 0; s < c->k; s += SYK_KC) {
        const int64_t len = c->k - s < SYK_KC ? c->k - s : SYK_KC;
        qslice(c, c->x + i0 * c->ldx + s, c->out + i0 * c->ldo + j, c->j0 + j, c->k0 + s, len,
               c->accumulate || s > 0, pf, nr, mr, dt);
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
            int big = 0;
            const float sf = fold(s, dt, &big);
            if (big)
                for (; kk + 8 <= bend; kk += 8)
                    _mm256_storeu_ps(dst + kk, wscale(deq8(row, kabs + kk, dt), sf, s, dt, 1));
            for (; kk + 8 <= bend; kk += 8)
                _mm256_storeu_ps(dst + kk, wscale(deq8(row, kabs + kk, dt), sf, s, dt, 0));
            if (kk < bend) {
                const int64_t cnt = bend - kk;
                _mm256_maskstore_ps(dst + kk, lane_mask(cnt), wscale(deq8_part(row, kabs + kk, cnt, dt), sf, s, dt, big));
                kk = bend;
            }
            bc++;
        }
    }
}

INL void bslice(const syk_qcall *c, const float *x, float *out, const float *wb, int64_t k, int acc, const int nr,
                const int mr)
{
    __m256 cacc[3][4];
#pragma GCC unroll 8
    for (int i = 0; i < nr; i++)
#pragma GCC unroll 4
        for (int j = 0; j < mr; j++)
            cacc[i][j] = _mm256_setzero_ps();
    int64_t kk = 0;
    for (; kk + 8 <= k; kk += 8) {
        __m256 wv[4];
#pragma GCC unroll 4
        for (int j = 0; j < mr; j++)
            wv[j] = _mm256_loadu_ps(wb + j * SYK_KC + kk);
#pragma GCC unroll 8
        for (int i = 0; i < nr; i++) {
            const __m256 xv = _mm256_loadu_ps(x + i * c->ldx + kk);
#pragma GCC unroll 4
            for (int j = 0; j < mr; j++)
                cacc[i][j] = _mm256_fmadd_ps(xv, wv[j], cacc[i][j]);
        }
    }
    if (kk < k) {
        const __m256i mk = lane_mask(k - kk);
        __m256 wv[4];
#pragma GCC unroll 4
        for (int j = 0; j < mr; j++)
            wv[j] = _mm256_maskload_ps(wb + j * SYK_KC + kk, mk);
#pragma GCC unroll 8
        for (int i = 0; i < nr; i++) {
            const __m256 xv = _mm256_maskload_ps(x + i * c->ldx + kk, mk);
#pragma GCC unroll 4
            for (int j = 0; j < mr; j++)
                cacc[i][j] = _mm256_fmadd_ps(xv, wv[j], cacc[i][j]);
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < nr; i++)
#pragma GCC unroll 4
        for (int j = 0; j < mr; j++) {
            const float v = hsum8(cacc[i][j]);
            float *o = out + i * c->ldo + j;
            *o = acc ? *o + v : v;
        }
}

INL void brows(const syk_qcall *c, int64_t j, const float *wb, const int mr)
{
    int64_t i = 0;
    for (; i + 3 <= c->n; i += 3)
        bslice(c, c->x + i * c->ldx, c->out + i * c->ldo + j, wb, c->k, c->accumulate, 3, mr);
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
    const size_t rowb = (size_t)(dt == FP8 ? c->w->shape[1] : c->w->shape[1] / 2);
    int64_t j = 0;
    /* Decode: the next QMR rows (back to back in a quantised weight) are prefetched while these compute. */
    if (c->n == 1)
        for (; j + QMR <= c->m; j += QMR)
            qtile(c, 0, j,
                  j + 2 * QMR <= c->m ? (const uint8_t *)c->w->data + (size_t)(c->j0 + j + QMR) * rowb : NULL, 1,
                  QMR, dt);
    for (; j + 4 <= c->m; j += 4) {
        int64_t i = 0;
        for (; i + QNR <= c->n; i += QNR)
            qtile(c, i, j, NULL, QNR, 4, dt);
        if (i < c->n)
            qtile(c, i, j, NULL, 1, 4, dt);
    }
    for (; j < c->m; j++) {
        int64_t i = 0;
        for (; i + QNR <= c->n; i += QNR)
            qtile(c, i, j, NULL, QNR, 1, dt);
        for (; i < c->n; i++)
            qtile(c, i, j, NULL, 1, 1, dt);
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

syk_qgemm_fn syk__qgemm_avx2(sy_dtype dt)
{
    return dt == SY_DTYPE_FP8_E4M3 ? qgemm_fp8 : dt == SY_DTYPE_FP4_E2M1 ? qgemm_fp4 : NULL;
}

#else /* not x86-64 */

syk_qgemm_fn syk__qgemm_avx2(sy_dtype dt)
{
    (void)dt;
    return NULL;
}

#endif
