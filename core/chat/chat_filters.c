/* Chat templates: filters, tests, str/dict/list methods and global
 * functions (range, namespace, raise_exception, strftime_now, dict). */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat/chat_internal.h"

static sy_val *argp(size_t i, const char *name, sy_val *args, size_t nargs, const char **knames,
                    sy_val *kvals, size_t nk)
{
    if (i < nargs)
        return &args[i];
    for (size_t k = 0; k < nk; k++)
        if (name && strcmp(knames[k], name) == 0)
            return &kvals[k];
    return NULL;
}
#define ARG(i, nm) argp((i), (nm), args, nargs, knames, kvals, nk)

static sy_val fail(sy_ct_ctx *c, const sy_node *at, const char *msg)
{
    sy_ct_fail(c, at, "%s", msg);
    return sy_v_undef(NULL);
}

static int is_none(const sy_val *v) { return !v || (v->k == SV_JSON && json_is_null(v->j)); }

/* str(v) as a new string value; also returns the bytes through buf */
static int to_buf(sy_ct_ctx *c, const sy_node *at, sy_val v, sy_ct_buf *b)
{
    if (sy_ct_buf_add(b, "", 0) || sy_v_tostr(v, b))
        return sy_ct_fail(c, at, "string too long");
    return 0;
}

static sy_val buf_val(sy_ct_buf *b)
{
    sy_val r = sy_v_str(b->p ? b->p : "", b->n);
    sy_ct_buf_free(b);
    return r;
}

/* ---- string helpers (Python semantics, ASCII case mapping) ---- */

static int py_space(unsigned char ch)
{
    return ch == ' ' || (ch >= 0x09 && ch <= 0x0d) || (ch >= 0x1c && ch <= 0x1f);
}

static size_t cp_len(const char *s, size_t n, size_t i)
{
    size_t j = i + 1;
    while (j < n && ((unsigned char)s[j] & 0xC0) == 0x80)
        j++;
    return j - i;
}

static size_t cp_back(const char *s, size_t end)
{
    size_t i = end - 1;
    while (i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80)
        i--;
    return i;
}

static int in_chars(const char *set, size_t setn, const char *cp, size_t cpn)
{
    if (!set)
        return cpn == 1 && py_space((unsigned char)cp[0]);
    for (size_t i = 0; i + cpn <= setn; i++)
        if (memcmp(set + i, cp, cpn) == 0)
            return 1;
    return 0;
}

static sy_val str_strip(sy_ct_ctx *c, const sy_node *at, sy_val s, sy_val *chars, int left,
                        int right)
{
    const char *set = NULL;
    size_t setn = 0;
    if (chars && !is_none(chars)) {
        if (!sy_v_is_str(*chars))
            return fail(c, at, "strip arg must be None or str");
        set = json_string_value(chars->j);
        setn = json_string_length(chars->j);
    }
    const char *p = json_string_value(s.j);
    size_t b = 0, e = json_string_length(s.j);
    while (left && b < e) {
        size_t l = cp_len(p, e, b);
        if (!in_chars(set, setn, p + b, l))
            break;
        b += l;
    }
    while (right && e > b) {
        size_t st = cp_back(p, e);
        if (st < b || !in_chars(set, setn, p + st, e - st))
            break;
        e = st;
    }
    return sy_v_str(p + b, e - b);
}

