/*
 * The streaming tool-call parsers. One engine for every family: the
 * pending input is matched against the markers the current state waits
 * for; the text before a marker goes to the state's sink (content,
 * reasoning, a name, a raw value, nothing), and only a tail that may
 * still grow into a marker is held back. JSON arguments are run byte by
 * byte through the normaliser (toolcall_json.c, via toolcall_emit.c), so
 * markup-like text inside a JSON string never ends a call.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "toolcall/toolcall_parser.h"

/* ------------------------------------------------------------ marker scanning */

typedef enum sink { K_DROP, K_CONTENT, K_REASONING, K_NAME, K_ID, K_KEY, K_VAL, K_HDR } sink;

#define SMALL_MAX 1024 /* names, ids, keys, headers: longer is not a call anyone declared */

static const char *cstr(sy_tool_parser *p, sy_buf *b)
{
    if (sy_buf_append(b, "", 0))
        p->oom = true;
    return b->p ? b->p : "";
}

static void to_sink(sy_tool_parser *p, sink k, const char *s, size_t n)
{
    if (!n)
        return;
    sy_buf *small = NULL;
    switch (k) {
    case K_DROP: return;
    case K_CONTENT: tc_to_content(p, s, n); return;
    case K_REASONING: tc_app(p, &p->out->reasoning, s, n); return;
    case K_VAL: tc_value_text(p, s, n); return;
    case K_NAME: small = &p->name; break;
    case K_ID: small = &p->id; break;
    case K_KEY: small = &p->key; break;
    case K_HDR: small = &p->hdr; break;
    }
    if (small->len + n <= SMALL_MAX)
        tc_app(p, small, s, n);
}

/*
 * The earliest marker in s[0..n): its index, *pos where it starts. -1
 * when none is complete; *pos is then where the held-back tail begins
 * (the first place a marker could still start, n when none can).
 */
static int find_marker(const char *s, size_t n, const char *const *m, size_t *pos)
{
    for (size_t i = 0; i < n; i++) {
        for (int k = 0; m[k]; k++) {
            size_t ml = strlen(m[k]);
            size_t avail = n - i;
            if (avail >= ml) {
                if (!memcmp(s + i, m[k], ml)) {
                    *pos = i;
                    return k;
                }
            } else if (!memcmp(s + i, m[k], avail)) {
                *pos = i;
                return -1;
            }
        }
    }
    *pos = n;
    return -1;
}

/* Routes text up to the first of markers m to sink k; the marker's index when one was found and consumed, else -1. */
static int scan(sy_tool_parser *p, const char *const *m, sink k, bool eof)
{
    size_t pos;
    int hit = find_marker(p->in.p ? p->in.p : "", p->in.len, m, &pos);
    if (hit >= 0) {
        to_sink(p, k, p->in.p, pos);
        sy_buf_consume(&p->in, pos + strlen(m[hit]));
        return hit;
    }
    if (eof)
        pos = p->in.len;
    else if (pos == p->in.len && (k == K_CONTENT || k == K_REASONING || k == K_VAL))
        pos = tc_utf8_safe_len(p->in.p, pos);
    to_sink(p, k, p->in.p, pos);
    sy_buf_consume(&p->in, pos);
    return -1;
}

/* Drops leading whitespace; the next byte (-1: none yet). */
static int peek_nonws(sy_tool_parser *p)
{
    size_t i = 0;
    while (i < p->in.len && tc_is_ws(p->in.p[i]))
        i++;
    sy_buf_consume(&p->in, i);
    return p->in.len ? (unsigned char)p->in.p[0] : -1;
}

static void to_text(sy_tool_parser *p)
{
    p->s = S_TEXT;
    p->skip_ws = true;
}

/* Goes to state s, which reads into b afresh. */
static void enter(sy_tool_parser *p, sy_buf *b, tc_state s)
{
    b->len = 0;
    p->s = s;
}

/* The markup ended inside a call's key/value arguments. */
static void close_to_text(sy_tool_parser *p)
{
    tc_args_close_kv(p);
    to_text(p);
}

