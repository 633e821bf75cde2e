/*
 * bench_decode: decode speed of the engine at a given batch, for
 * tests/gpu/run.sh's table. Opens the engine from a config (-c, --set),
 * prefills B sequences of P prompt tokens, then times the last N - 2 of N decode steps of B
 * tokens (one per sequence) and prints
 *   "decode batch B: X tok/s (Y ms/step), weights Z bytes per step".
 * With --prefill-time 1 it prints instead
 *   "prefill: P tokens in X ms (Y tok/s), sequence B of B",
 * the time of the last sequence's prefill step (B >= 2: the first one warms up).
 * A table printer, not a test: it asserts nothing about speed.
 * usage: bench_decode -c CONFIG [--set s.k=v]... [--batch B] [--prompt P] [--steps N] [--plugin-dir DIR]
 *        [--prefill-time 1]
 */
#include "config.h"

#include "engine/engine.h"
#include "engine/engine_internal.h"
#include "plugin/config.h"
#include "util/log.h"
#include "util/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* N decode steps of B tokens after P-token prompts; prints the timed steps' speed (the last N - 2). */
static int decode(sy_engine *e, int B, int P, int N, int32_t nb, int32_t *blocks, int32_t *tok, sy_step_seq *seqs,
                  float *logits)
{
    const sy_model_config *mc = sy_engine_model_config(e);
    sy_err err = {{0}};
    double t0 = 0;
    for (int step = 0; step < N; step++) {
        if (step == 2)
            t0 = sy_now(); /* the first decode steps warm up (cuBLAS heuristics, pools; [device] graphs records) */
        for (int b = 0; b < B; b++) {
            tok[b] = (b * 31 + step * 17 + 1) % mc->vocab;
            seqs[b] = (sy_step_seq){.tokens = &tok[b], .n_tokens = 1, .ctx_len = P + step, .blocks = blocks + b * nb,
                                    .n_blocks = nb, .want_logits = true};
        }
        if (sy_engine_step(e, seqs, B, logits, &err)) {
            fprintf(stderr, "bench_decode: decode step %d: %s\n", step, err.msg);
            return 1;
        }
    }
    const double dt = (sy_now() - t0) / (N - 2);
    uint64_t step_bytes = e->model->weight_bytes;
    if (!e->lm_head_is_embed)
        step_bytes -= sy_tensor_nbytes(&e->model->embed);
    printf("decode batch %d: %.1f tok/s (%.3f ms/step), weights %llu bytes per step, plugins %s\n", B, B / dt,
           dt * 1e3, (unsigned long long)step_bytes, sy_engine_describe(e));
    return 0;
}

int main(int argc, char **argv)
{
    const char *cfg_path = NULL, *dirs = NULL, *sets[32];
    int n_sets = 0, B = 1, P = 32, N = 64, prefill_time = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (strcmp(a, "-c") == 0)
            cfg_path = v;
        else if (strcmp(a, "--set") == 0 && n_sets < 32)
            sets[n_sets++] = v;
        else if (strcmp(a, "--batch") == 0)
            B = atoi(v);
        else if (strcmp(a, "--prompt") == 0)
            P = atoi(v);
        else if (strcmp(a, "--steps") == 0)
            N = atoi(v);
        else if (strcmp(a, "--plugin-dir") == 0)
            dirs = v;
        else if (strcmp(a, "--prefill-time") == 0)
            prefill_time = atoi(v);
        else {
            fprintf(stderr, "bench_decode: unknown option %s\n", a);
            return 2;
        }
    }
    if (!cfg_path || B < 1 || P < 1 || N < 3) {
        fprintf(stderr, "usage: bench_decode -c CONFIG [--set s.k=v]... [--batch B] [--prompt P] [--steps N]\n");
        return 2;
    }
    sy_log_set_level(SY_LOG_WARN);
    sy_err err = {{0}};
    sy_config *cfg = NULL;
    if (sy_config_load(cfg_path, &cfg, &err)) {
        fprintf(stderr, "bench_decode: %s\n", err.msg);
        return 1;
    }
    for (int i = 0; i < n_sets; i++)
        if (sy_config_set(cfg, sets[i], &err)) {
            fprintf(stderr, "bench_decode: --set %s: %s\n", sets[i], err.msg);
            return 2;
        }
    sy_engine *e = NULL;
    sy_engine_opts eo = {.plugin_dirs = dirs, .progress = false};
    if (sy_engine_open(cfg, &eo, &e, &err)) {
        fprintf(stderr, "bench_decode: %s\n", err.msg);
        return 1;
    }
    const sy_model_config *mc = sy_engine_model_config(e);
    if (B > sy_engine_max_seqs(e) || P > sy_engine_max_batch_tokens(e) || P + N > sy_engine_max_seq_len(e)) {
        fprintf(stderr, "bench_decode: batch %d / prompt %d / steps %d exceed the scheduler limits (max_running %d, "
                "max_batch_tokens %d, max_seq_len %d)\n", B, P, N, sy_engine_max_seqs(e), sy_engine_max_batch_tokens(e),
                sy_engine_max_seq_len(e));
        return 1;
    }
    sy_kv_blocks *kv = sy_engine_kv(e);
    const int32_t nb = sy_kv_blocks_for(kv, P + N);
    int32_t *blocks = malloc(sizeof(int32_t) * (size_t)(B * nb));
    int32_t *prompt = malloc(sizeof(int32_t) * (size_t)P), *tok = malloc(sizeof(int32_t) * (size_t)B);
    float *logits = malloc(sizeof(float) * (size_t)B * (size_t)mc->vocab);
    sy_step_seq *seqs = calloc((size_t)B, sizeof *seqs);
    if (!blocks || !prompt || !tok || !logits || !seqs || sy_kv_blocks_alloc(kv, B * nb, blocks)) {
        fprintf(stderr, "bench_decode: cannot allocate %d sequences of %d tokens (KV blocks or host memory)\n", B,
                P + N);
        return 1;
    }
    for (int i = 0; i < P; i++)
        prompt[i] = (i * 7919 + 13) % mc->vocab;
    double pt = 0;
    for (int b = 0; b < B; b++) { /* prefill one sequence per step */
        sy_step_seq s = {.tokens = prompt, .n_tokens = P, .ctx_len = 0, .blocks = blocks + b * nb, .n_blocks = nb,
                         .want_logits = true};
        const double t = sy_now(); /* the step returns with its logits on the host: the GPU's work is done */
        if (sy_engine_step(e, &s, 1, logits, &err)) {
            fprintf(stderr, "bench_decode: prefill: %s\n", err.msg);
            return 1;
        }
        pt = sy_now() - t;
    }
    if (prefill_time)
        printf("prefill: %d tokens in %.2f ms (%.1f tok/s), sequence %d of %d, plugins %s\n", P, pt * 1e3, P / pt, B,
               B, sy_engine_describe(e));
    else if (decode(e, B, P, N, nb, blocks, tok, seqs, logits) != 0)
        return 1;
    sy_kv_blocks_release(kv, blocks, B * nb);
    free(blocks), free(prompt), free(tok), free(logits), free(seqs);
    sy_engine_close(e);
    sy_config_free(cfg);
    return 0;
}
