/*
 * sysample-half: a test device plugin that forwards every op to a real
 * device plugin (key `inner`, a path) and whose sample op hands every
 * other row back to the host: after the inner op, row r of its n-th call
 * becomes -1 when n + r is odd. The core must then download just those
 * rows and draw them on the host with the same uniforms, so the tokens
 * stay those of device_sampling = off (tests/cli/test_device_sampled.sh).
 * Runs only when SYSAMPLE_PROBE=1 is in the environment, so it never wins
 * `auto` in another test's plugin directory.
 */
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "switchyard/plugin.h"

#define NAME "sysample-half"

static int probe(const sy_host *host, sy_err *why)
{
    (void)host;
    const char *on = getenv("SYSAMPLE_PROBE");
    if (!on || strcmp(on, "1") != 0)
        return sy_err_set(why, 0, NAME ": test plugin: runs only with SYSAMPLE_PROBE=1");
    return 1;
}

typedef struct inst {
    const sy_plugin_desc *inner;
    const sy_device_ops *io;
    void *ii;
    uint64_t calls; /* sample calls so far: which rows go back to the host */
} inst;

static const sy_key_decl keys[] = {
    {"inner", SY_KEY_STRING, NULL, "path of the device plugin every op is forwarded to", 1, 0, NULL},
    {NULL, 0, NULL, NULL, 0, 0, NULL},
};

static int create(const sy_host *host, const sy_kv *cfg, size_t n_cfg, void **out, sy_err *err)
{
    const char *path = sy_kv_get(cfg, n_cfg, "inner");
    if (!path)
        return sy_err_set(err, SY_ERR_INVALID, NAME ": the key inner (a device plugin's path) is not set");
    /* Stays loaded for the process, as the core keeps plugins loaded. */
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!dl)
        return sy_err_set(err, SY_ERR_IO, NAME ": inner = %s: %s", path, dlerror());
    void *sym = dlsym(dl, SY_PLUGIN_ENTRY_NAME);
    sy_plugin_entry_fn entry;
    memcpy(&entry, &sym, sizeof entry);
    const sy_plugin_desc *d = sym ? entry() : NULL;
    if (!d || d->kind != SY_KIND_DEVICE)
        return sy_err_set(err, SY_ERR_INVALID, NAME ": inner = %s: expected a device plugin", path);
    const sy_device_ops *io = d->ops;
    if (io->struct_size < offsetof(sy_device_ops, sample) + sizeof io->sample || !io->sample)
        return sy_err_set(err, SY_ERR_INVALID, NAME ": inner = %s has no sample op", path);
    inst *in = calloc(1, sizeof *in);
    if (!in)
        return sy_err_set(err, SY_ERR_NOMEM, NAME ": out of memory");
    in->inner = d;
    in->io = io;
    int rc = d->create(host, NULL, 0, &in->ii, err);
    if (rc) {
        free(in);
        return rc;
    }
    *out = in;
    return SY_OK;
}

static void destroy(void *p)
{
    inst *in = p;
    if (in && in->ii)
        in->inner->destroy(in->ii);
    free(p);
}

#define IN ((inst *)i)
static int o_alloc(void *i, sy_tensor *t, sy_err *e) { return IN->io->alloc(IN->ii, t, e); }
static void o_free(void *i, sy_tensor *t) { IN->io->free(IN->ii, t); }
static int o_upload(void *i, sy_tensor *d, const void *s, size_t n, sy_err *e) { return IN->io->upload(IN->ii, d, s, n, e); }
static int o_download(void *i, void *d, const sy_tensor *s, size_t n, sy_err *e) { return IN->io->download(IN->ii, d, s, n, e); }
static int o_prepare_weight(void *i, const char *n, const sy_tensor *h, sy_tensor *o, sy_err *e)
{
    return IN->io->prepare_weight(IN->ii, n, h, o, e);
}
static void o_release_weight(void *i, sy_tensor *w)
{
    if (IN->io->release_weight)
        IN->io->release_weight(IN->ii, w);
}
static int o_embed(void *i, const sy_tensor *t, const int32_t *ids, int64_t n, sy_tensor *o, sy_err *e)
{
    return IN->io->embed(IN->ii, t, ids, n, o, e);
}
static int o_rmsnorm(void *i, const sy_tensor *x, const sy_tensor *w, float eps, sy_tensor *o, sy_err *e)
{
    return IN->io->rmsnorm(IN->ii, x, w, eps, o, e);
}
static int o_add_rmsnorm(void *i, sy_tensor *r, const sy_tensor *x, const sy_tensor *w, float eps, sy_tensor *o,
                         sy_err *e)
{
    return IN->io->add_rmsnorm(IN->ii, r, x, w, eps, o, e);
}
static int o_linear(void *i, const sy_tensor *x, const sy_tensor *w, const sy_tensor *b, sy_tensor *o, sy_err *e)
{
    return IN->io->linear(IN->ii, x, w, b, o, e);
}
static int o_rope(void *i, sy_tensor *x, const int32_t *pos, const sy_rope_params *p, sy_err *e)
{
    return IN->io->rope(IN->ii, x, pos, p, e);
}
static int o_silu_mul(void *i, const sy_tensor *g, const sy_tensor *u, sy_tensor *o, sy_err *e)
{
    return IN->io->silu_mul(IN->ii, g, u, o, e);
}
static int o_add(void *i, sy_tensor *a, const sy_tensor *x, sy_err *e) { return IN->io->add(IN->ii, a, x, e); }
static int o_synchronize(void *i, sy_err *e) { return IN->io->synchronize ? IN->io->synchronize(IN->ii, e) : SY_OK; }
static int o_sample(void *i, const sy_tensor *x, const sy_sample_row *rows, int32_t *ids, sy_err *e)
{
    int rc = IN->io->sample(IN->ii, x, rows, ids, e);
    if (rc)
        return rc;
    const uint64_t n = IN->calls++;
    for (int64_t r = 0; r < x->shape[0]; r++)
        if ((n + (uint64_t)r) % 2 == 1)
            ids[r] = -1;
    return SY_OK;
}
#undef IN

static const sy_device_ops ops = {
    .struct_size = sizeof(sy_device_ops),
    .alloc = o_alloc,
    .free = o_free,
    .upload = o_upload,
    .download = o_download,
    .prepare_weight = o_prepare_weight,
    .release_weight = o_release_weight,
    .embed = o_embed,
    .rmsnorm = o_rmsnorm,
    .add_rmsnorm = o_add_rmsnorm,
    .linear = o_linear,
    .rope = o_rope,
    .silu_mul = o_silu_mul,
    .add = o_add,
    .synchronize = o_synchronize,
    .sample = o_sample,
};

static const sy_plugin_desc desc = {
    .struct_size = sizeof(sy_plugin_desc),
    .abi_major = SY_ABI_MAJOR,
    .abi_minor = SY_ABI_MINOR,
    .kind = SY_KIND_DEVICE,
    .name = NAME,
    .version = "0.0.1",
    .device = "cpu",
    .description = "test device: forwards to `inner`, its sample op leaves every other row to the host",
    .keys = keys,
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
