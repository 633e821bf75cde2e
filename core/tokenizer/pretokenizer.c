/*
 * Pre-tokenizers of tokenizer.json: Sequence, Split, ByteLevel, Metaspace,
 * Digits, Whitespace, WhitespaceSplit, Punctuation, BertPreTokenizer.
 * Each turns a list of pieces into a finer list, exactly as Hugging Face's
 * PreTokenizedString::split does (behaviors, invert, empty pieces dropped).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

typedef enum { SY__B_REMOVED, SY__B_ISOLATED, SY__B_MERGED_PREV, SY__B_MERGED_NEXT, SY__B_CONTIGUOUS } sy__behavior;

typedef enum {
    SY__P_SEQ,
    SY__P_SPLIT, /* also Digits, Whitespace, WhitespaceSplit, Punctuation */
    SY__P_BYTELEVEL,
    SY__P_METASPACE
} sy__pkind;

enum { SY__PREPEND_ALWAYS, SY__PREPEND_FIRST, SY__PREPEND_NEVER };

struct sy_tok_pretok {
    sy__pkind kind;
    sy_tok_pretok **kids;
    size_t n_kids;
    sy_tok_regex re;
    sy__behavior behavior;
    bool invert;
    bool add_prefix_space, use_regex; /* ByteLevel */
    char repl[8]; /* Metaspace replacement character */
    size_t repl_len;
    int prepend;
    bool split;
};

/* The GPT-2 pattern ByteLevel uses when use_regex is set. */
static const char sy__gpt2_re[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

void sy__pretok_free(sy_tok_pretok *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n_kids; i++)
        sy__pretok_free(p->kids[i]);
    free(p->kids);
    sy__re_free(&p->re);
    free(p);
}

static int sy__parse_behavior(const json_t *j, const char *dflt, sy__behavior *out, const sy_tok_where *w, sy_err *err)
{
    static const char *const names[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"};
    const json_t *b = json_object_get(j, "behavior");
    const char *s = dflt;
    if (b && !json_is_null(b)) {
        if (!json_is_string(b))
            return sy__json_err(err, w, ".behavior", "a split behavior string", b);
        s = json_string_value(b);
    }
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!strcmp(s, names[i])) {
            *out = (sy__behavior)i;
            return 0;
        }
    return sy__json_err(err, w, ".behavior", "one of Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous",
                        b);
}

static int sy__compile_builtin(const char *pat, sy_tok_regex *re, const sy_tok_where *w, sy_err *err)
{
    return sy__re_compile(pat, strlen(pat), re, w, err);
}

/* One element of a Sequence's pretokenizers; a null one is dropped. */
static int sy__pretok_add_kid(void *seq, const json_t *item, const sy_tok_where *at, sy_err *err)
{
    sy_tok_pretok *p = seq;
    int rc = sy__pretok_parse(item, at, &p->kids[p->n_kids], err);
    if (!rc && p->kids[p->n_kids])
        p->n_kids++;
    return rc;
}