/* JSON arguments whose opening '{' the marker scan already took. */
static void json_begin_opened(sy_tool_parser *p, tc_state after)
{
    tc_json_begin(p, after);
    tc_jv_feed(&p->jv, '{');
    tc_json_drain(p);
}

/* Where a DeepSeek call begins: V3 writes a type before the name, V3.1 only the name. */
static tc_state ds_call_state(const sy_tool_parser *p)
{
    return p->f->kind == TC_DEEPSEEK_V3 ? S_D_TYPE : S_D_NAME;
}

/* Between calls: marker 0 opens the next one (state next, reading into b), any other ends the calls. */
static bool between_calls(sy_tool_parser *p, const char *const *m, sy_buf *b, tc_state next, bool eof)
{
    int h = scan(p, m, K_DROP, eof);
    if (h < 0)
        return false;
    if (h == 0)
        enter(p, b, next);
    else
        to_text(p);
    return true;
}

/* ------------------------------------------------------------ names and headers */

static void begin_named(sy_tool_parser *p, sy_buf *nb, const char *id, size_t id_len)
{
    const char *s = cstr(p, nb);
    size_t n = nb->len;
    tc_trim(&s, &n);
    if (n)
        tc_call_begin(p, s, n, id, id_len);
    /* keep the trimmed name for parameter types */
    memmove(nb->p, s, n);
    nb->len = n;
    cstr(p, nb);
}

/* The value of attr="..." in a markup header, into dst. */
static bool header_attr(sy_tool_parser *p, const char *hdr, const char *attr, sy_buf *dst)
{
    size_t al = strlen(attr);
    dst->len = 0;
    for (const char *q = strstr(hdr, attr); q; q = strstr(q + 1, attr)) {
        if (q != hdr && !tc_is_ws(q[-1]))
            continue;
        if (strncmp(q + al, "=\"", 2))
            continue;
        const char *v = q + al + 2, *e = strchr(v, '"');
        if (!e)
            return false;
        tc_app(p, dst, v, (size_t)(e - v));
        cstr(p, dst);
        return true;
    }
    cstr(p, dst);
    return false;
}

static void kimi_begin(sy_tool_parser *p)
{
    /* "functions.NAME:IDX": the whole is the id, NAME the function */
    const char *s = cstr(p, &p->id);
    size_t n = p->id.len;
    tc_trim(&s, &n);
    if (!n)
        return;
    const char *nm = s;
    size_t nn = n;
    if (nn > 10 && !memcmp(nm, "functions.", 10)) {
        nm += 10;
        nn -= 10;
    }
    size_t c = nn;
    while (c > 0 && nm[c - 1] >= '0' && nm[c - 1] <= '9')
        c--;
    if (c > 0 && c < nn && nm[c - 1] == ':')
        nn = c - 1;
    p->name.len = 0;
    tc_app(p, &p->name, nm, nn);
    cstr(p, &p->name);
    tc_call_begin(p, nm, nn, s, n);
}

/* gpt-oss header "<|channel|>commentary to=functions.f <|constrain|>json": a call, or which body. */
static void harmony_header(sy_tool_parser *p)
{
    const char *h = cstr(p, &p->hdr);
    const char *to = strstr(h, "to=");
    while (to && to != h && !tc_is_ws(to[-1]) && to[-1] != '>')
        to = strstr(to + 1, "to=");
    if (to) {
        const char *r = to + 3, *e = r;
        while (*e && !tc_is_ws(*e) && *e != '<')
            e++;
        if (e - r > 10 && !memcmp(r, "functions.", 10))
            r += 10;
        p->name.len = 0;
        tc_app(p, &p->name, r, (size_t)(e - r));
        cstr(p, &p->name);
        if (p->name.len) {
            tc_call_begin(p, p->name.p, p->name.len, NULL, 0);
            tc_json_begin(p, S_HA_POST);
            return;
        }
    }
    const char *ch = strstr(h, "<|channel|>");
    bool analysis = ch && !strncmp(ch + 11, "analysis", 8);
    p->body = analysis ? 1 : 0;
    p->s = S_HA_BODY;
}

static void glm_value_start(sy_tool_parser *p, tc_vtype vt, bool dsml)
{
    tc_value_begin(p, vt);
    p->val_is_dsml = dsml;
    p->s = vt == TC_V_STRING ? S_VAL_STR : S_VAL_RAW;
}

