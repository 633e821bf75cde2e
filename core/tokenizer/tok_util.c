/* Containers (buffers, hash maps) and JSON error helpers for the tokenizer. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

/* ------------------------------------------------------------ buffers */

int sy__buf_reserve(sy_tok_buf *b, size_t extra)
{
    /* +1 keeps room for a terminating NUL. */
    if (b->len + extra + 1 <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + extra + 1) {
        if (cap > SIZE_MAX / 2)
            return SY_ERR_NOMEM;
        cap *= 2;
    }
    char *p = realloc(b->p, cap);
    if (!p)
        return SY_ERR_NOMEM;
    b->p = p;
    b->cap = cap;
    return 0;
}

int sy__buf_put(sy_tok_buf *b, const void *s, size_t n)
{
    if (sy__buf_reserve(b, n))
        return SY_ERR_NOMEM;
    if (n)
        memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
    return 0;
}

int sy__buf_putc(sy_tok_buf *b, char c) { return sy__buf_put(b, &c, 1); }

void sy__buf_free(sy_tok_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

void *sy__grow(void *v, size_t *cap, size_t elem, size_t first)
{
    const size_t c = *cap ? *cap * 2 : first;
    void *p = realloc(v, c * elem);
    if (p)
        *cap = c;
    return p;
}

int sy__ivec_push(sy_tok_ivec *v, int32_t x)
{
    if (v->n == v->cap) {
        int32_t *p = sy__grow(v->v, &v->cap, sizeof *p, 16);
        if (!p)
            return SY_ERR_NOMEM;
        v->v = p;
    }
    v->v[v->n++] = x;
    return 0;
}

void sy__ivec_free(sy_tok_ivec *v)
{
    free(v->v);
    v->v = NULL;
    v->n = v->cap = 0;
}

int sy__spans_push(sy_tok_spans *s, size_t off, size_t len, bool match)
{
    if (s->n == s->cap) {
        sy_tok_span *p = sy__grow(s->v, &s->cap, sizeof *p, 16);
        if (!p)
            return SY_ERR_NOMEM;
        s->v = p;
    }
    s->v[s->n++] = (sy_tok_span){.off = off, .len = len, .id = -1, .match = match, .origin = false};
    return 0;
}

void sy__spans_free(sy_tok_spans *s)
{
    free(s->v);
    s->v = NULL;
    s->n = s->cap = 0;
}

void sy__pieces_free(sy_tok_pieces *p)
{
    sy__buf_free(&p->text);
    sy__spans_free(&p->sp);
}

int sy__ctx_init(sy_tok_ctx *c, sy_err *err)
{
    memset(c, 0, sizeof *c);
    /* One match block serves every pattern: only group 0 is read, and a
     * too-small ovector still reports the whole match. */
    c->md = pcre2_match_data_create(1, NULL);
    if (!c->md)
        return sy_err_set(err, SY_ERR_NOMEM, "tokenizer: out of memory for regex match data");
    return 0;
}

void sy__ctx_free(sy_tok_ctx *c)
{
    pcre2_match_data_free(c->md);
    sy__spans_free(&c->spans);
    sy__buf_free(&c->tmp);
    sy__pieces_free(&c->pa);
    sy__pieces_free(&c->pb);
    free(c->syms);
    free(c->heap);
    sy__buf_free(&c->word);
    memset(c, 0, sizeof *c);
}

/* ------------------------------------------------------------ hashing */

static uint32_t sy__hash(const char *s, size_t n)
{
    /* FNV-1a, then a final mix so that the low bits (the slot) depend on
     * every byte. */
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= 16777619u;
    }
    h ^= h >> 16;
    h *= 0x7feb352du;
    h ^= h >> 15;
    return h;
}

static uint32_t sy__pow2_at_least(size_t n)
{
    uint32_t c = 16;
    while (c < n && c < (1u << 31))
        c <<= 1;
    return c;
}

static int sy__smap_grow(sy_tok_strmap *m, size_t want)
{
    uint32_t cap = sy__pow2_at_least(want * 2);
    uint32_t *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return SY_ERR_NOMEM;
    for (size_t i = 0; i < m->n; i++) {
        uint32_t k = m->ents[i].hash & (cap - 1);
        while (slots[k])
            k = (k + 1) & (cap - 1);
        slots[k] = (uint32_t)i + 1;
    }
    free(m->slots);
    m->slots = slots;
    m->mask = cap - 1;
    return 0;
}

