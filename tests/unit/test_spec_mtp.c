/*
 * [speculative] method = mtp on sy-mkmodel's DeepSeek-V3, GLM-4.5 and
 * GLM-5 presets (each with one MTP layer):
 *  - the source keeps the MTP layer's KV right through chunked prefill and
 *    verifies that keep 0..k drafts (its K/V rolled back with the target's):
 *    at every step its drafts equal those a fresh engine computes from
 *    scratch for the same accepted tokens (a full prefill, the MTP layer over
 *    every position, the chain), driven by hand through the source;
 *  - greedy serving output is exactly that without speculation (requests
 *    arriving mid-way, chunked prefill, a tiny KV pool that preempts), with
 *    drafts verified and acceptance counted (random weights accept little);
 *  - a request that shares a cached prefix ending on a block boundary and
 *    goes on differently there gets the drafts and output of a cold run:
 *    the MTP K/V of the block's last position, which saw the first
 *    request's next token, is not reused; nor are blocks whose MTP K/V a
 *    request that stopped speculating never wrote.
 * The logits themselves are checked against the numpy reference by
 * tests/ref/test_mtp_vs_reference.sh.
 */
#include "config.h"

#include "serve/scheduler.h"
#include "serve/seq.h"
#include "spec/spec.h"
#include "test_check.h"
#include "util/log.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { K = 3, MAXT = 96 };

static sy_config *make_config(const char *model, const char *const *extra, size_t n_extra)
{
    sy_err err = {{0}};
    sy_config *cfg = sy_config_new();
    char buf[4200];
    snprintf(buf, sizeof buf, "model.path=%s", model);
    const char *sets[] = {"device.plugin=cpu", "attention.plugin=cpu", "moe.plugin=cpu", "comm.plugin=local", buf,
                          "speculative.method=mtp", "speculative.num_draft_tokens=3",
                          "speculative.min_acceptance=0"};
    /* make check pins matmul = f32 through SWITCHYARD_SET (Makefile.am), as the CLI applies it */
    if (sy_config_apply_env(cfg, &err)) {
        fprintf(stderr, "FAIL config: %s\n", err.msg);
        sy_config_free(cfg);
        return NULL;
    }
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++)
        if (sy_config_set(cfg, sets[i], &err)) {
            fprintf(stderr, "FAIL --set %s: %s\n", sets[i], err.msg);
            sy_config_free(cfg);
            return NULL;
        }
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
    const sy_engine_opts eo = {.plugin_dirs = getenv("SY_PLUGIN_DIR")};
    if (sy_engine_open(cfg, &eo, &e, &err)) {
        fprintf(stderr, "FAIL engine: %s\n", err.msg);
        return NULL;
    }
    return e;
}

static uint64_t lcg(uint64_t *x)
{
    *x = *x * 6364136223846793005ull + 1442695040888963407ull;
    return *x >> 33;
}

/*
 * The drafts of tokens[0..n) computed from scratch in blocks of their own:
 * the target over tokens[0..n - 1), the MTP layer over positions 0..n - 2,
 * then K - 1 chained steps.
 */
static int fresh_drafts(sy_engine *e, const int32_t *tokens, int32_t n, int32_t *blocks, int32_t nb, int32_t *out)
{
    sy_err err = {{0}};
    const int32_t H = sy_engine_model_config(e)->hidden;
    float *g = malloc(sizeof(float) * (size_t)H), *g2 = malloc(sizeof(float) * (size_t)H);
    int rc = !g || !g2;
    sy_step_seq st = {.tokens = tokens, .n_tokens = n - 1, .blocks = blocks, .n_blocks = nb};
    if (!rc && (rc = sy_engine_step(e, &st, 1, NULL, &err)))
        fprintf(stderr, "FAIL fresh target step: %s\n", err.msg);
    sy_mtp_seq m = {.tokens = tokens + 1, .n = n - 1, .blocks = blocks, .n_blocks = nb, .target_row = 0,
                    .hidden_out = g, .greedy_id = &out[0]};
    if (!rc && (rc = sy_engine_mtp_step(e, &m, 1, &err)))
        fprintf(stderr, "FAIL fresh MTP extend: %s\n", err.msg);
    for (int j = 1; !rc && j < K; j++) {
        m = (sy_mtp_seq){.tokens = &out[j - 1], .n = 1, .pos0 = n - 2 + j, .blocks = blocks, .n_blocks = nb,
                         .target_row = -1, .hidden = g, .hidden_out = g2, .greedy_id = &out[j]};
        if ((rc = sy_engine_mtp_step(e, &m, 1, &err)))
            fprintf(stderr, "FAIL fresh MTP chain: %s\n", err.msg);
        memcpy(g, g2, sizeof(float) * (size_t)H);
    }
    free(g);
    free(g2);
    return rc;
}

