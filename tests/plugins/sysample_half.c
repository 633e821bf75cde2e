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

#include "sywrap_device.h"

static const sy_key_decl keys[] = {
    {"inner", SY_KEY_STRING, NULL, "path of the device plugin every op is forwarded to", 1, 0, NULL},
    {NULL, 0, NULL, NULL, 0, 0, NULL},
};

static int create(const sy_host *host, const sy_kv *cfg, size_t n_cfg, void **out, sy_err *err)
{
    const char *path = sy_kv_get(cfg, n_cfg, "inner");
    const sy_plugin_desc *d = NULL;
    int rc = sywrap_load_device(NAME, path, &d, err);
    if (rc)
        return rc;
    const sy_device_ops *io = d->ops;
    if (io->struct_size < offsetof(sy_device_ops, sample) + sizeof io->sample || !io->sample)
        return sy_err_set(err, SY_ERR_INVALID, NAME ": inner = %s has no sample op", path);
    inst *in = calloc(1, sizeof *in);
    if (!in)
        return sy_err_set(err, SY_ERR_NOMEM, NAME ": out of memory");
    in->inner = d;
    in->io = io;
    rc = d->create(host, NULL, 0, &in->ii, err);
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