static void dsml_param(sy_tool_parser *p)
{
    const char *h = cstr(p, &p->hdr);
    header_attr(p, h, "name", &p->key);
    sy_buf sattr = {0};
    tc_vtype vt;
    if (header_attr(p, h, "string", &sattr))
        vt = !strcmp(sattr.p, "true") ? TC_V_STRING : TC_V_JSON;
    else
        vt = tc_tools_param_type(p->tools, cstr(p, &p->name), cstr(p, &p->key));
    sy_buf_free(&sattr);
    glm_value_start(p, vt, true);
}

static void dsml_invoke(sy_tool_parser *p)
{
    header_attr(p, cstr(p, &p->hdr), "name", &p->name);
    begin_named(p, &p->name, NULL, 0);
}

/* A raw value ended: back to the arguments of its call. */
static void value_done(sy_tool_parser *p)
{
    tc_value_end(p);
    p->s = p->val_is_dsml ? S_M_PARAMS : S_G_ARGS;
}

/* ------------------------------------------------------------ the families' states */

static const char *const M_GLM_START[] = {"<tool_call>", NULL};
static const char *const M_GLM_NAME[] = {"<arg_key>", "</tool_call>", NULL};
static const char *const M_GLM_KEY[] = {"</arg_key>", "</tool_call>", NULL};
static const char *const M_GLM_PREVAL[] = {"<arg_value>", "</tool_call>", "<arg_key>", NULL};
static const char *const M_GLM_VAL[] = {"</arg_value>", NULL};
static const char *const M_DS_START[] = {"<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", NULL};
static const char *const M_DS_CALLS[] = {"<｜tool▁call▁begin｜>", "<｜tool▁calls▁end｜>", NULL};
static const char *const M_DS_SEP[] = {"<｜tool▁sep｜>", NULL};
static const char *const M_DS_V3NAME[] = {"\n", "```", NULL};
static const char *const M_DS_PREJSON[] = {"{", "<｜tool▁call▁end｜>", NULL};
static const char *const M_DS_POST[] = {"<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", NULL};
static const char *const M_DSML_START[] = {"<｜DSML｜function_calls>", NULL};
static const char *const M_DSML_CALLS[] = {"<｜DSML｜invoke", "</｜DSML｜function_calls>", NULL};
static const char *const M_DSML_PARAMS[] = {"<｜DSML｜parameter", "</｜DSML｜invoke>", "</｜DSML｜function_calls>",
                                            NULL};
static const char *const M_DSML_VAL[] = {"</｜DSML｜parameter>", NULL};
static const char *const M_GT[] = {">", NULL};
static const char *const M_HERMES_POST[] = {"</tool_call>", "<tool_call>", NULL};
static const char *const M_LLAMA_START[] = {"<|python_tag|>", NULL};
static const char *const M_MISTRAL_START[] = {"[TOOL_CALLS]", NULL};
static const char *const M_MISTRAL_NAME[] = {"[ARGS]", "[CALL_ID]", "{", NULL};
static const char *const M_MISTRAL_ID[] = {"[ARGS]", NULL};
static const char *const M_KIMI_START[] = {"<|tool_calls_section_begin|>", "<|tool_call_section_begin|>",
                                           "<|tool_call_begin|>", NULL};
static const char *const M_KIMI_CALLS[] = {"<|tool_call_begin|>", "<|tool_calls_section_end|>",
                                           "<|tool_call_section_end|>", NULL};
static const char *const M_KIMI_HEAD[] = {"<|tool_call_argument_begin|>", NULL};
static const char *const M_KIMI_POST[] = {"<|tool_call_end|>", "<|tool_calls_section_end|>",
                                          "<|tool_call_section_end|>", "<|tool_call_begin|>", NULL};
static const char *const M_HA_START[] = {"<|start|>", "<|channel|>", NULL};
static const char *const M_HA_HDR[] = {"<|message|>", NULL};
static const char *const M_HA_END[] = {"<|end|>", "<|return|>", "<|call|>", "<|start|>", NULL};

