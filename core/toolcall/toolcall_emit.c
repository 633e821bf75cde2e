/*
 * What the tool-call parsers write (toolcall_parser.h): the output pieces
 * and call ids, GLM / DSML raw values typed by the schema, JSON arguments
 * through the normaliser, and the {"name", "arguments"} wrapper objects
 * of Hermes, Llama and Mistral.
 *
 * (The parsers: toolcall_parse.c.)
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "toolcall/toolcall_parser.h"

/* ------------------------------------------------------------ output */

void sy_tool_out_reset(sy_tool_out *o)
{
    o->content.len = 0;
    o->reasoning.len = 0;
    o->strings.len = 0;
    o->n_deltas = 0;
}

void sy_tool_out_fini(sy_tool_out *o)
{
    sy_buf_free(&o->content);
    sy_buf_free(&o->reasoning);
    sy_buf_free(&o->strings);
    free(o->deltas);
    free(o->offsets);
    memset(o, 0, sizeof *o);
}

void tc_app(sy_tool_parser *p, sy_buf *b, const char *s, size_t n)
{
    if (n && sy_buf_append(b, s, n))
        p->oom = true;
}

#define NO_OFF ((size_t)-1)

static size_t put_string(sy_tool_parser *p, const char *s, size_t n)
{
    sy_buf *b = &p->out->strings;
    size_t at = b->len;
    tc_app(p, b, s, n);
    tc_app(p, b, "", 1); /* the NUL, counted so the next string starts after it */
    return at;
}

static sy_tool_call_delta *new_delta(sy_tool_parser *p)
{
    sy_tool_out *o = p->out;
    if (o->n_deltas == o->cap_deltas) {
        size_t cap = o->cap_deltas ? o->cap_deltas * 2 : 8;
        sy_tool_call_delta *d = realloc(o->deltas, cap * sizeof *d);
        if (!d) {
            p->oom = true;
            return NULL;
        }
        o->deltas = d;
        size_t *off = realloc(o->offsets, cap * 3 * sizeof *off);
        if (!off) {
            p->oom = true;
            return NULL;
        }
        o->offsets = off;
        o->cap_deltas = cap;
    }
    sy_tool_call_delta *d = &o->deltas[o->n_deltas];
    memset(d, 0, sizeof *d);
    d->index = p->n_calls - 1;
    size_t *off = &o->offsets[o->n_deltas * 3];
    off[0] = off[1] = NO_OFF;
    off[2] = o->strings.len;
    o->n_deltas++;
    return d;
}

