/*
 * bench_cpu_attn: attention-only speed of $SY_PLUGIN_DIR/sy-attn-cpu.so,
 * F32 against BF16 KV cache, for prefill (one long prompt, and several
 * prompts of different lengths in one call) and batched decode over a long
 * context. One layer, a shuffled block table (as the engine's free list
 * hands blocks out), every forward timed alone. Prints a table of the best
 * and median of --repeat runs; asserts nothing (timings on shared machines
 * are noisy). Built by make check, not run by it:
 *
 *   SY_PLUGIN_DIR=build-plugins tests/unit/bench_cpu_attn [--threads 2] [--repeat 7] [--isa auto] [--only TEXT]
 *
 * --only keeps the rows whose shape or work names contain TEXT (a profile of one workload).
 *
 * Pointing SY_PLUGIN_DIR at another build's plugins compares two builds.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "test_cpu_harness.h"

typedef struct shape {
    const char *name;
    int heads, kv, d;
} shape;

typedef struct workload {
    const char *name;
    int n_seqs;
    int32_t len[16]; /* new tokens per sequence */
    int32_t ctx[16]; /* cached tokens before them */
} workload;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "bench_cpu_attn: out of memory (%zu bytes)\n", n);
        exit(1);
    }
    return p;
}

/* Scores plus PV multiply-adds of the causal rows: 2 (D + DV) flops per (query head, key) pair. */
static double flops_of(const shape *sh, const workload *w)
{
    double pairs = 0;
    for (int s = 0; s < w->n_seqs; s++)
        for (int32_t t = 0; t < w->len[s]; t++)
            pairs += (double)(w->ctx[s] + t + 1);
    return pairs * sh->heads * 2.0 * (2.0 * sh->d);
}

