/*
 * Compiling sources into the byte-level grammar: literals become byte
 * elements, code-point classes become rules whose alternatives are the
 * UTF-8 byte sequences of their ranges, groups and repetitions become
 * helper rules (x* is `h ::= x h | `, a tail call, so stacks stay flat).
 * Then the checks the header promises (undefined rules, left recursion,
 * empty languages) and each rule's return positions, which the token
 * caches use to see past a rule's end.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_impl.h"

/* Bounds what a schema or {m,n} can blow up into. */
#define MAX_ELEMENTS (4u << 20)

typedef struct telem {
    uint8_t kind;
    int32_t arg;
    int32_t lit;
} telem;

typedef struct talt {
    telem *e;
    size_t n, cap;
} talt;

typedef struct trule {
    char *name;
    talt *alts;
    size_t n, cap;
} trule;

typedef struct cclass {
    uint32_t *ranges;
    size_t n;
    int32_t rule;
} cclass;

typedef struct cctx {
    const sy_gsrc *src;
    trule *r;
    size_t nr, capr;
    uint32_t (*sets)[8];
    size_t nsets, capsets;
    char **lits;
    size_t *lit_lens;
    size_t nlits, caplits, caplitlens;
    cclass *cls;
    size_t ncls, capcls;
    size_t n_helpers;
    size_t total;
    const grule *cur; /* the source rule being compiled, for errors */
    sy_err *err;
    int code;
} cctx;

static int cerr_nomem(cctx *c)
{
    if (!c->code)
        c->code = sy_err_set(c->err, SY_ERR_NOMEM, "out of memory compiling the grammar");
    return c->code;
}

static bool grow(void **p, size_t *cap, size_t n, size_t size)
{
    if (n < *cap)
        return true;
    size_t nc = *cap ? *cap * 2 : 8;
    while (nc <= n)
        nc *= 2;
    void *q = realloc(*p, nc * size);
    if (!q)
        return false;
    *p = q;
    *cap = nc;
    return true;
}

static int32_t new_rule(cctx *c, const char *name)
{
    if (!grow((void **)&c->r, &c->capr, c->nr, sizeof *c->r))
        return cerr_nomem(c), -1;
    trule *r = &c->r[c->nr];
    memset(r, 0, sizeof *r);
    r->name = strdup(name);
    if (!r->name)
        return cerr_nomem(c), -1;
    return (int32_t)c->nr++;
}

static int32_t new_helper(cctx *c)
{
    char name[SY_GRULE_NAME_MAX + 32];
    snprintf(name, sizeof name, "%s-%zu", c->cur ? c->cur->name : "rule", ++c->n_helpers);
    return new_rule(c, name);
}

static talt *new_alt(cctx *c, int32_t rule)
{
    trule *r = &c->r[rule];
    if (!grow((void **)&r->alts, &r->cap, r->n, sizeof *r->alts))
        return cerr_nomem(c), NULL;
    talt *a = &r->alts[r->n++];
    memset(a, 0, sizeof *a);
    return a;
}

static bool put(cctx *c, talt *a, uint8_t kind, int32_t arg, int32_t lit)
{
    if (++c->total > MAX_ELEMENTS) {
        if (!c->code)
            c->code = sy_err_set(c->err, SY_ERR_INVALID,
                                 "the grammar is too large (over %u elements; rule %s, from %s:%d:%d, adds the last)",
                                 MAX_ELEMENTS, c->cur ? c->cur->name : "?", c->cur ? c->cur->where : "?",
                                 c->cur ? c->cur->line : 0, c->cur ? c->cur->col : 0);
        return false;
    }
    if (!grow((void **)&a->e, &a->cap, a->n, sizeof *a->e))
        return cerr_nomem(c), false;
    a->e[a->n++] = (telem){kind, arg, lit};
    return true;
}

/* Byte sets 0..255 are the single bytes; others are added deduplicated. */
static int32_t set_index(cctx *c, const uint32_t set[8])
{
    for (size_t i = 256; i < c->nsets; i++)
        if (memcmp(c->sets[i], set, 32) == 0)
            return (int32_t)i;
    if (!grow((void **)&c->sets, &c->capsets, c->nsets, sizeof *c->sets))
        return cerr_nomem(c), -1;
    memcpy(c->sets[c->nsets], set, 32);
    return (int32_t)c->nsets++;
}

static void set_range(uint32_t set[8], unsigned lo, unsigned hi)
{
    for (unsigned b = lo; b <= hi; b++)
        set[b >> 5] |= 1u << (b & 31);
}

