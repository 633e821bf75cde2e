/*
 * Fuzz target: tokenizer.json loading and encoding (core/tokenizer).
 *
 * An input starting with '{' is a tokenizer.json, optionally followed by a
 * NUL byte and a text; a tokenizer that loads encodes the text (or a fixed
 * one). Any other input is a text, encoded by two fixed tokenizers (the
 * trimmed gpt2 and llama2-spm seeds: byte-level BPE with a regex
 * pre-tokenizer, and SentencePiece-style BPE with byte fallback), which
 * fuzzes the encoder at full speed. Each encoding runs with and without
 * special-token handling; the ids are decoded back and streamed through the
 * incremental detokeniser, whose pieces must join up to the whole decode
 * (the documented contract).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "tokenizer/tokenizer.h"

static const char default_text[] = "Hello world! It's 2025, caf\xc3\xa9 \xe4\xb8\x96 <s> \xff\xfe\n\t end";

static void fail(const char *what, size_t n_ids, int skip)
{
    fprintf(stderr, "fuzz_tokenizer: %s (%zu ids, skip_special %d)\n", what, n_ids, skip);
    abort();
}

static void check_roundtrip(const sy_tokenizer *t, const int32_t *ids, size_t n, int skip)
{
    char *whole = NULL;
    size_t whole_len = 0;
    sy_err err = {{0}};
    if (sy_tokenizer_decode(t, ids, n, skip, &whole, &whole_len, &err) != SY_OK)
        fail("decode refused ids that encode produced", n, skip);
    sy_detok *d = sy_detok_new(t, skip);
    if (!d)
        fail("sy_detok_new failed", n, skip);
    size_t pos = 0;
    for (size_t i = 0; i <= n; i++) {
        const char *piece = NULL;
        size_t len = 0;
        int rc = i < n ? sy_detok_push(d, ids[i], &piece, &len, &err) : sy_detok_finish(d, &piece, &len, &err);
        if (rc != SY_OK)
            fail("the detokeniser refused an id that encode produced", n, skip);
        if (pos + len > whole_len || (len && memcmp(whole + pos, piece, len) != 0))
            fail("the streamed pieces differ from decode()", n, skip);
        pos += len;
    }
    if (pos != whole_len)
        fail("the streamed pieces are shorter than decode()", n, skip);
    sy_detok_free(d);
    free(whole);
}

static void encode_all(const sy_tokenizer *t, const char *text, size_t text_len)
{
    static const int flag_sets[] = {0, SY_TOK_ADD_SPECIAL | SY_TOK_PARSE_SPECIAL};
    for (size_t f = 0; f < sizeof flag_sets / sizeof flag_sets[0]; f++) {
        int32_t *ids = NULL;
        size_t n = 0;
        sy_err err = {{0}};
        if (sy_tokenizer_encode(t, text, text_len, flag_sets[f], &ids, &n, &err) != SY_OK) {
            fuzz_note("tokenizer: encode: %s", err.msg);
            continue;
        }
        fuzz_note("tokenizer: %zu bytes -> %zu ids (flags %d)", text_len, n, flag_sets[f]);
        int32_t vocab = sy_tokenizer_vocab_size(t);
        for (size_t i = 0; i < n; i++) {
            if (ids[i] < 0 || ids[i] >= vocab)
                fail("encode produced an id outside the vocabulary", n, 0);
            const char *piece = sy_tokenizer_piece(t, ids[i]);
            if (piece)
                (void)sy_tokenizer_token_id(t, piece);
            (void)sy_tokenizer_is_special(t, ids[i]);
        }
        check_roundtrip(t, ids, n, 0);
        check_roundtrip(t, ids, n, 1);
        free(ids);
    }
}

/* The fixed tokenizers of the text mode, loaded once from the seed corpus
 * (the JSON before the seed's NUL byte); libFuzzer gives no context. */
static struct {
    sy_tokenizer *tok[2];
} fixed;

static void free_fixed(void)
{
    for (size_t i = 0; i < 2; i++)
        sy_tokenizer_free(fixed.tok[i]);
}

static void load_fixed(void)
{
    static const char *const names[2] = {"gpt2", "llama2-spm"};
    for (size_t i = 0; i < 2; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/tests/fuzz/corpus/tokenizer/%s.seed", SY_FUZZ_SRCDIR, names[i]);
        FILE *f = fopen(path, "rb");
        static char buf[1 << 20];
        size_t len = f ? fread(buf, 1, sizeof buf, f) : 0;
        if (f)
            fclose(f);
        char *nul = memchr(buf, '\0', len);
        sy_err err = {{0}};
        if (!len || !nul ||
            sy_tokenizer_load_file(fuzz_write("fixed.json", buf, (size_t)(nul - buf)), &fixed.tok[i], &err) != SY_OK) {
            fprintf(stderr, "fuzz_tokenizer: cannot load the fixed tokenizer %s: %s\n", path,
                    len ? err.msg : "missing or empty");
            abort();
        }
    }
    atexit(free_fixed);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!size || data[0] != '{') {
        if (!fixed.tok[0])
            load_fixed();
        for (size_t i = 0; i < 2; i++)
            encode_all(fixed.tok[i], (const char *)data, size);
        return 0;
    }
    const uint8_t *nul = memchr(data, '\0', size);
    size_t json_len = nul ? (size_t)(nul - data) : size;
    const char *text = nul ? (const char *)nul + 1 : default_text;
    size_t text_len = nul ? size - json_len - 1 : sizeof default_text - 1;
    const char *path = fuzz_write("tokenizer.json", data, json_len);
    sy_tokenizer *t = NULL;
    sy_err err = {{0}};
    if (sy_tokenizer_load_file(path, &t, &err) != SY_OK) {
        fuzz_note("tokenizer: load: %s", err.msg);
        return 0;
    }
    encode_all(t, text, text_len);
    sy_tokenizer_free(t);
    return 0;
}
