/*
 * The decoder chain (ByteLevel, Metaspace, Replace, ByteFallback, Fuse,
 * Strip, Sequence) run as a stream. Hugging Face decodes a whole list of
 * token strings at once; here each stage passes on text as soon as no
 * later token can change it, so that streaming a sequence token by token
 * gives exactly the text of decoding it whole. Each event carries BEGIN
 * (a new token starts) and END (the token is complete): a stage that
 * works per token (Strip, Metaspace, Replace) needs both; after Fuse or
 * ByteLevel everything is one token that ends only at finish.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

enum { SY__EV_BEGIN = 1, SY__EV_END = 2, SY__EV_WHOLE = 3 };

typedef enum {
    SY__D_REPLACE,
    SY__D_BYTEFALLBACK,
    SY__D_FUSE,
    SY__D_STRIP,
    SY__D_METASPACE,
    SY__D_BYTELEVEL,
    SY__D_JOIN /* no decoder at all: tokens joined with spaces */
} sy__dkind;

typedef struct sy__stage {
    sy__dkind kind;
    sy_tok_regex re; /* Replace */
    char *content; /* Replace */
    size_t content_len;
    uint32_t ch; /* Strip's character, Metaspace's replacement */
    size_t start, stop; /* Strip */
    bool strip_first; /* Metaspace: prepend_scheme is not never */
} sy__stage;

struct sy_tok_dec {
    sy__stage *st;
    size_t n;
};

void sy__dec_free(sy_tok_dec *d)
{
    if (!d)
        return;
    for (size_t i = 0; i < d->n; i++) {
        sy__re_free(&d->st[i].re);
        free(d->st[i].content);
    }
    free(d->st);
    free(d);
}

static int sy__one_char(const json_t *j, const char *key, uint32_t *out, const sy_tok_where *w, sy_err *err)
{
    const json_t *v = json_object_get(j, key);
    size_t adv = 0;
    if (json_is_string(v) && json_string_length(v)) {
        *out = sy__utf8_next(json_string_value(v), json_string_length(v), &adv);
        if (adv == json_string_length(v))
            return 0;
    }
    char sub[64];
    snprintf(sub, sizeof sub, ".%s", key);
    return sy__json_err(err, w, sub, "a one-character string", v);
}

static int sy__uint(const json_t *j, const char *key, size_t *out, const sy_tok_where *w, sy_err *err)
{
    const json_t *v = json_object_get(j, key);
    if (!v || json_is_null(v)) {
        *out = 0;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 0) {
        char sub[64];
        snprintf(sub, sizeof sub, ".%s", key);
        return sy__json_err(err, w, sub, "a non-negative integer", v);
    }
    *out = (size_t)json_integer_value(v);
    return 0;
}

static int sy__add_stage(sy_tok_dec *d, sy__stage **out)
{
    sy__stage *p = realloc(d->st, (d->n + 1) * sizeof *p);
    if (!p)
        return SY_ERR_NOMEM;
    d->st = p;
    *out = memset(&d->st[d->n++], 0, sizeof *d->st);
    return 0;
}

/* Flattens nested Sequences into d's list of stages. */
static int sy__dec_parse_into(sy_tok_dec *d, const json_t *j, const sy_tok_where *w, sy_err *err);

static int sy__dec_parse_each(void *d, const json_t *item, const sy_tok_where *at, sy_err *err)
{
    return sy__dec_parse_into(d, item, at, err);
}

