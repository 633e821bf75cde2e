#include "config.h"

#include "serve/server.h"
#include "engine/engine_internal.h"
#include "serve/chat_glue.h"
#include "serve/guide.h"
#include "serve/metrics.h"
#include "serve/seq.h"
#include "util/log.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>
#include <time.h>

struct sy_server {
    /* First: host->serving points here, and the serving calls find the server from it. */
    sy_serving_api api;
    sy_engine *e;
    sy_sched *sched;
    sy_serve_chat *chat; /* NULL when the model's template failed to load (apply_chat_template says why) */
    char chat_error[512];
    sy_guide guide; /* constraints and tool calls: the grammar cache, the token vocabulary, the tool family */
    sy_serve_metrics metrics;
    int32_t max_waiting;
    char model_id[256];
    int64_t created;

    pthread_t thread;
    bool thread_started;
    pthread_mutex_t lock;
    pthread_cond_t wake; /* the loop sleeps here */
    pthread_cond_t idle; /* drain waits here */
    /* Guarded by lock. */
    sy_seq *in_head, *in_tail; /* submitted, not yet handed to the scheduler */
    int32_t n_in;
    uint64_t *cancels;
    size_t n_cancels, cap_cancels;
    uint64_t next_id;
    bool stop, accepting, sched_idle, abort_all;
    bool failed; /* the tensor-parallel group broke: nothing can run any more */
    char failed_msg[512];
    sy_sched_stats last; /* after the last step */
};

/*
 * The serving calls receive the host's ctx (the engine's sy_host_ctx), as
 * every host service does. The host table's serving member points at the
 * server's api, its first member, which leads back to the server.
 */
static sy_server *from_ctx(void *ctx)
{
    sy_host_ctx *h = ctx;
    return (sy_server *)(void *)h->api.serving;
}

/* ------------------------------------------------------------ engine thread */

/*
 * The group is gone (a rank died or timed out): every request fails, none
 * are taken, and the process is asked to stop (SIGTERM, which serve takes
 * with sigwait) so the operator's supervisor can restart the whole group.
 * Called on the engine thread without the lock.
 */
static void group_failed(sy_server *s, const char *why)
{
    pthread_mutex_lock(&s->lock);
    const bool first = !s->failed;
    s->failed = true;
    s->accepting = false;
    snprintf(s->failed_msg, sizeof s->failed_msg, "%s", why);
    pthread_mutex_unlock(&s->lock);
    if (!first)
        return;
    sy_error("tensor-parallel group failed: %s; refusing requests and stopping", why);
    sy_sched_abort_all(s->sched);
    kill(getpid(), SIGTERM);
}

/* Waits for work; a tensor-parallel rank 0 wakes up to send heartbeats while idle. */
static void wait_for_work(sy_server *s)
{
    const double hb = s->failed ? 0 : sy_engine_heartbeat_interval(s->e);
    while (!s->stop && s->n_in == 0 && s->n_cancels == 0 && s->sched_idle && !s->abort_all) {
        if (hb <= 0) {
            pthread_cond_wait(&s->wake, &s->lock);
            continue;
        }
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += (time_t)hb;
        until.tv_nsec += (long)((hb - (double)(time_t)hb) * 1e9);
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        if (pthread_cond_timedwait(&s->wake, &s->lock, &until) == 0)
            continue;
        pthread_mutex_unlock(&s->lock);
        sy_err err = {{0}};
        const int rc = sy_engine_heartbeat(s->e, &err);
        if (rc)
            group_failed(s, err.msg);
        pthread_mutex_lock(&s->lock);
        if (rc)
            return;
    }
}

