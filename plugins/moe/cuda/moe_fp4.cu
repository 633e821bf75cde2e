/*
 * moe/cuda's block-scaled FP4 tiles (SYMK_FP4_VARIANTS in moe_kern.h) for
 * [moe] activations = nvfp4 on NVFP4 experts: the grouped GEMM on
 *   mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale
 *       .scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3
 * with A = the experts' weight rows (their E2M1 codes and E4M3 scales per
 * 16 k, as the checkpoint stores them) and B = the assignment rows as
 * symk_quant_rows quantised them (symoe_fp4act.h). The MMA multiplies
 * code x scale on both sides (products exact in F32) and sums them in F32;
 * the two global scales multiply the result. The fmaf tiles computing on
 * the dequantised activations are the reference (moe_cuda.c's self-check):
 * only the summation order differs.
 *
 * This file is compiled for sm_120a alone (moe-cuda.mk): the block-scaled
 * mma.sync exists on the sm_120a / sm_121a / sm_120f targets only (ptxas
 * 13.0 refuses it for sm_100a, sm_100f and sm_103a, whose block-scaled
 * MMA is tcgen05's), and an arch-specific image runs on compute capability
 * 12.0 only. The kernel body is guarded by __CUDA_ARCH_FEAT_SM120_ALL so a
 * compilation for any other target emits nothing of it.
 *
 * MXFP4 experts with [moe] activations = mxfp4 take the same tiles' MX
 * form (VEC = 2), on
 *   mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale
 *       .scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0
 * with the experts' E8M0 scales per 32 k and the rows as symk_quant_rows
 * made them in MX form (E8M0 per 32, global 1); symk_fp4_gemm picks the
 * form from the weights' scales (symk_qw.e8m0).
 *
 * Fragment layouts: moe_fp4_frag.h (host-tested against the PTX ISA's
 * tables by tests/gpu/test_moe_cuda_tiles).
 */
#include <stdint.h>

#include "device_quant.h"
#include "moe_fp4_frag.h"
#include "moe_kern.h"

/* D += (A scale_A)(B scale_B) for one m16n8k64 step; sfa / sfb: four ue4m3 scales, k block j in byte j. */
__device__ __forceinline__ void mma_fp4(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, uint32_t sfa,
                                        uint32_t sfb)
{
#if defined(__CUDA_ARCH_FEAT_SM120_ALL)
    asm volatile("mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3}, %10, {%11, %12}, %13, {%14, %15};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(sfa), "h"((uint16_t)0),
                   "h"((uint16_t)0), "r"(sfb), "h"((uint16_t)0), "h"((uint16_t)0));
#else
    (void)d, (void)a, (void)b0, (void)b1, (void)sfa, (void)sfb;
#endif
}

/* The MX form: sfa / sfb two ue8m0 scales, k block j (32 k) in byte j (byte-id 0: bytes 0 and 1). */
__device__ __forceinline__ void mma_mxf4(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, uint32_t sfa,
                                         uint32_t sfb)
{
#if defined(__CUDA_ARCH_FEAT_SM120_ALL)
    asm volatile("mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3}, %10, {%11, %12}, %13, {%14, %15};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(sfa), "h"((uint16_t)0),
                   "h"((uint16_t)0), "r"(sfb), "h"((uint16_t)0), "h"((uint16_t)0));
#else
    (void)d, (void)a, (void)b0, (void)b1, (void)sfa, (void)sfb;
#endif
}

/*
 * TM weight rows (output columns) x TN assignment rows per block, WM x WN
 * warps of (TM / WM) x (TN / WN) outputs in m16n8 pieces. Per k slice of
 * TK the block stages both operands' code bytes (rows padded by 16 bytes:
 * the 8 groups of a warp read 4-byte words of 8 different rows, which then
 * fall in distinct banks) and their scale bytes (one 32-bit word per k64
 * step, symf_sf_slot); past M, K or the tile's rows everything is 0, and a
 * zero code adds nothing whatever its scale. VEC: 4, the NVFP4 form (ue4m3
 * per 16 k); 2, the MX form (ue8m0 per 32 k, bytes 2 and 3 of a word unused).
 */
