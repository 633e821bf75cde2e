/* MoE tuning tables shared by the moe plugins (sytune.h): lookup, syntax, buckets. */
#include "config.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sytune.h"

void sytune_sanitise(char *dst, size_t cap, const char *src)
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

void sytune_file_name(char *out, size_t cap, int64_t E, int64_t N, int64_t K, sy_dtype dt)
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

static int key_index(const sytune_schema *s, const char *k)
{
    for (int i = 0; i < SYTUNE_MAX_KEYS && s->keys[i]; i++)
        if (strcmp(s->keys[i], k) == 0)
            return i;
    return -1;
}

static void key_list(const sytune_schema *s, char *out, size_t cap)
{
    size_t o = 0;
    out[0] = '\0';
    for (int i = 0; i < SYTUNE_MAX_KEYS && s->keys[i] && o < cap; i++)
        o += (size_t)snprintf(out + o, cap - o, "%s%s", i ? ", " : "", s->keys[i]);
}

int sytune_read(const char *path, int64_t E, int64_t N, int64_t K, sy_dtype dt, const sytune_schema *s,
                sytune_table *t, sy_err *err)
{
    memset(t, 0, sizeof *t);
    snprintf(t->source, sizeof t->source, "%s", path);
    FILE *f = fopen(path, "r");
    if (!f)
        return sy_err_set(err, SY_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    char line[512];
    int ln = 0, rc = SY_OK, in_table = 0, cur = -1, seen_shape = 0;
    int cur_line[SYTUNE_MAX_BUCKETS] = {0};
    while (rc == SY_OK && fgets(line, sizeof line, f)) {
        ln++;
        char *c = strpbrk(line, ";#");
        if (c)
            *c = '\0';
        char *sl = trim(line);
        if (!*sl)
            continue;
        if (*sl == '[') {
            char *close = strchr(sl, ']');
            if (!close) {
                rc = sy_err_set(err, SY_ERR_INVALID, "%s:%d: expected [section], found '%s'", path, ln, sl);
                break;
            }
            *close = '\0';
            in_table = strcmp(sl + 1, "table") == 0;
            cur = -1;
            int64_t tok;
            if (!in_table) {
                if (strncmp(sl + 1, "tokens=", 7) != 0 || parse_i64(sl + 8, &tok) || tok < 1) {
                    rc = sy_err_set(err, SY_ERR_INVALID, "%s:%d: expected [table] or [tokens=N] with N >= 1, found [%s]",
                                    path, ln, sl + 1);
                    break;
                }
                if (t->n == SYTUNE_MAX_BUCKETS) {
                    rc = sy_err_set(err, SY_ERR_INVALID, "%s:%d: more than %d buckets", path, ln, SYTUNE_MAX_BUCKETS);
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
        char *eq = strchr(sl, '=');
        if (!eq) {
            rc = sy_err_set(err, SY_ERR_INVALID, "%s:%d: expected key = value, found '%s'", path, ln, sl);
            break;
        }
        *eq = '\0';
        char *k = trim(sl), *v = trim(eq + 1);
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
        const int ki = key_index(s, k);
        if (ki < 0) {
            char keys[160];
            key_list(s, keys, sizeof keys);
            rc = sy_err_set(err, SY_ERR_INVALID, "%s:%d: unknown key '%s' in [tokens=%lld] (expected %s)", path, ln, k,
                            (long long)t->tokens[cur], keys);
            break;
        }
        char why[200];
        if (s->parse(s->ctx, ki, v, &x, why, sizeof why)) {
            rc = sy_err_set(err, SY_ERR_INVALID, "%s:%d: %s = '%s': %s", path, ln, k, v, why);
            break;
        }
        t->entry[cur][ki] = x;
    }
    fclose(f);
    if (rc)
        return rc;
    if (seen_shape != 4)
        return sy_err_set(err, SY_ERR_INVALID, "%s: [table] must give experts, n, k and dtype", path);
    if (t->n == 0)
        return sy_err_set(err, SY_ERR_INVALID, "%s: no [tokens=N] sections", path);
    for (int i = 0; i < t->n; i++) {
        char why[400];
        if ((rc = s->check(s->ctx, t->entry[i], why, sizeof why)))
            return sy_err_set(err, rc, "%s:%d: [tokens=%lld] %s", path, cur_line[i], (long long)t->tokens[i], why);
    }
    /* Buckets ascending, carrying their entries. */
    for (int i = 1; i < t->n; i++)
        for (int j = i; j > 0 && t->tokens[j - 1] > t->tokens[j]; j--) {
            const int64_t tt = t->tokens[j];
            t->tokens[j] = t->tokens[j - 1];
            t->tokens[j - 1] = tt;
            int64_t e[SYTUNE_MAX_KEYS];
            memcpy(e, t->entry[j], sizeof e);
            memcpy(t->entry[j], t->entry[j - 1], sizeof e);
            memcpy(t->entry[j - 1], e, sizeof e);
        }
    return SY_OK;
}

static int is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

int sytune_load(const char *dir, const char *arch, const char *sku, int64_t E, int64_t N, int64_t K, sy_dtype dt,
                const sytune_schema *s, const sy_host *host, sytune_table *t, sy_err *err)
{
    memset(t, 0, sizeof *t);
    snprintf(t->source, sizeof t->source, "built-in");
    char fname[128], path[4096];
    sytune_file_name(fname, sizeof fname, E, N, K, dt);
    snprintf(path, sizeof path, "%s/%s/%s/%s", dir, arch, sku, fname);
    if (is_file(path))
        return sytune_read(path, E, N, K, dt, s, t, err);
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
        sy_logf(host, SY_LOG_WARN, s->log_name,
                "no MoE tuning table for this %s (%s): using %s, tuned on another %s %s; run `switchyard tune-moe` "
                "for tiles of this one",
                s->device_word, sku, best, arch, s->device_word);
        return sytune_read(best, E, N, K, dt, s, t, err);
    }
    sy_logf(host, SY_LOG_WARN, s->log_name,
            "no MoE tuning table: looked for %s and %s/*/%s; using the built-in tiles (`switchyard tune-moe` writes "
            "one)",
            path, archdir, fname);
    return SY_OK;
}

int sytune_bucket(const int64_t *tokens, int n, int64_t count)
{
    int best = -1;
    double bd = INFINITY;
    for (int i = 0; i < n; i++) {
        const double d = fabs(log((double)count) - log((double)tokens[i]));
        if (d < bd) { /* strict: ties keep the smaller bucket (sorted ascending) */
            bd = d;
            best = i;
        }
    }
    return best;
}
