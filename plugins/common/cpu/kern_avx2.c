/*
 * AVX2 + FMA + F16C kernels, the same algorithms as kern_avx512.c with 8
 * lanes and 16 registers: a 2 x 4 micro-tile (8 accumulators + 4 weights +
 * 1 x). Compiled for that target by pragma; only called after
 * syk_isa_usable() said yes.
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include "sykern.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

#ifdef __clang__
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif
#include <immintrin.h>

#define INL static inline __attribute__((always_inline))
#define NR 2
#define MR 4
#define PV_NR 4 /* pv tile: 4 rows x 2 vectors of d + 2 v + 1 broadcast (6 rows measured 1.3-2x slower on Zen 3) */
#define WR 3       /* wide path: 3 x 4 micro-tile (12 accumulators + 3 x + 1 weight) */
#ifndef SYK_AVX2_WIDE_MIN
#define SYK_AVX2_WIDE_MIN 3 /* from this many rows of x, the wide path */
#endif
#define WLD (SYK_KC + 16) /* row stride of the widened slice: rows 4 KB apart would share L1 sets */

INL __m256 widen16(__m128i h, const int dt)
{
    if (dt == SY_DTYPE_F16)
        return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

INL __m256 load_w(const void *w, int64_t off, const int dt)
{
    if (dt == SY_DTYPE_F32)
        return _mm256_loadu_ps((const float *)w + off);
    return widen16(_mm_loadu_si128((const __m128i *)((const uint16_t *)w + off)), dt);
}

INL __m256i lane_mask(int64_t cnt)
{
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)cnt), idx);
}

/* The first cnt (< 8) elements, zeros after; never reads past them. */
INL __m256 load_w_part(const void *w, int64_t off, const int dt, int64_t cnt)
{
    if (cnt <= 0)
        return _mm256_setzero_ps();
    if (dt == SY_DTYPE_F32)
        return _mm256_maskload_ps((const float *)w + off, lane_mask(cnt));
    uint16_t buf[8] = {0};
    memcpy(buf, (const uint16_t *)w + off, sizeof(uint16_t) * (size_t)cnt);
    return widen16(_mm_loadu_si128((const __m128i *)buf), dt);
}

INL __m128 red4(__m256 a, __m256 b, __m256 c, __m256 d)
{
    const __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
    return _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
}

INL float red1(__m256 a)
{
    return _mm_cvtss_f32(red4(a, a, a, a));
}

