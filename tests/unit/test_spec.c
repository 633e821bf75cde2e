/*
 * Speculative decoding (ngram prompt lookup) is lossless:
 *  - greedy identity: >= 40 requests on the build's small model and on
 *    tiny-mixtral, in batch mixes (requests arriving while others decode),
 *    with chunked prefill, under preemption (a tiny KV pool), and with stop
 *    strings, stop ids, max_tokens, logprobs, penalties, min_tokens and
 *    logit_bias: the same tokens, text, finish reasons and logprobs as
 *    without speculation, and drafts were accepted (else it proves nothing);
 *  - the prefix cache never holds a rejected token: prompts extending an
 *    earlier request's output hit its cached blocks and continue exactly as
 *    without speculation;
 *  - sampled output keeps its distribution: chi-square of speculative vs
 *    plain sampling over many seeds, which a broken rule (always accept)
 *    must fail;
 *  - the rejection rule itself against its analytic distribution;
 *  - prompt lookup's choice of match, and the /metrics counters.
 */
#include "config.h"

#include "serve/scheduler.h"
#include "spec/spec.h"
#include "test_check.h"
#include "util/log.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_OUT 64
#define MAX_REQ 64

typedef struct out {
    int32_t toks[MAX_OUT];
    float lps[MAX_OUT];
    int n;
    char text[4096];
    size_t text_len;
    char finish[16];
    int32_t cached;
    bool done;
} out;

static void on_event(void *user, const sy_event *ev)
{
    out *o = user;
    for (size_t i = 0; i < ev->n_tokens && o->n < MAX_OUT; i++) {
        o->toks[o->n] = ev->tokens[i];
        o->lps[o->n] = ev->logprobs ? ev->logprobs[i] : 0.0f;
        o->n++;
    }
    if (ev->text_len && o->text_len + ev->text_len < sizeof o->text) {
        memcpy(o->text + o->text_len, ev->text, ev->text_len);
        o->text_len += ev->text_len;
    }
    if (ev->type == SY_EV_DONE || ev->type == SY_EV_ERROR) {
        o->done = true;
        o->cached = ev->cached_tokens;
        snprintf(o->finish, sizeof o->finish, "%s", ev->type == SY_EV_DONE ? ev->finish_reason : "error");
    }
}

static sy_config *make_config(const char *model, bool build_ini, const char *const *extra, size_t n_extra)
{
    sy_err err = {{0}};
    sy_config *cfg = NULL;
    char buf[4608];
    if (build_ini) {
        snprintf(buf, sizeof buf, "%s/etc/switchyard-build.ini", getenv("SY_BUILDDIR"));
        if (sy_config_load(buf, &cfg, &err)) {
            fprintf(stderr, "FAIL config %s: %s\n", buf, err.msg);
            return NULL;
        }
    } else {
        cfg = sy_config_new();
        const char *sets[] = {"device.plugin=cpu", "moe.plugin=cpu", "comm.plugin=local", "attention.plugin=auto"};
        for (size_t i = 0; i < 4; i++)
            sy_config_set(cfg, sets[i], &err);
    }
    /* make check pins matmul = f32 through SWITCHYARD_SET (Makefile.am), as the CLI applies it */
    if (sy_config_apply_env(cfg, &err)) {
        fprintf(stderr, "FAIL config: %s\n", err.msg);
        sy_config_free(cfg);
        return NULL;
    }
    snprintf(buf, sizeof buf, "model.path=%s", model);
    sy_config_set(cfg, buf, &err);
    sy_config_set(cfg, "speculative.method=ngram", &err);
    sy_config_set(cfg, "speculative.max_batch=64", &err); /* the per-step switch-off is tested on its own */
    for (size_t i = 0; i < n_extra; i++)
        if (sy_config_set(cfg, extra[i], &err)) {
            fprintf(stderr, "FAIL --set %s: %s\n", extra[i], err.msg);
            sy_config_free(cfg);
            return NULL;
        }
    return cfg;
}

static sy_engine *open_engine(const sy_config *cfg)
{
    sy_err err = {{0}};
    sy_engine *e = NULL;
    sy_engine_opts eo = {.plugin_dirs = getenv("SY_PLUGIN_DIR"), .progress = false};
    if (sy_engine_open(cfg, &eo, &e, &err)) {
        fprintf(stderr, "FAIL engine: %s\n", err.msg);
        return NULL;
    }
    return e;
}

/* One request's rules; prompts in the set's arrays. */
typedef struct req_spec {
    int32_t prompt[160];
    int32_t n_prompt, max_tokens, arrive_step;
    float temperature;
    uint64_t seed;
    int kind; /* 0 plain greedy, 1 stop string, 2 stop id, 3 logprobs, 4 penalties, 5 min_tokens + logit_bias */
} req_spec;

static uint64_t lcg(uint64_t *x)
{
    *x = *x * 6364136223846793005ull + 1442695040888963407ull;
    return *x >> 33;
}

/* Prompts with repeats inside (a segment copied a few times): what prompt lookup finds. */
static void make_prompts(req_spec *r, int n, int32_t vocab, uint64_t seed, bool with_rules)
{
    uint64_t x = seed;
    for (int i = 0; i < n; i++) {
        const int seg = 2 + (int)(lcg(&x) % 6), reps = 1 + (int)(lcg(&x) % 4), lead = 1 + (int)(lcg(&x) % 20);
        int m = 0;
        for (int j = 0; j < lead && m < 150; j++)
            r[i].prompt[m++] = 1 + (int32_t)(lcg(&x) % (uint64_t)(vocab - 1));
        const int at = m;
        for (int j = 0; j < seg && m < 150; j++)
            r[i].prompt[m++] = 1 + (int32_t)(lcg(&x) % (uint64_t)(vocab - 1));
        for (int k = 0; k < reps; k++)
            for (int j = 0; j < seg && m < 150; j++)
                r[i].prompt[m++] = r[i].prompt[at + j];
        r[i].n_prompt = m;
        r[i].max_tokens = 16 + (int)(lcg(&x) % 33);
        r[i].arrive_step = i < 8 ? 0 : (int)(lcg(&x) % 40);
        r[i].kind = with_rules ? i % 6 : 0;
        r[i].temperature = 0.0f;
        r[i].seed = 1000 + (uint64_t)i;
    }
}

