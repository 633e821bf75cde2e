/*
 * FP8 E4M3 / NVFP4 linear kernels for device/cuda.
 *
 * gemv_q (decode, n <= 8): each warp streams ROWS weight rows once: each
 * lane takes 16 consecutive codes of a row at a time (one 16-byte load of
 * FP8, one 8-byte load of NVFP4), dequantises them in registers with the
 * one scale those 16 share (b1 is a multiple of 16 or covers K, so a
 * 16-element chunk never straddles two scales) and multiplies them with
 * the n activation rows. The F32 activations are read from L1 once per
 * ROWS rows: at n > 2 one row per warp made those reads (4n bytes per
 * weight element) the bottleneck, at n <= 2 one row per warp keeps more
 * warps in flight.
 *
 * dequant_q (larger n): writes a tile of rows dequantised to F32 or BF16
 * for cuBLAS (device_cuda_quant.c), one element per thread.
 *
 * Element values: q * (scale * global) in F32, one rounding, as the CPU
 * plugin computes them (device_quant.h's fast decode keeps that).
 */
#include "device_quant.h"
#include "quant_kern.h"
#include "sycuda_conv.cuh"

template <int NB, int ROWS, int WARPS>
__global__ void __launch_bounds__(WARPS * 32)
    gemv_q(sydq_weight q, const float *__restrict__ x, int64_t ldx, int xvec, const void *bias, int bdt,
           float *__restrict__ out, int64_t ldo)
{
    const int64_t j0 = ((int64_t)blockIdx.x * WARPS + threadIdx.x / 32) * ROWS;
    const int lane = threadIdx.x % 32;
    if (j0 >= q.m) /* the whole warp leaves together: no block-wide barrier follows */
        return;
    const int64_t rb = syq_row_bytes(q.fp4, q.k);
    const int vec8 = q.k % 16 == 0;
    int64_t srow[ROWS];
#pragma unroll
    for (int i = 0; i < ROWS; i++)
        srow[i] = j0 + i < q.m ? syq_scale_row_base(j0 + i, q.k, q.b0, q.b1) : 0;
    float acc[ROWS][NB];
#pragma unroll
    for (int i = 0; i < ROWS; i++)
#pragma unroll
        for (int r = 0; r < NB; r++)
            acc[i][r] = 0.0f;
    const int64_t chunks = (q.k + 15) / 16;
    for (int64_t c = lane; c < chunks; c += 32) {
        const int64_t k0 = c * 16;
        float w[ROWS][16];
#pragma unroll
        for (int i = 0; i < ROWS; i++) {
            if (j0 + i < q.m) {
                syq_load16(q.w + (j0 + i) * rb, q.fp4, vec8, k0, q.k,
                           syq_chunk_scale(q.scale, q.fp4, srow[i], k0, q.b1, q.global), w[i]);
            } else {
#pragma unroll
                for (int b = 0; b < 16; b++)
                    w[i][b] = 0.0f;
            }
        }
        const int whole = k0 + 16 <= q.k;
#pragma unroll
        for (int r = 0; r < NB; r++) {
            const float *xr = x + r * ldx + k0;
            if (whole && xvec) {
#pragma unroll
                for (int v = 0; v < 4; v++) {
                    const float4 t = __ldg((const float4 *)xr + v);
#pragma unroll
                    for (int i = 0; i < ROWS; i++) {
                        acc[i][r] = fmaf(t.x, w[i][4 * v], acc[i][r]);
                        acc[i][r] = fmaf(t.y, w[i][4 * v + 1], acc[i][r]);
                        acc[i][r] = fmaf(t.z, w[i][4 * v + 2], acc[i][r]);
                        acc[i][r] = fmaf(t.w, w[i][4 * v + 3], acc[i][r]);
                    }
                }
            } else {
#pragma unroll
                for (int b = 0; b < 16; b++)
                    if (k0 + b < q.k) {
                        const float xv = __ldg(xr + b);
#pragma unroll
                        for (int i = 0; i < ROWS; i++)
                            acc[i][r] = fmaf(xv, w[i][b], acc[i][r]);
                    }
            }
        }
    }
#pragma unroll
    for (int i = 0; i < ROWS; i++)
#pragma unroll
        for (int r = 0; r < NB; r++) {
            float v = acc[i][r];
            for (int o = 16; o > 0; o >>= 1)
                v += __shfl_xor_sync(0xffffffffu, v, o);
            const int64_t j = j0 + i;
            if (lane == 0 && j < q.m)
                out[r * ldo + j] = bias ? v + syc_load(bias, bdt, j) : v;
        }
}

template <int NB, int ROWS, int WARPS>
static void launch_gemv(const sydq_weight *w, const float *x, int64_t ldx, int xvec, const void *bias, int bdt,
                        float *out, int64_t ldo)
{
    const int64_t per_block = (int64_t)WARPS * ROWS;
    const int64_t blocks = (w->m + per_block - 1) / per_block;
    gemv_q<NB, ROWS, WARPS><<<(unsigned)blocks, WARPS * 32>>>(*w, x, ldx, xvec, bias, bdt, out, ldo);
}

extern "C" void sydq_gemv(const sydq_weight *w, const float *x, int64_t ldx, int64_t n, const void *bias, int bdt,
                          float *out, int64_t ldo)
{
    /* float4 activation loads when every row's chunks are 16-byte aligned */
    const int xvec = ldx % 4 == 0 && (uintptr_t)x % 16 == 0;
    switch (n) {
    case 1: launch_gemv<1, 1, 8>(w, x, ldx, xvec, bias, bdt, out, ldo); break;
    case 2: launch_gemv<2, 1, 8>(w, x, ldx, xvec, bias, bdt, out, ldo); break;
    case 3: launch_gemv<3, 4, 4>(w, x, ldx, xvec, bias, bdt, out, ldo); break;
    case 4: launch_gemv<4, 4, 4>(w, x, ldx, xvec, bias, bdt, out, ldo); break;
    case 5: launch_gemv<5, 4, 4>(w, x, ldx, xvec, bias, bdt, out, ldo); break;
    case 6: launch_gemv<6, 4, 4>(w, x, ldx, xvec, bias, bdt, out, ldo); break;
    case 7: launch_gemv<7, 4, 4>(w, x, ldx, xvec, bias, bdt, out, ldo); break;
    case 8: launch_gemv<8, 4, 4>(w, x, ldx, xvec, bias, bdt, out, ldo); break;
    default: break; /* the caller routes other n to the dequantise-and-GEMM path */
    }
}

/* One element per thread: consecutive threads store consecutive elements (a 16-element chunk per thread made the
 * stores 64 bytes apart and ran 1.3x slower on an H200). */
__global__ void dequant_q(sydq_weight q, int64_t r0, int64_t rows, void *dst, int dst_bf16)
{
    const int64_t total = rows * q.k, rb = syq_row_bytes(q.fp4, q.k);
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t row = r0 + i / q.k, col = i % q.k;
        const float s = syq_scale(q.scale, q.fp4, row, col, q.k, q.b0, q.b1, q.global);
        const float v = __fmul_rn(syq_code(q.w + row * rb, q.fp4, col), s);
        syc_store(dst, dst_bf16 ? SYC_BF16 : SYC_F32, i, v);
    }
}

extern "C" void sydq_dequant(const sydq_weight *w, int64_t r0, int64_t rows, void *dst, int dst_bf16)
{
    const int64_t total = rows * w->k;
    if (total <= 0)
        return;
    dequant_q<<<syc_ew_blocks(total), SYC_EW_THREADS>>>(*w, r0, rows, dst, dst_bf16);
}
