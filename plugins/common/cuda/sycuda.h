/*
 * Helpers shared by the CUDA plugins' C glue (header only: each plugin is
 * one shared object and links no other plugin). The plugins compute on the
 * legacy default stream: work the device, attention, MoE and comm plugins
 * queue from the engine thread is then ordered without any of them knowing
 * the others' streams, which the plugin ABI cannot hand over.
 */
#ifndef SY_CUDA_H
#define SY_CUDA_H

#include <cuda_runtime_api.h>
#include <dlfcn.h>
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
 * architecture: GPU 0 is there and this build has kernels for it. */
static inline int syc_probe_gpu0(sy_err *why)
{
    int ma = 0, mi = 0;
    if (!syc_probe(0, why, &ma, &mi))
        return 0;
    if (!syc_cc_supported(ma, mi)) {
        sy_err_set(why, SY_ERR_UNSUPPORTED,
                   "GPU 0 has compute capability %d.%d; this build has kernels for 8.x, 9.0 and 12.x", ma, mi);
        return 0;
    }
    return 1;
}

#endif
