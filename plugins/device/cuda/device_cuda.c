/*
 * device/cuda: one NVIDIA GPU. Activations come from the device's default
 * memory pool (cudaMallocAsync with the release threshold raised, so freed
 * blocks are kept for the next step instead of going back to the driver);
 * weights are uploaded once in their own dtype (F32, F16, BF16; FP8 E4M3
 * and NVFP4 with their scales, see device_cuda_quant.c) with plain
 * cudaMalloc. GEMMs go through cuBLAS, the glue ops through the kernels of
 * device_kern.cu. Everything is queued on the calling thread's default
 * stream (per-thread, see sycuda.h); download and synchronize wait for it.
 * With graphs = on, decode steps are recorded and replayed
 * (device_cuda_graph.c).
 *
 * probe never creates a CUDA context: it calls cudaGetDeviceCount and
 * reads attributes, so `switchyard plugins` and `auto` work on machines
 * without a driver (libcudart loads libcuda itself, lazily).
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device_cuda.h"
#include "device_cuda_quant.h"

static const sy_key_decl keys[] = {
    {"gpu", SY_KEY_INT, "-1",
     "CUDA device index this instance computes on; -1 = the rank's place on its node (--tp N puts rank r on GPU r; "
     "GPU 0 for one process)", -1, 1023, NULL},
    {"linear", SY_KEY_ENUM, "split",
     "how a linear multiplies F32 activations with F16/BF16 weights: split = as a 16-bit hi + lo pair in one GEMM "
     "(close to the CPU's F32 result); round = rounded once to the weight's type (half the GEMM work, ~3 digits). "
     "FP8/NVFP4 weights beyond 8 rows: split = F32 tiles and GEMM, round = BF16 tiles and activations",
     1, 0, "split|round"},
    {"graphs", SY_KEY_ENUM, "off",
     "record each decode step shape once as a CUDA graph and replay it (on), or launch every op (off); off until a "
     "GPU run has checked and timed it (docs/gpu.md)", 1, 0, "off|on"},
    {NULL, 0, NULL, NULL, 0, 0, NULL},
};

static int probe(const sy_host *host, sy_err *why)
{
    /* Above every CPU plugin's 10..13: a usable GPU wins `auto`. The rank's own GPU (gpu = -1 takes it), not
     * GPU 0, so that on a node with mixed GPUs each rank judges the one it runs on. A rank beyond the GPUs
     * judges the current one (GPU 0 here): create then refuses loudly, or uses a pinned gpu, instead of `auto`
     * putting that rank alone on the CPU while its peers compute on GPUs. */
    return syc_probe_gpu(syc_probe_target(host), why) ? 100 : 0;
}

int sy__cuda_enter(sy_cuda_dev *d, sy_err *err)
{
    SYC_TRY(err, cudaSetDevice(d->gpu), "cudaSetDevice");
    return SY_OK;
}

int sy__cuda_buf(sy_cuda_dev *d, syc_buf *b, size_t bytes, const char *what, sy_err *err)
{
    if (bytes <= b->cap)
        return SY_OK;
    /* A recorded cudaFreeAsync would free the buffer again at every replay: the step's first run, op by op,
     * grows every buffer to its shape before a recording. */
    if (syc_capturing())
        return sy_err_set(err, SY_ERR_UNSUPPORTED, "device cuda: %s needs %zu bytes, %zu held: a recorded step "
                          "(CUDA graph) cannot grow a buffer", what, bytes, b->cap);
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < bytes)
        cap *= 2;
    if (b->p && d->graphs) { /* recordings may still read it: freed at destroy */
        if (d->n_retired == d->cap_retired) {
            const size_t slots = d->cap_retired ? 2 * d->cap_retired : 16;
            void **r = realloc(d->retired, slots * sizeof *r);
            if (!r)
                return sy_err_set(err, SY_ERR_NOMEM, "device cuda: %s: no memory to keep an outgrown buffer", what);
            d->retired = r;
            d->cap_retired = slots;
        }
        d->retired[d->n_retired++] = b->p;
    } else if (b->p) {
        SYC_TRY(err, cudaFreeAsync(b->p, 0), what);
    }
    b->p = NULL;
    b->cap = 0;
    SYC_TRY(err, cudaMallocAsync(&b->p, cap, 0), what);
    b->cap = cap;
    return SY_OK;
}