typedef struct run_result {
    out o[MAX_REQ];
    sy_sched_stats st;
} run_result;

/* Runs the set through a fresh scheduler (speculating or not), requests joining at their arrival step. */
static int run_set_m(sy_engine *e, const sy_config *cfg, bool spec, const req_spec *r, int n, run_result *res,
                     int32_t (*rule)(sy_sampler *, const float *, int32_t, bool *), sy_serve_metrics *m)
{
    sy_err err = {{0}};
    memset(res, 0, sizeof *res);
    sy_sched *s = NULL;
    if (sy_sched_new(e, m, &s, &err) || (spec && sy_sched_enable_spec(s, cfg, &err))) {
        fprintf(stderr, "FAIL scheduler: %s\n", err.msg);
        sy_sched_free(s);
        return -1;
    }
    if (rule)
        sy__sched_set_verify_rule(s, rule);
    static const char *const stops[] = {"e", "a "};
    const int32_t stop_ids[] = {7, 11, 13, 17, 19, 23, 29, 31};
    const int32_t bias_ids[] = {5, 6};
    const float bias[] = {2.5f, -3.0f};
    int added = 0;
    for (int step = 0; added < n || !sy_sched_idle(s); step++) {
        for (int i = 0; i < n; i++)
            if (r[i].arrive_step == step || (step > 400 && r[i].arrive_step > step - 1 && !res->o[i].done)) {
                sy_request q = {.struct_size = sizeof q, .prompt_ids = r[i].prompt, .n_prompt = (size_t)r[i].n_prompt,
                                .max_tokens = r[i].max_tokens, .temperature = r[i].temperature, .top_p = 1.0f,
                                .repetition_penalty = 1.0f, .seed = r[i].seed, .has_seed = 1, .skip_special = 1,
                                .top_logprobs = -1, .on_event = on_event, .user = &res->o[i]};
                if (r[i].temperature > 0.0f)
                    q.top_k = 4;
                switch (r[i].kind) {
                case 1: q.stop_strings = stops, q.n_stop_strings = 2; break;
                case 2: q.stop_ids = stop_ids, q.n_stop_ids = 8; break;
                case 3: q.top_logprobs = 2; break;
                case 4: q.frequency_penalty = 0.4f, q.presence_penalty = 0.3f, q.repetition_penalty = 1.3f; break;
                case 5: q.min_tokens = 6, q.stop_ids = stop_ids, q.n_stop_ids = 8, q.logit_bias_ids = bias_ids,
                        q.logit_bias = bias, q.n_logit_bias = 2; break;
                default: break;
                }
                sy_seq *sq = NULL;
                if (sy_seq_new(&q, e, NULL, (uint64_t)i + 1, &sq, &err)) {
                    fprintf(stderr, "FAIL request %d: %s\n", i, err.msg);
                    sy_sched_free(s);
                    return -1;
                }
                sy_sched_add(s, sq);
                added++;
            }
        if (sy_sched_step(s, &err) < 0) {
            fprintf(stderr, "FAIL step: %s\n", err.msg);
            sy_sched_free(s);
            return -1;
        }
        if (step > 100000)
            break;
    }
    sy_sched_stats_get(s, &res->st);
    CHECK(res->st.kv_free + res->st.kv_cached_idle == res->st.kv_total); /* no block leaked */
    sy_sched_free(s);
    return 0;
}

static int run_set(sy_engine *e, const sy_config *cfg, bool spec, const req_spec *r, int n, run_result *res,
                   int32_t (*rule)(sy_sampler *, const float *, int32_t, bool *))
{
    return run_set_m(e, cfg, spec, r, n, res, rule, NULL);
}

static void compare(const run_result *a, const run_result *b, int n, const char *what)
{
    int bad = 0;
    for (int i = 0; i < n; i++) {
        const out *x = &a->o[i], *y = &b->o[i];
        bool same = x->done && y->done && x->n == y->n && memcmp(x->toks, y->toks, sizeof(int32_t) * (size_t)x->n) == 0 &&
                    x->text_len == y->text_len && memcmp(x->text, y->text, x->text_len) == 0 &&
                    strcmp(x->finish, y->finish) == 0;
        for (int j = 0; same && j < x->n; j++)
            same = fabsf(x->lps[j] - y->lps[j]) <= 1e-4f;
        if (!same && bad++ < 3) {
            fprintf(stderr, "FAIL %s: request %d differs: %d tokens (%s) vs %d (%s) with speculation:", what, i, x->n,
                    x->finish, y->n, y->finish);
            for (int j = 0; j < x->n || j < y->n; j++)
                fprintf(stderr, " %d/%d", j < x->n ? x->toks[j] : -1, j < y->n ? y->toks[j] : -1);
            fprintf(stderr, "\n");
        }
    }
    CHECK(bad == 0);
    printf("%s: %d requests identical: %llu drafts, %llu accepted, %llu verifies, %llu preemptions\n", what, n - bad,
           (unsigned long long)b->st.spec_draft_tokens, (unsigned long long)b->st.spec_accepted_tokens,
           (unsigned long long)b->st.spec_verifies, (unsigned long long)b->st.preemptions);
    CHECK(b->st.spec_accepted_tokens > 0);
}

static run_result ra, rb; /* big: not on the stack */

