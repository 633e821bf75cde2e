/*
 * Internals shared by the tokenizer's files. Nothing here is public API.
 *
 * The pipeline follows Hugging Face tokenizers, whose tokenizer.json we
 * read: added tokens are cut out of the raw text, the rest is normalized
 * piece by piece, cut again on normalized added tokens, pre-tokenized into
 * words and each word run through the BPE model; a post-processor adds
 * BOS/EOS. Decoding runs the decoder chain as a stream (see decoder.c).
 */
#ifndef SY_TOK_INTERNAL_H
#define SY_TOK_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "tokenizer/tokenizer.h"

/* ------------------------------------------------------------ containers */

/* Growable byte buffer; p is NUL-terminated whenever len < cap. */
typedef struct sy_tok_buf {
    char *p;
    size_t len, cap;
} sy_tok_buf;

int sy__buf_reserve(sy_tok_buf *b, size_t extra);
int sy__buf_put(sy_tok_buf *b, const void *s, size_t n);
int sy__buf_putc(sy_tok_buf *b, char c);
void sy__buf_free(sy_tok_buf *b);

typedef struct sy_tok_ivec {
    int32_t *v;
    size_t n, cap;
} sy_tok_ivec;

int sy__ivec_push(sy_tok_ivec *v, int32_t x);
void sy__ivec_free(sy_tok_ivec *v);

/* A piece of a string: [off, off+len). id >= 0 when it is an added token;
 * origin when it starts at offset 0 of the original text (Metaspace's
 * prepend_scheme "first" needs that). */
typedef struct sy_tok_span {
    size_t off, len;
    int32_t id;
    bool match;
    bool origin;
} sy_tok_span;

typedef struct sy_tok_spans {
    sy_tok_span *v;
    size_t n, cap;
} sy_tok_spans;

int sy__spans_push(sy_tok_spans *s, size_t off, size_t len, bool match);
void sy__spans_free(sy_tok_spans *s);

/* Pieces with their own text, as the pre-tokenizers pass them on. */
typedef struct sy_tok_pieces {
    sy_tok_buf text;
    sy_tok_spans sp;
} sy_tok_pieces;

void sy__pieces_free(sy_tok_pieces *p);

/* String -> int32 map over strings kept in an arena (open addressing). */
typedef struct sy_tok_strmap {
    uint32_t *slots; /* entry index + 1; 0 is empty */
    uint32_t mask;
    struct sy_tok_sent {
        uint32_t off, len, hash;
        int32_t val;
    } * ents;
    size_t n, cap;
    const sy_tok_buf *arena;
} sy_tok_strmap;

int sy__smap_init(sy_tok_strmap *m, const sy_tok_buf *arena, size_t expect);
/* Adds arena[off, off+len) -> val; when the key exists its value is kept
 * and *dup set to it (else -1). */
int sy__smap_put(sy_tok_strmap *m, uint32_t off, uint32_t len, int32_t val, int32_t *dup);
int32_t sy__smap_get(const sy_tok_strmap *m, const char *s, size_t len);
void sy__smap_free(sy_tok_strmap *m);

/* (left id, right id) -> (rank, merged id) for BPE merges. */
typedef struct sy_tok_pairmap {
    uint64_t *keys;
    uint64_t *vals;
    uint32_t mask;
    size_t n;
} sy_tok_pairmap;

int sy__pmap_init(sy_tok_pairmap *m, size_t expect);
/* Returns 1 when the pair was already present; the new value replaces
 * it, as a Rust HashMap collected from the merge list does. */
int sy__pmap_put(sy_tok_pairmap *m, int32_t a, int32_t b, int32_t rank, int32_t merged);
bool sy__pmap_get(const sy_tok_pairmap *m, int32_t a, int32_t b, int32_t *rank, int32_t *merged);
void sy__pmap_free(sy_tok_pairmap *m);

/* ------------------------------------------------------------ UTF-8, Unicode */

/* Decodes one code point at s (n > 0 bytes left). An invalid or truncated
 * sequence decodes as one byte b with *cp = SY__UNI_RAW(b). */
#define SY__UNI_RAW(b) (0x110000u + (uint32_t)(b))
uint32_t sy__utf8_next(const char *s, size_t n, size_t *adv);
/* Encodes cp (raw bytes as themselves) into out; returns its length. */
size_t sy__utf8_put(uint32_t cp, char out[4]);
bool sy__utf8_valid(const char *s, size_t n);
bool sy__uni_is_white_space(uint32_t cp);
uint32_t sy__uni_class(uint32_t cp);