/*
 * Two sequences driven by hand through the source: prefill in chunks of 5
 * (the last one picking), then verify steps of [last token, K drafts] that
 * keep a pseudo-random 0..K of the drafts (kept drafts count as accepted
 * whatever the target picked: the KV is valid for them all the same).
 */
static void source_matches_fresh(const char *name, const char *model)
{
    sy_config *cfg = make_config(model, NULL, 0);
    sy_engine *e = cfg ? open_engine(cfg) : NULL;
    CHECK(e != NULL);
    if (!e) {
        sy_config_free(cfg);
        return;
    }
    sy_spec_config sc;
    sy_spec_source *src = NULL;
    sy_err err = {{0}};
    CHECK(sy_spec_config_read(cfg, &sc, &err) == SY_OK && sy_spec_source_new(&sc, cfg, e, &src, &err) == SY_OK &&
          src);
    if (!src) {
        fprintf(stderr, "FAIL source: %s\n", err.msg);
        sy_engine_close(e);
        sy_config_free(cfg);
        return;
    }
    const int32_t V = sy_engine_model_config(e)->vocab;
    sy_kv_blocks *kv = sy_engine_kv(e);
    const int32_t nb = sy_kv_blocks_for(kv, MAXT + K + 1);
    static int32_t toks[2][MAXT + 2 * K], blk[3][256];
    sy_seq seq[2];
    uint64_t x = 7;
    const int32_t plen[2] = {13, 7};
    for (int s = 0; s < 3; s++)
        CHECK(sy_kv_blocks_alloc(kv, nb, blk[s]) == SY_OK);
    for (int s = 0; s < 2; s++) {
        memset(&seq[s], 0, sizeof seq[s]);
        seq[s].id = (uint64_t)s + 1;
        seq[s].tokens = toks[s];
        for (int i = 0; i < plen[s]; i++)
            toks[s][i] = 1 + (int32_t)(lcg(&x) % (uint64_t)(V - 1));
        seq[s].n_tokens = seq[s].n_prompt = plen[s];
        seq[s].blocks = blk[s];
        seq[s].n_blocks = nb;
    }
    /* Prefill: 5-token chunks of both sequences per step; a sequence's last chunk picks its first token. */
    int32_t picks[2][K + 1];
    while (seq[0].n_computed < plen[0] || seq[1].n_computed < plen[1]) {
        sy_step_seq st[2];
        sy_spec_fed fed[2];
        int n = 0, row = 0;
        for (int s = 0; s < 2; s++) {
            sy_seq *q = &seq[s];
            if (q->n_computed >= plen[s])
                continue;
            const int32_t c = plen[s] - q->n_computed < 5 ? plen[s] - q->n_computed : 5;
            const bool last = q->n_computed + c == plen[s];
            st[n] = (sy_step_seq){.tokens = q->tokens + q->n_computed, .n_tokens = c, .ctx_len = q->n_computed,
                                  .blocks = q->blocks, .n_blocks = nb, .want_logits = last,
                                  .greedy_id = last ? picks[s] : NULL};
            fed[n] = (sy_spec_fed){.seq = q, .pos0 = q->n_computed, .n_fed = c, .n_kept = c, .row0 = row};
            row += c;
            n++;
        }
        CHECK(sy_engine_step(e, st, n, NULL, &err) == SY_OK);
        for (int i = 0; i < n; i++) {
            sy_seq *q = fed[i].seq;
            q->n_computed += fed[i].n_fed;
            if (q->n_computed == q->n_prompt)
                q->tokens[q->n_tokens++] = picks[q - seq][0];
        }
        CHECK(src->ops->after_step(src, fed, n, &err) == SY_OK);
    }
    int compared = 0, mismatched = 0, kept_total = 0;
    for (int step = 0; step < 8; step++) {
        sy_seq *ps[2] = {&seq[0], &seq[1]};
        int32_t drafts[2 * K], nd[2];
        CHECK(src->ops->propose(src, ps, 2, K, drafts, nd, &err) == SY_OK);
        for (int s = 0; s < 2; s++) {
            int32_t want[K];
            CHECK(nd[s] == K);
            if (fresh_drafts(e, seq[s].tokens, seq[s].n_tokens, blk[2], nb, want) == 0) {
                compared++;
                if (memcmp(want, drafts + s * K, sizeof want) != 0 && mismatched++ < 3)
                    fprintf(stderr, "FAIL %s: step %d sequence %d: drafts %d %d %d, from scratch %d %d %d\n", name,
                            step, s, drafts[s * K], drafts[s * K + 1], drafts[s * K + 2], want[0], want[1], want[2]);
            }
        }
        /* The verify: [last token, drafts], K + 1 picks per sequence. */
        sy_step_seq st[2];
        sy_spec_fed fed[2];
        int32_t vt[2][K + 1];
        for (int s = 0; s < 2; s++) {
            sy_seq *q = &seq[s];
            vt[s][0] = q->tokens[q->n_tokens - 1];
            memcpy(&vt[s][1], drafts + s * K, sizeof(int32_t) * K);
            st[s] = (sy_step_seq){.tokens = vt[s], .n_tokens = K + 1, .ctx_len = q->n_computed, .blocks = q->blocks,
                                  .n_blocks = nb, .want_logits = true, .greedy_id = picks[s], .n_logits = K + 1};
        }
        CHECK(sy_engine_step(e, st, 2, NULL, &err) == SY_OK);
        for (int s = 0; s < 2; s++) {
            sy_seq *q = &seq[s];
            const int32_t kept = (int32_t)(lcg(&x) % (K + 1));
            kept_total += kept;
            fed[s] = (sy_spec_fed){.seq = q, .pos0 = q->n_computed, .n_fed = K + 1, .n_kept = 1 + kept,
                                   .row0 = s * (K + 1)};
            memcpy(q->tokens + q->n_tokens, drafts + s * K, sizeof(int32_t) * (size_t)kept);
            q->n_tokens += kept;
            q->tokens[q->n_tokens++] = picks[s][kept];
            q->n_computed += 1 + kept;
        }
        CHECK(src->ops->after_step(src, fed, 2, &err) == SY_OK);
    }
    CHECK(compared == 16 && mismatched == 0);
    printf("%s: source drafts equal the from-scratch ones at %d of %d steps (%d drafts kept in all)\n", name,
           compared - mismatched, compared, kept_total);
    for (int s = 0; s < 2; s++)
        src->ops->forget(src, &seq[s]);
    src->ops->free(src);
    sy_engine_close(e);
    sy_config_free(cfg);
}

