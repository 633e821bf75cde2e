/* Chat templates: the AST evaluator (statements, expressions, scopes). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat_internal.h"

struct sy_scope {
    sy_scope *parent;
    size_t n, cap;
    const char **names;
    sy_val *vals;
};

static void scope_clear(sy_scope *s)
{
    for (size_t i = 0; i < s->n; i++)
        sy_v_free(&s->vals[i]);
    free(s->names);
    free(s->vals);
    s->names = NULL;
    s->vals = NULL;
    s->n = s->cap = 0;
}

static sy_val *scope_find(sy_scope *s, const char *name)
{
    for (; s; s = s->parent)
        for (size_t i = s->n; i-- > 0;)
            if (strcmp(s->names[i], name) == 0)
                return &s->vals[i];
    return NULL;
}

/* Steals v. */
static int scope_set(sy_ct_ctx *c, sy_scope *s, const char *name, sy_val v)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->names[i], name) == 0) {
            sy_v_free(&s->vals[i]);
            s->vals[i] = v;
            return 0;
        }
    if (s->n == s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 8;
        const char **nn = realloc(s->names, nc * sizeof *nn);
        if (nn)
            s->names = nn;
        sy_val *nv = nn ? realloc(s->vals, nc * sizeof *nv) : NULL;
        if (!nv) {
            sy_v_free(&v);
            return sy_ct_fail(c, NULL, "out of memory");
        }
        s->vals = nv;
        s->cap = nc;
    }
    s->names[s->n] = name;
    s->vals[s->n++] = v;
    return 0;
}

int sy_ct_fail(sy_ct_ctx *c, const sy_node *at, const char *fmt, ...)
{
    if (!c->failed) {
        char msg[400];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        if (at)
            sy_err_set(c->err, SY_ERR_INVALID, "template error at %d:%d: %s", at->line, at->col, msg);
        else
            sy_err_set(c->err, SY_ERR_INVALID, "template error: %s", msg);
        c->failed = 1;
    }
    return -1;
}

static sy_val failv(sy_ct_ctx *c, const sy_node *at, const char *msg)
{
    sy_ct_fail(c, at, "%s", msg);
    return sy_v_undef(NULL);
}

static sy_val undef_error(sy_ct_ctx *c, const sy_node *at, sy_val u)
{
    if (u.name && u.owner)
        sy_ct_fail(c, at, "'%s object' has no attribute '%s'", u.owner, u.name);
    else if (u.name)
        sy_ct_fail(c, at, "'%s' is undefined", u.name);
    else
        sy_ct_fail(c, at, "undefined value used");
    return sy_v_undef(NULL);
}

/* ---- attribute and item access ---- */

sy_val sy_ct_getattr(sy_ct_ctx *c, const sy_node *at, sy_val obj, const char *name)
{
    if (obj.k == SV_UNDEF)
        return undef_error(c, at, obj);
    if (obj.k == SV_NS) {
        json_t *v = json_object_get(obj.j, name);
        return v ? sy_v_json(json_incref(v))
                 : sy_v_undef(sy_ct_strndup(&c->names, name, strlen(name)));
    }
    if (obj.k != SV_JSON)
        return sy_v_undef(sy_ct_strndup(&c->names, name, strlen(name)));
    const char *meth = sy_ct_is_method(obj.j, name);
    if (meth) {
        sy_val m = {.k = SV_METHOD, .j = json_incref(obj.j), .m = NULL, .name = meth};
        return m;
    }
    if (json_is_object(obj.j)) {
        json_t *v = json_object_get(obj.j, name);
        if (v)
            return sy_v_json(json_incref(v));
    }
    /* the name may point into a temporary (a subscript key): keep a copy */
    sy_val u = sy_v_undef(sy_ct_strndup(&c->names, name, strlen(name)));
    u.owner = sy_v_typename(obj);
    return u;
}

static int as_index(sy_val k, long long *out)
{
    if (k.k != SV_JSON)
        return 0;
    if (json_is_integer(k.j)) {
        *out = json_integer_value(k.j);
        return 1;
    }
    if (json_is_boolean(k.j)) {
        *out = json_is_true(k.j);
        return 1;
    }
    return 0;
}

sy_val sy_ct_getitem(sy_ct_ctx *c, const sy_node *at, sy_val obj, sy_val key)
{
    long long i;
    if (obj.k == SV_UNDEF)
        return undef_error(c, at, obj);
    if (obj.k == SV_JSON && json_is_object(obj.j) && sy_v_is_str(key)) {
        json_t *v = json_object_get(obj.j, json_string_value(key.j));
        if (v)
            return sy_v_json(json_incref(v));
    } else if (obj.k == SV_JSON && json_is_array(obj.j) && as_index(key, &i)) {
        long long n = (long long)json_array_size(obj.j);
        if (i < 0)
            i += n;
        if (i >= 0 && i < n)
            return sy_v_json(json_incref(json_array_get(obj.j, (size_t)i)));
        return sy_v_undef(NULL);
    } else if (sy_v_is_str(obj) && as_index(key, &i)) {
        const char *s = json_string_value(obj.j);
        size_t bn = json_string_length(obj.j);
        long long n = (long long)sy_utf8_len(s, bn);
        if (i < 0)
            i += n;
        if (i >= 0 && i < n) {
            size_t o = sy_utf8_off(s, bn, (size_t)i), e = sy_utf8_off(s, bn, (size_t)i + 1);
            return sy_v_str(s + o, e - o);
        }
        return sy_v_undef(NULL);
    }
    if (sy_v_is_str(key))
        return sy_ct_getattr(c, at, obj, json_string_value(key.j));
    return sy_v_undef(NULL);
}

