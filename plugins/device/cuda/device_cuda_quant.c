/*
 * device/cuda on FP8 E4M3 and NVFP4 weights: prepare_weight uploads the
 * packed codes and the scales as the checkpoint has them (never widened),
 * and linear computes on them:
 *  - n <= SYDQ_GEMV_MAX_N (decode): sydq_gemv streams the weight once and
 *    dequantises in registers; activations stay F32, F32 sums.
 *  - larger n (prefill): tiles of weight rows are dequantised into scratch
 *    (at most DQ_TILE_BYTES) and multiplied by cuBLAS. With linear = split
 *    the tile is F32 and the GEMM F32 (the CPU's numerics; no tensor
 *    cores); with linear = round the tile is BF16 and the activations are
 *    rounded once to BF16, as for BF16 weights (tensor cores, ~3 digits).
 * The element values are the CPU plugin's: q * (scale * global) in F32.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>

#include "device_cuda.h"
#include "device_cuda_quant.h"
#include "device_kern.h"
#include "device_quant.h"
#include "quant_kern.h"

/* Scratch for one tile of dequantised weight rows in the prefill path. */
#define DQ_TILE_BYTES ((size_t)64 << 20)

/* Checks the quantisation fields the same way the CPU plugin does (sykquant.h's layouts); 0 or an error. */
static int check_layout(const sy_tensor *w, const char *op, const char *nm, sy_err *err)
{
    if (w->ndim != 2 || w->shape[0] < 0 || w->shape[1] < 0 || (w->shape[1] > 1 && w->stride[1] != 1) ||
        (w->shape[0] > 1 && w->stride[0] != w->shape[1]))
        return sy_err_set(err, SY_ERR_INVALID, "%s %s: expected a contiguous [N, K] %s weight, found ndim %d", op, nm,
                          sy_dtype_name(w->dtype), w->ndim);
    const int64_t N = w->shape[0], K = w->shape[1], b0 = w->scale_block[0], b1 = w->scale_block[1];
    if (!w->scale)
        return sy_err_set(err, SY_ERR_INVALID, "%s %s: %s weight [%lld, %lld] has no scales bound", op, nm,
                          sy_dtype_name(w->dtype), (long long)N, (long long)K);
    if (b0 < 1 || b1 < 1 || (b1 % 16 != 0 && b1 < K))
        return sy_err_set(err, SY_ERR_INVALID,
                          "%s %s: scale block must be [>= 1, a multiple of 16 or >= K = %lld], found [%lld, %lld]", op,
                          nm, (long long)K, (long long)b0, (long long)b1);
    if (w->dtype == SY_DTYPE_FP8_E4M3 && w->scale_dtype != SY_DTYPE_F32)
        return sy_err_set(err, SY_ERR_INVALID, "%s %s: FP8 weights take F32 scales, found %s", op, nm,
                          sy_dtype_name(w->scale_dtype));
    if (w->dtype == SY_DTYPE_FP4_E2M1 &&
        (w->scale_dtype != SY_DTYPE_FP8_E4M3 || b0 != 1 || b1 != 16 || K % 16 != 0))
        return sy_err_set(err, SY_ERR_INVALID,
                          "%s %s: NVFP4 weights take F8_E4M3 scales per 16 elements of a row and K a multiple of 16, "
                          "found %s scales per [%lld, %lld], K = %lld",
                          op, nm, sy_dtype_name(w->scale_dtype), (long long)b0, (long long)b1, (long long)K);
    if (!(w->global_scale == w->global_scale) || w->global_scale == 0.0f)
        return sy_err_set(err, SY_ERR_INVALID, "%s %s: global scale must be finite and non-zero, found %g", op, nm,
                          (double)w->global_scale);
    return SY_OK;
}

static size_t scale_bytes(const sy_tensor *w)
{
    const int64_t N = w->shape[0], K = w->shape[1], b0 = w->scale_block[0], b1 = w->scale_block[1];
    const size_t count = (size_t)((N + b0 - 1) / b0) * (size_t)((K + b1 - 1) / b1);
    return count * (w->scale_dtype == SY_DTYPE_F32 ? 4 : 1);
}

