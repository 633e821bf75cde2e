/*
 * Unit tests of the tokenizer: error messages for malformed tokenizer.json,
 * added-token splitting and special-token handling, streaming that never
 * splits a UTF-8 character, the pre-tokenizer split behaviors, decoders,
 * Unicode normalization, and robustness on odd input. Small tokenizers are
 * written to a temporary directory; the byte-level cases use the shared
 * gpt2 / o200k tokenizers (SY_SHARED_DIR).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_check.h"
#include "test_tokenizer_common.h"
#include "tokenizer/tok_internal.h"
#include "tokenizer/tokenizer.h"

static char sy__tmp[256];

static void sy__puts(sy_tok_buf *b, const char *s) { sy__buf_put(b, s, strlen(s)); }

static void sy__write(const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", sy__tmp, name);
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
    fputs(text, f);
    fclose(f);
}

static void sy__remove(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", sy__tmp, name);
    unlink(path);
}

/* Loads a tokenizer.json text; returns the status, message in err. */
static int sy__load_text(const char *json, sy_tokenizer **t, sy_err *err)
{
    sy__write("tokenizer.json", json);
    return sy_tokenizer_load_dir(sy__tmp, t, err);
}

static bool sy__ids_eq(const int32_t *a, size_t na, const int32_t *b, size_t nb)
{
    return na == nb && !memcmp(a, b, na * sizeof *a);
}

#define CHECK_IDS(t, text, flags, ...)                                                                                 \
    do {                                                                                                               \
        static const int32_t exp_[] = {__VA_ARGS__};                                                                   \
        int32_t *ids_;                                                                                                 \
        size_t n_;                                                                                                     \
        sy_err e_ = {{0}};                                                                                             \
        int rc_ = sy_tokenizer_encode((t), (text), strlen(text), (flags), &ids_, &n_, &e_);                            \
        CHECK(rc_ == 0);                                                                                               \
        if (rc_ == 0) {                                                                                                \
            bool ok_ = sy__ids_eq(ids_, n_, exp_, sizeof exp_ / sizeof *exp_);                                         \
            CHECK(ok_);                                                                                                \
            if (!ok_) {                                                                                                \
                sy_tt_print_escaped("  text: ", (text), strlen(text), 200);                                            \
                sy_tt_print_ids("  expected: ", exp_, sizeof exp_ / sizeof *exp_);                                     \
                sy_tt_print_ids("  got:      ", ids_, n_);                                                             \
            }                                                                                                          \
            free(ids_);                                                                                                \
        } else {                                                                                                       \
            fprintf(stderr, "  encode failed: %s\n", e_.msg);                                                          \
        }                                                                                                              \
    } while (0)

static void sy__check_decode(const sy_tokenizer *t, const int32_t *ids, size_t n, bool skip, const char *exp)
{
    char *s;
    size_t len;
    sy_err e = {{0}};
    int rc = sy_tokenizer_decode(t, ids, n, skip, &s, &len, &e);
    CHECK(rc == 0);
    if (rc)
        return;
    bool ok = len == strlen(exp) && !memcmp(s, exp, len);
    CHECK(ok);
    if (!ok) {
        sy_tt_print_escaped("  expected: ", exp, strlen(exp), 200);
        sy_tt_print_escaped("  got:      ", s, len, 200);
    }
    free(s);
}

/* Is every piece whole UTF-8 (valid, not cut inside a character)? */
static bool sy__whole_utf8(const char *p, size_t n) { return sy__utf8_valid(p, n); }

/* Streams ids; checks each piece is whole UTF-8 and returns the text. */
static char *sy__stream(const sy_tokenizer *t, const int32_t *ids, size_t n, bool skip, size_t *empty_pushes)
{
    sy_detok *d = sy_detok_new(t, skip);
    CHECK(d != NULL);
    if (!d)
        return NULL;
    sy_tok_buf all = {0};
    sy_err e = {{0}};
    *empty_pushes = 0;
    for (size_t i = 0; i <= n; i++) {
        const char *p;
        size_t len;
        int rc = i < n ? sy_detok_push(d, ids[i], &p, &len, &e) : sy_detok_finish(d, &p, &len, &e);
        CHECK(rc == SY_OK);
        CHECK(sy__whole_utf8(p, len));
        if (i < n && !len)
            (*empty_pushes)++;
        sy__buf_put(&all, p, len);
    }
    sy_detok_free(d);
    sy__buf_putc(&all, 0);
    return all.p;
}

/* ---------------------------------------------------------------- errors */

