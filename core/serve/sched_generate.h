/*
 * One sequence through the scheduler, for `switchyard generate` with
 * [speculative] on: the same verification, rollback and output rules as
 * serving (no second copy of them), with sy_generate's parameters and
 * callback. Without speculation the command keeps using sy_generate.
 */
#ifndef SY_SCHED_GENERATE_H
#define SY_SCHED_GENERATE_H

#include "engine/generate.h"
#include "serve/scheduler.h"

/*
 * Generates from prompt like sy_generate; fn gets each token with NULL
 * logits (the scheduler keeps none). sched_stats (may be NULL) gets the
 * scheduler's counters at the end, the speculative ones among them.
 */
int sy_sched_generate(sy_engine *e, const sy_config *cfg, const int32_t *prompt, int32_t n_prompt,
                      const sy_gen_params *p, sy_gen_token_fn fn, void *arg, sy_gen_stats *stats,
                      sy_sched_stats *sched_stats, sy_err *err);

#endif
