/*
 * moe/cuda's wgmma tiles (SYMK_WGMMA_VARIANTS in moe_kern.h): the grouped
 * GEMM on Hopper's warpgroup MMA, wgmma.mma_async.m64nNk16 with bf16
 * operands from shared memory and F32 accumulators, operands fed as bf16
 * hi + lo halves as the mma.sync tiles do (moe_tc.cuh). This file is
 * compiled for sm_90a alone (moe-cuda.mk), so its module has no image for
 * other GPUs; the kernel bodies are also guarded so that a compilation for
 * any other target emits nothing of them. moe_cuda.c offers the variants
 * on compute capability 9.0 only and checks each against the fmaf tile on
 * the GPU before first use.
 *
 * Layout facts the kernel relies on (PTX ISA, "Asynchronous Warpgroup
 * Level Matrix Shared Memory Layout", K-major, no swizzle; docs/gpu.md
 * lists them for a GPU session whose self-check fails):
 *  - a core matrix is 8 rows x 16 bytes (8 bf16 along k), its rows 16
 *    bytes apart, 128 contiguous bytes;
 *  - the descriptor's leading byte offset (LBO) is the distance between
 *    the two core matrices adjacent in k (here 128 bytes), its stride byte
 *    offset (SBO) between core matrices adjacent in M or N (256 bytes);
 *    both, and the start address, encoded as (x & 0x3FFFF) >> 4 in bits
 *    16-29, 32-45 and 0-13; bits 62-63 = 0: no swizzle;
 *  - A (64 x 16, the weights) and B (16 x N, the assignment rows) are both
 *    K-major: imm-trans-a = imm-trans-b = 0;
 *  - accumulator D of m64nNk16, thread t of the warpgroup (warp w = t / 32,
 *    lane l): d[i] is row 16 w + l / 4 + 8 ((i / 2) % 2), column
 *    8 (i / 4) + 2 (l % 4) + i % 2;
 *  - shared memory written by ordinary stores must be fenced with
 *    fence.proxy.async before wgmma (the async proxy) reads it, and
 *    wgmma.fence precedes the first wgmma touching the accumulators.
 */
#include <stdint.h>

#include "moe_kern.h"
#include "moe_tc.cuh"

/* Shared-memory matrix descriptor of a K-major, unswizzled operand starting at p (PTX ISA "Matrix Descriptor"). */
__device__ __forceinline__ uint64_t wg_desc(const void *p)
{
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
    const uint64_t lbo = 128, sbo = 256;
    return (uint64_t)((a & 0x3FFFFu) >> 4) | ((lbo & 0x3FFFF) >> 4) << 16 | ((sbo & 0x3FFFF) >> 4) << 32;
}

/* Element (r, c) of an R x TK operand tile: k steps of 16 one after another, then 8-row groups, then the two core matrices. */
template <int R>
__device__ __forceinline__ int wg_off(int r, int c)
{
    return (c / 16) * (R * 16) + (r / 8) * 128 + ((c % 16) / 8) * 64 + (r % 8) * 8 + c % 8;
}

/* D += A B for one k16 step; N = 16 or 64 (the accumulator has N / 2 F32 registers per thread). */
template <int N>
__device__ __forceinline__ void wg_mma(float (&d)[N / 2], uint64_t da, uint64_t db);

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define SYMK_WG_D8(b) "+f"(d[b]), "+f"(d[b + 1]), "+f"(d[b + 2]), "+f"(d[b + 3]), "+f"(d[b + 4]), "+f"(d[b + 5]), \
                      "+f"(d[b + 6]), "+f"(d[b + 7])
template <>
__device__ __forceinline__ void wg_mma<16>(float (&d)[8], uint64_t da, uint64_t db)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1, 0, 0;\n}\n"
                 : SYMK_WG_D8(0)
                 : "l"(da), "l"(db), "r"(1));
}
template <>
__device__ __forceinline__ void wg_mma<64>(float (&d)[32], uint64_t da, uint64_t db)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
                 "%32, %33, p, 1, 1, 0, 0;\n}\n"
                 : SYMK_WG_D8(0), SYMK_WG_D8(8), SYMK_WG_D8(16), SYMK_WG_D8(24)
                 : "l"(da), "l"(db), "r"(1));
}
#undef SYMK_WG_D8
#endif

/* Keeps the compiler from moving accumulator accesses across the asynchronous MMAs. */
template <int N>
__device__ __forceinline__ void wg_fence_acc(float (&d)[N])
{
    for (int i = 0; i < N; i++)
        asm volatile("" : "+f"(d[i])::"memory");
}

/*
 * TM / 64 warpgroups, each 64 weight rows (output columns) x TN assignment
 * rows; per k slice of TK every thread stages its share of both operands
 * as bf16 hi / lo halves in the core-matrix layout, then each warpgroup
 * issues, per k16 step, w_hi x_lo, w_lo x_hi (unless the weights are
 * BF16) and w_hi x_hi, and waits for them before the slice is overwritten.
 */