static void destroy(void *inst)
{
    sy_cuda_dev *d = inst;
    if (!d)
        return;
    cudaSetDevice(d->gpu);
    syc_buf *bufs[] = {&d->ids, &d->freq, &d->act16, &d->tmp, &d->wdq, &d->pick};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i]->p)
            cudaFreeAsync(bufs[i]->p, 0);
    for (size_t i = 0; i < d->n_retired; i++)
        cudaFreeAsync(d->retired[i], 0);
    free(d->retired);
    cudaDeviceSynchronize();
    if (d->blas)
        cublasDestroy(d->blas);
    if (d->blas_ws)
        cudaFree(d->blas_ws);
    free(d->freq_host);
    free(d);
}

static int create(const sy_host *host, const sy_kv *cfg, size_t n_cfg, void **inst, sy_err *err)
{
    *inst = NULL;
    long long gpu = sy_kv_int(cfg, n_cfg, "gpu", -1);
    const int by_rank = gpu < 0;
    if (by_rank)
        gpu = syc_rank_gpu(host);
    const char *lin = sy_kv_get(cfg, n_cfg, "linear");
    sy_err why = {{0}};
    int ma = 0, mi = 0;
    const int n = syc_probe((int)gpu, &why, &ma, &mi);
    if (!n && by_rank)
        return sy_err_set(err, SY_ERR_UNAVAILABLE, "device cuda: gpu = -1 gives local rank %lld GPU %lld (one GPU per "
                          "rank on a node): %s", gpu, gpu, why.msg);
    if (!n)
        return sy_err_set(err, SY_ERR_UNAVAILABLE, "device cuda: gpu = %lld: %s", gpu, why.msg);
    /* probe judged the local rank's GPU; a pinned gpu may be another one. */
    if (!syc_cc_supported(ma, mi))
        return sy_err_set(err, SY_ERR_UNSUPPORTED,
                          "device cuda: GPU %lld has compute capability %d.%d; this build has kernels for 8.x, 9.0 "
                          "and 12.x", gpu, ma, mi);
    sy_cuda_dev *d = calloc(1, sizeof *d);
    if (!d)
        return sy_err_set(err, SY_ERR_NOMEM, "device cuda: cannot allocate the instance");
    d->host = host;
    d->gpu = (int)gpu;
    d->split = !lin || strcmp(lin, "split") == 0;
    const char *graphs = sy_kv_get(cfg, n_cfg, "graphs");
    d->graphs = graphs && strcmp(graphs, "on") == 0;
    int rc = sy__cuda_enter(d, err);
    cudaMemPool_t pool;
    if (!rc && cudaDeviceGetDefaultMemPool(&pool, d->gpu) == cudaSuccess) {
        uint64_t keep = UINT64_MAX; /* keep freed activation blocks cached in the pool */
        cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
    }
    cublasStatus_t bs = rc ? CUBLAS_STATUS_SUCCESS : cublasCreate(&d->blas);
    if (!rc && bs != CUBLAS_STATUS_SUCCESS)
        rc = sy_err_set(err, SY_ERR_UNAVAILABLE, "device cuda: cublasCreate on GPU %d: %s", d->gpu,
                        cublasGetStatusString(bs));
    /* The calling thread's per-thread stream, resolved at each call, like every CUDA plugin's work (sycuda.h). */
    if (!rc && (bs = cublasSetStream(d->blas, cudaStreamPerThread)) != CUBLAS_STATUS_SUCCESS)
        rc = sy_err_set(err, SY_ERR_INTERNAL, "device cuda: cublasSetStream: %s", cublasGetStatusString(bs));
    /* A recorded GEMM must not allocate, so cuBLAS works in a buffer of ours: of its default size (32 MiB on
     * Hopper, 4 MiB elsewhere), with graphs on or off, so both pick the same GEMM algorithms. */
    const size_t ws = (size_t)(ma == 9 ? 32 : 4) << 20;
    if (!rc) {
        cudaError_t ce = cudaMalloc(&d->blas_ws, ws);
        if (ce != cudaSuccess)
            rc = sy_err_set(err, SY_ERR_NOMEM, "device cuda: cuBLAS workspace of %zu bytes: %s", ws,
                            cudaGetErrorString(ce));
        else if ((bs = cublasSetWorkspace(d->blas, d->blas_ws, ws)) != CUBLAS_STATUS_SUCCESS)
            rc = sy_err_set(err, SY_ERR_INTERNAL, "device cuda: cublasSetWorkspace: %s", cublasGetStatusString(bs));
    }
    if (rc) {
        destroy(d);
        return rc;
    }
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, d->gpu) == cudaSuccess)
        sy_logf(host, SY_LOG_INFO, SY_CUDA_DEV_NAME, "GPU %d: %s, compute capability %d.%d, %.1f GiB, linear %s%s",
                d->gpu, prop.name, ma, mi, (double)prop.totalGlobalMem / 1073741824.0, d->split ? "split" : "round",
                d->graphs ? ", graphs on" : "");
    *inst = d;
    return SY_OK;
}

