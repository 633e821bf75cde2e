/*
 * The comparison every tensor-core self-check makes (moe/cuda's tiles,
 * attn/cuda's prefill kernel): a tensor-core result against the CUDA-core
 * one on the same inputs. Plain C, so the host tests run it too.
 */
#ifndef SY_SYSELFCHECK_H
#define SY_SYSELFCHECK_H

#include <math.h>
#include <stddef.h>

/*
 * 0 when got is within bound of ref (max |got - ref| / max |ref|, both
 * finite everywhere, n > 0), else -1; *worst the relative error (INFINITY
 * when a value is NaN or infinite, or ref is all zero while got is not).
 */
static inline int syc_rel_compare(const float *got, const float *ref, size_t n, double bound, double *worst)
{
    double mx = 0, diff = 0;
    int finite = n > 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i]) || !isfinite(ref[i]))
            finite = 0;
        mx = fmax(mx, fabs((double)ref[i]));
        diff = fmax(diff, fabs((double)got[i] - (double)ref[i]));
    }
    /* fmax drops NaN, so a NaN is caught by finite alone; an all-zero ref passes only an all-zero got. */
    *worst = !finite ? INFINITY : mx > 0 ? diff / mx : diff > 0 ? INFINITY : 0.0;
    return *worst <= bound ? 0 : -1;
}

#endif