static int sy__dec_parse_into(sy_tok_dec *d, const json_t *j, const sy_tok_where *w, sy_err *err)
{
    const char *ty;
    int rc = sy__json_type(j, "a decoder object", "a decoder type string", w, &ty, err);
    if (rc)
        return rc;
    if (!strcmp(ty, "Sequence"))
        return sy__json_each(j, "decoders", "an array of decoders", w, sy__dec_parse_each, d, err);
    sy__stage *s;
    if (sy__add_stage(d, &s))
        return sy_err_set(err, SY_ERR_NOMEM, "out of memory");
    if (!strcmp(ty, "Replace")) {
        s->kind = SY__D_REPLACE;
        const json_t *c = json_object_get(j, "content");
        if (!json_is_string(c))
            return sy__json_err(err, w, ".content", "a string", c);
        s->content_len = json_string_length(c);
        if (!(s->content = malloc(s->content_len + 1)))
            return sy_err_set(err, SY_ERR_NOMEM, "out of memory");
        memcpy(s->content, json_string_value(c), s->content_len + 1);
        sy_tok_where sub = *w;
        sy__path(sub.path, sizeof sub.path, w->path, ".pattern");
        return sy__re_from_json(json_object_get(j, "pattern"), &s->re, &sub, err);
    }
    if (!strcmp(ty, "ByteFallback")) {
        s->kind = SY__D_BYTEFALLBACK;
        return 0;
    }
    if (!strcmp(ty, "Fuse")) {
        s->kind = SY__D_FUSE;
        return 0;
    }
    if (!strcmp(ty, "ByteLevel")) {
        s->kind = SY__D_BYTELEVEL;
        return 0;
    }
    if (!strcmp(ty, "Strip")) {
        s->kind = SY__D_STRIP;
        rc = sy__one_char(j, "content", &s->ch, w, err);
        if (!rc)
            rc = sy__uint(j, "start", &s->start, w, err);
        if (!rc)
            rc = sy__uint(j, "stop", &s->stop, w, err);
        return rc;
    }
    if (!strcmp(ty, "Metaspace")) {
        s->kind = SY__D_METASPACE;
        rc = sy__one_char(j, "replacement", &s->ch, w, err);
        if (rc)
            return rc;
        const char *scheme;
        bool aps;
        if ((rc = sy__json_str(j, "prepend_scheme", &scheme, NULL, w, err)) ||
            (rc = sy__json_bool(j, "add_prefix_space", true, &aps, w, err)))
            return rc;
        s->strip_first = aps && !(scheme && !strcmp(scheme, "never"));
        return 0;
    }
    return sy__json_unknown_type(err, w, "decoder", "ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip, Sequence",
                                 ty);
}

int sy__dec_parse(sy_tokenizer *t, const json_t *j, const sy_tok_where *w, sy_err *err)
{
    sy_tok_dec *d = calloc(1, sizeof *d);
    if (!d)
        return sy_err_set(err, SY_ERR_NOMEM, "out of memory");
    t->dec = d;
    if (!j || json_is_null(j)) {
        sy__stage *s;
        if (sy__add_stage(d, &s))
            return sy_err_set(err, SY_ERR_NOMEM, "out of memory");
        s->kind = SY__D_JOIN;
        return 0;
    }
    return sy__dec_parse_into(d, j, w, err);
}

/* ------------------------------------------------------------ streaming */

typedef struct sy__sstate {
    sy_tok_buf hold; /* bytes a stage keeps back */
    sy_tok_buf tmp; /* what it passes on */
    size_t count; /* Strip: characters cut at the token start; Metaspace: tokens seen */
    bool begun; /* Fuse/ByteLevel/Join: the one output token has begun */
    bool in_start; /* Strip: still at the token start */
} sy__sstate;

struct sy_tok_dstate {
    const sy_tok_dec *dec;
    sy__sstate *s;
    pcre2_match_data *md;
    sy_tok_spans spans;
};

sy_tok_dstate *sy__dstate_new(const sy_tokenizer *t)
{
    sy_tok_dstate *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->dec = t->dec;
    d->s = calloc(t->dec->n + 1, sizeof *d->s);
    d->md = pcre2_match_data_create(1, NULL);
    if (!d->s || !d->md) {
        sy__dstate_free(d);
        return NULL;
    }
    return d;
}

void sy__dstate_free(sy_tok_dstate *d)
{
    if (!d)
        return;
    for (size_t i = 0; d->s && i < d->dec->n; i++) {
        sy__buf_free(&d->s[i].hold);
        sy__buf_free(&d->s[i].tmp);
    }
    free(d->s);
    pcre2_match_data_free(d->md);
    sy__spans_free(&d->spans);
    free(d);
}