static int slice_bound(sy_ct_ctx *c, const sy_node *e, long long len, long long step,
                       long long *out, int is_start)
{
    if (!e) {
        if (step > 0)
            *out = is_start ? 0 : len;
        else
            *out = is_start ? len - 1 : -1;
        return 0;
    }
    sy_val v = sy_ct_eval(c, e);
    long long x;
    if (c->failed)
        return -1;
    if (v.k == SV_JSON && json_is_null(v.j)) {
        sy_v_free(&v);
        return slice_bound(c, NULL, len, step, out, is_start);
    }
    if (!as_index(v, &x)) {
        sy_v_free(&v);
        return sy_ct_fail(c, e, "slice indices must be integers or None");
    }
    sy_v_free(&v);
    if (x < 0) {
        x += len;
        if (x < 0)
            x = step < 0 ? -1 : 0;
    } else if (x >= len) {
        x = step < 0 ? len - 1 : len;
    }
    *out = x;
    return 0;
}

static sy_val eval_slice(sy_ct_ctx *c, const sy_node *e)
{
    sy_val obj = sy_ct_eval(c, e->a);
    long long step = 1, start, stop, len;
    if (c->failed)
        return obj;
    if (obj.k == SV_UNDEF) {
        sy_val r = undef_error(c, e, obj);
        return r;
    }
    int is_str = sy_v_is_str(obj);
    if (!is_str && !(obj.k == SV_JSON && json_is_array(obj.j))) {
        sy_ct_fail(c, e, "'%s' object is not subscriptable with a slice", sy_v_typename(obj));
        sy_v_free(&obj);
        return sy_v_undef(NULL);
    }
    if (e->args.n) {
        sy_val sv = sy_ct_eval(c, e->args.v[0]);
        if (c->failed) {
            sy_v_free(&obj);
            return sv;
        }
        if (!(sv.k == SV_JSON && json_is_null(sv.j)) && !as_index(sv, &step)) {
            sy_v_free(&sv);
            sy_v_free(&obj);
            return failv(c, e, "slice step must be an integer");
        }
        sy_v_free(&sv);
        if (step == 0) {
            sy_v_free(&obj);
            return failv(c, e, "slice step cannot be zero");
        }
    }
    const char *s = is_str ? json_string_value(obj.j) : NULL;
    size_t bn = is_str ? json_string_length(obj.j) : 0;
    len = is_str ? (long long)sy_utf8_len(s, bn) : (long long)json_array_size(obj.j);
    if (slice_bound(c, e->b, len, step, &start, 1) || slice_bound(c, e->c, len, step, &stop, 0)) {
        sy_v_free(&obj);
        return sy_v_undef(NULL);
    }
    sy_val r;
    if (is_str) {
        size_t *offs = malloc(((size_t)len + 1) * sizeof *offs);
        sy_ct_buf b = {0};
        if (!offs) {
            sy_v_free(&obj);
            return failv(c, e, "out of memory");
        }
        size_t k = 0;
        for (size_t i = 0; i < bn; i++)
            if (((unsigned char)s[i] & 0xC0) != 0x80)
                offs[k++] = i;
        offs[k] = bn;
        int bad = sy_ct_buf_add(&b, "", 0);
        for (long long i = start; !bad && (step > 0 ? i < stop : i > stop); i += step)
            bad = sy_ct_buf_add(&b, s + offs[i], offs[i + 1] - offs[i]);
        free(offs);
        r = bad ? failv(c, e, "out of memory") : sy_v_str(b.p, b.n);
        sy_ct_buf_free(&b);
    } else {
        json_t *a = json_array();
        for (long long i = start; a && (step > 0 ? i < stop : i > stop); i += step)
            json_array_append(a, json_array_get(obj.j, (size_t)i));
        r = a ? sy_v_json(a) : failv(c, e, "out of memory");
    }
    sy_v_free(&obj);
    return r;
}

/* ---- operators ---- */

static int is_intlike(sy_val v)
{
    return v.k == SV_JSON && (json_is_integer(v.j) || json_is_boolean(v.j));
}

static long long intval(sy_val v)
{
    return json_is_integer(v.j) ? (long long)json_integer_value(v.j) : json_is_true(v.j);
}

static sy_val num_result(double d) { return sy_v_json(json_real(d)); }

static const char *opname(int op)
{
    static const char *const n[] = {"+", "-", "*", "/", "//", "%", "**", "==", "!=",
                                    "<", "<=", ">", ">=", "in", "not in"};
    return op >= 0 && op <= OP_NOTIN ? n[op] : "?";
}

