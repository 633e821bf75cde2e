/*
 * Helpers shared by the CUDA plugins' C glue (header only: each plugin is
 * one shared object and links no other plugin). The plugins compute on the
 * calling thread's per-thread default stream (built with
 * CUDA_API_PER_THREAD_DEFAULT_STREAM and nvcc --default-stream per-thread,
 * plugins/common/cuda/cuda.mk): work the device, attention, MoE and comm
 * plugins queue from the engine thread is then ordered without any of them
 * knowing the others' streams, which the plugin ABI cannot hand over, and
 * it is one stream that device cuda's graph ops can record. Per-thread
 * streams of different threads are not ordered with each other: work
 * queued while loading is waited for before steps run (the engine
 * synchronizes the device at the end of its open).
 */
#ifndef SY_CUDA_H
#define SY_CUDA_H

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>

#include "switchyard/plugin.h"

/* Maps a CUDA error to the ABI's status and writes "what: name (text)". */
static inline int syc_fail(sy_err *err, cudaError_t e, const char *what)
{
    int code = e == cudaErrorMemoryAllocation ? SY_ERR_NOMEM
               : (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver || e == cudaErrorInitializationError)
                   ? SY_ERR_UNAVAILABLE
                   : SY_ERR_INTERNAL;
    return sy_err_set(err, code, "%s: %s (%s)", what, cudaGetErrorName(e), cudaGetErrorString(e));
}

/* Evaluates a CUDA runtime call; on failure returns from the caller with the status. */
#define SYC_TRY(err, call, what)                       \
    do {                                               \
        cudaError_t syc_e_ = (call);                   \
        if (syc_e_ != cudaSuccess)                     \
            return syc_fail((err), syc_e_, (what));    \
    } while (0)

/* The last launch's error (kernel launches report asynchronously). */
static inline int syc_launched(sy_err *err, const char *what)
{
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? SY_OK : syc_fail(err, e, what);
}

/*
 * Probe: only cudaGetDeviceCount (which loads the driver but creates no
 * context) and attribute queries of device `gpu`. Returns the device count
 * (0 with why set when there is none) and the compute capability.
 */
static inline int syc_probe(int gpu, sy_err *why, int *cc_major, int *cc_minor)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        /* The runtime reports a missing driver as "insufficient driver": say which it is. */
        void *drv = e == cudaErrorInsufficientDriver ? dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL) : NULL;
        const int no_driver = e == cudaErrorInsufficientDriver && !drv;
        if (drv)
            dlclose(drv);
        sy_err_set(why, SY_ERR_UNAVAILABLE, "no CUDA device: cudaGetDeviceCount returned %s (%s)%s",
                   cudaGetErrorName(e), cudaGetErrorString(e),
                   no_driver ? "; no NVIDIA driver (libcuda.so.1 not found)" : "");
        return 0;
    }
    if (n <= 0) {
        sy_err_set(why, SY_ERR_UNAVAILABLE, "no CUDA device: cudaGetDeviceCount found 0 devices");
        return 0;
    }
    if (gpu < 0 || gpu >= n) {
        sy_err_set(why, SY_ERR_UNAVAILABLE, "CUDA device %d requested, %d present", gpu, n);
        return 0;
    }
    int ma = 0, mi = 0;
    if (cudaDeviceGetAttribute(&ma, cudaDevAttrComputeCapabilityMajor, gpu) != cudaSuccess ||
        cudaDeviceGetAttribute(&mi, cudaDevAttrComputeCapabilityMinor, gpu) != cudaSuccess) {
        sy_err_set(why, SY_ERR_UNAVAILABLE, "CUDA device %d: cannot read its compute capability", gpu);
        return 0;
    }
    if (cc_major)
        *cc_major = ma;
    if (cc_minor)
        *cc_minor = mi;
    return n;
}

/* Compiled-in architectures the kernels can run on (SASS for 8.x, 9.0, 12.x; PTX for 12.0 and newer). */
static inline int syc_cc_supported(int major, int minor)
{
    (void)minor;
    return major == 8 || major == 9 || major >= 12;
}

/* probe's test for a plugin whose kernels are built for every supported
 * architecture: GPU `gpu` is there and this build has kernels for it. */
static inline int syc_probe_gpu(int gpu, sy_err *why)
{
    int ma = 0, mi = 0;
    if (!syc_probe(gpu, why, &ma, &mi))
        return 0;
    if (!syc_cc_supported(ma, mi)) {
        sy_err_set(why, SY_ERR_UNSUPPORTED,
                   "GPU %d has compute capability %d.%d; this build has kernels for 8.x, 9.0 and 12.x", gpu, ma, mi);
        return 0;
    }
    return 1;
}

/*
 * The GPU a rank computes on by default: its local rank (sy_host.local_rank,
 * what device cuda's gpu = -1 takes), 0 for a host table without the field.
 * Probes look at this GPU, so on a node with mixed GPUs each rank's `auto`
 * judges its own GPU rather than GPU 0.
 */
static inline int syc_rank_gpu(const sy_host *host)
{
    if (!host || host->struct_size < offsetof(sy_host, local_rank) + sizeof host->local_rank || host->local_rank < 0)
        return 0;
    return host->local_rank;
}

/*
 * The GPU an attention, MoE or comm instance computes on: the one current on
 * the thread that creates it. The engine opens the device plugin first, on
 * the same thread, and device cuda makes its GPU current in create (its
 * gpu key, or the local rank), so this follows [device] gpu however it is
 * set. cudaGetDevice creates no context.
 */
static inline int syc_current_gpu(void)
{
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) {
        cudaGetLastError();
        dev = 0;
    }
    return dev;
}

/*
 * The GPU a probe judges: the rank's (syc_rank_gpu) when this node has it,
 * else the one current on the calling thread. A rank beyond the node's GPUs
 * only runs with a pinned [device] gpu, which device cuda's create has made
 * current by the time the engine resolves attention and MoE (GPU 0 before).
 */
static inline int syc_probe_target(const sy_host *host)
{
    const int gpu = syc_rank_gpu(host);
    int n = 0;
    if (gpu > 0 && cudaGetDeviceCount(&n) == cudaSuccess && gpu >= n)
        return syc_current_gpu();
    return gpu;
}

/*
 * Whether this thread's stream is being recorded (device cuda's graph_begin
 * captures the per-thread default stream). Work a recording cannot hold
 * (allocating, freeing, waiting for the device, copying to the host) must
 * then refuse with a message naming itself, so the engine falls back.
 */
static inline int syc_capturing(void)
{
    enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(cudaStreamPerThread, &st) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return st != cudaStreamCaptureStatusNone;
}

/*
 * Makes `gpu` current on the calling thread. CUDA's current device is per
 * thread and the engine may call a plugin from another thread than the one
 * that created it (serve's engine thread; a thread that never chose a device
 * is on GPU 0), so every op that touches the GPU enters first. Cheap when
 * the device is already current.
 */
static inline int syc_enter(int gpu, sy_err *err, const char *who)
{
    cudaError_t e = cudaSetDevice(gpu);
    if (e == cudaSuccess)
        return SY_OK;
    return sy_err_set(err, e == cudaErrorNoDevice || e == cudaErrorInvalidDevice ? SY_ERR_UNAVAILABLE : SY_ERR_INTERNAL,
                      "%s: cudaSetDevice(%d): %s (%s)", who, gpu, cudaGetErrorName(e), cudaGetErrorString(e));
}

#endif
