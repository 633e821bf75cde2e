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
};

static size_t align8(size_t n) { return (n + 7) & ~(size_t)7; }

void http_job_on_event(void *user, const sy_event *ev)
{
    http_choice *ch = user;
    http_loop *l = ch->job->loop;
    size_t ntop = ev->n_top > 0 && ev->top_ids ? (size_t)ev->n_top * ev->n_tokens : 0;
    size_t err_len = ev->type == SY_EV_ERROR && ev->error ? strlen(ev->error) : 0;
    size_t sz = align8(sizeof(http_evitem)) + align8(ev->text_len + 1) + align8(ev->reasoning_len + 1) +
                align8(ev->n_tokens * sizeof(int32_t)) + align8(ev->n_tokens * sizeof(float)) +
                align8(ntop * sizeof(int32_t)) + align8(ntop * sizeof(float)) + err_len + 1;
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
    }
    free(job->ch);
    free(job->model);
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
    int final = it->type == SY_EV_DONE;
    if (!it->text_len && !it->reasoning_len && !has_lp && !final)
        return;
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
            json_t *msg = json_pack("{s:s, s:o}", "role", "assistant", "content",
                                    json_text(hbuf_data(&ch->text), ch->text.len));
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
    if (it->type == SY_EV_ERROR) {
        job->failed = 1;
        report_error(job, st, it);
        http_job_detach(job); /* cancels the other choices */
        return;
    }
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
