/*
 * AVX-512 kernels (F, BW, VL, DQ; F16C and FMA come with them). Compiled
 * for that target by pragma so the rest of the library stays baseline
 * x86-64 and runs anywhere; only called after syk_isa_usable() said yes.
 *
 * gemm_nt is in "dot" form: x and w rows are both contiguous in k, so the
 * micro-kernel keeps NR x MR vector accumulators (16 lanes of k each),
 * widens every weight vector once and uses it for NR rows of x, and reduces
 * the lanes at the end. Four columns reduce together (transpose-and-add);
 * a lone column uses the same tree, so a column's result does not depend on
 * which kernel shape computed it.
 */
#include "config.h"

#include "sykern.h"

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
#define NR 6 /* rows of x per micro-tile: 6 x 4 accumulators + 4 weights + 1 x = 29 zmm */
#define MR 4 /* rows of w per micro-tile */

INL __m512 load_w(const void *w, int64_t off, const int dt)
{
    if (dt == SY_DTYPE_F32)
        return _mm512_loadu_ps((const float *)w + off);
    const __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)w + off));
    if (dt == SY_DTYPE_F16)
        return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* Masked-off lanes read nothing (no fault past the end of an mmap) and give 0. */
INL __m512 load_w_m(const void *w, int64_t off, const int dt, __mmask16 mk)
{
    if (dt == SY_DTYPE_F32)
        return _mm512_maskz_loadu_ps(mk, (const float *)w + off);
    const __m256i h = _mm256_maskz_loadu_epi16(mk, (const uint16_t *)w + off);
    if (dt == SY_DTYPE_F16)
        return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* [sum a, sum b, sum c, sum d]. */
INL __m128 red4(__m512 a, __m512 b, __m512 c, __m512 d)
{
    const __m512 ab = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
    const __m512 cd = _mm512_add_ps(_mm512_unpacklo_ps(c, d), _mm512_unpackhi_ps(c, d));
    const __m512 s = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(ab), _mm512_castps_pd(cd))),
                                   _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(ab), _mm512_castps_pd(cd))));
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(s),
                                   _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s), 1)));
    return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

INL float red1(__m512 a)
{
    return _mm_cvtss_f32(red4(a, a, a, a));
}

/*
 * out[i][j] (+)= x_i . w_j for an nr x mr tile over all k. pf, when set, is
 * the next weight group: fetched into L1 while this tile computes, so the
 * tiles after it find their weights there instead of waiting on DRAM.
 */
