/*
 * h2c (prior knowledge) for the bench client: nghttp2's session API over
 * our non-blocking socket. Many streams share one connection; bytes in go
 * through nghttp2_session_mem_recv, bytes out are queued in c->out by
 * nghttp2_session_mem_send and written by the event loop.
 */
#include "config.h"

#include "bench/bench_client.h"

#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int on_header(nghttp2_session *sess, const nghttp2_frame *frame, const uint8_t *name, size_t namelen,
                     const uint8_t *value, size_t valuelen, uint8_t flags, void *user)
{
    (void)flags;
    (void)user;
    if (frame->hd.type != NGHTTP2_HEADERS || namelen != 7 || memcmp(name, ":status", 7) != 0)
        return 0;
    bench_stream *s = nghttp2_session_get_stream_user_data(sess, frame->hd.stream_id);
    if (s) {
        char v[8] = {0};
        memcpy(v, value, valuelen < 7 ? valuelen : 7);
        int st = atoi(v);
        if (st >= 200 || s->status == 0)
            bench_stream_set_status(s, st);
    }
    return 0;
}

static int on_data(nghttp2_session *sess, uint8_t flags, int32_t id, const uint8_t *data, size_t len, void *user)
{
    (void)flags;
    (void)user;
    bench_stream *s = nghttp2_session_get_stream_user_data(sess, id);
    if (s)
        bench_stream_data(s, (const char *)data, len, bench_now());
    return 0;
}

static int on_close(nghttp2_session *sess, int32_t id, uint32_t code, void *user)
{
    bench_conn *c = user;
    bench_stream *s = nghttp2_session_get_stream_user_data(sess, id);
    if (!s)
        return 0;
    char msg[96];
    snprintf(msg, sizeof msg, "HTTP/2 stream reset: %s", nghttp2_http2_strerror(code));
    bench_stream_finish(s, bench_now(), code == NGHTTP2_NO_ERROR ? NULL : msg);
    nghttp2_session_set_stream_user_data(sess, id, NULL);
    s->conn = NULL;
    c->n_streams--;
    return 0;
}

static ssize_t read_body(nghttp2_session *sess, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
                         nghttp2_data_source *src, void *user)
{
    (void)sess;
    (void)id;
    (void)user;
    bench_stream *s = src->ptr;
    size_t off = s->h2_off;
    size_t left = s->prompt->body_len - off;
    size_t n = left < len ? left : len;
    memcpy(buf, s->prompt->body + off, n);
    s->h2_off += n;
    if (s->h2_off == s->prompt->body_len)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

int bench_h2_init(bench_conn *c)
{
    nghttp2_session_callbacks *cb;
    if (nghttp2_session_callbacks_new(&cb) != 0)
        return -1;
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_close);
    nghttp2_session *sess = NULL;
    int rc = nghttp2_session_client_new(&sess, cb, c);
    nghttp2_session_callbacks_del(cb);
    if (rc != 0)
        return -1;
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 1024},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 24},
    };
    nghttp2_submit_settings(sess, NGHTTP2_FLAG_NONE, iv, 2);
    /* a large connection window: streamed answers never wait on us */
    nghttp2_session_set_local_window_size(sess, NGHTTP2_FLAG_NONE, 0, 1 << 30);
    c->h2 = sess;
    return bench_h2_flush(c);
}

#define NV(n, v) {(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), NGHTTP2_NV_FLAG_NONE}

int bench_h2_submit(bench_conn *c, const bench_opts *o, bench_stream *s)
{
    char authority[300], clen[24], auth[300] = "";
    snprintf(authority, sizeof authority, "%s:%d", o->host, o->port);
    snprintf(clen, sizeof clen, "%zu", s->prompt->body_len);
    nghttp2_nv nv[7] = {
        NV(":method", "POST"),
        NV(":scheme", "http"),
        NV(":authority", authority),
        NV(":path", "/v1/completions"),
        NV("content-type", "application/json"),
        NV("content-length", clen),
    };
    size_t nnv = 6;
    if (o->api_key) {
        snprintf(auth, sizeof auth, "Bearer %.256s", o->api_key);
        nghttp2_nv a = NV("authorization", auth);
        nv[nnv++] = a;
    }
    s->h2_off = 0;
    nghttp2_data_provider dp;
    dp.source.ptr = s;
    dp.read_callback = read_body;
    int32_t id = nghttp2_submit_request(c->h2, NULL, nv, nnv, &dp, s);
    if (id < 0)
        return -1;
    s->h2_id = id;
    s->conn = c;
    c->n_streams++;
    return bench_h2_flush(c);
}

int bench_h2_flush(bench_conn *c)
{
    for (;;) {
        const uint8_t *data;
        ssize_t n = nghttp2_session_mem_send(c->h2, &data);
        if (n < 0)
            return -1;
        if (n == 0)
            return 0;
        if (bench_buf_append(&c->out, data, (size_t)n) < 0)
            return -1;
    }
}

int bench_h2_input(bench_conn *c, const char *p, size_t n, char *err, size_t errlen)
{
    ssize_t r = nghttp2_session_mem_recv(c->h2, (const uint8_t *)p, n);
    if (r < 0) {
        snprintf(err, errlen, "HTTP/2: %s", nghttp2_strerror((int)r));
        return -1;
    }
    if (bench_h2_flush(c) < 0) {
        snprintf(err, errlen, "HTTP/2: cannot queue frames");
        return -1;
    }
    return 0;
}

static int fail_one(nghttp2_session *sess, bench_conn *c, int32_t id, double now, const char *err)
{
    bench_stream *s = nghttp2_session_get_stream_user_data(sess, id);
    if (!s)
        return 0;
    bench_stream_finish(s, now, err);
    nghttp2_session_set_stream_user_data(sess, id, NULL);
    s->conn = NULL;
    c->n_streams--;
    return 1;
}

void bench_h2_fail_all(bench_conn *c, double now, const char *err)
{
    if (!c->h2)
        return;
    /* stream ids are odd and increase; walk what we submitted */
    int32_t last = nghttp2_session_get_next_stream_id(c->h2);
    for (int32_t id = 1; id < last && c->n_streams > 0; id += 2)
        fail_one(c->h2, c, id, now, err);
}

void bench_h2_free(bench_conn *c)
{
    if (c->h2)
        nghttp2_session_del(c->h2);
    c->h2 = NULL;
}