static sy_val str_split(sy_ct_ctx *c, const sy_node *at, sy_val s, sy_val *sep, sy_val *maxs)
{
    const char *p = json_string_value(s.j);
    size_t n = json_string_length(s.j);
    long long max = -1;
    if (maxs && !is_none(maxs)) {
        if (!(maxs->k == SV_JSON && json_is_integer(maxs->j)))
            return fail(c, at, "split maxsplit must be an integer");
        max = json_integer_value(maxs->j);
    }
    json_t *l = json_array();
    if (!l)
        return fail(c, at, "out of memory");
    if (is_none(sep)) {
        size_t i = 0;
        while (i < n) {
            while (i < n && py_space((unsigned char)p[i]))
                i++;
            if (i >= n)
                break;
            size_t j = i;
            if (max >= 0 && (long long)json_array_size(l) >= max) {
                j = n;
                while (j > i && py_space((unsigned char)p[j - 1]))
                    j--;
            } else {
                while (j < n && !py_space((unsigned char)p[j]))
                    j++;
            }
            json_array_append_new(l, json_stringn_nocheck(p + i, j - i));
            i = j;
        }
        return sy_v_json(l);
    }
    if (!sy_v_is_str(*sep)) {
        json_decref(l);
        return fail(c, at, "split separator must be str or None");
    }
    const char *q = json_string_value(sep->j);
    size_t qn = json_string_length(sep->j);
    if (!qn) {
        json_decref(l);
        return fail(c, at, "empty separator");
    }
    size_t start = 0, i = 0;
    while (i + qn <= n) {
        if ((max < 0 || (long long)json_array_size(l) < max) && memcmp(p + i, q, qn) == 0) {
            json_array_append_new(l, json_stringn_nocheck(p + start, i - start));
            i += qn;
            start = i;
        } else {
            i++;
        }
    }
    json_array_append_new(l, json_stringn_nocheck(p + start, n - start));
    return sy_v_json(l);
}

static sy_val str_replace(sy_ct_ctx *c, const sy_node *at, sy_val s, sy_val *oldv, sy_val *newv,
                          sy_val *countv)
{
    if (!oldv || !newv || !sy_v_is_str(*oldv) || !sy_v_is_str(*newv))
        return fail(c, at, "replace() needs two string arguments");
    long long count = -1;
    if (countv && countv->k == SV_JSON && json_is_integer(countv->j))
        count = json_integer_value(countv->j);
    const char *p = json_string_value(s.j), *o = json_string_value(oldv->j),
               *w = json_string_value(newv->j);
    size_t n = json_string_length(s.j), on = json_string_length(oldv->j),
           wn = json_string_length(newv->j);
    sy_ct_buf b = {0};
    int bad = sy_ct_buf_add(&b, "", 0);
    long long done = 0;
    size_t i = 0;
    if (!on) {
        while (!bad) {
            if (count < 0 || done < count) {
                bad = sy_ct_buf_add(&b, w, wn);
                done++;
            }
            if (i >= n)
                break;
            size_t l = cp_len(p, n, i);
            bad = bad || sy_ct_buf_add(&b, p + i, l);
            i += l;
        }
    } else {
        while (i < n && !bad) {
            if ((count < 0 || done < count) && i + on <= n && memcmp(p + i, o, on) == 0) {
                bad = sy_ct_buf_add(&b, w, wn);
                i += on;
                done++;
            } else {
                bad = sy_ct_buf_add(&b, p + i, 1);
                i++;
            }
        }
    }
    if (bad) {
        sy_ct_buf_free(&b);
        return fail(c, at, "string too long");
    }
    return buf_val(&b);
}

/* mode: 0 lower, 1 upper, 2 title, 3 capitalize */
static sy_val str_case(sy_val s, int mode)
{
    const char *p = json_string_value(s.j);
    size_t n = json_string_length(s.j);
    char *o = malloc(n + 1);
    if (!o)
        return sy_v_undef(NULL);
    int prev_alpha = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)p[i];
        int up;
        if (mode == 0)
            up = 0;
        else if (mode == 1)
            up = 1;
        else if (mode == 2)
            up = !prev_alpha;
        else
            up = i == 0;
        o[i] = (char)(up ? toupper(ch) : tolower(ch));
        if (ch >= 0x80)
            o[i] = (char)ch;
        prev_alpha = isalpha(ch) || ch >= 0x80;
    }
    sy_val r = sy_v_str(o, n);
    free(o);
    return r;
}

static int starts_ends(sy_val s, sy_val pre, int ends)
{
    const char *p = json_string_value(s.j), *q = json_string_value(pre.j);
    size_t n = json_string_length(s.j), qn = json_string_length(pre.j);
    if (qn > n)
        return 0;
    return memcmp(ends ? p + n - qn : p, q, qn) == 0;
}

/* ---- methods ---- */

const char *sy_ct_is_method(const json_t *recv, const char *name)
{
    static const char *const smeth[] = {"strip", "lstrip", "rstrip", "split", "startswith",
                                        "endswith", "replace", "upper", "lower", "title",
                                        "capitalize", "find", "count", NULL};
    static const char *const dmeth[] = {"items", "keys", "values", "get", NULL};
    static const char *const lmeth[] = {"append", NULL};
    const char *const *tab = json_is_string(recv) ? smeth
                             : json_is_object(recv) ? dmeth
                             : json_is_array(recv) ? lmeth
                                                   : NULL;
    for (int i = 0; tab && tab[i]; i++)
        if (strcmp(tab[i], name) == 0)
            return tab[i];
    return NULL;
}

