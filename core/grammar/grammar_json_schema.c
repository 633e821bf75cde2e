/*
 * JSON schema to GBNF: the subset production servers enforce
 * (docs/structured-outputs.md, "JSON schema support", lists every keyword).
 *
 * Each sub-schema becomes a GBNF expression; objects, arrays, unions and
 * $ref targets become rules named NAME-<kind><n>. A keyword that would
 * change which documents are valid and that the grammar cannot enforce is
 * a 400 naming it, never dropped: the grammar may admit fewer documents
 * than the schema (no extra properties, no optional whitespace but one
 * space after ':' and ',', no \u escapes in property names), never more.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "grammar/grammar_json_schema.h"

#define SCHEMA_MAX_DEPTH 64
#define SCHEMA_MAX_COUNT 10000 /* minLength, maxItems, ...: repetition counts */
/* maxLength - minLength and maxItems - minItems: each optional repetition
 * costs the grammar compiler more than the one before (maxLength 4000
 * takes seconds), so wider spans are refused rather than stalling. */
#define SCHEMA_MAX_SPAN 1000
#define SY_STR_(x) #x
#define SY_STR(x) SY_STR_(x)
#define NUMBER_MAX_BOUND 9007199254740992.0 /* 2^53: exact in a double */

enum {
    T_NULL = 1,
    T_BOOL = 2,
    T_INT = 4,
    T_NUM = 8,
    T_STR = 16,
    T_ARR = 32,
    T_OBJ = 64,
    T_ALL = 127
};

/* Keywords that describe and never constrain: accepted and ignored. */
static const char *const annotations[] = {"title",      "description", "$schema",  "$id",      "id",
                                          "default",    "examples",    "example",  "$comment", "deprecated",
                                          "readOnly",   "writeOnly",   "discriminator", NULL};
/* Keywords this compiler enforces (each in its place below). */
static const char *const supported[] = {
    "type",      "enum",      "const",         "nullable",    "$ref",          "$defs",     "definitions",
    "anyOf",     "oneOf",     "allOf",         "properties",  "required",      "additionalProperties",
    "items",     "prefixItems", "additionalItems", "minItems", "maxItems",     "uniqueItems", "minLength",
    "maxLength", "pattern",   "format",        "minimum",     "maximum",       "exclusiveMinimum",
    "exclusiveMaximum", NULL};

static bool in_list(const char *const *list, const char *k)
{
    for (size_t i = 0; list[i]; i++)
        if (!strcmp(list[i], k))
            return true;
    return false;
}

char *sy_gjs_join(const char *base, const char *seg)
{
    size_t n = strlen(base) + strlen(seg) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s.%s", base, seg);
    return p;
}

static char *join_index(const char *base, const char *seg, size_t i)
{
    size_t n = strlen(base) + strlen(seg) + 24;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s.%s[%zu]", base, seg, i);
    return p;
}

int sy_gjs_oom(sy_gjs *c) { return sy_err_set(c->err, SY_ERR_NOMEM, "%s: out of memory compiling the schema", c->root_path); }

static int unsupported(sy_gjs *c, const char *path, const char *kw, const char *why)
{
    return sy_err_set(c->err, SY_ERR_INVALID, "%s.%s: '%s' %s", path, kw, kw,
                      why ? why : "is not supported by constrained decoding");
}

char *sy_gjs_new_rule(sy_gjs *c, const char *kind)
{
    size_t n = strlen(c->name) + strlen(kind) + 16;
    char *r = malloc(n);
    if (r)
        snprintf(r, n, "%s-%s%u", c->name, kind, c->next_id++);
    return r;
}

void sy_gjs_define(sy_gjs *c, const char *rule, const char *body)
{
    sy_gbuf_printf(&c->rules, "%s ::= %s\n", rule, body ? body : "\"\"");
}

/* Appends expr to out, as a rule of its own when it is long (so a
 * property's value, used in several rules, is written once). */
int sy_gjs_put_ref(sy_gjs *c, sy_gbuf *out, const char *kind, const sy_gbuf *expr)
{
    if (expr->len <= 48) {
        sy_gbuf_putn(out, expr->s, expr->len);
        return SY_OK;
    }
    char *r = sy_gjs_new_rule(c, kind);
    if (!r)
        return sy_gjs_oom(c);
    sy_gjs_define(c, r, expr->s);
    sy_gbuf_puts(out, r);
    free(r);
    return SY_OK;
}

static void put_count(sy_gbuf *out, long lo, long hi)
{
    if (lo == 0 && hi < 0)
        sy_gbuf_puts(out, "*");
    else if (lo == 1 && hi < 0)
        sy_gbuf_puts(out, "+");
    else if (lo == 0 && hi == 1)
        sy_gbuf_puts(out, "?");
    else if (hi < 0)
        sy_gbuf_printf(out, "{%ld,}", lo);
    else if (lo == hi && lo != 1)
        sy_gbuf_printf(out, "{%ld}", lo);
    else if (lo != hi)
        sy_gbuf_printf(out, "{%ld,%ld}", lo, hi);
}

