/* Scripted outputs of the fake host (see fake_script.h). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "fake_script.h"

static json_t *instance(json_t *schema, json_t *root, int depth);

static json_t *resolve(json_t *schema, json_t *root)
{
    const char *ref = json_string_value(json_object_get(schema, "$ref"));
    if (!ref)
        return schema;
    const char *pre[] = {"#/$defs/", "#/definitions/"};
    for (int i = 0; i < 2; i++)
        if (!strncmp(ref, pre[i], strlen(pre[i])))
            return json_object_get(json_object_get(root, i ? "definitions" : "$defs"), ref + strlen(pre[i]));
    return NULL;
}

static json_t *instance(json_t *schema, json_t *root, int depth)
{
    schema = resolve(schema, root);
    if (!json_is_object(schema) || depth > 16)
        return json_null();
    json_t *v;
    if ((v = json_object_get(schema, "const")))
        return json_deep_copy(v);
    if ((v = json_object_get(schema, "enum")) && json_array_size(v))
        return json_deep_copy(json_array_get(v, 0));
    json_t *alt = json_object_get(schema, "anyOf");
    if (!alt)
        alt = json_object_get(schema, "oneOf");
    if (json_array_size(alt))
        return instance(json_array_get(alt, 0), root, depth + 1);
    json_t *tv = json_object_get(schema, "type");
    const char *type = json_is_array(tv) ? json_string_value(json_array_get(tv, 0)) : json_string_value(tv);
    if (!type)
        type = json_object_get(schema, "properties") ? "object" : json_object_get(schema, "items") ? "array" : "string";
    if (!strcmp(type, "object")) {
        json_t *o = json_object();
        const char *key;
        json_object_foreach(json_object_get(schema, "properties"), key, v)
            json_object_set_new(o, key, instance(v, root, depth + 1));
        return o;
    }
    if (!strcmp(type, "array")) {
        json_t *a = json_array();
        json_int_t n = json_integer_value(json_object_get(schema, "minItems"));
        for (json_int_t i = 0; i < (n > 0 ? n : 1) && i < 8; i++)
            json_array_append_new(a, instance(json_object_get(schema, "items"), root, depth + 1));
        return a;
    }
    if (!strcmp(type, "integer"))
        return json_integer(json_integer_value(json_object_get(schema, "minimum")) + 1);
    if (!strcmp(type, "number"))
        return json_real(1.5);
    if (!strcmp(type, "boolean"))
        return json_true();
    if (!strcmp(type, "null"))
        return json_null();
    return json_string("x");
}

char *fake_instance(const char *schema_json)
{
    json_t *schema = json_loads(schema_json, 0, NULL);
    if (!schema)
        return NULL;
    json_t *v = instance(schema, schema, 0);
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    json_decref(v);
    json_decref(schema);
    return s;
}

static int add(fake_script *s, int call, const char *id, const char *name, const char *bytes, size_t len)
{
    fake_piece *p = realloc(s->pieces, (s->n + 1) * sizeof *p);
    if (!p)
        return -1;
    s->pieces = p;
    s->pieces[s->n++] = (fake_piece){call, id, name, bytes, len};
    return 0;
}

static char *own(fake_script *s, char *text)
{
    if (!text || s->n_owned == sizeof s->owned / sizeof s->owned[0]) {
        free(text);
        return NULL;
    }
    return s->owned[s->n_owned++] = text;
}

/* Text in pieces of about `step` bytes, never splitting a UTF-8 character (as the engine's text events). */
static void add_text(fake_script *s, const char *t, size_t step)
{
    size_t n = strlen(t);
    for (size_t i = 0; i < n;) {
        size_t k = i + step < n ? i + step : n;
        while (k < n && ((unsigned char)t[k] & 0xc0) == 0x80)
            k++;
        add(s, -1, NULL, NULL, t + i, k - i);
        i = k;
    }
}

static void add_call(fake_script *s, int call, json_t *tool)
{
    static const char *const ids[] = {"call_s0", "call_s1"};
    json_t *fn = json_object_get(tool, "function");
    json_t *params = json_object_get(fn, "parameters");
    char *pj = params ? json_dumps(params, JSON_COMPACT) : NULL;
    char *args = own(s, pj ? fake_instance(pj) : strdup("{}"));
    free(pj);
    char *name = own(s, strdup(json_string_value(json_object_get(fn, "name")) ? json_string_value(json_object_get(fn, "name")) : ""));
    if (!args || !name)
        return;
    add(s, call, ids[call], name, "", 0);
    for (size_t i = 0, n = strlen(args); i < n; i += 3) /* bytes: a piece may end inside a character */
        add(s, call, NULL, NULL, args + i, n - i < 3 ? n - i : 3);
}

static json_t *tool_named(json_t *tools, const char *name)
{
    for (size_t i = 0; i < json_array_size(tools); i++) {
        json_t *t = json_array_get(tools, i);
        const char *n = json_string_value(json_object_get(json_object_get(t, "function"), "name"));
        if (n && name && !strcmp(n, name))
            return t;
    }
    return NULL;
}

fake_script *fake_script_new(const sy_request *req, int calltwo)
{
    if (req->struct_size < sizeof *req)
        return NULL;
    fake_script *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->finish = "stop";
    json_t *tools = req->tools_json ? json_loads(req->tools_json, 0, NULL) : NULL;
    if (req->constraint_kind == SY_CONSTRAINT_JSON_SCHEMA && req->constraint) {
        const char *t = own(s, fake_instance(req->constraint));
        if (t)
            add_text(s, t, 4);
    } else if (req->constraint_kind == SY_CONSTRAINT_JSON_OBJECT) {
        add_text(s, "{\"ok\": true}", 4);
    } else if (req->constraint_kind == SY_CONSTRAINT_CHOICE && req->constraint) {
        json_t *c = json_loads(req->constraint, 0, NULL);
        const char *first = own(s, json_string_value(json_array_get(c, 0)) ? strdup(json_string_value(json_array_get(c, 0))) : NULL);
        json_decref(c);
        if (first)
            add_text(s, first, 4);
    } else if (json_array_size(tools) && req->tool_choice == SY_TOOL_CHOICE_REQUIRED) {
        add_call(s, 0, json_array_get(tools, 0));
        s->finish = "tool_calls";
    } else if (json_array_size(tools) && req->tool_choice == SY_TOOL_CHOICE_FUNCTION) {
        json_t *t = tool_named(tools, req->tool_choice_name);
        if (t)
            add_call(s, 0, t);
        s->finish = "tool_calls";
    } else if (json_array_size(tools) && req->tool_choice == SY_TOOL_CHOICE_AUTO && calltwo) {
        add_text(s, "Let me check. ", 8);
        add_call(s, 0, json_array_get(tools, 0));
        if (req->parallel_tool_calls)
            add_call(s, 1, json_array_get(tools, json_array_size(tools) > 1 ? 1 : 0));
        s->finish = "tool_calls";
    }
    json_decref(tools);
    if (!s->n) {
        fake_script_free(s);
        return NULL;
    }
    return s;
}

void fake_script_free(fake_script *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n_owned; i++)
        free(s->owned[i]);
    free(s->pieces);
    free(s);
}