static int sy__stage_push(sy_tok_dstate *d, size_t i, const char *s, size_t n, int flags, sy_tok_buf *out);

#define SY__FFFD "\xEF\xBF\xBD"

static int sy__hex(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

static bool sy__is_byte_token(const char *s, size_t n, uint8_t *b)
{
    if (n != 6 || memcmp(s, "<0x", 3) || s[5] != '>' || sy__hex(s[3]) < 0 || sy__hex(s[4]) < 0)
        return false;
    *b = (uint8_t)(sy__hex(s[3]) * 16 + sy__hex(s[4]));
    return true;
}

/* ByteFallback: a run of byte tokens becomes its text if valid UTF-8,
 * else one U+FFFD per byte, each its own token. */
static int sy__flush_bytes(sy_tok_dstate *d, size_t i, sy_tok_buf *out)
{
    sy_tok_buf *h = &d->s[i].hold;
    if (!h->len)
        return 0;
    int rc = 0;
    if (sy__utf8_valid(h->p, h->len)) {
        rc = sy__stage_push(d, i + 1, h->p, h->len, SY__EV_WHOLE, out);
    } else {
        for (size_t k = 0; k < h->len && !rc; k++)
            rc = sy__stage_push(d, i + 1, SY__FFFD, 3, SY__EV_WHOLE, out);
    }
    h->len = 0;
    return rc;
}

/* ByteLevel: UTF-8 with maximal-subpart replacement (Rust's
 * from_utf8_lossy), fed byte by byte; complete text goes to dst. */
static int sy__lossy_feed(sy_tok_buf *pend, const uint8_t *b, size_t n, sy_tok_buf *dst)
{
    for (size_t k = 0; k < n; k++) {
        uint8_t c = b[k];
        if (pend->len) {
            uint8_t lead = (uint8_t)pend->p[0];
            size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
            uint8_t lo = 0x80, hi = 0xBF;
            if (pend->len == 1) {
                if (lead == 0xE0)
                    lo = 0xA0;
                else if (lead == 0xED)
                    hi = 0x9F;
                else if (lead == 0xF0)
                    lo = 0x90;
                else if (lead == 0xF4)
                    hi = 0x8F;
            }
            if (c >= lo && c <= hi) {
                pend->p[pend->len++] = (char)c;
                if (pend->len == need) {
                    if (sy__buf_put(dst, pend->p, need))
                        return SY_ERR_NOMEM;
                    pend->len = 0;
                }
                continue;
            }
            /* The pending prefix is a maximal invalid subpart. */
            if (sy__buf_put(dst, SY__FFFD, 3))
                return SY_ERR_NOMEM;
            pend->len = 0;
        }
        if (c < 0x80) {
            if (sy__buf_putc(dst, (char)c))
                return SY_ERR_NOMEM;
        } else if ((c >= 0xC2 && c <= 0xDF) || (c >= 0xE0 && c <= 0xF4)) {
            if (sy__buf_reserve(pend, 4))
                return SY_ERR_NOMEM;
            pend->p[0] = (char)c;
            pend->len = 1;
        } else if (sy__buf_put(dst, SY__FFFD, 3)) {
            return SY_ERR_NOMEM;
        }
    }
    return 0;
}

/* GPT-2's unicode-to-byte table, the inverse of the pre-tokenizer's. */
static int sy__char_byte(uint32_t cp)
{
    if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF))
        return (int)cp;
    if (cp >= 0x100 && cp <= 0x120)
        return (int)(cp - 0x100);
    if (cp >= 0x121 && cp <= 0x142)
        return (int)(cp - 0x121 + 0x7F);
    if (cp == 0x143)
        return 0xAD;
    return -1;
}

