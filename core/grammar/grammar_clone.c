/*
 * Call-site copies of shared rules. The token caches (grammar_mask.c) see
 * past the end of a rule only when the rule has one return position; a
 * small rule that several places call (a JSON string's character rule, a
 * number) would otherwise stop every cache walk after one character and
 * leave most tokens to the slow per-stack check. So each call site of a
 * small non-recursive rule gets its own copy (transitively), within a
 * budget on the elements added. The language does not change.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_impl.h"

/* A rule (with what it calls) up to this many elements is copied. */
#define CLONE_MAX_RULE 4096
/* Copies stop adding once they reach this many elements in all. */
#define CLONE_BUDGET (1u << 20)

typedef struct ctarjan {
    const sy_grammar *g;
    int32_t *index, *low, *stk;
    bool *on, *rec;
    int32_t next, sp;
    bool too_deep;
} ctarjan;

/* Deeper call chains than this ({0,n} with a large n) skip the copies
 * rather than recurse further. */
#define CLONE_MAX_DEPTH 10000

static void strong(ctarjan *t, int32_t r, int depth)
{
    const sy_grammar *g = t->g;
    if (depth > CLONE_MAX_DEPTH) {
        t->too_deep = true;
        return;
    }
    t->index[r] = t->low[r] = t->next++;
    t->stk[t->sp++] = r;
    t->on[r] = true;
    for (int32_t ai = g->alt_off[r]; ai < g->alt_off[r + 1]; ai++)
        for (int32_t p = g->alt[ai]; g->el[p].kind != GE_END; p++) {
            if (g->el[p].kind != GE_REF)
                continue;
            int32_t to = g->el[p].arg;
            if (to == r)
                t->rec[r] = true;
            if (t->index[to] < 0) {
                strong(t, to, depth + 1);
                if (t->too_deep)
                    return;
                if (t->low[to] < t->low[r])
                    t->low[r] = t->low[to];
            } else if (t->on[to] && t->index[to] < t->low[r]) {
                t->low[r] = t->index[to];
            }
        }
    if (t->low[r] == t->index[r]) {
        int32_t x, n = 0;
        int32_t top = t->sp;
        do {
            x = t->stk[--t->sp];
            t->on[x] = false;
            n++;
        } while (x != r);
        if (n > 1)
            for (int32_t k = t->sp; k < top; k++)
                t->rec[t->stk[k]] = true;
    }
}

/* Elements of r and of every non-recursive rule it calls, saturated. */
static size_t rule_size(const sy_grammar *g, int32_t r, const bool *rec, size_t *memo, int depth)
{
    if (memo[r])
        return memo[r];
    if (depth > CLONE_MAX_DEPTH)
        return CLONE_MAX_RULE + 1; /* not memoised: a shallower call may still size it */
    size_t n = 0;
    for (int32_t ai = g->alt_off[r]; ai < g->alt_off[r + 1] && n <= CLONE_MAX_RULE; ai++)
        for (int32_t p = g->alt[ai];; p++) {
            n++;
            if (g->el[p].kind == GE_END)
                break;
            if (g->el[p].kind == GE_REF && !rec[g->el[p].arg])
                n += rule_size(g, g->el[p].arg, rec, memo, depth + 1);
        }
    memo[r] = n > CLONE_MAX_RULE ? CLONE_MAX_RULE + 1 : n;
    return memo[r];
}

static bool grow(void **p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return true;
    size_t nc = *cap ? *cap : 16;
    while (nc < need)
        nc *= 2;
    void *q = realloc(*p, nc * size);
    if (!q)
        return false;
    *p = q;
    *cap = nc;
    return true;
}

