/*
 * Checking configuration values against the sy_key_decl tables their owners
 * declare (the core for [model], [scheduler], [plugins]; each plugin for
 * its section), and building the sy_kv array handed to a plugin.
 *
 * Every message says what was expected, what was found, and where:
 *   "max_running" expects an integer in [1, 4096], found "abc" in f.ini:12
 */
#include "config.h"

#include "plugin/config.h"
#include "plugin/config_internal.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Declaration tables longer than this are taken as missing their terminator. */
#define SY_MAX_DECLS 256

int sy__edit_distance(const char *a, const char *b, int cap)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64)
        return cap + 1;
    if ((la > lb ? la - lb : lb - la) > (size_t)cap)
        return cap + 1;
    int prev[65], cur[65];
    for (size_t j = 0; j <= lb; j++)
        prev[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
            int del = prev[j] + 1, ins = cur[j - 1] + 1;
            cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
        memcpy(prev, cur, sizeof(int) * (lb + 1));
    }
    return prev[lb] > cap ? cap + 1 : prev[lb];
}

int sy_parse_size(const char *s, unsigned long long *out)
{
    if (!s || *s < '0' || *s > '9')
        return -1;
    unsigned long long v = 0;
    const char *p = s;
    for (; *p >= '0' && *p <= '9'; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (~0ULL - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    int shift = 0;
    switch (*p) {
    case '\0': break;
    case 'K': case 'k': shift = 10; break;
    case 'M': case 'm': shift = 20; break;
    case 'G': case 'g': shift = 30; break;
    case 'T': case 't': shift = 40; break;
    default: return -1;
    }
    if (*p && p[1])
        return -1;
    if (shift && v > (~0ULL >> shift))
        return -1;
    if (out)
        *out = v << shift;
    return 0;
}

/* 4096 -> "4K", 1536 -> "1536": the shortest exact spelling. */
static void fmt_size(char *buf, size_t cap, double v)
{
    static const char suffix[] = "KMGT";
    if (!(v >= 0) || v >= 18446744073709551616.0) {
        snprintf(buf, cap, "%g", v);
        return;
    }
    unsigned long long u = (unsigned long long)v;
    int k = 0;
    while (k < 4 && u && u % 1024 == 0) {
        u /= 1024;
        k++;
    }
    if (k)
        snprintf(buf, cap, "%llu%c", u, suffix[k - 1]);
    else
        snprintf(buf, cap, "%llu", u);
}

static void fmt_num(char *buf, size_t cap, double v, int integer)
{
    if (integer && fabs(v) < 9.0e15)
        snprintf(buf, cap, "%lld", (long long)v);
    else
        snprintf(buf, cap, "%g", v);
}

/* " in [lo, hi]" when the declaration has bounds, else "". */
static void fmt_bounds(char *buf, size_t cap, const sy_key_decl *d)
{
    buf[0] = '\0';
    if (d->min > d->max)
        return;
    char lo[32], hi[32];
    if (d->type == SY_KEY_SIZE) {
        fmt_size(lo, sizeof lo, d->min);
        fmt_size(hi, sizeof hi, d->max);
    } else {
        fmt_num(lo, sizeof lo, d->min, d->type == SY_KEY_INT);
        fmt_num(hi, sizeof hi, d->max, d->type == SY_KEY_INT);
    }
    snprintf(buf, cap, " in [%s, %s]", lo, hi);
}

static int in_bounds(const sy_key_decl *d, double v)
{
    return d->min > d->max || (v >= d->min && v <= d->max);
}

/* "one of a, b, c" from "a|b|c". */
static void fmt_choices(char *buf, size_t cap, const char *choices)
{
    size_t n = 0;
    n += (size_t)snprintf(buf, cap, "one of ");
    for (const char *p = choices; *p && n + 3 < cap; p++) {
        if (*p == '|') {
            buf[n++] = ',';
            buf[n++] = ' ';
        } else {
            buf[n++] = *p;
        }
    }
    buf[n < cap ? n : cap - 1] = '\0';
}

static int enum_has(const char *choices, const char *v)
{
    size_t vl = strlen(v);
    for (const char *p = choices; *p;) {
        const char *bar = strchr(p, '|');
        size_t l = bar ? (size_t)(bar - p) : strlen(p);
        if (l == vl && memcmp(p, v, l) == 0)
            return 1;
        if (!bar)
            break;
        p = bar + 1;
    }
    return 0;
}

int sy_key_check(const sy_key_decl *d, const char *value, sy_err *why)
{
    if (!d || !d->name)
        return sy_err_set(why, SY_ERR_INVALID, "no declaration to check against");
    char bounds[96], expect[300];
    fmt_bounds(bounds, sizeof bounds, d);
    const char *v = value ? value : "";
    int ok = 0;
    switch (d->type) {
    case SY_KEY_STRING:
        return SY_OK;
    case SY_KEY_INT: {
        snprintf(expect, sizeof expect, "an integer%s", bounds);
        char *end = NULL;
        errno = 0;
        long long x = *v ? strtoll(v, &end, 10) : 0;
        ok = *v && end && !*end && errno == 0 && !(*v == ' ' || *v == '\t') && in_bounds(d, (double)x);
        break;
    }
    case SY_KEY_FLOAT: {
        snprintf(expect, sizeof expect, "a number%s", bounds);
        char *end = NULL;
        errno = 0;
        double x = *v ? strtod(v, &end) : 0;
        ok = *v && end && !*end && errno != ERANGE && isfinite(x) && !(*v == ' ' || *v == '\t') && in_bounds(d, x);
        break;
    }
    case SY_KEY_BOOL:
        snprintf(expect, sizeof expect, "true, false, yes, no, on, off, 1 or 0 (lower case)");
        ok = strcmp(v, "true") == 0 || strcmp(v, "false") == 0 || strcmp(v, "yes") == 0 || strcmp(v, "no") == 0 ||
             strcmp(v, "on") == 0 || strcmp(v, "off") == 0 || strcmp(v, "1") == 0 || strcmp(v, "0") == 0;
        break;
    case SY_KEY_ENUM:
        if (!d->choices || !*d->choices)
            return sy_err_set(why, SY_ERR_INVALID, "\"%s\" is declared as a choice but lists no choices", d->name);
        fmt_choices(expect, sizeof expect, d->choices);
        ok = *v && enum_has(d->choices, v);
        break;
    case SY_KEY_SIZE: {
        snprintf(expect, sizeof expect, "a size in bytes, optionally with K, M, G or T (powers of 1024)%s", bounds);
        unsigned long long x = 0;
        ok = sy_parse_size(v, &x) == 0 && in_bounds(d, (double)x);
        break;
    }
    default:
        return sy_err_set(why, SY_ERR_INVALID, "\"%s\" has an unknown key type %d", d->name, (int)d->type);
    }
    if (ok)
        return SY_OK;
    return sy_err_set(why, SY_ERR_INVALID, "\"%s\" expects %s, found \"%s\"", d->name, expect, v);
}

static int is_reserved(const char *const *reserved, const char *key)
{
    for (size_t i = 0; reserved && reserved[i]; i++)
        if (strcmp(reserved[i], key) == 0)
            return 1;
    return 0;
}

int sy__decls_validate(const sy_key_decl *decls, size_t max, const char *const *reserved, sy_err *why)
{
    if (!decls)
        return SY_OK;
    for (size_t i = 0;; i++) {
        if (i >= max)
            return sy_err_set(why, SY_ERR_INVALID,
                              "its key table has more than %zu entries (missing the {NULL} terminator?)", max);
        const sy_key_decl *d = &decls[i];
        if (!d->name)
            return SY_OK;
        if (!*d->name)
            return sy_err_set(why, SY_ERR_INVALID, "its key table has an empty key name (entry %zu)", i);
        if (is_reserved(reserved, d->name))
            return sy_err_set(why, SY_ERR_INVALID, "it declares key \"%s\", which the core reserves", d->name);
        if ((unsigned)d->type > SY_KEY_SIZE)
            return sy_err_set(why, SY_ERR_INVALID, "key \"%s\" has an unknown type %d", d->name, (int)d->type);
        if (d->type == SY_KEY_ENUM && (!d->choices || !*d->choices))
            return sy_err_set(why, SY_ERR_INVALID, "key \"%s\" is a choice but lists no choices", d->name);
        sy_err e;
        if (d->default_value && sy_key_check(d, d->default_value, &e))
            return sy_err_set(why, SY_ERR_INVALID, "the default of key %s", e.msg);
        for (size_t j = 0; j < i; j++)
            if (strcmp(decls[j].name, d->name) == 0)
                return sy_err_set(why, SY_ERR_INVALID, "key \"%s\" is declared twice", d->name);
    }
}

/* Appends to a message buffer; remembers truncation. */
typedef struct msgbuf {
    char *b;
    size_t cap, len;
} msgbuf;

static void add(msgbuf *m, const char *fmt, ...) SY__PRINTF(2, 3);
static void add(msgbuf *m, const char *fmt, ...)
{
    if (m->len + 1 >= m->cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(m->b + m->len, m->cap - m->len, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    m->len += (size_t)n;
    if (m->len >= m->cap) {
        m->len = m->cap - 1;
        if (m->cap > 4)
            memcpy(m->b + m->cap - 4, "...", 4);
    }
}

/* "f.ini:12", "--set section.key=value" or "SWITCHYARD_SET section.key=value". */
static void where(char *buf, size_t cap, const sy_config_entry *e)
{
    if (e->line > 0)
        snprintf(buf, cap, "%s:%d", e->file, e->line);
    else if (sy_config_entry_from_env(e))
        snprintf(buf, cap, "%s %s.%s=%s", SY_CONFIG_ENV, e->section, e->key, e->value);
    else
        snprintf(buf, cap, "--set %s.%s=%s", e->section, e->key, e->value);
}

static int unknown_key(const sy_config_entry *e, const char *section, const sy_key_decl *decls,
                       const char *const *reserved, const char *owner, sy_err *err)
{
    if (!err)
        return SY_ERR_INVALID;
    char loc[300];
    where(loc, sizeof loc, e);
    msgbuf m = {err->msg, sizeof err->msg, 0};
    err->msg[0] = '\0';
    add(&m, "unknown key \"%s\" in [%s] at %s", e->key, section, loc);
    const char *best = NULL;
    int bestd = 3;
    size_t n = 0;
    for (const sy_key_decl *d = decls; d && d->name; d++, n++) {
        int dist = sy__edit_distance(e->key, d->name, 2);
        if (dist < bestd) {
            bestd = dist;
            best = d->name;
        }
    }
    if (best)
        add(&m, " (did you mean \"%s\"?)", best);
    if (owner)
        add(&m, "; %s accepts", owner);
    else
        add(&m, "; [%s] accepts", section);
    if (!n) {
        add(&m, " no keys");
        if (reserved && reserved[0])
            add(&m, " besides \"%s\"", reserved[0]);
        return SY_ERR_INVALID;
    }
    add(&m, ":");
    for (const sy_key_decl *d = decls; d->name; d++)
        add(&m, "%s %s", d == decls ? "" : ",", d->name);
    return SY_ERR_INVALID;
}

int sy__config_bind(const sy_config *c, const char *section, const sy_key_decl *decls, const char *const *reserved,
                    const char *owner, sy_kv **kv, size_t *n_kv, sy_err *err)
{
    if (!section || !kv || !n_kv)
        return sy_err_set(err, SY_ERR_INVALID, "sy_config_bind: section, kv and n_kv are required");
    *kv = NULL;
    *n_kv = 0;
    sy_err why;
    if (sy__decls_validate(decls, SY_MAX_DECLS, reserved, &why))
        return sy_err_set(err, SY_ERR_INVALID, "%s: bad key declarations for [%s]: %s", owner ? owner : "core",
                          section, why.msg);
    size_t nd = 0;
    while (decls && decls[nd].name)
        nd++;

    const sy_config_entry *const *ents = NULL;
    size_t ne = sy_config_section(c, section, &ents);
    for (size_t i = 0; i < ne; i++) {
        const sy_config_entry *e = ents[i];
        if (is_reserved(reserved, e->key))
            continue;
        const sy_key_decl *d = NULL;
        for (size_t j = 0; j < nd; j++)
            if (strcmp(decls[j].name, e->key) == 0)
                d = &decls[j];
        /* The environment's overrides are for whichever plugin declares them (device.matmul is cpu's, not cuda's). */
        if (!d && sy_config_entry_from_env(e))
            continue;
        if (!d)
            return unknown_key(e, section, decls, reserved, owner, err);
        if (sy_key_check(d, e->value, &why)) {
            char loc[300];
            where(loc, sizeof loc, e);
            return sy_err_set(err, SY_ERR_INVALID, "%s in %s", why.msg, loc);
        }
        if (!d->default_value && !*e->value) {
            char loc[300];
            where(loc, sizeof loc, e);
            return sy_err_set(err, SY_ERR_INVALID, "\"%s\" needs a value (%s), found an empty one in %s", d->name,
                              d->help ? d->help : "no help given", loc);
        }
    }

    sy_kv *out = malloc((nd ? nd : 1) * sizeof *out);
    if (!out)
        return sy_err_set(err, SY_ERR_NOMEM, "out of memory");
    for (size_t j = 0; j < nd; j++) {
        const sy_config_entry *e = sy_config_find(c, section, decls[j].name);
        const char *v = e ? e->value : decls[j].default_value;
        if (!v) {
            const char *path = sy__config_path(c);
            char in[4200];
            if (path)
                snprintf(in, sizeof in, "in %s", path);
            else
                snprintf(in, sizeof in, "in the configuration (no file loaded)");
            free(out);
            return sy_err_set(err, SY_ERR_INVALID,
                              "[%s] needs \"%s\" (%s), %s: add \"%s = ...\" under [%s] or pass --set %s.%s=...",
                              section, decls[j].name, decls[j].help ? decls[j].help : "no help given", in,
                              decls[j].name, section, section, decls[j].name);
        }
        out[j].key = decls[j].name;
        out[j].value = v;
    }
    *kv = out;
    *n_kv = nd;
    return SY_OK;
}

int sy_config_bind(const sy_config *c, const char *section, const sy_key_decl *decls, const char *const *reserved,
                   sy_kv **kv, size_t *n_kv, sy_err *err)
{
    return sy__config_bind(c, section, decls, reserved, NULL, kv, n_kv, err);
}
