/* `switchyard generate`: one prompt in, text streamed to stdout. */
#include "config.h"

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "engine/generate.h"
#include "serve/sched_generate.h"
#include "spec/spec.h"
#include "util/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f,
            "usage: switchyard generate -c CONFIG [--model DIR] (--prompt TEXT | --prompt-ids 1,2,3) [-n N]\n"
            "         [--temperature T] [--top-p P] [--top-k K] [--min-p M] [--seed S] [--ignore-eos]\n"
            "         [--print-ids] [--logits-out FILE] [--stats] [--tp N] [--set section.key=value] [--plugin-dir DIR] [-q|-v]\n"
            "Streams the continuation to stdout. Temperature 0 (the default) is greedy.\n"
            "  --prompt-ids    token ids instead of text (no BOS is added)\n"
            "  --ignore-eos    keep going past the end-of-sequence token\n"
            "  --print-ids     print the prompt and generated ids to stderr when done\n"
            "  --logits-out F  write each step's logits as raw float32 rows (vocab per row)\n"
            "  --stats         print prefill and decode speed to stderr (and, with [speculative] on, the\n"
            "                  acceptance rate and mean accepted length)\n"
            SY_CLI_DIST_HELP);
}

typedef struct gen_state {
    sy_detok *detok;
    FILE *logits_out;
    int32_t vocab;
    int32_t *ids;
    int32_t n_ids, cap_ids;
    int failed;
} gen_state;

static int on_token(void *arg, int32_t tok, const float *logits)
{
    gen_state *g = arg;
    if (g->logits_out && fwrite(logits, sizeof(float), (size_t)g->vocab, g->logits_out) != (size_t)g->vocab) {
        fprintf(stderr, "switchyard: writing logits failed\n");
        g->failed = 1;
        return 1;
    }
    if (g->n_ids == g->cap_ids) {
        int32_t cap = g->cap_ids ? g->cap_ids * 2 : 256;
        int32_t *p = realloc(g->ids, sizeof(int32_t) * (size_t)cap);
        if (!p) {
            g->failed = 1;
            return 1;
        }
        g->ids = p;
        g->cap_ids = cap;
    }
    g->ids[g->n_ids++] = tok;
    const char *piece = NULL;
    size_t len = 0;
    sy_err err = {{0}};
    if (sy_detok_push(g->detok, tok, &piece, &len, &err) == SY_OK && len) {
        fwrite(piece, 1, len, stdout);
        fflush(stdout);
    }
    return 0;
}

static int parse_ids(const char *s, int32_t **out, int32_t *n)
{
    size_t cap = 16, k = 0;
    int32_t *ids = malloc(sizeof(int32_t) * cap);
    const char *p = s;
    while (ids && *p) {
        char *end = NULL;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v > INT32_MAX) {
            fprintf(stderr, "switchyard: --prompt-ids expects comma-separated non-negative integers, found \"%s\"\n", s);
            free(ids);
            return -1;
        }
        if (k == cap) {
            cap *= 2;
            int32_t *q = realloc(ids, sizeof(int32_t) * cap);
            if (!q)
                break;
            ids = q;
        }
        ids[k++] = (int32_t)v;
        p = end;
        if (*p == ',')
            p++;
    }
    if (!ids)
        return -1;
    *out = ids;
    *n = (int32_t)k;
    return 0;
}

