/* switchyard bench: the command line. */
#include "config.h"

#include "bench/bench.h"
#include "cli/cli_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f,
            "usage: switchyard bench [options]\n"
            "Drives a running server's /v1/completions with streamed requests and prints\n"
            "SGLang bench_serving's figures (docs/benchmarks.md), one row per level.\n"
            "  --host HOST              server host (default 127.0.0.1)\n"
            "  --port PORT              server port (default 30000)\n"
            "  --base-url URL           http://HOST:PORT instead of --host/--port\n"
            "  --http2                  HTTP/2 cleartext, prior knowledge (default HTTP/1.1 keep-alive)\n"
            "  --api-key KEY            Authorization: Bearer KEY (default $OPENAI_API_KEY)\n"
            "  --model NAME             model to ask for (default: the first of /v1/models)\n"
            "  --dataset random|jsonl   (default random)\n"
            "  --dataset-path FILE      jsonl: one {\"prompt\": \"...\", \"output_len\": N} per line\n"
            "  --num-prompts N          requests per level (default 1000)\n"
            "  --random-input-len N     (default 1024)\n"
            "  --random-output-len N    (default 1024; jsonl: when a line has no output_len)\n"
            "  --random-range-ratio R   lengths uniform in [N*R, N] (default 1.0: exact)\n"
            "  --vocab-size N           token ids drawn in [0, N) (default: asked from the server)\n"
            "  --max-concurrency LIST   comma-separated levels, e.g. 1,4,16,64 (default: unlimited)\n"
            "  --request-rate R         Poisson arrivals at R requests/s (default inf: all at once)\n"
            "  --seed N                 PRNG seed for prompts and arrivals (default 1)\n"
            "  --ignore-eos, --no-ignore-eos  (default: on for random, off for jsonl)\n"
            "  --single-stream          concurrency 1, one request of 256 output tokens: decode tok/s\n"
            "  --output-json FILE       every figure per level, and the configuration\n"
            "  --plot FILE.png          throughput and TPOT against concurrency\n"
            "  --no-progress            no progress on stderr\n"
            "  --json-schema FILE       constrain requests to this JSON schema (response_format json_schema)\n"
            "  --constrained-fraction F share of requests that carry --json-schema, in [0, 1] (default 1)\n");
}

static int parse_url(bench_opts *o, const char *url)
{
    const char *p = url;
    if (!strncmp(p, "http://", 7))
        p += 7;
    else if (strstr(p, "://")) {
        fprintf(stderr, "switchyard bench: --base-url: only http:// is supported, found \"%s\"\n", url);
        return -1;
    }
    const char *end = p + strcspn(p, "/");
    const char *colon = NULL;
    if (*p == '[') {
        const char *rb = memchr(p, ']', (size_t)(end - p));
        if (!rb) {
            fprintf(stderr, "switchyard bench: --base-url: bad host in \"%s\"\n", url);
            return -1;
        }
        snprintf(o->host, sizeof o->host, "%.*s", (int)(rb - p - 1), p + 1);
        colon = rb[1] == ':' ? rb + 1 : NULL;
    } else {
        colon = memchr(p, ':', (size_t)(end - p));
        snprintf(o->host, sizeof o->host, "%.*s", (int)((colon ? colon : end) - p), p);
    }
    if (!o->host[0]) {
        fprintf(stderr, "switchyard bench: --base-url: no host in \"%s\"\n", url);
        return -1;
    }
    o->port = 80;
    if (colon) {
        char num[16];
        snprintf(num, sizeof num, "%.*s", (int)(end - colon - 1), colon + 1);
        long long v;
        if (sy_cli_int("--base-url port", num, 1, 65535, &v) < 0)
            return -1;
        o->port = (int)v;
    }
    return 0;
}

static int parse_levels(bench_opts *o, const char *s)
{
    o->n_conc = 0;
    const char *p = s;
    while (*p) {
        char item[32];
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= sizeof item || o->n_conc == BENCH_MAX_LEVELS) {
            fprintf(stderr, "switchyard bench: --max-concurrency expects a list like 1,4,16 (at most %d), found \"%s\"\n",
                    BENCH_MAX_LEVELS, s);
            return -1;
        }
        memcpy(item, p, len);
        item[len] = 0;
        long long v;
        if (sy_cli_int("--max-concurrency", item, 1, 100000, &v) < 0)
            return -1;
        o->conc[o->n_conc++] = (int)v;
        p += len;
        if (*p == ',')
            p++;
    }
    if (o->n_conc == 0) {
        fprintf(stderr, "switchyard bench: --max-concurrency: empty list\n");
        return -1;
    }
    return 0;
}