static void *engine_loop(void *arg)
{
    sy_server *s = arg;
    uint64_t *cancels = NULL;
    size_t cap = 0;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        wait_for_work(s);
        if (s->stop)
            break;
        sy_seq *in = s->in_head;
        s->in_head = s->in_tail = NULL;
        s->n_in = 0;
        /* Swap the cancel array out so the lock is not held while processing. */
        size_t nc = s->n_cancels;
        uint64_t *tmp = cancels;
        size_t tcap = cap;
        cancels = s->cancels;
        cap = s->cap_cancels;
        s->cancels = tmp;
        s->cap_cancels = tcap;
        s->n_cancels = 0;
        const bool abort_all = s->abort_all;
        s->abort_all = false;
        pthread_mutex_unlock(&s->lock);

        while (in) {
            sy_seq *nx = in->next;
            in->next = NULL;
            sy_sched_add(s->sched, in);
            in = nx;
        }
        for (size_t i = 0; i < nc; i++)
            sy_sched_cancel(s->sched, cancels[i]);
        if (abort_all)
            sy_sched_abort_all(s->sched);
        sy_err err = {{0}};
        if (sy_sched_step(s->sched, &err) < 0)
            sy_error("engine step failed (its requests got an error): %s", err.msg);
        const char *why = NULL;
        if (sy_engine_broken(s->e, &why))
            group_failed(s, why);

        sy_sched_stats st;
        sy_sched_stats_get(s->sched, &st);
        pthread_mutex_lock(&s->lock);
        s->last = st;
        s->sched_idle = sy_sched_idle(s->sched);
        if (s->sched_idle && s->n_in == 0)
            pthread_cond_broadcast(&s->idle);
    }
    pthread_mutex_unlock(&s->lock);
    free(cancels);
    return NULL;
}

/* ------------------------------------------------------------ serving API */

static int api_submit(void *ctx, const sy_request *req, uint64_t *id, sy_err *err)
{
    sy_server *s = from_ctx(ctx);
    pthread_mutex_lock(&s->lock);
    const uint64_t my_id = s->next_id++;
    pthread_mutex_unlock(&s->lock);
    sy_seq *q = NULL;
    /* Validation and copying happen here, on the caller's thread, not the engine's. */
    int rc = sy_seq_new(req, s->e, &s->guide, my_id, &q, err);
    if (!rc && (rc = sy_seq_set_draft_limit(q, req, sy_sched_spec_k(s->sched), err)))
        sy_seq_free(q);
    if (rc)
        return rc;
    pthread_mutex_lock(&s->lock);
    if (!s->accepting) {
        pthread_mutex_unlock(&s->lock);
        sy_seq_free(q);
        return sy_err_set(err, SY_ERR_UNAVAILABLE, "the server is not accepting requests (loading or shutting down)");
    }
    if (s->n_in + s->last.waiting >= s->max_waiting) {
        pthread_mutex_unlock(&s->lock);
        sy_seq_free(q);
        return sy_err_set(err, SY_ERR_UNAVAILABLE, "the waiting queue is full ([scheduler] max_waiting = %d)",
                          s->max_waiting);
    }
    if (s->in_tail)
        s->in_tail->next = q;
    else
        s->in_head = q;
    s->in_tail = q;
    s->n_in++;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
    if (id)
        *id = my_id;
    return SY_OK;
}

static void api_cancel(void *ctx, uint64_t id)
{
    sy_server *s = from_ctx(ctx);
    pthread_mutex_lock(&s->lock);
    if (s->n_cancels == s->cap_cancels) {
        size_t cap = s->cap_cancels ? s->cap_cancels * 2 : 16;
        uint64_t *p = realloc(s->cancels, sizeof(uint64_t) * cap);
        if (!p) {
            pthread_mutex_unlock(&s->lock);
            sy_error("out of memory queueing the cancellation of request %llu", (unsigned long long)id);
            return;
        }
        s->cancels = p;
        s->cap_cancels = cap;
    }
    s->cancels[s->n_cancels++] = id;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
}

