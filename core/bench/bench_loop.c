/*
 * The bench client's event loop: one thread, epoll, non-blocking sockets.
 * HTTP/1.1 keeps a pool of keep-alive connections (one request each at a
 * time, a new connection when none is idle). A server may close an idle
 * keep-alive connection at any moment without saying so (llama-server's
 * cpp-httplib closes after every streamed answer, whose headers promise
 * keep-alive), so a request written on a reused connection can meet the
 * close; when nothing of its answer has arrived the server cannot have
 * started it, and it is sent once more on a new connection, as HTTP
 * clients do (RFC 9112 9.3.1), and counted. h2c multiplexes up to
 * H2_STREAMS_PER_CONN streams per connection. Requests start while the
 * concurrency limit allows and, with a request rate, when their Poisson
 * arrival time has come.
 */
#include "config.h"

#include "bench/bench_client.h"

#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <time.h>
#include <unistd.h>

#define H2_STREAMS_PER_CONN 128

typedef struct loop {
    const bench_opts *o;
    int ep;
    struct sockaddr_storage addr;
    socklen_t addrlen;
    bench_conn **conns;
    size_t n_conns, cap_conns;
    bench_conn *idle; /* HTTP/1.1 connections with no request */
    size_t n_finished, n_failed;
    long n_tokens;
    char *err;
    size_t errlen;
} loop;

double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int resolve(loop *L)
{
    char port[16];
    snprintf(port, sizeof port, "%d", L->o->port);
    struct addrinfo hints = {0}, *ai = NULL;
    hints.ai_socktype = SOCK_STREAM;
    int rc = getaddrinfo(L->o->host, port, &hints, &ai);
    if (rc != 0 || !ai) {
        snprintf(L->err, L->errlen, "cannot resolve %s: %s", L->o->host, gai_strerror(rc));
        return -1;
    }
    memcpy(&L->addr, ai->ai_addr, ai->ai_addrlen);
    L->addrlen = ai->ai_addrlen;
    freeaddrinfo(ai);
    return 0;
}

static void set_events(loop *L, bench_conn *c)
{
    int want = c->out.len > c->out.off || !c->connected;
    if (want == c->want_write)
        return;
    struct epoll_event ev = {.events = EPOLLIN | (want ? EPOLLOUT : 0), .data.ptr = c};
    epoll_ctl(L->ep, EPOLL_CTL_MOD, c->fd, &ev);
    c->want_write = want;
}

static bench_conn *conn_open(loop *L)
{
    int fd = socket(L->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(L->err, L->errlen, "socket: %s", strerror(errno));
        return NULL;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&L->addr, L->addrlen) < 0 && errno != EINPROGRESS) {
        snprintf(L->err, L->errlen, "cannot connect to %s:%d: %s", L->o->host, L->o->port, strerror(errno));
        close(fd);
        return NULL;
    }
    bench_conn *c = calloc(1, sizeof *c);
    if (!c || (L->n_conns == L->cap_conns && !(L->cap_conns = L->cap_conns ? 2 * L->cap_conns : 64,
                                                L->conns = realloc(L->conns, L->cap_conns * sizeof *L->conns)))) {
        free(c);
        close(fd);
        snprintf(L->err, L->errlen, "out of memory");
        return NULL;
    }
    L->conns[L->n_conns++] = c;
    c->fd = fd;
    c->want_write = 1;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.ptr = c};
    epoll_ctl(L->ep, EPOLL_CTL_ADD, fd, &ev);
    if (L->o->http2 && bench_h2_init(c) < 0) {
        snprintf(L->err, L->errlen, "HTTP/2 session: out of memory");
        return NULL;
    }
    return c;
}