/* As in kern_avx512.c: pf, when set, is the next weight group, fetched while this tile computes. */
INL void tile_slice(const float *x, int64_t ldx, const void *w, int64_t ldw, float *out, int64_t ldo, int64_t k,
              int accumulate, const char *pf, const int nr, const int mr, const int dt, const int pflin)
{
    const size_t es = dt == SY_DTYPE_F32 ? 4 : 2;
    __m256 c[WR][8];
#pragma GCC unroll 8
    for (int i = 0; i < nr; i++)
#pragma GCC unroll 8
        for (int j = 0; j < mr; j++)
            c[i][j] = _mm256_setzero_ps();
    int64_t kk = 0;
    for (; kk + 8 <= k; kk += 8) {
        __m256 wv[8];
#pragma GCC unroll 8
        for (int j = 0; j < mr; j++)
            wv[j] = load_w(w, j * ldw + kk, dt);
        if (pf && pflin) {
            /* pf: a contiguous block of mr rows; this step's share of it, in address order */
#pragma GCC unroll 8
            for (int j = 0; j < (int)(mr * es * 8 / 64); j++)
                _mm_prefetch(pf + (size_t)kk * (size_t)mr * es + (size_t)j * 64, _MM_HINT_T0);
        } else if (pf && (kk & 15) == 0) /* one prefetch per 64-byte line at F32, two at 16-bit */
#pragma GCC unroll 8
            for (int j = 0; j < mr; j++)
                _mm_prefetch(pf + ((size_t)j * (size_t)ldw + (size_t)kk) * es, _MM_HINT_T0);
#pragma GCC unroll 8
        for (int i = 0; i < nr; i++) {
            const __m256 xv = _mm256_loadu_ps(x + i * ldx + kk);
#pragma GCC unroll 8
            for (int j = 0; j < mr; j++)
                c[i][j] = _mm256_fmadd_ps(xv, wv[j], c[i][j]);
        }
    }
    if (kk < k) {
        const int64_t cnt = k - kk;
        __m256 wv[8];
#pragma GCC unroll 8
        for (int j = 0; j < mr; j++)
            wv[j] = load_w_part(w, j * ldw + kk, dt, cnt);
#pragma GCC unroll 8
        for (int i = 0; i < nr; i++) {
            const __m256 xv = _mm256_maskload_ps(x + i * ldx + kk, lane_mask(cnt));
#pragma GCC unroll 8
            for (int j = 0; j < mr; j++)
                c[i][j] = _mm256_fmadd_ps(xv, wv[j], c[i][j]);
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < nr; i++) {
        float *o = out + i * ldo;
        int j = 0;
#pragma GCC unroll 2
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

INL void col_group(const float *x, int64_t ldx, const void *w, int64_t ldw, float *out, int64_t ldo, int64_t n,
                   int64_t k, int accumulate, const char *next, const int mr, const int dt)
{
    int64_t i = 0;
    const char *pf = n > NR ? next : NULL;
    for (; i + NR <= n; i += NR, pf = NULL)
        tile(x + i * ldx, ldx, w, ldw, out + i * ldo, ldo, k, accumulate, pf, NR, mr, dt);
    if (i < n)
        tile(x + i * ldx, ldx, w, ldw, out + i * ldo, ldo, k, accumulate, pf, 1, mr, dt);
}

/*
 * The wide path: for each group of 4 weight rows and k slice, the weights
 * are widened once into an F32 copy in L1 (BF16/F16; F32 weights are read
 * in place) and every 3 rows of x run against it: 12 FMAs per 3 x + 4 weight
 * loads and no widening in the inner loop, where the 2 x 4 tile spent a
 * shuffle and a shift per 2 FMAs on BF16. Each accumulator still sums its
 * k lanes from zero in slice order, the tail as one masked step, and is
 * reduced by the same red4 tree, so every output has the bits of tile().
 * x is held in registers and the weights streamed, so the rows of x (from
 * L2) cost 3 loads per 12 FMAs, no more than the 2 x 4 tile's 2 per 8.
 */
INL void wtile(const float *x, int64_t ldx, const float *wf, int64_t ldf, float *out, int64_t ldo, int64_t k,
               int accumulate, const int nr)
{
    __m256 c[WR][4];
#pragma GCC unroll 4
    for (int i = 0; i < nr; i++)
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++)
            c[i][j] = _mm256_setzero_ps();
    int64_t kk = 0;
    for (; kk + 8 <= k; kk += 8) {
        __m256 xv[WR];
#pragma GCC unroll 4
        for (int i = 0; i < nr; i++)
            xv[i] = _mm256_loadu_ps(x + i * ldx + kk);
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            const __m256 wv = _mm256_loadu_ps(wf + j * ldf + kk);
#pragma GCC unroll 4
            for (int i = 0; i < nr; i++)
                c[i][j] = _mm256_fmadd_ps(xv[i], wv, c[i][j]);
        }
    }
    if (kk < k) {
        const __m256i mk = lane_mask(k - kk);
        __m256 xv[WR];
#pragma GCC unroll 4
        for (int i = 0; i < nr; i++)
            xv[i] = _mm256_maskload_ps(x + i * ldx + kk, mk);
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            const __m256 wv = _mm256_maskload_ps(wf + j * ldf + kk, mk);
#pragma GCC unroll 4
            for (int i = 0; i < nr; i++)
                c[i][j] = _mm256_fmadd_ps(xv[i], wv, c[i][j]);
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < nr; i++) {
        __m128 s = red4(c[i][0], c[i][1], c[i][2], c[i][3]);
        if (accumulate)
            s = _mm_add_ps(_mm_loadu_ps(out + i * ldo), s);
        _mm_storeu_ps(out + i * ldo, s);
    }
}

/* 4 weight rows of dtype dt, k elements from w (row stride ldw), as F32 into buf (row stride WLD). */
INL void widen_rows(float *buf, const void *w, int64_t ldw, int64_t k, const int dt)
{
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        int64_t kk = 0;
        for (; kk + 8 <= k; kk += 8)
            _mm256_store_ps(buf + j * WLD + kk, load_w(w, j * ldw + kk, dt));
        if (kk < k)
            _mm256_store_ps(buf + j * WLD + kk, load_w_part(w, j * ldw + kk, dt, k - kk));
    }
}

