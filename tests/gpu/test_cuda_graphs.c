/*
 * test_cuda_graphs: [device] graphs = on against off, through the engine
 * (tests/gpu/run.sh step 4d; needs a GPU). Opens the engine from a config
 * (-c, --set) twice, graphs off then on, and runs the same work: B
 * sequences with prompts of different lengths just under 256 tokens,
 * prefilled one by one, then N decode steps feeding each greedy pick back,
 * with the batch shrinking every 8 steps (new recording keys) and every
 * sequence crossing 256 tokens (the next context bound: a new key again).
 * Sequence 0 takes its logits row (a full row in the recorded step),
 * the others their greedy pick on the device.
 *
 * Checks: every id equal between off and on; with --bitwise, sequence 0's
 * logits equal bit for bit (run with [attention] split_k = off: split-K
 * counts come from the bound when recorded, from the step's lengths
 * otherwise, which sums in another order); with --expect-replays, graphs
 * stayed on and replayed steps; with --expect-fallback, none replayed (the
 * engine's warning says why; run.sh greps it). Prints the counts.
 * usage: test_cuda_graphs -c CONFIG [--set s.k=v]... [--plugin-dir DIR] [--expect-replays | --expect-fallback]
 *        [--bitwise]
 */
#include "config.h"

#include "engine/engine.h"
#include "plugin/config.h"
#include "util/log.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define B 6
#define N 40

typedef struct run_out {
    int32_t ids[B][N + 1];
    float *logits0; /* [N][vocab]: sequence 0's rows */
    int32_t vocab;
    sy_engine_graph_counts counts;
} run_out;

