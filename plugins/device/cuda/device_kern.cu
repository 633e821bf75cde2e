/*
 * device/cuda kernels: the memory-bound glue between the GEMMs. One thread
 * block per row for the reductions (rmsnorm), a grid-stride loop for the
 * elementwise ops. All launch on the calling thread's per-thread default
 * stream (cuda.mk: --default-stream per-thread)
 * and use only static shared memory.
 */
#include <math.h>
#include <stdint.h>

#include "device_kern.h"
#include "sycuda_conv.cuh"

#define ROW_THREADS 256

/* ------------------------------------------------------------------ embed */

__global__ void k_embed(const void *table, int dt, int64_t ldt, const int32_t *ids, int64_t n, int64_t cols,
                        float *out, int64_t ldo)
{
    const int64_t r = blockIdx.x;
    if (r >= n)
        return;
    const int64_t base = (int64_t)ids[r] * ldt;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
        out[r * ldo + c] = syc_load(table, dt, base + c);
}

extern "C" void sydk_embed(const void *table, int dt, int64_t ldt, const int32_t *ids_dev, int64_t n, int64_t cols,
                           float *out, int64_t ldo)
{
    if (n > 0)
        k_embed<<<(unsigned)n, ROW_THREADS>>>(table, dt, ldt, ids_dev, n, cols, out, ldo);
}

/* ---------------------------------------------------------------- rmsnorm */

/*
 * The sum of squares in double, as the CPU kernel does, so a row's scale
 * agrees with the float64 reference to F32 rounding; the row is read twice
 * (the second time from L1/L2).
 */
__global__ void k_rmsnorm(float *res, int64_t ldr, const float *x, int64_t ldx, const void *w, int wdt, float eps,
                          float *out, int64_t ldo, int64_t cols, int add)
{
    __shared__ double red[32];
    const int64_t r = blockIdx.x;
    const float *src = x + r * ldx;
    float *rr = add ? res + r * ldr : NULL;
    double ss = 0.0;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
        float v = src[c];
        if (add) {
            v = rr[c] + v;
            rr[c] = v;
        }
        ss += (double)v * (double)v;
    }
    ss = syc_block_sum(ss, red);
    const float inv = (float)(1.0 / sqrt(ss / (double)cols + (double)eps));
    const float *nsrc = add ? rr : src;
    float *o = out + r * ldo;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
        o[c] = (nsrc[c] * inv) * syc_load(w, wdt, c);
}

extern "C" void sydk_rmsnorm(float *res, int64_t ldr, const float *x, int64_t ldx, const void *w, int wdt, float eps,
                             float *out, int64_t ldo, int64_t rows, int64_t cols, int add)
{
    if (rows > 0)
        k_rmsnorm<<<(unsigned)rows, ROW_THREADS>>>(res, ldr, x, ldx, w, wdt, eps, out, ldo, cols, add);
}

/* ------------------------------------------------------------------- rope */

/* The angle and its cos/sin in double, like the CPU plugin: pos * inv_freq reaches thousands of radians. */
__global__ void k_rope(float *x, int64_t ldx, const int32_t *pos, const float *inv_freq, int64_t rows, int heads,
                       int head_dim, int rotary_dim, int neox, float mscale)
{
    const int64_t r = blockIdx.x;
    if (r >= rows)
        return;
    const int half = rotary_dim / 2;
    const double p = (double)pos[r];
    float *row = x + r * ldx;
    for (int i = threadIdx.x; i < heads * half; i += blockDim.x) {
        const int h = i / half, j = i % half;
        double s, c;
        sincos(p * (double)inv_freq[j], &s, &c);
        const float cf = (float)(c * (double)mscale), sf = (float)(s * (double)mscale);
        float *v = row + (int64_t)h * head_dim;
        const int ia = neox ? j : 2 * j, ib = neox ? j + half : 2 * j + 1;
        const float a = v[ia], b = v[ib];
        v[ia] = a * cf - b * sf;
        v[ib] = b * cf + a * sf;
    }
}

extern "C" void sydk_rope(float *x, int64_t ldx, const int32_t *pos_dev, const float *inv_freq_dev, int64_t rows,
                          int heads, int head_dim, int rotary_dim, int neox, float mscale)
{
    if (rows > 0)
        k_rope<<<(unsigned)rows, ROW_THREADS>>>(x, ldx, pos_dev, inv_freq_dev, rows, heads, head_dim, rotary_dim,
                                                neox, mscale);
}

/* ------------------------------------------------------------ elementwise */

