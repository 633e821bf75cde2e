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

/* E4M3 bits placed in F16's (deq16, fp8_to_f16) read q * 2^-8: FP8 scales carry the 2^8. */
#define P8 256.0f

/*
 * E4M3 to F16 bits: sign-extended to 16 bits and shifted by 7, exponent and
 * mantissa sit in bits 7..13 and the sign (copied into 14 and 15) is masked
 * to bit 15. E4M3 subnormals become F16 subnormals, which vcvtph2ps widens
 * at full speed (F32 bits would make F32 subnormals: a microcode assist per
 * multiply, measured 15x slower).
 */
INL __m256i fp8_to_f16(__m256i sext)
{
    return _mm256_and_si256(_mm256_slli_epi16(sext, 7), _mm256_set1_epi16((short)0xbf80));
}

/*
 * 16 elements of a weight row starting at element e, not yet scaled (FP8:
 * q * 2^-8, see above). vb: the CPU has AVX512_VBMI (one vpmultishiftqb
 * spreads the nibbles instead of vpshufb + vpsrlvd).
 */
INL __m512 deq16(const uint8_t *row, int64_t e, const int dt, const int vb)
{
    if (dt == FP8)
        return _mm512_cvtph_ps(fp8_to_f16(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(row + e)))));
    const __m512 lut = _mm512_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, -0.0f, -0.5f, -1.0f, -1.5f,
                                      -2.0f, -3.0f, -4.0f, -6.0f);
    /* The row's 8 bytes in every qword; lane l wants nibble l (byte l/2, low nibble first) in its low 4 bits,
     * the only bits vpermps reads. */
    uint64_t u;
    memcpy(&u, row + e / 2, sizeof u);
    const __m512i v = _mm512_set1_epi64((long long)u);
    __m512i idx;
    if (vb) {
        /* lane l's low byte = the 8 bits at offset 4l of its qword (vpmultishiftqb, by asm: the rest of the
         * file is compiled without VBMI so no other instruction needs it) */
        const __m512i ctl = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60);
        __asm__("vpmultishiftqb %2, %1, %0" : "=v"(idx) : "v"(ctl), "v"(v));
    } else {
        const __m512i pick = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
        const __m512i sh = _mm512_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4);
        idx = _mm512_srlv_epi32(_mm512_shuffle_epi8(v, pick), sh);
    }
    return _mm512_permutexvar_ps(idx, lut);
}

/* The last cnt (< 16) elements: copied into a zeroed buffer, so nothing past the row is read. */
INL __m512 deq16_part(const uint8_t *row, int64_t e, int64_t cnt, const int dt, const int vb)
{
    uint8_t buf[16] = {0};
    if (dt == FP8) {
        memcpy(buf, row + e, (size_t)cnt);
        return deq16(buf, 0, dt, vb);
    }
    memcpy(buf, row + e / 2, (size_t)(cnt + 1) / 2);
    return deq16(buf, 0, dt, vb);
}

/* Block scale of weight row `row`, block column bc: syk__qscale's value (FP8 without the 2^8). */
INL float blk_scale(const sy_tensor *w, int64_t srow, int64_t bc, const int dt)
{
    if (dt == FP8)
        return ((const float *)w->scale)[srow + bc] * w->global_scale;
    if (dt == MXF4)
        return syk_e8m0_to_f32(((const uint8_t *)w->scale)[srow + bc]) * w->global_scale;
    return syk_fp8_e4m3_to_f32(((const uint8_t *)w->scale)[srow + bc]) * w->global_scale;
}

/*
 * q * s, the F32 product the portable path computes. FP8: d is q * 2^-8,
 * sf is s * 2^8 (exact: a power of two), so one multiply rounds the same
 * real product; where s * 2^8 would overflow (`big`), d is first made q
 * exactly, then multiplied by s.
 */
INL __m512 wscale(__m512 d, float sf, float s, const int dt, const int big)
{
    if (dt == FP8 && big)
        return _mm512_mul_ps(_mm512_mul_ps(d, _mm512_set1_ps(P8)), _mm512_set1_ps(s));
    return _mm512_mul_ps(d, _mm512_set1_ps(dt == FP8 ? sf : s));
}