static int run(const char *cfg_path, const char *const *sets, int n_sets, const char *dirs, int graphs, run_out *o)
{
    sy_err err = {{0}};
    sy_config *cfg = NULL;
    if (sy_config_load(cfg_path, &cfg, &err)) {
        fprintf(stderr, "test_cuda_graphs: %s\n", err.msg);
        return 1;
    }
    for (int i = 0; i < n_sets; i++)
        if (sy_config_set(cfg, sets[i], &err)) {
            fprintf(stderr, "test_cuda_graphs: --set %s: %s\n", sets[i], err.msg);
            return 1;
        }
    if (sy_config_set(cfg, graphs ? "device.graphs=on" : "device.graphs=off", &err)) {
        fprintf(stderr, "test_cuda_graphs: device.graphs: %s\n", err.msg);
        return 1;
    }
    sy_engine *e = NULL;
    sy_engine_opts eo = {.plugin_dirs = dirs, .progress = false};
    if (sy_engine_open(cfg, &eo, &e, &err)) {
        fprintf(stderr, "test_cuda_graphs: graphs %s: %s\n", graphs ? "on" : "off", err.msg);
        return 1;
    }
    const sy_model_config *mc = sy_engine_model_config(e);
    const int32_t V = mc->vocab;
    o->vocab = V;
    /* Prompts end just under 256 so that decoding crosses into the 512 bound; shorter when the model is. */
    int32_t base = 240;
    if (base + 3 * B + N + 1 > sy_engine_max_seq_len(e))
        base = sy_engine_max_seq_len(e) - 3 * B - N - 1;
    if (base < 1 || B > sy_engine_max_seqs(e) || base + 3 * B > sy_engine_max_batch_tokens(e)) {
        fprintf(stderr, "test_cuda_graphs: the model or scheduler is too small (max_seq_len %d, max_running %d)\n",
                sy_engine_max_seq_len(e), sy_engine_max_seqs(e));
        return 1;
    }
    sy_kv_blocks *kv = sy_engine_kv(e);
    const int32_t nb = sy_kv_blocks_for(kv, base + 3 * B + N + 1);
    int32_t *blocks = malloc(sizeof(int32_t) * (size_t)(B * nb));
    int32_t *prompt = malloc(sizeof(int32_t) * (size_t)(base + 3 * B));
    float *logits = malloc(sizeof(float) * (size_t)B * (size_t)V);
    o->logits0 = malloc(sizeof(float) * (size_t)N * (size_t)V);
    if (!blocks || !prompt || !logits || !o->logits0 || sy_kv_blocks_alloc(kv, B * nb, blocks)) {
        fprintf(stderr, "test_cuda_graphs: cannot allocate %d sequences (KV blocks or host memory)\n", B);
        return 1;
    }
    int32_t plen[B];
    int rc = 0;
    for (int b = 0; b < B && !rc; b++) { /* prefill one sequence per step */
        plen[b] = base + 3 * b;
        for (int i = 0; i < plen[b]; i++)
            prompt[i] = (int32_t)((i * 7919 + b * 131 + 13) % V);
        sy_step_seq s = {.tokens = prompt, .n_tokens = plen[b], .blocks = blocks + b * nb, .n_blocks = nb,
                         .want_logits = true, .greedy_id = &o->ids[b][0]};
        rc = sy_engine_step(e, &s, 1, logits, &err);
    }
    sy_step_seq seqs[B];
    for (int step = 0; step < N && !rc; step++) {
        const int nb_active = B - step / 8 > 1 ? B - step / 8 : 2;
        for (int b = 0; b < nb_active; b++)
            seqs[b] = (sy_step_seq){.tokens = &o->ids[b][step], .n_tokens = 1, .ctx_len = plen[b] + step,
                                    .blocks = blocks + b * nb, .n_blocks = nb, .want_logits = true,
                                    .greedy_id = b == 0 ? NULL : &o->ids[b][step + 1]};
        if ((rc = sy_engine_step(e, seqs, nb_active, logits, &err)))
            break;
        /* Sequence 0's row (the only full row): kept, and its greedy pick made here. */
        memcpy(o->logits0 + (size_t)step * (size_t)V, logits, sizeof(float) * (size_t)V);
        int32_t best = 0;
        for (int32_t j = 1; j < V; j++)
            if (logits[j] > logits[best])
                best = j;
        o->ids[0][step + 1] = best;
        for (int b = nb_active; b < B; b++)
            o->ids[b][step + 1] = -1; /* left the batch */
    }
    if (rc)
        fprintf(stderr, "test_cuda_graphs: graphs %s: step: %s\n", graphs ? "on" : "off", err.msg);
    sy_engine_graph_stats(e, &o->counts);
    sy_kv_blocks_release(kv, blocks, B * nb);
    free(blocks), free(prompt), free(logits);
    sy_engine_close(e);
    sy_config_free(cfg);
    return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
    const char *cfg_path = NULL, *dirs = NULL, *sets[32];
    int n_sets = 0, expect_replays = 0, expect_fallback = 0, bitwise = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--expect-replays") == 0)
            expect_replays = 1;
        else if (strcmp(a, "--expect-fallback") == 0)
            expect_fallback = 1;
        else if (strcmp(a, "--bitwise") == 0)
            bitwise = 1;
        else if (i + 1 < argc && strcmp(a, "-c") == 0)
            cfg_path = argv[++i];
        else if (i + 1 < argc && strcmp(a, "--set") == 0 && n_sets < 32)
            sets[n_sets++] = argv[++i];
        else if (i + 1 < argc && strcmp(a, "--plugin-dir") == 0)
            dirs = argv[++i];
        else {
            fprintf(stderr, "test_cuda_graphs: unknown option %s\n", a);
            return 2;
        }
    }
    if (!cfg_path) {
        fprintf(stderr, "usage: test_cuda_graphs -c CONFIG [--set s.k=v]... [--plugin-dir DIR] "
                        "[--expect-replays | --expect-fallback] [--bitwise]\n");
        return 2;
    }
    sy_log_set_level(SY_LOG_WARN);
    static run_out off, on;
    if (run(cfg_path, sets, n_sets, dirs, 0, &off) || run(cfg_path, sets, n_sets, dirs, 1, &on))
        return 1;
    int fails = 0, differ = 0;
    for (int b = 0; b < B; b++)
        for (int s = 0; s <= N; s++)
            differ += off.ids[b][s] != on.ids[b][s];
    if (differ) {
        fails++;
        fprintf(stderr, "FAIL: %d of %d ids differ between graphs off and on\n", differ, B * (N + 1));
        for (int b = 0; b < B; b++) {
            fprintf(stderr, "  seq %d off:", b);
            for (int s = 0; s <= N; s++)
                fprintf(stderr, " %d", off.ids[b][s]);
            fprintf(stderr, "\n  seq %d on: ", b);
            for (int s = 0; s <= N; s++)
                fprintf(stderr, " %d", on.ids[b][s]);
            fprintf(stderr, "\n");
        }
    }
    /* Sequence 0's logits: the largest difference, and how many rows differ in any bit. */
    const size_t V = (size_t)on.vocab;
    double maxdiff = 0;
    int rows_differ = 0;
    for (int s = 0; s < N; s++) {
        const float *a = off.logits0 + (size_t)s * V, *b = on.logits0 + (size_t)s * V;
        rows_differ += memcmp(a, b, V * sizeof(float)) != 0;
        for (size_t j = 0; j < V; j++)
            maxdiff = fabs((double)a[j] - b[j]) > maxdiff ? fabs((double)a[j] - b[j]) : maxdiff;
    }
    printf("sequence 0's logits: %d of %d rows differ, largest difference %.3g\n", rows_differ, N, maxdiff);
    if (bitwise && rows_differ) {
        fails++;
        fprintf(stderr, "FAIL: --bitwise: %d of sequence 0's logits rows differ between graphs off and on\n",
                rows_differ);
    }
    printf("graphs off: %llu replayed, %llu op by op; graphs on: %llu replayed, %llu recorded, %llu op by op "
           "(graphs %s at the end)\n",
           (unsigned long long)off.counts.replays, (unsigned long long)off.counts.eager,
           (unsigned long long)on.counts.replays, (unsigned long long)on.counts.recorded,
           (unsigned long long)on.counts.eager, on.counts.on ? "still on" : "off");
    if (expect_replays && (!on.counts.on || on.counts.replays == 0)) {
        fails++;
        fprintf(stderr, "FAIL: expected replayed steps with graphs = on (graphs %s, %llu replays)\n",
                on.counts.on ? "on" : "off", (unsigned long long)on.counts.replays);
    }
    if (expect_fallback && on.counts.replays != 0) {
        fails++;
        fprintf(stderr, "FAIL: expected the fallback (no replay), found %llu replays\n",
                (unsigned long long)on.counts.replays);
    }
    free(off.logits0);
    free(on.logits0);
    printf("test_cuda_graphs: %s\n", fails ? "FAIL" : "PASS");
    return fails ? 1 : 0;
}