static const char *const *text_markers(const sy_tool_family *f)
{
    switch (f->kind) {
    case TC_GLM45:
    case TC_GLM47:
    case TC_HERMES: return M_GLM_START;
    case TC_DEEPSEEK_V3:
    case TC_DEEPSEEK_V31: return M_DS_START;
    case TC_DEEPSEEK_V32: return M_DSML_START;
    case TC_LLAMA3_JSON: return M_LLAMA_START;
    case TC_MISTRAL: return M_MISTRAL_START;
    case TC_KIMI_K2: return M_KIMI_START;
    case TC_HARMONY: return M_HA_START;
    }
    return M_GLM_START;
}

static void text_hit(sy_tool_parser *p, int hit)
{
    p->skip_ws = false;
    p->hold_ws = false;
    p->ws.len = 0;
    switch (p->f->kind) {
    case TC_GLM45:
    case TC_GLM47: enter(p, &p->name, S_G_NAME); break;
    case TC_HERMES: tc_wrapper_begin(p, S_H_POST); break;
    case TC_DEEPSEEK_V3:
    case TC_DEEPSEEK_V31:
        if (hit == 0)
            enter(p, &p->name, S_D_CALLS);
        else
            enter(p, &p->name, ds_call_state(p));
        break;
    case TC_DEEPSEEK_V32: p->s = S_M_CALLS; break;
    case TC_LLAMA3_JSON: p->s = S_L_CALLS; break;
    case TC_MISTRAL: p->s = S_MI_AFTER; break;
    case TC_KIMI_K2: enter(p, &p->id, hit == 2 ? S_K_HEAD : S_K_CALLS); break;
    case TC_HARMONY:
        p->hdr.len = 0;
        if (hit == 1)
            tc_app(p, &p->hdr, "<|channel|>", 11);
        p->s = S_HA_HDR;
        break;
    }
}

/* Llama writes a call only as its whole output (or after <|python_tag|>): is this a call object? 1 yes, 0 no, -1 unknown yet. */
static int llama_looks_like_call(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n && tc_is_ws(s[i]))
        i++;
    if (i == n)
        return -1;
    const char *tag = "<|python_tag|>";
    size_t tl = strlen(tag);
    if (n - i < tl)
        return memcmp(s + i, tag, n - i) ? (s[i] == '{' ? -2 : 0) : -1;
    if (!memcmp(s + i, tag, tl))
        return 1;
    if (s[i] != '{')
        return 0;
    return -2;
}

static int llama_first_key(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n && tc_is_ws(s[i]))
        i++;
    i++; /* the '{' */
    while (i < n && tc_is_ws(s[i]))
        i++;
    if (i == n)
        return -1;
    if (s[i] != '"')
        return 0;
    size_t k = ++i;
    while (i < n && s[i] != '"' && i - k < 16)
        i++;
    if (i == n)
        return -1;
    if (s[i] != '"')
        return 0;
    static const char *const keys[] = {"name", "type", "parameters", "arguments", "function", NULL};
    for (int j = 0; keys[j]; j++)
        if (strlen(keys[j]) == i - k && !memcmp(s + k, keys[j], i - k))
            return 1;
    return 0;
}

static bool llama_start(sy_tool_parser *p, bool eof)
{
    int r = llama_looks_like_call(p->in.p ? p->in.p : "", p->in.len);
    if (r == -2)
        r = llama_first_key(p->in.p, p->in.len);
    if (r == -1) {
        if (!eof)
            return false;
        r = 0;
    }
    if (r == 1) {
        /* the whole output is calls: drop the tag, keep the object */
        size_t i = 0;
        while (i < p->in.len && tc_is_ws(p->in.p[i]))
            i++;
        if (p->in.len - i >= 14 && !memcmp(p->in.p + i, "<|python_tag|>", 14))
            i += 14;
        sy_buf_consume(&p->in, i);
        p->s = S_L_CALLS;
    } else {
        p->s = S_TEXT;
    }
    return true;
}

