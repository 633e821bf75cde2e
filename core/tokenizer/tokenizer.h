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
/*
 * Loads one tokenizer.json with no companion files (no BOS added: with
 * SY_TOK_ADD_SPECIAL nothing is added; sy_tokenizer_bos still reports the
 * post_processor template's first special token; there are no EOS ids).
 * A directory without tokenizer_config.json add_bos_token/add_eos_token
 * follows the template instead, as Hugging Face does.
 */
int sy_tokenizer_load_file(const char *path, sy_tokenizer **out, sy_err *err);
void sy_tokenizer_free(sy_tokenizer *t);

enum {
    SY_TOK_ADD_SPECIAL = 1,   /* add BOS/EOS as the tokenizer config says */
    SY_TOK_PARSE_SPECIAL = 2  /* recognise special added tokens in the text */
};

/*
 * Encodes len bytes of UTF-8 text. *ids is allocated with malloc and owned
 * by the caller (non-NULL even when *n_ids is 0). Invalid UTF-8 is encoded
 * byte-wise, never rejected. Safe to call from several threads at once.
 * Errors: SY_ERR_INVALID (NULL arguments), SY_ERR_NOMEM.
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
/*
 * The bytes token id contributes in the middle of a decoded text: the
 * decoder chain applied to its piece alone, with no UTF-8 repair (a
 * byte-level or <0xHH> token that is part of a character gives its raw
 * bytes) and none of the steps that act only at the start of a sequence.
 * Writes up to cap bytes to buf; returns the full length, or -1 for an id
 * without a piece (or out of memory). Constrained decoding uses it.
 */
int sy_tokenizer_token_bytes(const sy_tokenizer *t, int32_t id, char *buf, size_t cap);
/* Looks a token string up (vocabulary or added tokens); -1 if absent. */
int32_t sy_tokenizer_token_id(const sy_tokenizer *t, const char *piece);

/*
 * Decodes a whole id sequence; *text is malloc'd, NUL-terminated. With
 * skip_special, special added tokens are left out. Errors: SY_ERR_INVALID
 * for an id outside [0, vocab_size); ids in range without a piece decode
 * to nothing.
 */
int sy_tokenizer_decode(const sy_tokenizer *t, const int32_t *ids, size_t n, bool skip_special, char **text,
                        size_t *len, sy_err *err);

/*
 * Incremental detokeniser for streaming. push() appends the text that is
 * now final to out (malloc'd buffer grown as needed) and never splits a
 * UTF-8 character; finish() flushes what is left (incomplete bytes become
 * U+FFFD, as the reference decoders do).
 */
typedef struct sy_detok sy_detok;
/* Starts at the beginning of a sequence (NULL when out of memory). */
sy_detok *sy_detok_new(const sy_tokenizer *t, bool skip_special);
/*
 * Starts after context ids (typically the prompt) whose text is not
 * emitted: the pieces pushed afterwards join up to decode(context + pushed)
 * minus decode(context), so decoder steps that act only at the start of a
 * sequence (the SentencePiece leading-space strip) are not repeated. Ids
 * out of range in the context are ignored. NULL when out of memory.
 */
sy_detok *sy_detok_new_after(const sy_tokenizer *t, const int32_t *context, size_t n_context, bool skip_special);
void sy_detok_free(sy_detok *d);
/*
 * Sets *piece / *len to the new text that is now final (valid until the
 * next call; *len may be 0 while a character or a byte run is incomplete).
 * Returns SY_OK, or SY_ERR_INVALID (an id out of range, a push after
 * finish) or SY_ERR_NOMEM. The pieces of a sequence join up to exactly
 * what sy_tokenizer_decode gives for it.
 */
int sy_detok_push(sy_detok *d, int32_t id, const char **piece, size_t *len, sy_err *err);
/* Flushes what is held back; later calls return 0 bytes. Same returns as push. */
int sy_detok_finish(sy_detok *d, const char **piece, size_t *len, sy_err *err);

#endif
