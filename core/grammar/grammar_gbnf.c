/*
 * GBNF sources: the text buffer the builders write into, the parser of
 * llama.cpp's dialect into one tree per rule, and the dump back to GBNF.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_impl.h"
#include "util/utf8.h"

/* ------------------------------------------------------------ sy_gbuf */

void sy_gbuf_init(sy_gbuf *b)
{
    memset(b, 0, sizeof *b);
}

void sy_gbuf_free(sy_gbuf *b)
{
    free(b->s);
    memset(b, 0, sizeof *b);
}

static bool gbuf_reserve(sy_gbuf *b, size_t extra)
{
    if (b->oom)
        return false;
    if (b->len + extra + 1 <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + extra + 1)
        cap *= 2;
    char *s = realloc(b->s, cap);
    if (!s) {
        b->oom = true;
        return false;
    }
    b->s = s;
    b->cap = cap;
    return true;
}

void sy_gbuf_putn(sy_gbuf *b, const char *s, size_t n)
{
    if (!gbuf_reserve(b, n))
        return;
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = 0;
}

void sy_gbuf_puts(sy_gbuf *b, const char *s)
{
    sy_gbuf_putn(b, s, strlen(s));
}

void sy_gbuf_printf(sy_gbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !gbuf_reserve(b, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* Escapes one code point for GBNF; in_class adds the class metacharacters. */
static void gbuf_escape_cp(sy_gbuf *b, uint32_t cp, bool in_class)
{
    switch (cp) {
    case '\n': sy_gbuf_puts(b, "\\n"); return;
    case '\t': sy_gbuf_puts(b, "\\t"); return;
    case '\r': sy_gbuf_puts(b, "\\r"); return;
    case '\\': sy_gbuf_puts(b, "\\\\"); return;
    case '"': sy_gbuf_puts(b, in_class ? "\"" : "\\\""); return;
    default: break;
    }
    if (in_class && (cp == ']' || cp == '[' || cp == '^' || cp == '-')) {
        char e[3] = {'\\', (char)cp, 0};
        sy_gbuf_puts(b, e);
        return;
    }
    if (cp < 0x20 || cp == 0x7F) {
        sy_gbuf_printf(b, "\\x%02X", (unsigned)cp);
        return;
    }
    if (cp >= 0xD800 && cp <= 0xDFFF) { /* not encodable: keep it visible */
        sy_gbuf_printf(b, "\\u%04X", (unsigned)cp);
        return;
    }
    char u[4];
    sy_gbuf_putn(b, u, sy_utf8_encode(cp, u));
}

void sy_gbuf_literal(sy_gbuf *b, const char *s, size_t n)
{
    sy_gbuf_putn(b, "\"", 1);
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t l = sy_utf8_decode(s + i, n - i, &cp);
        if (l == 0) {
            sy_gbuf_printf(b, "\\x%02X", p[i]);
            i++;
            continue;
        }
        gbuf_escape_cp(b, cp, false);
        i += l;
    }
    sy_gbuf_putn(b, "\"", 1);
}

void sy_gbuf_class_cp(sy_gbuf *b, uint32_t cp)
{
    gbuf_escape_cp(b, cp, true);
}

/* ------------------------------------------------------------ sources */

sy_gsrc *sy_gsrc_new(void)
{
    return calloc(1, sizeof(sy_gsrc));
}

void gnode_free(gnode *n)
{
    if (!n)
        return;
    if (n->kids) {
        size_t k = n->kind == GN_REP ? 1 : n->n;
        for (size_t i = 0; i < k; i++)
            gnode_free(n->kids[i]);
    }
    free(n->kids);
    free(n->text);
    free(n->ranges);
    free(n);
}

void sy_gsrc_free(sy_gsrc *src)
{
    if (!src)
        return;
    for (size_t i = 0; i < src->n; i++) {
        free(src->rules[i].name);
        free(src->rules[i].where);
        gnode_free(src->rules[i].body);
    }
    free(src->rules);
    free(src);
}

const grule *gsrc_find(const sy_gsrc *src, const char *name)
{
    for (size_t i = 0; i < src->n; i++)
        if (strcmp(src->rules[i].name, name) == 0)
            return &src->rules[i];
    return NULL;
}

bool sy_gsrc_has_rule(const sy_gsrc *src, const char *name)
{
    return src && name && gsrc_find(src, name) != NULL;
}

/* ------------------------------------------------------------ parser */

typedef struct gparser {
    const char *s, *p, *end;
    const char *where;
    sy_err *err;
    int code;  /* first error, or 0 */
    int depth; /* groups open and postfix operators stacked: bounds recursion */
} gparser;

/* Deeper nesting is refused rather than recursed into. */
#define GBNF_MAX_DEPTH 1000

static void where_of(const gparser *ps, const char *at, int *line, int *col)
{
    int l = 1, c = 1;
    for (const char *q = ps->s; q < at; q++) {
        if (*q == '\n') {
            l++;
            c = 1;
        } else if (((unsigned char)*q & 0xC0) != 0x80) {
            c++;
        }
    }
    *line = l;
    *col = c;
}

/* What sits at p, for "found ..." in errors. */
static void describe(const gparser *ps, const char *at, char *out, size_t cap)
{
    if (at >= ps->end) {
        snprintf(out, cap, "the end of the text");
        return;
    }
    unsigned char c = (unsigned char)*at;
    if (c == '\n')
        snprintf(out, cap, "the end of the line");
    else if (c < 0x20 || c == 0x7F)
        snprintf(out, cap, "byte 0x%02X", c);
    else {
        size_t n = 0;
        while (at + n < ps->end && n < 12 && at[n] != '\n')
            n++;
        snprintf(out, cap, "\"%.*s\"", (int)n, at);
    }
}

static gnode *fail(gparser *ps, const char *at, const char *expected)
{
    if (ps->code)
        return NULL;
    int line, col;
    where_of(ps, at, &line, &col);
    char found[64];
    describe(ps, at, found, sizeof found);
    ps->code = sy_err_set(ps->err, SY_ERR_INVALID, "%s:%d:%d: expected %s, found %s", ps->where, line, col,
                          expected, found);
    return NULL;
}

static gnode *oom(gparser *ps)
{
    if (!ps->code)
        ps->code = sy_err_set(ps->err, SY_ERR_NOMEM, "%s: out of memory parsing the grammar", ps->where);
    return NULL;
}

static bool is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

/* Skips blanks and comments; newlines too when newline_ok. */
static void skip_space(gparser *ps, bool newline_ok)
{
    while (ps->p < ps->end) {
        char c = *ps->p;
        if (c == ' ' || c == '\t' || (newline_ok && (c == '\n' || c == '\r'))) {
            ps->p++;
        } else if (c == '#') {
            while (ps->p < ps->end && *ps->p != '\n')
                ps->p++;
        } else {
            break;
        }
    }
}

/* At the end of a top-level line: does the rule go on with "| ..." on a
 * following line? (llama.cpp ends the rule; we also take that layout.) */
static bool continues_with_bar(gparser *ps)
{
    const char *save = ps->p;
    skip_space(ps, true);
    if (ps->p < ps->end && *ps->p == '|')
        return true;
    ps->p = save;
    return false;
}

static gnode *node_new(gparser *ps, int kind, const char *at)
{
    gnode *n = calloc(1, sizeof *n);
    if (!n)
        return oom(ps);
    n->kind = kind;
    where_of(ps, at, &n->line, &n->col);
    return n;
}

static bool node_add_kid(gparser *ps, gnode *n, gnode *kid)
{
    gnode **k = realloc(n->kids, (n->n + 1) * sizeof *k);
    if (!k) {
        gnode_free(kid);
        oom(ps);
        return false;
    }
    n->kids = k;
    n->kids[n->n++] = kid;
    return true;
}

/* One character of a literal or class, escapes decoded, as a code point.
 * Returns false (error set) when malformed. */
static bool parse_char(gparser *ps, uint32_t *cp)
{
    if (ps->p >= ps->end)
        return fail(ps, ps->p, "a character"), false;
    if (*ps->p == '\\') {
        const char *at = ps->p;
        ps->p++;
        if (ps->p >= ps->end)
            return fail(ps, ps->p, "an escape after \\"), false;
        char e = *ps->p++;
        int digits = 0;
        switch (e) {
        case 'n': *cp = '\n'; return true;
        case 't': *cp = '\t'; return true;
        case 'r': *cp = '\r'; return true;
        case '0': *cp = 0; return true;
        case '\\': case '"': case '\'': case '[': case ']': case '-': case '^': case '/':
            *cp = (unsigned char)e;
            return true;
        case 'x': digits = 2; break;
        case 'u': digits = 4; break;
        case 'U': digits = 8; break;
        default:
            ps->p = at;
            return fail(ps, at, "an escape \\n \\t \\r \\\\ \\\" \\[ \\] \\- \\^ \\xHH \\uHHHH or \\UHHHHHHHH"), false;
        }
        uint32_t v = 0;
        for (int i = 0; i < digits; i++) {
            int h = ps->p < ps->end ? sy_hex_digit(*ps->p) : -1;
            if (h < 0) {
                char what[64];
                snprintf(what, sizeof what, "%d hex digits after \\%c", digits, e);
                return fail(ps, ps->p, what), false;
            }
            v = v * 16 + (uint32_t)h;
            ps->p++;
        }
        if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) {
            ps->p = at;
            return fail(ps, at, "a Unicode scalar value (at most U+10FFFF, not a surrogate)"), false;
        }
        *cp = v;
        return true;
    }
    size_t l = sy_utf8_decode(ps->p, (size_t)(ps->end - ps->p), cp);
    if (l == 0)
        return fail(ps, ps->p, "UTF-8 text"), false;
    if (*cp == '\n' || *cp == '\r')
        return fail(ps, ps->p, "a closing quote or bracket before the end of the line"), false;
    ps->p += l;
    return true;
}