int sy__pretok_parse(const json_t *j, const sy_tok_where *w, sy_tok_pretok **out, sy_err *err)
{
    *out = NULL;
    if (!j || json_is_null(j))
        return 0;
    const char *ty;
    int rc = sy__json_type(j, "a pre-tokenizer object or null", "a pre-tokenizer type string", w, &ty, err);
    if (rc)
        return rc;
    sy_tok_pretok *p = calloc(1, sizeof *p);
    if (!p)
        return sy_err_set(err, SY_ERR_NOMEM, "out of memory");
    sy_tok_where sub = *w;
    p->kind = SY__P_SPLIT;
    if (!strcmp(ty, "Sequence")) {
        p->kind = SY__P_SEQ;
        /* Sized before the array is checked: a non-array has size 0 and fails just below. */
        p->kids = calloc(json_array_size(json_object_get(j, "pretokenizers")) + 1, sizeof *p->kids);
        if (!p->kids)
            goto nomem;
        if ((rc = sy__json_each(j, "pretokenizers", "an array of pre-tokenizers", w, sy__pretok_add_kid, p, err)))
            goto fail;
    } else if (!strcmp(ty, "Split")) {
        sy__path(sub.path, sizeof sub.path, w->path, ".pattern");
        if ((rc = sy__re_from_json(json_object_get(j, "pattern"), &p->re, &sub, err)) ||
            (rc = sy__parse_behavior(j, "Isolated", &p->behavior, w, err)) ||
            (rc = sy__json_bool(j, "invert", false, &p->invert, w, err)))
            goto fail;
    } else if (!strcmp(ty, "ByteLevel")) {
        p->kind = SY__P_BYTELEVEL;
        if ((rc = sy__json_bool(j, "add_prefix_space", true, &p->add_prefix_space, w, err)) ||
            (rc = sy__json_bool(j, "use_regex", true, &p->use_regex, w, err)))
            goto fail;
        if (p->use_regex && (rc = sy__compile_builtin(sy__gpt2_re, &p->re, w, err)))
            goto fail;
    } else if (!strcmp(ty, "Metaspace")) {
        p->kind = SY__P_METASPACE;
        const char *r;
        size_t rl;
        if ((rc = sy__json_str(j, "replacement", &r, &rl, w, err)))
            goto fail;
        size_t adv = 0;
        if (!r || !rl || (sy__utf8_next(r, rl, &adv), adv != rl)) {
            rc = sy__json_err(err, w, ".replacement", "a one-character string", json_object_get(j, "replacement"));
            goto fail;
        }
        memcpy(p->repl, r, rl);
        p->repl_len = rl;
        /* prepend_scheme replaced add_prefix_space; false means never. */
        const char *scheme;
        bool aps = true;
        if ((rc = sy__json_str(j, "prepend_scheme", &scheme, NULL, w, err)) ||
            (rc = sy__json_bool(j, "add_prefix_space", true, &aps, w, err)) ||
            (rc = sy__json_bool(j, "split", true, &p->split, w, err)))
            goto fail;
        if (!scheme || !strcmp(scheme, "always"))
            p->prepend = SY__PREPEND_ALWAYS;
        else if (!strcmp(scheme, "first"))
            p->prepend = SY__PREPEND_FIRST;
        else if (!strcmp(scheme, "never"))
            p->prepend = SY__PREPEND_NEVER;
        else {
            rc = sy__json_err(err, w, ".prepend_scheme", "\"always\", \"first\" or \"never\"",
                              json_object_get(j, "prepend_scheme"));
            goto fail;
        }
        if (!aps)
            p->prepend = SY__PREPEND_NEVER;
        if ((rc = sy__re_literal(p->repl, p->repl_len, &p->re)))
            goto nomem;
    } else if (!strcmp(ty, "Digits")) {
        bool individual;
        if ((rc = sy__json_bool(j, "individual_digits", false, &individual, w, err)))
            goto fail;
        /* Rust's char::is_numeric: general category N. */
        p->behavior = individual ? SY__B_ISOLATED : SY__B_CONTIGUOUS;
        if ((rc = sy__compile_builtin("\\p{N}", &p->re, w, err)))
            goto fail;
    } else if (!strcmp(ty, "Whitespace")) {
        p->behavior = SY__B_REMOVED;
        p->invert = true;
        if ((rc = sy__compile_builtin("\\w+|[^\\w\\s]+", &p->re, w, err)))
            goto fail;
    } else if (!strcmp(ty, "WhitespaceSplit")) {
        p->behavior = SY__B_REMOVED;
        if ((rc = sy__compile_builtin("\\s", &p->re, w, err)))
            goto fail;
    } else if (!strcmp(ty, "Punctuation") || !strcmp(ty, "BertPreTokenizer")) {
        /* Rust's is_ascii_punctuation || is_punctuation (category P). */
        static const char punct[] = "[\\p{P}\\x{21}-\\x{2F}\\x{3A}-\\x{40}\\x{5B}-\\x{60}\\x{7B}-\\x{7E}]";
        bool bert = !strcmp(ty, "BertPreTokenizer");
        if (!bert && (rc = sy__parse_behavior(j, "Isolated", &p->behavior, w, err)))
            goto fail;
        if ((rc = sy__compile_builtin(punct, &p->re, w, err)))
            goto fail;
        if (bert) {
            /* Whitespace split (removed), then punctuation isolated. */
            p->kind = SY__P_SEQ;
            p->kids = calloc(2, sizeof *p->kids);
            if (!p->kids || !(p->kids[0] = calloc(1, sizeof **p->kids)) || !(p->kids[1] = calloc(1, sizeof **p->kids)))
                goto nomem;
            p->n_kids = 2;
            p->kids[0]->kind = p->kids[1]->kind = SY__P_SPLIT;
            p->kids[0]->behavior = SY__B_REMOVED;
            p->kids[1]->behavior = SY__B_ISOLATED;
            p->kids[1]->re = p->re;
            memset(&p->re, 0, sizeof p->re);
            if ((rc = sy__compile_builtin("\\s", &p->kids[0]->re, w, err)))
                goto fail;
        }
    } else {
        rc = sy__json_unknown_type(err, w, "pre-tokenizer",
                                   "Sequence, Split, ByteLevel, Metaspace, Digits, Whitespace, WhitespaceSplit, "
                                   "Punctuation, BertPreTokenizer",
                                   ty);
        goto fail;
    }
    *out = p;
    return 0;
nomem:
    rc = sy_err_set(err, SY_ERR_NOMEM, "%s: %s: out of memory", w->file, w->path);
fail:
    sy__pretok_free(p);
    return rc;
}

