/*
 * The recogniser: a set of pushdown stacks, as llama.cpp's grammar stacks,
 * over bytes. Stacks are persistent linked frames, hash-consed in an arena
 * per matcher, so equal stacks are one id: sets deduplicate by id, and
 * saving a state for the mask walk is keeping a list of ids.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_impl.h"

/* ------------------------------------------------------------ arena */

int garena_init(garena *a)
{
    memset(a, 0, sizeof *a);
    a->cap = 1024;
    a->nodes = malloc(a->cap * sizeof *a->nodes);
    a->tab_cap = 2048;
    a->tab = malloc(a->tab_cap * sizeof *a->tab);
    a->seen_cap = a->cap;
    a->seen = calloc(a->seen_cap, sizeof *a->seen);
    if (!a->nodes || !a->tab || !a->seen) {
        garena_free(a);
        return SY_ERR_NOMEM;
    }
    memset(a->tab, 0xff, a->tab_cap * sizeof *a->tab);
    return SY_OK;
}

void garena_free(garena *a)
{
    free(a->nodes);
    free(a->tab);
    free(a->seen);
    memset(a, 0, sizeof *a);
}

static inline size_t node_hash(int32_t pos, int32_t parent)
{
    uint64_t h = (uint64_t)(uint32_t)pos * 0x9E3779B97F4A7C15ull ^ (uint64_t)(uint32_t)parent * 0xC2B2AE3D27D4EB4Full;
    return (size_t)(h ^ (h >> 29));
}

static bool arena_rehash(garena *a)
{
    size_t cap = a->tab_cap * 2;
    int32_t *t = malloc(cap * sizeof *t);
    if (!t)
        return false;
    memset(t, 0xff, cap * sizeof *t);
    for (size_t i = 0; i < a->n; i++) {
        size_t h = node_hash(a->nodes[i].pos, a->nodes[i].parent) & (cap - 1);
        while (t[h] >= 0)
            h = (h + 1) & (cap - 1);
        t[h] = (int32_t)i;
    }
    free(a->tab);
    a->tab = t;
    a->tab_cap = cap;
    return true;
}

/* The id of stack (pos, parent), made when new; -1 (oom set) on failure. */
static int32_t intern(garena *a, int32_t pos, int32_t parent)
{
    size_t h = node_hash(pos, parent) & (a->tab_cap - 1);
    for (;;) {
        int32_t i = a->tab[h];
        if (i < 0)
            break;
        if (a->nodes[i].pos == pos && a->nodes[i].parent == parent)
            return i;
        h = (h + 1) & (a->tab_cap - 1);
    }
    if (a->n >= INT32_MAX - 1) {
        a->oom = true;
        return -1;
    }
    if (a->n == a->cap) {
        size_t cap = a->cap * 2;
        gnode_s *nodes = realloc(a->nodes, cap * sizeof *nodes);
        uint32_t *seen = nodes ? realloc(a->seen, cap * sizeof *seen) : NULL;
        if (nodes)
            a->nodes = nodes;
        if (!seen) {
            a->oom = true;
            return -1;
        }
        memset(seen + a->seen_cap, 0, (cap - a->seen_cap) * sizeof *seen);
        a->seen = seen;
        a->seen_cap = cap;
        a->cap = cap;
    }
    int32_t id = (int32_t)a->n++;
    a->nodes[id] = (gnode_s){pos, parent};
    a->tab[h] = id;
    if (a->n * 2 > a->tab_cap && !arena_rehash(a)) {
        a->oom = true;
        return -1;
    }
    return id;
}

void garena_begin_set(garena *a)
{
    a->too_many = false;
    if (++a->stamp == 0) { /* wrapped: old stamps could collide */
        memset(a->seen, 0, a->seen_cap * sizeof *a->seen);
        memset(a->seen_special, 0, sizeof a->seen_special);
        a->stamp = 1;
    }
}

/* True the first time x is seen in this round. */
static inline bool first_sight(garena *a, int32_t x)
{
    uint32_t *s = x >= 0 ? &a->seen[x] : &a->seen_special[-x - 1];
    if (*s == a->stamp)
        return false;
    *s = a->stamp;
    return true;
}

void gvec_free(gvec *v)
{
    free(v->v);
    memset(v, 0, sizeof *v);
}