int sy__smap_init(sy_tok_strmap *m, const sy_tok_buf *arena, size_t expect)
{
    memset(m, 0, sizeof *m);
    m->arena = arena;
    m->cap = expect > 16 ? expect : 16;
    m->ents = malloc(m->cap * sizeof *m->ents);
    if (!m->ents)
        return SY_ERR_NOMEM;
    return sy__smap_grow(m, m->cap);
}

int sy__smap_put(sy_tok_strmap *m, uint32_t off, uint32_t len, int32_t val, int32_t *dup)
{
    const char *s = m->arena->p + off;
    uint32_t h = sy__hash(s, len);
    uint32_t k = h & m->mask;
    *dup = -1;
    while (m->slots[k]) {
        const struct sy_tok_sent *e = &m->ents[m->slots[k] - 1];
        if (e->hash == h && e->len == len && !memcmp(m->arena->p + e->off, s, len)) {
            *dup = e->val;
            return 0;
        }
        k = (k + 1) & m->mask;
    }
    if (m->n == m->cap) {
        struct sy_tok_sent *e = sy__grow(m->ents, &m->cap, sizeof *e, 16);
        if (!e)
            return SY_ERR_NOMEM;
        m->ents = e;
    }
    m->ents[m->n] = (struct sy_tok_sent){off, len, h, val};
    m->n++;
    if (m->n * 2 > (size_t)m->mask + 1)
        return sy__smap_grow(m, m->n);
    m->slots[k] = (uint32_t)m->n;
    return 0;
}

int32_t sy__smap_get(const sy_tok_strmap *m, const char *s, size_t len)
{
    if (!m->slots)
        return -1;
    uint32_t h = sy__hash(s, len);
    uint32_t k = h & m->mask;
    while (m->slots[k]) {
        const struct sy_tok_sent *e = &m->ents[m->slots[k] - 1];
        if (e->hash == h && e->len == len && !memcmp(m->arena->p + e->off, s, len))
            return e->val;
        k = (k + 1) & m->mask;
    }
    return -1;
}

void sy__smap_free(sy_tok_strmap *m)
{
    free(m->slots);
    free(m->ents);
    memset(m, 0, sizeof *m);
}

static uint32_t sy__hash64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (uint32_t)x;
}

#define SY__PMAP_EMPTY UINT64_MAX

int sy__pmap_init(sy_tok_pairmap *m, size_t expect)
{
    memset(m, 0, sizeof *m);
    uint32_t cap = sy__pow2_at_least(expect * 2 + 16);
    m->keys = malloc((size_t)cap * sizeof *m->keys);
    m->vals = malloc((size_t)cap * sizeof *m->vals);
    if (!m->keys || !m->vals)
        return SY_ERR_NOMEM;
    memset(m->keys, 0xff, (size_t)cap * sizeof *m->keys);
    m->mask = cap - 1;
    return 0;
}

static int sy__pmap_grow(sy_tok_pairmap *m)
{
    uint32_t cap = (m->mask + 1) * 2;
    uint64_t *keys = malloc((size_t)cap * sizeof *keys);
    uint64_t *vals = malloc((size_t)cap * sizeof *vals);
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return SY_ERR_NOMEM;
    }
    memset(keys, 0xff, (size_t)cap * sizeof *keys);
    for (uint32_t i = 0; i <= m->mask; i++) {
        if (m->keys[i] == SY__PMAP_EMPTY)
            continue;
        uint32_t k = sy__hash64(m->keys[i]) & (cap - 1);
        while (keys[k] != SY__PMAP_EMPTY)
            k = (k + 1) & (cap - 1);
        keys[k] = m->keys[i];
        vals[k] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->mask = cap - 1;
    return 0;
}

int sy__pmap_put(sy_tok_pairmap *m, int32_t a, int32_t b, int32_t rank, int32_t merged)
{
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    uint32_t k = sy__hash64(key) & m->mask;
    uint64_t val = ((uint64_t)(uint32_t)rank << 32) | (uint32_t)merged;
    while (m->keys[k] != SY__PMAP_EMPTY) {
        if (m->keys[k] == key) {
            m->vals[k] = val;
            return 1;
        }
        k = (k + 1) & m->mask;
    }
    m->keys[k] = key;
    m->vals[k] = val;
    m->n++;
    if (m->n * 2 > (size_t)m->mask + 1 && sy__pmap_grow(m))
        return SY_ERR_NOMEM;
    return 0;
}