/* op 0: out = silu(a) * b; op 1: a += b. */
__global__ void k_ew(float *a, int64_t lda, const float *b, int64_t ldb, float *out, int64_t ldo, int64_t rows,
                     int64_t cols, int op)
{
    const int64_t n = rows * cols;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / cols, c = i % cols;
        const float av = a[r * lda + c], bv = b[r * ldb + c];
        if (op == 0)
            out[r * ldo + c] = av / (1.0f + expf(-av)) * bv;
        else
            a[r * lda + c] = av + bv;
    }
}

extern "C" void sydk_silu_mul(const float *gate, int64_t ldg, const float *up, int64_t ldu, float *out, int64_t ldo,
                              int64_t rows, int64_t cols)
{
    if (rows * cols > 0)
        k_ew<<<syc_ew_blocks(rows * cols), SYC_EW_THREADS>>>((float *)gate, ldg, up, ldu, out, ldo, rows, cols, 0);
}

extern "C" void sydk_add(float *acc, int64_t lda, const float *x, int64_t ldx, int64_t rows, int64_t cols)
{
    if (rows * cols > 0)
        k_ew<<<syc_ew_blocks(rows * cols), SYC_EW_THREADS>>>(acc, lda, x, ldx, NULL, 0, rows, cols, 1);
}

/* ----------------------------------------------------------------- linear */

/*
 * x [n, k] F32 -> hi [n, k] and lo [n, k] in the weight's 16-bit type, with
 * hi + lo == x to about 16 bits of mantissa: one GEMM over the 2n rows then
 * gives the product of an F32 x with 16-bit weights almost as exactly as
 * the CPU's F32 arithmetic, at one read of the weights.
 */
__global__ void k_split(const float *x, int64_t ldx, int64_t n, int64_t k, void *dst, int dt)
{
    const int64_t total = n * k;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / k, c = i % k;
        const float v = x[r * ldx + c];
        float hi;
        if (dt == SYC_BF16) {
            __nv_bfloat16 h = __float2bfloat16_rn(v);
            hi = __bfloat162float(h);
            ((__nv_bfloat16 *)dst)[i] = h;
            ((__nv_bfloat16 *)dst)[total + i] = __float2bfloat16_rn(v - hi);
        } else {
            __half h = __float2half_rn(v);
            hi = __half2float(h);
            ((__half *)dst)[i] = h;
            ((__half *)dst)[total + i] = __float2half_rn(v - hi);
        }
    }
}

extern "C" void sydk_split(const float *x, int64_t ldx, int64_t n, int64_t k, void *dst, int dt)
{
    if (n * k > 0)
        k_split<<<syc_ew_blocks(n * k), SYC_EW_THREADS>>>(x, ldx, n, k, dst, dt);
}

/* out[r] = tmp[r] + tmp[n + r] (+ bias); tmp [2n, m] contiguous. halves 0: out[r] += bias only. */
__global__ void k_combine(const float *tmp, int64_t n, int64_t m, const void *bias, int bdt, float *out, int64_t ldo,
                          int halves)
{
    const int64_t total = n * m;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / m, c = i % m;
        float v = halves ? tmp[i] + tmp[total + i] : out[r * ldo + c];
        if (bias)
            v += syc_load(bias, bdt, c);
        out[r * ldo + c] = v;
    }
}

extern "C" void sydk_combine(const float *tmp, int64_t n, int64_t m, const void *bias, int bdt, float *out,
                             int64_t ldo, int halves)
{
    if (n * m > 0)
        k_combine<<<syc_ew_blocks(n * m), SYC_EW_THREADS>>>(tmp, n, m, bias, bdt, out, ldo, halves);
}

/* ----------------------------------------------------------------- argmax */

/*
 * One block per row. Each thread keeps the first largest non-NaN value of
 * its strided columns (it visits them in increasing order, so a strict
 * comparison keeps the lowest); the block then merges pairs, the lower
 * column winning equal values (-0 == +0). A NaN at column 0 is the pick
 * whatever follows (the rule in plugin.h, the host sampler's). Every
 * thread gets the pick (sample uses it too).
 */
__device__ static int64_t block_pick(const float *row, int64_t cols, float *sv, int64_t *si)
{
    float bv = 0.0f;
    int64_t bi = -1;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
        const float v = row[c];
        if (v == v && (bi < 0 || v > bv)) {
            bv = v;
            bi = c;
        }
    }
    sv[threadIdx.x] = bv;
    si[threadIdx.x] = bi;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            const float ov = sv[threadIdx.x + s];
            const int64_t oi = si[threadIdx.x + s];
            const int64_t mi = si[threadIdx.x];
            if (oi >= 0 && (mi < 0 || ov > sv[threadIdx.x] || (ov == sv[threadIdx.x] && oi < mi))) {
                sv[threadIdx.x] = ov;
                si[threadIdx.x] = oi;
            }
        }
        __syncthreads();
    }
    const float x0 = row[0];
    const int64_t pick = x0 != x0 || si[0] < 0 ? 0 : si[0];
    __syncthreads(); /* sv/si are reused by the caller */
    return pick;
}

