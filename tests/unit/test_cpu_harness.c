/*
 * Test scaffolding for the cpu plugin tests (see test_cpu_harness.h).
 */
#include "config.h"

#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/config.h"
#include "test_cpu_harness.h"

static int n_failures;

void th_fail(const char *file, int line, const char *fmt, ...)
{
    n_failures++;
    if (n_failures > 50)
        return; /* the first ones tell the story */
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL %s:%d: ", file, line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int th_failures(void)
{
    return n_failures;
}

int th_done(const char *name)
{
    if (n_failures)
        fprintf(stderr, "%s: %d failure(s)\n", name, n_failures);
    else
        printf("%s: all checks passed\n", name);
    return n_failures ? 1 : 0;
}

void th_load(const char *base, th_plugin *p)
{
    memset(p, 0, sizeof *p);
    const char *dir = getenv("SY_PLUGIN_DIR");
    if (!dir || !*dir) {
        fprintf(stderr, "FAIL: SY_PLUGIN_DIR is not set (make check sets it to build-plugins/)\n");
        exit(1);
    }
    snprintf(p->path, sizeof p->path, "%s/%s.so", dir, base);
    p->dl = dlopen(p->path, RTLD_NOW | RTLD_LOCAL);
    if (!p->dl) {
        fprintf(stderr, "FAIL: dlopen %s: %s\n", p->path, dlerror());
        exit(1);
    }
    sy_plugin_entry_fn entry;
    void *sym = dlsym(p->dl, SY_PLUGIN_ENTRY_NAME);
    memcpy(&entry, &sym, sizeof entry);
    if (!entry || !(p->desc = entry())) {
        fprintf(stderr, "FAIL: %s has no usable %s\n", p->path, SY_PLUGIN_ENTRY_NAME);
        exit(1);
    }
}

void th_unload(th_plugin *p)
{
    if (p->dl)
        dlclose(p->dl);
    memset(p, 0, sizeof *p);
}

/* ---------------------------------------------------------------- host */

static void host_log(void *ctx, sy_log_level level, const char *plugin, const char *msg)
{
    const th_host *h = ctx;
    if (h->quiet && level > SY_LOG_WARN)
        return;
    static const char *const names[] = {"error", "warn", "info", "debug"};
    fprintf(stderr, "[%s] %s: %s\n", (unsigned)level < 4 ? names[level] : "?", plugin ? plugin : "?", msg);
}

static void *host_alloc(void *ctx, size_t size, size_t align)
{
    th_host *h = ctx;
    void *p = NULL;
    if (posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size ? size : 1))
        return NULL;
    atomic_fetch_add(&h->live_allocs, 1);
    return p;
}

static void host_free(void *ctx, void *ptr)
{
    th_host *h = ctx;
    if (!ptr)
        return;
    atomic_fetch_sub(&h->live_allocs, 1);
    free(ptr);
}

static void host_parallel_for(void *ctx, int64_t n, int64_t grain, sy_range_fn fn, void *arg)
{
    th_host *h = ctx;
    if (h->pool_run)
        h->pool_run(h->pool_inst, n, grain, fn, arg);
    else if (n > 0)
        fn(arg, 0, n, 0);
}

static int host_n_workers(void *ctx)
{
    th_host *h = ctx;
    return h->pool_n ? h->pool_n(h->pool_inst) : 1;
}

static void host_metric_add(void *ctx, const char *name, double v)
{
    (void)ctx;
    (void)name;
    (void)v;
}

void th_host_init(th_host *h)
{
    memset(h, 0, sizeof *h);
    h->api.struct_size = sizeof h->api;
    h->api.abi_major = SY_ABI_MAJOR;
    h->api.abi_minor = SY_ABI_MINOR;
    h->api.ctx = h;
    h->api.log = host_log;
    h->api.alloc = host_alloc;
    h->api.free = host_free;
    h->api.parallel_for = host_parallel_for;
    h->api.n_workers = host_n_workers;
    h->api.metric_add = host_metric_add;
    h->quiet = 1;
    atomic_init(&h->live_allocs, 0);
}

void th_host_set_pool(th_host *h, const sy_plugin_desc *dev, void *inst)
{
    void *run = dev->get_proc ? dev->get_proc("parallel_for") : NULL;
    void *nw = dev->get_proc ? dev->get_proc("n_workers") : NULL;
    memcpy(&h->pool_run, &run, sizeof run);
    memcpy(&h->pool_n, &nw, sizeof nw);
    h->pool_inst = inst;
}

void th_host_clear_pool(th_host *h)
{
    h->pool_run = NULL;
    h->pool_n = NULL;
    h->pool_inst = NULL;
}

/*
 * The plugin's keys as the engine binds them when $SWITCHYARD_SET is all the
 * configuration there is: the declared defaults, overridden by the
 * variable's assignments to keys of its section that it declares (make
 * check pins device.matmul / moe.matmul = f32 there). The config module does
 * the parsing, so a malformed variable fails here as in the CLI. *kv points
 * into *cfg: free both.
 */
static int env_bound(const th_plugin *p, sy_config **cfg, sy_kv **kv, size_t *n, sy_err *err)
{
    static const char *const reserved[] = {"plugin", NULL};
    const char *section = sy_kind_config_section(p->desc->kind);
    *cfg = sy_config_new();
    *kv = NULL;
    *n = 0;
    if (!*cfg)
        return sy_err_set(err, SY_ERR_NOMEM, "out of memory");
    int rc = section ? sy_config_apply_env(*cfg, err)
                     : sy_err_set(err, SY_ERR_INVALID, "%s: a plugin of kind %d has no config section", p->path,
                                  p->desc->kind);
    if (!rc)
        rc = sy_config_bind(*cfg, section, p->desc->keys, reserved, kv, n, err);
    if (rc) {
        sy_config_free(*cfg);
        *cfg = NULL;
    }
    return rc;
}

