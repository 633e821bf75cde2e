/*
 * frontend/http: POST /v1/chat/completions and /v1/completions. Checks
 * every field before anything is submitted, so a bad request gets its 4xx
 * (with the JSON path of the offending field in "param") before the first
 * byte of an answer; then renders the prompt, fills sy_request and submits
 * n requests (seed + i) as one job (http_job.c). Fields the server does not
 * implement are refused, never dropped (http_openai_fields.c).
 */
#include "config.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_openai.h"

void oai_bad_code(oai_req *r, const char *param, const char *code, const char *fmt, const char *arg)
{
    if (r->failed)
        return;
    r->failed = 1;
    http_respond_error(r->st, 400, "invalid_request_error", param, code, fmt, arg ? arg : param);
}

void oai_bad(oai_req *r, const char *param, const char *fmt, const char *arg)
{
    oai_bad_code(r, param, NULL, fmt, arg);
}

void oai_path(char *out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out, OAI_PATH, fmt, ap);
    va_end(ap);
}

json_t *oai_field(oai_req *r, const char *key)
{
    json_t *v = json_object_get(r->root, key);
    return json_is_null(v) ? NULL : v;
}

void oai_check_keys(oai_req *r, json_t *obj, const char *path, const char *const *allowed)
{
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        size_t i = 0;
        while (allowed[i] && strcmp(allowed[i], key) != 0)
            i++;
        if (allowed[i])
            continue;
        char p[OAI_PATH];
        snprintf(p, sizeof p, "%s%s%.64s", path, path[0] ? "." : "", key);
        oai_bad_code(r, p, "unknown_parameter", "unknown field '%s'", p);
        return;
    }
}

int oai_valid_name(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n > 64)
        return 0;
    for (const char *c = s; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_' ||
              *c == '-'))
            return 0;
    return 1;
}

static void get_bool(oai_req *r, const char *key, int *out)
{
    json_t *v = oai_field(r, key);
    if (!v || r->failed)
        return;
    if (!json_is_boolean(v)) {
        oai_bad(r, key, "'%s' must be a boolean", NULL);
        return;
    }
    *out = json_is_true(v);
}

static void get_num(oai_req *r, const char *key, double lo, double hi, int lo_open, float *out)
{
    json_t *v = oai_field(r, key);
    if (!v || r->failed)
        return;
    if (!json_is_number(v)) {
        oai_bad(r, key, "'%s' must be a number", NULL);
        return;
    }
    double d = json_number_value(v);
    if (!isfinite(d) || d < lo || d > hi || (lo_open && d == lo)) {
        char msg[160];
        snprintf(msg, sizeof msg, "'%%s' must be in %s%g, %g], found %g", lo_open ? "(" : "[", lo, hi, d);
        oai_bad(r, key, msg, NULL);
        return;
    }
    *out = (float)d;
}

static void get_int(oai_req *r, const char *key, long long lo, long long hi, long long *out)
{
    json_t *v = oai_field(r, key);
    if (!v || r->failed)
        return;
    if (!json_is_integer(v)) {
        oai_bad(r, key, "'%s' must be an integer", NULL);
        return;
    }
    long long x = json_integer_value(v);
    if (x < lo || x > hi) {
        char msg[160];
        snprintf(msg, sizeof msg, "'%%s' must be in [%lld, %lld], found %lld", lo, hi, x);
        oai_bad(r, key, msg, NULL);
        return;
    }
    *out = x;
}

static void parse_stop(oai_req *r)
{
    json_t *v = oai_field(r, "stop");
    if (v && json_is_string(v)) {
        r->stops[0] = json_string_value(v);
        r->req.n_stop_strings = json_string_length(v) ? 1 : 0;
    } else if (v && json_is_array(v)) {
        if (json_array_size(v) > OAI_MAX_STOP) {
            oai_bad(r, "stop", "'%s' takes at most 16 strings", NULL);
            return;
        }
        for (size_t i = 0; i < json_array_size(v); i++) {
            json_t *s = json_array_get(v, i);
            if (!json_is_string(s)) {
                char p[32];
                snprintf(p, sizeof p, "stop[%zu]", i);
                oai_bad(r, p, "'%s' must be a string", p);
                return;
            }
            if (json_string_length(s))
                r->stops[r->req.n_stop_strings++] = json_string_value(s);
        }
    } else if (v) {
        oai_bad(r, "stop", "'%s' must be a string or a list of strings", NULL);
        return;
    }
    r->req.stop_strings = r->stops;
    json_t *ids = oai_field(r, "stop_token_ids");
    if (!ids || r->failed)
        return;
    if (!json_is_array(ids)) {
        oai_bad(r, "stop_token_ids", "'%s' must be a list of token ids", NULL);
        return;
    }
    size_t n = json_array_size(ids);
    r->stop_ids = calloc(n ? n : 1, sizeof(int32_t));
    for (size_t i = 0; r->stop_ids && i < n; i++) {
        json_t *t = json_array_get(ids, i);
        if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) > INT32_MAX) {
            char p[48];
            snprintf(p, sizeof p, "stop_token_ids[%zu]", i);
            oai_bad(r, p, "'%s' must be a token id", p);
            return;
        }
        r->stop_ids[i] = (int32_t)json_integer_value(t);
    }
    r->req.stop_ids = r->stop_ids;
    r->req.n_stop_ids = n;
}

