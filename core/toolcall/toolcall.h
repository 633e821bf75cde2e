/*
 * Tool calls in model output: one parser per model family's markup, fed
 * the output text as it is generated, giving back the text that is
 * content and the calls as OpenAI-style pieces (sy_tool_call_delta:
 * index, id and name first, then the arguments in pieces). The same
 * families give the grammar that forces a well-formed call when the
 * request's tool_choice is "required" or names a function.
 *
 * Arguments always come out as a JSON object text whose values have the
 * types the tool's parameters declare (GLM writes every value as raw text:
 * "5" for an integer parameter becomes 5, for a string parameter "5").
 */
#ifndef SY_TOOLCALL_H
#define SY_TOOLCALL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grammar/grammar.h"
#include "serve/text_filter.h" /* sy_buf */
#include "switchyard/plugin.h"

/* ------------------------------------------------------------ families */

typedef struct sy_tool_family sy_tool_family; /* static, never freed */

/* By name ([model] tool_parser): "glm45", "glm47", "deepseek_v3",
 * "deepseek_v31", "deepseek_v32", "hermes", "llama3_json", "mistral",
 * "kimi_k2", "harmony"; NULL when unknown. */
const sy_tool_family *sy_tool_family_by_name(const char *name);
const char *sy_tool_family_name(const sy_tool_family *f);
/* The names, for errors and docs ("glm45, glm47, ..."). */
const char *sy_tool_family_list(void);
/* The family whose markup a chat template's source writes; NULL when it writes none we know. */
const sy_tool_family *sy_tool_family_detect(const char *template_source);
/* Special-token text the family's markup uses (so the host keeps those
 * tokens' text in the stream it parses); NULL-terminated. */
const char *const *sy_tool_family_markers(const sy_tool_family *f);

/* ------------------------------------------------------------ tools */

/* A request's tools, parsed and checked once. */
typedef struct sy_tools sy_tools;

/* tools_json: [{"type":"function","function":{"name","description","parameters"}}, ...].
 * Errors are SY_ERR_INVALID naming the field ("tools[1].function.name: ..."). */
int sy_tools_parse(const char *tools_json, sy_tools **out, sy_err *err);
void sy_tools_free(sy_tools *t);
size_t sy_tools_count(const sy_tools *t);
const char *sy_tools_name(const sy_tools *t, size_t i);
/* Index of the tool called name; -1 when none. */
int sy_tools_find(const sy_tools *t, const char *name);
/* The parameters schema as compact JSON text ("{}" when none was given). */
const char *sy_tools_parameters(const sy_tools *t, size_t i);

/* ------------------------------------------------------------ parsing */

typedef struct sy_tool_parser sy_tool_parser;

/* What one push produced. Reset by the caller (sy_tool_out_reset) between
 * pushes; the deltas' strings point into the struct and stay valid until
 * the next reset. */
typedef struct sy_tool_out {
    sy_buf content;   /* text that is message content */
    sy_buf reasoning; /* reasoning the markup itself carries (harmony's analysis channel) */
    sy_tool_call_delta *deltas;
    size_t n_deltas, cap_deltas;
    sy_buf strings;   /* storage behind the deltas' pointers */
    size_t *offsets;  /* internal: where each delta's strings sit in strings */
} sy_tool_out;

void sy_tool_out_reset(sy_tool_out *o);
void sy_tool_out_fini(sy_tool_out *o);

/* seed makes call ids reproducible ("call_" and 24 characters; Mistral's 9;
 * an id the model writes, Kimi's "functions.NAME:IDX" or Mistral's [CALL_ID],
 * is kept). tools (may be NULL: values untyped) must outlive the parser; a
 * call of a name it does not declare is still reported. */
int sy_tool_parser_new(const sy_tool_family *f, const sy_tools *tools, uint64_t seed, sy_tool_parser **out,
                       sy_err *err);
void sy_tool_parser_free(sy_tool_parser *p);
/*
 * Feeds the next piece of output. special: the piece is one special
 * token's whole text: a marker of the family's markup (one of
 * sy_tool_family_markers) is read as markup and also ends a raw value or
 * a JSON value it interrupts (not a JSON string: there it is text); other
 * special text is dropped. Markup written as plain text is recognised
 * too, so a piece may be any part of the output, down to one byte.
 * final: the output ended; what is held back is flushed (text that turned
 * out not to be a call goes to content) and a call left open is completed
 * (its arguments closed up to a JSON object). Returns 0, or an sy_status
 * on failure.
 */
int sy_tool_parser_push(sy_tool_parser *p, const char *text, size_t len, bool special, bool final,
                        sy_tool_out *out, sy_err *err);
/* Calls begun so far. */
int32_t sy_tool_parser_calls(const sy_tool_parser *p);

/* ------------------------------------------------------------ grammar */

/*
 * Defines rule "root" in src: one call (only_name: of that tool) or, with
 * parallel, one or more calls, in the family's syntax, arguments valid
 * against each tool's parameters. Schema keywords that cannot be enforced
 * are SY_ERR_INVALID naming "tools[i].function.parameters...".
 */
int sy_tool_family_grammar(const sy_tool_family *f, const sy_tools *tools, const char *only_name, bool parallel,
                           sy_gsrc *src, sy_err *err);

#endif
