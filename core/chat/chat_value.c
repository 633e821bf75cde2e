/* Chat templates: arena, buffers and runtime values (JSON-backed), with
 * Python's str()/repr(), equality and transformers' tojson. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat_internal.h"

typedef struct chunk {
    struct chunk *next;
    union {
        max_align_t al;
        char data[1];
    } u;
} chunk;

void *sy_ct_alloc(sy_ct_arena *a, size_t n)
{
    if (n > ((size_t)1 << 40))
        return NULL;
    chunk *c = calloc(1, offsetof(chunk, u) + n + 1);
    if (!c)
        return NULL;
    c->next = a->head;
    a->head = c;
    return c->u.data;
}

char *sy_ct_strndup(sy_ct_arena *a, const char *s, size_t n)
{
    char *p = sy_ct_alloc(a, n + 1);
    if (p)
        memcpy(p, s, n);
    return p;
}

void sy_ct_arena_free(sy_ct_arena *a)
{
    chunk *c = a->head;
    while (c) {
        chunk *nx = c->next;
        free(c);
        c = nx;
    }
    a->head = NULL;
}

int sy_ct_buf_add(sy_ct_buf *b, const char *s, size_t n)
{
    size_t limit = b->limit ? b->limit : SY_CT_MAX_OUTPUT;
    if (b->n + n + 1 > limit)
        return -1;
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc < b->n + n + 1)
            nc *= 2;
        char *p = realloc(b->p, nc);
        if (!p)
            return -1;
        b->p = p;
        b->cap = nc;
    }
    if (n)
        memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return 0;
}

int sy_ct_buf_str(sy_ct_buf *b, const char *s) { return sy_ct_buf_add(b, s, strlen(s)); }

void sy_ct_buf_free(sy_ct_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}

/* ---- values ---- */

sy_val sy_v_undef(const char *name)
{
    sy_val v = {.k = SV_UNDEF, .j = NULL, .m = NULL, .name = name};
    return v;
}

sy_val sy_v_json(json_t *j)
{
    sy_val v = {.k = j ? SV_JSON : SV_UNDEF, .j = j, .m = NULL, .name = NULL};
    return v;
}

sy_val sy_v_str(const char *s, size_t n) { return sy_v_json(json_stringn_nocheck(s, n)); }
sy_val sy_v_int(long long i) { return sy_v_json(json_integer(i)); }
sy_val sy_v_bool(int b) { return sy_v_json(json_boolean(b)); }
sy_val sy_v_none(void) { return sy_v_json(json_null()); }

sy_val sy_v_copy(sy_val v)
{
    if (v.j)
        json_incref(v.j);
    return v;
}

void sy_v_free(sy_val *v)
{
    if (v->j)
        json_decref(v->j);
    v->j = NULL;
    v->k = SV_UNDEF;
}

int sy_v_is_str(sy_val v) { return v.k == SV_JSON && json_is_string(v.j); }

int sy_v_is_num(sy_val v) { return v.k == SV_JSON && (json_is_number(v.j) || json_is_boolean(v.j)); }

double sy_v_num(sy_val v)
{
    if (json_is_integer(v.j))
        return (double)json_integer_value(v.j);
    if (json_is_real(v.j))
        return json_real_value(v.j);
    return json_is_true(v.j) ? 1.0 : 0.0;
}

int sy_v_truthy(sy_val v)
{
    switch (v.k) {
    case SV_UNDEF: return 0;
    case SV_JSON:
        switch (json_typeof(v.j)) {
        case JSON_NULL:
        case JSON_FALSE: return 0;
        case JSON_TRUE: return 1;
        case JSON_INTEGER: return json_integer_value(v.j) != 0;
        case JSON_REAL: return json_real_value(v.j) != 0.0;
        case JSON_STRING: return json_string_length(v.j) > 0;
        case JSON_ARRAY: return json_array_size(v.j) > 0;
        case JSON_OBJECT: return json_object_size(v.j) > 0;
        }
        return 0;
    default: return 1;
    }
}

