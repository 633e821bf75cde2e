/*
 * frontend/http: HTTP/1.1. One request at a time per connection: a
 * pipelined request waits in the read buffer until the previous response
 * has been fully queued, so answers always go out in order. Bodies come
 * with Content-Length or chunked; streamed answers use chunked coding.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http.h"

static void raw_error_close(http_conn *c, int status)
{
    char head[160];
    int n = snprintf(head, sizeof head, "HTTP/1.1 %d %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", status,
                     http_status_text(status));
    hbuf_append(&c->wbuf, head, (size_t)n);
    c->want_close = 1;
    hbuf_reset(&c->rbuf);
}

static const char *memmem_crlf2(const char *p, size_t n)
{
    for (size_t i = 0; i + 3 < n; i++)
        if (p[i] == '\r' && p[i + 1] == '\n' && p[i + 2] == '\r' && p[i + 3] == '\n')
            return p + i;
    return NULL;
}

/*
 * Line breaks in a head are CRLF only. A bare CR used to end a line and
 * swallow the byte after it, and a bare LF stayed inside a value: either
 * way a proxy that reads the head differently (RFC 9112 2.2 lets it treat a
 * bare CR as a space and a bare LF as a line break) would frame the body
 * differently from us (request smuggling). NUL is never valid in a head.
 */
static int head_has_bad_bytes(const char *p, const char *end)
{
    for (const char *q = p; q < end; q++) {
        if (*q == '\0' || (*q == '\r' && (q + 1 == end || q[1] != '\n')) || (*q == '\n' && (q == p || q[-1] != '\r')))
            return 1;
    }
    return 0;
}

/* Parses the head in [p, end) into a new stream; NULL with *status on error. */
static http_stream *parse_head(http_conn *c, const char *p, const char *end, int *status)
{
    *status = 400;
    if (head_has_bad_bytes(p, end))
        return NULL;
    const char *eol = memchr(p, '\r', (size_t)(end - p));
    if (!eol)
        eol = end;
    const char *sp1 = memchr(p, ' ', (size_t)(eol - p));
    if (!sp1 || sp1 == p || (size_t)(sp1 - p) >= 16)
        return NULL;
    const char *sp2 = memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1));
    if (!sp2 || sp2 == sp1 + 1)
        return NULL;
    size_t vlen = (size_t)(eol - sp2 - 1);
    if (vlen != 8 || strncmp(sp2 + 1, "HTTP/1.", 7) != 0) {
        *status = 505;
        return NULL;
    }
    int minor = sp2[8] - '0';
    http_stream *st = http_stream_new(c, 0);
    if (!st) {
        *status = 500;
        return NULL;
    }
    http_stream_header(st, ":method", 7, p, (size_t)(sp1 - p));
    http_stream_header(st, ":path", 5, sp1 + 1, (size_t)(sp2 - sp1 - 1));
    c->h1_keepalive = minor >= 1;
    const char *line = eol + 2;
    while (line < end) {
        const char *le = memchr(line, '\r', (size_t)(end - line));
        if (!le)
            le = end;
        const char *colon = memchr(line, ':', (size_t)(le - line));
        /* No space before the colon (RFC 9112 5.1): "Content-Length : 5" would
         * otherwise be an unknown header to us and the length to a lenient proxy. */
        if (!colon || colon == line || line[0] == ' ' || line[0] == '\t' || colon[-1] == ' ' || colon[-1] == '\t') {
            http_stream_free(st);
            return NULL;
        }
        const char *v = colon + 1, *ve = le;
        while (v < ve && (*v == ' ' || *v == '\t'))
            v++;
        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
            ve--;
        size_t nlen = (size_t)(colon - line);
        if (nlen == 10 && strncasecmp(line, "connection", 10) == 0) {
            if ((size_t)(ve - v) >= 5 && strncasecmp(v, "close", 5) == 0)
                c->h1_keepalive = 0;
            else if ((size_t)(ve - v) >= 10 && strncasecmp(v, "keep-alive", 10) == 0)
                c->h1_keepalive = 1;
        } else if (line[0] != ':' && http_stream_header(st, line, nlen, v, (size_t)(ve - v)) < 0) {
            http_stream_free(st);
            return NULL;
        }
        line = le + 2;
    }
    if (st->chunked && st->has_content_length) {
        http_stream_free(st);
        return NULL;
    }
    return st;
}