typedef struct out {
    int32_t toks[64];
    int n;
    bool done;
} out;

static void on_event(void *user, const sy_event *ev)
{
    out *o = user;
    for (size_t i = 0; i < ev->n_tokens && o->n < 64; i++)
        o->toks[o->n++] = ev->tokens[i];
    if (ev->type == SY_EV_DONE || ev->type == SY_EV_ERROR)
        o->done = true;
}

enum { NREQ = 12 };

static int run_set(sy_engine *e, const sy_config *cfg, bool spec, const int32_t (*prompts)[40], const int *plen,
                   out *o, sy_sched_stats *st)
{
    sy_err err = {{0}};
    sy_sched *s = NULL;
    memset(o, 0, sizeof(out) * NREQ);
    if (sy_sched_new(e, NULL, &s, &err) || (spec && sy_sched_enable_spec(s, cfg, &err))) {
        fprintf(stderr, "FAIL scheduler: %s\n", err.msg);
        sy_sched_free(s);
        return -1;
    }
    int added = 0;
    for (int step = 0; (added < NREQ || !sy_sched_idle(s)) && step < 20000; step++) {
        for (int i = added; i < NREQ && (i < 4 ? 0 : 3 * (i - 3)) <= step; i++) { /* 4 at once, then one per 3 steps */
            {
                sy_request q = {.struct_size = sizeof q, .prompt_ids = prompts[i], .n_prompt = (size_t)plen[i],
                                .max_tokens = 10 + 3 * (i % 5), .temperature = 0.0f, .top_p = 1.0f,
                                .repetition_penalty = 1.0f, .ignore_eos = 1, .top_logprobs = -1,
                                .on_event = on_event, .user = &o[i]};
                sy_seq *sq = NULL;
                if (sy_seq_new(&q, e, NULL, (uint64_t)i + 1, &sq, &err)) {
                    fprintf(stderr, "FAIL request %d: %s\n", i, err.msg);
                    sy_sched_free(s);
                    return -1;
                }
                sy_sched_add(s, sq);
                added++;
            }
        }
        if (sy_sched_step(s, &err) < 0) {
            fprintf(stderr, "FAIL step: %s\n", err.msg);
            sy_sched_free(s);
            return -1;
        }
    }
    sy_sched_stats_get(s, st);
    sy_sched_free(s);
    return 0;
}

