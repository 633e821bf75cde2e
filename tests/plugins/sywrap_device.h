/*
 * The forwarding half of a test plugin that wraps another device plugin
 * (sysdk.c, sysample_half.c): loading the inner plugin, and every required
 * device op passed to it unchanged. Include it after the wrapper's `inst` type, which has
 * `io` (the inner plugin's device ops) and `ii` (its instance); the wrapper
 * then writes only the ops it changes.
 */
#ifndef SY_TEST_SYWRAP_DEVICE_H
#define SY_TEST_SYWRAP_DEVICE_H

#include <dlfcn.h>
#include <string.h>

#include "switchyard/plugin.h"

/*
 * The device plugin at path (the wrapper's key `inner`), loaded for the
 * rest of the process as the core keeps plugins loaded: SY_OK with its
 * descriptor in *out, or an error saying what path held instead. name is
 * the wrapper's.
 */
static int sywrap_load_device(const char *name, const char *path, const sy_plugin_desc **out, sy_err *err)
{
    if (!path)
        return sy_err_set(err, SY_ERR_INVALID, "%s: the key inner (a device plugin's path) is not set", name);
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!dl)
        return sy_err_set(err, SY_ERR_IO, "%s: inner = %s: %s", name, path, dlerror());
    void *sym = dlsym(dl, SY_PLUGIN_ENTRY_NAME);
    sy_plugin_entry_fn entry;
    memcpy(&entry, &sym, sizeof entry);
    const sy_plugin_desc *d = sym ? entry() : NULL;
    if (!d || d->kind != SY_KIND_DEVICE)
        return sy_err_set(err, SY_ERR_INVALID, "%s: inner = %s: expected a device plugin", name, path);
    *out = d;
    return SY_OK;
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

#endif