static void greedy_identity(const char *name, const char *model, bool build_ini, const char *const *extra,
                            size_t n_extra, int n_req, bool with_rules, bool want_preempt)
{
    sy_config *cfg = make_config(model, build_ini, extra, n_extra);
    sy_engine *e = cfg ? open_engine(cfg) : NULL;
    CHECK(e != NULL);
    if (!e) {
        sy_config_free(cfg);
        return;
    }
    static req_spec r[MAX_REQ];
    make_prompts(r, n_req, sy_engine_model_config(e)->vocab, 42 + (uint64_t)n_req, with_rules);
    if (run_set(e, cfg, false, r, n_req, &ra, NULL) == 0 && run_set(e, cfg, true, r, n_req, &rb, NULL) == 0) {
        compare(&ra, &rb, n_req, name);
        if (want_preempt)
            CHECK(rb.st.preemptions > 0);
    } else {
        CHECK(0);
    }
    sy_engine_close(e);
    sy_config_free(cfg);
}

/* More decoding sequences than [speculative] max_batch: no step speculates; at max_batch they do. */
static void max_batch_off(const char *model)
{
    for (int on = 0; on < 2; on++) {
        const char *extra[] = {on ? "speculative.max_batch=8" : "speculative.max_batch=7"};
        sy_config *cfg = make_config(model, true, extra, 1);
        sy_engine *e = cfg ? open_engine(cfg) : NULL;
        CHECK(e != NULL);
        if (!e) {
            sy_config_free(cfg);
            return;
        }
        static req_spec r[8];
        make_prompts(r, 8, sy_engine_model_config(e)->vocab, 11, false);
        for (int i = 0; i < 8; i++) {
            r[i].arrive_step = 0;
            r[i].max_tokens = 8;
        }
        if (run_set(e, cfg, true, r, 8, &ra, NULL) == 0) {
            printf("8 decoding sequences, max_batch %d: %llu verifies\n", on ? 8 : 7,
                   (unsigned long long)ra.st.spec_verifies);
            CHECK(on ? ra.st.spec_verifies > 0 : ra.st.spec_verifies == 0);
        }
        sy_engine_close(e);
        sy_config_free(cfg);
    }
}

/* Requests whose prompts are an earlier request's prompt and output: they hit blocks a speculating run cached. */
static void prefix_cache_clean(const char *model)
{
    const char *extra[] = {"scheduler.kv_block_size=4"};
    sy_config *cfg = make_config(model, true, extra, 1);
    sy_engine *e = cfg ? open_engine(cfg) : NULL;
    CHECK(e != NULL);
    if (!e) {
        sy_config_free(cfg);
        return;
    }
    static req_spec r[16];
    make_prompts(r, 8, sy_engine_model_config(e)->vocab, 7, false);
    for (int i = 0; i < 8; i++) {
        r[i].arrive_step = 0;
        r[i].max_tokens = 40;
    }
    sy_err err = {{0}};
    sy_sched *s = NULL;
    CHECK(sy_sched_new(e, NULL, &s, &err) == SY_OK && sy_sched_enable_spec(s, cfg, &err) == SY_OK);
    static out first[8], again[8], plain[8];
    uint64_t accepted = 0;
    for (int pass = 0; s && pass < 2; pass++) {
        for (int i = 0; i < 8; i++) {
            req_spec *q = &r[i];
            if (pass == 1) { /* prompt + all but the last few generated tokens: mostly cached blocks */
                const int keep = first[i].n > 6 ? first[i].n - 5 : first[i].n;
                for (int j = 0; j < keep && q->n_prompt < 150; j++)
                    q->prompt[q->n_prompt++] = first[i].toks[j];
                q->max_tokens = 20;
            }
            sy_request rq = {.struct_size = sizeof rq, .prompt_ids = q->prompt, .n_prompt = (size_t)q->n_prompt,
                             .max_tokens = q->max_tokens, .top_p = 1.0f, .repetition_penalty = 1.0f, .has_seed = 1,
                             .skip_special = 1, .top_logprobs = -1, .on_event = on_event,
                             .user = pass ? &again[i] : &first[i]};
            sy_seq *sq = NULL;
            CHECK(sy_seq_new(&rq, e, NULL, (uint64_t)(pass * 8 + i + 1), &sq, &err) == SY_OK);
            if (sq)
                sy_sched_add(s, sq);
        }
        while (!sy_sched_idle(s))
            CHECK(sy_sched_step(s, &err) >= 0);
        sy_sched_stats st;
        sy_sched_stats_get(s, &st);
        accepted = st.spec_accepted_tokens;
    }
    sy_sched_free(s);
    /* The same second prompts without speculation and without a cache: the reference. */
    s = NULL;
    CHECK(sy_sched_new(e, NULL, &s, &err) == SY_OK);
    int32_t hit = 0;
    for (int i = 0; s && i < 8; i++) {
        sy_request rq = {.struct_size = sizeof rq, .prompt_ids = r[i].prompt, .n_prompt = (size_t)r[i].n_prompt,
                         .max_tokens = 20, .top_p = 1.0f, .repetition_penalty = 1.0f, .has_seed = 1, .skip_special = 1,
                         .top_logprobs = -1, .on_event = on_event, .user = &plain[i]};
        sy_seq *sq = NULL;
        CHECK(sy_seq_new(&rq, e, NULL, (uint64_t)i + 100, &sq, &err) == SY_OK);
        if (sq)
            sy_sched_add(s, sq);
        while (!sy_sched_idle(s))
            CHECK(sy_sched_step(s, &err) >= 0);
        hit += again[i].cached;
        CHECK(again[i].n == plain[i].n && memcmp(again[i].toks, plain[i].toks, sizeof(int32_t) * (size_t)plain[i].n) == 0);
    }
    sy_sched_free(s);
    printf("prefix cache after speculation: %d prompt tokens of the follow-ups were cached blocks, %llu drafts "
           "accepted, continuations identical\n", hit, (unsigned long long)accepted);
    CHECK(hit > 0);
    CHECK(accepted > 0);
    sy_engine_close(e);
    sy_config_free(cfg);
}

/* ------------------------------------------------------------ sampling */

/* Upper alpha = 0.001 critical value of chi-square with df degrees (Wilson-Hilferty). */
static double chi2_crit(int df)
{
    const double z = 3.0902323; /* the normal's 0.999 quantile */
    const double a = 2.0 / (9.0 * df);
    return df * pow(1.0 - a + z * sqrt(a), 3.0);
}

