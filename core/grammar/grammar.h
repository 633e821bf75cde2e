/*
 * Constrained decoding: grammars and the token masks they allow.
 *
 * A grammar is built from sources (GBNF text, JSON schemas, regexes,
 * choices), compiled once (immutable, shared by every request that uses
 * it: sy_grammar_cache), and run per request by a matcher that tracks
 * what has been generated and fills, before each token, the mask of
 * vocabulary entries that keep the output inside the language.
 *
 * Bytes, not code points: a token's bytes are what the detokeniser emits
 * for it, so a token that ends inside a UTF-8 character is allowed when
 * some continuation completes it. Special tokens (sy_gvocab) are allowed
 * only where the grammar spells their whole text as one quoted literal
 * (so a tool-call grammar's "<tool_call>" admits GLM's special token, but
 * a JSON string never admits "<|im_end|>"). EOS ids are allowed exactly
 * where the grammar may end.
 *
 * The GBNF dialect (docs/structured-outputs.md) is llama.cpp's: rules
 * `name ::= alternatives`, "literals" with C escapes, [character classes]
 * with ranges and ^, ( groups ), * + ? {m} {m,} {m,n}, # comments.
 */
#ifndef SY_GRAMMAR_H
#define SY_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "switchyard/plugin.h"

/* ------------------------------------------------------------ sources */

typedef struct sy_gsrc sy_gsrc;

sy_gsrc *sy_gsrc_new(void);
void sy_gsrc_free(sy_gsrc *src);

/*
 * Appends GBNF rules. where names the text in errors ("constraint", a
 * file name); an error gives where:line:column and what was expected.
 */
int sy_gsrc_add_gbnf(sy_gsrc *src, const char *text, const char *where, sy_err *err);

/*
 * Defines rule `name` as the JSON texts valid against schema (a JSON
 * schema as text). Helper rules it needs get names that start with
 * `name` and a "-". path is where the schema sits in the request
 * ("response_format.json_schema.schema"): a keyword that cannot be
 * enforced is SY_ERR_INVALID with its JSON path under path, never dropped.
 * Output JSON is compact except for the single spaces a model may put
 * after ':' and ',' (bounded, so every output terminates).
 */
int sy_gsrc_add_json_schema(sy_gsrc *src, const char *name, const char *schema_json, const char *path,
                            sy_err *err);
/*
 * An object schema without additionalProperties: JSON schema allows other
 * properties, but OpenAI's strict mode, xgrammar and llama.cpp generate
 * only the declared ones, and so does sy_gsrc_add_json_schema (both are
 * valid). With SY_JSON_SCHEMA_ALLOW_EXTRA such objects admit extra
 * properties too (any value, names no declared property has).
 */
#define SY_JSON_SCHEMA_ALLOW_EXTRA 1u
int sy_gsrc_add_json_schema_flags(sy_gsrc *src, const char *name, const char *schema_json, const char *path,
                                  unsigned flags, sy_err *err);
/* Rule `name`: any JSON value (object_only: any JSON object). */
int sy_gsrc_add_json_any(sy_gsrc *src, const char *name, bool object_only, sy_err *err);
/* Rule `name`: a full match of the regex (ECMAScript subset as JSON schema's
 * `pattern` uses it; unsupported constructs are SY_ERR_INVALID naming path). */
int sy_gsrc_add_regex(sy_gsrc *src, const char *name, const char *regex, const char *path, sy_err *err);
/* Rule `name`: exactly one of the n strings. */
int sy_gsrc_add_choice(sy_gsrc *src, const char *name, const char *const *choices, size_t n, sy_err *err);
/* Rule `name`: any UTF-8 text that does not contain stop (stop itself not included). */
int sy_gsrc_add_text_until(sy_gsrc *src, const char *name, const char *stop, sy_err *err);

/* The sources as GBNF text (for errors, tests and --debug); malloc'd. */
char *sy_gsrc_dump(const sy_gsrc *src);

/* ------------------------------------------------------------ grammars */

