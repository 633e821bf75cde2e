/*
 * example-line: a frontend that speaks a line protocol on a Unix socket.
 * Each line a client sends is a prompt; the reply is the generated text,
 * streamed as it is produced, ended by a newline (or one line
 * "error: <status> <message>" when the request fails). One I/O thread
 * serves one connection at a time, which keeps the example short; the
 * engine batches requests from any number of frontends.
 *
 * Build: cc -shared -fPIC $(pkg-config --cflags switchyard-plugin) example_line.c -o example-line.so -lpthread
 * Use:   [frontend:line]
 *        plugin = /path/to/example-line.so
 *        socket = /run/switchyard/line.sock
 *        max_tokens = 64
 * Try:   echo 'Once upon a time' | socat - UNIX-CONNECT:/run/switchyard/line.sock
 */
#define _POSIX_C_SOURCE 200809L

#include <switchyard/plugin.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

typedef struct line_fe {
    const sy_host *host;
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    int max_tokens;
    int fd; /* listening socket */
    pthread_t thread;
    int started;

    /* Between the engine thread (on_event) and the I/O thread. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stopping;
    char *pending; /* text not yet written to the client */
    size_t n_pending, cap_pending;
    int finished;  /* the request's last event arrived */
    char error[600];
} line_fe;

static const sy_key_decl keys[] = {
    {"socket", SY_KEY_STRING, NULL, "path of the Unix socket to listen on", 1, 0, NULL},
    {"max_tokens", SY_KEY_INT, "64", "tokens generated per prompt line", 1, 65536, NULL},
    {NULL, SY_KEY_STRING, NULL, NULL, 0, 0, NULL},
};

static int probe(const sy_host *host, sy_err *why)
{
    (void)host;
    (void)why;
    return 1;
}

