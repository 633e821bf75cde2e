/*
 * sytest-tilemoe: a moe plugin for tests/gpu/test_tune_moe_tiles.sh that
 * has what moe cuda gives `switchyard tune-moe` (a `tile` key naming a
 * variant, get_proc("tile_candidates"), get_proc("tuning_table"), a table
 * read through plugins/common/moe/sytune.c with a one-key schema) but runs
 * on the host, so tune-moe's path for such plugins is tested without a
 * GPU. Its output is zeros; what differs between tiles is time:
 *   builtin: the forward spins about 2 ms;  fast: returns at once;
 *   slow: spins about 4 ms;  huge: "does not fit this device", refused at
 *   prepare like a tile over a GPU's shared memory.
 * At prepare it logs (info) where its tiles came from, and (warn) the tile
 * a 1-token pass would take, so the test can read the table back.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "switchyard/plugin.h"
#include "sytune.h"

#define NAME "sytest-tilemoe"

static const char *const variants[] = {"builtin", "fast", "slow", "huge"};
enum { N_VARIANTS = 4, HUGE_VARIANT = 3 };

typedef struct tmoe {
    const sy_host *host;
    int tile; /* -1: the table; else a variant */
    char tuning_dir[2048];
    sy_moe_problem p;
    int prepared;
    sytune_table tune;
} tmoe;

static const sy_key_decl keys[] = {
    {"tile", SY_KEY_STRING, "", "builtin, fast, slow or huge for every pass; empty: the table", 0, 0, NULL},
    {"tuning_dir", SY_KEY_STRING, "", "where the tables are (<dir>/test-arch/test-sku/...)", 0, 0, NULL},
    {NULL, 0, NULL, NULL, 0, 0, NULL},
};

static int find(const char *v)
{
    for (int i = 0; i < N_VARIANTS; i++)
        if (strcmp(v, variants[i]) == 0)
            return i;
    return -1;
}

static int probe(const sy_host *host, sy_err *why)
{
    (void)host;
    (void)why;
    return 1;
}

static int create(const sy_host *host, const sy_kv *cfg, size_t n_cfg, void **inst, sy_err *err)
{
    const char *tile = sy_kv_get(cfg, n_cfg, "tile"), *td = sy_kv_get(cfg, n_cfg, "tuning_dir");
    const int t = tile && *tile ? find(tile) : -1;
    if (tile && *tile && t < 0)
        return sy_err_set(err, SY_ERR_INVALID, "tile = '%s': expected builtin, fast, slow or huge", tile);
    tmoe *m = calloc(1, sizeof *m);
    if (!m)
        return sy_err_set(err, SY_ERR_NOMEM, NAME ": out of memory");
    m->host = host;
    m->tile = t;
    snprintf(m->tuning_dir, sizeof m->tuning_dir, "%s", td ? td : "");
    *inst = m;
    return SY_OK;
}

static void destroy(void *inst)
{
    free(inst);
}

static int supports(void *inst, const sy_moe_problem *p, sy_err *why)
{
    (void)inst;
    (void)p;
    (void)why;
    return 1;
}

static int parse_tile(const void *ctx, int key, const char *v, int64_t *out, char *why, size_t cap)
{
    (void)ctx;
    (void)key;
    const int i = find(v);
    if (i < 0) {
        snprintf(why, cap, "expected builtin, fast, slow or huge");
        return -1;
    }
    *out = i;
    return 0;
}

static int check_tile(const void *ctx, const int64_t *entry, char *why, size_t cap)
{
    (void)ctx;
    if (entry[0] == HUGE_VARIANT) {
        snprintf(why, cap, "does not fit this device: tile huge needs 1 TB of shared memory per block");
        return SY_ERR_UNSUPPORTED;
    }
    return SY_OK;
}