bool sy__pmap_get(const sy_tok_pairmap *m, int32_t a, int32_t b, int32_t *rank, int32_t *merged)
{
    if (!m->keys)
        return false;
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    uint32_t k = sy__hash64(key) & m->mask;
    while (m->keys[k] != SY__PMAP_EMPTY) {
        if (m->keys[k] == key) {
            *rank = (int32_t)(m->vals[k] >> 32);
            *merged = (int32_t)(uint32_t)m->vals[k];
            return true;
        }
        k = (k + 1) & m->mask;
    }
    return false;
}

void sy__pmap_free(sy_tok_pairmap *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

/* ------------------------------------------------------------ JSON errors */

void sy__json_describe(const json_t *j, char *out, size_t cap)
{
    if (!j) {
        snprintf(out, cap, "nothing (missing)");
        return;
    }
    switch (json_typeof(j)) {
    case JSON_OBJECT: snprintf(out, cap, "an object"); break;
    case JSON_ARRAY: snprintf(out, cap, "an array of %zu", json_array_size(j)); break;
    case JSON_STRING: {
        const char *s = json_string_value(j);
        size_t n = json_string_length(j);
        snprintf(out, cap, "string \"%.*s%s\"", (int)(n > 60 ? 60 : n), s, n > 60 ? "..." : "");
        break;
    }
    case JSON_INTEGER: snprintf(out, cap, "integer %lld", (long long)json_integer_value(j)); break;
    case JSON_REAL: snprintf(out, cap, "number %g", json_real_value(j)); break;
    case JSON_TRUE: snprintf(out, cap, "true"); break;
    case JSON_FALSE: snprintf(out, cap, "false"); break;
    case JSON_NULL: snprintf(out, cap, "null"); break;
    }
}

int sy__json_err(sy_err *err, const sy_tok_where *w, const char *sub, const char *expected, const json_t *found)
{
    char what[128];
    sy__json_describe(found, what, sizeof what);
    return sy_err_set(err, SY_ERR_INVALID, "%s: %s%s: expected %s, found %s", w->file, w->path, sub ? sub : "",
                      expected, what);
}

void sy__path(char *out, size_t cap, const char *base, const char *fmt, ...)
{
    size_t n = (size_t)snprintf(out, cap, "%s", base);
    if (n >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out + n, cap - n, fmt, ap);
    va_end(ap);
}

int sy__json_bool(const json_t *obj, const char *key, bool dflt, bool *out, const sy_tok_where *w, sy_err *err)
{
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        *out = dflt;
        return 0;
    }
    if (!json_is_boolean(v)) {
        char sub[80];
        snprintf(sub, sizeof sub, ".%s", key);
        return sy__json_err(err, w, sub, "true or false", v);
    }
    *out = json_is_true(v);
    return 0;
}

int sy__json_str(const json_t *obj, const char *key, const char **out, size_t *len, const sy_tok_where *w, sy_err *err)
{
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        *out = NULL;
        if (len)
            *len = 0;
        return 0;
    }
    if (!json_is_string(v)) {
        char sub[80];
        snprintf(sub, sizeof sub, ".%s", key);
        return sy__json_err(err, w, sub, "a string", v);
    }
    *out = json_string_value(v);
    if (len)
        *len = json_string_length(v);
    return 0;
}

int sy__json_type(const json_t *j, const char *object_expected, const char *type_expected, const sy_tok_where *w,
                  const char **type, sy_err *err)
{
    if (object_expected && !json_is_object(j))
        return sy__json_err(err, w, "", object_expected, j);
    const json_t *t = json_object_get(j, "type");
    if (!json_is_string(t))
        return sy__json_err(err, w, ".type", type_expected, t);
    *type = json_string_value(t);
    return 0;
}

int sy__json_unknown_type(sy_err *err, const sy_tok_where *w, const char *what, const char *supported,
                          const char *type)
{
    return sy_err_set(err, SY_ERR_UNSUPPORTED, "%s: %s.type: expected a supported %s (%s), found \"%s\"", w->file,
                      w->path, what, supported, type);
}

int sy__json_each(const json_t *obj, const char *key, const char *expected, const sy_tok_where *w,
                  sy__json_each_fn each, void *ctx, sy_err *err)
{
    const json_t *arr = json_object_get(obj, key);
    if (!json_is_array(arr)) {
        char sub[80];
        snprintf(sub, sizeof sub, ".%s", key);
        return sy__json_err(err, w, sub, expected, arr);
    }
    for (size_t i = 0; i < json_array_size(arr); i++) {
        sy_tok_where at = *w;
        sy__path(at.path, sizeof at.path, w->path, ".%s[%zu]", key, i);
        int rc = each(ctx, json_array_get(arr, i), &at, err);
        if (rc)
            return rc;
    }
    return 0;
}
