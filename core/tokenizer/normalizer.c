/*
 * Normalizers of tokenizer.json: Sequence, Prepend, Replace, Lowercase,
 * NFC/NFD/NFKC/NFKD and Strip. Each maps a string to a string; offsets are
 * not tracked because nothing downstream needs them.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

typedef enum {
    SY__N_SEQ,
    SY__N_PREPEND,
    SY__N_REPLACE,
    SY__N_LOWER,
    SY__N_UNICODE, /* form in .form */
    SY__N_STRIP
} sy__nkind;

struct sy_tok_norm {
    sy__nkind kind;
    sy_tok_norm **kids;
    size_t n_kids;
    char *str; /* Prepend's text, Replace's content */
    size_t str_len;
    sy_tok_regex re;
    int form;
    bool left, right;
};

void sy__norm_free(sy_tok_norm *n)
{
    if (!n)
        return;
    for (size_t i = 0; i < n->n_kids; i++)
        sy__norm_free(n->kids[i]);
    free(n->kids);
    free(n->str);
    sy__re_free(&n->re);
    free(n);
}

static int sy__dup(const char *s, size_t n, char **out)
{
    *out = malloc(n + 1);
    if (!*out)
        return SY_ERR_NOMEM;
    memcpy(*out, s, n);
    (*out)[n] = 0;
    return 0;
}

/* One element of a Sequence's normalizers; a null one is dropped. */
static int sy__norm_add_kid(void *seq, const json_t *item, const sy_tok_where *at, sy_err *err)
{
    sy_tok_norm *n = seq;
    int rc = sy__norm_parse(item, at, &n->kids[n->n_kids], err);
    if (!rc && n->kids[n->n_kids])
        n->n_kids++;
    return rc;
}

int sy__norm_parse(const json_t *j, const sy_tok_where *w, sy_tok_norm **out, sy_err *err)
{
    *out = NULL;
    if (!j || json_is_null(j))
        return 0;
    const char *ty;
    int rc = sy__json_type(j, "a normalizer object or null", "a normalizer type string", w, &ty, err);
    if (rc)
        return rc;
    sy_tok_norm *n = calloc(1, sizeof *n);
    if (!n)
        return sy_err_set(err, SY_ERR_NOMEM, "out of memory");
    sy_tok_where sub = *w;
    if (!strcmp(ty, "Sequence")) {
        n->kind = SY__N_SEQ;
        /* Sized before the array is checked: a non-array has size 0 and fails just below. */
        n->kids = calloc(json_array_size(json_object_get(j, "normalizers")) + 1, sizeof *n->kids);
        if (!n->kids)
            goto nomem;
        if ((rc = sy__json_each(j, "normalizers", "an array of normalizers", w, sy__norm_add_kid, n, err)))
            goto fail;
    } else if (!strcmp(ty, "Prepend")) {
        n->kind = SY__N_PREPEND;
        const json_t *p = json_object_get(j, "prepend");
        if (!json_is_string(p)) {
            rc = sy__json_err(err, w, ".prepend", "a string", p);
            goto fail;
        }
        n->str_len = json_string_length(p);
        if (sy__dup(json_string_value(p), n->str_len, &n->str))
            goto nomem;
    } else if (!strcmp(ty, "Replace")) {
        n->kind = SY__N_REPLACE;
        const json_t *c = json_object_get(j, "content");
        if (!json_is_string(c)) {
            rc = sy__json_err(err, w, ".content", "a string", c);
            goto fail;
        }
        n->str_len = json_string_length(c);
        if (sy__dup(json_string_value(c), n->str_len, &n->str))
            goto nomem;
        sy__path(sub.path, sizeof sub.path, w->path, ".pattern");
        if ((rc = sy__re_from_json(json_object_get(j, "pattern"), &n->re, &sub, err)))
            goto fail;
    } else if (!strcmp(ty, "Lowercase")) {
        n->kind = SY__N_LOWER;
    } else if (!strcmp(ty, "NFC") || !strcmp(ty, "NFD") || !strcmp(ty, "NFKC") || !strcmp(ty, "NFKD")) {
        n->kind = SY__N_UNICODE;
        n->form = !strcmp(ty, "NFC")    ? SY__NFC
                  : !strcmp(ty, "NFD")  ? SY__NFD
                  : !strcmp(ty, "NFKC") ? SY__NFKC
                                        : SY__NFKD;
    } else if (!strcmp(ty, "Strip")) {
        n->kind = SY__N_STRIP;
        if ((rc = sy__json_bool(j, "strip_left", true, &n->left, w, err)) ||
            (rc = sy__json_bool(j, "strip_right", true, &n->right, w, err)))
            goto fail;
    } else {
        rc = sy__json_unknown_type(err, w, "normalizer",
                                   "Sequence, Prepend, Replace, Lowercase, NFC, NFD, NFKC, NFKD, Strip", ty);
        goto fail;
    }
    *out = n;
    return 0;
nomem:
    rc = sy_err_set(err, SY_ERR_NOMEM, "%s: %s: out of memory", w->file, w->path);
fail:
    sy__norm_free(n);
    return rc;
}

