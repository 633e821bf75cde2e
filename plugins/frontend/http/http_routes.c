/*
 * frontend/http: routing, authentication and the small endpoints
 * (/health, /metrics, /v1/models, /tokenize, /detokenize). Generation
 * requests go to http_openai.c.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "http.h"

static int key_ok(const http_cfg *cfg, const char *a)
{
    while (*a == ' ')
        a++;
    size_t alen = strlen(a);
    int ok = 0;
    for (size_t i = 0; i < cfg->n_api_keys; i++) /* no early exit: every key is compared */
        ok |= http_ct_equal(a, alen, cfg->api_keys[i], strlen(cfg->api_keys[i]));
    return ok;
}

/* Authorization: Bearer <key>, or Anthropic's x-api-key: <key>. */
static int check_auth(http_stream *st)
{
    const http_cfg *cfg = &st->conn->loop->srv->cfg;
    if (!cfg->n_api_keys)
        return 1;
    const char *a = st->authorization;
    int ok = a && strncasecmp(a, "Bearer ", 7) == 0 && key_ok(cfg, a + 7);
    return ok | (st->x_api_key && key_ok(cfg, st->x_api_key));
}

/* The host's SY_ERR_INVALID messages begin with the offending field's path
 * ("response_format.json_schema.schema.properties.a.format: ..."): that path
 * becomes the error's "param". NULL when the message does not start so. */
const char *http_err_param(const char *msg, char *out, size_t cap)
{
    size_t n = 0;
    while (msg[n] && (isalnum((unsigned char)msg[n]) || strchr("_.[]-$", msg[n])))
        n++;
    if (n == 0 || n >= cap || msg[n] != ':' || msg[n + 1] != ' ')
        return NULL;
    memcpy(out, msg, n);
    out[n] = '\0';
    return out;
}

const char *http_model_name(http_server *s, sy_model_info *mi)
{
    memset(mi, 0, sizeof *mi);
    mi->struct_size = sizeof *mi;
    if (s->api->model_info)
        s->api->model_info(s->host->ctx, mi);
    if (s->cfg.model_name)
        return s->cfg.model_name;
    return mi->id ? mi->id : "default";
}

json_t *http_parse_body(http_stream *st)
{
    json_error_t je;
    json_t *root = json_loadb(hbuf_data(&st->body), st->body.len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        http_respond_error(st, 400, "invalid_request_error", NULL, "invalid_json",
                           "request body is not valid JSON: %s at line %d, column %d", je.text, je.line, je.column);
        return NULL;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        http_respond_error(st, 400, "invalid_request_error", NULL, "invalid_json",
                           "request body must be a JSON object");
        return NULL;
    }
    return root;
}

void http_respond_not_ready(http_stream *st, const http_api_errors *how)
{
    st->retry_after = 5;
    http_respond_error(st, 503, how->not_ready_type, NULL, how->not_ready_code,
                       "the server is not ready (the model is loading, or the server is shutting down)");
}

void http_respond_submit_error(http_stream *st, int rc, const sy_err *err, const http_api_errors *how)
{
    http_server *s = st->conn->loop->srv;
    if (rc == SY_ERR_UNAVAILABLE && s->api->ready && !s->api->ready(s->host->ctx)) {
        http_respond_not_ready(st, how); /* the drain (or a reload) began after the check in http_ready_body */
    } else if (rc == SY_ERR_UNAVAILABLE) {
        st->retry_after = 1;
        http_respond_error(st, how->busy_status, how->busy_type, NULL, how->busy_code,
                           "the server is busy (waiting queue full); retry later%s%s", err->msg[0] ? ": " : "",
                           err->msg);
    } else if (rc == SY_ERR_INVALID) {
        char param[256];
        http_respond_error(st, 400, "invalid_request_error",
                           how->invalid_param ? http_err_param(err->msg, param, sizeof param) : NULL, NULL, "%s",
                           err->msg[0] ? err->msg : "invalid request");
    } else {
        http_respond_error(st, rc == SY_ERR_NOMEM ? 503 : 500, how->server_type, NULL, NULL, "submit: %s: %s",
                           sy_status_str(rc), err->msg);
    }
}

json_t *http_ready_body(http_stream *st, const http_api_errors *how)
{
    http_server *s = st->conn->loop->srv;
    if (s->api->ready && !s->api->ready(s->host->ctx)) {
        http_respond_not_ready(st, how);
        return NULL;
    }
    return http_parse_body(st);
}

