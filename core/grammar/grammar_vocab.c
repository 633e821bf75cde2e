/*
 * The vocabulary as the masks see it: each token's bytes, its kind
 * (ordinary, special, EOS, never allowed), and a byte trie of the
 * ordinary tokens laid out in preorder, so a walk is one loop that skips a
 * rejected node's subtree by jumping to its end.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_impl.h"

void sy_gvocab_free(sy_gvocab *v)
{
    if (!v)
        return;
    for (int32_t i = 0; v->bytes && i < v->n_vocab; i++)
        free(v->bytes[i]);
    free(v->bytes);
    free(v->lens);
    free(v->kind);
    free(v->special);
    free(v->eos);
    free(v->tr_byte);
    free(v->tr_depth);
    free(v->tr_end);
    free(v->tr_tok);
    free(v->tok_next);
    free(v);
}

int32_t sy_gvocab_size(const sy_gvocab *v)
{
    return v ? v->n_vocab : 0;
}

size_t sy_gmask_words(const sy_gvocab *v)
{
    return v ? ((size_t)v->n_vocab + 31) / 32 : 0;
}

static int cmp_tok(const sy_gvocab *v, int32_t a, int32_t b)
{
    size_t la = v->lens[a], lb = v->lens[b];
    int c = memcmp(v->bytes[a], v->bytes[b], la < lb ? la : lb);
    if (c)
        return c;
    return la < lb ? -1 : la > lb;
}

/* Merge sort of ids by bytes (qsort has no context argument in C11). */
static void sort_ids(const sy_gvocab *v, int32_t *ids, int32_t *tmp, size_t n)
{
    if (n < 2)
        return;
    size_t h = n / 2;
    sort_ids(v, ids, tmp, h);
    sort_ids(v, ids + h, tmp, n - h);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n)
        tmp[k++] = cmp_tok(v, ids[i], ids[j]) <= 0 ? ids[i++] : ids[j++];
    while (i < h)
        tmp[k++] = ids[i++];
    while (j < n)
        tmp[k++] = ids[j++];
    memcpy(ids, tmp, n * sizeof *ids);
}

static int build_trie(sy_gvocab *v, sy_err *err)
{
    size_t n = 0, total = 1;
    for (int32_t i = 0; i < v->n_vocab; i++)
        if (v->kind[i] == GV_PLAIN) {
            n++;
            total += v->lens[i];
        }
    int32_t *ids = malloc((n + 1) * sizeof *ids), *tmp = malloc((n + 1) * sizeof *tmp);
    int32_t *path = malloc((v->max_depth + 2) * sizeof *path);
    v->tr_byte = malloc(total);
    v->tr_depth = malloc(total * sizeof *v->tr_depth);
    v->tr_end = malloc(total * sizeof *v->tr_end);
    v->tr_tok = malloc(total * sizeof *v->tr_tok);
    if (!ids || !tmp || !path || !v->tr_byte || !v->tr_depth || !v->tr_end || !v->tr_tok) {
        free(ids);
        free(tmp);
        free(path);
        return sy_err_set(err, SY_ERR_NOMEM, "out of memory building the vocabulary trie");
    }
    n = 0;
    for (int32_t i = 0; i < v->n_vocab; i++)
        if (v->kind[i] == GV_PLAIN)
            ids[n++] = i;
    sort_ids(v, ids, tmp, n);
    size_t nn = 1, depth = 0; /* path[0..depth] are the open nodes */
    v->tr_byte[0] = 0;
    v->tr_depth[0] = 0;
    v->tr_tok[0] = -1;
    path[0] = 0;
    const char *prev = NULL;
    size_t prev_len = 0;
    for (size_t k = 0; k < n; k++) {
        int32_t id = ids[k];
        const char *s = v->bytes[id];
        size_t len = v->lens[id], l = 0;
        while (prev && l < len && l < prev_len && s[l] == prev[l])
            l++;
        while (depth > l) { /* close nodes past the common prefix */
            v->tr_end[path[depth]] = (int32_t)nn;
            depth--;
        }
        for (size_t d = l; d < len; d++) {
            v->tr_byte[nn] = (uint8_t)s[d];
            v->tr_depth[nn] = (uint16_t)(d + 1);
            v->tr_tok[nn] = -1;
            path[++depth] = (int32_t)nn++;
        }
        int32_t node = path[depth];
        if (v->tr_tok[node] < 0) {
            v->tr_tok[node] = id;
        } else { /* same bytes as an earlier token: chain it */
            int32_t t = v->tr_tok[node];
            while (v->tok_next[t] >= 0)
                t = v->tok_next[t];
            v->tok_next[t] = id;
        }
        prev = s;
        prev_len = len;
    }
    while (depth > 0) {
        v->tr_end[path[depth]] = (int32_t)nn;
        depth--;
    }
    v->tr_end[0] = (int32_t)nn;
    v->n_nodes = nn;
    free(ids);
    free(tmp);
    free(path);
    return SY_OK;
}