bool gvec_push(gvec *v, int32_t x)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 16;
        int32_t *p = realloc(v->v, cap * sizeof *p);
        if (!p)
            return false;
        v->v = p;
        v->cap = cap;
    }
    v->v[v->n++] = x;
    return true;
}

/* ------------------------------------------------------------ expansion */

/*
 * Expands raw stacks until every top is a byte element (or the stack is
 * empty). The frames pushed are return positions: a call whose next
 * element ends the alternative pushes none (a tail call), as in llama.cpp.
 * Raw stacks are interned too, and each is expanded once per round, which
 * ends cycles of calls that read nothing.
 */
bool gexpand(const sy_grammar *g, garena *a, int32_t pos, int32_t parent, bool local, gvec *out)
{
    int32_t work_buf[64];
    gvec work = {work_buf, 0, 64};
    bool heap = false, ok = true;
    int32_t x = intern(a, pos, parent);
    if (x < 0)
        return false;
#define PUSH_WORK(id)                                                                                   \
    do {                                                                                                \
        if (work.n == work.cap) {                                                                       \
            size_t cap_ = work.cap * 2;                                                                 \
            int32_t *p_ = heap ? realloc(work.v, cap_ * sizeof *p_) : malloc(cap_ * sizeof *p_);        \
            if (!p_) {                                                                                  \
                ok = false;                                                                             \
                goto done;                                                                              \
            }                                                                                           \
            if (!heap)                                                                                  \
                memcpy(p_, work_buf, sizeof work_buf);                                                  \
            work.v = p_;                                                                                \
            work.cap = cap_;                                                                            \
            heap = true;                                                                                \
        }                                                                                               \
        work.v[work.n++] = (id);                                                                        \
    } while (0)
    PUSH_WORK(x);
    while (work.n) {
        x = work.v[--work.n];
        if (!first_sight(a, x))
            continue;
        if (x < 0) { /* GS_EMPTY or GS_ESCAPE reached */
            if (!gvec_push(out, x)) {
                ok = false;
                goto done;
            }
            continue;
        }
        int32_t p = a->nodes[x].pos, below = a->nodes[x].parent;
        if (p < 0) { /* an escape node, reached again */
            if (!gvec_push(out, x)) {
                ok = false;
                goto done;
            }
            continue;
        }
        const gelem *e = &g->el[p];
        if (e->kind == GE_BYTES) {
            if (!gvec_push(out, x)) {
                ok = false;
                goto done;
            }
        } else if (e->kind == GE_REF) {
            int32_t base = g->el[p + 1].kind == GE_END ? below : intern(a, p + 1, below);
            if (base == -1 && a->oom) {
                ok = false;
                goto done;
            }
            int32_t r = e->arg;
            for (int32_t ai = g->alt_off[r + 1] - 1; ai >= g->alt_off[r]; ai--) {
                int32_t y = intern(a, g->alt[ai], base);
                if (y < 0) {
                    ok = false;
                    goto done;
                }
                PUSH_WORK(y);
            }
        } else { /* GE_END: return to the frame below */
            if (below >= 0) {
                PUSH_WORK(below);
            } else if (below == GS_EMPTY) {
                PUSH_WORK(GS_EMPTY);
            } else { /* GS_UNKNOWN: only the cache walks (local) get here */
                int32_t c = local ? g->cont[e->arg] : -1;
                int32_t y = intern(a, c >= 0 ? c : GESC_POS(e->arg), GS_UNKNOWN);
                if (y < 0) {
                    ok = false;
                    goto done;
                }
                if (c >= 0) {
                    PUSH_WORK(y);
                } else if (first_sight(a, y) && !gvec_push(out, y)) {
                    ok = false;
                    goto done;
                }
            }
        }
    }
#undef PUSH_WORK
done:
    if (heap)
        free(work.v);
    if (ok && out->n > GSTACKS_MAX) {
        a->too_many = true;
        ok = false;
    }
    return ok;
}