static sy_val binop(sy_ct_ctx *c, const sy_node *e, int op, sy_val a, sy_val b)
{
    if (a.k == SV_UNDEF)
        return undef_error(c, e, a);
    if (b.k == SV_UNDEF)
        return undef_error(c, e, b);
    if (sy_v_is_num(a) && sy_v_is_num(b)) {
        if (is_intlike(a) && is_intlike(b) && op != OP_DIV) {
            long long x = intval(a), y = intval(b), r = 0;
            int ovf = 0;
            switch (op) {
            case OP_ADD: ovf = __builtin_add_overflow(x, y, &r); break;
            case OP_SUB: ovf = __builtin_sub_overflow(x, y, &r); break;
            case OP_MUL: ovf = __builtin_mul_overflow(x, y, &r); break;
            case OP_FLOORDIV:
            case OP_MOD:
                if (y == 0)
                    return failv(c, e, "integer division or modulo by zero");
                if (x == (-9223372036854775807LL - 1) && y == -1)
                    return failv(c, e, "integer overflow");
                r = op == OP_FLOORDIV ? x / y : x % y;
                if (op == OP_FLOORDIV && (x % y != 0) && ((x < 0) != (y < 0)))
                    r--;
                if (op == OP_MOD && r != 0 && ((r < 0) != (y < 0)))
                    r += y;
                break;
            case OP_POW:
                if (y < 0)
                    return num_result(pow((double)x, (double)y));
                /* By squaring: 0 ** 10**18 must not loop 10**18 times (found
                 * by fuzz_chat_template). Once the squared base overflows
                 * with exponent bits left, the result would overflow too. */
                r = 1;
                for (long long base = x, n = y; n > 0 && !ovf; n >>= 1) {
                    if (n & 1)
                        ovf = __builtin_mul_overflow(r, base, &r);
                    if (n > 1 && !ovf)
                        ovf = __builtin_mul_overflow(base, base, &base);
                }
                break;
            }
            if (ovf)
                return failv(c, e, "integer overflow");
            return sy_v_int(r);
        }
        double x = sy_v_num(a), y = sy_v_num(b);
        switch (op) {
        case OP_ADD: return num_result(x + y);
        case OP_SUB: return num_result(x - y);
        case OP_MUL: return num_result(x * y);
        case OP_DIV:
            if (y == 0)
                return failv(c, e, "division by zero");
            return num_result(x / y);
        case OP_FLOORDIV:
            if (y == 0)
                return failv(c, e, "float floor division by zero");
            return num_result(floor(x / y));
        case OP_MOD: {
            if (y == 0)
                return failv(c, e, "float modulo");
            double r = fmod(x, y);
            if (r != 0 && ((r < 0) != (y < 0)))
                r += y;
            return num_result(r);
        }
        case OP_POW: return num_result(pow(x, y));
        }
    }
    if (op == OP_ADD && sy_v_is_str(a) && sy_v_is_str(b)) {
        sy_ct_buf buf = {0};
        if (sy_ct_buf_add(&buf, json_string_value(a.j), json_string_length(a.j)) ||
            sy_ct_buf_add(&buf, json_string_value(b.j), json_string_length(b.j))) {
            sy_ct_buf_free(&buf);
            return failv(c, e, "string too long");
        }
        sy_val r = sy_v_str(buf.p, buf.n);
        sy_ct_buf_free(&buf);
        return r;
    }
    if (op == OP_ADD && a.k == SV_JSON && b.k == SV_JSON && json_is_array(a.j) && json_is_array(b.j)) {
        if (json_array_size(a.j) + json_array_size(b.j) > SY_CT_MAX_LIST)
            return failv(c, e, "list too long");
        json_t *r = json_array();
        if (r) {
            json_array_extend(r, a.j);
            json_array_extend(r, b.j);
        }
        return sy_v_json(r);
    }
    if (op == OP_MUL && (is_intlike(a) || is_intlike(b))) {
        sy_val seq = is_intlike(a) ? b : a;
        long long k = is_intlike(a) ? intval(a) : intval(b);
        if (sy_v_is_str(seq) || (seq.k == SV_JSON && json_is_array(seq.j))) {
            size_t sz = sy_v_is_str(seq) ? json_string_length(seq.j) : json_array_size(seq.j);
            if (k > 100000 || (k > 0 && sz * (size_t)k > SY_CT_MAX_LIST * 16))
                return failv(c, e, "sequence repetition too large");
            if (sy_v_is_str(seq)) {
                sy_ct_buf buf = {0};
                int bad = sy_ct_buf_add(&buf, "", 0);
                for (long long i = 0; i < k && !bad; i++)
                    bad = sy_ct_buf_add(&buf, json_string_value(seq.j), json_string_length(seq.j));
                sy_val r = bad ? failv(c, e, "string too long") : sy_v_str(buf.p, buf.n);
                sy_ct_buf_free(&buf);
                return r;
            }
            json_t *r = json_array();
            for (long long i = 0; r && i < k; i++)
                json_array_extend(r, seq.j);
            return sy_v_json(r);
        }
    }
    if (op == OP_ADD && sy_v_is_str(a)) {
        sy_ct_fail(c, e, "can only concatenate str (not \"%s\") to str", sy_v_typename(b));
        return sy_v_undef(NULL);
    }
    sy_ct_fail(c, e, "unsupported operand type(s) for %s: '%s' and '%s'", opname(op),
               sy_v_typename(a), sy_v_typename(b));
    return sy_v_undef(NULL);
}

