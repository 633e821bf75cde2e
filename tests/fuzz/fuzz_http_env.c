/*
 * The fake server around the HTTP frontend for the fuzz targets (see
 * fuzz_http_env.h). Everything runs on the calling thread: "engine" events
 * go through the real http_job_on_event queue and are drained with
 * http_loop_drain_events, as the loop thread would.
 */
#include "config.h"

#include "fuzz_http_env.h"
#include "fuzz_common.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_LIVE 8 /* beyond: SY_ERR_UNAVAILABLE, the 429 path */

typedef struct fake_req {
    uint64_t id;
    int live;
    int cancelled;
    int tools; /* tools_json set and tool_choice not NONE: the engine answers with a call */
    int32_t top_logprobs;
    void (*on_event)(void *user, const sy_event *ev);
    void *user;
} fake_req;

struct fuzz_http_env {
    sy_host host;
    sy_serving_api api;
    http_server srv;
    http_loop loop;
    int peer; /* the client's end of the socketpair; -1 when none */
    char head[256]; /* the first bytes the client received on this connection */
    size_t head_len;
    fake_req reqs[MAX_LIVE];
    uint64_t next_id;
};

static void *host_alloc(void *ctx, size_t size, size_t align)
{
    (void)ctx;
    void *p = NULL;
    return posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size ? size : 1) ? NULL : p;
}

static void host_free(void *ctx, void *p)
{
    (void)ctx;
    free(p);
}

static void host_log(void *ctx, sy_log_level lvl, const char *plugin, const char *msg)
{
    (void)ctx, (void)lvl, (void)plugin, (void)msg;
}

static void contract(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_http_env: the frontend broke the sy_request contract: %s\n", what);
        abort();
    }
}

