/* The fake serving host (see fake_host.h). */
#include "config.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "fake_host.h"
#include "fake_script.h"

struct fake_req {
    fake_req *next;
    uint64_t id;
    int32_t *prompt;
    size_t n_prompt;
    int max_tokens, top_logprobs, reasoning;
    char **stops;
    size_t n_stops;
    int32_t *stop_ids;
    size_t n_stop_ids;
    void (*on_event)(void *user, const sy_event *ev);
    void *user;
    int produced;
    int cancelled;
    int delay_ms;
    int fail_after;
    int think;
    int manual;
    int eos_after; /* "eos": finish "stop" after this many tokens, -1: never */
    int tool_step; /* "calltool": 1 once the call is due, then its pieces */
    char tool_name[64];
    int ended; /* stepped to its end outside the engine thread */
    fake_script *script; /* a constrained or tool-call answer (fake_script.h), NULL: free text */
    long long next_at_ms;
    char text[8192];
    size_t text_len;
};

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void *fh_alloc(void *ctx, size_t size, size_t align)
{
    (void)ctx;
    void *p = NULL;
    if (align < sizeof(void *))
        align = sizeof(void *);
    return posix_memalign(&p, align, size ? size : 1) == 0 ? p : NULL;
}

static void fh_free(void *ctx, void *p)
{
    (void)ctx;
    free(p);
}

static void fh_log(void *ctx, sy_log_level level, const char *plugin, const char *msg)
{
    fake_host *fh = ctx;
    const char *at = strstr(msg, "listening on ");
    if (at) {
        const char *colon = strrchr(at, ':');
        if (colon)
            fh->port = atoi(colon + 1);
    }
    if (fh->verbose || level <= SY_LOG_WARN)
        fprintf(stderr, "[%s] %s\n", plugin, msg);
}

static void fh_metric_add(void *ctx, const char *name, double v)
{
    (void)ctx;
    (void)name;
    (void)v;
}

static int contains(const int32_t *ids, size_t n, const char *word)
{
    size_t w = strlen(word);
    for (size_t i = 0; i + w <= n; i++) {
        size_t k = 0;
        while (k < w && ids[i + k] == (unsigned char)word[k])
            k++;
        if (k == w)
            return 1;
    }
    return 0;
}

static int step(fake_req *r);

static void set_str(char **slot, const char *s)
{
    free(*slot);
    *slot = s ? strdup(s) : NULL;
}

/* The first tool's name in an OpenAI tools JSON text, "" when none. */
static void first_tool_name(const char *tools_json, char *out, size_t n)
{
    json_t *t = json_loads(tools_json, 0, NULL);
    const char *name = json_string_value(json_object_get(json_object_get(json_array_get(t, 0), "function"), "name"));
    snprintf(out, n, "%s", name ? name : "");
    json_decref(t);
}

