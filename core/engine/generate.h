/*
 * Single-sequence generation on an engine: chunked prefill of the prompt,
 * then one token per step until n tokens, an EOS (unless ignore_eos) or
 * max_seq_len. Used by `switchyard generate`, the benchmarks and tests.
 */
#ifndef SY_GENERATE_H
#define SY_GENERATE_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/engine.h"
#include "engine/sampler.h"

typedef struct sy_gen_params {
    int32_t max_tokens;
    sy_sampling sampling;
    bool ignore_eos;
    /* The token callback does not read its logits: greedy steps may then pick
     * on the device and pass it NULL (as does a NULL callback). */
    bool fn_skips_logits;
} sy_gen_params;

/*
 * Called once per generated token with the logits that chose it (vocab
 * floats, host memory; NULL with fn_skips_logits when the device picked).
 * Return non-zero to stop early.
 */
typedef int (*sy_gen_token_fn)(void *arg, int32_t token, const float *logits);

typedef struct sy_gen_stats {
    int32_t prompt_tokens;
    int32_t generated;
    double prefill_s; /* prompt in, first token's logits out */
    double decode_s;  /* the remaining steps */
    const char *finish; /* "length", "stop" (EOS) or "max_seq_len" */
} sy_gen_stats;

int sy_generate(sy_engine *e, const int32_t *prompt, int32_t n_prompt, const sy_gen_params *p, sy_gen_token_fn fn,
                void *arg, sy_gen_stats *stats, sy_err *err);

#endif
