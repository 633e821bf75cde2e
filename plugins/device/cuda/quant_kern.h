/*
 * Launchers of the FP8 / NVFP4 linear kernels (quant_kern.cu), callable
 * from C. w is a weight as prepare_weight laid it out (device_quant.h):
 * codes at w, scales at scale; fp4 selects NVFP4 (else FP8 E4M3). Every
 * launcher queues on the calling thread's per-thread default stream and
 * returns at once.
 */
#ifndef SY_QUANT_KERN_H
#define SY_QUANT_KERN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sydq_weight {
    const uint8_t *w;
    const void *scale;
    int fp4;
    int64_t m, k;   /* rows (outputs) and columns (inputs) */
    int64_t b0, b1; /* scale block */
    float global;
} sydq_weight;

/* The most activation rows sydq_gemv takes. */
#define SYDQ_GEMV_MAX_N 8

/* out[i, j] = sum_kk x[i, kk] * W[j, kk] (+ bias[j]) for i < n <= SYDQ_GEMV_MAX_N: streams W once,
 * dequantising in registers, F32 activations and sums. bias may be NULL (bdt: its sy_dtype, F32/F16/BF16). */
void sydq_gemv(const sydq_weight *w, const float *x, int64_t ldx, int64_t n, const void *bias, int bdt, float *out,
               int64_t ldo);

/* dst[r, kk] = W[r0 + r, kk] for r < rows, kk < k, dense with row stride k; dst_bf16 1: rounded to BF16 (nearest
 * even), 0: F32. */
void sydq_dequant(const sydq_weight *w, int64_t r0, int64_t rows, void *dst, int dst_bf16);

#ifdef __cplusplus
}
#endif

#endif