static void sy__expect_error(const char *json, int code, const char *needle1, const char *needle2)
{
    sy_tokenizer *t = NULL;
    sy_err e = {{0}};
    int rc = sy__load_text(json, &t, &e);
    CHECK(rc == code);
    CHECK(t == NULL);
    CHECK_CONTAINS(e.msg, needle1);
    if (needle2)
        CHECK_CONTAINS(e.msg, needle2);
    /* The file is named in every message. */
    CHECK_CONTAINS(e.msg, "tokenizer.json");
    sy_tokenizer_free(t);
}

static void test_errors(void)
{
    sy__expect_error("{\"added_tokens\": []}", SY_ERR_INVALID, "model: expected a model object", "missing");
    sy__expect_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2},"
                     " \"merges\": [\"a b\", \"a c\"]}}",
                     SY_ERR_INVALID, "model.merges[1]", "\"c\" is not in model.vocab");
    sy__expect_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2},"
                     " \"merges\": [\"a b\", \"ab\"]}}",
                     SY_ERR_INVALID, "model.merges[1]", "expected a merge");
    sy__expect_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1},"
                     " \"merges\": [[\"a\", \"b\"]]}}",
                     SY_ERR_INVALID, "model.merges[0]", "\"ab\" is not in model.vocab");
    sy__expect_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": \"zero\"}, \"merges\": []}}", SY_ERR_INVALID,
                     "model.vocab[\"a\"]", "found string \"zero\"");
    sy__expect_error("{\"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}", SY_ERR_UNSUPPORTED, "model.type",
                     "WordPiece");
    sy__expect_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": []},"
                     " \"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Precompiled\"}]}}",
                     SY_ERR_UNSUPPORTED, "normalizer.normalizers[0].type", "Precompiled");
    sy__expect_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": []},"
                     " \"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"(a\"},"
                     " \"behavior\": \"Isolated\"}}",
                     SY_ERR_INVALID, "pre_tokenizer.pattern", "expected a regular expression");
    sy__expect_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": []},"
                     " \"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"String\": \"-\"},"
                     " \"behavior\": \"Sideways\"}}",
                     SY_ERR_INVALID, "pre_tokenizer.behavior", "Sideways");
    sy__expect_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []},"
                     " \"added_tokens\": [{\"id\": 1, \"content\": \"\"}]}",
                     SY_ERR_INVALID, "added_tokens[0].content", "non-empty string");
    sy__expect_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": []},"
                     " \"decoder\": {\"type\": \"CTC\"}}",
                     SY_ERR_UNSUPPORTED, "decoder.type", "CTC");
    /* The component parsers share their type, Sequence and unknown-type checks: each names its own component,
     * list of types and JSON path. */
#define SY_EMPTY_BPE "{\"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": []}, "
    sy__expect_error(SY_EMPTY_BPE "\"normalizer\": 7}", SY_ERR_INVALID,
                     "normalizer: expected a normalizer object or null, found integer 7", NULL);
    sy__expect_error(SY_EMPTY_BPE "\"pre_tokenizer\": {\"kind\": \"Split\"}}", SY_ERR_INVALID,
                     "pre_tokenizer.type: expected a pre-tokenizer type string", NULL);
    sy__expect_error(SY_EMPTY_BPE "\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": {}}}",
                     SY_ERR_INVALID, "pre_tokenizer.pretokenizers: expected an array of pre-tokenizers", NULL);
    sy__expect_error(SY_EMPTY_BPE "\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [null, "
                                  "{\"type\": \"Digits\"}, {\"type\": \"Unigram\"}]}}",
                     SY_ERR_UNSUPPORTED,
                     "pre_tokenizer.pretokenizers[2].type: expected a supported pre-tokenizer (Sequence, Split, "
                     "ByteLevel, Metaspace, Digits, Whitespace, WhitespaceSplit, Punctuation, BertPreTokenizer), "
                     "found \"Unigram\"",
                     NULL);
    sy__expect_error(SY_EMPTY_BPE "\"normalizer\": {\"type\": \"Sequence\", \"normalizers\": 3}}", SY_ERR_INVALID,
                     "normalizer.normalizers: expected an array of normalizers, found integer 3", NULL);
    sy__expect_error(SY_EMPTY_BPE "\"normalizer\": {\"type\": \"NFKC2\"}}", SY_ERR_UNSUPPORTED,
                     "normalizer.type: expected a supported normalizer (Sequence, Prepend, Replace, Lowercase, NFC, "
                     "NFD, NFKC, NFKD, Strip), found \"NFKC2\"",
                     NULL);
    sy__expect_error(SY_EMPTY_BPE "\"decoder\": {\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Fuse\"}, 5]}}",
                     SY_ERR_INVALID, "decoder.decoders[1]: expected a decoder object, found integer 5", NULL);
    sy__expect_error(SY_EMPTY_BPE "\"decoder\": {\"type\": \"Sequence\", \"decoders\": \"Fuse\"}}", SY_ERR_INVALID,
                     "decoder.decoders: expected an array of decoders", NULL);
    sy__expect_error(SY_EMPTY_BPE "\"decoder\": {\"type\": \"CTC\"}}", SY_ERR_UNSUPPORTED,
                     "decoder.type: expected a supported decoder (ByteLevel, Metaspace, Replace, ByteFallback, Fuse, "
                     "Strip, Sequence), found \"CTC\"",
                     NULL);
    sy__expect_error(SY_EMPTY_BPE "\"post_processor\": {\"type\": 1}}", SY_ERR_INVALID,
                     "post_processor.type: expected a post-processor type string, found integer 1", NULL);
    sy__expect_error(SY_EMPTY_BPE "\"post_processor\": {\"type\": \"Template\"}}", SY_ERR_UNSUPPORTED,
                     "post_processor.type: expected a supported post-processor (TemplateProcessing, ByteLevel, "
                     "RobertaProcessing, BertProcessing, Sequence), found \"Template\"",
                     NULL);
