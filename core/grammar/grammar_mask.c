/*
 * Token masks. Walking the whole vocabulary trie with the matcher for
 * every token would cost milliseconds, so, as xgrammar does, the tokens
 * are sorted once per (grammar, vocabulary, stack-top position) into
 * those accepted whatever lies below the top rule, those rejected
 * whatever lies below, and the uncertain rest, which reach past the end of
 * a rule whose caller is not known statically. A mask is then the OR of
 * the accepted sets of the current stack tops plus a walk of only the
 * uncertain tokens with the real stacks. The walk that sorts them follows
 * a rule's single return position when it has one (grammar_compile.c), so
 * a JSON string's characters stay inside one walk, and cuts uncertain
 * tokens whose next byte cannot follow the rule at all.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_impl.h"

typedef struct gmask_entry {
    uint32_t *bits;  /* accepted, dense (n_words), or NULL */
    int32_t *acc;    /* accepted, sparse, when bits is NULL */
    size_t n_acc;
    int32_t *unc;    /* uncertain, in byte order (the trie's preorder) */
    size_t n_unc;
} gmask_entry;

typedef struct gmask_cache {
    uint64_t fp;
    int32_t n_vocab;
    gmask_entry **ent;     /* per element position, NULL until computed */
    int32_t **lit_special; /* per literal: special token ids with its exact text */
    size_t *n_lit_special;
    size_t n_lits;
    struct gmask_cache *next;
} gmask_cache;

static void entry_free(gmask_entry *e)
{
    if (!e)
        return;
    free(e->bits);
    free(e->acc);
    free(e->unc);
    free(e);
}

static void cache_free(gmask_cache *c, size_t n_el)
{
    for (size_t i = 0; c->ent && i < n_el; i++)
        entry_free(c->ent[i]);
    for (size_t i = 0; c->lit_special && i < c->n_lits; i++)
        free(c->lit_special[i]);
    free(c->ent);
    free(c->lit_special);
    free(c->n_lit_special);
    free(c);
}

void gmask_caches_free(sy_grammar *g)
{
    while (g->caches) {
        gmask_cache *c = g->caches;
        g->caches = c->next;
        cache_free(c, g->n_el);
    }
}

static gmask_cache *cache_new(const sy_grammar *g, const sy_gvocab *v)
{
    gmask_cache *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->fp = v->fingerprint;
    c->n_vocab = v->n_vocab;
    c->n_lits = g->n_lits;
    c->ent = calloc(g->n_el + 1, sizeof *c->ent);
    c->lit_special = calloc(g->n_lits + 1, sizeof *c->lit_special);
    c->n_lit_special = calloc(g->n_lits + 1, sizeof *c->n_lit_special);
    if (!c->ent || !c->lit_special || !c->n_lit_special) {
        cache_free(c, g->n_el);
        return NULL;
    }
    for (size_t l = 0; l < g->n_lits && v->n_special; l++) {
        for (size_t k = 0; k < v->n_special; k++) {
            int32_t t = v->special[k];
            if (v->lens[t] != g->lit_len[l] || memcmp(v->bytes[t], g->lit_text[l], v->lens[t]) != 0)
                continue;
            int32_t *p = realloc(c->lit_special[l], (c->n_lit_special[l] + 1) * sizeof *p);
            if (!p) {
                cache_free(c, g->n_el);
                return NULL;
            }
            c->lit_special[l] = p;
            p[c->n_lit_special[l]++] = t;
        }
    }
    return c;
}

/* The grammar's cache for m's vocabulary, made on first use. */
static gmask_cache *get_cache(sy_gmatcher *m)
{
    if (m->cache)
        return m->cache;
    sy_grammar *g = (sy_grammar *)m->g; /* the caches are the one mutable part, under g->mu */
    pthread_mutex_lock(&g->mu);
    gmask_cache *c = g->caches;
    while (c && (c->fp != m->v->fingerprint || c->n_vocab != m->v->n_vocab))
        c = c->next;
    if (!c) {
        c = cache_new(g, m->v);
        if (c) {
            c->next = g->caches;
            g->caches = c;
        }
    }
    pthread_mutex_unlock(&g->mu);
    m->cache = c;
    if (c && !m->ent)
        m->ent = calloc(g->n_el + 1, sizeof *m->ent);
    return m->ent ? c : NULL;
}

static bool list_push(int32_t **v, size_t *n, size_t *cap, int32_t x)
{
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        int32_t *p = realloc(*v, nc * sizeof *p);
        if (!p)
            return false;
        *v = p;
        *cap = nc;
    }
    (*v)[(*n)++] = x;
    return true;
}

static bool walk_reserve(sy_gmatcher *m, size_t depth)
{
    if (depth + 2 <= m->walk_cap)
        return true;
    size_t cap = depth + 2;
    int32_t *p = realloc(m->walk, cap * sizeof *p);
    if (!p)
        return false;
    m->walk = p;
    m->walk_cap = cap;
    return true;
}