/* ---------------------------------------------------------------- memory */

static int tensor_bytes(const sy_tensor *t, const char *op, size_t *bytes, sy_err *err)
{
    if (t->ndim < 0 || t->ndim > SY_MAX_DIMS)
        return sy_err_set(err, SY_ERR_INVALID, "%s: ndim %d, expected 0..%d", op, t->ndim, SY_MAX_DIMS);
    if (sy_dtype_bits(t->dtype) == 0)
        return sy_err_set(err, SY_ERR_INVALID, "%s: unknown dtype %d", op, (int)t->dtype);
    uint64_t n = 1;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] < 0)
            return sy_err_set(err, SY_ERR_INVALID, "%s: negative shape[%d] = %lld", op, i, (long long)t->shape[i]);
        if (t->shape[i] && n > UINT64_MAX / 64 / (uint64_t)t->shape[i])
            return sy_err_set(err, SY_ERR_INVALID, "%s: tensor size overflows", op);
        n *= (uint64_t)t->shape[i];
    }
    *bytes = (size_t)((n * (uint64_t)sy_dtype_bits(t->dtype) + 7) / 8);
    return SY_OK;
}

static void set_row_major_strides(sy_tensor *t)
{
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        t->stride[i] = s;
        s *= t->shape[i];
    }
}

static int dev_alloc(void *inst, sy_tensor *t, sy_err *err)
{
    sy_cuda_dev *d = inst;
    size_t bytes;
    int rc = tensor_bytes(t, "alloc", &bytes, err);
    /* Inside a recording cudaMallocAsync would become a graph node: memory that lives only while a replay runs. */
    if (rc || (rc = sy__cuda_enter(d, err)) || (rc = sy__cuda_no_capture("alloc", err)))
        return rc;
    void *p = NULL;
    cudaError_t e = cudaMallocAsync(&p, bytes ? (bytes + 255) / 256 * 256 : 256, 0);
    if (e != cudaSuccess)
        return sy_err_set(err, SY_ERR_NOMEM, "alloc: cannot allocate %zu bytes on GPU %d: %s", bytes, d->gpu,
                          cudaGetErrorString(e));
    int dense = 1;
    for (int i = 0; i < t->ndim; i++)
        dense &= t->stride[i] == 0;
    if (dense && t->ndim > 0)
        set_row_major_strides(t);
    t->data = p;
    t->device = 1 + d->gpu;
    return SY_OK;
}