static int fh_submit(void *ctx, const sy_request *req, uint64_t *id, sy_err *err)
{
    fake_host *fh = ctx;
    if (!req || req->struct_size < sizeof(sy_request) || !req->on_event)
        return sy_err_set(err, SY_ERR_INVALID, "fake: bad sy_request");
    if (req->n_prompt == 0)
        return sy_err_set(err, SY_ERR_INVALID, "fake: the prompt is empty");
    if (contains(req->prompt_ids, req->n_prompt, "busy"))
        return sy_err_set(err, SY_ERR_UNAVAILABLE, "fake: waiting queue full");
    if (contains(req->prompt_ids, req->n_prompt, "closing")) { /* the drain began after ready() said yes */
        pthread_mutex_lock(&fh->mu);
        fh->ready = 0;
        pthread_mutex_unlock(&fh->mu);
        return sy_err_set(err, SY_ERR_UNAVAILABLE, "fake: the server is not accepting requests (shutting down)");
    }
    if (contains(req->prompt_ids, req->n_prompt, "invalid"))
        return sy_err_set(err, SY_ERR_INVALID, "fake: the prompt says invalid");
    fake_req *r = calloc(1, sizeof *r);
    if (!r)
        return sy_err_set(err, SY_ERR_NOMEM, "fake: oom");
    r->prompt = malloc(req->n_prompt * sizeof(int32_t));
    memcpy(r->prompt, req->prompt_ids, req->n_prompt * sizeof(int32_t));
    r->n_prompt = req->n_prompt;
    r->max_tokens = req->max_tokens;
    r->top_logprobs = req->top_logprobs;
    r->reasoning = req->reasoning;
    r->n_stops = req->n_stop_strings;
    r->stops = calloc(r->n_stops + 1, sizeof(char *));
    for (size_t i = 0; i < r->n_stops; i++)
        r->stops[i] = strdup(req->stop_strings[i]);
    r->n_stop_ids = req->n_stop_ids;
    r->stop_ids = calloc(r->n_stop_ids + 1, sizeof(int32_t));
    if (r->n_stop_ids)
        memcpy(r->stop_ids, req->stop_ids, r->n_stop_ids * sizeof(int32_t));
    r->on_event = req->on_event;
    r->user = req->user;
    r->delay_ms = contains(r->prompt, r->n_prompt, "slow") ? 30 : 0;
    r->fail_after = contains(r->prompt, r->n_prompt, "fail") ? 2 : -1;
    r->think = r->reasoning && contains(r->prompt, r->n_prompt, "think");
    r->manual = contains(r->prompt, r->n_prompt, "manual");
    r->eos_after = contains(r->prompt, r->n_prompt, "eos") ? 2 : -1;
    if (req->tools_json && req->tool_choice != SY_TOOL_CHOICE_NONE && contains(r->prompt, r->n_prompt, "calltool") &&
        !contains(r->prompt, r->n_prompt, "<tool>")) {
        r->tool_step = 1;
        first_tool_name(req->tools_json, r->tool_name, sizeof r->tool_name);
    }
    pthread_mutex_lock(&fh->mu);
    fh->last_req = *req;
    set_str(&fh->last_req_tools, req->tools_json);
    set_str(&fh->last_req_choice_name, req->tool_choice_name);
    set_str(&fh->last_req_constraint, req->constraint);
    set_str(&fh->last_req_constraint_path, req->constraint_path);
    fh->last_req_bias[0] = '\0';
    for (size_t i = 0, k = 0; i < req->n_logit_bias && k + 32 < sizeof fh->last_req_bias; i++)
        k += (size_t)snprintf(fh->last_req_bias + k, sizeof fh->last_req_bias - k, "%s%d:%g", i ? " " : "",
                              req->logit_bias_ids[i], (double)req->logit_bias[i]);
    r->script = fake_script_new(req, contains(r->prompt, r->n_prompt, "calltwo"));
    fh->last_req.prompt_ids = NULL;
    fh->last_req.stop_ids = NULL;
    fh->last_req.stop_strings = NULL;
    fh->last_req.tools_json = fh->last_req.tool_choice_name = fh->last_req.constraint = NULL;
    fh->last_req.constraint_path = NULL;
    fh->last_req.logit_bias_ids = NULL;
    fh->last_req.logit_bias = NULL;
    fh->last_req.user = NULL;
    if (contains(r->prompt, r->n_prompt, "hold")) {
        for (fake_req *m = fh->reqs; m; m = m->next)
            if (m->manual && !m->cancelled) {
                m->manual = 0;
                m->ended = step(m); /* one token: its event is queued for the I/O thread running this submit */
            }
        if (fh->on_hold)
            fh->on_hold(fh->on_hold_arg);
    }
    r->id = ++fh->next_id;
    r->next_at_ms = now_ms() + r->delay_ms;
    r->next = fh->reqs;
    fh->reqs = r;
    fh->n_submit++;
    fh->n_active++;
    pthread_mutex_unlock(&fh->mu);
    *id = r->id;
    return SY_OK;
}

