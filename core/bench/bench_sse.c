/*
 * One request's answer: SSE events of a streamed completion, timed as they
 * arrive. A chunk whose choice carries text, or carries no finish_reason,
 * is a token arrival (the first one is TTFT, the gaps are ITL); the final
 * usage chunk gives the token counts. A non-2xx answer keeps its body for
 * the error message.
 */
#include "config.h"

#include "bench/bench_client.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int grow(bench_stream *s, size_t need)
{
    if (s->len + need + 1 <= s->cap)
        return 0;
    size_t cap = s->cap ? s->cap : 1024;
    while (cap < s->len + need + 1)
        cap *= 2;
    char *p = realloc(s->buf, cap);
    if (!p)
        return -1;
    s->buf = p;
    s->cap = cap;
    return 0;
}

static void set_error(bench_stream *s, const char *msg)
{
    if (s->failed)
        return;
    s->failed = 1;
    free(s->res->error);
    s->res->error = strdup(msg);
}

/* The message of an OpenAI error object, or the text itself (trimmed). */
static void error_from_body(bench_stream *s, const char *body, size_t len)
{
    char msg[480];
    json_t *root = json_loadb(body, len, 0, NULL);
    json_t *e = root ? json_object_get(root, "error") : NULL;
    json_t *m = json_is_object(e) ? json_object_get(e, "message") : NULL;
    if (json_is_string(m)) {
        snprintf(msg, sizeof msg, "HTTP %d: %s", s->status, json_string_value(m));
    } else {
        size_t n = len > 300 ? 300 : len;
        while (n && (body[n - 1] == '\n' || body[n - 1] == '\r'))
            n--;
        snprintf(msg, sizeof msg, "HTTP %d: %.*s", s->status, (int)n, body);
    }
    json_decref(root);
    set_error(s, msg);
}

void bench_stream_begin(bench_stream *s, bench_result *res, const bench_prompt *p, double now)
{
    char *buf = s->buf;
    size_t cap = s->cap;
    memset(s, 0, sizeof *s);
    s->buf = buf;
    s->cap = cap;
    s->res = res;
    s->prompt = p;
    s->t_send = now;
    s->t_last = now;
    memset(res, 0, sizeof *res);
    res->prompt_tokens = p->input_len;
}

void bench_stream_set_status(bench_stream *s, int status)
{
    s->status = status;
    s->res->status = status;
}

static int push_itl(bench_result *r, double v)
{
    if (r->n_itl == r->cap_itl) {
        size_t cap = r->cap_itl ? r->cap_itl * 2 : 64;
        double *p = realloc(r->itl, cap * sizeof *p);
        if (!p)
            return -1;
        r->itl = p;
        r->cap_itl = cap;
    }
    r->itl[r->n_itl++] = v;
    return 0;
}

static void on_event(bench_stream *s, const char *data, size_t len, double now)
{
    if (len == 6 && memcmp(data, "[DONE]", 6) == 0) {
        s->saw_done = 1;
        return;
    }
    json_error_t je;
    json_t *root = json_loadb(data, len, JSON_ALLOW_NUL, &je);
    if (!root) {
        char msg[400];
        snprintf(msg, sizeof msg, "malformed SSE event: %s: %.*s", je.text, (int)(len < 120 ? len : 120), data);
        set_error(s, msg);
        return;
    }
    json_t *e = json_object_get(root, "error");
    if (e) {
        json_t *m = json_object_get(e, "message");
        char msg[480];
        snprintf(msg, sizeof msg, "error in stream: %s", json_is_string(m) ? json_string_value(m) : "?");
        set_error(s, msg);
    }
    json_t *ch = json_object_get(root, "choices");
    json_t *c0 = json_is_array(ch) ? json_array_get(ch, 0) : NULL;
    if (json_is_object(c0)) {
        json_t *text = json_object_get(c0, "text");
        if (!text) {
            json_t *d = json_object_get(c0, "delta");
            text = json_is_object(d) ? json_object_get(d, "content") : NULL;
        }
        json_t *fin = json_object_get(c0, "finish_reason");
        int token = (json_is_string(text) && json_string_length(text) > 0) || !fin || json_is_null(fin);
        if (token) {
            if (s->res->n_chunks == 0)
                s->res->ttft = now - s->t_send;
            else
                push_itl(s->res, now - s->t_last);
            s->t_last = now;
            s->res->n_chunks++;
        }
    }
    json_t *u = json_object_get(root, "usage");
    if (json_is_object(u)) {
        json_t *ct = json_object_get(u, "completion_tokens");
        json_t *pt = json_object_get(u, "prompt_tokens");
        if (json_is_integer(ct)) {
            s->res->output_tokens = (long)json_integer_value(ct);
            s->saw_usage = 1;
        }
        if (json_is_integer(pt))
            s->res->prompt_tokens = (long)json_integer_value(pt);
    }
    json_decref(root);
}

int bench_stream_data(bench_stream *s, const char *p, size_t n, double now)
{
    if (grow(s, n) < 0) {
        set_error(s, "out of memory");
        return -1;
    }
    memcpy(s->buf + s->len, p, n);
    s->len += n;
    s->buf[s->len] = 0;
    if (s->raw || s->status < 200 || s->status > 299)
        return 0; /* the error body: kept whole */
    /* Complete lines: "data: ..." events (one line each from OpenAI servers). */
    size_t start = 0;
    for (;;) {
        char *nl = memchr(s->buf + start, '\n', s->len - start);
        if (!nl)
            break;
        size_t end = (size_t)(nl - s->buf);
        size_t le = end;
        if (le > start && s->buf[le - 1] == '\r')
            le--;
        if (le - start >= 5 && memcmp(s->buf + start, "data:", 5) == 0) {
            size_t d = start + 5;
            if (d < le && s->buf[d] == ' ')
                d++;
            on_event(s, s->buf + d, le - d, now);
        }
        start = end + 1;
    }
    if (start) {
        memmove(s->buf, s->buf + start, s->len - start);
        s->len -= start;
    }
    return 0;
}

void bench_stream_finish(bench_stream *s, double now, const char *err)
{
    bench_result *r = s->res;
    if (s->finished)
        return;
    s->finished = 1;
    r->latency = now - s->t_send;
    if (err) {
        set_error(s, err);
    } else if (s->status < 200 || s->status > 299) {
        error_from_body(s, s->buf ? s->buf : "", s->len);
    } else if (!s->saw_done && !s->failed) {
        set_error(s, "the stream ended without data: [DONE]");
    }
    if (!s->saw_usage)
        r->output_tokens = r->n_chunks;
    r->ok = !s->failed;
    if (s->n_finished)
        ++*s->n_finished;
    if (s->n_failed && !r->ok)
        ++*s->n_failed;
    if (s->n_tokens)
        *s->n_tokens += r->output_tokens;
}