static gnode *parse_literal(gparser *ps)
{
    const char *at = ps->p;
    gnode *n = node_new(ps, GN_LIT, at);
    if (!n)
        return NULL;
    ps->p++; /* the quote */
    size_t cap = 16;
    n->text = malloc(cap);
    if (!n->text)
        return gnode_free(n), oom(ps);
    while (ps->p < ps->end && *ps->p != '"') {
        uint32_t cp;
        if (!parse_char(ps, &cp))
            return gnode_free(n), NULL;
        if (n->n + 4 >= cap) {
            cap *= 2;
            char *t = realloc(n->text, cap);
            if (!t)
                return gnode_free(n), oom(ps);
            n->text = t;
        }
        n->n += sy_utf8_encode(cp, n->text + n->n);
    }
    if (ps->p >= ps->end)
        return gnode_free(n), fail(ps, ps->p, "a closing \" for the literal opened at this rule");
    ps->p++;
    n->text[n->n] = 0;
    return n;
}

static bool class_add(gparser *ps, gnode *n, uint32_t lo, uint32_t hi)
{
    uint32_t *r = realloc(n->ranges, (n->n + 1) * 2 * sizeof *r);
    if (!r)
        return oom(ps), false;
    n->ranges = r;
    r[n->n * 2] = lo;
    r[n->n * 2 + 1] = hi;
    n->n++;
    return true;
}

