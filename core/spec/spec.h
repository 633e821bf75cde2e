/*
 * Speculative decoding: draft sources behind one small interface, and the
 * [speculative] configuration.
 *
 * The scheduler owns verification (serve/scheduler.c): a speculating
 * sequence's step carries its last accepted token followed by the k drafts
 * (k + 1 positions, logits for each), and the target's picks decide how
 * many drafts are kept (greedy: equal to the target's pick; sampled: the
 * rejection rule with the draft as a one-hot proposal, so the output
 * distribution is the target's). The rejected positions are rolled back:
 * n_computed falls back to the accepted length, blocks past it are freed,
 * and the prefix cache only ever registers blocks of accepted tokens.
 *
 * A source only proposes. Drafts are always the source's greedy guess,
 * which is what keeps the rejection rule this simple (q is one-hot).
 *
 * Engine thread only, like the scheduler.
 */
#ifndef SY_SPEC_H
#define SY_SPEC_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/engine.h"
#include "plugin/config.h"

struct sy_seq;

typedef enum sy_spec_method {
    SY_SPEC_NONE = 0,
    SY_SPEC_NGRAM, /* prompt lookup in the request's own tokens */
    SY_SPEC_MTP,   /* the checkpoint's num_nextn_predict_layers layers (DeepSeek-V3, GLM-4.5, GLM-5) */
    SY_SPEC_DRAFT, /* a separate small model with the same tokenizer */
} sy_spec_method;

/* [speculative], read once by sy_spec_config_read. */
typedef struct sy_spec_config {
    sy_spec_method method;
    int32_t num_draft_tokens; /* k: drafts per step and sequence */
    int32_t max_batch;        /* no speculation in a step with more decoding sequences than this */
    /* Per request: after min_tokens_for_policy drafted tokens, a request whose acceptance stays under
     * min_acceptance stops speculating (it costs a k+1 verify for about one token). */
    float min_acceptance;
    int32_t policy_window;
    /* ngram */
    int32_t ngram_min, ngram_max; /* match lengths tried, longest first */
    /* draft */
    char draft_model[4096];  /* Hugging Face directory of the draft model */
} sy_spec_config;

/* Reads and checks [speculative] (absent: method NONE). Errors name the key and file:line. */
int sy_spec_config_read(const sy_config *cfg, sy_spec_config *out, sy_err *err);
const char *sy_spec_method_name(sy_spec_method m);
/*
 * The per-request switch-off, shared by the scheduler and bench-spec: adds a
 * verify's drafted and accepted counts to the request's window; once the
 * window holds policy_window drafts it is judged and emptied. True when the
 * request accepted fewer than min_acceptance of them and stops speculating.
 */
bool sy_spec_policy_says_off(const sy_spec_config *cfg, int32_t *win_drafted, int32_t *win_accepted,
                             int32_t drafted, int32_t accepted);

/* What the last target step did for one sequence, handed to the source after acceptance. */
typedef struct sy_spec_fed {
    struct sy_seq *seq; /* tokens[0..n_tokens) are all accepted now */
    int32_t pos0;       /* first position the step fed (the KV cache had pos0 tokens before it) */
    int32_t n_fed;      /* positions the step fed */
    int32_t n_kept;     /* of them, positions whose tokens were accepted (KV valid): a prefill chunk keeps all */
    int32_t row0;       /* the step's token row of pos0 (for sy_engine_hidden-style per-row state) */
} sy_spec_fed;

typedef struct sy_spec_source sy_spec_source;

typedef struct sy_spec_source_ops {
    sy_spec_method method;
    /*
     * After every target step, before the next is planned: fed[0..n) are the
     * step's sequences (prefill chunks and verifies alike). A source that
     * keeps per-sequence state (the MTP's and the draft model's KV) catches up
     * here, while the step's hidden states are still the engine's.
     */
    int (*after_step)(sy_spec_source *src, const sy_spec_fed *fed, int32_t n, sy_err *err);
    /*
     * Drafts for the sequences about to decode: up to kmax tokens for each of
     * seqs[0..n), written to drafts[i * kmax ...], their count to n_drafts[i]
     * (0: nothing to propose; the sequence decodes plainly). Each sequence
     * has tokens[0..n_tokens) accepted, n_computed = n_tokens - 1 of them in
     * the target's KV, and blocks covering n_tokens + kmax positions already
     * (a source that writes KV at draft positions in the target's blocks, as
     * the MTP layer does, may use them; the verify overwrites them).
     */
    int (*propose)(sy_spec_source *src, struct sy_seq *const *seqs, int32_t n, int32_t kmax, int32_t *drafts,
                   int32_t *n_drafts, sy_err *err);
    /*
     * The sequence lost its KV (preempted), stopped speculating or ends: free
     * what the source keeps for it in seq->spec_state and set that to NULL.
     * The scheduler calls it on every such path, so a source keeps no table
     * of its own and a sequence never carries state into a later life.
     */
    void (*forget)(sy_spec_source *src, struct sy_seq *seq);
    void (*free)(sy_spec_source *src);
} sy_spec_source_ops;

struct sy_spec_source {
    const sy_spec_source_ops *ops;
};

/* The source cfg->method names, built on the target engine (NULL for NONE). */
int sy_spec_source_new(const sy_spec_config *cfg, const sy_config *full_cfg, sy_engine *target,
                       sy_spec_source **out, sy_err *err);

/* Per-method sources (spec_ngram.c, spec_mtp.c, spec_draft.c). */
int sy__spec_ngram_new(const sy_spec_config *cfg, sy_engine *target, sy_spec_source **out, sy_err *err);
int sy__spec_mtp_new(const sy_spec_config *cfg, sy_engine *target, sy_spec_source **out, sy_err *err);
int sy__spec_draft_new(const sy_spec_config *cfg, const sy_config *full_cfg, sy_engine *target,
                       sy_spec_source **out, sy_err *err);

/*
 * /metrics names (serve/metrics.c), labelled {method="ngram"|"mtp"|"draft"}:
 *   switchyard_spec_draft_tokens_total     drafts proposed and verified
 *   switchyard_spec_accepted_tokens_total  drafts accepted
 *   switchyard_spec_verifies_total         sequence verifications (one per speculating sequence per step)
 * acceptance rate = accepted / draft tokens; mean accepted length = tokens emitted per
 * verification = 1 + accepted / verifies (the target's own pick always counts, as SGLang reports it).
 */

#endif