static int api_submit(void *ctx, const sy_request *q, uint64_t *id, sy_err *err)
{
    fuzz_http_env *e = ctx;
    contract(q->struct_size >= sizeof *q, "struct_size");
    contract(q->n_prompt > 0 && q->prompt_ids, "a non-empty prompt");
    contract(q->max_tokens >= 1, "max_tokens >= 1");
    contract(q->min_tokens >= 0, "min_tokens >= 0");
    contract(isfinite(q->temperature) && q->temperature >= 0, "temperature >= 0");
    contract(q->top_p > 0 && q->top_p <= 1, "top_p in (0, 1]");
    contract(q->top_k >= 0, "top_k >= 0");
    contract(q->min_p >= 0 && q->min_p <= 1, "min_p in [0, 1]");
    contract(q->frequency_penalty >= -2 && q->frequency_penalty <= 2, "frequency_penalty in [-2, 2]");
    contract(q->presence_penalty >= -2 && q->presence_penalty <= 2, "presence_penalty in [-2, 2]");
    contract(q->repetition_penalty > 0, "repetition_penalty > 0");
    contract(q->top_logprobs >= -1 && q->top_logprobs <= 20, "top_logprobs in [-1, 20]");
    contract(!q->n_stop_ids || q->stop_ids, "stop_ids with n_stop_ids");
    contract(!q->n_stop_strings || q->stop_strings, "stop_strings with n_stop_strings");
    for (size_t i = 0; i < q->n_stop_strings; i++)
        contract(q->stop_strings[i] != NULL, "stop_strings[i] non-NULL");
    contract(q->on_event != NULL, "on_event");
    volatile int32_t sum = 0; /* reads every id: ASan checks the arrays' sizes */
    for (size_t i = 0; i < q->n_prompt; i++)
        sum += q->prompt_ids[i];
    for (size_t i = 0; i < q->n_stop_ids; i++)
        sum += q->stop_ids[i];
    /* ABI 1.2: logit_bias, constraints, tools */
    contract(!q->n_logit_bias || (q->logit_bias_ids && q->logit_bias), "logit_bias arrays with n_logit_bias");
    for (size_t i = 0; i < q->n_logit_bias; i++) {
        contract(q->logit_bias_ids[i] >= 0 && q->logit_bias_ids[i] < 257, "logit_bias ids inside the vocabulary");
        contract(q->logit_bias[i] >= -100 && q->logit_bias[i] <= 100, "logit_bias in [-100, 100]");
        for (size_t j = 0; j < i; j++)
            contract(q->logit_bias_ids[j] != q->logit_bias_ids[i], "logit_bias ids distinct");
    }
    contract(q->constraint_kind >= SY_CONSTRAINT_NONE && q->constraint_kind <= SY_CONSTRAINT_GRAMMAR,
             "constraint_kind a sy_constraint_kind");
    contract((q->constraint_kind == SY_CONSTRAINT_NONE || q->constraint_kind == SY_CONSTRAINT_JSON_OBJECT) ||
                 (q->constraint && q->constraint[0]),
             "a constraint text for JSON_SCHEMA, REGEX, CHOICE and GRAMMAR");
    contract(q->constraint_kind == SY_CONSTRAINT_NONE || q->constraint_path, "constraint_path with a constraint");
    if (q->constraint_kind == SY_CONSTRAINT_JSON_SCHEMA || q->constraint_kind == SY_CONSTRAINT_CHOICE) {
        json_t *c = json_loads(q->constraint, 0, NULL);
        contract(q->constraint_kind == SY_CONSTRAINT_JSON_SCHEMA ? json_is_object(c) : json_array_size(c) > 0,
                 "a JSON_SCHEMA constraint is an object, a CHOICE one a non-empty array");
        json_decref(c);
    }
    contract(q->tool_choice >= SY_TOOL_CHOICE_AUTO && q->tool_choice <= SY_TOOL_CHOICE_FUNCTION,
             "tool_choice a sy_tool_choice");
    contract(q->tool_choice != SY_TOOL_CHOICE_FUNCTION || q->tool_choice_name, "tool_choice_name with FUNCTION");
    contract(q->parallel_tool_calls == 0 || q->parallel_tool_calls == 1, "parallel_tool_calls 0 or 1");
    if (q->tools_json) {
        json_t *t = json_loads(q->tools_json, 0, NULL);
        contract(json_array_size(t) > 0, "tools_json a non-empty JSON array");
        json_decref(t);
    }
    contract(q->tools_json || (q->tool_choice != SY_TOOL_CHOICE_REQUIRED && q->tool_choice != SY_TOOL_CHOICE_FUNCTION),
             "a forced tool_choice only with tools");
    (void)sum;
    for (int i = 0; i < MAX_LIVE; i++) {
        fake_req *r = &e->reqs[i];
        if (r->live)
            continue;
        memset(r, 0, sizeof *r);
        r->live = 1;
        r->id = ++e->next_id;
        r->top_logprobs = q->top_logprobs;
        r->tools = q->tools_json && q->tool_choice != SY_TOOL_CHOICE_NONE;
        r->on_event = q->on_event;
        r->user = q->user;
        *id = r->id;
        fuzz_note("http: submit %zu prompt ids, max_tokens %d", q->n_prompt, q->max_tokens);
        return SY_OK;
    }
    return sy_err_set(err, SY_ERR_UNAVAILABLE, "fake engine: %d requests already running", MAX_LIVE);
}

static void api_cancel(void *ctx, uint64_t id)
{
    fuzz_http_env *e = ctx;
    for (int i = 0; i < MAX_LIVE; i++)
        if (e->reqs[i].live && e->reqs[i].id == id)
            e->reqs[i].cancelled = 1;
}

/* One id per byte, so any text tokenizes and every id detokenizes. */
static int api_tokenize(void *ctx, const char *text, size_t len, int add_special, int32_t **ids, size_t *n,
                        sy_err *err)
{
    (void)ctx;
    size_t total = len + (add_special ? 1 : 0);
    int32_t *out = malloc((total ? total : 1) * sizeof *out);
    if (!out)
        return sy_err_set(err, SY_ERR_NOMEM, "fake tokenize: out of memory");
    size_t k = 0;
    if (add_special)
        out[k++] = 256; /* a BOS */
    for (size_t i = 0; i < len; i++)
        out[k++] = (unsigned char)text[i];
    *ids = out;
    *n = total;
    return SY_OK;
}

static int api_detokenize(void *ctx, const int32_t *ids, size_t n, char **text, size_t *len, sy_err *err)
{
    (void)ctx;
    char *out = malloc(n + 1);
    if (!out)
        return sy_err_set(err, SY_ERR_NOMEM, "fake detokenize: out of memory");
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] > 256)
            return free(out), sy_err_set(err, SY_ERR_INVALID, "fake detokenize: id %d is out of range", ids[i]);
        if (ids[i] < 256)
            out[k++] = (char)ids[i];
    }
    out[k] = '\0';
    *text = out;
    *len = k;
    return SY_OK;
}