static int prepare(void *inst, const sy_moe_problem *p, sy_err *err)
{
    tmoe *m = inst;
    m->p = *p;
    m->prepared = 0;
    const sytune_schema s = {{"tile", NULL}, parse_tile, check_tile, NULL, NAME, "test device"};
    memset(&m->tune, 0, sizeof m->tune);
    if (m->tile >= 0) {
        const int64_t e[SYTUNE_MAX_KEYS] = {m->tile};
        char why[200];
        const int rc = check_tile(NULL, e, why, sizeof why);
        if (rc)
            return sy_err_set(err, rc, NAME ": tile = %s %s", variants[m->tile], why);
        m->tune.n = 1;
        m->tune.tokens[0] = 1;
        m->tune.entry[0][0] = m->tile;
        snprintf(m->tune.source, sizeof m->tune.source, "the tile key");
    } else {
        const int rc = sytune_load(m->tuning_dir, "test-arch", "test-sku", p->n_experts, p->inter, p->hidden,
                                   p->weight_dtype, &s, m->host, &m->tune, err);
        if (rc)
            return rc;
        const int b = sytune_bucket(m->tune.tokens, m->tune.n, 1);
        sy_logf(m->host, SY_LOG_WARN, NAME, "tiles from %s; a 1-token pass takes tile %s", m->tune.source,
                variants[b < 0 ? 0 : m->tune.entry[b][0]]);
    }
    m->prepared = 1;
    return SY_OK;
}

static int prepare_layer(void *inst, int32_t layer, const sy_tensor *gate, const sy_tensor *up, const sy_tensor *down,
                         const sy_tensor *score_bias, sy_err *err)
{
    (void)inst, (void)layer, (void)gate, (void)up, (void)down, (void)score_bias, (void)err;
    return SY_OK;
}

static void spin(double seconds)
{
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do
        clock_gettime(CLOCK_MONOTONIC, &b);
    while ((double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9 < seconds);
}

static int forward(void *inst, int32_t layer, const sy_tensor *x, const sy_tensor *router_logits, sy_tensor *out,
                   sy_err *err)
{
    tmoe *m = inst;
    (void)layer, (void)x, (void)router_logits;
    if (!m->prepared)
        return sy_err_set(err, SY_ERR_INVALID, NAME ": forward before prepare");
    const int b = sytune_bucket(m->tune.tokens, m->tune.n, out->shape[0]);
    const int v = b < 0 ? 0 : (int)m->tune.entry[b][0];
    spin(v == 1 ? 0 : v == 2 ? 4e-3 : 2e-3);
    for (int64_t r = 0; r < out->shape[0]; r++)
        memset((char *)out->data + r * out->stride[0] * 4, 0, (size_t)out->shape[1] * 4);
    return SY_OK;
}

static const sy_moe_ops ops = {
    .struct_size = sizeof(sy_moe_ops),
    .supports = supports,
    .prepare = prepare,
    .prepare_layer = prepare_layer,
    .forward = forward,
};

static int tuning_table(void *inst, char *path, size_t cap, const char **source)
{
    const tmoe *m = inst;
    char fname[128];
    sytune_file_name(fname, sizeof fname, m->p.n_experts, m->p.inter, m->p.hidden, m->p.weight_dtype);
    if (!m->prepared || snprintf(path, cap, "%s/test-arch/test-sku/%s", m->tuning_dir, fname) >= (int)cap)
        return -1;
    if (source)
        *source = m->tune.source;
    return 0;
}

static int tile_candidates(void *inst, const char **names, int cap)
{
    (void)inst;
    int n = 0;
    for (int i = 1; i < N_VARIANTS && n < cap; i++) /* builtin is the baseline, not a candidate */
        names[n++] = variants[i];
    return n;
}

static void *get_proc(const char *name)
{
    if (strcmp(name, "tuning_table") == 0)
        return (void *)tuning_table;
    return strcmp(name, "tile_candidates") == 0 ? (void *)tile_candidates : NULL;
}

static const sy_plugin_desc desc = {
    .struct_size = sizeof(sy_plugin_desc),
    .abi_major = SY_ABI_MAJOR,
    .abi_minor = SY_ABI_MINOR,
    .kind = SY_KIND_MOE,
    .name = NAME,
    .version = "0",
    .device = "cpu",
    .description = "test only: a moe plugin with tile candidates and a one-key table, outputs zeros",
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
