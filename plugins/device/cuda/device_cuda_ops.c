/*
 * device/cuda compute ops. Each op checks every operand (dtype, shape,
 * layout) on the host, failing with SY_ERR_INVALID naming the op and the
 * shapes expected and found, then queues its kernel or GEMM. Host-memory
 * arguments (ids, positions, inv_freq) are copied into device scratch on
 * the same stream first.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device_cuda.h"
#include "device_cuda_quant.h"
#include "sydev_args.h"
#include "device_kern.h"

/* Copies n host int32 values into d->ids (stream-ordered after earlier users of the buffer). */
static int upload_i32(sy_cuda_dev *d, const int32_t *src, int64_t n, const char *op, sy_err *err)
{
    int rc = sy__cuda_buf(d, &d->ids, sizeof(int32_t) * (size_t)n, op, err);
    if (rc)
        return rc;
    SYC_TRY(err, cudaMemcpyAsync(d->ids.p, src, sizeof(int32_t) * (size_t)n, cudaMemcpyHostToDevice, 0), op);
    return SY_OK;
}

/* ----------------------------------------------------------------- embed */

int sy__cuda_embed(void *inst, const sy_tensor *table, const int32_t *ids, int64_t n, sy_tensor *out, sy_err *err)
{
    sy_cuda_dev *d = inst;
    int64_t vocab, h, ld;
    sydev_rows o;
    int rc;
    if ((rc = sydev_w_rows(table, "embed", "table", &vocab, &h, &ld, err)) || (rc = sydev_f32_rows(out, "embed", "out", &o, err)))
        return rc;
    if (n < 0 || o.rows != n || o.cols != h)
        return sy_err_set(err, SY_ERR_INVALID, "embed: out must be [n, hidden] = [%lld, %lld], found [%lld, %lld]",
                          (long long)n, (long long)h, (long long)o.rows, (long long)o.cols);
    if (n > 0 && !ids)
        return sy_err_set(err, SY_ERR_INVALID, "embed: ids is NULL");
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= vocab)
            return sy_err_set(err, SY_ERR_INVALID, "embed: ids[%lld] = %d is outside the table's [0, %lld) rows",
                              (long long)i, ids[i], (long long)vocab);
    if (n == 0)
        return SY_OK;
    if ((rc = sy__cuda_enter(d, err)) || (rc = upload_i32(d, ids, n, "embed: ids upload", err)))
        return rc;
    sydk_embed(table->data, (int)table->dtype, ld, d->ids.p, n, h, o.p, o.ld);
    return syc_launched(err, "embed");
}

/* --------------------------------------------------------------- rmsnorm */

int sy__cuda_rmsnorm(void *inst, const sy_tensor *x, const sy_tensor *w, float eps, sy_tensor *out, sy_err *err)
{
    sy_cuda_dev *d = inst;
    sydev_rows xv, ov;
    int rc;
    if ((rc = sydev_f32_rows(x, "rmsnorm", "x", &xv, err)) || (rc = sydev_f32_rows(out, "rmsnorm", "out", &ov, err)) ||
        (rc = sydev_same_shape(&xv, &ov, "rmsnorm", "x", "out", err)) || (rc = sydev_vec_param(w, xv.cols, "rmsnorm", "w", err)) ||
        (rc = sydev_check_eps(eps, "rmsnorm", err)) || (rc = sy__cuda_enter(d, err)))
        return rc;
    sydk_rmsnorm(NULL, 0, xv.p, xv.ld, w->data, (int)w->dtype, eps, ov.p, ov.ld, xv.rows, xv.cols, 0);
    return syc_launched(err, "rmsnorm");
}