static int sy__replace_text(sy_tok_dstate *d, const sy__stage *st, const char *s, size_t n, sy_tok_buf *dst)
{
    sy_err e;
    int rc = sy__re_find_all(&st->re, s, n, d->md, &d->spans, &e);
    if (rc)
        return rc;
    for (size_t k = 0; k < d->spans.n; k++) {
        const sy_tok_span *sp = &d->spans.v[k];
        if (sp->match ? sy__buf_put(dst, st->content, st->content_len) : sy__buf_put(dst, s + sp->off, sp->len))
            return SY_ERR_NOMEM;
    }
    return 0;
}

static int sy__stage_push(sy_tok_dstate *d, size_t i, const char *s, size_t n, int flags, sy_tok_buf *out)
{
    if (i == d->dec->n)
        return sy__buf_put(out, s, n);
    const sy__stage *st = &d->dec->st[i];
    sy__sstate *ss = &d->s[i];
    sy_tok_buf *o = &ss->tmp;
    o->len = 0;
    int rc = 0;
    switch (st->kind) {
    case SY__D_JOIN:
        if ((flags & SY__EV_BEGIN) && ss->begun && sy__buf_putc(out, ' '))
            return SY_ERR_NOMEM;
        ss->begun = true;
        return sy__buf_put(out, s, n);
    case SY__D_BYTEFALLBACK: {
        uint8_t b;
        if (flags == SY__EV_WHOLE && sy__is_byte_token(s, n, &b))
            return sy__buf_putc(&ss->hold, (char)b);
        if ((rc = sy__flush_bytes(d, i, out)))
            return rc;
        return sy__stage_push(d, i + 1, s, n, flags, out);
    }
    case SY__D_FUSE: {
        int f = ss->begun ? 0 : SY__EV_BEGIN;
        ss->begun = true;
        return sy__stage_push(d, i + 1, s, n, f, out);
    }
    case SY__D_BYTELEVEL: {
        /* A token whose characters are all in the table is bytes; any
         * other token (an added token, say) is taken as its UTF-8. */
        sy_tok_buf *pend = &ss->hold; /* an incomplete UTF-8 sequence */
        bool all = true;
        for (size_t k = 0, adv; k < n && all; k += adv)
            all = sy__char_byte(sy__utf8_next(s + k, n - k, &adv)) >= 0;
        if (!all)
            rc = sy__lossy_feed(pend, (const uint8_t *)s, n, o);
        for (size_t k = 0, adv; all && k < n && !rc; k += adv) {
            uint8_t b = (uint8_t)sy__char_byte(sy__utf8_next(s + k, n - k, &adv));
            rc = sy__lossy_feed(pend, &b, 1, o);
        }
        if (rc)
            return rc;
        int f = ss->begun ? 0 : SY__EV_BEGIN;
        ss->begun = true;
        return sy__stage_push(d, i + 1, o->p ? o->p : "", o->len, f, out);
    }
    case SY__D_METASPACE: {
        if (flags & SY__EV_BEGIN)
            ss->count++;
        bool first = ss->count == 1;
        for (size_t k = 0, adv; k < n && !rc; k += adv) {
            uint32_t cp = sy__utf8_next(s + k, n - k, &adv);
            if (cp == st->ch)
                rc = first && st->strip_first ? 0 : sy__buf_putc(o, ' ');
            else
                rc = sy__buf_put(o, s + k, adv);
        }
        if (rc)
            return rc;
        return sy__stage_push(d, i + 1, o->p ? o->p : "", o->len, flags, out);
    }
    case SY__D_STRIP: {
        if (flags & SY__EV_BEGIN) {
            ss->count = 0;
            ss->in_start = true;
            ss->hold.len = 0;
        }
        char enc[4];
        size_t el = sy__utf8_put(st->ch, enc);
        for (size_t k = 0, adv; k < n && !rc; k += adv) {
            uint32_t cp = sy__utf8_next(s + k, n - k, &adv);
            if (ss->in_start && ss->count < st->start && cp == st->ch) {
                ss->count++;
                continue;
            }
            ss->in_start = false;
            if (!st->stop) {
                rc = sy__buf_put(o, s + k, adv);
            } else if (cp == st->ch) {
                /* Possibly trailing: keep back up to stop of them. */
                if (ss->hold.len / el == st->stop)
                    rc = sy__buf_put(o, enc, el);
                else
                    rc = sy__buf_put(&ss->hold, enc, el);
            } else {
                rc = sy__buf_put(o, ss->hold.p, ss->hold.len);
                ss->hold.len = 0;
                if (!rc)
                    rc = sy__buf_put(o, s + k, adv);
            }
        }
        if (rc)
            return rc;
        if (flags & SY__EV_END)
            ss->hold.len = 0; /* the held characters were trailing: cut */
        return sy__stage_push(d, i + 1, o->p ? o->p : "", o->len, flags, out);
    }
    case SY__D_REPLACE: {
        if (flags == SY__EV_WHOLE && !ss->hold.len) {
            if ((rc = sy__replace_text(d, st, s, n, o)))
                return rc;
            return sy__stage_push(d, i + 1, o->p ? o->p : "", o->len, flags, out);
        }
        /* Part of a longer token: a literal pattern may straddle the
         * boundary, so keep back a tail that could start a match. */
        if (sy__buf_put(&ss->hold, s, n))
            return SY_ERR_NOMEM;
        size_t keep = 0;
        if (!(flags & SY__EV_END) && !st->re.code && st->re.lit_len > 1) {
            size_t max = st->re.lit_len - 1 < ss->hold.len ? st->re.lit_len - 1 : ss->hold.len;
            for (size_t k = max; k > 0; k--)
                if (!memcmp(ss->hold.p + ss->hold.len - k, st->re.lit, k)) {
                    keep = k;
                    break;
                }
        }
        size_t done = ss->hold.len - keep;
        if ((rc = sy__replace_text(d, st, ss->hold.p, done, o)))
            return rc;
        memmove(ss->hold.p, ss->hold.p + done, keep);
        ss->hold.len = keep;
        return sy__stage_push(d, i + 1, o->p ? o->p : "", o->len, flags, out);
    }
    }
    return 0;
}