static int hex_digit(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    ch = (char)(ch | 0x20);
    return ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

/* Moves body bytes from rbuf into st->body: 1 complete, 0 need more, -1 bad. */
static int read_body(http_conn *c, http_stream *st)
{
    size_t max = c->loop->srv->cfg.max_body;
    if (!st->chunked) {
        uint64_t want = st->content_length - st->body.len;
        size_t take = c->rbuf.len < want ? c->rbuf.len : (size_t)want;
        hbuf_append(&st->body, hbuf_data(&c->rbuf), take);
        hbuf_consume(&c->rbuf, take);
        return st->body.len == st->content_length;
    }
    for (;;) {
        const char *p = hbuf_data(&c->rbuf);
        size_t n = c->rbuf.len;
        if (st->h1_cstate == 1) { /* chunk data */
            size_t take = n < st->h1_cleft ? n : (size_t)st->h1_cleft;
            if (st->body.len + take > max) {
                st->body_too_large = 1;
                return 1;
            }
            hbuf_append(&st->body, p, take);
            hbuf_consume(&c->rbuf, take);
            st->h1_cleft -= take;
            if (st->h1_cleft)
                return 0;
            st->h1_cstate = 2;
            continue;
        }
        const char *nl = memchr(p, '\n', n);
        if (!nl)
            return n > 4096 ? -1 : 0;
        size_t linelen = (size_t)(nl - p) + 1;
        if (st->h1_cstate == 0) { /* size line */
            /* chunk-size is 1*HEXDIG (RFC 9112 7.1). strtoull also took a
             * sign, leading spaces and "0x", which a proxy in front may read
             * as another size: two views of where the body ends. */
            const char *end = p;
            unsigned long long sz = 0;
            int d;
            for (; end < nl && (d = hex_digit(*end)) >= 0; end++)
                sz = sz >> 60 ? ~0ull : sz * 16 + (unsigned)d; /* saturates: over max_body anyway */
            if (end == p || (*end != '\r' && *end != ';' && *end != '\n'))
                return -1;
            hbuf_consume(&c->rbuf, linelen);
            if (sz == 0) {
                st->h1_cstate = 3;
                continue;
            }
            if (sz > max) {
                st->body_too_large = 1;
                return 1;
            }
            st->h1_cleft = sz;
            st->h1_cstate = 1;
        } else if (st->h1_cstate == 2) { /* CRLF after data */
            if (linelen > 2 || (linelen == 2 && p[0] != '\r'))
                return -1;
            hbuf_consume(&c->rbuf, linelen);
            st->h1_cstate = 0;
        } else { /* trailers until an empty line */
            hbuf_consume(&c->rbuf, linelen);
            if (linelen <= 2)
                return 1;
        }
    }
}

int http_h1_on_read(http_conn *c)
{
    http_server *s = c->loop->srv;
    for (;;) {
        if (c->want_close)
            return 0;
        http_stream *st = c->streams;
        if (!st) {
            if (!c->rbuf.len)
                return 0;
            if (c->wbuf.len >= s->cfg.max_pending_output)
                return 0; /* earlier answers not taken yet; http_conn_flush parses on when they are */
            const char *p = hbuf_data(&c->rbuf);
            /* Tolerate stray CRLFs between requests (RFC 9112 2.2). */
            while (c->rbuf.len >= 2 && p[0] == '\r' && p[1] == '\n') {
                hbuf_consume(&c->rbuf, 2);
                p = hbuf_data(&c->rbuf);
            }
            const char *he = memmem_crlf2(p, c->rbuf.len);
            if (!he) {
                if (c->rbuf.len > s->cfg.max_header_bytes)
                    raw_error_close(c, 431);
                return 0;
            }
            size_t head_len = (size_t)(he - p) + 4;
            if (head_len > s->cfg.max_header_bytes) {
                raw_error_close(c, 431);
                return 0;
            }
            int status;
            st = parse_head(c, p, he, &status);
            if (!st) {
                raw_error_close(c, status);
                return 0;
            }
            hbuf_consume(&c->rbuf, head_len);
            c->streams = st;
            if ((st->has_content_length && st->content_length > s->cfg.max_body)) {
                st->body_too_large = 1;
                c->h1_keepalive = 0; /* the body is never read: the connection cannot be reused */
            } else if (st->expect_continue && (st->has_content_length || st->chunked)) {
                static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
                hbuf_append(&c->wbuf, cont, sizeof cont - 1);
            }
        }
        if (st->dispatched)
            return 0; /* the answer is in progress; later requests wait */
        if (!st->body_too_large && (st->has_content_length || st->chunked)) {
            int r = read_body(c, st);
            if (r < 0) {
                raw_error_close(c, 400);
                return 0;
            }
            if (r == 0)
                return 0;
            if (st->body_too_large)
                c->h1_keepalive = 0;
        }
        st->dispatched = 1;
        http_route(st);
        /* A route that answered at once ended the response; retire it and
         * go on with any pipelined request. */
        if (!st->resp_ended)
            return 0;
        c->streams = NULL;
        http_stream_free(st);
        c->req_started = http_now();
        if (!c->h1_keepalive) {
            c->want_close = 1;
            hbuf_reset(&c->rbuf);
            return 0;
        }
    }
}

void http_h1_after(http_conn *c)
{
    http_stream *st = c->streams;
    if (!st || !st->resp_ended)
        return;
    c->streams = NULL;
    http_stream_free(st);
    c->req_started = http_now();
    if (!c->h1_keepalive) {
        c->want_close = 1;
        hbuf_reset(&c->rbuf);
        return;
    }
    if (http_h1_on_read(c) < 0)
        c->closed = 1;
}

int http_h1_send_head(http_stream *st, int status, const char *ctype, long long content_length)
{
    http_conn *c = st->conn;
    hbuf *w = &c->wbuf;
    hbuf_printf(w, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n", status, http_status_text(status), ctype);
    if (content_length >= 0) {
        hbuf_printf(w, "Content-Length: %lld\r\n", content_length);
    } else {
        st->resp_chunked = 1;
        hbuf_puts(w, "Transfer-Encoding: chunked\r\nCache-Control: no-cache\r\n");
    }
    if (st->request_id[0])
        hbuf_printf(w, "X-Request-Id: %s\r\n", st->request_id);
    if (st->retry_after > 0)
        hbuf_printf(w, "Retry-After: %d\r\n", st->retry_after);
    hbuf_puts(w, c->h1_keepalive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n");
    return 0;
}

int http_h1_send_body(http_stream *st, const char *data, size_t n)
{
    hbuf *w = &st->conn->wbuf;
    if (!n)
        return 0;
    if (st->resp_chunked)
        hbuf_printf(w, "%zx\r\n", n);
    hbuf_append(w, data, n);
    if (st->resp_chunked)
        hbuf_puts(w, "\r\n");
    return 0;
}

int http_h1_end(http_stream *st)
{
    if (st->resp_chunked)
        hbuf_puts(&st->conn->wbuf, "0\r\n\r\n");
    st->resp_ended = 1;
    return 0;
}