const char *sy_v_typename(sy_val v)
{
    switch (v.k) {
    case SV_UNDEF: return "Undefined";
    case SV_NS: return "Namespace";
    case SV_MACRO: return "Macro";
    case SV_FUNC: case SV_METHOD: return "function";
    case SV_JSON: break;
    }
    switch (json_typeof(v.j)) {
    case JSON_NULL: return "NoneType";
    case JSON_TRUE: case JSON_FALSE: return "bool";
    case JSON_INTEGER: return "int";
    case JSON_REAL: return "float";
    case JSON_STRING: return "str";
    case JSON_ARRAY: return "list";
    case JSON_OBJECT: return "dict";
    }
    return "object";
}

/* Python repr(float) */
static int put_float(sy_ct_buf *b, double d)
{
    char s[64];
    if (isnan(d))
        return sy_ct_buf_str(b, "nan");
    if (isinf(d))
        return sy_ct_buf_str(b, d < 0 ? "-inf" : "inf");
    int p;
    for (p = 1; p < 17; p++) {
        snprintf(s, sizeof s, "%.*e", p - 1, d);
        if (strtod(s, NULL) == d)
            break;
    }
    snprintf(s, sizeof s, "%.*e", p - 1, d);
    int ex = atoi(strchr(s, 'e') + 1);
    if (ex >= -4 && ex < 16) {
        int dec = p - 1 - ex;
        snprintf(s, sizeof s, "%.*f", dec > 0 ? dec : 0, d);
        if (!strchr(s, '.'))
            strcat(s, ".0");
    } else {
        /* mantissa without trailing zeros, exponent at least 2 digits */
        char m[40];
        snprintf(m, sizeof m, "%.*e", p - 1, d);
        char *e = strchr(m, 'e');
        *e = 0;
        snprintf(s, sizeof s, "%se%c%02d", m, ex < 0 ? '-' : '+', ex < 0 ? -ex : ex);
    }
    return sy_ct_buf_str(b, s);
}

/* The escapes Python's repr and JSON spell alike; NULL for any other byte. */
static const char *escape_common(unsigned char ch)
{
    switch (ch) {
    case '\\': return "\\\\";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    default: return NULL;
    }
}

static int put_int(sy_ct_buf *b, const json_t *j)
{
    char s[32];
    snprintf(s, sizeof s, "%lld", (long long)json_integer_value(j));
    return sy_ct_buf_str(b, s);
}

static int repr_str(sy_ct_buf *b, const char *s, size_t n)
{
    char q = (memchr(s, '\'', n) && !memchr(s, '"', n)) ? '"' : '\'';
    if (sy_ct_buf_add(b, &q, 1))
        return -1;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        char e[8];
        const char *o = NULL;
        if (ch == (unsigned char)q)
            o = q == '\'' ? "\\'" : "\\\"";
        else if (!(o = escape_common(ch)) && (ch < 0x20 || ch == 0x7f)) {
            snprintf(e, sizeof e, "\\x%02x", ch);
            o = e;
        }
        if (o ? sy_ct_buf_str(b, o) : sy_ct_buf_add(b, s + i, 1))
            return -1;
    }
    return sy_ct_buf_add(b, &q, 1);
}

