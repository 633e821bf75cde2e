/* Chat templates: compile/free and loading a model directory's template. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat_internal.h"
#include "util/util.h"

int sy_chat_template_compile(const char *source, size_t len, sy_chat_template **out, sy_err *err)
{
    *out = NULL;
    if (!source && len)
        return sy_err_set(err, SY_ERR_INVALID, "template source is NULL");
    sy_chat_template *t = calloc(1, sizeof *t);
    if (!t)
        return sy_err_set(err, SY_ERR_NOMEM, "out of memory");
    /* newlines normalised to \n; one trailing newline dropped (keep_trailing_newline=False) */
    char *src = sy_ct_alloc(&t->arena, len + 1);
    if (!src) {
        free(t);
        return sy_err_set(err, SY_ERR_NOMEM, "out of memory");
    }
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (source[i] == '\r') {
            src[n++] = '\n';
            if (i + 1 < len && source[i + 1] == '\n')
                i++;
        } else {
            src[n++] = source[i];
        }
    }
    if (n && src[n - 1] == '\n')
        n--;
    src[n] = 0;
    sy_ct_tok *toks;
    size_t ntoks;
    int rc = sy_ct_lex(&t->arena, src, n, &toks, &ntoks, err);
    if (!rc)
        rc = sy_ct_parse(t, toks, ntoks, err);
    if (rc) {
        sy_chat_template_free(t);
        return rc;
    }
    *out = t;
    return 0;
}

void sy_chat_template_free(sy_chat_template *t)
{
    if (!t)
        return;
    sy_ct_arena_free(&t->arena);
    free(t);
}

const char *sy_chat_template_chatml(void)
{
    return "{%- for message in messages %}"
           "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
           "{%- endfor %}"
           "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";
}

int sy_chat_template_load_source(const char *model_dir, char **source, int *is_fallback,
                                 sy_err *err)
{
    char path[4096];
    *source = NULL;
    if (is_fallback)
        *is_fallback = 0;
    if (sy_path_join(path, sizeof path, model_dir, "tokenizer_config.json"))
        return sy_err_set(err, SY_ERR_INVALID, "%s: path too long", model_dir);
    if (sy_file_exists(path)) {
        json_error_t je;
        json_t *cfg = json_load_file(path, 0, &je);
        if (!cfg)
            return sy_err_set(err, SY_ERR_INVALID, "%s:%d: %s", path, je.line, je.text);
        json_t *ct = json_object_get(cfg, "chat_template");
        const char *s = NULL;
        if (json_is_string(ct)) {
            s = json_string_value(ct);
        } else if (json_is_array(ct)) {
            size_t i;
            json_t *e;
            json_array_foreach(ct, i, e) {
                if (json_is_string(json_object_get(e, "name")) &&
                    !strcmp(json_string_value(json_object_get(e, "name")), "default") &&
                    json_is_string(json_object_get(e, "template")))
                    s = json_string_value(json_object_get(e, "template"));
            }
        }
        if (s) {
            *source = sy_strdup(s);
            json_decref(cfg);
            return *source ? 0 : sy_err_set(err, SY_ERR_NOMEM, "out of memory");
        }
        json_decref(cfg);
    }
    if (sy_path_join(path, sizeof path, model_dir, "chat_template.jinja"))
        return sy_err_set(err, SY_ERR_INVALID, "%s: path too long", model_dir);
    if (sy_file_exists(path)) {
        size_t len;
        return sy_read_file(path, source, &len, err);
    }
    *source = sy_strdup(sy_chat_template_chatml());
    if (is_fallback)
        *is_fallback = 1;
    return *source ? 0 : sy_err_set(err, SY_ERR_NOMEM, "out of memory");
}

int sy_chat_template_load(const char *model_dir, sy_chat_template **out, int *is_fallback,
                          sy_err *err)
{
    char *src;
    *out = NULL;
    int rc = sy_chat_template_load_source(model_dir, &src, is_fallback, err);
    if (rc)
        return rc;
    rc = sy_chat_template_compile(src, strlen(src), out, err);
    free(src);
    return rc;
}
