/*
 * Interned stack sets and their byte transitions, memoised. A trie walk
 * meets the same few sets again and again (after each character of a JSON
 * string the stacks are the same), so once a set has read a byte the next
 * set is an array index (a row of 256 per set that has been stepped)
 * instead of an expansion. Valid for the life of
 * one matcher: its stacks are hash-consed, so a set of ids means one thing.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_impl.h"

int gsets_init(gsets *s)
{
    memset(s, 0, sizeof *s);
    s->tab_cap = 256;
    s->tab = malloc(s->tab_cap * sizeof *s->tab);
    if (!s->tab) {
        gsets_free(s);
        return SY_ERR_NOMEM;
    }
    memset(s->tab, 0xff, s->tab_cap * sizeof *s->tab);
    int32_t none = 0;
    return gsets_intern(s, &none, 0) == 0 ? SY_OK : SY_ERR_NOMEM; /* id 0: the empty set */
}

void gsets_free(gsets *s)
{
    free(s->pool);
    free(s->off);
    free(s->len);
    free(s->flags);
    free(s->tab);
    for (size_t i = 0; s->next && i < s->n; i++)
        free(s->next[i]);
    free(s->next);
    gvec_free(&s->scratch);
    memset(s, 0, sizeof *s);
}

static uint64_t set_hash(const int32_t *v, size_t n)
{
    uint64_t h = 1469598103934665603ull ^ n;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint32_t)v[i]) * 1099511628211ull;
    return h ^ (h >> 31);
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

static bool same(const gsets *s, int32_t id, const int32_t *v, size_t n)
{
    return s->len[id] == n && (n == 0 || memcmp(s->pool + s->off[id], v, n * sizeof *v) == 0);
}

static bool rehash_sets(gsets *s)
{
    size_t cap = s->tab_cap * 2;
    int32_t *t = malloc(cap * sizeof *t);
    if (!t)
        return false;
    memset(t, 0xff, cap * sizeof *t);
    for (size_t id = 0; id < s->n; id++) {
        size_t h = set_hash(s->pool + s->off[id], s->len[id]) & (cap - 1);
        while (t[h] >= 0)
            h = (h + 1) & (cap - 1);
        t[h] = (int32_t)id;
    }
    free(s->tab);
    s->tab = t;
    s->tab_cap = cap;
    return true;
}

int32_t gsets_intern(gsets *s, int32_t *v, size_t n)
{
    if (n > 1)
        qsort(v, n, sizeof *v, cmp_i32);
    size_t h = set_hash(v, n) & (s->tab_cap - 1);
    for (int32_t id; (id = s->tab[h]) >= 0; h = (h + 1) & (s->tab_cap - 1))
        if (same(s, id, v, n))
            return id;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        uint32_t *off = realloc(s->off, cap * sizeof *off);
        if (off)
            s->off = off;
        uint32_t *len = realloc(s->len, cap * sizeof *len);
        if (len)
            s->len = len;
        uint8_t *fl = realloc(s->flags, cap);
        if (fl)
            s->flags = fl;
        int32_t **nx = realloc(s->next, cap * sizeof *nx);
        if (nx)
            s->next = nx;
        if (!off || !len || !fl || !nx)
            return -1;
        s->cap = cap;
    }
    if (s->pool_n + n > s->pool_cap) {
        size_t cap = s->pool_cap ? s->pool_cap * 2 : 1024;
        while (cap < s->pool_n + n)
            cap *= 2;
        if (cap > UINT32_MAX)
            return -1;
        int32_t *p = realloc(s->pool, cap * sizeof *p);
        if (!p)
            return -1;
        s->pool = p;
        s->pool_cap = cap;
    }
    int32_t id = (int32_t)s->n++;
    s->off[id] = (uint32_t)s->pool_n;
    s->len[id] = (uint32_t)n;
    if (n)
        memcpy(s->pool + s->pool_n, v, n * sizeof *v);
    s->pool_n += n;
    uint8_t f = 0;
    for (size_t i = 0; i < n; i++)
        f |= v[i] >= 0 ? GSET_EXACT : v[i] == GS_ESCAPE ? GSET_UNCERTAIN : v[i] == GS_EMPTY ? GSET_END : 0;
    s->flags[id] = f;
    s->next[id] = NULL;
    s->tab[h] = id;
    if (s->n * 2 > s->tab_cap && !rehash_sets(s))
        return -1;
    return id;
}

int32_t gsets_step(gsets *s, const sy_grammar *g, garena *a, int32_t set, uint8_t b, bool local)
{
    if (set == 0)
        return 0;
    int32_t *row = s->next[set];
    if (row && row[b] != -1)
        return row[b];
    if (!row) {
        row = malloc(256 * sizeof *row);
        if (!row)
            return -1;
        memset(row, 0xff, 256 * sizeof *row);
        s->next[set] = row;
    }
    if (!gadvance(g, a, s->pool + s->off[set], s->len[set], b, local, &s->scratch))
        return -1;
    int32_t next = gsets_intern(s, s->scratch.v, s->scratch.n);
    if (next < 0)
        return -1;
    s->next[set][b] = next;
    return next;
}
