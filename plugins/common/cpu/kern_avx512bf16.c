/*
 * The BF16 dot-product path (sykern.h, `matmul = bf16`): x rows already
 * rounded to BF16, BF16 weights, vdpbf16ps. Compiled for AVX512_BF16 by
 * pragma and only handed out by syk_bf16dot_for() after CPUID says the CPU
 * has it.
 *
 * Same shape as the F32 kernels of kern_avx512.c, so the same properties:
 * NR x MR vector accumulators over k, each weight vector used for NR rows
 * of x; a vector now holds 32 elements of k (16 lanes of pairs), so one
 * instruction does twice the products of an F32 FMA. k is sliced at
 * SYK_KC with the slices' sums added to out in order, and four columns
 * reduce together (a lone column by the same tree): batch-invariant.
 */
#include "config.h"

#include <stdio.h>

#include "sykern.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

#ifdef __clang__
#pragma clang attribute push(                                                                                    \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c")
#endif
#include <immintrin.h>

#define INL static inline __attribute__((always_inline))
#define NR 6 /* rows of x per micro-tile: 6 x 4 accumulators + 4 weights + 1 x = 29 zmm */
#define MR 4 /* rows of w per micro-tile */
#define KV 32 /* elements of k per vector */

INL __m512 dot(__m512 acc, __m512i a, __m512i b)
{
    return _mm512_dpbf16_ps(acc, (__m512bh)a, (__m512bh)b);
}

/* The reduction tree of kern_avx512.c: [sum a, sum b, sum c, sum d]. */
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
 * out[i][j] (+)= x_i . w_j for an nr x mr tile over k <= SYK_KC. pf, when
 * set, is the next weight group, fetched while this tile computes: a
 * contiguous block of mr rows in address order when pflin, else mr rows
 * ldw apart.
 */
