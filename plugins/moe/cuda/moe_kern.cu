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
 * gives the same bits (tests/gpu/test_cuda_ops.c checks it). FP8 and NVFP4
 * weights stay packed in GPU memory and are decoded in the weight tile's
 * load by device/cuda's decoders (device_quant.h), to the CPU's values.
 *
 * Routing on the device (k_route, k_group) leaves the pass's sizes in
 * device memory (symk_counts): the launches that follow are sized for the
 * most rows and tiles a pass can have, and blocks past the pass's count
 * return at once, so a layer needs no host round trip.
 */
#include <math.h>
#include <stdint.h>

#include "device_quant.h"
#include "moe_kern.h"
#include "moe_route_dev.h"
#include "sycuda_conv.cuh"

__global__ void k_gather(const float *x, int64_t ldx, const int32_t *tok, int64_t A, int64_t hidden, float *xe,
                         const symk_counts *cnt)
{
    const int64_t a = blockIdx.x;
    if (a >= A || (cnt && a >= cnt->rows))
        return;
    const float *src = x + (int64_t)tok[a] * ldx;
    for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x)
        xe[a * hidden + c] = src[c];
}

extern "C" void symk_gather(const float *x, int64_t ldx, const int32_t *tok, int64_t A, int64_t hidden, float *xe,
                            const symk_counts *cnt)
{
    if (A > 0)
        k_gather<<<(unsigned)A, 256>>>(x, ldx, tok, A, hidden, xe, cnt);
}

/* Weight (gm, gk) of expert e's [M, K] matrix: F32/F16/BF16 as stored, FP8/NVFP4 as q * (scale * global). */
__device__ __forceinline__ float load_weight(const void *w, int wdt, const symk_qw &q, int64_t e, int64_t M, int64_t K,
                                             int64_t gm, int64_t gk)
{
    if (wdt != SYMK_FP8 && wdt != SYMK_FP4)
        return syc_load(w, wdt, e * M * K + gm * K + gk);
    const int fp4 = wdt == SYMK_FP4;
    const int64_t rb = syq_row_bytes(fp4, K);
    const uint8_t *row = (const uint8_t *)w + (e * M + gm) * rb;
    const void *sc = fp4 ? (const void *)((const uint8_t *)q.scale + e * q.scale_stride)
                         : (const void *)((const float *)q.scale + e * q.scale_stride);
    return syq_mul(syq_code(row, fp4, gk), syq_scale(sc, fp4, gm, gk, K, q.b0, q.b1, q.global[e]));
}

