/*
 * `switchyard bench-grammar`: what constrained decoding costs per token.
 * For each tokenizer and grammar it times the compile (cold, and through
 * sy_grammar_cache once compiled), then walks the matcher at random:
 * before each token it fills the mask (timed), then takes a random token
 * the mask allows, restarting when the output is complete. The first walk
 * also fills the grammar's per-position token caches; the table's mask
 * figures are from a second walk on the warm caches, as a server sees them
 * after the first request with a schema, with the cold walk's mean beside.
 */
#include "config.h"

#include "cli/commands.h"
#include "cli/cli_common.h"
#include "grammar/grammar.h"
#include "tokenizer/tokenizer.h"
#include "util/util.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* A 10-property nested object: the shapes structured outputs use. */
static const char bench_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"id\":{\"type\":\"integer\"},"
    "\"name\":{\"type\":\"string\"},"
    "\"active\":{\"type\":\"boolean\"},"
    "\"score\":{\"type\":\"number\"},"
    "\"role\":{\"enum\":[\"admin\",\"user\",\"guest\"]},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"maxItems\":5},"
    "\"address\":{\"type\":\"object\",\"properties\":{\"street\":{\"type\":\"string\"},"
    "\"city\":{\"type\":\"string\"},\"zip\":{\"type\":\"string\"}},\"required\":[\"street\",\"city\"]},"
    "\"scores\":{\"type\":\"array\",\"items\":{\"type\":\"integer\"}},"
    "\"manager\":{\"anyOf\":[{\"type\":\"null\"},{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"},"
    "\"name\":{\"type\":\"string\"}},\"required\":[\"id\"]}]},"
    "\"note\":{\"type\":\"string\"}"
    "},\"required\":[\"id\",\"name\",\"active\",\"role\",\"address\"]}";

typedef struct bgrammar {
    const char *label;
    int kind; /* 0 schema text, 1 json_any, 2 GBNF text */
    const char *text;
} bgrammar;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: switchyard bench-grammar [--tokenizer PATH]... [--schema FILE] [--gbnf FILE]\n"
            "                                [--steps N] [--seed N]\n"
            "Token-mask time per token for constrained decoding, over a random walk of the matcher.\n"
            "  --tokenizer PATH  a tokenizer.json or a model directory (repeatable); default: the\n"
            "                    llama2-spm, cl100k and o200k tokenizers under $SY_SHARED_DIR/tokenizers\n"
            "  --schema FILE     also time this JSON schema (root rule: the schema)\n"
            "  --gbnf FILE       also time this GBNF grammar (root rule: root)\n"
            "  --steps N         masks timed per walk (default 400)\n"
            "  --seed N          random walk seed (default 1)\n"
            "Built in: a 10-property nested JSON schema, and any JSON object (json_any with\n"
            "object_only, as response_format json_object uses).\n");
}

typedef struct build_arg {
    const bgrammar *g;
} build_arg;

static int build(void *arg, sy_gsrc *src, sy_err *err)
{
    const bgrammar *g = ((build_arg *)arg)->g;
    if (g->kind == 0)
        return sy_gsrc_add_json_schema(src, "root", g->text, "schema", err);
    if (g->kind == 1)
        return sy_gsrc_add_json_any(src, "root", true, err); /* response_format json_object */
    return sy_gsrc_add_gbnf(src, g->text, g->label, err);
}

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct walk_stats {
    double mean_us, p50_us, p99_us, max_us, first_ms, allowed;
    int restarts;
} walk_stats;