static int api_tokenize(void *ctx, const char *text, size_t len, int add_special, int32_t **ids, size_t *n,
                        sy_err *err)
{
    sy_server *s = from_ctx(ctx);
    if (!ids || !n || (!text && len))
        return sy_err_set(err, SY_ERR_INVALID, "tokenize: NULL argument");
    int32_t *tmp = NULL;
    size_t nt = 0;
    int rc = sy_tokenizer_encode(sy_engine_tokenizer(s->e), text ? text : "", len,
                                 (add_special ? SY_TOK_ADD_SPECIAL : 0) | SY_TOK_PARSE_SPECIAL, &tmp, &nt, err);
    if (rc)
        return rc;
    /* Handed over through the host allocator: the plugin frees it with host->free. */
    *ids = s->e->host.api.alloc(&s->e->host, sizeof(int32_t) * (nt ? nt : 1), sizeof(void *));
    if (!*ids) {
        free(tmp);
        return sy_err_set(err, SY_ERR_NOMEM, "tokenize: cannot allocate %zu ids", nt);
    }
    memcpy(*ids, tmp, sizeof(int32_t) * nt);
    *n = nt;
    free(tmp);
    return SY_OK;
}

static int api_detokenize(void *ctx, const int32_t *ids, size_t n, char **text, size_t *len, sy_err *err)
{
    sy_server *s = from_ctx(ctx);
    if (!text || !len || (!ids && n))
        return sy_err_set(err, SY_ERR_INVALID, "detokenize: NULL argument");
    char *tmp = NULL;
    size_t nt = 0;
    int rc = sy_tokenizer_decode(sy_engine_tokenizer(s->e), ids, n, false, &tmp, &nt, err);
    if (rc)
        return rc;
    *text = s->e->host.api.alloc(&s->e->host, nt + 1, sizeof(void *));
    if (!*text) {
        free(tmp);
        return sy_err_set(err, SY_ERR_NOMEM, "detokenize: cannot allocate %zu bytes", nt + 1);
    }
    memcpy(*text, tmp, nt + 1);
    *len = nt;
    free(tmp);
    return SY_OK;
}

static int api_apply_chat_template(void *ctx, const char *messages_json, const char *tools_json,
                                   int add_generation_prompt, const char *kwargs_json, char **out, size_t *len,
                                   sy_err *err)
{
    sy_server *s = from_ctx(ctx);
    if (!out || !len)
        return sy_err_set(err, SY_ERR_INVALID, "apply_chat_template: NULL argument");
    if (!s->chat)
        return sy_err_set(err, SY_ERR_UNSUPPORTED, "this model's chat template cannot be used: %s", s->chat_error);
    char *text = NULL;
    size_t n = 0;
    /* One compiled template may be rendered from several threads at once (chat_template.h). */
    int rc = sy_serve_chat_render(s->chat, sy_engine_tokenizer(s->e), messages_json, tools_json,
                                  add_generation_prompt, kwargs_json, &text, &n, err);
    if (rc)
        return rc;
    *out = s->e->host.api.alloc(&s->e->host, n + 1, sizeof(void *));
    if (!*out) {
        free(text);
        return sy_err_set(err, SY_ERR_NOMEM, "apply_chat_template: cannot allocate %zu bytes", n + 1);
    }
    memcpy(*out, text, n);
    (*out)[n] = '\0';
    *len = n;
    free(text);
    return SY_OK;
}

static int api_model_info(void *ctx, sy_model_info *out)
{
    sy_server *s = from_ctx(ctx);
    if (!out || out->struct_size < offsetof(sy_model_info, created) + sizeof(int64_t))
        return SY_ERR_INVALID;
    out->id = s->model_id;
    out->max_seq_len = sy_engine_max_seq_len(s->e);
    out->vocab = sy_engine_model_config(s->e)->vocab;
    out->created = s->created;
    return SY_OK;
}

static int api_ready(void *ctx)
{
    sy_server *s = from_ctx(ctx);
    pthread_mutex_lock(&s->lock);
    int r = s->accepting && s->thread_started;
    pthread_mutex_unlock(&s->lock);
    return r;
}

