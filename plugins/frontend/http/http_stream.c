/*
 * frontend/http: one request/response exchange, whatever the protocol.
 * Routes answer through http_respond* and http_sse_*; this file frames the
 * answer for HTTP/1.1 (http_h1.c) or HTTP/2 (http_h2.c).
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http.h"

http_stream *http_stream_new(http_conn *c, int32_t h2_id)
{
    http_stream *st = calloc(1, sizeof *st);
    if (!st)
        return NULL;
    st->conn = c;
    st->h2_id = h2_id;
    return st;
}

void http_stream_free(http_stream *st)
{
    if (!st)
        return;
    if (st->job)
        http_job_detach(st->job);
    st->job = NULL;
    free(st->authorization);
    free(st->x_api_key);
    hbuf_free(&st->body);
    hbuf_free(&st->out);
    free(st);
}

static int name_is(const char *name, size_t nlen, const char *want)
{
    return strlen(want) == nlen && strncasecmp(name, want, nlen) == 0;
}

int http_stream_header(http_stream *st, const char *name, size_t nlen, const char *value, size_t vlen)
{
    st->header_bytes += nlen + vlen + 32;
    if (name_is(name, nlen, ":method") && vlen < sizeof st->method) {
        memcpy(st->method, value, vlen);
        st->method[vlen] = '\0';
    } else if (name_is(name, nlen, ":path")) {
        if (vlen >= sizeof st->path)
            vlen = sizeof st->path - 1; /* routes are short; a long query cannot match */
        memcpy(st->path, value, vlen);
        st->path[vlen] = '\0';
    } else if (name_is(name, nlen, "authorization")) {
        free(st->authorization);
        st->authorization = strndup(value, vlen);
    } else if (name_is(name, nlen, "x-api-key")) {
        free(st->x_api_key);
        st->x_api_key = strndup(value, vlen);
    } else if (name_is(name, nlen, "x-request-id")) {
        size_t n = vlen < sizeof st->request_id - 1 ? vlen : sizeof st->request_id - 1;
        size_t j = 0;
        for (size_t i = 0; i < n; i++) /* keep it a safe header value */
            if ((unsigned char)value[i] >= 0x20 && value[i] != 0x7f)
                st->request_id[j++] = value[i];
        st->request_id[j] = '\0';
    } else if (name_is(name, nlen, "content-length")) {
        char tmp[32];
        if (vlen == 0 || vlen >= sizeof tmp)
            return -1;
        memcpy(tmp, value, vlen);
        tmp[vlen] = '\0';
        char *end;
        unsigned long long v = strtoull(tmp, &end, 10);
        /* 1*DIGIT only: strtoull also takes "+5" and leading spaces, which a
         * proxy in front may frame differently (request smuggling). */
        if (*end || strspn(tmp, "0123456789") != vlen || (st->has_content_length && st->content_length != v))
            return -1;
        st->has_content_length = 1;
        st->content_length = v;
    } else if (name_is(name, nlen, "transfer-encoding")) {
        /* chunked must be the last coding, a whole token ("xchunked" is not) */
        if (vlen >= 7 && strncasecmp(value + vlen - 7, "chunked", 7) == 0 &&
            (vlen == 7 || value[vlen - 8] == ',' || value[vlen - 8] == ' ' || value[vlen - 8] == '\t'))
            st->chunked = 1;
        else
            return -1; /* nothing else is supported for requests */
    } else if (name_is(name, nlen, "expect")) {
        if (vlen == 12 && strncasecmp(value, "100-continue", 12) == 0)
            st->expect_continue = 1;
    }
    return 0;
}

const char *http_status_text(int status)
{
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Payload Too Large";
    case 415: return "Unsupported Media Type";
    case 422: return "Unprocessable Entity";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 529: return "Overloaded"; /* Anthropic's */
    default: return "Unknown";
    }
}

static void send_head(http_stream *st, int status, const char *ctype, long long len)
{
    st->resp_started = 1;
    if (st->h2_id)
        http_h2_submit(st, status, ctype);
    else
        http_h1_send_head(st, status, ctype, len);
}

void http_respond(http_stream *st, int status, const char *ctype, const char *body, size_t len)
{
    if (st->resp_started)
        return;
    if (st->h2_id) {
        hbuf_append(&st->out, body, len);
        st->resp_ended = 1;
        send_head(st, status, ctype, (long long)len);
    } else {
        send_head(st, status, ctype, (long long)len);
        http_h1_send_body(st, body, len);
        st->resp_ended = 1;
        http_h1_end(st);
    }
}

