/*
 * The engine's MTP logits for tests/ref/test_mtp_vs_reference.sh: two
 * sequences prefilled in one target step, then the MTP layer over every
 * position of both (sequence A in two MTP steps, the second continuing the
 * first's KV; B in the first), then K chained steps of both in one batch,
 * each on the MTP's own hidden state and greedy pick. Writes, per sequence,
 * len(ids) - 1 + K float32 logits rows (reference.py --mtp-check's layout)
 * and prints "chain A: d1,d2,..." / "chain B: ..." for --mtp-chain.
 *
 *   mtp_dump MODEL_DIR IDS_A IDS_B OUT_A OUT_B K
 */
#include "config.h"

#include "engine/engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAXN = 256 };

static int parse_ids(const char *s, int32_t *ids)
{
    int n = 0;
    while (*s && n < MAXN) {
        char *end;
        ids[n++] = (int32_t)strtol(s, &end, 10);
        if (end == s)
            return -1;
        s = *end == ',' ? end + 1 : end;
    }
    return n;
}

static int fail(const char *what, const sy_err *err)
{
    fprintf(stderr, "mtp_dump: %s: %s\n", what, err ? err->msg : "");
    return 1;
}

static int write_rows(const char *path, const float *rows, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(rows, sizeof(float), n, f) != n) {
        if (f)
            fclose(f);
        return -1;
    }
    return fclose(f);
}

