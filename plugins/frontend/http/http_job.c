/*
 * frontend/http: a submitted generation (n requests in the engine) and
 * what its events become: SSE chunks while streaming, one JSON answer
 * otherwise, in the chat or the completions format.
 *
 * The engine thread only runs http_job_on_event: it copies the event into
 * one allocation, appends it to the loop's queue under the mutex and
 * writes the eventfd when the queue was empty (one wake-up for a burst).
 * Everything else runs on the loop thread.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "http.h"

struct http_evitem {
    http_evitem *next; /* first: loop_free walks the list through it */
    http_choice *ch;
    int type;
    char *text;
    size_t text_len;
    char *reasoning;
    size_t reasoning_len;
    int32_t *tokens;
    float *logprobs;
    size_t n_tokens;
    int32_t *top_ids;
    float *top_lp;
    int n_top;
    char finish[16];
    int prompt_tokens, completion_tokens, cached_tokens;
    char *error;
    int status;
    sy_tool_call_delta *tool_calls; /* ABI 1.2: deep copies (id, name, arguments in the same allocation) */
    size_t n_tool_calls;
};

/* The event's tool-call pieces, when its struct_size covers them (an ABI 1.1 host has none). */
static size_t event_tool_calls(const sy_event *ev, size_t *bytes)
{
    *bytes = 0;
    if (ev->struct_size < offsetof(sy_event, n_tool_calls) + sizeof ev->n_tool_calls || !ev->tool_calls)
        return 0;
    for (size_t i = 0; i < ev->n_tool_calls; i++) {
        const sy_tool_call_delta *d = &ev->tool_calls[i];
        *bytes += (d->id ? strlen(d->id) + 1 : 0) + (d->name ? strlen(d->name) + 1 : 0) + d->arguments_len + 1;
    }
    return ev->n_tool_calls;
}

static char *copy_str(char **p, const char *s, size_t n)
{
    char *out = *p;
    if (n)
        memcpy(out, s, n);
    out[n] = '\0';
    *p += n + 1;
    return out;
}

static size_t align8(size_t n) { return (n + 7) & ~(size_t)7; }

