/*
 * The tokenizers of the test models (shared/models) against the reference
 * greedy runs in expected_greedy.json: the prompt encodes (with BOS/EOS as
 * the model's tokenizer_config asks) to prompt_ids, and streaming the
 * generated ids after the prompt yields exactly "text", which is
 * decode(prompt + generated) minus decode(prompt), special tokens skipped.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_tokenizer_common.h"
#include "tokenizer/tokenizer.h"

static int sy__bad;

static void sy__fail_text(const char *what, const char *model, size_t k, const char *exp, size_t elen, const char *got,
                          size_t glen)
{
    sy__bad++;
    fprintf(stderr, "FAIL %s prompt %zu: %s\n", model, k, what);
    sy_tt_print_escaped("  expected: ", exp, elen, 400);
    sy_tt_print_escaped("  got:      ", got, glen, 400);
}

/* Streams ids through a detokenizer, checking every piece is whole UTF-8. */
static int sy__stream(sy_detok *d, const int32_t *ids, size_t n, char **out, size_t *olen, const char *model)
{
    size_t cap = 256, len = 0;
    char *buf = malloc(cap);
    sy_err err = {{0}};
    for (size_t i = 0; i <= n; i++) {
        const char *p;
        size_t pl;
        int rc = i < n ? sy_detok_push(d, ids[i], &p, &pl, &err) : sy_detok_finish(d, &p, &pl, &err);
        if (rc != SY_OK) {
            fprintf(stderr, "FAIL %s: detok: %s\n", model, err.msg);
            free(buf);
            return -1;
        }
        /* No piece may end inside a UTF-8 character. */
        if (pl) {
            size_t k = pl;
            size_t cont = 0;
            while (k > 0 && ((unsigned char)p[k - 1] & 0xC0) == 0x80 && cont < 4) {
                k--;
                cont++;
            }
            unsigned char lead = k > 0 ? (unsigned char)p[k - 1] : 0;
            size_t need = lead >= 0xF0 ? 3 : lead >= 0xE0 ? 2 : lead >= 0xC0 ? 1 : 0;
            if (k > 0 && lead >= 0xC0 && need != cont) {
                fprintf(stderr, "FAIL %s: piece %zu ends inside a UTF-8 character\n", model, i);
                sy__bad++;
            }
        }
        while (len + pl + 1 > cap)
            buf = realloc(buf, cap *= 2);
        memcpy(buf + len, p, pl);
        len += pl;
    }
    buf[len] = 0;
    *out = buf;
    *olen = len;
    return 0;
}

static void sy__check_model(const char *shared, const char *model, const json_t *runs)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/models/%s", shared, model);
    sy_tokenizer *t;
    sy_err err = {{0}};
    if (sy_tokenizer_load_dir(dir, &t, &err)) {
        fprintf(stderr, "FAIL %s: load: %s\n", model, err.msg);
        sy__bad++;
        return;
    }
    for (size_t k = 0; k < json_array_size(runs); k++) {
        const json_t *r = json_array_get(runs, k);
        const char *prompt = json_string_value(json_object_get(r, "prompt"));
        const char *text = json_string_value(json_object_get(r, "text"));
        size_t tlen = json_string_length(json_object_get(r, "text"));
        size_t np, ng;
        int32_t *pids = sy_tt_ids(json_object_get(r, "prompt_ids"), &np);
        int32_t *gids = sy_tt_ids(json_object_get(r, "greedy_ids"), &ng);
        if (!prompt || !text || !pids || !gids) {
            fprintf(stderr, "FAIL %s prompt %zu: malformed expected_greedy.json entry\n", model, k);
            sy__bad++;
            free(pids);
            free(gids);
            continue;
        }
        int32_t *ids;
        size_t n;
        if (sy_tokenizer_encode(t, prompt, strlen(prompt), SY_TOK_ADD_SPECIAL, &ids, &n, &err)) {
            fprintf(stderr, "FAIL %s prompt %zu: encode: %s\n", model, k, err.msg);
            sy__bad++;
        } else {
            if (n != np || memcmp(ids, pids, n * sizeof *ids)) {
                sy__bad++;
                fprintf(stderr, "FAIL %s prompt %zu: prompt ids differ\n", model, k);
                sy_tt_print_ids("  expected: ", pids, np);
                sy_tt_print_ids("  got:      ", ids, n);
            }
            free(ids);
        }
        /* The streaming API, started after the prompt. */
        sy_detok *d;
        char *got;
        size_t glen;
        if (!(d = sy_detok_new_after(t, pids, np, true))) {
            fprintf(stderr, "FAIL %s: detok_new_after: out of memory\n", model);
            sy__bad++;
        } else {
            if (sy__stream(d, gids, ng, &got, &glen, model) == 0) {
                if (glen != tlen || memcmp(got, text, tlen))
                    sy__fail_text("streamed text after the prompt differs", model, k, text, tlen, got, glen);
                free(got);
            } else {
                sy__bad++;
            }
            sy_detok_free(d);
        }
        /* The definition: decode(prompt + generated) minus decode(prompt). */
        int32_t *all = malloc((np + ng) * sizeof *all);
        memcpy(all, pids, np * sizeof *all);
        memcpy(all + np, gids, ng * sizeof *all);
        char *full, *pre;
        size_t flen, plen;
        if (sy_tokenizer_decode(t, all, np + ng, true, &full, &flen, &err) ||
            sy_tokenizer_decode(t, pids, np, true, &pre, &plen, &err)) {
            fprintf(stderr, "FAIL %s: decode: %s\n", model, err.msg);
            sy__bad++;
        } else {
            if (flen < plen || memcmp(full, pre, plen) || flen - plen != tlen || memcmp(full + plen, text, tlen))
                sy__fail_text("decode(prompt+gen) minus decode(prompt) differs", model, k, text, tlen,
                              flen >= plen ? full + plen : full, flen >= plen ? flen - plen : flen);
            /* Streaming the whole sequence from the start equals decode. */
            d = sy_detok_new(t, true);
            if (d && sy__stream(d, all, np + ng, &got, &glen, model) == 0) {
                if (glen != flen || memcmp(got, full, flen))
                    sy__fail_text("streaming everything differs from decode", model, k, full, flen, got, glen);
                free(got);
            } else {
                sy__bad++;
            }
            sy_detok_free(d);
            free(full);
            free(pre);
        }
        free(all);
        free(pids);
        free(gids);
    }
    sy_tokenizer_free(t);
}

int main(void)
{
    const char *shared = sy_tt_shared_dir();
    if (!shared)
        return 1;
    char path[4096];
    snprintf(path, sizeof path, "%s/models/expected_greedy.json", shared);
    json_t *root = sy_tt_read_json(path);
    if (!root)
        return 1;
    const json_t *models = json_object_get(root, "models");
    const char *name;
    const json_t *runs;
    size_t n_models = 0, n_runs = 0;
    json_object_foreach((json_t *)models, name, runs)
    {
        sy__check_model(shared, name, runs);
        n_models++;
        n_runs += json_array_size(runs);
    }
    json_decref(root);
    if (n_models == 0) {
        fprintf(stderr, "FAIL: no models in %s\n", path);
        sy__bad++;
    }
    printf("test_tokenizer_models: %zu models, %zu prompts, %d failures\n", n_models, n_runs, sy__bad);
    return sy__bad ? 1 : 0;
}
