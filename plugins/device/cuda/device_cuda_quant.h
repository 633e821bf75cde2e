/*
 * device/cuda on FP8 E4M3 and NVFP4 weights (device_cuda_quant.c): the
 * entry points device_cuda.c and device_cuda_ops.c hand quantised weights to.
 */
#ifndef SY_DEVICE_CUDA_QUANT_H
#define SY_DEVICE_CUDA_QUANT_H

#include "device_cuda.h"

static inline int syc_wdtype_quant(sy_dtype dt)
{
    return dt == SY_DTYPE_FP8_E4M3 || dt == SY_DTYPE_FP4_E2M1;
}

/* prepare_weight for a quantised host weight: codes and scales in one GPU allocation (device_quant.h). */
int sy__cuda_prepare_qweight(sy_cuda_dev *d, const char *name, const sy_tensor *host, sy_tensor *out, sy_err *err);
/* linear with a weight sy__cuda_prepare_qweight made. */
int sy__cuda_linear_q(sy_cuda_dev *d, const sy_tensor *x, const sy_tensor *w, const sy_tensor *bias, sy_tensor *out,
                      sy_err *err);

#endif