/* One timed walk of steps masks; -1 on an error (printed). */
static int timed_walk(const sy_grammar *g, const sy_gvocab *v, const sy_tokenizer *t, const int32_t *eos,
                      size_t n_eos, int steps, uint64_t seed, walk_stats *st)
{
    sy_err err = {{0}};
    size_t words = sy_gmask_words(v);
    int32_t n_vocab = sy_gvocab_size(v);
    uint32_t *mask = calloc(words, sizeof *mask);
    int32_t *ids = malloc((size_t)n_vocab * sizeof *ids), *shorts = malloc((size_t)n_vocab * sizeof *shorts);
    double *us = malloc((size_t)steps * sizeof *us);
    sy_gmatcher *m = NULL;
    int rc = -1;
    memset(st, 0, sizeof *st);
    if (!mask || !ids || !shorts || !us || sy_gmatcher_new(g, v, &m, &err)) {
        fprintf(stderr, "switchyard bench-grammar: %s\n", err.msg[0] ? err.msg : "out of memory");
        goto out;
    }
    double allowed = 0;
    for (int s = 0; s < steps; s++) {
        if (sy_gmatcher_done(m)) { /* complete: start another output */
            sy_gmatcher_free(m);
            m = NULL;
            if (sy_gmatcher_new(g, v, &m, &err)) {
                fprintf(stderr, "switchyard bench-grammar: %s\n", err.msg);
                goto out;
            }
            st->restarts++;
        }
        double t0 = sy_now();
        int r = sy_gmatcher_fill_mask(m, mask, &err);
        us[s] = (sy_now() - t0) * 1e6;
        if (r) {
            fprintf(stderr, "switchyard bench-grammar: step %d: %s\n", s, err.msg);
            goto out;
        }
        size_t n = 0, ns = 0;
        for (int32_t i = 0; i < n_vocab; i++) {
            if (!((mask[i >> 5] >> (i & 31)) & 1u))
                continue;
            bool is_eos = false;
            for (size_t k = 0; k < n_eos; k++)
                is_eos |= eos[k] == i;
            if (is_eos)
                continue;
            ids[n++] = i;
            const char *piece = sy_tokenizer_piece(t, i);
            if (piece && strlen(piece) == 1 && ispunct((unsigned char)piece[0]))
                shorts[ns++] = i;
        }
        allowed += (double)n;
        if (n == 0) { /* only EOS: the output is complete */
            sy_gmatcher_free(m);
            m = NULL;
            if (sy_gmatcher_new(g, v, &m, &err)) {
                fprintf(stderr, "switchyard bench-grammar: %s\n", err.msg);
                goto out;
            }
            st->restarts++;
            continue;
        }
        /* some punctuation picks (quotes, commas, brackets) move the walk
         * through the structure instead of one endless string or number */
        uint64_t x = rng_next(&seed);
        int32_t tok = (ns && x % 10 < 3) ? shorts[(x >> 8) % ns] : ids[(x >> 8) % n];
        if (sy_gmatcher_accept_token(m, tok, &err)) {
            fprintf(stderr, "switchyard bench-grammar: step %d: %s\n", s, err.msg);
            goto out;
        }
    }
    st->first_ms = us[0] / 1000.0;
    double sum = 0;
    for (int s = 0; s < steps; s++)
        sum += us[s];
    st->mean_us = sum / steps;
    qsort(us, (size_t)steps, sizeof *us, cmp_double);
    st->p50_us = us[steps / 2];
    st->p99_us = us[(size_t)((steps - 1) * 0.99)];
    st->max_us = us[steps - 1];
    st->allowed = allowed / steps;
    rc = 0;
out:
    sy_gmatcher_free(m);
    free(mask);
    free(ids);
    free(shorts);
    free(us);
    return rc;
}

static sy_tokenizer *load_tokenizer(const char *path)
{
    struct stat sb;
    sy_tokenizer *t = NULL;
    sy_err err = {{0}};
    int rc = stat(path, &sb) == 0 && S_ISDIR(sb.st_mode) ? sy_tokenizer_load_dir(path, &t, &err)
                                                           : sy_tokenizer_load_file(path, &t, &err);
    if (rc) {
        fprintf(stderr, "switchyard bench-grammar: %s: %s\n", path, err.msg);
        return NULL;
    }
    return t;
}

static const char *short_name(const char *path)
{
    /* .../NAME/tokenizer.json or .../NAME */
    static const char tj[] = "/tokenizer.json";
    size_t n = strlen(path);
    if (n > sizeof tj - 1 && strcmp(path + n - (sizeof tj - 1), tj) == 0)
        n -= sizeof tj - 1;
    while (n > 1 && path[n - 1] == '/')
        n--;
    size_t s = n;
    while (s > 0 && path[s - 1] != '/')
        s--;
    return path + s; /* printed with the length n - s */
}