static int api_metrics_text(void *ctx, char **out, size_t *len, sy_err *err)
{
    sy_server *s = from_ctx(ctx);
    sy_buf b = {0};
    if (sy_serve_metrics_render(&s->metrics, s->model_id, &b)) {
        sy_buf_free(&b);
        return sy_err_set(err, SY_ERR_NOMEM, "metrics: out of memory");
    }
    *out = s->e->host.api.alloc(&s->e->host, b.len + 1, sizeof(void *));
    if (!*out) {
        sy_buf_free(&b);
        return sy_err_set(err, SY_ERR_NOMEM, "metrics: cannot allocate %zu bytes", b.len + 1);
    }
    memcpy(*out, b.p, b.len + 1);
    *len = b.len;
    sy_buf_free(&b);
    return SY_OK;
}

/* ------------------------------------------------------------ life cycle */

static void default_model_id(sy_server *s, sy_engine *e)
{
    const char *path = e->model && e->model->dir[0] ? e->model->dir : "model";
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    size_t b = n;
    while (b > 0 && path[b - 1] != '/')
        b--;
    snprintf(s->model_id, sizeof s->model_id, "%.*s", (int)(n - b), path + b);
}

int sy_server_new(sy_engine *e, const sy_server_opts *opts, sy_server **out, sy_err *err)
{
    *out = NULL;
    if (e->host.api.serving)
        return sy_err_set(err, SY_ERR_INVALID, "this engine already has a server");
    sy_server *s = calloc(1, sizeof *s);
    if (!s)
        return sy_err_set(err, SY_ERR_NOMEM, "cannot allocate the server");
    s->e = e;
    s->max_waiting = opts && opts->max_waiting > 0 ? opts->max_waiting : 1024;
    if (opts && opts->model_id && *opts->model_id)
        snprintf(s->model_id, sizeof s->model_id, "%s", opts->model_id);
    else
        default_model_id(s, e);
    s->created = (int64_t)time(NULL);
    s->next_id = 1;
    s->sched_idle = true;
    s->accepting = true;
    sy_serve_metrics_init(&s->metrics);
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->wake, NULL);
    pthread_cond_init(&s->idle, NULL);
    int rc = sy_sched_new(e, &s->metrics, &s->sched, err);
    if (!rc && opts && opts->config && (rc = sy_sched_enable_spec(s->sched, opts->config, err))) {
        sy_sched_free(s->sched);
        s->sched = NULL;
    }
    if (rc) {
        sy_serve_metrics_fini(&s->metrics);
        pthread_mutex_destroy(&s->lock);
        pthread_cond_destroy(&s->wake);
        pthread_cond_destroy(&s->idle);
        free(s);
        return rc;
    }
    sy_sched_stats_get(s->sched, &s->last);
    /* A template that does not compile costs chat, not the whole server: completions still work. */
    sy_err cerr = {{0}};
    if (e->chat_template[0]) {
        /* An operator's explicit template must work, or the server does not start. */
        if ((rc = sy_serve_chat_load_file(e->chat_template, &s->chat, err))) {
            sy_sched_free(s->sched);
            sy_serve_metrics_fini(&s->metrics);
            pthread_mutex_destroy(&s->lock);
            pthread_cond_destroy(&s->wake);
            pthread_cond_destroy(&s->idle);
            free(s);
            return rc;
        }
    } else if (sy_serve_chat_load(e->model->dir, &s->chat, &cerr)) {
        snprintf(s->chat_error, sizeof s->chat_error, "%s", cerr.msg);
        sy_warn("chat template: %s (chat completions will be refused)", cerr.msg);
    }
    /* The tool-call family is the operator's, else the one the template writes. */
    if ((rc = sy_guide_init(&s->guide, e, e->tool_parser, s->chat ? s->chat->source : NULL, err))) {
        sy_serve_chat_free(s->chat);
        sy_sched_free(s->sched);
        sy_serve_metrics_fini(&s->metrics);
        pthread_mutex_destroy(&s->lock);
        pthread_cond_destroy(&s->wake);
        pthread_cond_destroy(&s->idle);
        free(s);
        return rc;
    }
    if (s->guide.family)
        sy_info("tool calls: %s format (from %s)", sy_tool_family_name(s->guide.family), s->guide.family_from);
    s->api = (sy_serving_api){.struct_size = sizeof(sy_serving_api),
                              .submit = api_submit,
                              .cancel = api_cancel,
                              .tokenize = api_tokenize,
                              .detokenize = api_detokenize,
                              .apply_chat_template = api_apply_chat_template,
                              .model_info = api_model_info,
                              .ready = api_ready,
                              .metrics_text = api_metrics_text};
    e->host.api.serving = &s->api;
    *out = s;
    return SY_OK;
}

