/*
 * Regexes (the ECMAScript subset JSON schema's `pattern` uses) to GBNF.
 *
 * Supported: literals, escapes (\d \w \s \D \W \S \n \t \xHH \uHHHH \cX
 * and escaped punctuation), [classes] with ranges and ^, '.', groups
 * ((...), (?:...), (?<name>...)), '|', * + ? {m} {m,} {m,n} (a lazy '?'
 * after them is accepted: laziness changes which match is reported, not
 * which strings match), and ^ / $ at the ends of a top-level branch.
 * Refused with SY_ERR_INVALID: backreferences, lookaround, word
 * boundaries, Unicode property escapes, inline flags, anchors elsewhere.
 *
 * The oracle is Python's re (what the jsonschema package runs), whose
 * \D \W \S and '.' differ from ECMAScript's outside ASCII; those classes
 * take what both agree on, so every accepted string matches under either:
 * '.' leaves out \n \r U+2028 U+2029; \W is ASCII only; \D stops below the
 * first non-ASCII digit (U+0660); \S leaves out every code point either
 * calls a space.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_build.h"
#include "util/utf8.h"

#define REGEX_MAX_REPEAT 1000
#define REGEX_MAX_DEPTH 128

typedef struct rx {
    const char *s;
    size_t pos, len;
    bool json;
    const char *path;
    sy_err *err;
    int rc;
    int depth;
} rx;

static int rx_fail(rx *p, const char *what)
{
    if (p->rc == SY_OK) {
        p->rc = sy_err_set(p->err, SY_ERR_INVALID, "%s: regex /%.120s/ at offset %zu: %s", p->path, p->s, p->pos,
                           what);
    }
    return p->rc;
}

static bool rx_eof(const rx *p) { return p->pos >= p->len; }
static char rx_peek(const rx *p) { return rx_eof(p) ? '\0' : p->s[p->pos]; }

/* One code point of the pattern itself (UTF-8). */
static bool rx_take_cp(rx *p, uint32_t *cp)
{
    size_t k = sy_utf8_decode(p->s + p->pos, p->len - p->pos, cp);
    if (!k) {
        rx_fail(p, "the pattern is not valid UTF-8");
        return false;
    }
    p->pos += k;
    return true;
}

static void emit_cp(rx *p, sy_gbuf *out, uint32_t cp)
{
    if (p->json) {
        sy_gjson_cp_literal(out, cp);
        return;
    }
    char utf8[4];
    sy_gbuf_literal(out, utf8, sy_utf8_encode(cp, utf8));
}

static void emit_set(rx *p, sy_gbuf *out, sy_gcpset *set)
{
    sy_gcpset_normalize(set);
    if (set->oom)
        out->oom = true;
    if (p->json)
        sy_gcpset_emit_json(out, set);
    else
        sy_gcpset_emit(out, set);
}