int sy__dstate_push(sy_tok_dstate *d, const char *piece, size_t n, sy_tok_buf *out)
{
    return sy__stage_push(d, 0, piece, n, SY__EV_WHOLE, out);
}

int sy__dstate_finish(sy_tok_dstate *d, sy_tok_buf *out)
{
    /* Flush stage by stage: what a stage still holds goes down the chain,
     * then a fused token (Fuse, ByteLevel) is ended. */
    for (size_t i = 0; i < d->dec->n; i++) {
        const sy__stage *st = &d->dec->st[i];
        sy__sstate *ss = &d->s[i];
        int rc = 0;
        switch (st->kind) {
        case SY__D_BYTEFALLBACK: rc = sy__flush_bytes(d, i, out); break;
        case SY__D_BYTELEVEL:
            if (ss->begun) {
                const char *tail = ss->hold.len ? SY__FFFD : "";
                ss->hold.len = 0;
                rc = sy__stage_push(d, i + 1, tail, strlen(tail), SY__EV_END, out);
            }
            break;
        case SY__D_FUSE:
            if (ss->begun)
                rc = sy__stage_push(d, i + 1, "", 0, SY__EV_END, out);
            break;
        default: break;
        }
        if (rc)
            return rc;
    }
    return 0;
}

/* ------------------------------------------------------------ token bytes */

/* One stage on one token in the middle of a sequence (so the start-only
 * steps, Metaspace's first-space and a fused Strip, do nothing), without
 * the UTF-8 repair the streaming decoder does: raw bytes stay raw. */