static gnode *parse_class(gparser *ps)
{
    gnode *n = node_new(ps, GN_CLASS, ps->p);
    if (!n)
        return NULL;
    ps->p++; /* [ */
    if (ps->p < ps->end && *ps->p == '^') {
        n->neg = true;
        ps->p++;
    }
    while (ps->p < ps->end && *ps->p != ']') {
        const char *at = ps->p;
        uint32_t lo, hi;
        if (!parse_char(ps, &lo))
            return gnode_free(n), NULL;
        hi = lo;
        if (ps->p + 1 < ps->end && *ps->p == '-' && ps->p[1] != ']') {
            ps->p++;
            if (!parse_char(ps, &hi))
                return gnode_free(n), NULL;
            if (hi < lo) {
                ps->p = at;
                return gnode_free(n), fail(ps, at, "a range whose end is not below its start");
            }
        }
        if (!class_add(ps, n, lo, hi))
            return gnode_free(n), NULL;
    }
    if (ps->p >= ps->end)
        return gnode_free(n), fail(ps, ps->p, "a closing ] for the character class");
    ps->p++;
    return n;
}

static gnode *parse_alternatives(gparser *ps, bool nested);

static bool parse_uint(gparser *ps, int *out)
{
    if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9')
        return false;
    long v = 0;
    while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
        v = v * 10 + (*ps->p - '0');
        if (v > 100000)
            return fail(ps, ps->p, "a repetition count of at most 100000"), false;
        ps->p++;
    }
    *out = (int)v;
    return true;
}