/* Two-sample chi-square over (position, token) counts, pooling bins under 10 expected into one. */
static double chi2_two(const int *a, const int *b, int nb, int *df)
{
    long na = 0, nbb = 0;
    for (int i = 0; i < nb; i++)
        na += a[i], nbb += b[i];
    double stat = 0.0;
    int bins = 0;
    long rest_a = 0, rest_b = 0;
    for (int i = 0; i <= nb; i++) {
        long x = i < nb ? a[i] : rest_a, y = i < nb ? b[i] : rest_b;
        if (i < nb && x + y < 10) {
            rest_a += x, rest_b += y;
            continue;
        }
        if (x + y == 0)
            continue;
        const double ea = (double)(x + y) * na / (double)(na + nbb), eb = (double)(x + y) * nbb / (double)(na + nbb);
        stat += (x - ea) * (x - ea) / ea + (y - eb) * (y - eb) / eb;
        bins++;
    }
    *df = bins > 1 ? bins - 1 : 1;
    return stat;
}

static int32_t always_accept(sy_sampler *smp, const float *dist, int32_t draft, bool *accepted)
{
    (void)smp, (void)dist;
    *accepted = true;
    return draft;
}

#define CHI_N 48   /* requests per run */
#define CHI_RUNS 6 /* runs per arm: 288 sampled continuations each */
#define CHI_POS 6

static void counts_of(const run_result *res, int *counts, int32_t vocab)
{
    for (int i = 0; i < CHI_N; i++)
        for (int p = 1; p < CHI_POS && p < res->o[i].n; p++)
            counts[(p - 1) * vocab + res->o[i].toks[p]]++;
}

static void chi_square(const char *model)
{
    const char *extra[] = {"speculative.num_draft_tokens=3"};
    sy_config *cfg = make_config(model, false, extra, 1);
    sy_engine *e = cfg ? open_engine(cfg) : NULL;
    CHECK(e != NULL);
    if (!e) {
        sy_config_free(cfg);
        return;
    }
    const int32_t V = sy_engine_model_config(e)->vocab;
    const int nb = (CHI_POS - 1) * V;
    int *plain = calloc((size_t)nb, sizeof(int)), *spec = calloc((size_t)nb, sizeof(int)),
        *broken = calloc((size_t)nb, sizeof(int));
    static req_spec r[CHI_N];
    /* One prompt: a phrase and the model's own greedy continuation of it, where prompt lookup finds drafts the
     * model often agrees with. Sampled at temperature 0.7, top_k 4. */
    make_prompts(r, 1, V, 3, false);
    r[0].max_tokens = 48;
    r[0].arrive_step = 0;
    if (run_set(e, cfg, false, r, 1, &ra, NULL) == 0)
        for (int j = 0; j < ra.o[0].n && r[0].n_prompt < 150; j++)
            r[0].prompt[r[0].n_prompt++] = ra.o[0].toks[j];
    uint64_t accepted = 0, drafted = 0;
    for (int run = 0; run < CHI_RUNS && plain && spec && broken; run++)
        for (int arm = 0; arm < 3; arm++) {
            for (int i = 0; i < CHI_N; i++) {
                r[i] = r[0];
                r[i].max_tokens = CHI_POS;
                r[i].arrive_step = 0;
                r[i].temperature = 0.7f;
                r[i].seed = 1 + (uint64_t)arm * 100000 + (uint64_t)run * CHI_N + (uint64_t)i;
            }
            if (run_set(e, cfg, arm > 0, r, CHI_N, &ra, arm == 2 ? always_accept : NULL)) {
                CHECK(0);
                break;
            }
            counts_of(&ra, arm == 0 ? plain : arm == 1 ? spec : broken, V);
            if (arm == 1)
                accepted += ra.st.spec_accepted_tokens, drafted += ra.st.spec_draft_tokens;
        }
    int df = 0, dfb = 0;
    const double x2 = plain && spec ? chi2_two(plain, spec, nb, &df) : 1e9;
    const double xb = plain && broken ? chi2_two(plain, broken, nb, &dfb) : 0;
    printf("chi-square, speculative vs plain sampling (%d continuations each, positions 1..%d): %.1f with %d df "
           "(critical %.1f at alpha 0.001; %llu of %llu drafts accepted); always-accept rule: %.1f with %d df "
           "(critical %.1f)\n", CHI_N * CHI_RUNS, CHI_POS - 1, x2, df, chi2_crit(df), (unsigned long long)accepted,
           (unsigned long long)drafted, xb, dfb, chi2_crit(dfb));
    CHECK(x2 < chi2_crit(df));
    CHECK(xb > chi2_crit(dfb)); /* the test can tell a broken rule */
    CHECK(accepted > 0 && accepted < drafted);
    free(plain);
    free(spec);
    free(broken);
    sy_engine_close(e);
    sy_config_free(cfg);
}

