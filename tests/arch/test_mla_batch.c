/*
 * MLA (and the DSA indexer) in a continuous batch: three sequences decoded
 * one at a time and then together in shared steps (one prefilled in two
 * chunks while the others decode) must give the same logits, and a
 * copy-on-write fork of a sequence's blocks must continue exactly like the
 * original. Blocks of 4 tokens, so every sequence spans several blocks.
 *
 *     test_mla_batch MODEL_DIR PLUGIN_DIR
 */
#include "config.h"

#include "engine/engine.h"
#include "engine/kv_blocks.h"
#include "plugin/config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NSEQ 3
#define DECODE 6
#define MAXLEN 32
#define TOL 1e-4f

typedef struct seq {
    int32_t ids[MAXLEN];
    int32_t n_prompt, n; /* prompt length; ids known so far */
    int32_t blocks[MAXLEN];
    int32_t n_blocks;
} seq;

static int argmax(const float *v, int32_t n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        b = v[i] > v[b] ? i : b;
    return b;
}

static float max_diff(const float *a, const float *b, int32_t n)
{
    float d = 0.0f;
    for (int32_t i = 0; i < n; i++) {
        const float x = fabsf(a[i] - b[i]);
        d = x > d || isnan(x) ? x : d;
    }
    return d;
}

static int take_blocks(sy_engine *e, seq *s, int32_t tokens)
{
    sy_kv_blocks *kv = sy_engine_kv(e);
    s->n_blocks = sy_kv_blocks_for(kv, tokens);
    return sy_kv_blocks_alloc(kv, s->n_blocks, s->blocks);
}