static json_t *items_of(json_t *o)
{
    json_t *l = json_array();
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) {
        json_t *pair = json_array();
        json_array_append_new(pair, json_string_nocheck(k));
        json_array_append(pair, v);
        json_array_append_new(l, pair);
    }
    return l;
}

sy_val sy_ct_call_method(sy_ct_ctx *c, const sy_node *at, sy_val recv, const char *name,
                         sy_val *args, size_t nargs, const char **knames, sy_val *kvals,
                         size_t nk)
{
    json_t *j = recv.j;
    if (json_is_string(j)) {
        if (!strcmp(name, "strip") || !strcmp(name, "lstrip") || !strcmp(name, "rstrip"))
            return str_strip(c, at, recv, ARG(0, "chars"), name[0] != 'r', name[0] != 'l');
        if (!strcmp(name, "split"))
            return str_split(c, at, recv, ARG(0, "sep"), ARG(1, "maxsplit"));
        if (!strcmp(name, "startswith") || !strcmp(name, "endswith")) {
            sy_val *p = ARG(0, NULL);
            int ends = name[0] == 'e';
            if (p && sy_v_is_str(*p))
                return sy_v_bool(starts_ends(recv, *p, ends));
            if (p && p->k == SV_JSON && json_is_array(p->j)) {
                for (size_t i = 0; i < json_array_size(p->j); i++) {
                    sy_val x = {.k = SV_JSON, .j = json_array_get(p->j, i)};
                    if (sy_v_is_str(x) && starts_ends(recv, x, ends))
                        return sy_v_bool(1);
                }
                return sy_v_bool(0);
            }
            return fail(c, at, "startswith/endswith need a string or a tuple of strings");
        }
        if (!strcmp(name, "replace"))
            return str_replace(c, at, recv, ARG(0, NULL), ARG(1, NULL), ARG(2, "count"));
        if (!strcmp(name, "upper"))
            return str_case(recv, 1);
        if (!strcmp(name, "lower"))
            return str_case(recv, 0);
        if (!strcmp(name, "title"))
            return str_case(recv, 2);
        if (!strcmp(name, "capitalize"))
            return str_case(recv, 3);
        if (!strcmp(name, "find") || !strcmp(name, "count")) {
            sy_val *sub = ARG(0, NULL);
            if (!sub || !sy_v_is_str(*sub))
                return fail(c, at, "find/count need a string argument");
            const char *p = json_string_value(j), *q = json_string_value(sub->j);
            size_t n = json_string_length(j), qn = json_string_length(sub->j);
            long long cnt = 0;
            for (size_t i = 0; i + qn <= n;) {
                if (memcmp(p + i, q, qn) == 0) {
                    if (name[0] == 'f')
                        return sy_v_int((long long)sy_utf8_len(p, i));
                    cnt++;
                    i += qn ? qn : 1;
                } else {
                    i++;
                }
            }
            return sy_v_int(name[0] == 'f' ? -1 : cnt);
        }
    } else if (json_is_object(j)) {
        if (!strcmp(name, "items"))
            return sy_v_json(items_of(j));
        if (!strcmp(name, "keys") || !strcmp(name, "values")) {
            json_t *l = json_array();
            const char *k;
            json_t *v;
            json_object_foreach(j, k, v) {
                if (name[0] == 'k')
                    json_array_append_new(l, json_string_nocheck(k));
                else
                    json_array_append(l, v);
            }
            return sy_v_json(l);
        }
        if (!strcmp(name, "get")) {
            sy_val *k = ARG(0, "key"), *d = ARG(1, "default");
            if (!k)
                return fail(c, at, "get() needs a key");
            json_t *v = sy_v_is_str(*k) ? json_object_get(j, json_string_value(k->j)) : NULL;
            if (v)
                return sy_v_json(json_incref(v));
            return d ? sy_v_copy(*d) : sy_v_none();
        }
    } else if (json_is_array(j)) {
        if (!strcmp(name, "append")) /* as jinja2's ImmutableSandboxedEnvironment */
            return fail(c, at, "access to attribute 'append' of 'list' object is unsafe");
    }
    sy_ct_fail(c, at, "'%s' object has no method '%s'", sy_v_typename(recv), name);
    return sy_v_undef(NULL);
}

