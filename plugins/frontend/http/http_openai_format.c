/*
 * frontend/http: the fields that constrain the output's text, as OpenAI,
 * SGLang and vLLM spell them, into sy_request.constraint_kind /
 * constraint / constraint_path:
 *   response_format  {"type": "text" | "json_object" | "json_schema",
 *                     "json_schema": {name, schema, strict, description}}
 *   regex, ebnf      SGLang (ebnf: GBNF, docs/structured-outputs.md)
 *   structured_outputs {json | regex | choice | grammar | json_object}  vLLM
 *   guided_json, guided_regex, guided_choice, guided_grammar  vLLM's older names, same meaning
 * One constraint per request: a second is a 400 naming both. The host
 * compiles the constraint at submit and names what it cannot enforce
 * under constraint_path (e.g. "response_format.json_schema.schema.properties.x.format").
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_openai.h"

typedef struct found {
    int kind;
    const char *path; /* static text: becomes constraint_path */
    char *text;       /* malloc'd, or NULL (JSON_OBJECT) */
} found;

static void set(oai_req *r, found *f, int kind, const char *path, char *text)
{
    if (r->failed) {
        free(text);
        return;
    }
    if (f->kind != SY_CONSTRAINT_NONE) {
        char msg[256];
        snprintf(msg, sizeof msg, "'%%s' and '%s' both constrain the output; give at most one", f->path);
        oai_bad(r, path, msg, path);
        free(text);
        return;
    }
    f->kind = kind;
    f->path = path;
    f->text = text;
}

static char *dump(oai_req *r, json_t *v)
{
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!s && !r->failed) {
        r->failed = 1;
        http_respond_error(r->st, 503, "server_error", NULL, NULL, "out of memory");
    }
    return s;
}

/* A JSON schema given as an object, or (vLLM) as the text of one. */
static void schema(oai_req *r, found *f, json_t *v, const char *path)
{
    json_t *parsed = NULL;
    if (json_is_string(v)) {
        json_error_t je;
        parsed = json_loads(json_string_value(v), JSON_REJECT_DUPLICATES, &je);
        if (!parsed) {
            char msg[320];
            snprintf(msg, sizeof msg, "'%%s' is not valid JSON: %s at line %d, column %d", je.text, je.line,
                     je.column);
            oai_bad(r, path, msg, path);
            return;
        }
        v = parsed;
    }
    if (!json_is_object(v))
        oai_bad(r, path, "'%s' must be a JSON schema (an object)", path);
    else
        set(r, f, SY_CONSTRAINT_JSON_SCHEMA, path, dump(r, v));
    json_decref(parsed);
}

static void pattern(oai_req *r, found *f, json_t *v, int kind, const char *path)
{
    if (!json_is_string(v))
        oai_bad(r, path, "'%s' must be a string", path);
    else if (!json_string_length(v))
        oai_bad(r, path, "'%s' must not be empty", path);
    else
        set(r, f, kind, path, strdup(json_string_value(v)));
}

static void choice(oai_req *r, found *f, json_t *v, const char *path)
{
    if (!json_is_array(v) || !json_array_size(v)) {
        oai_bad(r, path, "'%s' must be a non-empty list of strings", path);
        return;
    }
    for (size_t i = 0; i < json_array_size(v); i++)
        if (!json_is_string(json_array_get(v, i))) {
            char p[OAI_PATH];
            oai_path(p, "%s[%zu]", path, i);
            oai_bad(r, p, "'%s' must be a string", p);
            return;
        }
    set(r, f, SY_CONSTRAINT_CHOICE, path, dump(r, v));
}

static void response_format(oai_req *r, found *f)
{
    json_t *rf = oai_field(r, "response_format");
    if (!rf)
        return;
    if (!json_is_object(rf)) {
        oai_bad(r, "response_format", "'%s' must be an object", NULL);
        return;
    }
    json_t *tv = json_object_get(rf, "type");
    const char *type = json_string_value(tv);
    if (!type) {
        oai_bad(r, "response_format.type", tv ? "'%s' must be a string" : "'%s' is required", NULL);
        return;
    }
    static const char *const plain_keys[] = {"type", NULL};
    static const char *const schema_keys[] = {"type", "json_schema", NULL};
    if (!strcmp(type, "text") || !strcmp(type, "json_object")) {
        oai_check_keys(r, rf, "response_format", plain_keys);
        if (!strcmp(type, "json_object"))
            set(r, f, SY_CONSTRAINT_JSON_OBJECT, "response_format", NULL);
        return;
    }
    if (strcmp(type, "json_schema") != 0) {
        oai_bad_code(r, "response_format.type", "unsupported_value",
                     "'response_format.type' '%s' is not supported (\"text\", \"json_object\" or \"json_schema\")",
                     type);
        return;
    }
    oai_check_keys(r, rf, "response_format", schema_keys);
    json_t *js = json_object_get(rf, "json_schema");
    if (!r->failed && !json_is_object(js)) {
        oai_bad(r, "response_format.json_schema", js ? "'%s' must be an object" : "'%s' is required", NULL);
        return;
    }
    /* description is OpenAI's hint to the model; neither it nor the schema is
     * rendered into the prompt here: the schema is enforced by token masks. */
    static const char *const js_keys[] = {"name", "schema", "strict", "description", NULL};
    oai_check_keys(r, js, "response_format.json_schema", js_keys);
    if (r->failed)
        return;
    json_t *name = json_object_get(js, "name"), *strict = json_object_get(js, "strict");
    json_t *desc = json_object_get(js, "description"), *sch = json_object_get(js, "schema");
    if (!json_is_string(name))
        oai_bad(r, "response_format.json_schema.name", name ? "'%s' must be a string" : "'%s' is required", NULL);
    else if (!oai_valid_name(json_string_value(name)))
        oai_bad(r, "response_format.json_schema.name", "'%s' must match [a-zA-Z0-9_-]{1,64}", NULL);
    else if (strict && !json_is_null(strict) && !json_is_boolean(strict))
        oai_bad(r, "response_format.json_schema.strict", "'%s' must be a boolean", NULL);
    else if (desc && !json_is_null(desc) && !json_is_string(desc))
        oai_bad(r, "response_format.json_schema.description", "'%s' must be a string", NULL);
    else if (!sch || json_is_null(sch))
        oai_bad(r, "response_format.json_schema.schema", "'%s' is required", NULL);
    else if (!json_is_object(sch))
        oai_bad(r, "response_format.json_schema.schema", "'%s' must be a JSON schema (an object)", NULL);
    else
        schema(r, f, sch, "response_format.json_schema.schema");
}