int sy__cuda_add_rmsnorm(void *inst, sy_tensor *residual, const sy_tensor *x, const sy_tensor *w, float eps,
                         sy_tensor *out, sy_err *err)
{
    sy_cuda_dev *d = inst;
    sydev_rows rv, xv, ov;
    int rc;
    if ((rc = sydev_f32_rows(residual, "add_rmsnorm", "residual", &rv, err)) ||
        (rc = sydev_f32_rows(x, "add_rmsnorm", "x", &xv, err)) || (rc = sydev_f32_rows(out, "add_rmsnorm", "out", &ov, err)) ||
        (rc = sydev_same_shape(&rv, &xv, "add_rmsnorm", "residual", "x", err)) ||
        (rc = sydev_same_shape(&rv, &ov, "add_rmsnorm", "residual", "out", err)) ||
        (rc = sydev_vec_param(w, xv.cols, "add_rmsnorm", "w", err)) || (rc = sydev_check_eps(eps, "add_rmsnorm", err)) ||
        (rc = sy__cuda_enter(d, err)))
        return rc;
    sydk_rmsnorm(rv.p, rv.ld, xv.p, xv.ld, w->data, (int)w->dtype, eps, ov.p, ov.ld, xv.rows, xv.cols, 1);
    return syc_launched(err, "add_rmsnorm");
}

/* ---------------------------------------------------------------- linear */

static cudaDataType_t blas_type(sy_dtype dt)
{
    return dt == SY_DTYPE_BF16 ? CUDA_R_16BF : dt == SY_DTYPE_F16 ? CUDA_R_16F : CUDA_R_32F;
}

/*
 * Row-major out[n, m] = x[n, k] . w[m, k]^T is, in cuBLAS's column-major
 * terms, out^T (m x n, ld ldo) = W^T (w read as k x m, transposed) . X^T.
 */
static int gemm(sy_cuda_dev *d, const void *w, sy_dtype wdt, int64_t ldw, const void *x, sy_dtype xdt, int64_t ldx,
                float *out, int64_t ldo, int64_t n, int64_t m, int64_t k, sy_err *err)
{
    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t s = cublasGemmEx(d->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)m, (int)n, (int)k, &one, w, blas_type(wdt),
                                    (int)ldw, x, blas_type(xdt), (int)ldx, &zero, out, CUDA_R_32F, (int)ldo,
                                    CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (s != CUBLAS_STATUS_SUCCESS)
        return sy_err_set(err, SY_ERR_INTERNAL, "linear: cublasGemmEx (m %lld, n %lld, k %lld, weights %s): %s",
                          (long long)m, (long long)n, (long long)k, sy_dtype_name(wdt), cublasGetStatusString(s));
    return SY_OK;
}