static gnode *parse_postfix(gparser *ps, gnode *item, bool nested)
{
    int item_reps = 0;
    for (;;) {
        if (ps->p >= ps->end)
            return item;
        char c = *ps->p;
        int min, max;
        const char *at = ps->p;
        if (c == '*') {
            min = 0, max = -1, ps->p++;
        } else if (c == '+') {
            min = 1, max = -1, ps->p++;
        } else if (c == '?') {
            min = 0, max = 1, ps->p++;
        } else if (c == '{') {
            ps->p++;
            skip_space(ps, nested);
            if (!parse_uint(ps, &min))
                return gnode_free(item), fail(ps, ps->p, "a number after {");
            skip_space(ps, nested);
            max = min;
            if (ps->p < ps->end && *ps->p == ',') {
                ps->p++;
                skip_space(ps, nested);
                max = -1;
                if (ps->p < ps->end && *ps->p != '}' && !parse_uint(ps, &max))
                    return gnode_free(item), fail(ps, ps->p, "a number or } after {m,");
                skip_space(ps, nested);
            }
            if (ps->p >= ps->end || *ps->p != '}')
                return gnode_free(item), fail(ps, ps->p, "} closing the repetition");
            ps->p++;
            if (max >= 0 && max < min) {
                ps->p = at;
                return gnode_free(item), fail(ps, at, "a repetition {m,n} with m <= n");
            }
        } else {
            return item;
        }
        if (ps->code)
            return gnode_free(item), NULL;
        if (++item_reps > GBNF_MAX_DEPTH)
            return gnode_free(item), fail(ps, at, "at most 1000 repetition operators on one item");
        gnode *r = node_new(ps, GN_REP, at);
        if (!r)
            return gnode_free(item), NULL;
        r->min = min;
        r->max = max;
        r->kids = malloc(sizeof *r->kids);
        if (!r->kids)
            return gnode_free(r), gnode_free(item), oom(ps);
        r->kids[0] = item;
        item = r;
        skip_space(ps, nested);
    }
}

static gnode *parse_sequence(gparser *ps, bool nested)
{
    gnode *seq = node_new(ps, GN_SEQ, ps->p);
    if (!seq)
        return NULL;
    for (;;) {
        skip_space(ps, nested);
        if (ps->p >= ps->end)
            break;
        char c = *ps->p;
        gnode *item = NULL;
        if (c == '"') {
            item = parse_literal(ps);
        } else if (c == '[') {
            item = parse_class(ps);
        } else if (c == '.') {
            item = node_new(ps, GN_CLASS, ps->p);
            if (item) {
                item->neg = true; /* [^] : any code point */
                ps->p++;
            }
        } else if (c == '(') {
            const char *open = ps->p;
            if (++ps->depth > GBNF_MAX_DEPTH)
                return gnode_free(seq), fail(ps, ps->p, "groups nested at most 1000 deep");
            ps->p++;
            item = parse_alternatives(ps, true);
            ps->depth--;
            if (item) {
                skip_space(ps, true);
                if (ps->p >= ps->end || *ps->p != ')') {
                    int line, col;
                    where_of(ps, open, &line, &col);
                    char what[96];
                    snprintf(what, sizeof what, ") closing the group opened at %d:%d", line, col);
                    gnode_free(item);
                    item = fail(ps, ps->p, what);
                } else {
                    ps->p++;
                }
            }
        } else if (is_name_char(c)) {
            const char *start = ps->p;
            while (ps->p < ps->end && is_name_char(*ps->p))
                ps->p++;
            /* a name followed by ::= starts the next rule: this one ended */
            const char *save = ps->p;
            skip_space(ps, false);
            if (!nested && ps->end - ps->p >= 3 && memcmp(ps->p, "::=", 3) == 0) {
                ps->p = start;
                break;
            }
            ps->p = save;
            item = node_new(ps, GN_REF, start);
            if (item) {
                item->text = strndup(start, (size_t)(ps->p - start));
                if (!item->text) {
                    gnode_free(item);
                    item = oom(ps);
                }
            }
        } else {
            break;
        }
        if (!item)
            return gnode_free(seq), NULL;
        skip_space(ps, nested);
        item = parse_postfix(ps, item, nested);
        if (!item)
            return gnode_free(seq), NULL;
        if (!node_add_kid(ps, seq, item))
            return gnode_free(seq), NULL;
    }
    return seq;
}