static out plain[NREQ], spec[NREQ];

static void greedy_identity(const char *name, const char *model, const char *const *extra, size_t n_extra,
                            bool want_preempt)
{
    sy_config *cfg = make_config(model, extra, n_extra);
    sy_engine *e = cfg ? open_engine(cfg) : NULL;
    CHECK(e != NULL);
    if (!e) {
        sy_config_free(cfg);
        return;
    }
    const int32_t V = sy_engine_model_config(e)->vocab;
    int32_t prompts[NREQ][40];
    int plen[NREQ];
    uint64_t x = 99;
    for (int i = 0; i < NREQ; i++) {
        plen[i] = 3 + (int)(lcg(&x) % 30);
        for (int j = 0; j < plen[i]; j++)
            prompts[i][j] = 1 + (int32_t)(lcg(&x) % (uint64_t)(V - 1));
    }
    sy_sched_stats a, b;
    if (run_set(e, cfg, false, (const int32_t(*)[40])prompts, plen, plain, &a) == 0 &&
        run_set(e, cfg, true, (const int32_t(*)[40])prompts, plen, spec, &b) == 0) {
        int bad = 0;
        for (int i = 0; i < NREQ; i++)
            if (!plain[i].done || !spec[i].done || plain[i].n != spec[i].n ||
                memcmp(plain[i].toks, spec[i].toks, sizeof(int32_t) * (size_t)plain[i].n) != 0)
                if (bad++ < 3)
                    fprintf(stderr, "FAIL %s: request %d: %d tokens plainly, %d with mtp (or they differ)\n", name, i,
                            plain[i].n, spec[i].n);
        CHECK(bad == 0);
        CHECK(b.spec_draft_tokens > 0 && b.spec_verifies > 0 && b.spec_accepted_tokens <= b.spec_draft_tokens);
        if (want_preempt)
            CHECK(b.preemptions > 0);
        printf("%s: %d requests identical; %llu drafts, %llu accepted (%.3f), %llu verifies, %llu preemptions\n",
               name, NREQ - bad, (unsigned long long)b.spec_draft_tokens, (unsigned long long)b.spec_accepted_tokens,
               b.spec_draft_tokens ? (double)b.spec_accepted_tokens / (double)b.spec_draft_tokens : 0.0,
               (unsigned long long)b.spec_verifies, (unsigned long long)b.preemptions);
    } else {
        CHECK(0);
    }
    sy_engine_close(e);
    sy_config_free(cfg);
}

/*
 * The MTP source behind a recorder of the drafts it proposes for request
 * id 2 (installed with sy__sched_set_spec_source); with fail_at > 0 its
 * after_step fails for the step that takes request 1 past fail_at computed
 * tokens (the scheduler then turns request 1's speculation off).
 */
typedef struct rec_src {
    sy_spec_source base;
    sy_spec_source *in;
    int32_t fail_at;
    int32_t log[512];
    int n;
} rec_src;

static int rec_after_step(sy_spec_source *src, const sy_spec_fed *fed, int32_t n, sy_err *err)
{
    rec_src *r = (rec_src *)src;
    for (int32_t i = 0; i < n; i++)
        if (fed[i].seq->id == 1 && fed[i].pos0 < r->fail_at && fed[i].pos0 + fed[i].n_kept >= r->fail_at)
            return sy_err_set(err, SY_ERR_INVALID, "test: the source fails past %d tokens", r->fail_at);
    return r->in->ops->after_step(r->in, fed, n, err);
}

static int rec_propose(sy_spec_source *src, struct sy_seq *const *seqs, int32_t n, int32_t kmax, int32_t *drafts,
                       int32_t *n_drafts, sy_err *err)
{
    rec_src *r = (rec_src *)src;
    int rc = r->in->ops->propose(r->in, seqs, n, kmax, drafts, n_drafts, err);
    for (int32_t i = 0; rc == SY_OK && i < n; i++)
        for (int32_t j = 0; seqs[i]->id == 2 && j < n_drafts[i] && r->n < 512; j++)
            r->log[r->n++] = drafts[(size_t)i * (size_t)kmax + (size_t)j];
    return rc;
}

