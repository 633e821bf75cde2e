/*
 * What moe/cuda's grouped GEMM kernels share (moe_kern.cu's fmaf and
 * mma.sync tiles, moe_wgmma.cu's wgmma tiles): the weight load with its
 * FP8 / NVFP4 decode, and the bf16 hi + lo split the tensor-core tiles
 * feed their operands as.
 */
#ifndef SY_MOE_TC_CUH
#define SY_MOE_TC_CUH

#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>

#include "device_quant.h"
#include "moe_kern.h"
#include "sycuda_conv.cuh"

/* Weight (gm, gk) of expert e's [M, K] matrix: F32/F16/BF16 as stored, FP8/NVFP4/MXFP4 as q * (scale * global). */
__device__ __forceinline__ float symk_load_weight(const void *w, int wdt, const symk_qw &q, int64_t e, int64_t M,
                                                  int64_t K, int64_t gm, int64_t gk)
{
    if (wdt != SYMK_FP8 && wdt != SYMK_FP4)
        return syc_load(w, wdt, e * M * K + gm * K + gk);
    const int fp4 = wdt == SYMK_FP4;
    const int64_t rb = syq_row_bytes(fp4, K);
    const uint8_t *row = (const uint8_t *)w + (e * M + gm) * rb;
    const void *sc = fp4 ? (const void *)((const uint8_t *)q.scale + e * q.scale_stride)
                         : (const void *)((const float *)q.scale + e * q.scale_stride);
    if (q.e8m0) /* MXFP4: the same codes, a power-of-two scale per 32 (global folded in first, as the CPU does) */
        return syq_mul(syq_code(row, 1, gk), syq_e8m0_scale(sc, gm, gk, K, q.b0, q.b1, q.global[e]));
    return syq_mul(syq_code(row, fp4, gk), syq_scale(sc, fp4, gm, gk, K, q.b0, q.b1, q.global[e]));
}

/*
 * x as two bf16 bit patterns with hi + lo ~ x: hi = bf16(x) rounded to
 * nearest, lo = bf16(x - hi), where x - hi is exact in F32 (the rounding
 * error of a rounding to 8 significant bits), so hi + lo keeps 16 of x's
 * 24 bits. A BF16 weight has lo = 0. A non-finite x gets lo = 0 so that
 * an infinity stays one (Inf - Inf would make lo NaN).
 */
__device__ __forceinline__ void symk_split(float x, uint16_t *hi, uint16_t *lo)
{
    const __nv_bfloat16 h = __float2bfloat16_rn(x);
    *hi = __bfloat16_as_ushort(h);
    *lo = isfinite(x) ? __bfloat16_as_ushort(__float2bfloat16_rn(x - __bfloat162float(h))) : (uint16_t)0;
}

#endif