static int tokenize(oai_req *r, const char *text, size_t len, int add_special, const char *param)
{
    http_server *s = r->st->conn->loop->srv;
    sy_err err = {{0}};
    int rc = s->api->tokenize(s->host->ctx, text, len, add_special, &r->prompt, &r->n_prompt, &err);
    if (rc != SY_OK) {
        r->failed = 1;
        http_respond_error(r->st, rc == SY_ERR_INVALID ? 400 : 500,
                           rc == SY_ERR_INVALID ? "invalid_request_error" : "server_error", param, NULL,
                           "tokenize: %s", err.msg);
        return -1;
    }
    r->prompt_alloc_host = 1;
    return 0;
}

static void build_chat_prompt(oai_req *r)
{
    http_server *s = r->st->conn->loop->srv;
    json_t *msgs = oai_field(r, "messages");
    oai_check_messages(r, msgs);
    json_t *tools = r->tools, *kw = oai_field(r, "chat_template_kwargs");
    if (!r->failed && kw && !json_is_object(kw))
        oai_bad(r, "chat_template_kwargs", "'%s' must be an object", NULL);
    int add_gen = 1;
    get_bool(r, "add_generation_prompt", &add_gen);
    if (r->failed)
        return;
    char *mj = json_dumps(msgs, JSON_COMPACT), *tj = tools ? json_dumps(tools, JSON_COMPACT) : NULL;
    char *kj = kw ? json_dumps(kw, JSON_COMPACT) : NULL;
    char *text = NULL;
    size_t len = 0;
    sy_err err = {{0}};
    int rc = mj ? s->api->apply_chat_template(s->host->ctx, mj, tj, add_gen, kj, &text, &len, &err) : SY_ERR_NOMEM;
    free(mj);
    free(tj);
    free(kj);
    if (rc != SY_OK) {
        r->failed = 1;
        http_respond_error(r->st, rc == SY_ERR_INVALID ? 400 : 500,
                           rc == SY_ERR_INVALID ? "invalid_request_error" : "server_error", "messages", NULL,
                           "chat template: %s", err.msg);
        return;
    }
    /* The template writes its own special tokens (BOS and the like). */
    tokenize(r, text, len, 0, "messages");
    s->host->free(s->host->ctx, text);
}

static void build_completion_prompt(oai_req *r)
{
    json_t *p = oai_field(r, "prompt");
    if (!p) {
        oai_bad(r, "prompt", "'%s' is required", NULL);
        return;
    }
    if (json_is_array(p) && json_array_size(p) == 1 && json_is_string(json_array_get(p, 0)))
        p = json_array_get(p, 0);
    if (json_is_string(p)) {
        tokenize(r, json_string_value(p), json_string_length(p), 1, "prompt");
        return;
    }
    if (!json_is_array(p) || !json_array_size(p)) {
        oai_bad(r, "prompt", "'%s' must be a string or a non-empty list of token ids", NULL);
        return;
    }
    size_t n = json_array_size(p);
    r->prompt = calloc(n, sizeof(int32_t));
    if (!r->prompt) {
        r->failed = 1;
        http_respond_error(r->st, 500, "server_error", NULL, NULL, "out of memory");
        return;
    }
    r->n_prompt = n;
    for (size_t i = 0; i < n; i++) {
        json_t *t = json_array_get(p, i);
        if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) > INT32_MAX) {
            char param[48];
            snprintf(param, sizeof param, "prompt[%zu]", i);
            oai_bad(r, param, json_is_string(t) ? "'%s': only one prompt per request is supported"
                                                : "'%s' must be a token id", param);
            return;
        }
        r->prompt[i] = (int32_t)json_integer_value(t);
    }
}

/* The type here; the range (0 up to the server's [speculative] num_draft_tokens, or no value at all when the
 * server does not speculate) in the host, which knows the configuration and answers a 400 naming the field. */