/* Sorts the vocabulary for stack-top position p (see the head). */
static gmask_entry *compute_entry(sy_gmatcher *m, int32_t p)
{
    const sy_grammar *g = m->g;
    const sy_gvocab *v = m->v;
    gmask_entry *e = calloc(1, sizeof *e);
    int32_t *acc = NULL;
    size_t n_acc = 0, cap_acc = 0, cap_unc = 0;
    if (!e || !walk_reserve(m, v->max_depth))
        goto nomem;
    int32_t *st = m->walk;
    garena_begin_set(&m->a);
    gvec *tmp = &m->tmp;
    tmp->n = 0;
    if (!gexpand(g, &m->a, p, GS_UNKNOWN, true, tmp) || (st[0] = gsets_intern(&m->sets, tmp->v, tmp->n)) < 0)
        goto nomem;
    for (size_t i = 1; i < v->n_nodes;) {
        size_t d = v->tr_depth[i];
        int32_t set = gsets_step(&m->sets, g, &m->a, st[d - 1], v->tr_byte[i], true);
        if (set < 0)
            goto nomem;
        st[d] = set;
        uint8_t f = m->sets.flags[set];
        bool exact = f & GSET_EXACT, unc = f & GSET_UNCERTAIN;
        if (!exact && !unc) {
            i = (size_t)v->tr_end[i];
            continue;
        }
        for (int32_t t = v->tr_tok[i]; t >= 0; t = v->tok_next[t]) {
            bool ok = exact ? list_push(&acc, &n_acc, &cap_acc, t) : list_push(&e->unc, &e->n_unc, &cap_unc, t);
            if (!ok)
                goto nomem;
        }
        if (!exact) { /* only uncertain paths go on: the whole subtree is uncertain */
            size_t end = (size_t)v->tr_end[i];
            for (size_t j = i + 1; j < end; j++)
                for (int32_t t = v->tr_tok[j]; t >= 0; t = v->tok_next[t])
                    if (!list_push(&e->unc, &e->n_unc, &cap_unc, t))
                        goto nomem;
            i = end;
            continue;
        }
        i++;
    }
    if (n_acc * 32 >= (size_t)v->n_vocab) {
        e->bits = calloc(sy_gmask_words(v), sizeof *e->bits);
        if (!e->bits)
            goto nomem;
        for (size_t k = 0; k < n_acc; k++)
            e->bits[acc[k] >> 5] |= 1u << (acc[k] & 31);
        free(acc);
    } else {
        e->acc = acc;
        e->n_acc = n_acc;
    }
    return e;
nomem:
    free(acc);
    entry_free(e);
    return NULL;
}

static const gmask_entry *get_entry(sy_gmatcher *m, gmask_cache *c, int32_t p)
{
    if (m->ent[p])
        return m->ent[p];
    sy_grammar *g = (sy_grammar *)m->g;
    pthread_mutex_lock(&g->mu);
    gmask_entry *e = c->ent[p];
    pthread_mutex_unlock(&g->mu);
    if (!e) {
        gmask_entry *mine = compute_entry(m, p);
        if (!mine)
            return NULL;
        pthread_mutex_lock(&g->mu);
        if (c->ent[p]) { /* another matcher got there first */
            e = c->ent[p];
            entry_free(mine);
        } else {
            e = c->ent[p] = mine;
        }
        pthread_mutex_unlock(&g->mu);
    }
    m->ent[p] = e;
    return e;
}

/* Sets the bits of the uncertain tokens that stack x accepts, walking
 * them in byte order so shared prefixes are read once. */
static bool check_uncertain(sy_gmatcher *m, int32_t x, const int32_t *list, size_t n, uint32_t *mask)
{
    const sy_gvocab *v = m->v;
    if (!n)
        return true;
    if (!walk_reserve(m, v->max_depth))
        return false;
    int32_t *st = m->walk;
    int32_t one = x;
    if ((st[0] = gsets_intern(&m->sets, &one, 1)) < 0)
        return false;
    size_t valid = 1;         /* st[0 .. valid-1] are prefixes of prev */
    size_t fail = (size_t)-1; /* prev's prefix of this length is rejected */
    const char *prev = NULL;
    size_t prev_len = 0;
    for (size_t k = 0; k < n; k++) {
        int32_t t = list[k];
        if ((mask[t >> 5] >> (t & 31)) & 1u)
            continue;
        const char *s = v->bytes[t];
        size_t len = v->lens[t], l = 0;
        size_t lim = len < prev_len ? len : prev_len;
        while (prev && l < lim && s[l] == prev[l])
            l++;
        if (fail <= l)
            continue; /* shares prev's rejected prefix */
        size_t d = l < valid - 1 ? l : valid - 1;
        prev = s;
        prev_len = len;
        fail = (size_t)-1;
        bool alive = true;
        for (; d < len; d++) {
            int32_t set = gsets_step(&m->sets, m->g, &m->a, st[d], (uint8_t)s[d], false);
            if (set < 0)
                return false;
            st[d + 1] = set;
            if (set == 0) {
                fail = d + 1;
                valid = d + 1;
                alive = false;
                break;
            }
        }
        if (alive) {
            valid = len + 1;
            mask[t >> 5] |= 1u << (t & 31);
        }
    }
    return true;
}