static int create(const sy_host *host, const sy_kv *cfg, size_t n_cfg, void **out, sy_err *err)
{
    if (!host->serving)
        return sy_err_set(err, SY_ERR_UNSUPPORTED, "example-line: the host serves nothing (run it under `serve`)");
    const char *path = sy_kv_get(cfg, n_cfg, "socket");
    if (!path || !*path || strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
        return sy_err_set(err, SY_ERR_INVALID, "example-line: socket = \"%s\": expected a path of 1..%zu bytes",
                          path ? path : "", sizeof(((struct sockaddr_un *)0)->sun_path) - 1);
    line_fe *f = host->alloc(host->ctx, sizeof *f, sizeof(void *));
    if (!f)
        return sy_err_set(err, SY_ERR_NOMEM, "example-line: out of memory");
    memset(f, 0, sizeof *f);
    f->host = host;
    f->fd = -1;
    snprintf(f->path, sizeof f->path, "%s", path);
    f->max_tokens = (int)sy_kv_int(cfg, n_cfg, "max_tokens", 64);
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    *out = f;
    return SY_OK;
}

static void destroy(void *inst)
{
    line_fe *f = inst;
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
    free(f->pending);
    f->host->free(f->host->ctx, f);
}

/* Engine thread: copy and wake, never block on the client. */
static void on_event(void *user, const sy_event *ev)
{
    line_fe *f = user;
    pthread_mutex_lock(&f->mu);
    if (ev->text_len && f->n_pending + ev->text_len > f->cap_pending) {
        size_t cap = (f->n_pending + ev->text_len) * 2;
        char *p = realloc(f->pending, cap);
        if (p) {
            f->pending = p;
            f->cap_pending = cap;
        }
    }
    if (ev->text_len && f->n_pending + ev->text_len <= f->cap_pending) {
        memcpy(f->pending + f->n_pending, ev->text, ev->text_len);
        f->n_pending += ev->text_len;
    }
    if (ev->type == SY_EV_ERROR)
        snprintf(f->error, sizeof f->error, "%d %s", (int)ev->status, ev->error ? ev->error : "failed");
    if (ev->type != SY_EV_TEXT)
        f->finished = 1;
    pthread_cond_signal(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int reply_error(int fd, const char *msg)
{
    char line[700];
    int n = snprintf(line, sizeof line, "error: %s\n", msg);
    return write_all(fd, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

/* One prompt: submit it and stream its text to the client. */
static int serve_line(line_fe *f, int fd, const char *prompt, size_t len)
{
    const sy_serving_api *api = f->host->serving;
    void *ctx = f->host->ctx;
    if (!api->ready(ctx))
        return reply_error(fd, "503 the model is still loading");
    sy_err err;
    memset(&err, 0, sizeof err);
    int32_t *ids = NULL;
    size_t n = 0;
    if (api->tokenize(ctx, prompt, len, 1, &ids, &n, &err)) {
        char m[600];
        snprintf(m, sizeof m, "400 %s", err.msg);
        return reply_error(fd, m);
    }
    sy_request r;
    memset(&r, 0, sizeof r);
    r.struct_size = sizeof r;
    r.prompt_ids = ids;
    r.n_prompt = n;
    r.max_tokens = f->max_tokens;
    r.top_p = 1.0f; /* temperature 0: greedy */
    r.repetition_penalty = 1.0f;
    r.skip_special = 1;
    r.top_logprobs = -1;
    r.on_event = on_event;
    r.user = f;
    pthread_mutex_lock(&f->mu);
    f->n_pending = 0;
    f->finished = 0;
    f->error[0] = '\0';
    pthread_mutex_unlock(&f->mu);
    uint64_t id = 0;
    int rc = api->submit(ctx, &r, &id, &err); /* the host copies the ids */
    f->host->free(ctx, ids);
    if (rc) {
        char m[600];
        snprintf(m, sizeof m, "%d %s", rc == SY_ERR_UNAVAILABLE ? 429 : 400, err.msg);
        return reply_error(fd, m);
    }
    char buf[4096];
    for (;;) {
        pthread_mutex_lock(&f->mu);
        while (!f->n_pending && !f->finished)
            pthread_cond_wait(&f->cv, &f->mu);
        size_t take = f->n_pending < sizeof buf ? f->n_pending : sizeof buf;
        memcpy(buf, f->pending, take);
        memmove(f->pending, f->pending + take, f->n_pending - take);
        f->n_pending -= take;
        int done = f->finished && !f->n_pending;
        char error[sizeof f->error];
        memcpy(error, f->error, sizeof error);
        pthread_mutex_unlock(&f->mu);
        if (take && write_all(fd, buf, take)) {
            api->cancel(ctx, id); /* client gone: free its KV blocks */
            pthread_mutex_lock(&f->mu);
            while (!f->finished)
                pthread_cond_wait(&f->cv, &f->mu);
            pthread_mutex_unlock(&f->mu);
            return -1;
        }
        if (done)
            return error[0] ? reply_error(fd, error) : write_all(fd, "\n", 1);
    }
}

static int stopping(line_fe *f)
{
    pthread_mutex_lock(&f->mu);
    int s = f->stopping;
    pthread_mutex_unlock(&f->mu);
    return s;
}

/* Reads lines until the client hangs up or the frontend stops. */
static void serve_client(line_fe *f, int fd)
{
    char line[8192];
    size_t n = 0;
    while (!stopping(f)) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 100) <= 0)
            continue;
        ssize_t r = recv(fd, line + n, sizeof line - 1 - n, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return;
        n += (size_t)r;
        char *nl;
        while ((nl = memchr(line, '\n', n))) {
            size_t len = (size_t)(nl - line);
            if (len && line[len - 1] == '\r')
                len--;
            if (len && serve_line(f, fd, line, len))
                return;
            n -= (size_t)(nl + 1 - line);
            memmove(line, nl + 1, n);
        }
        if (n == sizeof line - 1 && reply_error(fd, "413 line longer than 8191 bytes") == 0)
            return;
    }
}

static void *io_thread(void *arg)
{
    line_fe *f = arg;
    while (!stopping(f)) {
        struct pollfd p = {f->fd, POLLIN, 0};
        if (poll(&p, 1, 100) <= 0)
            continue;
        int c = accept(f->fd, NULL, NULL);
        if (c < 0)
            continue;
        serve_client(f, c);
        close(c);
    }
    return NULL;
}

static int start(void *inst, sy_err *err)
{
    line_fe *f = inst;
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    memcpy(a.sun_path, f->path, strlen(f->path) + 1);
    f->fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (f->fd < 0)
        return sy_err_set(err, SY_ERR_IO, "example-line: socket(): %s", strerror(errno));
    unlink(f->path); /* a stale socket of an earlier run */
    if (bind(f->fd, (struct sockaddr *)&a, sizeof a) || listen(f->fd, 16)) {
        int e = errno;
        close(f->fd);
        f->fd = -1;
        return sy_err_set(err, SY_ERR_IO, "example-line: cannot listen on %s: %s", f->path, strerror(e));
    }
    if (pthread_create(&f->thread, NULL, io_thread, f)) {
        close(f->fd);
        f->fd = -1;
        unlink(f->path);
        return sy_err_set(err, SY_ERR_INTERNAL, "example-line: cannot start its I/O thread");
    }
    f->started = 1;
    sy_logf(f->host, SY_LOG_INFO, "example-line", "listening on %s", f->path);
    return SY_OK;
}

static void stop(void *inst)
{
    line_fe *f = inst;
    pthread_mutex_lock(&f->mu);
    f->stopping = 1;
    pthread_mutex_unlock(&f->mu);
    if (f->started)
        pthread_join(f->thread, NULL);
    f->started = 0;
    if (f->fd >= 0) {
        close(f->fd);
        unlink(f->path);
        f->fd = -1;
    }
}

static const sy_frontend_ops ops = {sizeof(sy_frontend_ops), start, stop};

static const sy_plugin_desc desc = {
    .struct_size = sizeof(sy_plugin_desc),
    .abi_major = SY_ABI_MAJOR,
    .abi_minor = SY_ABI_MINOR,
    .kind = SY_KIND_FRONTEND,
    .name = "example-line",
    .version = "1.0.0",
    .device = NULL,
    .description = "example: one prompt per line on a Unix socket, streamed text back",
    .keys = keys,
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
