/*
 * The http frontend against a fake serving host (fake_host.c): raw-socket
 * HTTP/1.1 checks of every error path and of the answer shapes, then real
 * clients (curl over HTTP/1.1, h2c with prior knowledge, concurrent streams
 * on one HTTP/2 connection, TLS with ALPN when openssl(1) is there).
 *
 *   test_http            run the checks (make check)
 *   test_http serve PORT serve the fake model until stdin closes (check-openai)
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "fake_host.h"
#include "h2_client.h"
#include "../unit/test_check.h"

typedef struct resp {
    char buf[1 << 17];
    size_t len;
    int status;
} resp;

static int dial(int port)
{
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
    return fd;
}

static void send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k <= 0)
            return;
        p += k;
        n -= (size_t)k;
    }
}

/* Sends raw bytes, reads until the server closes (or 5 s). */
static void raw(int port, const char *req, size_t n, resp *r)
{
    memset(r, 0, sizeof *r);
    int fd = dial(port);
    if (fd < 0)
        return;
    send_all(fd, req, n);
    for (;;) {
        ssize_t k = recv(fd, r->buf + r->len, sizeof r->buf - 1 - r->len, 0);
        if (k <= 0)
            break;
        r->len += (size_t)k;
    }
    close(fd);
    r->buf[r->len] = '\0';
    if (strncmp(r->buf, "HTTP/1.1 ", 9) == 0)
        r->status = atoi(r->buf + 9);
}

/* One request with Connection: close. */
static void req(int port, const char *method, const char *path, const char *extra_headers, const char *body,
                resp *r)
{
    char head[4096];
    size_t blen = body ? strlen(body) : 0;
    int n = snprintf(head, sizeof head, "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n%s", method, path,
                     extra_headers ? extra_headers : "");
    if (body)
        n += snprintf(head + n, sizeof head - (size_t)n, "Content-Type: application/json\r\nContent-Length: %zu\r\n",
                      blen);
    n += snprintf(head + n, sizeof head - (size_t)n, "\r\n");
    char *all = malloc((size_t)n + blen + 1);
    memcpy(all, head, (size_t)n);
    if (blen)
        memcpy(all + n, body, blen);
    raw(port, all, (size_t)n + blen, r);
    free(all);
}

static const char *body_of(const resp *r)
{
    const char *b = strstr(r->buf, "\r\n\r\n");
    return b ? b + 4 : "";
}

static void test_basic(int port, fake_host *fh)
{
    resp r;
    req(port, "GET", "/health", NULL, NULL, &r);
    CHECK(r.status == 200);
    pthread_mutex_lock(&fh->mu);
    fh->ready = 0;
    pthread_mutex_unlock(&fh->mu);
    req(port, "GET", "/health", NULL, NULL, &r);
    CHECK(r.status == 503);
    /* Generation while not ready (loading, draining): 503 with Retry-After, before any parsing. */
    req(port, "POST", "/v1/completions", NULL, "{\"prompt\": \"hi\", \"max_tokens\": 2}", &r);
    CHECK(r.status == 503);
    CHECK_CONTAINS(r.buf, "Retry-After: 5");
    CHECK_CONTAINS(body_of(&r), "\"code\":\"not_ready\"");
    /* The tokenizer routes while loading: 503 (retry), never 500. */
    req(port, "POST", "/detokenize", NULL, "{\"tokens\": [1]}", &r);
    CHECK(r.status == 503);
    req(port, "POST", "/tokenize", NULL, "{\"prompt\": \"hi\"}", &r);
    CHECK(r.status == 503);
    pthread_mutex_lock(&fh->mu);
    fh->ready = 1;
    pthread_mutex_unlock(&fh->mu);
    req(port, "GET", "/v1/models", NULL, NULL, &r);
    CHECK(r.status == 200);
    CHECK_CONTAINS(body_of(&r), "\"id\":\"fake-model\"");
    CHECK_CONTAINS(body_of(&r), "\"object\":\"list\"");
    req(port, "GET", "/metrics", NULL, NULL, &r);
    CHECK(r.status == 200);
    CHECK_CONTAINS(r.buf, "text/plain; version=0.0.4");
    CHECK_CONTAINS(body_of(&r), "sy_requests_total");
    req(port, "POST", "/tokenize", NULL, "{\"prompt\":\"ab\"}", &r);
    CHECK(r.status == 200);
    CHECK_CONTAINS(body_of(&r), "\"tokens\":[1,97,98]");
    CHECK_CONTAINS(body_of(&r), "\"count\":3");
    req(port, "POST", "/tokenize", NULL, "{\"text\":\"ab\",\"add_special_tokens\":false}", &r);
    CHECK_CONTAINS(body_of(&r), "\"tokens\":[97,98]");
    req(port, "POST", "/detokenize", NULL, "{\"tokens\":[5,6]}", &r);
    CHECK(r.status == 200);
    CHECK_CONTAINS(body_of(&r), "{\"text\":\"t5 t6 \"}");
    req(port, "GET", "/health", "X-Request-Id: abc-123\r\n", NULL, &r);
    CHECK_CONTAINS(r.buf, "X-Request-Id: abc-123\r\n");
    req(port, "GET", "/health", NULL, NULL, &r);
    CHECK_CONTAINS(r.buf, "X-Request-Id: req-");
}

static void test_completions(int port)
{
    resp r;
    req(port, "POST", "/v1/completions", NULL, "{\"model\":\"fake-model\",\"prompt\":[5,6,7],\"max_tokens\":4}", &r);
    CHECK(r.status == 200);
    const char *b = body_of(&r);
    CHECK_CONTAINS(b, "\"object\":\"text_completion\"");
    CHECK_CONTAINS(b, "\"text\":\"t5 t6 t7 t5 \"");
    CHECK_CONTAINS(b, "\"finish_reason\":\"length\"");
    CHECK_CONTAINS(b, "\"prompt_tokens\":3,\"completion_tokens\":4,\"total_tokens\":7");
    req(port, "POST", "/v1/completions", NULL, "{\"prompt\":[5,6,7],\"max_tokens\":10,\"stop\":\"t7\"}", &r);
    CHECK_CONTAINS(body_of(&r), "\"text\":\"t5 t6 \"");
    CHECK_CONTAINS(body_of(&r), "\"finish_reason\":\"stop\"");
    req(port, "POST", "/v1/completions", NULL, "{\"prompt\":[5,6,7],\"max_tokens\":10,\"stop\":[\"x\",\"t6\"]}", &r);
    CHECK_CONTAINS(body_of(&r), "\"text\":\"t5 \"");
    req(port, "POST", "/v1/completions", NULL, "{\"prompt\":[5,6,7],\"max_tokens\":10,\"stop_token_ids\":[7]}", &r);
    CHECK_CONTAINS(body_of(&r), "\"text\":\"t5 t6 \"");
    CHECK_CONTAINS(body_of(&r), "\"finish_reason\":\"stop\"");
    req(port, "POST", "/v1/completions", NULL, "{\"prompt\":\"ab\",\"max_tokens\":2}", &r);
    CHECK_CONTAINS(body_of(&r), "\"text\":\"t1 t97 \"");
    req(port, "POST", "/v1/completions", NULL, "{\"prompt\":[5],\"max_tokens\":1,\"n\":3,\"seed\":7}", &r);
    CHECK_CONTAINS(body_of(&r), "\"index\":2");
    CHECK_CONTAINS(body_of(&r), "\"completion_tokens\":3");
    req(port, "POST", "/v1/completions", NULL, "{\"prompt\":[5,6],\"max_tokens\":2,\"logprobs\":2}", &r);
    b = body_of(&r);
    CHECK_CONTAINS(b, "\"tokens\":[\"t5 \",\"t6 \"]");
    CHECK_CONTAINS(b, "\"token_logprobs\":[-0.25,-0.5]");
    CHECK_CONTAINS(b, "\"text_offset\":[0,3]");
    CHECK_CONTAINS(b, "{\"t6 \":-1.25,\"t7 \":-2.25}");
}