/* Hugging Face's NormalizedString::split: turns the (span, is_match) list
 * in m into the pieces to keep, in place. */
static void sy__apply_behavior(sy_tok_spans *m, sy__behavior b, bool invert)
{
    if (invert)
        for (size_t i = 0; i < m->n; i++)
            m->v[i].match = !m->v[i].match;
    size_t w = 0;
    bool prev_match = false;
    switch (b) {
    case SY__B_ISOLATED:
        for (size_t i = 0; i < m->n; i++)
            m->v[i].match = false;
        return;
    case SY__B_REMOVED:
        for (size_t i = 0; i < m->n; i++)
            if (!m->v[i].match)
                m->v[w++] = m->v[i];
        m->n = w;
        return;
    case SY__B_CONTIGUOUS:
        for (size_t i = 0; i < m->n; i++) {
            bool is = m->v[i].match;
            if (is == prev_match && w > 0)
                m->v[w - 1].len = m->v[i].off + m->v[i].len - m->v[w - 1].off;
            else
                m->v[w++] = m->v[i];
            prev_match = is;
        }
        break;
    case SY__B_MERGED_PREV:
        for (size_t i = 0; i < m->n; i++) {
            bool is = m->v[i].match;
            if (is && !prev_match && w > 0)
                m->v[w - 1].len = m->v[i].off + m->v[i].len - m->v[w - 1].off;
            else
                m->v[w++] = m->v[i];
            prev_match = is;
        }
        break;
    case SY__B_MERGED_NEXT: {
        /* Same fold from the right, written in place from the end. */
        size_t r = m->n;
        for (size_t i = m->n; i-- > 0;) {
            sy_tok_span cur = m->v[i];
            if (cur.match && !prev_match && r < m->n) {
                m->v[r].len = m->v[r].off + m->v[r].len - cur.off;
                m->v[r].off = cur.off;
            } else {
                m->v[--r] = cur;
            }
            prev_match = cur.match;
        }
        memmove(m->v, m->v + r, (m->n - r) * sizeof *m->v);
        w = m->n - r;
        break;
    }
    }
    m->n = w;
    for (size_t i = 0; i < m->n; i++)
        m->v[i].match = false;
}

/* GPT-2's byte-to-unicode table: printable Latin-1 maps to itself, the
 * other bytes to U+0100 onwards in byte order. */
static uint32_t sy__byte_char(uint8_t b)
{
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE)
        return b;
    if (b <= 0x20)
        return 0x100u + b;
    if (b <= 0xA0)
        return 0x100u + 33 + (b - 0x7Fu);
    return 0x100u + 67; /* 0xAD */
}

static int sy__emit(sy_tok_pieces *out, const char *s, size_t n, bool origin, bool bytelevel)
{
    size_t off = out->text.len;
    if (bytelevel) {
        if (sy__buf_reserve(&out->text, n * 2))
            return SY_ERR_NOMEM;
        for (size_t i = 0; i < n; i++)
            out->text.len += sy__utf8_put(sy__byte_char((uint8_t)s[i]), out->text.p + out->text.len);
        out->text.p[out->text.len] = 0;
    } else if (sy__buf_put(&out->text, s, n)) {
        return SY_ERR_NOMEM;
    }
    if (sy__spans_push(&out->sp, off, out->text.len - off, false))
        return SY_ERR_NOMEM;
    out->sp.v[out->sp.n - 1].origin = origin;
    return 0;
}