/* The rule on a fixed distribution: over a grid of both uniforms, each token's share is p exactly (to the grid). */
static void rejection_rule(void)
{
    const float logits[6] = {1.0f, 0.2f, -0.5f, 2.0f, 0.9f, -3.0f};
    const int V = 6, N = 1000;
    float prob[6];
    int32_t idx[6];
    const float T = 0.8f;
    const int top_k = 4;
    /* Analytic p: softmax at T over the 4 largest logits (ids 3, 0, 4, 1). */
    double p[6] = {0}, z = 0.0;
    const int keep[4] = {3, 0, 4, 1};
    for (int i = 0; i < 4; i++)
        z += exp((double)logits[keep[i]] / T);
    for (int i = 0; i < 4; i++)
        p[keep[i]] = exp((double)logits[keep[i]] / T) / z;
    const sy_sample_row row = {.struct_size = sizeof row, .temperature = T, .top_p = 1.0f, .top_k = top_k};
    for (int32_t d = 0; d < V; d++) {
        double freq[6] = {0}, acc = 0.0;
        for (int a = 0; a < N; a++)
            for (int b = 0; b < N; b++) {
                bool ok = false;
                const int32_t t = sy_spec_verify_pick(logits, V, &row, d, (a + 0.5) / N, (b + 0.5) / N, prob, idx, &ok);
                CHECK(t >= 0 && t < V);
                CHECK(ok == (t == d));
                freq[t] += 1.0 / ((double)N * N);
                acc += ok ? 1.0 / ((double)N * N) : 0.0;
            }
        double worst = 0.0;
        for (int t = 0; t < V; t++)
            worst = fmax(worst, fabs(freq[t] - p[t]));
        CHECK(worst < 3.0 / N);
        CHECK(fabs(acc - p[d]) < 2.0 / N);
    }
    /* Greedy: the argmax, accepted exactly when it is the draft, no uniform involved. */
    const sy_sample_row greedy = {.struct_size = sizeof greedy, .temperature = 0.0f, .top_p = 1.0f};
    for (int32_t d = 0; d < V; d++) {
        bool ok = true;
        CHECK(sy_spec_verify_pick(logits, V, &greedy, d, 0.99, 0.99, prob, idx, &ok) == 3);
        CHECK(ok == (d == 3));
    }
    printf("rejection rule: output distribution = p within the grid for every draft, acceptance = p(draft)\n");
}

/* Drafts the ngram source proposes for tokens t[0..n) with kmax, into d; their count. */
static int32_t ngram_drafts(int32_t nmin, int32_t nmax, int32_t *t, int32_t n, int32_t kmax, int32_t *d)
{
    sy_err err = {{0}};
    sy_spec_config sc = {.method = SY_SPEC_NGRAM, .num_draft_tokens = kmax, .ngram_min = nmin, .ngram_max = nmax};
    sy_spec_source *src = NULL;
    if (sy__spec_ngram_new(&sc, NULL, &src, &err) != SY_OK) {
        CHECK(0);
        return -1;
    }
    sy_seq q = {.tokens = t, .n_tokens = n};
    sy_seq *qs[1] = {&q};
    int32_t nd = -1;
    CHECK(src->ops->propose(src, qs, 1, kmax, d, &nd, &err) == SY_OK);
    src->ops->free(src);
    return nd;
}

/* Prompt lookup: the longest suffix match wins over a more recent shorter one, the most recent of the longest
 * wins, drafts stop at kmax and at the end of the tokens, nothing below ngram_min. */
static void ngram_lookup(void)
{
    int32_t t[] = {1, 2, 3, 9, 9, 1, 2, 3, 4, 5, 7, 2, 3, 8, 8, 1, 2, 3};
    int32_t d[8] = {0};
    CHECK(ngram_drafts(1, 3, t, 18, 4, d) == 4);
    CHECK(d[0] == 4 && d[1] == 5 && d[2] == 7 && d[3] == 2);
    CHECK(ngram_drafts(1, 3, t, 18, 2, d) == 2);
    CHECK(d[0] == 4 && d[1] == 5);
    /* With ngram_max 2 the suffix "2 3" last occurred at 11..12: 8 8 follow. */
    CHECK(ngram_drafts(1, 2, t, 18, 2, d) == 2);
    CHECK(d[0] == 8 && d[1] == 8);
    int32_t u[] = {4, 5, 6, 4, 5};
    /* The match "4 5" ends 3 back: the continuation 6 4 5 goes on with period 3 past the end. */
    CHECK(ngram_drafts(1, 4, u, 5, 8, d) == 8);
    CHECK(d[0] == 6 && d[1] == 4 && d[2] == 5 && d[3] == 6 && d[4] == 4 && d[5] == 5 && d[6] == 6 && d[7] == 4);
    /* A loop of one token proposes kmax copies of it. */
    int32_t w[] = {3, 7, 7, 7};
    CHECK(ngram_drafts(1, 4, w, 4, 4, d) == 4);
    CHECK(d[0] == 7 && d[1] == 7 && d[2] == 7 && d[3] == 7);
    int32_t v[] = {1, 2, 3, 1};
    CHECK(ngram_drafts(2, 4, v, 4, 4, d) == 0);
    CHECK(ngram_drafts(1, 4, v, 4, 4, d) == 4);
    CHECK(d[0] == 2 && d[1] == 3 && d[2] == 1 && d[3] == 2);
    CHECK(ngram_drafts(1, 4, v, 3, 4, d) == 0);
    printf("ngram lookup: longest, then most recent match, continued periodically; kmax and ngram_min respected\n");
}

/* /metrics carries the scheduler's speculative counters under method="ngram", the others at 0. */
static void metrics_counters(const char *model)
{
    const char *extra[] = {"scheduler.max_running=8"};
    sy_config *cfg = make_config(model, true, extra, 1);
    sy_engine *e = cfg ? open_engine(cfg) : NULL;
    CHECK(e != NULL);
    if (!e) {
        sy_config_free(cfg);
        return;
    }
    static req_spec r[8];
    make_prompts(r, 8, sy_engine_model_config(e)->vocab, 77, false);
    sy_serve_metrics m;
    sy_serve_metrics_init(&m);
    if (run_set_m(e, cfg, true, r, 8, &ra, NULL, &m) == 0) {
        CHECK(ra.st.spec_accepted_tokens > 0);
        sy_buf b = {0};
        CHECK(sy_serve_metrics_render(&m, "test", &b) == 0 && sy_buf_append(&b, "", 1) == 0);
        char want[256];
        snprintf(want, sizeof want, "switchyard_spec_draft_tokens_total{model_name=\"test\",method=\"ngram\"} %llu\n",
                 (unsigned long long)ra.st.spec_draft_tokens);
        CHECK_CONTAINS(b.p ? b.p : "", want);
        snprintf(want, sizeof want,
                 "switchyard_spec_accepted_tokens_total{model_name=\"test\",method=\"ngram\"} %llu\n",
                 (unsigned long long)ra.st.spec_accepted_tokens);
        CHECK_CONTAINS(b.p ? b.p : "", want);
        snprintf(want, sizeof want, "switchyard_spec_verifies_total{model_name=\"test\",method=\"ngram\"} %llu\n",
                 (unsigned long long)ra.st.spec_verifies);
        CHECK_CONTAINS(b.p ? b.p : "", want);
        CHECK_CONTAINS(b.p ? b.p : "", "switchyard_spec_verifies_total{model_name=\"test\",method=\"mtp\"} 0\n");
        CHECK_CONTAINS(b.p ? b.p : "", "# TYPE switchyard_spec_accepted_tokens_total counter\n");
        printf("/metrics: ngram %llu drafts, %llu accepted, %llu verifies\n",
               (unsigned long long)ra.st.spec_draft_tokens, (unsigned long long)ra.st.spec_accepted_tokens,
               (unsigned long long)ra.st.spec_verifies);
        sy_buf_free(&b);
    } else {
        CHECK(0);
    }
    sy_serve_metrics_fini(&m);
    sy_engine_close(e);
    sy_config_free(cfg);
}

