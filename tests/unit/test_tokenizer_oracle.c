/*
 * The tokenizer against independent oracles (shared/tokenizers): every
 * corpus string of gpt2, cl100k, o200k (byte-level BPE) and llama2-spm
 * (SentencePiece BPE) must encode to exactly the expected ids (plain text,
 * no BOS) and those ids must decode back to the string; the regex probes
 * must give the reference BPE's ids. Also prints load
 * and encode timings (information, never a pass/fail criterion).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_tokenizer_common.h"
#include "tokenizer/tokenizer.h"
#include "util/util.h"

static int sy__check_one(const char *shared, const char *name, bool dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizers/%s%s", shared, name, dir ? "" : "/tokenizer.json");
    sy_err err = {{0}};
    sy_tokenizer *t = NULL;
    double t0 = sy_now();
    int rc = dir ? sy_tokenizer_load_dir(path, &t, &err) : sy_tokenizer_load_file(path, &t, &err);
    double t_load = sy_now() - t0;
    if (rc) {
        fprintf(stderr, "FAIL %s: load: %s\n", name, err.msg);
        return 1;
    }
    snprintf(path, sizeof path, "%s/tokenizers/%s/expected.jsonl", shared, name);
    json_t *lines = sy_tt_read_jsonl(path);
    if (!lines) {
        sy_tokenizer_free(t);
        return 1;
    }
    size_t n = json_array_size(lines), enc_bad = 0, dec_bad = 0, n_ids = 0, n_bytes = 0;
    double t_enc = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *l = json_array_get(lines, i);
        const char *text = json_string_value(json_object_get(l, "text"));
        size_t tlen = json_string_length(json_object_get(l, "text"));
        size_t ne;
        int32_t *exp = sy_tt_ids(json_object_get(l, "ids"), &ne);
        if (!text || !exp) {
            fprintf(stderr, "FAIL %s: %s line %zu lacks text or ids\n", name, path, i + 1);
            enc_bad++;
            free(exp);
            continue;
        }
        int32_t *ids;
        size_t nid;
        double e0 = sy_now();
        rc = sy_tokenizer_encode(t, text, tlen, 0, &ids, &nid, &err);
        t_enc += sy_now() - e0;
        n_bytes += tlen;
        n_ids += ne;
        if (rc) {
            fprintf(stderr, "FAIL %s line %zu: encode: %s\n", name, i + 1, err.msg);
            enc_bad++;
        } else if (nid != ne || memcmp(ids, exp, ne * sizeof *exp)) {
            if (!enc_bad++) {
                fprintf(stderr, "FAIL %s: first encode mismatch, line %zu:\n", name, i + 1);
                sy_tt_print_escaped("  text:     ", text, tlen, 300);
                sy_tt_print_ids("  expected: ", exp, ne);
                sy_tt_print_ids("  got:      ", ids, nid);
            }
        }
        if (!rc)
            free(ids);
        char *dec;
        size_t dlen;
        if ((rc = sy_tokenizer_decode(t, exp, ne, false, &dec, &dlen, &err))) {
            fprintf(stderr, "FAIL %s line %zu: decode: %s\n", name, i + 1, err.msg);
            dec_bad++;
        } else {
            if (dlen != tlen || memcmp(dec, text, tlen)) {
                if (!dec_bad++) {
                    fprintf(stderr, "FAIL %s: first decode mismatch, line %zu:\n", name, i + 1);
                    sy_tt_print_escaped("  expected: ", text, tlen, 300);
                    sy_tt_print_escaped("  got:      ", dec, dlen, 300);
                }
            }
            free(dec);
        }
        free(exp);
    }
    printf("%-10s load %6.1f ms; encode %zu strings (%zu bytes, %zu ids) in %6.1f ms; "
           "encode mismatches %zu/%zu, decode mismatches %zu/%zu\n",
           name, t_load * 1e3, n, n_bytes, n_ids, t_enc * 1e3, enc_bad, n, dec_bad, n);
    json_decref(lines);
    sy_tokenizer_free(t);
    return enc_bad || dec_bad || n == 0;
}

/* probes.jsonl: strings where regex engines differ; the ids of the
 * reference BPE (bpe_ref) are also what Hugging Face's library gives. */
static int sy__check_probes(const char *shared, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizers/%s/tokenizer.json", shared, name);
    sy_err err = {{0}};
    sy_tokenizer *t;
    if (sy_tokenizer_load_file(path, &t, &err)) {
        fprintf(stderr, "FAIL %s: load: %s\n", name, err.msg);
        return 1;
    }
    snprintf(path, sizeof path, "%s/tokenizers/probes.jsonl", shared);
    json_t *lines = sy_tt_read_jsonl(path);
    size_t n = lines ? json_array_size(lines) : 0, bad = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *l = json_array_get(lines, i);
        const json_t *text = json_object_get(l, "text");
        size_t ne, nid;
        int32_t *exp = sy_tt_ids(json_object_get(json_object_get(l, name), "bpe_ref"), &ne), *ids;
        if (!json_is_string(text) || !exp ||
            sy_tokenizer_encode(t, json_string_value(text), json_string_length(text), 0, &ids, &nid, &err)) {
            bad++;
            free(exp);
            continue;
        }
        if (nid != ne || memcmp(ids, exp, ne * sizeof *ids)) {
            if (!bad++) {
                fprintf(stderr, "FAIL %s: probe %s differs from bpe_ref\n", name,
                        json_string_value(json_object_get(l, "id")));
                sy_tt_print_ids("  expected: ", exp, ne);
                sy_tt_print_ids("  got:      ", ids, nid);
            }
        }
        free(ids);
        free(exp);
    }
    printf("%-10s probes: %zu/%zu differ from bpe_ref\n", name, bad, n);
    json_decref(lines);
    sy_tokenizer_free(t);
    return bad || n == 0;
}

int main(void)
{
    const char *shared = sy_tt_shared_dir();
    if (!shared)
        return 1;
    int bad = 0;
    bad += sy__check_one(shared, "gpt2", false);
    bad += sy__check_one(shared, "cl100k", false);
    bad += sy__check_one(shared, "o200k", false);
    /* The directory: tokenizer_config.json says add_bos_token, and the
     * expected ids have no BOS, so encoding without ADD_SPECIAL must not
     * add one. */
    bad += sy__check_one(shared, "llama2-spm", true);
    bad += sy__check_probes(shared, "gpt2");
    bad += sy__check_probes(shared, "cl100k");
    bad += sy__check_probes(shared, "o200k");
    printf("test_tokenizer_oracle: %d of 7 checks failed\n", bad);
    return bad ? 1 : 0;
}
