/*
 * HTTP/1.1 for the bench client: the request of a stream on a keep-alive
 * connection, an incremental answer parser (Content-Length or chunked),
 * and one blocking request for discovery (/v1/models, /detokenize).
 */
#include "config.h"

#include "bench/bench_client.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>


int bench_buf_append(bench_buf *b, const void *p, size_t n)
{
    if (b->len + n > b->cap) {
        bench_buf_compact(b);
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n)
            cap *= 2;
        if (cap != b->cap) {
            char *q = realloc(b->p, cap);
            if (!q)
                return -1;
            b->p = q;
            b->cap = cap;
        }
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
    return 0;
}

void bench_buf_compact(bench_buf *b)
{
    if (b->off == 0)
        return;
    memmove(b->p, b->p + b->off, b->len - b->off);
    b->len -= b->off;
    b->off = 0;
}

int bench_h1_request(bench_conn *c, const bench_opts *o, bench_stream *s)
{
    char head[768];
    char auth[300] = "";
    if (o->api_key)
        snprintf(auth, sizeof auth, "Authorization: Bearer %.256s\r\n", o->api_key);
    int n = snprintf(head, sizeof head,
                     "POST /v1/completions HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\n"
                     "Accept: text/event-stream\r\n%sContent-Length: %zu\r\n\r\n",
                     o->host, o->port, auth, s->prompt->body_len);
    c->cur = s;
    s->conn = c;
    c->h1.state = BENCH_H1_HEAD;
    c->h1.hdr_len = 0;
    c->h1.done = 0;
    if (bench_buf_append(&c->out, head, (size_t)n) < 0 ||
        bench_buf_append(&c->out, s->prompt->body, s->prompt->body_len) < 0)
        return -1;
    return 0;
}

static int hdr_push(bench_h1 *h, const char *p, size_t n)
{
    if (h->hdr_len + n + 1 > h->hdr_cap) {
        size_t cap = h->hdr_cap ? h->hdr_cap * 2 : 1024;
        while (cap < h->hdr_len + n + 1)
            cap *= 2;
        if (cap > (1u << 20))
            return -1;
        char *q = realloc(h->hdr, cap);
        if (!q)
            return -1;
        h->hdr = q;
        h->hdr_cap = cap;
    }
    memcpy(h->hdr + h->hdr_len, p, n);
    h->hdr_len += n;
    h->hdr[h->hdr_len] = 0;
    return 0;
}

/* Parses the status line and headers in h->hdr (NUL-terminated). */
static int parse_head(bench_conn *c, char *err, size_t errlen)
{
    bench_h1 *h = &c->h1;
    int major, minor, status;
    if (sscanf(h->hdr, "HTTP/%d.%d %d", &major, &minor, &status) != 3) {
        snprintf(err, errlen, "malformed HTTP status line");
        return -1;
    }
    bench_stream_set_status(c->cur, status);
    h->chunked = 0;
    h->remaining = -1;
    h->close_after = (major == 1 && minor == 0);
    for (char *line = strstr(h->hdr, "\r\n"); line; line = strstr(line, "\r\n")) {
        line += 2;
        if (!strncasecmp(line, "content-length:", 15))
            h->remaining = strtoll(line + 15, NULL, 10);
        else if (!strncasecmp(line, "transfer-encoding:", 18) && strstr(line, "chunked"))
            h->chunked = 1;
        else if (!strncasecmp(line, "connection:", 11) && !strncasecmp(line + 11 + strspn(line + 11, " "), "close", 5))
            h->close_after = 1;
    }
    if (h->chunked)
        h->state = BENCH_H1_CSIZE;
    else if (h->remaining >= 0)
        h->state = BENCH_H1_LEN;
    else {
        h->state = BENCH_H1_UNTIL_CLOSE;
        h->close_after = 1;
    }
    h->hdr_len = 0;
    return 0;
}

static void end_answer(bench_conn *c, double now)
{
    bench_stream_finish(c->cur, now, NULL);
    c->cur = NULL;
    c->h1.done = 1;
}