static void parse_num_draft_tokens(oai_req *r)
{
    json_t *v = oai_field(r, "num_draft_tokens");
    if (!v || r->failed)
        return;
    if (!json_is_integer(v) || json_integer_value(v) < INT32_MIN || json_integer_value(v) > INT32_MAX) {
        char msg[160];
        snprintf(msg, sizeof msg, "'%%s' must be an integer (0: no drafts; 1..k: at most that many per step), "
                                  "found %s", json_is_integer(v) ? "an integer out of range" : http_json_type(v));
        oai_bad(r, "num_draft_tokens", msg, NULL);
        return;
    }
    r->req.has_num_draft_tokens = 1;
    r->req.num_draft_tokens = (int32_t)json_integer_value(v);
}

static void parse_fields(oai_req *r, const sy_model_info *mi)
{
    long long v;
    sy_request *q = &r->req;
    get_bool(r, "stream", &r->streaming);
    json_t *so = oai_field(r, "stream_options");
    if (so && !r->failed) {
        json_t *iu = json_object_get(so, "include_usage");
        static const char *const keys[] = {"include_usage", "include_obfuscation", NULL};
        json_t *ob = json_object_get(so, "include_obfuscation");
        if (!json_is_object(so))
            oai_bad(r, "stream_options", "'%s' must be an object", NULL);
        oai_check_keys(r, so, "stream_options", keys);
        if (iu && !json_is_null(iu) && !json_is_boolean(iu))
            oai_bad(r, "stream_options.include_usage", "'%s' must be a boolean", NULL);
        if (ob && !json_is_null(ob) && !json_is_boolean(ob))
            oai_bad(r, "stream_options.include_obfuscation", "'%s' must be a boolean", NULL);
        if (json_is_true(ob)) /* a promise of padding fields this server does not write */
            oai_bad_code(r, "stream_options.include_obfuscation", "unsupported_value",
                         "'%s': true is not supported (chunks carry no obfuscation padding)", NULL);
        r->include_usage = json_is_true(iu);
    }
    v = 1;
    get_int(r, "n", 1, OAI_MAX_N, &v);
    r->n = (int)v;
    long long ctx = mi->max_seq_len > 0 ? mi->max_seq_len : INT32_MAX;
    v = -1;
    get_int(r, "max_tokens", 1, ctx, &v);
    get_int(r, "max_completion_tokens", 1, ctx, &v);
    q->max_tokens = (int32_t)(v > 0 ? v : 0);
    v = 0;
    get_int(r, "min_tokens", 0, ctx, &v);
    q->min_tokens = (int32_t)v;
    q->temperature = 1.0f;
    get_num(r, "temperature", 0, 2, 0, &q->temperature);
    q->top_p = 1.0f;
    get_num(r, "top_p", 0, 1, 1, &q->top_p);
    v = 0;
    get_int(r, "top_k", -1, 1 << 20, &v);
    q->top_k = (int32_t)(v < 0 ? 0 : v);
    get_num(r, "min_p", 0, 1, 0, &q->min_p);
    get_num(r, "frequency_penalty", -2, 2, 0, &q->frequency_penalty);
    get_num(r, "presence_penalty", -2, 2, 0, &q->presence_penalty);
    q->repetition_penalty = 1.0f;
    get_num(r, "repetition_penalty", 0, 10, 1, &q->repetition_penalty);
    json_t *seed = oai_field(r, "seed");
    if (seed && !r->failed) {
        if (!json_is_integer(seed))
            oai_bad(r, "seed", "'%s' must be an integer", NULL);
        q->seed = (uint64_t)json_integer_value(seed);
        q->has_seed = 1;
    }
    parse_num_draft_tokens(r);
    int b = 0;
    get_bool(r, "ignore_eos", &b);
    q->ignore_eos = b;
    b = 1;
    get_bool(r, "skip_special_tokens", &b);
    q->skip_special = b;
    q->top_logprobs = -1;
    json_t *lp = oai_field(r, "logprobs");
    if (r->chat) {
        int want = 0;
        get_bool(r, "logprobs", &want);
        v = 0;
        get_int(r, "top_logprobs", 0, 20, &v);
        if (!r->failed && oai_field(r, "top_logprobs") && !want)
            oai_bad(r, "top_logprobs", "'%s' needs \"logprobs\": true", NULL);
        if (want)
            q->top_logprobs = (int32_t)v;
    } else if (lp) {
        v = 0;
        get_int(r, "logprobs", 0, 20, &v);
        q->top_logprobs = (int32_t)v;
    }
    json_t *echo = oai_field(r, "echo");
    if (!r->failed && echo && json_is_true(echo))
        oai_bad_code(r, "echo", "unsupported_value", "'%s': true is not supported (the prompt is not returned)", NULL);
    if (!r->failed)
        parse_stop(r);
    if (r->chat)
        q->reasoning = 1;
}

static const http_api_errors oai_errors = {
    .not_ready_type = "server_error",
    .not_ready_code = "not_ready",
    .busy_status = 429,
    .busy_type = "rate_limit_error",
    .busy_code = "queue_full",
    .server_type = "server_error",
    .invalid_param = 1,
};

