/*
 * A test frontend for `switchyard serve`: on start it submits one prompt
 * through host->serving, exactly as a network frontend would, and writes
 * the streamed text, the finish reason and a few API answers to the file
 * named by its `out` key (to out.tmp, renamed when complete, so the test
 * script never reads half a file).
 */
#include "switchyard/plugin.h"

#include <stdio.h>

typedef struct fe {
    const sy_host *host;
    char out[1024];
    char prompt[256];
    int max_tokens;
    char text[4096];
    size_t len;
    int ready_at_start;
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

static int start(void *inst, sy_err *err)
{
    fe *f = inst;
    const sy_serving_api *api = f->host->serving;
    void *ctx = f->host->ctx;
    f->ready_at_start = api->ready(ctx);
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = api->tokenize(ctx, f->prompt, strlen(f->prompt), 1, &ids, &n, err);
    if (rc)
        return rc;
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
    rc = api->submit(ctx, &r, &id, err); /* the host copies what it needs */
    f->host->free(ctx, ids);
    return rc;
}

static void stop(void *inst) { (void)inst; }

static const sy_frontend_ops ops = {sizeof(sy_frontend_ops), start, stop};

static const sy_plugin_desc desc = {
    sizeof(sy_plugin_desc), SY_ABI_MAJOR, SY_ABI_MINOR, SY_KIND_FRONTEND, "sytest-frontend", "0.0.1", "cpu",
    "test frontend: submits one prompt and writes the result to a file", keys, probe, create, destroy, &ops, NULL};

SY_EXPORT const sy_plugin_desc *SY_PLUGIN_ENTRY(void);
SY_EXPORT const sy_plugin_desc *SY_PLUGIN_ENTRY(void) { return &desc; }
