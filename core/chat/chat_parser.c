/* Chat templates: tokens -> AST (jinja2's grammar and operator precedence). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat_internal.h"

typedef struct parser {
    sy_ct_arena *a;
    const sy_ct_tok *t;
    size_t n, i;
    int depth;
    sy_err *err;
    int failed;
} parser;

static const char *tokdesc(const sy_ct_tok *t, char *buf, size_t cap)
{
    switch (t->type) {
    case TK_EOF: return "end of template";
    case TK_TEXT: return "template text";
    case TK_VAR_BEGIN: return "'{{'";
    case TK_VAR_END: return "'}}'";
    case TK_BLOCK_BEGIN: return "'{%'";
    case TK_BLOCK_END: return "'%}'";
    case TK_STRING: return "a string literal";
    case TK_INT: case TK_FLOAT: return "a number";
    default:
        snprintf(buf, cap, "'%.*s'", (int)(t->n > 40 ? 40 : t->n), t->s);
        return buf;
    }
}

static void *pfail(parser *P, const char *expected)
{
    if (!P->failed) {
        char b[64];
        const sy_ct_tok *t = &P->t[P->i < P->n ? P->i : P->n - 1];
        sy_err_set(P->err, SY_ERR_INVALID, "template syntax error at %d:%d: expected %s, found %s",
                   t->line, t->col, expected, tokdesc(t, b, sizeof b));
        P->failed = 1;
    }
    return NULL;
}

static void *oom(parser *P)
{
    if (!P->failed)
        sy_err_set(P->err, SY_ERR_NOMEM, "out of memory while parsing template");
    P->failed = 1;
    return NULL;
}

static const sy_ct_tok *cur(parser *P) { return &P->t[P->i]; }
static void adv(parser *P)
{
    if (P->i + 1 < P->n)
        P->i++;
}

static int is_op(parser *P, const char *op)
{
    const sy_ct_tok *t = cur(P);
    return t->type == TK_OP && t->n == strlen(op) && memcmp(t->s, op, t->n) == 0;
}
static int is_name(parser *P, const char *nm)
{
    const sy_ct_tok *t = cur(P);
    return t->type == TK_NAME && t->n == strlen(nm) && memcmp(t->s, nm, t->n) == 0;
}
static int is_name_at(parser *P, size_t k, const char *nm)
{
    if (P->i + k >= P->n)
        return 0;
    const sy_ct_tok *t = &P->t[P->i + k];
    return t->type == TK_NAME && t->n == strlen(nm) && memcmp(t->s, nm, t->n) == 0;
}
static int skip_op(parser *P, const char *op)
{
    if (is_op(P, op)) {
        adv(P);
        return 1;
    }
    return 0;
}
static int expect_op(parser *P, const char *op)
{
    if (skip_op(P, op))
        return 1;
    char b[16];
    snprintf(b, sizeof b, "'%s'", op);
    pfail(P, b);
    return 0;
}

/* Room for one more of n elem-byte elements: arena memory is never freed
 * on its own, so the array moves to a copy twice the size (4 at first). */
static void *arena_grow(sy_ct_arena *a, const void *v, size_t n, size_t *cap, size_t elem)
{
    const size_t nc = *cap ? *cap * 2 : 4;
    void *nv = sy_ct_alloc(a, nc * elem);
    if (!nv)
        return NULL;
    if (n)
        memcpy(nv, v, n * elem);
    *cap = nc;
    return nv;
}

int sy_ct_list_push(sy_ct_arena *a, sy_nodelist *l, sy_node *n)
{
    if (l->n == l->cap) {
        sy_node **nv = arena_grow(a, l->v, l->n, &l->cap, sizeof *nv);
        if (!nv)
            return -1;
        l->v = nv;
    }
    l->v[l->n++] = n;
    return 0;
}

static int push_name(parser *P, sy_node *nd, const char *name)
{
    if (nd->nknames == nd->capknames) {
        const char **nv = arena_grow(P->a, nd->knames, nd->nknames, &nd->capknames, sizeof *nv);
        if (!nv)
            return -1;
        nd->knames = nv;
    }
    nd->knames[nd->nknames++] = name;
    return 0;
}

