/*
 * Patterns of tokenizer.json on PCRE2. Hugging Face compiles them with
 * Oniguruma, so the few escapes whose meaning differs are rewritten:
 * \s is Unicode White_Space there (PCRE2's UCP \s also takes U+180E),
 * \h is a hex digit there (horizontal space in PCRE2), \w also takes
 * marks there.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

#define SY__WORD_CLASS "\\p{L}\\p{M}\\p{Nd}\\p{Pc}"

int sy__re_translate(const char *pat, size_t len, sy_tok_buf *out)
{
    bool in_class = false;
    out->len = 0;
    for (size_t i = 0; i < len; i++) {
        char c = pat[i];
        const char *rep = NULL;
        if (c == '\\' && i + 1 < len) {
            char e = pat[i + 1];
            switch (e) {
            case 's': rep = "\\p{White_Space}"; break;
            case 'S': rep = "\\P{White_Space}"; break;
            case 'h': rep = in_class ? "0-9a-fA-F" : "[0-9a-fA-F]"; break;
            case 'H': rep = in_class ? NULL : "[^0-9a-fA-F]"; break;
            case 'w': rep = in_class ? SY__WORD_CLASS : "[" SY__WORD_CLASS "]"; break;
            case 'W': rep = in_class ? NULL : "[^" SY__WORD_CLASS "]"; break;
            default: break;
            }
            if (rep) {
                if (sy__buf_put(out, rep, strlen(rep)))
                    return SY_ERR_NOMEM;
            } else if (sy__buf_put(out, pat + i, 2)) {
                return SY_ERR_NOMEM;
            }
            i++;
            continue;
        }
        if (!in_class && c == '[') {
            in_class = true;
            if (sy__buf_putc(out, c))
                return SY_ERR_NOMEM;
            /* "[^]...]" and "[]...]": a leading ']' is a literal. */
            if (i + 1 < len && pat[i + 1] == '^') {
                if (sy__buf_putc(out, '^'))
                    return SY_ERR_NOMEM;
                i++;
            }
            if (i + 1 < len && pat[i + 1] == ']') {
                if (sy__buf_put(out, "\\]", 2))
                    return SY_ERR_NOMEM;
                i++;
            }
            continue;
        }
        if (in_class && c == '[' && i + 1 < len && pat[i + 1] == ':') {
            /* POSIX class inside a class: copy through its ":]". */
            const char *end = NULL;
            for (size_t k = i + 2; k + 1 < len; k++)
                if (pat[k] == ':' && pat[k + 1] == ']') {
                    end = pat + k + 2;
                    break;
                }
            if (end) {
                if (sy__buf_put(out, pat + i, (size_t)(end - (pat + i))))
                    return SY_ERR_NOMEM;
                i = (size_t)(end - pat) - 1;
                continue;
            }
        }
        if (in_class && c == ']')
            in_class = false;
        if (sy__buf_putc(out, c))
            return SY_ERR_NOMEM;
    }
    return 0;
}

int sy__re_literal(const char *s, size_t len, sy_tok_regex *re)
{
    memset(re, 0, sizeof *re);
    re->lit = malloc(len + 1);
    if (!re->lit)
        return SY_ERR_NOMEM;
    memcpy(re->lit, s, len);
    re->lit[len] = 0;
    re->lit_len = len;
    return 0;
}

int sy__re_compile(const char *pat, size_t len, sy_tok_regex *re, const sy_tok_where *w, sy_err *err)
{
    memset(re, 0, sizeof *re);
    sy_tok_buf tr = {0};
    if (sy__re_translate(pat, len, &tr))
        return sy_err_set(err, SY_ERR_NOMEM, "%s: %s: out of memory", w->file, w->path);
    int ec;
    PCRE2_SIZE eoff;
    /* MATCH_INVALID_UTF: invalid input bytes simply never match, so text
     * that is not UTF-8 is still split instead of rejected. */
    re->code = pcre2_compile((PCRE2_SPTR)(tr.p ? tr.p : ""), tr.len, PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF,
                             &ec, &eoff, NULL);
    sy__buf_free(&tr);
    if (!re->code) {
        char msg[160];
        pcre2_get_error_message(ec, (PCRE2_UCHAR *)msg, sizeof msg);
        return sy_err_set(err, SY_ERR_INVALID, "%s: %s: expected a regular expression, found \"%.*s\" (%s)", w->file,
                          w->path, (int)(len > 120 ? 120 : len), pat, msg);
    }
    /* JIT is an optimisation: without it pcre2_match interprets. */
    (void)pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE);
    return 0;
}

