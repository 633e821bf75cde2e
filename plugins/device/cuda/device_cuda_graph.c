/*
 * device/cuda: recorded steps ([device] graphs = on). graph_begin captures
 * this thread's per-thread default stream, which every CUDA plugin queues
 * on (plugins/common/cuda/cuda.mk), in thread-local mode so other threads'
 * CUDA calls are not disturbed; graph_end instantiates the capture;
 * graph_launch replays it on the same stream. Host arrays the recorded
 * copies read come from host_alloc (pinned), so a replay reads their
 * values of the moment. Ops that cannot be recorded refuse by themselves
 * (sy__cuda_buf, sy__cuda_no_capture; attention and MoE the same way).
 */
#include "config.h"

#include <stdlib.h>

#include "device_cuda.h"

int sy__cuda_no_capture(const char *op, sy_err *err)
{
    if (!syc_capturing())
        return SY_OK;
    return sy_err_set(err, SY_ERR_UNSUPPORTED, "device cuda: %s waits for the GPU, copies to the host or allocates, "
                      "which a recorded step (CUDA graph) cannot hold", op);
}

void *sy__cuda_host_alloc(void *inst, size_t bytes, sy_err *err)
{
    sy_cuda_dev *d = inst;
    if (sy__cuda_enter(d, err))
        return NULL;
    void *p = NULL;
    cudaError_t e = cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocDefault);
    if (e != cudaSuccess) {
        sy_err_set(err, SY_ERR_NOMEM, "device cuda: host_alloc: cudaHostAlloc of %zu bytes: %s", bytes,
                   cudaGetErrorString(e));
        return NULL;
    }
    return p;
}

void sy__cuda_host_free(void *inst, void *p)
{
    (void)inst;
    if (p)
        cudaFreeHost(p);
}

int sy__cuda_graph_begin(void *inst, sy_err *err)
{
    sy_cuda_dev *d = inst;
    int rc = sy__cuda_enter(d, err);
    if (rc)
        return rc;
    if (!d->graphs)
        return sy_err_set(err, SY_ERR_UNSUPPORTED, "device cuda: graph_begin with [device] graphs = off");
    if (syc_capturing())
        return sy_err_set(err, SY_ERR_INVALID, "device cuda: graph_begin while this thread is already recording");
    SYC_TRY(err, cudaStreamBeginCapture(cudaStreamPerThread, cudaStreamCaptureModeThreadLocal),
            "graph_begin: cudaStreamBeginCapture");
    return SY_OK;
}

int sy__cuda_graph_end(void *inst, void **graph, sy_err *err)
{
    sy_cuda_dev *d = inst;
    *graph = NULL;
    int rc = sy__cuda_enter(d, err);
    if (rc)
        return rc;
    cudaGraph_t g = NULL;
    cudaError_t e = cudaStreamEndCapture(cudaStreamPerThread, &g);
    /* A failed capture leaves its error as the thread's last error: clear it, or the next eager launch's check
     * (syc_launched, in every plugin) would report it. */
    cudaGetLastError();
    if (e != cudaSuccess || !g) {
        if (g)
            cudaGraphDestroy(g);
        return sy_err_set(err, SY_ERR_UNSUPPORTED, "graph_end: cudaStreamEndCapture: %s (%s)",
                          cudaGetErrorName(e), e == cudaSuccess ? "no graph" : cudaGetErrorString(e));
    }
    cudaGraphExec_t x = NULL;
    e = cudaGraphInstantiate(&x, g, 0);
    cudaGraphDestroy(g);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return sy_err_set(err, SY_ERR_UNSUPPORTED, "graph_end: cudaGraphInstantiate: %s (%s)", cudaGetErrorName(e),
                          cudaGetErrorString(e));
    }
    *graph = x;
    return SY_OK;
}

int sy__cuda_graph_launch(void *inst, void *graph, sy_err *err)
{
    sy_cuda_dev *d = inst;
    int rc = sy__cuda_enter(d, err);
    if (rc)
        return rc;
    if (!graph)
        return sy_err_set(err, SY_ERR_INVALID, "device cuda: graph_launch of a NULL graph");
    SYC_TRY(err, cudaGraphLaunch((cudaGraphExec_t)graph, cudaStreamPerThread), "graph_launch: cudaGraphLaunch");
    return SY_OK;
}

void sy__cuda_graph_free(void *inst, void *graph)
{
    sy_cuda_dev *d = inst;
    if (!graph)
        return;
    cudaSetDevice(d->gpu);
    cudaGraphExecDestroy((cudaGraphExec_t)graph);
}