static sy_node *mk(parser *P, int kind, const sy_ct_tok *at)
{
    sy_node *nd = sy_ct_alloc(P->a, sizeof *nd);
    if (!nd)
        return oom(P);
    nd->kind = kind;
    nd->line = at->line;
    nd->col = at->col;
    return nd;
}

static const char *tokname(parser *P, const sy_ct_tok *t)
{
    const char *s = sy_ct_strndup(P->a, t->s, t->n);
    if (!s)
        oom(P);
    return s;
}

static sy_node *p_expr(parser *P);
static sy_node *p_unary(parser *P, int with_filter);
static sy_node *p_or(parser *P);

static int enter(parser *P)
{
    if (++P->depth > SY_CT_MAX_DEPTH) {
        const sy_ct_tok *t = cur(P);
        if (!P->failed)
            sy_err_set(P->err, SY_ERR_INVALID, "template too deeply nested at %d:%d (limit %d)",
                       t->line, t->col, SY_CT_MAX_DEPTH);
        P->failed = 1;
        return 0;
    }
    return 1;
}

/* Before each item of a comma-separated list closed by `close` (a trailing
 * comma allowed), done saying whether an item came before: 1 when another
 * item follows, 0 at the close (not consumed), -1 on a syntax error. */
static int more_items(parser *P, const char *close, int done)
{
    if (is_op(P, close))
        return 0;
    if (done && !expect_op(P, ","))
        return -1;
    return !is_op(P, close);
}

/* ( args ) : positional then keyword (name=expr) */
static int p_callargs(parser *P, sy_node *nd)
{
    if (!expect_op(P, "("))
        return -1;
    int more;
    while ((more = more_items(P, ")", nd->args.n || nd->nknames)) > 0) {
        if (cur(P)->type == TK_NAME && P->i + 1 < P->n && P->t[P->i + 1].type == TK_OP &&
            P->t[P->i + 1].n == 1 && P->t[P->i + 1].s[0] == '=') {
            const char *k = tokname(P, cur(P));
            adv(P);
            adv(P);
            sy_node *v = p_expr(P);
            if (!k || !v || push_name(P, nd, k) || sy_ct_list_push(P->a, &nd->kwvals, v))
                return P->failed ? -1 : (oom(P), -1);
        } else {
            if (nd->nknames) {
                pfail(P, "a keyword argument (positional after keyword)");
                return -1;
            }
            sy_node *v = p_expr(P);
            if (!v || sy_ct_list_push(P->a, &nd->args, v))
                return P->failed ? -1 : (oom(P), -1);
        }
    }
    if (more < 0)
        return -1;
    adv(P);
    return 0;
}

