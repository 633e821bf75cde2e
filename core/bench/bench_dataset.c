/*
 * The prompts of a run and their request bodies. random: token-id prompts
 * (exact input lengths), ids and lengths from a seeded PRNG, lengths
 * uniform in [len * ratio, len] as SGLang's random dataset draws them.
 * jsonl: one {"prompt": "...", "output_len": N} per line, reused in order
 * when --num-prompts asks for more.
 */
#include "config.h"

#include "bench/bench.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_next(uint64_t *s)
{
    /* splitmix64 */
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static long rng_range(uint64_t *s, long lo, long hi) /* [lo, hi] */
{
    if (hi <= lo)
        return lo;
    return lo + (long)(rng_next(s) % (uint64_t)(hi - lo + 1));
}

/* schema: NULL, or the JSON schema this request is constrained to (borrowed). */
static int finish_body(bench_prompt *p, json_t *prompt, const char *model, long max_tokens, int ignore_eos,
                       json_t *schema)
{
    json_t *o = json_pack("{s:s, s:o, s:I, s:b, s:{s:b}, s:b, s:f}", "model", model, "prompt", prompt,
                          "max_tokens", (json_int_t)max_tokens, "stream", 1, "stream_options",
                          "include_usage", 1, "ignore_eos", ignore_eos, "temperature", 0.0);
    if (!o)
        return -1;
    if (schema &&
        json_object_set_new(o, "response_format",
                            json_pack("{s:s, s:{s:s, s:O}}", "type", "json_schema", "json_schema", "name", "bench",
                                      "schema", schema)) != 0) {
        json_decref(o);
        return -1;
    }
    p->constrained = schema != NULL;
    p->body = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!p->body)
        return -1;
    p->body_len = strlen(p->body);
    p->output_len = max_tokens;
    return 0;
}

/* Request i is constrained when floor((i + 1) f) > floor(i f): the share f spread evenly over the run. */
static json_t *schema_for(const bench_opts *o, json_t *schema, size_t i)
{
    double f = o->constrained_fraction;
    return schema && (long)((double)(i + 1) * f) > (long)((double)i * f) ? schema : NULL;
}

static int build_random(const bench_opts *o, const char *model, long vocab, long max_len, bench_prompt *ps,
                        size_t n, json_t *schema)
{
    uint64_t st = o->seed;
    int ignore_eos = o->ignore_eos != 0; /* default on */
    long in_lo = (long)((double)o->input_len * o->range_ratio), out_lo = (long)((double)o->output_len * o->range_ratio);
    if (in_lo < 1)
        in_lo = 1;
    if (out_lo < 1)
        out_lo = 1;
    for (size_t i = 0; i < n; i++) {
        long in = rng_range(&st, in_lo, o->input_len);
        long out = rng_range(&st, out_lo, o->output_len);
        if (max_len > 0 && in + out > max_len) {
            fprintf(stderr, "switchyard bench: input %ld + output %ld tokens exceed the model's context (%ld)\n",
                    in, out, max_len);
            return -1;
        }
        json_t *ids = json_array();
        for (long j = 0; j < in; j++)
            json_array_append_new(ids, json_integer((json_int_t)(rng_next(&st) % (uint64_t)vocab)));
        ps[i].input_len = in;
        if (finish_body(&ps[i], ids, model, out, ignore_eos, schema_for(o, schema, i)) < 0)
            return -1;
    }
    return 0;
}

static int build_jsonl(const bench_opts *o, const char *model, bench_prompt *ps, size_t n, json_t *schema)
{
    FILE *f = fopen(o->dataset_path, "r");
    if (!f) {
        fprintf(stderr, "switchyard bench: cannot open %s: %s\n", o->dataset_path, strerror(errno));
        return -1;
    }
    char *line = NULL;
    size_t cap = 0, got = 0;
    long lineno = 0;
    int rc = 0;
    ssize_t len;
    while (got < n && (len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        if (strspn(line, " \t\r\n") == (size_t)len)
            continue;
        json_error_t je;
        json_t *root = json_loadb(line, (size_t)len, 0, &je);
        json_t *pr = root ? json_object_get(root, "prompt") : NULL;
        json_t *ol = root ? json_object_get(root, "output_len") : NULL;
        if (!json_is_string(pr) || (ol && (!json_is_integer(ol) || json_integer_value(ol) < 1))) {
            fprintf(stderr, "switchyard bench: %s:%ld: %s\n", o->dataset_path, lineno,
                    !root ? je.text : "expected {\"prompt\": \"...\", \"output_len\": N} (N >= 1)");
            json_decref(root);
            rc = -1;
            break;
        }
        long out = ol ? (long)json_integer_value(ol) : o->output_len;
        ps[got].input_len = 0; /* from usage */
        if (finish_body(&ps[got], json_incref(pr), model, out, o->ignore_eos > 0, schema_for(o, schema, got)) < 0) {
            json_decref(root);
            rc = -1;
            break;
        }
        json_decref(root);
        got++;
    }
    free(line);
    fclose(f);
    if (rc == 0 && got == 0) {
        fprintf(stderr, "switchyard bench: %s has no prompts\n", o->dataset_path);
        rc = -1;
    }
    /* fewer lines than prompts asked for: reuse them in order */
    for (size_t i = got; rc == 0 && i < n; i++) {
        ps[i] = ps[i % got];
        ps[i].body = strdup(ps[i % got].body);
        if (!ps[i].body)
            rc = -1;
    }
    return rc;
}

int bench_dataset_build(const bench_opts *o, const char *model, long vocab, long max_model_len,
                        bench_prompt **out, size_t *n_out)
{
    size_t n = (size_t)o->num_prompts;
    bench_prompt *ps = calloc(n, sizeof *ps);
    if (!ps)
        return -1;
    json_t *schema = NULL;
    if (o->json_schema) {
        json_error_t je;
        schema = json_load_file(o->json_schema, 0, &je);
        if (!json_is_object(schema)) {
            fprintf(stderr, "switchyard bench: --json-schema %s:%d:%d: %s\n", o->json_schema, je.line, je.column,
                    schema ? "expected a JSON object (a JSON schema)" : je.text);
            json_decref(schema);
            free(ps);
            return -1;
        }
    }
    int rc = strcmp(o->dataset, "jsonl") == 0 ? build_jsonl(o, model, ps, n, schema)
                                               : build_random(o, model, vocab, max_model_len, ps, n, schema);
    json_decref(schema);
    if (rc < 0) {
        bench_dataset_free(ps, n);
        return -1;
    }
    *out = ps;
    *n_out = n;
    return 0;
}

void bench_dataset_free(bench_prompt *p, size_t n)
{
    for (size_t i = 0; p && i < n; i++)
        free(p[i].body);
    free(p);
}
