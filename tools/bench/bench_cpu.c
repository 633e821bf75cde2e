/*
 * sy-bench-cpu: prefill and batch-1 decode speed of the engine on one model,
 * next to the decode bound this machine's memory bandwidth allows (bytes of
 * weights read per token / measured read bandwidth). Prints a table; never
 * asserts anything, since timings on shared machines are noisy.
 */
#include "config.h"

#include "engine/generate.h"
#include "engine/engine_internal.h"
#include "util/log.h"
#include "util/util.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct bw_slice {
    const uint64_t *p;
    size_t n;
    uint64_t sum;
} bw_slice;

static void *bw_read(void *arg)
{
    bw_slice *s = arg;
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
    for (size_t i = 0; i + 8 <= s->n; i += 8) {
        a0 += s->p[i];
        a1 += s->p[i + 1];
        a2 += s->p[i + 2];
        a3 += s->p[i + 3];
        a4 += s->p[i + 4];
        a5 += s->p[i + 5];
        a6 += s->p[i + 6];
        a7 += s->p[i + 7];
    }
    s->sum = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
    return NULL;
}

/* Best of several full passes over a buffer much larger than the caches. */
static double read_bandwidth(int threads, size_t bytes)
{
    uint64_t *buf = aligned_alloc(64, bytes);
    if (!buf)
        return 0;
    size_t n = bytes / 8;
    for (size_t i = 0; i < n; i++)
        buf[i] = i;
    double best = 0;
    pthread_t th[256];
    bw_slice sl[256];
    if (threads > 256)
        threads = 256;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = sy_now();
        for (int t = 0; t < threads; t++) {
            sl[t].p = buf + n / threads * t;
            sl[t].n = n / threads;
            pthread_create(&th[t], NULL, bw_read, &sl[t]);
        }
        uint64_t sink = 0;
        for (int t = 0; t < threads; t++) {
            pthread_join(th[t], NULL);
            sink += sl[t].sum;
        }
        double dt = sy_now() - t0;
        if (sink == 42) /* keeps the reads alive */
            fprintf(stderr, " ");
        double gbs = (double)(n / threads * threads * 8) / dt / 1e9;
        if (gbs > best)
            best = gbs;
    }
    free(buf);
    return best;
}

static void usage(void)
{
    fprintf(stderr, "usage: sy-bench-cpu --model DIR [--plugin-dir DIR] [--threads N] [--prompts 128,512] [--decode N]\n"
                    "                    [--attention cpu] [--repeat R]\n"
                    "Make the ~110M bf16 llama first with: sy-mkmodel --preset bench-110m --out DIR\n");
}