/* Splits s per p (Split-like kinds), emitting the kept pieces into out. */
static int sy__split_piece(const sy_tok_pretok *p, const char *s, size_t n, bool origin, sy__behavior b, bool invert,
                           bool bytelevel, sy_tok_pieces *out, sy_tok_ctx *c, sy_err *err)
{
    int rc = sy__re_find_all(&p->re, s, n, c->md, &c->spans, err);
    if (rc)
        return rc;
    sy__apply_behavior(&c->spans, b, invert);
    for (size_t i = 0; i < c->spans.n; i++) {
        const sy_tok_span *sp = &c->spans.v[i];
        if (!sp->len)
            continue;
        if (sy__emit(out, s + sp->off, sp->len, origin && sp->off == 0, bytelevel))
            return SY_ERR_NOMEM;
    }
    return 0;
}

static int sy__pretok_one(const sy_tok_pretok *p, const sy_tok_pieces *in, sy_tok_pieces *out, sy_tok_ctx *c,
                          sy_err *err)
{
    int rc = 0;
    out->text.len = 0;
    out->sp.n = 0;
    for (size_t i = 0; i < in->sp.n && !rc; i++) {
        const sy_tok_span *pc = &in->sp.v[i];
        const char *s = in->text.p + pc->off;
        size_t n = pc->len;
        switch (p->kind) {
        case SY__P_SEQ: break;
        case SY__P_SPLIT: rc = sy__split_piece(p, s, n, pc->origin, p->behavior, p->invert, false, out, c, err); break;
        case SY__P_BYTELEVEL: {
            sy_tok_buf *t = &c->tmp;
            t->len = 0;
            if (p->add_prefix_space && !(n && s[0] == ' ') && sy__buf_putc(t, ' '))
                return SY_ERR_NOMEM;
            if (sy__buf_put(t, s, n))
                return SY_ERR_NOMEM;
            if (p->use_regex)
                rc = sy__split_piece(p, t->p, t->len, pc->origin, SY__B_ISOLATED, false, true, out, c, err);
            else if (t->len)
                rc = sy__emit(out, t->p, t->len, pc->origin, true);
            break;
        }
        case SY__P_METASPACE: {
            sy_tok_buf *t = &c->tmp;
            t->len = 0;
            bool starts = n >= p->repl_len && !memcmp(s, p->repl, p->repl_len);
            /* After replacing spaces the text starts with the replacement
             * exactly when it started with a space or with it. */
            starts = starts || (n && s[0] == ' ');
            if (!starts && (p->prepend == SY__PREPEND_ALWAYS || (p->prepend == SY__PREPEND_FIRST && pc->origin)))
                if (sy__buf_put(t, p->repl, p->repl_len))
                    return SY_ERR_NOMEM;
            for (size_t k = 0; k < n; k++)
                if (s[k] == ' ' ? sy__buf_put(t, p->repl, p->repl_len) : sy__buf_putc(t, s[k]))
                    return SY_ERR_NOMEM;
            if (p->split)
                rc = sy__split_piece(p, t->p, t->len, pc->origin, SY__B_MERGED_NEXT, false, false, out, c, err);
            else if (t->len)
                rc = sy__emit(out, t->p, t->len, pc->origin, false);
            break;
        }
        }
    }
    if (rc == SY_ERR_NOMEM)
        return sy_err_set(err, rc, "tokenizer: out of memory while pre-tokenizing");
    return rc;
}

int sy__pretok_apply(const sy_tok_pretok *p, sy_tok_pieces *in, sy_tok_ctx *c, sy_err *err)
{
    if (p->kind == SY__P_SEQ) {
        for (size_t i = 0; i < p->n_kids; i++) {
            int rc = sy__pretok_apply(p->kids[i], in, c, err);
            if (rc)
                return rc;
        }
        return 0;
    }
    /* The output buffer is whichever of the context's pair is not *in. */
    sy_tok_pieces *out = in == &c->pa ? &c->pb : &c->pa;
    int rc = sy__pretok_one(p, in, out, c, err);
    if (rc)
        return rc;
    sy_tok_pieces t = *in;
    *in = *out;
    *out = t;
    return 0;
}