/* ---- tests ---- */

int sy_ct_test(sy_ct_ctx *c, const sy_node *at, const char *name, sy_val v, sy_val *args,
               size_t nargs)
{
    int isj = v.k == SV_JSON;
    json_t *j = v.j;
    if (!strcmp(name, "defined"))
        return v.k != SV_UNDEF;
    if (!strcmp(name, "undefined"))
        return v.k == SV_UNDEF;
    if (!strcmp(name, "none"))
        return isj && json_is_null(j);
    if (!strcmp(name, "string"))
        return isj && json_is_string(j);
    if (!strcmp(name, "mapping"))
        return isj && json_is_object(j);
    if (!strcmp(name, "iterable"))
        return v.k == SV_UNDEF || (isj && (json_is_string(j) || json_is_array(j) || json_is_object(j)));
    if (!strcmp(name, "sequence"))
        return isj && (json_is_string(j) || json_is_array(j) || json_is_object(j));
    if (!strcmp(name, "number"))
        return isj && (json_is_number(j) || json_is_boolean(j));
    if (!strcmp(name, "integer"))
        return isj && json_is_integer(j);
    if (!strcmp(name, "float"))
        return isj && json_is_real(j);
    if (!strcmp(name, "boolean"))
        return isj && json_is_boolean(j);
    if (!strcmp(name, "true"))
        return isj && json_is_true(j);
    if (!strcmp(name, "false"))
        return isj && json_is_false(j);
    if (!strcmp(name, "callable"))
        return v.k == SV_MACRO || v.k == SV_FUNC || v.k == SV_METHOD;
    if (!strcmp(name, "odd") || !strcmp(name, "even")) {
        if (!isj || !json_is_integer(j))
            return sy_ct_fail(c, at, "test '%s' needs an integer", name);
        long long x = json_integer_value(j);
        return (x % 2 != 0) == (name[0] == 'o');
    }
    if (!strcmp(name, "lower") || !strcmp(name, "upper")) {
        if (!sy_v_is_str(v))
            return 0;
        const char *p = json_string_value(j);
        int cased = 0;
        for (; *p; p++) {
            if (isalpha((unsigned char)*p)) {
                cased = 1;
                if (name[0] == 'l' ? isupper((unsigned char)*p) : islower((unsigned char)*p))
                    return 0;
            }
        }
        return cased;
    }
    if (nargs < 1)
        return sy_ct_fail(c, at, "unknown test '%s' (or missing argument)", name);
    sy_val o = args[0];
    if (!strcmp(name, "equalto") || !strcmp(name, "eq") || !strcmp(name, "==") ||
        !strcmp(name, "sameas"))
        return sy_v_equal(v, o);
    if (!strcmp(name, "ne") || !strcmp(name, "!="))
        return !sy_v_equal(v, o);
    if (!strcmp(name, "divisibleby")) {
        if (!isj || !json_is_integer(j) || o.k != SV_JSON || !json_is_integer(o.j) ||
            json_integer_value(o.j) == 0)
            return sy_ct_fail(c, at, "divisibleby needs nonzero integers");
        return json_integer_value(j) % json_integer_value(o.j) == 0;
    }
    if (!strcmp(name, "in")) {
        sy_val cont = o;
        if (sy_v_is_str(cont) && sy_v_is_str(v))
            return strstr(json_string_value(cont.j), json_string_value(j)) != NULL;
        if (cont.k == SV_JSON && json_is_array(cont.j)) {
            for (size_t i = 0; i < json_array_size(cont.j); i++) {
                sy_val x = {.k = SV_JSON, .j = json_array_get(cont.j, i)};
                if (sy_v_equal(v, x))
                    return 1;
            }
            return 0;
        }
        if (cont.k == SV_JSON && json_is_object(cont.j) && sy_v_is_str(v))
            return json_object_get(cont.j, json_string_value(j)) != NULL;
        return sy_ct_fail(c, at, "test 'in' needs a container");
    }
    static const char *const cmp[] = {"lt", "<", "le", "<=", "gt", ">", "ge", ">=", NULL};
    for (int i = 0; cmp[i]; i++) {
        if (strcmp(name, cmp[i]))
            continue;
        if (!sy_v_is_num(v) || !sy_v_is_num(o))
            return sy_ct_fail(c, at, "test '%s' needs numbers", name);
        double a = sy_v_num(v), b = sy_v_num(o);
        switch (i / 2) {
        case 0: return a < b;
        case 1: return a <= b;
        case 2: return a > b;
        default: return a >= b;
        }
    }
    return sy_ct_fail(c, at, "unknown test '%s'", name);
}

