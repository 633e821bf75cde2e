/*
 * The greedy pick's scan, shared by the core's host sampler and the cpu
 * device plugin's argmax op so that both follow one rule bit for bit.
 */
#ifndef SY_SYKARGMAX_H
#define SY_SYKARGMAX_H

#include <math.h>
#include <stdint.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* The lowest index in [0, n) of the largest non-NaN value of x; -1 when all are NaN. */
static inline int64_t syk_first_max(const float *x, int64_t n)
{
#ifdef __SSE2__
    /* MAXPS returns its second operand when either is NaN: with the running
     * maximum second, NaNs are skipped and it never becomes NaN. */
    __m128 m4 = _mm_set1_ps(-INFINITY);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        m4 = _mm_max_ps(_mm_loadu_ps(x + i), m4);
    float lanes[4];
    _mm_storeu_ps(lanes, m4);
    float m = lanes[0];
    for (int l = 1; l < 4; l++)
        m = lanes[l] > m ? lanes[l] : m;
    for (; i < n; i++)
        m = x[i] > m ? x[i] : m;
    const __m128 mv = _mm_set1_ps(m);
    for (i = 0; i + 4 <= n; i += 4) {
        const int mask = _mm_movemask_ps(_mm_cmpeq_ps(_mm_loadu_ps(x + i), mv));
        if (mask)
            return i + __builtin_ctz((unsigned)mask);
    }
    for (; i < n; i++)
        if (x[i] == m)
            return i;
    return -1; /* every value was NaN: m stayed -inf and equals none of them */
#else
    int64_t best = -1;
    for (int64_t i = 0; i < n; i++)
        if (x[i] == x[i] && (best < 0 || x[i] > x[best]))
            best = i;
    return best;
#endif
}

#endif