int sy_gvocab_new(int32_t n_vocab, const char *const *bytes, const size_t *lens, const bool *special,
                  const int32_t *eos, size_t n_eos, sy_gvocab **out, sy_err *err)
{
    if (!out || n_vocab <= 0 || !bytes || !lens)
        return sy_err_set(err, SY_ERR_INVALID, "sy_gvocab_new: expected a vocabulary of at least one token with "
                                               "bytes and lengths, got n_vocab %d%s",
                          (int)n_vocab, bytes && lens ? "" : " and NULL arrays");
    *out = NULL;
    for (size_t i = 0; i < n_eos; i++)
        if (eos[i] < 0 || eos[i] >= n_vocab)
            return sy_err_set(err, SY_ERR_INVALID, "sy_gvocab_new: EOS id %d is outside the vocabulary [0, %d)",
                              (int)eos[i], (int)n_vocab);
    sy_gvocab *v = calloc(1, sizeof *v);
    if (!v)
        return sy_err_set(err, SY_ERR_NOMEM, "out of memory creating the vocabulary");
    v->n_vocab = n_vocab;
    size_t nv = (size_t)n_vocab;
    v->bytes = calloc(nv, sizeof *v->bytes);
    v->lens = calloc(nv, sizeof *v->lens);
    v->kind = calloc(nv, 1);
    v->tok_next = malloc(nv * sizeof *v->tok_next);
    v->eos = malloc((n_eos + 1) * sizeof *v->eos);
    v->special = malloc(nv * sizeof *v->special);
    if (!v->bytes || !v->lens || !v->kind || !v->tok_next || !v->eos || !v->special)
        goto nomem;
    uint64_t fp = 1469598103934665603ull ^ (uint64_t)nv;
    for (size_t i = 0; i < nv; i++) {
        v->tok_next[i] = -1;
        size_t len = bytes[i] ? lens[i] : 0;
        if (len > 0xFFFF) /* no real token is this long; the trie depth is 16-bit */
            len = 0;
        if (len) {
            v->bytes[i] = malloc(len);
            if (!v->bytes[i])
                goto nomem;
            memcpy(v->bytes[i], bytes[i], len);
            v->lens[i] = len;
            v->kind[i] = special && special[i] ? GV_SPECIAL : GV_PLAIN;
            if (len > v->max_depth)
                v->max_depth = (uint16_t)len;
        }
    }
    for (size_t i = 0; i < n_eos; i++) {
        v->kind[eos[i]] = GV_EOS;
        v->eos[v->n_eos++] = eos[i];
    }
    for (size_t i = 0; i < nv; i++) {
        if (v->kind[i] == GV_SPECIAL)
            v->special[v->n_special++] = (int32_t)i;
        fp = (fp ^ v->kind[i]) * 1099511628211ull;
        fp = (fp ^ v->lens[i]) * 1099511628211ull;
        for (size_t k = 0; k < v->lens[i]; k++)
            fp = (fp ^ (uint8_t)v->bytes[i][k]) * 1099511628211ull;
    }
    v->fingerprint = fp;
    int rc = build_trie(v, err);
    if (rc) {
        sy_gvocab_free(v);
        return rc;
    }
    *out = v;
    return SY_OK;
nomem:
    sy_gvocab_free(v);
    return sy_err_set(err, SY_ERR_NOMEM, "out of memory creating the vocabulary (%d tokens)", (int)n_vocab);
}
