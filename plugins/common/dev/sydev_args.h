/*
 * The operand checks of the device ops (the contract of sy_device_ops in
 * switchyard/plugin.h), shared by the device plugins so that a caller's
 * mistake reads the same on the CPU and on a GPU. Header-only: the CPU and
 * CUDA plugins share no library.
 */
#ifndef SY_DEV_ARGS_H
#define SY_DEV_ARGS_H

#include <math.h>

#include "switchyard/plugin.h"

/*
 * A tensor as rows of contiguous elements: rows = the product of the outer
 * dims, ld = the row stride (the dims above the innermost outer one must be
 * dense over it). 0 on success, -1 when it is not such a view.
 */
static inline int sydev_view2d(const sy_tensor *t, int64_t *rows, int64_t *cols, int64_t *ld)
{
    if (!t || t->ndim < 1 || t->ndim > SY_MAX_DIMS)
        return -1;
    const int nd = t->ndim;
    if (t->shape[nd - 1] > 1 && t->stride[nd - 1] != 1)
        return -1;
    int64_t r = 1;
    for (int i = 0; i < nd - 1; i++) {
        if (t->shape[i] < 0)
            return -1;
        r *= t->shape[i];
    }
    *cols = t->shape[nd - 1];
    *rows = r;
    if (nd == 1) {
        *ld = *cols;
        return *cols < 0 ? -1 : 0;
    }
    int64_t s = t->stride[nd - 2];
    for (int i = nd - 3; i >= 0; i--)
        if (t->shape[i] > 1 && t->stride[i] != t->stride[i + 1] * t->shape[i + 1])
            return -1;
    if (r > 1 && s < *cols)
        return -1;
    *ld = r > 1 ? s : (s > *cols ? s : *cols);
    return 0;
}

/* The weight dtypes every device op reads (quantised ones have their own paths). */
static inline int sydev_wdtype_ok(sy_dtype d)
{
    return d == SY_DTYPE_F32 || d == SY_DTYPE_F16 || d == SY_DTYPE_BF16;
}

/* A tensor seen as rows of F32 (activations). */
typedef struct sydev_rows {
    float *p;
    int64_t rows, cols, ld;
} sydev_rows;

static inline int sydev_f32_rows(const sy_tensor *t, const char *op, const char *what, sydev_rows *v, sy_err *err)
{
    if (!t)
        return sy_err_set(err, SY_ERR_INVALID, "%s: %s is NULL", op, what);
    if (t->dtype != SY_DTYPE_F32)
        return sy_err_set(err, SY_ERR_INVALID, "%s: %s must be F32, found %s", op, what, sy_dtype_name(t->dtype));
    if (sydev_view2d(t, &v->rows, &v->cols, &v->ld))
        return sy_err_set(err, SY_ERR_INVALID,
                          "%s: %s must be rows of contiguous elements (last stride 1), found ndim %d, last stride %lld",
                          op, what, t->ndim, t->ndim > 0 ? (long long)t->stride[t->ndim - 1] : 0LL);
    if (!t->data && v->rows * v->cols > 0)
        return sy_err_set(err, SY_ERR_INVALID, "%s: %s has no data", op, what);
    v->p = t->data;
    return SY_OK;
}

/* A weight-like operand: F32/F16/BF16 rows. */
static inline int sydev_w_rows(const sy_tensor *t, const char *op, const char *what, int64_t *rows, int64_t *cols,
                               int64_t *ld, sy_err *err)
{
    if (!t)
        return sy_err_set(err, SY_ERR_INVALID, "%s: %s is NULL", op, what);
    if (!sydev_wdtype_ok(t->dtype))
        return sy_err_set(err, SY_ERR_INVALID, "%s: %s must be F32, F16 or BF16, found %s", op, what,
                          sy_dtype_name(t->dtype));
    if (sydev_view2d(t, rows, cols, ld))
        return sy_err_set(err, SY_ERR_INVALID, "%s: %s must be rows of contiguous elements (last stride 1)", op, what);
    if (!t->data && *rows * *cols > 0)
        return sy_err_set(err, SY_ERR_INVALID, "%s: %s has no data", op, what);
    return SY_OK;
}

/* A 1-D parameter vector of d elements (norm weight, bias). */
static inline int sydev_vec_param(const sy_tensor *t, int64_t d, const char *op, const char *what, sy_err *err)
{
    int64_t r, c, ld;
    int rc = sydev_w_rows(t, op, what, &r, &c, &ld, err);
    if (rc)
        return rc;
    if (r != 1 || c != d)
        return sy_err_set(err, SY_ERR_INVALID, "%s: %s must hold [%lld] elements, found [%lld x %lld]", op, what,
                          (long long)d, (long long)r, (long long)c);
    return SY_OK;
}

static inline int sydev_same_shape(const sydev_rows *a, const sydev_rows *b, const char *op, const char *an,
                                   const char *bn, sy_err *err)
{
    if (a->rows != b->rows || a->cols != b->cols)
        return sy_err_set(err, SY_ERR_INVALID, "%s: %s is [%lld, %lld] but %s is [%lld, %lld]; expected the same shape",
                          op, bn, (long long)b->rows, (long long)b->cols, an, (long long)a->rows, (long long)a->cols);
    return SY_OK;
}

static inline int sydev_check_eps(float eps, const char *op, sy_err *err)
{
    if (!(eps >= 0.0f) || isinf(eps))
        return sy_err_set(err, SY_ERR_INVALID, "%s: eps must be finite and >= 0, found %g", op, (double)eps);
    return SY_OK;
}

#endif
