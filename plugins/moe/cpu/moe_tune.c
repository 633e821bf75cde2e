/*
 * MoE tuning tables for moe/cpu (moe_tune.h): this CPU's name and limits,
 * and its entry (token_block, n_block, threads) with the check of every
 * entry against the limits; finding and reading a table is sytune.c's.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "moe_cpu.h"
#include "moe_tune.h"
#include "sytune.h"

#define SY_MOE_CPU_LOG "cpu"

void moe_limits_cpu(moe_limits *l)
{
    long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    l->fast_what = "L2 per core";
    l->fast_bytes = l2 > 0 ? (int64_t)l2 : (int64_t)1 << 20;
    l->max_threads = cpus > 0 ? (int64_t)cpus : 1;
}

int moe_tile_check(const moe_tile *t, int64_t K, int wbits, const moe_limits *l, char *why, size_t why_len)
{
    if (t->token_block == 0)
        return 0; /* the built-in path */
    if (t->token_block < 1 || t->token_block > MOE_TUNE_MAX_TOKEN_BLOCK) {
        snprintf(why, why_len, "token_block %lld: expected 1..%d", (long long)t->token_block, MOE_TUNE_MAX_TOKEN_BLOCK);
        return -1;
    }
    if (t->n_block < 0 || t->n_block % 4 != 0) {
        snprintf(why, why_len, "n_block %lld: expected 0 or a positive multiple of 4", (long long)t->n_block);
        return -1;
    }
    if (t->threads < 0 || t->threads > l->max_threads) {
        snprintf(why, why_len, "threads %lld: expected 0..%lld (the CPUs online)", (long long)t->threads,
                 (long long)l->max_threads);
        return -1;
    }
    const int64_t panel = (t->n_block ? t->n_block : 4) * K * wbits / 8, xblk = t->token_block * K * 4;
    if (panel + xblk > l->fast_bytes) {
        snprintf(why, why_len,
                 "n_block %lld x K %lld x %d bits (%lld B) + token_block %lld x K %lld x 4 B (%lld B) = %lld B "
                 "exceeds the %s (%lld B)",
                 (long long)(t->n_block ? t->n_block : 4), (long long)K, wbits, (long long)panel,
                 (long long)t->token_block, (long long)K, (long long)xblk, (long long)(panel + xblk), l->fast_what,
                 (long long)l->fast_bytes);
        return -1;
    }
    return 0;
}

void moe_tune_device(const char *isa_name, char *arch, size_t arch_len, char *sku, size_t sku_len)
{
    snprintf(arch, arch_len, "cpu-%s", isa_name);
    char model[256] = "";
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "model name", 10) == 0) {
                const char *c = strchr(line, ':');
                if (c)
                    snprintf(model, sizeof model, "%s", c + 1);
                break;
            }
        fclose(f);
    }
    sytune_sanitise(sku, sku_len, model);
}

void moe_tune_file_name(char *out, size_t cap, int64_t E, int64_t N, int64_t K, sy_dtype dt)
{
    sytune_file_name(out, cap, E, N, K, dt);
}

int moe_tile_parse(const char *s, moe_tile *t)
{
    long long a, b, c;
    char tail;
    if (sscanf(s, "%lld,%lld,%lld%c", &a, &b, &c, &tail) != 3)
        return -1;
    t->token_block = a;
    t->n_block = b;
    t->threads = c;
    return 0;
}

/* The CPU's entry: token_block, n_block, threads (sytune.h does the rest of the table). */
enum { KEY_TOKEN_BLOCK, KEY_N_BLOCK, KEY_THREADS };

typedef struct cpu_schema_ctx {
    const moe_limits *l;
    int64_t N, K;
    int wbits;
} cpu_schema_ctx;

static int parse_int(const void *ctx, int key, const char *v, int64_t *out, char *why, size_t cap)
{
    (void)ctx;
    (void)key;
    char *end;
    errno = 0;
    const long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end) {
        snprintf(why, cap, "expected an integer");
        return -1;
    }
    *out = x;
    return 0;
}

static moe_tile tile_of(const int64_t *e)
{
    return (moe_tile){e[KEY_TOKEN_BLOCK], e[KEY_N_BLOCK], e[KEY_THREADS]};
}

static int check_entry(const void *ctx, const int64_t *e, char *why, size_t cap)
{
    const cpu_schema_ctx *c = ctx;
    const moe_tile t = tile_of(e);
    if (t.token_block < 0) {
        snprintf(why, cap, "token_block %lld: expected >= 1, or 0 for the built-in tiles", (long long)t.token_block);
        return SY_ERR_INVALID;
    }
    /* The down projection reads K = inter; gate/up read K = hidden: both must fit. */
    char fit[320];
    if (moe_tile_check(&t, c->K, c->wbits, c->l, fit, sizeof fit) ||
        moe_tile_check(&t, c->N, c->wbits, c->l, fit, sizeof fit)) {
        snprintf(why, cap, "does not fit this device: %s", fit);
        return SY_ERR_UNSUPPORTED;
    }
    return SY_OK;
}

static sytune_schema cpu_schema(const cpu_schema_ctx *c)
{
    return (sytune_schema){{"token_block", "n_block", "threads", NULL}, parse_int, check_entry, c, SY_MOE_CPU_LOG,
                           "CPU"};
}

static void from_table(const sytune_table *st, moe_tune *t)
{
    memset(t, 0, sizeof *t);
    t->n = st->n;
    for (int i = 0; i < st->n; i++) {
        t->tokens[i] = st->tokens[i];
        t->tile[i] = tile_of(st->entry[i]);
    }
    snprintf(t->source, sizeof t->source, "%s", st->source);
}

int moe_tune_read(const char *path, int64_t E, int64_t N, int64_t K, sy_dtype dt, const moe_limits *l, moe_tune *t,
                  sy_err *err)
{
    const cpu_schema_ctx c = {l, N, K, sy_dtype_bits(dt)};
    const sytune_schema s = cpu_schema(&c);
    sytune_table st;
    const int rc = sytune_read(path, E, N, K, dt, &s, &st, err);
    from_table(&st, t);
    return rc;
}

int moe_tune_load(const char *dir, const char *arch, const char *sku, int64_t E, int64_t N, int64_t K, sy_dtype dt,
                  const moe_limits *l, const sy_host *host, moe_tune *t, sy_err *err)
{
    const cpu_schema_ctx c = {l, N, K, sy_dtype_bits(dt)};
    const sytune_schema s = cpu_schema(&c);
    sytune_table st;
    const int rc = sytune_load(dir, arch, sku, E, N, K, dt, &s, host, &st, err);
    from_table(&st, t);
    return rc;
}

int moe_tune_bucket(const moe_tune *t, int64_t n)
{
    return sytune_bucket(t->tokens, t->n, n);
}

moe_tile moe_tune_pick(const moe_tune *t, int64_t n)
{
    const moe_tile none = {0, 0, 0};
    const int b = moe_tune_bucket(t, n);
    return b < 0 ? none : t->tile[b];
}
