/*
 * The cuda device plugin's instance (internal to the plugin).
 * device_cuda.c: descriptor, keys, probe, lifetime, memory, weights.
 * device_cuda_ops.c: the compute ops, each checking shapes before queueing.
 */
#ifndef SY_DEVICE_CUDA_H
#define SY_DEVICE_CUDA_H

#include <cublas_v2.h>

#include "switchyard/plugin.h"
#include "sycuda.h"

#define SY_CUDA_DEV_NAME "cuda"

/* A device buffer that only grows; freed stream-ordered so queued kernels may still read the old one. */
typedef struct syc_buf {
    void *p;
    size_t cap;
} syc_buf;

typedef struct sy_cuda_dev {
    const sy_host *host;
    int gpu;
    int split;          /* linear: F32 activations as hi + lo 16-bit halves (1) or rounded once (0) */
    cublasHandle_t blas;
    syc_buf ids;        /* embed ids, rope positions */
    syc_buf freq;       /* rope inv_freq */
    syc_buf act16;      /* linear: activations in the weight's 16-bit type */
    syc_buf tmp;        /* linear: the two halves' products */
    syc_buf wdq;        /* linear on FP8/NVFP4 weights, n > 8: one tile of dequantised weight rows */
} sy_cuda_dev;

int sy__cuda_buf(sy_cuda_dev *d, syc_buf *b, size_t bytes, const char *what, sy_err *err);
/* Makes the instance's GPU current on the calling thread (the engine may call from another thread than create). */
int sy__cuda_enter(sy_cuda_dev *d, sy_err *err);

/* Rows of contiguous elements: rows = product of the outer dims, ld = the row stride. 0 on success. */
static inline int syc_view2d(const sy_tensor *t, int64_t *rows, int64_t *cols, int64_t *ld)
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
    if (nd == 1 || r <= 1) {
        *ld = *cols;
        return *cols < 0 ? -1 : 0;
    }
    const int64_t s = t->stride[nd - 2];
    for (int i = nd - 3; i >= 0; i--)
        if (t->shape[i] > 1 && t->stride[i] != t->stride[i + 1] * t->shape[i + 1])
            return -1;
    if (s < *cols)
        return -1;
    *ld = s;
    return 0;
}

static inline int syc_wdtype_ok(sy_dtype dt)
{
    return dt == SY_DTYPE_F32 || dt == SY_DTYPE_F16 || dt == SY_DTYPE_BF16;
}

int sy__cuda_embed(void *inst, const sy_tensor *table, const int32_t *ids, int64_t n, sy_tensor *out, sy_err *err);
int sy__cuda_rmsnorm(void *inst, const sy_tensor *x, const sy_tensor *w, float eps, sy_tensor *out, sy_err *err);
int sy__cuda_add_rmsnorm(void *inst, sy_tensor *residual, const sy_tensor *x, const sy_tensor *w, float eps,
                         sy_tensor *out, sy_err *err);
int sy__cuda_linear(void *inst, const sy_tensor *x, const sy_tensor *w, const sy_tensor *bias, sy_tensor *out,
                    sy_err *err);
int sy__cuda_rope(void *inst, sy_tensor *x, const int32_t *pos, const sy_rope_params *p, sy_err *err);
int sy__cuda_silu_mul(void *inst, const sy_tensor *gate, const sy_tensor *up, sy_tensor *out, sy_err *err);
int sy__cuda_add(void *inst, sy_tensor *acc, const sy_tensor *x, sy_err *err);

#endif
