/* The tests' HTTP/2 client (see h2_client.h). */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <nghttp2/nghttp2.h>

#include "h2_client.h"

typedef struct cli {
    int fd;
    h2_result *res;
    int32_t *ids;
    int n;
    int open;
    size_t reset_after;
    const char *body;
    size_t body_len, body_off[64];
} cli;

static int find(cli *c, int32_t id)
{
    for (int i = 0; i < c->n; i++)
        if (c->ids[i] == id)
            return i;
    return -1;
}

static int on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t nl, const uint8_t *value,
                     size_t vl, uint8_t flags, void *ud)
{
    (void)s;
    (void)flags;
    (void)vl;
    cli *c = ud;
    int i = find(c, f->hd.stream_id);
    if (i >= 0 && nl == 7 && memcmp(name, ":status", 7) == 0)
        c->res[i].status = atoi((const char *)value);
    return 0;
}

static int on_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data, size_t len, void *ud)
{
    (void)flags;
    cli *c = ud;
    int i = find(c, id);
    if (i < 0)
        return 0;
    h2_result *r = &c->res[i];
    size_t take = len < sizeof r->body - 1 - r->len ? len : sizeof r->body - 1 - r->len;
    memcpy(r->body + r->len, data, take);
    r->len += take;
    r->body[r->len] = '\0';
    if (c->reset_after && r->len >= c->reset_after)
        nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
    return 0;
}

static int on_close(nghttp2_session *s, int32_t id, uint32_t err, void *ud)
{
    (void)s;
    (void)err;
    cli *c = ud;
    int i = find(c, id);
    if (i >= 0 && !c->res[i].closed) {
        c->res[i].closed = 1;
        c->open--;
    }
    return 0;
}

static ssize_t read_body(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length, uint32_t *flags,
                         nghttp2_data_source *src, void *ud)
{
    (void)s;
    (void)id;
    (void)ud;
    cli *c = ud;
    size_t *off = &c->body_off[(intptr_t)src->ptr];
    size_t n = c->body_len - *off < length ? c->body_len - *off : length;
    memcpy(buf, c->body + *off, n);
    *off += n;
    if (*off == c->body_len)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

int h2_run(int port, const char *path, const char *body, int n, size_t reset_after, h2_result *out)
{
    if (n > 64)
        return -1;
    memset(out, 0, sizeof *out * (size_t)n);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        close(fd);
        return -1;
    }
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    int32_t ids[64];
    cli c = {.fd = fd, .res = out, .ids = ids, .n = n, .reset_after = reset_after, .body = body,
             .body_len = strlen(body)};
    nghttp2_session_callbacks *cb;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_close);
    nghttp2_session *s;
    nghttp2_session_client_new(&s, cb, &c);
    nghttp2_session_callbacks_del(cb);
    nghttp2_submit_settings(s, NGHTTP2_FLAG_NONE, NULL, 0);
    char portbuf[32];
    snprintf(portbuf, sizeof portbuf, "127.0.0.1:%d", port);
#define NV(a, b) {(uint8_t *)(a), (uint8_t *)(b), strlen(a), strlen(b), NGHTTP2_NV_FLAG_NONE}
    for (int i = 0; i < n; i++) {
        nghttp2_nv hdrs[] = {NV(":method", "POST"), NV(":scheme", "http"), NV(":authority", portbuf),
                             NV(":path", path), NV("content-type", "application/json")};
        nghttp2_data_provider prd = {.source.ptr = (void *)(intptr_t)i, .read_callback = read_body};
        ids[i] = nghttp2_submit_request(s, NULL, hdrs, sizeof hdrs / sizeof hdrs[0], &prd, NULL);
    }
    c.open = n;
    int rc = 0;
    while (c.open > 0) {
        const uint8_t *data;
        ssize_t k;
        while ((k = nghttp2_session_mem_send(s, &data)) > 0)
            if (send(fd, data, (size_t)k, MSG_NOSIGNAL) != k) {
                rc = -1;
                goto out;
            }
        if (c.open <= 0)
            break;
        uint8_t buf[16384];
        ssize_t got = recv(fd, buf, sizeof buf, 0);
        if (got <= 0 || nghttp2_session_mem_recv(s, buf, (size_t)got) < 0) {
            rc = -1;
            break;
        }
    }
out:
    nghttp2_session_del(s);
    close(fd);
    return rc;
}
