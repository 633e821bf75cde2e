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
    syc_buf pick;       /* argmax: each row's id, then its value; sample: the rows, then the ids */
    syc_buf wdq;        /* linear on FP8/NVFP4 weights, n > 8: one tile of dequantised weight rows */
    float *freq_host;   /* the inv_freq values d->freq holds (rope uploads a table once, not every call) */
    int32_t freq_n;
    int graphs;         /* [device] graphs = on */
    void *blas_ws;      /* cuBLAS's workspace, ours so that a recorded GEMM never allocates */
    /* With graphs on, buffers outgrown by a later (larger) step are kept until destroy: recordings still
     * point into them. */
    void **retired;
    size_t n_retired, cap_retired;
} sy_cuda_dev;

/* Grows b to bytes; refused while a step is recorded (a freed buffer would be freed at every replay). */
int sy__cuda_buf(sy_cuda_dev *d, syc_buf *b, size_t bytes, const char *what, sy_err *err);
/* Refuses an op that waits for the device or reads back while a step is recorded (device_cuda_graph.c). */
int sy__cuda_no_capture(const char *op, sy_err *err);
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
int sy__cuda_sample(void *inst, const sy_tensor *x, const sy_sample_row *rows, int32_t *ids_out, sy_err *err);
/* device_cuda_graph.c: pinned host memory and recorded steps (sy_device_ops' graph ops). */
void *sy__cuda_host_alloc(void *inst, size_t bytes, sy_err *err);
void sy__cuda_host_free(void *inst, void *p);
int sy__cuda_graph_begin(void *inst, sy_err *err);
int sy__cuda_graph_end(void *inst, void **graph, sy_err *err);
int sy__cuda_graph_launch(void *inst, void *graph, sy_err *err);
void sy__cuda_graph_free(void *inst, void *graph);

#endif
