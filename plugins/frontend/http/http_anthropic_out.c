/*
 * frontend/http: what a /v1/messages generation's events become: content
 * blocks (thinking, text, tool_use) in the order the model wrote them,
 * streamed as Anthropic's SSE events (message_start, content_block_start /
 * _delta / _stop, message_delta, message_stop) or answered as one message
 * object; and Anthropic's error objects.
 *
 * One block is open at a time: a piece of another kind closes it and opens
 * the next. A block opens at its first non-blank character, so the blank
 * lines a model writes after </think> or around a tool call make no empty
 * text blocks.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "http.h"

enum { BLK_THINKING = 0, BLK_TEXT = 1, BLK_TOOL = 2 };

typedef struct anth_block {
    int type;
    size_t call;  /* BLK_TOOL: its place in the choice's tool_calls (http_choice_tool_piece) */
    hbuf text;    /* thinking or text */
    char id[96];
} anth_block;

struct http_anth {
    http_choice *ch;    /* the job's one choice: its tool_calls hold the calls' names and arguments */
    anth_block *blocks;
    size_t n, cap;
    int open;           /* the open block's index, -1: none */
    int started;        /* stream: message_start went out */
    int thinking_omitted;
    char **stops;       /* the request's stop sequences, to name the one that matched */
    size_t n_stops;
    int32_t *tokens;    /* the output's tokens, kept only when there are stop sequences */
    size_t n_tokens, cap_tokens;
    int cached_tokens;
};

http_anth *http_anth_new(const char *const *stops, size_t n_stops, int thinking_omitted)
{
    http_anth *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    a->open = -1;
    a->thinking_omitted = thinking_omitted;
    if (n_stops) {
        a->stops = calloc(n_stops, sizeof *a->stops);
        if (!a->stops) {
            free(a);
            return NULL;
        }
        a->n_stops = n_stops;
        for (size_t i = 0; i < n_stops; i++)
            if (!(a->stops[i] = strdup(stops[i]))) {
                http_anthropic_free(a);
                return NULL;
            }
    }
    return a;
}

void http_anthropic_free(http_anth *a)
{
    if (!a)
        return;
    for (size_t i = 0; i < a->n; i++)
        hbuf_free(&a->blocks[i].text);
    free(a->blocks);
    for (size_t i = 0; i < a->n_stops; i++)
        free(a->stops[i]);
    free(a->stops);
    free(a->tokens);
    free(a);
}

const char *http_anthropic_error_type(int status)
{
    switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503:
    case 529: return "overloaded_error";
    default: return status >= 500 ? "api_error" : "invalid_request_error";
    }
}

/* ------------------------------------------------------------ JSON bits */

static json_t *str_json(const char *p, size_t n)
{
    json_t *j = json_stringn(p, n);
    return j ? j : json_string("");
}

static void send_event(http_stream *st, json_t *ev) /* steals ev; its "type" names the SSE event */
{
    char *s = json_dumps(ev, JSON_COMPACT);
    if (s)
        http_sse_event(st, json_string_value(json_object_get(ev, "type")), s, strlen(s));
    free(s);
    json_decref(ev);
}

/* Anthropic counts cache reads apart from input_tokens: their sum is the prompt. */
static json_t *usage_json(const http_job *job, const http_anth *a, int output_tokens)
{
    int cached = a->cached_tokens < job->prompt_tokens ? a->cached_tokens : job->prompt_tokens;
    return json_pack("{s:i, s:i, s:i, s:i}", "input_tokens", job->prompt_tokens - cached, "output_tokens",
                     output_tokens, "cache_creation_input_tokens", 0, "cache_read_input_tokens", cached);
}

static json_t *block_json(const http_anth *a, const anth_block *b, int final)
{
    if (b->type == BLK_THINKING)
        return json_pack("{s:s, s:o, s:s}", "type", "thinking", "thinking",
                         final && !a->thinking_omitted ? str_json(hbuf_data(&b->text), b->text.len)
                                                       : json_string(""),
                         "signature", "");
    if (b->type == BLK_TEXT)
        return json_pack("{s:s, s:o}", "type", "text", "text",
                         final ? str_json(hbuf_data(&b->text), b->text.len) : json_string(""));
    json_t *fn = json_object_get(json_array_get(a->ch->tool_calls, b->call), "function");
    json_t *args = json_object_get(fn, "arguments"), *input = NULL;
    if (final && json_string_length(args)) {
        input = json_loadb(json_string_value(args), json_string_length(args), 0, NULL);
        if (!json_is_object(input)) { /* cut short by max_tokens: the SDK's input is a dict */
            json_decref(input);
            input = NULL;
        }
    }
    const char *name = json_string_value(json_object_get(fn, "name"));
    return json_pack("{s:s, s:s, s:s, s:o}", "type", "tool_use", "id", b->id, "name", name ? name : "", "input",
                     input ? input : json_object());
}

/* ------------------------------------------------------------ blocks */

