/*
 * MoE tuning tables (moe_tune.h): lookup by device, parsing, and the
 * device-limits check of every entry.
 */
#include "config.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "moe_cpu.h"
#include "moe_tune.h"

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

static void sanitise(char *dst, size_t cap, const char *src)
{
    size_t o = 0;
    int dash = 0;
    for (const char *p = src; *p && o + 1 < cap; p++) {
        if (isalnum((unsigned char)*p)) {
            if (dash && o > 0)
                dst[o++] = '-';
            if (o + 1 < cap)
                dst[o++] = *p;
            dash = 0;
        } else {
            dash = 1;
        }
    }
    dst[o] = '\0';
    if (o == 0)
        snprintf(dst, cap, "unknown");
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
    sanitise(sku, sku_len, model);
}

void moe_tune_file_name(char *out, size_t cap, int64_t E, int64_t N, int64_t K, sy_dtype dt)
{
    snprintf(out, cap, "E=%lld,N=%lld,K=%lld,dtype=%s.ini", (long long)E, (long long)N, (long long)K,
             sy_dtype_name(dt));
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

static int parse_i64(const char *v, int64_t *out)
{
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end)
        return -1;
    *out = x;
    return 0;
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

static int cmp_bucket(const void *a, const void *b)
{
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

int moe_tune_read(const char *path, int64_t E, int64_t N, int64_t K, sy_dtype dt, const moe_limits *l, moe_tune *t,
                  sy_err *err)
{
    memset(t, 0, sizeof *t);
    snprintf(t->source, sizeof t->source, "%s", path);
    FILE *f = fopen(path, "r");
    if (!f)
        return sy_err_set(err, SY_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    char line[512];
    int ln = 0, rc = SY_OK, in_table = 0, cur = -1, seen_shape = 0;
    int cur_line[MOE_TUNE_MAX_BUCKETS] = {0};
    while (rc == SY_OK && fgets(line, sizeof line, f)) {
        ln++;
        char *c = strpbrk(line, ";#");
        if (c)
            *c = '\0';
        char *s = trim(line);
        if (!*s)
            continue;
        if (*s == '[') {
            char *close = strchr(s, ']');
            if (!close) {
                rc = sy_err_set(err, SY_ERR_INVALID, "%s:%d: expected [section], found '%s'", path, ln, s);
                break;
            }
            *close = '\0';
            in_table = strcmp(s + 1, "table") == 0;
            cur = -1;
            int64_t tok;
            if (!in_table) {
                if (strncmp(s + 1, "tokens=", 7) != 0 || parse_i64(s + 8, &tok) || tok < 1) {
                    rc = sy_err_set(err, SY_ERR_INVALID, "%s:%d: expected [table] or [tokens=N] with N >= 1, found [%s]",
                                    path, ln, s + 1);
                    break;
                }
                if (t->n == MOE_TUNE_MAX_BUCKETS) {
                    rc = sy_err_set(err, SY_ERR_INVALID, "%s:%d: more than %d buckets", path, ln, MOE_TUNE_MAX_BUCKETS);
                    break;
                }
                for (int i = 0; i < t->n; i++)
                    if (t->tokens[i] == tok)
                        rc = sy_err_set(err, SY_ERR_INVALID, "%s:%d: bucket tokens=%lld appears twice", path, ln,
                                        (long long)tok);
                cur = t->n++;
                t->tokens[cur] = tok;
                cur_line[cur] = ln;
            }
            continue;
        }
        char *eq = strchr(s, '=');
        if (!eq) {
            rc = sy_err_set(err, SY_ERR_INVALID, "%s:%d: expected key = value, found '%s'", path, ln, s);
            break;
        }
        *eq = '\0';
        char *k = trim(s), *v = trim(eq + 1);
        int64_t x = 0;
        if (in_table) {
            if (strcmp(k, "dtype") == 0) {
                if (strcmp(v, sy_dtype_name(dt)) != 0)
                    rc = sy_err_set(err, SY_ERR_INVALID, "%s:%d: dtype = %s, but the experts are %s", path, ln, v,
                                    sy_dtype_name(dt));
                seen_shape++;
            } else if (strcmp(k, "experts") == 0 || strcmp(k, "n") == 0 || strcmp(k, "k") == 0) {
                const int64_t want = k[0] == 'e' ? E : k[0] == 'n' ? N : K;
                if (parse_i64(v, &x) || x != want)
                    rc = sy_err_set(err, SY_ERR_INVALID, "%s:%d: %s = %s, but the model has %lld", path, ln, k, v,
                                    (long long)want);
                seen_shape++;
            } else if (strcmp(k, "device") != 0 && strcmp(k, "arch") != 0 && strcmp(k, "tool") != 0 &&
                       strcmp(k, "matmul") != 0) {
                rc = sy_err_set(err, SY_ERR_INVALID,
                                "%s:%d: unknown key '%s' in [table] (expected experts, n, k, dtype, device, arch, tool, "
                                "matmul)",
                                path, ln, k);
            }
            continue;
        }
        if (cur < 0) {
            rc = sy_err_set(err, SY_ERR_INVALID, "%s:%d: '%s' outside a [tokens=N] section", path, ln, k);
            break;
        }
        if (parse_i64(v, &x)) {
            rc = sy_err_set(err, SY_ERR_INVALID, "%s:%d: %s = '%s': expected an integer", path, ln, k, v);
            break;
        }
        if (strcmp(k, "token_block") == 0)
            t->tile[cur].token_block = x;
        else if (strcmp(k, "n_block") == 0)
            t->tile[cur].n_block = x;
        else if (strcmp(k, "threads") == 0)
            t->tile[cur].threads = x;
        else
            rc = sy_err_set(err, SY_ERR_INVALID,
                            "%s:%d: unknown key '%s' in [tokens=%lld] (expected token_block, n_block, threads)", path, ln,
                            k, (long long)t->tokens[cur]);
    }
    fclose(f);
    if (rc)
        return rc;
    if (seen_shape != 4)
        return sy_err_set(err, SY_ERR_INVALID, "%s: [table] must give experts, n, k and dtype", path);
    if (t->n == 0)
        return sy_err_set(err, SY_ERR_INVALID, "%s: no [tokens=N] sections", path);
    const int wbits = sy_dtype_bits(dt);
    for (int i = 0; i < t->n; i++) {
        char why[320];
        if (t->tile[i].token_block < 0)
            return sy_err_set(err, SY_ERR_INVALID, "%s:%d: [tokens=%lld] token_block %lld: expected >= 1, or 0 for "
                              "the built-in tiles", path, cur_line[i], (long long)t->tokens[i],
                              (long long)t->tile[i].token_block);
        /* The down projection reads K = inter; gate/up read K = hidden: both must fit. */
        if (moe_tile_check(&t->tile[i], K, wbits, l, why, sizeof why) ||
            moe_tile_check(&t->tile[i], N, wbits, l, why, sizeof why))
            return sy_err_set(err, SY_ERR_UNSUPPORTED, "%s:%d: [tokens=%lld] does not fit this device: %s", path,
                              cur_line[i], (long long)t->tokens[i], why);
    }
    /* Sort buckets ascending, carrying their tiles. */
    for (int i = 1; i < t->n; i++)
        for (int j = i; j > 0 && cmp_bucket(&t->tokens[j - 1], &t->tokens[j]) > 0; j--) {
            int64_t tt = t->tokens[j];
            t->tokens[j] = t->tokens[j - 1];
            t->tokens[j - 1] = tt;
            moe_tile x = t->tile[j];
            t->tile[j] = t->tile[j - 1];
            t->tile[j - 1] = x;
        }
    return SY_OK;
}

static int is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

int moe_tune_load(const char *dir, const char *arch, const char *sku, int64_t E, int64_t N, int64_t K, sy_dtype dt,
                  const moe_limits *l, const sy_host *host, moe_tune *t, sy_err *err)
{
    memset(t, 0, sizeof *t);
    snprintf(t->source, sizeof t->source, "built-in");
    char fname[128], path[4096];
    moe_tune_file_name(fname, sizeof fname, E, N, K, dt);
    snprintf(path, sizeof path, "%s/%s/%s/%s", dir, arch, sku, fname);
    if (is_file(path))
        return moe_tune_read(path, E, N, K, dt, l, t, err);
    /* Another SKU of the same architecture, first in name order. */
    char archdir[4096], best[4096] = "";
    snprintf(archdir, sizeof archdir, "%s/%s", dir, arch);
    DIR *d = opendir(archdir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.')
                continue;
            char cand[4096];
            if (snprintf(cand, sizeof cand, "%s/%s/%s", archdir, e->d_name, fname) >= (int)sizeof cand)
                continue;
            if (is_file(cand) && (!best[0] || strcmp(cand, best) < 0))
                snprintf(best, sizeof best, "%s", cand);
        }
        closedir(d);
    }
    if (best[0]) {
        sy_logf(host, SY_LOG_WARN, SY_MOE_CPU_LOG,
                "no MoE tuning table for this CPU (%s): using %s, tuned on another %s CPU; run `switchyard tune-moe` "
                "for tiles of this one",
                sku, best, arch);
        return moe_tune_read(best, E, N, K, dt, l, t, err);
    }
    sy_logf(host, SY_LOG_WARN, SY_MOE_CPU_LOG,
            "no MoE tuning table: looked for %s and %s/*/%s; using the built-in tiles (`switchyard tune-moe` writes "
            "one)",
            path, archdir, fname);
    return SY_OK;
}

int moe_tune_bucket(const moe_tune *t, int64_t n)
{
    int best = -1;
    double bd = INFINITY;
    for (int i = 0; i < t->n; i++) {
        const double d = fabs(log((double)n) - log((double)t->tokens[i]));
        if (d < bd) { /* strict: ties keep the smaller bucket (sorted ascending) */
            bd = d;
            best = i;
        }
    }
    return best;
}

moe_tile moe_tune_pick(const moe_tune *t, int64_t n)
{
    const moe_tile none = {0, 0, 0};
    const int b = moe_tune_bucket(t, n);
    return b < 0 ? none : t->tile[b];
}