enum { SY__NFC, SY__NFD, SY__NFKC, SY__NFKD };
int sy__uni_normalize(int form, const char *s, size_t n, sy_tok_buf *out);
int sy__uni_lowercase(const char *s, size_t n, sy_tok_buf *out);

/* ------------------------------------------------------------ JSON errors */

/* Where a JSON value came from, for messages: file and JSON path. */
typedef struct sy_tok_where {
    const char *file;
    char path[256];
} sy_tok_where;

/* A short description of what a JSON value is ("string \"x\"", "null"). */
void sy__json_describe(const json_t *j, char *out, size_t cap);
int sy__json_err(sy_err *err, const sy_tok_where *w, const char *sub, const char *expected, const json_t *found);
/* Room for one more element of a doubling array of elem-byte elements: the
 * realloc'd array with *cap raised (to first when it was 0, else twice),
 * or NULL with the array and *cap untouched when out of memory. */
void *sy__grow(void *v, size_t *cap, size_t elem, size_t first);
/* Child path: base + sub ("model" + ".merges" / "[3]"). */
void sy__path(char *out, size_t cap, const char *base, const char *fmt, ...) SY__PRINTF(4, 5);
/* Optional member of type bool/string; missing or null gives the default. */
int sy__json_bool(const json_t *obj, const char *key, bool dflt, bool *out, const sy_tok_where *w, sy_err *err);
int sy__json_str(const json_t *obj, const char *key, const char **out, size_t *len, const sy_tok_where *w, sy_err *err);
/* The "type" string of a component object (normalizer, pre-tokenizer,
 * decoder, post-processor); object_expected NULL skips the object check. */
int sy__json_type(const json_t *j, const char *object_expected, const char *type_expected, const sy_tok_where *w,
                  const char **type, sy_err *err);
/* "expected a supported <what> (<supported>), found \"<type>\"" for a type string no parser knows. */
int sy__json_unknown_type(sy_err *err, const sy_tok_where *w, const char *what, const char *supported,
                          const char *type);
/* Calls each(ctx, element, where, err) on every element of obj's array
 * member key (where's path ends in ".key[i]"), stopping at the first error. */
typedef int (*sy__json_each_fn)(void *ctx, const json_t *item, const sy_tok_where *at, sy_err *err);
int sy__json_each(const json_t *obj, const char *key, const char *expected, const sy_tok_where *w,
                  sy__json_each_fn each, void *ctx, sy_err *err);

/* ------------------------------------------------------------ regex */

typedef struct sy_tok_regex {
    pcre2_code *code; /* NULL for a literal pattern */
    char *lit;
    size_t lit_len;
} sy_tok_regex;

/* pattern is either {"String": s} or {"Regex": r} (tokenizer.json). */
int sy__re_from_json(const json_t *pattern, sy_tok_regex *re, const sy_tok_where *w, sy_err *err);
int sy__re_compile(const char *pat, size_t len, sy_tok_regex *re, const sy_tok_where *w, sy_err *err);
int sy__re_literal(const char *s, size_t len, sy_tok_regex *re);
void sy__re_free(sy_tok_regex *re);
/* Covers s with spans in order, match=true for each match (Hugging
 * Face's find_matches). Empty text gives one empty non-match. */
int sy__re_find_all(const sy_tok_regex *re, const char *s, size_t n, pcre2_match_data *md, sy_tok_spans *out,
                    sy_err *err);
/* Translates an Oniguruma pattern (what tokenizer.json holds) to PCRE2. */
int sy__re_translate(const char *pat, size_t len, sy_tok_buf *out);

/* ------------------------------------------------------------ stages */

typedef struct sy_tok_norm sy_tok_norm;
typedef struct sy_tok_pretok sy_tok_pretok;
typedef struct sy_tok_dec sy_tok_dec;

/* Scratch for one encode call; nothing is kept between calls. */
typedef struct sy_tok_ctx {
    pcre2_match_data *md;
    sy_tok_spans spans;
    sy_tok_buf tmp;
    sy_tok_pieces pa, pb;
    /* BPE */
    struct sy_tok_sym *syms;
    size_t syms_cap;
    struct sy_tok_merge *heap;
    size_t heap_cap;
    sy_tok_buf word;
} sy_tok_ctx;

int sy__ctx_init(sy_tok_ctx *c, sy_err *err);
void sy__ctx_free(sy_tok_ctx *c);