/* Where kv names key, its value; else NULL. */
static const char *kv_value(const char *const *kv, const char *key)
{
    for (size_t i = 0; kv && kv[i] && kv[i + 1]; i += 2)
        if (strcmp(kv[i], key) == 0)
            return kv[i + 1];
    return NULL;
}

const char *th_key_value(const th_plugin *p, const char *const *kv, const char *key, char *buf, size_t cap)
{
    sy_config *cfg;
    sy_kv *bound;
    size_t n;
    sy_err err;
    if (env_bound(p, &cfg, &bound, &n, &err)) {
        fprintf(stderr, "FAIL: %s: %s\n", p->path, err.msg);
        exit(1);
    }
    const char *v = sy_kv_get(bound, n, key);
    if (v)
        snprintf(buf, cap, "%s", kv_value(kv, key) ? kv_value(kv, key) : v);
    free(bound);
    sy_config_free(cfg);
    return v ? buf : NULL;
}

int th_create(const th_plugin *p, const sy_host *h, const char *const *kv, void **inst, sy_err *err)
{
    sy_config *c;
    sy_kv *cfg;
    size_t n;
    *inst = NULL;
    int rc = env_bound(p, &c, &cfg, &n, err);
    if (rc)
        return rc;
    for (size_t i = 0; kv && kv[i] && kv[i + 1]; i += 2) {
        size_t j = 0;
        while (j < n && strcmp(cfg[j].key, kv[i]) != 0)
            j++;
        if (j == n) {
            fprintf(stderr, "FAIL: %s declares no key %s\n", p->path, kv[i]);
            exit(1);
        }
        cfg[j].value = kv[i + 1];
    }
    rc = p->desc->create(h, cfg, n, inst, err);
    /* The cpu plugins copy what they keep of their keys during create. */
    free(cfg);
    sy_config_free(c);
    return rc;
}

/* ---------------------------------------------------------------- data */

uint64_t th_next(th_rng *r)
{
    /* splitmix64 */
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double th_uniform(th_rng *r, double lo, double hi)
{
    return lo + (hi - lo) * ((double)(th_next(r) >> 11) / 9007199254740992.0);
}

int th_int(th_rng *r, int lo, int hi)
{
    return lo + (int)(th_next(r) % (uint64_t)(hi - lo + 1));
}

uint16_t th_f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if (isnan(f))
        return (uint16_t)((u >> 16) | 0x40);
    /* Round to nearest even on the low 16 bits, written out longhand. */
    const uint32_t lo = u & 0xffffu, hi = u >> 16;
    if (lo > 0x8000u || (lo == 0x8000u && (hi & 1u)))
        return (uint16_t)(hi + 1u);
    return (uint16_t)hi;
}

float th_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t th_f32_to_f16(float f)
{
#ifdef __FLT16_MAX__
    _Float16 h = (_Float16)f;
    uint16_t u;
    memcpy(&u, &h, 2);
    return u;
#else
#error "the cpu tests need a compiler with _Float16"
#endif
}

float th_f16_to_f32(uint16_t u)
{
    /* Independent of the plugins' bit twiddling: sign * mantissa * 2^exp in double. */
    const int sign = u >> 15, e = (u >> 10) & 31, m = u & 1023;
    double v;
    if (e == 31)
        v = m ? NAN : INFINITY;
    else if (e == 0)
        v = ldexp((double)m, -24);
    else
        v = ldexp((double)(m + 1024), e - 25);
    return (float)(sign ? -v : v);
}

float th_round_to(sy_dtype dt, float f)
{
    if (dt == SY_DTYPE_BF16)
        return th_bf16_to_f32(th_f32_to_bf16(f));
    if (dt == SY_DTYPE_F16)
        return th_f16_to_f32(th_f32_to_f16(f));
    return f;
}

double th_get(const void *buf, sy_dtype dt, int64_t i)
{
    if (dt == SY_DTYPE_F32)
        return ((const float *)buf)[i];
    if (dt == SY_DTYPE_BF16)
        return th_bf16_to_f32(((const uint16_t *)buf)[i]);
    return th_f16_to_f32(((const uint16_t *)buf)[i]);
}

void th_put(void *buf, sy_dtype dt, int64_t i, float f)
{
    if (dt == SY_DTYPE_F32)
        ((float *)buf)[i] = f;
    else if (dt == SY_DTYPE_BF16)
        ((uint16_t *)buf)[i] = th_f32_to_bf16(f);
    else
        ((uint16_t *)buf)[i] = th_f32_to_f16(f);
}

int th_isas(const th_plugin *dev, const sy_host *h, const char **out, int max)
{
    static const char *const all[] = {"portable", "avx2", "avx512"};
    int n = 0;
    for (int i = 0; i < 3 && n < max; i++) {
        const char *kv[] = {"isa", all[i], NULL};
        void *inst = NULL;
        sy_err err;
        if (th_create(dev, h, kv, &inst, &err) == SY_OK) {
            out[n++] = all[i];
            dev->desc->destroy(inst);
        } else {
            printf("  isa %s not testable here: %s\n", all[i], err.msg);
        }
    }
    return n;
}