static sy_step_seq step_of(const seq *s, int32_t from, int32_t n, bool logits)
{
    return (sy_step_seq){.tokens = s->ids + from, .n_tokens = n, .ctx_len = from, .blocks = s->blocks,
                         .n_blocks = s->n_blocks, .want_logits = logits};
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: test_mla_batch MODEL_DIR PLUGIN_DIR\n");
        return 2;
    }
    sy_err err = {{0}};
    sy_config *cfg = sy_config_new();
    char buf[4200];
    snprintf(buf, sizeof buf, "model.path=%s", argv[1]);
    const char *sets[] = {"device.plugin=cpu",         "moe.plugin=cpu",       "comm.plugin=local",
                          "scheduler.max_batch_tokens=64", "scheduler.kv_block_size=4", "model.max_seq_len=64", buf};
    /* make check pins matmul = f32 through SWITCHYARD_SET (Makefile.am), as the CLI applies it */
    if (sy_config_apply_overrides(cfg, sets, sizeof sets / sizeof sets[0], &err)) {
        fprintf(stderr, "FAIL: config: %s\n", err.msg);
        return 1;
    }
    sy_engine *e = NULL;
    sy_engine_opts eo = {.plugin_dirs = argv[2], .progress = false};
    if (sy_engine_open(cfg, &eo, &e, &err)) {
        fprintf(stderr, "FAIL: engine on %s: %s\n", argv[1], err.msg);
        return 1;
    }
    const int32_t V = sy_engine_model_config(e)->vocab;
    const int32_t lens[NSEQ] = {9, 5, 13};
    float *alone = malloc(sizeof(float) * (size_t)(NSEQ * (DECODE + 1)) * (size_t)V);
    float *row = malloc(sizeof(float) * NSEQ * (size_t)V);
    seq s[NSEQ];
    int fails = 0;

    /* Alone: prefill, then DECODE greedy steps; remember every logits row. */
    for (int i = 0; i < NSEQ; i++) {
        memset(&s[i], 0, sizeof s[i]);
        s[i].n_prompt = s[i].n = lens[i];
        for (int32_t t = 0; t < lens[i]; t++)
            s[i].ids[t] = (int32_t)((37 * (i + 1) + 101 * t) % (V - 3));
        if (take_blocks(e, &s[i], lens[i] + DECODE)) {
            fprintf(stderr, "FAIL: no KV blocks for sequence %d\n", i);
            return 1;
        }
        for (int k = 0; k <= DECODE; k++) {
            const int32_t from = k == 0 ? 0 : s[i].n - 1, n = k == 0 ? s[i].n : 1;
            sy_step_seq st = step_of(&s[i], from, n, true);
            float *out = alone + (size_t)(i * (DECODE + 1) + k) * (size_t)V;
            if (sy_engine_step(e, &st, 1, out, &err)) {
                fprintf(stderr, "FAIL: sequence %d alone, step %d: %s\n", i, k, err.msg);
                return 1;
            }
            if (k < DECODE)
                s[i].ids[s[i].n++] = argmax(out, V);
        }
        sy_kv_blocks_release(sy_engine_kv(e), s[i].blocks, s[i].n_blocks);
    }

    /* Together: fresh blocks; step 0 prefills 0 and 2 and the first 3 tokens of 1, step 1 the rest of 1; then all
     * decode in the same steps, teacher-forced with the ids chosen alone. */
    for (int i = 0; i < NSEQ; i++)
        if (take_blocks(e, &s[i], lens[i] + DECODE)) {
            fprintf(stderr, "FAIL: no KV blocks for the batch\n");
            return 1;
        }
    float worst = 0.0f;
    {
        sy_step_seq st[NSEQ] = {step_of(&s[0], 0, lens[0], true), step_of(&s[1], 0, 3, false),
                                step_of(&s[2], 0, lens[2], true)};
        if (sy_engine_step(e, st, NSEQ, row, &err)) {
            fprintf(stderr, "FAIL: batched prefill: %s\n", err.msg);
            return 1;
        }
        const float d0 = max_diff(row, alone, V), d2 = max_diff(row + V, alone + (size_t)2 * (DECODE + 1) * V, V);
        worst = d0 > d2 ? d0 : d2;
        sy_step_seq rest = step_of(&s[1], 3, lens[1] - 3, true);
        if (sy_engine_step(e, &rest, 1, row, &err)) {
            fprintf(stderr, "FAIL: second prefill chunk: %s\n", err.msg);
            return 1;
        }
        const float d1 = max_diff(row, alone + (size_t)(DECODE + 1) * V, V);
        worst = d1 > worst ? d1 : worst;
    }
    for (int k = 1; k <= DECODE; k++) {
        sy_step_seq st[NSEQ];
        for (int i = 0; i < NSEQ; i++)
            st[i] = step_of(&s[i], lens[i] + k - 1, 1, true);
        if (sy_engine_step(e, st, NSEQ, row, &err)) {
            fprintf(stderr, "FAIL: batched decode step %d: %s\n", k, err.msg);
            return 1;
        }
        for (int i = 0; i < NSEQ; i++) {
            const float d = max_diff(row + (size_t)i * V, alone + (size_t)(i * (DECODE + 1) + k) * V, V);
            worst = d > worst ? d : worst;
        }
    }
    if (!(worst <= TOL)) {
        fprintf(stderr, "FAIL: batched logits differ from the sequences alone by %g (tolerance %g)\n", (double)worst,
                (double)TOL);
        fails++;
    } else {
        printf("ok   %d sequences in shared steps (chunked prefill + decode) = alone: max abs diff %.3g\n", NSEQ,
               (double)worst);
    }

    /* Fork sequence 2 after its prompt + 2 tokens: copy its blocks, then decode token 3 from the copy. */
    {
        seq f = s[2];
        const int32_t ctx = lens[2] + 2;
        if (take_blocks(e, &f, ctx + 1) ||
            sy_engine_copy_blocks(e, s[2].blocks, f.blocks, sy_kv_blocks_for(sy_engine_kv(e), ctx), &err)) {
            fprintf(stderr, "FAIL: fork: %s\n", err.msg);
            return 1;
        }
        sy_step_seq st = step_of(&f, ctx, 1, true);
        if (sy_engine_step(e, &st, 1, row, &err)) {
            fprintf(stderr, "FAIL: decode from the fork: %s\n", err.msg);
            return 1;
        }
        const float d = max_diff(row, alone + (size_t)(2 * (DECODE + 1) + 3) * V, V);
        if (!(d <= TOL)) {
            fprintf(stderr, "FAIL: the forked sequence's next logits differ by %g\n", (double)d);
            fails++;
        } else {
            printf("ok   copy-on-write fork continues like the original: max abs diff %.3g\n", (double)d);
        }
        sy_kv_blocks_release(sy_engine_kv(e), f.blocks, f.n_blocks);
    }
    for (int i = 0; i < NSEQ; i++)
        sy_kv_blocks_release(sy_engine_kv(e), s[i].blocks, s[i].n_blocks);
    free(alone);
    free(row);
    sy_engine_close(e);
    sy_config_free(cfg);
    return fails ? 1 : 0;
}
