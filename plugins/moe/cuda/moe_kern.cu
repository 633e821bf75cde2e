/*
 * moe/cuda kernels: gather, a grouped GEMM over the experts' row groups
 * (portable CUDA cores, F32 accumulation of F32 activations times F32/F16/
 * BF16 weights, the CPU plugin's arithmetic), silu * up, and a weighted
 * combine that sums each token's experts in top-k order (no atomics: the
 * result does not depend on scheduling).
 *
 * The tile (SYMK_TILE_M x SYMK_TILE_N x SYMK_TILE_K, moe_kern.h) is one
 * compiled-in default that suits decode (few rows per expert) and prefill
 * alike; 256 threads each compute 4 columns x 2 rows.
 */
#include <math.h>
#include <stdint.h>

#include "moe_kern.h"
#include "sycuda_conv.cuh"

#define GEMM_THREADS 256

__global__ void k_gather(const float *x, int64_t ldx, const int32_t *tok, int64_t A, int64_t hidden, float *xe)
{
    const int64_t a = blockIdx.x;
    if (a >= A)
        return;
    const float *src = x + (int64_t)tok[a] * ldx;
    for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x)
        xe[a * hidden + c] = src[c];
}

extern "C" void symk_gather(const float *x, int64_t ldx, const int32_t *tok, int64_t A, int64_t hidden, float *xe)
{
    if (A > 0)
        k_gather<<<(unsigned)A, 256>>>(x, ldx, tok, A, hidden, xe);
}

__global__ void __launch_bounds__(GEMM_THREADS)
    k_grouped_gemm(const float *xe, int64_t K, const void *w, int wdt, int64_t M, const symk_tile *tiles, float *out)
{
    __shared__ float xs[SYMK_TILE_N][SYMK_TILE_K + 1];
    __shared__ float ws[SYMK_TILE_M][SYMK_TILE_K + 1];
    const symk_tile tl = tiles[blockIdx.y];
    const int64_t m0 = (int64_t)blockIdx.x * SYMK_TILE_M;
    const int64_t wbase = (int64_t)tl.expert * M * K;
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16; /* columns tx*4.., rows ty*2.. */
    float acc[2][4] = {{0.0f}};
    for (int64_t k0 = 0; k0 < K; k0 += SYMK_TILE_K) {
        for (int i = tid; i < SYMK_TILE_M * SYMK_TILE_K; i += GEMM_THREADS) {
            const int r = i / SYMK_TILE_K, c = i % SYMK_TILE_K;
            const int64_t gm = m0 + r, gk = k0 + c;
            ws[r][c] = gm < M && gk < K ? syc_load(w, wdt, wbase + gm * K + gk) : 0.0f;
        }
        for (int i = tid; i < SYMK_TILE_N * SYMK_TILE_K; i += GEMM_THREADS) {
            const int r = i / SYMK_TILE_K, c = i % SYMK_TILE_K;
            const int64_t gk = k0 + c;
            xs[r][c] = r < tl.rows && gk < K ? xe[(int64_t)(tl.row0 + r) * K + gk] : 0.0f;
        }
        __syncthreads();
        for (int c = 0; c < SYMK_TILE_K; c++) {
            const float x0 = xs[ty * 2][c], x1 = xs[ty * 2 + 1][c];
            for (int j = 0; j < 4; j++) {
                const float wv = ws[tx * 4 + j][c];
                acc[0][j] = fmaf(x0, wv, acc[0][j]);
                acc[1][j] = fmaf(x1, wv, acc[1][j]);
            }
        }
        __syncthreads();
    }
    for (int i = 0; i < 2; i++) {
        const int r = ty * 2 + i;
        if (r >= tl.rows)
            continue;
        for (int j = 0; j < 4; j++) {
            const int64_t gm = m0 + tx * 4 + j;
            if (gm < M)
                out[(int64_t)(tl.row0 + r) * M + gm] = acc[i][j];
        }
    }
}

extern "C" void symk_grouped_gemm(const float *xe, int64_t K, const void *w, int wdt, int64_t M,
                                  const symk_tile *tiles, int64_t n_tiles, float *out)
{
    if (n_tiles <= 0 || M <= 0)
        return;
    const dim3 grid((unsigned)((M + SYMK_TILE_M - 1) / SYMK_TILE_M), (unsigned)n_tiles);
    k_grouped_gemm<<<grid, GEMM_THREADS>>>(xe, K, w, wdt, M, tiles, out);
}

__global__ void k_silu_mul(float *g, const float *u, int64_t n)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const float v = g[i];
        g[i] = v / (1.0f + expf(-v)) * u[i];
    }
}

extern "C" void symk_silu_mul(float *g, const float *u, int64_t n)
{
    if (n > 0)
        k_silu_mul<<<syc_ew_blocks(n), SYC_EW_THREADS>>>(g, u, n);
}

__global__ void k_combine(const float *ye, int64_t hidden, const int32_t *slot, const float *wts, int64_t T, int top_k,
                          float *out, int64_t ldo)
{
    const int64_t t = blockIdx.x;
    if (t >= T)
        return;
    for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x) {
        float acc = 0.0f;
        for (int k = 0; k < top_k; k++)
            acc = fmaf(wts[t * top_k + k], ye[(int64_t)slot[t * top_k + k] * hidden + c], acc);
        out[t * ldo + c] = acc;
    }
}

extern "C" void symk_combine(const float *ye, int64_t hidden, const int32_t *slot, const float *wts, int64_t T,
                             int top_k, float *out, int64_t ldo)
{
    if (T > 0)
        k_combine<<<(unsigned)T, 256>>>(ye, hidden, slot, wts, T, top_k, out, ldo);
}