static int submit_all(oai_req *r, http_job *job)
{
    http_server *s = r->st->conn->loop->srv;
    for (int i = 0; i < r->n; i++) {
        http_choice *ch = &job->ch[i];
        sy_request q = r->req;
        if (q.has_seed)
            q.seed += (uint64_t)i;
        q.on_event = http_job_on_event;
        q.user = ch;
        sy_err err = {{0}};
        int rc = s->api->submit(s->host->ctx, &q, &ch->rid, &err);
        if (rc == SY_OK) {
            ch->submitted = 1;
            if (job->live++ == 0)
                job->loop->live_jobs++;
            continue;
        }
        http_job_cancel_all(job);
        http_respond_submit_error(r->st, rc, &err, &oai_errors);
        http_job_detach(job);
        return -1;
    }
    return 0;
}

void http_openai_handle(http_stream *st, int chat)
{
    http_server *s = st->conn->loop->srv;
    oai_req r;
    memset(&r, 0, sizeof r);
    r.st = st;
    r.chat = chat;
    r.req.struct_size = sizeof r.req;
    r.root = http_ready_body(st, &oai_errors);
    if (!r.root)
        return;
    sy_model_info mi;
    const char *model = http_model_name(s, &mi);
    json_t *m = oai_field(&r, "model");
    if (m && !json_is_string(m)) {
        oai_bad(&r, "model", "'%s' must be a string", NULL);
    } else if (m && json_string_length(m) && strcmp(json_string_value(m), model) != 0 &&
               !(mi.id && strcmp(json_string_value(m), mi.id) == 0)) {
        r.failed = 1;
        http_respond_error(st, 404, "invalid_request_error", "model", "model_not_found",
                           "the model '%s' does not exist (this server serves '%s')", json_string_value(m), model);
    }
    r.vocab = mi.vocab;
    if (!r.failed)
        oai_check_fields(&r);
    if (!r.failed)
        parse_fields(&r, &mi);
    if (!r.failed)
        oai_parse_logit_bias(&r);
    if (!r.failed)
        oai_parse_constraint(&r);
    if (!r.failed)
        oai_parse_tools(&r);
    if (!r.failed) {
        if (chat)
            build_chat_prompt(&r);
        else
            build_completion_prompt(&r);
    }
    if (!r.failed && mi.max_seq_len > 0 && r.n_prompt >= (size_t)mi.max_seq_len) {
        r.failed = 1;
        http_respond_error(st, 400, "invalid_request_error", chat ? "messages" : "prompt", "context_length_exceeded",
                           "the prompt is %zu tokens, but the model's context is %d tokens", r.n_prompt,
                           mi.max_seq_len);
    }
    if (!r.failed && mi.max_seq_len > 0 && r.req.max_tokens > 0 &&
        r.n_prompt + (size_t)r.req.max_tokens > (size_t)mi.max_seq_len) {
        r.failed = 1;
        http_respond_error(st, 400, "invalid_request_error", chat ? "max_completion_tokens" : "max_tokens",
                           "context_length_exceeded",
                           "max_tokens %d plus the prompt's %zu tokens is over the model's context of %d tokens",
                           r.req.max_tokens, r.n_prompt, mi.max_seq_len);
    }
    if (!r.failed) {
        if (r.req.max_tokens <= 0) /* default: the rest of the context */
            r.req.max_tokens = mi.max_seq_len > 0 ? (int32_t)(mi.max_seq_len - (int32_t)r.n_prompt) : 256;
        r.req.prompt_ids = r.prompt;
        r.req.n_prompt = r.n_prompt;
        http_job *job = http_job_new(st, chat ? JOB_CHAT : JOB_COMPLETION, r.n);
        if (!job) {
            http_respond_error(st, 503, "server_error", NULL, NULL, "out of memory");
        } else {
            job->streaming = r.streaming;
            job->include_usage = r.include_usage;
            job->top_logprobs = r.req.top_logprobs;
            job->prompt_tokens = (int)r.n_prompt;
            job->created = (int64_t)time(NULL);
            job->model = strdup(model);
            snprintf(job->id, sizeof job->id, "%s-%lx%02x%06lx", chat ? "chatcmpl" : "cmpl", (unsigned long)job->created,
                     (unsigned)job->loop->index, ++job->loop->seq);
            submit_all(&r, job);
        }
    }
    if (r.prompt_alloc_host)
        s->host->free(s->host->ctx, r.prompt);
    else
        free(r.prompt);
    free(r.stop_ids);
    free(r.bias_ids);
    free(r.bias);
    free(r.constraint);
    free(r.tools_json);
    json_decref(r.root);
}