#undef SY_EMPTY_BPE
    /* Invalid JSON: jansson's line and column. */
    sy__expect_error("{\"model\": {\n  \"vocab\": {,}}}", SY_ERR_INVALID, "tokenizer.json:2:", "expected valid JSON");

    sy_tokenizer *t = NULL;
    sy_err e = {{0}};
    CHECK(sy_tokenizer_load_file("/nonexistent/tokenizer.json", &t, &e) == SY_ERR_IO);
    CHECK_CONTAINS(e.msg, "/nonexistent/tokenizer.json");
    CHECK(sy_tokenizer_load_dir("/nonexistent", &t, &e) != 0);
    CHECK_CONTAINS(e.msg, "/nonexistent");
}

/* --------------------------------------------------- a SentencePiece mini */

/* Ids: <unk> 0, <s> 1, </s> 2, <0x00>..<0xFF> 3..258, then the pieces. */
static char *sy__spm_json(const char *added_extra)
{
    sy_tok_buf b = {0};
    char line[256];
    sy__puts(&b, "{\"model\": {\"type\": \"BPE\", \"byte_fallback\": true, \"fuse_unk\": true,"
                 " \"unk_token\": \"<unk>\", \"vocab\": {\"<unk>\": 0, \"<s>\": 1, \"</s>\": 2");
    for (int i = 0; i < 256; i++) {
        int n = snprintf(line, sizeof line, ", \"<0x%02X>\": %d", i, 3 + i);
        sy__buf_put(&b, line, (size_t)n);
    }
    const char *rest =
        ", \"\xE2\x96\x81\": 259, \"h\": 260, \"i\": 261, \"hi\": 262, \"\xE2\x96\x81hi\": 263},"
        " \"merges\": [\"h i\", \"\xE2\x96\x81 hi\"]},"
        " \"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Prepend\", \"prepend\": "
        "\"\xE2\x96\x81\"}, {\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": \"\xE2\x96\x81\"}]},"
        " \"pre_tokenizer\": null,"
        " \"decoder\": {\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Replace\", \"pattern\": {\"String\": "
        "\"\xE2\x96\x81\"}, \"content\": \" \"}, {\"type\": \"ByteFallback\"}, {\"type\": \"Fuse\"}, {\"type\": "
        "\"Strip\", \"content\": \" \", \"start\": 1, \"stop\": 0}]},"
        " \"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<s>\","
        " \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}], \"special_tokens\": {\"<s>\": {\"id\":"
        " \"<s>\", \"ids\": [1], \"tokens\": [\"<s>\"]}}},"
        " \"added_tokens\": [{\"id\": 0, \"content\": \"<unk>\", \"special\": true, \"normalized\": false},"
        " {\"id\": 1, \"content\": \"<s>\", \"special\": true, \"normalized\": false},"
        " {\"id\": 2, \"content\": \"</s>\", \"special\": true, \"normalized\": false}";
    sy__puts(&b, rest);
    sy__puts(&b, added_extra);
    sy__puts(&b, "]}");
    return b.p;
}

#define B(x) (3 + (x)) /* the byte-fallback id of byte x */