/* ------------------------------------------------------------ classes */

static int cmp_range(const void *a, const void *b)
{
    const uint32_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Sorted, merged, complemented when negated, surrogates removed. */
static uint32_t *normalize_class(const gnode *n, size_t *out_n)
{
    size_t cap = n->n * 2 + 4;
    uint32_t *r = malloc(cap * 2 * sizeof *r);
    if (!r)
        return NULL;
    if (n->n) /* "." and [^] have no ranges */
        memcpy(r, n->ranges, n->n * 2 * sizeof *r);
    size_t k = n->n;
    if (k > 1)
        qsort(r, k, 2 * sizeof *r, cmp_range);
    size_t m = 0;
    for (size_t i = 0; i < k; i++) {
        if (m && r[2 * i] <= r[2 * (m - 1) + 1] + 1) {
            if (r[2 * i + 1] > r[2 * (m - 1) + 1])
                r[2 * (m - 1) + 1] = r[2 * i + 1];
        } else {
            r[2 * m] = r[2 * i];
            r[2 * m + 1] = r[2 * i + 1];
            m++;
        }
    }
    if (n->neg) {
        uint32_t *q = malloc(cap * 2 * sizeof *q);
        if (!q)
            return free(r), NULL;
        size_t qn = 0;
        uint32_t next = 0;
        for (size_t i = 0; i < m; i++) {
            if (r[2 * i] > next) {
                q[2 * qn] = next;
                q[2 * qn + 1] = r[2 * i] - 1;
                qn++;
            }
            next = r[2 * i + 1] + 1;
        }
        if (next <= 0x10FFFF) {
            q[2 * qn] = next;
            q[2 * qn + 1] = 0x10FFFF;
            qn++;
        }
        free(r);
        r = q;
        m = qn;
    }
    /* cut out the surrogates: not encodable in UTF-8 */
    uint32_t *s = malloc((m + 1) * 2 * sizeof *s);
    if (!s)
        return free(r), NULL;
    size_t sn = 0;
    for (size_t i = 0; i < m; i++) {
        uint32_t lo = r[2 * i], hi = r[2 * i + 1];
        if (hi < 0xD800 || lo > 0xDFFF) {
            s[2 * sn] = lo, s[2 * sn + 1] = hi, sn++;
            continue;
        }
        if (lo < 0xD800)
            s[2 * sn] = lo, s[2 * sn + 1] = 0xD7FF, sn++;
        if (hi > 0xDFFF)
            s[2 * sn] = 0xE000, s[2 * sn + 1] = hi, sn++;
    }
    free(r);
    *out_n = sn;
    return s;
}

typedef struct useq {
    int len;
    uint8_t lo[4], hi[4];
} useq;

typedef struct useqs {
    useq *v;
    size_t n, cap;
    bool oom;
} useqs;

static size_t enc(uint32_t cp, uint8_t *o)
{
    if (cp < 0x80) {
        o[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (uint8_t)(0xC0 | (cp >> 6)), o[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (uint8_t)(0xE0 | (cp >> 12)), o[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (uint8_t)(0xF0 | (cp >> 18)), o[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F)), o[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

/* Splits [lo, hi] (same encoded length) until each piece is a product of
 * byte ranges (the construction RE2 and regex-syntax use). */
static void split_same_len(useqs *q, uint32_t lo, uint32_t hi, int n)
{
    for (int i = 1; i < n; i++) {
        uint32_t m = (1u << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if ((lo & m) != 0) {
                split_same_len(q, lo, lo | m, n);
                split_same_len(q, (lo | m) + 1, hi, n);
                return;
            }
            if ((hi & m) != m) {
                split_same_len(q, lo, (hi & ~m) - 1, n);
                split_same_len(q, hi & ~m, hi, n);
                return;
            }
        }
    }
    if (!grow((void **)&q->v, &q->cap, q->n, sizeof *q->v)) {
        q->oom = true;
        return;
    }
    useq *s = &q->v[q->n++];
    s->len = n;
    enc(lo, s->lo);
    enc(hi, s->hi);
}

static void utf8_pieces(useqs *q, uint32_t lo, uint32_t hi)
{
    static const uint32_t top[4] = {0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
    uint32_t start = 0;
    for (int n = 1; n <= 4; n++) {
        uint32_t a = lo > start ? lo : start, b = hi < top[n - 1] ? hi : top[n - 1];
        if (a <= b)
            split_same_len(q, a, b, n);
        start = top[n - 1] + 1;
    }
}

/* The element for a class: one byte set when it is all ASCII, else a rule. */
static bool emit_class(cctx *c, talt *a, const gnode *n)
{
    size_t m;
    uint32_t *r = normalize_class(n, &m);
    if (!r)
        return cerr_nomem(c), false;
    if (m == 0) {
        free(r);
        if (!c->code)
            c->code = sy_err_set(c->err, SY_ERR_INVALID,
                                 "%s:%d:%d: rule %s: the character class matches no character (its language is empty)",
                                 c->cur->where, n->line, n->col, c->cur->name);
        return false;
    }
    if (r[2 * m - 1] < 0x80) {
        uint32_t set[8] = {0};
        for (size_t i = 0; i < m; i++)
            set_range(set, r[2 * i], r[2 * i + 1]);
        free(r);
        int32_t si = set_index(c, set);
        return si >= 0 && put(c, a, GE_BYTES, si, -1);
    }
    for (size_t i = 0; i < c->ncls; i++) {
        if (c->cls[i].n == m && memcmp(c->cls[i].ranges, r, m * 2 * sizeof *r) == 0) {
            free(r);
            return put(c, a, GE_REF, c->cls[i].rule, -1);
        }
    }
    useqs q = {0};
    for (size_t i = 0; i < m; i++)
        utf8_pieces(&q, r[2 * i], r[2 * i + 1]);
    int32_t rule = q.oom ? -1 : new_helper(c);
    if (rule < 0 || !grow((void **)&c->cls, &c->capcls, c->ncls, sizeof *c->cls)) {
        free(q.v);
        free(r);
        return cerr_nomem(c), false;
    }
    c->cls[c->ncls++] = (cclass){r, m, rule};
    /* pieces with the same tail share one alternative: their first bytes merge */
    bool *done = calloc(q.n + 1, 1);
    if (!done) {
        free(q.v);
        return cerr_nomem(c), false;
    }
    for (size_t i = 0; i < q.n && !c->code; i++) {
        if (done[i])
            continue;
        uint32_t first[8] = {0};
        for (size_t j = i; j < q.n; j++) {
            if (done[j] || q.v[j].len != q.v[i].len)
                continue;
            bool same = true;
            for (int k = 1; k < q.v[i].len; k++)
                same &= q.v[j].lo[k] == q.v[i].lo[k] && q.v[j].hi[k] == q.v[i].hi[k];
            if (!same)
                continue;
            set_range(first, q.v[j].lo[0], q.v[j].hi[0]);
            done[j] = true;
        }
        talt *alt = new_alt(c, rule);
        if (!alt)
            break;
        int32_t si = set_index(c, first);
        if (si < 0 || !put(c, alt, GE_BYTES, si, -1))
            break;
        for (int k = 1; k < q.v[i].len; k++) {
            uint32_t s[8] = {0};
            set_range(s, q.v[i].lo[k], q.v[i].hi[k]);
            si = set_index(c, s);
            if (si < 0 || !put(c, alt, GE_BYTES, si, -1))
                break;
        }
    }
    free(done);
    free(q.v);
    return !c->code && put(c, a, GE_REF, rule, -1);
}

/* ------------------------------------------------------------ rules */

static int32_t rule_id(const cctx *c, const char *name)
{
    for (size_t i = 0; i < c->src->n; i++)
        if (strcmp(c->src->rules[i].name, name) == 0)
            return (int32_t)i;
    return -1;
}

static bool emit_item(cctx *c, talt *a, int32_t rule, const gnode *n);
static bool emit_alts(cctx *c, int32_t rule, const gnode *alt);

static bool emit_seq(cctx *c, talt *a, int32_t rule, const gnode *seq)
{
    for (size_t i = 0; i < seq->n; i++)
        if (!emit_item(c, a, rule, seq->kids[i]))
            return false;
    return true;
}

/* A group as one element: a helper rule holding its alternatives. */
static bool emit_group(cctx *c, talt *a, const gnode *n)
{
    int32_t h = new_helper(c);
    if (h < 0 || !emit_alts(c, h, n))
        return false;
    /* a may have moved if c->r grew: the caller passes a stable talt */
    return put(c, a, GE_REF, h, -1);
}

/* Emits x once; groups with several items become a rule first, so that
 * repeating them repeats one reference. */
static bool simple_item(const gnode *n)
{
    return n->kind == GN_LIT || n->kind == GN_CLASS || n->kind == GN_REF ||
           (n->kind == GN_ALT && n->n == 1 && n->kids[0]->n == 1 && simple_item(n->kids[0]->kids[0]));
}

static const gnode *unwrap(const gnode *n)
{
    while (n->kind == GN_ALT && n->n == 1 && n->kids[0]->n == 1)
        n = n->kids[0]->kids[0];
    return n;
}

/* Appends a finished scratch alternative to rule h. */
static bool store_alt(cctx *c, int32_t h, talt *tmp)
{
    talt *dst = new_alt(c, h);
    if (!dst) {
        free(tmp->e);
        return false;
    }
    *dst = *tmp;
    memset(tmp, 0, sizeof *tmp);
    return true;
}

/* One copy of a repetition's unit: a reference to its helper rule, or the
 * simple item itself. */
static bool emit_unit(cctx *c, talt *a, int32_t unit_rule, const gnode *unit)
{
    return unit_rule >= 0 ? put(c, a, GE_REF, unit_rule, -1) : emit_item(c, a, -1, unit);
}

static bool emit_rep(cctx *c, talt *a, const gnode *n)
{
    const gnode *x = n->kids[0];
    int32_t unit_rule = -1;
    const gnode *unit = x;
    if (!simple_item(x)) {
        unit_rule = new_helper(c);
        if (unit_rule < 0)
            return false;
        if (x->kind == GN_ALT) {
            if (!emit_alts(c, unit_rule, x))
                return false;
        } else {
            talt tmp = {0};
            if (!emit_item(c, &tmp, -1, x) || !store_alt(c, unit_rule, &tmp)) {
                free(tmp.e);
                return false;
            }
        }
    } else {
        unit = unwrap(x);
    }
    for (int i = 0; i < n->min; i++)
        if (!emit_unit(c, a, unit_rule, unit))
            return false;
    if (n->max == -1) {
        int32_t h = new_helper(c);
        talt tmp = {0}, empty = {0};
        bool ok = h >= 0 && emit_unit(c, &tmp, unit_rule, unit) && put(c, &tmp, GE_REF, h, -1) &&
                  store_alt(c, h, &tmp) && store_alt(c, h, &empty);
        free(tmp.e);
        return ok && put(c, a, GE_REF, h, -1);
    }
    int32_t prev = -1;
    for (int k = n->max - n->min; k > 0; k--) {
        int32_t h = new_helper(c);
        talt tmp = {0}, empty = {0};
        bool ok = h >= 0 && emit_unit(c, &tmp, unit_rule, unit) && (prev < 0 || put(c, &tmp, GE_REF, prev, -1)) &&
                  store_alt(c, h, &tmp) && store_alt(c, h, &empty);
        free(tmp.e);
        if (!ok)
            return false;
        prev = h;
    }
    return prev < 0 || put(c, a, GE_REF, prev, -1);
}

/* Emits into a (a scratch alternative: talt pointers into c->r move when
 * rules or alternatives are added). */
static bool emit_item(cctx *c, talt *a, int32_t rule, const gnode *n)
{
    (void)rule;
    switch (n->kind) {
    case GN_LIT: {
        if (n->n == 0)
            return true;
        if (!grow((void **)&c->lits, &c->caplits, c->nlits, sizeof *c->lits) ||
            !grow((void **)&c->lit_lens, &c->caplitlens, c->nlits, sizeof *c->lit_lens)) {
            return cerr_nomem(c), false;
        }
        c->lits[c->nlits] = malloc(n->n);
        if (!c->lits[c->nlits])
            return cerr_nomem(c), false;
        memcpy(c->lits[c->nlits], n->text, n->n);
        c->lit_lens[c->nlits] = n->n;
        int32_t lit = (int32_t)c->nlits++;
        for (size_t i = 0; i < n->n; i++)
            if (!put(c, a, GE_BYTES, (uint8_t)n->text[i], i == 0 ? lit : -1))
                return false;
        return true;
    }
    case GN_CLASS:
        return emit_class(c, a, n);
    case GN_REF: {
        int32_t id = rule_id(c, n->text);
        if (id < 0) {
            if (!c->code)
                c->code = sy_err_set(c->err, SY_ERR_INVALID, "%s:%d:%d: rule %s refers to undefined rule %s",
                                     c->cur->where, n->line, n->col, c->cur->name, n->text);
            return false;
        }
        return put(c, a, GE_REF, id, -1);
    }
    case GN_ALT:
        if (n->n == 1)
            return emit_seq(c, a, -1, n->kids[0]);
        return emit_group(c, a, n);
    case GN_SEQ:
        return emit_seq(c, a, -1, n);
    case GN_REP:
        return emit_rep(c, a, n);
    default:
        return false;
    }
}

static bool emit_alts(cctx *c, int32_t rule, const gnode *alt)
{
    for (size_t i = 0; alt && i < alt->n; i++) {
        talt tmp = {0};
        bool ok = emit_seq(c, &tmp, rule, alt->kids[i]);
        talt *dst = ok ? new_alt(c, rule) : NULL;
        if (!dst) {
            free(tmp.e);
            return false;
        }
        *dst = tmp;
    }
    return true;
}

/* ------------------------------------------------------------ checks */

typedef struct tarjan {
    const sy_grammar *g;
    const bool *nullable;
    int32_t *index, *low, *stk, *comp;
    bool *on;
    int32_t next, sp, ncomp;
} tarjan;

/* Calls f(g, from, to, tail, arg) for each reference reached through a
 * nullable prefix of one of from's alternatives. */
#define FOR_LEFT_EDGES(g, nullable, r, BODY)                                                   \
    for (int32_t ai_ = (g)->alt_off[r]; ai_ < (g)->alt_off[(r) + 1]; ai_++) {                   \
        for (int32_t p_ = (g)->alt[ai_]; (g)->el[p_].kind == GE_REF; p_++) {                    \
            int32_t to = (g)->el[p_].arg;                                                       \
            bool tail = (g)->el[p_ + 1].kind == GE_END;                                         \
            BODY;                                                                               \
            if (!(nullable)[to])                                                                \
                break;                                                                          \
        }                                                                                       \
    }

static void strong(tarjan *t, int32_t r)
{
    t->index[r] = t->low[r] = t->next++;
    t->stk[t->sp++] = r;
    t->on[r] = true;
    FOR_LEFT_EDGES(t->g, t->nullable, r, {
        (void)tail;
        if (t->index[to] < 0) {
            strong(t, to);
            if (t->low[to] < t->low[r])
                t->low[r] = t->low[to];
        } else if (t->on[to] && t->index[to] < t->low[r]) {
            t->low[r] = t->index[to];
        }
    });
    if (t->low[r] == t->index[r]) {
        int32_t x;
        do {
            x = t->stk[--t->sp];
            t->on[x] = false;
            t->comp[x] = t->ncomp;
        } while (x != r);
        t->ncomp++;
    }
}

static int check_grammar(const sy_grammar *g, int32_t n_user, const sy_gsrc *src, sy_err *err)
{
    int32_t nr = g->n_rules;
    bool *nullable = calloc((size_t)nr, 1), *prod = calloc((size_t)nr, 1), *reach = calloc((size_t)nr, 1);
    int32_t *work = malloc((size_t)nr * 5 * sizeof *work);
    bool *on = calloc((size_t)nr, 1);
    int rc = SY_OK;
    if (!nullable || !prod || !reach || !work || !on) {
        rc = sy_err_set(err, SY_ERR_NOMEM, "out of memory checking the grammar");
        goto out;
    }
    for (bool changed = true; changed;) {
        changed = false;
        for (int32_t r = 0; r < nr; r++) {
            for (int32_t ai = g->alt_off[r]; ai < g->alt_off[r + 1]; ai++) {
                bool nul = true, pr = true;
                for (int32_t p = g->alt[ai]; g->el[p].kind != GE_END; p++) {
                    if (g->el[p].kind == GE_BYTES) {
                        nul = false;
                    } else {
                        nul &= nullable[g->el[p].arg];
                        pr &= prod[g->el[p].arg];
                    }
                }
                if (nul && !nullable[r])
                    nullable[r] = changed = true;
                if (pr && !prod[r])
                    prod[r] = changed = true;
            }
        }
    }
    /* reachable from the root */
    int32_t sp = 0;
    work[sp++] = g->root;
    reach[g->root] = true;
    while (sp) {
        int32_t r = work[--sp];
        for (int32_t ai = g->alt_off[r]; ai < g->alt_off[r + 1]; ai++)
            for (int32_t p = g->alt[ai]; g->el[p].kind != GE_END; p++)
                if (g->el[p].kind == GE_REF && !reach[g->el[p].arg]) {
                    reach[g->el[p].arg] = true;
                    work[sp++] = g->el[p].arg;
                }
    }
    for (int32_t r = 0; r < nr; r++) {
        if (reach[r] && !prod[r]) {
            const char *how = r < n_user ? "" : " (a group, class or repetition inside it)";
            if (r < n_user)
                rc = sy_err_set(err, SY_ERR_INVALID,
                                "%s:%d:%d: rule %s derives no finite text (its language is empty): every "
                                "alternative refers to itself or to another such rule",
                                src->rules[r].where, src->rules[r].line, src->rules[r].col, g->rule_name[r]);
            else
                rc = sy_err_set(err, SY_ERR_INVALID, "rule %s%s derives no finite text (its language is empty)",
                                g->rule_name[r], how);
            goto out;
        }
    }
    /* left recursion: a cycle of calls through nullable prefixes that
     * pushes a frame (unbounded stacks), or any such cycle among the
     * rules as written (helper-only tail cycles come from x* with a
     * nullable x and are harmless: the expansion deduplicates them) */
    tarjan t = {.g = g, .nullable = nullable, .index = work, .low = work + nr, .stk = work + 2 * nr,
                .comp = work + 3 * nr, .on = on};
    for (int32_t r = 0; r < nr; r++)
        t.index[r] = -1;
    for (int32_t r = 0; r < nr; r++)
        if (t.index[r] < 0)
            strong(&t, r);
    for (int32_t r = 0; r < nr && !rc; r++) {
        if (!reach[r])
            continue;
        FOR_LEFT_EDGES(g, nullable, r, {
            if (!rc && t.comp[to] == t.comp[r] && (!tail || r < n_user || to < n_user)) {
                int32_t u = r < n_user ? r : (to < n_user ? to : r);
                if (u < n_user)
                    rc = sy_err_set(err, SY_ERR_INVALID,
                                    "%s:%d:%d: rule %s is left-recursive (it can reach itself before reading any "
                                    "text): rewrite it with repetition, e.g. x ::= y (\",\" y)*",
                                    src->rules[u].where, src->rules[u].line, src->rules[u].col, g->rule_name[u]);
                else
                    rc = sy_err_set(err, SY_ERR_INVALID,
                                    "rule %s is left-recursive (it can reach itself before reading any text)",
                                    g->rule_name[u]);
            }
        });
    }
out:
    free(nullable);
    free(prod);
    free(reach);
    free(work);
    free(on);
    return rc;
}

/* Each rule's return position: where the text goes on after the rule
 * ends. One position when every call site (seen through tail calls) is
 * followed by the same element; -1 when several, or the root's end. */
static int compute_cont(sy_grammar *g, sy_err *err)
{
    enum { NONE = -2, MANY = -1 };
    int32_t nr = g->n_rules;
    /* a worklist of rules whose cont changed (at most twice each), so
     * chains of tail calls ({0,n} repetitions) stay linear */
    int32_t *work = malloc(((size_t)nr * 2 + 1) * sizeof *work);
    if (!work)
        return sy_err_set(err, SY_ERR_NOMEM, "out of memory compiling the grammar");
    for (int32_t r = 0; r < nr; r++)
        g->cont[r] = NONE;
    size_t n = 0;
    g->cont[g->root] = MANY;
    work[n++] = g->root;
    while (n) {
        int32_t r = work[--n];
        /* r is reached (or its cont changed): its call sites count now */
        for (int32_t ai = g->alt_off[r]; ai < g->alt_off[r + 1]; ai++)
            for (int32_t p = g->alt[ai]; g->el[p].kind != GE_END; p++) {
                if (g->el[p].kind != GE_REF)
                    continue;
                int32_t to = g->el[p].arg;
                int32_t add = g->el[p + 1].kind == GE_END ? g->cont[r] : p + 1;
                if (g->cont[to] == MANY || g->cont[to] == add)
                    continue;
                g->cont[to] = g->cont[to] == NONE ? add : MANY;
                work[n++] = to;
            }
    }
    free(work);
    for (int32_t r = 0; r < nr; r++)
        if (g->cont[r] == NONE) /* never called from the root */
            g->cont[r] = MANY;
    return SY_OK;
}

/* The bytes that may follow each rule (FIRST of what comes after its call
 * sites, through nullable tails). A cache walk that leaves a rule into an
 * unknown caller still knows the next byte must be one of these. */
static int compute_follow(sy_grammar *g, sy_err *err)
{
    size_t n = g->n_el;
    uint32_t (*first)[8] = calloc(n + 1, sizeof *first);
    bool *nul = calloc(n + 1, 1);
    uint32_t (*rfirst)[8] = calloc((size_t)g->n_rules + 1, sizeof *rfirst);
    bool *rnul = calloc((size_t)g->n_rules + 1, 1);
    g->follow = calloc((size_t)g->n_rules + 1, sizeof *g->follow);
    if (!first || !nul || !rfirst || !rnul || !g->follow) {
        free(first);
        free(nul);
        free(rfirst);
        free(rnul);
        return sy_err_set(err, SY_ERR_NOMEM, "out of memory compiling the grammar");
    }
    for (bool changed = true; changed;) {
        changed = false;
        for (size_t q = n; q-- > 0;) {
            const gelem *e = &g->el[q];
            uint32_t f[8] = {0};
            bool nl;
            if (e->kind == GE_END) {
                nl = true;
            } else if (e->kind == GE_BYTES) {
                memcpy(f, g->sets[e->arg], sizeof f);
                nl = false;
            } else {
                memcpy(f, rfirst[e->arg], sizeof f);
                nl = rnul[e->arg];
                if (nl) {
                    for (int k = 0; k < 8; k++)
                        f[k] |= first[q + 1][k];
                    nl = nul[q + 1];
                }
            }
            for (int k = 0; k < 8; k++)
                if (f[k] & ~first[q][k]) {
                    first[q][k] |= f[k];
                    changed = true;
                }
            if (nl && !nul[q])
                nul[q] = changed = true;
        }
        for (int32_t r = 0; r < g->n_rules; r++)
            for (int32_t ai = g->alt_off[r]; ai < g->alt_off[r + 1]; ai++) {
                int32_t q = g->alt[ai];
                for (int k = 0; k < 8; k++)
                    if (first[q][k] & ~rfirst[r][k]) {
                        rfirst[r][k] |= first[q][k];
                        changed = true;
                    }
                if (nul[q] && !rnul[r])
                    rnul[r] = changed = true;
            }
    }
    /* FOLLOW through a worklist of rules whose FOLLOW grew: a rule's sites
     * with a nullable rest pass its FOLLOW on (linear for tail chains) */
    int32_t *work = malloc(((size_t)g->n_rules + 1) * sizeof *work);
    bool *queued = malloc((size_t)g->n_rules + 1);
    size_t wn = 0;
    if (!work || !queued) {
        free(work);
        free(queued);
        free(first);
        free(nul);
        free(rfirst);
        free(rnul);
        return sy_err_set(err, SY_ERR_NOMEM, "out of memory compiling the grammar");
    }
    for (int32_t r = g->n_rules; r-- > 0;) {
        work[wn++] = r;
        queued[r] = true;
    }
    while (wn) {
        int32_t r = work[--wn];
        queued[r] = false;
        for (int32_t ai = g->alt_off[r]; ai < g->alt_off[r + 1]; ai++)
            for (int32_t q = g->alt[ai]; g->el[q].kind != GE_END; q++) {
                if (g->el[q].kind != GE_REF)
                    continue;
                int32_t to = g->el[q].arg;
                uint32_t f[8];
                memcpy(f, first[q + 1], sizeof f);
                if (nul[q + 1])
                    for (int k = 0; k < 8; k++)
                        f[k] |= g->follow[r][k];
                bool grew = false;
                for (int k = 0; k < 8; k++)
                    if (f[k] & ~g->follow[to][k]) {
                        g->follow[to][k] |= f[k];
                        grew = true;
                    }
                if (grew && !queued[to]) {
                    work[wn++] = to;
                    queued[to] = true;
                }
            }
    }
    free(work);
    free(queued);
    free(first);
    free(nul);
    free(rfirst);
    free(rnul);
    return SY_OK;
}

/* ------------------------------------------------------------ compile */

void sy_grammar_free(sy_grammar *g)
{
    if (!g)
        return;
    gmask_caches_free(g);
    pthread_mutex_destroy(&g->mu);
    for (int32_t r = 0; g->rule_name && r < g->n_rules; r++)
        free(g->rule_name[r]);
    for (size_t i = 0; i < g->n_lits; i++)
        free(g->lit_text[i]);
    free(g->lit_text);
    free(g->lit_len);
    free(g->rule_name);
    free(g->el);
    free(g->rule_of);
    free(g->lit_of);
    free(g->sets);
    free(g->alt);
    free(g->alt_off);
    free(g->cont);
    free(g->follow);
    free(g);
}

static void cctx_free(cctx *c)
{
    for (size_t i = 0; i < c->nr; i++) {
        for (size_t j = 0; j < c->r[i].n; j++)
            free(c->r[i].alts[j].e);
        free(c->r[i].alts);
        free(c->r[i].name);
    }
    free(c->r);
    free(c->sets);
    for (size_t i = 0; i < c->nlits; i++)
        free(c->lits[i]);
    free(c->lits);
    free(c->lit_lens);
    for (size_t i = 0; i < c->ncls; i++)
        free(c->cls[i].ranges);
    free(c->cls);
}

/* Moves the builder's rules into g's flat arrays. */
static int flatten(cctx *c, sy_grammar *g)
{
    size_t n_el = 0, n_alt = 0;
    for (size_t i = 0; i < c->nr; i++) {
        n_alt += c->r[i].n;
        for (size_t j = 0; j < c->r[i].n; j++)
            n_el += c->r[i].alts[j].n + 1;
    }
    g->n_rules = (int32_t)c->nr;
    g->el = malloc((n_el + 1) * sizeof *g->el);
    g->rule_of = malloc((n_el + 1) * sizeof *g->rule_of);
    g->lit_of = malloc((n_el + 1) * sizeof *g->lit_of);
    g->alt = malloc((n_alt + 1) * sizeof *g->alt);
    g->alt_off = malloc((c->nr + 1) * sizeof *g->alt_off);
    g->rule_name = calloc(c->nr + 1, sizeof *g->rule_name);
    g->cont = malloc((c->nr + 1) * sizeof *g->cont);
    if (!g->el || !g->rule_of || !g->lit_of || !g->alt || !g->alt_off || !g->rule_name || !g->cont)
        return cerr_nomem(c);
    size_t p = 0, a = 0;
    for (size_t i = 0; i < c->nr; i++) {
        g->alt_off[i] = (int32_t)a;
        g->rule_name[i] = c->r[i].name;
        c->r[i].name = NULL;
        for (size_t j = 0; j < c->r[i].n; j++) {
            g->alt[a++] = (int32_t)p;
            for (size_t k = 0; k < c->r[i].alts[j].n; k++) {
                const telem *e = &c->r[i].alts[j].e[k];
                g->el[p] = (gelem){e->kind, e->arg};
                g->rule_of[p] = (int32_t)i;
                g->lit_of[p] = e->lit;
                p++;
            }
            g->el[p] = (gelem){GE_END, (int32_t)i};
            g->rule_of[p] = (int32_t)i;
            g->lit_of[p] = -1;
            p++;
        }
    }
    g->alt_off[c->nr] = (int32_t)a;
    g->n_el = p;
    g->sets = c->sets;
    g->n_sets = c->nsets;
    c->sets = NULL;
    g->lit_text = c->lits;
    g->lit_len = c->lit_lens;
    g->n_lits = c->nlits;
    c->lits = NULL;
    c->lit_lens = NULL;
    c->nlits = 0;
    return SY_OK;
}

int sy_grammar_compile(const sy_gsrc *src, const char *root, sy_grammar **out, sy_err *err)
{
    if (!src || !root || !out)
        return sy_err_set(err, SY_ERR_INVALID, "sy_grammar_compile: NULL %s", !src ? "source" : !root ? "root" : "out");
    *out = NULL;
    cctx c = {.src = src, .err = err};
    int32_t root_id = rule_id(&c, root);
    if (root_id < 0)
        return sy_err_set(err, SY_ERR_INVALID, "the grammar has no rule %s (the root rule)%s", root,
                          src->n ? "" : ": it has no rules at all");
    c.sets = calloc(512, sizeof *c.sets);
    if (!c.sets)
        return sy_err_set(err, SY_ERR_NOMEM, "out of memory compiling the grammar");
    c.capsets = 512;
    c.nsets = 256;
    for (unsigned b = 0; b < 256; b++)
        c.sets[b][b >> 5] = 1u << (b & 31);
    for (size_t i = 0; i < src->n && !c.code; i++)
        new_rule(&c, src->rules[i].name);
    for (size_t i = 0; i < src->n && !c.code; i++) {
        c.cur = &src->rules[i];
        emit_alts(&c, (int32_t)i, src->rules[i].body);
    }
    sy_grammar *g = c.code ? NULL : calloc(1, sizeof *g);
    if (!c.code && !g)
        cerr_nomem(&c);
    if (!c.code) {
        pthread_mutex_init(&g->mu, NULL);
        g->root = root_id;
        flatten(&c, g);
    }
    int rc = c.code;
    cctx_free(&c);
    if (!rc)
        rc = check_grammar(g, (int32_t)src->n, src, err);
    if (rc) {
        sy_grammar_free(g);
        return rc;
    }
    rc = gclone_shared_rules(g, err);
    if (rc) {
        sy_grammar_free(g);
        return rc;
    }
    rc = compute_cont(g, err);
    if (!rc)
        rc = compute_follow(g, err);
    if (rc) {
        sy_grammar_free(g);
        return rc;
    }
    *out = g;
    return SY_OK;
}
