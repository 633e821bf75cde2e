/*
 * Golden outputs: every model in $SY_SHARED_DIR/models/expected_greedy.json,
 * every prompt, 64 greedy tokens through the engine with each attention
 * plugin (cpu, then cpu-ref: the swap test). Ids must match exactly, the
 * top-5 log-probabilities within LOGPROB_TOL, and the streamed text byte
 * for byte.
 */
#include "config.h"

#include "engine/generate.h"
#include "util/log.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* float32 engine against a float64 reference: logprobs agree to ~1e-5. */
#define LOGPROB_TOL 2e-4

typedef struct run {
    int32_t ids[256];
    int32_t n;
    float top5_err;
    json_t *top5; /* expected [[id, lp] x5] per step */
    int32_t vocab;
    sy_detok *detok;
    char text[8192];
    size_t text_len;
} run;

static int on_token(void *arg, int32_t tok, const float *logits)
{
    run *r = arg;
    json_t *step = json_array_get(r->top5, (size_t)r->n);
    for (size_t j = 0; step && j < json_array_size(step); j++) {
        json_t *pair = json_array_get(step, j);
        int32_t id = (int32_t)json_integer_value(json_array_get(pair, 0));
        double want = json_number_value(json_array_get(pair, 1));
        float got = sy_logprob(logits, r->vocab, id);
        float d = fabsf(got - (float)want);
        if (!(d <= r->top5_err)) /* NaN counts as the worst error */
            r->top5_err = isnan(d) ? INFINITY : d;
    }
    if (r->n < 256)
        r->ids[r->n++] = tok;
    const char *piece;
    size_t len;
    sy_err err;
    if (sy_detok_push(r->detok, tok, &piece, &len, &err) == SY_OK && r->text_len + len < sizeof r->text) {
        memcpy(r->text + r->text_len, piece, len);
        r->text_len += len;
    }
    return 0;
}

