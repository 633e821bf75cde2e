/*
 * frontend/http: the listener and one epoll event loop per I/O thread.
 *
 * All sockets are non-blocking. The listening socket is shared by every
 * loop (EPOLLEXCLUSIVE wakes one of them per connection); a connection then
 * stays on the loop that accepted it, with its streams and jobs. The engine
 * thread reaches a loop only through its event queue and eventfd
 * (http_job.c); the loop thread does all the socket writing.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http.h"

#define H2_PREFACE "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#define H2_PREFACE_LEN 24
#define WBUF_HIGH (256 * 1024) /* stop pulling from nghttp2 above this */
#define DRAIN_SECONDS 10
/* HTTP/1.1 requests pipelined behind one still being answered are held
 * unparsed; past this much, reading pauses until the answer is done. */
#define RBUF_PIPELINE_MAX (64 * 1024)

time_t http_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec;
}

int http_server_listen(http_server *s, sy_err *err)
{
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    int gai = getaddrinfo(s->cfg.host, s->cfg.port, &hints, &res);
    if (gai)
        return sy_err_set(err, SY_ERR_INVALID, "http: listen %s:%s: %s", s->cfg.host, s->cfg.port, gai_strerror(gai));
    int fd = -1, saved = 0;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            saved = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 1024) == 0)
            break;
        saved = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0)
        return sy_err_set(err, SY_ERR_IO, "http: cannot listen on %s:%s: %s", s->cfg.host, s->cfg.port,
                          strerror(saved));
    s->lfd = fd;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char hostbuf[NI_MAXHOST] = "?", portbuf[NI_MAXSERV] = "?";
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
        getnameinfo((struct sockaddr *)&ss, sl, hostbuf, sizeof hostbuf, portbuf, sizeof portbuf,
                    NI_NUMERICHOST | NI_NUMERICSERV);
    sy_logf(s->host, SY_LOG_INFO, HTTP_NAME, "listening on %s%s%s:%s (%s, HTTP/2 and HTTP/1.1)",
            strchr(hostbuf, ':') ? "[" : "", hostbuf, strchr(hostbuf, ':') ? "]" : "", portbuf,
            s->ssl_ctx ? "TLS" : "cleartext");
    return SY_OK;
}

/* An HTTP/1.1 client pipelining more while its request is answered, or
 * sending requests without reading the answers: reading them would only
 * grow rbuf or wbuf. Reading resumes when the answer is done / taken. */
static int conn_read_paused(const http_conn *c)
{
    if (c->proto != HTTP_PROTO_H1)
        return 0;
    if (c->wbuf.len >= c->loop->srv->cfg.max_pending_output)
        return 1;
    return c->streams && c->streams->dispatched && c->rbuf.len >= RBUF_PIPELINE_MAX;
}