/* One stack of a set on byte b, appending what follows to out. */
static inline bool step(const sy_grammar *g, garena *a, int32_t x, uint8_t b, bool local, gvec *out)
{
    if (x < 0) {
        /* GS_EMPTY reads nothing; GS_ESCAPE (cache walks) stays uncertain */
        if (x == GS_ESCAPE && first_sight(a, GS_ESCAPE))
            return gvec_push(out, GS_ESCAPE);
        return true;
    }
    int32_t p = a->nodes[x].pos;
    if (p < 0) {
        if (gset_has(g->follow[GESC_RULE(p)], b) && first_sight(a, GS_ESCAPE))
            return gvec_push(out, GS_ESCAPE);
        return true;
    }
    if (!gset_has(g->sets[g->el[p].arg], b))
        return true;
    return gexpand(g, a, p + 1, a->nodes[x].parent, local, out);
}

bool gadvance(const sy_grammar *g, garena *a, const int32_t *in, size_t n, uint8_t b, bool local, gvec *out)
{
    out->n = 0;
    garena_begin_set(a);
    for (size_t i = 0; i < n; i++)
        if (!step(g, a, in[i], b, local, out))
            return false;
    return true;
}

/* ------------------------------------------------------------ matcher */

/* A long output leaves many dead stacks and sets behind; past these the
 * matcher starts a fresh arena holding only the current stacks. */
#define COMPACT_NODES (1u << 20)
#define COMPACT_SETS (1u << 14)

int gmatcher_compact(sy_gmatcher *m, bool force)
{
    if (!force && m->a.n < m->compact_nodes && m->sets.n < m->compact_sets)
        return SY_OK;
    garena a2;
    gsets s2;
    int32_t *map = malloc((m->a.n + 1) * sizeof *map);
    gvec chain = {0}, cur2 = {0};
    bool ok = map && garena_init(&a2) == SY_OK;
    if (ok && gsets_init(&s2) != SY_OK) {
        garena_free(&a2);
        ok = false;
    }
    if (!ok) {
        free(map);
        return SY_ERR_NOMEM;
    }
    for (size_t i = 0; i < m->a.n; i++)
        map[i] = INT32_MIN;
    for (size_t i = 0; i < m->cur.n && ok; i++) {
        int32_t x = m->cur.v[i];
        chain.n = 0;
        while (x >= 0 && map[x] == INT32_MIN && ok) {
            ok = gvec_push(&chain, x);
            x = m->a.nodes[x].parent;
        }
        int32_t below = x >= 0 ? map[x] : x;
        for (size_t k = chain.n; k-- > 0 && ok;) {
            int32_t y = chain.v[k];
            int32_t id = intern(&a2, m->a.nodes[y].pos, below);
            ok = id >= 0;
            map[y] = below = id;
        }
        ok = ok && gvec_push(&cur2, m->cur.v[i] >= 0 ? map[m->cur.v[i]] : m->cur.v[i]);
    }
    free(map);
    gvec_free(&chain);
    if (!ok) {
        garena_free(&a2);
        gsets_free(&s2);
        gvec_free(&cur2);
        return SY_ERR_NOMEM;
    }
    garena_free(&m->a);
    gsets_free(&m->sets);
    gvec_free(&m->cur);
    m->a = a2;
    m->sets = s2;
    m->cur = cur2;
    for (int k = 0; k < GMASK_MEMO; k++)
        m->memo[k].used = 0, m->memo[k].set = -1; /* set ids of the old arena */
    return SY_OK;
}

static int matcher_start(sy_gmatcher *m, sy_err *err)
{
    const sy_grammar *g = m->g;
    if (garena_init(&m->a) || gsets_init(&m->sets))
        return sy_err_set(err, SY_ERR_NOMEM, "out of memory creating a grammar matcher");
    garena_begin_set(&m->a);
    /* the root as a call: every alternative over the empty stack */
    for (int32_t ai = g->alt_off[g->root]; ai < g->alt_off[g->root + 1]; ai++)
        if (!gexpand(g, &m->a, g->alt[ai], GS_EMPTY, false, &m->cur))
            return m->a.too_many ? gmatcher_too_ambiguous(m, "the start", err)
                                 : sy_err_set(err, SY_ERR_NOMEM, "out of memory creating a grammar matcher");
    return SY_OK;
}

static void matcher_release(sy_gmatcher *m)
{
    garena_free(&m->a);
    gvec_free(&m->cur);
    gvec_free(&m->tmp);
    gsets_free(&m->sets);
    free(m->walk);
    for (int k = 0; k < GMASK_MEMO; k++)
        free(m->memo[k].mask);
    free(m->ent);
}