void http_job_on_event(void *user, const sy_event *ev)
{
    http_choice *ch = user;
    http_loop *l = ch->job->loop;
    size_t ntop = ev->n_top > 0 && ev->top_ids ? (size_t)ev->n_top * ev->n_tokens : 0;
    size_t err_len = ev->type == SY_EV_ERROR && ev->error ? strlen(ev->error) : 0;
    size_t tc_bytes, n_tc = event_tool_calls(ev, &tc_bytes);
    size_t sz = align8(sizeof(http_evitem)) + align8(ev->text_len + 1) + align8(ev->reasoning_len + 1) +
                align8(ev->n_tokens * sizeof(int32_t)) + align8(ev->n_tokens * sizeof(float)) +
                align8(ntop * sizeof(int32_t)) + align8(ntop * sizeof(float)) +
                align8(n_tc * sizeof(sy_tool_call_delta)) + tc_bytes + err_len + 1;
    char *mem = calloc(1, sz);
    if (!mem)
        return; /* the final event is tiny; losing a text event loses text, never the request */
    http_evitem *it = (http_evitem *)mem;
    char *p = mem + align8(sizeof *it);
    it->ch = ch;
    it->type = ev->type;
    it->text = p;
    if (ev->text_len)
        memcpy(p, ev->text, ev->text_len);
    it->text_len = ev->text_len;
    p += align8(ev->text_len + 1);
    it->reasoning = p;
    if (ev->reasoning_len)
        memcpy(p, ev->reasoning, ev->reasoning_len);
    it->reasoning_len = ev->reasoning_len;
    p += align8(ev->reasoning_len + 1);
    it->n_tokens = ev->n_tokens;
    it->tokens = (int32_t *)p;
    if (ev->n_tokens && ev->tokens)
        memcpy(p, ev->tokens, ev->n_tokens * sizeof(int32_t));
    p += align8(ev->n_tokens * sizeof(int32_t));
    it->logprobs = NULL;
    if (ev->logprobs) {
        it->logprobs = (float *)p;
        memcpy(p, ev->logprobs, ev->n_tokens * sizeof(float));
    }
    p += align8(ev->n_tokens * sizeof(float));
    if (ntop) {
        it->n_top = ev->n_top;
        it->top_ids = (int32_t *)p;
        memcpy(p, ev->top_ids, ntop * sizeof(int32_t));
        p += align8(ntop * sizeof(int32_t));
        it->top_lp = (float *)p;
        if (ev->top_logprobs)
            memcpy(p, ev->top_logprobs, ntop * sizeof(float));
        p += align8(ntop * sizeof(float));
    } else {
        p += align8(0) * 2;
    }
    if (n_tc) {
        it->tool_calls = (sy_tool_call_delta *)p;
        it->n_tool_calls = n_tc;
        p += align8(n_tc * sizeof(sy_tool_call_delta));
        for (size_t i = 0; i < n_tc; i++) {
            const sy_tool_call_delta *d = &ev->tool_calls[i];
            sy_tool_call_delta *c = &it->tool_calls[i];
            c->index = d->index;
            c->id = d->id ? copy_str(&p, d->id, strlen(d->id)) : NULL;
            c->name = d->name ? copy_str(&p, d->name, strlen(d->name)) : NULL;
            c->arguments_len = d->arguments ? d->arguments_len : 0;
            c->arguments = copy_str(&p, d->arguments ? d->arguments : "", d->arguments ? d->arguments_len : 0);
        }
    }
    it->error = p;
    if (err_len)
        memcpy(p, ev->error, err_len);
    if (ev->finish_reason)
        snprintf(it->finish, sizeof it->finish, "%s", ev->finish_reason);
    it->prompt_tokens = ev->prompt_tokens;
    it->completion_tokens = ev->completion_tokens;
    it->cached_tokens = ev->cached_tokens;
    it->status = ev->status;

    pthread_mutex_lock(&l->qlock);
    if (l->qtail)
        l->qtail->next = it;
    else
        l->qhead = it;
    l->qtail = it;
    int wake = !l->qsignalled;
    l->qsignalled = 1;
    pthread_mutex_unlock(&l->qlock);
    if (wake) {
        uint64_t one = 1;
        if (write(l->evfd, &one, sizeof one) < 0) {
            /* the counter cannot overflow in practice; a failed write still leaves it readable */
        }
    }
}

http_job *http_job_new(http_stream *st, int kind, int n)
{
    http_job *job = calloc(1, sizeof *job);
    if (!job)
        return NULL;
    job->ch = calloc((size_t)n, sizeof *job->ch);
    if (!job->ch) {
        free(job);
        return NULL;
    }
    job->loop = st->conn->loop;
    job->srv = st->conn->loop->srv;
    job->stream = st;
    job->kind = kind;
    job->n = n;
    job->top_logprobs = -1;
    for (int i = 0; i < n; i++) {
        job->ch[i].job = job;
        job->ch[i].index = i;
    }
    st->job = job;
    return job;
}

void http_job_free(http_job *job)
{
    if (!job)
        return;
    for (int i = 0; i < job->n; i++) {
        hbuf_free(&job->ch[i].text);
        hbuf_free(&job->ch[i].reasoning);
        json_decref(job->ch[i].logprobs);
        json_decref(job->ch[i].tool_calls);
        free(job->ch[i].tool_sent);
    }
    free(job->ch);
    free(job->model);
    http_anthropic_free(job->anth);
    free(job);
}

void http_job_cancel_all(http_job *job)
{
    for (int i = 0; i < job->n; i++) {
        http_choice *ch = &job->ch[i];
        if (ch->submitted && !ch->finished && !ch->cancelled) {
            ch->cancelled = 1;
            job->srv->api->cancel(job->srv->host->ctx, ch->rid);
        }
    }
}

void http_job_detach(http_job *job)
{
    if (job->stream)
        job->stream->job = NULL;
    job->stream = NULL;
    if (job->live == 0) {
        http_job_free(job);
        return;
    }
    http_job_cancel_all(job);
}