/* 1/0, -1 error */
static int contains(sy_ct_ctx *c, const sy_node *e, sy_val item, sy_val cont)
{
    if (cont.k == SV_UNDEF)
        return 0;
    if (cont.k == SV_NS && sy_v_is_str(item))
        return json_object_get(cont.j, json_string_value(item.j)) != NULL;
    if (sy_v_is_str(cont)) {
        if (!sy_v_is_str(item))
            return sy_ct_fail(c, e, "'in <string>' requires string as left operand, not %s",
                              sy_v_typename(item));
        const char *h = json_string_value(cont.j), *n = json_string_value(item.j);
        size_t hn = json_string_length(cont.j), nn = json_string_length(item.j);
        if (nn == 0)
            return 1;
        for (size_t i = 0; i + nn <= hn; i++)
            if (memcmp(h + i, n, nn) == 0)
                return 1;
        return 0;
    }
    if (cont.k == SV_JSON && json_is_array(cont.j)) {
        for (size_t i = 0; i < json_array_size(cont.j); i++) {
            sy_val x = {.k = SV_JSON, .j = json_array_get(cont.j, i)};
            if (sy_v_equal(item, x))
                return 1;
        }
        return 0;
    }
    if (cont.k == SV_JSON && json_is_object(cont.j))
        return sy_v_is_str(item) && json_object_get(cont.j, json_string_value(item.j)) != NULL;
    return sy_ct_fail(c, e, "argument of type '%s' is not iterable", sy_v_typename(cont));
}

static int compare(sy_ct_ctx *c, const sy_node *e, int op, sy_val a, sy_val b)
{
    switch (op) {
    case OP_EQ: return sy_v_equal(a, b);
    case OP_NE: return !sy_v_equal(a, b);
    case OP_IN: return contains(c, e, a, b);
    case OP_NOTIN: {
        int r = contains(c, e, a, b);
        return r < 0 ? r : !r;
    }
    default: break;
    }
    int cmp;
    if (sy_v_is_num(a) && sy_v_is_num(b)) {
        if (is_intlike(a) && is_intlike(b))
            cmp = intval(a) < intval(b) ? -1 : intval(a) > intval(b);
        else
            cmp = sy_v_num(a) < sy_v_num(b) ? -1 : sy_v_num(a) > sy_v_num(b);
    } else if (sy_v_is_str(a) && sy_v_is_str(b)) {
        size_t an = json_string_length(a.j), bn = json_string_length(b.j);
        int m = memcmp(json_string_value(a.j), json_string_value(b.j), an < bn ? an : bn);
        cmp = m ? (m < 0 ? -1 : 1) : (an < bn ? -1 : an > bn);
    } else {
        if (a.k == SV_UNDEF)
            return undef_error(c, e, a), -1;
        if (b.k == SV_UNDEF)
            return undef_error(c, e, b), -1;
        return sy_ct_fail(c, e, "'%s' not supported between instances of '%s' and '%s'",
                          opname(op), sy_v_typename(a), sy_v_typename(b));
    }
    switch (op) {
    case OP_LT: return cmp < 0;
    case OP_LE: return cmp <= 0;
    case OP_GT: return cmp > 0;
    default: return cmp >= 0;
    }
}

/* ---- calls ---- */

typedef struct callargs {
    sy_val *args, *kvals;
    size_t nargs, nk;
} callargs;

static void free_args(callargs *ca)
{
    for (size_t i = 0; i < ca->nargs; i++)
        sy_v_free(&ca->args[i]);
    for (size_t i = 0; i < ca->nk; i++)
        sy_v_free(&ca->kvals[i]);
    free(ca->args);
    free(ca->kvals);
}

static int eval_args(sy_ct_ctx *c, const sy_node *e, callargs *ca)
{
    memset(ca, 0, sizeof *ca);
    ca->args = calloc(e->args.n + 1, sizeof *ca->args);
    ca->kvals = calloc(e->kwvals.n + 1, sizeof *ca->kvals);
    if (!ca->args || !ca->kvals)
        return sy_ct_fail(c, e, "out of memory");
    for (size_t i = 0; i < e->args.n && !c->failed; i++) {
        ca->args[i] = sy_ct_eval(c, e->args.v[i]);
        ca->nargs = i + 1;
    }
    for (size_t i = 0; i < e->kwvals.n && !c->failed; i++) {
        ca->kvals[i] = sy_ct_eval(c, e->kwvals.v[i]);
        ca->nk = i + 1;
    }
    return c->failed ? -1 : 0;
}

static int exec_list(sy_ct_ctx *c, const sy_nodelist *l, sy_ct_buf *out);