int bench_h1_input(bench_conn *c, const char *p, size_t n, double now, char *err, size_t errlen)
{
    bench_h1 *h = &c->h1;
    while (n > 0) {
        if (!c->cur) {
            snprintf(err, errlen, "unexpected bytes from the server with no request in flight");
            return -1;
        }
        switch (h->state) {
        case BENCH_H1_HEAD: {
            /* byte-wise until the blank line; header blocks are small */
            size_t take = 0;
            int end = 0;
            while (take < n && !end) {
                if (hdr_push(h, p + take, 1) < 0) {
                    snprintf(err, errlen, "answer header block too large");
                    return -1;
                }
                take++;
                if (h->hdr_len >= 4 && memcmp(h->hdr + h->hdr_len - 4, "\r\n\r\n", 4) == 0)
                    end = 1;
            }
            p += take;
            n -= take;
            if (end) {
                if (parse_head(c, err, errlen) < 0)
                    return -1;
                if (c->cur->status == 100) { /* interim answer */
                    h->state = BENCH_H1_HEAD;
                } else if (h->state == BENCH_H1_LEN && h->remaining == 0) {
                    end_answer(c, now);
                }
            }
            break;
        }
        case BENCH_H1_LEN: {
            size_t take = n < (size_t)h->remaining ? n : (size_t)h->remaining;
            bench_stream_data(c->cur, p, take, now);
            p += take;
            n -= take;
            h->remaining -= (long long)take;
            if (h->remaining == 0)
                end_answer(c, now);
            break;
        }
        case BENCH_H1_UNTIL_CLOSE:
            bench_stream_data(c->cur, p, n, now);
            n = 0;
            break;
        case BENCH_H1_CSIZE:
        case BENCH_H1_TRAILER: {
            const char *nl = memchr(p, '\n', n);
            size_t take = nl ? (size_t)(nl - p) + 1 : n;
            if (hdr_push(h, p, take) < 0) {
                snprintf(err, errlen, "malformed chunked coding");
                return -1;
            }
            p += take;
            n -= take;
            if (!nl)
                break;
            if (h->state == BENCH_H1_CSIZE) {
                char *endp;
                long long sz = strtoll(h->hdr, &endp, 16);
                h->hdr_len = 0;
                if (endp == h->hdr || sz < 0) {
                    snprintf(err, errlen, "malformed chunk size");
                    return -1;
                }
                h->remaining = sz;
                h->state = sz == 0 ? BENCH_H1_TRAILER : BENCH_H1_CDATA;
            } else {
                int blank = h->hdr_len <= 2;
                h->hdr_len = 0;
                if (blank)
                    end_answer(c, now);
            }
            break;
        }
        case BENCH_H1_CDATA: {
            size_t take = n < (size_t)h->remaining ? n : (size_t)h->remaining;
            bench_stream_data(c->cur, p, take, now);
            p += take;
            n -= take;
            h->remaining -= (long long)take;
            if (h->remaining == 0) {
                h->state = BENCH_H1_CCRLF;
                h->remaining = 2;
            }
            break;
        }
        case BENCH_H1_CCRLF: {
            size_t take = n < (size_t)h->remaining ? n : (size_t)h->remaining;
            p += take;
            n -= take;
            h->remaining -= (long long)take;
            if (h->remaining == 0)
                h->state = BENCH_H1_CSIZE;
            break;
        }
        }
    }
    return 0;
}

/* ---- one blocking request, Connection: close ---- */

static int dial(const bench_opts *o, char *err, size_t errlen)
{
    char port[16];
    snprintf(port, sizeof port, "%d", o->port);
    struct addrinfo hints = {0}, *ai = NULL;
    hints.ai_socktype = SOCK_STREAM;
    int rc = getaddrinfo(o->host, port, &hints, &ai);
    if (rc != 0) {
        snprintf(err, errlen, "cannot resolve %s: %s", o->host, gai_strerror(rc));
        return -1;
    }
    int fd = -1, e = 0;
    for (struct addrinfo *a = ai; a; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            e = errno;
            continue;
        }
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0)
            break;
        e = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(ai);
    if (fd < 0)
        snprintf(err, errlen, "cannot connect to %s:%d: %s (is `switchyard serve` running there?)", o->host,
                 o->port, strerror(e));
    return fd;
}

int bench_http_simple(const bench_opts *o, const char *method, const char *path, const char *body,
                      int *status, char **resp, char *err, size_t errlen)
{
    *resp = NULL;
    *status = 0;
    int fd = dial(o, err, errlen);
    if (fd < 0)
        return -1;
    char auth[300] = "";
    if (o->api_key)
        snprintf(auth, sizeof auth, "Authorization: Bearer %.256s\r\n", o->api_key);
    size_t blen = body ? strlen(body) : 0;
    char head[1024];
    int hn = snprintf(head, sizeof head,
                      "%s %s HTTP/1.1\r\nHost: %s:%d\r\nConnection: close\r\n%s%s"
                      "Content-Length: %zu\r\n\r\n",
                      method, path, o->host, o->port, auth, body ? "Content-Type: application/json\r\n" : "", blen);
    bench_buf in = {0};
    int ok = -1;
    if (send(fd, head, (size_t)hn, MSG_NOSIGNAL) != hn || (blen && send(fd, body, blen, MSG_NOSIGNAL) != (ssize_t)blen)) {
        snprintf(err, errlen, "cannot send to %s:%d: %s", o->host, o->port, strerror(errno));
        goto out;
    }
    for (;;) {
        struct pollfd pf = {fd, POLLIN, 0};
        int pr = poll(&pf, 1, 30000);
        if (pr == 0) {
            snprintf(err, errlen, "%s %s on %s:%d: no answer in 30 s", method, path, o->host, o->port);
            goto out;
        }
        char tmp[16384];
        ssize_t r = recv(fd, tmp, sizeof tmp, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            snprintf(err, errlen, "%s %s on %s:%d: %s", method, path, o->host, o->port, strerror(errno));
            goto out;
        }
        if (r == 0)
            break;
        if (bench_buf_append(&in, tmp, (size_t)r) < 0)
            goto out;
    }
    /* decode with the streaming parser */
    bench_conn c = {0};
    bench_stream s = {0};
    bench_result res;
    bench_prompt p = {0};
    bench_stream_begin(&s, &res, &p, 0);
    s.raw = 1;
    c.cur = &s;
    c.h1.state = BENCH_H1_HEAD;
    /* collect the body raw: status set non-2xx keeps it whole */
    if (bench_h1_input(&c, in.p ? in.p : "", in.len, 0, err, errlen) < 0) {
        free(s.buf);
        free(c.h1.hdr);
        goto out;
    }
    free(c.h1.hdr);
    free(res.error);
    free(res.itl);
    *status = s.status;
    *resp = s.buf ? s.buf : strdup("");
    ok = 0;
out:
    free(in.p);
    close(fd);
    return ok;
}
