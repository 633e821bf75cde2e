/*
 * bw_probe: the GPU's device-memory bandwidth as cudaMemcpy D2D sees it
 * (best of 10 copies of 1 GiB; each byte is read once and written once, so
 * GB/s = 2 x bytes / time). tests/gpu/run.sh divides it by the bytes of
 * weights one decode token reads to get the decode speed bound.
 * usage: bw_probe [GPU]; prints "d2d_bandwidth_gbs <value>".
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    const int gpu = argc > 1 ? atoi(argv[1]) : 0;
    const size_t bytes = (size_t)1 << 30;
    void *a = NULL, *b = NULL;
    cudaEvent_t t0, t1;
    cudaError_t e = cudaSetDevice(gpu);
    if (e == cudaSuccess)
        e = cudaMalloc(&a, bytes);
    if (e == cudaSuccess)
        e = cudaMalloc(&b, bytes);
    if (e == cudaSuccess)
        e = cudaMemset(a, 1, bytes);
    if (e == cudaSuccess)
        e = cudaEventCreate(&t0);
    if (e == cudaSuccess)
        e = cudaEventCreate(&t1);
    if (e != cudaSuccess) {
        fprintf(stderr, "bw_probe: GPU %d: %s (%s)\n", gpu, cudaGetErrorName(e), cudaGetErrorString(e));
        return 1;
    }
    float best = 1e30f;
    for (int i = 0; i < 11 && e == cudaSuccess; i++) {
        cudaEventRecord(t0, 0);
        e = cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);
        cudaEventRecord(t1, 0);
        cudaEventSynchronize(t1);
        float ms = 0;
        cudaEventElapsedTime(&ms, t0, t1);
        if (i > 0 && ms < best) /* the first copy warms up */
            best = ms;
    }
    if (e != cudaSuccess) {
        fprintf(stderr, "bw_probe: copy: %s\n", cudaGetErrorString(e));
        return 1;
    }
    printf("d2d_bandwidth_gbs %.1f\n", 2.0 * (double)bytes / (best * 1e-3) / 1e9);
    cudaFree(a);
    cudaFree(b);
    return 0;
}