/* The length of the longest prefix of s made of whole, valid UTF-8 characters. */
static size_t utf8_whole(const char *s, size_t n)
{
    size_t i = 0, ok = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        size_t len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
        if (!len || i + len > n)
            break;
        size_t k = 1;
        while (k < len && ((unsigned char)s[i + k] & 0xc0) == 0x80)
            k++;
        if (k < len)
            break;
        i += len;
        ok = i;
    }
    return ok;
}

int http_choice_tool_piece(http_choice *ch, const sy_tool_call_delta *p, int *opened, const char **ready,
                           size_t *ready_len)
{
    *opened = 0;
    *ready = "";
    *ready_len = 0;
    if (!ch->tool_calls && !(ch->tool_calls = json_array()))
        return -1;
    size_t n = json_array_size(ch->tool_calls);
    /* The host numbers a request's calls 0, 1, ...: a piece names a call
     * already open unless it brings an id or a name (a new call's first
     * piece) or an index past the open ones. */
    size_t at = p->index >= 0 && (size_t)p->index < n && !p->id && !p->name ? (size_t)p->index : n;
    if (at == n) {
        char gen[96];
        if (!p->id) /* a host that gave none: still unique within the answer */
            snprintf(gen, sizeof gen, "call_%s_%d_%zu", ch->job->id, ch->index, n);
        json_t *call = json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", p->id ? p->id : gen, "type", "function", "function",
                                 "name", p->name ? p->name : "", "arguments", "");
        size_t *sent = realloc(ch->tool_sent, (n + 1) * sizeof *sent);
        if (!sent)
            return -1;
        ch->tool_sent = sent;
        sent[n] = 0;
        if (!call || json_array_append_new(ch->tool_calls, call) != 0)
            return -1;
        *opened = 1;
    }
    json_t *args = json_object_get(json_object_get(json_array_get(ch->tool_calls, at), "function"), "arguments");
    if (p->arguments_len) {
        size_t old = json_string_length(args);
        char *joined = malloc(old + p->arguments_len);
        if (!joined)
            return -1;
        memcpy(joined, json_string_value(args), old);
        memcpy(joined + old, p->arguments, p->arguments_len);
        /* a piece may end inside a UTF-8 character: keep the bytes, JSON-encode when whole */
        int rc = json_string_setn_nocheck(args, joined, old + p->arguments_len);
        free(joined);
        if (rc != 0)
            return -1;
    }
    const char *all = json_string_value(args);
    size_t from = ch->tool_sent[at], whole = utf8_whole(all + from, json_string_length(args) - from);
    *ready = all + from;
    *ready_len = whole;
    ch->tool_sent[at] = from + whole;
    return (int)at;
}

/* ------------------------------------------------------------ JSON bits */

static json_t *token_json(http_server *s, int32_t id, char **str_out)
{
    char *text = NULL;
    size_t len = 0;
    sy_err err;
    if (s->api->detokenize(s->host->ctx, &id, 1, &text, &len, &err) != SY_OK || !text) {
        *str_out = strdup("");
        return json_string("");
    }
    *str_out = strndup(text, len);
    s->host->free(s->host->ctx, text);
    json_t *j = json_stringn(*str_out, strlen(*str_out));
    return j ? j : json_string("\xef\xbf\xbd"); /* half a UTF-8 character: U+FFFD */
}

static json_t *bytes_json(const char *s)
{
    json_t *a = json_array();
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        json_array_append_new(a, json_integer(*p));
    return a;
}

