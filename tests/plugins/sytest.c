/*
 * Test plugins for the loader, good and deliberately bad. One source,
 * built once per variant (tests/plugin.mk passes -DSYTEST_<VARIANT>):
 *
 *   sytest-abi2        exports sy_plugin_v2 only (a future ABI major)
 *   sytest-noentry     exports no entry symbol at all
 *   sytest-minor       ABI 1.(ours + 1): a newer minor
 *   sytest-moe         a moe plugin (for "wrong kind" when named for [attention])
 *   sytest-cuda        an attn plugin for device "cuda"
 *   sytest-never       attn, probe 0 with a reason
 *   sytest-low         attn, probe 10
 *   sytest-high        attn, probe 20, declares one key of every type
 *   sytest-createfail  attn, create fails with a message
 *   sytest-malformed   a broken descriptor chosen by $SYTEST_MALFORMED
 *
 * They all live in build-plugins/ beside the real plugins, so none may ever
 * win `auto` there: every device is "sytest" or "cuda", and every probe
 * returns 0 unless the environment holds SYTEST_PROBE=1 (test_loader sets it).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "switchyard/plugin.h"

#if defined(SYTEST_MOE)
#define KIND SY_KIND_MOE
#define NAME "sytest-moe"
#else
#define KIND SY_KIND_ATTN
#endif

#if defined(SYTEST_ABI2)
#define NAME "sytest-abi2"
#elif defined(SYTEST_NOENTRY)
#define NAME "sytest-noentry"
#elif defined(SYTEST_MINOR)
#define NAME "sytest-minor"
#elif defined(SYTEST_CUDA)
#define NAME "sytest-cuda"
#elif defined(SYTEST_NEVER)
#define NAME "sytest-never"
#elif defined(SYTEST_LOW)
#define NAME "sytest-low"
#define SCORE 10
#elif defined(SYTEST_HIGH)
#define NAME "sytest-high"
#define SCORE 20
#elif defined(SYTEST_CREATEFAIL)
#define NAME "sytest-createfail"
#define SCORE 5
#elif defined(SYTEST_MALFORMED)
#define NAME "sytest-malformed"
#endif

#ifndef NAME
#error "build with one of -DSYTEST_<VARIANT>"
#endif
#ifndef SCORE
#define SCORE 0
#endif

#ifdef SYTEST_CUDA
#define DEVICE "cuda"
#else
#define DEVICE "sytest"
#endif

/* ----------------------------------------------------------- instance */

typedef struct inst {
    char label[64];
    long long threads;
} inst;

static int probe(const sy_host *host, sy_err *why)
{
    const char *on = getenv("SYTEST_PROBE");
    if (!on || strcmp(on, "1") != 0)
        return sy_err_set(why, 0, "test plugin: runs only under test_loader (SYTEST_PROBE=1)");
    if (!host || host->abi_major != SY_ABI_MAJOR)
        return sy_err_set(why, 0, "no host table");
    if (SCORE == 0)
        return sy_err_set(why, 0, "needs the sytest accelerator, and none is attached");
    return SCORE;
}

static int create(const sy_host *host, const sy_kv *cfg, size_t n_cfg, void **out, sy_err *err)
{
#ifdef SYTEST_CREATEFAIL
    (void)cfg;
    (void)n_cfg;
    (void)out;
    return sy_err_set(err, SY_ERR_UNAVAILABLE, "no sytest accelerator attached (checked /dev/sytest0)");
#else
    /* Exercise the host's services: aligned memory, a counter, a log line. */
    void *scratch = host->alloc(host->ctx, 256, 64);
    if (!scratch || ((uintptr_t)scratch & 63) != 0)
        return sy_err_set(err, SY_ERR_NOMEM, "host->alloc gave no 64-byte aligned block");
    host->free(host->ctx, scratch);
    inst *in = calloc(1, sizeof *in);
    if (!in)
        return sy_err_set(err, SY_ERR_NOMEM, "no memory for the instance");
    const char *label = sy_kv_get(cfg, n_cfg, "label");
    strncpy(in->label, label ? label : "", sizeof in->label - 1);
    in->threads = sy_kv_int(cfg, n_cfg, "threads", -1);
    host->metric_add(host->ctx, "sytest.created", 1);
    sy_logf(host, SY_LOG_DEBUG, NAME, "created with label \"%s\"", in->label);
    *out = in;
    return SY_OK;
#endif
}

static void destroy(void *p)
{
    free(p);
}

/* ----------------------------------------------------------- op stubs */

#ifndef SYTEST_MOE
static int attn_supports(void *i, const sy_attn_problem *p, sy_err *why)
{
    return sy_err_set(why, 0, "sytest plugins serve no problem");
}

static int attn_prepare(void *i, const sy_attn_problem *p, sy_err *err)
{
    return sy_err_set(err, SY_ERR_UNSUPPORTED, "sytest");
}

static int attn_forward(void *i, int32_t layer, const sy_attn_batch *b, const sy_tensor *q, const sy_tensor *k,
                        const sy_tensor *v, sy_tensor *out, sy_err *err)
{
    return sy_err_set(err, SY_ERR_UNSUPPORTED, "sytest");
}

static const sy_attn_ops attn_ops = {sizeof(sy_attn_ops), attn_supports, attn_prepare, attn_forward, NULL, NULL};
#else
static int moe_supports(void *i, const sy_moe_problem *p, sy_err *why)
{
    return sy_err_set(why, 0, "sytest plugins serve no problem");
}