static sy_node *p_primary(parser *P)
{
    const sy_ct_tok *t = cur(P);
    sy_node *nd;
    if (!enter(P))
        return NULL;
    if (t->type == TK_NAME) {
        if (is_name(P, "true") || is_name(P, "True") || is_name(P, "false") ||
            is_name(P, "False")) {
            if (!(nd = mk(P, E_BOOL, t)))
                return NULL;
            nd->op = t->s[0] == 't' || t->s[0] == 'T';
        } else if (is_name(P, "none") || is_name(P, "None")) {
            nd = mk(P, E_NONE, t);
        } else {
            if ((nd = mk(P, E_NAME, t)))
                nd->name = tokname(P, t);
        }
        adv(P);
    } else if (t->type == TK_STRING) {
        if (!(nd = mk(P, E_STR, t)))
            return NULL;
        nd->str = t->s;
        nd->slen = t->n;
        adv(P);
        /* adjacent literals concatenate */
        while (cur(P)->type == TK_STRING) {
            const sy_ct_tok *u = cur(P);
            char *s = sy_ct_alloc(P->a, nd->slen + u->n + 1);
            if (!s)
                return oom(P);
            memcpy(s, nd->str, nd->slen);
            memcpy(s + nd->slen, u->s, u->n);
            nd->str = s;
            nd->slen += u->n;
            adv(P);
        }
    } else if (t->type == TK_INT || t->type == TK_FLOAT) {
        if (!(nd = mk(P, t->type == TK_INT ? E_INT : E_FLOAT, t)))
            return NULL;
        nd->ival = t->ival;
        nd->fval = t->fval;
        adv(P);
    } else if (is_op(P, "(")) {
        adv(P);
        if (is_op(P, ")")) {
            adv(P);
            nd = mk(P, E_LIST, t);
        } else {
            nd = p_expr(P);
            if (!nd)
                return NULL;
            if (is_op(P, ",")) { /* tuple */
                sy_node *tu = mk(P, E_LIST, t);
                if (!tu || sy_ct_list_push(P->a, &tu->args, nd))
                    return oom(P);
                while (skip_op(P, ",")) {
                    if (is_op(P, ")"))
                        break;
                    sy_node *x = p_expr(P);
                    if (!x || sy_ct_list_push(P->a, &tu->args, x))
                        return P->failed ? NULL : oom(P);
                }
                nd = tu;
            }
            if (!expect_op(P, ")"))
                return NULL;
        }
    } else if (is_op(P, "[")) {
        adv(P);
        if (!(nd = mk(P, E_LIST, t)))
            return NULL;
        int more;
        while ((more = more_items(P, "]", nd->args.n > 0)) > 0) {
            sy_node *x = p_expr(P);
            if (!x || sy_ct_list_push(P->a, &nd->args, x))
                return P->failed ? NULL : oom(P);
        }
        if (more < 0)
            return NULL;
        adv(P);
    } else if (is_op(P, "{")) {
        adv(P);
        if (!(nd = mk(P, E_DICT, t)))
            return NULL;
        int more;
        while ((more = more_items(P, "}", nd->args.n > 0)) > 0) {
            sy_node *k = p_expr(P);
            if (!k || !expect_op(P, ":"))
                return NULL;
            sy_node *v = p_expr(P);
            if (!v || sy_ct_list_push(P->a, &nd->args, k) || sy_ct_list_push(P->a, &nd->kwvals, v))
                return P->failed ? NULL : oom(P);
        }
        if (more < 0)
            return NULL;
        adv(P);
    } else {
        return pfail(P, "an expression");
    }
    P->depth--;
    return nd;
}

/* callee(args...), the call's node anchored at t (the '('). */
static sy_node *p_call(parser *P, sy_node *callee, const sy_ct_tok *t)
{
    sy_node *x = mk(P, E_CALL, t);
    if (!x)
        return NULL;
    x->a = callee;
    return p_callargs(P, x) ? NULL : x;
}

static sy_node *p_postfix(parser *P, sy_node *nd)
{
    while (nd) {
        const sy_ct_tok *t = cur(P);
        if (is_op(P, ".")) {
            adv(P);
            const sy_ct_tok *u = cur(P);
            if (u->type == TK_NAME) {
                sy_node *x = mk(P, E_ATTR, t);
                if (!x)
                    return NULL;
                x->a = nd;
                x->name = tokname(P, u);
                nd = x;
            } else if (u->type == TK_INT) {
                sy_node *x = mk(P, E_ITEM, t), *k = mk(P, E_INT, u);
                if (!x || !k)
                    return NULL;
                k->ival = u->ival;
                x->a = nd;
                x->b = k;
                nd = x;
            } else {
                return pfail(P, "an attribute name after '.'");
            }
            adv(P);
        } else if (is_op(P, "[")) {
            adv(P);
            sy_node *parts[3] = {NULL, NULL, NULL};
            int slice = 0, k = 0;
            for (;;) {
                if (!is_op(P, ":") && !is_op(P, "]")) {
                    if (!(parts[k] = p_expr(P)))
                        return NULL;
                }
                if (is_op(P, ":") && k < 2) {
                    slice = 1;
                    k++;
                    adv(P);
                    continue;
                }
                break;
            }
            if (!expect_op(P, "]"))
                return NULL;
            if (!slice && !parts[0])
                return pfail(P, "a subscript");
            sy_node *x = mk(P, slice ? E_SLICE : E_ITEM, t);
            if (!x)
                return NULL;
            x->a = nd;
            if (slice) {
                x->args.v = NULL;
                x->b = parts[0];
                x->c = parts[1];
                x->kwvals.n = 0;
                if (parts[2] && sy_ct_list_push(P->a, &x->args, parts[2]))
                    return oom(P);
            } else {
                x->b = parts[0];
            }
            nd = x;
        } else if (is_op(P, "(")) {
            if (!(nd = p_call(P, nd, t)))
                return NULL;
        } else {
            break;
        }
    }
    return nd;
}