int sy__cuda_linear(void *inst, const sy_tensor *x, const sy_tensor *w, const sy_tensor *bias, sy_tensor *out,
                    sy_err *err)
{
    sy_cuda_dev *d = inst;
    if (w && syc_wdtype_quant(w->dtype))
        return sy__cuda_linear_q(d, x, w, bias, out, err);
    sydev_rows xv, ov;
    int64_t m, k, ldw;
    int rc;
    if ((rc = sydev_f32_rows(x, "linear", "x", &xv, err)) || (rc = sydev_w_rows(w, "linear", "w", &m, &k, &ldw, err)) ||
        (rc = sydev_f32_rows(out, "linear", "out", &ov, err)))
        return rc;
    if (xv.cols != k)
        return sy_err_set(err, SY_ERR_INVALID, "linear: x is [%lld, %lld] but w is [%lld, %lld]; expected x [n, %lld]",
                          (long long)xv.rows, (long long)xv.cols, (long long)m, (long long)k, (long long)k);
    if (ov.rows != xv.rows || ov.cols != m)
        return sy_err_set(err, SY_ERR_INVALID, "linear: out must be [n, m] = [%lld, %lld], found [%lld, %lld]",
                          (long long)xv.rows, (long long)m, (long long)ov.rows, (long long)ov.cols);
    if (bias && (rc = sydev_vec_param(bias, m, "linear", "bias", err)))
        return rc;
    if (m > INT32_MAX || k > INT32_MAX || 2 * xv.rows > INT32_MAX)
        return sy_err_set(err, SY_ERR_UNSUPPORTED, "linear: [%lld x %lld] . [%lld x %lld]^T exceeds cuBLAS's int sizes",
                          (long long)xv.rows, (long long)k, (long long)m, (long long)k);
    const int64_t n = xv.rows;
    if (n == 0 || m == 0)
        return SY_OK;
    if (xv.p == ov.p)
        return sy_err_set(err, SY_ERR_INVALID, "linear: out overlaps x; the product cannot be computed in place");
    if ((rc = sy__cuda_enter(d, err)))
        return rc;
    const int bdt = bias ? (int)bias->dtype : 0;
    if (w->dtype == SY_DTYPE_F32) {
        if ((rc = gemm(d, w->data, w->dtype, ldw, xv.p, SY_DTYPE_F32, xv.ld, ov.p, ov.ld, n, m, k, err)))
            return rc;
        if (bias)
            sydk_combine(NULL, n, m, bias->data, bdt, ov.p, ov.ld, 0);
        return syc_launched(err, "linear bias");
    }
    const size_t es = 2;
    const int64_t xrows = d->split ? 2 * n : n;
    if ((rc = sy__cuda_buf(d, &d->act16, (size_t)(2 * n * k) * es, "linear: activation scratch", err)))
        return rc;
    sydk_split(xv.p, xv.ld, n, k, d->act16.p, (int)w->dtype);
    if ((rc = syc_launched(err, "linear: activation split")))
        return rc;
    if (!d->split) { /* the hi half alone is x rounded once */
        if ((rc = gemm(d, w->data, w->dtype, ldw, d->act16.p, w->dtype, k, ov.p, ov.ld, n, m, k, err)))
            return rc;
        if (bias)
            sydk_combine(NULL, n, m, bias->data, bdt, ov.p, ov.ld, 0);
        return syc_launched(err, "linear bias");
    }
    if ((rc = sy__cuda_buf(d, &d->tmp, sizeof(float) * (size_t)(xrows * m), "linear: product scratch", err)) ||
        (rc = gemm(d, w->data, w->dtype, ldw, d->act16.p, w->dtype, k, d->tmp.p, m, xrows, m, k, err)))
        return rc;
    sydk_combine(d->tmp.p, n, m, bias ? bias->data : NULL, bdt, ov.p, ov.ld, 1);
    return syc_launched(err, "linear: combine");
}

/* ------------------------------------------------------------------ rope */

/*
 * d->freq = inv_freq[0..n), uploaded only when the table differs from the
 * one it holds (every layer of every step brings the same table; a
 * recorded step must not copy from the caller's pageable memory).
 */
static int upload_freq(sy_cuda_dev *d, const float *inv_freq, int32_t n, sy_err *err)
{
    const size_t fb = sizeof(float) * (size_t)n;
    if (d->freq_host && d->freq_n == n && memcmp(d->freq_host, inv_freq, fb) == 0)
        return SY_OK;
    if (syc_capturing())
        return sy_err_set(err, SY_ERR_UNSUPPORTED, "device cuda: rope: a new inv_freq table of %d values while "
                          "recording a step (CUDA graph); the step's first run uploads it", n);
    int rc = sy__cuda_buf(d, &d->freq, fb, "rope: inv_freq scratch", err);
    if (rc)
        return rc;
    float *h = realloc(d->freq_host, fb ? fb : 1);
    if (!h)
        return sy_err_set(err, SY_ERR_NOMEM, "device cuda: rope: %zu bytes for the inv_freq table", fb);
    d->freq_host = h;
    d->freq_n = 0;
    /* Synchronous: later calls compare against freq_host and skip the copy. */
    SYC_TRY(err, cudaMemcpy(d->freq.p, inv_freq, fb, cudaMemcpyHostToDevice), "rope: inv_freq upload");
    memcpy(d->freq_host, inv_freq, fb);
    d->freq_n = n;
    return SY_OK;
}