int main(int argc, char **argv)
{
    if (argc != 7) {
        fprintf(stderr, "usage: mtp_dump MODEL_DIR IDS_A IDS_B OUT_A OUT_B K\n");
        return 2;
    }
    int32_t ids[2][MAXN];
    int n[2] = {parse_ids(argv[2], ids[0]), parse_ids(argv[3], ids[1])};
    const int K = atoi(argv[6]);
    if (n[0] < 3 || n[1] < 2 || K < 1 || K > 8) {
        fprintf(stderr, "mtp_dump: expected IDS_A of 3+ ids, IDS_B of 2+ and K in 1..8\n");
        return 2;
    }
    sy_err err = {{0}};
    sy_config *cfg = sy_config_new();
    char path[4200];
    snprintf(path, sizeof path, "model.path=%s", argv[1]);
    const char *sets[] = {"device.plugin=cpu", "attention.plugin=cpu", "moe.plugin=cpu", "comm.plugin=local", path,
                          "speculative.method=mtp"};
    /* make check pins matmul = f32 through SWITCHYARD_SET (Makefile.am), as the CLI applies it: without it the
     * default (auto) ran bf16 on an AVX512-BF16 CPU and every logit missed the reference by ~5e-2. */
    if (sy_config_apply_overrides(cfg, sets, sizeof sets / sizeof sets[0], &err))
        return fail("config", &err);
    sy_engine *e = NULL;
    const sy_engine_opts eo = {.plugin_dirs = getenv("SY_PLUGIN_DIR")};
    if (sy_engine_open(cfg, &eo, &e, &err))
        return fail("engine", &err);
    sy_config_free(cfg);
    if (!sy_engine_has_mtp(e))
        return fail("the engine has no MTP layer", NULL);
    const int32_t V = sy_engine_model_config(e)->vocab, H = sy_engine_model_config(e)->hidden;
    sy_kv_blocks *kv = sy_engine_kv(e);
    int32_t nb[2], *blocks[2];
    for (int s = 0; s < 2; s++) {
        nb[s] = sy_kv_blocks_for(kv, n[s] + K);
        blocks[s] = malloc(sizeof(int32_t) * (size_t)nb[s]);
        if (!blocks[s] || sy_kv_blocks_alloc(kv, nb[s], blocks[s]) != SY_OK)
            return fail("KV blocks", NULL);
    }

    /* The target: both prompts in one step (rows 0..nA-1, then B's). */
    sy_step_seq st[2];
    for (int s = 0; s < 2; s++)
        st[s] = (sy_step_seq){.tokens = ids[s], .n_tokens = n[s], .blocks = blocks[s], .n_blocks = nb[s]};
    if (sy_engine_step(e, st, 2, NULL, &err))
        return fail("target step", &err);

    float *logits[2], *g[2];
    int32_t pick[2][MAXN];
    for (int s = 0; s < 2; s++) {
        logits[s] = malloc(sizeof(float) * (size_t)V * (size_t)(n[s] - 1 + K));
        g[s] = malloc(sizeof(float) * (size_t)H * (size_t)(n[s] - 1));
        if (!logits[s] || !g[s])
            return fail("out of memory", NULL);
    }
    /* Extend: A's positions [0, a) with all of B's, then A's [a, nA - 1). */
    const int a = (n[0] - 1) / 2;
    sy_mtp_seq ms[2] = {
        {.tokens = ids[0] + 1, .n = a, .pos0 = 0, .blocks = blocks[0], .n_blocks = nb[0], .target_row = 0,
         .n_out = a, .hidden_out = g[0], .greedy_id = pick[0], .logits = logits[0]},
        {.tokens = ids[1] + 1, .n = n[1] - 1, .pos0 = 0, .blocks = blocks[1], .n_blocks = nb[1], .target_row = n[0],
         .n_out = n[1] - 1, .hidden_out = g[1], .greedy_id = pick[1], .logits = logits[1]},
    };
    if (sy_engine_mtp_step(e, ms, 2, &err))
        return fail("MTP extend 1", &err);
    ms[0] = (sy_mtp_seq){.tokens = ids[0] + 1 + a, .n = n[0] - 1 - a, .pos0 = a, .blocks = blocks[0],
                         .n_blocks = nb[0], .target_row = a, .n_out = n[0] - 1 - a,
                         .hidden_out = g[0] + (size_t)a * (size_t)H, .greedy_id = pick[0] + a,
                         .logits = logits[0] + (size_t)a * (size_t)V};
    if (sy_engine_mtp_step(e, ms, 1, &err))
        return fail("MTP extend 2", &err);
    /* The greedy picks must be the logits' argmax (first maximum). */
    for (int s = 0; s < 2; s++)
        for (int p = 0; p < n[s] - 1; p++) {
            const float *row = logits[s] + (size_t)p * (size_t)V;
            int32_t best = 0;
            for (int32_t v = 1; v < V; v++)
                best = row[v] > row[best] ? v : best;
            if (best != pick[s][p]) {
                fprintf(stderr, "mtp_dump: sequence %d position %d: greedy pick %d, logits argmax %d\n", s, p,
                        pick[s][p], best);
                return 1;
            }
        }

    /* Chained: step j at position n - 2 + j, with the previous pick and the previous MTP hidden. */
    int32_t chain[2][8];
    float *prev = malloc(sizeof(float) * 2 * (size_t)H), *next = malloc(sizeof(float) * 2 * (size_t)H);
    if (!prev || !next)
        return fail("out of memory", NULL);
    for (int s = 0; s < 2; s++) {
        memcpy(prev + (size_t)s * H, g[s] + (size_t)(n[s] - 2) * (size_t)H, sizeof(float) * (size_t)H);
        chain[s][0] = pick[s][n[s] - 2];
    }
    for (int j = 1; j <= K; j++) {
        int32_t picks[2];
        for (int s = 0; s < 2; s++)
            ms[s] = (sy_mtp_seq){.tokens = &chain[s][j - 1], .n = 1, .pos0 = n[s] - 2 + j, .blocks = blocks[s],
                                 .n_blocks = nb[s], .target_row = -1, .hidden = prev + (size_t)s * H,
                                 .hidden_out = next + (size_t)s * H, .greedy_id = &picks[s],
                                 .logits = logits[s] + (size_t)(n[s] - 2 + j) * (size_t)V};
        if (sy_engine_mtp_step(e, ms, 2, &err))
            return fail("MTP chained step", &err);
        memcpy(prev, next, sizeof(float) * 2 * (size_t)H);
        for (int s = 0; s < 2 && j < K; s++)
            chain[s][j] = picks[s];
    }
    for (int s = 0; s < 2; s++) {
        if (write_rows(argv[4 + s], logits[s], (size_t)V * (size_t)(n[s] - 1 + K)))
            return fail(argv[4 + s], NULL);
        printf("chain %c: ", 'A' + s);
        for (int j = 0; j < K; j++)
            printf("%s%d", j ? "," : "", chain[s][j]);
        printf("\n");
        free(logits[s]);
        free(g[s]);
        free(blocks[s]);
    }
    free(prev);
    free(next);
    sy_engine_close(e);
    return 0;
}