INL void tile_slice(const float *x, int64_t ldx, const void *w, int64_t ldw, float *out, int64_t ldo, int64_t k,
              int accumulate, const char *pf, const int nr, const int mr, const int dt, const int pflin)
{
    const size_t es = dt == SY_DTYPE_F32 ? 4 : 2;
    __m512 c[NR][8];
#pragma GCC unroll 8
    for (int i = 0; i < nr; i++)
#pragma GCC unroll 8
        for (int j = 0; j < mr; j++)
            c[i][j] = _mm512_setzero_ps();
    int64_t kk = 0;
    for (; kk + 16 <= k; kk += 16) {
        __m512 wv[8];
#pragma GCC unroll 8
        for (int j = 0; j < mr; j++)
            wv[j] = load_w(w, j * ldw + kk, dt);
        if (pf && pflin) {
            /* pf: a contiguous block of mr rows; this step's share of it, in order */
#pragma GCC unroll 8
            for (int j = 0; j < (int)(mr * es * 16 / 64); j++)
                _mm_prefetch(pf + (size_t)kk * (size_t)mr * es + (size_t)j * 64, _MM_HINT_T0);
        } else if (pf)
#pragma GCC unroll 8
            for (int j = 0; j < mr; j++)
                _mm_prefetch(pf + ((size_t)j * (size_t)ldw + (size_t)kk) * es, _MM_HINT_T0);
#pragma GCC unroll 8
        for (int i = 0; i < nr; i++) {
            const __m512 xv = _mm512_loadu_ps(x + i * ldx + kk);
#pragma GCC unroll 8
            for (int j = 0; j < mr; j++)
                c[i][j] = _mm512_fmadd_ps(xv, wv[j], c[i][j]);
        }
    }
    if (kk < k) {
        const __mmask16 mk = (__mmask16)((1u << (k - kk)) - 1u);
        __m512 wv[8];
#pragma GCC unroll 8
        for (int j = 0; j < mr; j++)
            wv[j] = load_w_m(w, j * ldw + kk, dt, mk);
#pragma GCC unroll 8
        for (int i = 0; i < nr; i++) {
            const __m512 xv = _mm512_maskz_loadu_ps(mk, x + i * ldx + kk);
#pragma GCC unroll 8
            for (int j = 0; j < mr; j++)
                c[i][j] = _mm512_fmadd_ps(xv, wv[j], c[i][j]);
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < nr; i++) {
        float *o = out + i * ldo;
        int j = 0;
#pragma GCC unroll 4
        for (; j + 4 <= mr; j += 4) {
            __m128 s = red4(c[i][j], c[i][j + 1], c[i][j + 2], c[i][j + 3]);
            if (accumulate)
                s = _mm_add_ps(_mm_loadu_ps(o + j), s);
            _mm_storeu_ps(o + j, s);
        }
#pragma GCC unroll 4
        for (; j < mr; j++) {
            const float s = red1(c[i][j]);
            o[j] = accumulate ? o[j] + s : s;
        }
    }
}

/* The whole k, in SYK_KC slices whose sums go through out in order (see sykern.h). */
INL void tile_pf(const float *x, int64_t ldx, const void *w, int64_t ldw, float *out, int64_t ldo, int64_t k,
              int accumulate, const char *pf, const int nr, const int mr, const int dt, const int pflin)
{
    const size_t es = dt == SY_DTYPE_F32 ? 4 : 2;
    int64_t k0 = 0;
    do {
        const int64_t kc = k - k0 < SYK_KC ? k - k0 : SYK_KC;
        tile_slice(x + k0, ldx, (const char *)w + (size_t)k0 * es, ldw, out, ldo, kc, accumulate || k0 > 0,
                   pf ? pf + (size_t)k0 * es * (pflin ? (size_t)mr : 1u) : NULL, nr, mr, dt, pflin);
        k0 += SYK_KC;
    } while (k0 < k);
}

INL void tile(const float *x, int64_t ldx, const void *w, int64_t ldw, float *out, int64_t ldo, int64_t k,
              int accumulate, const char *pf, const int nr, const int mr, const int dt)
{
    tile_pf(x, ldx, w, ldw, out, ldo, k, accumulate, pf, nr, mr, dt, 0);
}

/* One column group (mr weight rows) against all n rows of x; next: the following group, or NULL. */
INL void col_group(const float *x, int64_t ldx, const void *w, int64_t ldw, float *out, int64_t ldo, int64_t n,
                   int64_t k, int accumulate, const char *next, const int mr, const int dt)
{
    int64_t i = 0;
    /* Prefetch only when several tiles will reuse this group (else the next group streams anyway). */
    const char *pf = n > NR ? next : NULL;
    for (; i + NR <= n; i += NR, pf = NULL)
        tile(x + i * ldx, ldx, w, ldw, out + i * ldo, ldo, k, accumulate, pf, NR, mr, dt);
    const float *xi = x + i * ldx;
    float *oi = out + i * ldo;
    switch (n - i) {
    case 5: tile(xi, ldx, w, ldw, oi, ldo, k, accumulate, pf, 5, mr, dt); break;
    case 4: tile(xi, ldx, w, ldw, oi, ldo, k, accumulate, pf, 4, mr, dt); break;
    case 3: tile(xi, ldx, w, ldw, oi, ldo, k, accumulate, pf, 3, mr, dt); break;
    case 2: tile(xi, ldx, w, ldw, oi, ldo, k, accumulate, pf, 2, mr, dt); break;
    case 1: tile(xi, ldx, w, ldw, oi, ldo, k, accumulate, pf, 1, mr, dt); break;
    default: break;
    }
}

INL void gemm_nt(const float *x, int64_t ldx, const void *w, int64_t ldw, float *out, int64_t ldo, int64_t n,
                 int64_t m, int64_t k, int accumulate, const int dt)
{
    const size_t es = dt == SY_DTYPE_F32 ? 4 : 2;
#define WROW(j) ((const char *)w + (size_t)(j) * (size_t)ldw * es)
    int64_t j = 0;
    /*
     * GEMV: eight weight rows in flight per core for memory-level
     * parallelism. When the rows are back to back, the next eight (one
     * contiguous block) are prefetched in address order while these
     * compute: the eight short row streams alone leave the hardware
     * prefetchers behind (measured +20% decode on the development VM).
     */
    if (n == 1)
        for (; j + 8 <= m; j += 8) {
            if (ldw == k && j + 16 <= m)
                tile_pf(x, ldx, WROW(j), ldw, out + j, ldo, k, accumulate, WROW(j + 8), 1, 8, dt, 1);
            else
                tile(x, ldx, WROW(j), ldw, out + j, ldo, k, accumulate, NULL, 1, 8, dt);
        }
    /* A few rows (batched decode): one tile per group; the same linear prefetch of the next group. */
    if (n > 1 && n <= NR && ldw == k)
        for (; j + 2 * MR <= m; j += MR)
            switch (n) {
            case 6: tile_pf(x, ldx, WROW(j), ldw, out + j, ldo, k, accumulate, WROW(j + MR), 6, MR, dt, 1); break;
            case 5: tile_pf(x, ldx, WROW(j), ldw, out + j, ldo, k, accumulate, WROW(j + MR), 5, MR, dt, 1); break;
            case 4: tile_pf(x, ldx, WROW(j), ldw, out + j, ldo, k, accumulate, WROW(j + MR), 4, MR, dt, 1); break;
            case 3: tile_pf(x, ldx, WROW(j), ldw, out + j, ldo, k, accumulate, WROW(j + MR), 3, MR, dt, 1); break;
            default: tile_pf(x, ldx, WROW(j), ldw, out + j, ldo, k, accumulate, WROW(j + MR), 2, MR, dt, 1); break;
            }
    for (; j + MR <= m; j += MR)
        col_group(x, ldx, WROW(j), ldw, out + j, ldo, n, k, accumulate, j + 2 * MR <= m ? WROW(j + MR) : NULL, MR, dt);
    for (; j < m; j++)
        col_group(x, ldx, WROW(j), ldw, out + j, ldo, n, k, accumulate, NULL, 1, dt);
#undef WROW
}

/*
 * acc[i][d] += sum_j p[i][j] v[j][d] over d chunks of 64 (4 vectors, the
 * last ones masked): nr x 4 accumulators, each widened v vector used nr times.
 */
INL void pv_tile(const float *p, int64_t ldp, const void *v, int64_t ldv, float *acc, int64_t lda, int64_t npos,
                 int64_t d0, int64_t dv, const int nr, const int dt, const int full)
{
    __mmask16 mk[4];
    for (int t = 0; t < 4; t++) {
        const int64_t rem = dv - d0 - 16 * t;
        mk[t] = rem >= 16 ? (__mmask16)0xffff : rem <= 0 ? (__mmask16)0 : (__mmask16)((1u << rem) - 1u);
    }
    __m512 c[NR][4];
#pragma GCC unroll 8
    for (int i = 0; i < nr; i++)
#pragma GCC unroll 4
        for (int t = 0; t < 4; t++)
            c[i][t] = _mm512_maskz_loadu_ps(mk[t], acc + i * lda + d0 + 16 * t);
    for (int64_t j = 0; j < npos; j++) {
        __m512 vv[4];
        /* Plain loads when the chunk is whole: masked loads that miss the cache stall far longer here. */
#pragma GCC unroll 4
        for (int t = 0; t < 4; t++)
            vv[t] = full ? load_w(v, j * ldv + d0 + 16 * t, dt) : load_w_m(v, j * ldv + d0 + 16 * t, dt, mk[t]);
#pragma GCC unroll 8
        for (int i = 0; i < nr; i++) {
            const __m512 pb = _mm512_set1_ps(p[i * ldp + j]);
#pragma GCC unroll 4
            for (int t = 0; t < 4; t++)
                c[i][t] = _mm512_fmadd_ps(pb, vv[t], c[i][t]);
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < nr; i++)
#pragma GCC unroll 4
        for (int t = 0; t < 4; t++)
            _mm512_mask_storeu_ps(acc + i * lda + d0 + 16 * t, mk[t], c[i][t]);
}

INL void pv_rows(const float *p, int64_t ldp, const void *v, int64_t ldv, float *acc, int64_t lda, int64_t n,
                 int64_t npos, int64_t d0, int64_t dv, const int dt, const int full)
{
    int64_t i = 0;
    for (; i + NR <= n; i += NR)
        pv_tile(p + i * ldp, ldp, v, ldv, acc + i * lda, lda, npos, d0, dv, NR, dt, full);
    const float *pi = p + i * ldp;
    float *ai = acc + i * lda;
    switch (n - i) {
    case 5: pv_tile(pi, ldp, v, ldv, ai, lda, npos, d0, dv, 5, dt, full); break;
    case 4: pv_tile(pi, ldp, v, ldv, ai, lda, npos, d0, dv, 4, dt, full); break;
    case 3: pv_tile(pi, ldp, v, ldv, ai, lda, npos, d0, dv, 3, dt, full); break;
    case 2: pv_tile(pi, ldp, v, ldv, ai, lda, npos, d0, dv, 2, dt, full); break;
    case 1: pv_tile(pi, ldp, v, ldv, ai, lda, npos, d0, dv, 1, dt, full); break;
    default: break;
    }
}

INL void gemm_nn_acc(const float *p, int64_t ldp, const void *v, int64_t ldv, float *acc, int64_t lda, int64_t n,
                     int64_t npos, int64_t dv, const int dt)
{
    int64_t d0 = 0;
    for (; d0 + 64 <= dv; d0 += 64)
        pv_rows(p, ldp, v, ldv, acc, lda, n, npos, d0, dv, dt, 1);
    if (d0 < dv)
        pv_rows(p, ldp, v, ldv, acc, lda, n, npos, d0, dv, dt, 0);
}

/* Cephes expf: exp(x) = 2^n * e^r, |r| <= ln2/2, scalef for the 2^n (handles underflow to 0). */
INL __m512 exp16(__m512 x)
{
    /* max/min with the constant first keep a NaN x (they return the second operand on NaN). */
    x = _mm512_min_ps(_mm512_set1_ps(88.0f), _mm512_max_ps(_mm512_set1_ps(-120.0f), x));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 q = _mm512_set1_ps(1.9875691500E-4f);
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.3981999507E-3f));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(8.3334519073E-3f));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(4.1665795894E-2f));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.6666665459E-1f));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(5.0000001201E-1f));
    const __m512 e = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(q, r), r, r), _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(e, n);
}

