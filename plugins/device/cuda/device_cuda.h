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
#include "sydev_args.h"

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
    syc_buf pick;       /* argmax: each row's id, then its value */
    syc_buf wdq;        /* linear on FP8/NVFP4 weights, n > 8: one tile of dequantised weight rows */
} sy_cuda_dev;

int sy__cuda_buf(sy_cuda_dev *d, syc_buf *b, size_t bytes, const char *what, sy_err *err);
/* Makes the instance's GPU current on the calling thread (the engine may call from another thread than create). */
int sy__cuda_enter(sy_cuda_dev *d, sy_err *err);

int sy__cuda_embed(void *inst, const sy_tensor *table, const int32_t *ids, int64_t n, sy_tensor *out, sy_err *err);
int sy__cuda_rmsnorm(void *inst, const sy_tensor *x, const sy_tensor *w, float eps, sy_tensor *out, sy_err *err);
int sy__cuda_add_rmsnorm(void *inst, sy_tensor *residual, const sy_tensor *x, const sy_tensor *w, float eps,
                         sy_tensor *out, sy_err *err);
int sy__cuda_linear(void *inst, const sy_tensor *x, const sy_tensor *w, const sy_tensor *bias, sy_tensor *out,
                    sy_err *err);
int sy__cuda_rope(void *inst, sy_tensor *x, const int32_t *pos, const sy_rope_params *p, sy_err *err);
int sy__cuda_silu_mul(void *inst, const sy_tensor *gate, const sy_tensor *up, sy_tensor *out, sy_err *err);
int sy__cuda_add(void *inst, sy_tensor *acc, const sy_tensor *x, sy_err *err);
int sy__cuda_argmax(void *inst, const sy_tensor *x, int32_t *ids_out, float *vals_out, sy_err *err);

#endif