/* The messages JSON itself, with markers: enough for the prompt path. */
static int api_template(void *ctx, const char *messages, const char *tools, int add_gen, const char *kwargs,
                        char **out, size_t *len, sy_err *err)
{
    (void)ctx;
    size_t n = strlen(messages) + (tools ? strlen(tools) : 0) + (kwargs ? strlen(kwargs) : 0) + 32;
    char *s = malloc(n);
    if (!s)
        return sy_err_set(err, SY_ERR_NOMEM, "fake template: out of memory");
    int k = snprintf(s, n, "<t>%s|%s|%s%s", messages, tools ? tools : "", kwargs ? kwargs : "",
                     add_gen ? "<gen>" : "");
    *out = s;
    *len = (size_t)k;
    return SY_OK;
}

static int api_model_info(void *ctx, sy_model_info *mi)
{
    (void)ctx;
    mi->id = "fuzz-model";
    mi->max_seq_len = 4096;
    mi->vocab = 257;
    mi->created = 1736942400;
    return SY_OK;
}

static int api_ready(void *ctx)
{
    (void)ctx;
    return 1;
}

static int api_metrics(void *ctx, char **out, size_t *len, sy_err *err)
{
    (void)ctx;
    static const char text[] = "sy_requests_total 1\n";
    *out = malloc(sizeof text);
    if (!*out)
        return sy_err_set(err, SY_ERR_NOMEM, "fake metrics: out of memory");
    memcpy(*out, text, sizeof text);
    *len = sizeof text - 1;
    return SY_OK;
}

/* Reads what the server wrote; with SY_FUZZ_VERBOSE, notes the status lines. */
static void drain_peer(fuzz_http_env *e)
{
    char buf[65536];
    ssize_t n;
    while (e->peer >= 0 && (n = recv(e->peer, buf, sizeof buf - 1, MSG_DONTWAIT)) > 0) {
        size_t keep = sizeof e->head - 1 - e->head_len;
        keep = (size_t)n < keep ? (size_t)n : keep;
        memcpy(e->head + e->head_len, buf, keep);
        e->head_len += keep;
        e->head[e->head_len] = '\0';
        buf[n] = '\0';
        for (char *p = buf; (p = strstr(p, "HTTP/1.1 ")) != NULL; p++) {
            char *eol = strchr(p, '\r');
            char *body = strstr(p, "\r\n\r\n");
            fuzz_note("http: %.*s %.120s", eol ? (int)(eol - p) : 40, p, body ? body + 4 : "");
        }
    }
}

fuzz_http_env *fuzz_http_env_new(void)
{
    fuzz_http_env *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->peer = -1;
    e->api = (sy_serving_api){.struct_size = sizeof e->api, .submit = api_submit, .cancel = api_cancel,
                              .tokenize = api_tokenize, .detokenize = api_detokenize,
                              .apply_chat_template = api_template, .model_info = api_model_info,
                              .ready = api_ready, .metrics_text = api_metrics};
    e->host = (sy_host){.struct_size = sizeof e->host, .abi_major = SY_ABI_MAJOR, .abi_minor = SY_ABI_MINOR,
                        .ctx = e, .log = host_log, .alloc = host_alloc, .free = host_free, .serving = &e->api};
    e->srv.host = &e->host;
    e->srv.api = &e->api;
    e->srv.lfd = -1;
    sy_err err = {{0}};
    if (http_cfg_parse(&e->srv.cfg, NULL, 0, &err) != SY_OK) {
        fprintf(stderr, "fuzz_http_env: the default configuration does not parse: %s\n", err.msg);
        abort();
    }
    e->srv.loops = &e->loop;
    e->srv.n_loops = 1;
    e->loop.srv = &e->srv;
    e->loop.epfd = epoll_create1(EPOLL_CLOEXEC);
    e->loop.evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    pthread_mutex_init(&e->loop.qlock, NULL);
    if (e->loop.epfd < 0 || e->loop.evfd < 0) {
        fuzz_http_env_free(e);
        return NULL;
    }
    return e;
}

http_conn *fuzz_http_conn(fuzz_http_env *e) { return e->loop.conns; }