__global__ void k_argmax(const float *x, int64_t ldx, int64_t cols, int32_t *ids, float *vals)
{
    __shared__ float sv[ROW_THREADS];
    __shared__ int64_t si[ROW_THREADS];
    const int64_t r = blockIdx.x;
    const float *row = x + r * ldx;
    const int64_t pick = block_pick(row, cols, sv, si);
    if (threadIdx.x == 0) {
        ids[r] = (int32_t)pick;
        vals[r] = row[pick];
    }
}

extern "C" void sydk_argmax(const float *x, int64_t ldx, int64_t rows, int64_t cols, int32_t *ids_dev, float *vals_dev)
{
    if (rows > 0)
        k_argmax<<<(unsigned)rows, ROW_THREADS>>>(x, ldx, cols, ids_dev, vals_dev);
}

/* ----------------------------------------------------------------- sample */

__device__ static double block_sum_d(double v, double *sd)
{
    sd[threadIdx.x] = v;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s)
            sd[threadIdx.x] += sd[threadIdx.x + s];
        __syncthreads();
    }
    const double r = sd[0];
    __syncthreads();
    return r;
}

__device__ static int64_t block_sum_i(int64_t v, int64_t *si)
{
    si[threadIdx.x] = v;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s)
            si[threadIdx.x] += si[threadIdx.x + s];
        __syncthreads();
    }
    const int64_t r = si[0];
    __syncthreads();
    return r;
}

/* The order of the host's sort: probability descending, then id ascending. */
__device__ static bool sample_before(float pa, int32_t ia, float pb, int32_t ib)
{
    return pa > pb || (pa == pb && ia < ib);
}

/*
 * One block per row, the host sampler's steps (syksample.h) in its order:
 * the greedy pick (temperature 0, and the maximum); the softmax sum in
 * double (a tree, so its last bits may differ from the host's running sum);
 * min_p; then either the draw over every candidate in id order (no top_k
 * or top_p cut: thread chunks of consecutive ids, their sums scanned by
 * thread 0, which then walks the chunk the draw lands in) or, when a cut
 * needs the sorted order, the 1e-6 prefilter past 1024 candidates, the
 * candidates gathered into shared memory and bitonic-sorted, and thread 0
 * cutting and drawing over them in sorted order as the host does. A row
 * with more candidates to sort than SYDK_SAMPLE_SORT_CAP gets -1.
 * Probabilities are recomputed by each pass from the row (read from L2)
 * rather than stored: a [V] scratch per row would cost more than the expf.
 */
