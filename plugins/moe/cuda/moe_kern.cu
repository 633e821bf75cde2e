/*
 * moe/cuda kernels: gather, a grouped GEMM over the experts' row groups
 * (portable CUDA cores, F32 accumulation of F32 activations times F32/F16/
 * BF16 weights, the CPU plugin's arithmetic), silu * up, and a weighted
 * combine that sums each token's experts in top-k order (no atomics: the
 * result does not depend on scheduling).
 *
 * The grouped GEMM is one template instantiated for each tile variant of
 * SYMK_VARIANTS (moe_kern.h). Each output is one running fmaf over k from 0
 * up, whatever the variant's k slice: the tiles change which block computes
 * an output, never the order its products are summed in, so every variant
 * gives the same bits (tests/gpu/test_cuda_ops.c checks it).
 */
#include <math.h>
#include <stdint.h>

#include "moe_kern.h"
#include "sycuda_conv.cuh"

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

template <int TM, int TN, int TK, int RC, int RR>
__global__ void __launch_bounds__((TM / RC) * (TN / RR))
    k_grouped_gemm(const float *xe, int64_t K, const void *w, int wdt, int64_t M, const symk_tile *tiles, float *out)
{
    constexpr int NT = (TM / RC) * (TN / RR), TXS = TM / RC;
    /* +1 column: threads reading one k of consecutive rows hit different banks. */
    __shared__ float xs[TN][TK + 1];
    __shared__ float ws[TM][TK + 1];
    const symk_tile tl = tiles[blockIdx.y];
    const int64_t m0 = (int64_t)blockIdx.x * TM;
    const int64_t wbase = (int64_t)tl.expert * M * K;
    const int tid = threadIdx.x, tx = tid % TXS, ty = tid / TXS; /* columns tx*RC.., rows ty*RR.. */
    float acc[RR][RC];
    for (int i = 0; i < RR; i++)
        for (int j = 0; j < RC; j++)
            acc[i][j] = 0.0f;
    for (int64_t k0 = 0; k0 < K; k0 += TK) {
        for (int i = tid; i < TM * TK; i += NT) {
            const int r = i / TK, c = i % TK;
            const int64_t gm = m0 + r, gk = k0 + c;
            ws[r][c] = gm < M && gk < K ? syc_load(w, wdt, wbase + gm * K + gk) : 0.0f;
        }
        for (int i = tid; i < TN * TK; i += NT) {
            const int r = i / TK, c = i % TK;
            const int64_t gk = k0 + c;
            xs[r][c] = r < tl.rows && gk < K ? xe[(int64_t)(tl.row0 + r) * K + gk] : 0.0f;
        }
        __syncthreads();
        /* Past K both operands are 0 and fmaf(0, 0, acc) == acc (acc is never -0), so the padding of the
         * last slice adds nothing whatever TK is. */
        for (int c = 0; c < TK; c++) {
            float xv[RR];
            for (int i = 0; i < RR; i++)
                xv[i] = xs[ty * RR + i][c];
            for (int j = 0; j < RC; j++) {
                const float wv = ws[tx * RC + j][c];
                for (int i = 0; i < RR; i++)
                    acc[i][j] = fmaf(xv[i], wv, acc[i][j]);
            }
        }
        __syncthreads();
    }
    for (int i = 0; i < RR; i++) {
        const int r = ty * RR + i;
        if (r >= tl.rows)
            continue;
        for (int j = 0; j < RC; j++) {
            const int64_t gm = m0 + tx * RC + j;
            if (gm < M)
                out[(int64_t)(tl.row0 + r) * M + gm] = acc[i][j];
        }
    }
}

#define SYMK_STATIC_ASSERT(c, r, k, tc, tr)                                                            \
    static_assert((c) % (tc) == 0 && (r) % (tr) == 0 && ((c) / (tc)) * ((r) / (tr)) <= 1024,          \
                  "a tile variant must split evenly over at most 1024 threads");
SYMK_VARIANTS(SYMK_STATIC_ASSERT)

extern "C" void symk_grouped_gemm(int variant, const float *xe, int64_t K, const void *w, int wdt, int64_t M,
                                  const symk_tile *tiles, int64_t n_tiles, float *out)
{
    if (n_tiles <= 0 || M <= 0)
        return;
    /* gridDim.y stops at 65535: a pass of many 8-row tiles (max_tokens x top_k / 8) launches in pieces; each
     * tile names its own rows, so the pieces are independent. */
    for (int64_t t0 = 0; t0 < n_tiles; t0 += 65535) {
        const unsigned ny = (unsigned)(n_tiles - t0 < 65535 ? n_tiles - t0 : 65535);
        int v = 0;
#define SYMK_LAUNCH(c, r, k, tc, tr)                                                                               \
        if (variant == v++)                                                                                        \
            k_grouped_gemm<c, r, k, tc, tr>                                                                        \
                <<<dim3((unsigned)((M + (c) - 1) / (c)), ny), ((c) / (tc)) * ((r) / (tr))>>>(xe, K, w, wdt, M,     \
                                                                                             tiles + t0, out);
        SYMK_VARIANTS(SYMK_LAUNCH)
#undef SYMK_LAUNCH
    }
}

extern "C" int symk_variant_attrs(int variant, symk_attrs *out)
{
    cudaFuncAttributes a;
    cudaError_t e = cudaErrorInvalidValue;
    int v = 0;
#define SYMK_ATTRS(c, r, k, tc, tr)                                  \
    if (variant == v++)                                              \
        e = cudaFuncGetAttributes(&a, k_grouped_gemm<c, r, k, tc, tr>);
    SYMK_VARIANTS(SYMK_ATTRS)
#undef SYMK_ATTRS
    if (e != cudaSuccess)
        return (int)e;
    out->static_smem = (int64_t)a.sharedSizeBytes;
    out->regs = a.numRegs;
    out->max_threads = a.maxThreadsPerBlock;
    return 0;
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
        for (int k = 0; k < top_k; k++) {
            const int32_t s = slot[t * top_k + k];
            if (s >= 0)
                acc = fmaf(wts[t * top_k + k], ye[(int64_t)s * hidden + c], acc);
        }
        out[t * ldo + c] = acc;
    }
}

extern "C" void symk_combine(const float *ye, int64_t hidden, const int32_t *slot, const float *wts, int64_t T,
                             int top_k, float *out, int64_t ldo)
{
    if (T > 0)
        k_combine<<<(unsigned)T, 256>>>(ye, hidden, slot, wts, T, top_k, out, ldo);
}