int main(int argc, char **argv)
{
    const char *model = NULL, *plugin_dir = NULL, *attn = "cpu", *prompts = "128,512";
    int threads = 0, decode = 128, repeat = 3;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v && strcmp(a, "-h") && strcmp(a, "--help")) {
            fprintf(stderr, "sy-bench-cpu: %s needs a value\n", a);
            return 2;
        }
        if (strcmp(a, "--model") == 0)
            model = v;
        else if (strcmp(a, "--plugin-dir") == 0)
            plugin_dir = v;
        else if (strcmp(a, "--threads") == 0)
            threads = atoi(v);
        else if (strcmp(a, "--prompts") == 0)
            prompts = v;
        else if (strcmp(a, "--decode") == 0)
            decode = atoi(v);
        else if (strcmp(a, "--attention") == 0)
            attn = v;
        else if (strcmp(a, "--repeat") == 0)
            repeat = atoi(v);
        else {
            usage();
            return strcmp(a, "-h") && strcmp(a, "--help") ? 2 : 0;
        }
        i++;
    }
    if (!model || decode < 2 || repeat < 1) {
        usage();
        return 2;
    }
    if (threads <= 0)
        threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    sy_log_set_level(SY_LOG_WARN);

    sy_err err = {{0}};
    sy_config *cfg = sy_config_new();
    char buf[4300];
    const char *fixed[] = {"device.plugin=cpu", "comm.plugin=local", "moe.plugin=cpu", "scheduler.max_batch_tokens=512",
                           "scheduler.max_running=1", "scheduler.kv_cache_size=1G"};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        sy_config_set(cfg, fixed[i], &err);
    snprintf(buf, sizeof buf, "model.path=%s", model);
    sy_config_set(cfg, buf, &err);
    snprintf(buf, sizeof buf, "attention.plugin=%s", attn);
    sy_config_set(cfg, buf, &err);
    snprintf(buf, sizeof buf, "device.threads=%d", threads);
    sy_config_set(cfg, buf, &err);
    sy_engine *e = NULL;
    sy_engine_opts eo = {.plugin_dirs = plugin_dir, .progress = true};
    if (sy_engine_open(cfg, &eo, &e, &err)) {
        fprintf(stderr, "sy-bench-cpu: %s\n", err.msg);
        sy_config_free(cfg);
        return 1;
    }
    const sy_model_config *mc = sy_engine_model_config(e);

    /* Bytes one decode step must stream: every weight except the embedding
     * table, of which a step reads one row (unless tied to the LM head). */
    const sy_model *m = e->model;
    uint64_t step_bytes = m->weight_bytes;
    if (!e->lm_head_is_embed)
        step_bytes -= sy_tensor_nbytes(&m->embed);

    double bw = read_bandwidth(threads, (size_t)1 << 30);
    double bound = bw * 1e9 / (double)step_bytes;

    printf("model: %s, %.1fM parameters, %s weights, %.1f MB read per decode token\n", mc->arch_name,
           (double)m->n_params / 1e6, sy_dtype_name(m->embed.dtype), (double)step_bytes / 1e6);
    printf("plugins: %s; threads: %d\n", sy_engine_describe(e), threads);
    printf("measured read bandwidth: %.1f GB/s -> batch-1 decode bound %.1f tok/s\n\n", bw, bound);
    printf("| test | tokens | best tok/s | mean tok/s | vs bound |\n|---|---:|---:|---:|---:|\n");

    const int32_t V = mc->vocab;
    char *list = sy_strdup(prompts);
    int rc = 0;
    for (char *tok = strtok(list, ","); tok && rc == 0; tok = strtok(NULL, ",")) {
        int32_t n = atoi(tok);
        if (n < 1 || n + decode > sy_engine_max_seq_len(e)) {
            fprintf(stderr, "sy-bench-cpu: prompt length %d out of range for context %d\n", n, sy_engine_max_seq_len(e));
            rc = 1;
            break;
        }
        int32_t *ids = malloc(sizeof(int32_t) * (size_t)n);
        for (int32_t i = 0; i < n; i++)
            ids[i] = (int32_t)((i * 7919 + 13) % V);
        double best = 0, sum = 0;
        for (int r = 0; r < repeat; r++) {
            sy_gen_params gp = {.max_tokens = 1, .sampling = sy_sampling_default(), .ignore_eos = true};
            sy_gen_stats st;
            if ((rc = sy_generate(e, ids, n, &gp, NULL, NULL, &st, &err))) {
                fprintf(stderr, "sy-bench-cpu: %s\n", err.msg);
                break;
            }
            double tps = n / st.prefill_s;
            sum += tps;
            if (tps > best)
                best = tps;
        }
        if (rc == 0)
            printf("| prefill pp%d | %d | %.1f | %.1f | |\n", n, n, best, sum / repeat);
        free(ids);
    }
    free(list);
    if (rc == 0) {
        int32_t prompt[4] = {1, 2, 3, 4};
        double best = 0, sum = 0;
        for (int r = 0; r < repeat; r++) {
            sy_gen_params gp = {.max_tokens = decode, .sampling = sy_sampling_default(), .ignore_eos = true};
            sy_gen_stats st;
            if ((rc = sy_generate(e, prompt, 4, &gp, NULL, NULL, &st, &err))) {
                fprintf(stderr, "sy-bench-cpu: %s\n", err.msg);
                break;
            }
            double tps = (st.generated - 1) / st.decode_s;
            sum += tps;
            if (tps > best)
                best = tps;
        }
        if (rc == 0)
            printf("| decode tg%d (batch 1) | %d | %.1f | %.1f | %.0f%% |\n", decode, decode, best, sum / repeat,
                   100.0 * best / bound);
    }
    sy_engine_close(e);
    sy_config_free(cfg);
    return rc;
}
