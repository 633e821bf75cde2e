/*
 * Launchers of the device/cuda kernels (device_kern.cu), callable from C.
 * Pointers are device memory; every launcher queues on the calling thread's
 * per-thread default stream (cuda.mk) and returns at once (errors surface through cudaGetLastError).
 * dt/wdt/bdt are sy_dtype values (F32, F16 or BF16).
 */
#ifndef SY_DEVICE_KERN_H
#define SY_DEVICE_KERN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

void sydk_embed(const void *table, int dt, int64_t ldt, const int32_t *ids_dev, int64_t n, int64_t cols, float *out,
                int64_t ldo);
/* add: res += x first, then out = rmsnorm(res) * w; else out = rmsnorm(x) * w (res unused). */
void sydk_rmsnorm(float *res, int64_t ldr, const float *x, int64_t ldx, const void *w, int wdt, float eps, float *out,
                  int64_t ldo, int64_t rows, int64_t cols, int add);
void sydk_rope(float *x, int64_t ldx, const int32_t *pos_dev, const float *inv_freq_dev, int64_t rows, int heads,
               int head_dim, int rotary_dim, int neox, float mscale);
void sydk_silu_mul(const float *gate, int64_t ldg, const float *up, int64_t ldu, float *out, int64_t ldo, int64_t rows,
                   int64_t cols);
void sydk_add(float *acc, int64_t lda, const float *x, int64_t ldx, int64_t rows, int64_t cols);
/* dst holds 2 * n * k elements of dt (F16 or BF16): hi rows, then lo rows. */
void sydk_split(const float *x, int64_t ldx, int64_t n, int64_t k, void *dst, int dt);
/* halves 1: out = tmp[:n] + tmp[n:] (+ bias); halves 0: out += bias. */
void sydk_combine(const float *tmp, int64_t n, int64_t m, const void *bias, int bdt, float *out, int64_t ldo,
                  int halves);
/* ids_dev[r], vals_dev[r]: the greedy pick of row r of x and its value (the rule of sy_device_ops.argmax). */
void sydk_argmax(const float *x, int64_t ldx, int64_t rows, int64_t cols, int32_t *ids_dev, float *vals_dev);

/* One row of sydk_sample: sy_sample_row without its struct_size, as the kernel reads it. */
typedef struct sydk_sample_row {
    double u;
    float temperature, top_p, min_p;
    int32_t top_k;
} sydk_sample_row;
/* Candidates a row may keep, when it must sort them, for the kernel to finish it; past it the id is -1. */
#define SYDK_SAMPLE_SORT_CAP 2048
/* ids_dev[r]: the host sampler's draw from row r of x with rows_dev[r] (sy_device_ops.sample), or -1. */
void sydk_sample(const float *x, int64_t ldx, int64_t rows, int64_t cols, const sydk_sample_row *rows_dev,
                 int32_t *ids_dev);

#ifdef __cplusplus
}
#endif

#endif