int sy__cuda_prepare_qweight(sy_cuda_dev *d, const char *nm, const sy_tensor *host, sy_tensor *out, sy_err *err)
{
    int rc = check_layout(host, "prepare_weight", nm, err);
    if (rc || (rc = sy__cuda_enter(d, err)))
        return rc;
    const int fp4 = host->dtype == SY_DTYPE_FP4_E2M1;
    const size_t codes = (size_t)host->shape[0] * (size_t)syq_row_bytes(fp4, host->shape[1]);
    const size_t off = (codes + SYQ_SCALE_ALIGN - 1) / SYQ_SCALE_ALIGN * SYQ_SCALE_ALIGN, sb = scale_bytes(host);
    uint8_t *p = NULL;
    cudaError_t e = cudaMalloc((void **)&p, off + sb);
    if (e != cudaSuccess)
        return sy_err_set(err, SY_ERR_NOMEM, "prepare_weight %s: cannot allocate %zu bytes on GPU %d: %s", nm, off + sb,
                          d->gpu, cudaGetErrorString(e));
    if ((codes && (e = cudaMemcpy(p, host->data, codes, cudaMemcpyHostToDevice)) != cudaSuccess) ||
        (e = cudaMemcpy(p + off, host->scale, sb, cudaMemcpyHostToDevice)) != cudaSuccess) {
        cudaFree(p);
        return sy_err_set(err, SY_ERR_INTERNAL, "prepare_weight %s: upload of %zu code and %zu scale bytes: %s", nm,
                          codes, sb, cudaGetErrorString(e));
    }
    /* One allocation: release_weight's cudaFree(data) frees the scales too. */
    *out = *host;
    out->data = p;
    out->scale = p + off;
    out->device = 1 + d->gpu;
    out->priv = NULL;
    return SY_OK;
}

static int f32_view(const sy_tensor *t, const char *what, int64_t *rows, int64_t *cols, int64_t *ld, sy_err *err)
{
    if (!t)
        return sy_err_set(err, SY_ERR_INVALID, "linear: %s is NULL", what);
    if (t->dtype != SY_DTYPE_F32)
        return sy_err_set(err, SY_ERR_INVALID, "linear: %s must be F32, found %s", what, sy_dtype_name(t->dtype));
    if (sydev_view2d(t, rows, cols, ld))
        return sy_err_set(err, SY_ERR_INVALID, "linear: %s must be rows of contiguous elements (last stride 1)", what);
    if (!t->data && *rows * *cols > 0)
        return sy_err_set(err, SY_ERR_INVALID, "linear: %s has no data", what);
    return SY_OK;
}

static int gemm_tile(sy_cuda_dev *d, const void *w, cudaDataType_t wt, const void *x, cudaDataType_t xt, int64_t ldx,
                     float *out, int64_t ldo, int64_t n, int64_t m, int64_t k, sy_err *err)
{
    /* Row-major out[n, m] = x[n, k] . w[m, k]^T as column-major out^T = W^T . X^T (see device_cuda_ops.c). */
    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t s = cublasGemmEx(d->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)m, (int)n, (int)k, &one, w, wt, (int)k, x,
                                    xt, (int)ldx, &zero, out, CUDA_R_32F, (int)ldo, CUBLAS_COMPUTE_32F,
                                    CUBLAS_GEMM_DEFAULT);
    if (s != CUBLAS_STATUS_SUCCESS)
        return sy_err_set(err, SY_ERR_INTERNAL, "linear: cublasGemmEx on a dequantised tile (m %lld, n %lld, k %lld): %s",
                          (long long)m, (long long)n, (long long)k, cublasGetStatusString(s));
    return SY_OK;
}