sy_val sy_ct_call_macro(sy_ct_ctx *c, const sy_node *at, const sy_node *m, sy_val *args,
                        size_t nargs, const char **knames, sy_val *kvals, size_t nk)
{
    if (nargs > m->nknames) {
        sy_ct_fail(c, at, "macro '%s' takes not more than %zu argument(s), got %zu", m->name,
                   m->nknames, nargs);
        return sy_v_undef(NULL);
    }
    for (size_t k = 0; k < nk; k++) {
        size_t p;
        for (p = 0; p < m->nknames; p++)
            if (strcmp(m->knames[p], knames[k]) == 0)
                break;
        if (p == m->nknames || p < nargs) {
            sy_ct_fail(c, at, "macro '%s' got an unexpected or repeated keyword argument '%s'",
                       m->name, knames[k]);
            return sy_v_undef(NULL);
        }
    }
    sy_scope s = {.parent = c->root};
    sy_scope *saved = c->scope;
    c->scope = &s;
    for (size_t p = 0; p < m->nknames && !c->failed; p++) {
        sy_val v = sy_v_undef(m->knames[p]);
        int have = 0;
        if (p < nargs) {
            v = sy_v_copy(args[p]);
            have = 1;
        }
        for (size_t k = 0; k < nk && !have; k++)
            if (strcmp(m->knames[p], knames[k]) == 0) {
                v = sy_v_copy(kvals[k]);
                have = 1;
            }
        if (!have && m->args.v[p])
            v = sy_ct_eval(c, m->args.v[p]);
        scope_set(c, &s, m->knames[p], v);
    }
    sy_ct_buf out = {0};
    int rc = c->failed ? -1 : exec_list(c, &m->body, &out);
    c->scope = saved;
    scope_clear(&s);
    sy_val r = rc < 0 ? sy_v_undef(NULL) : sy_v_str(out.p ? out.p : "", out.n);
    sy_ct_buf_free(&out);
    return r;
}

static sy_val eval_call(sy_ct_ctx *c, const sy_node *e)
{
    sy_val fn = sy_ct_eval(c, e->a);
    callargs ca = {0};
    sy_val r = sy_v_undef(NULL);
    if (c->failed)
        return fn;
    if (eval_args(c, e, &ca) == 0) {
        switch (fn.k) {
        case SV_MACRO:
            r = sy_ct_call_macro(c, e, fn.m, ca.args, ca.nargs, e->knames, ca.kvals, ca.nk);
            break;
        case SV_FUNC:
            r = sy_ct_call_builtin(c, e, fn.name, ca.args, ca.nargs, e->knames, ca.kvals, ca.nk);
            break;
        case SV_METHOD:
            r = sy_ct_call_method(c, e, fn, fn.name, ca.args, ca.nargs, e->knames, ca.kvals, ca.nk);
            break;
        case SV_UNDEF: undef_error(c, e, fn); break;
        default: sy_ct_fail(c, e, "'%s' object is not callable", sy_v_typename(fn));
        }
    }
    free_args(&ca);
    sy_v_free(&fn);
    return r;
}

/* ---- expressions ---- */