/*
 * A test source that knows the plain run's output: it proposes the right
 * continuation for one request (every draft accepted) and a wrong first
 * draft for another (none accepted), and counts what each was asked for.
 */
typedef struct oracle_src {
    sy_spec_source base;
    const out *plain; /* plain greedy outputs, by request id - 1 */
    const req_spec *r;
    int32_t vocab;
    uint64_t good_id, bad_id;
    int32_t drafted_good, drafted_bad, bad_generated_at_last; /* bad: n_generated at its last proposal */
} oracle_src;

static int oracle_after_step(sy_spec_source *src, const sy_spec_fed *fed, int32_t n, sy_err *err)
{
    (void)src, (void)fed, (void)n, (void)err;
    return SY_OK;
}

static int oracle_propose(sy_spec_source *src, sy_seq *const *seqs, int32_t n, int32_t kmax, int32_t *drafts,
                          int32_t *n_drafts, sy_err *err)
{
    (void)err;
    oracle_src *o = (oracle_src *)src;
    for (int32_t i = 0; i < n; i++) {
        const sy_seq *q = seqs[i];
        const out *p = &o->plain[q->id - 1];
        const int32_t gen = q->n_tokens - q->n_prompt;
        n_drafts[i] = 0;
        for (int32_t j = 0; j < kmax && gen + j < p->n; j++)
            drafts[i * kmax + j] = p->toks[gen + j];
        if (q->id == o->good_id) {
            n_drafts[i] = gen + kmax <= p->n ? kmax : p->n - gen;
            o->drafted_good += n_drafts[i];
        } else if (q->id == o->bad_id && gen < p->n) {
            drafts[i * kmax] = (p->toks[gen] + 1) % o->vocab; /* never the target's pick */
            n_drafts[i] = 1;
            o->drafted_bad++;
            o->bad_generated_at_last = gen;
        }
    }
    return SY_OK;
}

static void oracle_forget(sy_spec_source *src, sy_seq *seq)
{
    (void)src, (void)seq;
}

static void oracle_free(sy_spec_source *src)
{
    (void)src; /* on the test's stack */
}

static const sy_spec_source_ops oracle_ops = {.method = SY_SPEC_NGRAM, .after_step = oracle_after_step,
                                              .propose = oracle_propose, .forget = oracle_forget,
                                              .free = oracle_free};

/*
 * The per-request switch-off: in one batch, a request whose drafts are
 * never accepted stops being asked for drafts after policy_window of them
 * (and still finishes with the plain run's tokens), while a request whose
 * drafts are all accepted speculates to its end.
 */
static void request_switch_off(const char *model)
{
    const char *extra[] = {"scheduler.max_running=8", "speculative.policy_window=6",
                           "speculative.min_acceptance=0.5"};
    sy_config *cfg = make_config(model, true, extra, 3);
    sy_engine *e = cfg ? open_engine(cfg) : NULL;
    CHECK(e != NULL);
    if (!e) {
        sy_config_free(cfg);
        return;
    }
    static req_spec r[4];
    make_prompts(r, 4, sy_engine_model_config(e)->vocab, 5, false);
    for (int i = 0; i < 4; i++) {
        r[i].arrive_step = 0;
        r[i].max_tokens = 40;
    }
    sy_err err = {{0}};
    sy_sched *s = NULL;
    oracle_src o = {.base = {.ops = &oracle_ops}, .plain = ra.o, .r = r, .vocab = sy_engine_model_config(e)->vocab,
                    .good_id = 1, .bad_id = 2};
    if (run_set(e, cfg, false, r, 4, &ra, NULL) == 0 && sy_sched_new(e, NULL, &s, &err) == 0 &&
        sy_sched_enable_spec(s, cfg, &err) == 0) {
        sy__sched_set_spec_source(s, &o.base);
        static out got[4];
        memset(got, 0, sizeof got);
        for (int i = 0; i < 4; i++) {
            sy_request q = {.struct_size = sizeof q, .prompt_ids = r[i].prompt, .n_prompt = (size_t)r[i].n_prompt,
                            .max_tokens = r[i].max_tokens, .top_p = 1.0f, .repetition_penalty = 1.0f,
                            .skip_special = 1, .top_logprobs = -1, .on_event = on_event, .user = &got[i]};
            sy_seq *sq = NULL;
            CHECK(sy_seq_new(&q, e, NULL, (uint64_t)i + 1, &sq, &err) == 0);
            if (sq)
                sy_sched_add(s, sq);
        }
        for (int step = 0; !sy_sched_idle(s) && step < 1000; step++)
            CHECK(sy_sched_step(s, &err) >= 0);
        sy_sched_stats st;
        sy_sched_stats_get(s, &st);
        for (int i = 0; i < 4; i++)
            CHECK(got[i].done && got[i].n == ra.o[i].n &&
                  memcmp(got[i].toks, ra.o[i].toks, sizeof(int32_t) * (size_t)got[i].n) == 0);
        printf("switch-off: accepted request drafted %d tokens (of %d generated), rejected request drafted %d "
               "(its last at token %d of %d); %llu accepted\n",
               o.drafted_good, ra.o[0].n, o.drafted_bad, o.bad_generated_at_last, ra.o[1].n,
               (unsigned long long)st.spec_accepted_tokens);
        CHECK(o.drafted_bad == 6);                  /* one policy window, then never asked again */
        CHECK(ra.o[1].n > o.bad_generated_at_last + 20); /* and it went on decoding plainly */
        CHECK(o.drafted_good > 6 * 3 && st.spec_accepted_tokens == (uint64_t)o.drafted_good);
        sy_sched_free(s);
    } else {
        fprintf(stderr, "FAIL scheduler: %s\n", err.msg);
        CHECK(0);
        sy_sched_free(s);
    }
    sy_engine_close(e);
    sy_config_free(cfg);
}