int sy__cuda_rope(void *inst, sy_tensor *x, const int32_t *pos, const sy_rope_params *p, sy_err *err)
{
    sy_cuda_dev *d = inst;
    sydev_rows xv;
    int rc = sydev_f32_rows(x, "rope", "x", &xv, err);
    if (rc)
        return rc;
    if (!p || p->struct_size < offsetof(sy_rope_params, mscale) + sizeof p->mscale)
        return sy_err_set(err, SY_ERR_INVALID, "rope: params missing or too old (struct_size %u)",
                          p ? p->struct_size : 0u);
    if (p->head_dim <= 0 || xv.cols % p->head_dim)
        return sy_err_set(err, SY_ERR_INVALID, "rope: x is [%lld, %lld], not a whole number of heads of head_dim %d",
                          (long long)xv.rows, (long long)xv.cols, p->head_dim);
    if (p->rotary_dim <= 0 || p->rotary_dim > p->head_dim || p->rotary_dim % 2)
        return sy_err_set(err, SY_ERR_INVALID, "rope: rotary_dim %d must be even and in (0, head_dim %d]",
                          p->rotary_dim, p->head_dim);
    if (!p->inv_freq || (xv.rows > 0 && !pos))
        return sy_err_set(err, SY_ERR_INVALID, "rope: %s is NULL", p->inv_freq ? "pos" : "inv_freq");
    if (xv.rows == 0)
        return SY_OK;
    if ((rc = sy__cuda_enter(d, err)) || (rc = upload_i32(d, pos, xv.rows, "rope: positions upload", err)) ||
        (rc = upload_freq(d, p->inv_freq, p->rotary_dim / 2, err)))
        return rc;
    sydk_rope(xv.p, xv.ld, d->ids.p, d->freq.p, xv.rows, (int)(xv.cols / p->head_dim), p->head_dim, p->rotary_dim,
              p->neox, p->mscale);
    return syc_launched(err, "rope");
}

/* ------------------------------------------------------ silu_mul and add */

int sy__cuda_silu_mul(void *inst, const sy_tensor *gate, const sy_tensor *up, sy_tensor *out, sy_err *err)
{
    sy_cuda_dev *d = inst;
    sydev_rows g, u, o;
    int rc;
    if ((rc = sydev_f32_rows(gate, "silu_mul", "gate", &g, err)) || (rc = sydev_f32_rows(up, "silu_mul", "up", &u, err)) ||
        (rc = sydev_f32_rows(out, "silu_mul", "out", &o, err)) || (rc = sydev_same_shape(&g, &u, "silu_mul", "gate", "up", err)) ||
        (rc = sydev_same_shape(&g, &o, "silu_mul", "gate", "out", err)) || (rc = sy__cuda_enter(d, err)))
        return rc;
    sydk_silu_mul(g.p, g.ld, u.p, u.ld, o.p, o.ld, g.rows, g.cols);
    return syc_launched(err, "silu_mul");
}

int sy__cuda_add(void *inst, sy_tensor *acc, const sy_tensor *x, sy_err *err)
{
    sy_cuda_dev *d = inst;
    sydev_rows a, b;
    int rc;
    if ((rc = sydev_f32_rows(acc, "add", "acc", &a, err)) || (rc = sydev_f32_rows(x, "add", "x", &b, err)) ||
        (rc = sydev_same_shape(&a, &b, "add", "acc", "x", err)) || (rc = sy__cuda_enter(d, err)))
        return rc;
    sydk_add(a.p, a.ld, b.p, b.ld, a.rows, a.cols);
    return syc_launched(err, "add");
}

/* ----------------------------------------------------------------- argmax */

int sy__cuda_argmax(void *inst, const sy_tensor *x, int32_t *ids_out, float *vals_out, sy_err *err)
{
    sy_cuda_dev *d = inst;
    sydev_rows v;
    int rc = sydev_f32_rows(x, "argmax", "x", &v, err);
    if (rc)
        return rc;
    if (v.cols < 1 || v.cols > INT32_MAX)
        return sy_err_set(err, SY_ERR_INVALID, "argmax: x must have 1..%d columns, found %lld", INT32_MAX,
                          (long long)v.cols);
    if (v.rows > 0 && !ids_out)
        return sy_err_set(err, SY_ERR_INVALID, "argmax: ids_out is NULL");
    if (v.rows == 0)
        return SY_OK;
    const size_t n = (size_t)v.rows;
    if ((rc = sy__cuda_enter(d, err)) || (rc = sy__cuda_no_capture("argmax", err)) ||
        (rc = sy__cuda_buf(d, &d->pick, n * (sizeof(int32_t) + sizeof(float)), "argmax", err)))
        return rc;
    int32_t *ids_dev = d->pick.p;
    float *vals_dev = (float *)(ids_dev + n);
    sydk_argmax(v.p, v.ld, v.rows, v.cols, ids_dev, vals_dev);
    if ((rc = syc_launched(err, "argmax")))
        return rc;
    /* cudaMemcpy on this thread's stream waits for the kernel (and everything queued before it). */
    SYC_TRY(err, cudaMemcpy(ids_out, ids_dev, n * sizeof(int32_t), cudaMemcpyDeviceToHost), "argmax: ids download");
    if (vals_out)
        SYC_TRY(err, cudaMemcpy(vals_out, vals_dev, n * sizeof(float), cudaMemcpyDeviceToHost), "argmax: values download");
    return SY_OK;
}

