/*
 * moe/cuda kernels: gather, a grouped GEMM over the experts' row groups
 * (portable CUDA cores, F32 accumulation of F32 activations times F32/F16/
 * BF16 weights, the CPU plugin's arithmetic), silu * up (or, with expert
 * biases or gpt-oss's clamped swiglu, a per-tile epilogue), and a weighted
 * combine that sums each token's experts in top-k order (no atomics: the
 * result does not depend on scheduling).
 *
 * The grouped GEMM is one template instantiated for each tile variant of
 * SYMK_VARIANTS (moe_kern.h). Each output is one running fmaf over k from 0
 * up, whatever the variant's k slice: the tiles change which block computes
 * an output, never the order its products are summed in, so every variant
 * gives the same bits (tests/gpu/test_cuda_ops.c checks it). FP8, NVFP4 and MXFP4
 * weights stay packed in GPU memory and are decoded in the weight tile's
 * load by device/cuda's decoders (device_quant.h), to the CPU's values.
 *
 * Routing on the device (k_route, k_group) leaves the pass's sizes in
 * device memory (symk_counts): the launches that follow are sized for the
 * most rows and tiles a pass can have, and blocks past the pass's count
 * return at once, so a layer needs no host round trip.
 *
 * The mma.sync tiles (SYMK_MMA_VARIANTS) compute the same product on the
 * tensor cores from bf16 hi + lo halves of both operands (moe_tc.cuh), in
 * F32: not the fmaf tiles' bits, within SYMT_TC_BOUND of them (moe_tiles.h;
 * moe_cuda.c checks each on the GPU before its first use).
 *
 * k_quant_rows ([moe] activations = nvfp4) quantises activation rows to
 * NVFP4 with symoe_fp4act.h, moe/cpu's quantiser, and leaves their
 * dequantised values in place; moe_fp4.cu's tiles read the codes.
 */
#include <math.h>
#include <stdint.h>

#include "moe_kern.h"
#include "moe_route_dev.h"
#include "moe_tc.cuh"
#include "sycuda_mma.cuh"
#include "symoe_fp4act.h"

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
            ws[r][c] = gm < M && gk < K ? symk_load_weight(w, wdt, q, tl.expert, M, K, gm, gk) : 0.0f;
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

/*
 * The tensor-core tiles' products (syc_mma_bf16, sycuda_mma.cuh): A is 16
 * weight rows (k along a row), B 8 token rows (k along a column), D F32.
 */

/* Two consecutive bf16 of a shared-memory row (k even, rows a multiple of 4 bytes apart) as one register. */
__device__ __forceinline__ uint32_t ld_pair(const uint16_t *p)
{
    return *reinterpret_cast<const uint32_t *>(p);
}

/*
 * The mma.sync tile: TM weight rows (output columns) x TN assignment rows
 * per block, WM x WN warps, each warp (TM / WM) x (TN / WN) outputs in
 * m16n8 pieces. Per k slice the block stages both operands as bf16 hi and
 * lo halves in shared memory (rows padded by 8 bf16: the fragment loads of
 * the 8 groups of a warp fall in distinct banks); each k16 step multiplies
 * w_hi x_hi, w_hi x_lo and, unless the weights are BF16 (w_lo = 0), w_lo x_hi.
 */