/* Returns 0 to run, 1 after --help, -1 on error (printed). */
int bench_parse_args(bench_opts *o, int argc, char **argv)
{
    memset(o, 0, sizeof *o);
    snprintf(o->host, sizeof o->host, "127.0.0.1");
    o->port = 30000;
    o->dataset = "random";
    o->num_prompts = -1;
    o->input_len = -1;
    o->output_len = -1;
    o->range_ratio = 1.0;
    o->seed = 1;
    o->ignore_eos = -1;
    o->progress = 1;
    o->api_key = getenv("OPENAI_API_KEY");
    if (o->api_key && !o->api_key[0])
        o->api_key = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = NULL;
        long long n;
        double d;
#define VALUE() (v = sy_cli_value(argc, argv, &i))
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 1;
        } else if (!strcmp(a, "--http2")) {
            o->http2 = 1;
        } else if (!strcmp(a, "--http1")) {
            o->http2 = 0;
        } else if (!strcmp(a, "--ignore-eos")) {
            o->ignore_eos = 1;
        } else if (!strcmp(a, "--no-ignore-eos")) {
            o->ignore_eos = 0;
        } else if (!strcmp(a, "--single-stream")) {
            o->single_stream = 1;
        } else if (!strcmp(a, "--no-progress")) {
            o->progress = 0;
        } else if (!strcmp(a, "--host")) {
            if (!VALUE())
                return -1;
            snprintf(o->host, sizeof o->host, "%s", v);
        } else if (!strcmp(a, "--port")) {
            if (!VALUE() || sy_cli_int(a, v, 1, 65535, &n) < 0)
                return -1;
            o->port = (int)n;
        } else if (!strcmp(a, "--base-url")) {
            if (!VALUE() || parse_url(o, v) < 0)
                return -1;
        } else if (!strcmp(a, "--api-key")) {
            if (!VALUE())
                return -1;
            o->api_key = v;
        } else if (!strcmp(a, "--model")) {
            if (!VALUE())
                return -1;
            o->model = v;
        } else if (!strcmp(a, "--dataset") || !strcmp(a, "--dataset-name")) {
            if (!VALUE())
                return -1;
            if (strcmp(v, "random") && strcmp(v, "jsonl")) {
                fprintf(stderr, "switchyard bench: --dataset expects random or jsonl, found \"%s\"\n", v);
                return -1;
            }
            o->dataset = v;
        } else if (!strcmp(a, "--dataset-path")) {
            if (!VALUE())
                return -1;
            o->dataset_path = v;
        } else if (!strcmp(a, "--num-prompts")) {
            if (!VALUE() || sy_cli_int(a, v, 1, 10000000, &n) < 0)
                return -1;
            o->num_prompts = (long)n;
        } else if (!strcmp(a, "--random-input-len")) {
            if (!VALUE() || sy_cli_int(a, v, 1, 100000000, &n) < 0)
                return -1;
            o->input_len = (long)n;
        } else if (!strcmp(a, "--random-output-len")) {
            if (!VALUE() || sy_cli_int(a, v, 1, 100000000, &n) < 0)
                return -1;
            o->output_len = (long)n;
        } else if (!strcmp(a, "--random-range-ratio")) {
            if (!VALUE() || sy_cli_float(a, v, 0, 1, &d) < 0)
                return -1;
            o->range_ratio = d;
        } else if (!strcmp(a, "--vocab-size")) {
            if (!VALUE() || sy_cli_int(a, v, 1, 100000000, &n) < 0)
                return -1;
            o->vocab_size = (long)n;
        } else if (!strcmp(a, "--max-concurrency")) {
            if (!VALUE() || parse_levels(o, v) < 0)
                return -1;
        } else if (!strcmp(a, "--request-rate")) {
            if (!VALUE())
                return -1;
            if (!strcmp(v, "inf")) {
                o->request_rate = INFINITY;
            } else if (sy_cli_float(a, v, 1e-6, 1e9, &d) < 0) {
                return -1;
            } else {
                o->request_rate = d;
            }
            o->rate_given = 1;
        } else if (!strcmp(a, "--seed")) {
            if (!VALUE() || sy_cli_int(a, v, 0, 0x7fffffffffffffffLL, &n) < 0)
                return -1;
            o->seed = (uint64_t)n;
        } else if (!strcmp(a, "--output-json")) {
            if (!VALUE())
                return -1;
            o->output_json = v;
        } else if (!strcmp(a, "--json-schema")) {
            if (!VALUE())
                return -1;
            o->json_schema = v;
        } else if (!strcmp(a, "--constrained-fraction")) {
            if (!VALUE() || sy_cli_float(a, v, 0.0, 1.0, &d) < 0)
                return -1;
            o->constrained_fraction = d;
            o->fraction_given = 1;
        } else if (!strcmp(a, "--plot")) {
            if (!VALUE())
                return -1;
            o->plot = v;
        } else {
            fprintf(stderr, "switchyard bench: unknown option \"%s\" (see switchyard bench --help)\n", a);
            return -1;
        }
#undef VALUE
    }
    if (o->fraction_given && !o->json_schema) {
        fprintf(stderr, "switchyard bench: --constrained-fraction needs --json-schema FILE\n");
        return -1;
    }
    if (o->json_schema && !o->fraction_given)
        o->constrained_fraction = 1.0;
    if (!strcmp(o->dataset, "jsonl") && !o->dataset_path) {
        fprintf(stderr, "switchyard bench: --dataset jsonl needs --dataset-path FILE\n");
        return -1;
    }
    if (o->single_stream) {
        if (o->n_conc > 1 || (o->n_conc == 1 && o->conc[0] != 1) || o->rate_given) {
            fprintf(stderr, "switchyard bench: --single-stream runs at concurrency 1; drop --max-concurrency/--request-rate\n");
            return -1;
        }
        o->n_conc = 1;
        o->conc[0] = 1;
        if (o->num_prompts < 0)
            o->num_prompts = 1;
        if (o->output_len < 0)
            o->output_len = 256;
        if (o->input_len < 0)
            o->input_len = 32;
    }
    if (o->num_prompts < 0)
        o->num_prompts = 1000;
    if (o->input_len < 0)
        o->input_len = 1024;
    if (o->output_len < 0)
        o->output_len = 1024;
    if (o->ignore_eos < 0)
        o->ignore_eos = !strcmp(o->dataset, "random");
    if (o->n_conc == 0) {
        o->n_conc = 1;
        o->conc[0] = 0; /* unlimited */
    }
    return 0;
}
