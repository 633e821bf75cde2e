/*
 * Token sampling on host logits: greedy at temperature 0 (lowest id wins an
 * exact tie, as the reference implementations do), otherwise temperature,
 * top-k, top-p and min-p filtering and a seeded draw. One sampler per
 * request: its random state is the request's own, so a seed reproduces.
 */
#ifndef SY_SAMPLER_H
#define SY_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>

#include "switchyard/plugin.h"

typedef struct sy_sampling {
    float temperature; /* <= 0: greedy */
    float top_p;       /* (0, 1]; 1: off */
    int32_t top_k;     /* 0: off */
    float min_p;       /* [0, 1); 0: off */
    uint64_t seed;
} sy_sampling;

typedef struct sy_sampler {
    sy_sampling p;
    int32_t vocab;
    uint64_t rng[4];
    int32_t *idx;  /* [vocab] scratch */
    float *prob;   /* [vocab] scratch */
} sy_sampler;

/* Default parameters: greedy. */
sy_sampling sy_sampling_default(void);
/* Checks ranges; the message names the parameter and the accepted range. */
int sy_sampling_check(const sy_sampling *p, sy_err *err);

int sy_sampler_init(sy_sampler *s, const sy_sampling *p, int32_t vocab, sy_err *err);
void sy_sampler_fini(sy_sampler *s);
/*
 * The greedy pick: the index the loop
 *     best = 0; for (i = 1; i < n; i++) if (x[i] > x[best]) best = i;
 * ends on. The lowest index wins a tie (-0 equals +0); NaN is never
 * greater than anything, so NaNs lose, except a NaN at index 0, which
 * nothing beats. The device argmax op (plugin.h) follows the same rule.
 */
int32_t sy_greedy_pick(const float *x, int32_t n);
/*
 * Picks the next token from vocab logits (not modified): sy_sampler_row,
 * then sy_sample_pick with it. At temperature > 0 each call draws exactly
 * one uniform from the request's random state.
 */
int32_t sy_sampler_next(sy_sampler *s, const float *logits);
/*
 * The next draw's description for the device sample op (plugin.h): the
 * parameters and, at temperature > 0, the uniform drawn now. The row then
 * stands for that draw wherever it is made (device or host): call
 * sy_sampler_next or this once per token, not both.
 */
sy_sample_row sy_sampler_row(sy_sampler *s);
/* The draw row describes, over logits[0..vocab); prob and idx are vocab-element scratch. */
int32_t sy_sample_pick(const float *logits, int32_t vocab, const sy_sample_row *row, float *prob, int32_t *idx);
/*
 * Penalises tokens already generated, in place on logits (vocab floats):
 * OpenAI's frequency (times the count) and presence (once) penalties are
 * subtracted; the repetition penalty (CTRL, as Hugging Face and vLLM apply
 * it) divides a positive logit and multiplies a negative one. counts[vocab]
 * is caller scratch holding each token's count among tokens[0..n); it must
 * be all zero on entry and is all zero again on return.
 */
void sy_apply_penalties(float *logits, int32_t *counts, const int32_t *tokens, int32_t n, float frequency,
                        float presence, float repetition);
/*
 * Speculative verification of one draft token (core/spec): logits is the
 * row that predicts the draft's position, the draft a one-hot proposal q.
 * At temperature 0 the pick is the greedy one, accepted when it equals the
 * draft (no uniform drawn). Otherwise p is the distribution sy_sampler_next
 * draws from (temperature, min_p, top_k, top_p); the draft is accepted with
 * probability min(1, p(d) / q(d)) = p(d) (one uniform), else the token is
 * drawn from the residual max(0, p - q), renormalised: p without d (a second
 * uniform). Either way the token returned is distributed as p.
 */
int32_t sy_sampler_verify(sy_sampler *s, const float *logits, int32_t draft, bool *accepted);
/* The rule itself with its uniforms given (u_accept, u_resid in [0, 1)); prob and idx are vocab-element scratch. */
int32_t sy_spec_verify_pick(const float *logits, int32_t vocab, const sy_sample_row *row, int32_t draft,
                            double u_accept, double u_resid, float *prob, int32_t *idx, bool *accepted);
/* log-softmax of logits[id] (for logprobs and tests). */
float sy_logprob(const float *logits, int32_t vocab, int32_t id);

#endif
