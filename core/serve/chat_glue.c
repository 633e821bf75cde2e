#include "config.h"

#include "serve/chat_glue.h"
#include "util/log.h"
#include "util/util.h"

#include <stdio.h>

#include <stdlib.h>
#include <time.h>

int sy_serve_chat_load(const char *model_dir, sy_chat_template **out, sy_err *err)
{
    int fallback = 0;
    int rc = sy_chat_template_load(model_dir, out, &fallback, err);
    if (rc == SY_OK && fallback)
        sy_warn("%s has no chat template (tokenizer_config.json chat_template or chat_template.jinja); chat uses "
                "ChatML",
                model_dir);
    return rc;
}

int sy_serve_chat_load_file(const char *path, sy_chat_template **out, sy_err *err)
{
    char *src = NULL;
    size_t len = 0;
    int rc = sy_read_file(path, &src, &len, err);
    if (rc) {
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err->msg);
        return sy_err_set(err, rc, "[model] chat_template: %s", why);
    }
    rc = sy_chat_template_compile(src, len, out, err);
    free(src);
    if (rc) {
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err->msg);
        return sy_err_set(err, rc, "[model] chat_template %s: %s", path, why);
    }
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

int sy_serve_chat_render(const sy_chat_template *t, const sy_tokenizer *tok, const char *messages_json,
                         const char *tools_json, int add_generation_prompt, const char *kwargs_json, char **out,
                         size_t *len, sy_err *err)
{
    if (!t)
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
    const int32_t bos = sy_tokenizer_bos(tok);
    const int32_t *eos = NULL;
    const size_t n_eos = sy_tokenizer_eos(tok, &eos);
    rc = sy_chat_template_render_at(t, msgs, json_is_null(tools) ? NULL : tools, add_generation_prompt,
                                    bos >= 0 ? sy_tokenizer_piece(tok, bos) : NULL,
                                    n_eos ? sy_tokenizer_piece(tok, eos[0]) : NULL,
                                    json_is_object(kwargs) ? kwargs : NULL, (int64_t)time(NULL), out, len, err);
out:
    json_decref(msgs);
    json_decref(tools);
    json_decref(kwargs);
    return rc;
}