static const char *dotted_name(parser *P)
{
    if (cur(P)->type != TK_NAME)
        return pfail(P, "a filter or test name");
    const char *nm = tokname(P, cur(P));
    adv(P);
    return nm;
}

static sy_node *p_filters(parser *P, sy_node *nd)
{
    while (nd) {
        const sy_ct_tok *t = cur(P);
        if (is_op(P, "|")) {
            adv(P);
            sy_node *x = mk(P, E_FILTER, t);
            if (!x || !(x->name = dotted_name(P)))
                return NULL;
            x->a = nd;
            if (is_op(P, "(") && p_callargs(P, x))
                return NULL;
            nd = x;
        } else if (is_name(P, "is")) {
            adv(P);
            sy_node *x = mk(P, E_TEST, t);
            if (!x)
                return NULL;
            if (is_name(P, "not")) {
                x->op = 1;
                adv(P);
            }
            if (!(x->name = dotted_name(P)))
                return NULL;
            x->a = nd;
            const sy_ct_tok *u = cur(P);
            if (is_op(P, "(")) {
                if (p_callargs(P, x))
                    return NULL;
            } else if ((u->type == TK_NAME || u->type == TK_STRING || u->type == TK_INT ||
                        u->type == TK_FLOAT || is_op(P, "[") || is_op(P, "{")) &&
                       !is_name(P, "else") && !is_name(P, "or") && !is_name(P, "and") &&
                       !is_name(P, "is") && !is_name(P, "in") && !is_name(P, "not") &&
                       !is_name(P, "if")) {
                sy_node *arg = p_postfix(P, p_primary(P));
                if (!arg || sy_ct_list_push(P->a, &x->args, arg))
                    return P->failed ? NULL : oom(P);
            }
            nd = x;
        } else if (is_op(P, "(")) {
            if (!(nd = p_call(P, nd, t)))
                return NULL;
        } else {
            break;
        }
    }
    return nd;
}

static sy_node *p_unary(parser *P, int with_filter)
{
    const sy_ct_tok *t = cur(P);
    sy_node *nd;
    if (!enter(P))
        return NULL;
    if (is_op(P, "-") || is_op(P, "+")) {
        adv(P);
        if (!(nd = mk(P, t->s[0] == '-' ? E_NEG : E_POS, t)))
            return NULL;
        if (!(nd->a = p_unary(P, 0)))
            return NULL;
    } else {
        nd = p_primary(P);
    }
    nd = p_postfix(P, nd);
    if (with_filter)
        nd = p_filters(P, nd);
    P->depth--;
    return nd;
}

static sy_node *binop(parser *P, const sy_ct_tok *t, int op, sy_node *l, sy_node *r)
{
    if (!l || !r)
        return NULL;
    sy_node *x = mk(P, E_BIN, t);
    if (!x)
        return NULL;
    x->op = op;
    x->a = l;
    x->b = r;
    return x;
}

static sy_node *p_pow(parser *P)
{
    sy_node *l = p_unary(P, 1);
    while (l && is_op(P, "**")) {
        const sy_ct_tok *t = cur(P);
        adv(P);
        l = binop(P, t, OP_POW, l, p_unary(P, 1));
    }
    return l;
}

static sy_node *p_math2(parser *P)
{
    sy_node *l = p_pow(P);
    while (l) {
        const sy_ct_tok *t = cur(P);
        int op;
        if (is_op(P, "*"))
            op = OP_MUL;
        else if (is_op(P, "/"))
            op = OP_DIV;
        else if (is_op(P, "//"))
            op = OP_FLOORDIV;
        else if (is_op(P, "%"))
            op = OP_MOD;
        else
            break;
        adv(P);
        l = binop(P, t, op, l, p_pow(P));
    }
    return l;
}