static void dev_free(void *inst, sy_tensor *t)
{
    sy_cuda_dev *d = inst;
    if (t && t->data) {
        cudaSetDevice(d->gpu);
        cudaFreeAsync(t->data, 0);
        t->data = NULL;
    }
}

static int dev_upload(void *inst, sy_tensor *dst, const void *src, size_t bytes, sy_err *err)
{
    sy_cuda_dev *d = inst;
    size_t cap;
    int rc = tensor_bytes(dst, "upload", &cap, err);
    if (rc || (rc = sy__cuda_enter(d, err)))
        return rc;
    if (bytes > cap)
        return sy_err_set(err, SY_ERR_INVALID, "upload: %zu bytes into a tensor of %zu bytes", bytes, cap);
    if ((rc = sy__cuda_no_capture("upload", err)))
        return rc;
    if (bytes && (!dst->data || !src))
        return sy_err_set(err, SY_ERR_INVALID, "upload: NULL %s", dst->data ? "source" : "destination tensor data");
    /* Synchronous: the caller may reuse src as soon as this returns. */
    if (bytes)
        SYC_TRY(err, cudaMemcpy(dst->data, src, bytes, cudaMemcpyHostToDevice), "upload: cudaMemcpy");
    return SY_OK;
}

static int dev_download(void *inst, void *dst, const sy_tensor *src, size_t bytes, sy_err *err)
{
    sy_cuda_dev *d = inst;
    size_t cap;
    int rc = tensor_bytes(src, "download", &cap, err);
    if (rc || (rc = sy__cuda_enter(d, err)))
        return rc;
    if (bytes > cap)
        return sy_err_set(err, SY_ERR_INVALID, "download: %zu bytes from a tensor of %zu bytes", bytes, cap);
    if ((rc = sy__cuda_no_capture("download", err)))
        return rc;
    if (bytes && (!src->data || !dst))
        return sy_err_set(err, SY_ERR_INVALID, "download: NULL %s", dst ? "source tensor data" : "destination");
    /* cudaMemcpy on this thread's stream waits for every op queued on it first. */
    if (bytes)
        SYC_TRY(err, cudaMemcpy(dst, src->data, bytes, cudaMemcpyDeviceToHost), "download: cudaMemcpy");
    return SY_OK;
}

static int dev_prepare_weight(void *inst, const char *name, const sy_tensor *host, sy_tensor *out, sy_err *err)
{
    sy_cuda_dev *d = inst;
    const char *nm = name ? name : "?";
    if (!host || !host->data)
        return sy_err_set(err, SY_ERR_INVALID, "prepare_weight %s: no data", nm);
    if (syc_wdtype_quant(host->dtype))
        return sy__cuda_prepare_qweight(d, nm, host, out, err);
    if (!sydev_wdtype_ok(host->dtype))
        return sy_err_set(err, SY_ERR_UNSUPPORTED,
                          "prepare_weight %s: dtype %s; device cuda reads F32, F16, BF16, F8_E4M3 and NVFP4 (F4_E2M1)",
                          nm, sy_dtype_name(host->dtype));
    int64_t r, c, ld;
    if (sydev_view2d(host, &r, &c, &ld))
        return sy_err_set(err, SY_ERR_INVALID,
                          "prepare_weight %s: expected rows of contiguous elements (stride 1 in the last dim)", nm);
    int rc = sy__cuda_enter(d, err);
    if (rc)
        return rc;
    const size_t es = (size_t)sy_dtype_bits(host->dtype) / 8;
    const size_t row = (size_t)c * es, bytes = (size_t)r * row;
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
    if (e != cudaSuccess)
        return sy_err_set(err, SY_ERR_NOMEM, "prepare_weight %s: cannot allocate %zu bytes on GPU %d: %s", nm, bytes,
                          d->gpu, cudaGetErrorString(e));
    /* Packed to ld == cols whatever the host's row stride. */
    e = cudaMemcpy2D(p, row, host->data, (size_t)ld * es, row, (size_t)r, cudaMemcpyHostToDevice);
    if (e != cudaSuccess) {
        cudaFree(p);
        return sy_err_set(err, SY_ERR_INTERNAL, "prepare_weight %s: upload of %zu bytes: %s", nm, bytes,
                          cudaGetErrorString(e));
    }
    *out = *host;
    out->data = p;
    out->device = 1 + d->gpu;
    out->priv = NULL;
    if (host->ndim >= 2)
        set_row_major_strides(out);
    return SY_OK;
}