static void fh_cancel(void *ctx, uint64_t id)
{
    fake_host *fh = ctx;
    pthread_mutex_lock(&fh->mu);
    for (fake_req *r = fh->reqs; r; r = r->next)
        if (r->id == id && !r->cancelled) {
            r->cancelled = 1;
            fh->n_cancel++;
        }
    pthread_mutex_unlock(&fh->mu);
}

/* Like the server's serving proxy: no tokenizer until the model is loaded. */
static int fh_loading(void *ctx, sy_err *err)
{
    fake_host *fh = ctx;
    pthread_mutex_lock(&fh->mu);
    int r = fh->ready;
    pthread_mutex_unlock(&fh->mu);
    return r ? SY_OK : sy_err_set(err, SY_ERR_UNAVAILABLE, "the model is still loading");
}

static int fh_tokenize(void *ctx, const char *text, size_t len, int add_special, int32_t **ids, size_t *n,
                       sy_err *err)
{
    if (fh_loading(ctx, err))
        return SY_ERR_UNAVAILABLE;
    int32_t *out = malloc((len + 2) * sizeof *out);
    if (!out)
        return sy_err_set(err, SY_ERR_NOMEM, "fake: oom");
    size_t k = 0;
    if (add_special)
        out[k++] = 1;
    for (size_t i = 0; i < len; i++)
        out[k++] = (unsigned char)text[i];
    *ids = out;
    *n = k;
    return SY_OK;
}

static int fh_detokenize(void *ctx, const int32_t *ids, size_t n, char **text, size_t *len, sy_err *err)
{
    if (fh_loading(ctx, err))
        return SY_ERR_UNAVAILABLE;
    char *out = malloc(n * 16 + 1);
    if (!out)
        return sy_err_set(err, SY_ERR_NOMEM, "fake: oom");
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += (size_t)sprintf(out + k, "t%d ", ids[i]);
    out[k] = '\0';
    *text = out;
    *len = k;
    return SY_OK;
}

static int fh_chat(void *ctx, const char *messages_json, const char *tools_json, int add_generation_prompt,
                   const char *kwargs_json, char **out, size_t *len, sy_err *err)
{
    fake_host *fh = ctx;
    pthread_mutex_lock(&fh->mu);
    set_str(&fh->last_messages, messages_json);
    set_str(&fh->last_tools, tools_json);
    set_str(&fh->last_kwargs, kwargs_json);
    pthread_mutex_unlock(&fh->mu);
    json_error_t je;
    json_t *msgs = json_loads(messages_json, 0, &je);
    if (!msgs)
        return sy_err_set(err, SY_ERR_INVALID, "fake: messages are not JSON: %s", je.text);
    size_t cap = strlen(messages_json) + 256;
    char *s = malloc(cap);
    size_t k = 0;
    for (size_t i = 0; i < json_array_size(msgs); i++) {
        json_t *m = json_array_get(msgs, i);
        const char *c = json_string_value(json_object_get(m, "content"));
        k += (size_t)snprintf(s + k, cap - k, "<%s>%s\n", json_string_value(json_object_get(m, "role")), c ? c : "");
    }
    if (kwargs_json && strstr(kwargs_json, "enable_thinking"))
        k += (size_t)snprintf(s + k, cap - k, "think\n");
    if (add_generation_prompt)
        k += (size_t)snprintf(s + k, cap - k, "<assistant>");
    json_decref(msgs);
    *out = s;
    *len = k;
    return SY_OK;
}

static int fh_model_info(void *ctx, sy_model_info *out)
{
    (void)ctx;
    if (out->struct_size < sizeof *out)
        return SY_ERR_INVALID;
    out->id = "fake-model";
    out->max_seq_len = 4096;
    out->vocab = 256;
    out->created = 1700000000;
    return SY_OK;
}

static int fh_ready(void *ctx)
{
    fake_host *fh = ctx;
    pthread_mutex_lock(&fh->mu);
    int r = fh->ready;
    pthread_mutex_unlock(&fh->mu);
    return r;
}

