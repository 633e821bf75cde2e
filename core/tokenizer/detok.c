/*
 * Decoding, whole and incremental. Both run the same streaming decoder
 * chain (decoder.c), so the pieces a sy_detok hands out always join up to
 * exactly what sy_tokenizer_decode gives for the same ids.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

struct sy_detok {
    const sy_tokenizer *t;
    bool skip_special;
    bool finished;
    sy_tok_dstate *st;
    sy_tok_buf out;
    /* After a context: text that decoding the context alone would still
     * have produced at its end (held-back bytes, say). It was "shown"
     * with the context, so it is dropped when the stream produces it. */
    sy_tok_buf owed;
    size_t owed_pos;
};

/* Runs one id into the chain; out receives the text that became final. */
static int sy__detok_feed(sy_detok *d, int32_t id, sy_tok_buf *out, sy_err *err)
{
    const sy_tokenizer *t = d->t;
    if (id < 0 || id >= t->n_ids)
        return sy_err_set(err, SY_ERR_INVALID, "detokenize: expected a token id in [0, %d), found %d", t->n_ids, id);
    /* Hugging Face drops special tokens before the decoder chain, and ids
     * without a piece (gaps in the vocabulary) decode to nothing. */
    if (t->piece_off[id] == UINT32_MAX || (d->skip_special && (t->id_flags[id] & SY__ID_SPECIAL)))
        return 0;
    if (sy__dstate_push(d->st, t->arena.p + t->piece_off[id], t->piece_len[id], out))
        return sy_err_set(err, SY_ERR_NOMEM, "detokenize: out of memory at token %d", id);
    return 0;
}

void sy_detok_free(sy_detok *d)
{
    if (!d)
        return;
    sy__dstate_free(d->st);
    sy__buf_free(&d->out);
    sy__buf_free(&d->owed);
    free(d);
}

sy_detok *sy_detok_new(const sy_tokenizer *t, bool skip_special)
{
    sy_detok *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->t = t;
    d->skip_special = skip_special;
    d->st = sy__dstate_new(t);
    if (!d->st) {
        free(d);
        return NULL;
    }
    return d;
}

sy_detok *sy_detok_new_after(const sy_tokenizer *t, const int32_t *context, size_t n_context, bool skip_special)
{
    if (!t || (!context && n_context))
        return NULL;
    sy_detok *d = sy_detok_new(t, skip_special);
    sy_detok *whole = sy_detok_new(t, skip_special);
    if (!d || !whole)
        goto fail;
    /* d runs the context and keeps what it leaves pending (an unfinished
     * character, a first-token strip already spent); whole also finishes,
     * giving decode(context). What whole has beyond d's text is owed. An
     * id out of range has no text, so it is skipped. */
    for (size_t i = 0; i < n_context; i++) {
        if (context[i] < 0 || context[i] >= t->n_ids)
            continue;
        if (sy__detok_feed(d, context[i], &d->out, NULL) || sy__detok_feed(whole, context[i], &whole->out, NULL))
            goto fail;
    }
    if (sy__dstate_finish(whole->st, &whole->out))
        goto fail;
    if (whole->out.len > d->out.len && sy__buf_put(&d->owed, whole->out.p + d->out.len, whole->out.len - d->out.len))
        goto fail;
    d->out.len = 0;
    sy_detok_free(whole);
    return d;
fail:
    sy_detok_free(d);
    sy_detok_free(whole);
    return NULL;
}

static int sy__detok_result(sy_detok *d, const char **piece, size_t *len)
{
    size_t skip = 0;
    /* Drop the owed text while the stream repeats it; once it differs
     * (a held-back byte run completed differently) nothing more is owed. */
    while (d->owed_pos < d->owed.len && skip < d->out.len) {
        /* Whole characters only, so a piece never starts mid-character. */
        size_t cl;
        sy__utf8_next(d->out.p + skip, d->out.len - skip, &cl);
        if (cl > d->owed.len - d->owed_pos || memcmp(d->out.p + skip, d->owed.p + d->owed_pos, cl)) {
            d->owed_pos = d->owed.len;
            break;
        }
        skip += cl;
        d->owed_pos += cl;
    }
    *piece = d->out.p ? d->out.p + skip : "";
    *len = d->out.len - skip;
    return SY_OK;
}

int sy_detok_push(sy_detok *d, int32_t id, const char **piece, size_t *len, sy_err *err)
{
    *piece = "";
    *len = 0;
    if (d->finished)
        return sy_err_set(err, SY_ERR_INVALID,
                          "sy_detok_push: expected an unfinished detokenizer, found one already finished");
    d->out.len = 0;
    int rc = sy__detok_feed(d, id, &d->out, err);
    if (rc)
        return rc;
    return sy__detok_result(d, piece, len);
}

int sy_detok_finish(sy_detok *d, const char **piece, size_t *len, sy_err *err)
{
    *piece = "";
    *len = 0;
    d->out.len = 0;
    if (d->finished)
        return 0;
    d->finished = true;
    if (sy__dstate_finish(d->st, &d->out))
        return sy_err_set(err, SY_ERR_NOMEM, "detokenize: out of memory");
    return sy__detok_result(d, piece, len);
}

int sy_tokenizer_decode(const sy_tokenizer *t, const int32_t *ids, size_t n, bool skip_special, char **text,
                        size_t *len, sy_err *err)
{
    *text = NULL;
    if (len)
        *len = 0;
    if (!t || (!ids && n))
        return sy_err_set(err, SY_ERR_INVALID, "sy_tokenizer_decode: expected a tokenizer and ids, found NULL");
    sy_detok *d = sy_detok_new(t, skip_special);
    if (!d)
        return sy_err_set(err, SY_ERR_NOMEM, "decode: out of memory");
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++)
        rc = sy__detok_feed(d, ids[i], &d->out, err);
    if (!rc && sy__dstate_finish(d->st, &d->out))
        rc = sy_err_set(err, SY_ERR_NOMEM, "decode: out of memory");
    if (!rc && !d->out.p && sy__buf_reserve(&d->out, 1))
        rc = sy_err_set(err, SY_ERR_NOMEM, "decode: out of memory");
    if (rc) {
        sy_detok_free(d);
        return rc;
    }
    d->out.p[d->out.len] = 0;
    *text = d->out.p;
    if (len)
        *len = d->out.len;
    d->out.p = NULL;
    sy_detok_free(d);
    return 0;
}
