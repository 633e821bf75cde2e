/*
 * sy_tokenizer_encode: Hugging Face's encode order. Raw text is cut on
 * non-normalized added tokens; each remaining piece is normalized on its
 * own (so Prepend applies per piece, as there), cut on normalized added
 * tokens, pre-tokenized, and each word goes through BPE.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

static int sy__encode_words(const sy_tokenizer *t, const char *s, size_t n, bool origin, sy_tok_ctx *c,
                            sy_tok_ivec *out, sy_err *err)
{
    sy_tok_pieces *p = &c->pa;
    p->text.len = 0;
    p->sp.n = 0;
    if (sy__buf_put(&p->text, s, n) || sy__spans_push(&p->sp, 0, n, false))
        return sy_err_set(err, SY_ERR_NOMEM, "out of memory");
    p->sp.v[0].origin = origin;
    int rc;
    if (t->pretok && (rc = sy__pretok_apply(t->pretok, p, c, err)))
        return rc;
    for (size_t i = 0; i < p->sp.n; i++) {
        const sy_tok_span *sp = &p->sp.v[i];
        if ((rc = sy__bpe_encode(t, p->text.p + sp->off, sp->len, c, out, err)))
            return rc;
    }
    return 0;
}

static int sy__encode(const sy_tokenizer *t, const char *text, size_t len, int flags, sy_tok_ivec *out, sy_tok_ctx *c,
                      sy_err *err)
{
    bool parse_special = flags & SY_TOK_PARSE_SPECIAL;
    sy_tok_spans raw = {0}, norm = {0};
    sy_tok_buf nb = {0};
    int rc = sy__added_split(t, false, parse_special, text, len, &raw, err);
    for (size_t i = 0; i < raw.n && !rc; i++) {
        const sy_tok_span *r = &raw.v[i];
        if (r->id >= 0) {
            rc = sy__ivec_push(out, r->id);
            continue;
        }
        const char *s = text + r->off;
        size_t n = r->len;
        if (t->norm) {
            if ((rc = sy__norm_apply(t->norm, s, n, &nb, c, err)))
                break;
            s = nb.p ? nb.p : "";
            n = nb.len;
        }
        if ((rc = sy__added_split(t, true, parse_special, s, n, &norm, err)))
            break;
        for (size_t k = 0; k < norm.n && !rc; k++) {
            const sy_tok_span *q = &norm.v[k];
            if (q->id >= 0)
                rc = sy__ivec_push(out, q->id);
            else
                rc = sy__encode_words(t, s + q->off, q->len, r->off == 0 && q->off == 0, c, out, err);
        }
    }
    sy__spans_free(&raw);
    sy__spans_free(&norm);
    sy__buf_free(&nb);
    if (rc == SY_ERR_NOMEM)
        return sy_err_set(err, rc, "tokenizer: out of memory encoding %zu bytes", len);
    return rc;
}

int sy_tokenizer_encode(const sy_tokenizer *t, const char *text, size_t len, int flags, int32_t **ids, size_t *n_ids,
                        sy_err *err)
{
    *ids = NULL;
    *n_ids = 0;
    if (!t || (!text && len))
        return sy_err_set(err, SY_ERR_INVALID, "sy_tokenizer_encode: expected a tokenizer and text, found NULL");
    if (!text)
        text = "";
    sy_tok_ctx c;
    int rc = sy__ctx_init(&c, err);
    if (rc)
        return rc;
    sy_tok_ivec out = {0};
    bool add = flags & SY_TOK_ADD_SPECIAL;
    for (size_t i = 0; add && i < t->add_pre.n && !rc; i++)
        rc = sy__ivec_push(&out, t->add_pre.v[i]);
    if (!rc)
        rc = sy__encode(t, text, len, flags, &out, &c, err);
    for (size_t i = 0; add && i < t->add_post.n && !rc; i++)
        rc = sy__ivec_push(&out, t->add_post.v[i]);
    sy__ctx_free(&c);
    if (rc) {
        sy__ivec_free(&out);
        return rc == SY_ERR_NOMEM ? sy_err_set(err, rc, "tokenizer: out of memory") : rc;
    }
    if (!out.v && !(out.v = malloc(sizeof *out.v))) /* a non-NULL result even when empty */
        return sy_err_set(err, SY_ERR_NOMEM, "tokenizer: out of memory");
    *ids = out.v;
    *n_ids = out.n;
    return 0;
}