/* One state's work on the pending input; false when it needs more. */
static bool step_once(sy_tool_parser *p, bool eof)
{
    int h;
    switch (p->s) {
    case S_DONE: return false;
    case S_TEXT:
        h = scan(p, text_markers(p->f), K_CONTENT, eof);
        if (h < 0)
            return false;
        text_hit(p, h);
        return true;
    case S_JSON: return tc_run_json(p);
    /* GLM */
    case S_G_NAME:
    case S_G_ARGS: {
        bool naming = p->s == S_G_NAME;
        h = scan(p, M_GLM_NAME, naming ? K_NAME : K_DROP, eof);
        if (h < 0)
            return false;
        if (naming)
            begin_named(p, &p->name, NULL, 0);
        if (h == 0)
            enter(p, &p->key, S_G_KEY);
        else
            close_to_text(p);
        return true;
    }
    case S_G_KEY:
        h = scan(p, M_GLM_KEY, K_KEY, eof);
        if (h < 0)
            return false;
        if (h == 0)
            p->s = S_G_PREVAL;
        else
            close_to_text(p);
        return true;
    case S_G_PREVAL:
        h = scan(p, M_GLM_PREVAL, K_DROP, eof);
        if (h < 0)
            return false;
        if (h == 0) {
            const char *k = cstr(p, &p->key);
            size_t kn = p->key.len;
            tc_trim(&k, &kn);
            char kb[SMALL_MAX + 1];
            memcpy(kb, k, kn);
            kb[kn] = 0;
            glm_value_start(p, tc_tools_param_type(p->tools, cstr(p, &p->name), kb), false);
        } else if (h == 1) {
            close_to_text(p);
        } else {
            enter(p, &p->key, S_G_KEY);
        }
        return true;
    case S_VAL_STR:
    case S_VAL_RAW:
        if (scan(p, p->val_is_dsml ? M_DSML_VAL : M_GLM_VAL, K_VAL, eof) < 0)
            return false;
        value_done(p);
        return true;
    /* DeepSeek V3 / V3.1 */
    case S_D_CALLS:
        return between_calls(p, M_DS_CALLS, &p->name, ds_call_state(p), eof);
    case S_D_TYPE:
        if (scan(p, M_DS_SEP, K_DROP, eof) < 0)
            return false;
        p->s = S_D_NAME;
        return true;
    case S_D_NAME:
        h = scan(p, p->f->kind == TC_DEEPSEEK_V3 ? M_DS_V3NAME : M_DS_SEP, K_NAME, eof);
        if (h < 0)
            return false;
        begin_named(p, &p->name, NULL, 0);
        if (p->f->kind == TC_DEEPSEEK_V3)
            p->s = S_D_PREJSON;
        else
            tc_json_begin(p, S_D_POST);
        return true;
    case S_D_PREJSON:
        h = scan(p, M_DS_PREJSON, K_DROP, eof);
        if (h < 0)
            return false;
        if (h == 0) {
            json_begin_opened(p, S_D_POST);
        } else {
            tc_call_args_str(p, "{}");
            tc_call_end(p);
            p->s = S_D_CALLS;
        }
        return true;
    case S_D_POST:
        h = scan(p, M_DS_POST, K_DROP, eof);
        if (h < 0)
            return false;
        if (h == 0) {
            p->s = S_D_CALLS;
        } else if (h == 1) {
            to_text(p);
        } else {
            enter(p, &p->name, ds_call_state(p));
        }
        return true;
    /* DeepSeek V3.2 */
    case S_M_CALLS: return between_calls(p, M_DSML_CALLS, &p->hdr, S_M_INVOKE, eof);
    case S_M_INVOKE:
        if (scan(p, M_GT, K_HDR, eof) < 0)
            return false;
        dsml_invoke(p);
        p->s = S_M_PARAMS;
        return true;
    case S_M_PARAMS:
        h = scan(p, M_DSML_PARAMS, K_DROP, eof);
        if (h < 0)
            return false;
        if (h == 0) {
            enter(p, &p->hdr, S_M_PARAM);
        } else {
            tc_args_close_kv(p);
            if (h == 1)
                p->s = S_M_CALLS;
            else
                to_text(p);
        }
        return true;
    case S_M_PARAM:
        if (scan(p, M_GT, K_HDR, eof) < 0)
            return false;
        dsml_param(p);
        return true;
    /* Hermes */
    case S_W: return tc_run_wrapper(p);
    case S_H_POST:
        h = scan(p, M_HERMES_POST, K_DROP, eof);
        if (h < 0)
            return false;
        if (h == 0)
            to_text(p);
        else
            tc_wrapper_begin(p, S_H_POST);
        return true;
    /* Llama */
    case S_L_START: return llama_start(p, eof);
    case S_L_CALLS:
        h = peek_nonws(p);
        if (h < 0)
            return false;
        if (h == '{')
            tc_wrapper_begin(p, S_L_SEP);
        else
            to_text(p);
        return true;
    case S_L_SEP:
        h = peek_nonws(p);
        if (h < 0)
            return false;
        if (h == ';')
            sy_buf_consume(&p->in, 1);
        if (h == ';' || h == '{')
            p->s = S_L_CALLS;
        else
            to_text(p);
        return true;
    /* Mistral */
    case S_MI_AFTER:
        h = peek_nonws(p);
        if (h < 0)
            return false;
        if (h == '[') {
            sy_buf_consume(&p->in, 1);
            p->s = S_MI_ARR;
        } else {
            p->name.len = 0;
            p->id.len = 0;
            p->s = S_MI_NAME;
        }
        return true;
    case S_MI_ARR:
    case S_MI_ARR_SEP:
        h = peek_nonws(p);
        if (h < 0)
            return false;
        if (h == ',') {
            sy_buf_consume(&p->in, 1);
            p->s = S_MI_ARR;
        } else if (h == '{' && p->s == S_MI_ARR) {
            tc_wrapper_begin(p, S_MI_ARR_SEP);
        } else {
            if (h == ']')
                sy_buf_consume(&p->in, 1);
            to_text(p);
        }
        return true;
    case S_MI_NAME:
        h = scan(p, M_MISTRAL_NAME, K_NAME, eof);
        if (h < 0)
            return false;
        if (h == 1) {
            p->s = S_MI_ID;
            return true;
        }
        begin_named(p, &p->name, NULL, 0);
        if (h == 2)
            json_begin_opened(p, S_TEXT);
        else
            tc_json_begin(p, S_TEXT);
        return true;
    case S_MI_ID: {
        if (scan(p, M_MISTRAL_ID, K_ID, eof) < 0)
            return false;
        const char *id = cstr(p, &p->id);
        size_t idn = p->id.len;
        tc_trim(&id, &idn);
        begin_named(p, &p->name, id, idn);
        tc_json_begin(p, S_TEXT);
        return true;
    }
    /* Kimi */
    case S_K_CALLS: return between_calls(p, M_KIMI_CALLS, &p->id, S_K_HEAD, eof);
    case S_K_HEAD:
        if (scan(p, M_KIMI_HEAD, K_ID, eof) < 0)
            return false;
        kimi_begin(p);
        tc_json_begin(p, S_K_POST);
        return true;
    case S_K_POST:
        h = scan(p, M_KIMI_POST, K_DROP, eof);
        if (h < 0)
            return false;
        if (h == 0) {
            p->s = S_K_CALLS;
        } else if (h == 3) {
            enter(p, &p->id, S_K_HEAD);
        } else {
            to_text(p);
        }
        return true;
    /* Harmony */
    case S_HA_HDR:
        if (scan(p, M_HA_HDR, K_HDR, eof) < 0)
            return false;
        harmony_header(p);
        return true;
    case S_HA_BODY:
    case S_HA_POST:
        h = scan(p, M_HA_END, p->s == S_HA_POST ? K_DROP : p->body ? K_REASONING : K_CONTENT, eof);
        if (h < 0)
            return false;
        if (h == 3)
            enter(p, &p->hdr, S_HA_HDR);
        else
            p->s = S_TEXT;
        return true;
    }
    return false;
}

