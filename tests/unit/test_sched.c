/*
 * The scheduler and the engine thread on the real engine, through the
 * host serving API as a frontend would use it (an in-process collector
 * instead of HTTP). At temperature 0 every request must get the same
 * tokens whatever it shares a step with: alone, in a mix of 8 with
 * different prompt lengths, with shared prefixes, and under forced
 * preemption with a tiny KV pool; and no block may leak. Runs on the
 * build's synthetic small model (through the build config) and on
 * ../shared's stories260k.
 */
#include "config.h"

#include "engine/generate.h"
#include "serve/server.h"
#include "test_check.h"
#include "util/log.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MAX_OUT 256
#define N_MIX 8

/* ------------------------------------------------------------ a test frontend */

typedef struct collector {
    pthread_mutex_t lock;
    pthread_cond_t cv;
    int32_t toks[MAX_OUT];
    float lps[MAX_OUT];
    int32_t top0[MAX_OUT];
    int n;
    char text[8192];
    size_t text_len;
    char reasoning[4096];
    size_t reasoning_len;
    int piece_end[MAX_OUT]; /* text_len after each event */
    int done;
    char finish[16];
    int status;
    int32_t prompt_tokens, completion_tokens, cached_tokens;
    /* Cancels its own request from the event callback once it has this many tokens (0: never). */
    int cancel_after;
    const sy_serving_api *api;
    void *ctx;
} collector;

static void coll_init(collector *c)
{
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->cv, NULL);
}

static void coll_fini(collector *c)
{
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->cv);
}

static void on_event(void *user, const sy_event *ev)
{
    collector *c = user;
    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; i < ev->n_tokens && c->n < MAX_OUT; i++) {
        c->toks[c->n] = ev->tokens[i];
        c->lps[c->n] = ev->logprobs ? ev->logprobs[i] : 0.0f;
        c->top0[c->n] = ev->n_top > 0 ? ev->top_ids[i * (size_t)ev->n_top] : -1;
        c->n++;
    }
    if (ev->text_len && c->text_len + ev->text_len < sizeof c->text) {
        memcpy(c->text + c->text_len, ev->text, ev->text_len);
        c->text_len += ev->text_len;
    }
    if (ev->reasoning_len && c->reasoning_len + ev->reasoning_len < sizeof c->reasoning) {
        memcpy(c->reasoning + c->reasoning_len, ev->reasoning, ev->reasoning_len);
        c->reasoning_len += ev->reasoning_len;
    }
    if (ev->type == SY_EV_TEXT && c->n > 0)
        c->piece_end[c->n - 1] = (int)c->text_len;
    if (ev->type == SY_EV_TEXT && c->cancel_after && c->n == c->cancel_after)
        c->api->cancel(c->ctx, ev->request_id); /* as a frontend does when its client goes away */
    if (ev->type == SY_EV_DONE || ev->type == SY_EV_ERROR) {
        snprintf(c->finish, sizeof c->finish, "%s", ev->type == SY_EV_DONE ? ev->finish_reason : "error");
        c->status = ev->status;
        c->prompt_tokens = ev->prompt_tokens;
        c->completion_tokens = ev->completion_tokens;
        c->cached_tokens = ev->cached_tokens;
        c->done = 1;
    }
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->lock);
}

static void coll_wait(collector *c)
{
    pthread_mutex_lock(&c->lock);
    while (!c->done)
        pthread_cond_wait(&c->cv, &c->lock);
    pthread_mutex_unlock(&c->lock);
}

static sy_request greedy(const int32_t *ids, size_t n, int32_t max_tokens, collector *c)
{
    sy_request r;
    memset(&r, 0, sizeof r);
    r.struct_size = sizeof r;
    r.prompt_ids = ids;
    r.n_prompt = n;
    r.max_tokens = max_tokens;
    r.temperature = 0.0f;
    r.top_p = 1.0f;
    r.repetition_penalty = 1.0f;
    r.ignore_eos = 1;
    r.skip_special = 1;
    r.top_logprobs = -1;
    r.on_event = on_event;
    r.user = c;
    return r;
}

