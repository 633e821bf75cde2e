/*
 * syabi10-attn: an attention plugin that says it was built against ABI 1.0,
 * for tests/cli/test_attn_abi10.sh. It wraps a real attention plugin (key
 * `inner` = its path) and hands it the problem as a 1.0 host would, with
 * struct_size ending before layer_window and sinks, so that what such a
 * plugin would compute is what the inner one computes. The host must refuse
 * it for a model that needs per-layer windows or sinks, and take it for one
 * window for every layer (ABI 1.0's sliding_window).
 *
 * Runs only when SYABI10_PROBE=1 is in the environment (see probe).
 */
#include <dlfcn.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "switchyard/plugin.h"

#define NAME "syabi10-attn"

typedef struct abi10 {
    void *dl;
    const sy_plugin_desc *inner;
    void *inner_inst;
} abi10;

#define INNER(a) ((const sy_attn_ops *)(a)->inner->ops)

static int probe(const sy_host *host, sy_err *why)
{
    (void)host;
    const char *on = getenv("SYABI10_PROBE");
    if (!on || strcmp(on, "1") != 0)
        return sy_err_set(why, 0, "ABI 1.0 test plugin: runs only under tests/cli/test_attn_abi10.sh "
                                  "(SYABI10_PROBE=1)");
    return 1;
}

static void destroy(void *inst)
{
    abi10 *a = inst;
    if (!a)
        return;
    if (a->inner && a->inner_inst)
        a->inner->destroy(a->inner_inst);
    /* The inner plugin's code may still be referenced by the host's logs; keep it mapped. */
    free(a);
}

static int create(const sy_host *host, const sy_kv *cfg, size_t n_cfg, void **out, sy_err *err)
{
    const char *path = sy_kv_get(cfg, n_cfg, "inner");
    if (!path || !*path)
        return sy_err_set(err, SY_ERR_INVALID, NAME ": key inner: expected the path of a real attention plugin");
    abi10 *a = calloc(1, sizeof *a);
    if (!a)
        return sy_err_set(err, SY_ERR_NOMEM, NAME ": out of memory");
    const sy_plugin_desc *(*entry)(void) = NULL;
    a->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (a->dl)
        *(void **)&entry = dlsym(a->dl, SY_PLUGIN_ENTRY_NAME);
    a->inner = entry ? entry() : NULL;
    if (!a->inner || a->inner->kind != SY_KIND_ATTN) {
        free(a);
        return sy_err_set(err, SY_ERR_INVALID, NAME ": inner %s: expected an attention plugin (%s)", path,
                          dlerror() ? "cannot load it" : "wrong kind");
    }
    int rc = a->inner->create(host, NULL, 0, &a->inner_inst, err);
    if (rc) {
        free(a);
        return rc;
    }
    *out = a;
    return SY_OK;
}

/* The problem as an ABI 1.0 host hands it over: nothing past sliding_window. */
static sy_attn_problem as_abi10(const sy_attn_problem *p)
{
    sy_attn_problem q = *p;
    q.struct_size = (uint32_t)(offsetof(sy_attn_problem, sliding_window) + sizeof q.sliding_window);
    q.layer_window = NULL;
    q.sinks = NULL;
    return q;
}

static int supports(void *inst, const sy_attn_problem *p, sy_err *why)
{
    abi10 *a = inst;
    const sy_attn_problem q = as_abi10(p);
    return INNER(a)->supports(a->inner_inst, &q, why);
}

static int prepare(void *inst, const sy_attn_problem *p, sy_err *err)
{
    abi10 *a = inst;
    const sy_attn_problem q = as_abi10(p);
    return INNER(a)->prepare(a->inner_inst, &q, err);
}

static int forward(void *inst, int32_t layer, const sy_attn_batch *b, const sy_tensor *q, const sy_tensor *k,
                   const sy_tensor *v, sy_tensor *out, sy_err *err)
{
    abi10 *a = inst;
    return INNER(a)->forward(a->inner_inst, layer, b, q, k, v, out, err);
}

static int copy_blocks(void *inst, const int32_t *src, const int32_t *dst, int32_t n, sy_err *err)
{
    abi10 *a = inst;
    return INNER(a)->copy_blocks(a->inner_inst, src, dst, n, err);
}

/* ABI 1.0's attention ops: no stage. */
static const sy_attn_ops ops = {
    .struct_size = (uint32_t)(offsetof(sy_attn_ops, copy_blocks) + sizeof(void (*)(void))),
    .supports = supports,
    .prepare = prepare,
    .forward = forward,
    .copy_blocks = copy_blocks,
};

static const sy_key_decl keys[] = {
    {"inner", SY_KEY_STRING, "", "path of the real attention plugin every op goes to", 1, 0, NULL},
    {NULL, 0, NULL, NULL, 0, 0, NULL},
};

static const sy_plugin_desc desc = {
    .struct_size = sizeof(sy_plugin_desc),
    .abi_major = SY_ABI_MAJOR,
    .abi_minor = 0,
    .kind = SY_KIND_ATTN,
    .name = NAME,
    .version = "0",
    .device = "cpu",
    .description = "test plugin: an attention plugin built against ABI 1.0, wrapping a real one",
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
