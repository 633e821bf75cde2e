/*
 * example-device: a device plugin for host memory, written for reading.
 *
 * Its "device memory" is host memory from host->alloc, weights are used in
 * place (the checkpoint's mmap'd views stay valid for the instance's life),
 * and every op is a plain loop over rows. It has no worker pool of its own
 * (no get_proc), so the host runs parallel_for on one thread: correct and
 * slow, a starting point for a real device. Because it says device "cpu",
 * the cpu attention and moe plugins run on its memory unchanged.
 *
 * Build: cc -shared -fPIC $(pkg-config --cflags switchyard-plugin) example_device.c -o example-device.so -lm
 * Use:   [device]
 *        plugin = /path/to/example-device.so
 */
#include <switchyard/plugin.h>

#include <math.h>

typedef struct dev {
    const sy_host *host;
} dev;

static int probe(const sy_host *host, sy_err *why)
{
    (void)host;
    (void)why;
    return 1; /* slower than the in-tree cpu device: never `auto`'s pick over it */
}

static int create(const sy_host *host, const sy_kv *cfg, size_t n_cfg, void **out, sy_err *err)
{
    (void)cfg;
    (void)n_cfg;
    dev *d = host->alloc(host->ctx, sizeof *d, sizeof(void *));
    if (!d)
        return sy_err_set(err, SY_ERR_NOMEM, "example-device: out of memory");
    d->host = host;
    *out = d;
    return SY_OK;
}

static void destroy(void *inst)
{
    dev *d = inst;
    d->host->free(d->host->ctx, d);
}

/* --------------------------------------------------------------- memory */

static int d_alloc(void *inst, sy_tensor *t, sy_err *err)
{
    dev *d = inst;
    size_t bytes = sy_tensor_nbytes(t);
    t->data = d->host->alloc(d->host->ctx, bytes ? bytes : 1, 64);
    if (!t->data)
        return sy_err_set(err, SY_ERR_NOMEM, "example-device: cannot allocate %zu bytes", bytes);
    t->device = 0;
    return SY_OK;
}

static void d_free(void *inst, sy_tensor *t)
{
    dev *d = inst;
    d->host->free(d->host->ctx, t->data);
    t->data = NULL;
}

static int d_upload(void *inst, sy_tensor *dst, const void *src, size_t bytes, sy_err *err)
{
    (void)inst;
    if (bytes > sy_tensor_nbytes(dst))
        return sy_err_set(err, SY_ERR_INVALID, "example-device: upload of %zu bytes into a %zu-byte tensor", bytes,
                          sy_tensor_nbytes(dst));
    memcpy(dst->data, src, bytes);
    return SY_OK;
}

static int d_download(void *inst, void *dst, const sy_tensor *src, size_t bytes, sy_err *err)
{
    (void)inst;
    if (bytes > sy_tensor_nbytes(src))
        return sy_err_set(err, SY_ERR_INVALID, "example-device: download of %zu bytes from a %zu-byte tensor", bytes,
                          sy_tensor_nbytes(src));
    memcpy(dst, src->data, bytes);
    return SY_OK;
}

static int d_prepare_weight(void *inst, const char *name, const sy_tensor *host, sy_tensor *out, sy_err *err)
{
    (void)inst;
    if (host->dtype != SY_DTYPE_F32 && host->dtype != SY_DTYPE_F16 && host->dtype != SY_DTYPE_BF16)
        return sy_err_set(err, SY_ERR_UNSUPPORTED, "example-device: weight %s is %s; it reads F32, F16 and BF16",
                          name, sy_dtype_name(host->dtype));
    if (host->stride[host->ndim - 1] != 1)
        return sy_err_set(err, SY_ERR_INVALID, "example-device: weight %s is not contiguous", name);
    *out = *host; /* used in place */
    return SY_OK;
}

/* ------------------------------------------------------------- helpers */