INL void tile_slice(const uint16_t *x, int64_t ldx, const uint16_t *w, int64_t ldw, float *out, int64_t ldo,
                    int64_t k, int accumulate, const char *pf, const int nr, const int mr, const int pflin)
{
    __m512 c[NR][8];
#pragma GCC unroll 8
    for (int i = 0; i < nr; i++)
#pragma GCC unroll 8
        for (int j = 0; j < mr; j++)
            c[i][j] = _mm512_setzero_ps();
    int64_t kk = 0;
    for (; kk + KV <= k; kk += KV) {
        __m512i wv[8];
#pragma GCC unroll 8
        for (int j = 0; j < mr; j++)
            wv[j] = _mm512_loadu_si512((const void *)(w + j * ldw + kk));
        if (pf && pflin) {
#pragma GCC unroll 8
            for (int j = 0; j < mr; j++) /* this step's share of the block: mr lines of 64 bytes */
                _mm_prefetch(pf + (size_t)kk * (size_t)mr * 2u + (size_t)j * 64u, _MM_HINT_T0);
        } else if (pf)
#pragma GCC unroll 8
            for (int j = 0; j < mr; j++)
                _mm_prefetch(pf + ((size_t)j * (size_t)ldw + (size_t)kk) * 2u, _MM_HINT_T0);
#pragma GCC unroll 8
        for (int i = 0; i < nr; i++) {
            const __m512i xv = _mm512_loadu_si512((const void *)(x + i * ldx + kk));
#pragma GCC unroll 8
            for (int j = 0; j < mr; j++)
                c[i][j] = dot(c[i][j], xv, wv[j]);
        }
    }
    if (kk < k) {
        /* Masked-off lanes read nothing (no fault past the end of an mmap) and give 0 x 0. */
        const __mmask32 mk = (__mmask32)((1ull << (k - kk)) - 1u);
        __m512i wv[8];
#pragma GCC unroll 8
        for (int j = 0; j < mr; j++)
            wv[j] = _mm512_maskz_loadu_epi16(mk, w + j * ldw + kk);
#pragma GCC unroll 8
        for (int i = 0; i < nr; i++) {
            const __m512i xv = _mm512_maskz_loadu_epi16(mk, x + i * ldx + kk);
#pragma GCC unroll 8
            for (int j = 0; j < mr; j++)
                c[i][j] = dot(c[i][j], xv, wv[j]);
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

/* The whole k, in SYK_KC slices whose sums go through out in order. */
INL void tile_pf(const uint16_t *x, int64_t ldx, const uint16_t *w, int64_t ldw, float *out, int64_t ldo, int64_t k,
                 int accumulate, const char *pf, const int nr, const int mr, const int pflin)
{
    int64_t k0 = 0;
    do {
        const int64_t kc = k - k0 < SYK_KC ? k - k0 : SYK_KC;
        tile_slice(x + k0, ldx, w + k0, ldw, out, ldo, kc, accumulate || k0 > 0,
                   pf ? pf + (size_t)k0 * 2u * (pflin ? (size_t)mr : 1u) : NULL, nr, mr, pflin);
        k0 += SYK_KC;
    } while (k0 < k);
}

INL void tile(const uint16_t *x, int64_t ldx, const uint16_t *w, int64_t ldw, float *out, int64_t ldo, int64_t k,
              int accumulate, const char *pf, const int nr, const int mr)
{
    tile_pf(x, ldx, w, ldw, out, ldo, k, accumulate, pf, nr, mr, 0);
}

/* One column group (mr weight rows) against all n rows of x; next: the following group, or NULL. */
INL void col_group(const uint16_t *x, int64_t ldx, const uint16_t *w, int64_t ldw, float *out, int64_t ldo,
                   int64_t n, int64_t k, int accumulate, const char *next, const int mr)
{
    int64_t i = 0;
    const char *pf = n > NR ? next : NULL; /* only when several tiles reuse this group */
    for (; i + NR <= n; i += NR, pf = NULL)
        tile(x + i * ldx, ldx, w, ldw, out + i * ldo, ldo, k, accumulate, pf, NR, mr);
    const uint16_t *xi = x + i * ldx;
    float *oi = out + i * ldo;
    switch (n - i) {
    case 5: tile(xi, ldx, w, ldw, oi, ldo, k, accumulate, pf, 5, mr); break;
    case 4: tile(xi, ldx, w, ldw, oi, ldo, k, accumulate, pf, 4, mr); break;
    case 3: tile(xi, ldx, w, ldw, oi, ldo, k, accumulate, pf, 3, mr); break;
    case 2: tile(xi, ldx, w, ldw, oi, ldo, k, accumulate, pf, 2, mr); break;
    case 1: tile(xi, ldx, w, ldw, oi, ldo, k, accumulate, pf, 1, mr); break;
    default: break;
    }
}

/* The loop structure of kern_avx512.c's gemm_nt (GEMV, few rows, many rows), see there. */
static void gemm_nt(const uint16_t *x, int64_t ldx, const uint16_t *w, int64_t ldw, float *out, int64_t ldo,
                    int64_t n, int64_t m, int64_t k, int accumulate)
{
#define WROW(j) ((const char *)(w + (size_t)(j) * (size_t)ldw))
#define WR(j) (w + (size_t)(j) * (size_t)ldw)
    int64_t j = 0;
    if (n == 1)
        for (; j + 8 <= m; j += 8) {
            if (ldw == k && j + 16 <= m)
                tile_pf(x, ldx, WR(j), ldw, out + j, ldo, k, accumulate, WROW(j + 8), 1, 8, 1);
            else
                tile(x, ldx, WR(j), ldw, out + j, ldo, k, accumulate, NULL, 1, 8);
        }
    if (n > 1 && n <= NR && ldw == k)
        for (; j + 2 * MR <= m; j += MR)
            switch (n) {
            case 6: tile_pf(x, ldx, WR(j), ldw, out + j, ldo, k, accumulate, WROW(j + MR), 6, MR, 1); break;
            case 5: tile_pf(x, ldx, WR(j), ldw, out + j, ldo, k, accumulate, WROW(j + MR), 5, MR, 1); break;
            case 4: tile_pf(x, ldx, WR(j), ldw, out + j, ldo, k, accumulate, WROW(j + MR), 4, MR, 1); break;
            case 3: tile_pf(x, ldx, WR(j), ldw, out + j, ldo, k, accumulate, WROW(j + MR), 3, MR, 1); break;
            default: tile_pf(x, ldx, WR(j), ldw, out + j, ldo, k, accumulate, WROW(j + MR), 2, MR, 1); break;
            }
    for (; j + MR <= m; j += MR)
        col_group(x, ldx, WR(j), ldw, out + j, ldo, n, k, accumulate, j + 2 * MR <= m ? WROW(j + MR) : NULL, MR);
    for (; j < m; j++)
        col_group(x, ldx, WR(j), ldw, out + j, ldo, n, k, accumulate, NULL, 1);
#undef WR
#undef WROW
}

static void to_bf16(uint16_t *dst, const float *src, int64_t n)
{
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + i + 16), _mm512_loadu_ps(src + i));
        _mm512_storeu_si512((void *)(dst + i), (__m512i)v);
    }
    for (; i < n; i += 16) {
        const int64_t r = n - i < 16 ? n - i : 16;
        const __mmask16 mk = (__mmask16)((1u << r) - 1u);
        const __m256bh v = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(mk, src + i));
        _mm256_mask_storeu_epi16(dst + i, mk, (__m256i)v);
    }
}

static const syk_bf16dot bf16dot = {gemm_nt, to_bf16};

#ifdef __clang__
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

const syk_bf16dot *syk_bf16dot_for(syk_isa isa, char *why, size_t why_len)
{
    char dummy[8];
    if (!why) {
        why = dummy;
        why_len = sizeof dummy;
    }
    if (isa != SYK_ISA_AVX512) {
        snprintf(why, why_len, "the BF16 dot products need the avx512 kernels, the plugin runs %s",
                 syk_isa_name(isa));
        return NULL;
    }
    if (!syk_isa_usable(SYK_ISA_AVX512, why, why_len))
        return NULL;
    if (!syk_cpu_has_avx512bf16()) {
        snprintf(why, why_len, "this CPU lacks AVX512_BF16 (CPUID leaf 7.1 EAX bit 5)");
        return NULL;
    }
    return &bf16dot;
}

#else /* not x86-64 */

const syk_bf16dot *syk_bf16dot_for(syk_isa isa, char *why, size_t why_len)
{
    (void)isa;
    if (why)
        snprintf(why, why_len, "the BF16 dot products need an x86-64 CPU with AVX512_BF16");
    return NULL;
}

#endif