/*
 * A request's num_draft_tokens: a source that always proposes the plain
 * run's continuation (so every draft it may give is accepted) records the
 * most drafts each request was given in one step. No field: the server's
 * k; 1 and 2: never more; 0: never asked. The tokens stay the plain run's.
 */
typedef struct limit_src {
    sy_spec_source base;
    const out *plain;
    int32_t most[4], asked[4]; /* by request id - 1 */
} limit_src;

static int limit_propose(sy_spec_source *src, sy_seq *const *seqs, int32_t n, int32_t kmax, int32_t *drafts,
                         int32_t *n_drafts, sy_err *err)
{
    (void)err;
    limit_src *o = (limit_src *)src;
    for (int32_t i = 0; i < n; i++) {
        const sy_seq *q = seqs[i];
        const out *p = &o->plain[q->id - 1];
        const int32_t gen = q->n_tokens - q->n_prompt;
        n_drafts[i] = 0;
        for (int32_t j = 0; j < kmax && gen + j < p->n; j++)
            drafts[i * kmax + n_drafts[i]++] = p->toks[gen + j];
        o->asked[q->id - 1]++;
        if (n_drafts[i] > o->most[q->id - 1])
            o->most[q->id - 1] = n_drafts[i];
    }
    return SY_OK;
}

static const sy_spec_source_ops limit_ops = {.method = SY_SPEC_NGRAM, .after_step = oracle_after_step,
                                             .propose = limit_propose, .forget = oracle_forget, .free = oracle_free};

static void request_draft_limit(const char *model)
{
    const char *extra[] = {"scheduler.max_running=8", "speculative.num_draft_tokens=4"};
    sy_config *cfg = make_config(model, true, extra, 2);
    sy_engine *e = cfg ? open_engine(cfg) : NULL;
    CHECK(e != NULL);
    if (!e) {
        sy_config_free(cfg);
        return;
    }
    static req_spec r[4];
    make_prompts(r, 4, sy_engine_model_config(e)->vocab, 9, false);
    for (int i = 0; i < 4; i++) {
        r[i].arrive_step = 0;
        r[i].max_tokens = 32;
    }
    const int32_t ask[4] = {-1, 1, 0, 2}; /* -1: the field left out */
    sy_err err = {{0}};
    sy_sched *s = NULL;
    limit_src o = {.base = {.ops = &limit_ops}, .plain = ra.o};
    if (run_set(e, cfg, false, r, 4, &ra, NULL) == 0 && sy_sched_new(e, NULL, &s, &err) == 0 &&
        sy_sched_enable_spec(s, cfg, &err) == 0) {
        CHECK(sy_sched_spec_k(s) == 4);
        sy__sched_set_spec_source(s, &o.base);
        static out got[4];
        memset(got, 0, sizeof got);
        for (int i = 0; i < 4; i++) {
            sy_request q = {.struct_size = sizeof q, .prompt_ids = r[i].prompt, .n_prompt = (size_t)r[i].n_prompt,
                            .max_tokens = r[i].max_tokens, .top_p = 1.0f, .repetition_penalty = 1.0f,
                            .skip_special = 1, .top_logprobs = -1, .on_event = on_event, .user = &got[i],
                            .has_num_draft_tokens = ask[i] >= 0, .num_draft_tokens = ask[i] >= 0 ? ask[i] : 0};
            sy_seq *sq = NULL;
            CHECK(sy_seq_new(&q, e, NULL, (uint64_t)i + 1, &sq, &err) == 0);
            CHECK(sq && sy_seq_set_draft_limit(sq, &q, sy_sched_spec_k(s), &err) == SY_OK);
            if (sq)
                sy_sched_add(s, sq);
        }
        for (int step = 0; !sy_sched_idle(s) && step < 1000; step++)
            CHECK(sy_sched_step(s, &err) >= 0);
        for (int i = 0; i < 4; i++)
            CHECK(got[i].done && got[i].n == ra.o[i].n &&
                  memcmp(got[i].toks, ra.o[i].toks, sizeof(int32_t) * (size_t)got[i].n) == 0);
        printf("num_draft_tokens: left out / 1 / 0 / 2 got at most %d / %d / %d / %d drafts a step (asked %d / %d / "
               "%d / %d times)\n", o.most[0], o.most[1], o.most[2], o.most[3], o.asked[0], o.asked[1], o.asked[2],
               o.asked[3]);
        CHECK(o.most[0] == 4);
        CHECK(o.most[1] == 1 && o.asked[1] > 4);
        CHECK(o.asked[2] == 0);
        CHECK(o.most[3] == 2 && o.asked[3] > 4);
        sy_sched_free(s);
    } else {
        fprintf(stderr, "FAIL scheduler: %s\n", err.msg);
        CHECK(0);
        sy_sched_free(s);
    }
    sy_engine_close(e);
    sy_config_free(cfg);
}

/* The host checks num_draft_tokens itself, whatever frontend submitted it: outside [0, k], or on a server that
 * does not speculate, it is refused naming the field; a struct that ends before it (ABI 1.2) is not read. */
