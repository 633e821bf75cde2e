/* switchyard bench: the table on stdout and the JSON file. */
#include "config.h"

#include "bench/bench.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

void bench_print_header(const bench_opts *o, const char *model)
{
    printf("switchyard bench: %s:%d (%s), model %s, dataset %s", o->host, o->port, o->http2 ? "HTTP/2 h2c" : "HTTP/1.1",
           model, o->dataset);
    if (!strcmp(o->dataset, "random"))
        printf(" (input %ld, output %ld, range ratio %g)", o->input_len, o->output_len, o->range_ratio);
    else
        printf(" (%s)", o->dataset_path);
    printf(", %ld prompts per level, ignore_eos %s, seed %llu\n", o->num_prompts, o->ignore_eos ? "on" : "off",
           (unsigned long long)o->seed);
}

static void level_name(const bench_stats *s, char *buf, size_t len)
{
    if (s->request_rate > 0 && isfinite(s->request_rate))
        snprintf(buf, len, s->concurrency > 0 ? "r%g/c%d" : "r%g", s->request_rate, s->concurrency);
    else if (s->concurrency > 0)
        snprintf(buf, len, "%d", s->concurrency);
    else
        snprintf(buf, len, "inf");
}

void bench_print_table(const bench_stats *s, int n, int header)
{
    if (header) {
    printf("%-8s %6s %5s %8s %9s %9s %9s %9s | %8s %8s %8s | %7s %7s %7s | %7s %7s | %8s %8s %8s\n", "", "", "",
           "", "total", "input", "output", "peak out", "TTFT ms", "", "", "TPOT ms", "", "", "ITL ms", "",
           "E2E ms", "", "");
    printf("%-8s %6s %5s %8s %9s %9s %9s %9s | %8s %8s %8s | %7s %7s %7s | %7s %7s | %8s %8s %8s\n", "conc",
           "done", "fail", "dur s", "tok/s", "tok/s", "tok/s", "tok/s", "mean", "p50", "p99", "mean", "p50", "p99",
           "p50", "p99", "mean", "p50", "p99");
    }
    for (int i = 0; i < n; i++) {
        const bench_stats *x = &s[i];
        char name[32];
        level_name(x, name, sizeof name);
        printf("%-8s %6ld %5ld %8.2f %9.1f %9.1f %9.1f %9.1f | %8.2f %8.2f %8.2f | %7.2f %7.2f %7.2f | %7.2f %7.2f"
               " | %8.1f %8.1f %8.1f\n",
               name, x->completed, x->failed, x->duration, x->total_throughput, x->input_throughput,
               x->output_throughput, x->peak_output_throughput, x->ttft_mean, x->ttft_p50, x->ttft_p99,
               x->tpot_mean, x->tpot_p50, x->tpot_p99, x->itl_p50, x->itl_p99, x->e2e_mean, x->e2e_p50,
               x->e2e_p99);
        for (int k = 0; k < x->n_spec; k++)
            printf("  speculative %s: acceptance %.3f, mean accepted length %.3f (%.0f drafts, %.0f accepted, %.0f "
                   "verifies)\n",
                   x->spec[k].method, x->spec[k].acceptance, x->spec[k].mean_accepted_length, x->spec[k].v[0],
                   x->spec[k].v[1], x->spec[k].v[2]);
    }
    fflush(stdout);
}

static json_t *level_json(const bench_stats *x)
{
    json_t *o = json_object();
    json_object_set_new(o, "max_concurrency", x->concurrency > 0 ? json_integer(x->concurrency) : json_null());
    json_object_set_new(o, "request_rate",
                        x->request_rate > 0 && isfinite(x->request_rate) ? json_real(x->request_rate) : json_string("inf"));
#define I(k) json_object_set_new(o, #k, json_integer(x->k))
#define R(k) json_object_set_new(o, #k, json_real(x->k))
    I(completed);
    I(failed);
    I(resent);
    R(duration);
    I(total_input);
    I(total_output);
    R(request_throughput);
    R(input_throughput);
    R(output_throughput);
    R(total_throughput);
    R(peak_output_throughput);
    R(ttft_mean);
    R(ttft_p50);
    R(ttft_p90);
    R(ttft_p99);
    R(tpot_mean);
    R(tpot_p50);
    R(tpot_p90);
    R(tpot_p99);
    R(itl_mean);
    R(itl_p50);
    R(itl_p90);
    R(itl_p99);
    R(e2e_mean);
    R(e2e_p50);
    R(e2e_p90);
    R(e2e_p99);
    R(max_concurrency_seen);
#undef I
#undef R
    if (x->first_error[0])
        json_object_set_new(o, "first_error", json_string(x->first_error));
    if (x->n_spec > 0) {
        json_t *sp = json_object();
        for (int k = 0; k < x->n_spec; k++)
            json_object_set_new(sp, x->spec[k].method,
                                json_pack("{s:f, s:f, s:f, s:f, s:f}", "acceptance_rate", x->spec[k].acceptance,
                                          "mean_accepted_length", x->spec[k].mean_accepted_length, "draft_tokens",
                                          x->spec[k].v[0], "accepted_tokens", x->spec[k].v[1], "verifies",
                                          x->spec[k].v[2]));
        json_object_set_new(o, "speculative", sp);
    }
    return o;
}

int bench_write_json(const char *path, const bench_opts *o, const char *model, const bench_stats *s, int n)
{
    json_t *cfg = json_pack("{s:s, s:i, s:s, s:s, s:s?, s:I, s:I, s:I, s:f, s:I, s:b, s:b, s:s}", "host", o->host,
                            "port", o->port, "protocol", o->http2 ? "h2c" : "http/1.1", "dataset", o->dataset,
                            "dataset_path", o->dataset_path, "num_prompts", (json_int_t)o->num_prompts,
                            "random_input_len", (json_int_t)o->input_len, "random_output_len",
                            (json_int_t)o->output_len, "random_range_ratio", o->range_ratio, "seed",
                            (json_int_t)o->seed, "ignore_eos", o->ignore_eos, "single_stream", o->single_stream,
                            "model", model);
    if (cfg && o->json_schema) {
        json_object_set_new(cfg, "json_schema", json_string(o->json_schema));
        json_object_set_new(cfg, "constrained_fraction", json_real(o->constrained_fraction));
    }
    json_t *lv = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(lv, level_json(&s[i]));
    json_t *root = json_pack("{s:s, s:o, s:o}", "units", "latencies in ms, throughputs in tokens/s", "config", cfg,
                             "levels", lv);
    if (o->single_stream && n > 0 && s[0].tpot_mean > 0)
        json_object_set_new(root, "single_stream_tok_s", json_real(1000.0 / s[0].tpot_mean));
    int rc = json_dump_file(root, path, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
    json_decref(root);
    if (rc != 0)
        fprintf(stderr, "switchyard bench: cannot write %s: %s\n", path, strerror(errno));
    return rc;
}