sy_val sy_ct_eval(sy_ct_ctx *c, const sy_node *e)
{
    sy_val r = sy_v_undef(NULL), a, b;
    if (c->failed)
        return r;
    if (++c->depth > SY_CT_MAX_DEPTH) {
        c->depth--;
        return failv(c, e, "expression or macro recursion too deep");
    }
    switch (e->kind) {
    case E_STR: r = sy_v_str(e->str, e->slen); break;
    case E_INT: r = sy_v_int(e->ival); break;
    case E_FLOAT: r = sy_v_json(json_real(e->fval)); break;
    case E_BOOL: r = sy_v_bool(e->op); break;
    case E_NONE: r = sy_v_none(); break;
    case E_NAME: {
        sy_val *v = scope_find(c->scope, e->name);
        if (v)
            r = sy_v_copy(*v);
        else if (sy_ct_is_builtin(e->name))
            r = (sy_val){.k = SV_FUNC, .j = NULL, .m = NULL, .name = e->name};
        else
            r = sy_v_undef(e->name);
        break;
    }
    case E_ATTR:
        a = sy_ct_eval(c, e->a);
        if (!c->failed)
            r = sy_ct_getattr(c, e, a, e->name);
        sy_v_free(&a);
        break;
    case E_ITEM:
        a = sy_ct_eval(c, e->a);
        b = sy_ct_eval(c, e->b);
        if (!c->failed)
            r = sy_ct_getitem(c, e, a, b);
        sy_v_free(&a);
        sy_v_free(&b);
        break;
    case E_SLICE: r = eval_slice(c, e); break;
    case E_CALL: r = eval_call(c, e); break;
    case E_FILTER: {
        callargs ca = {0};
        a = sy_ct_eval(c, e->a);
        if (!c->failed && eval_args(c, e, &ca) == 0)
            r = sy_ct_filter(c, e, e->name, a, ca.args, ca.nargs, e->knames, ca.kvals, ca.nk);
        free_args(&ca);
        sy_v_free(&a);
        break;
    }
    case E_TEST: {
        callargs ca = {0};
        a = sy_ct_eval(c, e->a);
        if (!c->failed && eval_args(c, e, &ca) == 0) {
            int t = sy_ct_test(c, e, e->name, a, ca.args, ca.nargs);
            if (t >= 0)
                r = sy_v_bool(e->op ? !t : t);
        }
        free_args(&ca);
        sy_v_free(&a);
        break;
    }
    case E_NEG:
    case E_POS:
        a = sy_ct_eval(c, e->a);
        if (c->failed)
            break;
        if (!sy_v_is_num(a))
            sy_ct_fail(c, e, "bad operand type for unary %c: '%s'", e->kind == E_NEG ? '-' : '+',
                       sy_v_typename(a));
        else if (e->kind == E_POS)
            r = sy_v_copy(a);
        else if (is_intlike(a) && intval(a) != (-9223372036854775807LL - 1))
            r = sy_v_int(-intval(a));
        else
            r = num_result(-sy_v_num(a));
        sy_v_free(&a);
        break;
    case E_NOT:
        a = sy_ct_eval(c, e->a);
        if (!c->failed)
            r = sy_v_bool(!sy_v_truthy(a));
        sy_v_free(&a);
        break;
    case E_AND:
    case E_OR:
        a = sy_ct_eval(c, e->a);
        if (c->failed)
            break;
        if (sy_v_truthy(a) == (e->kind == E_OR)) {
            r = a;
        } else {
            sy_v_free(&a);
            r = sy_ct_eval(c, e->b);
        }
        break;
    case E_BIN:
        a = sy_ct_eval(c, e->a);
        b = sy_ct_eval(c, e->b);
        if (!c->failed)
            r = binop(c, e, e->op, a, b);
        sy_v_free(&a);
        sy_v_free(&b);
        break;
    case E_CMP: {
        a = sy_ct_eval(c, e->args.v[0]);
        int res = 1;
        for (size_t i = 1; i < e->args.n && !c->failed && res == 1; i++) {
            b = sy_ct_eval(c, e->args.v[i]);
            if (!c->failed)
                res = compare(c, e, (int)e->kwvals.v[i - 1]->ival, a, b);
            sy_v_free(&a);
            a = b;
        }
        sy_v_free(&a);
        if (!c->failed)
            r = sy_v_bool(res == 1);
        break;
    }
    case E_CONCAT: {
        sy_ct_buf buf = {0};
        int bad = sy_ct_buf_add(&buf, "", 0);
        for (size_t i = 0; i < e->args.n && !c->failed && !bad; i++) {
            a = sy_ct_eval(c, e->args.v[i]);
            if (!c->failed)
                bad = sy_v_tostr(a, &buf);
            sy_v_free(&a);
        }
        if (bad)
            sy_ct_fail(c, e, "string too long");
        if (!c->failed)
            r = sy_v_str(buf.p, buf.n);
        sy_ct_buf_free(&buf);
        break;
    }
    case E_COND:
        a = sy_ct_eval(c, e->b);
        if (c->failed)
            break;
        if (sy_v_truthy(a))
            r = sy_ct_eval(c, e->a);
        else if (e->c)
            r = sy_ct_eval(c, e->c);
        sy_v_free(&a);
        break;
    case E_LIST: {
        json_t *l = json_array();
        for (size_t i = 0; l && i < e->args.n && !c->failed; i++) {
            a = sy_ct_eval(c, e->args.v[i]);
            json_array_append_new(l, sy_v_to_json(a));
            sy_v_free(&a);
        }
        r = sy_v_json(l);
        break;
    }
    case E_DICT: {
        json_t *d = json_object();
        for (size_t i = 0; d && i < e->args.n && !c->failed; i++) {
            sy_ct_buf kb = {0};
            a = sy_ct_eval(c, e->args.v[i]);
            b = sy_ct_eval(c, e->kwvals.v[i]);
            if (!c->failed && !sy_v_tostr(a, &kb))
                json_object_set_new(d, kb.p ? kb.p : "", sy_v_to_json(b));
            sy_ct_buf_free(&kb);
            sy_v_free(&a);
            sy_v_free(&b);
        }
        r = sy_v_json(d);
        break;
    }
    default: sy_ct_fail(c, e, "internal error: not an expression"); break;
    }
    c->depth--;
    if (c->failed)
        sy_v_free(&r);
    return r;
}

/* ---- iteration ---- */

json_t *sy_ct_iter_list(sy_ct_ctx *c, const sy_node *at, sy_val v)
{
    if (v.k == SV_UNDEF)
        return json_array();
    if (v.k == SV_JSON && json_is_array(v.j))
        return json_copy(v.j);
    json_t *l = json_array();
    if (!l) {
        sy_ct_fail(c, at, "out of memory");
        return NULL;
    }
    if ((v.k == SV_JSON || v.k == SV_NS) && json_is_object(v.j)) {
        const char *k;
        json_t *x;
        json_object_foreach(v.j, k, x) json_array_append_new(l, json_string_nocheck(k));
        return l;
    }
    if (sy_v_is_str(v)) {
        const char *s = json_string_value(v.j);
        size_t n = json_string_length(v.j), i = 0;
        while (i < n) {
            size_t j = i + 1;
            while (j < n && ((unsigned char)s[j] & 0xC0) == 0x80)
                j++;
            json_array_append_new(l, json_stringn_nocheck(s + i, j - i));
            i = j;
        }
        return l;
    }
    json_decref(l);
    sy_ct_fail(c, at, "'%s' object is not iterable", sy_v_typename(v));
    return NULL;
}

