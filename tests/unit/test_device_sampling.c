/*
 * Greedy picks made by the device (sy_step_seq.greedy_id) on the real
 * engine: in one step, sequences that want only the greedy pick sit between
 * sequences that want their logits. The picks must equal the host rule on
 * the logits the same step gives when every sequence wants its logits, and
 * the logits rows handed back (packed, greedy sequences taking none) must
 * be exactly those rows. With [scheduler] device_sampling = auto the device
 * counter counts each pick; with off it stays 0 and the picks are the same.
 * Runs on ../shared's tiny-llama (untied head) and stories260k (tied).
 */
#include "config.h"

#include "engine/engine.h"
#include "engine/sampler.h"
#include "engine_sampling.h"
#include "test_check.h"

#include <stdlib.h>
#include <string.h>

enum { NSEQ = 4, PROMPT = 9 };

/* Prefills the NSEQ prompts in one step; greedy[s]: sequence s wants only its pick, into picks[s]. */
static int step(sy_engine *e, int32_t prompts[NSEQ][PROMPT], int32_t *blocks, const bool *greedy, float *logits,
                int32_t *picks)
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
                                .greedy_id = greedy[s] ? &picks[s] : NULL};
    sy_err err = {{0}};
    if (sy_engine_step(e, seqs, NSEQ, logits, &err)) {
        fprintf(stderr, "FAIL step: %s\n", err.msg);
        return -1;
    }
    return 0;
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
    int32_t prompts[NSEQ][PROMPT];
    uint32_t seed = 12345;
    for (int s = 0; s < NSEQ; s++)
        for (int i = 0; i < PROMPT; i++) {
            seed = seed * 1664525u + 1013904223u;
            prompts[s][i] = (int32_t)((seed >> 8) % (uint32_t)(V - 3)) + 3;
        }
    CHECK(blocks && all && packed && sy_kv_blocks_alloc(kv, NSEQ * nb, blocks) == SY_OK);
    static const bool none[NSEQ] = {false, false, false, false};
    static const bool mixed[NSEQ] = {true, false, true, false};
    static const bool every[NSEQ] = {true, true, true, true};
    int32_t picks[NSEQ] = {-1, -1, -1, -1}, picks_all[NSEQ] = {-1, -1, -1, -1};
    const bool on = strcmp(mode, "off") != 0;
    const uint64_t before = sy_engine_device_picks(e);
    if (step(e, prompts, blocks, none, all, picks) == 0 && step(e, prompts, blocks, mixed, packed, picks) == 0) {
        CHECK(sy_engine_device_picks(e) - before == (on ? 2u : 0u));
        /* Greedy sequences 0 and 2: the host rule on their rows of the all-logits step. */
        CHECK(picks[0] == sy_greedy_pick(all, V));
        CHECK(picks[2] == sy_greedy_pick(all + 2 * (size_t)V, V));
        /* Sequences 1 and 3 got rows 0 and 1, exactly. */
        CHECK(memcmp(packed, all + (size_t)V, sizeof(float) * (size_t)V) == 0);
        CHECK(memcmp(packed + V, all + 3 * (size_t)V, sizeof(float) * (size_t)V) == 0);
    }
    if (step(e, prompts, blocks, every, packed, picks_all) == 0) {
        CHECK(sy_engine_device_picks(e) - before == (on ? 6u : 0u));
        for (int s = 0; s < NSEQ; s++)
            CHECK(picks_all[s] == sy_greedy_pick(all + (size_t)s * (size_t)V, V));
    }
    printf("%s, device_sampling %s: picks %d %d %d %d, on the device so far %llu\n", model, mode, picks_all[0],
           picks_all[1], picks_all[2], picks_all[3], (unsigned long long)sy_engine_device_picks(e));
    sy_kv_blocks_release(kv, blocks, NSEQ * nb);
    free(blocks);
    free(all);
    free(packed);
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
    return sy_test_done("test_device_sampling");
}
