/*
 * device/cpu: host memory, the worker pool every plugin computes on (offered
 * to the host through get_proc("parallel_for") / get_proc("n_workers")),
 * and the glue ops with portable, AVX2 and AVX-512 kernels chosen at run
 * time.
 *
 * Weights: prepare_weight returns the host's mmap'd view. Only with the
 * AMX path (`matmul = bf16` or `auto`, `amx = auto`, a CPU and kernel that allow the
 * tiles) does it also repack BF16 matrices into the tiles' layout, once, and
 * hang the copy on the prepared tensor's priv: data stays the row-major
 * view, so the embedding lookup of a tied table reads rows as before while
 * the lm_head product runs on the pack (plugins/common/cpu/README.md).
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>

#include "device_cpu.h"
#include "sykmatmul.h"
#include "sykquant.h"

#define SPIN_US 200 /* idle workers poll this long before sleeping: longer than the gap between two ops */

static const sy_key_decl keys[] = {
    {"threads", SY_KEY_INT, "0",
     "worker threads, the calling thread included; 0 = one per CPU this process may run on", 0, 4096, NULL},
    {"isa", SY_KEY_ENUM, "auto",
     "kernel instruction set; auto = the best that both the CPU and the OS (XCR0) support", 1, 0, SYK_ISA_CHOICES},
    {"matmul", SY_KEY_ENUM, "auto",
     "products with BF16 weights: auto = bf16 where the CPU has a native BF16 dot path (AMX-BF16 granted, or "
     "AVX512_BF16 with isa avx512), else f32; f32 = activations stay F32, exact products, F32 sums (the reference's "
     "numerics, what the tests pin); bf16 = activations rounded to BF16 and BF16 dot products (2x the GEMM rate or "
     "more, results differ from f32 by ~0.15% RMS; f32 with a warning where the CPU lacks AVX512_BF16)",
     1, 0, "f32|bf16|auto"},
    {"amx", SY_KEY_ENUM, "auto",
     "with matmul = bf16 or auto: auto = AMX-BF16 tiles where the CPU has them and Linux grants the tile state (BF16 weights "
     "repacked once at load, about one more copy of them in memory), else the AVX512-BF16 kernel; off = always the "
     "AVX512-BF16 kernel (A/B comparisons)",
     1, 0, "auto|off"},
    {NULL, 0, NULL, NULL, 0, 0, NULL},
};

static int probe(const sy_host *host, sy_err *why)
{
    (void)host;
    (void)why;
    /* Portable C always runs; a better ISA only ranks this plugin higher. */
    return 10 + (int)syk_isa_best();
}

static void destroy(void *inst)
{
    sy_cpu_dev *d = inst;
    if (!d)
        return;
    syk_pool_destroy(d->pool);
    syk_free(d->host, d->xb);
    syk_free(d->host, d->sample_prob);
    syk_free(d->host, d->sample_idx);
    free(d);
}