static void test_chat(int port)
{
    resp r;
    req(port, "POST", "/v1/chat/completions", NULL,
        "{\"model\":\"fake-model\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":2}", &r);
    CHECK(r.status == 200);
    const char *b = body_of(&r);
    CHECK_CONTAINS(b, "\"object\":\"chat.completion\"");
    CHECK_CONTAINS(b, "\"message\":{\"role\":\"assistant\",\"content\":\"t60 t117 \"}");
    CHECK_CONTAINS(b, "\"logprobs\":null,\"finish_reason\":\"length\"");
    req(port, "POST", "/v1/chat/completions", NULL,
        "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_completion_tokens\":1,"
        "\"chat_template_kwargs\":{\"enable_thinking\":true}}",
        &r);
    CHECK_CONTAINS(body_of(&r), "\"reasoning_content\":\"pondering\"");
    req(port, "POST", "/v1/chat/completions", NULL,
        "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":1,\"logprobs\":true,"
        "\"top_logprobs\":2}",
        &r);
    b = body_of(&r);
    CHECK_CONTAINS(b, "\"logprobs\":{\"content\":[{\"token\":\"t60 \",\"logprob\":-0.25,\"bytes\":[116,54,48,32],"
                      "\"top_logprobs\":[{\"token\":\"t61 \",\"logprob\":-1.25");
    /* streaming with usage */
    req(port, "POST", "/v1/chat/completions", NULL,
        "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":2,\"stream\":true,"
        "\"stream_options\":{\"include_usage\":true}}",
        &r);
    CHECK(r.status == 200);
    CHECK_CONTAINS(r.buf, "Transfer-Encoding: chunked");
    CHECK_CONTAINS(r.buf, "Content-Type: text/event-stream");
    CHECK_CONTAINS(r.buf, "data: {\"id\":\"chatcmpl-");
    CHECK_CONTAINS(r.buf, "\"object\":\"chat.completion.chunk\"");
    CHECK_CONTAINS(r.buf, "\"delta\":{\"role\":\"assistant\",\"content\":\"\"}");
    CHECK_CONTAINS(r.buf, "\"delta\":{\"content\":\"t60 \"}");
    CHECK_CONTAINS(r.buf, "\"delta\":{},\"logprobs\":null,\"finish_reason\":\"length\"");
    CHECK_CONTAINS(r.buf, "\"choices\":[],\"usage\":{\"prompt_tokens\":");
    CHECK_CONTAINS(r.buf, "data: [DONE]\n\n\r\n0\r\n\r\n");
    /* completions streaming */
    req(port, "POST", "/v1/completions", NULL, "{\"prompt\":[9,8],\"max_tokens\":3,\"stream\":true}", &r);
    CHECK_CONTAINS(r.buf, "\"object\":\"text_completion\"");
    CHECK_CONTAINS(r.buf, "\"text\":\"t9 \",\"logprobs\":null,\"finish_reason\":null");
    CHECK_CONTAINS(r.buf, "data: [DONE]");
    /* an error after the stream started */
    req(port, "POST", "/v1/completions", NULL, "{\"prompt\":\"fail\",\"max_tokens\":9,\"stream\":true}", &r);
    CHECK(r.status == 200);
    CHECK_CONTAINS(r.buf, "data: {\"error\":{\"message\":\"fake engine fault\"");
    CHECK_CONTAINS(r.buf, "data: [DONE]");
    /* the same error before any output becomes a status */
    req(port, "POST", "/v1/completions", NULL, "{\"prompt\":\"fail\",\"max_tokens\":9}", &r);
    CHECK(r.status == 500);
}

static void expect_error(int port, const char *path, const char *headers, const char *body, int status,
                         const char *needle)
{
    resp r;
    req(port, "POST", path, headers, body, &r);
    if (r.status != status)
        fprintf(stderr, "expected %d for %s, got: %s\n", status, body, r.buf);
    CHECK(r.status == status);
    CHECK_CONTAINS(body_of(&r), "{\"error\":{\"message\":");
    if (needle)
        CHECK_CONTAINS(body_of(&r), needle);
}

static void test_errors(int port, fake_host *fh)
{
    const char *cc = "/v1/chat/completions", *c = "/v1/completions";
    expect_error(port, cc, NULL, "{\"messages\": [", 400, "line 1, column");
    expect_error(port, cc, NULL, "[1]", 400, "must be a JSON object");
    expect_error(port, cc, NULL, "{}", 400, "\"param\":\"messages\"");
    expect_error(port, cc, NULL,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"user\",\"content\":\"a\"},"
                 "{\"role\":\"user\",\"content\":5}]}",
                 400, "\"param\":\"messages[2].content\"");
    expect_error(port, cc, NULL, "{\"model\":\"gpt-9\",\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}", 404,
                 "\"code\":\"model_not_found\"");
    expect_error(port, c, NULL, "{\"prompt\":[1],\"max_tokens\":0}", 400, "\"param\":\"max_tokens\"");
    expect_error(port, c, NULL, "{\"prompt\":[1],\"max_tokens\":100000}", 400, "\"param\":\"max_tokens\"");
    expect_error(port, c, NULL, "{\"prompt\":[1,2],\"max_tokens\":4096}", 400, "context_length_exceeded");
    expect_error(port, c, NULL, "{\"prompt\":[1],\"temperature\":\"hot\"}", 400, "\"param\":\"temperature\"");
    expect_error(port, c, NULL, "{\"prompt\":[1],\"top_p\":0}", 400, "\"param\":\"top_p\"");
    expect_error(port, c, NULL, "{\"prompt\":[1],\"stop\":[1]}", 400, "\"param\":\"stop[0]\"");
    expect_error(port, c, NULL, "{\"prompt\":[1,\"x\"]}", 400, "\"param\":\"prompt[1]\"");
    expect_error(port, c, NULL, "{\"prompt\":\"busy\"}", 429, "\"type\":\"rate_limit_error\"");
    expect_error(port, c, NULL, "{\"prompt\":\"invalid\"}", 400, "the prompt says invalid");
    resp r;
    req(port, "POST", c, NULL, "{\"prompt\":\"busy\"}", &r);
    CHECK_CONTAINS(r.buf, "Retry-After: 1\r\n");
    /* Refused because a drain began between the ready check and submit: 503, not the queue-full 429 (a SIGTERM
     * under load once answered one request 429). */
    req(port, "POST", c, NULL, "{\"prompt\":\"closing\"}", &r);
    CHECK(r.status == 503);
    CHECK_CONTAINS(body_of(&r), "\"code\":\"not_ready\"");
    CHECK_CONTAINS(r.buf, "Retry-After: 5\r\n");
    pthread_mutex_lock(&fh->mu);
    fh->ready = 1;
    pthread_mutex_unlock(&fh->mu);
    req(port, "GET", "/nowhere", NULL, NULL, &r);
    CHECK(r.status == 404);
    CHECK_CONTAINS(body_of(&r), "\"code\":\"not_found\"");
    req(port, "GET", "/v1/completions", NULL, NULL, &r);
    CHECK(r.status == 405);
    /* over max_body (64K in this test): 413 without reading the body */
    char *big = malloc(70000);
    memset(big, ' ', 69999);
    big[0] = '{';
    big[69998] = '}';
    big[69999] = '\0';
    req(port, "POST", c, NULL, big, &r);
    CHECK(r.status == 413);
    CHECK_CONTAINS(body_of(&r), "max_body");
    /* chunked over the limit too */
    char head[] = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n10001\r\n";
    size_t hl = strlen(head);
    char *all = malloc(hl + 70000);
    memcpy(all, head, hl);
    memset(all + hl, 'a', 65536);
    raw(port, all, hl + 65536, &r);
    CHECK(r.status == 413);
    free(all);
    free(big);
    /* malformed request line, oversized header block */
    raw(port, "GARBAGE\r\n\r\n", 11, &r);
    CHECK(r.status == 400);
    char *hdr = malloc(80000);
    int n = snprintf(hdr, 80000, "GET /health HTTP/1.1\r\nX-Big: ");
    memset(hdr + n, 'b', 70000);
    memcpy(hdr + n + 70000, "\r\n\r\n", 5);
    raw(port, hdr, strlen(hdr), &r);
    CHECK(r.status == 431);
    free(hdr);
}

