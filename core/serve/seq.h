/*
 * One request inside the core: its tokens (prompt, then what it generated),
 * its KV blocks, and its output state (sampler, detokeniser, stop and
 * reasoning filter). Made on the submitting thread, then owned by the
 * engine thread until it finishes.
 */
#ifndef SY_SEQ_H
#define SY_SEQ_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/engine.h"
#include "engine/sampler.h"
#include "grammar/grammar.h"
#include "serve/text_filter.h"
#include "toolcall/toolcall.h"

struct sy_guide;

typedef struct sy_seq {
    uint64_t id;
    uint64_t order; /* arrival: FCFS order, and who is youngest when preempting */
    struct sy_seq *prev, *next;

    /* Prompt followed by the generated tokens. */
    int32_t *tokens;
    int32_t n_tokens, cap_tokens, n_prompt;
    /* Tokens whose K/V are in blocks; the rest are fed in the next steps. */
    int32_t n_computed;
    int32_t *blocks;
    int32_t n_blocks, cap_blocks;
    /* Hash-chain keys of the leading full blocks (valid across preemption: they hash tokens, not blocks). */
    uint64_t *hashes;
    int32_t n_hashed;
    int32_t n_registered; /* leading blocks offered to the prefix cache (reset when blocks are dropped) */
    int32_t cached_tokens; /* prompt tokens found in the prefix cache */
    int32_t n_preempted;
    int32_t step_tokens; /* tokens this seq carries in the step being built */
    /* Speculative decoding (serve/scheduler.c): drafts this step verifies (in tokens[n_tokens..]), whether the
     * request still speculates, and the current policy window's drafted and accepted counts. */
    int32_t spec_k;
    bool spec_off;
    int32_t spec_win_drafted, spec_win_accepted;
    /* The request's num_draft_tokens when it gave 1..K: at most this many drafts per step; 0: the server's
     * [speculative] num_draft_tokens (a request that asked for 0 starts with spec_off). */
    int32_t spec_max;
    /* What the speculation source keeps for this request (the MTP's hidden state, the draft model's KV), opaque
     * to everyone else: the source allocates it and its forget frees it and sets it back to NULL, so every path
     * that ends a sequence or drops its KV (retire, preemption, switch-off) calls forget. */
    void *spec_state;
    bool running;

    /* The request's rules (copied at submit). */
    int32_t max_tokens, min_tokens, top_logprobs;
    float frequency_penalty, presence_penalty, repetition_penalty;
    int32_t *stop_ids;
    size_t n_stop_ids;
    bool ignore_eos;
    void (*on_event)(void *user, const struct sy_event *ev);
    void *user;
    /* logit_bias, added to the logits before sampling. */
    int32_t *bias_ids;
    float *bias;
    size_t n_bias;

    /* Constrained decoding (a request constraint or a forced tool call); matcher NULL when free. */
    struct sy_guide *guide;
    const sy_grammar *grammar; /* a reference from the guide's cache */
    sy_gmatcher *matcher;
    bool wait_think;     /* the output is inside <think>: the constraint starts after </think> */
    bool may_open_think; /* the first token may be the guide's <think> token (then wait_think) */
    char think_tail[8];  /* the last bytes seen while waiting, to find a </think> split across tokens */
    size_t n_think_tail;

    /* Tool calls (request.tools_json with tool_choice not NONE); tparser NULL when off. */
    sy_tools *tools;
    sy_tool_parser *tparser;
    sy_tool_out tout; /* what the parser made of this event's text */

    /* Output state. */
    sy_sampler sampler;
    int32_t *pen_counts; /* [vocab] scratch when a penalty is on */
    sy_detok *detok;
    sy_text_filter filter;
    sy_buf content, reasoning;
    int32_t n_generated;

    /* Timing (sy_now seconds) for the latency histograms. */
    double t_arrival, t_first, t_last;
} sy_seq;

