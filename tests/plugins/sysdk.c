/*
 * Test plugins for the SDK and ABI tests (tests/sdk/). One source, one
 * shared object per variant (-DSYSDK_<VARIANT>):
 *
 *   sysdk-wrongmoe  a moe plugin that loads and runs but computes the wrong
 *                   thing (the input instead of the experts' sum):
 *                   `switchyard plugin-check` must FAIL it.
 *   sysdk-fail      an attention plugin whose every op returns
 *                   SY_ERR_INTERNAL with a message; with fail_from = forward
 *                   prepare succeeds, so a server starts and each request
 *                   fails. The core must report it, never crash.
 *   sysdk-olddev    a device plugin as built against ABI 1.0 before
 *                   linear_multi was appended: its op table is a struct of
 *                   its own that ends at synchronize, with struct_size to
 *                   match, so a core that read linear_multi without checking
 *                   struct_size would read past the object (ASan: global
 *                   overflow). It forwards every op to a real device plugin
 *                   (key `inner`, a path) so the engine can run on it.
 *
 * All run only when SYSDK_PROBE=1 is in the environment, so they never win
 * `auto` in another test's plugin directory.
 */
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "switchyard/plugin.h"

#if defined(SYSDK_WRONGMOE)
#define NAME "sysdk-wrongmoe"
#define KIND SY_KIND_MOE
#elif defined(SYSDK_FAIL)
#define NAME "sysdk-fail"
#define KIND SY_KIND_ATTN
#elif defined(SYSDK_OLDDEV)
#define NAME "sysdk-olddev"
#define KIND SY_KIND_DEVICE
#else
#error "build with one of -DSYSDK_<VARIANT>"
#endif

static int probe(const sy_host *host, sy_err *why)
{
    (void)host;
    const char *on = getenv("SYSDK_PROBE");
    if (!on || strcmp(on, "1") != 0)
        return sy_err_set(why, 0, "SDK test plugin: runs only under tests/sdk (SYSDK_PROBE=1)");
    return 1;
}

/* ------------------------------------------------------------ wrongmoe */
#ifdef SYSDK_WRONGMOE
typedef struct inst {
    int32_t hidden;
} inst;

static const sy_key_decl *const keys = NULL;

static int create(const sy_host *host, const sy_kv *cfg, size_t n_cfg, void **out, sy_err *err)
{
    (void)host;
    (void)cfg;
    (void)n_cfg;
    if (!(*out = calloc(1, sizeof(inst))))
        return sy_err_set(err, SY_ERR_NOMEM, NAME ": out of memory");
    return SY_OK;
}

static int supports(void *i, const sy_moe_problem *p, sy_err *why)
{
    (void)i;
    (void)p;
    (void)why;
    return 1;
}

static int prepare(void *i, const sy_moe_problem *p, sy_err *err)
{
    (void)err;
    ((inst *)i)->hidden = p->hidden;
    return SY_OK;
}

static int prepare_layer(void *i, int32_t layer, const sy_tensor *g, const sy_tensor *u, const sy_tensor *d,
                         const sy_tensor *bias, sy_err *err)
{
    (void)i, (void)layer, (void)g, (void)u, (void)d, (void)bias, (void)err;
    return SY_OK;
}

/* The bug on purpose: out = x, as if every expert were the identity. */
static int forward(void *i, int32_t layer, const sy_tensor *x, const sy_tensor *logits, sy_tensor *out, sy_err *err)
{
    (void)layer, (void)logits, (void)err;
    memcpy(out->data, x->data, sizeof(float) * (size_t)x->shape[0] * (size_t)((inst *)i)->hidden);
    return SY_OK;
}

static const sy_moe_ops ops = {.struct_size = sizeof(sy_moe_ops),
                               .supports = supports,
                               .prepare = prepare,
                               .prepare_layer = prepare_layer,
                               .forward = forward};
#define DEVICE "cpu"
#define GET_PROC NULL
#endif

/* ---------------------------------------------------------------- fail */
#ifdef SYSDK_FAIL
typedef struct inst {
    int prepare_ok;
} inst;

static const sy_key_decl keys[] = {
    {"fail_from", SY_KEY_ENUM, "prepare", "first op that fails: prepare (start-up fails) or forward (each step fails)",
     1, 0, "prepare|forward"},
    {NULL, 0, NULL, NULL, 0, 0, NULL},
};

static int create(const sy_host *host, const sy_kv *cfg, size_t n_cfg, void **out, sy_err *err)
{
    (void)host;
    inst *in = calloc(1, sizeof *in);
    if (!in)
        return sy_err_set(err, SY_ERR_NOMEM, NAME ": out of memory");
    const char *from = sy_kv_get(cfg, n_cfg, "fail_from");
    in->prepare_ok = from && strcmp(from, "forward") == 0;
    *out = in;
    return SY_OK;
}

static int supports(void *i, const sy_attn_problem *p, sy_err *why)
{
    (void)i, (void)p, (void)why;
    return 1;
}

static int prepare(void *i, const sy_attn_problem *p, sy_err *err)
{
    (void)p;
    if (((inst *)i)->prepare_ok)
        return SY_OK;
    return sy_err_set(err, SY_ERR_INTERNAL, NAME ": prepare fails on purpose (every op of this plugin fails)");
}