/* A count keyword (minLength, maxItems, ...): -1 when absent. */
static int get_count(sy_gjs *c, json_t *s, const char *path, const char *kw, long *v)
{
    json_t *x = json_object_get(s, kw);
    *v = -1;
    if (!x)
        return SY_OK;
    double d = json_number_value(x);
    if (!json_is_number(x) || d < 0 || d != floor(d))
        return sy_err_set(c->err, SY_ERR_INVALID, "%s.%s: expected a non-negative integer", path, kw);
    if (d > SCHEMA_MAX_COUNT)
        return sy_err_set(c->err, SY_ERR_INVALID, "%s.%s: %.0f is above %d, the largest count constrained decoding "
                                                  "supports", path, kw, d, SCHEMA_MAX_COUNT);
    *v = (long)d;
    return SY_OK;
}

/* ------------------------------------------------------------ $ref */

static json_t *resolve(sy_gjs *c, const char *ref, const char *path, char **target_path, int *rc)
{
    *rc = SY_OK;
    if (ref[0] != '#' || (ref[1] && ref[1] != '/')) {
        *rc = unsupported(c, path, "$ref", "must be a local reference (\"#\" or \"#/...\"): other references are "
                                           "not supported by constrained decoding");
        return NULL;
    }
    json_t *node = c->root;
    sy_gbuf tp;
    sy_gbuf_init(&tp);
    sy_gbuf_puts(&tp, c->root_path);
    const char *p = ref + 1;
    while (*p == '/') {
        p++;
        const char *end = strchr(p, '/');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        char *seg = malloc(n + 1);
        if (!seg) {
            *rc = sy_gjs_oom(c);
            sy_gbuf_free(&tp);
            return NULL;
        }
        size_t w = 0;
        for (size_t i = 0; i < n; i++) {
            if (p[i] == '~' && i + 1 < n && (p[i + 1] == '0' || p[i + 1] == '1')) {
                seg[w++] = p[i + 1] == '0' ? '~' : '/';
                i++;
            } else {
                seg[w++] = p[i];
            }
        }
        seg[w] = '\0';
        sy_gbuf_printf(&tp, ".%s", seg);
        json_t *next = NULL;
        if (json_is_object(node)) {
            next = json_object_get(node, seg);
        } else if (json_is_array(node)) {
            char *e;
            unsigned long i = strtoul(seg, &e, 10);
            if (*seg && !*e)
                next = json_array_get(node, i);
        }
        free(seg);
        if (!next) {
            *rc = sy_err_set(c->err, SY_ERR_INVALID, "%s.$ref: '%s' points at nothing in the schema", path, ref);
            sy_gbuf_free(&tp);
            return NULL;
        }
        node = next;
        p += n;
    }
    if (tp.oom) {
        *rc = sy_gjs_oom(c);
        sy_gbuf_free(&tp);
        return NULL;
    }
    *target_path = tp.s;
    return node;
}

static int gen_ref(sy_gjs *c, const char *ref, const char *path, sy_gbuf *out)
{
    for (size_t i = 0; i < c->n_refs; i++)
        if (!strcmp(c->refs[i].ref, ref)) {
            sy_gbuf_puts(out, c->refs[i].rule);
            return SY_OK;
        }
    char *tpath = NULL;
    int rc;
    json_t *target = resolve(c, ref, path, &tpath, &rc);
    if (!target)
        return rc;
    if (c->n_refs == c->cap_refs) {
        size_t cap = c->cap_refs ? c->cap_refs * 2 : 8;
        sy_gjs_ref *r = realloc(c->refs, cap * sizeof *r);
        if (!r) {
            free(tpath);
            return sy_gjs_oom(c);
        }
        c->refs = r;
        c->cap_refs = cap;
    }
    /* Registered before its body is built, so a recursive schema refers
     * to the rule by name instead of expanding forever. */
    sy_gjs_ref *r = &c->refs[c->n_refs];
    r->ref = strdup(ref);
    r->rule = sy_gjs_new_rule(c, "ref");
    if (!r->ref || !r->rule) {
        free(r->ref);
        free(r->rule);
        free(tpath);
        return sy_gjs_oom(c);
    }
    c->n_refs++;
    char *rule = r->rule;
    sy_gbuf body;
    sy_gbuf_init(&body);
    int depth = c->depth;
    c->depth = 0; /* a target's depth counts from itself: refs are built once */
    rc = sy_gjs_gen(c, target, tpath, &body);
    c->depth = depth;
    free(tpath);
    if (rc == SY_OK) {
        if (body.oom)
            rc = sy_gjs_oom(c);
        else
            sy_gjs_define(c, rule, body.s);
    }
    sy_gbuf_free(&body);
    if (rc == SY_OK)
        sy_gbuf_puts(out, rule);
    return rc;
}

/* ------------------------------------------------------------ literals */