int sy_cmd_generate(int argc, char **argv)
{
    sy_cli_common co = {0};
    sy_dist_opts dopt = {0};
    const char *prompt = NULL, *prompt_ids = NULL, *logits_path = NULL;
    sy_gen_params gp = {.max_tokens = 64, .sampling = sy_sampling_default(), .ignore_eos = false};
    int print_ids = 0, stats = 0;
    for (int i = 1; i < argc; i++) {
        int r = sy_cli_common_arg(&co, argc, argv, &i);
        if (r == 0)
            r = sy_cli_dist_arg(&dopt, argc, argv, &i);
        if (r < 0)
            return 2;
        if (r > 0)
            continue;
        const char *a = argv[i], *v = NULL;
        long long iv;
        double fv;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--prompt") == 0 || strcmp(a, "-p") == 0) {
            if (!(prompt = sy_cli_value(argc, argv, &i)))
                return 2;
        } else if (strcmp(a, "--prompt-ids") == 0) {
            if (!(prompt_ids = sy_cli_value(argc, argv, &i)))
                return 2;
        } else if (strcmp(a, "-n") == 0 || strcmp(a, "--max-tokens") == 0) {
            if (!(v = sy_cli_value(argc, argv, &i)) || sy_cli_int(a, v, 1, 1 << 24, &iv))
                return 2;
            gp.max_tokens = (int32_t)iv;
        } else if (strcmp(a, "--temperature") == 0) {
            if (!(v = sy_cli_value(argc, argv, &i)) || sy_cli_float(a, v, 0, 100, &fv))
                return 2;
            gp.sampling.temperature = (float)fv;
        } else if (strcmp(a, "--top-p") == 0) {
            if (!(v = sy_cli_value(argc, argv, &i)) || sy_cli_float(a, v, 1e-9, 1, &fv))
                return 2;
            gp.sampling.top_p = (float)fv;
        } else if (strcmp(a, "--top-k") == 0) {
            if (!(v = sy_cli_value(argc, argv, &i)) || sy_cli_int(a, v, 0, 1 << 24, &iv))
                return 2;
            gp.sampling.top_k = (int32_t)iv;
        } else if (strcmp(a, "--min-p") == 0) {
            if (!(v = sy_cli_value(argc, argv, &i)) || sy_cli_float(a, v, 0, 0.999999, &fv))
                return 2;
            gp.sampling.min_p = (float)fv;
        } else if (strcmp(a, "--seed") == 0) {
            if (!(v = sy_cli_value(argc, argv, &i)) || sy_cli_int(a, v, 0, INT64_MAX, &iv))
                return 2;
            gp.sampling.seed = (uint64_t)iv;
        } else if (strcmp(a, "--ignore-eos") == 0) {
            gp.ignore_eos = true;
        } else if (strcmp(a, "--print-ids") == 0) {
            print_ids = 1;
        } else if (strcmp(a, "--stats") == 0) {
            stats = 1;
        } else if (strcmp(a, "--logits-out") == 0) {
            if (!(logits_path = sy_cli_value(argc, argv, &i)))
                return 2;
        } else {
            fprintf(stderr, "switchyard generate: unknown option \"%s\"\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!prompt == !prompt_ids) {
        fprintf(stderr, "switchyard generate: give exactly one of --prompt TEXT or --prompt-ids LIST\n");
        return 2;
    }
    sy_config *cfg = NULL;
    if (sy_cli_load_config(&co, &cfg))
        return 1;
    sy_err err = {{0}};
    sy_engine *e = NULL;
    sy_engine_opts eo = {.plugin_dirs = co.plugin_dirs[0] ? co.plugin_dirs : NULL, .progress = co.verbosity >= 0};
    sy_dist dist;
    if (sy_dist_start(&dist, &dopt, cfg, "generate", &err)) {
        fprintf(stderr, "switchyard: %s\n", err.msg);
        sy_config_free(cfg);
        return 1;
    }
    if (dist.follower) {
        int st = sy_dist_follower_main(&dist, cfg, &eo);
        sy_config_free(cfg);
        return st;
    }
    eo.dist = &dist.ed;
    if (sy_engine_open(cfg, &eo, &e, &err)) {
        fprintf(stderr, "switchyard: %s\n", err.msg);
        sy_dist_finish(&dist);
        sy_config_free(cfg);
        return 1;
    }
    int32_t *ids = NULL;
    int32_t n_ids = 0;
    int rc = 0;
    if (prompt_ids) {
        if (parse_ids(prompt_ids, &ids, &n_ids)) {
            rc = 2;
            goto done;
        }
    } else {
        size_t n = 0;
        if (sy_tokenizer_encode(sy_engine_tokenizer(e), prompt, strlen(prompt), SY_TOK_ADD_SPECIAL | SY_TOK_PARSE_SPECIAL,
                                &ids, &n, &err)) {
            fprintf(stderr, "switchyard: tokenizing the prompt: %s\n", err.msg);
            rc = 1;
            goto done;
        }
        n_ids = (int32_t)n;
    }
    gen_state g = {.vocab = sy_engine_model_config(e)->vocab};
    g.detok = sy_detok_new_after(sy_engine_tokenizer(e), ids, (size_t)n_ids, true);
    if (!g.detok) {
        fprintf(stderr, "switchyard: out of memory\n");
        rc = 1;
        goto done;
    }
    if (logits_path && !(g.logits_out = fopen(logits_path, "wb"))) {
        fprintf(stderr, "switchyard: cannot write --logits-out %s\n", logits_path);
        sy_detok_free(g.detok);
        rc = 1;
        goto done;
    }
    gp.fn_skips_logits = !g.logits_out;
    sy_gen_stats st;
    sy_sched_stats sst;
    sy_spec_config spec;
    if (sy_spec_config_read(cfg, &spec, &err)) {
        fprintf(stderr, "switchyard: %s\n", err.msg);
        rc = 1;
    } else if (spec.method != SY_SPEC_NONE && g.logits_out) {
        fprintf(stderr, "switchyard: --logits-out needs [speculative] method = none (a verify step's rows are not "
                "one per token)\n");
        rc = 2;
    } else if (spec.method != SY_SPEC_NONE ? sy_sched_generate(e, cfg, ids, n_ids, &gp, on_token, &g, &st, &sst, &err)
                                           : sy_generate(e, ids, n_ids, &gp, on_token, &g, &st, &err)) {
        fprintf(stderr, "\nswitchyard: %s\n", err.msg);
        rc = 1;
    }
    const char *tail = NULL;
    size_t tail_len = 0;
    if (sy_detok_finish(g.detok, &tail, &tail_len, &err) == SY_OK && tail_len)
        fwrite(tail, 1, tail_len, stdout);
    fputc('\n', stdout);
    fflush(stdout);
    if (g.logits_out && fclose(g.logits_out) != 0) {
        fprintf(stderr, "switchyard: writing %s failed\n", logits_path);
        rc = 1;
    }
    if (g.failed)
        rc = 1;
    if (print_ids) {
        fprintf(stderr, "prompt_ids:");
        for (int32_t i = 0; i < n_ids; i++)
            fprintf(stderr, " %d", ids[i]);
        fprintf(stderr, "\ngenerated_ids:");
        for (int32_t i = 0; i < g.n_ids; i++)
            fprintf(stderr, " %d", g.ids[i]);
        fprintf(stderr, "\n");
    }
    if (stats && rc == 0)
        fprintf(stderr, "prompt %d tokens in %.3f s (%.1f tok/s); generated %d tokens in %.3f s (%.1f tok/s); finish: %s\n",
                st.prompt_tokens, st.prefill_s, st.prefill_s > 0 ? st.prompt_tokens / st.prefill_s : 0.0, st.generated,
                st.decode_s, st.decode_s > 0 && st.generated > 1 ? (st.generated - 1) / st.decode_s : 0.0, st.finish);
    if (stats && rc == 0)
        fprintf(stderr, "greedy picks on the device: %llu\nsampled picks on the device: %llu\n",
                (unsigned long long)sy_engine_device_picks(e), (unsigned long long)sy_engine_device_samples(e));
    if (stats && rc == 0 && spec.method != SY_SPEC_NONE)
        fprintf(stderr, "speculative (%s): %llu drafts, %llu accepted (acceptance %.3f); %llu verifies, mean accepted "
                "length %.3f tokens per verify\n", sy_spec_method_name(spec.method),
                (unsigned long long)sst.spec_draft_tokens, (unsigned long long)sst.spec_accepted_tokens,
                sst.spec_draft_tokens ? (double)sst.spec_accepted_tokens / (double)sst.spec_draft_tokens : 0.0,
                (unsigned long long)sst.spec_verifies,
                sst.spec_verifies ? 1.0 + (double)sst.spec_accepted_tokens / (double)sst.spec_verifies : 0.0);
    if (stats && rc == 0) {
        sy_engine_graph_counts gc;
        sy_engine_graph_stats(e, &gc);
        fprintf(stderr, "engine steps replayed from graphs: %llu (recorded %llu, op by op %llu; graphs %s)\n",
                (unsigned long long)gc.replays, (unsigned long long)gc.recorded, (unsigned long long)gc.eager,
                gc.on ? "on" : "off");
    }
    sy_detok_free(g.detok);
    free(g.ids);
done:
    free(ids);
    sy_engine_close(e);
    if (sy_dist_finish(&dist) && rc == 0)
        rc = 1;
    sy_config_free(cfg);
    return rc;
}