INL void gemm_wide(const float *x, int64_t ldx, const void *w, int64_t ldw, float *out, int64_t ldo, int64_t n,
                   int64_t m, int64_t k, int accumulate, const int dt)
{
    const size_t es = dt == SY_DTYPE_F32 ? 4 : 2;
    float buf[4 * WLD] __attribute__((aligned(64)));
    int64_t j = 0;
    for (; j + 4 <= m; j += 4) {
        const char *wj = (const char *)w + (size_t)j * (size_t)ldw * es;
        int64_t k0 = 0;
        do {
            const int64_t kc = k - k0 < SYK_KC ? k - k0 : SYK_KC;
            const int acc = accumulate || k0 > 0;
            const float *wf = buf;
            int64_t ldf = WLD;
            if (dt == SY_DTYPE_F32) {
                wf = (const float *)wj + k0;
                ldf = ldw;
            } else
                widen_rows(buf, wj + (size_t)k0 * es, ldw, kc, dt);
            int64_t i = 0;
            for (; i + WR <= n; i += WR)
                wtile(x + i * ldx + k0, ldx, wf, ldf, out + i * ldo + j, ldo, kc, acc, WR);
            if (n - i == 2)
                wtile(x + i * ldx + k0, ldx, wf, ldf, out + i * ldo + j, ldo, kc, acc, 2);
            else if (n - i == 1)
                wtile(x + i * ldx + k0, ldx, wf, ldf, out + i * ldo + j, ldo, kc, acc, 1);
            k0 += SYK_KC;
        } while (k0 < k);
    }
    for (; j < m; j++)
        col_group(x, ldx, (const char *)w + (size_t)j * (size_t)ldw * es, ldw, out + j, ldo, n, k, accumulate, NULL,
                  1, dt);
}

INL void gemm_nt(const float *x, int64_t ldx, const void *w, int64_t ldw, float *out, int64_t ldo, int64_t n,
                 int64_t m, int64_t k, int accumulate, const int dt)
{
    const size_t es = dt == SY_DTYPE_F32 ? 4 : 2;
#define WROW(j) ((const char *)w + (size_t)(j) * (size_t)ldw * es)
    if (n >= SYK_AVX2_WIDE_MIN) {
        gemm_wide(x, ldx, w, ldw, out, ldo, n, m, k, accumulate, dt);
        return;
    }
    int64_t j = 0;
    if (n == 1) /* GEMV: eight weight rows in flight; the next eight prefetched in address order (kern_avx512.c) */
        for (; j + 8 <= m; j += 8) {
            if (ldw == k && j + 16 <= m)
                tile_pf(x, ldx, WROW(j), ldw, out + j, ldo, k, accumulate, WROW(j + 8), 1, 8, dt, 1);
            else
                tile(x, ldx, WROW(j), ldw, out + j, ldo, k, accumulate, NULL, 1, 8, dt);
        }
    for (; j + MR <= m; j += MR)
        col_group(x, ldx, WROW(j), ldw, out + j, ldo, n, k, accumulate, j + 2 * MR <= m ? WROW(j + MR) : NULL, MR, dt);
    for (; j < m; j++)
        col_group(x, ldx, WROW(j), ldw, out + j, ldo, n, k, accumulate, NULL, 1, dt);
#undef WROW
}

/*
 * acc[i][d0..d0+8nv) += sum_j p[i][j] v[j][d0..d0+8nv), the vectors past dv
 * partial or absent. Every accumulator adds the positions in order, one
 * FMA each, so the tile's shape never changes a bit; it only decides how
 * many independent FMA chains there are: decode's single row takes 8
 * vectors (64 of d) at once, since with 2 its two chains waited out the
 * FMA latency at every position.
 */