template <int TM, int TN, int TK, int WM, int WN>
__global__ void __launch_bounds__(WM *WN * 32)
    k_mma_gemm(const float *xe, int64_t K, const void *w, int wdt, const symk_qw q, int64_t M, const symk_tile *tiles,
               int64_t t0, const symk_counts *cnt, float *out)
{
    if (cnt && t0 + blockIdx.y >= (int64_t)cnt->tiles)
        return;
    constexpr int NT = WM * WN * 32, WTM = TM / WM, WTN = TN / WN, MI = WTM / 16, NI = WTN / 8, LD = TK + 8;
    static_assert(WTM % 16 == 0 && WTN % 8 == 0 && TK % 16 == 0, "an mma tile splits into m16n8k16 pieces");
    __shared__ __align__(16) uint16_t wh[TM][LD], wl[TM][LD], xh[TN][LD], xl[TN][LD];
    const symk_tile tl = tiles[t0 + blockIdx.y];
    const int64_t m0 = (int64_t)blockIdx.x * TM;
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, t4 = lane % 4;
    const int wm = warp % WM, wn = warp / WM;
    const bool split_w = wdt != SYC_BF16;
    float acc[MI][NI][4];
    for (int i = 0; i < MI; i++)
        for (int j = 0; j < NI; j++)
            for (int c = 0; c < 4; c++)
                acc[i][j][c] = 0.0f;
    for (int64_t k0 = 0; k0 < K; k0 += TK) {
        for (int i = tid; i < TM * TK; i += NT) {
            const int r = i / TK, c = i % TK;
            const int64_t gm = m0 + r, gk = k0 + c;
            symk_split(gm < M && gk < K ? symk_load_weight(w, wdt, q, tl.expert, M, K, gm, gk) : 0.0f, &wh[r][c],
                       &wl[r][c]);
        }
        for (int i = tid; i < TN * TK; i += NT) {
            const int r = i / TK, c = i % TK;
            const int64_t gk = k0 + c;
            symk_split(r < tl.rows && gk < K ? xe[(int64_t)(tl.row0 + r) * K + gk] : 0.0f, &xh[r][c], &xl[r][c]);
        }
        __syncthreads();
        for (int kk = 0; kk < TK; kk += 16) {
            uint32_t ah[MI][4], al[MI][4], bh[NI][2], bl[NI][2];
            for (int i = 0; i < MI; i++) {
                const int r = wm * WTM + i * 16 + g, c = kk + 2 * t4;
                ah[i][0] = ld_pair(&wh[r][c]), ah[i][1] = ld_pair(&wh[r + 8][c]);
                ah[i][2] = ld_pair(&wh[r][c + 8]), ah[i][3] = ld_pair(&wh[r + 8][c + 8]);
                al[i][0] = ld_pair(&wl[r][c]), al[i][1] = ld_pair(&wl[r + 8][c]);
                al[i][2] = ld_pair(&wl[r][c + 8]), al[i][3] = ld_pair(&wl[r + 8][c + 8]);
            }
            for (int j = 0; j < NI; j++) {
                const int n = wn * WTN + j * 8 + g, c = kk + 2 * t4;
                bh[j][0] = ld_pair(&xh[n][c]), bh[j][1] = ld_pair(&xh[n][c + 8]);
                bl[j][0] = ld_pair(&xl[n][c]), bl[j][1] = ld_pair(&xl[n][c + 8]);
            }
            for (int i = 0; i < MI; i++)
                for (int j = 0; j < NI; j++) {
                    syc_mma_bf16(acc[i][j], ah[i], bl[j][0], bl[j][1]); /* the small products first */
                    if (split_w)
                        syc_mma_bf16(acc[i][j], al[i], bh[j][0], bh[j][1]);
                    syc_mma_bf16(acc[i][j], ah[i], bh[j][0], bh[j][1]);
                }
        }
        __syncthreads();
    }
    for (int i = 0; i < MI; i++)
        for (int j = 0; j < NI; j++)
            for (int c = 0; c < 4; c++) {
                const int r = wn * WTN + j * 8 + 2 * t4 + (c & 1); /* D's column: the assignment row */
                const int64_t gm = m0 + wm * WTM + i * 16 + g + 8 * (c >> 1); /* D's row: the output column */
                if (r < tl.rows && gm < M)
                    out[(int64_t)(tl.row0 + r) * M + gm] = acc[i][j][c];
            }
}

#define SYMK_STATIC_ASSERT(c, r, k, tc, tr)                                                            \
    static_assert((c) % (tc) == 0 && (r) % (tr) == 0 && ((c) / (tc)) * ((r) / (tr)) <= 1024,          \
                  "a tile variant must split evenly over at most 1024 threads");
SYMK_VARIANTS(SYMK_STATIC_ASSERT)