static int bench_one(const char *path, const bgrammar *gs, size_t n_g, int steps, uint64_t seed)
{
    sy_tokenizer *t = load_tokenizer(path);
    if (!t)
        return 1;
    sy_err err = {{0}};
    sy_gvocab *v = NULL;
    /* a bare tokenizer.json has no EOS ids: take its end-of-text token */
    const int32_t *eos_p;
    size_t n_eos = sy_tokenizer_eos(t, &eos_p);
    int32_t eos[8];
    if (n_eos > 8)
        n_eos = 8;
    memcpy(eos, eos_p, n_eos * sizeof *eos);
    static const char *const ends[] = {"<|endoftext|>", "</s>", "<|eot_id|>", "<|im_end|>"};
    for (size_t k = 0; n_eos == 0 && k < 4; k++)
        if ((eos[0] = sy_tokenizer_token_id(t, ends[k])) >= 0)
            n_eos = 1;
    double t0 = sy_now();
    if (sy_gvocab_from_tokenizer(t, eos, n_eos, &v, &err)) {
        fprintf(stderr, "switchyard bench-grammar: %s: %s\n", path, err.msg);
        sy_tokenizer_free(t);
        return 1;
    }
    double vocab_ms = (sy_now() - t0) * 1e3;
    const char *nm = short_name(path);
    size_t n_nm = strlen(nm);
    if (n_nm >= 15 && strchr(nm, '/'))
        n_nm = (size_t)(strchr(nm, '/') - nm);
    int status = 0;
    for (size_t i = 0; i < n_g; i++) {
        build_arg a = {&gs[i]};
        /* cold: sources and compile, no cache */
        sy_gsrc *src = sy_gsrc_new();
        sy_grammar *cold = NULL;
        t0 = sy_now();
        int rc = build(&a, src, &err);
        if (!rc)
            rc = sy_grammar_compile(src, "root", &cold, &err);
        double compile_ms = (sy_now() - t0) * 1e3;
        sy_gsrc_free(src);
        sy_grammar_free(cold);
        if (rc) {
            fprintf(stderr, "switchyard bench-grammar: %s: %s\n", gs[i].label, err.msg);
            status = 1;
            continue;
        }
        sy_grammar_cache *cache = sy_grammar_cache_new(8);
        const sy_grammar *g = NULL, *g2 = NULL;
        char key[64];
        snprintf(key, sizeof key, "bench:%zu", i);
        if (!cache || sy_grammar_cache_get(cache, key, strlen(key), build, &a, &g, &err)) {
            fprintf(stderr, "switchyard bench-grammar: %s: %s\n", gs[i].label, cache ? err.msg : "out of memory");
            sy_grammar_cache_free(cache);
            status = 1;
            continue;
        }
        t0 = sy_now();
        sy_grammar_cache_get(cache, key, strlen(key), build, &a, &g2, &err);
        double cached_us = (sy_now() - t0) * 1e6;
        walk_stats cold_w, warm_w;
        if (timed_walk(g, v, t, eos, n_eos, steps, seed, &cold_w) ||
            timed_walk(g, v, t, eos, n_eos, steps, seed + 1, &warm_w)) {
            status = 1;
        } else {
            printf("%-12.*s %7d  %-14s %9.2f %9.2f %11.2f %9.1f | %8.1f %8.1f %8.1f %8.1f %9.0f %6d\n",
                   (int)n_nm, nm, (int)sy_gvocab_size(v), gs[i].label, compile_ms, cached_us, cold_w.first_ms,
                   cold_w.mean_us, warm_w.mean_us, warm_w.p50_us, warm_w.p99_us, warm_w.max_us, warm_w.allowed,
                   warm_w.restarts);
            fflush(stdout);
        }
        sy_grammar_cache_release(cache, g2);
        sy_grammar_cache_release(cache, g);
        sy_grammar_cache_free(cache);
    }
    printf("%-12.*s vocabulary prepared in %.0f ms (token bytes, trie)\n", (int)n_nm, nm, vocab_ms);
    sy_gvocab_free(v);
    sy_tokenizer_free(t);
    return status;
}