static void rec_forget(sy_spec_source *src, struct sy_seq *seq)
{
    rec_src *r = (rec_src *)src;
    r->in->ops->forget(r->in, seq);
}

static void rec_free(sy_spec_source *src)
{
    rec_src *r = (rec_src *)src;
    r->in->ops->free(r->in);
}

static const sy_spec_source_ops rec_ops = {
    .method = SY_SPEC_MTP, .after_step = rec_after_step, .propose = rec_propose, .forget = rec_forget,
    .free = rec_free};

/* Runs the prompts one after the other (each to its end, ids 1, 2, ...) on one scheduler, so they share its prefix
 * cache; r records request 2's drafts. */
static int run_in_turn(sy_engine *e, const sy_config *cfg, const int32_t (*prompts)[32], const int *plen, int n,
                       int32_t fail_at, rec_src *r, out *o, sy_sched_stats *st)
{
    sy_err err = {{0}};
    sy_sched *s = NULL;
    sy_spec_config sc;
    memset(r, 0, sizeof *r);
    r->base.ops = &rec_ops;
    r->fail_at = fail_at;
    if (sy_sched_new(e, NULL, &s, &err) || sy_sched_enable_spec(s, cfg, &err) ||
        sy_spec_config_read(cfg, &sc, &err) || sy_spec_source_new(&sc, cfg, e, &r->in, &err)) {
        fprintf(stderr, "FAIL scheduler: %s\n", err.msg);
        sy_sched_free(s);
        return -1;
    }
    sy__sched_set_spec_source(s, &r->base);
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        memset(&o[i], 0, sizeof o[i]);
        sy_request q = {.struct_size = sizeof q, .prompt_ids = prompts[i], .n_prompt = (size_t)plen[i],
                        .max_tokens = 16, .temperature = 0.0f, .top_p = 1.0f, .repetition_penalty = 1.0f,
                        .ignore_eos = 1, .top_logprobs = -1, .on_event = on_event, .user = &o[i]};
        sy_seq *sq = NULL;
        if (sy_seq_new(&q, e, NULL, (uint64_t)i + 1, &sq, &err)) {
            fprintf(stderr, "FAIL request %d: %s\n", i, err.msg);
            rc = -1;
            break;
        }
        sy_sched_add(s, sq);
        for (int step = 0; !sy_sched_idle(s) && step < 1000; step++)
            if (sy_sched_step(s, &err) < 0) {
                fprintf(stderr, "FAIL step: %s\n", err.msg);
                rc = -1;
                break;
            }
    }
    sy_sched_stats_get(s, st);
    sy_sched_free(s);
    return rc;
}

/*
 * Pairs of prompts sharing 8 tokens (two blocks of 4) that differ from the
 * ninth on: the second of each pair served after the first (a prefix-cache
 * hit) proposes exactly the drafts, and decodes exactly the tokens, it does
 * cold (the first prompt being a dummy that shares nothing).
 */
