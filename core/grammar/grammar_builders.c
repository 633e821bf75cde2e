/*
 * The small source builders (any JSON value, a choice of strings, text up
 * to a stop string) and what every builder shares: code-point sets and
 * the JSON spelling of a character. Each builder writes GBNF text and
 * hands it to sy_gsrc_add_gbnf (grammar_internal.h).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_build.h"
#include "util/utf8.h"

/* ------------------------------------------------------------ code-point sets */

#define SY_CP_MAX 0x10FFFFu

void sy_gcpset_free(sy_gcpset *s)
{
    free(s->r);
    s->r = NULL;
    s->n = s->cap = 0;
}

void sy_gcpset_add(sy_gcpset *s, uint32_t lo, uint32_t hi)
{
    if (lo > hi || lo > SY_CP_MAX)
        return;
    if (hi > SY_CP_MAX)
        hi = SY_CP_MAX;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        sy_gcp_range *r = realloc(s->r, cap * sizeof *r);
        if (!r) {
            s->oom = true;
            return;
        }
        s->r = r;
        s->cap = cap;
    }
    s->r[s->n++] = (sy_gcp_range){lo, hi};
}

static int range_cmp(const void *a, const void *b)
{
    const sy_gcp_range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

void sy_gcpset_normalize(sy_gcpset *s)
{
    if (!s->n)
        return;
    qsort(s->r, s->n, sizeof *s->r, range_cmp);
    size_t w = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (w && s->r[i].lo <= s->r[w - 1].hi + 1) {
            if (s->r[i].hi > s->r[w - 1].hi)
                s->r[w - 1].hi = s->r[i].hi;
        } else {
            s->r[w++] = s->r[i];
        }
    }
    s->n = w;
    /* Surrogates are not scalar values: UTF-8 cannot carry them. */
    bool has_surrogates = false;
    for (size_t i = 0; i < s->n; i++)
        if (s->r[i].lo <= 0xDFFF && s->r[i].hi >= 0xD800)
            has_surrogates = true;
    if (has_surrogates)
        sy_gcpset_remove(s, 0xD800, 0xDFFF);
}

void sy_gcpset_remove(sy_gcpset *s, uint32_t lo, uint32_t hi)
{
    sy_gcpset out = {0};
    for (size_t i = 0; i < s->n; i++) {
        sy_gcp_range r = s->r[i];
        if (r.hi < lo || r.lo > hi) {
            sy_gcpset_add(&out, r.lo, r.hi);
            continue;
        }
        if (r.lo < lo)
            sy_gcpset_add(&out, r.lo, lo - 1);
        if (r.hi > hi)
            sy_gcpset_add(&out, hi + 1, r.hi);
    }
    bool oom = s->oom || out.oom;
    free(s->r);
    *s = out;
    s->oom = oom;
}

void sy_gcpset_complement(sy_gcpset *s)
{
    sy_gcpset_normalize(s);
    sy_gcpset out = {0};
    uint32_t next = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (s->r[i].lo > next)
            sy_gcpset_add(&out, next, s->r[i].lo - 1);
        next = s->r[i].hi + 1;
    }
    if (next <= SY_CP_MAX)
        sy_gcpset_add(&out, next, SY_CP_MAX);
    bool oom = s->oom || out.oom;
    free(s->r);
    *s = out;
    s->oom = oom;
    sy_gcpset_normalize(s);
}

bool sy_gcpset_has(const sy_gcpset *s, uint32_t cp)
{
    for (size_t i = 0; i < s->n; i++)
        if (cp >= s->r[i].lo && cp <= s->r[i].hi)
            return true;
    return false;
}

void sy_gcpset_emit(sy_gbuf *b, const sy_gcpset *s)
{
    sy_gbuf_puts(b, "[");
    for (size_t i = 0; i < s->n; i++) {
        sy_gbuf_class_cp(b, s->r[i].lo);
        if (s->r[i].hi > s->r[i].lo) {
            /* Two neighbours read better (and parse the same) as a pair. */
            if (s->r[i].hi > s->r[i].lo + 1)
                sy_gbuf_puts(b, "-");
            sy_gbuf_class_cp(b, s->r[i].hi);
        }
    }
    sy_gbuf_puts(b, "]");
}

void sy_gcpset_emit_json(sy_gbuf *b, const sy_gcpset *s)
{
    sy_gcpset plain = {0};
    for (size_t i = 0; i < s->n; i++)
        sy_gcpset_add(&plain, s->r[i].lo, s->r[i].hi);
    sy_gcpset_remove(&plain, 0, 0x1F);
    sy_gcpset_remove(&plain, '"', '"');
    sy_gcpset_remove(&plain, '\\', '\\');
    int parts = 0;
    sy_gbuf_puts(b, "(");
    if (plain.n) {
        sy_gcpset_emit(b, &plain);
        parts++;
    }
    if (plain.oom)
        b->oom = true;
    sy_gcpset_free(&plain);
    static const uint32_t specials[] = {'"', '\\'};
    for (size_t i = 0; i < 2; i++)
        if (sy_gcpset_has(s, specials[i])) {
            sy_gbuf_puts(b, parts++ ? " | " : "");
            sy_gjson_cp_literal(b, specials[i]);
        }
    for (uint32_t c = 0; c < 0x20; c++)
        if (sy_gcpset_has(s, c)) {
            sy_gbuf_puts(b, parts++ ? " | " : "");
            sy_gjson_cp_literal(b, c);
        }
    sy_gbuf_puts(b, ")");
}

