/* Launcher of comm/cuda-p2p's reduction kernel (p2p_kern.cu), callable from C. */
#ifndef SY_P2P_KERN_H
#define SY_P2P_KERN_H

#include <cuda_runtime_api.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SYP2P_MAX_RANKS 16

/* out[i] = src[0][i] + src[1][i] + ... + src[world-1][i], in rank order; src may point into peers' GPUs.
 * Queued on the calling thread's per-thread default stream; returns the launch's error. */
cudaError_t syp2p_sum(float *out, const float *const *src, int world, size_t n);

#ifdef __cplusplus
}
#endif

#endif