static void route_models(http_stream *st)
{
    http_server *s = st->conn->loop->srv;
    sy_model_info mi;
    const char *name = http_model_name(s, &mi);
    json_t *m = json_pack("{s:s, s:s, s:I, s:s, s:I}", "id", name, "object", "model", "created", (json_int_t)mi.created,
                          "owned_by", "switchyard", "max_model_len", (json_int_t)mi.max_seq_len);
    http_respond_json(st, 200, json_pack("{s:s, s:[o]}", "object", "list", "data", m));
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* GET /v1/models/{id} (the openai SDK's models.retrieve): the model object
 * for the served name or the model's own id, 404 model_not_found else. The
 * id is percent-decoded: "org/name" may come as org%2Fname. */
static void route_model(http_stream *st)
{
    http_server *s = st->conn->loop->srv;
    sy_model_info mi;
    const char *name = http_model_name(s, &mi);
    const char *raw = st->path + strlen("/v1/models/");
    char id[sizeof st->path];
    size_t k = 0;
    for (const char *c = raw; *c && *c != '?'; c++) {
        if (*c == '%' && hexval(c[1]) >= 0 && hexval(c[2]) >= 0) {
            id[k++] = (char)(hexval(c[1]) * 16 + hexval(c[2]));
            c += 2;
        } else {
            id[k++] = *c;
        }
    }
    if (k && id[k - 1] == '/')
        k--;
    id[k] = '\0';
    if (strcmp(id, name) != 0 && !(mi.id && strcmp(id, mi.id) == 0)) {
        http_respond_error(st, 404, "invalid_request_error", "model", "model_not_found",
                           "the model '%.200s' does not exist (this server serves '%s')", id, name);
        return;
    }
    http_respond_json(st, 200, json_pack("{s:s, s:s, s:I, s:s, s:I}", "id", name, "object", "model", "created",
                                         (json_int_t)mi.created, "owned_by", "switchyard", "max_model_len",
                                         (json_int_t)mi.max_seq_len));
}

static void route_metrics(http_stream *st)
{
    http_server *s = st->conn->loop->srv;
    char *out = NULL;
    size_t len = 0;
    sy_err err = {{0}};
    if (!s->api->metrics_text || s->api->metrics_text(s->host->ctx, &out, &len, &err) != SY_OK) {
        http_respond_error(st, 500, "server_error", NULL, NULL, "metrics unavailable: %s", err.msg);
        return;
    }
    http_respond(st, 200, "text/plain; version=0.0.4; charset=utf-8", out, len);
    s->host->free(s->host->ctx, out);
}

/* The tokenizer answers SY_ERR_UNAVAILABLE while the model loads: a client
 * should retry (503), not conclude the server is broken (500). */
static int tok_status(int rc)
{
    return rc == SY_ERR_INVALID ? 400 : rc == SY_ERR_UNAVAILABLE ? 503 : 500;
}

static const char *tok_type(int rc)
{
    return rc == SY_ERR_INVALID ? "invalid_request_error" : "server_error";
}

static void route_tokenize(http_stream *st)
{
    http_server *s = st->conn->loop->srv;
    json_t *root = http_parse_body(st);
    if (!root)
        return;
    json_t *text = json_object_get(root, "prompt");
    const char *param = "prompt";
    if (!text) {
        text = json_object_get(root, "text");
        param = "text";
    }
    json_t *add = json_object_get(root, "add_special_tokens");
    if (!json_is_string(text)) {
        http_respond_error(st, 400, "invalid_request_error", param, NULL,
                           text ? "'%s' must be a string" : "'prompt' is required (a string)", param);
    } else if (add && !json_is_boolean(add)) {
        http_respond_error(st, 400, "invalid_request_error", "add_special_tokens", NULL,
                           "'add_special_tokens' must be a boolean");
    } else {
        int32_t *ids = NULL;
        size_t n = 0;
        sy_err err = {{0}};
        int rc = s->api->tokenize(s->host->ctx, json_string_value(text), json_string_length(text),
                                  add ? json_is_true(add) : 1, &ids, &n, &err);
        if (rc != SY_OK) {
            http_respond_error(st, tok_status(rc), tok_type(rc), param, NULL, "tokenize: %s", err.msg);
        } else {
            json_t *arr = json_array();
            for (size_t i = 0; i < n; i++)
                json_array_append_new(arr, json_integer(ids[i]));
            s->host->free(s->host->ctx, ids);
            http_respond_json(st, 200, json_pack("{s:o, s:I, s:I}", "tokens", arr, "count", (json_int_t)n,
                                                 "max_model_len", (json_int_t)0));
        }
    }
    json_decref(root);
}

static void route_detokenize(http_stream *st)
{
    http_server *s = st->conn->loop->srv;
    json_t *root = http_parse_body(st);
    if (!root)
        return;
    json_t *toks = json_object_get(root, "tokens");
    if (!json_is_array(toks)) {
        http_respond_error(st, 400, "invalid_request_error", "tokens", NULL, "'tokens' must be an array of integers");
        json_decref(root);
        return;
    }
    size_t n = json_array_size(toks);
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    for (size_t i = 0; ids && i < n; i++) {
        json_t *t = json_array_get(toks, i);
        if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) > INT32_MAX) {
            char param[48];
            snprintf(param, sizeof param, "tokens[%zu]", i);
            http_respond_error(st, 400, "invalid_request_error", param, NULL, "'%s' must be a token id", param);
            free(ids);
            json_decref(root);
            return;
        }
        ids[i] = (int32_t)json_integer_value(t);
    }
    char *text = NULL;
    size_t len = 0;
    sy_err err = {{0}};
    int rc = ids ? s->api->detokenize(s->host->ctx, ids, n, &text, &len, &err) : SY_ERR_NOMEM;
    free(ids);
    if (rc != SY_OK) {
        http_respond_error(st, tok_status(rc), tok_type(rc), "tokens", NULL, "detokenize: %s", err.msg);
    } else {
        http_respond_json(st, 200, json_pack("{s:s%}", "text", text ? text : "", text ? len : 0));
        if (text)
            s->host->free(s->host->ctx, text);
    }
    json_decref(root);
}