static void draft_limit_errors(const char *model)
{
    sy_config *cfg = make_config(model, true, NULL, 0);
    sy_engine *e = cfg ? open_engine(cfg) : NULL;
    CHECK(e != NULL);
    if (!e) {
        sy_config_free(cfg);
        return;
    }
    const int32_t prompt[] = {1, 2, 3};
    out o = {0};
    sy_request q = {.struct_size = sizeof q, .prompt_ids = prompt, .n_prompt = 3, .max_tokens = 4, .top_p = 1.0f,
                    .repetition_penalty = 1.0f, .skip_special = 1, .top_logprobs = -1, .on_event = on_event,
                    .user = &o, .has_num_draft_tokens = 1};
    sy_err err = {{0}};
    sy_seq *sq = NULL;
    CHECK(sy_seq_new(&q, e, NULL, 1, &sq, &err) == SY_OK);
    if (sq) {
        const struct { int32_t value, k; const char *want; } bad[] = {
            {5, 4, "num_draft_tokens: expected an integer in [0, 4]"}, {5, 4, "found 5"},
            {-1, 4, "found -1"}, {1, 0, "does not speculate"}, {0, 0, "found 0"},
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            q.num_draft_tokens = bad[i].value;
            err.msg[0] = 0;
            CHECK(sy_seq_set_draft_limit(sq, &q, bad[i].k, &err) == SY_ERR_INVALID);
            CHECK_CONTAINS(err.msg, bad[i].want);
        }
        q.num_draft_tokens = 4;
        CHECK(sy_seq_set_draft_limit(sq, &q, 4, &err) == SY_OK && sq->spec_max == 4 && !sq->spec_off);
        q.num_draft_tokens = 0;
        CHECK(sy_seq_set_draft_limit(sq, &q, 4, &err) == SY_OK && sq->spec_off);
        sy_seq_free(sq);
        sq = NULL;
        /* An ABI 1.2 caller: the fields past its struct_size are whatever lies there, never read. */
        q.struct_size = (uint32_t)offsetof(sy_request, has_num_draft_tokens);
        q.num_draft_tokens = 99;
        CHECK(sy_seq_new(&q, e, NULL, 2, &sq, &err) == SY_OK);
        CHECK(sq && sy_seq_set_draft_limit(sq, &q, 0, &err) == SY_OK && sq->spec_max == 0 && !sq->spec_off);
        sy_seq_free(sq);
    }
    printf("num_draft_tokens: out-of-range values and values on a server without speculation refused, naming the "
           "field\n");
    sy_engine_close(e);
    sy_config_free(cfg);
}

/* [speculative] errors name the key and where it was set. */
static void config_errors(void)
{
    sy_err err = {{0}};
    sy_spec_config sc;
    sy_config *cfg = sy_config_new();
    CHECK(sy_spec_config_read(cfg, &sc, &err) == SY_OK && sc.method == SY_SPEC_NONE && sc.num_draft_tokens == 4);
    sy_config_set(cfg, "speculative.num_draft_tokens=17", &err);
    CHECK(sy_spec_config_read(cfg, &sc, &err) == SY_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "num_draft_tokens");
    sy_config_free(cfg);
    cfg = sy_config_new();
    sy_config_set(cfg, "speculative.methd=ngram", &err);
    CHECK(sy_spec_config_read(cfg, &sc, &err) == SY_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "methd");
    sy_config_free(cfg);
    cfg = sy_config_new();
    sy_config_set(cfg, "speculative.method=draft", &err);
    CHECK(sy_spec_config_read(cfg, &sc, &err) == SY_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "draft_model");
    sy_config_free(cfg);
    cfg = sy_config_new();
    sy_config_set(cfg, "speculative.ngram_min=3", &err);
    sy_config_set(cfg, "speculative.ngram_max=2", &err);
    CHECK(sy_spec_config_read(cfg, &sc, &err) == SY_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "ngram_min");
    sy_config_free(cfg);
}

int main(void)
{
    sy_log_set_level(SY_LOG_WARN);
    const char *build = getenv("SY_BUILDDIR"), *shared = getenv("SY_SHARED_DIR");
    if (!build || !shared || !getenv("SY_PLUGIN_DIR")) {
        fprintf(stderr, "FAIL: SY_BUILDDIR, SY_SHARED_DIR and SY_PLUGIN_DIR must be set (make check sets them)\n");
        return 1;
    }
    char small[4096], mixtral[4096], stories[4096];
    snprintf(small, sizeof small, "%s/models/small", build);
    snprintf(mixtral, sizeof mixtral, "%s/models/tiny-mixtral", shared);
    snprintf(stories, sizeof stories, "%s/models/stories260k", shared);
    config_errors();
    rejection_rule();
    ngram_lookup();

    const char *none[] = {"scheduler.max_running=16"};
    greedy_identity("small: 48 requests, arrivals mid-way", small, true, none, 1, 48, false, false);
    const char *chunked[] = {"scheduler.max_running=8", "scheduler.max_batch_tokens=20"};
    greedy_identity("small: chunked prefill (20-token steps)", small, true, chunked, 2, 40, false, false);
    const char *rules[] = {"scheduler.max_running=12"};
    greedy_identity("small: stop strings, stop ids, logprobs, penalties, min_tokens, logit_bias", small, true, rules,
                    1, 48, true, false);
    const char *tiny[] = {"model.max_seq_len=256", "scheduler.max_batch_tokens=64", "scheduler.kv_block_size=8",
                          "scheduler.max_running=8", "scheduler.kv_cache_size=360K"};
    greedy_identity("stories260k: tiny KV pool (preemption)", stories, false, tiny, 5, 40, false, true);
    greedy_identity("tiny-mixtral: 48 requests, arrivals mid-way", mixtral, false, none, 1, 48, false, false);
    greedy_identity("tiny-mixtral: rules", mixtral, false, rules, 1, 42, true, false);
    max_batch_off(small);
    prefix_cache_clean(small);
    metrics_counters(small);
    request_draft_limit(small);
    draft_limit_errors(small);
    request_switch_off(small);
    chi_square(stories);
    return sy_test_done("test_spec");
}