static int run(th_plugin *attn, th_host *host, const char *isa, const shape *sh, const workload *w,
               const char *kv_dtype, int repeat, double *best, double *median)
{
    const int bs = 16, max_blocks = 160;
    sy_attn_problem p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.n_layers = 1;
    p.n_heads = sh->heads;
    p.n_kv_heads = sh->kv;
    p.head_dim = p.v_head_dim = sh->d;
    p.block_size = bs;
    p.kv_dtype = SY_DTYPE_F32;
    p.scale = 1.0f / sqrtf((float)sh->d);
    int32_t T = 0, tok_start[17], need = 0;
    for (int s = 0; s < w->n_seqs; s++) {
        tok_start[s] = T;
        T += w->len[s];
        const int32_t nb = (w->ctx[s] + w->len[s] + bs - 1) / bs;
        if (nb > max_blocks) {
            fprintf(stderr, "bench_cpu_attn: %s sequence %d needs %d blocks, the table holds %d\n", w->name, s, nb,
                    max_blocks);
            return 1;
        }
        need += nb;
    }
    tok_start[w->n_seqs] = T;
    p.n_blocks = need;
    /* a shuffled permutation of the blocks, dealt to the sequences in order */
    int32_t *perm = xmalloc(sizeof(int32_t) * (size_t)need), *bt = xmalloc(sizeof(int32_t) * 16 * max_blocks);
    th_rng rng = {0x5eedu};
    for (int32_t i = 0; i < need; i++)
        perm[i] = i;
    for (int32_t i = need - 1; i > 0; i--) {
        const int j = th_int(&rng, 0, i);
        const int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (int s = 0, k = 0; s < w->n_seqs; s++)
        for (int b = 0; b < max_blocks; b++)
            bt[s * max_blocks + b] = b < (w->ctx[s] + w->len[s] + bs - 1) / bs ? perm[k++] : 0;
    const int64_t QW = (int64_t)sh->heads * sh->d, KW = (int64_t)sh->kv * sh->d;
    float *q = xmalloc(sizeof(float) * (size_t)(T * QW)), *k = xmalloc(sizeof(float) * (size_t)(T * KW));
    float *v = xmalloc(sizeof(float) * (size_t)(T * KW)), *o = xmalloc(sizeof(float) * (size_t)(T * QW));
    for (int64_t i = 0; i < T * QW; i++)
        q[i] = (float)th_uniform(&rng, -1, 1);
    for (int64_t i = 0; i < T * KW; i++) {
        k[i] = (float)th_uniform(&rng, -1, 1);
        v[i] = (float)th_uniform(&rng, -1, 1);
    }
    const char *kvs[] = {"kv_dtype", kv_dtype, "isa", isa, NULL};
    void *a = NULL;
    sy_err err;
    const sy_attn_ops *ops = attn->desc->ops;
    int rc = th_create(attn, &host->api, kvs, &a, &err);
    if (!rc && ops->supports(a, &p, &err) != 1)
        rc = SY_ERR_UNSUPPORTED;
    if (!rc)
        rc = ops->prepare(a, &p, &err);
    double *t = xmalloc(sizeof(double) * (size_t)repeat);
    /* The cached context: written once by a forward over it (its outputs are not timed). */
    for (int s = 0; !rc && s < w->n_seqs; s++) {
        if (w->ctx[s] == 0)
            continue;
        const int32_t n = w->ctx[s];
        float *cq = xmalloc(sizeof(float) * (size_t)(n * QW)), *ck = xmalloc(sizeof(float) * (size_t)(n * KW));
        float *cv = xmalloc(sizeof(float) * (size_t)(n * KW)), *co = xmalloc(sizeof(float) * (size_t)(n * QW));
        for (int64_t i = 0; i < n * QW; i++)
            cq[i] = (float)th_uniform(&rng, -1, 1);
        for (int64_t i = 0; i < n * KW; i++) {
            ck[i] = (float)th_uniform(&rng, -1, 1);
            cv[i] = (float)th_uniform(&rng, -1, 1);
        }
        int32_t ts[2] = {0, n}, c0 = 0;
        sy_attn_batch cb = {sizeof cb, 1, n, ts, &c0, bt + s * max_blocks, max_blocks, 0};
        sy_tensor tq = sy_tensor_2d(cq, SY_DTYPE_F32, n, QW), tk = sy_tensor_2d(ck, SY_DTYPE_F32, n, KW);
        sy_tensor tv = sy_tensor_2d(cv, SY_DTYPE_F32, n, KW), to = sy_tensor_2d(co, SY_DTYPE_F32, n, QW);
        rc = ops->forward(a, 0, &cb, &tq, &tk, &tv, &to, &err);
        free(cq);
        free(ck);
        free(cv);
        free(co);
    }
    sy_attn_batch b = {sizeof b, w->n_seqs, T, tok_start, w->ctx, bt, max_blocks, 0};
    sy_tensor tq = sy_tensor_2d(q, SY_DTYPE_F32, T, QW), tk = sy_tensor_2d(k, SY_DTYPE_F32, T, KW);
    sy_tensor tv = sy_tensor_2d(v, SY_DTYPE_F32, T, KW), to = sy_tensor_2d(o, SY_DTYPE_F32, T, QW);
    for (int r = 0; !rc && r < repeat; r++) {
        const double t0 = now_s();
        rc = ops->forward(a, 0, &b, &tq, &tk, &tv, &to, &err);
        t[r] = now_s() - t0;
    }
    if (rc)
        fprintf(stderr, "bench_cpu_attn: %s %s kv %s: %s\n", sh->name, w->name, kv_dtype, err.msg);
    else {
        qsort(t, (size_t)repeat, sizeof *t, cmp_d);
        *best = t[0];
        *median = t[repeat / 2];
    }
    if (a)
        attn->desc->destroy(a);
    free(t);
    free(perm);
    free(bt);
    free(q);
    free(k);
    free(v);
    free(o);
    return rc;
}

int main(int argc, char **argv)
{
    const char *threads = "2", *isa = "auto", *only = NULL;
    int repeat = 7;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            threads = argv[++i];
        else if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc)
            repeat = atoi(argv[++i]);
        else if (strcmp(argv[i], "--isa") == 0 && i + 1 < argc)
            isa = argv[++i];
        else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
            only = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--threads N] [--repeat R] [--isa auto|avx512|avx2|portable] [--only TEXT]\n",
                    argv[0]);
            return 2;
        }
    }
    if (repeat < 1) {
        fprintf(stderr, "bench_cpu_attn: --repeat must be >= 1, found %d\n", repeat);
        return 2;
    }
    th_plugin dev, attn;
    th_host host;
    th_load("sy-device-cpu", &dev);
    th_load("sy-attn-cpu", &attn);
    th_host_init(&host);
    host.quiet = 1;
    const char *kvd[] = {"threads", threads, NULL};
    void *d = NULL;
    sy_err why;
    if (th_create(&dev, &host.api, kvd, &d, &why)) {
        fprintf(stderr, "bench_cpu_attn: device create: %s\n", why.msg);
        return 1;
    }
    th_host_set_pool(&host, dev.desc, d);

    static const shape shapes[] = {
        {"110M (12/12 heads, d 64)", 12, 12, 64},
        {"8B-like (32/8 heads, d 128)", 32, 8, 128},
    };
    static const workload loads[] = {
        {"pp512", 1, {512}, {0}},
        {"pp1024", 1, {1024}, {0}},
        {"4 prompts 300+200+100+50", 4, {300, 200, 100, 50}, {0, 0, 0, 0}},
        {"decode 16 seqs at ctx 1024", 16, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
         {1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024}},
    };
    printf("plugin %s, %s threads, isa %s, best and median of %d forwards, one layer\n\n", attn.path, threads, isa,
           repeat);
    printf("| shape | work | kv | best ms | median ms | GFLOP/s (best) | bf16/f32 (best) |\n");
    printf("|---|---|---|---:|---:|---:|---:|\n");
    int fails = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t w = 0; w < sizeof loads / sizeof loads[0]; w++) {
            if (only && !strstr(shapes[s].name, only) && !strstr(loads[w].name, only))
                continue;
            double f32_best = 0;
            static const char *const kvs[] = {"f32", "bf16"};
            for (int k = 0; k < 2; k++) {
                double best = 0, med = 0;
                if (run(&attn, &host, isa, &shapes[s], &loads[w], kvs[k], repeat, &best, &med)) {
                    fails++;
                    continue;
                }
                char ratio[32] = "";
                if (k == 0)
                    f32_best = best;
                else if (f32_best > 0)
                    snprintf(ratio, sizeof ratio, "%.2f", best / f32_best);
                printf("| %s | %s | %s | %.2f | %.2f | %.1f | %s |\n", shapes[s].name, loads[w].name, kvs[k],
                       1e3 * best, 1e3 * med, flops_of(&shapes[s], &loads[w]) / best / 1e9, ratio);
                fflush(stdout);
            }
        }
    th_host_clear_pool(&host);
    dev.desc->destroy(d);
    th_unload(&attn);
    th_unload(&dev);
    return fails ? 1 : 0;
}