static gnode *parse_alternatives(gparser *ps, bool nested)
{
    gnode *alt = node_new(ps, GN_ALT, ps->p);
    if (!alt)
        return NULL;
    for (;;) {
        gnode *seq = parse_sequence(ps, nested);
        if (!seq || !node_add_kid(ps, alt, seq))
            return gnode_free(alt), NULL;
        skip_space(ps, nested);
        if (ps->p < ps->end && (*ps->p == '\n' || *ps->p == '\r') && !nested && !continues_with_bar(ps))
            break;
        if (ps->p >= ps->end || *ps->p != '|')
            break;
        ps->p++;
        skip_space(ps, true);
    }
    return alt;
}

static int add_rule(gparser *ps, sy_gsrc *src, const char *name, size_t name_len, const char *at, gnode *body)
{
    int line, col;
    where_of(ps, at, &line, &col);
    char nm[SY_GRULE_NAME_MAX + 1];
    snprintf(nm, sizeof nm, "%.*s", (int)name_len, name);
    const grule *old = gsrc_find(src, nm);
    if (old) {
        gnode_free(body);
        return sy_err_set(ps->err, SY_ERR_INVALID, "%s:%d:%d: rule %s is defined twice (first at %s:%d:%d)",
                          ps->where, line, col, nm, old->where, old->line, old->col);
    }
    if (src->n == src->cap) {
        size_t cap = src->cap ? src->cap * 2 : 16;
        grule *r = realloc(src->rules, cap * sizeof *r);
        if (!r) {
            gnode_free(body);
            return sy_err_set(ps->err, SY_ERR_NOMEM, "out of memory");
        }
        src->rules = r;
        src->cap = cap;
    }
    grule *r = &src->rules[src->n];
    r->name = strdup(nm);
    r->where = strdup(ps->where);
    if (!r->name || !r->where) {
        free(r->name);
        free(r->where);
        gnode_free(body);
        return sy_err_set(ps->err, SY_ERR_NOMEM, "out of memory");
    }
    r->line = line;
    r->col = col;
    r->body = body;
    src->n++;
    return SY_OK;
}

int sy_gsrc_add_gbnf(sy_gsrc *src, const char *text, const char *where, sy_err *err)
{
    if (!src || !text)
        return sy_err_set(err, SY_ERR_INVALID, "sy_gsrc_add_gbnf: NULL %s", src ? "text" : "source");
    gparser ps = {.s = text, .p = text, .end = text + strlen(text), .where = where ? where : "grammar", .err = err};
    size_t first = src->n;
    for (;;) {
        skip_space(&ps, true);
        if (ps.p >= ps.end)
            break;
        const char *name = ps.p;
        while (ps.p < ps.end && is_name_char(*ps.p))
            ps.p++;
        size_t name_len = (size_t)(ps.p - name);
        if (name_len == 0) {
            fail(&ps, ps.p, "a rule name ([a-zA-Z0-9_-]+)");
            break;
        }
        if (name_len > SY_GRULE_NAME_MAX) {
            fail(&ps, name, "a rule name of at most 256 characters");
            break;
        }
        skip_space(&ps, false);
        if (ps.end - ps.p < 3 || memcmp(ps.p, "::=", 3) != 0) {
            fail(&ps, ps.p, "::= after the rule name");
            break;
        }
        ps.p += 3;
        skip_space(&ps, true);
        gnode *body = parse_alternatives(&ps, false);
        if (!body)
            break;
        skip_space(&ps, false);
        if (ps.p < ps.end && *ps.p != '\n' && *ps.p != '\r' && !is_name_char(*ps.p)) {
            gnode_free(body);
            fail(&ps, ps.p, *ps.p == ')' ? "no ) here (no group is open)"
                                         : "a literal, [class], rule name, ( group ), | or the end of the line");
            break;
        }
        int rc = add_rule(&ps, src, name, name_len, name, body);
        if (rc) {
            ps.code = rc;
            break;
        }
    }
    if (ps.code) {
        /* leave src as it was before the call */
        for (size_t i = first; i < src->n; i++) {
            free(src->rules[i].name);
            free(src->rules[i].where);
            gnode_free(src->rules[i].body);
        }
        src->n = first;
        return ps.code;
    }
    return SY_OK;
}