typedef struct sy_grammar sy_grammar;

/* Compiles src with root rule `root`. Undefined rules, left recursion and
 * empty languages are SY_ERR_INVALID naming the rule. */
int sy_grammar_compile(const sy_gsrc *src, const char *root, sy_grammar **out, sy_err *err);
void sy_grammar_free(sy_grammar *g);

/* ------------------------------------------------------------ vocabulary */

/* The tokens as byte strings, prepared once per tokenizer (a trie and the
 * tables the masks use). */
typedef struct sy_gvocab sy_gvocab;

/*
 * bytes[i]/lens[i]: what token i decodes to (NULL/0: never allowed, e.g.
 * an unused id); special[i]: a special token (see the head of the file);
 * eos: ids allowed where the grammar may end.
 */
int sy_gvocab_new(int32_t n_vocab, const char *const *bytes, const size_t *lens, const bool *special,
                  const int32_t *eos, size_t n_eos, sy_gvocab **out, sy_err *err);
void sy_gvocab_free(sy_gvocab *v);
int32_t sy_gvocab_size(const sy_gvocab *v);

/*
 * The vocabulary of a loaded tokenizer: each id's bytes as
 * sy_tokenizer_token_bytes gives them (GPT-2 byte-level pieces mapped
 * back to bytes, SentencePiece's U+2581 as a space and <0xHH> as the
 * byte), special added tokens as special. eos/n_eos: the ids allowed where
 * the grammar may end; eos NULL takes the tokenizer's (sy_tokenizer_eos).
 */
typedef struct sy_tokenizer sy_tokenizer;
int sy_gvocab_from_tokenizer(const sy_tokenizer *t, const int32_t *eos, size_t n_eos, sy_gvocab **out, sy_err *err);

/* ------------------------------------------------------------ matching */

typedef struct sy_gmatcher sy_gmatcher;

/* g and v must outlive the matcher. */
int sy_gmatcher_new(const sy_grammar *g, const sy_gvocab *v, sy_gmatcher **out, sy_err *err);
void sy_gmatcher_free(sy_gmatcher *m);
/* Words of a mask: (n_vocab + 31) / 32. */
size_t sy_gmask_words(const sy_gvocab *v);
/* Bit i of mask (bit i % 32 of word i / 32) is set iff token i may come next. */
int sy_gmatcher_fill_mask(sy_gmatcher *m, uint32_t *mask, sy_err *err);
/* Advances by token tok; SY_ERR_INVALID (nothing changes) when tok is not allowed. */
int sy_gmatcher_accept_token(sy_gmatcher *m, int32_t tok, sy_err *err);
/* Advances by text (a forced prefix; tests); false, and nothing changes, when it leaves the language. */
bool sy_gmatcher_accept_bytes(sy_gmatcher *m, const char *s, size_t n);
/* The text so far is a sentence of the language (EOS allowed). */
bool sy_gmatcher_can_end(const sy_gmatcher *m);
/* ... and no byte may follow (the request should end). */
bool sy_gmatcher_done(const sy_gmatcher *m);
/* Whole-text check without a vocabulary (tests, oracles): text is a sentence of g. */
bool sy_grammar_accepts(const sy_grammar *g, const char *text, size_t n);

/* ------------------------------------------------------------ cache */

/* Compiled grammars by (kind, text), shared and reference-counted, so a
 * schema sent by every request compiles once. Thread-safe. */
typedef struct sy_grammar_cache sy_grammar_cache;

sy_grammar_cache *sy_grammar_cache_new(size_t max_entries);
void sy_grammar_cache_free(sy_grammar_cache *c);
/* Compiles with build(arg, src, err) under root "root" on a miss; *out holds a reference. */
int sy_grammar_cache_get(sy_grammar_cache *c, const char *key, size_t key_len,
                         int (*build)(void *arg, sy_gsrc *src, sy_err *err), void *arg, const sy_grammar **out,
                         sy_err *err);
void sy_grammar_cache_release(sy_grammar_cache *c, const sy_grammar *g);

#endif
