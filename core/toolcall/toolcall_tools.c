/* The family table, template detection, and a request's tools. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "toolcall/toolcall_internal.h"

static const char *const glm_markers[] = {"<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>",
                                          "<arg_value>", "</arg_value>", NULL};
static const char *const ds_markers[] = {"<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>",
                                         "<｜tool▁call▁end｜>", "<｜tool▁sep｜>", NULL};
static const char *const dsml_markers[] = {NULL};
static const char *const hermes_markers[] = {"<tool_call>", "</tool_call>", NULL};
static const char *const llama_markers[] = {"<|python_tag|>", NULL};
static const char *const mistral_markers[] = {"[TOOL_CALLS]", "[ARGS]", "[CALL_ID]", NULL};
static const char *const kimi_markers[] = {"<|tool_calls_section_begin|>", "<|tool_calls_section_end|>",
                                           "<|tool_call_section_begin|>",  "<|tool_call_section_end|>",
                                           "<|tool_call_begin|>",          "<|tool_call_argument_begin|>",
                                           "<|tool_call_end|>",            NULL};
static const char *const harmony_markers[] = {"<|start|>",  "<|end|>",    "<|message|>", "<|channel|>",
                                              "<|constrain|>", "<|return|>", "<|call|>",    NULL};

static const sy_tool_family families[] = {
    {TC_GLM45, "glm45", glm_markers},
    {TC_GLM47, "glm47", glm_markers},
    {TC_DEEPSEEK_V3, "deepseek_v3", ds_markers},
    {TC_DEEPSEEK_V31, "deepseek_v31", ds_markers},
    {TC_DEEPSEEK_V32, "deepseek_v32", dsml_markers},
    {TC_HERMES, "hermes", hermes_markers},
    {TC_LLAMA3_JSON, "llama3_json", llama_markers},
    {TC_MISTRAL, "mistral", mistral_markers},
    {TC_KIMI_K2, "kimi_k2", kimi_markers},
    {TC_HARMONY, "harmony", harmony_markers},
};

#define N_FAMILIES (sizeof families / sizeof families[0])

const sy_tool_family *sy_tool_family_by_name(const char *name)
{
    if (!name)
        return NULL;
    for (size_t i = 0; i < N_FAMILIES; i++)
        if (!strcmp(families[i].name, name))
            return &families[i];
    return NULL;
}

const char *sy_tool_family_name(const sy_tool_family *f) { return f ? f->name : NULL; }

const char *sy_tool_family_list(void)
{
    return "glm45, glm47, deepseek_v3, deepseek_v31, deepseek_v32, hermes, llama3_json, mistral, kimi_k2, harmony";
}

const char *const *sy_tool_family_markers(const sy_tool_family *f) { return f->markers; }

bool tc_is_marker(const sy_tool_family *f, const char *s, size_t n)
{
    for (const char *const *m = f->markers; *m; m++)
        if (strlen(*m) == n && !memcmp(*m, s, n))
            return true;
    return false;
}

/*
 * Each test is a string only that family's template writes: the tool-call
 * markup it renders for past calls or shows the model in its instructions.
 * Order matters where one family's markup contains another's (GLM's
 * <tool_call> is Hermes's tag; V3's call block is V3.1's plus a fence).
 */
const sy_tool_family *sy_tool_family_detect(const char *src)
{
    if (!src)
        return NULL;
    if (strstr(src, "｜DSML｜"))
        return sy_tool_family_by_name("deepseek_v32");
    if (strstr(src, "<arg_key>")) {
        if (strstr(src, "{function-name}<arg_key>") || strstr(src, "tc.name -}}"))
            return sy_tool_family_by_name("glm47");
        return sy_tool_family_by_name("glm45");
    }
    if (strstr(src, "<｜tool▁call▁begin｜>")) {
        if (strstr(src, "```json"))
            return sy_tool_family_by_name("deepseek_v3");
        return sy_tool_family_by_name("deepseek_v31");
    }
    if (strstr(src, "<|tool_call_begin|>") || strstr(src, "<|tool_calls_section_begin|>") ||
        strstr(src, "<|im_system|>tool_declare<|im_middle|>"))
        return sy_tool_family_by_name("kimi_k2");
    if (strstr(src, "<|channel|>") && (strstr(src, "<|constrain|>") || strstr(src, "<|call|>")))
        return sy_tool_family_by_name("harmony");
    if (strstr(src, "[TOOL_CALLS]"))
        return sy_tool_family_by_name("mistral");
    if (strstr(src, "<tool_call>"))
        return sy_tool_family_by_name("hermes");
    if (strstr(src, "<|python_tag|>") || strstr(src, "\"parameters\": dictionary of argument name"))
        return sy_tool_family_by_name("llama3_json");
    return NULL;
}

/* ------------------------------------------------------------ tools */

void sy_tools_free(sy_tools *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->n; i++) {
        free(t->v[i].name);
        free(t->v[i].params);
        json_decref(t->v[i].schema);
    }
    free(t->v);
    free(t);
}

size_t sy_tools_count(const sy_tools *t) { return t ? t->n : 0; }
const char *sy_tools_name(const sy_tools *t, size_t i) { return t && i < t->n ? t->v[i].name : NULL; }
const char *sy_tools_parameters(const sy_tools *t, size_t i) { return t && i < t->n ? t->v[i].params : NULL; }

int sy_tools_find(const sy_tools *t, const char *name)
{
    if (!t || !name)
        return -1;
    for (size_t i = 0; i < t->n; i++)
        if (!strcmp(t->v[i].name, name))
            return (int)i;
    return -1;
}

