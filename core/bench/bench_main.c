/*
 * switchyard bench: discovery (/v1/models, the vocabulary size), the
 * prompts, one run per level, then the table, JSON and plot.
 */
#include "config.h"

#include "bench/bench.h"
#include "cli/commands.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void server_message(const char *resp, char *out, size_t len)
{
    json_t *root = json_loads(resp, 0, NULL);
    json_t *e = root ? json_object_get(root, "error") : NULL;
    json_t *m = json_is_object(e) ? json_object_get(e, "message") : NULL;
    snprintf(out, len, "%.300s", json_is_string(m) ? json_string_value(m) : resp);
    json_decref(root);
}

static int discover_model(const bench_opts *o, char *model, size_t mlen, long *max_len, long *n_vocab)
{
    int status;
    char *resp = NULL, err[512];
    if (bench_http_simple(o, "GET", "/v1/models", NULL, &status, &resp, err, sizeof err) < 0) {
        fprintf(stderr, "switchyard bench: %s\n", err);
        return -1;
    }
    if (status != 200) {
        char msg[320];
        server_message(resp, msg, sizeof msg);
        fprintf(stderr, "switchyard bench: GET /v1/models on %s:%d answered %d: %s\n", o->host, o->port, status, msg);
        free(resp);
        return -1;
    }
    json_t *root = json_loads(resp, 0, NULL);
    free(resp);
    json_t *data = root ? json_object_get(root, "data") : NULL;
    json_t *pick = NULL;
    for (size_t i = 0; json_is_array(data) && i < json_array_size(data); i++) {
        json_t *m = json_array_get(data, i);
        const char *id = json_string_value(json_object_get(m, "id"));
        if (id && (!o->model || !strcmp(id, o->model))) {
            pick = m;
            break;
        }
    }
    if (!pick) {
        fprintf(stderr, "switchyard bench: GET /v1/models on %s:%d lists %s\n", o->host, o->port,
                o->model ? "no model of that name (--model)" : "no model");
        json_decref(root);
        return -1;
    }
    snprintf(model, mlen, "%s", json_string_value(json_object_get(pick, "id")));
    json_t *ml = json_object_get(pick, "max_model_len");
    *max_len = json_is_integer(ml) ? (long)json_integer_value(ml) : 0;
    /* llama-server names the vocabulary in /v1/models (and answers 500 to an out-of-range /detokenize). */
    json_t *nv = json_object_get(json_object_get(pick, "meta"), "n_vocab");
    *n_vocab = json_is_integer(nv) && json_integer_value(nv) > 0 ? (long)json_integer_value(nv) : 0;
    json_decref(root);
    return 0;
}

/* Waits while GET /health answers 503: a server still loading its model
 * (switchyard serve, llama-server) lists it in /v1/models already but
 * answers 503 to /detokenize and to completions. */