/* Element i of a weight, widened to float. */
static float w_at(const sy_tensor *w, size_t i)
{
    uint32_t u;
    float f;
    if (w->dtype == SY_DTYPE_F32)
        return ((const float *)w->data)[i];
    if (w->dtype == SY_DTYPE_BF16) {
        u = (uint32_t)((const uint16_t *)w->data)[i] << 16;
        memcpy(&f, &u, sizeof f);
        return f;
    }
    uint16_t h = ((const uint16_t *)w->data)[i];
    uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff;
    f = e == 0 ? ldexpf((float)m, -24) : e == 31 ? INFINITY : ldexpf((float)(m | 0x400), (int)e - 25);
    return (h & 0x8000) ? -f : f;
}

static int64_t cols_of(const sy_tensor *t)
{
    return t->ndim ? t->shape[t->ndim - 1] : 1;
}

static int64_t rows_of(const sy_tensor *t)
{
    return cols_of(t) ? sy_tensor_numel(t) / cols_of(t) : 0;
}

static int need_f32(const sy_tensor *t, const char *op, const char *what, sy_err *err)
{
    if (t->dtype != SY_DTYPE_F32)
        return sy_err_set(err, SY_ERR_INVALID, "example-device: %s: %s must be F32, found %s", op, what,
                          sy_dtype_name(t->dtype));
    return SY_OK;
}

/* ----------------------------------------------------------------- ops */

static int d_embed(void *inst, const sy_tensor *table, const int32_t *ids, int64_t n, sy_tensor *out, sy_err *err)
{
    (void)inst;
    const int64_t H = cols_of(table), V = rows_of(table);
    if (need_f32(out, "embed", "out", err))
        return SY_ERR_INVALID;
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= V)
            return sy_err_set(err, SY_ERR_INVALID, "example-device: embed: id %d at %lld, expected 0..%lld",
                              (int)ids[i], (long long)i, (long long)V - 1);
        for (int64_t c = 0; c < H; c++)
            ((float *)out->data)[i * H + c] = w_at(table, (size_t)(ids[i] * H + c));
    }
    return SY_OK;
}

static void norm_rows(const float *x, const sy_tensor *w, float eps, float *out, int64_t rows, int64_t cols)
{
    for (int64_t r = 0; r < rows; r++) {
        double ss = 0;
        for (int64_t c = 0; c < cols; c++)
            ss += (double)x[r * cols + c] * x[r * cols + c];
        float inv = (float)(1.0 / sqrt(ss / (double)cols + eps));
        for (int64_t c = 0; c < cols; c++)
            out[r * cols + c] = x[r * cols + c] * inv * w_at(w, (size_t)c);
    }
}

static int d_rmsnorm(void *inst, const sy_tensor *x, const sy_tensor *w, float eps, sy_tensor *out, sy_err *err)
{
    (void)inst;
    if (need_f32(x, "rmsnorm", "x", err) || need_f32(out, "rmsnorm", "out", err))
        return SY_ERR_INVALID;
    norm_rows(x->data, w, eps, out->data, rows_of(x), cols_of(x));
    return SY_OK;
}

static int d_add_rmsnorm(void *inst, sy_tensor *residual, const sy_tensor *x, const sy_tensor *w, float eps,
                         sy_tensor *out, sy_err *err)
{
    (void)inst;
    if (need_f32(residual, "add_rmsnorm", "residual", err) || need_f32(x, "add_rmsnorm", "x", err))
        return SY_ERR_INVALID;
    float *r = residual->data;
    const float *xv = x->data;
    for (int64_t i = 0; i < sy_tensor_numel(residual); i++)
        r[i] += xv[i];
    norm_rows(r, w, eps, out->data, rows_of(residual), cols_of(residual));
    return SY_OK;
}

static int d_linear(void *inst, const sy_tensor *x, const sy_tensor *w, const sy_tensor *bias, sy_tensor *out,
                    sy_err *err)
{
    (void)inst;
    const int64_t n = rows_of(x), k = cols_of(x), m = rows_of(w);
    if (cols_of(w) != k || rows_of(out) != n || cols_of(out) != m)
        return sy_err_set(err, SY_ERR_INVALID, "example-device: linear: x [%lld, %lld], w [%lld, %lld], out [%lld, "
                          "%lld]; expected w [m, %lld] and out [%lld, m]", (long long)n, (long long)k, (long long)m,
                          (long long)cols_of(w), (long long)rows_of(out), (long long)cols_of(out), (long long)k,
                          (long long)n);
    const float *xv = x->data;
    float *o = out->data;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < m; j++) {
            float s = bias ? w_at(bias, (size_t)j) : 0.0f;
            for (int64_t c = 0; c < k; c++)
                s += xv[i * k + c] * w_at(w, (size_t)(j * k + c));
            o[i * m + j] = s;
        }
    return SY_OK;
}