/* ---- filters ---- */

static sy_val seq_filter(sy_ct_ctx *c, const sy_node *at, const char *name, sy_val v,
                         sy_val *args, size_t nargs)
{
    int attr = !strcmp(name, "selectattr") || !strcmp(name, "rejectattr");
    int reject = name[0] == 'r';
    json_t *items = sy_ct_iter_list(c, at, v);
    if (!items)
        return sy_v_undef(NULL);
    size_t skip = attr ? 1 : 0;
    if (attr && (nargs < 1 || !sy_v_is_str(args[0]))) {
        json_decref(items);
        return fail(c, at, "selectattr/rejectattr need an attribute name");
    }
    const char *test = NULL;
    if (nargs > skip) {
        if (!sy_v_is_str(args[skip])) {
            json_decref(items);
            return fail(c, at, "select/reject need a test name");
        }
        test = json_string_value(args[skip].j);
    }
    json_t *out = json_array();
    for (size_t i = 0; out && i < json_array_size(items) && !c->failed; i++) {
        sy_val it = {.k = SV_JSON, .j = json_array_get(items, i)};
        sy_val x = attr ? sy_ct_getattr(c, at, it, json_string_value(args[0].j)) : sy_v_copy(it);
        int t;
        if (c->failed)
            break;
        if (test)
            t = sy_ct_test(c, at, test, x, args + skip + 1, nargs - skip - 1);
        else
            t = sy_v_truthy(x);
        sy_v_free(&x);
        if (t >= 0 && t != reject)
            json_array_append(out, it.j);
    }
    json_decref(items);
    if (c->failed) {
        json_decref(out);
        return sy_v_undef(NULL);
    }
    return sy_v_json(out);
}