static unsigned value_types(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_NULL: return T_NULL;
    case JSON_TRUE:
    case JSON_FALSE: return T_BOOL;
    case JSON_INTEGER: return T_INT | T_NUM;
    case JSON_REAL: return T_NUM;
    case JSON_STRING: return T_STR;
    case JSON_ARRAY: return T_ARR;
    case JSON_OBJECT: return T_OBJ;
    }
    return 0;
}

static int put_value_literal(sy_gjs *c, sy_gbuf *out, const json_t *v)
{
    char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!text)
        return sy_gjs_oom(c);
    sy_gbuf_literal(out, text, strlen(text));
    free(text);
    return SY_OK;
}

static int gen_enum(sy_gjs *c, json_t *s, const char *path, unsigned types, sy_gbuf *out)
{
    json_t *en = json_object_get(s, "enum"), *cn = json_object_get(s, "const");
    if (en && !json_is_array(en))
        return sy_err_set(c->err, SY_ERR_INVALID, "%s.enum: expected an array of values", path);
    const char *kw;
    json_t *v;
    json_object_foreach(s, kw, v) {
        if (!in_list(annotations, kw) && strcmp(kw, "enum") && strcmp(kw, "const") && strcmp(kw, "type") &&
            strcmp(kw, "nullable") && strcmp(kw, "$defs") && strcmp(kw, "definitions"))
            return unsupported(c, path, kw, "beside enum or const is not supported by constrained decoding");
    }
    size_t n = 0;
    sy_gbuf_puts(out, "(");
    size_t count = cn ? 1 : json_array_size(en);
    for (size_t i = 0; i < count; i++) {
        json_t *x = cn ? cn : json_array_get(en, i);
        if (!(value_types(x) & types))
            continue;
        if (cn && en) {
            bool listed = false;
            for (size_t j = 0; j < json_array_size(en); j++)
                listed |= json_equal(json_array_get(en, j), cn);
            if (!listed)
                continue;
        }
        sy_gbuf_puts(out, n++ ? " | " : "");
        int rc = put_value_literal(c, out, x);
        if (rc != SY_OK)
            return rc;
    }
    sy_gbuf_puts(out, ")");
    if (!n)
        return sy_err_set(c->err, SY_ERR_INVALID, "%s.%s: no value is allowed (empty, or none of the type given)", path,
                          cn ? "const" : "enum");
    return SY_OK;
}

/* ------------------------------------------------------------ numbers */

/* A bound from minimum/exclusiveMinimum (or the maximum pair). */
typedef struct bound {
    bool has;
    bool open;  /* exclusive (type number; integers are made inclusive) */
    int64_t v;
} bound;

/* The tightest bound from minimum and exclusiveMinimum (upper: maximum and
 * exclusiveMaximum). Draft 4's boolean exclusiveMinimum/Maximum modify
 * minimum/maximum. For integers, bounds become inclusive integers; for
 * numbers, bounds must be integers. */
static int get_bound(sy_gjs *c, json_t *s, const char *path, bool upper, bool integer, bound *out)
{
    const char *kw = upper ? "maximum" : "minimum", *ex_kw = upper ? "exclusiveMaximum" : "exclusiveMinimum";
    json_t *b = json_object_get(s, kw), *ex = json_object_get(s, ex_kw);
    bool draft4_exclusive = false;
    *out = (bound){0};
    if (ex && json_is_boolean(ex)) {
        draft4_exclusive = json_is_true(ex);
        if (draft4_exclusive && !b)
            return sy_err_set(c->err, SY_ERR_INVALID, "%s.%s: true needs %s beside it", path, ex_kw, kw);
        ex = NULL;
    }
    for (int pass = 0; pass < 2; pass++) {
        json_t *x = pass ? ex : b;
        const char *k = pass ? ex_kw : kw;
        bool open = pass ? true : draft4_exclusive;
        if (!x)
            continue;
        if (!json_is_number(x))
            return sy_err_set(c->err, SY_ERR_INVALID, "%s.%s: expected a number", path, k);
        double d = json_number_value(x);
        if (!(fabs(d) <= NUMBER_MAX_BOUND))
            return unsupported(c, path, k, "beyond 2^53 is not supported by constrained decoding");
        if (!integer && d != floor(d))
            return unsupported(c, path, k, "that is not an integer is not supported on type number by "
                                           "constrained decoding");
        int64_t v;
        if (integer) {
            v = (int64_t)(upper ? (open ? ceil(d) - 1 : floor(d)) : (open ? floor(d) + 1 : ceil(d)));
            open = false;
        } else {
            v = (int64_t)d;
        }
        bool tighter = !out->has || (upper ? v < out->v : v > out->v) || (v == out->v && open);
        if (tighter)
            *out = (bound){true, open, v};
    }
    return SY_OK;
}

/*
 * Non-negative decimals (no exponent) between magnitudes a and b (b absent:
 * unbounded), each end open or closed: the integer part decides, except at
 * the ends, where an open a needs a non-zero fraction and a closed b an
 * all-zero one. Requires a < b, or a == b with both closed.
 */