template <int TM, int TN, int TK, int WM, int WN, int VEC>
__global__ void __launch_bounds__(WM *WN * 32)
    k_fp4_gemm(const symk_qa xq, int64_t K, const uint8_t *w, const symk_qw q, int64_t M, const symk_tile *tiles,
               int64_t t0, const symk_counts *cnt, float *out)
{
#if defined(__CUDA_ARCH_FEAT_SM120_ALL)
    constexpr int NT = WM * WN * 32, WTM = TM / WM, WTN = TN / WN, MI = WTM / 16, NI = WTN / 8;
    constexpr int BS = 64 / VEC, KB = TK / 2, LDB = KB + 16, KS = TK / BS, KW = TK / 64, CH = KB / 8;
    static_assert(WTM % 16 == 0 && WTN % 8 == 0 && TK % 64 == 0, "an fp4 tile splits into m16n8k64 pieces");
    if (cnt && t0 + blockIdx.y >= (int64_t)cnt->tiles)
        return;
    __shared__ __align__(16) uint8_t wc[TM][LDB], xc[TN][LDB];
    __shared__ uint32_t ws[TM][KW], xs[TN][KW];
    const symk_tile tl = tiles[t0 + blockIdx.y];
    const int64_t m0 = (int64_t)blockIdx.x * TM;
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, wm = warp % WM, wn = warp / WM;
    const int64_t rb = K / 2, n_sc = (K + BS - 1) / BS; /* a weight row's code bytes and scales (b0 = 1, b1 = BS) */
    const uint8_t *we = w + (int64_t)tl.expert * M * rb;
    const uint8_t *se = (const uint8_t *)q.scale + (int64_t)tl.expert * q.scale_stride;
    float acc[MI][NI][4];
    for (int i = 0; i < MI; i++)
        for (int j = 0; j < NI; j++)
            for (int c = 0; c < 4; c++)
                acc[i][j][c] = 0.0f;
    for (int64_t k0 = 0; k0 < K; k0 += TK) {
        /* 8 code bytes (16 elements) at a time: K is a multiple of 16, so a chunk is all in or all out of K. */
        for (int i = tid; i < TM * CH; i += NT) {
            const int r = i / CH, c = i % CH;
            const int64_t gm = m0 + r, gk = k0 + 16 * c;
            const uint2 v = gm < M && gk < K ? *(const uint2 *)(we + gm * rb + gk / 2) : make_uint2(0, 0);
            *(uint2 *)&wc[r][8 * c] = v;
        }
        for (int i = tid; i < TN * CH; i += NT) {
            const int r = i / CH, c = i % CH;
            const int64_t gk = k0 + 16 * c;
            const uint2 v = r < tl.rows && gk < K
                                ? *(const uint2 *)(xq.codes + (int64_t)(tl.row0 + r) * xq.ld_codes + gk / 2)
                                : make_uint2(0, 0);
            *(uint2 *)&xc[r][8 * c] = v;
        }
        for (int i = tid; i < TM * KS; i += NT) {
            const int r = i / KS, j = i % KS;
            const int64_t gm = m0 + r, gk = k0 + BS * j;
            ((uint8_t *)ws[r])[symf_sf_slot(VEC, j)] = gm < M && gk < K ? se[gm * n_sc + gk / BS] : (uint8_t)0;
        }
        for (int i = tid; i < TN * KS; i += NT) {
            const int r = i / KS, j = i % KS;
            const int64_t gk = k0 + BS * j;
            ((uint8_t *)xs[r])[symf_sf_slot(VEC, j)] =
                r < tl.rows && gk < K ? xq.scales[(int64_t)(tl.row0 + r) * xq.ld_scales + gk / BS] : (uint8_t)0;
        }
        __syncthreads();
        for (int s = 0; s < TK / 64; s++) {
            uint32_t a[MI][4], sa[MI], b[NI][2], sb[NI];
            for (int i = 0; i < MI; i++) {
                const int r0 = wm * WTM + i * 16;
                for (int r = 0; r < 4; r++) {
                    int row, byte;
                    symf_a_load(lane, r, &row, &byte);
                    a[i][r] = *(const uint32_t *)&wc[r0 + row][32 * s + byte];
                }
                sa[i] = ws[r0 + symf_sfa_row(lane)][s];
            }
            for (int j = 0; j < NI; j++) {
                const int n0 = wn * WTN + j * 8;
                for (int r = 0; r < 2; r++) {
                    int col, byte;
                    symf_b_load(lane, r, &col, &byte);
                    b[j][r] = *(const uint32_t *)&xc[n0 + col][32 * s + byte];
                }
                sb[j] = xs[n0 + symf_sfb_col(lane)][s];
            }
            for (int i = 0; i < MI; i++)
                for (int j = 0; j < NI; j++)
                    if (VEC == 4)
                        mma_fp4(acc[i][j], a[i], b[j][0], b[j][1], sa[i], sb[j]);
                    else
                        mma_mxf4(acc[i][j], a[i], b[j][0], b[j][1], sa[i], sb[j]);
        }
        __syncthreads();
    }
    const float gw = q.global[tl.expert];
    for (int i = 0; i < MI; i++)
        for (int j = 0; j < NI; j++)
            for (int c = 0; c < 4; c++) {
                int row, col;
                symf_c_store(lane, c, &row, &col);
                const int r = wn * WTN + j * 8 + col;          /* the assignment row */
                const int64_t gm = m0 + wm * WTM + i * 16 + row; /* the output column */
                if (r < tl.rows && gm < M)
                    out[(int64_t)(tl.row0 + r) * M + gm] =
                        __fmul_rn(acc[i][j][c], __fmul_rn(xq.global[tl.row0 + r], gw));
            }
#else
    (void)xq, (void)K, (void)w, (void)q, (void)M, (void)tiles, (void)t0, (void)cnt, (void)out;
#endif
}