/* What output processing needs from the engine, built once per scheduler. */
typedef struct sy_out_ctx {
    const sy_tokenizer *tok;
    int32_t vocab;
    int32_t max_seq_len;
    int32_t *eos;
    size_t n_eos;
    float *work;       /* [vocab] logits after penalties and masks */
    uint32_t *mask;    /* [mask_words] the constraint's allowed tokens */
    size_t mask_words;
    int32_t *top_ids;  /* [20] */
    float *top_lps;    /* [20] */
    /* Speculative verification's rule; NULL: sy_sampler_verify (tests put a broken one here to see it caught). */
    int32_t (*verify)(sy_sampler *s, const float *dist, int32_t draft, bool *accepted);
} sy_out_ctx;

/*
 * Validates req against the engine and copies it; with guide (the
 * server's; NULL: constraints and tools are refused) it also compiles the
 * request's constraint and sets up its tool-call parsing (serve/guide.h).
 * Errors: SY_ERR_INVALID naming the field, SY_ERR_NOMEM.
 */
int sy_seq_new(const sy_request *req, sy_engine *e, struct sy_guide *guide, uint64_t id, sy_seq **out,
               sy_err *err);
void sy_seq_free(sy_seq *s);
/*
 * Checks req's num_draft_tokens (ABI 1.3; read only when struct_size
 * covers it) against the server's [speculative] num_draft_tokens k (0: the
 * server does not speculate) and sets s->spec_max and s->spec_off from it.
 * Checked here, not only in a frontend, because any frontend plugin may
 * submit. Errors: SY_ERR_INVALID naming num_draft_tokens.
 */
int sy_seq_set_draft_limit(sy_seq *s, const sy_request *req, int32_t k, sy_err *err);

int sy_out_ctx_init(sy_out_ctx *o, sy_engine *e, sy_err *err);
void sy_out_ctx_fini(sy_out_ctx *o);

/*
 * Takes the logits after the sequence's last token: samples, appends the
 * token, emits its TEXT event and, when finished, the DONE event. Returns
 * 1 when the sequence finished, 0 to go on, or an sy_status (< 0) on
 * failure (the caller then fails the request).
 */
int sy_seq_on_logits(sy_seq *s, sy_out_ctx *o, const float *logits, sy_err *err);
/*
 * sy_seq_on_logits for one row of a speculative verify (core/spec): the
 * row predicting the position of draft (< 0: the row after the last draft,
 * a plain sy_seq_on_logits). The same rules act on the row; the token is
 * sy_sampler_verify's (greedy: the pick, accepted when equal to the draft;
 * sampled: the rejection rule, distributed as the plain draw). *accepted
 * says whether the token is the draft (then the next row is valid).
 */
int sy_seq_on_verify(sy_seq *s, sy_out_ctx *o, const float *logits, int32_t draft, bool *accepted, sy_err *err);
/*
 * Whether the next token is the plain greedy pick of the model's logits:
 * temperature 0, no penalty, no logit_bias, no constraint, no logprobs and
 * min_tokens reached (before it EOS and stop ids are masked). The engine may then pick on the device and
 * the caller passes the pick to sy_seq_on_pick instead of the logits.
 */
bool sy_seq_greedy_only(const sy_seq *s);
/*
 * The same at temperature > 0: the next token is the sampler's plain draw
 * from the model's logits. The caller then draws the row's uniform with
 * sy_sampler_row(&s->sampler), lets the engine make the draw (on the device
 * when it can) and passes the id to sy_seq_on_pick.
 */
bool sy_seq_sample_only(const sy_seq *s);
/* sy_seq_on_logits for a sequence whose token tok was picked for it (sy_seq_greedy_only or sy_seq_sample_only held). */
int sy_seq_on_pick(sy_seq *s, sy_out_ctx *o, int32_t tok, sy_err *err);
/* Sends the final event of a request that did not finish by itself. */
void sy_seq_emit_done(sy_seq *s, const char *finish_reason);
void sy_seq_emit_error(sy_seq *s, int status, const char *msg);

#endif