static void step(sy_tool_parser *p, bool eof)
{
    while (!p->oom && step_once(p, eof)) {
    }
}

/* The output ended inside markup: what was begun is completed. */
static void finish(sy_tool_parser *p)
{
    if (p->hold_ws) {
        /* the whole output was whitespace: that is its content */
        tc_app(p, &p->out->content, p->ws.p, p->ws.len);
        p->hold_ws = false;
    }
    switch (p->s) {
    case S_JSON: tc_json_abort(p); break;
    case S_W: tc_wrapper_abort(p); break;
    case S_G_NAME:
    case S_D_NAME:
    case S_MI_NAME:
    case S_MI_ID:
        if (!p->in_call)
            begin_named(p, &p->name, NULL, 0);
        tc_call_args_str(p, "{}");
        break;
    case S_M_INVOKE:
        dsml_invoke(p);
        tc_call_args_str(p, "{}");
        break;
    case S_K_HEAD:
        kimi_begin(p);
        tc_call_args_str(p, "{}");
        break;
    case S_HA_HDR:
        harmony_header(p);
        if (p->s == S_JSON)
            tc_json_abort(p);
        break;
    case S_VAL_STR:
    case S_VAL_RAW:
        tc_value_end(p);
        tc_args_close_kv(p);
        break;
    case S_G_ARGS:
    case S_G_KEY:
    case S_G_PREVAL:
    case S_M_PARAMS:
    case S_M_PARAM: tc_args_close_kv(p); break;
    case S_D_PREJSON: tc_call_args_str(p, "{}"); break;
    default: break;
    }
    tc_call_end(p);
    p->s = S_DONE;
}