static int create(const sy_host *host, const sy_kv *cfg, size_t n_cfg, void **inst, sy_err *err)
{
    *inst = NULL;
    syk_isa isa;
    int rc = syk_isa_from_key(sy_kv_get(cfg, n_cfg, "isa"), &isa, err);
    if (rc)
        return rc;
    const long long threads_key = sy_kv_int(cfg, n_cfg, "threads", 0);
    if (threads_key < 0 || threads_key > 4096)
        return sy_err_set(err, SY_ERR_INVALID, "threads = %lld: expected 0 (one per CPU) to 4096", threads_key);
    const int threads = threads_key ? (int)threads_key : syk_online_cpus();
    /* Decided once here (asking Linux for the AMX tile state if it may be used), logged in one line below. */
    syk_matmul mm;
    if ((rc = syk_matmul_select(cfg, n_cfg, isa, &mm, err)))
        return rc;

    sy_cpu_dev *d = calloc(1, sizeof *d);
    if (!d)
        return sy_err_set(err, SY_ERR_NOMEM, "device cpu: cannot allocate the instance");
    d->host = host;
    d->isa = isa;
    d->kern = syk_kernels_for(isa);
    if ((rc = syk_pool_create(threads, SPIN_US, &d->pool, err))) {
        free(d);
        return rc;
    }
    d->par.run = syk_pool_run;
    d->par.ctx = d->pool;
    d->par.n_workers = syk_pool_size(d->pool);
    d->matmul = mm;
    /* A config shared across machines still runs, exactly, where BF16 cannot: one line says which path and why. */
    syk_matmul_log(&d->matmul, host, SY_CPU_DEV_NAME);
    sy_logf(host, SY_LOG_INFO, SY_CPU_DEV_NAME, "%d worker threads, %s kernels%s", d->par.n_workers,
            syk_isa_name(isa),
            d->matmul.amx ? ", AMX-BF16 tiles for BF16 weights" : d->matmul.bdot ? ", BF16 dot products for BF16 weights" : "");
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

static int dev_alloc(void *inst, sy_tensor *t, sy_err *err)
{
    sy_cpu_dev *d = inst;
    size_t bytes;
    int rc = tensor_bytes(t, "alloc", &bytes, err);
    if (rc)
        return rc;
    /* Rounded up to whole cache lines so vector tails never share a line with another tensor. */
    void *p = syk_alloc(d->host, (bytes + 63) / 64 * 64, 64);
    if (!p)
        return sy_err_set(err, SY_ERR_NOMEM, "alloc: cannot allocate %zu bytes of host memory", bytes);
    int dense = 1;
    for (int i = 0; i < t->ndim; i++)
        dense &= t->stride[i] == 0;
    if (dense && t->ndim > 0) { /* strides left unset: make them contiguous */
        int64_t s = 1;
        for (int i = t->ndim - 1; i >= 0; i--) {
            t->stride[i] = s;
            s *= t->shape[i];
        }
    }
    t->data = p;
    t->device = 0;
    return SY_OK;
}

static void dev_free(void *inst, sy_tensor *t)
{
    sy_cpu_dev *d = inst;
    if (t && t->data) {
        syk_free(d->host, t->data);
        t->data = NULL;
    }
}

static int dev_upload(void *inst, sy_tensor *dst, const void *src, size_t bytes, sy_err *err)
{
    (void)inst;
    size_t cap;
    int rc = tensor_bytes(dst, "upload", &cap, err);
    if (rc)
        return rc;
    if (bytes > cap)
        return sy_err_set(err, SY_ERR_INVALID, "upload: %zu bytes into a tensor of %zu bytes", bytes, cap);
    if (bytes && (!dst->data || !src))
        return sy_err_set(err, SY_ERR_INVALID, "upload: NULL %s", dst->data ? "source" : "destination tensor data");
    if (bytes)
        memcpy(dst->data, src, bytes);
    return SY_OK;
}

static int dev_download(void *inst, void *dst, const sy_tensor *src, size_t bytes, sy_err *err)
{
    (void)inst;
    size_t cap;
    int rc = tensor_bytes(src, "download", &cap, err);
    if (rc)
        return rc;
    if (bytes > cap)
        return sy_err_set(err, SY_ERR_INVALID, "download: %zu bytes from a tensor of %zu bytes", bytes, cap);
    if (bytes && (!src->data || !dst))
        return sy_err_set(err, SY_ERR_INVALID, "download: NULL %s", dst ? "source tensor data" : "destination");
    if (bytes)
        memcpy(dst, src->data, bytes);
    return SY_OK;
}

static int dev_prepare_weight(void *inst, const char *name, const sy_tensor *host, sy_tensor *out, sy_err *err)
{
    (void)inst;
    if (!host || !host->data)
        return sy_err_set(err, SY_ERR_INVALID, "prepare_weight %s: no data", name ? name : "?");
    char why[160];
    if (syk_wdtype_quant(host->dtype) && syk_qweight_check(host, why, sizeof why))
        return sy_err_set(err, SY_ERR_UNSUPPORTED, "prepare_weight %s: %s", name ? name : "?", why);
    if (!syk_wdtype_ok(host->dtype) && !syk_wdtype_quant(host->dtype))
        return sy_err_set(err, SY_ERR_UNSUPPORTED,
                          "prepare_weight %s: dtype %s; device cpu reads F32, F16, BF16, F8_E4M3 and NVFP4 weights",
                          name ? name : "?", sy_dtype_name(host->dtype));
    int64_t r, c, ld;
    if (syk_view2d(host, &r, &c, &ld))
        return sy_err_set(err, SY_ERR_INVALID, "prepare_weight %s: expected rows of contiguous elements (stride 1 "
                          "in the last dim), found ndim %d with last stride %lld",
                          name ? name : "?", host->ndim, host->ndim > 0 ? (long long)host->stride[host->ndim - 1] : 0LL);
    *out = *host;
    out->priv = NULL;
    sy_cpu_dev *d = inst;
    if (d->matmul.amx && host->dtype == SY_DTYPE_BF16 && host->ndim >= 2 && r > 0 && c > 0) {
        /* lm_head.weight of its own: the model is untied, so the embedding's pack would never be multiplied. */
        if (d->embed_pack && name && strcmp(name, "lm_head.weight") == 0 && d->embed_pack->src != host->data)
            syk_amx_pack_drop(d->host, d->embed_pack);
        syk_amx_pack *pk = syk_amx_pack_new(d->host, host->data, r, c, ld);
        if (!pk)
            return sy_err_set(err, SY_ERR_NOMEM, "prepare_weight %s: cannot allocate the AMX copy of [%lld, %lld] BF16 "
                              "(%.1f MiB; amx = off runs without it)", name ? name : "?", (long long)r, (long long)c,
                              (double)r * (double)c * 2.0 / 1048576.0);
        out->priv = pk;
        if (name && strcmp(name, "model.embed_tokens.weight") == 0)
            d->embed_pack = pk;
    }
    return SY_OK;
}

static void dev_release_weight(void *inst, sy_tensor *w)
{
    sy_cpu_dev *d = inst;
    /* The view is the host's; only an AMX pack is ours. */
    syk_amx_pack *pk = w && w->priv && ((const syk_amx_pack *)w->priv)->magic == SYK_AMX_MAGIC ? w->priv : NULL;
    if (!pk)
        return;
    if (pk == d->embed_pack)
        d->embed_pack = NULL;
    syk_amx_pack_free(d->host, pk);
    w->priv = NULL;
}

static int dev_synchronize(void *inst, sy_err *err)
{
    (void)inst;
    (void)err; /* every op completes before it returns */
    return SY_OK;
}

/* ---------------------------------------------------------------- extras */

static void dev_parallel_for(void *inst, int64_t n, int64_t grain, sy_range_fn fn, void *arg)
{
    sy_cpu_dev *d = inst;
    syk_pool_run(d ? d->pool : NULL, n, grain, fn, arg);
}

static int dev_n_workers(void *inst)
{
    const sy_cpu_dev *d = inst;
    return d ? syk_pool_size(d->pool) : 1;
}

/* "isa": which kernels an instance runs (for tests, doctor and bench output). */
static const char *dev_isa_name(void *inst)
{
    const sy_cpu_dev *d = inst;
    return d ? syk_isa_name(d->isa) : "?";
}

/* "matmul_peak": the peak of the path a linear on weights of wdtype takes here (bench and plugin-check). */
static double dev_matmul_peak(void *inst, sy_dtype wdtype, char *path, size_t path_len)
{
    const sy_cpu_dev *d = inst;
    if (!d)
        return 0;
    return syk_matmul_peak_of(d->isa, d->matmul.bdot != NULL, d->matmul.amx != NULL, wdtype, syk_pool_size(d->pool), path,
                              path_len);
}

/* "matmul": the numerics this instance resolved, as its start-up log line ("matmul = auto: f32, ..."). */
static const char *dev_matmul_line(void *inst)
{
    const sy_cpu_dev *d = inst;
    return d ? d->matmul.choice.line : "?";
}

static void *get_proc(const char *name)
{
    if (!name)
        return NULL;
    if (strcmp(name, "matmul") == 0) {
        const char *(*f)(void *) = dev_matmul_line;
        return (void *)f;
    }
    if (strcmp(name, "parallel_for") == 0) {
        sy_device_parallel_for_fn f = dev_parallel_for;
        return (void *)f;
    }
    if (strcmp(name, "n_workers") == 0) {
        sy_device_n_workers_fn f = dev_n_workers;
        return (void *)f;
    }
    if (strcmp(name, "matmul_peak") == 0) {
        sy_device_matmul_peak_fn f = dev_matmul_peak;
        return (void *)f;
    }
    if (strcmp(name, "isa") == 0) {
        const char *(*f)(void *) = dev_isa_name;
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
    .embed = sy__cpu_embed,
    .rmsnorm = sy__cpu_rmsnorm,
    .add_rmsnorm = sy__cpu_add_rmsnorm,
    .linear = sy__cpu_linear,
    .rope = sy__cpu_rope,
    .silu_mul = sy__cpu_silu_mul,
    .add = sy__cpu_add,
    .synchronize = dev_synchronize,
    .linear_multi = sy__cpu_linear_multi,
    .argmax = sy__cpu_argmax,
    .sample = sy__cpu_sample,
};

static const sy_plugin_desc desc = {
    .struct_size = sizeof(sy_plugin_desc),
    .abi_major = SY_ABI_MAJOR,
    .abi_minor = SY_ABI_MINOR,
    .kind = SY_KIND_DEVICE,
    .name = SY_CPU_DEV_NAME,
    .version = PACKAGE_VERSION,
    .device = "cpu",
    .description = "host memory, a persistent worker pool, and portable/AVX2/AVX-512 kernels (F32, F16, BF16 weights)",
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