/* ------------------------------------------------------------ engines */

typedef struct model_case {
    const char *name;
    char path[4096];
    bool from_build_ini;
    char model[4096]; /* with from_build_ini: model.path over the ini's, whose default is not the synthetic model */
} model_case;

static sy_engine *open_engine(const model_case *mc, const char *const *extra, size_t n_extra)
{
    sy_err err = {{0}};
    sy_config *cfg = NULL;
    char buf[4608];
    if (mc->from_build_ini) {
        if (sy_config_load(mc->path, &cfg, &err)) {
            fprintf(stderr, "FAIL config %s: %s\n", mc->path, err.msg);
            return NULL;
        }
        snprintf(buf, sizeof buf, "model.path=%s", mc->model);
        if (mc->model[0] && sy_config_set(cfg, buf, &err)) {
            fprintf(stderr, "FAIL --set %s: %s\n", buf, err.msg);
            sy_config_free(cfg);
            return NULL;
        }
    } else {
        cfg = sy_config_new();
        const char *sets[] = {"device.plugin=cpu", "moe.plugin=cpu", "comm.plugin=local"};
        for (size_t i = 0; i < 3; i++)
            sy_config_set(cfg, sets[i], &err);
        snprintf(buf, sizeof buf, "model.path=%s", mc->path);
        sy_config_set(cfg, buf, &err);
    }
    /* make check pins matmul = f32 through SWITCHYARD_SET (Makefile.am), as the CLI applies it */
    if (sy_config_apply_env(cfg, &err)) {
        fprintf(stderr, "FAIL config: %s\n", err.msg);
        sy_config_free(cfg);
        return NULL;
    }
    for (size_t i = 0; i < n_extra; i++)
        if (sy_config_set(cfg, extra[i], &err)) {
            fprintf(stderr, "FAIL --set %s: %s\n", extra[i], err.msg);
            sy_config_free(cfg);
            return NULL;
        }
    sy_engine *e = NULL;
    sy_engine_opts eo = {.plugin_dirs = getenv("SY_PLUGIN_DIR"), .progress = false};
    if (sy_engine_open(cfg, &eo, &e, &err)) {
        fprintf(stderr, "FAIL engine %s: %s\n", mc->name, err.msg);
        e = NULL;
    }
    sy_config_free(cfg);
    return e;
}

/* ------------------------------------------------------------ prompts */

typedef struct prompts {
    int32_t ids[N_MIX][160];
    size_t n[N_MIX];
} prompts;

