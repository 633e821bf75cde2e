/*
 * The BPE model: vocabulary, merge ranks, and the merge loop of Hugging
 * Face's models/bpe/word.rs (a min-heap of (rank, position); stale entries
 * are skipped when popped), with byte_fallback, unk/fuse_unk,
 * ignore_merges, continuing_subword_prefix and end_of_word_suffix.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "util/log.h"

struct sy_tok_sym {
    int32_t id;
    int32_t prev, next;
    uint32_t len; /* bytes of text covered; 0 once merged into the left */
};

struct sy_tok_merge {
    int32_t rank;
    uint32_t pos;
    int32_t new_id;
};

void sy__bpe_free(sy_tokenizer *t)
{
    sy__pmap_free(&t->merges);
    free(t->cont_prefix);
    free(t->eow_suffix);
    t->cont_prefix = t->eow_suffix = NULL;
}

static int sy__opt_str(const json_t *model, const char *key, char **out, size_t *len, const sy_tok_where *w,
                       sy_err *err)
{
    const char *s;
    int rc = sy__json_str(model, key, &s, len, w, err);
    if (rc || !s)
        return rc;
    *out = malloc(*len + 1);
    if (!*out)
        return sy_err_set(err, SY_ERR_NOMEM, "out of memory");
    memcpy(*out, s, *len + 1);
    return 0;
}

static int sy__parse_vocab(sy_tokenizer *t, const json_t *vocab, const sy_tok_where *w, sy_err *err)
{
    if (!json_is_object(vocab))
        return sy__json_err(err, w, ".vocab", "an object mapping token strings to ids", vocab);
    size_t n = json_object_size(vocab);
    if (sy__smap_init(&t->vocab, &t->arena, n) || sy__buf_reserve(&t->arena, n * 8))
        return sy_err_set(err, SY_ERR_NOMEM, "%s: out of memory for %zu vocabulary entries", w->file, n);
    for (void *it = json_object_iter((json_t *)vocab); it; it = json_object_iter_next((json_t *)vocab, it)) {
        const char *key = json_object_iter_key(it);
        size_t klen = json_object_iter_key_len(it);
        const json_t *v = json_object_iter_value(it);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX - 1) {
            char sub[160];
            snprintf(sub, sizeof sub, ".vocab[\"%.*s\"]", (int)(klen > 60 ? 60 : klen), key);
            return sy__json_err(err, w, sub, "a non-negative integer id", v);
        }
        int32_t id = (int32_t)json_integer_value(v), dup;
        uint32_t off;
        if (sy__arena_add(t, key, klen, &off) || sy__smap_put(&t->vocab, off, (uint32_t)klen, id, &dup) ||
            sy__set_piece(t, id, off, (uint32_t)klen))
            return sy_err_set(err, SY_ERR_NOMEM, "%s: out of memory reading model.vocab", w->file);
    }
    return 0;
}

/* One merge, either "a b" or ["a", "b"], into the two strings. */
static int sy__merge_parts(const json_t *m, const char **a, size_t *al, const char **b, size_t *bl)
{
    if (json_is_string(m)) {
        const char *s = json_string_value(m);
        size_t n = json_string_length(m);
        const char *sp = memchr(s, ' ', n);
        /* Exactly one space, as the legacy format requires. */
        if (!sp || memchr(sp + 1, ' ', n - (size_t)(sp - s) - 1))
            return -1;
        *a = s;
        *al = (size_t)(sp - s);
        *b = sp + 1;
        *bl = n - *al - 1;
        return 0;
    }
    if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
        json_is_string(json_array_get(m, 1))) {
        *a = json_string_value(json_array_get(m, 0));
        *al = json_string_length(json_array_get(m, 0));
        *b = json_string_value(json_array_get(m, 1));
        *bl = json_string_length(json_array_get(m, 1));
        return 0;
    }
    return -1;
}