template <int TM, int TN, int TK, int RC, int RR>
__global__ void __launch_bounds__((TM / RC) * (TN / RR))
    k_grouped_gemm(const float *xe, int64_t K, const void *w, int wdt, const symk_qw q, int64_t M, const symk_tile *tiles,
                   int64_t t0, const symk_counts *cnt, float *out)
{
    if (cnt && t0 + blockIdx.y >= (int64_t)cnt->tiles)
        return; /* the whole block: past this pass's tiles */
    constexpr int NT = (TM / RC) * (TN / RR), TXS = TM / RC;
    /* +1 column: threads reading one k of consecutive rows hit different banks. */
    __shared__ float xs[TN][TK + 1];
    __shared__ float ws[TM][TK + 1];
    const symk_tile tl = tiles[t0 + blockIdx.y];
    const int64_t m0 = (int64_t)blockIdx.x * TM;
    const int tid = threadIdx.x, tx = tid % TXS, ty = tid / TXS; /* columns tx*RC.., rows ty*RR.. */
    float acc[RR][RC];
    for (int i = 0; i < RR; i++)
        for (int j = 0; j < RC; j++)
            acc[i][j] = 0.0f;
    for (int64_t k0 = 0; k0 < K; k0 += TK) {
        for (int i = tid; i < TM * TK; i += NT) {
            const int r = i / TK, c = i % TK;
            const int64_t gm = m0 + r, gk = k0 + c;
            ws[r][c] = gm < M && gk < K ? load_weight(w, wdt, q, tl.expert, M, K, gm, gk) : 0.0f;
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

extern "C" void symk_grouped_gemm(int variant, const float *xe, int64_t K, const void *w, int wdt, const symk_qw *q,
                                  int64_t M, const symk_tile *tiles, int64_t n_tiles, const symk_counts *cnt, float *out)
{
    if (n_tiles <= 0 || M <= 0)
        return;
    const symk_qw qv = q ? *q : symk_qw{};
    /* gridDim.y stops at 65535: a pass of many 8-row tiles (max_tokens x top_k / 8) launches in pieces; each
     * tile names its own rows, so the pieces are independent. */
    for (int64_t t0 = 0; t0 < n_tiles; t0 += 65535) {
        const unsigned ny = (unsigned)(n_tiles - t0 < 65535 ? n_tiles - t0 : 65535);
        int v = 0;
#define SYMK_LAUNCH(c, r, k, tc, tr)                                                                               \
        if (variant == v++)                                                                                        \
            k_grouped_gemm<c, r, k, tc, tr>                                                                        \
                <<<dim3((unsigned)((M + (c) - 1) / (c)), ny), ((c) / (tc)) * ((r) / (tr))>>>(xe, K, w, wdt, qv, M, \
                                                                                             tiles, t0, cnt, out);
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

__global__ void k_silu_mul(float *g, const float *u, int64_t n, int64_t row_len, const symk_counts *cnt)
{
    if (cnt)
        n = (int64_t)cnt->rows * row_len;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const float v = g[i];
        g[i] = v / (1.0f + expf(-v)) * u[i];
    }
}

extern "C" void symk_silu_mul(float *g, const float *u, int64_t rows, int64_t n, const symk_counts *cnt)
{
    if (rows * n > 0)
        k_silu_mul<<<syc_ew_blocks(rows * n), SYC_EW_THREADS>>>(g, u, rows * n, n, cnt);
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

/* ------------------------------------------------------------ routing */

/* Scratch pointers of token t in the block symk_route_scratch sized: doubles first, then bytes. */
__device__ __forceinline__ symr_scratch route_scratch(void *base, int64_t T, int32_t E, int32_t G, int64_t t)
{
    double *d = (double *)base;
    unsigned char *b = (unsigned char *)(d + T * (2 * (int64_t)E + G));
    symr_scratch s;
    s.score = d + t * E;
    s.sel = d + T * E + t * E;
    s.gscore = d + 2 * T * E + t * G;
    s.allowed = b + t * E;
    s.gflag = b + T * E + t * 2 * G;
    return s;
}

extern "C" size_t symk_route_scratch(int64_t T, int32_t E, int32_t n_group)
{
    const int64_t G = n_group > 1 ? n_group : 1;
    return (size_t)(T * (2 * (int64_t)E + G)) * sizeof(double) + (size_t)(T * ((int64_t)E + 2 * G));
}

__global__ void k_route(symr_params p, const float *logits, int64_t ldl, int64_t T, const double *bias, void *scratch,
                        int32_t *ids, float *wts)
{
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= T)
        return;
    const int32_t G = p.n_group > 1 ? p.n_group : 1;
    const symr_scratch s = route_scratch(scratch, T, p.n_experts, G, t);
    symr_route(&p, logits + t * ldl, bias, &s, ids + t * p.top_k, wts + t * p.top_k);
}

/* One block: moe_route_dev.h's three grouping steps, experts over the threads for the first and last. */
__global__ void __launch_bounds__(1024) k_group(const int32_t *ids, int64_t A, int top_k, int32_t e0, int32_t EL,
                                                int32_t vr, int64_t max_tiles, int32_t *assign_tok, int32_t *slot_of,
                                                symk_tile *tiles, symk_counts *cnt)
{
    __shared__ int32_t count[SYMK_GROUP_MAX_EXPERTS], off[SYMK_GROUP_MAX_EXPERTS + 1];
    for (int32_t e = threadIdx.x; e < EL; e += blockDim.x)
        count[e] = symr_count(ids, A, e0, e);
    __syncthreads();
    if (threadIdx.x == 0) {
        static_assert(sizeof(symk_tile) == 3 * sizeof(int32_t), "a tile is an (expert, row0, rows) triple");
        cnt->tiles = (int32_t)symr_tiles(count, EL, vr, max_tiles, off, (int32_t *)tiles);
        cnt->rows = off[EL];
    }
    __syncthreads();
    for (int32_t e = threadIdx.x; e < EL; e += blockDim.x)
        symr_place(ids, A, top_k, e0, e, off[e], assign_tok, slot_of);
    for (int64_t a = threadIdx.x; a < A; a += blockDim.x)
        symr_place_foreign(ids, a, e0, EL, slot_of);
}

extern "C" int symk_route_group(const symr_params *rp, const float *logits, int64_t ldl, int64_t T, const double *bias,
                                void *scratch, int32_t *ids, float *wts, int32_t e0, int32_t EL, int32_t rows_per_tile,
                                int64_t max_tiles, int32_t *assign_tok, int32_t *slot_of, symk_tile *tiles,
                                symk_counts *cnt)
{
    if (EL > SYMK_GROUP_MAX_EXPERTS)
        return -1;
    const symr_params p = *rp;
    if (T <= 0)
        return 0;
    k_route<<<(unsigned)((T + 127) / 128), 128>>>(p, logits, ldl, T, bias, scratch, ids, wts);
    k_group<<<1, 1024>>>(ids, T * p.top_k, p.top_k, e0, EL, rows_per_tile, max_tiles, assign_tok, slot_of, tiles, cnt);
    return 0;
}