static int sy__replace(const sy_tok_norm *n, const char *s, size_t len, sy_tok_buf *out, sy_tok_ctx *c, sy_err *err)
{
    int rc = sy__re_find_all(&n->re, s, len, c->md, &c->spans, err);
    if (rc)
        return rc;
    out->len = 0;
    if (sy__buf_reserve(out, len))
        return SY_ERR_NOMEM;
    for (size_t i = 0; i < c->spans.n; i++) {
        const sy_tok_span *sp = &c->spans.v[i];
        if (sp->match ? sy__buf_put(out, n->str, n->str_len) : sy__buf_put(out, s + sp->off, sp->len))
            return SY_ERR_NOMEM;
    }
    return 0;
}

static int sy__strip(const sy_tok_norm *n, const char *s, size_t len, sy_tok_buf *out)
{
    size_t b = 0, e = len, adv;
    while (n->left && b < e && sy__uni_is_white_space(sy__utf8_next(s + b, e - b, &adv)))
        b += adv;
    if (n->right) {
        /* Walk forward, remembering where the trailing white space began. */
        size_t i = b, keep = b;
        while (i < e) {
            uint32_t cp = sy__utf8_next(s + i, e - i, &adv);
            i += adv;
            if (!sy__uni_is_white_space(cp))
                keep = i;
        }
        e = keep;
    }
    out->len = 0;
    return sy__buf_put(out, s + b, e - b);
}

int sy__norm_apply(const sy_tok_norm *n, const char *s, size_t len, sy_tok_buf *out, sy_tok_ctx *c, sy_err *err)
{
    int rc = 0;
    switch (n->kind) {
    case SY__N_SEQ: {
        /* Ping-pong between out and a local buffer. */
        sy_tok_buf a = {0};
        out->len = 0;
        if ((rc = sy__buf_put(out, s, len)))
            break;
        for (size_t i = 0; i < n->n_kids && !rc; i++) {
            if (!(rc = sy__norm_apply(n->kids[i], out->p, out->len, &a, c, err))) {
                sy_tok_buf t = *out;
                *out = a;
                a = t;
            }
        }
        sy__buf_free(&a);
        break;
    }
    case SY__N_PREPEND:
        out->len = 0;
        /* Hugging Face prepends only to non-empty text. */
        if (len && sy__buf_put(out, n->str, n->str_len))
            rc = SY_ERR_NOMEM;
        else if (sy__buf_put(out, s, len))
            rc = SY_ERR_NOMEM;
        break;
    case SY__N_REPLACE: rc = sy__replace(n, s, len, out, c, err); break;
    case SY__N_LOWER: rc = sy__uni_lowercase(s, len, out); break;
    case SY__N_UNICODE: rc = sy__uni_normalize(n->form, s, len, out); break;
    case SY__N_STRIP: rc = sy__strip(n, s, len, out); break;
    }
    if (rc == SY_ERR_NOMEM)
        return sy_err_set(err, rc, "tokenizer: out of memory while normalizing %zu bytes", len);
    return rc;
}