static void nonneg_reals(sy_gbuf *out, int64_t a, bool a_open, bool has_b, int64_t b, bool b_open)
{
    /* Fraction digits bounded as in sy_gjson_basic_rules (16 = SY_GJSON_MAX_DIGITS). */
    static const char frac[] = " (\".\" [0-9]{1,16})?", nonzero[] = " \".\" [0-9]{0,15} [1-9]",
                      zeros[] = " (\".\" \"0\"{1,16})?";
    sy_gbuf_puts(out, "(");
    if (has_b && a == b) {
        sy_gbuf_printf(out, "\"%lld\"%s)", (long long)b, zeros);
        return;
    }
    int alts = 0;
    if (a_open) {
        sy_gbuf_printf(out, "\"%lld\"%s", (long long)a, nonzero);
        alts++;
    }
    int64_t from = a_open ? a + 1 : a;
    if (!has_b || from <= b - 1) {
        sy_gbuf_puts(out, alts++ ? " | " : "");
        sy_gint_range_emit(out, true, from, has_b, b - 1);
        sy_gbuf_puts(out, frac);
    }
    if (has_b && !b_open) {
        sy_gbuf_puts(out, alts++ ? " | " : "");
        sy_gbuf_printf(out, "\"%lld\"%s", (long long)b, zeros);
    }
    sy_gbuf_puts(out, ")");
}

static int gen_number(sy_gjs *c, json_t *s, const char *path, bool integer, sy_gbuf *out)
{
    bound lo, hi;
    int rc = get_bound(c, s, path, false, integer, &lo);
    if (rc == SY_OK)
        rc = get_bound(c, s, path, true, integer, &hi);
    if (rc != SY_OK)
        return rc;
    if (lo.has && hi.has && (lo.v > hi.v || (lo.v == hi.v && (lo.open || hi.open))))
        return sy_err_set(c->err, SY_ERR_INVALID, "%s: no %s lies between the minimum and the maximum", path,
                          integer ? "integer" : "number");
    if (!lo.has && !hi.has) {
        sy_gbuf_printf(out, "%s-%s", c->name, integer ? "int" : "number");
        return SY_OK;
    }
    if (integer) {
        sy_gint_range_emit(out, lo.has, lo.v, hi.has, hi.v);
        return SY_OK;
    }
    /* Bounded numbers have no exponent: a plain decimal compares simply.
     * A negative number's magnitude has the bounds swapped. */
    sy_gbuf_puts(out, "(");
    if (lo.has && lo.v >= 0) {
        nonneg_reals(out, lo.v, lo.open, hi.has, hi.v, hi.open);
    } else if (hi.has && hi.v <= 0) {
        sy_gbuf_puts(out, "\"-\" ");
        nonneg_reals(out, -hi.v, hi.open, lo.has, lo.has ? -lo.v : 0, lo.open);
        if (hi.v == 0 && !hi.open)
            sy_gbuf_puts(out, " | \"0\" (\".\" \"0\"{1,16})?"); /* zero without its sign */
    } else {
        sy_gbuf_puts(out, "\"-\" ");
        nonneg_reals(out, 0, false, lo.has, lo.has ? -lo.v : 0, lo.open);
        sy_gbuf_puts(out, " | ");
        nonneg_reals(out, 0, false, hi.has, hi.v, hi.open);
    }
    sy_gbuf_puts(out, ")");
    return SY_OK;
}

/* ------------------------------------------------------------ strings */