static int run_model(const char *shared, const char *plugin_dir, const char *name, json_t *cases, const char *attn)
{
    char model_set[4608], attn_set[300];
    sy_err err = {{0}};
    sy_config *cfg = sy_config_new();
    snprintf(model_set, sizeof model_set, "model.path=%s/models/%s", shared, name);
    snprintf(attn_set, sizeof attn_set, "attention.plugin=%s", attn);
    const char *sets[] = {"device.plugin=cpu", "moe.plugin=cpu", "comm.plugin=local", "scheduler.max_batch_tokens=64",
                          model_set, attn_set};
    /* make check pins matmul = f32 through SWITCHYARD_SET (Makefile.am), as the CLI applies it */
    if (sy_config_apply_overrides(cfg, sets, sizeof sets / sizeof sets[0], &err))
        goto cfg_fail;
    sy_engine *e = NULL;
    sy_engine_opts eo = {.plugin_dirs = plugin_dir, .progress = false};
    if (sy_engine_open(cfg, &eo, &e, &err)) {
        fprintf(stderr, "FAIL %s [%s]: engine: %s\n", name, attn, err.msg);
        sy_config_free(cfg);
        return 1;
    }
    int fails = 0;
    for (size_t c = 0; c < json_array_size(cases); c++) {
        json_t *cs = json_array_get(cases, c);
        json_t *pids = json_object_get(cs, "prompt_ids"), *gids = json_object_get(cs, "greedy_ids");
        const char *want_text = json_string_value(json_object_get(cs, "text"));
        int32_t prompt[512];
        int32_t np = (int32_t)json_array_size(pids);
        for (int32_t i = 0; i < np && i < 512; i++)
            prompt[i] = (int32_t)json_integer_value(json_array_get(pids, (size_t)i));
        run r = {.top5 = json_object_get(cs, "top5"), .vocab = sy_engine_model_config(e)->vocab};
        r.detok = sy_detok_new_after(sy_engine_tokenizer(e), prompt, (size_t)np, true);
        sy_gen_params gp = {.max_tokens = (int32_t)json_array_size(gids), .sampling = sy_sampling_default(),
                            .ignore_eos = true};
        sy_gen_stats st;
        if (sy_generate(e, prompt, np, &gp, on_token, &r, &st, &err)) {
            fprintf(stderr, "FAIL %s [%s] prompt %zu: %s\n", name, attn, c, err.msg);
            fails++;
            sy_detok_free(r.detok);
            continue;
        }
        const char *tail;
        size_t tl;
        if (sy_detok_finish(r.detok, &tail, &tl, &err) == SY_OK && r.text_len + tl < sizeof r.text) {
            memcpy(r.text + r.text_len, tail, tl);
            r.text_len += tl;
        }
        r.text[r.text_len] = '\0';
        sy_detok_free(r.detok);
        int bad_at = -1;
        for (int32_t i = 0; i < r.n; i++)
            if (r.ids[i] != (int32_t)json_integer_value(json_array_get(gids, (size_t)i))) {
                bad_at = i;
                break;
            }
        if (r.n != (int32_t)json_array_size(gids) || bad_at >= 0) {
            fprintf(stderr, "FAIL %s [%s] prompt %zu: token %d is %d, expected %lld\n", name, attn, c, bad_at,
                    bad_at >= 0 ? r.ids[bad_at] : -1,
                    bad_at >= 0 ? (long long)json_integer_value(json_array_get(gids, (size_t)bad_at)) : -1LL);
            fails++;
        } else if (!(r.top5_err <= LOGPROB_TOL)) {
            fprintf(stderr, "FAIL %s [%s] prompt %zu: top-5 logprob error %g > %g\n", name, attn, c,
                    (double)r.top5_err, LOGPROB_TOL);
            fails++;
        } else if (!want_text || strcmp(r.text, want_text) != 0) {
            fprintf(stderr, "FAIL %s [%s] prompt %zu: text differs\n  got:  \"%s\"\n  want: \"%s\"\n", name, attn, c,
                    r.text, want_text ? want_text : "(none)");
            fails++;
        } else {
            printf("ok   %s [%s] prompt %zu: %d tokens, max top-5 logprob error %.2g\n", name, attn, c, r.n,
                   (double)r.top5_err);
        }
    }
    sy_engine_close(e);
    sy_config_free(cfg);
    return fails;

cfg_fail:
    fprintf(stderr, "FAIL %s: config: %s\n", name, err.msg);
    sy_config_free(cfg);
    return 1;
}

int main(void)
{
    const char *shared = getenv("SY_SHARED_DIR");
    const char *plugin_dir = getenv("SY_PLUGIN_DIR");
    if (!shared || !*shared) {
        fprintf(stderr, "FAIL: SY_SHARED_DIR is not set; the golden outputs live in ../shared/models "
                        "(configure --with-shared-dir=DIR or export SY_SHARED_DIR)\n");
        return 1;
    }
    if (!plugin_dir) {
        fprintf(stderr, "FAIL: SY_PLUGIN_DIR is not set (run through make check)\n");
        return 1;
    }
    sy_log_set_level(SY_LOG_WARN);
    char path[4096];
    snprintf(path, sizeof path, "%s/models/expected_greedy.json", shared);
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root) {
        fprintf(stderr, "FAIL: %s:%d: %s\n", path, je.line, je.text);
        return 1;
    }
    json_t *models = json_object_get(root, "models");
    const char *name;
    json_t *cases;
    int fails = 0, n_models = 0;
    const char *attns[] = {"cpu", "cpu-ref"};
    json_object_foreach(models, name, cases)
    {
        n_models++;
        for (size_t a = 0; a < 2; a++)
            fails += run_model(shared, plugin_dir, name, cases, attns[a]);
    }
    json_decref(root);
    if (n_models < 5) {
        fprintf(stderr, "FAIL: expected 5 models in %s, found %d\n", path, n_models);
        return 1;
    }
    printf("%s: %d failures\n", fails ? "FAIL" : "PASS", fails);
    return fails ? 1 : 0;
}