static int wait_ready(const bench_opts *o)
{
    double t0 = bench_now();
    int said = 0;
    for (;;) {
        int status;
        char *resp = NULL, err[512];
        if (bench_http_simple(o, "GET", "/health", NULL, &status, &resp, err, sizeof err) < 0) {
            fprintf(stderr, "switchyard bench: %s\n", err);
            return -1;
        }
        free(resp);
        if (status != 503)
            return 0;
        if (bench_now() - t0 > 600) {
            fprintf(stderr, "switchyard bench: GET /health on %s:%d still answers 503 after 600 s\n", o->host, o->port);
            return -1;
        }
        if (!said && bench_now() - t0 > 1) {
            fprintf(stderr, "switchyard bench: waiting for the server to load (GET /health answers 503)\n");
            said = 1;
        }
        struct timespec ts = {0, 200 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* 1 if /detokenize accepts id, 0 if it refuses it, -1 on a failure. */
static int id_ok(const bench_opts *o, long id, long *hint)
{
    char body[64], *resp = NULL, err[512];
    int status;
    snprintf(body, sizeof body, "{\"tokens\":[%ld]}", id);
    if (bench_http_simple(o, "POST", "/detokenize", body, &status, &resp, err, sizeof err) < 0) {
        fprintf(stderr, "switchyard bench: %s\n", err);
        return -1;
    }
    const char *b = resp ? strstr(resp, "in [0, ") : NULL;
    if (b && hint)
        *hint = strtol(b + 7, NULL, 10);
    free(resp);
    if (status == 200)
        return 1;
    if (status == 400)
        return 0;
    fprintf(stderr, "switchyard bench: POST /detokenize answered %d; pass --vocab-size N\n", status);
    return -1;
}

/* The vocabulary size: the server's "[0, N)" message, else a binary search. */
static long discover_vocab(const bench_opts *o)
{
    long hint = 0;
    int r = id_ok(o, 2147483647L, &hint);
    if (r < 0)
        return -1;
    if (r == 1) {
        fprintf(stderr, "switchyard bench: /detokenize accepts any id; pass --vocab-size N\n");
        return -1;
    }
    if (hint > 0 && id_ok(o, hint - 1, NULL) == 1 && id_ok(o, hint, NULL) == 0)
        return hint;
    long lo = 0, hi = 1L << 24; /* lo accepted (assumed), hi refused */
    if (id_ok(o, hi, NULL) != 0) {
        fprintf(stderr, "switchyard bench: cannot find the vocabulary size; pass --vocab-size N\n");
        return -1;
    }
    while (hi - lo > 1) {
        long mid = lo + (hi - lo) / 2;
        int m = id_ok(o, mid, NULL);
        if (m < 0)
            return -1;
        if (m)
            lo = mid;
        else
            hi = mid;
    }
    return hi;
}

int sy_cmd_bench(int argc, char **argv)
{
    bench_opts o;
    int a = bench_parse_args(&o, argc, argv);
    if (a != 0)
        return a > 0 ? 0 : 2;
    char model[256];
    long max_len = 0, vocab = o.vocab_size, n_vocab = 0;
    if (wait_ready(&o) < 0 || discover_model(&o, model, sizeof model, &max_len, &n_vocab) < 0)
        return 1;
    if (vocab == 0)
        vocab = n_vocab;
    if (!strcmp(o.dataset, "random") && vocab == 0 && (vocab = discover_vocab(&o)) < 0)
        return 1;
    bench_prompt *prompts = NULL;
    size_t n = 0;
    if (bench_dataset_build(&o, model, vocab, max_len, &prompts, &n) < 0)
        return 1;
    bench_print_header(&o, model);
    bench_stats stats[BENCH_MAX_LEVELS];
    bench_result *res = calloc(n, sizeof *res);
    int rc = 0, levels = 0;
    long failed = 0;
    const char *first_error = NULL;
    for (int i = 0; res && i < o.n_conc; i++) {
        char err[512];
        double rate = o.rate_given && isfinite(o.request_rate) ? o.request_rate : 0;
        bench_spec_counts spec0, spec1;
        const int have_spec = bench_scrape_spec(&o, &spec0) == 0;
        double t0 = bench_now();
        int lr = bench_run_level(&o, prompts, n, o.conc[i], rate, res, err, sizeof err);
        double dur = bench_now() - t0;
        if (lr < 0) {
            fprintf(stderr, "switchyard bench: %s\n", err);
            bench_results_free(res, n);
            rc = 1;
            break;
        }
        stats[i].concurrency = o.conc[i];
        stats[i].request_rate = rate;
        bench_compute_stats(res, n, dur, &stats[i]);
        stats[i].n_spec = 0;
        if (have_spec && bench_scrape_spec(&o, &spec1) == 0)
            bench_spec_delta(&spec0, &spec1, &stats[i]);
        bench_results_free(res, n);
        bench_print_table(&stats[i], 1, i == 0);
        if (stats[i].resent)
            fprintf(stderr,
                    "switchyard bench: %ld request%s sent a second time on a new connection: the server had closed "
                    "the reused keep-alive connection before answering\n",
                    stats[i].resent, stats[i].resent == 1 ? "" : "s");
        levels++;
        failed += stats[i].failed;
        if (stats[i].failed && !first_error)
            first_error = stats[i].first_error;
    }
    if (!res) {
        fprintf(stderr, "switchyard bench: out of memory\n");
        rc = 1;
    }
    free(res);
    if (o.single_stream && levels == 1 && stats[0].completed > 0) {
        printf("%.1f tok/s single stream (decode, 1000 / mean TPOT; %ld output tokens per request, TTFT %.1f ms)\n",
               stats[0].tpot_mean > 0 ? 1000.0 / stats[0].tpot_mean : 0.0, o.output_len, stats[0].ttft_mean);
    }
    if (failed) {
        fprintf(stderr, "switchyard bench: %ld request%s failed; the first: %s\n", failed, failed == 1 ? "" : "s",
                first_error);
        rc = 1;
    }
    if (levels > 0 && o.output_json && bench_write_json(o.output_json, &o, model, stats, levels) != 0)
        rc = 1;
    if (levels > 0 && o.plot) {
        char err[256];
        if (bench_write_plot(o.plot, stats, levels, err, sizeof err) < 0) {
            fprintf(stderr, "switchyard bench: --plot: %s\n", err);
            rc = 1;
        }
    }
    bench_dataset_free(prompts, n);
    return rc;
}