sy_val sy_ct_filter(sy_ct_ctx *c, const sy_node *at, const char *name, sy_val v, sy_val *args,
                    size_t nargs, const char **knames, sy_val *kvals, size_t nk)
{
    int isj = v.k == SV_JSON;
    json_t *j = v.j;
    if (!strcmp(name, "default") || !strcmp(name, "d")) {
        sy_val *dv = ARG(0, "default_value"), *boolean = ARG(1, "boolean");
        int use = v.k == SV_UNDEF || (boolean && sy_v_truthy(*boolean) && !sy_v_truthy(v));
        if (use)
            return dv ? sy_v_copy(*dv) : sy_v_str("", 0);
        return sy_v_copy(v);
    }
    if (!strcmp(name, "length") || !strcmp(name, "count")) {
        if (v.k == SV_UNDEF)
            return sy_v_int(0);
        if (isj && json_is_string(j))
            return sy_v_int((long long)sy_utf8_len(json_string_value(j), json_string_length(j)));
        if ((isj || v.k == SV_NS) && json_is_array(j))
            return sy_v_int((long long)json_array_size(j));
        if ((isj || v.k == SV_NS) && json_is_object(j))
            return sy_v_int((long long)json_object_size(j));
        sy_ct_fail(c, at, "object of type '%s' has no len()", sy_v_typename(v));
        return sy_v_undef(NULL);
    }
    if (!strcmp(name, "safe") || !strcmp(name, "list") || !strcmp(name, "first") ||
        !strcmp(name, "last") || !strcmp(name, "unique") || !strcmp(name, "reverse")) {
        if (!strcmp(name, "safe"))
            return sy_v_copy(v);
        json_t *l = sy_ct_iter_list(c, at, v);
        if (!l)
            return sy_v_undef(NULL);
        size_t n = json_array_size(l);
        sy_val r;
        if (name[0] == 'l' && name[1] == 'i') {
            return sy_v_json(l);
        } else if (name[0] == 'f' || name[0] == 'l') {
            r = n ? sy_v_json(json_incref(json_array_get(l, name[0] == 'f' ? 0 : n - 1)))
                  : sy_v_undef(NULL);
            if (name[0] == 'l' && sy_v_is_str(v)) { /* last char of a string */
                json_decref(l);
                return r;
            }
        } else if (name[0] == 'u') {
            json_t *u = json_array();
            for (size_t i = 0; i < n; i++) {
                sy_val x = {.k = SV_JSON, .j = json_array_get(l, i)};
                int seen = 0;
                for (size_t k = 0; k < json_array_size(u) && !seen; k++) {
                    sy_val y = {.k = SV_JSON, .j = json_array_get(u, k)};
                    seen = sy_v_equal(x, y);
                }
                if (!seen)
                    json_array_append(u, x.j);
            }
            r = sy_v_json(u);
        } else { /* reverse */
            if (sy_v_is_str(v)) {
                sy_ct_buf b = {0};
                int bad = sy_ct_buf_add(&b, "", 0);
                for (size_t i = n; i-- > 0 && !bad;)
                    bad = sy_ct_buf_add(&b, json_string_value(json_array_get(l, i)),
                                        json_string_length(json_array_get(l, i)));
                r = buf_val(&b);
            } else {
                json_t *u = json_array();
                for (size_t i = n; i-- > 0;)
                    json_array_append(u, json_array_get(l, i));
                r = sy_v_json(u);
            }
        }
        json_decref(l);
        return r;
    }
    if (!strcmp(name, "join")) {
        sy_val *sep = ARG(0, "d"), *attr = ARG(1, "attribute");
        json_t *l = sy_ct_iter_list(c, at, v);
        sy_ct_buf b = {0};
        if (!l)
            return sy_v_undef(NULL);
        int bad = sy_ct_buf_add(&b, "", 0);
        for (size_t i = 0; i < json_array_size(l) && !bad && !c->failed; i++) {
            sy_val x = {.k = SV_JSON, .j = json_array_get(l, i)};
            if (i && sep)
                bad = sy_v_tostr(*sep, &b);
            if (attr && sy_v_is_str(*attr)) {
                sy_val y = sy_ct_getattr(c, at, x, json_string_value(attr->j));
                bad = bad || sy_v_tostr(y, &b);
                sy_v_free(&y);
            } else {
                bad = bad || sy_v_tostr(x, &b);
            }
        }
        json_decref(l);
        if (bad || c->failed) {
            sy_ct_buf_free(&b);
            return fail(c, at, "join: output too long");
        }
        return buf_val(&b);
    }
    if (!strcmp(name, "tojson")) {
        sy_val *ind = ARG(0, "indent");
        int indent = -1;
        if (v.k == SV_UNDEF || v.k == SV_MACRO || v.k == SV_FUNC || v.k == SV_METHOD)
            return fail(c, at, "tojson: object of type Undefined is not JSON serializable");
        if (ind && !is_none(ind)) {
            if (!(ind->k == SV_JSON && json_is_integer(ind->j)) || json_integer_value(ind->j) > 64)
                return fail(c, at, "tojson: indent must be a small integer");
            indent = (int)json_integer_value(ind->j);
            if (indent < 0)
                indent = 0;
        }
        sy_ct_buf b = {0};
        if (sy_ct_buf_add(&b, "", 0) || sy_json_dump(j, indent, &b, 0)) {
            sy_ct_buf_free(&b);
            return fail(c, at, "tojson: value too large or too deep");
        }
        return buf_val(&b);
    }
    if (!strcmp(name, "items")) {
        if (v.k == SV_UNDEF)
            return sy_v_json(json_array());
        if ((isj || v.k == SV_NS) && json_is_object(j))
            return sy_v_json(items_of(j));
        sy_ct_fail(c, at, "items: '%s' is not a mapping", sy_v_typename(v));
        return sy_v_undef(NULL);
    }
    if (!strcmp(name, "select") || !strcmp(name, "reject") || !strcmp(name, "selectattr") ||
        !strcmp(name, "rejectattr"))
        return seq_filter(c, at, name, v, args, nargs);
    if (!strcmp(name, "map")) {
        sy_val *attr = ARG(999, "attribute"), *dflt = ARG(999, "default");
        json_t *l = sy_ct_iter_list(c, at, v);
        if (!l)
            return sy_v_undef(NULL);
        json_t *out = json_array();
        for (size_t i = 0; i < json_array_size(l) && !c->failed; i++) {
            sy_val x = {.k = SV_JSON, .j = json_array_get(l, i)}, y;
            if (attr && sy_v_is_str(*attr)) {
                y = sy_ct_getattr(c, at, x, json_string_value(attr->j));
                if (y.k == SV_UNDEF && dflt)
                    y = sy_v_copy(*dflt);
            } else if (nargs >= 1 && sy_v_is_str(args[0])) {
                y = sy_ct_filter(c, at, json_string_value(args[0].j), x, args + 1, nargs - 1,
                                 NULL, NULL, 0);
            } else {
                y = fail(c, at, "map needs a filter name or attribute=");
            }
            json_array_append_new(out, sy_v_to_json(y));
            sy_v_free(&y);
        }
        json_decref(l);
        if (c->failed) {
            json_decref(out);
            return sy_v_undef(NULL);
        }
        return sy_v_json(out);
    }
    if (!strcmp(name, "abs")) {
        if (!sy_v_is_num(v))
            return fail(c, at, "abs needs a number");
        if (json_is_integer(j))
            return sy_v_int(llabs((long long)json_integer_value(j)));
        return sy_v_json(json_real(fabs(sy_v_num(v))));
    }
    if (!strcmp(name, "int") || !strcmp(name, "float")) {
        sy_val *dv = ARG(0, "default");
        double d = 0;
        int ok = 0;
        if (sy_v_is_num(v)) {
            d = sy_v_num(v);
            ok = 1;
        } else if (sy_v_is_str(v)) {
            char *end;
            const char *s = json_string_value(j);
            d = strtod(s, &end);
            ok = end != s && *end == 0;
        }
        if (!ok)
            return dv ? sy_v_copy(*dv) : (name[0] == 'i' ? sy_v_int(0) : sy_v_json(json_real(0)));
        if (name[0] == 'i')
            return (isj && json_is_integer(j)) ? sy_v_copy(v) : sy_v_int((long long)d);
        return sy_v_json(json_real(d));
    }
    if (!strcmp(name, "round")) {
        sy_val *pv = ARG(0, "precision"), *mv = ARG(1, "method");
        if (!sy_v_is_num(v))
            return fail(c, at, "round needs a number");
        int prec = (pv && pv->k == SV_JSON && json_is_integer(pv->j)) ? (int)json_integer_value(pv->j) : 0;
        const char *m = (mv && sy_v_is_str(*mv)) ? json_string_value(mv->j) : "common";
        if (!strcmp(m, "common") && prec >= 0 && prec <= 17) {
            /* Python's round(): correctly rounded from the exact binary value, ties to even */
            char tmp[400];
            snprintf(tmp, sizeof tmp, "%.*f", prec, sy_v_num(v));
            return sy_v_json(json_real(strtod(tmp, NULL)));
        }
        double f = pow(10.0, prec), x = sy_v_num(v) * f;
        x = !strcmp(m, "floor") ? floor(x) : !strcmp(m, "ceil") ? ceil(x) : rint(x);
        return sy_v_json(json_real(x / f));
    }
    /* string filters */
    sy_ct_buf b = {0};
    if (!strcmp(name, "escape") || !strcmp(name, "e")) {
        sy_ct_buf o = {0};
        if (to_buf(c, at, v, &b))
            return sy_v_undef(NULL);
        int bad = sy_ct_buf_add(&o, "", 0);
        for (size_t i = 0; i < b.n && !bad; i++) {
            const char *r = NULL;
            switch (b.p[i]) {
            case '&': r = "&amp;"; break;
            case '<': r = "&lt;"; break;
            case '>': r = "&gt;"; break;
            case '"': r = "&#34;"; break;
            case '\'': r = "&#39;"; break;
            }
            bad = r ? sy_ct_buf_str(&o, r) : sy_ct_buf_add(&o, b.p + i, 1);
        }
        sy_ct_buf_free(&b);
        if (bad) {
            sy_ct_buf_free(&o);
            return fail(c, at, "escape: output too long");
        }
        return buf_val(&o);
    }
    static const char *const sf[] = {"string", "trim", "upper", "lower", "title", "capitalize",
                                      "replace", NULL};
    for (int i = 0; sf[i]; i++) {
        if (strcmp(name, sf[i]))
            continue;
        if (to_buf(c, at, v, &b))
            return sy_v_undef(NULL);
        sy_val s = buf_val(&b), r;
        switch (i) {
        case 0: return s;
        case 1: r = str_strip(c, at, s, ARG(0, "chars"), 1, 1); break;
        case 2: r = str_case(s, 1); break;
        case 3: r = str_case(s, 0); break;
        case 4: r = str_case(s, 2); break;
        case 5: r = str_case(s, 3); break;
        default: r = str_replace(c, at, s, ARG(0, "old"), ARG(1, "new"), ARG(2, "count")); break;
        }
        sy_v_free(&s);
        return r;
    }
    sy_ct_fail(c, at, "unknown filter '%s'", name);
    return sy_v_undef(NULL);
}