/* Chat format: one entry per token of the event. */
static void lp_chat_append(http_job *job, json_t *content, const http_evitem *it)
{
    for (size_t t = 0; t < it->n_tokens && it->logprobs; t++) {
        char *str;
        json_t *tok = token_json(job->srv, it->tokens[t], &str);
        json_t *tops = json_array();
        for (int k = 0; k < it->n_top && k < job->top_logprobs; k++) {
            char *s2;
            json_t *tt = token_json(job->srv, it->top_ids[t * (size_t)it->n_top + (size_t)k], &s2);
            json_array_append_new(tops, json_pack("{s:o, s:f, s:o}", "token", tt, "logprob",
                                                  (double)it->top_lp[t * (size_t)it->n_top + (size_t)k], "bytes",
                                                  bytes_json(s2)));
            free(s2);
        }
        json_array_append_new(content, json_pack("{s:o, s:f, s:o, s:o}", "token", tok, "logprob",
                                                 (double)it->logprobs[t], "bytes", bytes_json(str), "top_logprobs",
                                                 tops));
        free(str);
    }
}

/* Completions format: parallel arrays. */
static void lp_completion_append(http_job *job, json_t *obj, const http_evitem *it, size_t *offset)
{
    json_t *tokens = json_object_get(obj, "tokens"), *lps = json_object_get(obj, "token_logprobs");
    json_t *tops = json_object_get(obj, "top_logprobs"), *offs = json_object_get(obj, "text_offset");
    for (size_t t = 0; t < it->n_tokens && it->logprobs; t++) {
        char *str;
        json_array_append_new(tokens, token_json(job->srv, it->tokens[t], &str));
        json_array_append_new(lps, json_real(it->logprobs[t]));
        json_array_append_new(offs, json_integer((json_int_t)*offset));
        *offset += strlen(str);
        free(str);
        json_t *top = json_object();
        for (int k = 0; k < it->n_top && k < job->top_logprobs; k++) {
            char *s2;
            json_decref(token_json(job->srv, it->top_ids[t * (size_t)it->n_top + (size_t)k], &s2));
            json_object_set_new(top, s2, json_real(it->top_lp[t * (size_t)it->n_top + (size_t)k]));
            free(s2);
        }
        json_array_append_new(tops, top);
    }
}

static json_t *lp_completion_new(void)
{
    return json_pack("{s:[], s:[], s:[], s:[]}", "tokens", "token_logprobs", "top_logprobs", "text_offset");
}

static json_t *envelope(http_job *job, int chunk)
{
    const char *obj = job->kind == JOB_CHAT ? (chunk ? "chat.completion.chunk" : "chat.completion")
                                            : "text_completion";
    return json_pack("{s:s, s:s, s:I, s:s, s:[]}", "id", job->id, "object", obj, "created", (json_int_t)job->created,
                     "model", job->model, "choices");
}

static json_t *usage_json(http_job *job)
{
    json_int_t comp = 0, cached = 0;
    for (int i = 0; i < job->n; i++) {
        comp += job->ch[i].completion_tokens;
        if (job->ch[i].cached_tokens > cached)
            cached = job->ch[i].cached_tokens;
    }
    json_int_t prompt = job->prompt_tokens;
    return json_pack("{s:I, s:I, s:I, s:{s:I}}", "prompt_tokens", prompt, "completion_tokens", comp, "total_tokens",
                     prompt + comp, "prompt_tokens_details", "cached_tokens", cached);
}

static void send_chunk(http_stream *st, json_t *chunk)
{
    char *s = json_dumps(chunk, JSON_COMPACT);
    json_decref(chunk);
    if (s) {
        http_sse_data(st, s, strlen(s));
        free(s);
    }
}

static json_t *json_text(const char *p, size_t n)
{
    json_t *j = json_stringn(p, n);
    return j ? j : json_string("");
}

/* ------------------------------------------------------------ streaming */

static void send_delta(http_job *job, http_stream *st, http_choice *ch, json_t *delta, const char *finish)
{
    json_t *c = envelope(job, 1);
    json_array_append_new(json_object_get(c, "choices"),
                          json_pack("{s:i, s:o, s:n, s:o}", "index", ch->index, "delta", delta, "logprobs",
                                    "finish_reason", finish ? json_string(finish) : json_null()));
    send_chunk(st, c);
}

/* OpenAI's stream of a call, one entry per chunk: its id, type and name
 * with empty arguments first, then {index, function: {arguments: piece}}
 * (what the openai SDK's accumulation expects). */