static int forward(void *i, int32_t layer, const sy_attn_batch *b, const sy_tensor *q, const sy_tensor *k,
                   const sy_tensor *v, sy_tensor *out, sy_err *err)
{
    (void)i, (void)b, (void)q, (void)k, (void)v, (void)out;
    return sy_err_set(err, SY_ERR_INTERNAL, NAME ": forward fails on purpose (layer %d)", (int)layer);
}

static int copy_blocks(void *i, const int32_t *src, const int32_t *dst, int32_t n, sy_err *err)
{
    (void)i, (void)src, (void)dst, (void)n;
    return sy_err_set(err, SY_ERR_INTERNAL, NAME ": copy_blocks fails on purpose");
}

static const sy_attn_ops ops = {sizeof(sy_attn_ops), supports, prepare, forward, copy_blocks, NULL};
#define DEVICE "cpu"
#define GET_PROC NULL
#endif

/* -------------------------------------------------------------- olddev */
#ifdef SYSDK_OLDDEV
/* sy_device_ops as ABI 1.0 first shipped it: no linear_multi. */
typedef struct old_device_ops {
    uint32_t struct_size;
    int (*alloc)(void *, sy_tensor *, sy_err *);
    void (*free)(void *, sy_tensor *);
    int (*upload)(void *, sy_tensor *, const void *, size_t, sy_err *);
    int (*download)(void *, void *, const sy_tensor *, size_t, sy_err *);
    int (*prepare_weight)(void *, const char *, const sy_tensor *, sy_tensor *, sy_err *);
    void (*release_weight)(void *, sy_tensor *);
    int (*embed)(void *, const sy_tensor *, const int32_t *, int64_t, sy_tensor *, sy_err *);
    int (*rmsnorm)(void *, const sy_tensor *, const sy_tensor *, float, sy_tensor *, sy_err *);
    int (*add_rmsnorm)(void *, sy_tensor *, const sy_tensor *, const sy_tensor *, float, sy_tensor *, sy_err *);
    int (*linear)(void *, const sy_tensor *, const sy_tensor *, const sy_tensor *, sy_tensor *, sy_err *);
    int (*rope)(void *, sy_tensor *, const int32_t *, const sy_rope_params *, sy_err *);
    int (*silu_mul)(void *, const sy_tensor *, const sy_tensor *, sy_tensor *, sy_err *);
    int (*add)(void *, sy_tensor *, const sy_tensor *, sy_err *);
    int (*synchronize)(void *, sy_err *);
} old_device_ops;

typedef struct inst {
    const sy_plugin_desc *inner;
    const sy_device_ops *io;
    void *ii;
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
    inst *in = calloc(1, sizeof *in);
    if (!in)
        return sy_err_set(err, SY_ERR_NOMEM, NAME ": out of memory");
    in->inner = d;
    in->io = d->ops;
    rc = d->create(host, NULL, 0, &in->ii, err);
    if (rc) {
        free(in);
        return rc;
    }
    *out = in;
    return SY_OK;
}


/* The inner device's worker pool, reached through our instance. */
static void o_parallel_for(void *i, int64_t n, int64_t grain, sy_range_fn fn, void *arg)
{
    void *f = IN->inner->get_proc ? IN->inner->get_proc("parallel_for") : NULL;
    sy_device_parallel_for_fn run;
    memcpy(&run, &f, sizeof run);
    if (run)
        run(IN->ii, n, grain, fn, arg);
    else
        fn(arg, 0, n, 0);
}
static int o_n_workers(void *i)
{
    void *f = IN->inner->get_proc ? IN->inner->get_proc("n_workers") : NULL;
    sy_device_n_workers_fn nw;
    memcpy(&nw, &f, sizeof nw);
    return nw ? nw(IN->ii) : 1;
}
#undef IN

static void *get_proc(const char *name)
{
    void *p = NULL;
    if (strcmp(name, "parallel_for") == 0) {
        sy_device_parallel_for_fn f = o_parallel_for;
        memcpy(&p, &f, sizeof p);
    } else if (strcmp(name, "n_workers") == 0) {
        sy_device_n_workers_fn f = o_n_workers;
        memcpy(&p, &f, sizeof p);
    }
    return p;
}

static const old_device_ops ops = {
    sizeof(old_device_ops), o_alloc, o_free,    o_upload,   o_download, o_prepare_weight, o_release_weight, o_embed,
    o_rmsnorm,              o_add_rmsnorm, o_linear, o_rope, o_silu_mul, o_add,            o_synchronize,
};
#define DEVICE "cpu"
#define GET_PROC get_proc
#endif

static void destroy(void *p)
{
#ifdef SYSDK_OLDDEV
    inst *in = p;
    if (in && in->ii)
        in->inner->destroy(in->ii);
#endif
    free(p);
}

static const sy_plugin_desc desc = {
    sizeof(sy_plugin_desc), SY_ABI_MAJOR, SY_ABI_MINOR, KIND, NAME, "0.0.1", DEVICE,
    "switchyard SDK/ABI test plugin", keys, probe, create, destroy, &ops, GET_PROC,
};

SY_EXPORT const sy_plugin_desc *SY_PLUGIN_ENTRY(void);
SY_EXPORT const sy_plugin_desc *SY_PLUGIN_ENTRY(void)
{
    return &desc;
}