static void vexp(float *y, const float *x, int64_t n)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, exp16(_mm512_loadu_ps(x + i)));
    if (i < n) {
        const __mmask16 mk = (__mmask16)((1u << (n - i)) - 1u);
        _mm512_mask_storeu_ps(y + i, mk, exp16(_mm512_maskz_loadu_ps(mk, x + i)));
    }
}

#define WRAP(DT, SUF)                                                                                              \
    static void gemm_nt_##SUF(const float *x, int64_t ldx, const void *w, int64_t ldw, float *out, int64_t ldo,   \
                              int64_t n, int64_t m, int64_t k, int accumulate)                                     \
    {                                                                                                              \
        gemm_nt(x, ldx, w, ldw, out, ldo, n, m, k, accumulate, DT);                                                \
    }                                                                                                              \
    static void gemm_nn_acc_##SUF(const float *p, int64_t ldp, const void *v, int64_t ldv, float *acc,            \
                                  int64_t lda, int64_t n, int64_t npos, int64_t dv)                                \
    {                                                                                                              \
        gemm_nn_acc(p, ldp, v, ldv, acc, lda, n, npos, dv, DT);                                                    \
    }
WRAP(SY_DTYPE_F32, f32)
WRAP(SY_DTYPE_F16, f16)
WRAP(SY_DTYPE_BF16, bf16)
#undef WRAP

static const syk_kernels kernels = {
    .isa = SYK_ISA_AVX512,
    .gemm_nt = {gemm_nt_f32, gemm_nt_f16, gemm_nt_bf16},
    .gemm_nn_acc = {gemm_nn_acc_f32, gemm_nn_acc_f16, gemm_nn_acc_bf16},
    .vexp = vexp,
    .softmax_step = syk__softmax_step_avx2,
};

#ifdef __clang__
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

const syk_kernels *syk__kernels_avx512(void)
{
    return &kernels;
}

#else /* not x86-64 */

const syk_kernels *syk__kernels_avx512(void)
{
    return NULL;
}

#endif
