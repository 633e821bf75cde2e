/*
 * comm/cuda-p2p's one-shot reduction: every rank reads all ranks' chunks
 * straight from their GPUs (peer access through CUDA IPC mappings) and sums
 * them in rank order 0..N-1, so every rank gets bitwise the same result.
 */
#include <stdint.h>

#include "p2p_kern.h"

typedef struct srcs {
    const float *p[SYP2P_MAX_RANKS];
} srcs;

__global__ void k_sum(float *out, srcs s, int world, size_t n)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float acc = s.p[0][i];
        for (int r = 1; r < world; r++)
            acc += s.p[r][i];
        out[i] = acc;
    }
}

extern "C" cudaError_t syp2p_sum(float *out, const float *const *src, int world, size_t n)
{
    if (world < 1 || world > SYP2P_MAX_RANKS)
        return cudaErrorInvalidValue;
    if (n == 0)
        return cudaSuccess;
    srcs s;
    for (int r = 0; r < world; r++)
        s.p[r] = src[r];
    size_t blocks = (n + 255) / 256;
    if (blocks > 1024)
        blocks = 1024; /* enough to saturate NVLink; more only adds scheduling */
    k_sum<<<(unsigned)blocks, 256, 0, cudaStreamPerThread>>>(out, s, world, n);
    return cudaGetLastError();
}