static int d_rope(void *inst, sy_tensor *x, const int32_t *pos, const sy_rope_params *p, sy_err *err)
{
    (void)inst;
    const int64_t n = rows_of(x), cols = cols_of(x), half = p->rotary_dim / 2;
    if (p->head_dim <= 0 || cols % p->head_dim || p->rotary_dim > p->head_dim)
        return sy_err_set(err, SY_ERR_INVALID, "example-device: rope: %lld columns, head_dim %d, rotary_dim %d",
                          (long long)cols, p->head_dim, p->rotary_dim);
    float *xv = x->data;
    for (int64_t t = 0; t < n; t++)
        for (int64_t h = 0; h < cols / p->head_dim; h++) {
            float *v = xv + t * cols + h * p->head_dim;
            for (int64_t i = 0; i < half; i++) {
                double a = (double)pos[t] * p->inv_freq[i];
                float c = (float)cos(a) * p->mscale, s = (float)sin(a) * p->mscale;
                int64_t i0 = p->neox ? i : 2 * i, i1 = p->neox ? i + half : 2 * i + 1;
                float x0 = v[i0], x1 = v[i1];
                v[i0] = x0 * c - x1 * s;
                v[i1] = x1 * c + x0 * s;
            }
        }
    return SY_OK;
}

static int d_silu_mul(void *inst, const sy_tensor *gate, const sy_tensor *up, sy_tensor *out, sy_err *err)
{
    (void)inst;
    (void)err;
    const float *g = gate->data, *u = up->data;
    float *o = out->data;
    for (int64_t i = 0; i < sy_tensor_numel(gate); i++)
        o[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
    return SY_OK;
}

static int d_add(void *inst, sy_tensor *acc, const sy_tensor *x, sy_err *err)
{
    (void)inst;
    (void)err;
    float *a = acc->data;
    const float *xv = x->data;
    for (int64_t i = 0; i < sy_tensor_numel(acc); i++)
        a[i] += xv[i];
    return SY_OK;
}

static int d_synchronize(void *inst, sy_err *err)
{
    (void)inst;
    (void)err;
    return SY_OK; /* every op is done when it returns */
}

/* linear_multi is optional: the core calls linear once per weight. */
static const sy_device_ops ops = {
    .struct_size = sizeof(sy_device_ops),
    .alloc = d_alloc,
    .free = d_free,
    .upload = d_upload,
    .download = d_download,
    .prepare_weight = d_prepare_weight,
    .release_weight = NULL,
    .embed = d_embed,
    .rmsnorm = d_rmsnorm,
    .add_rmsnorm = d_add_rmsnorm,
    .linear = d_linear,
    .rope = d_rope,
    .silu_mul = d_silu_mul,
    .add = d_add,
    .synchronize = d_synchronize,
    .linear_multi = NULL,
};

static const sy_plugin_desc desc = {
    .struct_size = sizeof(sy_plugin_desc),
    .abi_major = SY_ABI_MAJOR,
    .abi_minor = SY_ABI_MINOR,
    .kind = SY_KIND_DEVICE,
    .name = "example-device",
    .version = "1.0.0",
    .device = "cpu",
    .description = "example: host memory, plain loops, weights used in place",
    .keys = NULL,
    .probe = probe,
    .create = create,
    .destroy = destroy,
    .ops = &ops,
    .get_proc = NULL,
};

SY_EXPORT const sy_plugin_desc *SY_PLUGIN_ENTRY(void);
SY_EXPORT const sy_plugin_desc *SY_PLUGIN_ENTRY(void)
{
    return &desc;
}