int sy_gmatcher_new(const sy_grammar *g, const sy_gvocab *v, sy_gmatcher **out, sy_err *err)
{
    if (!g || !out)
        return sy_err_set(err, SY_ERR_INVALID, "sy_gmatcher_new: NULL %s", g ? "out" : "grammar");
    *out = NULL;
    sy_gmatcher *m = calloc(1, sizeof *m);
    if (!m)
        return sy_err_set(err, SY_ERR_NOMEM, "out of memory creating a grammar matcher");
    m->g = g;
    m->v = v;
    m->compact_nodes = COMPACT_NODES;
    m->compact_sets = COMPACT_SETS;
    for (int k = 0; k < GMASK_MEMO; k++)
        m->memo[k].set = -1;
    int rc = matcher_start(m, err);
    if (rc) {
        matcher_release(m);
        free(m);
        return rc;
    }
    *out = m;
    return SY_OK;
}

void sy_gmatcher_free(sy_gmatcher *m)
{
    if (!m)
        return;
    matcher_release(m);
    free(m);
}

/* Advances cur by n bytes; on failure cur is unchanged. */
bool gmatcher_feed(sy_gmatcher *m, const char *s, size_t n)
{
    if (m->ended)
        return n == 0;
    if (n == 0)
        return true;
    gvec a = {0}, b = {0};
    const int32_t *in = m->cur.v;
    size_t in_n = m->cur.n;
    for (size_t i = 0; i < n; i++) {
        gvec *o = (i & 1) ? &b : &a;
        if (!gadvance(m->g, &m->a, in, in_n, (uint8_t)s[i], false, o) || o->n == 0) {
            gvec_free(&a);
            gvec_free(&b);
            return false;
        }
        in = o->v;
        in_n = o->n;
    }
    gvec *last = ((n - 1) & 1) ? &b : &a;
    m->fed += n;
    gvec_free(&m->cur);
    m->cur = *last;
    gvec_free(((n - 1) & 1) ? &a : &b);
    return true;
}

int gmatcher_too_ambiguous(const sy_gmatcher *m, const char *what, sy_err *err)
{
    return sy_err_set(err, SY_ERR_INVALID,
                      "the grammar is too ambiguous: at %s, after %zu bytes of output, more than %u parse stacks "
                      "would be live at once (a rule that can end in several ways nested inside itself, as "
                      "x ::= \"a\" x \"b\" | \"a\" x \"c\" | \"\", keeps every combination open); rewrite it so "
                      "that fewer alternatives stay open at once",
                      what, m->fed, (unsigned)GSTACKS_MAX);
}

bool sy_gmatcher_accept_bytes(sy_gmatcher *m, const char *s, size_t n)
{
    return m && (s || n == 0) && gmatcher_feed(m, s, n);
}

bool sy_gmatcher_can_end(const sy_gmatcher *m)
{
    if (!m || m->ended)
        return m && m->ended;
    for (size_t i = 0; i < m->cur.n; i++)
        if (m->cur.v[i] == GS_EMPTY)
            return true;
    return false;
}

bool sy_gmatcher_done(const sy_gmatcher *m)
{
    if (!m)
        return false;
    if (m->ended)
        return true;
    return m->cur.n == 1 && m->cur.v[0] == GS_EMPTY;
}

bool sy_grammar_accepts(const sy_grammar *g, const char *text, size_t n)
{
    sy_gmatcher *m;
    if (!g || sy_gmatcher_new(g, NULL, &m, NULL))
        return false;
    bool ok = gmatcher_feed(m, text, n) && sy_gmatcher_can_end(m);
    sy_gmatcher_free(m);
    return ok;
}

bool gmatcher_save(const sy_gmatcher *m, gsaved *s)
{
    memset(s, 0, sizeof *s);
    s->ended = m->ended;
    s->fed = m->fed;
    for (size_t i = 0; i < m->cur.n; i++)
        if (!gvec_push(&s->cur, m->cur.v[i])) {
            gvec_free(&s->cur);
            return false;
        }
    return true;
}

void gmatcher_restore(sy_gmatcher *m, gsaved *s)
{
    gvec_free(&m->cur);
    m->cur = s->cur;
    m->ended = s->ended;
    m->fed = s->fed;
    memset(s, 0, sizeof *s);
}