static void test_spm(void)
{
    char *json = sy__spm_json(
        ", {\"id\": 264, \"content\": \"<extra>\", \"special\": false, \"normalized\": false},"
        " {\"id\": 265, \"content\": \"<pad>\", \"special\": false, \"normalized\": false, \"lstrip\": true,"
        " \"rstrip\": true},"
        " {\"id\": 266, \"content\": \"hey\", \"special\": false, \"normalized\": false, \"single_word\": true}");
    sy_tokenizer *t = NULL;
    sy_err e = {{0}};
    int rc = sy__load_text(json, &t, &e);
    free(json);
    CHECK(rc == 0);
    if (rc) {
        fprintf(stderr, "  load: %s\n", e.msg);
        return;
    }
    CHECK(sy_tokenizer_vocab_size(t) == 267);
    CHECK(sy_tokenizer_token_id(t, "<0x0A>") == B(0x0A));
    CHECK(sy_tokenizer_is_special(t, 1) && !sy_tokenizer_is_special(t, 264) && !sy_tokenizer_is_special(t, 263));
    CHECK(!strcmp(sy_tokenizer_piece(t, 263), "\xE2\x96\x81hi"));
    CHECK(sy_tokenizer_piece(t, 267) == NULL && sy_tokenizer_piece(t, -1) == NULL);
    /* No tokenizer_config: the template adds <s>. */
    CHECK(sy_tokenizer_bos(t) == 1);
    CHECK_IDS(t, "hi", 0, 263);
    CHECK_IDS(t, "hi", SY_TOK_ADD_SPECIAL, 1, 263);
    {
        /* A lone tokenizer.json adds no BOS, but still knows it. */
        char path[512];
        sy_tokenizer *t2;
        snprintf(path, sizeof path, "%s/tokenizer.json", sy__tmp);
        CHECK(sy_tokenizer_load_file(path, &t2, &e) == 0);
        CHECK_IDS(t2, "hi", SY_TOK_ADD_SPECIAL, 263);
        CHECK(sy_tokenizer_bos(t2) == 1);
        sy_tokenizer_free(t2);
    }
    CHECK_IDS(t, "", 0);
    CHECK_IDS(t, "", SY_TOK_ADD_SPECIAL, 1);
    /* Characters outside the vocabulary become bytes. */
    CHECK_IDS(t, "hi \xF0\x9F\x98\x80", 0, 263, 259, B(0xF0), B(0x9F), B(0x98), B(0x80));
    CHECK_IDS(t, "hi\nhi", 0, 263, B(0x0A), 262);
    /* Special tokens only with PARSE_SPECIAL; the text after one is a new
     * piece and gets its own prefix, as in Hugging Face. */
    CHECK_IDS(t, "<s>hi", SY_TOK_PARSE_SPECIAL, 1, 263);
    CHECK_IDS(t, "<s>hi", 0, 259, B('<'), B('s'), B('>'), 262);
    CHECK_IDS(t, "hi</s>", SY_TOK_PARSE_SPECIAL, 263, 2);
    /* Non-special added tokens are always cut out. */
    CHECK_IDS(t, "hi<extra>hi", 0, 263, 264, 263);
    CHECK_IDS(t, "hi<extra>hi", SY_TOK_PARSE_SPECIAL, 263, 264, 263);
    /* lstrip/rstrip take the white space around the token with it. */
    CHECK_IDS(t, "hi  <pad>  hi", 0, 263, 265, 263);
    /* single_word: only between non-word characters. */
    CHECK_IDS(t, "hey", 0, 266);
    CHECK_IDS(t, "hi hey", 0, 263, 259, 266);
    CHECK_IDS(t, "heyi", 0, 259, 260, B('e'), B('y'), 261);

    /* Decoding: the leading space strip, special tokens kept or skipped. */
    static const int32_t s1[] = {1, 263, 259, 262, 2};
    sy__check_decode(t, s1, 5, true, "hi hi");
    sy__check_decode(t, s1, 5, false, "<s> hi hi</s>");
    /* A byte run that is not UTF-8: one U+FFFD per byte (ByteFallback). */
    static const int32_t s2[] = {B(0xF0), B(0x9F), 262};
    sy__check_decode(t, s2, 3, false, "\xEF\xBF\xBD\xEF\xBF\xBDhi");
    static const int32_t bad[] = {267};
    char *txt;
    CHECK(sy_tokenizer_decode(t, bad, 1, false, &txt, NULL, &e) == SY_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "267");

    /* Streaming an emoji that arrives as four byte tokens: nothing is
     * emitted until the run is complete, never half a character. */
    static const int32_t s3[] = {263, 259, B(0xF0), B(0x9F), B(0x98), B(0x80), 262, B(0xE2), B(0x82)};
    size_t empties;
    char *st = sy__stream(t, s3, 9, false, &empties);
    CHECK(st && !strcmp(st, "hi \xF0\x9F\x98\x80hi\xEF\xBF\xBD\xEF\xBF\xBD"));
    CHECK(empties >= 4);
    free(st);

    /* Streaming after a prompt: the first-token strip is not repeated. */
    static const int32_t prompt[] = {1, 263};
    sy_detok *d = sy_detok_new_after(t, prompt, 2, true);
    CHECK(d != NULL);
    const char *p;
    size_t len;
    CHECK(sy_detok_push(d, 263, &p, &len, &e) == SY_OK && len == 3 && !memcmp(p, " hi", 3));
    CHECK(sy_detok_push(d, 2, &p, &len, &e) == SY_OK && len == 0);
    CHECK(sy_detok_push(d, 9999, &p, &len, &e) == SY_ERR_INVALID);
    CHECK(sy_detok_finish(d, &p, &len, &e) == SY_OK && len == 0);
    CHECK(sy_detok_push(d, 263, &p, &len, &e) == SY_ERR_INVALID);
    sy_detok_free(d);
    /* A prompt ending inside a byte run: the run completes in the output. */
    static const int32_t prompt2[] = {263, B(0xF0), B(0x9F)};
    d = sy_detok_new_after(t, prompt2, 3, true);
    CHECK(sy_detok_push(d, B(0x98), &p, &len, &e) == SY_OK && len == 0);
    CHECK(sy_detok_push(d, B(0x80), &p, &len, &e) == SY_OK && len == 0);
    CHECK(sy_detok_finish(d, &p, &len, &e) == SY_OK && len == 4 && !memcmp(p, "\xF0\x9F\x98\x80", 4));
    sy_detok_free(d);
    sy_tokenizer_free(t);

    /* tokenizer_config.json decides BOS/EOS for ADD_SPECIAL. */
    sy__write("tokenizer_config.json", "{\"add_bos_token\": true, \"add_eos_token\": true,"
                                       " \"bos_token\": {\"content\": \"<s>\"}, \"eos_token\": \"</s>\"}");
    sy__write("generation_config.json", "{\"eos_token_id\": [2, 0]}");
    rc = sy_tokenizer_load_dir(sy__tmp, &t, &e);
    CHECK(rc == 0);
    if (!rc) {
        CHECK_IDS(t, "hi", SY_TOK_ADD_SPECIAL, 1, 263, 2);
        CHECK_IDS(t, "hi", 0, 263);
        const int32_t *eos;
        size_t ne = sy_tokenizer_eos(t, &eos);
        CHECK(ne == 2 && eos[0] == 2 && eos[1] == 0);
        sy_tokenizer_free(t);
    }
    sy__write("tokenizer_config.json", "{\"add_bos_token\": false}");
    rc = sy_tokenizer_load_dir(sy__tmp, &t, &e);
    CHECK(rc == 0);
    if (!rc) {
        CHECK_IDS(t, "hi", SY_TOK_ADD_SPECIAL, 263);
        sy_tokenizer_free(t);
    }
    sy__remove("tokenizer_config.json");
    sy__remove("generation_config.json");
}

