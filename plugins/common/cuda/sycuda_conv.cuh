/*
 * What the CUDA plugins' kernels share. Element loads and stores: F32, F16
 * and BF16 with the same rounding as the CPU kernels (round to nearest
 * even), so both plugin sets store the same bits in a BF16/F16 KV cache.
 * Block reductions, and the launch size of elementwise grid-stride loops.
 */
#ifndef SY_CUDA_CONV_CUH
#define SY_CUDA_CONV_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

/* Matches sy_dtype: 0 F32, 1 F16, 2 BF16. */
#define SYC_F32 0
#define SYC_F16 1
#define SYC_BF16 2

/* Threads per block of the elementwise grid-stride kernels. */
#define SYC_EW_THREADS 256

/* Grid size for n elements of a grid-stride loop, capped so huge tensors still launch. */
static inline unsigned syc_ew_blocks(int64_t n)
{
    int64_t b = (n + SYC_EW_THREADS - 1) / SYC_EW_THREADS;
    if (b < 1)
        b = 1;
    return (unsigned)(b > 65535 * 8 ? 65535 * 8 : b);
}

__device__ __forceinline__ float syc_load(const void *p, int dt, int64_t i)
{
    if (dt == SYC_F32)
        return ((const float *)p)[i];
    if (dt == SYC_BF16)
        return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
    return __half2float(((const __half *)p)[i]);
}

__device__ __forceinline__ void syc_store(void *p, int dt, int64_t i, float v)
{
    if (dt == SYC_F32)
        ((float *)p)[i] = v;
    else if (dt == SYC_BF16)
        ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v);
    else
        ((__half *)p)[i] = __float2half_rn(v);
}

/* Block-wide sum of one double per thread (blockDim.x a multiple of 32, <= 1024). */
__device__ __forceinline__ double syc_block_sum(double v, double *red32)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0)
        red32[warp] = v;
    __syncthreads();
    const int nw = blockDim.x / 32;
    double t = lane < nw ? red32[lane] : 0.0;
    for (int o = 16; o > 0; o >>= 1)
        t += __shfl_xor_sync(0xffffffffu, t, o);
    __syncthreads(); /* red32 may be reused by the caller */
    return t;
}

#endif
