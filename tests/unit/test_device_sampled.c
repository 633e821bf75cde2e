/*
 * Sampled picks (sy_step_seq.sample) on the real engine: in one step a
 * sequence wanting its logits, two sampled sequences with their own
 * parameters and uniforms, and a greedy one. Each pick must equal the host
 * draw (sy_sample_pick) on that sequence's row of the step where every
 * sequence wants its logits, and the one logits row handed back must be
 * exactly its row. With [scheduler] device_sampling = auto the cpu device's
 * sample op draws (the counters count 2 draws and the greedy pick); with off
 * the host draws from copied rows and the counters stay 0. A sample row
 * without a place for the pick is refused, naming the sequence.
 * Runs on ../shared's tiny-llama (untied head) and stories260k (tied).
 */
#include "config.h"

#include "engine/engine.h"
#include "engine/sampler.h"
#include "engine_sampling.h"
#include "test_check.h"

#include <stdlib.h>
#include <string.h>

enum { NSEQ = 4, PROMPT = 7 };

/* kind[s]: 0 wants its logits, 1 only the greedy pick, 2 the draw rows[s]; picks[s] gets 1's and 2's ids. */
static int step(sy_engine *e, int32_t prompts[NSEQ][PROMPT], int32_t *blocks, const int *kind,
                const sy_sample_row *rows, float *logits, int32_t *picks, sy_err *err)
{
    sy_kv_blocks *kv = sy_engine_kv(e);
    const int32_t nb = sy_kv_blocks_for(kv, PROMPT);
    sy_step_seq seqs[NSEQ];
    for (int s = 0; s < NSEQ; s++)
        seqs[s] = (sy_step_seq){.tokens = prompts[s],
                                .n_tokens = PROMPT,
                                .ctx_len = 0,
                                .blocks = blocks + s * nb,
                                .n_blocks = nb,
                                .want_logits = true,
                                .greedy_id = kind[s] ? &picks[s] : NULL,
                                .sample = kind[s] == 2 ? &rows[s] : NULL};
    return sy_engine_step(e, seqs, NSEQ, logits, err);
}

static void run(const char *model, const char *mode)
{
    sy_engine *e = open_engine(model, mode);
    CHECK(e != NULL);
    if (!e)
        return;
    const int32_t V = sy_engine_model_config(e)->vocab;
    sy_kv_blocks *kv = sy_engine_kv(e);
    const int32_t nb = sy_kv_blocks_for(kv, PROMPT);
    int32_t *blocks = malloc(sizeof(int32_t) * NSEQ * (size_t)nb);
    float *all = malloc(sizeof(float) * NSEQ * (size_t)V), *packed = malloc(sizeof(float) * NSEQ * (size_t)V);
    float *prob = malloc(sizeof(float) * (size_t)V);
    int32_t *idx = malloc(sizeof(int32_t) * (size_t)V);
    int32_t prompts[NSEQ][PROMPT];
    uint32_t seed = 777;
    for (int s = 0; s < NSEQ; s++)
        for (int i = 0; i < PROMPT; i++) {
            seed = seed * 1664525u + 1013904223u;
            prompts[s][i] = (int32_t)((seed >> 8) % (uint32_t)(V - 3)) + 3;
        }
    CHECK(blocks && all && packed && prob && idx && sy_kv_blocks_alloc(kv, NSEQ * nb, blocks) == SY_OK);
    const sy_sample_row rows[NSEQ] = {
        {0},
        {.struct_size = sizeof(sy_sample_row), .temperature = 1.2f, .top_p = 0.8f, .top_k = 30, .u = 0.71},
        {0},
        {.struct_size = sizeof(sy_sample_row), .temperature = 0.7f, .top_p = 1.0f, .min_p = 0.02f, .u = 0.33},
    };
    static const int none[NSEQ] = {0, 0, 0, 0}, mixed[NSEQ] = {0, 2, 1, 2};
    int32_t picks[NSEQ] = {-1, -1, -1, -1};
    const bool on = strcmp(mode, "off") != 0;
    sy_err err = {{0}};
    if (step(e, prompts, blocks, none, rows, all, picks, &err) == 0 &&
        step(e, prompts, blocks, mixed, rows, packed, picks, &err) == 0) {
        CHECK(sy_engine_device_samples(e) == (on ? 2u : 0u));
        CHECK(sy_engine_device_picks(e) == (on ? 1u : 0u));
        CHECK(picks[1] == sy_sample_pick(all + (size_t)V, V, &rows[1], prob, idx));
        CHECK(picks[2] == sy_greedy_pick(all + 2 * (size_t)V, V));
        CHECK(picks[3] == sy_sample_pick(all + 3 * (size_t)V, V, &rows[3], prob, idx));
        CHECK(memcmp(packed, all, sizeof(float) * (size_t)V) == 0); /* sequence 0's row, first and alone */
        printf("%s, device_sampling %s: picks %d %d %d, drawn on the device %llu\n", model, mode, picks[1], picks[2],
               picks[3], (unsigned long long)sy_engine_device_samples(e));
    } else {
        fprintf(stderr, "FAIL step: %s\n", err.msg);
        CHECK(0);
    }
    /* A sample row needs greedy_id to write its pick to. */
    sy_step_seq bad = {.tokens = prompts[0], .n_tokens = 1, .blocks = blocks, .n_blocks = nb, .want_logits = true,
                       .sample = &rows[1]};
    CHECK(sy_engine_step(e, &bad, 1, packed, &err) == SY_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "sequence 0");
    CHECK_CONTAINS(err.msg, "greedy_id");
    sy_kv_blocks_release(kv, blocks, NSEQ * nb);
    free(blocks);
    free(all);
    free(packed);
    free(prob);
    free(idx);
    sy_engine_close(e);
}

int main(void)
{
    const char *shared = getenv("SY_SHARED_DIR");
    if (!shared || !*shared) {
        fprintf(stderr, "FAIL: SY_SHARED_DIR is not set (run through make check)\n");
        return 1;
    }
    static const char *const models[] = {"tiny-llama", "stories260k"};
    for (size_t m = 0; m < 2; m++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/models/%s", shared, models[m]);
        run(dir, "auto");
        run(dir, "off");
    }
    return sy_test_done("test_device_sampled");
}