/* ------------------------------------------------------ byte-level (gpt2) */

static void test_bytelevel(const char *shared)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizers/gpt2/tokenizer.json", shared);
    sy_tokenizer *t;
    sy_err e = {{0}};
    int rc = sy_tokenizer_load_file(path, &t, &e);
    CHECK(rc == 0);
    if (rc) {
        fprintf(stderr, "  %s\n", e.msg);
        return;
    }
    int32_t *ids;
    size_t n;
    /* An emoji split over byte-level tokens streams as one piece. */
    const char *emo = "a\xF0\x9F\x98\x80\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD b";
    CHECK(sy_tokenizer_encode(t, emo, strlen(emo), 0, &ids, &n, &e) == 0);
    CHECK(n > 4);
    size_t empties;
    char *st = sy__stream(t, ids, n, false, &empties);
    CHECK(st && !strcmp(st, emo));
    CHECK(empties >= 1);
    free(st);
    /* Cut off inside a character: finish gives one U+FFFD for it. */
    st = sy__stream(t, ids, 2, false, &empties);
    CHECK(st && !strcmp(st, "a\xEF\xBF\xBD"));
    free(st);
    free(ids);
    /* Special tokens: parsed only when asked, skipped when asked. */
    CHECK_IDS(t, "<|endoftext|>", SY_TOK_PARSE_SPECIAL, 50256);
    CHECK_IDS(t, "hi<|endoftext|>", SY_TOK_PARSE_SPECIAL, 5303, 50256);
    static const int32_t s1[] = {5303, 50256, 5303};
    sy__check_decode(t, s1, 3, true, "hihi");
    sy__check_decode(t, s1, 3, false, "hi<|endoftext|>hi");
    /* Invalid UTF-8 is encoded byte-wise and decodes lossily. */
    const char *bad = "\xFF\xFE ok\xC3";
    CHECK(sy_tokenizer_encode(t, bad, strlen(bad), 0, &ids, &n, &e) == 0);
    char *dec;
    size_t dlen;
    CHECK(sy_tokenizer_decode(t, ids, n, false, &dec, &dlen, &e) == 0);
    CHECK(!strcmp(dec, "\xEF\xBF\xBD\xEF\xBF\xBD ok\xEF\xBF\xBD"));
    free(dec);
    free(ids);
    sy_tokenizer_free(t);

    /* Long runs (regex backtracking, BPE heap) on o200k. */
    snprintf(path, sizeof path, "%s/tokenizers/o200k/tokenizer.json", shared);
    rc = sy_tokenizer_load_file(path, &t, &e);
    CHECK(rc == 0);
    if (rc)
        return;
    size_t big = 300000;
    char *text = malloc(big + 1);
    for (size_t i = 0; i < big; i++)
        text[i] = i < big / 2 ? ' ' : i % 1000 == 999 ? '\n' : "ab"[i % 2];
    text[big] = 0;
    rc = sy_tokenizer_encode(t, text, big, 0, &ids, &n, &e);
    CHECK(rc == 0);
    if (!rc) {
        CHECK(sy_tokenizer_decode(t, ids, n, false, &dec, &dlen, &e) == 0);
        CHECK(dlen == big && !memcmp(dec, text, big));
        free(dec);
        free(ids);
    } else {
        fprintf(stderr, "  %s\n", e.msg);
    }
    free(text);
    sy_tokenizer_free(t);
}

