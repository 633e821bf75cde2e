/*
 * Tokenizer from a Hugging Face tokenizer.json: BPE in its two common
 * styles (SentencePiece-like with byte fallback, and byte-level with a
 * regex pre-tokenizer), added and special tokens, and incremental
 * detokenisation that never emits half a UTF-8 character.
 */
#ifndef SY_TOKENIZER_H
#define SY_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "switchyard/plugin.h"

typedef struct sy_tokenizer sy_tokenizer;

/*
 * Loads <dir>/tokenizer.json, plus tokenizer_config.json (add_bos_token,
 * add_eos_token, bos/eos token strings) and config.json /
 * generation_config.json (bos_token_id, eos_token_id) when present.
 */
int sy_tokenizer_load_dir(const char *dir, sy_tokenizer **out, sy_err *err);
/* Loads one tokenizer.json with no companion files (no BOS added). */
int sy_tokenizer_load_file(const char *path, sy_tokenizer **out, sy_err *err);
void sy_tokenizer_free(sy_tokenizer *t);

enum {
    SY_TOK_ADD_SPECIAL = 1,   /* add BOS/EOS as the tokenizer config says */
    SY_TOK_PARSE_SPECIAL = 2  /* recognise special added tokens in the text */
};

/*
 * Encodes len bytes of UTF-8 text. *ids is allocated with malloc and owned
 * by the caller. Invalid UTF-8 is encoded byte-wise, never rejected.
 */
int sy_tokenizer_encode(const sy_tokenizer *t, const char *text, size_t len, int flags, int32_t **ids,
                        size_t *n_ids, sy_err *err);

int32_t sy_tokenizer_vocab_size(const sy_tokenizer *t);
int32_t sy_tokenizer_bos(const sy_tokenizer *t); /* -1 if none */
/* EOS ids (the config's eos_token_id list and the tokenizer's eos token). */
size_t sy_tokenizer_eos(const sy_tokenizer *t, const int32_t **ids);
bool sy_tokenizer_is_special(const sy_tokenizer *t, int32_t id);
/* The token's string as in the vocabulary (e.g. "▁the", "Ġthe"), or NULL. */
const char *sy_tokenizer_piece(const sy_tokenizer *t, int32_t id);
/* Looks a token string up (vocabulary or added tokens); -1 if absent. */
int32_t sy_tokenizer_token_id(const sy_tokenizer *t, const char *piece);

/* Decodes a whole id sequence; *text is malloc'd, NUL-terminated. */
int sy_tokenizer_decode(const sy_tokenizer *t, const int32_t *ids, size_t n, bool skip_special, char **text,
                        size_t *len, sy_err *err);

/*
 * Incremental detokeniser for streaming. push() appends the text that is
 * now final to out (malloc'd buffer grown as needed) and never splits a
 * UTF-8 character; finish() flushes what is left (incomplete bytes become
 * U+FFFD, as the reference decoders do).
 */
typedef struct sy_detok sy_detok;
sy_detok *sy_detok_new(const sy_tokenizer *t, bool skip_special);
void sy_detok_free(sy_detok *d);
/* Returns the number of bytes of new text written to *piece (valid until the next call). */
int sy_detok_push(sy_detok *d, int32_t id, const char **piece, size_t *len, sy_err *err);
int sy_detok_finish(sy_detok *d, const char **piece, size_t *len, sy_err *err);

#endif
