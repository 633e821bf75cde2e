/*
 * What steers a request's output beyond sampling: its constraint (a
 * grammar compiled once per distinct text in a host-wide cache, run by a
 * matcher per request over the engine's token vocabulary) and its tool
 * calls (the model family's parser, and the grammar that forces a call
 * for tool_choice "required" or a named function). One guide per server:
 * submitting threads set requests up through it, the engine thread masks
 * and advances them (docs/structured-outputs.md, "In the server").
 */
#ifndef SY_SERVE_GUIDE_H
#define SY_SERVE_GUIDE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "engine/engine.h"
#include "grammar/grammar.h"
#include "serve/seq.h"
#include "toolcall/toolcall.h"

typedef struct sy_guide {
    const sy_tokenizer *tok;
    int32_t vocab; /* the model's */
    int32_t *eos;  /* the model's and the tokenizer's EOS ids: allowed where a grammar may end */
    size_t n_eos;
    sy_grammar_cache *cache;
    pthread_mutex_t lock; /* guards the vocabulary's build on first use */
    sy_gvocab *gvocab;    /* NULL until a constrained request needs it */
    int gvocab_rc;        /* a failed build is not retried: every request gets its error */
    char gvocab_err[512];
    const sy_tool_family *family; /* NULL: this model writes no tool-call format we know */
    char family_from[48];         /* "[model] tool_parser" or "the chat template" */
    int32_t *marker_ids;          /* special tokens of the family's markup */
    size_t n_marker_ids;
    int32_t think_open; /* the token whose text is "<think>"; -1 when none */
} sy_guide;

/*
 * tool_parser: [model] tool_parser ("" to detect the family from
 * template_source, which may be NULL). An unknown name is SY_ERR_INVALID
 * listing the known ones.
 */
int sy_guide_init(sy_guide *g, sy_engine *e, const char *tool_parser, const char *template_source, sy_err *err);
void sy_guide_fini(sy_guide *g);

/*
 * At submit, on the submitting thread: the request's constraint and tools
 * into s. in_think: the output starts inside a <think> the prompt opened
 * (request.reasoning only). Errors are SY_ERR_INVALID naming the field
 * (constraint_path, "tools[1].function...", "tool_choice").
 */
int sy_guide_seq_setup(sy_guide *g, const sy_request *r, sy_seq *s, bool in_think, uint64_t seed, sy_err *err);
void sy_guide_seq_free(sy_seq *s);

/* Whether the constraint masks s's next token (false when free or waiting for </think>). */
bool sy_guide_masks(const sy_seq *s);
/* Sets work[i] to -inf for every token the constraint does not allow next. */
int sy_guide_apply_mask(sy_seq *s, sy_out_ctx *o, float *work, sy_err *err);
/*
 * After s chose tok (neither EOS nor a stop id): advances its matcher, or
 * the wait for </think> (text: the token's bytes as the detokeniser gave
 * them). *done: the constraint is complete and nothing may follow.
 */
int sy_guide_accept(sy_seq *s, int32_t tok, const char *text, size_t len, bool *done, sy_err *err);
/* Whether the constraint allows the output to end here (EOS). */
bool sy_guide_can_end(const sy_seq *s);

/* Whether tok is one of the markup's special tokens (passed to the parser as a special piece). */
bool sy_guide_is_marker(const sy_seq *s, int32_t tok);
/* Feeds output text (after the stop and think filter) to s's tool parser, appending to s->tout. */
int sy_guide_route(sy_seq *s, const char *text, size_t len, bool special, bool final, sy_err *err);

#endif