int sy__norm_parse(const json_t *j, const sy_tok_where *w, sy_tok_norm **out, sy_err *err);
void sy__norm_free(sy_tok_norm *n);
/* Normalizes s into out (out is overwritten). */
int sy__norm_apply(const sy_tok_norm *n, const char *s, size_t len, sy_tok_buf *out, sy_tok_ctx *c, sy_err *err);

int sy__pretok_parse(const json_t *j, const sy_tok_where *w, sy_tok_pretok **out, sy_err *err);
void sy__pretok_free(sy_tok_pretok *p);
/* Splits in->text per the pre-tokenizer; the result replaces *in. */
int sy__pretok_apply(const sy_tok_pretok *p, sy_tok_pieces *in, sy_tok_ctx *c, sy_err *err);

/* ------------------------------------------------------------ tokenizer */

enum { SY__ID_SPECIAL = 1, SY__ID_ADDED = 2, SY__ID_BYTE = 4 };

typedef struct sy_tok_added {
    int32_t id;
    uint32_t off, len; /* content in the arena */
    uint32_t noff, nlen; /* what is matched: content, normalized if normalized */
    bool special, lstrip, rstrip, normalized, single_word;
} sy_tok_added;

/* Byte trie over added-token strings for leftmost-longest matching. */
typedef struct sy_tok_trie {
    struct sy_tok_tnode {
        uint32_t child, sibling; /* node indexes; 0 = none (0 is the root) */
        int32_t tok; /* index into added[], -1 if none ends here */
        uint8_t byte;
    } * nodes;
    size_t n, cap;
    bool first[256];
} sy_tok_trie;

struct sy_tokenizer {
    sy_tok_buf arena; /* every piece string, NUL-terminated */
    int32_t n_ids; /* highest id + 1 */
    size_t ids_cap; /* allocated length of the per-id arrays */
    uint32_t *piece_off; /* per id; UINT32_MAX when the id has no piece */
    uint32_t *piece_len;
    uint8_t *id_flags;
    sy_tok_strmap vocab; /* model vocabulary */
    sy_tok_strmap added_map;

    /* BPE model */
    sy_tok_pairmap merges;
    int32_t byte_ids[256]; /* "<0xNN>" ids for byte_fallback, -1 if absent */
    int32_t unk_id;
    bool byte_fallback, fuse_unk, ignore_merges;
    char *cont_prefix, *eow_suffix;
    size_t cont_prefix_len, eow_suffix_len;

    sy_tok_added *added;
    size_t n_added;
    sy_tok_trie trie_raw, trie_norm;
    pcre2_code *word_re; /* \w for single_word tokens */

    sy_tok_norm *norm;
    sy_tok_pretok *pretok;
    sy_tok_dec *dec;

    /* What SY_TOK_ADD_SPECIAL puts around the text. */
    sy_tok_ivec add_pre, add_post;
    int32_t bos;
    sy_tok_ivec eos;
};

/* Adds a string to the arena; *off receives its offset. */
int sy__arena_add(sy_tokenizer *t, const char *s, size_t len, uint32_t *off);
/* Gives id its piece (grows the id tables as needed). */
int sy__set_piece(sy_tokenizer *t, int32_t id, uint32_t off, uint32_t len);

int sy__bpe_parse(sy_tokenizer *t, const json_t *model, const sy_tok_where *w, sy_err *err);
int sy__bpe_encode(const sy_tokenizer *t, const char *s, size_t n, sy_tok_ctx *c, sy_tok_ivec *out, sy_err *err);
void sy__bpe_free(sy_tokenizer *t);

int sy__added_parse(sy_tokenizer *t, const json_t *arr, const sy_tok_where *w, sy_err *err);
/* Cuts s into added tokens (span.id >= 0) and text between; the trie of
 * normalized or of raw tokens; special tokens only with parse_special. */
int sy__added_split(const sy_tokenizer *t, bool normalized, bool parse_special, const char *s, size_t n,
                    sy_tok_spans *out, sy_err *err);
void sy__added_free(sy_tokenizer *t);

int sy__dec_parse(sy_tokenizer *t, const json_t *j, const sy_tok_where *w, sy_err *err);
void sy__dec_free(sy_tok_dec *d);

/* Streaming state of the decoder chain (one per sy_detok). */
typedef struct sy_tok_dstate sy_tok_dstate;
sy_tok_dstate *sy__dstate_new(const sy_tokenizer *t);
void sy__dstate_free(sy_tok_dstate *s);
/* Runs one token through the chain, appending final text to out. */
int sy__dstate_push(sy_tok_dstate *s, const char *piece, size_t n, sy_tok_buf *out);
int sy__dstate_finish(sy_tok_dstate *s, sy_tok_buf *out);

#endif