/* ------------------------------------------------------------ UTF-8 and JSON characters */

void sy_gjson_cp_literal(sy_gbuf *b, uint32_t cp)
{
    char text[8];
    size_t n;
    switch (cp) {
    case '"': n = (size_t)snprintf(text, sizeof text, "\\\""); break;
    case '\\': n = (size_t)snprintf(text, sizeof text, "\\\\"); break;
    case '\b': n = (size_t)snprintf(text, sizeof text, "\\b"); break;
    case '\f': n = (size_t)snprintf(text, sizeof text, "\\f"); break;
    case '\n': n = (size_t)snprintf(text, sizeof text, "\\n"); break;
    case '\r': n = (size_t)snprintf(text, sizeof text, "\\r"); break;
    case '\t': n = (size_t)snprintf(text, sizeof text, "\\t"); break;
    default:
        if (cp < 0x20)
            n = (size_t)snprintf(text, sizeof text, "\\u%04x", (unsigned)cp);
        else
            n = sy_utf8_encode(cp, text);
    }
    sy_gbuf_literal(b, text, n);
}

void sy_gjson_basic_rules(sy_gbuf *b, const char *p)
{
    /* A \u escape spells one code point: a BMP non-surrogate, or a high
     * and a low surrogate together, so that character counts (minLength,
     * maxLength) agree with the decoded string. */
    sy_gbuf_printf(b,
                   "%s-char ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" [\"\\\\/bfnrt]"
                   " | \"\\\\u\" ([0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2})"
                   " | \"\\\\u\" [dD] [89abAB] [0-9a-fA-F]{2} \"\\\\u\" [dD] [c-fC-F] [0-9a-fA-F]{2}\n",
                   p);
    sy_gbuf_printf(b, "%s-string ::= \"\\\"\" %s-char* \"\\\"\"\n", p, p);
    /* Digits are bounded (SY_GJSON_MAX_DIGITS integer and fraction digits,
     * three exponent digits) so a model cannot write one number forever:
     * random weights otherwise run to max_tokens inside "123...". */
    sy_gbuf_printf(b, "%s-int ::= \"-\"? (\"0\" | [1-9] [0-9]{0,%d})\n", p, SY_GJSON_MAX_DIGITS - 1);
    sy_gbuf_printf(b, "%s-number ::= %s-int (\".\" [0-9]{1,%d})? ([eE] [-+]? [0-9]{1,3})?\n", p, p,
                   SY_GJSON_MAX_DIGITS);
    sy_gbuf_printf(b, "%s-colon ::= \":\" \" \"?\n", p);
    sy_gbuf_printf(b, "%s-comma ::= \",\" \" \"?\n", p);
    sy_gbuf_printf(b,
                   "%s-value ::= %s-object | %s-array | %s-string | %s-number | \"true\" | \"false\" | \"null\"\n",
                   p, p, p, p, p);
    sy_gbuf_printf(b, "%s-object ::= \"{\" (%s-string %s-colon %s-value (%s-comma %s-string %s-colon %s-value)*)? \"}\"\n",
                   p, p, p, p, p, p, p, p);
    sy_gbuf_printf(b, "%s-array ::= \"[\" (%s-value (%s-comma %s-value)*)? \"]\"\n", p, p, p, p);
}

/* ------------------------------------------------------------ builders */

static int check_name(const char *name, const char *what, sy_err *err)
{
    size_t n = name ? strlen(name) : 0;
    if (!n || n + 16 > SY_GRULE_NAME_MAX)
        return sy_err_set(err, SY_ERR_INVALID, "%s: rule name must be 1..%d characters, got %zu", what,
                          SY_GRULE_NAME_MAX - 16, n);
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_'))
            return sy_err_set(err, SY_ERR_INVALID, "%s: rule name '%s' may hold only letters, digits, '-' and '_'",
                              what, name);
    }
    return SY_OK;
}

static int finish(sy_gsrc *src, sy_gbuf *b, const char *where, sy_err *err)
{
    if (b->oom) {
        sy_gbuf_free(b);
        return sy_err_set(err, SY_ERR_NOMEM, "%s: out of memory building the grammar", where);
    }
    int rc = sy_gsrc_add_gbnf(src, b->s ? b->s : "", where, err);
    sy_gbuf_free(b);
    return rc;
}

