/*
 * frontend/http: the plugin descriptor, its INI keys and the instance's
 * life (create, start, stop, destroy). The network work lives in the other
 * files of this folder (see http.h for the map).
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"

const sy_key_decl http_keys[] = {
    {"listen", SY_KEY_STRING, "127.0.0.1:30000", "address to listen on: host:port or [v6]:port", 1, 0, NULL},
    {"api_keys", SY_KEY_STRING, "", "comma-separated API keys for Authorization: Bearer (empty: no auth)", 1, 0, NULL},
    {"tls_cert", SY_KEY_STRING, "", "PEM certificate chain; with tls_key, serve TLS (ALPN h2, http/1.1)", 1, 0, NULL},
    {"tls_key", SY_KEY_STRING, "", "PEM private key for tls_cert", 1, 0, NULL},
    {"max_body", SY_KEY_SIZE, "8M", "largest request body accepted (413 beyond)", 1024, 1073741824.0, NULL},
    {"max_header_bytes", SY_KEY_SIZE, "64K", "largest request header block accepted (431 beyond)", 1024, 16777216.0,
     NULL},
    {"max_pending_output", SY_KEY_SIZE, "4M",
     "unsent response bytes one response may queue for a client that does not read; beyond, the stream is reset "
     "(HTTP/2) or the connection closed (HTTP/1.1) and the request cancelled",
     4096, 1073741824.0, NULL},
    {"io_threads", SY_KEY_INT, "1", "event-loop threads", 1, 64, NULL},
    {"header_timeout", SY_KEY_INT, "10", "seconds a client has to send a request's headers", 1, 3600, NULL},
    {"idle_timeout", SY_KEY_INT, "60", "seconds an idle keep-alive connection stays open", 1, 86400, NULL},
    {"model_name", SY_KEY_STRING, "", "model name served (default: the model's id)", 1, 0, NULL},
    {NULL, 0, NULL, NULL, 0, 0, NULL},
};

static char *dup_or_null(const char *v)
{
    return v && *v ? strdup(v) : NULL;
}

static int parse_listen(http_cfg *cfg, const char *v, sy_err *err)
{
    const char *colon;
    if (v[0] == '[') {
        const char *rb = strchr(v, ']');
        if (!rb || rb[1] != ':' || (size_t)(rb - v - 1) >= sizeof cfg->host)
            return sy_err_set(err, SY_ERR_INVALID, "http: listen \"%s\": expected [v6-address]:port", v);
        memcpy(cfg->host, v + 1, (size_t)(rb - v - 1));
        cfg->host[rb - v - 1] = '\0';
        colon = rb + 1;
    } else {
        colon = strrchr(v, ':');
        if (!colon || (size_t)(colon - v) >= sizeof cfg->host)
            return sy_err_set(err, SY_ERR_INVALID, "http: listen \"%s\": expected host:port", v);
        memcpy(cfg->host, v, (size_t)(colon - v));
        cfg->host[colon - v] = '\0';
        if (!cfg->host[0])
            strcpy(cfg->host, "0.0.0.0");
    }
    const char *port = colon + 1;
    char *end;
    long p = strtol(port, &end, 10);
    if (!*port || *end || p < 0 || p > 65535)
        return sy_err_set(err, SY_ERR_INVALID, "http: listen \"%s\": port must be 0..65535", v);
    snprintf(cfg->port, sizeof cfg->port, "%ld", p);
    return SY_OK;
}

static int parse_keys(http_cfg *cfg, const char *v, sy_err *err)
{
    size_t cap = 1;
    for (const char *p = v; *p; p++)
        cap += *p == ',';
    cfg->api_keys = calloc(cap, sizeof(char *));
    if (!cfg->api_keys)
        return sy_err_set(err, SY_ERR_NOMEM, "http: out of memory for api_keys");
    const char *p = v;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        const char *s = p;
        while (n && isspace((unsigned char)*s)) { s++; n--; }
        while (n && isspace((unsigned char)s[n - 1])) n--;
        if (n) {
            char *k = strndup(s, n);
            if (!k)
                return sy_err_set(err, SY_ERR_NOMEM, "http: out of memory for api_keys");
            cfg->api_keys[cfg->n_api_keys++] = k;
        }
        if (!e)
            break;
        p = e + 1;
    }
    return SY_OK;
}

int http_cfg_parse(http_cfg *cfg, const sy_kv *kv, size_t n, sy_err *err)
{
    memset(cfg, 0, sizeof *cfg);
    const char *v = sy_kv_get(kv, n, "listen");
    int rc = parse_listen(cfg, v ? v : "127.0.0.1:30000", err);
    if (rc)
        return rc;
    v = sy_kv_get(kv, n, "api_keys");
    if ((rc = parse_keys(cfg, v ? v : "", err)))
        return rc;
    cfg->tls_cert = dup_or_null(sy_kv_get(kv, n, "tls_cert"));
    cfg->tls_key = dup_or_null(sy_kv_get(kv, n, "tls_key"));
    if (!cfg->tls_cert != !cfg->tls_key)
        return sy_err_set(err, SY_ERR_INVALID, "http: tls_cert and tls_key go together (found only %s)",
                          cfg->tls_cert ? "tls_cert" : "tls_key");
    cfg->model_name = dup_or_null(sy_kv_get(kv, n, "model_name"));
    cfg->max_body = sy_kv_size(kv, n, "max_body", (size_t)8 << 20);
    cfg->max_header_bytes = sy_kv_size(kv, n, "max_header_bytes", (size_t)64 << 10);
    cfg->max_pending_output = sy_kv_size(kv, n, "max_pending_output", (size_t)4 << 20);
    cfg->io_threads = (int)sy_kv_int(kv, n, "io_threads", 1);
    cfg->header_timeout = (int)sy_kv_int(kv, n, "header_timeout", 10);
    cfg->idle_timeout = (int)sy_kv_int(kv, n, "idle_timeout", 60);
    if (cfg->io_threads < 1 || cfg->io_threads > 64)
        return sy_err_set(err, SY_ERR_INVALID, "http: io_threads must be 1..64, found %d", cfg->io_threads);
    if (cfg->header_timeout < 1)
        cfg->header_timeout = 1;
    if (cfg->idle_timeout < 1)
        cfg->idle_timeout = 1;
    return SY_OK;
}

void http_cfg_free(http_cfg *cfg)
{
    for (size_t i = 0; i < cfg->n_api_keys; i++)
        free(cfg->api_keys[i]);
    free(cfg->api_keys);
    free(cfg->tls_cert);
    free(cfg->tls_key);
    free(cfg->model_name);
    memset(cfg, 0, sizeof *cfg);
}

static int probe(const sy_host *host, sy_err *why)
{
    (void)host;
    (void)why;
    return 1;
}

static void destroy(void *inst);

static int create(const sy_host *host, const sy_kv *cfg, size_t n_cfg, void **inst, sy_err *err)
{
    if (!host || !host->serving)
        return sy_err_set(err, SY_ERR_UNSUPPORTED, "http: the host offers no serving API (not started by serve)");
    http_server *s = calloc(1, sizeof *s);
    if (!s)
        return sy_err_set(err, SY_ERR_NOMEM, "http: cannot allocate the instance");
    s->host = host;
    s->api = host->serving;
    s->lfd = -1;
    int rc = http_cfg_parse(&s->cfg, cfg, n_cfg, err);
    if (rc == SY_OK && s->cfg.tls_cert)
        rc = http_tls_init(s, err);
    if (rc != SY_OK) {
        destroy(s);
        return rc;
    }
    *inst = s;
    return SY_OK;
}

static void stop(void *inst)
{
    http_server *s = inst;
    if (s && s->started) {
        http_loops_stop(s);
        s->started = 0;
    }
}

static void destroy(void *inst)
{
    http_server *s = inst;
    if (!s)
        return;
    stop(s);
    http_tls_free(s);
    http_cfg_free(&s->cfg);
    free(s);
}

static int start(void *inst, sy_err *err)
{
    http_server *s = inst;
    if (s->started)
        return sy_err_set(err, SY_ERR_INVALID, "http: already started");
    int rc = http_server_listen(s, err);
    if (rc == SY_OK)
        rc = http_loops_start(s, err);
    if (rc == SY_OK)
        s->started = 1;
    return rc;
}

static const sy_frontend_ops ops = {
    .struct_size = sizeof(sy_frontend_ops),
    .start = start,
    .stop = stop,
};

static const sy_plugin_desc desc = {
    .struct_size = sizeof(sy_plugin_desc),
    .abi_major = SY_ABI_MAJOR,
    .abi_minor = SY_ABI_MINOR,
    .kind = SY_KIND_FRONTEND,
    .name = "http",
    .version = PACKAGE_VERSION,
    .device = NULL,
    .description = "OpenAI-compatible API over HTTP/2 (h2c, TLS+ALPN) and HTTP/1.1 on one port",
    .keys = http_keys,
    .probe = probe,
    .create = create,
    .destroy = destroy,
    .ops = &ops,
    .get_proc = NULL,
};

SY_EXPORT const sy_plugin_desc *SY_PLUGIN_ENTRY(void);
SY_EXPORT const sy_plugin_desc *SY_PLUGIN_ENTRY(void)
{
    return &desc;
}