int sy__re_from_json(const json_t *pattern, sy_tok_regex *re, const sy_tok_where *w, sy_err *err)
{
    const json_t *s = json_is_object(pattern) ? json_object_get(pattern, "String") : NULL;
    const json_t *r = json_is_object(pattern) ? json_object_get(pattern, "Regex") : NULL;
    if (json_is_string(s))
        return sy__re_literal(json_string_value(s), json_string_length(s), re)
                   ? sy_err_set(err, SY_ERR_NOMEM, "out of memory")
                   : 0;
    if (json_is_string(r))
        return sy__re_compile(json_string_value(r), json_string_length(r), re, w, err);
    return sy__json_err(err, w, "", "{\"String\": ...} or {\"Regex\": ...}", pattern);
}

void sy__re_free(sy_tok_regex *re)
{
    pcre2_code_free(re->code);
    free(re->lit);
    memset(re, 0, sizeof *re);
}

/* Next match at or after start: 1 found, 0 none, <0 error. */
static int sy__re_next(const sy_tok_regex *re, const char *s, size_t n, size_t start, pcre2_match_data *md, size_t *ms,
                       size_t *me, sy_err *err)
{
    if (!re->code) {
        if (!re->lit_len || n - start < re->lit_len)
            return 0;
        const char *p = memmem(s + start, n - start, re->lit, re->lit_len);
        if (!p)
            return 0;
        *ms = (size_t)(p - s);
        *me = *ms + re->lit_len;
        return 1;
    }
    int rc = pcre2_match(re->code, (PCRE2_SPTR)s, n, start, 0, md, NULL);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
        /* The interpreter keeps its backtracking frames on the heap. */
        rc = pcre2_match(re->code, (PCRE2_SPTR)s, n, start, PCRE2_NO_JIT, md, NULL);
    if (rc == PCRE2_ERROR_NOMATCH)
        return 0;
    if (rc < 0) {
        char msg[160];
        pcre2_get_error_message(rc, (PCRE2_UCHAR *)msg, sizeof msg);
        return sy_err_set(err, SY_ERR_INTERNAL, "tokenizer: regex match failed at byte %zu of %zu: %s", start, n, msg);
    }
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    *ms = ov[0];
    *me = ov[1];
    return 1;
}

int sy__re_find_all(const sy_tok_regex *re, const char *s, size_t n, pcre2_match_data *md, sy_tok_spans *out,
                    sy_err *err)
{
    out->n = 0;
    if (n == 0)
        return sy__spans_push(out, 0, 0, false) ? sy_err_set(err, SY_ERR_NOMEM, "out of memory") : 0;
    size_t prev = 0, pos = 0;
    while (pos <= n) {
        size_t ms = 0, me = 0;
        int rc = sy__re_next(re, s, n, pos, md, &ms, &me, err);
        if (rc < 0)
            return rc;
        if (rc == 0)
            break;
        if (ms > prev && sy__spans_push(out, prev, ms - prev, false))
            goto nomem;
        if (sy__spans_push(out, ms, me - ms, true))
            goto nomem;
        prev = me;
        if (me > ms) {
            pos = me;
        } else {
            /* An empty match: go on one character later, as Oniguruma's
             * iterator does. */
            if (ms >= n)
                break;
            size_t adv;
            sy__utf8_next(s + ms, n - ms, &adv);
            pos = ms + adv;
        }
    }
    if (prev < n && sy__spans_push(out, prev, n - prev, false))
        goto nomem;
    return 0;
nomem:
    return sy_err_set(err, SY_ERR_NOMEM, "tokenizer: out of memory splitting text");
}