INL void pv_tile(const float *p, int64_t ldp, const void *v, int64_t ldv, float *acc, int64_t lda, int64_t npos,
                 int64_t d0, int64_t dv, const int nr, const int nv, const int dt)
{
    int64_t rem[8];
    __m256i mk[8];
#pragma GCC unroll 8
    for (int t = 0; t < nv; t++) {
        const int64_t r = dv - d0 - 8 * t;
        rem[t] = r < 0 ? 0 : r < 8 ? r : 8;
        mk[t] = lane_mask(rem[t]);
    }
    __m256 c[PV_NR][8];
#pragma GCC unroll 4
    for (int i = 0; i < nr; i++)
#pragma GCC unroll 8
        for (int t = 0; t < nv; t++)
            c[i][t] = rem[t] == 8 ? _mm256_loadu_ps(acc + i * lda + d0 + 8 * t)
                                  : _mm256_maskload_ps(acc + i * lda + d0 + 8 * t, mk[t]);
    for (int64_t j = 0; j < npos; j++) {
        __m256 vv[8];
#pragma GCC unroll 8
        for (int t = 0; t < nv; t++)
            vv[t] = rem[t] == 8 ? load_w(v, j * ldv + d0 + 8 * t, dt)
                                : load_w_part(v, j * ldv + d0 + 8 * t, dt, rem[t]);
#pragma GCC unroll 4
        for (int i = 0; i < nr; i++) {
            const __m256 pb = _mm256_broadcast_ss(p + i * ldp + j);
#pragma GCC unroll 8
            for (int t = 0; t < nv; t++)
                c[i][t] = _mm256_fmadd_ps(pb, vv[t], c[i][t]);
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < nr; i++)
#pragma GCC unroll 8
        for (int t = 0; t < nv; t++)
            if (rem[t] == 8) /* masked stores are microcoded on AMD: a dozen cycles each on Zen 3 */
                _mm256_storeu_ps(acc + i * lda + d0 + 8 * t, c[i][t]);
            else
                _mm256_maskstore_ps(acc + i * lda + d0 + 8 * t, mk[t], c[i][t]);
}

INL void pv_rows(const float *p, int64_t ldp, const void *v, int64_t ldv, float *acc, int64_t lda, int64_t n,
                 int64_t npos, int64_t d0, int64_t dv, const int dt)
{
    int64_t i = 0;
    for (; i + PV_NR <= n; i += PV_NR)
        pv_tile(p + i * ldp, ldp, v, ldv, acc + i * lda, lda, npos, d0, dv, PV_NR, 2, dt);
    const float *pi = p + i * ldp;
    float *ai = acc + i * lda;
    switch (n - i) {
    case 3: pv_tile(pi, ldp, v, ldv, ai, lda, npos, d0, dv, 3, 2, dt); break;
    case 2: pv_tile(pi, ldp, v, ldv, ai, lda, npos, d0, dv, 2, 2, dt); break;
    case 1: pv_tile(pi, ldp, v, ldv, ai, lda, npos, d0, dv, 1, 2, dt); break;
    default: break;
    }
}

/*
 * With more than one tile of rows (prefill), a BF16/F16 V slice would be
 * widened again by every row tile: 4 widening uops per 8 FMAs. Widened
 * once into an F32 copy in L1 instead, the row tiles run the F32 loop
 * against it. Positions go in chunks (PV_CHUNK x 16 floats, 8 KB) and each
 * accumulator still adds them in position order, so the result has the
 * bits of the in-register path, which decode's single row tile keeps.
 */
#define PV_CHUNK 128
INL void gemm_nn_acc(const float *p, int64_t ldp, const void *v, int64_t ldv, float *acc, int64_t lda, int64_t n,
                     int64_t npos, int64_t dv, const int dt)
{
    if (n == 1) { /* decode: 8 chains per tile (see pv_tile) */
        for (int64_t d0 = 0; d0 < dv; d0 += 64)
            pv_tile(p, ldp, v, ldv, acc, lda, npos, d0, dv, 1, 8, dt);
        return;
    }
    if (n == 2) {
        for (int64_t d0 = 0; d0 < dv; d0 += 32)
            pv_tile(p, ldp, v, ldv, acc, lda, npos, d0, dv, 2, 4, dt);
        return;
    }
    if (dt == SY_DTYPE_F32 || n <= PV_NR) {
        for (int64_t d0 = 0; d0 < dv; d0 += 16)
            pv_rows(p, ldp, v, ldv, acc, lda, n, npos, d0, dv, dt);
        return;
    }
    float buf[PV_CHUNK * 16] __attribute__((aligned(64)));
    for (int64_t d0 = 0; d0 < dv; d0 += 16) {
        const int64_t w = dv - d0 < 16 ? dv - d0 : 16;
        for (int64_t j0 = 0; j0 < npos; j0 += PV_CHUNK) {
            const int64_t nj = npos - j0 < PV_CHUNK ? npos - j0 : PV_CHUNK;
            for (int64_t j = 0; j < nj; j++) {
                const int64_t off = (j0 + j) * ldv + d0;
                _mm256_store_ps(buf + j * 16, w >= 8 ? load_w(v, off, dt) : load_w_part(v, off, dt, w));
                _mm256_store_ps(buf + j * 16 + 8, w >= 16 ? load_w(v, off + 8, dt) : load_w_part(v, off + 8, dt, w - 8));
            }
            pv_rows(p + j0, ldp, buf, 16, acc + d0, lda, n, nj, 0, w, SY_DTYPE_F32);
        }
    }
}
#undef PV_CHUNK

/* Cephes expf with 2^n built in the exponent field (so n stays in -126..127): below -87.3
 * the result is flushed to 0, above 88 it saturates. */
INL __m256 exp8(__m256 x)
{
    const __m256 lo = _mm256_set1_ps(-87.33654f);
    const __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    x = _mm256_min_ps(_mm256_set1_ps(88.0f), _mm256_max_ps(lo, x));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 q = _mm256_set1_ps(1.9875691500E-4f);
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(1.3981999507E-3f));
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(8.3334519073E-3f));
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(4.1665795894E-2f));
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(1.6666665459E-1f));
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(5.0000001201E-1f));
    const __m256 e = _mm256_add_ps(_mm256_fmadd_ps(_mm256_mul_ps(q, r), r, r), _mm256_set1_ps(1.0f));
    const __m256i pow2 = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(under, _mm256_mul_ps(e, _mm256_castsi256_ps(pow2)));
}