extern "C" void symk_grouped_gemm(int variant, const float *xe, const symk_qa *xq, int64_t K, const void *w, int wdt,
                                  const symk_qw *q, int64_t M, const symk_tile *tiles, int64_t n_tiles,
                                  const symk_counts *cnt, float *out)
{
    if (n_tiles <= 0 || M <= 0)
        return;
    if (variant >= SYMK_FIRST_FP4) { /* moe_fp4.cu: the quantised activations, NVFP4 or MXFP4 weights */
        symk_fp4_gemm(variant - SYMK_FIRST_FP4, xq, K, w, q, M, tiles, n_tiles, cnt, out);
        return;
    }
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
#define SYMK_MMA_LAUNCH(c, r, k, wm, wn)                                                                         \
        if (variant == v++)                                                                                      \
            k_mma_gemm<c, r, k, wm, wn><<<dim3((unsigned)((M + (c) - 1) / (c)), ny), (wm) * (wn) * 32>>>(        \
                xe, K, w, wdt, qv, M, tiles, t0, cnt, out);
        SYMK_MMA_VARIANTS(SYMK_MMA_LAUNCH)
#undef SYMK_MMA_LAUNCH
    }
    if (variant >= SYMK_N_FMAF + SYMK_N_MMA && variant < SYMK_FIRST_FP4) /* moe_wgmma.cu cuts its own launches */
        symk_wgmma_gemm(variant - SYMK_N_FMAF - SYMK_N_MMA, xe, K, w, wdt, q, M, tiles, n_tiles, cnt, out);
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
#define SYMK_MMA_ATTRS(c, r, k, wm, wn)                              \
    if (variant == v++)                                              \
        e = cudaFuncGetAttributes(&a, k_mma_gemm<c, r, k, wm, wn>);
    SYMK_MMA_VARIANTS(SYMK_MMA_ATTRS)
#undef SYMK_MMA_ATTRS
    if (variant >= SYMK_FIRST_FP4)
        return symk_fp4_attrs(variant - SYMK_FIRST_FP4, out);
    if (variant >= SYMK_N_FMAF + SYMK_N_MMA)
        return symk_wgmma_attrs(variant - SYMK_N_FMAF - SYMK_N_MMA, out);
    if (e != cudaSuccess)
        return (int)e;
    out->static_smem = (int64_t)a.sharedSizeBytes;
    out->regs = a.numRegs;
    out->max_threads = a.maxThreadsPerBlock;
    return 0;
}

/*
 * One block per row: the row's largest magnitude and finiteness (fmaxf
 * and AND are exact in any order, so the global scale is the host's), then
 * each thread quantises whole 16-element blocks (32: qa.mx) with symoe_fp4act.h and
 * writes their dequantised values back over them.
 */
__global__ void __launch_bounds__(128) k_quant_rows(float *x, int64_t rows, int64_t K, symk_qa qa,
                                                    const symk_counts *cnt)
{
    const int64_t a = blockIdx.x;
    if (a >= rows || (cnt && a >= cnt->rows))
        return;
    __shared__ float s_amax[128];
    __shared__ int s_finite[128];
    float *row = x + a * K;
    float amax = 0.0f;
    int finite = 1;
    for (int64_t i = threadIdx.x; i < K; i += blockDim.x) {
        finite &= isfinite(row[i]) ? 1 : 0;
        amax = fmaxf(amax, fabsf(row[i]));
    }
    s_amax[threadIdx.x] = amax;
    s_finite[threadIdx.x] = finite;
    __syncthreads();
    for (int h = blockDim.x / 2; h > 0; h /= 2) {
        if ((int)threadIdx.x < h) {
            s_amax[threadIdx.x] = fmaxf(s_amax[threadIdx.x], s_amax[threadIdx.x + h]);
            s_finite[threadIdx.x] &= s_finite[threadIdx.x + h];
        }
        __syncthreads();
    }
    uint8_t *codes = qa.codes + a * qa.ld_codes, *scales = qa.scales + a * qa.ld_scales;
    if (qa.mx) { /* MXFP4 rows: no global scale, E8M0 blocks of 32 */
        if (threadIdx.x == 0)
            qa.global[a] = 1.0f;
        for (int64_t b = threadIdx.x; b < syx_n_scales(K); b += blockDim.x) {
            const int64_t k0 = b * SYX_BLOCK;
            const int n = (int)(K - k0 < SYX_BLOCK ? K - k0 : SYX_BLOCK);
            for (int j = 0; j < (n + 1) / 2; j++)
                codes[k0 / 2 + j] = 0;
            scales[b] = syx_block(row + k0, n, s_finite[0], codes + k0 / 2);
            for (int j = 0; j < n; j++)
                row[k0 + j] = syx_value(codes, scales, k0 + j);
        }
        return;
    }
    const float g = s_finite[0] ? syf_global(s_amax[0]) : NAN;
    if (threadIdx.x == 0)
        qa.global[a] = g;
    for (int64_t b = threadIdx.x; b < syf_n_scales(K); b += blockDim.x) {
        const int64_t k0 = b * SYF_BLOCK;
        const int n = (int)(K - k0 < SYF_BLOCK ? K - k0 : SYF_BLOCK);
        for (int j = 0; j < (n + 1) / 2; j++)
            codes[k0 / 2 + j] = 0;
        scales[b] = syf_block(row + k0, n, g, codes + k0 / 2);
        for (int j = 0; j < n; j++)
            row[k0 + j] = syf_value(codes, scales, g, k0 + j);
    }
}