int sy_server_start(sy_server *s, sy_err *err)
{
    pthread_mutex_lock(&s->lock);
    if (s->thread_started) {
        pthread_mutex_unlock(&s->lock);
        return SY_OK;
    }
    int r = pthread_create(&s->thread, NULL, engine_loop, s);
    if (r == 0)
        s->thread_started = true;
    pthread_mutex_unlock(&s->lock);
    if (r)
        return sy_err_set(err, SY_ERR_INTERNAL, "cannot start the engine thread: %s", strerror(r));
    return SY_OK;
}

static bool wait_idle(sy_server *s, double timeout_s, bool stop_accepting)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)timeout_s;
    until.tv_nsec += (long)((timeout_s - (double)(time_t)timeout_s) * 1e9);
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&s->lock);
    if (stop_accepting)
        s->accepting = false;
    int r = 0;
    while (s->thread_started && !(s->sched_idle && s->n_in == 0) && r == 0)
        r = pthread_cond_timedwait(&s->idle, &s->lock, &until);
    const bool done = s->sched_idle && s->n_in == 0;
    pthread_mutex_unlock(&s->lock);
    return done;
}

bool sy_server_drain(sy_server *s, double timeout_s) { return wait_idle(s, timeout_s, true); }
bool sy_server_wait_idle(sy_server *s, double timeout_s) { return wait_idle(s, timeout_s, false); }

void sy_server_abort_all(sy_server *s)
{
    pthread_mutex_lock(&s->lock);
    s->accepting = false;
    s->abort_all = true;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
    wait_idle(s, 60.0, true);
}

void sy_server_free(sy_server *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    s->accepting = false;
    s->stop = true;
    pthread_cond_signal(&s->wake);
    const bool joined = s->thread_started;
    pthread_mutex_unlock(&s->lock);
    if (joined)
        pthread_join(s->thread, NULL);
    /* Whatever never reached the scheduler still gets its final event. */
    while (s->in_head) {
        sy_seq *q = s->in_head;
        s->in_head = q->next;
        sy_seq_emit_done(q, "abort");
        sy_seq_free(q);
    }
    sy_sched_free(s->sched); /* aborts what is left */
    sy_guide_fini(&s->guide); /* after the requests: they hold its grammars */
    sy_serve_chat_free(s->chat);
    if (s->e->host.api.serving == &s->api)
        s->e->host.api.serving = NULL;
    free(s->cancels);
    sy_serve_metrics_fini(&s->metrics);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->wake);
    pthread_cond_destroy(&s->idle);
    free(s);
}

bool sy_server_failed(sy_server *s, char *why, size_t n)
{
    pthread_mutex_lock(&s->lock);
    const bool f = s->failed;
    if (f && why && n)
        snprintf(why, n, "%s", s->failed_msg);
    pthread_mutex_unlock(&s->lock);
    return f;
}

const sy_host *sy_server_host(sy_server *s) { return &s->e->host.api; }
const sy_serving_api *sy_server_api(sy_server *s) { return &s->api; }

void sy_server_stats_get(sy_server *s, sy_server_stats *st)
{
    pthread_mutex_lock(&s->lock);
    st->sched = s->last;
    st->incoming = s->n_in;
    pthread_mutex_unlock(&s->lock);
}
