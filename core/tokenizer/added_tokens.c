/*
 * Added tokens: parsed from tokenizer.json's added_tokens, and cut out of
 * text by leftmost-longest matching over a byte trie, with Hugging Face's
 * lstrip / rstrip / single_word rules. A special token met when special
 * tokens are not parsed is stepped over as plain text, exactly as Hugging
 * Face's encode_special_tokens does.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

static int sy__trie_add(sy_tok_trie *tr, const char *s, size_t n, int32_t tok)
{
    if (!tr->nodes) {
        tr->cap = 64;
        tr->nodes = calloc(tr->cap, sizeof *tr->nodes);
        if (!tr->nodes)
            return SY_ERR_NOMEM;
        tr->n = 1;
        tr->nodes[0].tok = -1;
    }
    uint32_t cur = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t b = (uint8_t)s[i];
        uint32_t k = tr->nodes[cur].child;
        while (k && tr->nodes[k].byte != b)
            k = tr->nodes[k].sibling;
        if (!k) {
            if (tr->n == tr->cap) {
                struct sy_tok_tnode *p = sy__grow(tr->nodes, &tr->cap, sizeof *p, 16);
                if (!p)
                    return SY_ERR_NOMEM;
                tr->nodes = p;
            }
            k = (uint32_t)tr->n++;
            tr->nodes[k] = (struct sy_tok_tnode){0, tr->nodes[cur].child, -1, b};
            tr->nodes[cur].child = k;
        }
        cur = k;
    }
    if (n)
        tr->first[(uint8_t)s[0]] = true;
    /* A later duplicate string wins, as the last insert into a map would. */
    tr->nodes[cur].tok = tok;
    return 0;
}

/* Longest token starting at s: its index into added[], length in *len. */
static int32_t sy__trie_longest(const sy_tok_trie *tr, const char *s, size_t n, size_t *len)
{
    uint32_t cur = 0;
    int32_t best = -1;
    for (size_t i = 0; i < n; i++) {
        uint8_t b = (uint8_t)s[i];
        uint32_t k = tr->nodes[cur].child;
        while (k && tr->nodes[k].byte != b)
            k = tr->nodes[k].sibling;
        if (!k)
            break;
        cur = k;
        if (tr->nodes[cur].tok >= 0) {
            best = tr->nodes[cur].tok;
            *len = i + 1;
        }
    }
    return best;
}

void sy__added_free(sy_tokenizer *t)
{
    free(t->added);
    free(t->trie_raw.nodes);
    free(t->trie_norm.nodes);
    pcre2_code_free(t->word_re);
    t->added = NULL;
    t->trie_raw.nodes = t->trie_norm.nodes = NULL;
    t->word_re = NULL;
}

int sy__added_parse(sy_tokenizer *t, const json_t *arr, const sy_tok_where *w, sy_err *err)
{
    if (!arr || json_is_null(arr))
        return 0;
    if (!json_is_array(arr))
        return sy__json_err(err, w, "", "an array of added tokens", arr);
    size_t n = json_array_size(arr);
    t->added = calloc(n + 1, sizeof *t->added);
    if (!t->added)
        return sy_err_set(err, SY_ERR_NOMEM, "out of memory");
    bool any_single = false;
    sy_tok_ctx ctx;
    int rc = sy__ctx_init(&ctx, err);
    if (rc)
        return rc;
    sy_tok_buf norm = {0};
    for (size_t i = 0; i < n && !rc; i++) {
        const json_t *a = json_array_get(arr, i);
        sy_tok_where sub = *w;
        sy__path(sub.path, sizeof sub.path, w->path, "[%zu]", i);
        if (!json_is_object(a)) {
            rc = sy__json_err(err, &sub, "", "an added token object", a);
            break;
        }
        const json_t *id = json_object_get(a, "id"), *content = json_object_get(a, "content");
        if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) > INT32_MAX - 1) {
            rc = sy__json_err(err, &sub, ".id", "a non-negative integer id", id);
            break;
        }
        if (!json_is_string(content) || !json_string_length(content)) {
            rc = sy__json_err(err, &sub, ".content", "a non-empty string", content);
            break;
        }
        sy_tok_added *tok = &t->added[t->n_added];
        tok->id = (int32_t)json_integer_value(id);
        bool special;
        if ((rc = sy__json_bool(a, "special", false, &special, &sub, err)) ||
            (rc = sy__json_bool(a, "lstrip", false, &tok->lstrip, &sub, err)) ||
            (rc = sy__json_bool(a, "rstrip", false, &tok->rstrip, &sub, err)) ||
            (rc = sy__json_bool(a, "single_word", false, &tok->single_word, &sub, err)) ||
            /* Hugging Face's default: normalized unless special. */
            (rc = sy__json_bool(a, "normalized", !special, &tok->normalized, &sub, err)))
            break;
        tok->special = special;
        any_single |= tok->single_word;
        const char *s = json_string_value(content);
        size_t len = json_string_length(content);
        int32_t dup;
        if (sy__arena_add(t, s, len, &tok->off) || sy__set_piece(t, tok->id, tok->off, (uint32_t)len) ||
            sy__smap_put(&t->added_map, tok->off, (uint32_t)len, tok->id, &dup))
            goto nomem;
        tok->len = (uint32_t)len;
        t->id_flags[tok->id] |= SY__ID_ADDED | (special ? SY__ID_SPECIAL : 0);
        tok->noff = tok->off;
        tok->nlen = tok->len;
        if (tok->normalized && t->norm) {
            /* Matched against normalized text, so match its normal form. */
            if ((rc = sy__norm_apply(t->norm, s, len, &norm, &ctx, err)))
                break;
            if (norm.len && sy__arena_add(t, norm.p, norm.len, &tok->noff))
                goto nomem;
            tok->nlen = (uint32_t)norm.len;
        }
        t->n_added++;
        continue;
    nomem:
        rc = sy_err_set(err, SY_ERR_NOMEM, "%s: out of memory reading added_tokens", w->file);
    }
    sy__buf_free(&norm);
    sy__ctx_free(&ctx);
    if (rc)
        return rc;
    for (size_t i = 0; i < t->n_added; i++) {
        const sy_tok_added *tok = &t->added[i];
        if (!tok->nlen)
            continue;
        if (sy__trie_add(tok->normalized ? &t->trie_norm : &t->trie_raw, t->arena.p + tok->noff, tok->nlen, (int32_t)i))
            return sy_err_set(err, SY_ERR_NOMEM, "out of memory");
    }
    if (any_single) {
        int ec;
        PCRE2_SIZE eoff;
        t->word_re = pcre2_compile((PCRE2_SPTR) "[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}]",
                                   PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP | PCRE2_ANCHORED, &ec, &eoff, NULL);
        if (!t->word_re)
            return sy_err_set(err, SY_ERR_INTERNAL, "tokenizer: cannot compile the word-character class");
    }
    return 0;
}