http_conn *fuzz_http_reconnect(fuzz_http_env *e)
{
    if (e->loop.conns)
        http_conn_close(e->loop.conns);
    if (e->peer >= 0)
        close(e->peer);
    e->peer = -1;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0)
        return NULL;
    http_conn *c = calloc(1, sizeof *c);
    if (!c) {
        close(sv[0]);
        close(sv[1]);
        return NULL;
    }
    c->loop = &e->loop;
    c->fd = sv[0];
    c->proto = HTTP_PROTO_H1;
    c->h1_keepalive = 1;
    c->started = c->last_active = c->req_started = http_now();
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = c};
    epoll_ctl(e->loop.epfd, EPOLL_CTL_ADD, c->fd, &ev);
    e->loop.conns = c;
    e->peer = sv[1];
    e->head_len = 0;
    e->head[0] = '\0';
    return c;
}

void fuzz_http_flush(fuzz_http_env *e)
{
    http_conn *c = e->loop.conns;
    if (!c)
        return;
    http_conn_flush(c);
    drain_peer(e);
    if (c->closed)
        http_conn_close(c);
}

void fuzz_http_run_engine(fuzz_http_env *e)
{
    static const int32_t toks[2] = {72, 105};
    static const float lps[2] = {-0.5f, -1.25f};
    static const int32_t top_ids[2 * 20] = {72, 73, 74, 75, 76, 77, 78, 79, 80, 81,
                                            82, 83, 84, 85, 86, 87, 88, 89, 90, 91};
    static const float top_lps[2 * 20] = {-0.5f, -2.0f, -3.0f};
    for (int i = 0; i < MAX_LIVE; i++) {
        fake_req *r = &e->reqs[i];
        if (!r->live)
            continue;
        int with_lp = r->top_logprobs >= 0;
        sy_event ev = {.struct_size = sizeof ev, .type = SY_EV_TEXT, .request_id = r->id};
        if (!r->cancelled) {
            ev.text = "Hi";
            ev.text_len = 2;
            ev.reasoning = "";
            ev.tokens = toks;
            ev.n_tokens = 2;
            ev.logprobs = with_lp ? lps : NULL;
            ev.top_ids = with_lp ? top_ids : NULL;
            ev.top_logprobs = with_lp ? top_lps : NULL;
            ev.n_top = with_lp ? r->top_logprobs : 0;
            r->on_event(r->user, &ev);
        }
        if (!r->cancelled && r->tools) {
            /* a call in three pieces, the last ending inside a UTF-8 character */
            static const sy_tool_call_delta pieces[3] = {
                {.index = 0, .id = "call_f", .name = "f", .arguments = "", .arguments_len = 0},
                {.index = 0, .arguments = "{\"a\": \"\xc3", .arguments_len = 8},
                {.index = 0, .arguments = "\xa9\"}\xe2", .arguments_len = 4},
            };
            sy_event tc = {.struct_size = sizeof tc, .type = SY_EV_TEXT, .request_id = r->id, .text = "",
                           .reasoning = "", .tool_calls = pieces, .n_tool_calls = 3};
            r->on_event(r->user, &tc);
        }
        sy_event done = {.struct_size = sizeof done, .request_id = r->id, .prompt_tokens = 3,
                         .completion_tokens = 2};
        if (!r->cancelled && r->id % 5 == 4) { /* some requests fail in the engine */
            done.type = SY_EV_ERROR;
            done.error = "fake engine failure";
            done.status = 500;
        } else {
            done.type = SY_EV_DONE;
            done.finish_reason = r->cancelled ? "abort" : r->id % 2 ? "stop" : "length";
        }
        r->live = 0;
        r->on_event(r->user, &done);
    }
    http_loop_drain_events(&e->loop);
    drain_peer(e);
}

int fuzz_http_first_status(const fuzz_http_env *e)
{
    const char *p = e->head;
    while ((p = strstr(p, "HTTP/1.1 ")) != NULL) {
        int status = atoi(p + 9);
        if (status >= 200)
            return status;
        p += 9;
    }
    return 0;
}

void fuzz_http_reset(fuzz_http_env *e)
{
    if (e->loop.conns)
        http_conn_close(e->loop.conns);
    fuzz_http_run_engine(e); /* the cancelled requests end; their jobs are freed */
    if (e->peer >= 0)
        close(e->peer);
    e->peer = -1;
}

void fuzz_http_env_free(fuzz_http_env *e)
{
    if (!e)
        return;
    fuzz_http_reset(e);
    if (e->loop.epfd >= 0)
        close(e->loop.epfd);
    if (e->loop.evfd >= 0)
        close(e->loop.evfd);
    pthread_mutex_destroy(&e->loop.qlock);
    http_cfg_free(&e->srv.cfg);
    free(e);
}