extern "C" void symk_quant_rows(float *x, int64_t rows, int64_t K, const symk_qa *qa, const symk_counts *cnt)
{
    if (rows > 0 && K > 0)
        k_quant_rows<<<(unsigned)rows, 128>>>(x, rows, K, *qa, cnt);
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

/*
 * One block per row tile (the tile names its expert): gate and up biases,
 * then the activation, with the CPU plugin's operations in its order
 * (sum + bias, then the clamp and g / (1 + e^(-alpha g))).
 */
__global__ void k_bias_act(int act, float alpha, float limit, float *g, const float *u, const float *gb,
                           const float *ub, int64_t n, const symk_tile *tiles, int64_t t0, const symk_counts *cnt)
{
    const int64_t t = t0 + blockIdx.x;
    if (cnt && t >= (int64_t)cnt->tiles)
        return;
    const symk_tile tl = tiles[t];
    const float *gbe = gb ? gb + (int64_t)tl.expert * n : NULL, *ube = ub ? ub + (int64_t)tl.expert * n : NULL;
    for (int64_t i = threadIdx.x; i < (int64_t)tl.rows * n; i += blockDim.x) {
        const int64_t r = tl.row0 + i / n, c = i % n;
        float gv = g[r * n + c], uv = u[r * n + c];
        if (gbe) {
            gv = __fadd_rn(gv, gbe[c]);
            uv = __fadd_rn(uv, ube[c]);
        }
        if (act == SYMK_ACT_SWIGLU_CLAMP) {
            gv = gv > limit ? limit : gv; /* a NaN stays NaN, as torch's clamp keeps it */
            uv = uv > limit ? limit : uv < -limit ? -limit : uv;
            g[r * n + c] = __fmul_rn(__fadd_rn(uv, 1.0f), __fdiv_rn(gv, __fadd_rn(1.0f, expf(-alpha * gv))));
        } else {
            g[r * n + c] = __fmul_rn(__fdiv_rn(gv, __fadd_rn(1.0f, expf(-gv))), uv);
        }
    }
}

extern "C" void symk_bias_act(int act, float alpha, float limit, float *g, const float *u, const float *gb,
                              const float *ub, int64_t n, const symk_tile *tiles, int64_t n_tiles, const symk_counts *cnt)
{
    if (n_tiles > 0 && n > 0) /* gridDim.x goes to 2^31 - 1: one launch */
        k_bias_act<<<(unsigned)n_tiles, 256>>>(act, alpha, limit, g, u, gb, ub, n, tiles, 0, cnt);
}

__global__ void k_add_bias(float *y, const float *db, int64_t n, const symk_tile *tiles, int64_t t0,
                           const symk_counts *cnt)
{
    const int64_t t = t0 + blockIdx.x;
    if (cnt && t >= (int64_t)cnt->tiles)
        return;
    const symk_tile tl = tiles[t];
    const float *b = db + (int64_t)tl.expert * n;
    for (int64_t i = threadIdx.x; i < (int64_t)tl.rows * n; i += blockDim.x) {
        const int64_t r = tl.row0 + i / n, c = i % n;
        y[r * n + c] = __fadd_rn(y[r * n + c], b[c]);
    }
}

extern "C" void symk_add_bias(float *y, const float *db, int64_t n, const symk_tile *tiles, int64_t n_tiles,
                              const symk_counts *cnt)
{
    if (n_tiles > 0 && n > 0)
        k_add_bias<<<(unsigned)n_tiles, 256>>>(y, db, n, tiles, 0, cnt);
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