/* A printable excerpt of bytes, for errors. */
static void excerpt(const char *s, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 8 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            o += (size_t)snprintf(out + o, cap - o, "\\%c", c);
        else if (c >= 0x20 && c < 0x7F)
            out[o++] = (char)c;
        else
            o += (size_t)snprintf(out + o, cap - o, "\\x%02X", c);
    }
    out[o] = 0;
}

/* What bytes the current stacks could read next, for the stuck error. */
static void expected_bytes(const sy_gmatcher *m, char *out, size_t cap)
{
    uint32_t u[8] = {0};
    for (size_t i = 0; i < m->cur.n; i++) {
        int32_t x = m->cur.v[i];
        if (x < 0)
            continue;
        const uint32_t *s = m->g->sets[m->g->el[m->a.nodes[x].pos].arg];
        for (int k = 0; k < 8; k++)
            u[k] |= s[k];
    }
    char bytes[160];
    size_t o = 0;
    for (unsigned b = 0; b < 256 && o < 40; b++)
        if (gset_has(u, (uint8_t)b))
            bytes[o++] = (char)b;
    excerpt(bytes, o, out, cap);
}

/* A walk of the mask stopped: the stacks passed GSTACKS_MAX, or memory ran out. */
static int mask_failed(const sy_gmatcher *m, sy_err *err)
{
    if (m->a.too_many)
        return gmatcher_too_ambiguous(m, "the token mask", err);
    return sy_err_set(err, SY_ERR_NOMEM, "out of memory computing a token mask");
}

int sy_gmatcher_fill_mask(sy_gmatcher *m, uint32_t *mask, sy_err *err)
{
    if (!m || !mask)
        return sy_err_set(err, SY_ERR_INVALID, "sy_gmatcher_fill_mask: NULL %s", m ? "mask" : "matcher");
    if (!m->v)
        return sy_err_set(err, SY_ERR_INVALID, "sy_gmatcher_fill_mask: the matcher has no vocabulary");
    const sy_gvocab *v = m->v;
    size_t words = sy_gmask_words(v);
    memset(mask, 0, words * sizeof *mask);
    if (m->ended)
        return sy_err_set(err, SY_ERR_INVALID, "the constrained output has ended (EOS accepted): no token may follow");
    gmask_cache *c = get_cache(m);
    if (!c || gmatcher_compact(m, false) != SY_OK)
        return sy_err_set(err, SY_ERR_NOMEM, "out of memory preparing token masks");
    /* the same stacks come back (every character of a string): reuse the mask */
    gvec *tmp = &m->tmp;
    tmp->n = 0;
    for (size_t i = 0; i < m->cur.n; i++)
        if (!gvec_push(tmp, m->cur.v[i]))
            return sy_err_set(err, SY_ERR_NOMEM, "out of memory computing a token mask");
    int32_t set = gsets_intern(&m->sets, tmp->v, tmp->n);
    if (set < 0)
        return sy_err_set(err, SY_ERR_NOMEM, "out of memory computing a token mask");
    m->mtick++;
    gmask_memo *slot = &m->memo[0];
    for (int k = 0; k < GMASK_MEMO; k++) {
        if (m->memo[k].mask && m->memo[k].set == set) {
            memcpy(mask, m->memo[k].mask, words * sizeof *mask);
            m->memo[k].used = m->mtick;
            return SY_OK;
        }
        if (m->memo[k].used < slot->used)
            slot = &m->memo[k];
    }
    bool can_end = false;
    for (size_t i = 0; i < m->cur.n; i++) {
        int32_t x = m->cur.v[i];
        if (x == GS_EMPTY) {
            can_end = true;
            continue;
        }
        int32_t p = m->a.nodes[x].pos;
        const gmask_entry *e = get_entry(m, c, p);
        if (!e)
            return mask_failed(m, err);
        if (e->bits) {
            for (size_t k = 0; k < words; k++)
                mask[k] |= e->bits[k];
        } else {
            for (size_t k = 0; k < e->n_acc; k++)
                mask[e->acc[k] >> 5] |= 1u << (e->acc[k] & 31);
        }
        if (!check_uncertain(m, x, e->unc, e->n_unc, mask))
            return mask_failed(m, err);
        int32_t lit = m->g->lit_of[p];
        if (lit >= 0)
            for (size_t k = 0; k < c->n_lit_special[lit]; k++) {
                int32_t t = c->lit_special[lit][k];
                mask[t >> 5] |= 1u << (t & 31);
            }
    }
    if (can_end)
        for (size_t k = 0; k < v->n_eos; k++)
            mask[v->eos[k] >> 5] |= 1u << (v->eos[k] & 31);
    for (size_t k = 0; k < words; k++) {
        if (!mask[k])
            continue;
        if (!slot->mask)
            slot->mask = malloc(words * sizeof *mask);
        if (slot->mask) {
            memcpy(slot->mask, mask, words * sizeof *mask);
            slot->set = set;
            slot->used = m->mtick;
        }
        return SY_OK;
    }
    if (can_end)
        return sy_err_set(err, SY_ERR_INVALID,
                          "the grammar is stuck: its output is complete here, but the vocabulary has no EOS id");
    char exp[200];
    expected_bytes(m, exp, sizeof exp);
    return sy_err_set(err, SY_ERR_INVALID,
                      "the grammar is stuck: no token of the vocabulary (%d tokens) can come next; the grammar "
                      "expects a byte from \"%s\"",
                      (int)v->n_vocab, exp);
}

