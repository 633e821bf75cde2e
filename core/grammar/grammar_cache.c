/*
 * Compiled grammars by key, shared and reference-counted. The entries in
 * use are never evicted; unused ones go least recently used first once
 * there are more than max_entries. A key being compiled is marked, so a
 * second request for it waits for that compile instead of repeating it.
 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_impl.h"

typedef struct centry {
    char *key;
    size_t key_len;
    uint64_t hash;
    sy_grammar *g; /* NULL while building */
    size_t refs;
    struct centry *prev, *next; /* most recently used first */
} centry;

struct sy_grammar_cache {
    pthread_mutex_t mu;
    pthread_cond_t built;
    size_t max;
    size_t n;
    centry *head, *tail;
};

static uint64_t key_hash(const char *k, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)k[i]) * 1099511628211ull;
    return h;
}

sy_grammar_cache *sy_grammar_cache_new(size_t max_entries)
{
    sy_grammar_cache *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->built, NULL);
    c->max = max_entries ? max_entries : 1;
    return c;
}

static void unlink_entry(sy_grammar_cache *c, centry *e)
{
    if (e->prev)
        e->prev->next = e->next;
    else
        c->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        c->tail = e->prev;
    e->prev = e->next = NULL;
    c->n--;
}

static void push_front(sy_grammar_cache *c, centry *e)
{
    e->prev = NULL;
    e->next = c->head;
    if (c->head)
        c->head->prev = e;
    c->head = e;
    if (!c->tail)
        c->tail = e;
    c->n++;
}

static void entry_free(centry *e)
{
    sy_grammar_free(e->g);
    free(e->key);
    free(e);
}

void sy_grammar_cache_free(sy_grammar_cache *c)
{
    if (!c)
        return;
    while (c->head) {
        centry *e = c->head;
        unlink_entry(c, e);
        entry_free(e);
    }
    pthread_cond_destroy(&c->built);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

/* Drops unused entries from the cold end while over the bound (mu held). */
static void trim(sy_grammar_cache *c)
{
    centry *e = c->tail;
    while (c->n > c->max && e) {
        centry *prev = e->prev;
        if (e->refs == 0 && e->g) {
            unlink_entry(c, e);
            entry_free(e);
        }
        e = prev;
    }
}

static centry *find(sy_grammar_cache *c, const char *key, size_t len, uint64_t h)
{
    for (centry *e = c->head; e; e = e->next)
        if (e->hash == h && e->key_len == len && memcmp(e->key, key, len) == 0)
            return e;
    return NULL;
}

int sy_grammar_cache_get(sy_grammar_cache *c, const char *key, size_t key_len,
                         int (*build)(void *arg, sy_gsrc *src, sy_err *err), void *arg, const sy_grammar **out,
                         sy_err *err)
{
    if (!c || !key || !build || !out)
        return sy_err_set(err, SY_ERR_INVALID, "sy_grammar_cache_get: NULL %s",
                          !c ? "cache" : !key ? "key" : !build ? "build" : "out");
    *out = NULL;
    uint64_t h = key_hash(key, key_len);
    pthread_mutex_lock(&c->mu);
    centry *e;
    while ((e = find(c, key, key_len, h)) && !e->g)
        pthread_cond_wait(&c->built, &c->mu); /* someone compiles it: wait */
    if (e) {
        e->refs++;
        unlink_entry(c, e);
        push_front(c, e);
        pthread_mutex_unlock(&c->mu);
        *out = e->g;
        return SY_OK;
    }
    e = calloc(1, sizeof *e);
    char *k = malloc(key_len + 1);
    if (!e || !k) {
        pthread_mutex_unlock(&c->mu);
        free(e);
        free(k);
        return sy_err_set(err, SY_ERR_NOMEM, "out of memory caching a grammar");
    }
    memcpy(k, key, key_len);
    k[key_len] = 0;
    e->key = k;
    e->key_len = key_len;
    e->hash = h;
    push_front(c, e); /* marked as building: g is NULL */
    pthread_mutex_unlock(&c->mu);

    sy_gsrc *src = sy_gsrc_new();
    sy_grammar *g = NULL;
    int rc = src ? build(arg, src, err) : sy_err_set(err, SY_ERR_NOMEM, "out of memory");
    if (rc == SY_OK)
        rc = sy_grammar_compile(src, "root", &g, err);
    sy_gsrc_free(src);

    pthread_mutex_lock(&c->mu);
    if (rc) {
        unlink_entry(c, e);
        free(e->key);
        free(e);
    } else {
        e->g = g;
        e->refs = 1;
        trim(c);
    }
    pthread_cond_broadcast(&c->built);
    pthread_mutex_unlock(&c->mu);
    if (rc == SY_OK)
        *out = g;
    return rc;
}

void sy_grammar_cache_release(sy_grammar_cache *c, const sy_grammar *g)
{
    if (!c || !g)
        return;
    pthread_mutex_lock(&c->mu);
    for (centry *e = c->head; e; e = e->next) {
        if (e->g == g) {
            if (e->refs)
                e->refs--;
            break;
        }
    }
    trim(c);
    pthread_mutex_unlock(&c->mu);
}