static void conn_fail(loop *L, bench_conn *c, const char *why)
{
    if (c->dead)
        return;
    double now = bench_now();
    if (c->h2)
        bench_h2_fail_all(c, now, why);
    if (c->cur) {
        bench_stream_finish(c->cur, now, why);
        c->cur = NULL;
    }
    epoll_ctl(L->ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->fd = -1;
    c->dead = 1;
    /* drop it from the idle list */
    for (bench_conn **pp = &L->idle; *pp; pp = &(*pp)->next_idle)
        if (*pp == c) {
            *pp = c->next_idle;
            break;
        }
}

/* The request on c has met the close of a reused connection before any
 * byte of its answer: 1 when it was sent again on a new connection. */
static int resend(loop *L, bench_conn *c, const char *why)
{
    bench_stream *s = c->cur;
    if (c->h2 || !s || s->resent || c->n_answers == 0 || c->h1.state != BENCH_H1_HEAD || c->h1.hdr_len > 0)
        return 0;
    c->cur = NULL;
    conn_fail(L, c, why);
    bench_conn *n = conn_open(L);
    if (!n || bench_h1_request(n, L->o, s) < 0) {
        /* nothing left to resend on: the request fails with the first cause */
        if (n)
            n->cur = NULL;
        bench_stream_finish(s, bench_now(), why);
        return 1;
    }
    s->resent = 1;
    s->res->resent = 1;
    return 1;
}

/* A connection lost: its request is resent when allowed, else fails. */
static void conn_lost(loop *L, bench_conn *c, const char *why)
{
    if (!resend(L, c, why))
        conn_fail(L, c, why);
}

static void conn_write(loop *L, bench_conn *c)
{
    while (c->out.off < c->out.len) {
        ssize_t w = send(c->fd, c->out.p + c->out.off, c->out.len - c->out.off, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            char msg[400];
            snprintf(msg, sizeof msg, "send to %s:%d: %s", L->o->host, L->o->port, strerror(errno));
            conn_lost(L, c, msg);
            return;
        }
        c->out.off += (size_t)w;
    }
    if (c->out.off == c->out.len)
        c->out.off = c->out.len = 0;
    set_events(L, c);
}

static int start_request(loop *L, bench_stream *s)
{
    bench_conn *c = NULL;
    if (L->o->http2) {
        for (size_t i = 0; i < L->n_conns && !c; i++)
            if (!L->conns[i]->dead && L->conns[i]->n_streams < H2_STREAMS_PER_CONN)
                c = L->conns[i];
    } else {
        /* skip idle connections whose close has already arrived */
        while (!c && L->idle) {
            bench_conn *i = L->idle;
            L->idle = i->next_idle;
            char b;
            ssize_t r = recv(i->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
            if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                c = i;
            else
                conn_fail(L, i, r > 0 ? "bytes from the server with no request in flight" : "closed while idle");
        }
    }
    if (!c && !(c = conn_open(L)))
        return -1;
    int rc = L->o->http2 ? bench_h2_submit(c, L->o, s) : bench_h1_request(c, L->o, s);
    if (rc < 0) {
        snprintf(L->err, L->errlen, "cannot queue a request (out of memory)");
        return -1;
    }
    if (c->connected)
        conn_write(L, c);
    return 0;
}

static void conn_readable(loop *L, bench_conn *c)
{
    char buf[65536];
    char err[256];
    for (;;) {
        ssize_t r = recv(c->fd, buf, sizeof buf, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (r <= 0) {
            if (r == 0 && c->cur && c->h1.state == BENCH_H1_UNTIL_CLOSE) {
                bench_stream_finish(c->cur, bench_now(), NULL);
                c->cur = NULL;
            }
            snprintf(err, sizeof err, "%s", r == 0 ? "the server closed the connection" : strerror(errno));
            conn_lost(L, c, err);
            return;
        }
        double now = bench_now();
        int rc = c->h2 ? bench_h2_input(c, buf, (size_t)r, err, sizeof err)
                       : bench_h1_input(c, buf, (size_t)r, now, err, sizeof err);
        if (rc < 0) {
            conn_fail(L, c, err);
            return;
        }
        if (!c->h2 && c->h1.done && !c->cur) {
            c->h1.done = 0;
            c->n_answers++;
            if (c->h1.close_after) {
                conn_fail(L, c, "closed");
                return;
            }
            c->next_idle = L->idle;
            L->idle = c;
        }
    }
    if (c->h2)
        conn_write(L, c);
}

static void conn_writable(loop *L, bench_conn *c)
{
    if (!c->connected) {
        int e = 0;
        socklen_t el = sizeof e;
        getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &e, &el);
        if (e) {
            char msg[400];
            snprintf(msg, sizeof msg, "cannot connect to %s:%d: %s", L->o->host, L->o->port, strerror(e));
            conn_fail(L, c, msg);
            return;
        }
        c->connected = 1;
    }
    conn_write(L, c);
}

/* Exponential gap with mean 1/rate, from a seeded xorshift. */
static double next_gap(uint64_t *st, double rate)
{
    uint64_t x = *st;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *st = x;
    double u = ((double)(x >> 11) + 0.5) / 9007199254740992.0;
    return -log(u) / rate;
}

int bench_run_level(const bench_opts *o, const bench_prompt *prompts, size_t n, int concurrency, double rate,
                    bench_result *results, char *err, size_t errlen)
{
    loop L = {.o = o, .err = err, .errlen = errlen};
    err[0] = 0;
    if (resolve(&L) < 0)
        return -1;
    L.ep = epoll_create1(EPOLL_CLOEXEC);
    bench_stream *st = calloc(n ? n : 1, sizeof *st);
    if (L.ep < 0 || !st) {
        snprintf(err, errlen, "out of memory");
        free(st);
        return -1;
    }
    bench_progress prog;
    char label[64];
    if (rate > 0 && isfinite(rate))
        snprintf(label, sizeof label, "rate %g/s", rate);
    else
        snprintf(label, sizeof label, "c=%d", concurrency);
    double t0 = bench_now();
    bench_progress_start(&prog, o->progress, label, t0);
    uint64_t rng = o->seed * 0x9E3779B97F4A7C15ull + 1;
    double next_arrival = t0;
    size_t next = 0;
    int rc = 0;
    while (L.n_finished < n) {
        double now = bench_now();
        while (next < n && (concurrency <= 0 || next - L.n_finished < (size_t)concurrency) &&
               now >= next_arrival) {
            bench_stream *s = &st[next];
            bench_stream_begin(s, &results[next], &prompts[next], now);
            s->n_finished = &L.n_finished;
            s->n_tokens = &L.n_tokens;
            s->n_failed = &L.n_failed;
            results[next].start = now - t0;
            if (start_request(&L, s) < 0) {
                rc = -1;
                goto out;
            }
            next++;
            if (rate > 0 && isfinite(rate))
                next_arrival += next_gap(&rng, rate);
        }
        int timeout = 100;
        if (next < n && next_arrival > now) {
            double ms = ceil((next_arrival - now) * 1000.0);
            if (ms < timeout)
                timeout = (int)ms;
        }
        struct epoll_event evs[256];
        int ne = epoll_wait(L.ep, evs, 256, timeout);
        if (ne < 0 && errno != EINTR) {
            snprintf(err, errlen, "epoll_wait: %s", strerror(errno));
            rc = -1;
            goto out;
        }
        for (int i = 0; i < ne; i++) {
            bench_conn *c = evs[i].data.ptr;
            if (c->dead)
                continue;
            if (evs[i].events & (EPOLLOUT | EPOLLERR | EPOLLHUP))
                conn_writable(&L, c);
            if (!c->dead && (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)))
                conn_readable(&L, c);
        }
        bench_progress_update(&prog, L.n_finished, L.n_failed, n, L.n_tokens, bench_now());
    }
out:
    bench_progress_end(&prog);
    for (size_t i = 0; i < L.n_conns; i++) {
        bench_conn *c = L.conns[i];
        if (c->fd >= 0 && !c->dead)
            close(c->fd);
        bench_h2_free(c);
        free(c->out.p);
        free(c->h1.hdr);
        free(c);
    }
    free(L.conns);
    for (size_t i = 0; i < n; i++)
        free(st[i].buf);
    free(st);
    close(L.ep);
    return rc;
}

void bench_results_free(bench_result *r, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(r[i].itl);
        free(r[i].error);
    }
}
