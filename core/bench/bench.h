/*
 * switchyard bench: the serving benchmark (SGLang bench_serving's figures)
 * against a running server. Shared types of core/bench/.
 */
#ifndef SY_BENCH_H
#define SY_BENCH_H

#include <stddef.h>
#include <stdint.h>

#define BENCH_MAX_LEVELS 32

typedef struct bench_opts {
    char host[256];
    int port;
    int http2;                 /* h2c with prior knowledge */
    const char *api_key;       /* Authorization: Bearer */
    const char *model;         /* NULL: the first of /v1/models */
    const char *dataset;       /* "random" or "jsonl" */
    const char *dataset_path;
    long num_prompts;
    long input_len, output_len;
    double range_ratio;
    long vocab_size;           /* 0: ask the server */
    int conc[BENCH_MAX_LEVELS];/* 0: unlimited */
    int n_conc;
    double request_rate;       /* <= 0 or inf: all at once */
    int rate_given;
    uint64_t seed;
    int ignore_eos;            /* -1: default (on for random) */
    int single_stream;
    const char *output_json;
    const char *plot;
    int progress;              /* 0 off, 1 auto */
    double timeout_s;          /* per request, 0: none */
    const char *json_schema;   /* file: constrained requests carry it as response_format json_schema */
    double constrained_fraction; /* share of requests constrained by json_schema, [0, 1] */
    int fraction_given;
} bench_opts;

typedef struct bench_prompt {
    char *body;      /* the JSON request body */
    size_t body_len;
    long input_len;  /* prompt tokens (exact for random; jsonl: from usage) */
    long output_len; /* max_tokens */
    int constrained; /* carries --json-schema */
} bench_prompt;

typedef struct bench_result {
    int ok;
    int status;          /* HTTP status, 0 when none arrived */
    double start;        /* seconds since the level started */
    double ttft;         /* seconds from send to the first token chunk */
    double latency;      /* seconds from send to the end of the answer */
    long prompt_tokens;  /* usage.prompt_tokens (else the dataset's) */
    long output_tokens;  /* usage.completion_tokens (else token chunks) */
    long n_chunks;       /* chunks carrying a token */
    int resent;          /* sent a second time: the reused connection closed before answering */
    double *itl;         /* gaps between token chunks, seconds */
    size_t n_itl, cap_itl;
    char *error;
} bench_result;

#define BENCH_MAX_SPEC 8

/* switchyard_spec_* counters of one method label: draft tokens, accepted tokens, verifications. */
typedef struct bench_spec_method {
    char method[16];
    double v[3];
} bench_spec_method;

typedef struct bench_spec_counts {
    int n;
    bench_spec_method m[BENCH_MAX_SPEC];
} bench_spec_counts;

/* A level's speculative decoding, one method: the counters' differences and what they give. */
typedef struct bench_spec_level {
    char method[16];
    double v[3];
    double acceptance;           /* accepted / draft tokens */
    double mean_accepted_length; /* tokens per verification: 1 + accepted / verifies */
} bench_spec_level;

typedef struct bench_stats {
    int concurrency;     /* 0: unlimited */
    double request_rate; /* 0: all at once */
    long completed, failed;
    long resent;         /* requests sent again on a new connection */
    double duration;
    long total_input, total_output;
    double request_throughput, input_throughput, output_throughput, total_throughput;
    double peak_output_throughput;
    double ttft_mean, ttft_p50, ttft_p90, ttft_p99;
    double tpot_mean, tpot_p50, tpot_p90, tpot_p99;
    double itl_mean, itl_p50, itl_p90, itl_p99;
    double e2e_mean, e2e_p50, e2e_p90, e2e_p99;
    double max_concurrency_seen;
    char first_error[512];
    /* From GET /metrics before and after the level; n_spec 0: the server did not speculate (or has no such
     * counters). */
    int n_spec;
    bench_spec_level spec[BENCH_MAX_SPEC];
} bench_stats;

/* bench_args.c */
int bench_parse_args(bench_opts *o, int argc, char **argv);

/* bench_dataset.c: builds the prompts (bodies included). */
int bench_dataset_build(const bench_opts *o, const char *model, long vocab, long max_model_len,
                        bench_prompt **out, size_t *n_out);
void bench_dataset_free(bench_prompt *p, size_t n);

/* bench_http1.c: one blocking request (Connection: close), for discovery. */
int bench_http_simple(const bench_opts *o, const char *method, const char *path, const char *body,
                      int *status, char **resp, char *err, size_t errlen);

/* bench_loop.c: runs one level; results[i] for prompts[i]. */
int bench_run_level(const bench_opts *o, const bench_prompt *prompts, size_t n, int concurrency,
                    double rate, bench_result *results, char *err, size_t errlen);
void bench_results_free(bench_result *r, size_t n);

/* bench_stats.c */
void bench_compute_stats(const bench_result *r, size_t n, double duration, bench_stats *s);
double bench_percentile(double *v, size_t n, double p); /* sorts v */

/* bench_report.c */
void bench_print_header(const bench_opts *o, const char *model);
void bench_print_table(const bench_stats *s, int n, int header);
int bench_write_json(const char *path, const bench_opts *o, const char *model, const bench_stats *s, int n);

/* bench_metrics.c: the switchyard_spec_* counters of GET /metrics; -1 when it cannot be read. */
int bench_scrape_spec(const bench_opts *o, bench_spec_counts *out);
void bench_spec_delta(const bench_spec_counts *before, const bench_spec_counts *after, bench_stats *s);

/* bench_png.c */
int bench_write_plot(const char *path, const bench_stats *s, int n, char *err, size_t errlen);

/* bench_progress.c */
typedef struct bench_progress {
    int tty, enabled;
    double last_print, t0;
    char label[64];
} bench_progress;
void bench_progress_start(bench_progress *p, int enabled, const char *label, double now);
void bench_progress_update(bench_progress *p, size_t done, size_t failed, size_t total, long out_tokens,
                           double now);
void bench_progress_end(bench_progress *p);

double bench_now(void); /* CLOCK_MONOTONIC seconds */

#endif