/* ----------------------------------------------------------------- sample */

int sy__cuda_sample(void *inst, const sy_tensor *x, const sy_sample_row *rows, int32_t *ids_out, sy_err *err)
{
    sy_cuda_dev *d = inst;
    sydev_rows v;
    int rc = sydev_f32_rows(x, "sample", "x", &v, err);
    if (rc)
        return rc;
    if (v.cols < 1 || v.cols > INT32_MAX)
        return sy_err_set(err, SY_ERR_INVALID, "sample: x must have 1..%d columns, found %lld", INT32_MAX,
                          (long long)v.cols);
    if (v.rows == 0)
        return SY_OK;
    if (!rows || !ids_out)
        return sy_err_set(err, SY_ERR_INVALID, "sample: %s is NULL", rows ? "ids_out" : "rows");
    if (rows[0].struct_size < sizeof(sy_sample_row))
        return sy_err_set(err, SY_ERR_INVALID, "sample: rows[0].struct_size is %u, expected at least %zu",
                          rows[0].struct_size, sizeof(sy_sample_row));
    const size_t n = (size_t)v.rows;
    sydk_sample_row *packed = malloc(sizeof *packed * n);
    if (!packed)
        return sy_err_set(err, SY_ERR_NOMEM, "sample: cannot allocate %zu rows", n);
    for (size_t r = 0; r < n; r++) {
        const sy_sample_row *p = (const sy_sample_row *)(const void *)((const char *)rows + r * rows[0].struct_size);
        if (p->temperature > 0.0f && !(p->u >= 0.0 && p->u < 1.0)) {
            free(packed);
            return sy_err_set(err, SY_ERR_INVALID, "sample: rows[%zu].u must be in [0, 1), found %g", r, p->u);
        }
        packed[r] = (sydk_sample_row){.u = p->u, .temperature = p->temperature, .top_p = p->top_p, .min_p = p->min_p,
                                      .top_k = p->top_k};
    }
    /* d->pick: the rows (8-byte aligned first), then the ids. */
    const size_t row_bytes = sizeof *packed * n;
    if ((rc = sy__cuda_enter(d, err)) || (rc = sy__cuda_no_capture("sample", err)) ||
        (rc = sy__cuda_buf(d, &d->pick, row_bytes + n * sizeof(int32_t), "sample", err))) {
        free(packed);
        return rc;
    }
    sydk_sample_row *rows_dev = d->pick.p;
    int32_t *ids_dev = (int32_t *)(void *)((char *)d->pick.p + row_bytes);
    const cudaError_t up = cudaMemcpy(rows_dev, packed, row_bytes, cudaMemcpyHostToDevice);
    free(packed);
    SYC_TRY(err, up, "sample: rows upload");
    sydk_sample(v.p, v.ld, v.rows, v.cols, rows_dev, ids_dev);
    if ((rc = syc_launched(err, "sample")))
        return rc;
    /* cudaMemcpy on this thread's stream waits for the kernel (and everything queued before it). */
    SYC_TRY(err, cudaMemcpy(ids_out, ids_dev, n * sizeof(int32_t), cudaMemcpyDeviceToHost), "sample: ids download");
    return SY_OK;
}
