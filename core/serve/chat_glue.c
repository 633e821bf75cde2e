#include "config.h"

#include "serve/chat_glue.h"
#include "util/log.h"
#include "util/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static bool ident_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* Some use of `content` (not reasoning_content) compared with none. */
static bool tests_null_content(const char *src)
{
    for (const char *p = strstr(src, "content"); p; p = strstr(p + 1, "content")) {
        if (p > src && ident_char(p[-1]))
            continue;
        const char *q = p + 7;
        while (*q == '\'' || *q == '"' || *q == ']')
            q++;
        if (strncmp(q, " is none", 8) == 0 || strncmp(q, " is not none", 12) == 0)
            return true;
    }
    return false;
}

/* Some `arguments` joined to text with + or ~ (DeepSeek-V3.1, R1: arguments must stay a string). */
static bool concatenates_arguments(const char *src)
{
    for (const char *p = strstr(src, "arguments"); p; p = strstr(p + 1, "arguments")) {
        const char *q = p + 9;
        if (ident_char(*q))
            continue;
        while (*q == '\'' || *q == '"' || *q == ']' || *q == ' ')
            q++;
        if (*q == '+' || *q == '~')
            return true;
        const char *b = p;
        while (b > src && (ident_char(b[-1]) || b[-1] == '.' || b[-1] == '[' || b[-1] == ']' || b[-1] == '\'' ||
                           b[-1] == '"' || b[-1] == ' '))
            b--;
        if (b > src && (b[-1] == '+' || b[-1] == '~'))
            return true;
    }
    return false;
}

void sy_chat_norm_detect(const char *src, sy_chat_norm *n)
{
    memset(n, 0, sizeof *n);
    if (!src)
        return;
    n->keep_developer = strstr(src, "developer") != NULL;
    /* A template that reads parts checks whether content is a string first, or reads the part types. */
    n->takes_parts = strstr(src, "content is string") || strstr(src, "content'] is string") ||
                     strstr(src, "content\"] is string") || strstr(src, "['type'] == 'text'") ||
                     strstr(src, "[\"type\"] == \"text\"") || strstr(src, ".type == 'text'") ||
                     strstr(src, ".type == \"text\"");
    n->string_arguments = concatenates_arguments(src);
    n->null_content = tests_null_content(src);
}

/* Text parts joined with "\n" (vLLM's string content format). */
static int join_parts(json_t *msg, json_t *parts, size_t mi, sy_err *err)
{
    size_t total = 0, i;
    json_t *part;
    json_array_foreach(parts, i, part) {
        const char *type = json_string_value(json_object_get(part, "type"));
        json_t *text = json_object_get(part, "text");
        if (!json_is_object(part) || !type || strcmp(type, "text") != 0 || !json_is_string(text))
            return sy_err_set(err, SY_ERR_INVALID,
                              "messages[%zu].content[%zu]: expected a text part {\"type\": \"text\", \"text\": "
                              "\"...\"}, found %s%s%s",
                              mi, i, type ? "type \"" : "another value", type ? type : "", type ? "\"" : "");
        total += json_string_length(text) + 1;
    }
    char *buf = malloc(total + 1);
    if (!buf)
        return sy_err_set(err, SY_ERR_NOMEM, "messages[%zu].content: out of memory", mi);
    size_t at = 0;
    json_array_foreach(parts, i, part) {
        json_t *text = json_object_get(part, "text");
        if (i)
            buf[at++] = '\n';
        memcpy(buf + at, json_string_value(text), json_string_length(text));
        at += json_string_length(text);
    }
    const int rc = json_object_set_new(msg, "content", json_stringn_nocheck(buf, at));
    free(buf);
    return rc ? sy_err_set(err, SY_ERR_NOMEM, "messages[%zu].content: out of memory", mi) : SY_OK;
}

/*
 * Tool-call arguments in the form the template reads: a JSON string holding
 * an object becomes that object (templates iterate arguments|items, as
 * transformers expects; vLLM does the same), or, for a template that joins
 * arguments to text, an object becomes its JSON text (Python's separators,
 * keys in order, as json.dumps writes it).
 */
static int shape_arguments(json_t *msg, size_t mi, bool as_text, sy_err *err)
{
    size_t i;
    json_t *tc;
    json_array_foreach(json_object_get(msg, "tool_calls"), i, tc) {
        json_t *fn = json_object_get(tc, "function");
        json_t *args = json_object_get(fn, "arguments");
        json_t *repl = NULL;
        if (as_text && json_is_object(args)) {
            char *text = json_dumps(args, JSON_PRESERVE_ORDER);
            repl = text ? json_string_nocheck(text) : NULL;
            free(text);
        } else if (!as_text && json_is_string(args)) {
            repl = json_loadb(json_string_value(args), json_string_length(args), JSON_DECODE_ANY, NULL);
            if (!json_is_object(repl)) { /* not an object: the template gets the text as sent */
                json_decref(repl);
                continue;
            }
        } else {
            continue;
        }
        if (!repl || json_object_set_new(fn, "arguments", repl))
            return sy_err_set(err, SY_ERR_NOMEM, "messages[%zu].tool_calls[%zu].function.arguments: out of memory", mi,
                              i);
    }
    return SY_OK;
}

