/*
 * The streaming client's pieces: a request in flight (its SSE parse and
 * timings), a connection (HTTP/1.1 or h2c) with its output buffer.
 */
#ifndef SY_BENCH_CLIENT_H
#define SY_BENCH_CLIENT_H

#include "bench/bench.h"

#include <stddef.h>
#include <stdint.h>

struct bench_conn;

typedef struct bench_stream {
    bench_result *res;
    const bench_prompt *prompt;
    double t_send;       /* absolute, bench_now() */
    double t_last;       /* last token chunk */
    int status;
    int saw_done;        /* data: [DONE] */
    int saw_usage;
    int failed;
    int raw;             /* keep the body whole (discovery requests) */
    char *buf;           /* SSE line buffer, or the error body */
    size_t len, cap;
    struct bench_conn *conn;
    int32_t h2_id;
    size_t h2_off;       /* request body bytes handed to nghttp2 */
    size_t *n_finished;  /* counters of the level, bumped by finish */
    size_t *n_failed;
    long *n_tokens;
    int finished;
    int resent;          /* sent again on a new connection (bench_loop.c) */
} bench_stream;

/* bench_sse.c */
void bench_stream_begin(bench_stream *s, bench_result *res, const bench_prompt *p, double now);
void bench_stream_set_status(bench_stream *s, int status);
int bench_stream_data(bench_stream *s, const char *p, size_t n, double now);
/* err: a transport failure, or NULL when the answer ended normally. */
void bench_stream_finish(bench_stream *s, double now, const char *err);

typedef struct bench_buf {
    char *p;
    size_t len, off, cap;
} bench_buf;
int bench_buf_append(bench_buf *b, const void *p, size_t n);
void bench_buf_compact(bench_buf *b);

/* HTTP/1.1 answer parser states */
enum { BENCH_H1_HEAD, BENCH_H1_LEN, BENCH_H1_CSIZE, BENCH_H1_CDATA, BENCH_H1_CCRLF, BENCH_H1_TRAILER,
       BENCH_H1_UNTIL_CLOSE };

typedef struct bench_h1 {
    int state;           /* parser state (bench_http1.c) */
    char *hdr;
    size_t hdr_len, hdr_cap;
    int chunked;
    long long remaining; /* content-length left, or current chunk left */
    int close_after;
    int done;
} bench_h1;

typedef struct bench_conn {
    int fd;
    int connected;       /* connect() finished */
    int want_write;      /* EPOLLOUT registered */
    int dead;
    bench_buf out;
    /* HTTP/1.1: one request at a time */
    bench_h1 h1;
    bench_stream *cur;
    long n_answers;      /* answers completed here: a reused connection when > 0 */
    /* h2c */
    void *h2;            /* nghttp2_session */
    int n_streams;
    struct bench_conn *next_idle;
} bench_conn;

/* bench_http1.c */
int bench_h1_request(bench_conn *c, const bench_opts *o, bench_stream *s);
/* Feeds bytes; returns -1 on a protocol error (message in err). On the end
 * of an answer the stream is finished and c->cur cleared. */
int bench_h1_input(bench_conn *c, const char *p, size_t n, double now, char *err, size_t errlen);

/* bench_h2.c */
int bench_h2_init(bench_conn *c);
int bench_h2_submit(bench_conn *c, const bench_opts *o, bench_stream *s);
/* Feeds bytes, then queues what nghttp2 wants to send into c->out. */
int bench_h2_input(bench_conn *c, const char *p, size_t n, char *err, size_t errlen);
int bench_h2_flush(bench_conn *c);
/* Connection lost: finishes every open stream with err. */
void bench_h2_fail_all(bench_conn *c, double now, const char *err);
void bench_h2_free(bench_conn *c);

#endif