/* A special token of the family's markup arrived: it ends any value its text could otherwise have joined. */
static void interrupt(sy_tool_parser *p, const char *text, size_t len)
{
    if (p->s == S_JSON && !tc_jv_in_string(&p->jv)) {
        tc_json_abort(p);
    } else if (p->s == S_W && !((p->w == W_VALIN || p->w == W_KEYSTR) && tc_jv_in_string(&p->jv))) {
        tc_wrapper_abort(p);
    } else if (p->s == S_VAL_STR || p->s == S_VAL_RAW) {
        const char *end = p->val_is_dsml ? M_DSML_VAL[0] : M_GLM_VAL[0];
        if (strlen(end) == len && !memcmp(end, text, len))
            return;
        to_sink(p, K_VAL, p->in.p, p->in.len);
        p->in.len = 0;
        value_done(p);
    }
}

/* ------------------------------------------------------------ API */

int sy_tool_parser_new(const sy_tool_family *f, const sy_tools *tools, uint64_t seed, sy_tool_parser **out,
                       sy_err *err)
{
    *out = NULL;
    if (!f)
        return sy_err_set(err, SY_ERR_INVALID, "tool parser: expected a family (one of %s), found none",
                          sy_tool_family_list());
    sy_tool_parser *p = calloc(1, sizeof *p);
    if (!p)
        return sy_err_set(err, SY_ERR_NOMEM, "tool parser: out of memory");
    p->f = f;
    p->tools = tools;
    p->rng = seed;
    p->s = f->kind == TC_LLAMA3_JSON ? S_L_START : S_TEXT;
    p->after_json = S_TEXT;
    p->hold_ws = true;
    *out = p;
    return SY_OK;
}

void sy_tool_parser_free(sy_tool_parser *p)
{
    if (!p)
        return;
    sy_buf *bufs[] = {&p->in, &p->name, &p->id, &p->key, &p->val, &p->hdr, &p->scratch, &p->pend, &p->jout, &p->ws};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        sy_buf_free(bufs[i]);
    free(p);
}

int32_t sy_tool_parser_calls(const sy_tool_parser *p) { return p ? p->n_calls : 0; }

int sy_tool_parser_push(sy_tool_parser *p, const char *text, size_t len, bool special, bool final,
                        sy_tool_out *out, sy_err *err)
{
    p->out = out;
    if (p->s != S_DONE) {
        bool take = true;
        if (special) {
            take = tc_is_marker(p->f, text, len);
            if (take)
                interrupt(p, text, len);
        }
        if (take && len)
            tc_app(p, &p->in, text, len);
        step(p, false);
        if (final) {
            step(p, true);
            finish(p);
        }
    }
    tc_fix_pointers(out);
    p->out = NULL;
    if (p->oom)
        return sy_err_set(err, SY_ERR_NOMEM, "tool parser (%s): out of memory", p->f->name);
    return SY_OK;
}