static const char *json_kind(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER:
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

/* Names go verbatim into markup and grammar literals, so they keep to what every family can write. */
static bool name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 128)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
              c == '-' || c == '.'))
            return false;
    }
    return true;
}

int sy_tools_parse(const char *tools_json, sy_tools **out, sy_err *err)
{
    *out = NULL;
    json_error_t je;
    json_t *root = json_loads(tools_json ? tools_json : "", JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return sy_err_set(err, SY_ERR_INVALID, "tools: expected a JSON array, found invalid JSON (%s at %d:%d)",
                          je.text, je.line, je.column);
    int rc = SY_OK;
    sy_tools *t = calloc(1, sizeof *t);
    if (!t) {
        json_decref(root);
        return sy_err_set(err, SY_ERR_NOMEM, "tools: out of memory");
    }
    if (!json_is_array(root)) {
        rc = sy_err_set(err, SY_ERR_INVALID, "tools: expected an array, found %s", json_kind(root));
        goto done;
    }
    size_t n = json_array_size(root);
    t->v = calloc(n ? n : 1, sizeof *t->v);
    if (!t->v) {
        rc = sy_err_set(err, SY_ERR_NOMEM, "tools: out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(root, i);
        if (!json_is_object(e)) {
            rc = sy_err_set(err, SY_ERR_INVALID, "tools[%zu]: expected an object, found %s", i, json_kind(e));
            goto done;
        }
        json_t *type = json_object_get(e, "type");
        if (!json_is_string(type) || strcmp(json_string_value(type), "function")) {
            rc = sy_err_set(err, SY_ERR_INVALID, "tools[%zu].type: expected \"function\", found %s", i,
                            type ? (json_is_string(type) ? json_string_value(type) : json_kind(type))
                                 : "nothing");
            goto done;
        }
        json_t *fn = json_object_get(e, "function");
        if (!json_is_object(fn)) {
            rc = sy_err_set(err, SY_ERR_INVALID, "tools[%zu].function: expected an object, found %s", i,
                            fn ? json_kind(fn) : "nothing");
            goto done;
        }
        json_t *name = json_object_get(fn, "name");
        if (!json_is_string(name)) {
            rc = sy_err_set(err, SY_ERR_INVALID, "tools[%zu].function.name: expected a string, found %s", i,
                            name ? json_kind(name) : "nothing");
            goto done;
        }
        if (!name_ok(json_string_value(name))) {
            rc = sy_err_set(err, SY_ERR_INVALID,
                            "tools[%zu].function.name: expected 1-128 characters of a-z A-Z 0-9 _ - ., found "
                            "\"%.64s\"",
                            i, json_string_value(name));
            goto done;
        }
        if (sy_tools_find(t, json_string_value(name)) >= 0) {
            rc = sy_err_set(err, SY_ERR_INVALID, "tools[%zu].function.name: \"%s\" is already tools[%d]'s name",
                            i, json_string_value(name), sy_tools_find(t, json_string_value(name)));
            goto done;
        }
        json_t *desc = json_object_get(fn, "description");
        if (desc && !json_is_string(desc) && !json_is_null(desc)) {
            rc = sy_err_set(err, SY_ERR_INVALID, "tools[%zu].function.description: expected a string, found %s",
                            i, json_kind(desc));
            goto done;
        }
        json_t *strict = json_object_get(fn, "strict");
        if (strict && !json_is_boolean(strict) && !json_is_null(strict)) {
            rc = sy_err_set(err, SY_ERR_INVALID, "tools[%zu].function.strict: expected a boolean, found %s", i,
                            json_kind(strict));
            goto done;
        }
        json_t *params = json_object_get(fn, "parameters");
        if (params && !json_is_object(params) && !json_is_null(params)) {
            rc = sy_err_set(err, SY_ERR_INVALID,
                            "tools[%zu].function.parameters: expected an object (a JSON schema), found %s", i,
                            json_kind(params));
            goto done;
        }
        tc_tool *tool = &t->v[t->n];
        tool->name = strdup(json_string_value(name));
        if (params && json_is_object(params)) {
            tool->schema = json_incref(params);
            tool->params = json_dumps(params, JSON_COMPACT | JSON_PRESERVE_ORDER);
        } else {
            tool->params = strdup("{}");
        }
        t->n++;
        if (!tool->name || !tool->params) {
            rc = sy_err_set(err, SY_ERR_NOMEM, "tools[%zu]: out of memory", i);
            goto done;
        }
    }
done:
    json_decref(root);
    if (rc != SY_OK) {
        sy_tools_free(t);
        return rc;
    }
    *out = t;
    return SY_OK;
}

static bool type_is(const json_t *type, const char *want)
{
    if (json_is_string(type))
        return !strcmp(json_string_value(type), want);
    if (json_is_array(type)) {
        size_t i;
        json_t *e;
        json_array_foreach(type, i, e) if (json_is_string(e) && !strcmp(json_string_value(e), want)) return true;
    }
    return false;
}

tc_vtype tc_tools_param_type(const sy_tools *t, const char *tool, const char *key)
{
    int i = sy_tools_find(t, tool);
    if (i < 0 || !t->v[i].schema)
        return TC_V_ANY;
    json_t *prop = json_object_get(json_object_get(t->v[i].schema, "properties"), key);
    if (!json_is_object(prop))
        return TC_V_ANY;
    json_t *type = json_object_get(prop, "type");
    if (!type) {
        /* an enum of strings is a string parameter even without "type" */
        json_t *en = json_object_get(prop, "enum");
        if (json_is_array(en) && json_array_size(en) && json_is_string(json_array_get(en, 0)))
            return TC_V_STRING;
        return TC_V_ANY;
    }
    if (type_is(type, "string"))
        return TC_V_STRING;
    return TC_V_JSON;
}
