/*
 * frontend/http: HTTP/2 through nghttp2's session API (mem_recv/mem_send,
 * no socket of its own). Many streams per connection; a streamed answer
 * is a data provider that returns NGHTTP2_ERR_DEFERRED while its buffer is
 * empty and is resumed when the next event arrives. nghttp2 applies flow
 * control: a client that stops reading stops us pulling, never the engine.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"

static void unlink_stream(http_conn *c, http_stream *st)
{
    for (http_stream **pp = &c->streams; *pp; pp = &(*pp)->next)
        if (*pp == st) {
            *pp = st->next;
            return;
        }
}

static int on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *user_data)
{
    http_conn *c = user_data;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    http_stream *st = http_stream_new(c, frame->hd.stream_id);
    if (!st)
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    st->next = c->streams;
    c->streams = st;
    nghttp2_session_set_stream_user_data(session, frame->hd.stream_id, st);
    return 0;
}

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name, size_t namelen,
                     const uint8_t *value, size_t valuelen, uint8_t flags, void *user_data)
{
    (void)flags;
    (void)user_data;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    http_stream *st = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
    if (!st)
        return 0;
    if (http_stream_header(st, (const char *)name, namelen, (const char *)value, valuelen) < 0)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* resets the stream */
    return 0;
}

static int on_data_chunk(nghttp2_session *session, uint8_t flags, int32_t stream_id, const uint8_t *data, size_t len,
                         void *user_data)
{
    (void)flags;
    http_conn *c = user_data;
    http_stream *st = nghttp2_session_get_stream_user_data(session, stream_id);
    if (!st || st->body_too_large)
        return 0;
    if (st->body.len + len > c->loop->srv->cfg.max_body) {
        st->body_too_large = 1;
        hbuf_free(&st->body);
        return 0;
    }
    hbuf_append(&st->body, data, len);
    return 0;
}

static int on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *user_data)
{
    (void)user_data;
    if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA)
        return 0;
    if (!(frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
        return 0;
    http_stream *st = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
    if (!st || st->dispatched)
        return 0;
    st->dispatched = 1;
    http_route(st);
    return 0;
}

static int on_stream_close(nghttp2_session *session, int32_t stream_id, uint32_t error_code, void *user_data)
{
    (void)error_code;
    http_conn *c = user_data;
    http_stream *st = nghttp2_session_get_stream_user_data(session, stream_id);
    if (!st)
        return 0;
    nghttp2_session_set_stream_user_data(session, stream_id, NULL);
    unlink_stream(c, st);
    http_stream_free(st);
    return 0;
}

int http_h2_init(http_conn *c)
{
    nghttp2_session_callbacks *cb;
    if (nghttp2_session_callbacks_new(&cb) != 0)
        return -1;
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
    int rv = nghttp2_session_server_new(&c->h2, cb, c);
    nghttp2_session_callbacks_del(cb);
    if (rv != 0)
        return -1;
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 256},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, (uint32_t)c->loop->srv->cfg.max_header_bytes},
    };
    if (nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, iv, sizeof iv / sizeof iv[0]) != 0)
        return -1;
    c->proto = HTTP_PROTO_H2;
    return 0;
}

int http_h2_on_read(http_conn *c)
{
    if (!c->rbuf.len)
        return 0;
    ssize_t n = nghttp2_session_mem_recv(c->h2, (const uint8_t *)hbuf_data(&c->rbuf), c->rbuf.len);
    if (n < 0)
        return -1;
    hbuf_consume(&c->rbuf, (size_t)n);
    return 0;
}

int http_h2_pump(http_conn *c)
{
    while (c->wbuf.len < (256u << 10)) {
        const uint8_t *data;
        ssize_t n = nghttp2_session_mem_send(c->h2, &data);
        if (n < 0)
            return -1;
        if (n == 0)
            break;
        if (hbuf_append(&c->wbuf, data, (size_t)n) < 0)
            return -1;
    }
    return 0;
}

static ssize_t read_body(nghttp2_session *session, int32_t stream_id, uint8_t *buf, size_t length,
                         uint32_t *data_flags, nghttp2_data_source *source, void *user_data)
{
    (void)session;
    (void)stream_id;
    (void)user_data;
    http_stream *st = source->ptr;
    size_t n = st->out.len < length ? st->out.len : length;
    if (n) {
        memcpy(buf, hbuf_data(&st->out), n);
        hbuf_consume(&st->out, n);
    }
    if (!st->out.len && st->resp_ended) {
        *data_flags |= NGHTTP2_DATA_FLAG_EOF;
        return (ssize_t)n;
    }
    if (!n) {
        st->h2_deferred = 1;
        return NGHTTP2_ERR_DEFERRED;
    }
    return (ssize_t)n;
}

#define NV(n, v) {(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), NGHTTP2_NV_FLAG_NONE}

int http_h2_submit(http_stream *st, int status, const char *ctype)
{
    char sbuf[8], rbuf[16];
    snprintf(sbuf, sizeof sbuf, "%d", status);
    snprintf(rbuf, sizeof rbuf, "%d", st->retry_after);
    nghttp2_nv nva[5] = {NV(":status", sbuf), NV("content-type", ctype)};
    size_t nv = 2;
    if (st->request_id[0]) {
        nghttp2_nv x = NV("x-request-id", st->request_id);
        nva[nv++] = x;
    }
    if (st->retry_after > 0) {
        nghttp2_nv x = NV("retry-after", rbuf);
        nva[nv++] = x;
    }
    if (strcmp(ctype, "text/event-stream") == 0) {
        nghttp2_nv x = NV("cache-control", "no-cache");
        nva[nv++] = x;
    }
    nghttp2_data_provider prd;
    prd.source.ptr = st;
    prd.read_callback = read_body;
    return nghttp2_submit_response(st->conn->h2, st->h2_id, nva, nv, &prd) == 0 ? 0 : -1;
}

void http_h2_resume(http_stream *st)
{
    if (st->h2_deferred && st->conn->h2) {
        st->h2_deferred = 0;
        nghttp2_session_resume_data(st->conn->h2, st->h2_id);
    }
}