static int fh_metrics(void *ctx, char **out, size_t *len, sy_err *err)
{
    fake_host *fh = ctx;
    char *s = malloc(256);
    if (!s)
        return sy_err_set(err, SY_ERR_NOMEM, "fake: oom");
    pthread_mutex_lock(&fh->mu);
    int n = snprintf(s, 256, "# TYPE sy_requests_total counter\nsy_requests_total %d\n", fh->n_submit);
    pthread_mutex_unlock(&fh->mu);
    *out = s;
    *len = (size_t)n;
    return SY_OK;
}

static void fill_event(sy_event *ev, const fake_req *r, int type)
{
    memset(ev, 0, sizeof *ev);
    ev->struct_size = sizeof *ev;
    ev->type = type;
    ev->request_id = r->id;
    ev->text = "";
    ev->reasoning = "";
}

static void finish(fake_req *r, const char *reason)
{
    sy_event ev;
    fill_event(&ev, r, SY_EV_DONE);
    ev.finish_reason = reason;
    ev.prompt_tokens = (int32_t)r->n_prompt;
    ev.completion_tokens = r->produced;
    r->on_event(r->user, &ev);
}

/* "calltool": the call's pieces, one step each, then the end. */
static int tool_step(fake_req *r)
{
    static const char *const args[] = {"{\"city\": ", "\"Paris\"}"};
    if (r->tool_step > 2) {
        finish(r, "tool_calls");
        return 1;
    }
    sy_tool_call_delta d = {.index = 0, .arguments = args[r->tool_step - 1]};
    d.arguments_len = strlen(d.arguments);
    if (r->tool_step == 1) {
        d.id = "call_fake0";
        d.name = r->tool_name;
    }
    int32_t id = r->prompt[(size_t)r->produced % r->n_prompt];
    r->produced++;
    r->tool_step++;
    sy_event ev;
    fill_event(&ev, r, SY_EV_TEXT);
    ev.tokens = &id;
    ev.n_tokens = 1;
    ev.tool_calls = &d;
    ev.n_tool_calls = 1;
    r->on_event(r->user, &ev);
    return 0;
}

/* The scripted answer's next piece (fake_script.h), then its end. */
static int script_step(fake_req *r)
{
    fake_script *s = r->script;
    if (s->at == s->n) {
        finish(r, s->finish);
        return 1;
    }
    const fake_piece *p = &s->pieces[s->at++];
    int32_t id = 'x';
    r->produced++;
    sy_event ev;
    fill_event(&ev, r, SY_EV_TEXT);
    ev.tokens = &id;
    ev.n_tokens = 1;
    sy_tool_call_delta d = {.index = p->call, .id = p->id, .name = p->name, .arguments = p->bytes,
                            .arguments_len = p->len};
    if (p->call < 0) {
        ev.text = p->bytes;
        ev.text_len = p->len;
    } else {
        ev.tool_calls = &d;
        ev.n_tool_calls = 1;
    }
    r->on_event(r->user, &ev);
    return 0;
}

