/*
 * `switchyard bench-spec`: what speculative decoding costs and what it can
 * gain on this machine. At each context length it times, in alternating
 * rounds (median of the rounds), one plain decode step at batch 1, one
 * verify step over k + 1 tokens (sy_step_seq.n_logits = k + 1, as the
 * scheduler verifies), and one draft step of the configured source (its
 * after_step and a propose of k drafts for the sequence, divided by k).
 * From these: the expected speedup at a per-token acceptance alpha,
 * E = (1 - alpha^(k+1)) / (1 - alpha) tokens per verify, speedup =
 * E * t_decode / (t_verify + k * t_draft). It also runs the source for real
 * over a greedy continuation (propose, one verify step, keep the matching
 * drafts and the target's pick) and reports the acceptance it measured,
 * the speedup formula at that acceptance, and that loop's own tokens/s
 * against plain greedy decoding of the same continuation. With --batch it
 * times the three steps at each batch size instead and suggests
 * [speculative] max_batch: the largest batch where the speedup still pays.
 */
#include "config.h"

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "serve/seq.h"
#include "spec/spec.h"
#include "util/log.h"
#include "util/util.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BS_MAX_CTX 16
#define BS_MAX_ALPHA 8
#define BS_MAX_BATCH 16

static void usage(FILE *f)
{
    fprintf(f,
            "usage: switchyard bench-spec -c CONFIG [--model DIR] [--ctx 128,512,2048] [-k K] [--rounds N]\n"
            "         [--acceptance 0.85[,0.9...]] [--batch 1,2,4,8,16,32] [--measure N] [--prompt-repeat N] [--json]\n"
            "         [--set section.key=value] [--plugin-dir DIR] [-q|-v]\n"
            "Times one plain decode step, one verify step over k+1 tokens and one draft step of the\n"
            "configured [speculative] source (ngram when none is configured) at each context length,\n"
            "and the speedup they give at a per-token acceptance alpha:\n"
            "  E = (1 - alpha^(k+1)) / (1 - alpha),  speedup = E * t_decode / (t_verify + k * t_draft)\n"
            "  --ctx LIST        context lengths (tokens already in the KV cache; default 128,512,2048)\n"
            "  -k N              drafts per verify (default: [speculative] num_draft_tokens, else 4)\n"
            "  --rounds N        timed rounds, median taken (default 7, after one warm-up round)\n"
            "  --acceptance A    per-token acceptance for the expected speedup, comma-separated (default\n"
            "                    0.85, DeepSeek-V3's MTP second-token acceptance)\n"
            "  --measure N       run the source for real over an N-token greedy continuation and report\n"
            "                    its acceptance (default 128; 0: off); [speculative] min_acceptance and\n"
            "                    policy_window switch it off as in serving\n"
            "  --batch LIST      time the three steps at these batch sizes instead (B sequences, each its\n"
            "                    own context and blocks: decode B tokens, verify B x (k+1), one draft step\n"
            "                    of the source for all B, measured at B, not scaled), at each --ctx\n"
            "                    (default 512 with --batch), and print \"suggested max_batch = N\": the\n"
            "                    largest B up to which the speedup at the first --acceptance stays above 1\n"
            "                    at every context timed ([speculative] max_batch)\n"
            "  --prompt-repeat N the measured prompt is a 32-token random block repeated N times (default 1;\n"
            "                    output that copies its input, prompt lookup's case)\n"
            "  --json            one JSON document on stdout instead of the table\n");
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static double expected_tokens(double alpha, int k)
{
    return alpha >= 1.0 ? k + 1.0 : (1.0 - pow(alpha, k + 1)) / (1.0 - alpha);
}

typedef struct bs_row {
    int32_t ctx, batch;
    double decode_ms, verify_ms, draft_ms;
} bs_row;

static double row_speedup(const bs_row *r, double E, int32_t k)
{
    return E * r->decode_ms / (r->verify_ms + k * r->draft_ms);
}

/*
 * The largest batch of context L's rows (ascending batches) up to which the
 * speedup at alpha stays above 1; 0 when it does not at the smallest
 * (max_batch = 0: never speculate); -1 when no row has context L.
 */
static int32_t suggest_max_batch(const bs_row *rows, int n, int32_t L, double alpha, int32_t k)
{
    int32_t best = -1;
    for (int i = 0; i < n; i++) {
        if (rows[i].ctx != L)
            continue;
        if (best < 0)
            best = 0;
        if (row_speedup(&rows[i], expected_tokens(alpha, k), k) <= 1.0)
            break;
        best = rows[i].batch;
    }
    return best;
}

typedef struct bs_ctx {
    sy_engine *e;
    sy_spec_source *src;
    const sy_spec_config *sc; /* its policy: the measuring loop switches off as serving would */
    sy_kv_blocks *kv;
    int32_t k, vocab, max_bt;
    int32_t *picks; /* [k + 1] */
    float *logits;  /* [(k + 1) * vocab]: the step's scratch when the device does not pick */
    uint64_t next_id;
} bs_ctx;

/* A sequence as the scheduler hands it to a source: tokens, blocks, n_computed. */
typedef struct bs_seq {
    sy_seq q;
} bs_seq;

static int seq_init(bs_ctx *c, bs_seq *s, const int32_t *tokens, int32_t n, int32_t cap, sy_err *err)
{
    memset(s, 0, sizeof *s);
    s->q.id = ++c->next_id;
    s->q.tokens = malloc(sizeof(int32_t) * (size_t)cap);
    s->q.cap_blocks = sy_kv_blocks_for(c->kv, cap);
    s->q.blocks = malloc(sizeof(int32_t) * (size_t)s->q.cap_blocks);
    if (!s->q.tokens || !s->q.blocks)
        return sy_err_set(err, SY_ERR_NOMEM, "out of memory");
    memcpy(s->q.tokens, tokens, sizeof(int32_t) * (size_t)n);
    s->q.n_tokens = s->q.n_prompt = n;
    s->q.cap_tokens = cap;
    if (sy_kv_blocks_alloc(c->kv, s->q.cap_blocks, s->q.blocks) != SY_OK)
        return sy_err_set(err, SY_ERR_UNAVAILABLE,
                          "the KV pool has %d free blocks of %d tokens, a sequence of %d tokens needs %d; raise "
                          "[scheduler] kv_cache_size",
                          c->kv->n_free, c->kv->block_size, cap, s->q.cap_blocks);
    s->q.n_blocks = s->q.cap_blocks;
    return SY_OK;
}

static void seq_fini(bs_ctx *c, bs_seq *s)
{
    if (c->src && s->q.id)
        c->src->ops->forget(c->src, &s->q);
    if (s->q.n_blocks)
        sy_kv_blocks_release(c->kv, s->q.blocks, s->q.n_blocks);
    free(s->q.tokens);
    free(s->q.blocks);
    memset(s, 0, sizeof *s);
}

static int step1(bs_ctx *c, const sy_step_seq *st, sy_err *err)
{
    return sy_engine_step(c->e, st, 1, c->logits, err);
}

/* Feeds tokens[n_computed, n_tokens - 1) without logits, in chunks of the step budget; tells the source. */
static int prefill(bs_ctx *c, bs_seq *s, sy_err *err)
{
    sy_seq *q = &s->q;
    while (q->n_computed < q->n_tokens - 1) {
        int32_t n = q->n_tokens - 1 - q->n_computed;
        if (n > c->max_bt)
            n = c->max_bt;
        sy_step_seq st = {.tokens = q->tokens + q->n_computed, .n_tokens = n, .ctx_len = q->n_computed,
                          .blocks = q->blocks, .n_blocks = sy_kv_blocks_for(c->kv, q->n_computed + n)};
        int rc = step1(c, &st, err);
        if (rc)
            return rc;
        sy_spec_fed fed = {.seq = q, .pos0 = q->n_computed, .n_fed = n, .n_kept = n, .row0 = 0};
        q->n_computed += n;
        if ((rc = c->src->ops->after_step(c->src, &fed, 1, err)))
            return rc;
    }
    return SY_OK;
}

/* The plain decode step of q's last token (its KV is rewritten in place: q does not grow). */
static int decode_step(bs_ctx *c, sy_seq *q, int32_t *pick, sy_err *err)
{
    sy_step_seq st = {.tokens = q->tokens + q->n_computed, .n_tokens = 1, .ctx_len = q->n_computed,
                      .blocks = q->blocks, .n_blocks = sy_kv_blocks_for(c->kv, q->n_computed + 1),
                      .want_logits = true, .greedy_id = pick};
    return step1(c, &st, err);
}

/* A verify step: q's last token and drafts d[0..nd), a greedy pick after each of the 1 + nd. */
static int verify_step(bs_ctx *c, sy_seq *q, const int32_t *d, int32_t nd, int32_t *feed, sy_err *err)
{
    feed[0] = q->tokens[q->n_computed];
    memcpy(feed + 1, d, sizeof(int32_t) * (size_t)nd);
    sy_step_seq st = {.tokens = feed, .n_tokens = 1 + nd, .ctx_len = q->n_computed, .blocks = q->blocks,
                      .n_blocks = sy_kv_blocks_for(c->kv, q->n_computed + 1 + nd), .want_logits = true,
                      .greedy_id = c->picks, .n_logits = 1 + nd};
    return step1(c, &st, err);
}

static int time_ctx(bs_ctx *c, int32_t L, int rounds, uint64_t *seed, bs_row *row, sy_err *err)
{
    const int32_t k = c->k;
    int32_t *tokens = malloc(sizeof(int32_t) * (size_t)(L + 1)), *drafts = malloc(sizeof(int32_t) * (size_t)k);
    int32_t *feed = malloc(sizeof(int32_t) * (size_t)(k + 1));
    double *td = malloc(sizeof(double) * (size_t)rounds * 3);
    bs_seq s = {0};
    int rc = tokens && drafts && feed && td ? SY_OK : sy_err_set(err, SY_ERR_NOMEM, "out of memory");
    for (int32_t i = 0; !rc && i <= L; i++)
        tokens[i] = (int32_t)(rng_next(seed) % (uint64_t)c->vocab);
    if (!rc)
        rc = seq_init(c, &s, tokens, L + 1, L + 1 + k, err);
    if (!rc)
        rc = prefill(c, &s, err);
    for (int r = -1; !rc && r < rounds; r++) { /* round -1 warms up (and lets the source catch up) */
        int32_t nd = 0, pick;
        for (int32_t j = 0; j < k; j++)
            drafts[j] = tokens[(j * 7 + 1) % (L + 1)];
        double t0 = sy_now();
        rc = verify_step(c, &s.q, drafts, k, feed, err);
        double t1 = sy_now();
        if (!rc)
            rc = decode_step(c, &s.q, &pick, err);
        double t2 = sy_now();
        sy_spec_fed fed = {.seq = &s.q, .pos0 = s.q.n_computed, .n_fed = 1, .n_kept = 1, .row0 = 0};
        if (!rc)
            rc = c->src->ops->after_step(c->src, &fed, 1, err);
        struct sy_seq *qs = &s.q;
        if (!rc)
            rc = c->src->ops->propose(c->src, &qs, 1, k, drafts, &nd, err);
        double t3 = sy_now();
        if (r >= 0) {
            td[r] = (t2 - t1) * 1e3;
            td[rounds + r] = (t1 - t0) * 1e3;
            td[2 * rounds + r] = (t3 - t2) * 1e3 / k;
        }
    }
    if (!rc) {
        row->ctx = L;
        row->decode_ms = median(td, rounds);
        row->verify_ms = median(td + rounds, rounds);
        row->draft_ms = median(td + 2 * rounds, rounds);
    }
    seq_fini(c, &s);
    free(tokens);
    free(drafts);
    free(feed);
    free(td);
    return rc;
}

/*
 * The same three costs at batch B: one plain decode step of B sequences
 * (B tokens), one verify step of the B sequences over k + 1 tokens each
 * (B x (k + 1) tokens, n_logits = k + 1 each), and one draft step of the
 * source for the whole batch (after_step over the B decoded rows, then one
 * propose for the B sequences, divided by k). Each sequence has its own
 * random context of L tokens and its own blocks. The draft cost is measured
 * at B rather than scaled from batch 1: prompt lookup's host work grows
 * with B, a draft model's or MTP layer's batched step grows less.
 */
static int time_batch(bs_ctx *c, int32_t L, int32_t B, int rounds, uint64_t *seed, bs_row *row, sy_err *err)
{
    const int32_t k = c->k;
    bs_seq *s = calloc((size_t)B, sizeof *s);
    sy_step_seq *st = calloc((size_t)B, sizeof *st);
    sy_spec_fed *fed = calloc((size_t)B, sizeof *fed);
    struct sy_seq **qs = calloc((size_t)B, sizeof *qs);
    int32_t *tokens = malloc(sizeof(int32_t) * (size_t)(L + 1));
    int32_t *feed = malloc(sizeof(int32_t) * (size_t)B * (size_t)(k + 1));
    int32_t *picks = malloc(sizeof(int32_t) * (size_t)B * (size_t)(k + 1));
    int32_t *drafts = malloc(sizeof(int32_t) * (size_t)B * (size_t)k), *nd = malloc(sizeof(int32_t) * (size_t)B);
    /* the step's scratch rows when the device does not pick: k + 1 per sequence */
    float *logits = malloc(sizeof(float) * (size_t)B * (size_t)(k + 1) * (size_t)c->vocab);
    double *td = malloc(sizeof(double) * (size_t)rounds * 3);
    int rc = s && st && fed && qs && tokens && feed && picks && drafts && nd && logits && td
                 ? SY_OK
                 : sy_err_set(err, SY_ERR_NOMEM, "out of memory");
    int32_t n_init = 0;
    while (!rc && n_init < B) {
        for (int32_t i = 0; i <= L; i++)
            tokens[i] = (int32_t)(rng_next(seed) % (uint64_t)c->vocab);
        bs_seq *q = &s[n_init++];
        rc = seq_init(c, q, tokens, L + 1, L + 1 + k, err);
        if (!rc)
            rc = prefill(c, q, err);
        if (rc) {
            sy_err inner = *err;
            sy_err_set(err, rc, "batch %d at ctx %d, sequence %d: %s", B, L, n_init, inner.msg);
        }
        qs[n_init - 1] = &q->q;
    }
    for (int r = -1; !rc && r < rounds; r++) { /* round -1 warms up (and lets the source catch up) */
        double t[4];
        for (int pass = 0; !rc && pass < 2; pass++) { /* pass 0: the verify step, 1: the plain decode step */
            const int32_t n = pass == 0 ? 1 + k : 1;
            for (int32_t i = 0; i < B; i++) {
                sy_seq *q = qs[i];
                int32_t *f = feed + (size_t)i * (size_t)(k + 1);
                f[0] = q->tokens[q->n_computed];
                for (int32_t j = 0; j < k; j++)
                    f[1 + j] = q->tokens[(j * 7 + 1 + i) % (L + 1)];
                st[i] = (sy_step_seq){.tokens = f, .n_tokens = n, .ctx_len = q->n_computed, .blocks = q->blocks,
                                      .n_blocks = sy_kv_blocks_for(c->kv, q->n_computed + n), .want_logits = true,
                                      .greedy_id = picks + (size_t)i * (size_t)(k + 1), .n_logits = n > 1 ? n : 0};
            }
            t[pass] = sy_now();
            rc = sy_engine_step(c->e, st, B, logits, err);
        }
        /* the draft step follows the decode step, as in serving: row i of that step is sequence i's */
        t[2] = sy_now();
        for (int32_t i = 0; i < B; i++)
            fed[i] = (sy_spec_fed){.seq = qs[i], .pos0 = qs[i]->n_computed, .n_fed = 1, .n_kept = 1, .row0 = i};
        if (!rc)
            rc = c->src->ops->after_step(c->src, fed, B, err);
        if (!rc)
            rc = c->src->ops->propose(c->src, qs, B, k, drafts, nd, err);
        t[3] = sy_now();
        if (r >= 0) {
            td[r] = (t[2] - t[1]) * 1e3;
            td[rounds + r] = (t[1] - t[0]) * 1e3;
            td[2 * rounds + r] = (t[3] - t[2]) * 1e3 / k;
        }
    }
    if (!rc) {
        row->ctx = L;
        row->batch = B;
        row->decode_ms = median(td, rounds);
        row->verify_ms = median(td + rounds, rounds);
        row->draft_ms = median(td + 2 * rounds, rounds);
    }
    for (int32_t i = 0; i < n_init; i++)
        seq_fini(c, &s[i]);
    free(s);
    free(st);
    free(fed);
    free(qs);
    free(tokens);
    free(feed);
    free(picks);
    free(drafts);
    free(nd);
    free(logits);
    free(td);
    return rc;
}

typedef struct bs_measure {
    int32_t n;
    uint64_t drafted, accepted, verifies;
    double plain_tok_s, spec_tok_s;
    bool same; /* the speculative loop's tokens equal plain greedy decoding's */
    int32_t off_at; /* tokens generated when the per-request policy switched speculation off; -1: never */
} bs_measure;

/*
 * Plain greedy decoding of n tokens after a prompt, then the same with the
 * source: propose, one verify step, keep the drafts the target's picks
 * agree with and the target's pick after them. The prompt is a block of
 * random ids repeated `repeat` times (output that copies its input, where
 * prompt lookup pays). The [speculative] per-request switch-off applies as
 * in the scheduler (sy_spec_policy_says_off): after it the loop decodes
 * plainly.
 */
static int measure(bs_ctx *c, int32_t n_block, int32_t repeat, int32_t n, uint64_t *seed, bs_measure *m,
                   sy_err *err)
{
    const int32_t n_prompt = n_block * repeat;
    const int32_t k = c->k, cap = n_prompt + n + k + 1;
    int32_t *prompt = malloc(sizeof(int32_t) * (size_t)n_prompt), *drafts = malloc(sizeof(int32_t) * (size_t)k);
    int32_t *feed = malloc(sizeof(int32_t) * (size_t)(k + 1)), *plain = malloc(sizeof(int32_t) * (size_t)cap);
    bs_seq s = {0};
    memset(m, 0, sizeof *m);
    m->n = n;
    m->off_at = -1;
    int rc = prompt && drafts && feed && plain ? SY_OK : sy_err_set(err, SY_ERR_NOMEM, "out of memory");
    for (int32_t i = 0; !rc && i < n_prompt; i++)
        prompt[i] = i < n_block ? (int32_t)(rng_next(seed) % (uint64_t)c->vocab) : prompt[i - n_block];
    /* plain */
    if (!rc)
        rc = seq_init(c, &s, prompt, n_prompt, cap, err);
    if (!rc)
        rc = prefill(c, &s, err);
    double t0 = sy_now();
    while (!rc && s.q.n_tokens < n_prompt + n) {
        int32_t pick;
        if (!(rc = decode_step(c, &s.q, &pick, err))) {
            s.q.n_computed++;
            s.q.tokens[s.q.n_tokens++] = pick;
        }
    }
    m->plain_tok_s = n / (sy_now() - t0);
    if (!rc)
        memcpy(plain, s.q.tokens, sizeof(int32_t) * (size_t)s.q.n_tokens);
    seq_fini(c, &s);
    /* speculative */
    if (!rc)
        rc = seq_init(c, &s, prompt, n_prompt, cap, err);
    if (!rc)
        rc = prefill(c, &s, err);
    t0 = sy_now();
    while (!rc && s.q.n_tokens < n_prompt + n) {
        sy_seq *q = &s.q;
        int32_t nd = 0, want = n_prompt + n - q->n_tokens - 1;
        struct sy_seq *qs = q;
        if (want > 0 && !q->spec_off)
            rc = c->src->ops->propose(c->src, &qs, 1, want < k ? want : k, drafts, &nd, err);
        if (!rc)
            rc = verify_step(c, q, drafts, nd, feed, err);
        if (rc)
            break;
        int32_t j = 0;
        while (j < nd && c->picks[j] == drafts[j])
            j++;
        sy_spec_fed fed = {.seq = q, .pos0 = q->n_computed, .n_fed = 1 + nd, .n_kept = 1 + j, .row0 = 0};
        memcpy(q->tokens + q->n_tokens, drafts, sizeof(int32_t) * (size_t)j);
        q->n_tokens += j;
        q->tokens[q->n_tokens++] = c->picks[j];
        q->n_computed += 1 + j;
        if (nd > 0) {
            m->verifies++;
            m->drafted += (uint64_t)nd;
            m->accepted += (uint64_t)j;
            if (sy_spec_policy_says_off(c->sc, &q->spec_win_drafted, &q->spec_win_accepted, nd, j)) {
                q->spec_off = true;
                m->off_at = q->n_tokens - n_prompt;
                c->src->ops->forget(c->src, q);
            }
        }
        if (!q->spec_off)
            rc = c->src->ops->after_step(c->src, &fed, 1, err);
    }
    m->spec_tok_s = n / (sy_now() - t0);
    m->same = !rc && memcmp(plain, s.q.tokens, sizeof(int32_t) * (size_t)(n_prompt + n)) == 0;
    seq_fini(c, &s);
    free(prompt);
    free(drafts);
    free(feed);
    free(plain);
    return rc;
}

static int parse_list(const char *opt, const char *s, double lo, double hi, double *out, int max, int *n)
{
    *n = 0;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (*n == max) {
            fprintf(stderr, "switchyard bench-spec: %s takes at most %d values\n", opt, max);
            return -1;
        }
        if (sy_cli_float(opt, t, lo, hi, &out[(*n)++]))
            return -1;
    }
    if (*n == 0) {
        fprintf(stderr, "switchyard bench-spec: %s expects a comma-separated list, found \"%s\"\n", opt, s);
        return -1;
    }
    return 0;
}