typedef struct route {
    const char *path;
    const char *method;
    void (*fn)(http_stream *st);
    int auth;
} route;

static void route_chat(http_stream *st) { http_openai_handle(st, 1); }
static void route_completions(http_stream *st) { http_openai_handle(st, 0); }

static void route_health(http_stream *st)
{
    http_server *s = st->conn->loop->srv;
    int ok = s->api->ready && s->api->ready(s->host->ctx);
    if (ok)
        http_respond(st, 200, "application/json", "{\"status\":\"ok\"}", 15);
    else
        http_respond(st, 503, "application/json", "{\"status\":\"loading\"}", 20);
}

static const route routes[] = {
    {"/v1/chat/completions", "POST", route_chat, 1},
    {"/v1/completions", "POST", route_completions, 1},
    {"/v1/models", "GET", route_models, 1},
    {"/v1/models/", "GET", route_model, 1}, /* a path ending in '/': the prefix of /v1/models/{id} */
    {"/health", "GET", route_health, 0},
    {"/metrics", "GET", route_metrics, 0},
    {"/tokenize", "POST", route_tokenize, 1},
    {"/detokenize", "POST", route_detokenize, 1},
    {"/v1/messages", "POST", http_anthropic_messages, 1},
    {"/v1/messages/count_tokens", "POST", http_anthropic_count_tokens, 1},
};

void http_route(http_stream *st)
{
    http_server *s = st->conn->loop->srv;
    if (!st->request_id[0])
        snprintf(st->request_id, sizeof st->request_id, "req-%d-%lu-%lx", st->conn->loop->index,
                 ++st->conn->loop->seq, (unsigned long)time(NULL));
    if (st->header_bytes > s->cfg.max_header_bytes) {
        http_respond_error(st, 431, "invalid_request_error", NULL, NULL, "request headers over %zu bytes",
                           s->cfg.max_header_bytes);
        return;
    }
    char path[sizeof st->path];
    strcpy(path, st->path);
    char *q = strchr(path, '?');
    if (q)
        *q = '\0';
    size_t plen = strlen(path);
    if (plen > 1 && path[plen - 1] == '/')
        path[plen - 1] = '\0';
    if (strncmp(path, "/v1/messages", 12) == 0) /* Anthropic's clients read Anthropic's error shape */
        st->anthropic_errors = 1;
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        const route *r = &routes[i];
        size_t rlen = strlen(r->path);
        int prefix = r->path[rlen - 1] == '/';
        if (prefix ? strncmp(path, r->path, rlen) != 0 || !path[rlen] : strcmp(path, r->path) != 0)
            continue;
        if (strcmp(st->method, r->method) != 0) {
            http_respond_error(st, 405, "invalid_request_error", NULL, "method_not_allowed",
                               "%s does not accept %s (use %s)", r->path, st->method, r->method);
            return;
        }
        if (r->auth && !check_auth(st)) {
            http_respond_error(st, 401, "authentication_error", NULL, "invalid_api_key",
                               "missing or invalid API key (Authorization: Bearer <key>, or x-api-key: <key>)");
            return;
        }
        if (st->body_too_large) {
            http_respond_error(st, 413, "invalid_request_error", NULL, "request_too_large",
                               "request body over max_body (%zu bytes)", s->cfg.max_body);
            return;
        }
        r->fn(st);
        return;
    }
    if (st->body_too_large) {
        http_respond_error(st, 413, "invalid_request_error", NULL, "request_too_large",
                           "request body over max_body (%zu bytes)", s->cfg.max_body);
        return;
    }
    http_respond_error(st, 404, "invalid_request_error", NULL, "not_found", "no route for %s %s", st->method, path);
}