int sy_cmd_bench_grammar(int argc, char **argv)
{
    const char *toks[32];
    int n_toks = 0;
    const char *schema_file = NULL, *gbnf_file = NULL;
    long long steps = 400, seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--tokenizer") == 0) {
            if (!(val = sy_cli_value(argc, argv, &i)))
                return 2;
            if (n_toks == 32) {
                fprintf(stderr, "switchyard bench-grammar: at most 32 --tokenizer options\n");
                return 2;
            }
            toks[n_toks++] = val;
        } else if (strcmp(a, "--schema") == 0) {
            if (!(schema_file = sy_cli_value(argc, argv, &i)))
                return 2;
        } else if (strcmp(a, "--gbnf") == 0) {
            if (!(gbnf_file = sy_cli_value(argc, argv, &i)))
                return 2;
        } else if (strcmp(a, "--steps") == 0) {
            if (!(val = sy_cli_value(argc, argv, &i)) || sy_cli_int("--steps", val, 1, 1000000, &steps))
                return 2;
        } else if (strcmp(a, "--seed") == 0) {
            if (!(val = sy_cli_value(argc, argv, &i)) || sy_cli_int("--seed", val, 1, (1ll << 62), &seed))
                return 2;
        } else {
            fprintf(stderr, "switchyard bench-grammar: unknown option \"%s\"\n", a);
            usage(stderr);
            return 2;
        }
    }
    char defaults[3][1024];
    if (n_toks == 0) {
        const char *shared = getenv("SY_SHARED_DIR");
        if (!shared || !*shared) {
            fprintf(stderr, "switchyard bench-grammar: no --tokenizer given and SY_SHARED_DIR is not set\n");
            usage(stderr);
            return 2;
        }
        static const char *const names[3] = {"llama2-spm", "cl100k", "o200k"};
        for (int k = 0; k < 3; k++) {
            snprintf(defaults[k], sizeof defaults[k], "%s/tokenizers/%s/tokenizer.json", shared, names[k]);
            toks[n_toks++] = defaults[k];
        }
    }
    bgrammar gs[4] = {{"schema-10prop", 0, bench_schema}, {"json_object", 1, NULL}};
    size_t n_g = 2;
    char *schema_text = NULL, *gbnf_text = NULL;
    sy_err err = {{0}};
    size_t len;
    if (schema_file) {
        if (sy_read_file(schema_file, &schema_text, &len, &err)) {
            fprintf(stderr, "switchyard bench-grammar: --schema %s: %s\n", schema_file, err.msg);
            return 1;
        }
        gs[n_g++] = (bgrammar){"schema-file", 0, schema_text};
    }
    if (gbnf_file) {
        if (sy_read_file(gbnf_file, &gbnf_text, &len, &err)) {
            fprintf(stderr, "switchyard bench-grammar: --gbnf %s: %s\n", gbnf_file, err.msg);
            free(schema_text);
            return 1;
        }
        gs[n_g++] = (bgrammar){"gbnf-file", 2, gbnf_text};
    }
    printf("# switchyard bench-grammar: %lld masks per walk, seed %lld; mask figures from the second walk (warm "
           "token caches)\n",
           steps, seed);
    printf("# %-10s %7s  %-14s %9s %9s %11s %9s | %8s %8s %8s %8s %9s %6s\n", "vocab", "tokens", "grammar",
           "compile", "cached", "first_mask", "cold", "mask", "p50", "p99", "max", "allowed", "ends");
    printf("# %-10s %7s  %-14s %9s %9s %11s %9s | %8s %8s %8s %8s %9s %6s\n", "", "", "", "ms", "us", "ms",
           "mean_us", "mean_us", "us", "us", "us", "tokens", "");
    int status = 0;
    for (int k = 0; k < n_toks; k++)
        status |= bench_one(toks[k], gs, n_g, (int)steps, (uint64_t)seed);
    free(schema_text);
    free(gbnf_text);
    return status;
}
