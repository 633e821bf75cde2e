#include "config.h"

#include "serve/serving_proxy.h"

#include <stdatomic.h>
#include <stdlib.h>

struct sy_serving_proxy {
    sy_host_ctx host; /* first: the serving calls get &host as their ctx */
    sy_serving_api api;
    _Atomic(const sy_host *) target;
};

static const sy_host *target_of(void *ctx)
{
    sy_serving_proxy *p = (sy_serving_proxy *)ctx;
    return atomic_load_explicit(&p->target, memory_order_acquire);
}

#define LOADING(err) sy_err_set(err, SY_ERR_UNAVAILABLE, "the model is still loading")

static int px_submit(void *ctx, const sy_request *req, uint64_t *id, sy_err *err)
{
    const sy_host *t = target_of(ctx);
    return t ? t->serving->submit(t->ctx, req, id, err) : LOADING(err);
}

static void px_cancel(void *ctx, uint64_t id)
{
    const sy_host *t = target_of(ctx);
    if (t)
        t->serving->cancel(t->ctx, id);
}

static int px_tokenize(void *ctx, const char *text, size_t len, int add_special, int32_t **ids, size_t *n, sy_err *err)
{
    const sy_host *t = target_of(ctx);
    return t ? t->serving->tokenize(t->ctx, text, len, add_special, ids, n, err) : LOADING(err);
}

static int px_detokenize(void *ctx, const int32_t *ids, size_t n, char **text, size_t *len, sy_err *err)
{
    const sy_host *t = target_of(ctx);
    return t ? t->serving->detokenize(t->ctx, ids, n, text, len, err) : LOADING(err);
}

static int px_chat(void *ctx, const char *messages_json, const char *tools_json, int add_generation_prompt,
                   const char *kwargs_json, char **out, size_t *len, sy_err *err)
{
    const sy_host *t = target_of(ctx);
    return t ? t->serving->apply_chat_template(t->ctx, messages_json, tools_json, add_generation_prompt, kwargs_json,
                                                out, len, err)
             : LOADING(err);
}

static int px_model_info(void *ctx, sy_model_info *out)
{
    const sy_host *t = target_of(ctx);
    return t ? t->serving->model_info(t->ctx, out) : SY_ERR_UNAVAILABLE;
}

static int px_ready(void *ctx)
{
    const sy_host *t = target_of(ctx);
    return t ? t->serving->ready(t->ctx) : 0;
}

static int px_metrics(void *ctx, char **out, size_t *len, sy_err *err)
{
    const sy_host *t = target_of(ctx);
    return t ? t->serving->metrics_text(t->ctx, out, len, err) : LOADING(err);
}

sy_serving_proxy *sy_serving_proxy_new(void)
{
    sy_serving_proxy *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    sy_host_init(&p->host);
    p->api = (sy_serving_api){.struct_size = sizeof(sy_serving_api),
                              .submit = px_submit,
                              .cancel = px_cancel,
                              .tokenize = px_tokenize,
                              .detokenize = px_detokenize,
                              .apply_chat_template = px_chat,
                              .model_info = px_model_info,
                              .ready = px_ready,
                              .metrics_text = px_metrics};
    p->host.api.serving = &p->api;
    atomic_init(&p->target, NULL);
    return p;
}

void sy_serving_proxy_free(sy_serving_proxy *p)
{
    if (!p)
        return;
    sy_host_fini(&p->host);
    free(p);
}

const sy_host *sy_serving_proxy_host(sy_serving_proxy *p) { return &p->host.api; }

void sy_serving_proxy_set_target(sy_serving_proxy *p, const sy_host *target)
{
    atomic_store_explicit(&p->target, target, memory_order_release);
}