static int moe_prepare(void *i, const sy_moe_problem *p, sy_err *err)
{
    return sy_err_set(err, SY_ERR_UNSUPPORTED, "sytest");
}

static int moe_prepare_layer(void *i, int32_t layer, const sy_tensor *g, const sy_tensor *u, const sy_tensor *d,
                             const sy_tensor *bias, sy_err *err)
{
    return sy_err_set(err, SY_ERR_UNSUPPORTED, "sytest");
}

static int moe_forward(void *i, int32_t layer, const sy_tensor *x, const sy_tensor *logits, sy_tensor *out,
                       sy_err *err)
{
    return sy_err_set(err, SY_ERR_UNSUPPORTED, "sytest");
}

static const sy_moe_ops moe_ops = {.struct_size = sizeof(sy_moe_ops),
                                   .supports = moe_supports,
                                   .prepare = moe_prepare,
                                   .prepare_layer = moe_prepare_layer,
                                   .forward = moe_forward};
#endif

/* ---------------------------------------------------------- descriptor */

#ifdef SYTEST_HIGH
static const sy_key_decl keys[] = {
    {"label", SY_KEY_STRING, NULL, "a name for the instance", 1, 0, NULL},
    {"threads", SY_KEY_INT, "4", "worker threads", 1, 64, NULL},
    {"ratio", SY_KEY_FLOAT, "0.5", "a fraction", 0, 1, NULL},
    {"verbose", SY_KEY_BOOL, "false", "log more", 1, 0, NULL},
    {"mode", SY_KEY_ENUM, "fast", "speed or accuracy", 1, 0, "fast|exact"},
    {"cache", SY_KEY_SIZE, "64M", "cache size", 1024, 1073741824.0, NULL},
    {NULL, SY_KEY_STRING, NULL, NULL, 0, 0, NULL},
};
#define KEYS keys
#else
#define KEYS NULL
#endif

#ifdef SYTEST_MINOR
#define MINOR (SY_ABI_MINOR + 1)
#else
#define MINOR SY_ABI_MINOR
#endif

static const sy_plugin_desc desc = {
    sizeof(sy_plugin_desc),
#ifdef SYTEST_ABI2
    2,
#else
    SY_ABI_MAJOR,
#endif
    MINOR,
    KIND,
    NAME,
    "0.0.1",
    DEVICE,
    "switchyard loader test plugin",
    KEYS,
    probe,
    create,
    destroy,
#ifdef SYTEST_MOE
    &moe_ops,
#else
    &attn_ops,
#endif
    NULL,
};

#ifdef SYTEST_MALFORMED
/*
 * SYTEST_MALFORMED picks the defect (the loader calls the entry on every
 * open, and never unloads a plugin it accepted, so each open sees the
 * current value): size, tiny, kind, noops, opssize, noforward, noname, badkey,
 * reserved, noprobe. Unset: a valid descriptor.
 */
static const sy_attn_ops ops_small = {8, attn_supports, attn_prepare, attn_forward, NULL, NULL};
static const sy_attn_ops ops_noforward = {sizeof(sy_attn_ops), attn_supports, attn_prepare, NULL, NULL, NULL};
static const sy_key_decl badkey[] = {
    {"level", SY_KEY_INT, "99", "a level", 0, 9, NULL},
    {NULL, SY_KEY_STRING, NULL, NULL, 0, 0, NULL},
};
static const sy_key_decl reserved[] = {
    {"plugin", SY_KEY_STRING, "", "mine", 1, 0, NULL},
    {NULL, SY_KEY_STRING, NULL, NULL, 0, 0, NULL},
};

SY_EXPORT const sy_plugin_desc *SY_PLUGIN_ENTRY(void);
SY_EXPORT const sy_plugin_desc *SY_PLUGIN_ENTRY(void)
{
    static sy_plugin_desc d;
    const char *m = getenv("SYTEST_MALFORMED");
    d = desc;
    if (!m)
        return &d;
    if (strcmp(m, "size") == 0)
        d.struct_size = 40;
    else if (strcmp(m, "tiny") == 0)
        d.struct_size = 4;
    else if (strcmp(m, "kind") == 0)
        d.kind = 9;
    else if (strcmp(m, "noops") == 0)
        d.ops = NULL;
    else if (strcmp(m, "opssize") == 0)
        d.ops = &ops_small;
    else if (strcmp(m, "noforward") == 0)
        d.ops = &ops_noforward;
    else if (strcmp(m, "noname") == 0)
        d.name = NULL;
    else if (strcmp(m, "badkey") == 0)
        d.keys = badkey;
    else if (strcmp(m, "reserved") == 0)
        d.keys = reserved;
    else if (strcmp(m, "noprobe") == 0)
        d.probe = NULL;
    return &d;
}
#elif defined(SYTEST_ABI2)
SY_EXPORT const sy_plugin_desc *sy_plugin_v2(void);
SY_EXPORT const sy_plugin_desc *sy_plugin_v2(void)
{
    return &desc;
}
#elif defined(SYTEST_NOENTRY)
SY_EXPORT const sy_plugin_desc *sytest_not_an_entry(void);
SY_EXPORT const sy_plugin_desc *sytest_not_an_entry(void)
{
    return &desc;
}
#else
SY_EXPORT const sy_plugin_desc *SY_PLUGIN_ENTRY(void);
SY_EXPORT const sy_plugin_desc *SY_PLUGIN_ENTRY(void)
{
    return &desc;
}
#endif