/* One step of a request; returns 1 when it ended. Called with fh->mu held. */
static int step(fake_req *r)
{
    if (r->cancelled) {
        finish(r, "abort");
        return 1;
    }
    if (r->think) {
        r->think = 0;
        sy_event ev;
        fill_event(&ev, r, SY_EV_TEXT);
        ev.reasoning = "pondering";
        ev.reasoning_len = 9;
        r->on_event(r->user, &ev);
        return 0;
    }
    if (r->fail_after >= 0 && r->produced >= r->fail_after) {
        sy_event ev;
        fill_event(&ev, r, SY_EV_ERROR);
        ev.error = "fake engine fault";
        ev.status = 500;
        r->on_event(r->user, &ev);
        return 1;
    }
    if (r->produced >= r->max_tokens) {
        finish(r, "length");
        return 1;
    }
    if (r->eos_after >= 0 && r->produced >= r->eos_after) {
        r->produced++; /* the EOS token: counted, no text */
        finish(r, "stop");
        return 1;
    }
    if (r->script)
        return script_step(r);
    if (r->tool_step && r->produced >= 1)
        return tool_step(r);
    int32_t id = r->prompt[(size_t)r->produced % r->n_prompt];
    for (size_t i = 0; i < r->n_stop_ids; i++)
        if (r->stop_ids[i] == id) {
            r->produced++;
            finish(r, "stop");
            return 1;
        }
    char piece[32];
    int plen = snprintf(piece, sizeof piece, "t%d ", id);
    /* A long generation (no max_tokens) outgrows the record: what no longer fits is neither kept nor sent. */
    const int fits = r->text_len + (size_t)plen < sizeof r->text;
    if (fits)
        memcpy(r->text + r->text_len, piece, (size_t)plen + 1);
    size_t emit = fits ? (size_t)plen : 0;
    int stopped = 0;
    for (size_t i = 0; i < r->n_stops; i++) {
        const char *hit = strstr(r->text, r->stops[i]);
        if (hit && (size_t)(hit - r->text) < r->text_len + emit) {
            size_t at = (size_t)(hit - r->text);
            emit = at > r->text_len ? at - r->text_len : 0;
            stopped = 1;
        }
    }
    r->produced++;
    sy_event ev;
    fill_event(&ev, r, SY_EV_TEXT);
    ev.text = r->text + r->text_len;
    ev.text_len = emit;
    float lp = -0.25f * (float)r->produced;
    int32_t top_ids[4];
    float top_lp[4];
    if (r->top_logprobs >= 0) {
        ev.tokens = &id;
        ev.n_tokens = 1;
        ev.logprobs = &lp;
        int nt = r->top_logprobs < 4 ? r->top_logprobs : 4;
        for (int j = 0; j < nt; j++) {
            top_ids[j] = id + j + 1;
            top_lp[j] = lp - 1.0f - (float)j;
        }
        ev.top_ids = top_ids;
        ev.top_logprobs = top_lp;
        ev.n_top = nt;
    } else {
        ev.tokens = &id;
        ev.n_tokens = 1;
    }
    r->on_event(r->user, &ev);
    r->text_len += emit;
    r->text[r->text_len] = '\0';
    if (stopped) {
        finish(r, "stop");
        return 1;
    }
    return 0;
}

static void free_req(fake_req *r)
{
    fake_script_free(r->script);
    for (size_t i = 0; i < r->n_stops; i++)
        free(r->stops[i]);
    free(r->stops);
    free(r->stop_ids);
    free(r->prompt);
    free(r);
}

static void *engine(void *arg)
{
    fake_host *fh = arg;
    for (;;) {
        pthread_mutex_lock(&fh->mu);
        if (fh->quit && !fh->reqs) {
            pthread_mutex_unlock(&fh->mu);
            break;
        }
        long long now = now_ms();
        for (fake_req **pp = &fh->reqs; *pp;) {
            fake_req *r = *pp;
            if (fh->quit)
                r->cancelled = 1;
            if (!r->cancelled && (r->manual || r->next_at_ms > now)) {
                pp = &r->next;
                continue;
            }
            r->next_at_ms = now + r->delay_ms;
            if (r->ended || step(r)) {
                *pp = r->next;
                fh->n_done++;
                fh->n_active--;
                free_req(r);
            } else {
                pp = &r->next;
            }
        }
        pthread_mutex_unlock(&fh->mu);
        usleep(1000);
    }
    return NULL;
}