static int repr_json(const json_t *j, sy_ct_buf *b, int depth)
{
    if (depth > SY_CT_MAX_DEPTH)
        return -1;
    switch (json_typeof(j)) {
    case JSON_NULL: return sy_ct_buf_str(b, "None");
    case JSON_TRUE: return sy_ct_buf_str(b, "True");
    case JSON_FALSE: return sy_ct_buf_str(b, "False");
    case JSON_INTEGER: return put_int(b, j);
    case JSON_REAL: return put_float(b, json_real_value(j));
    case JSON_STRING: return repr_str(b, json_string_value(j), json_string_length(j));
    case JSON_ARRAY: {
        if (sy_ct_buf_str(b, "["))
            return -1;
        for (size_t i = 0; i < json_array_size(j); i++)
            if ((i && sy_ct_buf_str(b, ", ")) || repr_json(json_array_get(j, i), b, depth + 1))
                return -1;
        return sy_ct_buf_str(b, "]");
    }
    case JSON_OBJECT: {
        const char *k;
        json_t *v;
        int first = 1;
        if (sy_ct_buf_str(b, "{"))
            return -1;
        json_object_foreach((json_t *)j, k, v) {
            if ((!first && sy_ct_buf_str(b, ", ")) || repr_str(b, k, strlen(k)) ||
                sy_ct_buf_str(b, ": ") || repr_json(v, b, depth + 1))
                return -1;
            first = 0;
        }
        return sy_ct_buf_str(b, "}");
    }
    }
    return -1;
}

int sy_v_repr(sy_val v, sy_ct_buf *b)
{
    switch (v.k) {
    case SV_UNDEF: return 0;
    case SV_JSON: return repr_json(v.j, b, 0);
    case SV_NS:
        return sy_ct_buf_str(b, "<Namespace ") || repr_json(v.j, b, 0) || sy_ct_buf_str(b, ">");
    case SV_MACRO: return sy_ct_buf_str(b, "<Macro>");
    default: return sy_ct_buf_str(b, "<function>");
    }
}

int sy_v_tostr(sy_val v, sy_ct_buf *b)
{
    if (sy_v_is_str(v))
        return sy_ct_buf_add(b, json_string_value(v.j), json_string_length(v.j));
    return sy_v_repr(v, b);
}

static int json_eq(const json_t *a, const json_t *b, int depth)
{
    if (depth > SY_CT_MAX_DEPTH)
        return 0;
    int an = json_is_number(a) || json_is_boolean(a), bn = json_is_number(b) || json_is_boolean(b);
    if (an && bn) {
        sy_val va = {.k = SV_JSON, .j = (json_t *)a, .m = NULL, .name = NULL}, vb = {.k = SV_JSON, .j = (json_t *)b, .m = NULL, .name = NULL};
        if (json_is_integer(a) && json_is_integer(b))
            return json_integer_value(a) == json_integer_value(b);
        return sy_v_num(va) == sy_v_num(vb);
    }
    if (json_typeof(a) != json_typeof(b))
        return 0;
    switch (json_typeof(a)) {
    case JSON_NULL: return 1;
    case JSON_STRING:
        return json_string_length(a) == json_string_length(b) &&
               memcmp(json_string_value(a), json_string_value(b), json_string_length(a)) == 0;
    case JSON_ARRAY:
        if (json_array_size(a) != json_array_size(b))
            return 0;
        for (size_t i = 0; i < json_array_size(a); i++)
            if (!json_eq(json_array_get(a, i), json_array_get(b, i), depth + 1))
                return 0;
        return 1;
    case JSON_OBJECT: {
        const char *k;
        json_t *v;
        if (json_object_size(a) != json_object_size(b))
            return 0;
        json_object_foreach((json_t *)a, k, v) {
            json_t *w = json_object_get(b, k);
            if (!w || !json_eq(v, w, depth + 1))
                return 0;
        }
        return 1;
    }
    default: return 0;
    }
}

int sy_v_equal(sy_val a, sy_val b)
{
    if (a.k == SV_UNDEF || b.k == SV_UNDEF)
        return a.k == b.k;
    if (a.k == SV_JSON && b.k == SV_JSON)
        return json_eq(a.j, b.j, 0);
    if (a.k == SV_NS && b.k == SV_NS)
        return a.j == b.j;
    return a.k == b.k && a.m == b.m && a.name == b.name && a.j == b.j;
}

json_t *sy_v_to_json(sy_val v)
{
    if ((v.k == SV_JSON || v.k == SV_NS) && v.j)
        return json_incref(v.j);
    return json_null();
}