static sy_node *p_concat(parser *P)
{
    sy_node *l = p_math2(P);
    if (!l || !is_op(P, "~"))
        return l;
    sy_node *x = mk(P, E_CONCAT, cur(P));
    if (!x || sy_ct_list_push(P->a, &x->args, l))
        return P->failed ? NULL : oom(P);
    while (skip_op(P, "~")) {
        sy_node *r = p_math2(P);
        if (!r || sy_ct_list_push(P->a, &x->args, r))
            return P->failed ? NULL : oom(P);
    }
    return x;
}

static sy_node *p_math1(parser *P)
{
    sy_node *l = p_concat(P);
    while (l && (is_op(P, "+") || is_op(P, "-"))) {
        const sy_ct_tok *t = cur(P);
        adv(P);
        l = binop(P, t, t->s[0] == '+' ? OP_ADD : OP_SUB, l, p_concat(P));
    }
    return l;
}

static sy_node *p_compare(parser *P)
{
    const sy_ct_tok *t0 = cur(P);
    sy_node *l = p_math1(P);
    sy_node *x = NULL;
    while (l) {
        int op;
        if (is_op(P, "=="))
            op = OP_EQ;
        else if (is_op(P, "!="))
            op = OP_NE;
        else if (is_op(P, "<"))
            op = OP_LT;
        else if (is_op(P, "<="))
            op = OP_LE;
        else if (is_op(P, ">"))
            op = OP_GT;
        else if (is_op(P, ">="))
            op = OP_GE;
        else if (is_name(P, "in"))
            op = OP_IN;
        else if (is_name(P, "not") && is_name_at(P, 1, "in")) {
            op = OP_NOTIN;
            adv(P);
        } else
            break;
        adv(P);
        if (!x) {
            if (!(x = mk(P, E_CMP, t0)) || sy_ct_list_push(P->a, &x->args, l))
                return P->failed ? NULL : oom(P);
        }
        sy_node *r = p_math1(P);
        if (!r)
            return NULL;
        /* operator stored on the right operand's wrapper: kwvals holds ops as E_INT */
        sy_node *opn = mk(P, E_INT, t0);
        if (!opn || sy_ct_list_push(P->a, &x->args, r) || sy_ct_list_push(P->a, &x->kwvals, opn))
            return P->failed ? NULL : oom(P);
        opn->ival = op;
    }
    return x ? x : l;
}

static sy_node *p_not(parser *P)
{
    if (is_name(P, "not")) {
        const sy_ct_tok *t = cur(P);
        adv(P);
        if (!enter(P))
            return NULL;
        sy_node *x = mk(P, E_NOT, t);
        if (!x || !(x->a = p_not(P)))
            return NULL;
        P->depth--;
        return x;
    }
    return p_compare(P);
}

/* operand (keyword operand)*, left-associative: 'and' and 'or'. */
static sy_node *p_logic(parser *P, const char *keyword, int kind, sy_node *(*operand)(parser *))
{
    sy_node *l = operand(P);
    while (l && is_name(P, keyword)) {
        sy_node *x = mk(P, kind, cur(P));
        adv(P);
        if (!x || !(x->b = operand(P)))
            return NULL;
        x->a = l;
        l = x;
    }
    return l;
}

static sy_node *p_and(parser *P) { return p_logic(P, "and", E_AND, p_not); }

static sy_node *p_or(parser *P) { return p_logic(P, "or", E_OR, p_and); }

static sy_node *p_expr(parser *P)
{
    if (!enter(P))
        return NULL;
    sy_node *l = p_or(P);
    while (l && is_name(P, "if")) {
        sy_node *x = mk(P, E_COND, cur(P));
        adv(P);
        if (!x || !(x->b = p_or(P)))
            return NULL;
        x->a = l;
        if (is_name(P, "else")) {
            adv(P);
            if (!(x->c = p_expr(P)))
                return NULL;
        }
        l = x;
    }
    P->depth--;
    return l;
}

/* ---- statements ---- */

static int p_body(parser *P, sy_nodelist *body, const char *const *ends, int *which);

static int expect_block_end(parser *P)
{
    if (cur(P)->type != TK_BLOCK_END) {
        pfail(P, "'%}'");
        return -1;
    }
    adv(P);
    return 0;
}