static int sy__parse_merges(sy_tokenizer *t, const json_t *merges, const sy_tok_where *w, sy_err *err)
{
    if (!merges || json_is_null(merges))
        merges = NULL;
    else if (!json_is_array(merges))
        return sy__json_err(err, w, ".merges", "an array of merges", merges);
    size_t n = merges ? json_array_size(merges) : 0;
    if (sy__pmap_init(&t->merges, n))
        return sy_err_set(err, SY_ERR_NOMEM, "%s: out of memory for %zu merges", w->file, n);
    sy_tok_buf cat = {0};
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        const json_t *m = json_array_get(merges, i);
        const char *a, *b;
        size_t al, bl;
        char sub[64];
        snprintf(sub, sizeof sub, ".merges[%zu]", i);
        if (sy__merge_parts(m, &a, &al, &b, &bl)) {
            rc = sy__json_err(err, w, sub, "a merge \"left right\" (one space) or [\"left\", \"right\"]", m);
            break;
        }
        int32_t ia = sy__smap_get(&t->vocab, a, al), ib = sy__smap_get(&t->vocab, b, bl);
        /* The merged token is a + b without b's continuing-subword prefix. */
        size_t skip = t->cont_prefix && bl >= t->cont_prefix_len && !memcmp(b, t->cont_prefix, t->cont_prefix_len)
                          ? t->cont_prefix_len
                          : 0;
        cat.len = 0;
        if (sy__buf_put(&cat, a, al) || sy__buf_put(&cat, b + skip, bl - skip)) {
            rc = sy_err_set(err, SY_ERR_NOMEM, "out of memory");
            break;
        }
        int32_t im = sy__smap_get(&t->vocab, cat.p, cat.len);
        if (ia < 0 || ib < 0 || im < 0) {
            const char *miss = ia < 0 ? a : ib < 0 ? b : cat.p;
            size_t ml = ia < 0 ? al : ib < 0 ? bl : cat.len;
            char what[128];
            sy__json_describe(m, what, sizeof what);
            rc = sy_err_set(err, SY_ERR_INVALID,
                            "%s: %s%s: expected a merge of two tokens of model.vocab whose concatenation is also "
                            "in model.vocab, found %s (\"%.*s\" is not in model.vocab)",
                            w->file, w->path, sub, what, (int)(ml > 60 ? 60 : ml), miss);
            break;
        }
        if (sy__pmap_put(&t->merges, ia, ib, (int32_t)i, im) < 0)
            rc = sy_err_set(err, SY_ERR_NOMEM, "out of memory");
    }
    sy__buf_free(&cat);
    return rc;
}

int sy__bpe_parse(sy_tokenizer *t, const json_t *model, const sy_tok_where *w, sy_err *err)
{
    if (!json_is_object(model))
        return sy__json_err(err, w, "", "a model object", model);
    const json_t *type = json_object_get(model, "type");
    if (type && !json_is_null(type) && !(json_is_string(type) && !strcmp(json_string_value(type), "BPE"))) {
        char what[128];
        sy__json_describe(type, what, sizeof what);
        return sy_err_set(err, json_is_string(type) ? SY_ERR_UNSUPPORTED : SY_ERR_INVALID,
                          "%s: %s.type: expected \"BPE\" (the only model supported), found %s", w->file, w->path, what);
    }
    int rc;
    const json_t *dropout = json_object_get(model, "dropout");
    if (dropout && !json_is_null(dropout))
        sy_warn("%s: %s.dropout is set; BPE dropout is a training aid and is not applied", w->file, w->path);
    if ((rc = sy__json_bool(model, "byte_fallback", false, &t->byte_fallback, w, err)) ||
        (rc = sy__json_bool(model, "fuse_unk", false, &t->fuse_unk, w, err)) ||
        (rc = sy__json_bool(model, "ignore_merges", false, &t->ignore_merges, w, err)) ||
        (rc = sy__opt_str(model, "continuing_subword_prefix", &t->cont_prefix, &t->cont_prefix_len, w, err)) ||
        (rc = sy__opt_str(model, "end_of_word_suffix", &t->eow_suffix, &t->eow_suffix_len, w, err)))
        return rc;
    if ((rc = sy__parse_vocab(t, json_object_get(model, "vocab"), w, err)))
        return rc;
    if ((rc = sy__parse_merges(t, json_object_get(model, "merges"), w, err)))
        return rc;
    const char *unk;
    size_t unk_len;
    if ((rc = sy__json_str(model, "unk_token", &unk, &unk_len, w, err)))
        return rc;
    t->unk_id = -1;
    if (unk) {
        t->unk_id = sy__smap_get(&t->vocab, unk, unk_len);
        if (t->unk_id < 0)
            return sy__json_err(err, w, ".unk_token", "a token of model.vocab", json_object_get(model, "unk_token"));
    }
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        t->byte_ids[b] = sy__smap_get(&t->vocab, name, 6);
        if (t->byte_ids[b] >= 0)
            t->id_flags[t->byte_ids[b]] |= SY__ID_BYTE;
    }
    return 0;
}