static void close_open(http_anth *a, http_stream *st)
{
    if (a->open < 0)
        return;
    if (st)
        send_event(st, json_pack("{s:s, s:i}", "type", "content_block_stop", "index", a->open));
    a->open = -1;
}

static anth_block *start_block(http_anth *a, http_stream *st, int type)
{
    close_open(a, st);
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 4;
        anth_block *nb = realloc(a->blocks, cap * sizeof *nb);
        if (!nb)
            return NULL;
        a->blocks = nb;
        a->cap = cap;
    }
    anth_block *b = &a->blocks[a->n];
    memset(b, 0, sizeof *b);
    b->type = type;
    a->open = (int)a->n++;
    return b;
}

static void announce(http_anth *a, http_stream *st, const anth_block *b)
{
    if (st)
        send_event(st, json_pack("{s:s, s:i, s:o}", "type", "content_block_start", "index", a->open,
                                 "content_block", block_json(a, b, 0)));
}

static void add_text(http_anth *a, http_stream *st, int type, const char *p, size_t n)
{
    anth_block *b = a->open >= 0 ? &a->blocks[a->open] : NULL;
    if (!b || b->type != type) {
        while (n && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) {
            p++;
            n--;
        }
        if (!n || !(b = start_block(a, st, type)))
            return;
        announce(a, st, b);
    }
    if (type == BLK_THINKING && a->thinking_omitted)
        return;
    hbuf_append(&b->text, p, n);
    if (st)
        send_event(st, json_pack("{s:s, s:i, s:{s:s, s:o}}", "type", "content_block_delta", "index", a->open, "delta",
                                 "type", type == BLK_TEXT ? "text_delta" : "thinking_delta",
                                 type == BLK_TEXT ? "text" : "thinking", str_json(p, n)));
}

/* The call ids ("call_...") in Anthropic's form; clients only echo them back. */
static void tool_id(char *out, size_t n, const char *call_id)
{
    if (strncmp(call_id, "toolu_", 6) == 0)
        snprintf(out, n, "%s", call_id);
    else
        snprintf(out, n, "toolu_%s", strncmp(call_id, "call_", 5) == 0 ? call_id + 5 : call_id);
}

/* The calls accumulate in the choice (shared with the OpenAI formats); a
 * stream gets the arguments as they complete whole UTF-8 characters. */
static void add_tool_piece(http_anth *a, http_stream *st, const sy_tool_call_delta *d)
{
    int opened;
    const char *ready;
    size_t ready_len;
    int place = http_choice_tool_piece(a->ch, d, &opened, &ready, &ready_len);
    if (place < 0)
        return;
    anth_block *b = NULL;
    size_t at = 0;
    if (opened) {
        if (!(b = start_block(a, st, BLK_TOOL)))
            return;
        b->call = (size_t)place;
        const char *id = json_string_value(json_object_get(json_array_get(a->ch->tool_calls, b->call), "id"));
        tool_id(b->id, sizeof b->id, id ? id : "");
        at = (size_t)a->open;
        announce(a, st, b);
    } else {
        for (size_t i = a->n; i-- > 0 && !b;)
            if (a->blocks[i].type == BLK_TOOL && a->blocks[i].call == (size_t)place) {
                b = &a->blocks[i];
                at = i;
            }
        if (!b)
            return;
    }
    if (st && ready_len)
        send_event(st, json_pack("{s:s, s:i, s:{s:s, s:o}}", "type", "content_block_delta", "index", (int)at, "delta",
                                 "type", "input_json_delta", "partial_json", str_json(ready, ready_len)));
}

static void keep_tokens(http_anth *a, const sy_event *ev)
{
    if (!a->n_stops || !ev->n_tokens || !ev->tokens)
        return;
    if (a->n_tokens + ev->n_tokens > a->cap_tokens) {
        size_t cap = a->cap_tokens ? a->cap_tokens : 64;
        while (cap < a->n_tokens + ev->n_tokens)
            cap *= 2;
        int32_t *t = realloc(a->tokens, cap * sizeof *t);
        if (!t)
            return;
        a->tokens = t;
        a->cap_tokens = cap;
    }
    memcpy(a->tokens + a->n_tokens, ev->tokens, ev->n_tokens * sizeof *a->tokens);
    a->n_tokens += ev->n_tokens;
}

/*
 * The host reports "stop" for EOS and for a stop string alike, and drops
 * the matched text. The output's tokens, detokenized, still hold it: the
 * stop sequence whose first occurrence ends first is the one the host's
 * filter matched (it checks as the text grows); none there means EOS.
 */