int sy_gsrc_add_json_any(sy_gsrc *src, const char *name, bool object_only, sy_err *err)
{
    int rc = check_name(name, "json", err);
    if (rc != SY_OK)
        return rc;
    sy_gbuf b;
    sy_gbuf_init(&b);
    sy_gjson_basic_rules(&b, name);
    sy_gbuf_printf(&b, "%s ::= %s-%s\n", name, name, object_only ? "object" : "value");
    return finish(src, &b, "json", err);
}

int sy_gsrc_add_choice(sy_gsrc *src, const char *name, const char *const *choices, size_t n, sy_err *err)
{
    int rc = check_name(name, "choice", err);
    if (rc != SY_OK)
        return rc;
    if (!n)
        return sy_err_set(err, SY_ERR_INVALID, "choice: expected at least one string, got none");
    sy_gbuf b;
    sy_gbuf_init(&b);
    sy_gbuf_printf(&b, "%s ::= ", name);
    for (size_t i = 0; i < n; i++) {
        if (!choices[i]) {
            sy_gbuf_free(&b);
            return sy_err_set(err, SY_ERR_INVALID, "choice[%zu]: expected a string, got NULL", i);
        }
        sy_gbuf_puts(&b, i ? " | " : "");
        sy_gbuf_literal(&b, choices[i], strlen(choices[i]));
    }
    sy_gbuf_puts(&b, "\n");
    return finish(src, &b, "choice", err);
}

/*
 * The text is walked by the Knuth-Morris-Pratt automaton of stop: state k
 * means the text ends with the first k code points of stop (and no earlier
 * state applies). Rule name-sK is what may follow in state k; the
 * transition that would complete stop is left out, so stop never appears.
 */
int sy_gsrc_add_text_until(sy_gsrc *src, const char *name, const char *stop, sy_err *err)
{
    int rc = check_name(name, "text_until", err);
    if (rc != SY_OK)
        return rc;
    size_t len = stop ? strlen(stop) : 0;
    if (!len)
        return sy_err_set(err, SY_ERR_INVALID, "text_until: expected a non-empty stop string");
    /* One rule per code point, each with up to that many alternatives. */
    if (len > 256)
        return sy_err_set(err, SY_ERR_INVALID, "text_until: the stop string is %zu bytes; at most 256 are supported",
                          len);
    uint32_t *cps = malloc(len * sizeof *cps);
    size_t *fail = malloc((len + 1) * sizeof *fail);
    if (!cps || !fail) {
        free(cps);
        free(fail);
        return sy_err_set(err, SY_ERR_NOMEM, "text_until: out of memory");
    }
    size_t m = 0;
    for (size_t i = 0; i < len;) {
        size_t k = sy_utf8_decode(stop + i, len - i, &cps[m]);
        if (!k) {
            free(cps);
            free(fail);
            return sy_err_set(err, SY_ERR_INVALID, "text_until: stop string is not valid UTF-8 at byte %zu", i);
        }
        i += k;
        m++;
    }
    /* fail[k]: the longest proper border of stop[0..k). */
    fail[0] = fail[1] = 0;
    for (size_t k = 1; k < m; k++) {
        size_t j = fail[k];
        while (j && cps[j] != cps[k])
            j = fail[j];
        fail[k + 1] = cps[j] == cps[k] ? j + 1 : 0;
    }
    sy_gbuf b;
    sy_gbuf_init(&b);
    sy_gbuf_printf(&b, "%s ::= %s-s0\n", name, name);
    for (size_t k = 0; k < m; k++) {
        /* The code points that move the automaton off state 0 (all from
         * stop) get their own alternatives; one class takes the rest. */
        sy_gcpset special = {0};
        sy_gbuf alts;
        sy_gbuf_init(&alts);
        for (size_t i = 0; i < m; i++) {
            uint32_t c = cps[i];
            bool seen = false;
            for (size_t j = 0; j < i; j++)
                seen |= cps[j] == c;
            if (seen)
                continue;
            size_t next = k;
            while (next && cps[next] != c)
                next = fail[next];
            next = cps[next] == c ? next + 1 : 0;
            if (!next)
                continue;
            sy_gcpset_add(&special, c, c);
            if (next == m)
                continue; /* would complete stop */
            sy_gbuf_puts(&alts, " | ");
            char one[4];
            sy_gbuf_literal(&alts, one, sy_utf8_encode(c, one));
            sy_gbuf_printf(&alts, " %s-s%zu", name, next);
        }
        sy_gcpset_complement(&special);
        sy_gbuf_printf(&b, "%s-s%zu ::= (", name, k);
        sy_gcpset_emit(&b, &special);
        sy_gbuf_printf(&b, " %s-s0%s)?\n", name, alts.s ? alts.s : "");
        if (special.oom || alts.oom)
            b.oom = true;
        sy_gcpset_free(&special);
        sy_gbuf_free(&alts);
    }
    free(cps);
    free(fail);
    return finish(src, &b, "text_until", err);
}