static void structured_outputs(oai_req *r, found *f)
{
    json_t *so = oai_field(r, "structured_outputs");
    if (!so)
        return;
    if (!json_is_object(so)) {
        oai_bad(r, "structured_outputs", "'%s' must be an object", NULL);
        return;
    }
    static const char *const refused[] = {"structural_tag", "whitespace_pattern", "disable_any_whitespace",
                                          "disable_additional_properties", "disable_fallback", NULL};
    for (size_t i = 0; refused[i]; i++) {
        json_t *v = json_object_get(so, refused[i]);
        if (v && !json_is_null(v)) {
            char p[OAI_PATH];
            oai_path(p, "structured_outputs.%s", refused[i]);
            oai_bad_code(r, p, "unsupported_parameter",
                         "'%s' is not supported (structured_outputs takes json, regex, choice, grammar, json_object)",
                         p);
            return;
        }
    }
    static const char *const keys[] = {"json", "regex", "choice", "grammar", "json_object", NULL};
    oai_check_keys(r, so, "structured_outputs", keys);
    json_t *v;
    if ((v = json_object_get(so, "json")) && !json_is_null(v))
        schema(r, f, v, "structured_outputs.json");
    if ((v = json_object_get(so, "regex")) && !json_is_null(v))
        pattern(r, f, v, SY_CONSTRAINT_REGEX, "structured_outputs.regex");
    if ((v = json_object_get(so, "choice")) && !json_is_null(v))
        choice(r, f, v, "structured_outputs.choice");
    if ((v = json_object_get(so, "grammar")) && !json_is_null(v))
        pattern(r, f, v, SY_CONSTRAINT_GRAMMAR, "structured_outputs.grammar");
    if ((v = json_object_get(so, "json_object")) && !json_is_null(v)) {
        if (!json_is_boolean(v))
            oai_bad(r, "structured_outputs.json_object", "'%s' must be a boolean", NULL);
        else if (json_is_true(v))
            set(r, f, SY_CONSTRAINT_JSON_OBJECT, "structured_outputs.json_object", NULL);
    }
}

void oai_parse_constraint(oai_req *r)
{
    found f = {SY_CONSTRAINT_NONE, NULL, NULL};
    json_t *v;
    response_format(r, &f);
    if ((v = oai_field(r, "regex")))
        pattern(r, &f, v, SY_CONSTRAINT_REGEX, "regex");
    if ((v = oai_field(r, "ebnf")))
        pattern(r, &f, v, SY_CONSTRAINT_GRAMMAR, "ebnf");
    structured_outputs(r, &f);
    if ((v = oai_field(r, "guided_json")))
        schema(r, &f, v, "guided_json");
    if ((v = oai_field(r, "guided_regex")))
        pattern(r, &f, v, SY_CONSTRAINT_REGEX, "guided_regex");
    if ((v = oai_field(r, "guided_choice")))
        choice(r, &f, v, "guided_choice");
    if ((v = oai_field(r, "guided_grammar")))
        pattern(r, &f, v, SY_CONSTRAINT_GRAMMAR, "guided_grammar");
    if (r->failed) {
        free(f.text);
        return;
    }
    if (f.kind != SY_CONSTRAINT_NONE && (f.kind == SY_CONSTRAINT_JSON_OBJECT) == (f.text != NULL)) {
        /* only a failed strdup/json_dumps leaves a text-taking kind without its text */
        free(f.text);
        r->failed = 1;
        http_respond_error(r->st, 503, "server_error", NULL, NULL, "out of memory");
        return;
    }
    r->constraint = f.text;
    r->req.constraint_kind = f.kind;
    r->req.constraint = f.text;
    r->req.constraint_path = f.path;
}