static void test_h1_framing(int port)
{
    resp r;
    /* two pipelined requests in one write, answered in order */
    const char *two = "GET /health HTTP/1.1\r\nHost: x\r\nX-Request-Id: one\r\n\r\n"
                      "POST /tokenize HTTP/1.1\r\nHost: x\r\nX-Request-Id: two\r\nContent-Length: 14\r\n"
                      "Connection: close\r\n\r\n{\"prompt\":\"a\"}";
    raw(port, two, strlen(two), &r);
    const char *a = strstr(r.buf, "X-Request-Id: one"), *b = strstr(r.buf, "X-Request-Id: two");
    CHECK(a && b && a < b);
    CHECK_CONTAINS(r.buf, "\"tokens\":[1,97]");
    /* chunked request body */
    const char *ch = "POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                     "5\r\n{\"pro\r\n9;ext=1\r\nmpt\":\"ab\"\r\n1\r\n}\r\n0\r\n\r\n";
    raw(port, ch, strlen(ch), &r);
    CHECK(r.status == 200);
    CHECK_CONTAINS(r.buf, "\"tokens\":[1,97,98]");
    /* Expect: 100-continue */
    const char *ex = "POST /tokenize HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 14\r\n"
                     "Connection: close\r\n\r\n{\"prompt\":\"a\"}";
    raw(port, ex, strlen(ex), &r);
    CHECK_CONTAINS(r.buf, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK");
    /* header timeout (1 s here): 408 then close */
    time_t t0 = time(NULL);
    raw(port, "GET /health HTTP/1.1\r\nHost:", 27, &r);
    CHECK(r.status == 408);
    CHECK(time(NULL) - t0 <= 4);
}

static int wait_counter(fake_host *fh, const int *field, int want, int ms)
{
    for (int i = 0; i < ms / 10; i++) {
        if (fake_host_counter(fh, field) >= want)
            return 1;
        usleep(10000);
    }
    return 0;
}

static void test_disconnect(int port, fake_host *fh)
{
    int before = fake_host_counter(fh, &fh->n_cancel);
    int fd = dial(port);
    const char *body = "{\"prompt\":\"slow\",\"max_tokens\":1000,\"stream\":true}";
    char head[512];
    int n = snprintf(head, sizeof head, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n%s",
                     strlen(body), body);
    send_all(fd, head, (size_t)n);
    char buf[4096];
    ssize_t k = recv(fd, buf, sizeof buf - 1, 0);
    CHECK(k > 0);
    if (k > 0) {
        buf[k] = '\0';
        CHECK_CONTAINS(buf, "200 OK");
    }
    close(fd);
    CHECK(wait_counter(fh, &fh->n_cancel, before + 1, 3000));
}

/* Many streams on one HTTP/2 connection (nghttp2 client, h2c prior
 * knowledge): each gets its own answer, with the same tokens as alone. */
static void test_h2_streams(int port, fake_host *fh)
{
    static h2_result res[32];
    int before = fake_host_counter(fh, &fh->n_submit);
    CHECK(h2_run(port, "/v1/completions", "{\"prompt\":[5,6,7],\"max_tokens\":6}", 32, 0, res) == 0);
    int ok = 0;
    for (int i = 0; i < 32; i++)
        ok += res[i].status == 200 && strstr(res[i].body, "\"text\":\"t5 t6 t7 t5 t6 t7 \"") != NULL;
    CHECK(ok == 32);
    CHECK(fake_host_counter(fh, &fh->n_submit) - before == 32);
    /* streaming, interleaved */
    CHECK(h2_run(port, "/v1/completions", "{\"prompt\":\"slow\",\"max_tokens\":4,\"stream\":true}", 16, 0, res) == 0);
    ok = 0;
    for (int i = 0; i < 16; i++)
        ok += res[i].status == 200 && strstr(res[i].body, "\"finish_reason\":\"length\"") &&
              strstr(res[i].body, "data: [DONE]\n\n");
    CHECK(ok == 16);
    /* errors decided before the first byte, per stream */
    CHECK(h2_run(port, "/v1/completions", "{\"prompt\":\"busy\"}", 2, 0, res) == 0);
    CHECK(res[0].status == 429 && res[1].status == 429);
    /* RST_STREAM mid-stream: every request is cancelled, the connection lives on */
    int cancels = fake_host_counter(fh, &fh->n_cancel);
    CHECK(h2_run(port, "/v1/completions", "{\"prompt\":\"slow\",\"max_tokens\":1000,\"stream\":true}", 4, 300, res) == 0);
    CHECK(wait_counter(fh, &fh->n_cancel, cancels + 4, 3000));
}

/* Runs a shell command, returns its stdout. */
static char *sh(const char *cmd)
{
    FILE *p = popen(cmd, "r");
    if (!p)
        return strdup("");
    size_t cap = 1 << 16, len = 0;
    char *out = malloc(cap);
    size_t k;
    while ((k = fread(out + len, 1, cap - len - 1, p)) > 0) {
        len += k;
        if (len + 1 == cap)
            out = realloc(out, cap *= 2);
    }
    out[len] = '\0';
    pclose(p);
    return out;
}

static void test_curl(int port, fake_host *fh)
{
    char cmd[2048];
    char *o;
    const char *chat = "{\\\"messages\\\":[{\\\"role\\\":\\\"user\\\",\\\"content\\\":\\\"hi\\\"}],\\\"max_tokens\\\":3";
    snprintf(cmd, sizeof cmd,
             "curl -sS --http1.1 -H 'Content-Type: application/json' -d \"%s}\" "
             "http://127.0.0.1:%d/v1/chat/completions -w ' %%{http_code} %%{http_version}'",
             chat, port);
    o = sh(cmd);
    CHECK_CONTAINS(o, "\"content\":\"t60 t117 t115 \"");
    CHECK_CONTAINS(o, " 200 1.1");
    free(o);
    snprintf(cmd, sizeof cmd,
             "curl -sS --http2-prior-knowledge -d \"%s}\" http://127.0.0.1:%d/v1/chat/completions "
             "-w ' %%{http_code} %%{http_version}'",
             chat, port);
    o = sh(cmd);
    CHECK_CONTAINS(o, "\"content\":\"t60 t117 t115 \"");
    CHECK_CONTAINS(o, " 200 2");
    free(o);
    snprintf(cmd, sizeof cmd,
             "curl -sS -N --http2-prior-knowledge -d \"%s,\\\"stream\\\":true}\" -H 'X-Request-Id: h2s' -D - "
             "http://127.0.0.1:%d/v1/chat/completions",
             chat, port);
    o = sh(cmd);
    CHECK_CONTAINS(o, "x-request-id: h2s");
    CHECK_CONTAINS(o, "content-type: text/event-stream");
    CHECK_CONTAINS(o, "\"delta\":{\"content\":\"t117 \"}");
    CHECK_CONTAINS(o, "data: [DONE]\n\n");
    free(o);
    /* errors over h2 */
    snprintf(cmd, sizeof cmd,
             "curl -sS --http2-prior-knowledge -d '{\"prompt\":[1],\"max_tokens\":0}' "
             "http://127.0.0.1:%d/v1/completions -w ' %%{http_code}'",
             port);
    o = sh(cmd);
    CHECK_CONTAINS(o, "\"param\":\"max_tokens\"");
    CHECK_CONTAINS(o, " 400");
    free(o);
    /* an h2 client that gives up mid-stream: its request is cancelled */
    int before = fake_host_counter(fh, &fh->n_cancel);
    snprintf(cmd, sizeof cmd,
             "curl -sS -N --http2-prior-knowledge --max-time 0.5 "
             "-d '{\"prompt\":\"slow\",\"max_tokens\":1000,\"stream\":true}' "
             "http://127.0.0.1:%d/v1/completions >/dev/null 2>&1",
             port);
    free(sh(cmd));
    CHECK(wait_counter(fh, &fh->n_cancel, before + 1, 3000));
}

static void test_auth(void)
{
    fake_host fh;
    sy_err err = {{0}};
    const char *kv[] = {"listen=127.0.0.1:0", "api_keys=k1, secret-two", NULL};
    if (fake_host_start(&fh, kv, &err) != 0) {
        fprintf(stderr, "auth server: %s\n", err.msg);
        CHECK(0);
        fake_host_stop(&fh);
        return;
    }
    resp r;
    const char *body = "{\"prompt\":[1],\"max_tokens\":1}";
    req(fh.port, "POST", "/v1/completions", NULL, body, &r);
    CHECK(r.status == 401);
    CHECK_CONTAINS(body_of(&r), "\"type\":\"authentication_error\"");
    req(fh.port, "POST", "/v1/completions", "Authorization: Bearer secret-twO\r\n", body, &r);
    CHECK(r.status == 401);
    req(fh.port, "POST", "/v1/completions", "Authorization: Bearer secret-two\r\n", body, &r);
    CHECK(r.status == 200);
    req(fh.port, "GET", "/v1/models", "Authorization: bearer k1\r\n", NULL, &r);
    CHECK(r.status == 200);
    req(fh.port, "GET", "/health", NULL, NULL, &r);
    CHECK(r.status == 200); /* probes need no key */
    fake_host_stop(&fh);
}

static void rst_close(void *arg)
{
    int *fd = arg;
    struct linger lg = {1, 0}; /* close() sends RST: the server's next send fails */
    setsockopt(*fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(*fd);
    *fd = -1;
}

/*
 * A client resets its connection while an event for its request is queued
 * for the I/O thread, and both become ready in one epoll batch, the event
 * queue first. Handling the event writes to the dead socket, which closes
 * and frees the connection; the batch's next entry is that connection.
 * It used to be read after the free ("double free or corruption" from
 * `switchyard serve` under the h1-close fault). One I/O thread, so the
 * "hold" request blocks the loop that owns the reset connection.
 */
static void test_close_with_queued_event(void)
{
    fake_host fh;
    sy_err err = {{0}};
    const char *kv[] = {"listen=127.0.0.1:0", "io_threads=1", NULL};
    if (fake_host_start(&fh, kv, &err) != 0) {
        fprintf(stderr, "queued-event server: %s\n", err.msg);
        CHECK(0);
        fake_host_stop(&fh);
        return;
    }
    int submitted = fake_host_counter(&fh, &fh.n_submit);
    int fd = dial(fh.port);
    CHECK(fd >= 0);
    const char *body = "{\"prompt\":\"manual\",\"max_tokens\":50,\"stream\":true}";
    char head[512];
    int n = snprintf(head, sizeof head, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n%s",
                     strlen(body), body);
    send_all(fd, head, (size_t)n);
    CHECK(wait_counter(&fh, &fh.n_submit, submitted + 1, 3000));
    pthread_mutex_lock(&fh.mu);
    fh.on_hold = rst_close;
    fh.on_hold_arg = &fd;
    pthread_mutex_unlock(&fh.mu);
    resp r;
    req(fh.port, "POST", "/v1/completions", NULL, "{\"prompt\":\"hold\",\"max_tokens\":2}", &r);
    CHECK(r.status == 200);
    CHECK_CONTAINS(body_of(&r), "\"finish_reason\":\"length\"");
    CHECK(fd == -1); /* the hold ran: the reset came while the I/O thread was busy */
    /* The reset request was cancelled, and the server still answers. */
    CHECK(wait_counter(&fh, &fh.n_cancel, 1, 3000));
    req(fh.port, "GET", "/health", NULL, NULL, &r);
    CHECK(r.status == 200);
    pthread_mutex_lock(&fh.mu);
    fh.on_hold = NULL;
    pthread_mutex_unlock(&fh.mu);
    if (fd >= 0)
        close(fd);
    fake_host_stop(&fh);
    CHECK(fh.n_active == 0);
}

static void test_tls(void)
{
    if (system("command -v openssl >/dev/null 2>&1") != 0) {
        printf("test_http: SKIP TLS checks: no openssl(1) to make a certificate\n");
        return;
    }
    char dir[] = "/tmp/sy-http-tls.XXXXXX";
    if (!mkdtemp(dir))
        return;
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 -subj /CN=localhost "
             "-keyout %s/key.pem -out %s/cert.pem >/dev/null 2>&1",
             dir, dir);
    CHECK(system(cmd) == 0);
    char kc[300], kk[300];
    snprintf(kc, sizeof kc, "tls_cert=%s/cert.pem", dir);
    snprintf(kk, sizeof kk, "tls_key=%s/key.pem", dir);
    const char *kv[] = {"listen=127.0.0.1:0", kc, kk, NULL};
    fake_host fh;
    sy_err err = {{0}};
    if (fake_host_start(&fh, kv, &err) != 0) {
        fprintf(stderr, "tls server: %s\n", err.msg);
        CHECK(0);
    } else {
        const char *versions[] = {"--http2", "--http1.1"};
        const char *want[] = {" 200 2", " 200 1.1"};
        for (int i = 0; i < 2; i++) {
            snprintf(cmd, sizeof cmd,
                     "curl -sS -k %s -d '{\"prompt\":[5,6],\"max_tokens\":2}' https://127.0.0.1:%d/v1/completions "
                     "-w ' %%{http_code} %%{http_version}'",
                     versions[i], fh.port);
            char *o = sh(cmd);
            CHECK_CONTAINS(o, "\"text\":\"t5 t6 \"");
            CHECK_CONTAINS(o, want[i]);
            free(o);
        }
        /* curl multiplexes over TLS+ALPN (its h2c prior-knowledge reuse is
         * broken before 8.0: curl/curl#10634) */
        int before = fake_host_counter(&fh, &fh.n_submit);
        char urls[1024] = "";
        for (int i = 0; i < 6; i++)
            snprintf(urls + strlen(urls), sizeof urls - strlen(urls), " -o /dev/null https://127.0.0.1:%d/v1/completions",
                     fh.port);
        snprintf(cmd, sizeof cmd,
                 "curl -sS -k --http2 -Z --parallel-max 6 -d '{\"prompt\":\"slow\",\"max_tokens\":5}' "
                 "-w '%%{http_code}:%%{num_connects}\\n' %s 2>/dev/null",
                 urls);
        char *m = sh(cmd);
        int ok = 0, connects = 0;
        for (char *line = strtok(m, "\n"); line; line = strtok(NULL, "\n")) {
            ok += strncmp(line, "200:", 4) == 0;
            connects += atoi(line + 4);
        }
        CHECK(ok == 6);
        CHECK(connects <= 2);
        CHECK(fake_host_counter(&fh, &fh.n_submit) - before == 6);
        free(m);
        snprintf(cmd, sizeof cmd, "curl -sS -k --tlsv1.1 --tls-max 1.1 https://127.0.0.1:%d/health 2>&1 >/dev/null; "
                 "echo rc=$?", fh.port);
        char *o = sh(cmd);
        CHECK(strstr(o, "rc=0") == NULL); /* TLS 1.1 is refused */
        free(o);
    }
    fake_host_stop(&fh);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) {
    }
}

/* ---------------------------------------------------------------- issue 18: strict fields, tools, constraints */

#define USER_HI "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"

/* A 400 whose param is exactly `param` (and, when given, whose body holds needle). */
static void expect_param(int port, const char *path, const char *body, const char *param, const char *needle)
{
    resp r;
    req(port, "POST", path, NULL, body, &r);
    char want[256];
    snprintf(want, sizeof want, "\"param\":\"%s\"", param);
    if (r.status != 400 || !strstr(body_of(&r), want) || (needle && !strstr(body_of(&r), needle)))
        fprintf(stderr, "expected 400 naming %s for %s, got: %s\n", param, body, body_of(&r));
    CHECK(r.status == 400);
    CHECK_CONTAINS(body_of(&r), want);
    if (needle)
        CHECK_CONTAINS(body_of(&r), needle);
}

static void test_strict_fields(int port)
{
    const char *cc = "/v1/chat/completions", *c = "/v1/completions";
    /* unknown fields, top level and nested */
    expect_param(port, cc, "{" USER_HI ",\"frobnicate\":1}", "frobnicate", "unknown field 'frobnicate'");
    expect_param(port, cc, "{" USER_HI ",\"prompt\":\"x\"}", "prompt", "\"code\":\"unknown_parameter\"");
    expect_param(port, c, "{\"prompt\":\"x\"," USER_HI "}", "messages", "unknown field 'messages'");
    expect_param(port, c, "{\"prompt\":\"x\",\"tools\":[]}", "tools", "unknown field");
    expect_param(port, cc, "{" USER_HI ",\"stream_options\":{\"include_usage\":true,\"x\":1}}", "stream_options.x",
                 "unknown field 'stream_options.x'");
    expect_param(port, cc, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\",\"tone\":\"warm\"}]}",
                 "messages[0].tone", "unknown field");
    expect_param(port, cc, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\",\"z\":1}]}]}",
                 "messages[0].content[0].z", NULL);
    expect_param(port, cc, "{" USER_HI ",\"response_format\":{\"type\":\"text\",\"schema\":{}}}",
                 "response_format.schema", NULL);
    expect_param(port, cc,
                 "{" USER_HI ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"a\","
                 "\"schema\":{},\"extra\":1}}}",
                 "response_format.json_schema.extra", NULL);
    expect_param(port, cc, "{" USER_HI ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"},\"x\":1}]}",
                 "tools[0].x", NULL);
    expect_param(port, cc,
                 "{" USER_HI ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"returns\":{}}}]}",
                 "tools[0].function.returns", NULL);
    expect_param(port, cc,
                 "{" USER_HI ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}],"
                 "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"f\"},\"x\":1}}",
                 "tool_choice.x", NULL);
    /* refused fields name themselves and say why */
    const char *refused[][3] = {
        {"\"audio\":{\"voice\":\"alloy\",\"format\":\"wav\"}", "audio", "not supported"},
        {"\"prediction\":{\"type\":\"content\",\"content\":\"x\"}", "prediction", "not supported"},
        {"\"web_search_options\":{}", "web_search_options", "not supported"},
        {"\"functions\":[{\"name\":\"f\"}]", "functions", "not supported"},
        {"\"function_call\":\"auto\"", "function_call", "not supported"},
        {"\"reasoning_effort\":\"low\"", "reasoning_effort", "not supported"},
        {"\"verbosity\":\"low\"", "verbosity", "not supported"},
        {"\"moderation\":{\"model\":\"m\"}", "moderation", "not supported"},
        {"\"modalities\":[\"text\",\"audio\"]", "modalities[1]", "output is supported"},
        {"\"store\":true", "store", "not supported"},
        {"\"service_tier\":\"flex\"", "service_tier", "not supported"},
        {"\"stream_options\":{\"include_obfuscation\":true}", "stream_options.include_obfuscation", "not supported"},
        {"\"structured_outputs\":{\"whitespace_pattern\":\" \"}", "structured_outputs.whitespace_pattern", "not supported"},
        {"\"guided_decoding_backend\":\"xgrammar\"", "guided_decoding_backend", "not supported"},
        {"\"response_format\":{\"type\":\"structural_tag\"}", "response_format.type", "not supported"},
        {"\"metadata\":{\"k\":5}", "metadata.k", "must be a string"},
        {"\"user\":7", "user", "must be a string"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        char body[512];
        snprintf(body, sizeof body, "{" USER_HI ",%s}", refused[i][0]);
        expect_param(port, cc, body, refused[i][1], refused[i][2]);
    }
    expect_param(port, c, "{\"prompt\":\"x\",\"best_of\":2}", "best_of", "not supported");
    expect_param(port, c, "{\"prompt\":\"x\",\"suffix\":\"end\"}", "suffix", "not supported");
    expect_param(port, c, "{\"prompt\":\"x\",\"echo\":true}", "echo", "not supported");
    /* accepted: fields that ask for nothing, and the values that change nothing */
    resp r;
    req(port, "POST", cc,
        NULL,
        "{" USER_HI ",\"max_tokens\":1,\"user\":\"u1\",\"safety_identifier\":\"s\",\"prompt_cache_key\":\"k\","
        "\"metadata\":{\"a\":\"b\"},\"store\":false,\"service_tier\":\"auto\",\"modalities\":[\"text\"],"
        "\"stream_options\":null,\"audio\":null,\"response_format\":{\"type\":\"text\"}}",
        &r);
    CHECK(r.status == 200);
    req(port, "POST", c, NULL, "{\"prompt\":\"x\",\"max_tokens\":1,\"best_of\":1,\"suffix\":\"\",\"echo\":false,\"user\":\"u\"}",
        &r);
    CHECK(r.status == 200);
}