/* ------------------------------------------------------------ encoding */

static int sy__sym_push(sy_tok_ctx *c, size_t *n, int32_t id, uint32_t len)
{
    if (*n == c->syms_cap) {
        struct sy_tok_sym *p = sy__grow(c->syms, &c->syms_cap, sizeof *p, 64);
        if (!p)
            return SY_ERR_NOMEM;
        c->syms = p;
    }
    c->syms[*n] = (struct sy_tok_sym){id, (int32_t)*n - 1, (int32_t)*n + 1, len};
    (*n)++;
    return 0;
}

static bool sy__merge_less(const struct sy_tok_merge *a, const struct sy_tok_merge *b)
{
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static int sy__heap_push(sy_tok_ctx *c, size_t *n, struct sy_tok_merge m)
{
    if (*n == c->heap_cap) {
        struct sy_tok_merge *p = sy__grow(c->heap, &c->heap_cap, sizeof *p, 64);
        if (!p)
            return SY_ERR_NOMEM;
        c->heap = p;
    }
    size_t i = (*n)++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!sy__merge_less(&m, &c->heap[parent]))
            break;
        c->heap[i] = c->heap[parent];
        i = parent;
    }
    c->heap[i] = m;
    return 0;
}

static struct sy_tok_merge sy__heap_pop(sy_tok_ctx *c, size_t *n)
{
    struct sy_tok_merge top = c->heap[0], last = c->heap[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const struct sy_tok_merge *best = &last;
        if (l < *n && sy__merge_less(&c->heap[l], best)) {
            m = l;
            best = &c->heap[l];
        }
        if (r < *n && sy__merge_less(&c->heap[r], best))
            m = r;
        if (m == i)
            break;
        c->heap[i] = c->heap[m];
        i = m;
    }
    if (*n)
        c->heap[i] = last;
    return top;
}

/* The initial symbols: one per character, as bytes or unk when the
 * character is not in the vocabulary. */