static const char *matched_stop(http_job *job, http_anth *a)
{
    if (!a->n_stops || !a->n_tokens)
        return NULL;
    http_server *s = job->srv;
    char *text = NULL;
    size_t len = 0;
    sy_err err = {{0}};
    if (s->api->detokenize(s->host->ctx, a->tokens, a->n_tokens, &text, &len, &err) != SY_OK || !text)
        return NULL;
    const char *best = NULL;
    size_t best_end = (size_t)-1;
    for (size_t i = 0; i < a->n_stops; i++) {
        size_t sl = strlen(a->stops[i]);
        for (size_t at = 0; sl && at + sl <= len && at + sl < best_end; at++)
            if (memcmp(text + at, a->stops[i], sl) == 0) {
                best = a->stops[i];
                best_end = at + sl;
                break;
            }
    }
    s->host->free(s->host->ctx, text);
    return best;
}

static const char *stop_reason(const char *finish, int has_tool, const char *stop_seq)
{
    if (strcmp(finish, "length") == 0)
        return "max_tokens";
    if (strcmp(finish, "tool_calls") == 0 || has_tool)
        return "tool_use";
    return stop_seq ? "stop_sequence" : "end_turn";
}

/* ------------------------------------------------------------ answers */

static void start_stream(http_job *job, http_anth *a, http_stream *st)
{
    if (a->started)
        return;
    a->started = 1;
    http_sse_begin(st);
    json_t *msg = json_pack("{s:s, s:s, s:s, s:s, s:[], s:n, s:n, s:o}", "id", job->id, "type", "message", "role",
                            "assistant", "model", job->model, "content", "stop_reason", "stop_sequence", "usage",
                            usage_json(job, a, 0));
    send_event(st, json_pack("{s:s, s:o}", "type", "message_start", "message", msg));
    send_event(st, json_pack("{s:s}", "type", "ping"));
}

static void finish(http_job *job, http_anth *a, http_stream *st, const sy_event *ev)
{
    const char *finish = ev->finish_reason && ev->finish_reason[0] ? ev->finish_reason : "stop";
    int has_tool = 0;
    for (size_t i = 0; i < a->n; i++)
        has_tool |= a->blocks[i].type == BLK_TOOL;
    const char *seq = strcmp(finish, "stop") == 0 ? matched_stop(job, a) : NULL;
    const char *reason = stop_reason(finish, has_tool, seq);
    if (ev->prompt_tokens)
        job->prompt_tokens = ev->prompt_tokens;
    if (job->streaming) {
        close_open(a, st);
        send_event(st, json_pack("{s:s, s:{s:s, s:o}, s:o}", "type", "message_delta", "delta", "stop_reason", reason,
                                 "stop_sequence", seq ? json_string(seq) : json_null(), "usage",
                                 usage_json(job, a, ev->completion_tokens)));
        send_event(st, json_pack("{s:s}", "type", "message_stop"));
        http_sse_close(st);
        return;
    }
    json_t *content = json_array();
    for (size_t i = 0; i < a->n; i++)
        json_array_append_new(content, block_json(a, &a->blocks[i], 1));
    http_respond_json(st, 200, json_pack("{s:s, s:s, s:s, s:s, s:o, s:s, s:o, s:o}", "id", job->id, "type", "message",
                                         "role", "assistant", "model", job->model, "content", content, "stop_reason",
                                         reason, "stop_sequence", seq ? json_string(seq) : json_null(), "usage",
                                         usage_json(job, a, ev->completion_tokens)));
}

static void fail(http_job *job, http_anth *a, http_stream *st, const sy_event *ev)
{
    int status = ev->status >= 400 && ev->status < 600 ? ev->status : 500;
    const char *msg = ev->error && ev->error[0] ? ev->error : "generation failed";
    job->failed = 1;
    if (!a->started) {
        if (status == 429 || status == 503)
            st->retry_after = 1;
        http_respond_error(st, status, http_anthropic_error_type(status), NULL, NULL, "%s", msg);
        return;
    }
    send_event(st, json_pack("{s:s, s:{s:s, s:s}}", "type", "error", "error", "type",
                             http_anthropic_error_type(status), "message", msg));
    http_sse_close(st);
}

int http_anthropic_on_event(http_job *job, http_stream *st, const sy_event *ev)
{
    http_anth *a = job->anth;
    a->ch = &job->ch[0];
    if (ev->type == SY_EV_ERROR) {
        fail(job, a, st, ev);
        return 1;
    }
    if (ev->cached_tokens > a->cached_tokens)
        a->cached_tokens = ev->cached_tokens;
    http_stream *out = job->streaming ? st : NULL; /* NULL: build the blocks, send nothing yet */
    if (out)
        start_stream(job, a, st);
    keep_tokens(a, ev);
    if (ev->reasoning_len)
        add_text(a, out, BLK_THINKING, ev->reasoning, ev->reasoning_len);
    if (ev->text_len)
        add_text(a, out, BLK_TEXT, ev->text, ev->text_len);
    for (size_t i = 0; i < ev->n_tool_calls && ev->tool_calls; i++)
        add_tool_piece(a, out, &ev->tool_calls[i]);
    if (ev->type != SY_EV_DONE)
        return 0;
    finish(job, a, st, ev);
    return 1;
}