static void stream_tool_calls(http_job *job, http_stream *st, http_choice *ch, const http_evitem *it)
{
    for (size_t i = 0; i < it->n_tool_calls; i++) {
        int opened;
        const char *ready;
        size_t ready_len;
        int at = http_choice_tool_piece(ch, &it->tool_calls[i], &opened, &ready, &ready_len);
        if (at < 0)
            continue;
        json_t *call = json_array_get(ch->tool_calls, (size_t)at);
        if (opened) {
            json_t *fn = json_object_get(call, "function");
            send_delta(job, st, ch,
                       json_pack("{s:[{s:i, s:O, s:s, s:{s:O, s:s}}]}", "tool_calls", "index", at, "id",
                                 json_object_get(call, "id"), "type", "function", "function", "name",
                                 json_object_get(fn, "name"), "arguments", ""),
                       NULL);
        }
        if (ready_len)
            send_delta(job, st, ch,
                       json_pack("{s:[{s:i, s:{s:o}}]}", "tool_calls", "index", at, "function", "arguments",
                                 json_text(ready, ready_len)),
                       NULL);
    }
}

static void stream_content(http_job *job, http_stream *st, http_choice *ch, const http_evitem *it, int has_lp,
                           int final);

static void stream_event(http_job *job, http_stream *st, http_choice *ch, const http_evitem *it)
{
    int chat = job->kind == JOB_CHAT;
    if (!st->resp_started)
        http_sse_begin(st);
    if (chat && !ch->sent_first) {
        ch->sent_first = 1;
        json_t *c = envelope(job, 1);
        json_array_append_new(json_object_get(c, "choices"),
                              json_pack("{s:i, s:{s:s, s:s}, s:n, s:n}", "index", ch->index, "delta", "role",
                                        "assistant", "content", "", "logprobs", "finish_reason"));
        send_chunk(st, c);
    }
    int has_lp = job->top_logprobs >= 0 && it->logprobs && it->n_tokens;
    int done = it->type == SY_EV_DONE;
    int tools = chat && it->n_tool_calls;
    int final = done && !tools; /* after tool pieces the finish goes in a chunk of its own */
    if (it->text_len || it->reasoning_len || has_lp || final)
        stream_content(job, st, ch, it, has_lp, final);
    if (tools) {
        stream_tool_calls(job, st, ch, it);
        if (done)
            send_delta(job, st, ch, json_object(), it->finish[0] ? it->finish : "stop");
    }
}

static void stream_content(http_job *job, http_stream *st, http_choice *ch, const http_evitem *it, int has_lp,
                           int final)
{
    int chat = job->kind == JOB_CHAT;
    json_t *c = envelope(job, 1);
    json_t *choice;
    json_t *lp = json_null();
    if (has_lp) {
        if (chat) {
            json_t *content = json_array();
            lp_chat_append(job, content, it);
            lp = json_pack("{s:o}", "content", content);
        } else {
            lp = lp_completion_new();
            lp_completion_append(job, lp, it, &ch->text_offset);
        }
    }
    if (chat) {
        json_t *delta = json_object();
        if (it->text_len || !it->reasoning_len)
            if (it->text_len || !final)
                json_object_set_new(delta, "content", json_text(it->text, it->text_len));
        if (it->reasoning_len)
            json_object_set_new(delta, "reasoning_content", json_text(it->reasoning, it->reasoning_len));
        choice = json_pack("{s:i, s:o, s:o}", "index", ch->index, "delta", delta, "logprobs", lp);
    } else {
        choice = json_pack("{s:i, s:o, s:o}", "index", ch->index, "text", json_text(it->text, it->text_len),
                           "logprobs", lp);
    }
    json_object_set_new(choice, "finish_reason", final ? json_string(it->finish[0] ? it->finish : "stop")
                                                       : json_null());
    json_array_append_new(json_object_get(c, "choices"), choice);
    send_chunk(st, c);
}

/* ------------------------------------------------------------ whole answer */