/* FP8: s[j] * 2^8 into sf; 1 if any of them overflows (then the two-multiply wscale). */
INL int fp8_fold(const float *s, float *sf, const int mr)
{
    int big = 0;
#pragma GCC unroll 8
    for (int j = 0; j < mr; j++) {
        sf[j] = s[j] * P8;
        big |= !(sf[j] <= 0x1.fffffep127f && sf[j] >= -0x1.fffffep127f);
    }
    return big;
}

/*
 * FP8 rows of one slice to F16 bits in fb (row stride SYK_KC), 32 at a time,
 * zero past k up to a multiple of 32. The products then widen them with
 * vcvtph2ps from memory: the load port does the work the register form's
 * shuffle uop would.
 */
INL void fp8_rows_f16(const uint8_t *const *wr, int64_t kabs, int64_t k, uint16_t *fb, const int mr)
{
    for (int j = 0; j < mr; j++) {
        const uint8_t *src = wr[j] + kabs;
        uint16_t *dst = fb + (size_t)j * SYK_KC;
        int64_t kk = 0;
        for (; kk + 32 <= k; kk += 32) {
            const __m512i h = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(src + kk)));
            _mm512_store_si512(dst + kk, _mm512_and_si512(_mm512_slli_epi16(h, 7), _mm512_set1_epi16((short)0xbf80)));
        }
        if (kk < k) {
            uint8_t tail[32] = {0};
            memcpy(tail, src + kk, (size_t)(k - kk));
            const __m512i h = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)tail));
            _mm512_store_si512(dst + kk, _mm512_and_si512(_mm512_slli_epi16(h, 7), _mm512_set1_epi16((short)0xbf80)));
        }
    }
}

/* A weight vector for qblock: FP8 from the slice's F16 buffer (see fp8_rows_f16), FP4 from the row. */
INL __m512 deqv(const uint8_t *row, const uint16_t *fbrow, int64_t kabs, int64_t kk, const int dt, const int vb)
{
    if (dt == FP8)
        return _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(fbrow + kk)));
    return deq16(row, kabs + kk, dt, vb);
}

/*
 * Steps [kk, bend) of one scale block (all full vectors) of an nr x mr tile.
 * pf, when set, is the next mr weight rows (one contiguous block, rows of rowb
 * bytes): this step's share of it is prefetched in address order, as the
 * float GEMV does (README "GEMV streaming").
 */
INL int64_t qblock(const syk_qcall *c, const float *x, const uint8_t *const *wr, const uint16_t *fb, int64_t kabs,
                   int64_t kk, int64_t bend, const float *sf, const float *s, const uint8_t *pf, __m512 (*cacc)[QMR],
                   const int nr, const int mr, const int dt, const int vb, const int big)
{
    for (; kk + 16 <= bend; kk += 16) {
        __m512 wv[QMR];
#pragma GCC unroll 8
        for (int j = 0; j < mr; j++)
            wv[j] = wscale(deqv(wr[j], fb + (size_t)j * SYK_KC, kabs, kk, dt, vb), sf[j], s[j], dt, big);
        if (pf) {
            /* mr rows of 16 elements: 128 bytes of FP8, 64 of FP4 */
            const uint8_t *p = pf + (size_t)(kabs + kk) * (size_t)mr / (dt == FP8 ? 1u : 2u);
            _mm_prefetch((const char *)p, _MM_HINT_T0);
            if (dt == FP8)
                _mm_prefetch((const char *)p + 64, _MM_HINT_T0);
        }
#pragma GCC unroll 4
        for (int i = 0; i < nr; i++) {
            const __m512 xv = _mm512_loadu_ps(x + i * c->ldx + kk);
#pragma GCC unroll 8
            for (int j = 0; j < mr; j++)
                cacc[i][j] = _mm512_fmadd_ps(xv, wv[j], cacc[i][j]);
        }
    }
    return kk;
}

/*
 * One k slice (k <= SYK_KC) of an nr x mr tile; x and out already offset; kabs: absolute k of x[0]; pf: see
 * qblock.
 */