static void test_messages(int port)
{
    const char *cc = "/v1/chat/completions";
    expect_param(port, cc, "{\"messages\":[{\"role\":\"function\",\"content\":\"x\"}]}", "messages[0].role",
                 "the role 'function' is not supported");
    expect_param(port, cc, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"robot\",\"content\":\"x\"}]}",
                 "messages[1].role", "'robot'");
    expect_param(port, cc,
                 "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"u\"}}]}]}",
                 "messages[0].content[0].type", "'image_url' content parts are not supported");
    expect_param(port, cc, "{\"messages\":[{\"role\":\"user\",\"content\":null}]}", "messages[0].content", "required");
    expect_param(port, cc, "{\"messages\":[{\"role\":\"assistant\"}]}", "messages[0].content",
                 "unless the message has tool_calls");
    const char *call = "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\","
                       "\"function\":{\"name\":\"get\",\"arguments\":\"{}\"}}]}";
    char body[1024];
    snprintf(body, sizeof body,
             "{\"messages\":[{\"role\":\"developer\",\"content\":\"be brief\"},%s,"
             "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":[{\"type\":\"text\",\"text\":\"ok\"}]},"
             "{\"role\":\"user\",\"content\":\"thanks\"}],\"max_tokens\":1}",
             call);
    resp r;
    req(port, "POST", cc, NULL, body, &r);
    CHECK(r.status == 200);
    snprintf(body, sizeof body, "{\"messages\":[%s,{\"role\":\"tool\",\"tool_call_id\":\"c2\",\"content\":\"ok\"}]}",
             call);
    expect_param(port, cc, body, "messages[1].tool_call_id", "'c2' answers no pending call");
    snprintf(body, sizeof body, "{\"messages\":[%s,{\"role\":\"tool\",\"content\":\"ok\"}]}", call);
    expect_param(port, cc, body, "messages[1].tool_call_id", "required");
    snprintf(body, sizeof body, "{\"messages\":[%s,{\"role\":\"user\",\"content\":\"?\"}]}", call);
    expect_param(port, cc, body, "messages[0].tool_calls", "the call 'c1' has no answer");
    expect_param(port, cc, "{\"messages\":[{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"ok\"}]}",
                 "messages[0].tool_call_id", "answers no pending call");
    expect_param(port, cc,
                 "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\","
                 "\"function\":{\"name\":\"get\",\"arguments\":[]}}]}]}",
                 "messages[0].tool_calls[0].function.arguments", "must be a string");
    /* arguments as an object (transformers' convention) are read too */
    req(port, "POST", cc, NULL,
        "{\"messages\":[{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\","
        "\"function\":{\"name\":\"get\",\"arguments\":{\"city\":\"Paris\"}}}]},{\"role\":\"tool\",\"tool_call_id\":\"c1\","
        "\"content\":\"18C\"}],\"max_tokens\":1}",
        &r);
    CHECK(r.status == 200);
    expect_param(port, cc,
                 "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"c1\",\"type\":\"custom\","
                 "\"function\":{\"name\":\"get\",\"arguments\":\"{}\"}}]}]}",
                 "messages[0].tool_calls[0].type", NULL);
}

/* Reads the fake's record of the last submitted request. */
typedef struct seen {
    sy_request q;
    char tools[1024], choice_name[64], constraint[1024], path[96], bias[512];
} seen;

static void last_seen(fake_host *fh, seen *s)
{
    pthread_mutex_lock(&fh->mu);
    s->q = fh->last_req;
    snprintf(s->tools, sizeof s->tools, "%s", fh->last_req_tools ? fh->last_req_tools : "(null)");
    snprintf(s->choice_name, sizeof s->choice_name, "%s", fh->last_req_choice_name ? fh->last_req_choice_name : "(null)");
    snprintf(s->constraint, sizeof s->constraint, "%s", fh->last_req_constraint ? fh->last_req_constraint : "(null)");
    snprintf(s->path, sizeof s->path, "%s", fh->last_req_constraint_path ? fh->last_req_constraint_path : "(null)");
    snprintf(s->bias, sizeof s->bias, "%s", fh->last_req_bias);
    pthread_mutex_unlock(&fh->mu);
}

static void post_ok(int port, const char *path, const char *body, resp *r)
{
    req(port, "POST", path, NULL, body, r);
    if (r->status != 200)
        fprintf(stderr, "expected 200 for %s, got: %s\n", body, r->buf);
    CHECK(r->status == 200);
}

#define WEATHER_TOOL                                                                                              \
    "{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"d\",\"parameters\":"          \
    "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"enum\":[\"Brüssel\"]},\"days\":"           \
    "{\"type\":\"integer\",\"minimum\":2}},\"required\":[\"city\"]}}}"
#define TIME_TOOL "{\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"parameters\":{\"type\":\"object\",\"properties\":{}}}}"

static void test_request_fields(int port, fake_host *fh)
{
    const char *cc = "/v1/chat/completions", *c = "/v1/completions";
    resp r;
    seen s;
    /* logit_bias */
    post_ok(port, c, "{\"prompt\":\"x\",\"max_tokens\":1,\"logit_bias\":{\"5\":10,\"255\":-100,\"0\":0.5}}", &r);
    last_seen(fh, &s);
    CHECK(s.q.n_logit_bias == 3);
    CHECK_CONTAINS(s.bias, "5:10 255:-100 0:0.5");
    expect_param(port, c, "{\"prompt\":\"x\",\"logit_bias\":{\"abc\":1}}", "logit_bias.abc", "token id");
    expect_param(port, c, "{\"prompt\":\"x\",\"logit_bias\":{\"05\":1}}", "logit_bias.05", "leading zeros");
    expect_param(port, cc, "{" USER_HI ",\"logit_bias\":{\"7\":101}}", "logit_bias.7", "[-100, 100], found 101");
    expect_param(port, cc, "{" USER_HI ",\"logit_bias\":{\"256\":1}}", "logit_bias.256", "outside the vocabulary");
    expect_param(port, cc, "{" USER_HI ",\"logit_bias\":{\"7\":\"up\"}}", "logit_bias.7", "must be a number");
    /* num_draft_tokens: the type here, the range in the host (against [speculative]); left out, not sent */
    CHECK(s.q.struct_size == sizeof(sy_request) && s.q.has_num_draft_tokens == 0);
    post_ok(port, c, "{\"prompt\":\"x\",\"max_tokens\":1,\"num_draft_tokens\":0}", &r);
    last_seen(fh, &s);
    CHECK(s.q.has_num_draft_tokens == 1 && s.q.num_draft_tokens == 0);
    post_ok(port, cc, "{" USER_HI ",\"max_tokens\":1,\"num_draft_tokens\":3}", &r);
    last_seen(fh, &s);
    CHECK(s.q.has_num_draft_tokens == 1 && s.q.num_draft_tokens == 3);
    post_ok(port, cc, "{" USER_HI ",\"max_tokens\":1,\"num_draft_tokens\":null}", &r);
    last_seen(fh, &s);
    CHECK(s.q.has_num_draft_tokens == 0);
    expect_param(port, c, "{\"prompt\":\"x\",\"num_draft_tokens\":\"3\"}", "num_draft_tokens",
                 "must be an integer (0: no drafts; 1..k: at most that many per step), found a string");
    expect_param(port, cc, "{" USER_HI ",\"num_draft_tokens\":2.5}", "num_draft_tokens",
                 "found a number with a fraction");
    expect_param(port, cc, "{" USER_HI ",\"num_draft_tokens\":4294967296}", "num_draft_tokens",
                 "found an integer out of range");
    /* constraints */
    post_ok(port, cc,
            "{" USER_HI ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"w-1\",\"strict\":true,"
            "\"schema\":{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}}}}}}",
            &r);
    last_seen(fh, &s);
    CHECK(s.q.constraint_kind == SY_CONSTRAINT_JSON_SCHEMA);
    CHECK(strcmp(s.constraint, "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}") == 0);
    CHECK(strcmp(s.path, "response_format.json_schema.schema") == 0);
    CHECK_CONTAINS(body_of(&r), "\"content\":\"{\\\"a\\\":1}\""); /* the fake's instance of the schema */
    post_ok(port, cc, "{" USER_HI ",\"response_format\":{\"type\":\"json_object\"}}", &r);
    last_seen(fh, &s);
    CHECK(s.q.constraint_kind == SY_CONSTRAINT_JSON_OBJECT && strcmp(s.path, "response_format") == 0);
    post_ok(port, c, "{\"prompt\":\"x\",\"max_tokens\":1,\"regex\":\"[a-z]+\"}", &r);
    last_seen(fh, &s);
    CHECK(s.q.constraint_kind == SY_CONSTRAINT_REGEX && !strcmp(s.constraint, "[a-z]+") && !strcmp(s.path, "regex"));
    post_ok(port, c, "{\"prompt\":\"x\",\"max_tokens\":1,\"ebnf\":\"root ::= \\\"a\\\"\"}", &r);
    last_seen(fh, &s);
    CHECK(s.q.constraint_kind == SY_CONSTRAINT_GRAMMAR && !strcmp(s.constraint, "root ::= \"a\"") &&
          !strcmp(s.path, "ebnf"));
    post_ok(port, cc, "{" USER_HI ",\"structured_outputs\":{\"choice\":[\"yes\", \"no\"]}}", &r);
    last_seen(fh, &s);
    CHECK(s.q.constraint_kind == SY_CONSTRAINT_CHOICE && !strcmp(s.constraint, "[\"yes\",\"no\"]") &&
          !strcmp(s.path, "structured_outputs.choice"));
    CHECK_CONTAINS(body_of(&r), "\"content\":\"yes\"");
    post_ok(port, cc, "{" USER_HI ",\"guided_json\":\"{\\\"type\\\": \\\"object\\\"}\"}", &r);
    last_seen(fh, &s);
    CHECK(s.q.constraint_kind == SY_CONSTRAINT_JSON_SCHEMA && !strcmp(s.constraint, "{\"type\":\"object\"}") &&
          !strcmp(s.path, "guided_json"));
    post_ok(port, cc, "{" USER_HI ",\"max_tokens\":1}", &r);
    last_seen(fh, &s);
    CHECK(s.q.constraint_kind == SY_CONSTRAINT_NONE && s.q.n_logit_bias == 0 && !strcmp(s.tools, "(null)"));
    expect_param(port, cc, "{" USER_HI ",\"response_format\":{\"type\":\"json_object\"},\"regex\":\"a\"}", "regex",
                 "'regex' and 'response_format' both constrain the output");
    expect_param(port, cc, "{" USER_HI ",\"structured_outputs\":{\"regex\":\"a\",\"choice\":[\"b\"]}}",
                 "structured_outputs.choice", "both constrain");
    expect_param(port, cc, "{" USER_HI ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":{}}}}",
                 "response_format.json_schema.name", "required");
    expect_param(port, cc,
                 "{" USER_HI ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"a b\",\"schema\":{}}}}",
                 "response_format.json_schema.name", "[a-zA-Z0-9_-]{1,64}");
    expect_param(port, cc, "{" USER_HI ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"a\"}}}",
                 "response_format.json_schema.schema", "required");
    expect_param(port, cc, "{" USER_HI ",\"guided_json\":\"{nope\"}", "guided_json", "not valid JSON");
    expect_param(port, cc, "{" USER_HI ",\"regex\":\"\"}", "regex", "must not be empty");
    expect_param(port, cc, "{" USER_HI ",\"guided_choice\":[\"a\",3]}", "guided_choice[1]", "must be a string");
    /* tools */
    post_ok(port, cc,
            "{" USER_HI ",\"max_tokens\":1,\"tools\":[" WEATHER_TOOL "," TIME_TOOL "],\"tool_choice\":\"auto\","
            "\"parallel_tool_calls\":false}",
            &r);
    last_seen(fh, &s);
    CHECK_CONTAINS(s.tools, "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"d\"");
    CHECK(s.q.tool_choice == SY_TOOL_CHOICE_AUTO && s.q.parallel_tool_calls == 0);
    pthread_mutex_lock(&fh->mu);
    CHECK(fh->last_tools && strstr(fh->last_tools, "get_time")); /* the template saw the tools too */
    pthread_mutex_unlock(&fh->mu);
    post_ok(port, cc, "{" USER_HI ",\"max_tokens\":1,\"tools\":[" WEATHER_TOOL "],\"tool_choice\":\"none\"}", &r);
    last_seen(fh, &s);
    CHECK(s.q.tool_choice == SY_TOOL_CHOICE_NONE && s.q.parallel_tool_calls == 1);
    post_ok(port, cc, "{" USER_HI ",\"max_tokens\":1,\"tools\":[]}", &r);
    last_seen(fh, &s);
    CHECK(!strcmp(s.tools, "(null)"));
    expect_param(port, cc, "{" USER_HI ",\"tools\":[" WEATHER_TOOL "],\"tool_choice\":{\"type\":\"function\","
                 "\"function\":{\"name\":\"get_time\"}}}", "tool_choice.function.name", "not one of the tools");
    expect_param(port, cc, "{" USER_HI ",\"tool_choice\":\"required\"}", "tool_choice", "requires 'tools'");
    expect_param(port, cc, "{" USER_HI ",\"tools\":[" WEATHER_TOOL "],\"tool_choice\":\"any\"}", "tool_choice", NULL);
    expect_param(port, cc,
                 "{" USER_HI ",\"tools\":[" WEATHER_TOOL "],\"tool_choice\":\"required\","
                 "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"a\",\"schema\":{}}}}",
                 "tool_choice", "cannot be combined");
    expect_param(port, cc, "{" USER_HI ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a b\"}}]}",
                 "tools[0].function.name", "[a-zA-Z0-9_-]{1,64}");
    expect_param(port, cc, "{" USER_HI ",\"tools\":[" TIME_TOOL "," TIME_TOOL "]}", "tools[1].function.name",
                 "repeats");
    expect_param(port, cc, "{" USER_HI ",\"tools\":[{\"type\":\"custom\",\"custom\":{\"name\":\"a\"}}]}",
                 "tools[0].type", "'custom' tools are not supported");
    expect_param(port, cc, "{" USER_HI ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a\",\"parameters\":[]}}]}",
                 "tools[0].function.parameters", NULL);
    expect_param(port, cc, "{" USER_HI ",\"tools\":[{\"type\":\"function\"}]}", "tools[0].function", "required");
    expect_param(port, cc, "{" USER_HI ",\"parallel_tool_calls\":1}", "parallel_tool_calls", "boolean");
}

static void test_tool_answers(int port, fake_host *fh)
{
    const char *cc = "/v1/chat/completions";
    resp r;
    seen s;
    /* a forced call of a named tool: no text, content null, arguments whole despite the split é */
    post_ok(port, cc,
            "{" USER_HI ",\"tools\":[" TIME_TOOL "," WEATHER_TOOL "],\"tool_choice\":{\"type\":\"function\","
            "\"function\":{\"name\":\"get_weather\"}}}",
            &r);
    last_seen(fh, &s);
    CHECK(s.q.tool_choice == SY_TOOL_CHOICE_FUNCTION && !strcmp(s.choice_name, "get_weather"));
    const char *b = body_of(&r);
    CHECK_CONTAINS(b, "\"message\":{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_s0\","
                      "\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":"
                      "\"{\\\"city\\\":\\\"Brüssel\\\",\\\"days\\\":3}\"}}]}");
    CHECK_CONTAINS(b, "\"finish_reason\":\"tool_calls\"");
    /* text before two parallel calls */
    post_ok(port, cc,
            "{\"messages\":[{\"role\":\"user\",\"content\":\"calltwo\"}],\"tools\":[" WEATHER_TOOL "," TIME_TOOL "]}", &r);
    b = body_of(&r);
    CHECK_CONTAINS(b, "\"content\":\"Let me check. \",\"tool_calls\":[{\"id\":\"call_s0\"");
    CHECK_CONTAINS(b, "{\"id\":\"call_s1\",\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"arguments\":\"{}\"}}]");
    /* streaming: the header of each call with empty arguments, then its pieces, as OpenAI streams them */
    post_ok(port, cc,
            "{\"messages\":[{\"role\":\"user\",\"content\":\"calltwo\"}],\"stream\":true,\"tools\":[" WEATHER_TOOL
            "," TIME_TOOL "]}",
            &r);
    CHECK_CONTAINS(r.buf, "\"delta\":{\"content\":\"Let me c\"}");
    CHECK_CONTAINS(r.buf, "\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_s0\",\"type\":\"function\","
                          "\"function\":{\"name\":\"get_weather\",\"arguments\":\"\"}}]}");
    CHECK_CONTAINS(r.buf, "\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"c\"}}]}");
    CHECK_CONTAINS(r.buf, "\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"call_s1\",\"type\":\"function\","
                          "\"function\":{\"name\":\"get_time\",\"arguments\":\"\"}}]}");
    CHECK_CONTAINS(r.buf, "\"delta\":{},\"logprobs\":null,\"finish_reason\":\"tool_calls\"");
    /* the host split the ü of "Brüssel" between two pieces: each chunk carries whole characters */
    CHECK_CONTAINS(r.buf, "{\"arguments\":\"Br\"}");
    CHECK_CONTAINS(r.buf, "{\"arguments\":\"üss\"}");
    /* tool_choice none: no parsing, plain text */
    post_ok(port, cc,
            "{\"messages\":[{\"role\":\"user\",\"content\":\"calltwo\"}],\"max_tokens\":2,\"tool_choice\":\"none\","
            "\"tools\":[" WEATHER_TOOL "]}",
            &r);
    CHECK_CONTAINS(body_of(&r), "\"finish_reason\":\"length\"");
    CHECK(strstr(body_of(&r), "tool_calls") == NULL);
}

static void test_models_retrieve(int port)
{
    resp r;
    req(port, "GET", "/v1/models/fake-model", NULL, NULL, &r);
    CHECK(r.status == 200);
    CHECK_CONTAINS(body_of(&r), "{\"id\":\"fake-model\",\"object\":\"model\",\"created\":1700000000,");
    req(port, "GET", "/v1/models/fake%2Dmodel", NULL, NULL, &r);
    CHECK(r.status == 200);
    req(port, "GET", "/v1/models/gpt-9", NULL, NULL, &r);
    CHECK(r.status == 404);
    CHECK_CONTAINS(body_of(&r), "\"code\":\"model_not_found\"");
    CHECK_CONTAINS(body_of(&r), "'gpt-9' does not exist");
    req(port, "DELETE", "/v1/models/fake-model", NULL, NULL, &r);
    CHECK(r.status == 405);
}

static int serve(const char *port)
{
    char listen[64];
    snprintf(listen, sizeof listen, "listen=127.0.0.1:%s", port);
    const char *kv[] = {listen, NULL};
    fake_host fh;
    sy_err err = {{0}};
    if (fake_host_start(&fh, kv, &err) != 0) {
        fprintf(stderr, "serve: %s\n", err.msg);
        fake_host_stop(&fh);
        return 1;
    }
    printf("%d\n", fh.port);
    fflush(stdout);
    char buf[256];
    while (fread(buf, 1, sizeof buf, stdin) > 0) {
    }
    fake_host_stop(&fh);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "serve") == 0)
        return serve(argv[2]);
    fake_host fh;
    sy_err err = {{0}};
    const char *kv[] = {"listen=127.0.0.1:0", "max_body=64K", "header_timeout=1", "io_threads=2", NULL};
    if (fake_host_start(&fh, kv, &err) != 0 || fh.port <= 0) {
        fprintf(stderr, "test_http: cannot start the plugin: %s\n", err.msg);
        fake_host_stop(&fh);
        return 1;
    }
    int port = fh.port;
    test_basic(port, &fh);
    test_completions(port);
    test_chat(port);
    test_errors(port, &fh);
    test_h1_framing(port);
    test_disconnect(port, &fh);
    test_h2_streams(port, &fh);
    test_curl(port, &fh);
    test_strict_fields(port);
    test_messages(port);
    test_request_fields(port, &fh);
    test_tool_answers(port, &fh);
    test_models_retrieve(port);
    fake_host_stop(&fh);
    CHECK(fh.n_active == 0);
    test_auth();
    test_close_with_queued_event();
    test_tls();
    return sy_test_done("test_http");
}
