/*
 * Per-request work on the engine thread: sampling with the request's
 * penalties and seed, stop ids and EOS, stop strings, max_tokens and the
 * context limit, incremental detokenisation, logprobs, the reasoning split,
 * and the events. Also the request's validation and copy at submit.
 */
#include "config.h"

#include "serve/seq.h"
#include "serve/guide.h"
#include "util/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SY_MAX_TOP_LOGPROBS 20
/* OpenAI's range for logit_bias values. */
#define SY_MAX_LOGIT_BIAS 100.0f

/* ABI 1.2 fields are read only when the caller's struct covers them. */
#define HAS_FIELD(r, f) ((r)->struct_size >= offsetof(sy_request, f) + sizeof((r)->f))

static int invalid(sy_err *err, const char *field, const char *why)
{
    return sy_err_set(err, SY_ERR_INVALID, "%s: %s", field, why);
}

static int validate_bias(const sy_request *r, int32_t vocab, sy_err *err);

static int validate(const sy_request *r, sy_engine *e, sy_err *err)
{
    char why[160];
    const int32_t vocab = sy_engine_model_config(e)->vocab;
    const int32_t ctx = sy_engine_max_seq_len(e);
    if (!r || r->struct_size < offsetof(sy_request, user) + sizeof(void *))
        return sy_err_set(err, SY_ERR_INVALID, "request: struct_size %u is smaller than this host's sy_request",
                          r ? r->struct_size : 0);
    if (!r->on_event)
        return invalid(err, "on_event", "a request needs an event callback");
    if (!r->prompt_ids || r->n_prompt == 0)
        return invalid(err, "prompt", "the prompt is empty: generation needs at least one token");
    if (r->n_prompt >= (size_t)ctx) {
        snprintf(why, sizeof why, "the prompt has %zu tokens; the model's context is %d (prompt plus at least one new token)",
                 r->n_prompt, ctx);
        return invalid(err, "prompt", why);
    }
    for (size_t i = 0; i < r->n_prompt; i++)
        if (r->prompt_ids[i] < 0 || r->prompt_ids[i] >= vocab) {
            snprintf(why, sizeof why, "token id %d at %zu is outside the vocabulary [0, %d)", r->prompt_ids[i], i, vocab);
            return invalid(err, "prompt", why);
        }
    if (r->max_tokens < 1) {
        snprintf(why, sizeof why, "must be at least 1, found %d", r->max_tokens);
        return invalid(err, "max_tokens", why);
    }
    if (r->min_tokens < 0) {
        snprintf(why, sizeof why, "must be >= 0, found %d", r->min_tokens);
        return invalid(err, "min_tokens", why);
    }
#define RANGE(field, ok, range)                                                                    \
    if (!(ok)) {                                                                                   \
        snprintf(why, sizeof why, "must be in %s, found %g", range, (double)r->field);             \
        return invalid(err, #field, why);                                                          \
    }
    RANGE(temperature, r->temperature >= 0.0f && r->temperature <= 100.0f, "[0, 100]");
    RANGE(top_p, r->top_p > 0.0f && r->top_p <= 1.0f, "(0, 1]");
    RANGE(top_k, r->top_k >= 0, "[0, vocab] (0: off)");
    RANGE(min_p, r->min_p >= 0.0f && r->min_p < 1.0f, "[0, 1)");
    RANGE(frequency_penalty, r->frequency_penalty >= -2.0f && r->frequency_penalty <= 2.0f, "[-2, 2]");
    RANGE(presence_penalty, r->presence_penalty >= -2.0f && r->presence_penalty <= 2.0f, "[-2, 2]");
    RANGE(repetition_penalty, r->repetition_penalty > 0.0f && r->repetition_penalty <= 100.0f, "(0, 100]");
    RANGE(top_logprobs, r->top_logprobs >= -1 && r->top_logprobs <= SY_MAX_TOP_LOGPROBS, "[-1, 20] (-1: none)");
#undef RANGE
    if (r->n_stop_ids && !r->stop_ids)
        return invalid(err, "stop_token_ids", "n_stop_ids is set but stop_ids is NULL");
    for (size_t i = 0; i < r->n_stop_ids; i++)
        if (r->stop_ids[i] < 0 || r->stop_ids[i] >= vocab) {
            snprintf(why, sizeof why, "token id %d is outside the vocabulary [0, %d)", r->stop_ids[i], vocab);
            return invalid(err, "stop_token_ids", why);
        }
    if (r->n_stop_strings && !r->stop_strings)
        return invalid(err, "stop", "n_stop_strings is set but stop_strings is NULL");
    for (size_t i = 0; i < r->n_stop_strings; i++)
        if (!r->stop_strings[i])
            return invalid(err, "stop", "a stop string is NULL");
    return validate_bias(r, vocab, err);
}

static int validate_bias(const sy_request *r, int32_t vocab, sy_err *err)
{
    if (!HAS_FIELD(r, n_logit_bias) || r->n_logit_bias == 0)
        return SY_OK;
    if (!r->logit_bias_ids || !r->logit_bias)
        return invalid(err, "logit_bias", "n_logit_bias is set but the ids or the biases are NULL");
    for (size_t i = 0; i < r->n_logit_bias; i++) {
        const int32_t id = r->logit_bias_ids[i];
        const float b = r->logit_bias[i];
        if (id < 0 || id >= vocab)
            return sy_err_set(err, SY_ERR_INVALID, "logit_bias: token id %d is outside the vocabulary [0, %d)", id,
                              vocab);
        if (!(b >= -SY_MAX_LOGIT_BIAS && b <= SY_MAX_LOGIT_BIAS))
            return sy_err_set(err, SY_ERR_INVALID, "logit_bias[\"%d\"]: must be a number in [-100, 100], found %g", id,
                              (double)b);
        for (size_t j = 0; j < i; j++)
            if (r->logit_bias_ids[j] == id)
                return sy_err_set(err, SY_ERR_INVALID, "logit_bias: token id %d is given twice", id);
    }
    return SY_OK;
}

int sy_seq_set_draft_limit(sy_seq *s, const sy_request *r, int32_t k, sy_err *err)
{
    s->spec_max = 0;
    if (!HAS_FIELD(r, num_draft_tokens) || !r->has_num_draft_tokens)
        return SY_OK;
    const int32_t n = r->num_draft_tokens;
    if (k <= 0)
        return sy_err_set(err, SY_ERR_INVALID,
                          "num_draft_tokens: this server does not speculate (no [speculative] method), so the field "
                          "must be left out; found %d", n);
    if (n < 0 || n > k)
        return sy_err_set(err, SY_ERR_INVALID,
                          "num_draft_tokens: expected an integer in [0, %d] (the server's [speculative] "
                          "num_draft_tokens; 0: no drafts), found %d", k, n);
    if (n == 0)
        s->spec_off = true;
    else
        s->spec_max = n;
    return SY_OK;
}

/* A seed per request when the client gave none: distinct requests draw differently. */
static uint64_t pick_seed(uint64_t id)
{
    uint64_t x = id * 0x9e3779b97f4a7c15ull ^ (uint64_t)(sy_now() * 1e9);
    x ^= x >> 31;
    return x * 0xbf58476d1ce4e5b9ull;
}

int sy_seq_new(const sy_request *r, sy_engine *e, sy_guide *guide, uint64_t id, sy_seq **out, sy_err *err)
{
    *out = NULL;
    int rc = validate(r, e, err);
    if (rc)
        return rc;
    const int32_t vocab = sy_engine_model_config(e)->vocab;
    const int32_t ctx = sy_engine_max_seq_len(e);
    sy_seq *s = calloc(1, sizeof *s);
    if (!s)
        return sy_err_set(err, SY_ERR_NOMEM, "cannot allocate a request");
    s->id = id;
    s->n_prompt = (int32_t)r->n_prompt;
    s->max_tokens = r->max_tokens < ctx - s->n_prompt ? r->max_tokens : ctx - s->n_prompt;
    s->min_tokens = r->min_tokens < s->max_tokens ? r->min_tokens : s->max_tokens;
    s->top_logprobs = r->top_logprobs;
    s->frequency_penalty = r->frequency_penalty;
    s->presence_penalty = r->presence_penalty;
    s->repetition_penalty = r->repetition_penalty;
    s->ignore_eos = r->ignore_eos != 0;
    s->on_event = r->on_event;
    s->user = r->user;
    s->cap_tokens = s->n_prompt + s->max_tokens;
    s->tokens = malloc(sizeof(int32_t) * (size_t)s->cap_tokens);
    s->cap_blocks = sy_kv_blocks_for(sy_engine_kv(e), s->cap_tokens);
    s->blocks = malloc(sizeof(int32_t) * (size_t)s->cap_blocks);
    s->hashes = malloc(sizeof(uint64_t) * (size_t)s->cap_blocks);
    if (r->n_stop_ids)
        s->stop_ids = malloc(sizeof(int32_t) * r->n_stop_ids);
    if (!s->tokens || !s->blocks || !s->hashes || (r->n_stop_ids && !s->stop_ids))
        goto nomem;
    memcpy(s->tokens, r->prompt_ids, sizeof(int32_t) * r->n_prompt);
    s->n_tokens = s->n_prompt;
    if (r->n_stop_ids)
        memcpy(s->stop_ids, r->stop_ids, sizeof(int32_t) * r->n_stop_ids);
    s->n_stop_ids = r->n_stop_ids;
    if (HAS_FIELD(r, n_logit_bias) && r->n_logit_bias) {
        s->bias_ids = malloc(sizeof(int32_t) * r->n_logit_bias);
        s->bias = malloc(sizeof(float) * r->n_logit_bias);
        if (!s->bias_ids || !s->bias)
            goto nomem;
        memcpy(s->bias_ids, r->logit_bias_ids, sizeof(int32_t) * r->n_logit_bias);
        memcpy(s->bias, r->logit_bias, sizeof(float) * r->n_logit_bias);
        s->n_bias = r->n_logit_bias;
    }
    if (s->frequency_penalty != 0.0f || s->presence_penalty != 0.0f || s->repetition_penalty != 1.0f)
        if (!(s->pen_counts = calloc((size_t)vocab, sizeof(int32_t))))
            goto nomem;

    sy_sampling sp = {.temperature = r->temperature,
                      .top_p = r->top_p,
                      .top_k = r->top_k > vocab ? vocab : r->top_k,
                      .min_p = r->min_p,
                      .seed = r->has_seed ? r->seed : pick_seed(id)};
    if ((rc = sy_sampler_init(&s->sampler, &sp, vocab, err)))
        goto fail;
    const sy_tokenizer *tok = sy_engine_tokenizer(e);
    if (!(s->detok = sy_detok_new_after(tok, s->tokens, (size_t)s->n_prompt, r->skip_special != 0)))
        goto nomem;
    /* A template may open <think> in the prompt itself: then the output starts as reasoning. */
    bool in_think = false;
    if (r->reasoning) {
        char *text = NULL;
        size_t len = 0;
        if (sy_tokenizer_decode(tok, s->tokens, (size_t)s->n_prompt, false, &text, &len, err) == SY_OK)
            in_think = sy_text_ends_in_think(text, len);
        free(text);
    }
    if (sy_text_filter_init(&s->filter, r->stop_strings, r->n_stop_strings, r->reasoning != 0, in_think))
        goto nomem;
    if ((rc = sy_guide_seq_setup(guide, r, s, in_think, sp.seed, err)))
        goto fail;
    s->t_arrival = sy_now();
    *out = s;
    return SY_OK;
nomem:
    rc = sy_err_set(err, SY_ERR_NOMEM, "cannot allocate request state (%d tokens)", s->cap_tokens);
fail:
    sy_seq_free(s);
    return rc;
}

void sy_seq_free(sy_seq *s)
{
    if (!s)
        return;
    free(s->tokens);
    free(s->blocks);
    free(s->hashes);
    free(s->stop_ids);
    free(s->bias_ids);
    free(s->bias);
    free(s->pen_counts);
    sy_guide_seq_free(s);
    sy_sampler_fini(&s->sampler);
    sy_detok_free(s->detok);
    sy_text_filter_fini(&s->filter);
    sy_buf_free(&s->content);
    sy_buf_free(&s->reasoning);
    free(s);
}

int sy_out_ctx_init(sy_out_ctx *o, sy_engine *e, sy_err *err)
{
    memset(o, 0, sizeof *o);
    const sy_model_config *c = sy_engine_model_config(e);
    o->tok = sy_engine_tokenizer(e);
    o->vocab = c->vocab;
    o->max_seq_len = sy_engine_max_seq_len(e);
    const int32_t *tids = NULL;
    size_t nt = sy_tokenizer_eos(o->tok, &tids);
    o->eos = malloc(sizeof(int32_t) * ((size_t)c->n_eos + nt + 1));
    o->work = malloc(sizeof(float) * (size_t)c->vocab);
    o->top_ids = malloc(sizeof(int32_t) * SY_MAX_TOP_LOGPROBS);
    o->top_lps = malloc(sizeof(float) * SY_MAX_TOP_LOGPROBS);
    /* The matcher's vocabulary is the tokenizer's, which may be larger than the model's. */
    const int32_t tv = sy_tokenizer_vocab_size(o->tok);
    o->mask_words = ((size_t)(tv > c->vocab ? tv : c->vocab) + 31) / 32;
    o->mask = malloc(sizeof(uint32_t) * o->mask_words);
    if (!o->eos || !o->work || !o->top_ids || !o->top_lps || !o->mask) {
        sy_out_ctx_fini(o);
        return sy_err_set(err, SY_ERR_NOMEM, "cannot allocate output scratch for vocab %d", c->vocab);
    }
    for (int32_t i = 0; i < c->n_eos; i++)
        o->eos[o->n_eos++] = c->eos_ids[i];
    for (size_t i = 0; i < nt; i++)
        o->eos[o->n_eos++] = tids[i];
    return SY_OK;
}

void sy_out_ctx_fini(sy_out_ctx *o)
{
    free(o->eos);
    free(o->work);
    free(o->top_ids);
    free(o->top_lps);
    free(o->mask);
    memset(o, 0, sizeof *o);
}

static bool in_list(const int32_t *ids, size_t n, int32_t t)
{
    for (size_t i = 0; i < n; i++)
        if (ids[i] == t)
            return true;
    return false;
}

static void base_event(const sy_seq *s, sy_event *ev, int type)
{
    memset(ev, 0, sizeof *ev);
    ev->struct_size = sizeof *ev;
    ev->type = type;
    ev->request_id = s->id;
    ev->text = "";
    ev->reasoning = "";
    ev->prompt_tokens = s->n_prompt;
    ev->completion_tokens = s->n_generated;
    ev->cached_tokens = s->cached_tokens;
}

void sy_seq_emit_done(sy_seq *s, const char *finish_reason)
{
    sy_event ev;
    base_event(s, &ev, SY_EV_DONE);
    ev.finish_reason = finish_reason;
    s->on_event(s->user, &ev);
}

void sy_seq_emit_error(sy_seq *s, int status, const char *msg)
{
    sy_event ev;
    base_event(s, &ev, SY_EV_ERROR);
    ev.error = msg;
    ev.status = status;
    s->on_event(s->user, &ev);
}

/* log-softmax of the raw logits: the chosen token's and the n best, best first (lowest id wins a tie). */
static float logprobs(const float *x, int32_t V, int32_t chosen, int32_t n, int32_t *ids, float *lps)
{
    float mx = x[0];
    for (int32_t i = 1; i < V; i++)
        if (x[i] > mx)
            mx = x[i];
    double sum = 0.0;
    for (int32_t i = 0; i < V; i++)
        sum += exp((double)x[i] - mx);
    const double lse = mx + log(sum);
    int32_t k = 0;
    for (int32_t i = 0; i < V && n > 0; i++) {
        if (k == n && x[i] <= x[ids[k - 1]])
            continue;
        int32_t j = k < n ? k++ : n - 1;
        while (j > 0 && x[ids[j - 1]] < x[i]) {
            ids[j] = ids[j - 1];
            j--;
        }
        ids[j] = i;
    }
    for (int32_t j = 0; j < k; j++)
        lps[j] = (float)((double)x[ids[j]] - lse);
    return (float)((double)x[chosen] - lse);
}

static int on_token(sy_seq *s, sy_out_ctx *o, int32_t tok, const float *logits, sy_err *err);

/* Nothing but the sampler acts on the model's logits. */
static bool plain_draw(const sy_seq *s)
{
    return !s->pen_counts && !s->n_bias && !s->matcher && s->top_logprobs < 0 && s->n_generated >= s->min_tokens;
}

bool sy_seq_greedy_only(const sy_seq *s) { return s->sampler.p.temperature <= 0.0f && plain_draw(s); }

bool sy_seq_sample_only(const sy_seq *s) { return s->sampler.p.temperature > 0.0f && plain_draw(s); }

int sy_seq_on_pick(sy_seq *s, sy_out_ctx *o, int32_t tok, sy_err *err)
{
    if (tok < 0 || tok >= o->vocab)
        return sy_err_set(err, SY_ERR_INTERNAL, "the engine picked token %d, outside the vocabulary [0, %d)", tok,
                          o->vocab);
    return on_token(s, o, tok, NULL, err);
}

/* The distribution the next token is drawn from: logits, or o->work after the request's rules changed them. */
static int rule_logits(sy_seq *s, sy_out_ctx *o, const float *logits, const float **out, sy_err *err)
{
    const int32_t V = o->vocab;
    /* The constraint, logit_bias, penalties and min_tokens act on a copy: logprobs report the model's own
     * distribution. */
    const float *dist = logits;
    const bool early = s->n_generated < s->min_tokens;
    const bool masked = sy_guide_masks(s);
    if (s->pen_counts || early || s->n_bias || masked) {
        memcpy(o->work, logits, sizeof(float) * (size_t)V);
        int rc;
        if (masked && (rc = sy_guide_apply_mask(s, o, o->work, err)))
            return rc;
        for (size_t i = 0; i < s->n_bias; i++)
            o->work[s->bias_ids[i]] += s->bias[i];
        if (s->pen_counts)
            sy_apply_penalties(o->work, s->pen_counts, s->tokens + s->n_prompt, s->n_generated,
                               s->frequency_penalty, s->presence_penalty, s->repetition_penalty);
        /* Before min_tokens nothing may end the request, unless the constraint allows nothing else. */
        if (early && !(masked && sy_gmatcher_done(s->matcher))) {
            if (!s->ignore_eos)
                for (size_t i = 0; i < o->n_eos; i++)
                    o->work[o->eos[i]] = -INFINITY;
            for (size_t i = 0; i < s->n_stop_ids; i++)
                o->work[s->stop_ids[i]] = -INFINITY;
        }
        dist = o->work;
    }
    *out = dist;
    return SY_OK;
}

int sy_seq_on_logits(sy_seq *s, sy_out_ctx *o, const float *logits, sy_err *err)
{
    const float *dist = NULL;
    int rc = rule_logits(s, o, logits, &dist, err);
    return rc ? rc : on_token(s, o, sy_sampler_next(&s->sampler, dist), logits, err);
}

int sy_seq_on_verify(sy_seq *s, sy_out_ctx *o, const float *logits, int32_t draft, bool *accepted, sy_err *err)
{
    *accepted = false;
    if (draft < 0)
        return sy_seq_on_logits(s, o, logits, err);
    const float *dist = NULL;
    int rc = rule_logits(s, o, logits, &dist, err);
    if (rc)
        return rc;
    const int32_t tok = o->verify ? o->verify(&s->sampler, dist, draft, accepted)
                                  : sy_sampler_verify(&s->sampler, dist, draft, accepted);
    return on_token(s, o, tok, logits, err);
}

/* Hands the filtered text to the tool parser (its content comes back in s->tout). */
static int route_content(sy_seq *s, bool final, sy_err *err)
{
    int rc = sy_guide_route(s, s->content.p, s->content.len, false, final, err);
    s->content.len = 0;
    return rc;
}

/* Appends tok and emits its events; logits (for logprobs) may be NULL when none are asked for. */
static int on_token(sy_seq *s, sy_out_ctx *o, int32_t tok, const float *logits, sy_err *err)
{
    const int32_t V = o->vocab;
    s->tokens[s->n_tokens++] = tok;
    s->n_generated++;

    sy_event ev;
    base_event(s, &ev, SY_EV_TEXT);
    float lp = 0.0f;
    if (s->top_logprobs >= 0 && logits) {
        lp = logprobs(logits, V, tok, s->top_logprobs, o->top_ids, o->top_lps);
        ev.logprobs = &lp;
        ev.top_ids = o->top_ids;
        ev.top_logprobs = o->top_lps;
        ev.n_top = s->top_logprobs;
    }
    ev.tokens = &s->tokens[s->n_tokens - 1];
    ev.n_tokens = 1;

    const char *finish = NULL;
    s->content.len = s->reasoning.len = 0;
    if (s->tparser)
        sy_tool_out_reset(&s->tout);
    int rc = 0;
    bool done = false;
    const bool check = s->n_generated >= s->min_tokens;
    /* A constrained request ends where its grammar lets EOS in, ignore_eos or not. */
    const bool eos = in_list(o->eos, o->n_eos, tok) && (!s->ignore_eos || sy_guide_masks(s));
    const bool marker = sy_guide_is_marker(s, tok);
    if (eos || in_list(s->stop_ids, s->n_stop_ids, tok)) {
        finish = "stop"; /* the stop token's own text is not part of the output */
    } else if (marker) {
        /* A markup token reaches the parser whole and as itself (skip_special or not), after the text the
         * filter still holds. */
        const char *t = sy_tokenizer_piece(o->tok, tok);
        const size_t tl = t ? strlen(t) : 0;
        rc = sy_text_filter_push(&s->filter, "", 0, check, true, &s->content, &s->reasoning);
        if (rc < 0)
            return sy_err_set(err, SY_ERR_NOMEM, "out of memory in the output filter");
        if (rc == 1)
            finish = "stop";
        else if ((rc = route_content(s, false, err)) || (rc = sy_guide_route(s, t, tl, true, false, err)) ||
                 (rc = sy_guide_accept(s, tok, t, tl, &done, err)))
            return rc;
    } else {
        const char *piece = NULL;
        size_t len = 0;
        if ((rc = sy_detok_push(s->detok, tok, &piece, &len, err)))
            return rc;
        if (s->matcher) {
            /* The wait for </think> reads the token's own bytes, which skip_special leaves out of the piece. */
            const char *t = sy_tokenizer_is_special(o->tok, tok) ? sy_tokenizer_piece(o->tok, tok) : piece;
            const size_t tl = t == piece ? len : t ? strlen(t) : 0;
            if ((rc = sy_guide_accept(s, tok, t, tl, &done, err)))
                return rc;
        }
        rc = sy_text_filter_push(&s->filter, piece, len, check, false, &s->content, &s->reasoning);
        if (rc < 0)
            return sy_err_set(err, SY_ERR_NOMEM, "out of memory in the output filter");
        if (rc == 1)
            finish = "stop";
    }
    if (!finish && done)
        finish = "stop"; /* the constraint is complete */
    if (!finish && (s->n_generated >= s->max_tokens || s->n_tokens >= o->max_seq_len))
        finish = "length";
    if (finish && !s->filter.stopped) {
        /* Flush what the detokeniser and the filter held back. */
        const char *piece = NULL;
        size_t len = 0;
        if ((rc = sy_detok_finish(s->detok, &piece, &len, err)))
            return rc;
        if (sy_text_filter_push(&s->filter, piece, len, check, true, &s->content, &s->reasoning) < 0)
            return sy_err_set(err, SY_ERR_NOMEM, "out of memory in the output filter");
    }
    if (s->tparser) {
        if (eos && marker) { /* an end token that is also markup (harmony's <|call|>) closes the call */
            const char *t = sy_tokenizer_piece(o->tok, tok);
            if ((rc = route_content(s, false, err)) || (rc = sy_guide_route(s, t, t ? strlen(t) : 0, true, false, err)))
                return rc;
        }
        if ((rc = route_content(s, finish != NULL, err)))
            return rc;
        if (sy_buf_append(&s->content, s->tout.content.p, s->tout.content.len) ||
            sy_buf_append(&s->reasoning, s->tout.reasoning.p, s->tout.reasoning.len))
            return sy_err_set(err, SY_ERR_NOMEM, "out of memory in the output filter");
        ev.tool_calls = s->tout.deltas;
        ev.n_tool_calls = s->tout.n_deltas;
        if (finish && strcmp(finish, "stop") == 0 && sy_tool_parser_calls(s->tparser) > 0)
            finish = "tool_calls";
    }
    ev.text = s->content.len ? s->content.p : "";
    ev.text_len = s->content.len;
    ev.reasoning = s->reasoning.len ? s->reasoning.p : "";
    ev.reasoning_len = s->reasoning.len;
    ev.completion_tokens = s->n_generated;
    s->on_event(s->user, &ev);
    if (finish) {
        sy_seq_emit_done(s, finish);
        return 1;
    }
    return 0;
}