/* The '%}' closing a statement, then its body up to "{% end" (consumed). */
static int p_block_to(parser *P, sy_nodelist *body, const char *end)
{
    const char *const ends[] = {end, NULL};
    int which = 0;
    return expect_block_end(P) || p_body(P, body, ends, &which) ? -1 : 0;
}

static int p_targets(parser *P, sy_node *nd)
{
    do {
        if (cur(P)->type != TK_NAME) {
            pfail(P, "a variable name");
            return -1;
        }
        const char *nm = tokname(P, cur(P));
        if (!nm || push_name(P, nd, nm)) {
            oom(P);
            return -1;
        }
        adv(P);
    } while (skip_op(P, ","));
    return 0;
}

static sy_node *p_stmt(parser *P)
{
    const sy_ct_tok *t = cur(P);
    if (t->type != TK_NAME)
        return pfail(P, "a statement name");
    if (!enter(P))
        return NULL;
    sy_node *nd = NULL;
    int which = 0;
    if (is_name(P, "if")) {
        adv(P);
        nd = mk(P, N_IF, t);
        if (!nd || !(nd->a = p_expr(P)) || expect_block_end(P))
            return NULL;
        static const char *const ends[] = {"elif", "else", "endif", NULL};
        if (p_body(P, &nd->body, ends, &which))
            return NULL;
        sy_node *tail = nd;
        while (which == 0) { /* elif */
            sy_node *e = mk(P, N_IF, cur(P));
            if (!e || !(e->a = p_expr(P)) || expect_block_end(P))
                return NULL;
            if (sy_ct_list_push(P->a, &tail->orelse, e))
                return oom(P);
            if (p_body(P, &e->body, ends, &which))
                return NULL;
            tail = e;
        }
        if (which == 1) {
            if (p_block_to(P, &tail->orelse, "endif"))
                return NULL;
        }
    } else if (is_name(P, "for")) {
        adv(P);
        nd = mk(P, N_FOR, t);
        if (!nd || p_targets(P, nd))
            return NULL;
        if (!is_name(P, "in"))
            return pfail(P, "'in'");
        adv(P);
        if (!(nd->a = p_or(P)))
            return NULL;
        if (is_name(P, "if")) {
            adv(P);
            if (!(nd->b = p_expr(P)))
                return NULL;
        }
        if (is_name(P, "recursive"))
            return pfail(P, "'%}' (recursive loops are not supported)");
        if (expect_block_end(P))
            return NULL;
        static const char *const ends[] = {"else", "endfor", NULL};
        if (p_body(P, &nd->body, ends, &which))
            return NULL;
        if (which == 0) {
            if (p_block_to(P, &nd->orelse, "endfor"))
                return NULL;
        }
    } else if (is_name(P, "set")) {
        adv(P);
        nd = mk(P, N_SET, t);
        if (!nd || p_targets(P, nd))
            return NULL;
        if (nd->nknames == 1 && is_op(P, ".")) {
            adv(P);
            if (cur(P)->type != TK_NAME)
                return pfail(P, "an attribute name");
            nd->name = tokname(P, cur(P));
            adv(P);
        }
        if (skip_op(P, "=")) {
            if (!(nd->a = p_expr(P)))
                return NULL;
            if (is_op(P, ",")) { /* set a, b = x, y */
                sy_node *tu = mk(P, E_LIST, t);
                if (!tu || sy_ct_list_push(P->a, &tu->args, nd->a))
                    return oom(P);
                while (skip_op(P, ",")) {
                    sy_node *x = p_expr(P);
                    if (!x || sy_ct_list_push(P->a, &tu->args, x))
                        return P->failed ? NULL : oom(P);
                }
                nd->a = tu;
            }
        } else if (cur(P)->type == TK_BLOCK_END && nd->nknames == 1 && !nd->name) {
            nd->kind = N_SETBLOCK;
            if (p_block_to(P, &nd->body, "endset"))
                return NULL;
            P->depth--;
            return expect_block_end(P) ? NULL : nd;
        } else {
            return pfail(P, "'='");
        }
    } else if (is_name(P, "macro")) {
        adv(P);
        nd = mk(P, N_MACRO, t);
        if (!nd)
            return NULL;
        if (cur(P)->type != TK_NAME)
            return pfail(P, "a macro name");
        nd->name = tokname(P, cur(P));
        adv(P);
        if (!expect_op(P, "("))
            return NULL;
        while (!is_op(P, ")")) {
            if (nd->nknames && !expect_op(P, ","))
                return NULL;
            if (cur(P)->type != TK_NAME)
                return pfail(P, "a parameter name");
            const char *pn = tokname(P, cur(P));
            adv(P);
            sy_node *def = NULL;
            if (skip_op(P, "=") && !(def = p_expr(P)))
                return NULL;
            if (!pn || push_name(P, nd, pn) || sy_ct_list_push(P->a, &nd->args, def))
                return oom(P);
        }
        adv(P);
        if (p_block_to(P, &nd->body, "endmacro"))
            return NULL;
    } else if (is_name(P, "break") || is_name(P, "continue")) {
        nd = mk(P, is_name(P, "break") ? N_BREAK : N_CONTINUE, t);
        adv(P);
    } else if (is_name(P, "generation")) {
        adv(P);
        nd = mk(P, N_IF, t); /* renders its body: if true */
        sy_node *c = mk(P, E_BOOL, t);
        if (!nd || !c)
            return NULL;
        c->op = 1;
        nd->a = c;
        if (p_block_to(P, &nd->body, "endgeneration"))
            return NULL;
    } else {
        return pfail(P, "a supported statement (if, for, set, macro, break, continue)");
    }
    if (!nd || expect_block_end(P))
        return NULL;
    P->depth--;
    return nd;
}