static void dev_release_weight(void *inst, sy_tensor *w)
{
    sy_cuda_dev *d = inst;
    if (w && w->data) {
        cudaSetDevice(d->gpu);
        cudaFree(w->data);
        w->data = NULL;
    }
}

static int dev_synchronize(void *inst, sy_err *err)
{
    sy_cuda_dev *d = inst;
    int rc = sy__cuda_enter(d, err);
    if (rc || (rc = sy__cuda_no_capture("synchronize", err)))
        return rc;
    SYC_TRY(err, cudaDeviceSynchronize(), "synchronize");
    return SY_OK;
}

/* ---------------------------------------------------------------- extras */

/* "gpu": the CUDA device index an instance computes on (for tests and doctor). */
static int dev_gpu(void *inst)
{
    const sy_cuda_dev *d = inst;
    return d ? d->gpu : -1;
}

static void *get_proc(const char *name)
{
    if (name && strcmp(name, "gpu") == 0) {
        int (*f)(void *) = dev_gpu;
        return (void *)f;
    }
    return NULL;
}

static const sy_device_ops ops = {
    .struct_size = sizeof(sy_device_ops),
    .alloc = dev_alloc,
    .free = dev_free,
    .upload = dev_upload,
    .download = dev_download,
    .prepare_weight = dev_prepare_weight,
    .release_weight = dev_release_weight,
    .embed = sy__cuda_embed,
    .rmsnorm = sy__cuda_rmsnorm,
    .add_rmsnorm = sy__cuda_add_rmsnorm,
    .linear = sy__cuda_linear,
    .rope = sy__cuda_rope,
    .silu_mul = sy__cuda_silu_mul,
    .add = sy__cuda_add,
    .synchronize = dev_synchronize,
    .linear_multi = NULL, /* no fused variant yet: the engine calls linear per part */
    .argmax = sy__cuda_argmax,
    .sample = sy__cuda_sample,
    .host_alloc = sy__cuda_host_alloc,
    .host_free = sy__cuda_host_free,
    .graph_begin = sy__cuda_graph_begin,
    .graph_end = sy__cuda_graph_end,
    .graph_launch = sy__cuda_graph_launch,
    .graph_free = sy__cuda_graph_free,
};

static const sy_plugin_desc desc = {
    .struct_size = sizeof(sy_plugin_desc),
    .abi_major = SY_ABI_MAJOR,
    .abi_minor = SY_ABI_MINOR,
    .kind = SY_KIND_DEVICE,
    .name = SY_CUDA_DEV_NAME,
    .version = PACKAGE_VERSION,
    .device = "cuda",
    .description = "one NVIDIA GPU: cuBLAS GEMMs on F32/F16/BF16 weights, FP8/NVFP4 weights kept packed, fused glue kernels, "
                   "stream-ordered memory pool",
    .keys = keys,
    .probe = probe,
    .create = create,
    .destroy = destroy,
    .ops = &ops,
    .get_proc = get_proc,
};

SY_EXPORT const sy_plugin_desc *SY_PLUGIN_ENTRY(void);
SY_EXPORT const sy_plugin_desc *SY_PLUGIN_ENTRY(void)
{
    return &desc;
}
