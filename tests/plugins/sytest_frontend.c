/*
 * A test frontend for `switchyard serve`: it starts before the model is
 * loaded (recording what ready() said then), waits on its own thread until
 * ready() turns 1, then submits one prompt through host->serving, exactly
 * as a network frontend would, and writes
 * the streamed text, the finish reason and a few API answers to the file
 * named by its `out` key (to out.tmp, renamed when complete, so the test
 * script never reads half a file).
 */
#define _POSIX_C_SOURCE 200809L

#include "switchyard/plugin.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

typedef struct fe {
    const sy_host *host;
    char out[1024];
    char prompt[256];
    int max_tokens;
    char text[4096];
    size_t len;
    int ready_at_start;
    pthread_t thread;
    int started;
    atomic_int stopping; /* stop() before the model got ready: give up waiting */
} fe;

static const sy_key_decl keys[] = {
    {"out", SY_KEY_STRING, NULL, "file the result is written to", 1, 0, NULL},
    {"prompt", SY_KEY_STRING, "Once upon a time", "text to submit", 1, 0, NULL},
    {"max_tokens", SY_KEY_INT, "16", "tokens to generate", 1, 4096, NULL},
    {NULL, 0, NULL, NULL, 0, 0, NULL},
};

static int probe(const sy_host *host, sy_err *why)
{
    (void)host;
    (void)why;
    return 1;
}

static int create(const sy_host *host, const sy_kv *cfg, size_t n, void **inst, sy_err *err)
{
    if (!host->serving)
        return sy_err_set(err, SY_ERR_UNSUPPORTED, "the host serves nothing (host->serving is NULL)");
    fe *f = host->alloc(host->ctx, sizeof *f, sizeof(void *));
    if (!f)
        return sy_err_set(err, SY_ERR_NOMEM, "out of memory");
    memset(f, 0, sizeof *f);
    atomic_init(&f->stopping, 0);
    f->host = host;
    const char *out = sy_kv_get(cfg, n, "out"), *prompt = sy_kv_get(cfg, n, "prompt");
    snprintf(f->out, sizeof f->out, "%s", out ? out : "");
    snprintf(f->prompt, sizeof f->prompt, "%s", prompt ? prompt : "");
    f->max_tokens = (int)sy_kv_int(cfg, n, "max_tokens", 16);
    *inst = f;
    return SY_OK;
}

static void destroy(void *inst)
{
    fe *f = inst;
    f->host->free(f->host->ctx, f);
}

/* Engine thread. */
static void on_event(void *user, const struct sy_event *ev)
{
    fe *f = user;
    if (ev->text_len && f->len + ev->text_len < sizeof f->text) {
        memcpy(f->text + f->len, ev->text, ev->text_len);
        f->len += ev->text_len;
    }
    if (ev->type == SY_EV_TEXT)
        return;
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp", f->out);
    FILE *fp = fopen(tmp, "w");
    if (!fp)
        return;
    fprintf(fp, "text=%.*s\nfinish=%s\ncompletion_tokens=%d\nready=%d\n", (int)f->len, f->text,
            ev->type == SY_EV_DONE ? ev->finish_reason : "error", ev->completion_tokens, f->ready_at_start);
    fclose(fp);
    rename(tmp, f->out);
}

static void write_error(const fe *f, const char *msg)
{
    FILE *fp = fopen(f->out, "w");
    if (fp) {
        fprintf(fp, "error=%s\nready=%d\n", msg, f->ready_at_start);
        fclose(fp);
    }
}

static void *submitter(void *arg)
{
    fe *f = arg;
    const sy_serving_api *api = f->host->serving;
    void *ctx = f->host->ctx;
    const struct timespec tick = {0, 10 * 1000 * 1000};
    for (int i = 0; i < 6000 && !api->ready(ctx) && !atomic_load(&f->stopping); i++)
        nanosleep(&tick, NULL);
    if (atomic_load(&f->stopping))
        return NULL;
    sy_err err = {{0}};
    int32_t *ids = NULL;
    size_t n = 0;
    if (api->tokenize(ctx, f->prompt, strlen(f->prompt), 1, &ids, &n, &err)) {
        write_error(f, err.msg);
        return NULL;
    }
    sy_request r;
    memset(&r, 0, sizeof r);
    r.struct_size = sizeof r;
    r.prompt_ids = ids;
    r.n_prompt = n;
    r.max_tokens = f->max_tokens;
    r.top_p = 1.0f;
    r.repetition_penalty = 1.0f;
    r.skip_special = 1;
    r.top_logprobs = -1;
    r.on_event = on_event;
    r.user = f;
    uint64_t id = 0;
    if (api->submit(ctx, &r, &id, &err)) /* the host copies what it needs */
        write_error(f, err.msg);
    f->host->free(ctx, ids);
    return NULL;
}

static int start(void *inst, sy_err *err)
{
    fe *f = inst;
    f->ready_at_start = f->host->serving->ready(f->host->ctx);
    if (pthread_create(&f->thread, NULL, submitter, f) != 0)
        return sy_err_set(err, SY_ERR_INTERNAL, "sytest-frontend: cannot start its thread");
    f->started = 1;
    return SY_OK;
}

static void stop(void *inst)
{
    fe *f = inst;
    atomic_store(&f->stopping, 1);
    if (f->started)
        pthread_join(f->thread, NULL);
    f->started = 0;
}

static const sy_frontend_ops ops = {sizeof(sy_frontend_ops), start, stop};

static const sy_plugin_desc desc = {
    sizeof(sy_plugin_desc), SY_ABI_MAJOR, SY_ABI_MINOR, SY_KIND_FRONTEND, "sytest-frontend", "0.0.1", "cpu",
    "test frontend: submits one prompt and writes the result to a file", keys, probe, create, destroy, &ops, NULL};

SY_EXPORT const sy_plugin_desc *SY_PLUGIN_ENTRY(void);
SY_EXPORT const sy_plugin_desc *SY_PLUGIN_ENTRY(void) { return &desc; }