int sy_cmd_bench_spec(int argc, char **argv)
{
    sy_cli_common co = {0};
    double ctxd[BS_MAX_CTX] = {128, 512, 2048}, alpha[BS_MAX_ALPHA] = {0.85};
    double batchd[BS_MAX_BATCH];
    int n_ctx = 3, n_alpha = 1, json = 0, n_batch = 0, ctx_given = 0;
    long long k_opt = 0, rounds = 7, n_measure = 128, prompt_repeat = 1;
    for (int i = 1; i < argc; i++) {
        int r = sy_cli_common_arg(&co, argc, argv, &i);
        if (r < 0)
            return 2;
        if (r > 0)
            continue;
        const char *a = argv[i], *v;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--ctx") == 0) {
            if (!(v = sy_cli_value(argc, argv, &i)) || parse_list(a, v, 1, 1 << 24, ctxd, BS_MAX_CTX, &n_ctx))
                return 2;
            ctx_given = 1;
        } else if (strcmp(a, "--batch") == 0) {
            if (!(v = sy_cli_value(argc, argv, &i)) || parse_list(a, v, 1, 65536, batchd, BS_MAX_BATCH, &n_batch))
                return 2;
        } else if (strcmp(a, "--acceptance") == 0) {
            if (!(v = sy_cli_value(argc, argv, &i)) || parse_list(a, v, 0, 1, alpha, BS_MAX_ALPHA, &n_alpha))
                return 2;
        } else if (strcmp(a, "-k") == 0 || strcmp(a, "--num-draft-tokens") == 0) {
            if (!(v = sy_cli_value(argc, argv, &i)) || sy_cli_int(a, v, 1, 16, &k_opt))
                return 2;
        } else if (strcmp(a, "--rounds") == 0) {
            if (!(v = sy_cli_value(argc, argv, &i)) || sy_cli_int(a, v, 1, 1000, &rounds))
                return 2;
        } else if (strcmp(a, "--measure") == 0) {
            if (!(v = sy_cli_value(argc, argv, &i)) || sy_cli_int(a, v, 0, 1 << 20, &n_measure))
                return 2;
        } else if (strcmp(a, "--prompt-repeat") == 0) {
            if (!(v = sy_cli_value(argc, argv, &i)) || sy_cli_int(a, v, 1, 256, &prompt_repeat))
                return 2;
        } else if (strcmp(a, "--json") == 0) {
            json = 1;
        } else {
            fprintf(stderr, "switchyard bench-spec: unknown option \"%s\"\n", a);
            usage(stderr);
            return 2;
        }
    }
    for (int i = 0; i < n_ctx; i++)
        if (ctxd[i] != floor(ctxd[i])) {
            fprintf(stderr, "switchyard bench-spec: --ctx expects whole token counts, found %g\n", ctxd[i]);
            return 2;
        }
    for (int i = 0; i < n_batch; i++)
        if (batchd[i] != floor(batchd[i])) {
            fprintf(stderr, "switchyard bench-spec: --batch expects whole sequence counts, found %g\n", batchd[i]);
            return 2;
        }
    qsort(batchd, (size_t)n_batch, sizeof *batchd, cmp_double); /* suggest_max_batch walks them ascending */
    if (n_batch && !ctx_given) {
        ctxd[0] = 512;
        n_ctx = 1;
    }
    sy_config *cfg = NULL;
    if (sy_cli_load_config(&co, &cfg))
        return 1;
    sy_err err = {{0}};
    sy_spec_config sc;
    int rc = sy_spec_config_read(cfg, &sc, &err);
    /* The source to time: the configured one, else prompt lookup; the engine sizes its verify rows for k. */
    if (!rc && sc.method == SY_SPEC_NONE)
        rc = sy_config_set(cfg, "speculative.method=ngram", &err);
    if (!rc && k_opt > 0) {
        char set[64];
        snprintf(set, sizeof set, "speculative.num_draft_tokens=%lld", k_opt);
        rc = sy_config_set(cfg, set, &err);
    }
    if (!rc)
        rc = sy_spec_config_read(cfg, &sc, &err);
    sy_engine *e = NULL;
    sy_engine_opts eo = {.plugin_dirs = co.plugin_dirs[0] ? co.plugin_dirs : NULL, .progress = co.verbosity >= 0 && !json};
    if (!rc)
        rc = sy_engine_open(cfg, &eo, &e, &err);
    bs_ctx c = {.e = e, .sc = &sc, .k = sc.num_draft_tokens};
    if (!rc)
        rc = sy_spec_source_new(&sc, cfg, e, &c.src, &err);
    if (rc) {
        fprintf(stderr, "switchyard bench-spec: %s\n", err.msg);
        sy_engine_close(e);
        sy_config_free(cfg);
        return 1;
    }
    c.kv = sy_engine_kv(e);
    c.vocab = sy_engine_model_config(e)->vocab;
    c.max_bt = sy_engine_max_batch_tokens(e);
    c.picks = malloc(sizeof(int32_t) * (size_t)(c.k + 1));
    c.logits = malloc(sizeof(float) * (size_t)(c.k + 1) * (size_t)c.vocab);
    if (!c.logits) {
        free(c.picks);
        c.picks = NULL;
    }
    const int32_t k = c.k, max_len = sy_engine_max_seq_len(e);
    bs_row rows[BS_MAX_CTX * BS_MAX_BATCH];
    int n_rows = 0;
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    for (int i = 0; c.picks && i < n_ctx && !rc; i++) {
        const int32_t L = (int32_t)ctxd[i];
        if ((int64_t)L + 1 + k > max_len) {
            fprintf(stderr, "switchyard bench-spec: --ctx %d skipped: with k = %d it passes max_seq_len %d\n", L, k,
                    max_len);
            continue;
        }
        if (!n_batch) {
            rc = time_ctx(&c, L, (int)rounds, &seed, &rows[n_rows], &err);
            if (!rc)
                n_rows++;
        }
        for (int b = 0; b < n_batch && !rc; b++) {
            const int32_t B = (int32_t)batchd[b];
            const int64_t verify_rows = (int64_t)B * (1 + k);
            if (B > sy_engine_max_seqs(e) || verify_rows > c.max_bt || verify_rows > sy_engine_max_logit_rows(e)) {
                fprintf(stderr, "switchyard bench-spec: --batch %d skipped: its verify step is %d sequences x %d "
                        "tokens, the engine takes at most %d sequences ([scheduler] max_running), %d tokens "
                        "(max_batch_tokens) and %d logits rows a step\n", B, B, 1 + k, sy_engine_max_seqs(e),
                        c.max_bt, sy_engine_max_logit_rows(e));
                continue;
            }
            rc = time_batch(&c, L, B, (int)rounds, &seed, &rows[n_rows], &err);
            if (!rc)
                n_rows++;
        }
    }
    /* per context, then the smallest over them: off wherever it would not pay */
    int32_t suggest_ctx[BS_MAX_CTX], suggested = -1;
    for (int i = 0; n_batch && i < n_ctx; i++) {
        suggest_ctx[i] = suggest_max_batch(rows, n_rows, (int32_t)ctxd[i], alpha[0], k);
        if (suggest_ctx[i] >= 0 && (suggested < 0 || suggest_ctx[i] < suggested))
            suggested = suggest_ctx[i];
    }
    bs_measure m = {0};
    int measured = 0;
    const int32_t n_block = 32, n_prompt = n_block * (int32_t)prompt_repeat;
    if (!rc && c.picks && n_measure > 0) {
        if (n_prompt + n_measure + k + 1 > max_len)
            fprintf(stderr, "switchyard bench-spec: --measure %lld skipped: with a %d-token prompt it passes "
                    "max_seq_len %d\n", n_measure, n_prompt, max_len);
        else if (!(rc = measure(&c, n_block, (int32_t)prompt_repeat, (int32_t)n_measure, &seed, &m, &err)))
            measured = m.drafted > 0;
    }
    if (!c.picks)
        rc = sy_err_set(&err, SY_ERR_NOMEM, "out of memory");
    if (rc) {
        fprintf(stderr, "switchyard bench-spec: %s\n", err.msg);
    } else {
        const double acc = measured ? (double)m.accepted / (double)m.drafted : 0;
        const double e_meas = measured ? 1.0 + (double)m.accepted / (double)m.verifies : 0;
        const sy_model_config *mc = sy_engine_model_config(e);
        const char *method = sy_spec_method_name(sc.method);
        if (json) {
            json_t *root = json_object(), *arr = json_array();
            json_object_set_new(root, "model", json_string(sy_config_get(cfg, "model", "path")));
            json_object_set_new(root, "arch", json_string(mc->arch_name));
            json_object_set_new(root, "engine", json_string(sy_engine_describe(e)));
            json_object_set_new(root, "method", json_string(method));
            if (sc.method == SY_SPEC_DRAFT)
                json_object_set_new(root, "draft_model", json_string(sc.draft_model));
            json_object_set_new(root, "k", json_integer(k));
            json_object_set_new(root, "rounds", json_integer(rounds));
            for (int i = 0; i < n_rows; i++) {
                const bs_row *r = &rows[i];
                json_t *o = json_pack("{s:i, s:f, s:f, s:f, s:f, s:f}", "ctx", r->ctx, "decode_ms", r->decode_ms,
                                      "verify_ms", r->verify_ms, "draft_ms", r->draft_ms, "verify_ratio",
                                      r->verify_ms / r->decode_ms, "draft_ratio", r->draft_ms / r->decode_ms);
                if (n_batch)
                    json_object_set_new(o, "batch", json_integer(r->batch));
                json_t *sp = json_array();
                for (int a = 0; a < n_alpha; a++) {
                    const double E = expected_tokens(alpha[a], k);
                    json_array_append_new(sp, json_pack("{s:f, s:f, s:f}", "acceptance", alpha[a], "tokens_per_verify",
                                                        E, "speedup",
                                                        E * r->decode_ms / (r->verify_ms + k * r->draft_ms)));
                }
                json_object_set_new(o, "expected", sp);
                if (measured)
                    json_object_set_new(o, "speedup_measured",
                                        json_real(e_meas * r->decode_ms / (r->verify_ms + k * r->draft_ms)));
                json_array_append_new(arr, o);
            }
            json_object_set_new(root, n_batch ? "batches" : "contexts", arr);
            if (n_batch) {
                json_t *per = json_array();
                for (int i = 0; i < n_ctx; i++)
                    if (suggest_ctx[i] >= 0)
                        json_array_append_new(per, json_pack("{s:i, s:i}", "ctx", (int)ctxd[i], "max_batch",
                                                             suggest_ctx[i]));
                json_object_set_new(root, "suggested_per_ctx", per);
                json_object_set_new(root, "suggested_at_acceptance", json_real(alpha[0]));
                json_object_set_new(root, "suggested_max_batch",
                                    suggested >= 0 ? json_integer(suggested) : json_null());
            }
            if (m.n > 0)
                json_object_set_new(root, "measured",
                                    json_pack("{s:i, s:i, s:I, s:I, s:I, s:f, s:f, s:f, s:f, s:b, s:i}", "tokens",
                                              m.n, "prompt_tokens", n_prompt, "drafted",
                                              (json_int_t)m.drafted, "accepted", (json_int_t)m.accepted, "verifies",
                                              (json_int_t)m.verifies, "acceptance_rate", acc,
                                              "mean_accepted_length", e_meas, "plain_tok_s", m.plain_tok_s,
                                              "spec_tok_s", m.spec_tok_s, "same_as_plain", m.same,
                                              "switched_off_at", m.off_at));
            char *s = json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
            if (s)
                printf("%s\n", s);
            free(s);
            json_decref(root);
        } else {
            printf("# switchyard bench-spec: %s (%s, %d layers, hidden %d), %s; k = %d, method %s%s%s; median of "
                   "%lld rounds\n",
                   sy_config_get(cfg, "model", "path"), mc->arch_name, mc->n_layers, mc->hidden,
                   sy_engine_describe(e), k, method, sc.method == SY_SPEC_DRAFT ? " " : "",
                   sc.method == SY_SPEC_DRAFT ? sc.draft_model : "", rounds);
            printf("# %6s", "ctx");
            if (n_batch)
                printf(" %6s", "batch");
            printf(" %10s %10s %10s %8s %8s", "decode_ms", "verify_ms", "draft_ms", "verify/", "draft/");
            for (int a = 0; a < n_alpha; a++)
                printf(" %9s", "speedup@");
            if (measured)
                printf(" %9s", "speedup@");
            printf("\n# %6s", "");
            if (n_batch)
                printf(" %6s", "");
            printf(" %10s %10s %10s %8s %8s", "", "", "", "decode", "decode");
            for (int a = 0; a < n_alpha; a++) {
                char lab[32];
                snprintf(lab, sizeof lab, "%.3g", alpha[a]);
                printf(" %9s", lab);
            }
            if (measured)
                printf(" %9s", "measured");
            printf("\n");
            for (int i = 0; i < n_rows; i++) {
                const bs_row *r = &rows[i];
                printf("  %6d", r->ctx);
                if (n_batch)
                    printf(" %6d", r->batch);
                printf(" %10.3f %10.3f %10.4f %8.2f %8.3f", r->decode_ms, r->verify_ms, r->draft_ms,
                       r->verify_ms / r->decode_ms, r->draft_ms / r->decode_ms);
                for (int a = 0; a < n_alpha; a++)
                    printf(" %9.2f", expected_tokens(alpha[a], k) * r->decode_ms / (r->verify_ms + k * r->draft_ms));
                if (measured)
                    printf(" %9.2f", e_meas * r->decode_ms / (r->verify_ms + k * r->draft_ms));
                printf("\n");
            }
            for (int a = 0; a < n_alpha; a++)
                printf("# at acceptance %.3g: E = %.3f tokens per verify\n", alpha[a], expected_tokens(alpha[a], k));
            if (n_batch)
                printf("# batch rows: decode_ms B sequences x 1 token, verify_ms B x %d, draft_ms one draft step of "
                       "the source for all B\n", 1 + k);
            for (int i = 0; n_batch && i < n_ctx; i++)
                if (suggest_ctx[i] > 0)
                    printf("# ctx %d: speedup at acceptance %.3g stays above 1 up to batch %d\n", (int)ctxd[i],
                           alpha[0], suggest_ctx[i]);
                else if (suggest_ctx[i] == 0)
                    printf("# ctx %d: speedup at acceptance %.3g is not above 1 even at batch %d\n", (int)ctxd[i],
                           alpha[0], (int)batchd[0]);
            if (n_batch && suggested >= 0)
                printf("# suggested max_batch = %d ([speculative] max_batch: the largest batch timed where the "
                       "speedup at acceptance %.3g stays above 1 at every context timed)\n", suggested, alpha[0]);
            if (m.n > 0)
                printf("# measured over a %d-token greedy continuation (prompt %d ids: %d random repeated %lld "
                       "times): acceptance %.3f, mean "
                       "accepted length %.3f (%llu drafted, %llu accepted, %llu verifies); %.1f tok/s with %s vs %.1f "
                       "plain; output %s plain greedy\n",
                       m.n, n_prompt, n_block, prompt_repeat, acc, e_meas, (unsigned long long)m.drafted, (unsigned long long)m.accepted,
                       (unsigned long long)m.verifies, m.spec_tok_s, method, m.plain_tok_s,
                       m.same ? "identical to" : "DIFFERS from");
            if (m.n > 0 && m.off_at >= 0)
                printf("# per-request policy: acceptance under %.2f over %d drafts, speculation switched off after %d "
                       "generated tokens (decoded plainly from there, as serving would)\n",
                       (double)sc.min_acceptance, sc.policy_window, m.off_at);
        }
        if (m.n > 0 && !m.same)
            rc = 1;
    }
    free(c.picks);
    free(c.logits);
    if (c.src)
        c.src->ops->free(c.src);
    sy_engine_close(e);
    sy_config_free(cfg);
    return rc ? 1 : 0;
}