/* Is the character at s[0] (or, with before, ending at s[n]) a word
 * character (Rust regex \w)? */
static bool sy__is_word(const sy_tokenizer *t, const char *s, size_t n, bool before, pcre2_match_data *md)
{
    if (!n)
        return false;
    size_t start = 0;
    if (before) {
        start = n - 1;
        while (start > 0 && ((uint8_t)s[start] & 0xC0) == 0x80 && n - start < 4)
            start--;
    }
    return pcre2_match(t->word_re, (PCRE2_SPTR)s, n, start, 0, md, NULL) >= 0;
}

int sy__added_split(const sy_tokenizer *t, bool normalized, bool parse_special, const char *s, size_t n,
                    sy_tok_spans *out, sy_err *err)
{
    const sy_tok_trie *tr = normalized ? &t->trie_norm : &t->trie_raw;
    out->n = 0;
    size_t start_off = 0;
    pcre2_match_data *md = NULL;
    if (tr->nodes) {
        size_t i = 0;
        while (i < n) {
            if (!tr->first[(uint8_t)s[i]]) {
                i++;
                continue;
            }
            size_t mlen = 0;
            int32_t k = sy__trie_longest(tr, s + i, n - i, &mlen);
            if (k < 0) {
                i++;
                continue;
            }
            const sy_tok_added *tok = &t->added[k];
            size_t start = i, stop = i + mlen;
            /* A skipped match is not searched again inside (leftmost
             * non-overlapping iteration). */
            i = stop;
            if (tok->special && !parse_special)
                continue;
            if (tok->single_word) {
                if (!md && !(md = pcre2_match_data_create(1, NULL)))
                    return sy_err_set(err, SY_ERR_NOMEM, "out of memory");
                if ((start > 0 && sy__is_word(t, s, start, true, md)) ||
                    (stop < n && sy__is_word(t, s + stop, n - stop, false, md)))
                    continue;
            }
            if (tok->lstrip) {
                size_t b = start, adv;
                /* Back over white space, but not into the previous match. */
                while (b > start_off) {
                    size_t p = b - 1;
                    while (p > start_off && ((uint8_t)s[p] & 0xC0) == 0x80)
                        p--;
                    if (!sy__uni_is_white_space(sy__utf8_next(s + p, b - p, &adv)) || adv != b - p)
                        break;
                    b = p;
                }
                start = b;
            }
            if (tok->rstrip) {
                size_t adv;
                while (stop < n && sy__uni_is_white_space(sy__utf8_next(s + stop, n - stop, &adv)))
                    stop += adv;
                i = stop;
            }
            if (start_off < start && sy__spans_push(out, start_off, start - start_off, false))
                goto nomem;
            if (sy__spans_push(out, start, stop - start, true))
                goto nomem;
            out->v[out->n - 1].id = tok->id;
            start_off = stop;
        }
    }
    pcre2_match_data_free(md);
    if ((start_off < n || out->n == 0) && sy__spans_push(out, start_off, n - start_off, false))
        return sy_err_set(err, SY_ERR_NOMEM, "out of memory");
    return 0;
nomem:
    pcre2_match_data_free(md);
    return sy_err_set(err, SY_ERR_NOMEM, "out of memory");
}