static void accumulate(http_job *job, http_choice *ch, const http_evitem *it)
{
    hbuf_append(&ch->text, it->text, it->text_len);
    hbuf_append(&ch->reasoning, it->reasoning, it->reasoning_len);
    if (job->top_logprobs >= 0 && it->logprobs && it->n_tokens) {
        if (!ch->logprobs)
            ch->logprobs = job->kind == JOB_CHAT ? json_array() : lp_completion_new();
        if (job->kind == JOB_CHAT)
            lp_chat_append(job, ch->logprobs, it);
        else
            lp_completion_append(job, ch->logprobs, it, &ch->text_offset);
    }
    for (size_t i = 0; job->kind == JOB_CHAT && i < it->n_tool_calls; i++) {
        int opened;
        const char *ready;
        size_t ready_len;
        http_choice_tool_piece(ch, &it->tool_calls[i], &opened, &ready, &ready_len);
    }
}

/* Whole answer: arguments bytes that never completed a UTF-8 character
 * (a host fault) are dropped, so the answer still encodes. */
static void close_tool_calls(http_choice *ch)
{
    for (size_t i = 0; i < json_array_size(ch->tool_calls); i++) {
        json_t *fn = json_object_get(json_array_get(ch->tool_calls, i), "function");
        json_t *args = json_object_get(fn, "arguments");
        /* json_stringn checks what utf8_whole does not (overlong forms, surrogates) */
        const char *s = json_string_value(args);
        json_t *valid = json_stringn(s, utf8_whole(s, json_string_length(args)));
        json_object_set_new(fn, "arguments", valid ? valid : json_string(""));
    }
}

static void respond_whole(http_job *job, http_stream *st)
{
    json_t *r = envelope(job, 0);
    json_t *choices = json_object_get(r, "choices");
    for (int i = 0; i < job->n; i++) {
        http_choice *ch = &job->ch[i];
        json_t *lp = json_null();
        if (job->top_logprobs >= 0)
            lp = job->kind == JOB_CHAT ? json_pack("{s:o}", "content", ch->logprobs ? json_incref(ch->logprobs)
                                                                                     : json_array())
                                       : (ch->logprobs ? json_incref(ch->logprobs) : lp_completion_new());
        json_t *c;
        if (job->kind == JOB_CHAT) {
            int calls = json_array_size(ch->tool_calls) > 0;
            /* OpenAI's shape: content null beside tool calls when there is no text */
            json_t *msg = json_pack("{s:s, s:o}", "role", "assistant", "content",
                                    calls && !ch->text.len ? json_null()
                                                           : json_text(hbuf_data(&ch->text), ch->text.len));
            if (calls) {
                close_tool_calls(ch);
                json_object_set(msg, "tool_calls", ch->tool_calls);
            }
            if (ch->reasoning.len)
                json_object_set_new(msg, "reasoning_content", json_text(hbuf_data(&ch->reasoning), ch->reasoning.len));
            c = json_pack("{s:i, s:o, s:o}", "index", i, "message", msg, "logprobs", lp);
        } else {
            c = json_pack("{s:i, s:o, s:o}", "index", i, "text", json_text(hbuf_data(&ch->text), ch->text.len),
                          "logprobs", lp);
        }
        json_object_set_new(c, "finish_reason", json_string(ch->finish_reason[0] ? ch->finish_reason : "stop"));
        json_array_append_new(choices, c);
    }
    json_object_set_new(r, "usage", usage_json(job));
    http_respond_json(st, 200, r);
}

static void report_error(http_job *job, http_stream *st, const http_evitem *it)
{
    int status = it->status >= 400 && it->status < 600 ? it->status : 500;
    const char *type = status == 429 ? "rate_limit_error" : status < 500 ? "invalid_request_error" : "server_error";
    const char *msg = it->error && it->error[0] ? it->error : "generation failed";
    if (!st->resp_started) {
        if (status == 429 || status == 503)
            st->retry_after = 1;
        http_respond_error(st, status, type, NULL, NULL, "%s", msg);
    } else {
        json_t *e = json_pack("{s:{s:s, s:s, s:n, s:i}}", "error", "message", msg, "type", type, "param", "code",
                              status);
        send_chunk(st, e);
        http_sse_end(st);
    }
    (void)job;
}