extern "C" void symk_fp4_gemm(int variant, const symk_qa *xq, int64_t K, const void *w, const symk_qw *q, int64_t M,
                              const symk_tile *tiles, int64_t n_tiles, const symk_counts *cnt, float *out)
{
    if (n_tiles <= 0 || M <= 0 || !xq || !q)
        return;
    const symk_qa xv = *xq;
    const symk_qw qv = *q;
    for (int64_t t0 = 0; t0 < n_tiles; t0 += 65535) { /* gridDim.y's limit, as symk_grouped_gemm */
        const unsigned ny = (unsigned)(n_tiles - t0 < 65535 ? n_tiles - t0 : 65535);
        int v = 0;
#define SYMK_FP4_LAUNCH(c, r, k, wm, wn)                                                                          \
        if (variant == v++ && !qv.e8m0)                                                                           \
            k_fp4_gemm<c, r, k, wm, wn, 4><<<dim3((unsigned)((M + (c) - 1) / (c)), ny), (wm) * (wn) * 32>>>(      \
                xv, K, (const uint8_t *)w, qv, M, tiles, t0, cnt, out);                                           \
        else if (variant == v - 1)                                                                                \
            k_fp4_gemm<c, r, k, wm, wn, 2><<<dim3((unsigned)((M + (c) - 1) / (c)), ny), (wm) * (wn) * 32>>>(      \
                xv, K, (const uint8_t *)w, qv, M, tiles, t0, cnt, out);
        SYMK_FP4_VARIANTS(SYMK_FP4_LAUNCH)
#undef SYMK_FP4_LAUNCH
    }
}

/* A variant's needs are the larger of its two forms' (NVFP4 and MX), so the limits check covers whichever runs. */
extern "C" int symk_fp4_attrs(int variant, symk_attrs *out)
{
    cudaFuncAttributes a, b;
    cudaError_t e = cudaErrorInvalidValue, f = cudaErrorInvalidValue;
    int v = 0;
#define SYMK_FP4_ATTRS(c, r, k, wm, wn)                                 \
    if (variant == v++) {                                               \
        e = cudaFuncGetAttributes(&a, k_fp4_gemm<c, r, k, wm, wn, 4>);  \
        f = cudaFuncGetAttributes(&b, k_fp4_gemm<c, r, k, wm, wn, 2>);  \
    }
    SYMK_FP4_VARIANTS(SYMK_FP4_ATTRS)
#undef SYMK_FP4_ATTRS
    if (e == cudaSuccess)
        e = f;
    if (e != cudaSuccess) {
        cudaGetLastError(); /* as symk_wgmma_attrs: not sticky, but the next cudaGetLastError would report it */
        return (int)e;
    }
    out->static_smem = (int64_t)(a.sharedSizeBytes > b.sharedSizeBytes ? a.sharedSizeBytes : b.sharedSizeBytes);
    out->regs = a.numRegs > b.numRegs ? a.numRegs : b.numRegs;
    out->max_threads = a.maxThreadsPerBlock < b.maxThreadsPerBlock ? a.maxThreadsPerBlock : b.maxThreadsPerBlock;
    return 0;
}