void http_respond_json(http_stream *st, int status, json_t *obj)
{
    char *s = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
    json_decref(obj);
    if (!s) {
        static const char oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\","
                                  "\"param\":null,\"code\":null}}";
        http_respond(st, 500, "application/json", oom, sizeof oom - 1);
        return;
    }
    http_respond(st, status, "application/json", s, strlen(s));
    free(s);
}

void http_respond_error(http_stream *st, int status, const char *type, const char *param, const char *code,
                        const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (st->anthropic_errors) {
        http_respond_json(st, status, json_pack("{s:s, s:{s:s, s:s}}", "type", "error", "error", "type",
                                                http_anthropic_error_type(status), "message", msg));
        return;
    }
    json_t *err = json_pack("{s:s, s:s, s:o, s:o}", "message", msg, "type", type, "param",
                            param ? json_string(param) : json_null(), "code", code ? json_string(code) : json_null());
    http_respond_json(st, status, json_pack("{s:o}", "error", err));
}

void http_sse_begin(http_stream *st)
{
    if (st->resp_started)
        return;
    send_head(st, 200, "text/event-stream", -1);
}

/* One SSE event; event NULL: a bare "data:" one. */
static void sse_put(http_stream *st, const char *event, const char *data, size_t len)
{
    if (!st->resp_started || st->resp_ended || st->out_overflow)
        return;
    /* What this response has queued and the client has not taken yet. */
    size_t pending;
    if (st->h2_id) {
        if (event)
            hbuf_printf(&st->out, "event: %s\n", event);
        hbuf_puts(&st->out, "data: ");
        hbuf_append(&st->out, data, len);
        hbuf_puts(&st->out, "\n\n");
        http_h2_resume(st);
        pending = st->out.len;
    } else {
        hbuf tmp = {0};
        if (event)
            hbuf_printf(&tmp, "event: %s\n", event);
        hbuf_puts(&tmp, "data: ");
        hbuf_append(&tmp, data, len);
        hbuf_puts(&tmp, "\n\n");
        http_h1_send_body(st, hbuf_data(&tmp), tmp.len);
        hbuf_free(&tmp);
        pending = st->conn->wbuf.len;
    }
    if (pending > st->conn->loop->srv->cfg.max_pending_output) {
        /* A reader this far behind would make the buffer grow with every
         * token; stop here, the top level drops the response. */
        st->out_overflow = 1;
        if (st->h2_id)
            hbuf_free(&st->out);
    }
}

void http_sse_data(http_stream *st, const char *data, size_t len) { sse_put(st, NULL, data, len); }

void http_sse_event(http_stream *st, const char *event, const char *data, size_t len)
{
    sse_put(st, event, data, len);
}

void http_conn_enforce_output_cap(http_conn *c)
{
    http_server *s = c->loop->srv;
    for (http_stream *st = c->streams; st; st = st->next) {
        if (!st->out_overflow || st->overflow_handled)
            continue;
        st->overflow_handled = 1;
        sy_logf(s->host, SY_LOG_WARN, HTTP_NAME,
                "request %s: the client is not reading its response (more than max_pending_output = %zu bytes "
                "unsent); %s and the request cancelled",
                st->request_id[0] ? st->request_id : "(no id)", s->cfg.max_pending_output,
                st->h2_id ? "stream reset" : "connection closed");
        if (st->job)
            http_job_detach(st->job);
        if (st->h2_id && c->h2)
            nghttp2_submit_rst_stream(c->h2, NGHTTP2_FLAG_NONE, st->h2_id, NGHTTP2_CANCEL);
        else
            c->closed = 1; /* HTTP/1.1 cannot end the response early any other way */
    }
}

void http_sse_end(http_stream *st)
{
    if (!st->resp_started || st->resp_ended || st->out_overflow)
        return;
    http_sse_data(st, "[DONE]", 6);
    http_sse_close(st);
}

void http_sse_close(http_stream *st)
{
    if (!st->resp_started || st->resp_ended || st->out_overflow)
        return;
    st->resp_ended = 1;
    if (st->h2_id)
        http_h2_resume(st);
    else
        http_h1_end(st);
}