/* ------------------------------------------------------------ dump */

static void dump_node(sy_gbuf *b, const gnode *n, bool top);

static void dump_atom(sy_gbuf *b, const gnode *n)
{
    bool group = (n->kind == GN_ALT && n->n > 1) || (n->kind == GN_SEQ && n->n != 1) ||
                 (n->kind == GN_ALT && n->n == 1 && n->kids[0]->n != 1);
    if (group)
        sy_gbuf_puts(b, "(");
    dump_node(b, n, false);
    if (group)
        sy_gbuf_puts(b, ")");
}

static void dump_node(sy_gbuf *b, const gnode *n, bool top)
{
    switch (n->kind) {
    case GN_LIT:
        sy_gbuf_literal(b, n->text, n->n);
        break;
    case GN_CLASS:
        if (n->neg && n->n == 0) {
            sy_gbuf_puts(b, ".");
            break;
        }
        sy_gbuf_puts(b, n->neg ? "[^" : "[");
        for (size_t i = 0; i < n->n; i++) {
            sy_gbuf_class_cp(b, n->ranges[2 * i]);
            if (n->ranges[2 * i + 1] != n->ranges[2 * i]) {
                sy_gbuf_puts(b, "-");
                sy_gbuf_class_cp(b, n->ranges[2 * i + 1]);
            }
        }
        sy_gbuf_puts(b, "]");
        break;
    case GN_REF:
        sy_gbuf_puts(b, n->text);
        break;
    case GN_ALT:
        for (size_t i = 0; i < n->n; i++) {
            if (i)
                sy_gbuf_puts(b, " | ");
            dump_node(b, n->kids[i], top);
        }
        break;
    case GN_SEQ:
        if (n->n == 0 && !top)
            sy_gbuf_puts(b, "\"\"");
        for (size_t i = 0; i < n->n; i++) {
            if (i)
                sy_gbuf_puts(b, " ");
            const gnode *k = n->kids[i];
            if (k->kind == GN_ALT)
                dump_atom(b, k);
            else
                dump_node(b, k, false);
        }
        break;
    case GN_REP:
        dump_atom(b, n->kids[0]);
        if (n->min == 0 && n->max == -1)
            sy_gbuf_puts(b, "*");
        else if (n->min == 1 && n->max == -1)
            sy_gbuf_puts(b, "+");
        else if (n->min == 0 && n->max == 1)
            sy_gbuf_puts(b, "?");
        else if (n->max == -1)
            sy_gbuf_printf(b, "{%d,}", n->min);
        else if (n->max == n->min)
            sy_gbuf_printf(b, "{%d}", n->min);
        else
            sy_gbuf_printf(b, "{%d,%d}", n->min, n->max);
        break;
    default:
        break;
    }
}

char *sy_gsrc_dump(const sy_gsrc *src)
{
    sy_gbuf b;
    sy_gbuf_init(&b);
    sy_gbuf_puts(&b, "");
    for (size_t i = 0; src && i < src->n; i++) {
        sy_gbuf_printf(&b, "%s ::= ", src->rules[i].name);
        dump_node(&b, src->rules[i].body, true);
        sy_gbuf_puts(&b, "\n");
    }
    if (b.oom) {
        sy_gbuf_free(&b);
        return NULL;
    }
    return b.s;
}