/* ---- global functions ---- */

int sy_ct_is_builtin(const char *name)
{
    static const char *const g[] = {"range", "namespace", "raise_exception", "strftime_now",
                                    "dict", NULL};
    for (int i = 0; g[i]; i++)
        if (!strcmp(g[i], name))
            return 1;
    return 0;
}

sy_val sy_ct_call_builtin(sy_ct_ctx *c, const sy_node *at, const char *name, sy_val *args,
                          size_t nargs, const char **knames, sy_val *kvals, size_t nk)
{
    if (!strcmp(name, "raise_exception")) {
        sy_ct_buf b = {0};
        if (nargs >= 1)
            sy_v_tostr(args[0], &b);
        sy_ct_fail(c, at, "%s", b.p ? b.p : "raise_exception called");
        sy_ct_buf_free(&b);
        return sy_v_undef(NULL);
    }
    if (!strcmp(name, "strftime_now")) {
        struct tm tm = {0};
        char out[512];
        time_t now = (time_t)c->now_unix;
        gmtime_r(&now, &tm);
        if (nargs < 1 || !sy_v_is_str(args[0]) || json_string_length(args[0].j) > 128)
            return fail(c, at, "strftime_now needs a format string (at most 128 bytes)");
        size_t n = strftime(out, sizeof out, json_string_value(args[0].j), &tm);
        return sy_v_str(out, n);
    }
    if (!strcmp(name, "namespace") || !strcmp(name, "dict")) {
        json_t *o = json_object();
        if (!o)
            return fail(c, at, "out of memory");
        if (nargs >= 1 && args[0].k == SV_JSON && json_is_object(args[0].j))
            json_object_update(o, args[0].j);
        for (size_t k = 0; k < nk; k++)
            json_object_set_new(o, knames[k], sy_v_to_json(kvals[k]));
        sy_val r = {.k = name[0] == 'n' ? SV_NS : SV_JSON, .j = o, .m = NULL, .name = NULL};
        return r;
    }
    if (!strcmp(name, "range")) {
        long long a[3] = {0, 0, 1};
        if (nargs < 1 || nargs > 3)
            return fail(c, at, "range expects 1 to 3 integer arguments");
        for (size_t i = 0; i < nargs; i++) {
            if (!(args[i].k == SV_JSON && (json_is_integer(args[i].j) || json_is_boolean(args[i].j))))
                return fail(c, at, "range arguments must be integers");
            a[nargs == 1 ? 1 : i] = json_is_integer(args[i].j) ? json_integer_value(args[i].j)
                                                               : json_is_true(args[i].j);
        }
        if (a[2] == 0)
            return fail(c, at, "range() arg 3 must not be zero");
        json_t *l = json_array();
        long long cnt = 0;
        for (long long x = a[0]; l && (a[2] > 0 ? x < a[1] : x > a[1]); x += a[2]) {
            if (++cnt > 1000000) {
                json_decref(l);
                return fail(c, at, "range too large (limit 1000000 items)");
            }
            json_array_append_new(l, json_integer(x));
        }
        return sy_v_json(l);
    }
    (void)knames;
    sy_ct_fail(c, at, "unknown function '%s'", name);
    return sy_v_undef(NULL);
}