static int gen_string(sy_gjs *c, json_t *s, const char *path, sy_gbuf *out)
{
    long min, max;
    int rc = get_count(c, s, path, "minLength", &min);
    if (rc == SY_OK)
        rc = get_count(c, s, path, "maxLength", &max);
    if (rc != SY_OK)
        return rc;
    json_t *pattern = json_object_get(s, "pattern"), *format = json_object_get(s, "format");
    if (pattern && !json_is_string(pattern))
        return sy_err_set(c->err, SY_ERR_INVALID, "%s.pattern: expected a string", path);
    if (format && !json_is_string(format))
        return sy_err_set(c->err, SY_ERR_INVALID, "%s.format: expected a string", path);
    bool lengths = min >= 0 || max >= 0;
    if (min >= 0 && max >= 0 && max < min)
        return sy_err_set(c->err, SY_ERR_INVALID, "%s: maxLength %ld is below minLength %ld", path, max, min);
    if (pattern && format)
        return unsupported(c, path, "format", "together with 'pattern' is not supported by constrained decoding");
    sy_gbuf fmt_expr;
    sy_gbuf_init(&fmt_expr);
    bool known = !format || sy_gformat_emit(&fmt_expr, json_string_value(format));
    sy_gbuf_free(&fmt_expr);
    if (!known)
        return sy_err_set(c->err, SY_ERR_INVALID, "%s.format: '%s' is not supported by constrained decoding "
                                                  "(supported: %s)", path, json_string_value(format),
                          sy_gformat_names);
    sy_gcpset one = {0};
    if (pattern && lengths) {
        /* ^[class]{m,n}$ meets the lengths in one counted class; any other
         * regex cannot be intersected with them. */
        long pm, pn;
        if (!sy_gregex_single_class(json_string_value(pattern), &one, &pm, &pn))
            return unsupported(c, path, min >= 0 ? "minLength" : "maxLength",
                               "together with 'pattern' is supported only when the pattern is one repeated class "
                               "anchored at both ends (such as ^[a-z0-9_]{3,16}$)");
        if (min < pm)
            min = pm;
        if (pn >= 0 && (max < 0 || max > pn))
            max = pn;
        if (max >= 0 && max < min) {
            sy_gcpset_free(&one);
            return sy_err_set(c->err, SY_ERR_INVALID, "%s: no string matches both the pattern and the lengths", path);
        }
        pattern = NULL;
    }
    if (format && lengths) {
        /* Lengths every string of the format meets anyway are no constraint. */
        long fm, fn;
        sy_gformat_lengths(json_string_value(format), &fm, &fn);
        if (min > fm || (max >= 0 && (fn < 0 || max < fn)))
            return unsupported(c, path, max >= 0 ? "maxLength" : "minLength",
                               "together with 'format' is supported only when every string of the format meets it");
        min = max = -1;
    }
    if (max - (min < 0 ? 0 : min) > SCHEMA_MAX_SPAN) {
        sy_gcpset_free(&one);
        return unsupported(c, path, "maxLength", "more than " SY_STR(SCHEMA_MAX_SPAN) " above minLength is not "
                                                 "supported by constrained decoding");
    }
    sy_gbuf_puts(out, "(\"\\\"\" ");
    if (pattern) {
        char *ppath = sy_gjs_join(path, "pattern");
        char any[SY_GRULE_NAME_MAX + 8];
        snprintf(any, sizeof any, "%s-char", c->name);
        rc = ppath ? sy_gregex_emit(out, json_string_value(pattern), true, any, ppath, c->err) : sy_gjs_oom(c);
        free(ppath);
        if (rc != SY_OK)
            return rc;
    } else if (format) {
        sy_gformat_emit(out, json_string_value(format));
    } else if (max != 0 && one.n) {
        sy_gcpset_emit_json(out, &one);
        put_count(out, min < 0 ? 0 : min, max);
    } else if (max != 0) {
        sy_gbuf_printf(out, "%s-char", c->name);
        put_count(out, min < 0 ? 0 : min, max);
    }
    sy_gcpset_free(&one);
    sy_gbuf_puts(out, " \"\\\"\")");
    return SY_OK;
}

/* ------------------------------------------------------------ arrays */

typedef struct arr_spec {
    size_t k;      /* prefixItems */
    bool has_tail; /* items may follow the prefix */
    long min, max; /* max -1: unbounded */
} arr_spec;

static int item_expr(sy_gjs *c, json_t *item, const char *path, const char *seg, size_t i, bool indexed, sy_gbuf *out)
{
    char *ipath = indexed ? join_index(path, seg, i) : sy_gjs_join(path, seg);
    if (!ipath)
        return sy_gjs_oom(c);
    sy_gbuf e;
    sy_gbuf_init(&e);
    int rc = sy_gjs_gen(c, item, ipath, &e);
    free(ipath);
    if (rc == SY_OK)
        rc = e.oom ? sy_gjs_oom(c) : sy_gjs_put_ref(c, out, "item", &e);
    sy_gbuf_free(&e);
    return rc;
}

/* What may follow once i items are written. */
static int array_rest(sy_gjs *c, const arr_spec *a, const char *tail_expr, sy_gbuf *const *items, size_t i, sy_gbuf *out)
{
    if (a->max >= 0 && (long)i >= a->max)
        return SY_OK;
    if (i >= a->k) {
        if (!a->has_tail)
            return SY_OK;
        long lo = a->min > (long)i ? a->min - (long)i : 0, hi = a->max < 0 ? -1 : a->max - (long)i;
        if (i == 0) {
            sy_gbuf_printf(out, "(%s (%s-comma %s)", tail_expr, c->name, tail_expr);
            put_count(out, lo > 0 ? lo - 1 : 0, hi < 0 ? -1 : hi - 1);
            sy_gbuf_puts(out, lo > 0 ? ")" : ")?");
        } else {
            sy_gbuf_printf(out, "(%s-comma %s)", c->name, tail_expr);
            put_count(out, lo, hi);
        }
        return SY_OK;
    }
    sy_gbuf_puts(out, "(");
    if (i)
        sy_gbuf_printf(out, "%s-comma ", c->name);
    sy_gbuf_putn(out, items[i]->s, items[i]->len);
    sy_gbuf_puts(out, " ");
    int rc = array_rest(c, a, tail_expr, items, i + 1, out);
    sy_gbuf_puts(out, (long)i < a->min ? ")" : ")?");
    return rc;
}