static void conn_update_events(http_conn *c, int want_out)
{
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = (conn_read_paused(c) ? 0 : EPOLLIN | EPOLLRDHUP) | (want_out ? EPOLLOUT : 0);
    ev.data.ptr = c;
    epoll_ctl(c->loop->epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

void http_conn_close(http_conn *c)
{
    if (!c || c->fd < 0)
        return;
    http_loop *l = c->loop;
    /* Streams first: each detaches its job, which cancels what still runs. */
    while (c->streams) {
        http_stream *st = c->streams;
        c->streams = st->next;
        http_stream_free(st);
    }
    if (c->h2)
        nghttp2_session_del(c->h2);
    c->h2 = NULL;
    http_tls_conn_free(c);
    epoll_ctl(l->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->fd = -1;
    if (c->prev)
        c->prev->next = c->next;
    else
        l->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    hbuf_free(&c->rbuf);
    hbuf_free(&c->wbuf);
    free(c);
}

/* Writes wbuf to the socket: 0 ok (maybe partial), -1 fatal. */
static int conn_write_out(http_conn *c)
{
    while (c->wbuf.len) {
        long n;
        if (c->ssl) {
            n = http_tls_write(c, hbuf_data(&c->wbuf), c->wbuf.len);
            if (n == -1)
                return 0;
            if (n < 0)
                return -1;
        } else {
            n = send(c->fd, hbuf_data(&c->wbuf), c->wbuf.len, MSG_NOSIGNAL);
            if (n < 0) {
                if (errno == EAGAIN || errno == EWOULDBLOCK)
                    return 0;
                if (errno == EINTR)
                    continue;
                return -1;
            }
        }
        hbuf_consume(&c->wbuf, (size_t)n);
        c->last_write = http_now();
    }
    return 0;
}

void http_conn_flush(http_conn *c)
{
    if (c->fd < 0 || c->closed)
        return;
    if (c->proto == HTTP_PROTO_H1)
        http_h1_after(c);
    if (!c->wbuf.len)
        c->last_write = http_now(); /* the write-stall clock runs from the last progress */
    for (;;) {
        if (c->h2 && c->wbuf.len < WBUF_HIGH && http_h2_pump(c) < 0) {
            c->closed = 1;
            return;
        }
        size_t before = c->wbuf.len;
        if (conn_write_out(c) < 0) {
            c->closed = 1;
            return;
        }
        if (c->wbuf.len || before == 0)
            break; /* socket full, or nothing more to send */
        if (!c->h2 || !nghttp2_session_want_write(c->h2))
            break;
    }
    if (!c->wbuf.len && c->want_close) {
        c->closed = 1;
        return;
    }
    if (c->proto == HTTP_PROTO_H1 && !c->streams && c->rbuf.len && !c->want_close &&
        c->wbuf.len < c->loop->srv->cfg.max_pending_output) {
        /* Pipelined requests held back while the answers before them were
         * not taken (http_h1_on_read): there is room again. */
        size_t before = c->rbuf.len;
        if (http_h1_on_read(c) < 0) {
            c->closed = 1;
            return;
        }
        if (c->rbuf.len != before) {
            http_conn_flush(c);
            return;
        }
    }
    if (c->h2 && !nghttp2_session_want_read(c->h2) && !nghttp2_session_want_write(c->h2) && !c->wbuf.len) {
        c->closed = 1;
        return;
    }
    conn_update_events(c, c->wbuf.len > 0);
}

static void conn_accept(http_loop *l)
{
    http_server *s = l->srv;
    for (;;) {
        int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EMFILE || errno == ENFILE)
                sy_logf(s->host, SY_LOG_WARN, HTTP_NAME, "accept: %s", strerror(errno));
            return;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        http_conn *c = calloc(1, sizeof *c);
        if (!c) {
            close(fd);
            continue;
        }
        c->loop = l;
        c->fd = fd;
        c->h1_keepalive = 1;
        c->started = c->last_active = c->req_started = c->last_write = http_now();
        if (s->ssl_ctx && http_tls_accept(c) < 0) {
            close(fd);
            free(c);
            continue;
        }
        struct epoll_event ev;
        memset(&ev, 0, sizeof ev);
        ev.events = EPOLLIN | EPOLLRDHUP;
        ev.data.ptr = c;
        if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
            http_tls_conn_free(c);
            close(fd);
            free(c);
            continue;
        }
        c->next = l->conns;
        if (l->conns)
            l->conns->prev = c;
        l->conns = c;
    }
}

/* Reads what the socket has into rbuf: 0 ok, -1 eof or error. */
static int conn_read_in(http_conn *c)
{
    char buf[16384];
    if (conn_read_paused(c))
        return 0;
    for (;;) {
        long n;
        if (c->ssl) {
            n = http_tls_read(c, buf, sizeof buf);
            if (n == -1)
                return 0;
            if (n <= 0)
                return -1;
        } else {
            n = recv(c->fd, buf, sizeof buf, 0);
            if (n < 0) {
                if (errno == EAGAIN || errno == EWOULDBLOCK)
                    return 0;
                if (errno == EINTR)
                    continue;
                return -1;
            }
            if (n == 0)
                return -1;
        }
        if (!c->rbuf.len && !c->streams)
            c->req_started = http_now(); /* the header timeout runs from a request's first byte */
        if (hbuf_append(&c->rbuf, buf, (size_t)n) < 0)
            return -1;
        c->last_active = http_now();
        /* Bound what one wake-up buffers; the parsers enforce the real limits. */
        if (c->rbuf.len > (1u << 20) || conn_read_paused(c))
            return 0;
    }
}

static void conn_on_readable(http_conn *c)
{
    if (c->tls_handshaking) {
        int r = http_tls_handshake(c);
        if (r < 0) {
            c->closed = 1;
            return;
        }
        if (r == 0) {
            http_conn_flush(c);
            return;
        }
    }
    int eof = conn_read_in(c) < 0;
    if (c->proto == HTTP_PROTO_UNKNOWN && c->rbuf.len) {
        size_t n = c->rbuf.len < H2_PREFACE_LEN ? c->rbuf.len : H2_PREFACE_LEN;
        if (memcmp(hbuf_data(&c->rbuf), H2_PREFACE, n) != 0)
            c->proto = HTTP_PROTO_H1;
        else if (n == H2_PREFACE_LEN)
            c->proto = HTTP_PROTO_H2;
        if (c->proto == HTTP_PROTO_H2 && http_h2_init(c) < 0) {
            c->closed = 1;
            return;
        }
    }
    int rc = 0;
    if (c->proto == HTTP_PROTO_H1)
        rc = http_h1_on_read(c);
    else if (c->proto == HTTP_PROTO_H2)
        rc = http_h2_on_read(c);
    if (rc < 0) {
        http_conn_flush(c);
        c->closed = 1;
        return;
    }
    if (eof) {
        /* The client is gone (or half-closed): nothing more can reach it
         * reliably, so running requests are cancelled with the close. */
        if (!c->streams || c->proto != HTTP_PROTO_H1)
            c->closed = 1;
        else {
            c->want_close = 1;
            c->h1_keepalive = 0;
        }
    }
    http_conn_flush(c);
}

static void loop_sweep(http_loop *l)
{
    http_server *s = l->srv;
    time_t now = http_now();
    http_conn *next;
    for (http_conn *c = l->conns; c; c = next) {
        next = c->next;
        int busy = c->streams != NULL || c->wbuf.len > 0;
        if (s->stopping && !busy) {
            if (c->h2 && !c->closed) {
                /* GOAWAY tells an HTTP/2 client which streams were never
                 * processed, so it can retry them elsewhere. */
                nghttp2_session_terminate_session(c->h2, NGHTTP2_NO_ERROR);
                http_h2_pump(c);
                conn_write_out(c);
            }
            http_conn_close(c);
            continue;
        }
        if (c->proto != HTTP_PROTO_H2 && !c->streams && c->rbuf.len > 0 &&
            now - c->req_started >= s->cfg.header_timeout) {
            /* Headers never completed: 408 over HTTP/1.1, then close. */
            if (c->proto == HTTP_PROTO_H1) {
                static const char resp[] = "HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n"
                                           "Connection: close\r\n\r\n";
                hbuf_append(&c->wbuf, resp, sizeof resp - 1);
            }
            c->want_close = 1;
            hbuf_reset(&c->rbuf);
            http_conn_flush(c);
        } else if (!busy && now - c->last_active >= s->cfg.idle_timeout) {
            c->closed = 1;
        } else if (c->wbuf.len && now - c->last_write >= s->cfg.idle_timeout) {
            /* The client has taken none of its output for idle_timeout: a
             * reader that went away without closing (half-open). */
            sy_logf(s->host, SY_LOG_WARN, HTTP_NAME,
                    "closing a connection that read nothing of %zu pending bytes for %d s (idle_timeout)",
                    c->wbuf.len, s->cfg.idle_timeout);
            c->closed = 1;
        } else if (c->tls_handshaking && now - c->started >= s->cfg.header_timeout) {
            c->closed = 1;
        }
        if (c->closed)
            http_conn_close(c);
    }
}

static void *loop_main(void *arg)
{
    http_loop *l = arg;
    http_server *s = l->srv;
    struct epoll_event evs[64];
    time_t stop_at = 0, last_sweep = http_now();
    for (;;) {
        if (s->stopping) {
            time_t now = http_now();
            if (!stop_at) {
                stop_at = now + DRAIN_SECONDS;
                epoll_ctl(l->epfd, EPOLL_CTL_DEL, s->lfd, NULL);
            }
            if (now >= stop_at) {
                /* Out of patience: drop every connection (cancelling its
                 * requests), then wait a little for their last events. */
                while (l->conns)
                    http_conn_close(l->conns);
            }
            if (!l->conns && l->live_jobs == 0)
                break;
            if (now >= stop_at + 5) {
                sy_logf(s->host, SY_LOG_WARN, HTTP_NAME, "loop %d: %d requests never ended; leaking them",
                        l->index, l->live_jobs);
                break;
            }
        }
        int n = epoll_wait(l->epfd, evs, 64, s->stopping ? 100 : 500);
        int events_queued = 0;
        for (int i = 0; i < n; i++) {
            void *p = evs[i].data.ptr;
            if (p == &s->lfd) {
                if (!s->stopping)
                    conn_accept(l);
                continue;
            }
            if (p == &l->evfd) {
                /* Drained after the batch: handling an event may close and
                 * free any connection (a failed write), and a later entry
                 * of this batch may be that connection. */
                events_queued = 1;
                continue;
            }
            http_conn *c = p;
            if (c->fd < 0)
                continue;
            if (evs[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
                conn_on_readable(c);
            if (!c->closed && (evs[i].events & (EPOLLHUP | EPOLLERR)) && conn_read_paused(c))
                c->closed = 1; /* reading is paused, so the hangup would be reported forever */
            if (!c->closed && (evs[i].events & EPOLLOUT))
                http_conn_flush(c);
            if (c->closed)
                http_conn_close(c);
        }
        if (events_queued) {
            uint64_t v;
            while (read(l->evfd, &v, sizeof v) > 0) {
            }
            http_loop_drain_events(l);
        }
        time_t now = http_now();
        if (now != last_sweep || s->stopping) {
            last_sweep = now;
            loop_sweep(l);
        }
    }
    http_loop_drain_events(l);
    while (l->conns)
        http_conn_close(l->conns);
    return NULL;
}

static void loop_free(http_loop *l)
{
    if (l->epfd >= 0)
        close(l->epfd);
    if (l->evfd >= 0)
        close(l->evfd);
    pthread_mutex_destroy(&l->qlock);
    while (l->qhead) {
        http_evitem *it = l->qhead;
        l->qhead = *(http_evitem **)it; /* first member is next */
        free(it);
    }
}

int http_loops_start(http_server *s, sy_err *err)
{
    s->n_loops = s->cfg.io_threads;
    s->loops = calloc((size_t)s->n_loops, sizeof *s->loops);
    if (!s->loops)
        return sy_err_set(err, SY_ERR_NOMEM, "http: cannot allocate %d loops", s->n_loops);
    int started = 0, rc = SY_OK;
    for (int i = 0; i < s->n_loops; i++) {
        http_loop *l = &s->loops[i];
        l->srv = s;
        l->index = i;
        pthread_mutex_init(&l->qlock, NULL);
        l->epfd = epoll_create1(EPOLL_CLOEXEC);
        l->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (l->epfd < 0 || l->evfd < 0) {
            rc = sy_err_set(err, SY_ERR_IO, "http: epoll/eventfd: %s", strerror(errno));
            break;
        }
        struct epoll_event ev;
        memset(&ev, 0, sizeof ev);
        ev.events = EPOLLIN | EPOLLEXCLUSIVE;
        ev.data.ptr = &s->lfd;
        epoll_ctl(l->epfd, EPOLL_CTL_ADD, s->lfd, &ev);
        ev.events = EPOLLIN;
        ev.data.ptr = &l->evfd;
        epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->evfd, &ev);
    }
    for (int i = 0; rc == SY_OK && i < s->n_loops; i++) {
        if (pthread_create(&s->loops[i].thread, NULL, loop_main, &s->loops[i]) != 0) {
            rc = sy_err_set(err, SY_ERR_INTERNAL, "http: cannot start I/O thread %d", i);
            break;
        }
        s->loops[i].running = 1;
        started++;
    }
    if (rc != SY_OK) {
        s->stopping = 1;
        for (int i = 0; i < started; i++) {
            uint64_t one = 1;
            if (write(s->loops[i].evfd, &one, sizeof one) < 0) {
            }
            pthread_join(s->loops[i].thread, NULL);
        }
        for (int i = 0; i < s->n_loops; i++)
            loop_free(&s->loops[i]);
        free(s->loops);
        s->loops = NULL;
        close(s->lfd);
        s->lfd = -1;
    }
    return rc;
}

void http_loops_stop(http_server *s)
{
    s->stopping = 1;
    for (int i = 0; i < s->n_loops; i++) {
        uint64_t one = 1;
        if (write(s->loops[i].evfd, &one, sizeof one) < 0) {
        }
    }
    for (int i = 0; i < s->n_loops; i++)
        if (s->loops[i].running)
            pthread_join(s->loops[i].thread, NULL);
    for (int i = 0; i < s->n_loops; i++)
        loop_free(&s->loops[i]);
    free(s->loops);
    s->loops = NULL;
    s->n_loops = 0;
    if (s->lfd >= 0)
        close(s->lfd);
    s->lfd = -1;
    s->stopping = 0;
}