static int token_too_ambiguous(const sy_gmatcher *m, const char *kind, int32_t tok, const char *ex, sy_err *err)
{
    char what[128];
    snprintf(what, sizeof what, "%s %d (\"%s\")", kind, (int)tok, ex);
    return gmatcher_too_ambiguous(m, what, err);
}

int sy_gmatcher_accept_token(sy_gmatcher *m, int32_t tok, sy_err *err)
{
    if (!m || !m->v)
        return sy_err_set(err, SY_ERR_INVALID, "sy_gmatcher_accept_token: %s", m ? "the matcher has no vocabulary"
                                                                                 : "NULL matcher");
    const sy_gvocab *v = m->v;
    if (tok < 0 || tok >= v->n_vocab)
        return sy_err_set(err, SY_ERR_INVALID, "token %d is outside the vocabulary [0, %d)", (int)tok,
                          (int)v->n_vocab);
    if (m->ended)
        return sy_err_set(err, SY_ERR_INVALID, "token %d after the end of the constrained output (EOS accepted)",
                          (int)tok);
    char ex[96];
    excerpt(v->bytes[tok] ? v->bytes[tok] : "", v->lens[tok], ex, sizeof ex);
    switch (v->kind[tok]) {
    case GV_NONE:
        return sy_err_set(err, SY_ERR_INVALID, "token %d has no text, so the grammar never allows it", (int)tok);
    case GV_EOS:
        if (!sy_gmatcher_can_end(m))
            return sy_err_set(err, SY_ERR_INVALID, "EOS token %d where the grammar cannot end yet", (int)tok);
        m->ended = true;
        return SY_OK;
    case GV_PLAIN:
        if (gmatcher_feed(m, v->bytes[tok], v->lens[tok]))
            return SY_OK;
        if (m->a.too_many)
            return token_too_ambiguous(m, "token", tok, ex, err);
        return sy_err_set(err, SY_ERR_INVALID, "token %d (\"%s\") is not allowed by the grammar here", (int)tok,
                          ex);
    default:
        break;
    }
    /* a special token: only through a literal that spells it whole */
    gvec start = {0};
    for (size_t i = 0; i < m->cur.n; i++) {
        int32_t x = m->cur.v[i];
        if (x < 0)
            continue;
        int32_t lit = m->g->lit_of[m->a.nodes[x].pos];
        if (lit >= 0 && m->g->lit_len[lit] == v->lens[tok] &&
            memcmp(m->g->lit_text[lit], v->bytes[tok], v->lens[tok]) == 0 && !gvec_push(&start, x)) {
            gvec_free(&start);
            return sy_err_set(err, SY_ERR_NOMEM, "out of memory");
        }
    }
    if (start.n == 0) {
        gvec_free(&start);
        return sy_err_set(err, SY_ERR_INVALID,
                          "special token %d (\"%s\") is not allowed here: the grammar admits a special token only "
                          "where it spells its whole text as one quoted literal",
                          (int)tok, ex);
    }
    gvec saved = m->cur;
    m->cur = start;
    if (!gmatcher_feed(m, v->bytes[tok], v->lens[tok])) {
        gvec_free(&m->cur);
        m->cur = saved;
        if (m->a.too_many)
            return token_too_ambiguous(m, "special token", tok, ex, err);
        return sy_err_set(err, SY_ERR_INTERNAL, "special token %d (\"%s\") matched a literal but not its bytes",
                          (int)tok, ex);
    }
    gvec_free(&saved);
    return SY_OK;
}