int fake_host_start(fake_host *fh, const char *const *overrides, sy_err *err)
{
    memset(fh, 0, sizeof *fh);
    pthread_mutex_init(&fh->mu, NULL);
    fh->ready = 1;
    fh->verbose = getenv("SY_TEST_VERBOSE") != NULL;
    fh->api = (sy_serving_api){
        .struct_size = sizeof(sy_serving_api),
        .submit = fh_submit,
        .cancel = fh_cancel,
        .tokenize = fh_tokenize,
        .detokenize = fh_detokenize,
        .apply_chat_template = fh_chat,
        .model_info = fh_model_info,
        .ready = fh_ready,
        .metrics_text = fh_metrics,
    };
    fh->host = (sy_host){
        .struct_size = sizeof(sy_host),
        .abi_major = SY_ABI_MAJOR,
        .abi_minor = SY_ABI_MINOR,
        .ctx = fh,
        .log = fh_log,
        .alloc = fh_alloc,
        .free = fh_free,
        .metric_add = fh_metric_add,
        .serving = &fh->api,
    };
    const char *dir = getenv("SY_PLUGIN_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/sy-frontend-http.so", dir ? dir : "build-plugins");
    fh->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!fh->dl)
        return sy_err_set(err, SY_ERR_IO, "dlopen %s: %s", path, dlerror());
    sy_plugin_entry_fn entry = (sy_plugin_entry_fn)dlsym(fh->dl, SY_PLUGIN_ENTRY_NAME);
    if (!entry)
        return sy_err_set(err, SY_ERR_INVALID, "%s: no %s", path, SY_PLUGIN_ENTRY_NAME);
    fh->desc = entry();
    if (fh->desc->kind != SY_KIND_FRONTEND || strcmp(fh->desc->name, "http") != 0 || fh->desc->device)
        return sy_err_set(err, SY_ERR_INVALID, "%s: not the http frontend", path);
    /* Defaults from the declarations, then the overrides (as the core does). */
    sy_kv kv[64];
    char *owned[64];
    size_t n = 0, n_owned = 0;
    for (const sy_key_decl *k = fh->desc->keys; k && k->name && n < 64; k++)
        kv[n++] = (sy_kv){k->name, k->default_value};
    for (const char *const *o = overrides; o && *o; o++) {
        char *eq = strchr(*o, '=');
        if (!eq)
            continue;
        char *key = strndup(*o, (size_t)(eq - *o));
        owned[n_owned++] = key;
        size_t i = 0;
        while (i < n && strcmp(kv[i].key, key) != 0)
            i++;
        if (i == n)
            return sy_err_set(err, SY_ERR_INVALID, "unknown key %s", key);
        kv[i].value = eq + 1;
    }
    int rc = fh->desc->create(&fh->host, kv, n, &fh->inst, err);
    for (size_t i = 0; i < n_owned; i++)
        free(owned[i]);
    if (rc != SY_OK)
        return -1;
    pthread_create(&fh->thread, NULL, engine, fh);
    const sy_frontend_ops *ops = fh->desc->ops;
    if (ops->start(fh->inst, err) != SY_OK)
        return -1;
    return 0;
}

void fake_host_stop(fake_host *fh)
{
    if (fh->inst) {
        const sy_frontend_ops *ops = fh->desc->ops;
        ops->stop(fh->inst);
        fh->desc->destroy(fh->inst);
        fh->inst = NULL;
    }
    if (fh->thread) {
        pthread_mutex_lock(&fh->mu);
        fh->quit = 1;
        pthread_mutex_unlock(&fh->mu);
        pthread_join(fh->thread, NULL);
        fh->thread = 0;
    }
    if (fh->dl)
        dlclose(fh->dl);
    fh->dl = NULL;
    free(fh->last_messages);
    free(fh->last_tools);
    free(fh->last_kwargs);
    free(fh->last_req_tools);
    free(fh->last_req_choice_name);
    free(fh->last_req_constraint);
    free(fh->last_req_constraint_path);
    fh->last_req_constraint_path = NULL;
    fh->last_messages = fh->last_tools = fh->last_kwargs = NULL;
    fh->last_req_tools = fh->last_req_choice_name = fh->last_req_constraint = NULL;
    pthread_mutex_destroy(&fh->mu);
}

int fake_host_counter(fake_host *fh, const int *field)
{
    pthread_mutex_lock(&fh->mu);
    int v = *field;
    pthread_mutex_unlock(&fh->mu);
    return v;
}