static int gen_array(sy_gjs *c, json_t *s, const char *path, sy_gbuf *out)
{
    arr_spec a = {0};
    int rc = get_count(c, s, path, "minItems", &a.min);
    if (rc == SY_OK)
        rc = get_count(c, s, path, "maxItems", &a.max);
    if (rc != SY_OK)
        return rc;
    if (a.min < 0)
        a.min = 0;
    json_t *uniq = json_object_get(s, "uniqueItems");
    if (uniq && !json_is_false(uniq))
        return unsupported(c, path, "uniqueItems", json_is_true(uniq) ? NULL : "must be a boolean");
    json_t *items = json_object_get(s, "items"), *prefix = json_object_get(s, "prefixItems");
    const char *prefix_kw = "prefixItems";
    json_t *tail;
    if (json_is_array(items)) {
        /* Draft 4-7 tuples: items is the prefix, additionalItems the rest. */
        if (prefix)
            return unsupported(c, path, "prefixItems", "beside an items array is ambiguous");
        prefix = items;
        prefix_kw = "items";
        tail = json_object_get(s, "additionalItems");
    } else {
        if (json_object_get(s, "additionalItems"))
            return unsupported(c, path, "additionalItems", "without an items array has no effect here; remove it");
        tail = items;
    }
    if (prefix && !json_is_array(prefix))
        return sy_err_set(c->err, SY_ERR_INVALID, "%s.%s: expected an array of schemas", path, prefix_kw);
    a.k = json_array_size(prefix);
    bool tail_false = tail && json_is_false(tail);
    if (a.max - a.min > SCHEMA_MAX_SPAN)
        return unsupported(c, path, "maxItems", "more than " SY_STR(SCHEMA_MAX_SPAN) " above minItems is not "
                                                "supported by constrained decoding");
    if (a.max >= 0 && a.min > a.max)
        return sy_err_set(c->err, SY_ERR_INVALID, "%s: minItems %ld is above maxItems %ld", path, a.min, a.max);
    if (tail_false && a.min > (long)a.k)
        return sy_err_set(c->err, SY_ERR_INVALID, "%s: minItems %ld needs more items than the %zu %s allows", path,
                          a.min, a.k, prefix_kw);
    sy_gbuf *iexpr = calloc(a.k ? a.k : 1, sizeof *iexpr);
    if (!iexpr)
        return sy_gjs_oom(c);
    sy_gbuf *const *iptr = NULL;
    sy_gbuf **ptrs = calloc(a.k ? a.k : 1, sizeof *ptrs);
    sy_gbuf texpr;
    sy_gbuf_init(&texpr);
    if (!ptrs) {
        free(iexpr);
        return sy_gjs_oom(c);
    }
    for (size_t i = 0; i < a.k && rc == SY_OK; i++) {
        sy_gbuf_init(&iexpr[i]);
        ptrs[i] = &iexpr[i];
        json_t *it = json_array_get(prefix, i);
        if (json_is_false(it)) {
            /* No array may be this long: the items before are all there is. */
            if (a.min > (long)i)
                rc = sy_err_set(c->err, SY_ERR_INVALID, "%s.%s[%zu]: false forbids the item minItems needs", path,
                                prefix_kw, i);
            else if (a.max < 0 || a.max > (long)i)
                a.max = (long)i;
            a.k = i + 1;
            break;
        }
        rc = item_expr(c, it, path, prefix_kw, i, true, &iexpr[i]);
    }
    iptr = ptrs;
    if (rc == SY_OK) {
        a.has_tail = !tail_false;
        if (a.has_tail && (!tail || json_is_true(tail)))
            sy_gbuf_printf(&texpr, "%s-value", c->name);
        else if (a.has_tail)
            rc = item_expr(c, tail, path, prefix == items ? "additionalItems" : "items", 0, false, &texpr);
    }
    if (rc == SY_OK) {
        sy_gbuf body;
        sy_gbuf_init(&body);
        sy_gbuf_puts(&body, "\"[\" ");
        rc = array_rest(c, &a, texpr.s, iptr, 0, &body);
        sy_gbuf_puts(&body, " \"]\"");
        if (rc == SY_OK) {
            char *r = sy_gjs_new_rule(c, "arr");
            if (!r || body.oom) {
                rc = sy_gjs_oom(c);
            } else {
                sy_gjs_define(c, r, body.s);
                sy_gbuf_puts(out, r);
            }
            free(r);
        }
        sy_gbuf_free(&body);
    }
    for (size_t i = 0; i < a.k; i++)
        sy_gbuf_free(&iexpr[i]);
    free(iexpr);
    free(ptrs);
    sy_gbuf_free(&texpr);
    return rc;
}

/* ------------------------------------------------------------ schemas */