/* --------------------------------------------------------- pre-tokenizers */

/* Runs a pre-tokenizer given as JSON on text; checks the pieces ("|"-joined). */
static void sy__check_pretok(const char *json, const char *text, bool origin, const char *exp)
{
    json_error_t je;
    json_t *j = json_loads(json, 0, &je);
    CHECK(j != NULL);
    if (!j)
        return;
    sy_tok_where w = {.file = "test", .path = "pre_tokenizer"};
    sy_tok_pretok *p = NULL;
    sy_err e = {{0}};
    int rc = sy__pretok_parse(j, &w, &p, &e);
    json_decref(j);
    CHECK(rc == 0 && p);
    if (rc || !p) {
        fprintf(stderr, "  %s\n", e.msg);
        return;
    }
    sy_tok_ctx c;
    sy__ctx_init(&c, &e);
    sy__buf_put(&c.pa.text, text, strlen(text));
    sy__spans_push(&c.pa.sp, 0, strlen(text), false);
    c.pa.sp.v[0].origin = origin;
    rc = sy__pretok_apply(p, &c.pa, &c, &e);
    CHECK(rc == 0);
    sy_tok_buf got = {0};
    for (size_t i = 0; i < c.pa.sp.n; i++) {
        if (i)
            sy__buf_putc(&got, '|');
        sy__buf_put(&got, c.pa.text.p + c.pa.sp.v[i].off, c.pa.sp.v[i].len);
    }
    sy__buf_putc(&got, 0);
    bool ok = !strcmp(got.p, exp);
    CHECK(ok);
    if (!ok) {
        fprintf(stderr, "  pre-tokenizer %s\n", json);
        sy_tt_print_escaped("  expected: ", exp, strlen(exp), 200);
        sy_tt_print_escaped("  got:      ", got.p, strlen(got.p), 200);
    }
    sy__buf_free(&got);
    sy__ctx_free(&c);
    sy__pretok_free(p);
}

#define SPLIT(beh, inv)                                                                                                \
    "{\"type\": \"Split\", \"pattern\": {\"String\": \"-\"}, \"behavior\": \"" beh "\", \"invert\": " inv "}"
#define LB "\xE2\x96\x81" /* U+2581 */