__global__ void k_sample(const float *x, int64_t ldx, int64_t cols, const sydk_sample_row *rows, int32_t *ids)
{
    __shared__ float sv[ROW_THREADS];
    __shared__ int64_t si[ROW_THREADS];
    __shared__ double sd[ROW_THREADS];
    __shared__ float cp[SYDK_SAMPLE_SORT_CAP];
    __shared__ int32_t ci[SYDK_SAMPLE_SORT_CAP];
    __shared__ int s_n;
    const int64_t r = blockIdx.x;
    const unsigned tid = threadIdx.x, bd = blockDim.x;
    const float *row = x + r * ldx;
    const sydk_sample_row p = rows[r];
    const int64_t g = block_pick(row, cols, sv, si);
    if (!(p.temperature > 0.0f)) {
        if (tid == 0)
            ids[r] = (int32_t)g;
        return;
    }
    const float mx = row[g];
    const float inv_t = 1.0f / p.temperature;
    double part = 0.0;
    for (int64_t c = tid; c < cols; c += bd)
        part += (double)expf((row[c] - mx) * inv_t);
    const double sum = block_sum_d(part, sd);
    const float inv_sum = (float)(1.0 / sum);
    const float keep_min = p.min_p * inv_sum;
#define SAMPLE_P(c) (expf((row[c] - mx) * inv_t) * inv_sum)
#define SAMPLE_KEPT(q) ((q) >= keep_min && (q) > 0.0f)
    int64_t n_loc = 0, m_loc = 0;
    for (int64_t c = tid; c < cols; c += bd) {
        const float q = SAMPLE_P(c);
        if (SAMPLE_KEPT(q)) {
            n_loc++;
            m_loc += q >= 1e-6f;
        }
    }
    const int64_t n = block_sum_i(n_loc, si);
    const int64_t m = block_sum_i(m_loc, si);
    if (n == 0) { /* only with NaN or infinite logits: the greedy pick, as on the host */
        if (tid == 0)
            ids[r] = (int32_t)g;
        return;
    }
    const bool need_sort = (p.top_k > 0 && p.top_k < n) || p.top_p < 1.0f;
    if (!need_sort) {
        const int64_t chunk = (cols + bd - 1) / bd;
        const int64_t c0 = (int64_t)tid * chunk, c1 = c0 + chunk < cols ? c0 + chunk : cols;
        double acc = 0.0;
        int64_t last = -1;
        for (int64_t c = c0; c < c1; c++) {
            const float q = SAMPLE_P(c);
            if (SAMPLE_KEPT(q)) {
                acc += q;
                last = c;
            }
        }
        sd[tid] = acc;
        si[tid] = last;
        __syncthreads();
        if (tid == 0) {
            double total = 0.0;
            int64_t id = -1;
            for (unsigned t = 0; t < bd; t++) {
                total += sd[t];
                id = si[t] >= 0 ? si[t] : id; /* the last candidate: the host's pick when rounding leaves r past acc */
            }
            const double rr = p.u * total;
            double before = 0.0;
            bool found = false;
            for (unsigned t = 0; t < bd && !found; t++) {
                if (sd[t] > 0.0 && rr < before + sd[t]) {
                    double a = before;
                    const int64_t t0 = (int64_t)t * chunk, t1 = t0 + chunk < cols ? t0 + chunk : cols;
                    for (int64_t c = t0; c < t1 && !found; c++) {
                        const float q = SAMPLE_P(c);
                        if (SAMPLE_KEPT(q)) {
                            a += q;
                            if (rr < a) {
                                id = c;
                                found = true;
                            }
                        }
                    }
                }
                before += sd[t];
            }
            ids[r] = (int32_t)id;
        }
        return;
    }
    const bool filt = n > 1024 && m > 0 && (p.top_k == 0 || m >= p.top_k);
    const int64_t nn = filt ? m : n;
    if (nn > SYDK_SAMPLE_SORT_CAP) {
        if (tid == 0)
            ids[r] = -1; /* the core downloads the row and draws on the host with the same u */
        return;
    }
    if (tid == 0)
        s_n = 0;
    __syncthreads();
    for (int64_t c = tid; c < cols; c += bd) {
        const float q = SAMPLE_P(c);
        if (SAMPLE_KEPT(q) && (!filt || q >= 1e-6f)) {
            const int k = atomicAdd(&s_n, 1);
            cp[k] = q;
            ci[k] = (int32_t)c;
        }
    }
    __syncthreads();
    int size = 1;
    while (size < nn)
        size <<= 1;
    for (int k = (int)nn + (int)tid; k < size; k += (int)bd) {
        cp[k] = -1.0f; /* after every candidate (each has p > 0) */
        ci[k] = INT32_MAX;
    }
    __syncthreads();
    for (int k = 2; k <= size; k <<= 1)
        for (int j = k >> 1; j > 0; j >>= 1) {
            for (int i = (int)tid; i < size; i += (int)bd) {
                const int l = i ^ j;
                if (l > i) {
                    const bool up = (i & k) == 0;
                    const bool swap = up ? sample_before(cp[l], ci[l], cp[i], ci[i])
                                         : sample_before(cp[i], ci[i], cp[l], ci[l]);
                    if (swap) {
                        const float tp = cp[i];
                        const int32_t ti = ci[i];
                        cp[i] = cp[l];
                        ci[i] = ci[l];
                        cp[l] = tp;
                        ci[l] = ti;
                    }
                }
            }
            __syncthreads();
        }
    if (tid == 0) {
        int kk = (int)nn;
        if (p.top_k > 0 && p.top_k < kk)
            kk = p.top_k;
        if (p.top_p < 1.0f) {
            double c = 0.0;
            int cut = kk;
            for (int i = 0; i < kk; i++) {
                c += cp[i];
                if (c >= p.top_p) {
                    cut = i + 1;
                    break;
                }
            }
            kk = cut;
        }
        double total = 0.0;
        for (int i = 0; i < kk; i++)
            total += cp[i];
        const double rr = p.u * total;
        double acc = 0.0;
        int32_t id = ci[kk - 1];
        for (int i = 0; i < kk; i++) {
            acc += cp[i];
            if (rr < acc) {
                id = ci[i];
                break;
            }
        }
        ids[r] = id;
    }
#undef SAMPLE_P
#undef SAMPLE_KEPT
}

extern "C" void sydk_sample(const float *x, int64_t ldx, int64_t rows, int64_t cols, const sydk_sample_row *rows_dev,
                            int32_t *ids_dev)
{
    if (rows > 0)
        k_sample<<<(unsigned)rows, ROW_THREADS>>>(x, ldx, cols, rows_dev, ids_dev);
}