template <int TM, int TN, int TK>
__global__ void __launch_bounds__(TM / 64 * 128)
    k_wgmma_gemm(const float *xe, int64_t K, const void *w, int wdt, const symk_qw q, int64_t M, const symk_tile *tiles,
                 int64_t t0, const symk_counts *cnt, float *out)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    static_assert(TM % 64 == 0 && TK % 16 == 0 && (TN == 16 || TN == 64), "wgmma tile: 64-row warpgroups, k16 steps");
    if (cnt && t0 + blockIdx.y >= (int64_t)cnt->tiles)
        return;
    constexpr int NT = TM / 64 * 128;
    __shared__ __align__(128) uint16_t wh[TM * TK], wl[TM * TK], xh[TN * TK], xl[TN * TK];
    const symk_tile tl = tiles[t0 + blockIdx.y];
    const int64_t m0 = (int64_t)blockIdx.x * TM;
    const int tid = threadIdx.x, wg = tid / 128, wt = tid % 128, warp = wt / 32, lane = wt % 32;
    const bool split_w = wdt != SYC_BF16;
    float acc[TN / 2];
    for (int i = 0; i < TN / 2; i++)
        acc[i] = 0.0f;
    for (int64_t k0 = 0; k0 < K; k0 += TK) {
        for (int i = tid; i < TM * TK; i += NT) {
            const int r = i / TK, c = i % TK;
            const int64_t gm = m0 + r, gk = k0 + c;
            const int o = wg_off<TM>(r, c);
            symk_split(gm < M && gk < K ? symk_load_weight(w, wdt, q, tl.expert, M, K, gm, gk) : 0.0f, &wh[o], &wl[o]);
        }
        for (int i = tid; i < TN * TK; i += NT) {
            const int r = i / TK, c = i % TK;
            const int64_t gk = k0 + c;
            const int o = wg_off<TN>(r, c);
            symk_split(r < tl.rows && gk < K ? xe[(int64_t)(tl.row0 + r) * K + gk] : 0.0f, &xh[o], &xl[o]);
        }
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        __syncthreads();
        wg_fence_acc(acc);
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
        for (int s = 0; s < TK / 16; s++) {
            /* This warpgroup's 64 rows of A start 8 row groups (of 256 bytes) per warpgroup into the step. */
            const int ao = wg_off<TM>(wg * 64, s * 16), bo = wg_off<TN>(0, s * 16);
            const uint64_t dah = wg_desc(&wh[ao]), dal = wg_desc(&wl[ao]), dbh = wg_desc(&xh[bo]), dbl = wg_desc(&xl[bo]);
            wg_mma<TN>(acc, dah, dbl);
            if (split_w)
                wg_mma<TN>(acc, dal, dbh);
            wg_mma<TN>(acc, dah, dbh);
        }
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
        wg_fence_acc(acc);
        __syncthreads();
    }
    for (int i = 0; i < TN / 2; i++) {
        const int r = 8 * (i / 4) + 2 * (lane % 4) + i % 2; /* D's column: the assignment row */
        const int64_t gm = m0 + wg * 64 + 16 * warp + lane / 4 + 8 * ((i / 2) % 2); /* D's row: the output column */
        if (r < tl.rows && gm < M)
            out[(int64_t)(tl.row0 + r) * M + gm] = acc[i];
    }
#endif
}

extern "C" void symk_wgmma_gemm(int variant, const float *xe, int64_t K, const void *w, int wdt, const symk_qw *q,
                                int64_t M, const symk_tile *tiles, int64_t n_tiles, const symk_counts *cnt, float *out)
{
    if (n_tiles <= 0 || M <= 0)
        return;
    const symk_qw qv = q ? *q : symk_qw{};
    for (int64_t t0 = 0; t0 < n_tiles; t0 += 65535) { /* gridDim.y's limit, as symk_grouped_gemm */
        const unsigned ny = (unsigned)(n_tiles - t0 < 65535 ? n_tiles - t0 : 65535);
        int v = 0;
#define SYMK_WG_LAUNCH(c, r, k)                                                                                    \
        if (variant == v++)                                                                                        \
            k_wgmma_gemm<c, r, k><<<dim3((unsigned)((M + (c) - 1) / (c)), ny), (c) / 64 * 128>>>(xe, K, w, wdt, qv, \
                                                                                                  M, tiles, t0,    \
                                                                                                  cnt, out);
        SYMK_WGMMA_VARIANTS(SYMK_WG_LAUNCH)
#undef SYMK_WG_LAUNCH
    }
}

extern "C" int symk_wgmma_attrs(int variant, symk_attrs *out)
{
    cudaFuncAttributes a;
    cudaError_t e = cudaErrorInvalidValue;
    int v = 0;
#define SYMK_WG_ATTRS(c, r, k)   \
    if (variant == v++)          \
        e = cudaFuncGetAttributes(&a, k_wgmma_gemm<c, r, k>);
    SYMK_WGMMA_VARIANTS(SYMK_WG_ATTRS)
#undef SYMK_WG_ATTRS
    if (e != cudaSuccess) {
        cudaGetLastError(); /* not sticky, but a later cudaGetLastError would report it as the next launch's */
        return (int)e;
    }
    out->static_smem = (int64_t)a.sharedSizeBytes;
    out->regs = a.numRegs;
    out->max_threads = a.maxThreadsPerBlock;
    return 0;
}