int sy__cuda_linear_q(sy_cuda_dev *d, const sy_tensor *x, const sy_tensor *w, const sy_tensor *bias, sy_tensor *out,
                      sy_err *err)
{
    int64_t n, k, ldx, on, om, ldo;
    int rc;
    if ((rc = check_layout(w, "linear", "w", err)) || (rc = f32_view(x, "x", &n, &k, &ldx, err)) ||
        (rc = f32_view(out, "out", &on, &om, &ldo, err)))
        return rc;
    const int64_t m = w->shape[0];
    if (!w->data && m * w->shape[1] > 0)
        return sy_err_set(err, SY_ERR_INVALID, "linear: w has no data");
    if (k != w->shape[1])
        return sy_err_set(err, SY_ERR_INVALID, "linear: x is [%lld, %lld] but w is [%lld, %lld]; expected x [n, %lld]",
                          (long long)n, (long long)k, (long long)m, (long long)w->shape[1], (long long)w->shape[1]);
    if (on != n || om != m)
        return sy_err_set(err, SY_ERR_INVALID, "linear: out must be [n, m] = [%lld, %lld], found [%lld, %lld]",
                          (long long)n, (long long)m, (long long)on, (long long)om);
    if (bias) {
        int64_t br, bc, bld;
        if (!sydev_wdtype_ok(bias->dtype) || sydev_view2d(bias, &br, &bc, &bld) || br != 1 || bc != m || !bias->data)
            return sy_err_set(err, SY_ERR_INVALID, "linear: bias must hold [%lld] F32, F16 or BF16 elements, found %s",
                              (long long)m, sy_dtype_name(bias->dtype));
    }
    if (m > INT32_MAX || k > INT32_MAX || n > INT32_MAX)
        return sy_err_set(err, SY_ERR_UNSUPPORTED, "linear: [%lld x %lld] . [%lld x %lld]^T exceeds cuBLAS's int sizes",
                          (long long)n, (long long)k, (long long)m, (long long)k);
    if (n == 0 || m == 0)
        return SY_OK;
    if (x->data == out->data)
        return sy_err_set(err, SY_ERR_INVALID, "linear: out overlaps x; the product cannot be computed in place");
    if ((rc = sy__cuda_enter(d, err)))
        return rc;
    const sydq_weight q = {.w = w->data, .scale = w->scale, .fp4 = w->dtype == SY_DTYPE_FP4_E2M1, .m = m, .k = k,
                           .b0 = w->scale_block[0], .b1 = w->scale_block[1], .global = w->global_scale};
    const int bdt = bias ? (int)bias->dtype : 0;
    if (n <= SYDQ_GEMV_MAX_N) {
        sydq_gemv(&q, x->data, ldx, n, bias ? bias->data : NULL, bdt, out->data, ldo);
        return syc_launched(err, "linear: quantised gemv");
    }
    if (k == 0) { /* an empty sum: out = bias or 0 (cuBLAS would not touch out) */
        SYC_TRY(err, cudaMemset2DAsync(out->data, (size_t)ldo * 4, 0, (size_t)m * 4, (size_t)n, 0), "linear: zero out");
        if (bias)
            sydk_combine(NULL, n, m, bias->data, bdt, out->data, ldo, 0);
        return syc_launched(err, "linear: bias");
    }
    const int bf16 = !d->split;
    const size_t es = bf16 ? 2 : 4;
    int64_t tile = (int64_t)(DQ_TILE_BYTES / ((size_t)k * es));
    tile = tile < 1 ? 1 : tile > m ? m : tile;
    if ((rc = sy__cuda_buf(d, &d->wdq, (size_t)tile * (size_t)k * es, "linear: dequantised weight scratch", err)))
        return rc;
    const void *xa = x->data;
    int64_t lda = ldx;
    if (bf16) { /* activations rounded once to BF16: the hi half of sydk_split */
        if ((rc = sy__cuda_buf(d, &d->act16, (size_t)(2 * n * k) * 2, "linear: activation scratch", err)))
            return rc;
        sydk_split(x->data, ldx, n, k, d->act16.p, SY_DTYPE_BF16);
        if ((rc = syc_launched(err, "linear: activation rounding")))
            return rc;
        xa = d->act16.p;
        lda = k;
    }
    float *o = out->data;
    for (int64_t r0 = 0; r0 < m; r0 += tile) {
        const int64_t rows = m - r0 < tile ? m - r0 : tile;
        sydq_dequant(&q, r0, rows, d->wdq.p, bf16);
        if ((rc = syc_launched(err, "linear: dequantise")) ||
            (rc = gemm_tile(d, d->wdq.p, bf16 ? CUDA_R_16BF : CUDA_R_32F, xa, bf16 ? CUDA_R_16BF : CUDA_R_32F, lda,
                            o + r0, ldo, n, rows, k, err)))
            return rc;
    }
    if (bias)
        sydk_combine(NULL, n, m, bias->data, bdt, o, ldo, 0);
    return syc_launched(err, "linear: bias");
}