static void test_pretokenizers(void)
{
    const char *s = "the-final--countdown";
    sy__check_pretok(SPLIT("Removed", "false"), s, true, "the|final|countdown");
    sy__check_pretok(SPLIT("Isolated", "false"), s, true, "the|-|final|-|-|countdown");
    sy__check_pretok(SPLIT("MergedWithPrevious", "false"), s, true, "the-|final-|-|countdown");
    sy__check_pretok(SPLIT("MergedWithNext", "false"), s, true, "the|-final|-|-countdown");
    sy__check_pretok(SPLIT("Contiguous", "false"), s, true, "the|-|final|--|countdown");
    sy__check_pretok(SPLIT("Removed", "true"), s, true, "-|-|-");
    sy__check_pretok(SPLIT("MergedWithPrevious", "true"), "-a-b", true, "-a|-b");
    /* \s is White_Space: U+180E (a format character) is not. */
    sy__check_pretok("{\"type\": \"Split\", \"pattern\": {\"Regex\": \"\\\\s+\"}, \"behavior\": \"Removed\"}",
                     "a\xE1\xA0\x8E"
                     "b\xC2\x85"
                     "c\xE3\x80\x80"
                     "d",
                     true,
                     "a\xE1\xA0\x8E"
                     "b|c|d");
    sy__check_pretok("{\"type\": \"Split\", \"pattern\": {\"Regex\": \"(?i:'s)|\\\\p{L}+\"}, \"behavior\": "
                     "\"Isolated\"}",
                     "IT'S", true, "IT|'S");
    const char *ms =
        "{\"type\": \"Metaspace\", \"replacement\": \"" LB "\", \"prepend_scheme\": \"%s\", \"split\": %s}";
    char buf[256];
    snprintf(buf, sizeof buf, ms, "always", "true");
    sy__check_pretok(buf, "Hey friend", false, LB "Hey|" LB "friend");
    snprintf(buf, sizeof buf, ms, "never", "true");
    sy__check_pretok(buf, "Hey  friend", true, "Hey|" LB "|" LB "friend");
    snprintf(buf, sizeof buf, ms, "first", "true");
    sy__check_pretok(buf, "Hey friend", true, LB "Hey|" LB "friend");
    sy__check_pretok(buf, "Hey friend", false, "Hey|" LB "friend");
    snprintf(buf, sizeof buf, ms, "always", "false");
    sy__check_pretok(buf, "Hey friend", false, LB "Hey" LB "friend");
    sy__check_pretok("{\"type\": \"ByteLevel\", \"add_prefix_space\": true, \"use_regex\": true}", "Hello world!", true,
                     "\xC4\xA0Hello|\xC4\xA0world|!");
    sy__check_pretok("{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": false}", "a b\n", true,
                     "a\xC4\xA0"
                     "b\xC4\x8A");
    sy__check_pretok("{\"type\": \"Digits\", \"individual_digits\": true}", "a123b", true, "a|1|2|3|b");
    sy__check_pretok("{\"type\": \"Digits\", \"individual_digits\": false}", "a123b", true, "a|123|b");
    sy__check_pretok("{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"WhitespaceSplit\"},"
                     " {\"type\": \"Punctuation\"}]}",
                     "Hi, you!  ok", true, "Hi|,|you|!|ok");
    sy__check_pretok("{\"type\": \"Whitespace\"}", "Hi, you!", true, "Hi|,|you|!");
}

/* --------------------------------------------------------------- decoders */

static void sy__check_decoder(const char *decoder, const char *const *pieces, size_t n, const char *exp)
{
    sy_tok_buf b = {0};
    sy__puts(&b, "{\"model\": {\"type\": \"BPE\", \"vocab\": {");
    for (size_t i = 0; i < n; i++) {
        char line[128];
        int k = snprintf(line, sizeof line, "%s\"%s\": %zu", i ? ", " : "", pieces[i], i);
        sy__buf_put(&b, line, (size_t)k);
    }
    sy__puts(&b, "}, \"merges\": []}, \"decoder\": ");
    sy__puts(&b, decoder);
    sy__puts(&b, "}");
    sy_tokenizer *t;
    sy_err e = {{0}};
    int rc = sy__load_text(b.p, &t, &e);
    sy__buf_free(&b);
    CHECK(rc == 0);
    if (rc) {
        fprintf(stderr, "  %s\n", e.msg);
        return;
    }
    int32_t ids[16];
    for (size_t i = 0; i < n; i++)
        ids[i] = (int32_t)i;
    sy__check_decode(t, ids, n, false, exp);
    size_t empties;
    char *st = sy__stream(t, ids, n, false, &empties);
    CHECK(st && !strcmp(st, exp));
    free(st);
    sy_tokenizer_free(t);
}