static int sy__bpe_symbols(const sy_tokenizer *t, const char *s, size_t n, sy_tok_ctx *c, size_t *ns)
{
    int32_t unk = -1;
    uint32_t unk_len = 0;
    *ns = 0;
    for (size_t i = 0, adv; i < n; i += adv) {
        sy__utf8_next(s + i, n - i, &adv);
        const char *piece = s + i;
        size_t plen = adv;
        if ((t->cont_prefix && i > 0) || (t->eow_suffix && i + adv == n)) {
            sy_tok_buf *wb = &c->word;
            wb->len = 0;
            if ((i > 0 && t->cont_prefix && sy__buf_put(wb, t->cont_prefix, t->cont_prefix_len)) ||
                sy__buf_put(wb, s + i, adv) ||
                (i + adv == n && t->eow_suffix && sy__buf_put(wb, t->eow_suffix, t->eow_suffix_len)))
                return SY_ERR_NOMEM;
            piece = wb->p;
            plen = wb->len;
        }
        int32_t id = sy__smap_get(&t->vocab, piece, plen);
        if (id >= 0) {
            if (unk >= 0 && sy__sym_push(c, ns, unk, unk_len))
                return SY_ERR_NOMEM;
            unk = -1;
            if (sy__sym_push(c, ns, id, (uint32_t)adv))
                return SY_ERR_NOMEM;
            continue;
        }
        if (t->byte_fallback) {
            bool all = true;
            for (size_t k = 0; k < plen && all; k++)
                all = t->byte_ids[(uint8_t)piece[k]] >= 0;
            if (all) {
                /* Hugging Face leaves a pending unk in place here. */
                for (size_t k = 0; k < plen; k++)
                    if (sy__sym_push(c, ns, t->byte_ids[(uint8_t)piece[k]], 1))
                        return SY_ERR_NOMEM;
                continue;
            }
        }
        if (t->unk_id < 0)
            continue; /* no unk token: the character is dropped, as in Hugging Face */
        if (unk >= 0 && t->fuse_unk) {
            unk_len += (uint32_t)adv;
        } else {
            if (unk >= 0 && sy__sym_push(c, ns, unk, unk_len))
                return SY_ERR_NOMEM;
            unk = t->unk_id;
            unk_len = (uint32_t)adv;
        }
    }
    if (unk >= 0 && sy__sym_push(c, ns, unk, unk_len))
        return SY_ERR_NOMEM;
    if (*ns)
        c->syms[*ns - 1].next = -1;
    return 0;
}

int sy__bpe_encode(const sy_tokenizer *t, const char *s, size_t n, sy_tok_ctx *c, sy_tok_ivec *out, sy_err *err)
{
    if (!n)
        return 0;
    if (t->ignore_merges) {
        int32_t id = sy__smap_get(&t->vocab, s, n);
        if (id >= 0)
            return sy__ivec_push(out, id) ? sy_err_set(err, SY_ERR_NOMEM, "out of memory") : 0;
    }
    size_t ns, nh = 0;
    if (sy__bpe_symbols(t, s, n, c, &ns))
        goto nomem;
    struct sy_tok_sym *sy = c->syms;
    for (size_t i = 0; i + 1 < ns; i++) {
        int32_t rank, id;
        if (sy__pmap_get(&t->merges, sy[i].id, sy[i + 1].id, &rank, &id) &&
            sy__heap_push(c, &nh, (struct sy_tok_merge){rank, (uint32_t)i, id}))
            goto nomem;
    }
    while (nh) {
        struct sy_tok_merge top = sy__heap_pop(c, &nh);
        sy = c->syms; /* heap pushes never move syms, but keep it obvious */
        struct sy_tok_sym *cur = &sy[top.pos];
        if (cur->len == 0 || cur->next < 0)
            continue;
        struct sy_tok_sym *right = &sy[cur->next];
        int32_t rank, id;
        /* Skip a stale entry: the pair at pos no longer makes this token. */
        if (!sy__pmap_get(&t->merges, cur->id, right->id, &rank, &id) || id != top.new_id)
            continue;
        cur->id = top.new_id;
        cur->len += right->len;
        right->len = 0;
        cur->next = right->next;
        if (cur->next >= 0)
            sy[cur->next].prev = (int32_t)top.pos;
        if (cur->prev >= 0 && sy__pmap_get(&t->merges, sy[cur->prev].id, cur->id, &rank, &id) &&
            sy__heap_push(c, &nh, (struct sy_tok_merge){rank, (uint32_t)cur->prev, id}))
            goto nomem;
        cur = &c->syms[top.pos];
        if (cur->next >= 0 && sy__pmap_get(&t->merges, cur->id, sy[cur->next].id, &rank, &id) &&
            sy__heap_push(c, &nh, (struct sy_tok_merge){rank, top.pos, id}))
            goto nomem;
    }
    for (size_t i = 0; i < ns; i++)
        if (c->syms[i].len && sy__ivec_push(out, c->syms[i].id))
            goto nomem;
    return 0;
nomem:
    return sy_err_set(err, SY_ERR_NOMEM, "tokenizer: out of memory in BPE over %zu bytes", n);
}