static int parse_types(sy_gjs *c, json_t *s, const char *path, unsigned *types)
{
    static const char *const names[] = {"null", "boolean", "integer", "number", "string", "array", "object"};
    json_t *t = json_object_get(s, "type");
    *types = 0;
    if (!t)
        return SY_OK;
    size_t n = json_is_array(t) ? json_array_size(t) : 1;
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_is_array(t) ? json_array_get(t, i) : t;
        const char *name = json_string_value(x);
        unsigned bit = 0;
        for (unsigned j = 0; name && j < 7; j++)
            if (!strcmp(name, names[j]))
                bit = 1u << j;
        if (!bit)
            return sy_err_set(c->err, SY_ERR_INVALID, "%s.type: expected one of null, boolean, integer, number, "
                                                      "string, array, object (or an array of them)", path);
        *types |= bit;
    }
    if (!*types)
        return sy_err_set(c->err, SY_ERR_INVALID, "%s.type: an empty array of types allows no value", path);
    return SY_OK;
}

/* The types a schema without "type" is about, from its keywords. */
static unsigned implied_types(json_t *s)
{
    static const char *const obj[] = {"properties", "required", "additionalProperties", NULL};
    static const char *const arr[] = {"items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems", NULL};
    static const char *const str[] = {"minLength", "maxLength", "pattern", "format", NULL};
    static const char *const num[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", NULL};
    unsigned t = 0;
    const char *kw;
    json_t *v;
    json_object_foreach(s, kw, v) {
        if (in_list(obj, kw))
            t |= T_OBJ;
        if (in_list(arr, kw))
            t |= T_ARR;
        if (in_list(str, kw))
            t |= T_STR;
        if (in_list(num, kw))
            t |= T_NUM;
    }
    return t ? t : T_ALL;
}

static int gen_union(sy_gjs *c, json_t *s, const char *path, const char *kw, sy_gbuf *out)
{
    json_t *list = json_object_get(s, kw);
    if (!json_is_array(list) || !json_array_size(list))
        return sy_err_set(c->err, SY_ERR_INVALID, "%s.%s: expected a non-empty array of schemas", path, kw);
    const char *other;
    json_t *v;
    json_object_foreach(s, other, v) {
        if (strcmp(other, kw) && !in_list(annotations, other) && strcmp(other, "$defs") && strcmp(other, "definitions"))
            return unsupported(c, path, other, strcmp(other, "anyOf") && strcmp(other, "oneOf") && strcmp(other, "allOf")
                                                   ? "beside anyOf/oneOf/allOf is not supported by constrained decoding"
                                                   : "beside another anyOf/oneOf/allOf is not supported by "
                                                     "constrained decoding");
    }
    if (!strcmp(kw, "allOf") && json_array_size(list) != 1)
        return unsupported(c, path, kw, "with more than one schema is not supported by constrained decoding");
    sy_gbuf body;
    sy_gbuf_init(&body);
    int rc = SY_OK;
    sy_gbuf_puts(&body, "(");
    for (size_t i = 0; i < json_array_size(list) && rc == SY_OK; i++) {
        char *bpath = join_index(path, kw, i);
        sy_gbuf_puts(&body, i ? " | " : "");
        rc = bpath ? sy_gjs_gen(c, json_array_get(list, i), bpath, &body) : sy_gjs_oom(c);
        free(bpath);
    }
    sy_gbuf_puts(&body, ")");
    if (rc == SY_OK)
        rc = body.oom ? sy_gjs_oom(c) : sy_gjs_put_ref(c, out, "alt", &body);
    sy_gbuf_free(&body);
    return rc;
}

int sy_gjs_gen(sy_gjs *c, json_t *s, const char *path, sy_gbuf *out)
{
    if (json_is_true(s)) {
        sy_gbuf_printf(out, "%s-value", c->name);
        return SY_OK;
    }
    if (json_is_false(s))
        return sy_err_set(c->err, SY_ERR_INVALID, "%s: the schema false allows no value here", path);
    if (!json_is_object(s))
        return sy_err_set(c->err, SY_ERR_INVALID, "%s: expected a schema (an object or a boolean)", path);
    if (c->depth >= SCHEMA_MAX_DEPTH)
        return sy_err_set(c->err, SY_ERR_INVALID, "%s: schemas nested deeper than %d are not supported", path,
                          SCHEMA_MAX_DEPTH);
    const char *kw;
    json_t *v;
    json_object_foreach(s, kw, v) {
        if (!in_list(annotations, kw) && !in_list(supported, kw))
            return unsupported(c, path, kw, NULL);
    }
    json_t *nullable = json_object_get(s, "nullable");
    if (nullable && !json_is_boolean(nullable))
        return sy_err_set(c->err, SY_ERR_INVALID, "%s.nullable: expected a boolean", path);
    c->depth++;
    int rc;
    json_t *ref = json_object_get(s, "$ref");
    if (ref) {
        rc = SY_OK;
        json_object_foreach(s, kw, v) {
            if (strcmp(kw, "$ref") && !in_list(annotations, kw) && strcmp(kw, "$defs") && strcmp(kw, "definitions")) {
                rc = unsupported(c, path, kw, "beside $ref is not supported by constrained decoding");
                break;
            }
        }
        if (rc == SY_OK)
            rc = json_is_string(ref) ? gen_ref(c, json_string_value(ref), path, out)
                                     : sy_err_set(c->err, SY_ERR_INVALID, "%s.$ref: expected a string", path);
        c->depth--;
        return rc;
    }
    static const char *const unions[] = {"anyOf", "oneOf", "allOf"};
    for (size_t i = 0; i < 3; i++)
        if (json_object_get(s, unions[i])) {
            rc = gen_union(c, s, path, unions[i], out);
            c->depth--;
            return rc;
        }
    unsigned types;
    rc = parse_types(c, s, path, &types);
    if (rc != SY_OK) {
        c->depth--;
        return rc;
    }
    bool has_type = types != 0;
    if (!has_type)
        types = implied_types(s);
    if (json_is_true(nullable))
        types |= T_NULL;
    if (json_object_get(s, "enum") || json_object_get(s, "const")) {
        rc = gen_enum(c, s, path, types, out);
        c->depth--;
        return rc;
    }
    if (types == T_ALL && !has_type) {
        sy_gbuf_printf(out, "%s-value", c->name);
        c->depth--;
        return SY_OK;
    }
    sy_gbuf body;
    sy_gbuf_init(&body);
    int alts = 0;
    if (types & T_NUM)
        types &= ~(unsigned)T_INT; /* every integer is a number */
    for (unsigned bit = 1; bit <= T_OBJ && rc == SY_OK; bit <<= 1) {
        if (!(types & bit))
            continue;
        sy_gbuf_puts(&body, alts++ ? " | " : "");
        switch (bit) {
        case T_NULL: sy_gbuf_puts(&body, "\"null\""); break;
        case T_BOOL: sy_gbuf_puts(&body, "(\"true\" | \"false\")"); break;
        case T_INT: rc = gen_number(c, s, path, true, &body); break;
        case T_NUM: rc = gen_number(c, s, path, false, &body); break;
        case T_STR: rc = gen_string(c, s, path, &body); break;
        case T_ARR: rc = gen_array(c, s, path, &body); break;
        case T_OBJ: rc = sy_gjs_object(c, s, path, &body); break;
        }
    }
    if (rc == SY_OK) {
        if (body.oom) {
            rc = sy_gjs_oom(c);
        } else if (alts > 1) {
            sy_gbuf_puts(out, "(");
            sy_gbuf_putn(out, body.s, body.len);
            sy_gbuf_puts(out, ")");
        } else {
            sy_gbuf_putn(out, body.s, body.len);
        }
    }
    sy_gbuf_free(&body);
    c->depth--;
    return rc;
}

int sy_gsrc_add_json_schema_flags(sy_gsrc *src, const char *name, const char *schema_json, const char *path,
                                  unsigned flags, sy_err *err)
{
    const char *where = path && *path ? path : "schema";
    size_t nlen = name ? strlen(name) : 0;
    if (!nlen || nlen + 24 > SY_GRULE_NAME_MAX)
        return sy_err_set(err, SY_ERR_INVALID, "%s: expected a rule name of 1..%d characters", where,
                          SY_GRULE_NAME_MAX - 24);
    if (!schema_json)
        return sy_err_set(err, SY_ERR_INVALID, "%s: expected a JSON schema, got NULL", where);
    json_error_t jerr;
    json_t *root = json_loads(schema_json, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return sy_err_set(err, SY_ERR_INVALID, "%s: the schema is not valid JSON: %s at line %d column %d", where,
                          jerr.text, jerr.line, jerr.column);
    sy_gjs c = {.name = name, .flags = flags, .root = root, .root_path = where, .err = err};
    sy_gbuf_init(&c.rules);
    sy_gjson_basic_rules(&c.rules, name);
    sy_gbuf top;
    sy_gbuf_init(&top);
    int rc = sy_gjs_gen(&c, root, where, &top);
    if (rc == SY_OK && (top.oom || c.rules.oom))
        rc = sy_gjs_oom(&c);
    if (rc == SY_OK) {
        sy_gbuf_printf(&c.rules, "%s ::= %s\n", name, top.s);
        rc = c.rules.oom ? sy_gjs_oom(&c) : sy_gsrc_add_gbnf(src, c.rules.s, where, err);
    }
    sy_gbuf_free(&top);
    sy_gbuf_free(&c.rules);
    for (size_t i = 0; i < c.n_refs; i++) {
        free(c.refs[i].ref);
        free(c.refs[i].rule);
    }
    free(c.refs);
    json_decref(root);
    return rc;
}

int sy_gsrc_add_json_schema(sy_gsrc *src, const char *name, const char *schema_json, const char *path, sy_err *err)
{
    return sy_gsrc_add_json_schema_flags(src, name, schema_json, path, 0, err);
}