static void gen_id(sy_tool_parser *p, char *buf, size_t n)
{
    static const char an[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    for (size_t i = 0; i < n; i++) {
        /* splitmix64: reproducible from the seed, different per call */
        uint64_t z = (p->rng += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        buf[i] = an[z % (sizeof an - 1)];
    }
    buf[n] = 0;
}

/* A call starts: its first piece carries the id (id NULL: one is made) and the name. */
void tc_call_begin(sy_tool_parser *p, const char *name, size_t name_len, const char *id, size_t id_len)
{
    char made[32];
    if (!id || !id_len) {
        if (p->f->kind == TC_MISTRAL) {
            gen_id(p, made, 9);
        } else {
            memcpy(made, "call_", 5);
            gen_id(p, made + 5, 24);
        }
        id = made;
        id_len = strlen(made);
    }
    p->n_calls++;
    p->in_call = true;
    p->args_open = true;
    p->n_args = 0;
    sy_tool_call_delta *d = new_delta(p);
    if (!d)
        return;
    size_t *off = &p->out->offsets[(p->out->n_deltas - 1) * 3];
    off[0] = put_string(p, id, id_len);
    off[1] = put_string(p, name, name_len);
    off[2] = p->out->strings.len;
    d->arguments_len = 0;
}

void tc_call_args(sy_tool_parser *p, const char *s, size_t n)
{
    if (!p->in_call || !n)
        return;
    sy_tool_out *o = p->out;
    sy_tool_call_delta *d = NULL;
    if (o->n_deltas) {
        sy_tool_call_delta *last = &o->deltas[o->n_deltas - 1];
        size_t *off = &o->offsets[(o->n_deltas - 1) * 3];
        if (last->index == p->n_calls - 1 && off[2] + last->arguments_len == o->strings.len)
            d = last;
    }
    if (!d)
        d = new_delta(p);
    if (!d)
        return;
    tc_app(p, &o->strings, s, n);
    d->arguments_len += n;
}

void tc_call_args_str(sy_tool_parser *p, const char *s) { tc_call_args(p, s, strlen(s)); }

void tc_call_end(sy_tool_parser *p)
{
    p->in_call = false;
    p->args_open = false;
}

void tc_fix_pointers(sy_tool_out *o)
{
    for (size_t i = 0; i < o->n_deltas; i++) {
        size_t *off = &o->offsets[i * 3];
        o->deltas[i].id = off[0] == NO_OFF ? NULL : o->strings.p + off[0];
        o->deltas[i].name = off[1] == NO_OFF ? NULL : o->strings.p + off[1];
        o->deltas[i].arguments = o->strings.p ? o->strings.p + off[2] : "";
    }
}

void tc_to_content(sy_tool_parser *p, const char *s, size_t n)
{
    if (p->skip_ws) {
        while (n && (*s == ' ' || *s == '\n' || *s == '\t' || *s == '\r')) {
            s++;
            n--;
        }
        if (!n)
            return;
        p->skip_ws = false;
    }
    if (p->hold_ws) {
        /* whitespace that starts the output is content only if content follows (GLM writes "\n" before a call) */
        size_t w = 0;
        while (w < n && (s[w] == ' ' || s[w] == '\n' || s[w] == '\t' || s[w] == '\r'))
            w++;
        tc_app(p, &p->ws, s, w);
        if (w == n)
            return;
        p->hold_ws = false;
        tc_app(p, &p->out->content, p->ws.p, p->ws.len);
        p->ws.len = 0;
        s += w;
        n -= w;
    }
    tc_app(p, &p->out->content, s, n);
}

/* ------------------------------------------------------------ values (GLM, DSML) */

void tc_trim(const char **s, size_t *n)
{
    while (*n && strchr(" \t\r\n", (*s)[0]))
        (*s)++, (*n)--;
    while (*n && strchr(" \t\r\n", (*s)[*n - 1]))
        (*n)--;
}

/* A key's value begins: writes `{"key":` (or `,"key":`) and, for a string, the opening quote. */
void tc_value_begin(sy_tool_parser *p, tc_vtype vt)
{
    const char *k = p->key.p ? p->key.p : "";
    size_t kn = p->key.len;
    tc_trim(&k, &kn);
    p->scratch.len = 0;
    tc_app(p, &p->scratch, p->n_args ? ",\"" : "{\"", 2);
    if (tc_json_escape(&p->scratch, k, kn))
        p->oom = true;
    tc_app(p, &p->scratch, vt == TC_V_STRING ? "\":\"" : "\":", vt == TC_V_STRING ? 3 : 2);
    tc_call_args(p, p->scratch.p, p->scratch.len);
    p->n_args++;
    p->vtype = vt;
    p->val.len = 0;
    p->key.len = 0;
}

void tc_value_text(sy_tool_parser *p, const char *s, size_t n)
{
    if (p->vtype == TC_V_STRING) {
        p->scratch.len = 0;
        if (tc_json_escape(&p->scratch, s, n))
            p->oom = true;
        tc_call_args(p, p->scratch.p, p->scratch.len);
    } else {
        tc_app(p, &p->val, s, n);
    }
}

void tc_value_end(sy_tool_parser *p)
{
    if (p->vtype == TC_V_STRING) {
        tc_call_args_str(p, "\"");
        return;
    }
    const char *s = p->val.p ? p->val.p : "";
    size_t n = p->val.len;
    tc_trim(&s, &n);
    json_t *v = n ? json_loadb(s, n, JSON_DECODE_ANY, NULL) : NULL;
    char *dump = v ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(v);
    if (dump) {
        tc_call_args_str(p, dump);
        free(dump);
    } else {
        /* not JSON: the raw text, as the string it must then be */
        p->scratch.len = 0;
        tc_app(p, &p->scratch, "\"", 1);
        if (tc_json_escape(&p->scratch, p->val.p ? p->val.p : "", p->val.len))
            p->oom = true;
        tc_app(p, &p->scratch, "\"", 1);
        tc_call_args(p, p->scratch.p, p->scratch.len);
    }
    p->val.len = 0;
}

/* Ends the arguments object a GLM / DSML call has been writing. */
void tc_args_close_kv(sy_tool_parser *p)
{
    tc_call_args_str(p, p->n_args ? "}" : "{}");
    tc_call_end(p);
}

/* ------------------------------------------------------------ JSON arguments */

/* After a call's JSON: back to content (whitespace after a call is not content) or the family's next state. */
static void goto_after(sy_tool_parser *p)
{
    p->s = p->after_json;
    if (p->s == S_TEXT)
        p->skip_ws = true;
}

void tc_json_begin(sy_tool_parser *p, tc_state after)
{
    p->jout.len = 0;
    tc_jv_init(&p->jv, true, &p->jout);
    p->after_json = after;
    p->s = S_JSON;
}

void tc_json_drain(sy_tool_parser *p)
{
    if (p->jv.oom)
        p->oom = true;
    if (p->jout.len) {
        tc_call_args(p, p->jout.p, p->jout.len);
        p->jout.len = 0;
    }
}

/* Feeds the pending bytes to the JSON normaliser; stops when the object is complete. */
bool tc_run_json(sy_tool_parser *p)
{
    size_t i = 0;
    bool done = false;
    while (i < p->in.len) {
        int r = tc_jv_feed(&p->jv, (unsigned char)p->in.p[i]);
        if (r == TC_JV_MORE || r == TC_JV_DONE)
            i++;
        if (r != TC_JV_MORE) {
            done = true;
            break;
        }
    }
    sy_buf_consume(&p->in, i);
    tc_json_drain(p);
    if (done) {
        tc_call_end(p);
        goto_after(p);
    }
    return done;
}

void tc_json_abort(sy_tool_parser *p)
{
    tc_jv_finish(&p->jv);
    tc_json_drain(p);
    tc_call_end(p);
    goto_after(p);
}

/* ------------------------------------------------------------ wrapper objects */

void tc_wrapper_begin(sy_tool_parser *p, tc_state after)
{
    p->w = W_OPEN;
    p->w_name_done = p->w_args_done = false;
    p->name.len = 0;
    p->pend.len = 0;
    p->after_json = after;
    p->s = S_W;
}

static bool key_is(const sy_buf *b, const char *k)
{
    json_t *v = json_loadb(b->p ? b->p : "", b->len, JSON_DECODE_ANY, NULL);
    bool eq = json_is_string(v) && !strcmp(json_string_value(v), k);
    json_decref(v);
    return eq;
}

/* The wrapper ended (well or not): the call, if it got a name, is completed. */
static void wrapper_end(sy_tool_parser *p)
{
    if (p->in_call) {
        if (!p->w_args_done)
            tc_call_args_str(p, "{}");
        tc_call_end(p);
    }
    goto_after(p);
}

static void wrapper_name_known(sy_tool_parser *p)
{
    json_t *v = json_loadb(p->scratch.p ? p->scratch.p : "", p->scratch.len, JSON_DECODE_ANY,
                           NULL);
    if (json_is_string(v) && !p->in_call) {
        tc_call_begin(p, json_string_value(v), json_string_length(v), NULL, 0);
        p->w_name_done = true;
        if (p->w_args_done)
            tc_call_args(p, p->pend.p, p->pend.len);
    }
    json_decref(v);
}

/* Arguments written as a JSON string holding the object (some models do). */
static void wrapper_args_string(sy_tool_parser *p)
{
    json_t *v = json_loadb(p->scratch.p ? p->scratch.p : "", p->scratch.len, JSON_DECODE_ANY,
                           NULL);
    json_t *o = json_is_string(v) ? json_loadb(json_string_value(v), json_string_length(v), 0, NULL)
                                  : NULL;
    char *dump = json_is_object(o) ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    p->pend.len = 0;
    tc_app(p, &p->pend, dump ? dump : "{}", strlen(dump ? dump : "{}"));
    free(dump);
    json_decref(o);
    json_decref(v);
    p->w_args_done = true;
    if (p->in_call)
        tc_call_args(p, p->pend.p, p->pend.len);
}

static void wrapper_value_done(sy_tool_parser *p)
{
    switch (p->wk) {
    case WK_NAME: wrapper_name_known(p); break;
    case WK_ARGS:
        if (p->jv.oom)
            p->oom = true;
        if (p->in_call) {
            tc_call_args(p, p->jout.p, p->jout.len);
        } else {
            tc_app(p, &p->pend, p->jout.p, p->jout.len);
        }
        p->jout.len = 0;
        p->w_args_done = true;
        break;
    case WK_ARGSTR: wrapper_args_string(p); break;
    default: break;
    }
    p->w = W_AFTER;
}

bool tc_is_ws(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

/* One byte of a wrapper object; false when the object ended (the byte then not consumed when *consumed false). */
static bool wrapper_byte(sy_tool_parser *p, char c, bool *consumed)
{
    *consumed = true;
    switch (p->w) {
    case W_OPEN:
        if (tc_is_ws(c))
            return true;
        if (c != '{') {
            *consumed = false;
            return false;
        }
        p->w = W_KEY;
        return true;
    case W_KEY:
        if (tc_is_ws(c) || c == ',')
            return true;
        if (c == '}')
            return false;
        if (c != '"') {
            *consumed = false;
            return false;
        }
        p->scratch.len = 0;
        tc_jv_init(&p->jv, false, &p->scratch);
        tc_jv_feed(&p->jv, '"');
        p->w = W_KEYSTR;
        return true;
    case W_KEYSTR: {
        int r = tc_jv_feed(&p->jv, (unsigned char)c);
        if (r == TC_JV_MORE)
            return true;
        if (r != TC_JV_DONE) {
            *consumed = false;
            return false;
        }
        {
            if (key_is(&p->scratch, "name"))
                p->wk = p->w_name_done ? WK_OTHER : WK_NAME;
            else if (key_is(&p->scratch, "arguments") || key_is(&p->scratch, "parameters"))
                p->wk = p->w_args_done ? WK_OTHER : WK_ARGS;
            else
                p->wk = WK_OTHER;
            p->w = W_COLON;
        }
        return true;
    }
    case W_COLON:
        if (tc_is_ws(c))
            return true;
        if (c != ':') {
            *consumed = false;
            return false;
        }
        p->w = W_VAL;
        return true;
    case W_VAL:
        if (tc_is_ws(c))
            return true;
        if (p->wk == WK_ARGS && c != '{')
            p->wk = c == '"' ? WK_ARGSTR : WK_OTHER;
        if (p->wk == WK_ARGS) {
            p->jout.len = 0;
            tc_jv_init(&p->jv, true, &p->jout);
        } else {
            p->scratch.len = 0;
            tc_jv_init(&p->jv, false, &p->scratch);
        }
        p->w = W_VALIN;
        /* fall through: this byte starts the value */
        /* FALLTHROUGH */
    case W_VALIN: {
        int r = tc_jv_feed(&p->jv, (unsigned char)c);
        if (p->wk == WK_ARGS && p->in_call) {
            if (p->jv.oom)
                p->oom = true;
            tc_call_args(p, p->jout.p, p->jout.len);
            p->jout.len = 0;
        }
        if (r == TC_JV_MORE)
            return true;
        if (r == TC_JV_REJECT) {
            wrapper_value_done(p);
            *consumed = false;
            return false;
        }
        wrapper_value_done(p);
        if (r == TC_JV_DONE_UNCONSUMED)
            return wrapper_byte(p, c, consumed);
        return true;
    }
    case W_AFTER:
        if (tc_is_ws(c))
            return true;
        if (c == ',') {
            p->w = W_KEY;
            return true;
        }
        if (c != '}')
            *consumed = false;
        return false;
    }
    return false;
}

bool tc_run_wrapper(sy_tool_parser *p)
{
    size_t i = 0;
    bool ended = false;
    while (i < p->in.len) {
        bool consumed;
        bool more = wrapper_byte(p, p->in.p[i], &consumed);
        if (consumed)
            i++;
        if (!more) {
            ended = true;
            break;
        }
    }
    sy_buf_consume(&p->in, i);
    if (ended)
        wrapper_end(p);
    return ended;
}

void tc_wrapper_abort(sy_tool_parser *p)
{
    if (p->w == W_VALIN) {
        tc_jv_finish(&p->jv);
        wrapper_value_done(p);
    }
    wrapper_end(p);
}