static void add_class_escape(sy_gcpset *set, char c)
{
    switch (c) {
    case 'd': sy_gcpset_add(set, '0', '9'); break;
    case 'D':
        sy_gcpset_add(set, 0, '0' - 1);
        sy_gcpset_add(set, '9' + 1, 0x65F);
        break;
    case 'w':
        sy_gcpset_add(set, '0', '9');
        sy_gcpset_add(set, 'A', 'Z');
        sy_gcpset_add(set, '_', '_');
        sy_gcpset_add(set, 'a', 'z');
        break;
    case 'W':
        sy_gcpset_add(set, 0, '0' - 1);
        sy_gcpset_add(set, '9' + 1, 'A' - 1);
        sy_gcpset_add(set, 'Z' + 1, '_' - 1);
        sy_gcpset_add(set, '`', '`');
        sy_gcpset_add(set, 'z' + 1, 0x7F);
        break;
    case 's':
        sy_gcpset_add(set, '\t', '\r');
        sy_gcpset_add(set, ' ', ' ');
        break;
    case 'S': {
        sy_gcpset sp = {0};
        static const sy_gcp_range spaces[] = {{0x09, 0x0D}, {0x1C, 0x20},     {0x85, 0x85},     {0xA0, 0xA0},
                                              {0x1680, 0x1680}, {0x2000, 0x200A}, {0x2028, 0x2029}, {0x202F, 0x202F},
                                              {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
        for (size_t i = 0; i < sizeof spaces / sizeof spaces[0]; i++)
            sy_gcpset_add(&sp, spaces[i].lo, spaces[i].hi);
        sy_gcpset_complement(&sp);
        for (size_t i = 0; i < sp.n; i++)
            sy_gcpset_add(set, sp.r[i].lo, sp.r[i].hi);
        if (sp.oom)
            set->oom = true;
        sy_gcpset_free(&sp);
        break;
    }
    }
}

static bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

static bool take_hex(rx *p, size_t n, uint32_t *v)
{
    *v = 0;
    for (size_t i = 0; i < n; i++) {
        char c = p->pos + i < p->len ? p->s[p->pos + i] : '\0';
        if (!is_hex(c))
            return false;
        *v = *v * 16 + (uint32_t)(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
    }
    p->pos += n;
    return true;
}

/*
 * After a backslash. A class escape (\d ...) goes into set and *cp is
 * left alone (returns 2); a single character sets *cp (returns 1); an
 * error returns 0. in_class: \b is a backspace there, a boundary outside.
 */
static int parse_escape(rx *p, sy_gcpset *set, uint32_t *cp, bool in_class)
{
    if (rx_eof(p)) {
        rx_fail(p, "the pattern ends with a lone backslash");
        return 0;
    }
    char c = p->s[p->pos];
    switch (c) {
    case 'd': case 'D': case 'w': case 'W': case 's': case 'S':
        p->pos++;
        add_class_escape(set, c);
        return 2;
    case 'n': p->pos++; *cp = '\n'; return 1;
    case 'r': p->pos++; *cp = '\r'; return 1;
    case 't': p->pos++; *cp = '\t'; return 1;
    case 'f': p->pos++; *cp = '\f'; return 1;
    case 'v': p->pos++; *cp = '\v'; return 1;
    case 'b':
        if (in_class) {
            p->pos++;
            *cp = '\b';
            return 1;
        }
        rx_fail(p, "word boundaries (\\b) are not supported by constrained decoding");
        return 0;
    case 'B': rx_fail(p, "word boundaries (\\B) are not supported by constrained decoding"); return 0;
    case '0':
        if (p->pos + 1 < p->len && p->s[p->pos + 1] >= '0' && p->s[p->pos + 1] <= '9') {
            rx_fail(p, "octal escapes are not supported by constrained decoding");
            return 0;
        }
        p->pos++;
        *cp = 0;
        return 1;
    case 'x':
        p->pos++;
        if (!take_hex(p, 2, cp)) {
            rx_fail(p, "expected two hex digits after \\x");
            return 0;
        }
        return 1;
    case 'u': {
        p->pos++;
        if (!take_hex(p, 4, cp)) {
            rx_fail(p, "expected four hex digits after \\u (\\u{...} is not supported)");
            return 0;
        }
        if (*cp >= 0xD800 && *cp <= 0xDBFF && p->pos + 6 <= p->len && p->s[p->pos] == '\\' &&
            p->s[p->pos + 1] == 'u') {
            size_t save = p->pos;
            uint32_t lo;
            p->pos += 2;
            if (take_hex(p, 4, &lo) && lo >= 0xDC00 && lo <= 0xDFFF) {
                *cp = 0x10000 + ((*cp - 0xD800) << 10) + (lo - 0xDC00);
                return 1;
            }
            p->pos = save;
        }
        if (*cp >= 0xD800 && *cp <= 0xDFFF) {
            rx_fail(p, "a lone surrogate (\\uD800-\\uDFFF) matches no UTF-8 text");
            return 0;
        }
        return 1;
    }
    case 'c': {
        char l = p->pos + 1 < p->len ? p->s[p->pos + 1] : '\0';
        if (!((l >= 'a' && l <= 'z') || (l >= 'A' && l <= 'Z'))) {
            rx_fail(p, "expected a letter after \\c");
            return 0;
        }
        p->pos += 2;
        *cp = (uint32_t)(l & 0x1F);
        return 1;
    }
    case 'p': case 'P':
        rx_fail(p, "Unicode property escapes (\\p{...}) are not supported by constrained decoding");
        return 0;
    case 'k':
        rx_fail(p, "backreferences (\\k<name>) are not supported by constrained decoding");
        return 0;
    default:
        if (c >= '1' && c <= '9') {
            rx_fail(p, "backreferences are not supported by constrained decoding");
            return 0;
        }
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
            rx_fail(p, "unknown escape (expected one of \\d \\D \\w \\W \\s \\S \\n \\r \\t \\f \\v \\0 \\xHH "
                       "\\uHHHH \\cX or escaped punctuation)");
            return 0;
        }
        /* Identity escape: \. \* \\ \/ \- ... */
        return rx_take_cp(p, cp) ? 1 : 0;
    }
}

/* After '[': the class's code points into set (the caller frees it). */
static int parse_class_set(rx *p, sy_gcpset *set_out)
{
    bool negate = false;
    if (rx_peek(p) == '^') {
        negate = true;
        p->pos++;
    }
    if (rx_peek(p) == ']') {
        /* ECMAScript reads [] as the empty class and [^] as any character;
         * Python reads a leading ] as a literal. Neither reading is safe. */
        return rx_fail(p, "a class may not start with ']' (write \\])");
    }
    sy_gcpset set = {0};
    for (;;) {
        if (rx_eof(p)) {
            sy_gcpset_free(&set);
            return rx_fail(p, "unterminated character class (expected ']')");
        }
        if (p->s[p->pos] == ']') {
            p->pos++;
            break;
        }
        uint32_t lo = 0;
        int kind;
        if (p->s[p->pos] == '\\') {
            p->pos++;
            kind = parse_escape(p, &set, &lo, true);
        } else {
            kind = rx_take_cp(p, &lo) ? 1 : 0;
        }
        if (!kind) {
            sy_gcpset_free(&set);
            return p->rc;
        }
        if (kind == 2) {
            if (rx_peek(p) == '-' && p->pos + 1 < p->len && p->s[p->pos + 1] != ']') {
                sy_gcpset_free(&set);
                return rx_fail(p, "a range may not start at a class escape such as \\d");
            }
            continue;
        }
        uint32_t hi = lo;
        if (rx_peek(p) == '-' && p->pos + 1 < p->len && p->s[p->pos + 1] != ']') {
            p->pos++;
            int k2;
            if (p->s[p->pos] == '\\') {
                p->pos++;
                k2 = parse_escape(p, &set, &hi, true);
            } else {
                k2 = rx_take_cp(p, &hi) ? 1 : 0;
            }
            if (k2 != 1) {
                sy_gcpset_free(&set);
                return k2 ? rx_fail(p, "a range may not end at a class escape such as \\d") : p->rc;
            }
            if (hi < lo) {
                sy_gcpset_free(&set);
                return rx_fail(p, "range out of order in character class");
            }
        }
        sy_gcpset_add(&set, lo, hi);
    }
    if (negate)
        sy_gcpset_complement(&set);
    sy_gcpset_normalize(&set);
    if (!set.n) {
        sy_gcpset_free(&set);
        return rx_fail(p, "the character class matches nothing");
    }
    *set_out = set;
    return SY_OK;
}

static int parse_class(rx *p, sy_gbuf *out)
{
    sy_gcpset set = {0};
    int rc = parse_class_set(p, &set);
    if (rc == SY_OK)
        emit_set(p, out, &set);
    sy_gcpset_free(&set);
    return rc;
}

/* '.': anything but the line terminators of either dialect. */
static void dot_set(sy_gcpset *set)
{
    sy_gcpset_add(set, '\n', '\n');
    sy_gcpset_add(set, '\r', '\r');
    sy_gcpset_add(set, 0x2028, 0x2029);
    sy_gcpset_complement(set);
}

static int parse_alt(rx *p, sy_gbuf *out, const char *search_any, bool top);

/* Parses {m}, {m,} or {m,n} at p->pos; false (pos unchanged) when the
 * text there is not a quantifier, so '{' is then a literal. */
static bool parse_braces(rx *p, long *m, long *n)
{
    size_t i = p->pos + 1;
    long a = 0, b;
    size_t start = i;
    while (i < p->len && p->s[i] >= '0' && p->s[i] <= '9' && a <= 100000)
        a = a * 10 + (p->s[i++] - '0');
    if (i == start)
        return false;
    if (i < p->len && p->s[i] == '}') {
        b = a;
    } else if (i < p->len && p->s[i] == ',') {
        i++;
        if (i < p->len && p->s[i] == '}') {
            b = -1;
        } else {
            size_t s2 = i;
            b = 0;
            while (i < p->len && p->s[i] >= '0' && p->s[i] <= '9' && b <= 100000)
                b = b * 10 + (p->s[i++] - '0');
            if (i == s2 || i >= p->len || p->s[i] != '}')
                return false;
        }
    } else {
        return false;
    }
    p->pos = i + 1;
    *m = a;
    *n = b;
    return true;
}

static int parse_atom(rx *p, sy_gbuf *out)
{
    char c = p->s[p->pos];
    if (c == '(') {
        p->pos++;
        if (rx_peek(p) == '?') {
            const char *q = p->s + p->pos;
            size_t left = p->len - p->pos;
            if (left >= 2 && q[1] == ':') {
                p->pos += 2;
            } else if (left >= 2 && (q[1] == '=' || q[1] == '!')) {
                return rx_fail(p, "lookahead is not supported by constrained decoding");
            } else if (left >= 3 && q[1] == '<' && (q[2] == '=' || q[2] == '!')) {
                return rx_fail(p, "lookbehind is not supported by constrained decoding");
            } else if (left >= 2 && (q[1] == '<' || q[1] == 'P')) {
                /* (?<name>...) or Python's (?P<name>...): a capturing group. */
                const char *gt = memchr(q, '>', left);
                if (!gt || (q[1] == 'P' && (left < 3 || q[2] != '<')))
                    return rx_fail(p, "malformed group name (expected (?<name>...))");
                p->pos += (size_t)(gt - q) + 1;
            } else {
                return rx_fail(p, "inline flags and other (?...) groups are not supported by constrained decoding");
            }
        }
        if (++p->depth > REGEX_MAX_DEPTH)
            return rx_fail(p, "groups nested too deeply");
        int rc = parse_alt(p, out, NULL, false);
        p->depth--;
        if (rc != SY_OK)
            return rc;
        if (rx_peek(p) != ')')
            return rx_fail(p, "expected ')'");
        p->pos++;
        return SY_OK;
    }
    if (c == '[') {
        p->pos++;
        return parse_class(p, out);
    }
    if (c == '.') {
        p->pos++;
        sy_gcpset set = {0};
        dot_set(&set);
        emit_set(p, out, &set);
        sy_gcpset_free(&set);
        return SY_OK;
    }
    if (c == '\\') {
        p->pos++;
        sy_gcpset set = {0};
        uint32_t cp = 0;
        int kind = parse_escape(p, &set, &cp, false);
        if (kind == 2)
            emit_set(p, out, &set);
        else if (kind == 1)
            emit_cp(p, out, cp);
        sy_gcpset_free(&set);
        return kind ? SY_OK : p->rc;
    }
    if (c == '*' || c == '+' || c == '?')
        return rx_fail(p, "nothing to repeat before the quantifier");
    if (c == '{') {
        long m, n;
        size_t save = p->pos;
        if (parse_braces(p, &m, &n)) {
            p->pos = save;
            return rx_fail(p, "nothing to repeat before the quantifier");
        }
    }
    if (c == ')')
        return rx_fail(p, "unmatched ')'");
    uint32_t cp;
    if (!rx_take_cp(p, &cp))
        return p->rc;
    emit_cp(p, out, cp);
    return SY_OK;
}

/* A sequence up to '|', ')' or the end. top: a top-level branch, where
 * ^ may open and $ may close it. */
static int parse_seq(rx *p, sy_gbuf *out, bool top, bool *anch_start, bool *anch_end)
{
    *anch_start = *anch_end = false;
    if (top && rx_peek(p) == '^') {
        *anch_start = true;
        p->pos++;
    }
    size_t items = 0;
    while (!rx_eof(p) && p->s[p->pos] != '|' && p->s[p->pos] != ')') {
        char c = p->s[p->pos];
        if (c == '^')
            return rx_fail(p, "'^' is supported only at the start of a top-level branch");
        if (c == '$') {
            p->pos++;
            if (top && (rx_eof(p) || p->s[p->pos] == '|')) {
                *anch_end = true;
                break;
            }
            p->pos--;
            return rx_fail(p, "'$' is supported only at the end of a top-level branch");
        }
        sy_gbuf atom;
        sy_gbuf_init(&atom);
        int rc = parse_atom(p, &atom);
        if (rc != SY_OK) {
            sy_gbuf_free(&atom);
            return rc;
        }
        long m = 1, n = 1;
        bool quantified = true;
        char q = rx_peek(p);
        if (q == '*' || q == '+' || q == '?') {
            p->pos++;
            m = q == '+' ? 1 : 0;
            n = q == '?' ? 1 : -1;
        } else if (q != '{' || !parse_braces(p, &m, &n)) {
            m = n = 1;
            quantified = false;
        } else if (q == '{' && (m > REGEX_MAX_REPEAT || n > REGEX_MAX_REPEAT || (n >= 0 && n < m))) {
            sy_gbuf_free(&atom);
            return rx_fail(p, n >= 0 && n < m ? "repetition {m,n} with n < m"
                                              : "repetition counts above 1000 are not supported");
        }
        if (quantified && rx_peek(p) == '?')
            p->pos++; /* lazy: the same strings match */
        q = rx_peek(p);
        if (quantified && (q == '*' || q == '+' || q == '?')) {
            sy_gbuf_free(&atom);
            return rx_fail(p, "nothing to repeat before the quantifier");
        }
        if (n != 0 && atom.len) {
            sy_gbuf_puts(out, items++ ? " " : "");
            sy_gbuf_putn(out, atom.s, atom.len);
            if (m == 0 && n == -1)
                sy_gbuf_puts(out, "*");
            else if (m == 1 && n == -1)
                sy_gbuf_puts(out, "+");
            else if (m == 0 && n == 1)
                sy_gbuf_puts(out, "?");
            else if (n == -1)
                sy_gbuf_printf(out, "{%ld,}", m);
            else if (m == n && m != 1)
                sy_gbuf_printf(out, "{%ld}", m);
            else if (m != n)
                sy_gbuf_printf(out, "{%ld,%ld}", m, n);
        }
        if (atom.oom)
            out->oom = true;
        sy_gbuf_free(&atom);
    }
    if (!items)
        sy_gbuf_puts(out, "\"\"");
    return SY_OK;
}

static int parse_alt(rx *p, sy_gbuf *out, const char *search_any, bool top)
{
    sy_gbuf_puts(out, "(");
    for (size_t branch = 0;; branch++) {
        if (branch)
            sy_gbuf_puts(out, " | ");
        bool a0, a1;
        sy_gbuf seq;
        sy_gbuf_init(&seq);
        int rc = parse_seq(p, &seq, top, &a0, &a1);
        if (rc != SY_OK) {
            sy_gbuf_free(&seq);
            return rc;
        }
        if (search_any && !a0)
            sy_gbuf_printf(out, "%s* ", search_any);
        sy_gbuf_putn(out, seq.s ? seq.s : "", seq.len);
        if (search_any && !a1)
            sy_gbuf_printf(out, " %s*", search_any);
        if (seq.oom)
            out->oom = true;
        sy_gbuf_free(&seq);
        if (rx_peek(p) != '|' || rx_eof(p))
            break;
        p->pos++;
    }
    sy_gbuf_puts(out, ")");
    return SY_OK;
}

int sy_gregex_emit(sy_gbuf *out, const char *regex, bool json_string, const char *search_any, const char *path,
                   sy_err *err)
{
    rx p = {.s = regex, .len = strlen(regex), .json = json_string, .path = path, .err = err, .rc = SY_OK};
    int rc = parse_alt(&p, out, search_any, true);
    if (rc != SY_OK)
        return rc;
    if (!rx_eof(&p))
        return rx_fail(&p, "unmatched ')'");
    return SY_OK;
}

int sy_gsrc_add_regex(sy_gsrc *src, const char *name, const char *regex, const char *path, sy_err *err)
{
    const char *where = path && *path ? path : "regex";
    if (!name || !*name || strlen(name) >= SY_GRULE_NAME_MAX)
        return sy_err_set(err, SY_ERR_INVALID, "%s: expected a rule name of 1..%d characters", where,
                          SY_GRULE_NAME_MAX - 1);
    if (!regex)
        return sy_err_set(err, SY_ERR_INVALID, "%s: expected a regex, got NULL", where);
    sy_gbuf b;
    sy_gbuf_init(&b);
    sy_gbuf_printf(&b, "%s ::= ", name);
    int rc = sy_gregex_emit(&b, regex, false, NULL, where, err);
    sy_gbuf_puts(&b, "\n");
    if (rc == SY_OK && b.oom)
        rc = sy_err_set(err, SY_ERR_NOMEM, "%s: out of memory building the grammar", where);
    if (rc == SY_OK)
        rc = sy_gsrc_add_gbnf(src, b.s, where, err);
    sy_gbuf_free(&b);
    return rc;
}

bool sy_gregex_single_class(const char *regex, sy_gcpset *set, long *min, long *max)
{
    sy_err err;
    rx p = {.s = regex, .len = strlen(regex), .err = &err, .rc = SY_OK};
    if (p.len < 3 || regex[0] != '^' || regex[p.len - 1] != '$' || (p.len >= 2 && regex[p.len - 2] == '\\'))
        return false;
    p.pos = 1;
    sy_gcpset one = {0};
    uint32_t cp = 0;
    char c = regex[1];
    bool ok;
    if (c == '[') {
        p.pos++;
        ok = parse_class_set(&p, &one) == SY_OK;
    } else if (c == '.') {
        p.pos++;
        dot_set(&one);
        ok = true;
    } else if (c == '\\') {
        p.pos++;
        int kind = parse_escape(&p, &one, &cp, false);
        if (kind == 1)
            sy_gcpset_add(&one, cp, cp);
        ok = kind != 0;
    } else if (!strchr("()|*+?{}^$", c)) {
        ok = rx_take_cp(&p, &cp);
        if (ok)
            sy_gcpset_add(&one, cp, cp);
    } else {
        ok = false;
    }
    long m = 1, n = 1;
    char q = ok ? rx_peek(&p) : '\0';
    if (q == '*' || q == '+' || q == '?') {
        p.pos++;
        m = q == '+' ? 1 : 0;
        n = q == '?' ? 1 : -1;
    } else if (q == '{') {
        ok = parse_braces(&p, &m, &n) && (n < 0 || n >= m);
    }
    if (ok && (q == '*' || q == '+' || q == '?' || q == '{') && rx_peek(&p) == '?')
        p.pos++;
    ok = ok && p.pos == p.len - 1;
    sy_gcpset_normalize(&one);
    if (!ok || !one.n || one.oom) {
        sy_gcpset_free(&one);
        return false;
    }
    *set = one;
    *min = m;
    *max = n;
    return true;
}