static void test_decoders(void)
{
    static const char *const p1[] = {LB "Hey", LB "friend", LB, "!"};
    sy__check_decoder("{\"type\": \"Metaspace\", \"replacement\": \"" LB "\", \"prepend_scheme\": \"always\"}", p1, 4,
                      "Hey friend !");
    sy__check_decoder("{\"type\": \"Metaspace\", \"replacement\": \"" LB "\", \"prepend_scheme\": \"never\"}", p1, 4,
                      " Hey friend !");
    static const char *const p2[] = {"a ", " b ", " "};
    /* Strip after Fuse acts on the whole text; before it, per token. */
    sy__check_decoder(
        "{\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Fuse\"}, {\"type\": \"Strip\", \"content\": "
        "\" \", \"start\": 0, \"stop\": 2}]}",
        p2, 3, "a  b");
    sy__check_decoder("{\"type\": \"Strip\", \"content\": \" \", \"start\": 1, \"stop\": 1}", p2, 3, "ab");
    static const char *const p3[] = {"x", "y"};
    sy__check_decoder("null", p3, 2, "x y");
    static const char *const p4[] = {"a--", "-b", "c"};
    sy__check_decoder("{\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Fuse\"}, {\"type\": \"Replace\", "
                      "\"pattern\": {\"String\": \"---\"}, \"content\": \"+\"}]}",
                      p4, 3, "a+bc");
    /* U+0120 (the space byte) followed by "caf" in hex escapes. */
    static const char *const p5[] = {"\xC4\xA0\x63\x61\x66", "\xC3\x83", "\xC2\xA9", "<x>"};
    sy__check_decoder("{\"type\": \"ByteLevel\"}", p5, 4, " caf\xC3\xA9<x>");
}

/* ---------------------------------------------------------------- unicode */

static void sy__check_norm(int form, const char *in, const char *exp)
{
    sy_tok_buf out = {0};
    CHECK(sy__uni_normalize(form, in, strlen(in), &out) == 0);
    bool ok = out.len == strlen(exp) && !memcmp(out.p, exp, out.len);
    CHECK(ok);
    if (!ok) {
        fprintf(stderr, "  form %d\n", form);
        sy_tt_print_escaped("  expected: ", exp, strlen(exp), 100);
        sy_tt_print_escaped("  got:      ", out.p ? out.p : "", out.len, 100);
    }
    sy__buf_free(&out);
}

static void test_unicode(void)
{
    sy__check_norm(SY__NFC, "e\xCC\x81", "\xC3\xA9");
    sy__check_norm(SY__NFD, "\xC3\xA9", "e\xCC\x81");
    sy__check_norm(SY__NFKC, "\xEF\xAC\x81", "fi");
    sy__check_norm(SY__NFKC, "\xC2\xBD",
                   "1\xE2\x81\x84"
                   "2");
    sy__check_norm(SY__NFC, "\xC2\xBD", "\xC2\xBD");
    sy__check_norm(SY__NFC, "\xE2\x84\xAB", "\xC3\x85"); /* Angstrom sign */
    sy__check_norm(SY__NFC, "\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8", "\xEA\xB0\x81"); /* Hangul LVT */
    sy__check_norm(SY__NFD, "\xEA\xB0\x81", "\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8");
    /* Reordering: dot above (230) after dot below (220). */
    sy__check_norm(SY__NFC, "\xE1\xB8\x8B\xCC\xA3", "\xE1\xB8\x8D\xCC\x87");
    sy__check_norm(SY__NFD, "q\xCC\x87\xCC\xA3", "q\xCC\xA3\xCC\x87");
    /* A leading combining mark and invalid bytes pass through. */
    sy__check_norm(SY__NFC,
                   "\xCC\x81"
                   "a\xFF",
                   "\xCC\x81"
                   "a\xFF");
    sy__check_norm(SY__NFKC, "\xEF\xBC\xA1\xE2\x91\xA0", "A1");
    sy_tok_buf out = {0};
    CHECK(sy__uni_lowercase("\xC4\xB0\xCE\x91\xCE\xA3 \xC3\x80"
                            "B",
                            10, &out) == 0);
    CHECK(out.len == 11 && !memcmp(out.p,
                                   "i\xCC\x87\xCE\xB1\xCF\x83 \xC3\xA0"
                                   "b",
                                   11));
    sy__buf_free(&out);
}

int main(void)
{
    const char *shared = sy_tt_shared_dir();
    const char *tmpdir = getenv("TMPDIR");
    snprintf(sy__tmp, sizeof sy__tmp, "%s/sy-tok-XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
    if (!mkdtemp(sy__tmp)) {
        fprintf(stderr, "FAIL: cannot create a temporary directory %s\n", sy__tmp);
        return 1;
    }
    test_errors();
    test_spm();
    test_pretokenizers();
    test_decoders();
    test_unicode();
    if (shared)
        test_bytelevel(shared);
    sy__remove("tokenizer.json");
    rmdir(sy__tmp);
    int rc = sy_test_done("test_tokenizer_unit");
    /* Without the shared data the byte-level cases could not run: fail. */
    if (!shared)
        fprintf(stderr, "FAIL: the byte-level cases did not run (SY_SHARED_DIR is not set)\n");
    return shared ? rc : 1;
}