int gclone_shared_rules(sy_grammar *g, sy_err *err)
{
    int32_t nr0 = g->n_rules;
    size_t n_alt = (size_t)g->alt_off[nr0];
    size_t cap_el = g->n_el + 1, cap_alt = n_alt + 1, cap_rules = (size_t)nr0 + 1, cap_q = 0;
    int32_t *work = malloc((size_t)nr0 * 3 * sizeof *work);
    bool *on = calloc((size_t)nr0, 1), *rec = calloc((size_t)nr0, 1);
    size_t *memo = calloc((size_t)nr0, sizeof *memo);
    int32_t *orig = NULL, *queue = NULL;
    bool *claimed = NULL;
    int rc = SY_OK;
    if (!work || !on || !rec || !memo)
        goto nomem;
    ctarjan t = {.g = g, .index = work, .low = work + nr0, .stk = work + 2 * nr0, .on = on, .rec = rec};
    for (int32_t r = 0; r < nr0; r++)
        t.index[r] = -1;
    for (int32_t r = 0; r < nr0 && !t.too_deep; r++)
        if (t.index[r] < 0)
            strong(&t, r, 0);
    if (t.too_deep) /* no copies: the caches just see fewer rules through */
        goto out;
    for (int32_t r = 0; r < nr0; r++)
        if (!rec[r])
            rule_size(g, r, rec, memo, 0);
    size_t cap_o = (size_t)nr0 + 1;
    orig = malloc(cap_o * sizeof *orig);
    claimed = calloc(cap_o, 1);
    if (!orig || !claimed || !grow((void **)&queue, &cap_q, (size_t)nr0 + 1, sizeof *queue))
        goto nomem;
    for (int32_t r = 0; r < nr0; r++)
        orig[r] = r;
    size_t qn = 0, added = 0;
    queue[qn++] = g->root;
    claimed[g->root] = true;
    for (size_t qi = 0; qi < qn; qi++) {
        int32_t r = queue[qi];
        for (int32_t ai = g->alt_off[r]; ai < g->alt_off[r + 1]; ai++) {
            for (int32_t p = g->alt[ai]; g->el[p].kind != GE_END; p++) {
                if (g->el[p].kind != GE_REF)
                    continue;
                int32_t c = g->el[p].arg, oc = orig[c];
                bool copyable = !rec[oc] && memo[oc] <= CLONE_MAX_RULE && added + memo[oc] <= CLONE_BUDGET;
                if (!claimed[c]) {
                    claimed[c] = true;
                    if (!grow((void **)&queue, &cap_q, qn + 1, sizeof *queue))
                        goto nomem;
                    queue[qn++] = c;
                    continue;
                }
                if (!copyable)
                    continue;
                /* a copy of c for this call site, appended as a new rule */
                int32_t nid = g->n_rules;
                size_t c_el = 0, c_alts = (size_t)(g->alt_off[c + 1] - g->alt_off[c]);
                for (int32_t k = g->alt_off[c]; k < g->alt_off[c + 1]; k++)
                    for (int32_t q = g->alt[k];; q++) {
                        c_el++;
                        if (g->el[q].kind == GE_END)
                            break;
                    }
                size_t ce = cap_el, ce2 = cap_el, ce3 = cap_el, cr = cap_rules, cr2 = cap_rules;
                if (!grow((void **)&g->el, &ce, g->n_el + c_el + 1, sizeof *g->el) ||
                    !grow((void **)&g->rule_of, &ce2, g->n_el + c_el + 1, sizeof *g->rule_of) ||
                    !grow((void **)&g->lit_of, &ce3, g->n_el + c_el + 1, sizeof *g->lit_of) ||
                    !grow((void **)&g->alt, &cap_alt, n_alt + c_alts + 1, sizeof *g->alt) ||
                    !grow((void **)&g->alt_off, &cr, (size_t)nid + 2, sizeof *g->alt_off) ||
                    !grow((void **)&g->rule_name, &cr2, (size_t)nid + 2, sizeof *g->rule_name) ||
                    !grow((void **)&orig, &cap_o, (size_t)nid + 1, sizeof *orig) ||
                    !grow((void **)&queue, &cap_q, qn + 1, sizeof *queue))
                    goto nomem;
                cap_el = ce;
                cap_rules = cr;
                bool *cl = realloc(claimed, cap_o);
                if (!cl)
                    goto nomem;
                claimed = cl;
                g->rule_name[nid] = strdup(g->rule_name[c]);
                if (!g->rule_name[nid])
                    goto nomem;
                g->alt_off[nid] = (int32_t)n_alt;
                for (int32_t k = g->alt_off[c]; k < g->alt_off[c + 1]; k++) {
                    g->alt[n_alt++] = (int32_t)g->n_el;
                    for (int32_t q = g->alt[k];; q++) {
                        gelem e = g->el[q];
                        if (e.kind == GE_END)
                            e.arg = nid;
                        g->el[g->n_el] = e;
                        g->rule_of[g->n_el] = nid;
                        g->lit_of[g->n_el] = g->lit_of[q];
                        g->n_el++;
                        if (e.kind == GE_END)
                            break;
                    }
                }
                g->alt_off[nid + 1] = (int32_t)n_alt;
                g->n_rules++;
                orig[nid] = oc;
                claimed[nid] = true;
                queue[qn++] = nid;
                g->el[p].arg = nid;
                added += c_el;
            }
        }
    }
    int32_t *cont = realloc(g->cont, ((size_t)g->n_rules + 1) * sizeof *cont);
    if (!cont)
        goto nomem;
    g->cont = cont;
    goto out;
nomem:
    rc = sy_err_set(err, SY_ERR_NOMEM, "out of memory compiling the grammar");
out:
    free(work);
    free(on);
    free(rec);
    free(memo);
    free(orig);
    free(queue);
    free(claimed);
    return rc;
}