static void prefix_hit_drafts(const char *name, const char *model)
{
    const char *extra[] = {"scheduler.kv_block_size=4"};
    sy_config *cfg = make_config(model, extra, 1);
    sy_engine *e = cfg ? open_engine(cfg) : NULL;
    CHECK(e != NULL);
    if (!e) {
        sy_config_free(cfg);
        return;
    }
    const int32_t V = sy_engine_model_config(e)->vocab;
    static rec_src cold, hit;
    static out oc[2], oh[2];
    uint64_t x = 1234;
    int differ = 0, pairs = 0, hit_tokens = 0, acc_cold = 0, acc_hit = 0;
    for (int pair = 0; pair < 6; pair++) {
        /* cold: [D, B] with D sharing nothing; hit: [A, B] with A = B's first 8 tokens, then others */
        int32_t cold_p[2][32], hit_p[2][32];
        const int plen[2] = {11, 10};
        for (int j = 0; j < 32; j++) {
            cold_p[0][j] = 1 + (int32_t)(lcg(&x) % (uint64_t)(V - 1));
            cold_p[1][j] = 1 + (int32_t)(lcg(&x) % (uint64_t)(V - 1));
            hit_p[0][j] = 1 + (int32_t)(lcg(&x) % (uint64_t)(V - 1));
        }
        memcpy(hit_p[0], cold_p[1], sizeof(int32_t) * 8);
        hit_p[0][8] = cold_p[1][8] % (V - 1) + 1; /* A and B part right at the block boundary */
        memcpy(hit_p[1], cold_p[1], sizeof hit_p[1]);
        sy_sched_stats sc, sh;
        if (run_in_turn(e, cfg, (const int32_t(*)[32])cold_p, plen, 2, 0, &cold, oc, &sc) ||
            run_in_turn(e, cfg, (const int32_t(*)[32])hit_p, plen, 2, 0, &hit, oh, &sh)) {
            CHECK(0);
            break;
        }
        pairs++;
        hit_tokens += (int)sh.cached_tokens;
        acc_cold += (int)sc.spec_accepted_tokens;
        acc_hit += (int)sh.spec_accepted_tokens;
        CHECK(oc[1].done && oh[1].done && oc[1].n == 16 && oh[1].n == 16);
        CHECK(memcmp(oc[1].toks, oh[1].toks, sizeof(int32_t) * 16) == 0);
        CHECK(cold.n > 0);
        if (cold.n != hit.n || memcmp(cold.log, hit.log, sizeof(int32_t) * (size_t)cold.n) != 0) {
            differ++;
            fprintf(stderr, "FAIL %s: pair %d: the second request's %d drafts after a prefix-cache hit are not the "
                    "%d it proposes cold\n", name, pair, hit.n, cold.n);
        }
    }
    CHECK(pairs == 6 && differ == 0);
    CHECK(hit_tokens > 0); /* the first block (whose next token both share) is reused */
    printf("%s: prefix hit at a block boundary: drafts equal to a cold run's in %d of %d pairs, %d tokens reused, "
           "%d drafts accepted over the cold runs' two requests, %d over the hit runs'\n",
           name, pairs - differ, pairs, hit_tokens, acc_cold, acc_hit);
    sy_engine_close(e);
    sy_config_free(cfg);
}

/*
 * Request A (8 prompt tokens, then 16 generated) stops speculating when its
 * source fails in the step that completes its third block: that block and
 * the later ones hold no valid MTP K/V. Request B, A's prompt and first 12
 * generated tokens, served after A reuses only A's first two blocks, and
 * proposes the drafts it does cold.
 */
static void prefix_after_switch_off(const char *name, const char *model)
{
    const char *extra[] = {"scheduler.kv_block_size=4"};
    sy_config *cfg = make_config(model, extra, 1);
    sy_engine *e = cfg ? open_engine(cfg) : NULL;
    CHECK(e != NULL);
    if (!e) {
        sy_config_free(cfg);
        return;
    }
    const int32_t V = sy_engine_model_config(e)->vocab;
    static rec_src cold, hit;
    static out oc[2], oh[2];
    uint64_t x = 4321;
    int differ = 0, pairs = 0, hit_tokens = 0;
    sy_log_set_level(SY_LOG_ERROR); /* the scheduler warns of each injected failure */
    for (int pair = 0; pair < 4; pair++) {
        int32_t cold_p[2][32], hit_p[2][32];
        int plen[2] = {8, 20};
        for (int j = 0; j < 32; j++) {
            cold_p[0][j] = 1 + (int32_t)(lcg(&x) % (uint64_t)(V - 1));
            hit_p[0][j] = 1 + (int32_t)(lcg(&x) % (uint64_t)(V - 1));
        }
        sy_sched_stats sa, sc, sh;
        if (run_in_turn(e, cfg, (const int32_t(*)[32])hit_p, plen, 1, 0, &hit, oh, &sa) || oh[0].n != 16) {
            CHECK(0);
            break;
        }
        memcpy(hit_p[1], hit_p[0], sizeof(int32_t) * 8);
        memcpy(hit_p[1] + 8, oh[0].toks, sizeof(int32_t) * 12);
        memcpy(cold_p[1], hit_p[1], sizeof cold_p[1]);
        plen[0] = 11; /* D's length differs from A's: nothing of B's can come from D */
        if (run_in_turn(e, cfg, (const int32_t(*)[32])cold_p, plen, 2, 12, &cold, oc, &sc) ||
            run_in_turn(e, cfg, (const int32_t(*)[32])hit_p, (const int[]){8, 20}, 2, 12, &hit, oh, &sh)) {
            CHECK(0);
            break;
        }
        pairs++;
        hit_tokens += (int)sh.cached_tokens;
        CHECK(oc[1].done && oh[1].done && oc[1].n == 16 && oh[1].n == 16);
        CHECK(memcmp(oc[1].toks, oh[1].toks, sizeof(int32_t) * 16) == 0);
        CHECK(cold.n > 0);
        if (cold.n != hit.n || memcmp(cold.log, hit.log, sizeof(int32_t) * (size_t)cold.n) != 0) {
            differ++;
            fprintf(stderr, "FAIL %s: case %d: request B's %d drafts after reusing A's blocks are not the %d it "
                    "proposes cold\n", name, pair, hit.n, cold.n);
        }
    }
    sy_log_set_level(SY_LOG_WARN);
    CHECK(pairs == 4 && differ == 0);
    CHECK(hit_tokens == 4 * 8); /* A's two blocks from before the failure */
    printf("%s: reuse behind a request whose speculation stopped: drafts equal to a cold run's in %d of %d cases, "
           "%d tokens reused\n", name, pairs - differ, pairs, hit_tokens);
    sy_engine_close(e);
    sy_config_free(cfg);
}