/* ---- tojson: json.dumps(ensure_ascii=False, separators default) ---- */

static int dump_str(sy_ct_buf *b, const char *s, size_t n)
{
    if (sy_ct_buf_add(b, "\"", 1))
        return -1;
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        const char *o = NULL;
        char e[8];
        if (ch == '"')
            o = "\\\"";
        else if (ch == '\b')
            o = "\\b";
        else if (ch == '\f')
            o = "\\f";
        else if (!(o = escape_common(ch)) && ch < 0x20) {
            snprintf(e, sizeof e, "\\u%04x", ch);
            o = e;
        }
        if (o) {
            if (sy_ct_buf_add(b, s + run, i - run) || sy_ct_buf_str(b, o))
                return -1;
            run = i + 1;
        }
    }
    if (sy_ct_buf_add(b, s + run, n - run))
        return -1;
    return sy_ct_buf_add(b, "\"", 1);
}

static int newline_indent(sy_ct_buf *b, int indent, int level)
{
    if (sy_ct_buf_add(b, "\n", 1))
        return -1;
    for (int i = 0; i < indent * level; i++)
        if (sy_ct_buf_add(b, " ", 1))
            return -1;
    return 0;
}

int sy_json_dump(const json_t *j, int indent, sy_ct_buf *b, int level)
{
    if (level > SY_CT_MAX_DEPTH)
        return -1;
    switch (json_typeof(j)) {
    case JSON_NULL: return sy_ct_buf_str(b, "null");
    case JSON_TRUE: return sy_ct_buf_str(b, "true");
    case JSON_FALSE: return sy_ct_buf_str(b, "false");
    case JSON_INTEGER: return put_int(b, j);
    case JSON_REAL: {
        double d = json_real_value(j);
        if (isnan(d))
            return sy_ct_buf_str(b, "NaN");
        if (isinf(d))
            return sy_ct_buf_str(b, d < 0 ? "-Infinity" : "Infinity");
        return put_float(b, d);
    }
    case JSON_STRING: return dump_str(b, json_string_value(j), json_string_length(j));
    case JSON_ARRAY: {
        size_t n = json_array_size(j);
        if (!n)
            return sy_ct_buf_str(b, "[]");
        if (sy_ct_buf_str(b, "["))
            return -1;
        for (size_t i = 0; i < n; i++) {
            if (i && sy_ct_buf_str(b, indent >= 0 ? "," : ", "))
                return -1;
            if (indent >= 0 && newline_indent(b, indent, level + 1))
                return -1;
            if (sy_json_dump(json_array_get(j, i), indent, b, level + 1))
                return -1;
        }
        if (indent >= 0 && newline_indent(b, indent, level))
            return -1;
        return sy_ct_buf_str(b, "]");
    }
    case JSON_OBJECT: {
        const char *k;
        json_t *v;
        int first = 1;
        if (!json_object_size(j))
            return sy_ct_buf_str(b, "{}");
        if (sy_ct_buf_str(b, "{"))
            return -1;
        json_object_foreach((json_t *)j, k, v) {
            if (!first && sy_ct_buf_str(b, indent >= 0 ? "," : ", "))
                return -1;
            first = 0;
            if (indent >= 0 && newline_indent(b, indent, level + 1))
                return -1;
            if (dump_str(b, k, strlen(k)) || sy_ct_buf_str(b, ": ") ||
                sy_json_dump(v, indent, b, level + 1))
                return -1;
        }
        if (indent >= 0 && newline_indent(b, indent, level))
            return -1;
        return sy_ct_buf_str(b, "}");
    }
    }
    return -1;
}

/* ---- UTF-8 ---- */

size_t sy_utf8_len(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80)
            c++;
    return c;
}

size_t sy_utf8_off(const char *s, size_t n, size_t idx)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++) {
        if (((unsigned char)s[i] & 0xC0) != 0x80) {
            if (c == idx)
                return i;
            c++;
        }
    }
    return n;
}