static void vexp(float *y, const float *x, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, exp8(_mm256_loadu_ps(x + i)));
    if (i < n) {
        const __m256i mk = lane_mask(n - i);
        _mm256_maskstore_ps(y + i, mk, exp8(_mm256_maskload_ps(x + i, mk)));
    }
}

INL float hmax8(__m256 v)
{
    __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_max_ps(x, _mm_movehl_ps(x, x));
    x = _mm_max_ss(x, _mm_shuffle_ps(x, x, 1));
    return _mm_cvtss_f32(x);
}

/* Lanes c0..c0+7 that lie in [jl, jh]. */
INL __m256 in_range(int64_t c0, int64_t jl, int64_t jh)
{
    const __m256i idx = _mm256_add_epi32(_mm256_set1_epi32((int)c0), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    const __m256i ge = _mm256_cmpgt_epi32(idx, _mm256_set1_epi32((int)jl - 1));
    const __m256i le = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)jh + 1), idx);
    return _mm256_castsi256_ps(_mm256_and_si256(ge, le));
}

/*
 * The softmax step in 8-lane vectors (sykern.h). The scores were a scalar
 * max, subtract, zero and a serial sum per row and block: in prefill that
 * cost as much as the QK^T product. Lanes outside [jl, jh] enter the max as
 * -inf and leave the exp as 0; the sum is 8 lane sums over the vectors in
 * order, then red1's tree.
 */
void syk__softmax_step_avx2(float *s, int64_t n, int64_t jl, int64_t jh, float *m, float *l, float *o, int64_t dv)
{
    if (jl > jh) {
        memset(s, 0, sizeof(float) * (size_t)n);
        return;
    }
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    __m256 vm = _mm256_set1_ps(*m);
    for (int64_t c0 = jl & ~(int64_t)7; c0 <= jh; c0 += 8) {
        const __m256 x = c0 + 8 <= n ? _mm256_loadu_ps(s + c0) : _mm256_maskload_ps(s + c0, lane_mask(n - c0));
        vm = _mm256_max_ps(_mm256_blendv_ps(ninf, x, in_range(c0, jl, jh)), vm); /* a NaN score is passed over */
    }
    const float mx = hmax8(vm);
    const __m256 vmx = _mm256_set1_ps(mx);
    __m256 vs = _mm256_setzero_ps();
    for (int64_t c0 = 0; c0 < n; c0 += 8) {
        const int whole = c0 + 8 <= n;
        if (c0 + 8 <= jl || c0 > jh) {
            if (whole)
                _mm256_storeu_ps(s + c0, _mm256_setzero_ps());
            else
                memset(s + c0, 0, sizeof(float) * (size_t)(n - c0));
            continue;
        }
        const __m256 x = whole ? _mm256_loadu_ps(s + c0) : _mm256_maskload_ps(s + c0, lane_mask(n - c0));
        const __m256 e = _mm256_and_ps(exp8(_mm256_sub_ps(x, vmx)), in_range(c0, jl, jh));
        vs = _mm256_add_ps(vs, e);
        if (whole)
            _mm256_storeu_ps(s + c0, e);
        else
            _mm256_maskstore_ps(s + c0, lane_mask(n - c0), e);
    }
    const float sum = red1(vs);
    if (*m != mx) {
        const float alpha = *m == -INFINITY ? 0.0f : expf(*m - mx);
        const __m256 va = _mm256_set1_ps(alpha);
        int64_t d = 0;
        for (; d + 8 <= dv; d += 8)
            _mm256_storeu_ps(o + d, _mm256_mul_ps(_mm256_loadu_ps(o + d), va));
        for (; d < dv; d++)
            o[d] *= alpha;
        *l *= alpha;
        *m = mx;
    }
    *l += sum;
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
    .isa = SYK_ISA_AVX2,
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

const syk_kernels *syk__kernels_avx2(void)
{
    return &kernels;
}

#else /* not x86-64 */

const syk_kernels *syk__kernels_avx2(void)
{
    return NULL;
}

#endif