/* A checkpoint without MTP layers is refused, naming the directory and the key. */
static void no_mtp_layers(const char *model)
{
    sy_config *cfg = make_config(model, NULL, 0);
    sy_engine *e = NULL;
    sy_err err = {{0}};
    const sy_engine_opts eo = {.plugin_dirs = getenv("SY_PLUGIN_DIR")};
    CHECK(cfg && sy_engine_open(cfg, &eo, &e, &err) != SY_OK && !e);
    CHECK_CONTAINS(err.msg, "num_nextn_predict_layers 0");
    CHECK_CONTAINS(err.msg, model);
    sy_engine_close(e);
    sy_config_free(cfg);
}

int main(void)
{
    sy_log_set_level(SY_LOG_WARN);
    const char *build = getenv("SY_BUILDDIR");
    if (!build || !getenv("SY_PLUGIN_DIR")) {
        fprintf(stderr, "FAIL: SY_BUILDDIR and SY_PLUGIN_DIR must be set (make check sets them)\n");
        return 1;
    }
    char tmp[] = "/tmp/sy-test-mtp-XXXXXX";
    if (!mkdtemp(tmp)) {
        fprintf(stderr, "FAIL: mkdtemp\n");
        return 1;
    }
    static const char *const presets[][2] = {
        {"test-deepseek-v3", "--seed 19"}, {"test-glm4-moe", "--seed 21"}, {"test-glm5", "--seed 22"},
        {"test-deepseek-v3", "--seed 5 --mtp-layers 0"}};
    char dirs[4][128], cmd[1024];
    for (int i = 0; i < 4; i++) {
        snprintf(dirs[i], sizeof dirs[i], "%s/%d", tmp, i);
        snprintf(cmd, sizeof cmd, "'%s/sy-mkmodel' --preset %s %s --quiet --out '%s'", build, presets[i][0],
                 presets[i][1], dirs[i]);
        if (system(cmd) != 0) {
            fprintf(stderr, "FAIL: %s\n", cmd);
            return 1;
        }
    }
    for (int i = 0; i < 3; i++)
        source_matches_fresh(presets[i][0], dirs[i]);
    const char *mixed[] = {"scheduler.max_running=6", "scheduler.max_batch_tokens=24"};
    greedy_identity("test-deepseek-v3: arrivals mid-way, chunked prefill", dirs[0], mixed, 2, false);
    greedy_identity("test-glm4-moe: arrivals mid-way, chunked prefill", dirs[1], mixed, 2, false);
    const char *tiny[] = {"scheduler.max_running=6", "scheduler.max_batch_tokens=24", "scheduler.kv_block_size=4",
                          "model.max_seq_len=96", "scheduler.kv_cache_size=110K"};
    greedy_identity("test-glm5: tiny KV pool (preemption)", dirs[2], tiny, 5, true);
    prefix_hit_drafts(presets[0][0], dirs[0]);
    prefix_hit_drafts(presets[2][0], dirs[2]);
    prefix_after_switch_off(presets[0][0], dirs[0]);
    no_mtp_layers(dirs[3]);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0)
        fprintf(stderr, "warning: could not remove %s\n", tmp);
    return sy_test_done("test_spec_mtp");
}
