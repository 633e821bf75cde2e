/*
 * syfault: an attention plugin that fails on purpose, for tests/faults.
 * It wraps a real attention plugin (key `inner`, a path to its .so) and
 * forwards every op to it, except that forward call number `fail_at`
 * (counted over all layers from 1) returns an error, once. With
 * `fail_create = true`, create itself fails instead.
 *
 * Runs only when SYFAULT_PROBE=1 is in the environment (see probe).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "switchyard/plugin.h"

#define NAME "syfault"

typedef struct fault_inst {
    void *dl;
    const sy_plugin_desc *inner;
    void *inner_inst;
    long long fail_at;
    long long calls; /* forward calls so far; only the engine thread calls forward */
} fault_inst;

static int probe(const sy_host *host, sy_err *why)
{
    (void)host;
    /* Score 1 (below every real plugin) and only when a fault test asks, so it never wins `auto`. */
    const char *on = getenv("SYFAULT_PROBE");
    if (!on || strcmp(on, "1") != 0)
        return sy_err_set(why, 0, "fault-injection test plugin: runs only under tests/faults (SYFAULT_PROBE=1)");
    return 1;
}

static void destroy(void *p)
{
    fault_inst *in = p;
    if (!in)
        return;
    if (in->inner && in->inner_inst)
        in->inner->destroy(in->inner_inst);
    /* The inner plugin's code may still be referenced by the host's logs; keep it mapped. */
    free(in);
}

static int create(const sy_host *host, const sy_kv *cfg, size_t n_cfg, void **out, sy_err *err)
{
    const char *fc = sy_kv_get(cfg, n_cfg, "fail_create");
    if (fc && (strcmp(fc, "true") == 0 || strcmp(fc, "1") == 0))
        return sy_err_set(err, SY_ERR_UNAVAILABLE, "syfault: injected create failure (fail_create = %s)", fc);
    const char *path = sy_kv_get(cfg, n_cfg, "inner");
    if (!path || !*path)
        return sy_err_set(err, SY_ERR_INVALID, "syfault: key inner: expected the path of a real attention plugin");
    fault_inst *in = calloc(1, sizeof *in);
    if (!in)
        return sy_err_set(err, SY_ERR_NOMEM, "syfault: no memory for the instance");
    in->fail_at = sy_kv_int(cfg, n_cfg, "fail_at", 0);
    in->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    const sy_plugin_desc *(*entry)(void) = NULL;
    if (in->dl)
        *(void **)&entry = dlsym(in->dl, SY_PLUGIN_ENTRY_NAME);
    in->inner = entry ? entry() : NULL;
    if (!in->inner || in->inner->kind != SY_KIND_ATTN) {
        free(in);
        return sy_err_set(err, SY_ERR_INVALID, "syfault: inner %s: expected an attention plugin (%s)", path,
                          dlerror() ? "cannot load it" : "not one");
    }
    int rc = in->inner->create(host, NULL, 0, &in->inner_inst, err);
    if (rc) {
        free(in);
        return rc;
    }
    *out = in;
    return SY_OK;
}

static const sy_attn_ops *inner_ops(const fault_inst *in)
{
    return in->inner->ops;
}

static int attn_supports(void *p, const sy_attn_problem *pr, sy_err *why)
{
    fault_inst *in = p;
    return inner_ops(in)->supports(in->inner_inst, pr, why);
}

static int attn_prepare(void *p, const sy_attn_problem *pr, sy_err *err)
{
    fault_inst *in = p;
    return inner_ops(in)->prepare(in->inner_inst, pr, err);
}

static int attn_forward(void *p, int32_t layer, const sy_attn_batch *b, const sy_tensor *q, const sy_tensor *k,
                        const sy_tensor *v, sy_tensor *out, sy_err *err)
{
    fault_inst *in = p;
    if (++in->calls == in->fail_at)
        return sy_err_set(err, SY_ERR_INTERNAL, "syfault: injected attention failure on forward call %lld (layer %d)",
                          in->calls, (int)layer);
    return inner_ops(in)->forward(in->inner_inst, layer, b, q, k, v, out, err);
}

static int attn_copy_blocks(void *p, const int32_t *src, const int32_t *dst, int32_t n, sy_err *err)
{
    fault_inst *in = p;
    if (!inner_ops(in)->copy_blocks)
        return sy_err_set(err, SY_ERR_UNSUPPORTED, "syfault: the inner plugin has no copy_blocks");
    return inner_ops(in)->copy_blocks(in->inner_inst, src, dst, n, err);
}

static const sy_attn_ops ops = {sizeof(sy_attn_ops), attn_supports, attn_prepare, attn_forward, attn_copy_blocks, NULL};

static const sy_key_decl keys[] = {
    {"inner", SY_KEY_STRING, "", "path of the real attention plugin every op goes to", 1, 0, NULL},
    {"fail_at", SY_KEY_INT, "0", "forward call (from 1) that fails; 0: none", 0, 1e12, NULL},
    {"fail_create", SY_KEY_BOOL, "false", "make create fail", 1, 0, NULL},
    {NULL, SY_KEY_STRING, NULL, NULL, 0, 0, NULL},
};

static const sy_plugin_desc desc = {
    sizeof(sy_plugin_desc),
    SY_ABI_MAJOR,
    SY_ABI_MINOR,
    SY_KIND_ATTN,
    NAME,
    "0.0.1",
    "cpu",
    "fault-injection wrapper around a real attention plugin (tests/faults)",
    keys,
    probe,
    create,
    destroy,
    &ops,
    NULL,
};

SY_EXPORT const sy_plugin_desc *SY_PLUGIN_ENTRY(void);
SY_EXPORT const sy_plugin_desc *SY_PLUGIN_ENTRY(void)
{
    return &desc;
}