static uint32_t lcg(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

/* Different lengths (some longer than a prefill chunk); with shared > 0 all start with the same tokens. */
static void make_prompts(prompts *p, int32_t vocab, uint32_t seed, size_t shared)
{
    static const size_t lens[N_MIX] = {3, 17, 40, 5, 64, 33, 9, 100};
    uint32_t s = seed, common = seed ^ 0x5bd1e995u;
    for (int i = 0; i < N_MIX; i++) {
        p->n[i] = shared ? shared + lens[i] % 24 + 1 : lens[i];
        for (size_t j = 0; j < p->n[i]; j++)
            p->ids[i][j] = (int32_t)((j < shared ? lcg(&common) : lcg(&s)) % (uint32_t)(vocab - 8)) + 3;
        if (shared) /* every request walks the same common prefix */
            common = seed ^ 0x5bd1e995u;
    }
}

typedef struct ref_run {
    int32_t toks[MAX_OUT];
    int n;
} ref_run;

static int ref_token(void *arg, int32_t tok, const float *logits)
{
    (void)logits;
    ref_run *r = arg;
    if (r->n < MAX_OUT)
        r->toks[r->n++] = tok;
    return 0;
}

/* The unbatched reference: the single-sequence loop, no prefix cache. */
static void reference(sy_engine *e, const prompts *p, int32_t max_tokens, ref_run *out)
{
    for (int i = 0; i < N_MIX; i++) {
        sy_gen_params gp = {.max_tokens = max_tokens, .sampling = sy_sampling_default(), .ignore_eos = true};
        sy_gen_stats st;
        sy_err err = {{0}};
        memset(&out[i], 0, sizeof out[i]);
        int rc = sy_generate(e, p->ids[i], (int32_t)p->n[i], &gp, ref_token, &out[i], &st, &err);
        CHECK(rc == SY_OK);
        if (rc)
            fprintf(stderr, "reference %d: %s\n", i, err.msg);
    }
}

/* Submits the set (all at once, or one at a time) and compares every output with the reference. */
static int run_set(sy_server *srv, const prompts *p, int32_t max_tokens, const ref_run *ref, bool concurrent,
                   const char *what, int32_t *cached_sum)
{
    const sy_serving_api *api = sy_server_api(srv);
    const sy_host *host = sy_server_host(srv);
    collector *c = calloc(N_MIX, sizeof *c);
    int mismatches = 0;
    *cached_sum = 0;
    for (int i = 0; i < N_MIX; i++) {
        coll_init(&c[i]);
        sy_request r = greedy(p->ids[i], p->n[i], max_tokens, &c[i]);
        uint64_t id = 0;
        sy_err err = {{0}};
        int rc = api->submit(host->ctx, &r, &id, &err);
        CHECK(rc == SY_OK);
        if (rc)
            fprintf(stderr, "%s: submit %d: %s\n", what, i, err.msg);
        if (!concurrent)
            coll_wait(&c[i]);
    }
    for (int i = 0; i < N_MIX; i++) {
        coll_wait(&c[i]);
        CHECK(strcmp(c[i].finish, "length") == 0);
        CHECK(c[i].completion_tokens == max_tokens);
        *cached_sum += c[i].cached_tokens;
        bool same = c[i].n == ref[i].n && memcmp(c[i].toks, ref[i].toks, sizeof(int32_t) * (size_t)ref[i].n) == 0;
        CHECK(same);
        if (!same) {
            mismatches++;
            fprintf(stderr, "%s: request %d (prompt %zu tokens) differs from the unbatched run:\n  got", what, i,
                    p->n[i]);
            for (int j = 0; j < c[i].n; j++)
                fprintf(stderr, " %d", c[i].toks[j]);
            fprintf(stderr, "\n  ref");
            for (int j = 0; j < ref[i].n; j++)
                fprintf(stderr, " %d", ref[i].toks[j]);
            fprintf(stderr, "\n");
        }
        coll_fini(&c[i]);
    }
    free(c);
    return mismatches;
}

/* Every block is free or held only by the prefix cache: nothing leaked. */
static void check_no_leak(sy_server *srv, const char *what)
{
    sy_server_stats st;
    CHECK(sy_server_wait_idle(srv, 30.0)); /* the last DONE comes just before its blocks are freed */
    sy_server_stats_get(srv, &st);
    const bool ok = st.sched.running == 0 && st.sched.waiting == 0 &&
                    st.sched.kv_free + st.sched.kv_cached_idle == st.sched.kv_total &&
                    st.sched.kv_cached == st.sched.kv_cached_idle;
    CHECK(ok);
    if (!ok)
        fprintf(stderr, "%s: blocks leaked: %d free + %d cached idle of %d (%d cached)\n", what, st.sched.kv_free,
                st.sched.kv_cached_idle, st.sched.kv_total, st.sched.kv_cached);
}

static sy_server *start_server(sy_engine *e, int32_t max_waiting, bool start)
{
    sy_server *srv = NULL;
    sy_err err = {{0}};
    sy_server_opts so = {.max_waiting = max_waiting, .model_id = "test"};
    if (sy_server_new(e, &so, &srv, &err) || (start && sy_server_start(srv, &err))) {
        fprintf(stderr, "FAIL server: %s\n", err.msg);
        return NULL;
    }
    return srv;
}

/* ------------------------------------------------------------ the checks */

static void test_equality(const model_case *mc)
{
    const char *sets[] = {"model.max_seq_len=256", "scheduler.max_batch_tokens=48", "scheduler.kv_block_size=8"};
    sy_engine *e = open_engine(mc, sets, 3);
    CHECK(e != NULL);
    if (!e)
        return;
    const int32_t vocab = sy_engine_model_config(e)->vocab, max_tokens = 24;
    prompts mix, shared;
    make_prompts(&mix, vocab, 1234, 0);
    make_prompts(&shared, vocab, 99, 40);
    ref_run *ref_mix = calloc(N_MIX, sizeof *ref_mix), *ref_shared = calloc(N_MIX, sizeof *ref_shared);
    reference(e, &mix, max_tokens, ref_mix);
    reference(e, &shared, max_tokens, ref_shared);
    /* The reference reads its logits on the host; the scheduler's greedy requests take the device's picks. */
    const uint64_t host_picks = sy_engine_device_picks(e);

    sy_server *srv = start_server(e, 64, true);
    int32_t cached = 0;
    char what[128];
    snprintf(what, sizeof what, "%s alone", mc->name);
    run_set(srv, &mix, max_tokens, ref_mix, false, what, &cached);
    snprintf(what, sizeof what, "%s mix of %d", mc->name, N_MIX);
    run_set(srv, &mix, max_tokens, ref_mix, true, what, &cached);
    /* The same prompts again: their full blocks are cached by now. */
    CHECK(cached >= 0);
    snprintf(what, sizeof what, "%s shared prefix", mc->name);
    run_set(srv, &shared, max_tokens, ref_shared, true, what, &cached);
    int32_t cached2 = 0;
    snprintf(what, sizeof what, "%s shared prefix again", mc->name);
    run_set(srv, &shared, max_tokens, ref_shared, true, what, &cached2);
    CHECK(cached2 > 0);
    CHECK(host_picks == 0 && sy_engine_device_picks(e) > 0);
    sy_server_stats st;
    sy_server_stats_get(srv, &st);
    CHECK(st.sched.cached_tokens > 0);
    printf("%s: prefix cache served %llu prompt tokens (%d on the repeated shared set)\n", mc->name,
           (unsigned long long)st.sched.cached_tokens, cached2);
    char *text = NULL;
    size_t len = 0;
    sy_err err = {{0}};
    CHECK(sy_server_api(srv)->metrics_text(sy_server_host(srv)->ctx, &text, &len, &err) == SY_OK);
    if (text) {
        CHECK_CONTAINS(text, "switchyard_prefix_cache_hit_tokens_total{model_name=\"test\"}");
        CHECK_CONTAINS(text, "switchyard_time_to_first_token_seconds_bucket");
        CHECK_CONTAINS(text, "switchyard_kv_cache_usage_ratio");
        CHECK(strstr(text, "switchyard_prefix_cache_hit_tokens_total{model_name=\"test\"} 0\n") == NULL);
        sy_server_host(srv)->free(sy_server_host(srv)->ctx, text);
    }
    check_no_leak(srv, mc->name);
    sy_server_free(srv);
    sy_engine_close(e);

    /* A pool barely larger than one sequence: eight requests must take turns. */
    char kv[64];
    const sy_model_config *c = NULL;
    {
        sy_engine *probe = open_engine(mc, sets, 3);
        c = probe ? sy_engine_model_config(probe) : NULL;
        if (c)
            snprintf(kv, sizeof kv, "scheduler.kv_cache_size=%llu",
                     (unsigned long long)(2ull * (unsigned long long)c->n_layers * 8ull *
                                          (unsigned long long)c->n_kv_heads * (unsigned long long)c->head_dim * 4ull *
                                          36ull));
        sy_engine_close(probe);
    }
    const char *tiny[] = {"model.max_seq_len=256", "scheduler.max_batch_tokens=48", "scheduler.kv_block_size=8", kv};
    e = c ? open_engine(mc, tiny, 4) : NULL;
    CHECK(e != NULL);
    if (!e)
        goto out;
    srv = start_server(e, 64, true);
    snprintf(what, sizeof what, "%s tiny KV pool", mc->name);
    run_set(srv, &mix, max_tokens, ref_mix, true, what, &cached);
    run_set(srv, &shared, max_tokens, ref_shared, true, what, &cached);
    sy_server_stats_get(srv, &st);
    CHECK(st.sched.preemptions > 0);
    /* A victim readmitted into the still-full pool is preempted again and
     * recomputes its prompt each time: 13-16 preemptions for these 16
     * requests when admissions went on after a preemption, 7 since a
     * preemption holds them until a running request ends. */
    CHECK(st.sched.preemptions <= 10);
    printf("%s: tiny pool of %d blocks: %llu preemptions\n", mc->name, st.sched.kv_total,
           (unsigned long long)st.sched.preemptions);
    check_no_leak(srv, what);
    sy_server_free(srv);
    sy_engine_close(e);
out:
    free(ref_mix);
    free(ref_shared);
}

/* Output of one greedy-ish request with the given tweaks. */
static void run_one(sy_server *srv, sy_request *r, collector *c)
{
    sy_err err = {{0}};
    coll_init(c);
    r->user = c;
    int rc = sy_server_api(srv)->submit(sy_server_host(srv)->ctx, r, NULL, &err);
    CHECK(rc == SY_OK);
    if (rc) {
        fprintf(stderr, "submit: %s\n", err.msg);
        return;
    }
    coll_wait(c);
}

static bool same_tokens(const collector *a, const collector *b)
{
    return a->n == b->n && memcmp(a->toks, b->toks, sizeof(int32_t) * (size_t)a->n) == 0;
}

static void test_requests(const model_case *mc)
{
    const char *sets[] = {"model.max_seq_len=256"};
    sy_engine *e = open_engine(mc, sets, 1);
    CHECK(e != NULL);
    if (!e)
        return;
    sy_server *srv = start_server(e, 2, false);
    const sy_serving_api *api = sy_server_api(srv);
    void *ctx = sy_server_host(srv)->ctx;
    const int32_t prompt[] = {5, 17, 33, 8, 91, 12, 40, 7, 3, 66, 21, 9};
    const size_t np = sizeof prompt / sizeof prompt[0];
    sy_err err = {{0}};

    /* Validation names the field. */
    collector c0;
    coll_init(&c0);
    sy_request bad = greedy(prompt, 0, 8, &c0);
    CHECK(api->submit(ctx, &bad, NULL, &err) == SY_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "prompt");
    bad = greedy(prompt, np, 0, &c0);
    CHECK(api->submit(ctx, &bad, NULL, &err) == SY_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "max_tokens");
    bad = greedy(prompt, np, 8, &c0);
    bad.top_p = 0.0f;
    CHECK(api->submit(ctx, &bad, NULL, &err) == SY_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "top_p");
    bad = greedy(prompt, np, 8, &c0);
    bad.presence_penalty = 3.0f;
    CHECK(api->submit(ctx, &bad, NULL, &err) == SY_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "presence_penalty");
    int32_t *longp = calloc(300, sizeof *longp);
    bad = greedy(longp, 300, 8, &c0);
    CHECK(api->submit(ctx, &bad, NULL, &err) == SY_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "context");
    free(longp);

    /* The queue is bounded: with the engine thread not started, the third waits in vain. */
    collector q[3];
    for (int i = 0; i < 3; i++) {
        coll_init(&q[i]);
        sy_request r = greedy(prompt, np, 4, &q[i]);
        int rc = api->submit(ctx, &r, NULL, &err);
        CHECK(rc == (i < 2 ? SY_OK : SY_ERR_UNAVAILABLE));
        if (i == 2)
            CHECK_CONTAINS(err.msg, "max_waiting");
    }
    CHECK(api->ready(ctx) == 0);
    CHECK(sy_server_start(srv, &err) == SY_OK);
    CHECK(api->ready(ctx) == 1);
    coll_wait(&q[0]);
    coll_wait(&q[1]);
    CHECK(same_tokens(&q[0], &q[1]) && q[0].n == 4);

    /* Cancellation (from the event callback after 3 tokens) ends the request before the next
     * step: no further token, DONE "abort", and its blocks are free. */
    collector cc;
    coll_init(&cc);
    cc.cancel_after = 3;
    cc.api = api;
    cc.ctx = ctx;
    sy_request r = greedy(prompt, np, 200, &cc);
    CHECK(api->submit(ctx, &r, NULL, &err) == SY_OK);
    coll_wait(&cc);
    CHECK(strcmp(cc.finish, "abort") == 0);
    CHECK(cc.n == 3 && cc.completion_tokens == 3);
    if (strcmp(cc.finish, "abort") != 0 || cc.n != 3)
        fprintf(stderr, "cancel: finished \"%s\" after %d tokens\n", cc.finish, cc.n);
    check_no_leak(srv, "cancel");
    api->cancel(ctx, 987654); /* unknown ids are ignored */

    /* Stop strings across token boundaries: cut the greedy text at a string spanning two pieces. */
    collector full;
    r = greedy(prompt, np, 40, NULL);
    run_one(srv, &r, &full);
    int k = -1;
    for (int i = 1; i + 1 < full.n && k < 0; i++) {
        const int a0 = i ? full.piece_end[i - 1] : 0, a1 = full.piece_end[i], b1 = full.piece_end[i + 1];
        if (a1 > a0 && b1 > a1 && (unsigned char)full.text[a1 - 1] < 0x80 && (unsigned char)full.text[a1] < 0x80)
            k = i;
    }
    CHECK(k >= 0);
    if (k >= 0) {
        char stop[3] = {full.text[full.piece_end[k] - 1], full.text[full.piece_end[k]], 0};
        const char *stops[] = {"never-appears", stop};
        full.text[full.text_len] = '\0';
        const size_t want = (size_t)(strstr(full.text, stop) - full.text);
        collector sc;
        r = greedy(prompt, np, 40, NULL);
        r.stop_strings = stops;
        r.n_stop_strings = 2;
        run_one(srv, &r, &sc);
        CHECK(strcmp(sc.finish, "stop") == 0);
        CHECK(sc.text_len == want && memcmp(sc.text, full.text, want) == 0);
        if (sc.text_len != want)
            fprintf(stderr, "stop \"%s\": got %zu bytes, want %zu\n", stop, sc.text_len, want);
        coll_fini(&sc);
    }

    /* A stop id ends generation with "stop"; min_tokens keeps it from ending too early. */
    collector si;
    r = greedy(prompt, np, 40, NULL);
    r.stop_ids = &full.toks[5];
    r.n_stop_ids = 1;
    run_one(srv, &r, &si);
    CHECK(strcmp(si.finish, "stop") == 0);
    CHECK(si.n <= 6 && si.toks[si.n - 1] == full.toks[5]);
    collector mt;
    r.min_tokens = 30;
    run_one(srv, &r, &mt);
    CHECK(mt.n >= 30);
    coll_fini(&si);
    coll_fini(&mt);

    /* Penalties change the output, deterministically. */
    collector p1, p2;
    r = greedy(prompt, np, 40, NULL);
    r.presence_penalty = 2.0f;
    r.frequency_penalty = 1.0f;
    r.repetition_penalty = 1.5f;
    run_one(srv, &r, &p1);
    run_one(srv, &r, &p2);
    CHECK(same_tokens(&p1, &p2));
    CHECK(!same_tokens(&p1, &full));
    coll_fini(&p1);
    coll_fini(&p2);

    /* A seed reproduces a sampled output; another seed gives another. */
    collector s1, s2, s3;
    r = greedy(prompt, np, 40, NULL);
    r.temperature = 1.0f;
    r.has_seed = 1;
    r.seed = 42;
    run_one(srv, &r, &s1);
    run_one(srv, &r, &s2);
    r.seed = 43;
    run_one(srv, &r, &s3);
    CHECK(same_tokens(&s1, &s2));
    CHECK(!same_tokens(&s1, &s3));
    coll_fini(&s1);
    coll_fini(&s2);
    coll_fini(&s3);

    /* Logprobs: greedy picks the top alternative, whose log-probability is <= 0. */
    collector lp;
    r = greedy(prompt, np, 8, NULL);
    r.top_logprobs = 3;
    run_one(srv, &r, &lp);
    for (int i = 0; i < lp.n; i++) {
        CHECK(lp.top0[i] == lp.toks[i]);
        CHECK(lp.lps[i] <= 0.0f && lp.lps[i] > -100.0f);
    }
    coll_fini(&lp);

    /* max_tokens past the context is clamped: "length" at the context limit. */
    collector ln;
    r = greedy(prompt, np, 1000, NULL);
    run_one(srv, &r, &ln);
    CHECK(strcmp(ln.finish, "length") == 0 && ln.completion_tokens == 256 - (int)np);
    coll_fini(&ln);

    /* Tokenize and model info through the API. */
    int32_t *ids = NULL;
    size_t n = 0;
    CHECK(api->tokenize(ctx, "hello world", 11, 1, &ids, &n, &err) == SY_OK && n > 0);
    char *txt = NULL;
    size_t tl = 0;
    CHECK(api->detokenize(ctx, ids, n, &txt, &tl, &err) == SY_OK);
    sy_server_host(srv)->free(ctx, ids);
    sy_server_host(srv)->free(ctx, txt);
    sy_model_info mi = {.struct_size = sizeof mi};
    CHECK(api->model_info(ctx, &mi) == SY_OK && mi.max_seq_len == 256 && strcmp(mi.id, "test") == 0);
    /* Chat: the model's template (ChatML for models without one). */
    txt = NULL;
    CHECK(api->apply_chat_template(ctx, "[{\"role\": \"user\", \"content\": \"hi there\"}]", NULL, 1, NULL, &txt,
                                   &tl, &err) == SY_OK);
    if (txt) {
        CHECK_CONTAINS(txt, "hi there");
        sy_server_host(srv)->free(ctx, txt);
    }
    CHECK(api->apply_chat_template(ctx, "[{\"role\": ", NULL, 1, NULL, &txt, &tl, &err) == SY_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "messages");

    check_no_leak(srv, "requests");
    CHECK(sy_server_drain(srv, 5.0));
    CHECK(api->ready(ctx) == 0);
    coll_init(&c0);
    sy_request late = greedy(prompt, np, 4, &c0);
    CHECK(api->submit(ctx, &late, NULL, &err) == SY_ERR_UNAVAILABLE);
    sy_server_free(srv);
    for (int i = 0; i < 3; i++)
        coll_fini(&q[i]);
    coll_fini(&cc);
    coll_fini(&full);
    coll_fini(&c0);
    sy_engine_close(e);
}

int main(void)
{
    sy_log_set_level(SY_LOG_WARN);
    const char *build = getenv("SY_BUILDDIR"), *shared = getenv("SY_SHARED_DIR");
    if (!build || !shared || !getenv("SY_PLUGIN_DIR")) {
        fprintf(stderr, "FAIL: SY_BUILDDIR, SY_SHARED_DIR and SY_PLUGIN_DIR must be set (make check sets them)\n");
        return 1;
    }
    model_case small = {.name = "small", .from_build_ini = true};
    snprintf(small.path, sizeof small.path, "%s/etc/switchyard-build.ini", build);
    snprintf(small.model, sizeof small.model, "%s/models/small", build);
    model_case stories = {.name = "stories260k", .from_build_ini = false};
    snprintf(stories.path, sizeof stories.path, "%s/models/stories260k", shared);

    test_equality(&small);
    test_requests(&small);
    test_equality(&stories);
    test_requests(&stories);
    return sy_test_done("test_sched");
}