static int bind_targets(sy_ct_ctx *c, const sy_node *at, sy_scope *s, const char **names,
                        size_t n, json_t *item)
{
    if (n == 1)
        return scope_set(c, s, names[0], sy_v_json(json_incref(item)));
    if (!json_is_array(item) || json_array_size(item) != n)
        return sy_ct_fail(c, at, "cannot unpack %s into %zu variables",
                          json_is_array(item) ? "a sequence of another length" : "a non-sequence", n);
    for (size_t i = 0; i < n; i++)
        if (scope_set(c, s, names[i], sy_v_json(json_incref(json_array_get(item, i)))))
            return -1;
    return 0;
}

static int exec_for(sy_ct_ctx *c, const sy_node *nd, sy_ct_buf *out)
{
    sy_val it = sy_ct_eval(c, nd->a);
    if (c->failed)
        return -1;
    json_t *items = sy_ct_iter_list(c, nd->a, it);
    sy_v_free(&it);
    if (!items)
        return -1;
    sy_scope *saved = c->scope;
    if (nd->b) { /* for x in y if cond */
        json_t *kept = json_array();
        for (size_t i = 0; kept && i < json_array_size(items) && !c->failed; i++) {
            sy_scope s = {.parent = saved};
            c->scope = &s;
            if (!bind_targets(c, nd, &s, nd->knames, nd->nknames, json_array_get(items, i))) {
                sy_val cv = sy_ct_eval(c, nd->b);
                if (sy_v_truthy(cv))
                    json_array_append(kept, json_array_get(items, i));
                sy_v_free(&cv);
            }
            c->scope = saved;
            scope_clear(&s);
        }
        json_decref(items);
        items = kept;
        if (!items || c->failed) {
            json_decref(items);
            return sy_ct_fail(c, nd, "loop filter failed");
        }
    }
    size_t n = json_array_size(items);
    int rc = 0;
    for (size_t i = 0; i < n && rc >= 0; i++) {
        if (++c->steps > SY_CT_MAX_STEPS) {
            rc = sy_ct_fail(c, nd, "too many loop iterations");
            break;
        }
        sy_scope s = {.parent = saved};
        json_t *loop = json_object();
        if (!loop) {
            rc = sy_ct_fail(c, nd, "out of memory");
            break;
        }
        json_object_set_new(loop, "index", json_integer((json_int_t)i + 1));
        json_object_set_new(loop, "index0", json_integer((json_int_t)i));
        json_object_set_new(loop, "revindex", json_integer((json_int_t)(n - i)));
        json_object_set_new(loop, "revindex0", json_integer((json_int_t)(n - i - 1)));
        json_object_set_new(loop, "first", json_boolean(i == 0));
        json_object_set_new(loop, "last", json_boolean(i + 1 == n));
        json_object_set_new(loop, "length", json_integer((json_int_t)n));
        json_object_set_new(loop, "depth", json_integer(1));
        json_object_set_new(loop, "depth0", json_integer(0));
        if (i > 0)
            json_object_set(loop, "previtem", json_array_get(items, i - 1));
        if (i + 1 < n)
            json_object_set(loop, "nextitem", json_array_get(items, i + 1));
        c->scope = &s;
        if (scope_set(c, &s, "loop", sy_v_json(loop)) ||
            bind_targets(c, nd, &s, nd->knames, nd->nknames, json_array_get(items, i)))
            rc = -1;
        else
            rc = exec_list(c, &nd->body, out);
        c->scope = saved;
        scope_clear(&s);
        if (rc == 1) { /* break */
            rc = 0;
            break;
        }
        if (rc == 2)
            rc = 0;
    }
    json_decref(items);
    if (rc >= 0 && n == 0 && nd->orelse.n)
        rc = exec_list(c, &nd->orelse, out);
    return rc;
}

static int exec_set(sy_ct_ctx *c, const sy_node *nd, sy_val v)
{
    if (nd->name) { /* ns.attr = v */
        sy_val *ns = scope_find(c->scope, nd->knames[0]);
        if (!ns || ns->k != SV_NS) {
            sy_v_free(&v);
            return sy_ct_fail(c, nd, "cannot assign attribute '%s' on '%s': not a namespace",
                              nd->name, nd->knames[0]);
        }
        if (v.k == SV_UNDEF)
            json_object_del(ns->j, nd->name);
        else
            json_object_set_new(ns->j, nd->name, sy_v_to_json(v));
        sy_v_free(&v);
        return 0;
    }
    if (nd->nknames == 1)
        return scope_set(c, c->scope, nd->knames[0], v);
    int rc = -1;
    if (v.k == SV_JSON && json_is_array(v.j))
        rc = bind_targets(c, nd, c->scope, nd->knames, nd->nknames, v.j);
    else
        sy_ct_fail(c, nd, "cannot unpack a non-sequence");
    sy_v_free(&v);
    return rc;
}