/* Parses statements until "{% <one of ends>" (the end name is consumed,
 * *which = its index) or, with ends NULL, end of template. */
static int p_body(parser *P, sy_nodelist *body, const char *const *ends, int *which)
{
    for (;;) {
        const sy_ct_tok *t = cur(P);
        sy_node *nd = NULL;
        if (t->type == TK_EOF) {
            if (!ends)
                return 0;
            char b[64];
            snprintf(b, sizeof b, "'{%% %s %%}'", ends[0] ? ends[ends[1] ? 1 : 0] : "end");
            for (int i = 0; ends[i]; i++)
                if (!strncmp(ends[i], "end", 3))
                    snprintf(b, sizeof b, "'{%% %s %%}'", ends[i]);
            pfail(P, b);
            return -1;
        }
        if (t->type == TK_TEXT) {
            if (!(nd = mk(P, N_TEXT, t)))
                return -1;
            nd->str = t->s;
            nd->slen = t->n;
            adv(P);
        } else if (t->type == TK_VAR_BEGIN) {
            adv(P);
            if (!(nd = mk(P, N_OUTPUT, t)) || !(nd->a = p_expr(P)))
                return -1;
            if (cur(P)->type != TK_VAR_END) {
                pfail(P, "'}}'");
                return -1;
            }
            adv(P);
        } else if (t->type == TK_BLOCK_BEGIN) {
            adv(P);
            if (ends && cur(P)->type == TK_NAME) {
                for (int i = 0; ends[i]; i++)
                    if (is_name(P, ends[i])) {
                        *which = i;
                        adv(P);
                        return 0;
                    }
            }
            const sy_ct_tok *u = cur(P);
            if (u->type == TK_NAME && (is_name(P, "endif") || is_name(P, "endfor") ||
                                       is_name(P, "elif") || is_name(P, "else") ||
                                       is_name(P, "endmacro") || is_name(P, "endset"))) {
                pfail(P, ends ? "the end of the enclosing block" : "a statement");
                return -1;
            }
            if (!(nd = p_stmt(P)))
                return -1;
        } else {
            pfail(P, "template text, '{{' or '{%'");
            return -1;
        }
        if (sy_ct_list_push(P->a, body, nd)) {
            oom(P);
            return -1;
        }
    }
}

int sy_ct_parse(sy_chat_template *t, const sy_ct_tok *toks, size_t ntoks, sy_err *err)
{
    parser P = {.a = &t->arena, .t = toks, .n = ntoks, .err = err};
    int which = 0;
    if (p_body(&P, &t->body, NULL, &which))
        return P.failed ? SY_ERR_INVALID : SY_ERR_NOMEM;
    (void)p_or;
    return 0;
}