static int sy__token_stage(const sy__stage *st, bool fused, sy_tok_buf *in, sy_tok_buf *out)
{
    out->len = 0;
    const char *s = in->p ? in->p : "";
    size_t n = in->len;
    switch (st->kind) {
    case SY__D_JOIN:
        return sy__buf_putc(out, ' ') || sy__buf_put(out, s, n) ? SY_ERR_NOMEM : 0;
    case SY__D_BYTEFALLBACK: {
        uint8_t b;
        if (sy__is_byte_token(s, n, &b))
            return sy__buf_putc(out, (char)b) ? SY_ERR_NOMEM : 0;
        return sy__buf_put(out, s, n) ? SY_ERR_NOMEM : 0;
    }
    case SY__D_FUSE:
        return sy__buf_put(out, s, n) ? SY_ERR_NOMEM : 0;
    case SY__D_BYTELEVEL: {
        bool all = true;
        for (size_t k = 0, adv; k < n && all; k += adv)
            all = sy__char_byte(sy__utf8_next(s + k, n - k, &adv)) >= 0;
        if (!all)
            return sy__buf_put(out, s, n) ? SY_ERR_NOMEM : 0;
        for (size_t k = 0, adv; k < n; k += adv)
            if (sy__buf_putc(out, (char)sy__char_byte(sy__utf8_next(s + k, n - k, &adv))))
                return SY_ERR_NOMEM;
        return 0;
    }
    case SY__D_METASPACE:
        for (size_t k = 0, adv; k < n; k += adv) {
            uint32_t cp = sy__utf8_next(s + k, n - k, &adv);
            if (cp == st->ch ? sy__buf_putc(out, ' ') : sy__buf_put(out, s + k, adv))
                return SY_ERR_NOMEM;
        }
        return 0;
    case SY__D_STRIP: {
        if (fused) /* it strips the start and end of the whole text only */
            return sy__buf_put(out, s, n) ? SY_ERR_NOMEM : 0;
        char enc[4];
        size_t el = sy__utf8_put(st->ch, enc), a = 0, b = n;
        for (size_t k = 0; k < st->start && b - a >= el && !memcmp(s + a, enc, el); k++)
            a += el;
        for (size_t k = 0; k < st->stop && b - a >= el && !memcmp(s + b - el, enc, el); k++)
            b -= el;
        return sy__buf_put(out, s + a, b - a) ? SY_ERR_NOMEM : 0;
    }
    case SY__D_REPLACE: {
        pcre2_match_data *md = pcre2_match_data_create(1, NULL);
        sy_tok_spans sp = {0};
        sy_err e;
        int rc = md ? sy__re_find_all(&st->re, s, n, md, &sp, &e) : SY_ERR_NOMEM;
        for (size_t k = 0; !rc && k < sp.n; k++)
            if (sp.v[k].match ? sy__buf_put(out, st->content, st->content_len)
                              : sy__buf_put(out, s + sp.v[k].off, sp.v[k].len))
                rc = SY_ERR_NOMEM;
        sy__spans_free(&sp);
        pcre2_match_data_free(md);
        return rc;
    }
    }
    return 0;
}

int sy_tokenizer_token_bytes(const sy_tokenizer *t, int32_t id, char *buf, size_t cap)
{
    if (!t || id < 0 || id >= t->n_ids || t->piece_off[id] == UINT32_MAX)
        return -1;
    sy_tok_buf a = {0}, b = {0};
    int rc = sy__buf_put(&a, t->arena.p + t->piece_off[id], t->piece_len[id]) ? SY_ERR_NOMEM : 0;
    bool fused = false;
    for (size_t i = 0; !rc && i < t->dec->n; i++) {
        rc = sy__token_stage(&t->dec->st[i], fused, &a, &b);
        fused |= t->dec->st[i].kind == SY__D_FUSE || t->dec->st[i].kind == SY__D_BYTELEVEL;
        sy_tok_buf x = a;
        a = b;
        b = x;
    }
    int len = rc || a.len > INT32_MAX ? -1 : (int)a.len;
    if (len > 0 && buf)
        memcpy(buf, a.p, (size_t)len < cap ? (size_t)len : cap);
    sy__buf_free(&a);
    sy__buf_free(&b);
    return len;
}