static int exec_node(sy_ct_ctx *c, const sy_node *nd, sy_ct_buf *out)
{
    switch (nd->kind) {
    case N_TEXT:
        if (sy_ct_buf_add(out, nd->str, nd->slen))
            return sy_ct_fail(c, nd, "output exceeds %u bytes", SY_CT_MAX_OUTPUT);
        return 0;
    case N_OUTPUT: {
        sy_val v = sy_ct_eval(c, nd->a);
        if (c->failed)
            return -1;
        int bad = sy_v_tostr(v, out);
        sy_v_free(&v);
        return bad ? sy_ct_fail(c, nd, "output exceeds %u bytes", SY_CT_MAX_OUTPUT) : 0;
    }
    case N_IF: {
        sy_val v = sy_ct_eval(c, nd->a);
        if (c->failed)
            return -1;
        int t = sy_v_truthy(v);
        sy_v_free(&v);
        return exec_list(c, t ? &nd->body : &nd->orelse, out);
    }
    case N_FOR: return exec_for(c, nd, out);
    case N_SET: {
        sy_val v = sy_ct_eval(c, nd->a);
        if (c->failed)
            return -1;
        return exec_set(c, nd, v);
    }
    case N_SETBLOCK: {
        sy_ct_buf b = {0};
        int rc = exec_list(c, &nd->body, &b);
        if (rc >= 0)
            rc = scope_set(c, c->scope, nd->knames[0], sy_v_str(b.p ? b.p : "", b.n));
        sy_ct_buf_free(&b);
        return rc;
    }
    case N_MACRO: return scope_set(c, c->scope, nd->name, (sy_val){.k = SV_MACRO, .j = NULL, .m = nd, .name = nd->name});
    case N_BREAK: return 1;
    case N_CONTINUE: return 2;
    default: return sy_ct_fail(c, nd, "internal error: not a statement");
    }
}

static int exec_list(sy_ct_ctx *c, const sy_nodelist *l, sy_ct_buf *out)
{
    if (++c->depth > SY_CT_MAX_DEPTH) {
        c->depth--;
        return sy_ct_fail(c, l->n ? l->v[0] : NULL, "template recursion too deep");
    }
    int rc = 0;
    for (size_t i = 0; i < l->n && rc == 0; i++)
        rc = exec_node(c, l->v[i], out);
    c->depth--;
    return c->failed ? -1 : rc;
}

int sy_chat_template_render(const sy_chat_template *t, json_t *messages, json_t *tools,
                            int add_generation_prompt, const char *bos_token,
                            const char *eos_token, json_t *kwargs, char **out, size_t *len,
                            sy_err *err)
{
    return sy_chat_template_render_at(t, messages, tools, add_generation_prompt, bos_token, eos_token,
                                      kwargs, SY_CHAT_FROZEN_TIME, out, len, err);
}

int sy_chat_template_render_at(const sy_chat_template *t, json_t *messages, json_t *tools,
                               int add_generation_prompt, const char *bos_token,
                               const char *eos_token, json_t *kwargs, int64_t now_unix, char **out,
                               size_t *len, sy_err *err)
{
    *out = NULL;
    if (len)
        *len = 0;
    if (!t || !messages)
        return sy_err_set(err, SY_ERR_INVALID, "render: template and messages are required");
    sy_scope root = {0};
    sy_ct_ctx c = {.t = t, .root = &root, .scope = &root, .err = err, .now_unix = now_unix};
    int rc = 0;
    rc |= scope_set(&c, &root, "messages", sy_v_json(json_incref(messages)));
    rc |= scope_set(&c, &root, "tools", tools ? sy_v_json(json_incref(tools)) : sy_v_none());
    rc |= scope_set(&c, &root, "documents", sy_v_none());
    rc |= scope_set(&c, &root, "add_generation_prompt", sy_v_bool(add_generation_prompt));
    if (bos_token)
        rc |= scope_set(&c, &root, "bos_token", sy_v_str(bos_token, strlen(bos_token)));
    if (eos_token)
        rc |= scope_set(&c, &root, "eos_token", sy_v_str(eos_token, strlen(eos_token)));
    if (kwargs && json_is_object(kwargs)) {
        const char *k;
        json_t *v;
        json_object_foreach(kwargs, k, v) rc |= scope_set(&c, &root, k, sy_v_json(json_incref(v)));
    }
    sy_ct_buf b = {0};
    if (rc == 0 && sy_ct_buf_add(&b, "", 0))
        rc = sy_ct_fail(&c, NULL, "out of memory");
    if (rc == 0)
        rc = exec_list(&c, &t->body, &b);
    scope_clear(&root);
    sy_ct_arena_free(&c.names);
    if (rc < 0 || c.failed) {
        sy_ct_buf_free(&b);
        return SY_ERR_INVALID;
    }
    *out = b.p;
    if (len)
        *len = b.n;
    return 0;
}
