#include "config.h"

#include "engine/generate.h"
#include "util/util.h"

#include <stdlib.h>
#include <string.h>

static bool is_eos(const sy_engine *e, int32_t tok)
{
    const sy_model_config *c = sy_engine_model_config(e);
    for (int32_t i = 0; i < c->n_eos; i++)
        if (c->eos_ids[i] == tok)
            return true;
    const int32_t *ids = NULL;
    size_t n = sy_tokenizer_eos(sy_engine_tokenizer(e), &ids);
    for (size_t i = 0; i < n; i++)
        if (ids[i] == tok)
            return true;
    return false;
}

int sy_generate(sy_engine *e, const int32_t *prompt, int32_t n_prompt, const sy_gen_params *p, sy_gen_token_fn fn,
                void *arg, sy_gen_stats *stats, sy_err *err)
{
    memset(stats, 0, sizeof *stats);
    stats->prompt_tokens = n_prompt;
    stats->finish = "length";
    const int32_t max_len = sy_engine_max_seq_len(e);
    if (n_prompt <= 0)
        return sy_err_set(err, SY_ERR_INVALID, "the prompt is empty: generation needs at least one token");
    if (n_prompt >= max_len)
        return sy_err_set(err, SY_ERR_INVALID, "the prompt has %d tokens; the model's context is %d", n_prompt, max_len);

    const sy_model_config *c = sy_engine_model_config(e);
    sy_kv_blocks *kv = sy_engine_kv(e);
    const int32_t total = n_prompt + p->max_tokens < max_len ? n_prompt + p->max_tokens : max_len;
    const int32_t n_blocks = sy_kv_blocks_for(kv, total);
    int32_t *blocks = malloc(sizeof(int32_t) * (size_t)n_blocks);
    float *logits = malloc(sizeof(float) * (size_t)c->vocab);
    sy_sampler sampler;
    int rc = sy_sampler_init(&sampler, &p->sampling, c->vocab, err);
    if (rc) {
        free(blocks);
        free(logits);
        return rc;
    }
    if (!blocks || !logits) {
        rc = sy_err_set(err, SY_ERR_NOMEM, "cannot allocate generation buffers");
        goto out;
    }
    /* Blocks are taken up front: a lone sequence either fits or fails now. */
    if (sy_kv_blocks_alloc(kv, n_blocks, blocks) != SY_OK) {
        rc = sy_err_set(err, SY_ERR_UNAVAILABLE, "the KV cache has %d free blocks, the request needs %d",
                        kv->n_free, n_blocks);
        free(blocks);
        blocks = NULL;
        goto out;
    }

    /* Without a reader of the logits the engine hands back only the pick: the greedy one, or (one rank) the
     * sampler's draw with the uniform drawn before the step, as sy_sampler_next would have drawn it after. */
    const bool pick_only = (!fn || p->fn_skips_logits) &&
                           (p->sampling.temperature <= 0.0f || sy_engine_tp_size(e) == 1);
    const bool sampled = pick_only && p->sampling.temperature > 0.0f;
    int32_t pick = 0;
    sy_sample_row row = {0};
    double t0 = sy_now();
    const int32_t chunk = sy_engine_max_batch_tokens(e);
    int32_t done = 0;
    while (done < n_prompt) {
        int32_t n = n_prompt - done < chunk ? n_prompt - done : chunk;
        sy_step_seq s = {.tokens = prompt + done,
                         .n_tokens = n,
                         .ctx_len = done,
                         .blocks = blocks,
                         .n_blocks = sy_kv_blocks_for(kv, done + n),
                         .want_logits = done + n == n_prompt,
                         .greedy_id = pick_only ? &pick : NULL};
        if (sampled && s.want_logits) {
            row = sy_sampler_row(&sampler);
            s.sample = &row;
        }
        if ((rc = sy_engine_step(e, &s, 1, logits, err)))
            goto release;
        done += n;
    }
    double t1 = sy_now();
    stats->prefill_s = t1 - t0;

    int32_t pos = n_prompt;
    for (int32_t i = 0; i < p->max_tokens; i++) {
        int32_t tok = pick_only ? pick : sy_sampler_next(&sampler, logits);
        stats->generated++;
        int stop = fn ? fn(arg, tok, pick_only ? NULL : logits) : 0;
        if (!p->ignore_eos && is_eos(e, tok)) {
            stats->finish = "stop";
            break;
        }
        if (stop || i + 1 == p->max_tokens)
            break;
        if (pos >= max_len) {
            stats->finish = "max_seq_len";
            break;
        }
        sy_step_seq s = {.tokens = &tok,
                         .n_tokens = 1,
                         .ctx_len = pos,
                         .blocks = blocks,
                         .n_blocks = sy_kv_blocks_for(kv, pos + 1),
                         .want_logits = true,
                         .greedy_id = pick_only ? &pick : NULL};
        if (sampled) {
            row = sy_sampler_row(&sampler);
            s.sample = &row;
        }
        if ((rc = sy_engine_step(e, &s, 1, logits, err)))
            goto release;
        pos++;
    }
    stats->decode_s = sy_now() - t1;
release:
    sy_kv_blocks_release(kv, blocks, n_blocks);
out:
    sy_sampler_fini(&sampler);
    free(blocks);
    free(logits);
    return rc;
}