/* The queued copy seen as the event it was (for http_anthropic_out.c). */
static void item_event(const http_evitem *it, sy_event *ev)
{
    memset(ev, 0, sizeof *ev);
    ev->struct_size = sizeof *ev;
    ev->type = it->type;
    ev->text = it->text;
    ev->text_len = it->text_len;
    ev->reasoning = it->reasoning;
    ev->reasoning_len = it->reasoning_len;
    ev->tokens = it->tokens;
    ev->n_tokens = it->n_tokens;
    ev->finish_reason = it->finish;
    ev->prompt_tokens = it->prompt_tokens;
    ev->completion_tokens = it->completion_tokens;
    ev->cached_tokens = it->cached_tokens;
    ev->error = it->error;
    ev->status = it->status;
    ev->tool_calls = it->tool_calls;
    ev->n_tool_calls = it->n_tool_calls;
}

static void handle(http_loop *l, http_evitem *it)
{
    http_choice *ch = it->ch;
    http_job *job = ch->job;
    int final = it->type == SY_EV_DONE || it->type == SY_EV_ERROR;
    if (final && !ch->finished) {
        ch->finished = 1;
        job->live--;
        job->finished_choices++;
        if (job->live == 0)
            l->live_jobs--;
    }
    http_stream *st = job->stream;
    if (!st) {
        /* The client is gone: stop what still runs, free when all ended. */
        if (!final && !ch->cancelled) {
            ch->cancelled = 1;
            job->srv->api->cancel(job->srv->host->ctx, ch->rid);
        }
        if (job->live == 0)
            http_job_free(job);
        return;
    }
    if (job->kind == JOB_ANTHROPIC) {
        sy_event ev;
        item_event(it, &ev);
        if (http_anthropic_on_event(job, st, &ev))
            http_job_detach(job); /* live is 0: frees the job */
        return;
    }
    if (it->type == SY_EV_ERROR) {
        job->failed = 1;
        report_error(job, st, it);
        http_job_detach(job); /* cancels the other choices */
        return;
    }
    if (it->type == SY_EV_DONE && job->kind == JOB_CHAT && (it->n_tool_calls || json_array_size(ch->tool_calls)) &&
        (!it->finish[0] || !strcmp(it->finish, "stop")))
        snprintf(it->finish, sizeof it->finish, "tool_calls"); /* a turn that ends in calls ends "tool_calls" */
    if (it->type == SY_EV_DONE) {
        snprintf(ch->finish_reason, sizeof ch->finish_reason, "%s", it->finish[0] ? it->finish : "stop");
        ch->completion_tokens = it->completion_tokens;
        ch->cached_tokens = it->cached_tokens;
        if (it->prompt_tokens)
            job->prompt_tokens = it->prompt_tokens;
    }
    if (job->streaming)
        stream_event(job, st, ch, it);
    else
        accumulate(job, ch, it);
    if (job->finished_choices < job->n)
        return;
    if (job->streaming) {
        if (job->include_usage) {
            json_t *c = envelope(job, 1);
            json_object_set_new(c, "usage", usage_json(job));
            send_chunk(st, c);
        }
        http_sse_end(st);
    } else {
        respond_whole(job, st);
    }
    http_job_detach(job); /* live is 0: frees the job */
}

void http_loop_drain_events(http_loop *l)
{
    pthread_mutex_lock(&l->qlock);
    http_evitem *it = l->qhead;
    l->qhead = l->qtail = NULL;
    l->qsignalled = 0;
    pthread_mutex_unlock(&l->qlock);
    while (it) {
        http_evitem *next = it->next;
        http_job *job = it->ch->job;
        http_conn *c = job->stream ? job->stream->conn : NULL;
        handle(l, it);
        free(it);
        if (c) {
            /* Top level again: drop slow readers, retire finished HTTP/1.1
             * answers, write out. */
            http_conn_enforce_output_cap(c);
            http_conn_flush(c);
            if (c->closed)
                http_conn_close(c);
        }
        it = next;
    }
}