int sy_chat_normalize(const sy_chat_norm *n, json_t *messages, sy_err *err)
{
    size_t i;
    json_t *m;
    json_array_foreach(messages, i, m) {
        if (!json_is_object(m))
            return sy_err_set(err, SY_ERR_INVALID, "messages[%zu]: expected an object with a role, found another value",
                              i);
        const char *role = json_string_value(json_object_get(m, "role"));
        json_t *content = json_object_get(m, "content");
        const bool assistant = role && strcmp(role, "assistant") == 0;
        if (role && strcmp(role, "developer") == 0 && !n->keep_developer &&
            json_object_set_new(m, "role", json_string("system"))) /* frees role's text */
            return sy_err_set(err, SY_ERR_NOMEM, "messages[%zu]: out of memory", i);
        if (json_is_array(content) && !n->takes_parts) {
            int rc = join_parts(m, content, i, err);
            if (rc)
                return rc;
        }
        if (assistant) {
            if (json_is_null(content) && !n->null_content && json_object_set_new(m, "content", json_string("")))
                return sy_err_set(err, SY_ERR_NOMEM, "messages[%zu]: out of memory", i);
            int rc = shape_arguments(m, i, n->string_arguments, err);
            if (rc)
                return rc;
        }
    }
    return SY_OK;
}

static int chat_new(char *src, size_t len, const char *what, sy_serve_chat **out, sy_err *err)
{
    *out = NULL;
    sy_serve_chat *c = calloc(1, sizeof *c);
    if (!c) {
        free(src);
        return sy_err_set(err, SY_ERR_NOMEM, "cannot allocate the chat template");
    }
    c->source = src;
    int rc = sy_chat_template_compile(src, len, &c->t, err);
    if (rc) {
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err->msg);
        sy_serve_chat_free(c);
        return sy_err_set(err, rc, "%s: %s", what, why);
    }
    sy_chat_norm_detect(src, &c->norm);
    *out = c;
    return SY_OK;
}

void sy_serve_chat_free(sy_serve_chat *c)
{
    if (!c)
        return;
    sy_chat_template_free(c->t);
    free(c->source);
    free(c);
}

int sy_serve_chat_load(const char *model_dir, sy_serve_chat **out, sy_err *err)
{
    int fallback = 0;
    char *src = NULL;
    *out = NULL;
    int rc = sy_chat_template_load_source(model_dir, &src, &fallback, err);
    if (rc)
        return rc;
    if (fallback)
        sy_warn("%s has no chat template (tokenizer_config.json chat_template or chat_template.jinja); chat uses "
                "ChatML",
                model_dir);
    return chat_new(src, strlen(src), model_dir, out, err);
}

int sy_serve_chat_load_file(const char *path, sy_serve_chat **out, sy_err *err)
{
    char *src = NULL;
    size_t len = 0;
    *out = NULL;
    int rc = sy_read_file(path, &src, &len, err);
    if (rc) {
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err->msg);
        return sy_err_set(err, rc, "[model] chat_template: %s", why);
    }
    char what[sizeof err->msg];
    snprintf(what, sizeof what, "[model] chat_template %s", path);
    if ((rc = chat_new(src, len, what, out, err)))
        return rc;
    sy_info("chat template from %s", path);
    return SY_OK;
}

/* Parses an optional JSON text; what names it in errors. */
static int parse(const char *text, const char *what, json_t **out, sy_err *err)
{
    *out = NULL;
    if (!text)
        return SY_OK;
    json_error_t je;
    *out = json_loads(text, JSON_DECODE_ANY, &je);
    if (!*out)
        return sy_err_set(err, SY_ERR_INVALID, "%s: invalid JSON at line %d, column %d: %s", what, je.line, je.column,
                          je.text);
    return SY_OK;
}

int sy_serve_chat_render(const sy_serve_chat *c, const sy_tokenizer *tok, const char *messages_json,
                         const char *tools_json, int add_generation_prompt, const char *kwargs_json, char **out,
                         size_t *len, sy_err *err)
{
    if (!c)
        return sy_err_set(err, SY_ERR_UNSUPPORTED, "no chat template is loaded");
    if (!messages_json)
        return sy_err_set(err, SY_ERR_INVALID, "messages: missing");
    json_t *msgs = NULL, *tools = NULL, *kwargs = NULL;
    int rc;
    if ((rc = parse(messages_json, "messages", &msgs, err)) || (rc = parse(tools_json, "tools", &tools, err)) ||
        (rc = parse(kwargs_json, "chat_template_kwargs", &kwargs, err)))
        goto out;
    if (!json_is_array(msgs)) {
        rc = sy_err_set(err, SY_ERR_INVALID, "messages: expected an array");
        goto out;
    }
    if ((rc = sy_chat_normalize(&c->norm, msgs, err)))
        goto out;
    const int32_t bos = sy_tokenizer_bos(tok);
    const int32_t *eos = NULL;
    const size_t n_eos = sy_tokenizer_eos(tok, &eos);
    rc = sy_chat_template_render_at(c->t, msgs, json_is_null(tools) ? NULL : tools, add_generation_prompt,
                                    bos >= 0 ? sy_tokenizer_piece(tok, bos) : NULL,
                                    n_eos ? sy_tokenizer_piece(tok, eos[0]) : NULL,
                                    json_is_object(kwargs) ? kwargs : NULL, (int64_t)time(NULL), out, len, err);
out:
    json_decref(msgs);
    json_decref(tools);
    json_decref(kwargs);
    return rc;
}