INL void qslice(const syk_qcall *c, const float *x, float *out, int64_t j0, int64_t kabs, int64_t k, int acc,
                const uint8_t *pf, const int nr, const int mr, const int dt, const int vb)
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
    uint16_t fb[QMR * SYK_KC] __attribute__((aligned(64))); /* FP8 only (unused, so dropped, for FP4) */
    if (dt == FP8)
        fp8_rows_f16(wr, kabs, k, fb, mr);
    int64_t kk = 0, bc = kabs / b1;
    if (dt == NVF4 && b1 == 16 && kabs % 16 == 0) {
        /* NVFP4 has a scale per 16 elements: converting each one alone (and broadcasting it) cost as much as
         * the products. Here 16 blocks' FP8 scales become one vector, the way deq16 turns FP8 into F32 (the
         * same value as syk_fp8_e4m3_to_f32 times the global scale), stored, and each block's products
         * broadcast theirs from memory (a load, not a shuffle): the same products in the same order. */
        const __m512 gs = _mm512_set1_ps(w->global_scale);
        float sv[QMR][16] __attribute__((aligned(64)));
        for (; kk + 256 <= k; kk += 256, bc += 16) {
#pragma GCC unroll 8
            for (int j = 0; j < mr; j++)
                _mm512_store_ps(sv[j], _mm512_mul_ps(_mm512_mul_ps(deq16((const uint8_t *)w->scale + srow[j], bc,
                                                                           FP8, vb),
                                                                     _mm512_set1_ps(P8)),
                                                       gs));
            for (int b = 0; b < 16; b++) {
                float sb[QMR];
#pragma GCC unroll 8
                for (int j = 0; j < mr; j++)
                    sb[j] = sv[j][b];
                qblock(c, x, wr, fb, kabs, kk + 16 * b, kk + 16 * b + 16, sb, sb, pf, cacc, nr, mr, dt, vb, 0);
            }
        }
    }
    while (kk < k) {
        int64_t bend = (bc + 1) * b1 - kabs;
        if (bend > k)
            bend = k;
        float s[QMR], sf[QMR];
#pragma GCC unroll 8
        for (int j = 0; j < mr; j++)
            s[j] = sf[j] = blk_scale(w, srow[j], bc, dt);
        const int big = dt == FP8 && fp8_fold(s, sf, mr);
        if (big)
            kk = qblock(c, x, wr, fb, kabs, kk, bend, sf, s, pf, cacc, nr, mr, dt, vb, 1);
        else
            kk = qblock(c, x, wr, fb, kabs, kk, bend, sf, s, pf, cacc, nr, mr, dt, vb, 0);
        if (kk < bend) { /* the row's tail: only at the end of k */
            const int64_t cnt = bend - kk;
            const __mmask16 mk = (__mmask16)((1u << cnt) - 1u);
            __m512 wv[QMR];
#pragma GCC unroll 8
            for (int j = 0; j < mr; j++) {
                /* FP8: the buffer is zero past k */
                const __m512 d = dt == FP8 ? deqv(wr[j], fb + (size_t)j * SYK_KC, kabs, kk, dt, vb)
                                           : deq16_part(wr[j], kabs + kk, cnt, dt, vb);
                wv[j] = big ? wscale(d, sf[j], s[j], dt, 1) : wscale(d, sf[j], s[j], dt, 0);
            }
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
INL void qtile(const syk_qcall *c, int64_t i0, int64_t j, const uint8_t *pf, const int nr, const int mr,
               const int dt, const int vb)
{
    for (int64_t s = 0; s < c->k; s += SYK_KC) {
        const int64_t len = c->k - s < SYK_KC ? c->k - s : SYK_KC;
        qslice(c, c->x + i0 * c->ldx + s, c->out + i0 * c->ldo + j, c->j0 + j, c->k0 + s, len,
               c->accumulate || s > 0, pf, nr, mr, dt, vb);
    }
}

/*
 * Many rows of x (one SYK_KC slice): each group of weight rows is dequantised
 * once into wb (row stride SYK_KC), exactly as qslice computes it in
 * registers, then every tile of rows reads it from L1. Same products, same
 * sums, so a row's bits do not depend on which path ran it.
 */
INL void deq_rows(const syk_qcall *c, int64_t j0, int64_t kabs, int64_t k, const int mr, const int dt, const int vb,
                  float *wb)
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
            float sf = s;
            const int big = dt == FP8 && fp8_fold(&s, &sf, 1);
            for (; kk + 16 <= bend; kk += 16)
                _mm512_storeu_ps(dst + kk, big ? wscale(deq16(row, kabs + kk, dt, vb), sf, s, dt, 1)
                                               : wscale(deq16(row, kabs + kk, dt, vb), sf, s, dt, 0));
            if (kk < bend) {
                const int64_t cnt = bend - kk;
                const __m512 d = deq16_part(row, kabs + kk, cnt, dt, vb);
                _mm512_mask_storeu_ps(dst + kk, (__mmask16)((1u << cnt) - 1u),
                                      big ? wscale(d, sf, s, dt, 1) : wscale(d, sf, s, dt, 0));
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
INL void qgemm_buffered(const syk_qcall *c, const int dt, const int vb)
{
    float wb[4 * SYK_KC] __attribute__((aligned(64)));
    int64_t j = 0;
    for (; j + 4 <= c->m; j += 4) {
        deq_rows(c, c->j0 + j, c->k0, c->k, 4, dt, vb, wb);
        brows(c, j, wb, 4);
    }
    for (; j < c->m; j++) {
        deq_rows(c, c->j0 + j, c->k0, c->k, 1, dt, vb, wb);
        brows(c, j, wb, 1);
    }
}

INL void qgemm(const syk_qcall *c, const int dt, const int vb)
{
    if (c->n > QNR && c->k <= SYK_KC) {
        qgemm_buffered(c, dt, vb);
        return;
    }
    const sy_tensor *w = c->w;
    const size_t rowb = (size_t)(dt == FP8 ? w->shape[1] : w->shape[1] / 2);
    int64_t j = 0;
    /* Decode: the next QMR rows (back to back in a quantised weight) are prefetched while these compute. */
    if (c->n == 1)
        for (; j + QMR <= c->m; j += QMR)
            qtile(c, 0, j,
                  j + 2 * QMR <= c->m ? (const uint8_t *)w->data + (size_t)(c->j0 + j + QMR) * rowb : NULL, 1,
                  QMR, dt, vb);
    for (; j + 4 <= c->m; j += 4) {
        int64_t i = 0;
        for (; i + QNR <= c->n; i += QNR)
            qtile(c, i, j, NULL, QNR, 4, dt, vb);
        switch (c->n - i) {
        case 3: qtile(c, i, j, NULL, 3, 4, dt, vb); break;
        case 2: qtile(c, i, j, NULL, 2, 4, dt, vb); break;
        case 1: qtile(c, i, j, NULL, 1, 4, dt, vb); break;
        default: break;
        }
    }
    for (; j < c->m; j++) {
        int64_t i = 0;
        for (; i + QNR <= c->n; i += QNR)
            qtile(c, i, j, NULL, QNR, 1, dt, vb);
        for (; i < c->n; i++)
            qtile(c, i, j, NULL, 1, 1, dt, vb);
    }
}

static void qgemm_fp8(const syk_qcall *c)
{
    qgemm(c, SY_DTYPE_FP8_E4M3, 0);
}

static void qgemm_fp4(const syk_qcall *c)
{
    if (c->w->scale_dtype == SY_DTYPE_E8M0)
        qgemm(c, MXF4, 0);
    else
        qgemm(c, NVF4, 0);
}

/* The same with vpmultishiftqb (the asm in deq16): only handed out where CPUID reports AVX512_VBMI. */
static void qgemm_fp4_vbmi(const syk_qcall *c)
{
    if (c->w->scale_dtype == SY_DTYPE_E8M0)
        qgemm(c, MXF4, 1);
    else
        qgemm(c, NVF4, 1);
}

#ifdef __clang__
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

syk_qgemm_fn syk__qgemm_avx512_variant(sy_dtype dt, int vbmi)
{
    if (vbmi && !__builtin_cpu_supports("avx512vbmi"))
        return NULL;
    return dt == SY_DTYPE_FP8_E4M3 ? qgemm_fp8 : dt == SY_DTYPE_FP4_E2M1 ? (vbmi ? qgemm_fp4_vbmi : qgemm_fp4) : NULL;
}

syk_qgemm_fn syk__qgemm_avx512(sy_dtype dt)
{
    return syk__qgemm_avx512_variant(dt, __builtin_cpu_supports("avx512vbmi"));
}

#else /* not x86-64 */

syk_qgemm_fn syk__qgemm_avx512_variant(sy_dtype dt, int vbmi)
{
    (void)dt;
    (void)vbmi;
    return NULL;
}

syk_qgemm_fn syk__qgemm_avx512(sy_dtype dt)
{
    (void)dt;
    return NULL;
}

#endif
