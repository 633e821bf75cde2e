/*
 * The grammar that forces a call (tool_choice "required" or a named
 * function): exactly the markup the family's parser reads, the arguments
 * valid against each tool's parameters, nothing before the call and no
 * free whitespace, so a model that would never call (even random weights)
 * writes one well-formed call.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "toolcall/toolcall_internal.h"

typedef struct gb {
    sy_buf b;
    bool oom;
    const char *const *markers;
} gb;

static void put(gb *g, const char *s)
{
    if (sy_buf_append(&g->b, s, strlen(s)))
        g->oom = true;
}

/* s[0..n) as one GBNF string literal. */
static void lit1(gb *g, const char *s, size_t n)
{
    put(g, "\"");
    for (size_t i = 0; i < n; i++) {
        char e[2] = {s[i], 0};
        switch (s[i]) {
        case '"': put(g, "\\\""); break;
        case '\\': put(g, "\\\\"); break;
        case '\n': put(g, "\\n"); break;
        case '\t': put(g, "\\t"); break;
        case '\r': put(g, "\\r"); break;
        default: put(g, e);
        }
    }
    put(g, "\" ");
}

/*
 * s as GBNF literals, each of the family's special-token texts a literal
 * of its own: the matcher admits a special token only where its whole
 * text is one literal, and the model writes its markup as those tokens.
 */
static void lit(gb *g, const char *s)
{
    size_t n = strlen(s), from = 0;
    for (size_t i = 0; i < n;) {
        size_t ml = 0;
        for (const char *const *m = g->markers; m && *m; m++)
            if (!strncmp(s + i, *m, strlen(*m)) && strlen(*m) > ml)
                ml = strlen(*m);
        if (!ml) {
            i++;
            continue;
        }
        if (i > from)
            lit1(g, s + from, i - from);
        lit1(g, s + i, ml);
        i += ml;
        from = i;
    }
    if (n > from || n == 0)
        lit1(g, s + from, n - from);
}

static void rule(gb *g, const char *name) { put(g, name), put(g, " ::= "); }

/* A JSON value written inside a GBNF literal: the call prefix "{\"name\": \"f\", ...". */
static char *fmt(const char *f, const char *a)
{
    size_t n = strlen(f) + strlen(a) + 1;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, f, a);
    return s;
}

/* Defines tc-tI-args: the tool's arguments object. */
static int json_args(const sy_tools *t, size_t i, sy_gsrc *src, sy_err *err)
{
    char name[32], path[64];
    snprintf(name, sizeof name, "tc-t%zu-args", i);
    snprintf(path, sizeof path, "tools[%zu].function.parameters", i);
    if (!t->v[i].schema)
        return sy_gsrc_add_json_any(src, name, true, err);
    return sy_gsrc_add_json_schema(src, name, t->v[i].params, path, err);
}

/* GLM / DSML: one raw value rule per declared parameter, tc-tI-vJ. */
static int kv_values(const sy_tools *t, size_t i, sy_gsrc *src, const char *stop, sy_err *err)
{
    json_t *props = json_object_get(t->v[i].schema, "properties");
    const char *key;
    json_t *prop;
    size_t j = 0;
    char name[48], path[256];
    json_object_foreach(props, key, prop)
    {
        snprintf(name, sizeof name, "tc-t%zu-v%zu", i, j);
        snprintf(path, sizeof path, "tools[%zu].function.parameters.properties.%s", i, key);
        int rc;
        if (tc_tools_param_type(t, t->v[i].name, key) == TC_V_STRING) {
            json_t *en = json_object_get(prop, "enum");
            if (json_is_array(en) && json_array_size(en)) {
                /* the raw text is one of the strings */
                size_t n = json_array_size(en);
                const char **ch = calloc(n, sizeof *ch);
                if (!ch)
                    return sy_err_set(err, SY_ERR_NOMEM, "%s: out of memory", path);
                size_t m = 0;
                for (size_t k = 0; k < n; k++)
                    if (json_is_string(json_array_get(en, k)))
                        ch[m++] = json_string_value(json_array_get(en, k));
                rc = m ? sy_gsrc_add_choice(src, name, ch, m, err) : sy_gsrc_add_text_until(src, name, stop, err);
                free(ch);
            } else {
                rc = sy_gsrc_add_text_until(src, name, stop, err);
            }
        } else {
            char *s = json_dumps(prop, JSON_COMPACT | JSON_PRESERVE_ORDER);
            if (!s)
                return sy_err_set(err, SY_ERR_NOMEM, "%s: out of memory", path);
            rc = sy_gsrc_add_json_schema(src, name, s, path, err);
            free(s);
        }
        if (rc != SY_OK)
            return rc;
        j++;
    }
    return SY_OK;
}

static bool is_required(const json_t *schema, const char *key)
{
    json_t *req = json_object_get(schema, "required");
    size_t k;
    json_t *e;
    json_array_foreach(req, k, e) if (json_is_string(e) && !strcmp(json_string_value(e), key)) return true;
    return false;
}

/*
 * A GLM / DSML call's arguments: the declared parameters in schema order,
 * the required ones present, the others optional. kv(key, value-rule)
 * writes one pair.
 */
typedef void (*kv_fn)(gb *g, const char *key, const char *value_rule, bool string_typed);

static void kv_body(gb *g, const sy_tools *t, size_t i, kv_fn kv, const char *free_pair)
{
    json_t *schema = t->v[i].schema;
    json_t *props = json_object_get(schema, "properties");
    if (!json_is_object(props)) {
        /* no declared parameters: any pairs */
        put(g, "( "), put(g, free_pair), put(g, " )*");
        return;
    }
    const char *key;
    json_t *prop;
    size_t j = 0;
    char vr[48];
    json_object_foreach(props, key, prop)
    {
        (void)prop;
        snprintf(vr, sizeof vr, "tc-t%zu-v%zu", i, j++);
        bool req = is_required(schema, key);
        put(g, "( ");
        kv(g, key, vr, tc_tools_param_type(t, t->v[i].name, key) == TC_V_STRING);
        put(g, req ? " ) " : " )? ");
    }
}

static void glm45_kv(gb *g, const char *key, const char *vr, bool s)
{
    (void)s;
    char *k = fmt("<arg_key>%s</arg_key>\n<arg_value>", key);
    if (k)
        lit(g, k);
    free(k);
    put(g, " "), put(g, vr), put(g, " "), lit(g, "</arg_value>\n");
}

static void glm47_kv(gb *g, const char *key, const char *vr, bool s)
{
    (void)s;
    char *k = fmt("<arg_key>%s</arg_key><arg_value>", key);
    if (k)
        lit(g, k);
    free(k);
    put(g, " "), put(g, vr), put(g, " "), lit(g, "</arg_value>");
}

static void dsml_kv(gb *g, const char *key, const char *vr, bool s)
{
    char *k = fmt(s ? "<｜DSML｜parameter name=\"%s\" string=\"true\">" : "<｜DSML｜parameter name=\"%s\" string=\"false\">",
                  key);
    if (k)
        lit(g, k);
    free(k);
    put(g, " "), put(g, vr), put(g, " "), lit(g, "</｜DSML｜parameter>\n");
}

/* One call of tool i as the family writes it (rule tc-cI). */
static void call_rule(gb *g, const sy_tool_family *f, const sy_tools *t, size_t i)
{
    char r[32], args[32];
    snprintf(r, sizeof r, "tc-c%zu", i);
    snprintf(args, sizeof args, "tc-t%zu-args", i);
    const char *nm = t->v[i].name;
    char *s = NULL;
    rule(g, r);
    switch (f->kind) {
    case TC_GLM45:
        s = fmt("<tool_call>%s\n", nm);
        lit(g, s ? s : "");
        put(g, " ");
        kv_body(g, t, i, glm45_kv, "\"<arg_key>\" tc-key \"</arg_key>\" \"\\n\" \"<arg_value>\" tc-val \"</arg_value>\" \"\\n\"");
        lit(g, "</tool_call>");
        break;
    case TC_GLM47:
        s = fmt("<tool_call>%s", nm);
        lit(g, s ? s : "");
        put(g, " ");
        kv_body(g, t, i, glm47_kv, "\"<arg_key>\" tc-key \"</arg_key>\" \"<arg_value>\" tc-val \"</arg_value>\"");
        lit(g, "</tool_call>");
        break;
    case TC_DEEPSEEK_V32:
        s = fmt("<｜DSML｜invoke name=\"%s\">\n", nm);
        lit(g, s ? s : "");
        put(g, " ");
        kv_body(g, t, i, dsml_kv,
                "\"<｜DSML｜parameter name=\\\"\" tc-key \"\\\" string=\\\"true\\\">\" tc-val \"</｜DSML｜parameter>\\n\"");
        lit(g, "</｜DSML｜invoke>\n");
        break;
    case TC_DEEPSEEK_V3:
        s = fmt("<｜tool▁call▁begin｜>function<｜tool▁sep｜>%s\n```json\n", nm);
        lit(g, s ? s : "");
        put(g, " "), put(g, args), put(g, " "), lit(g, "\n```<｜tool▁call▁end｜>");
        break;
    case TC_DEEPSEEK_V31:
        s = fmt("<｜tool▁call▁begin｜>%s<｜tool▁sep｜>", nm);
        lit(g, s ? s : "");
        put(g, " "), put(g, args), put(g, " "), lit(g, "<｜tool▁call▁end｜>");
        break;
    case TC_HERMES:
        s = fmt("<tool_call>\n{\"name\": \"%s\", \"arguments\": ", nm);
        lit(g, s ? s : "");
        put(g, " "), put(g, args), put(g, " "), lit(g, "}\n</tool_call>");
        break;
    case TC_LLAMA3_JSON:
        s = fmt("{\"name\": \"%s\", \"parameters\": ", nm);
        lit(g, s ? s : "");
        put(g, " "), put(g, args), put(g, " "), lit(g, "}");
        break;
    case TC_MISTRAL:
        /* the array object; the [ARGS] form is tc-nI */
        s = fmt("{\"name\": \"%s\", \"arguments\": ", nm);
        lit(g, s ? s : "");
        put(g, " "), put(g, args), put(g, " "), lit(g, "}");
        put(g, "\n");
        free(s);
        snprintf(r, sizeof r, "tc-n%zu", i);
        rule(g, r);
        s = fmt("%s[ARGS]", nm);
        lit(g, s ? s : "");
        put(g, " "), put(g, args);
        break;
    case TC_KIMI_K2:
        s = fmt("<|tool_call_begin|>functions.%s:", nm);
        lit(g, s ? s : "");
        put(g, " [0-9] [0-9]? [0-9]? "), lit(g, "<|tool_call_argument_begin|>");
        put(g, " "), put(g, args), put(g, " "), lit(g, "<|tool_call_end|>");
        break;
    case TC_HARMONY:
        s = fmt("<|channel|>commentary to=functions.%s <|constrain|>json<|message|>", nm);
        lit(g, s ? s : "");
        put(g, " "), put(g, args), put(g, " "), lit(g, "<|call|>");
        break;
    }
    free(s);
    put(g, "\n");
}

int sy_tool_family_grammar(const sy_tool_family *f, const sy_tools *tools, const char *only_name, bool parallel,
                           sy_gsrc *src, sy_err *err)
{
    if (!f || !tools || !tools->n)
        return sy_err_set(err, SY_ERR_INVALID, "tools: expected at least one tool to force a call, found none");
    int only = -1;
    if (only_name) {
        only = sy_tools_find(tools, only_name);
        if (only < 0)
            return sy_err_set(err, SY_ERR_INVALID, "tool_choice.function.name: expected one of the tools, found \"%s\"",
                              only_name);
    }
    bool kv = f->kind == TC_GLM45 || f->kind == TC_GLM47 || f->kind == TC_DEEPSEEK_V32;
    const char *stop = f->kind == TC_DEEPSEEK_V32 ? "</｜DSML｜parameter>" : "</arg_value>";
    int rc = SY_OK;
    gb g = {{0}, false, f->markers};
    for (size_t i = 0; i < tools->n; i++) {
        if (only >= 0 && (size_t)only != i)
            continue;
        rc = kv ? kv_values(tools, i, src, stop, err) : json_args(tools, i, src, err);
        if (rc != SY_OK)
            goto done;
        call_rule(&g, f, tools, i);
    }
    if (kv) {
        if ((rc = sy_gsrc_add_text_until(src, "tc-val", stop, err)) != SY_OK)
            goto done;
        if ((rc = sy_gsrc_add_text_until(src, "tc-key", f->kind == TC_DEEPSEEK_V32 ? "\"" : "</arg_key>", err)) !=
            SY_OK)
            goto done;
    }
    /* tc-call: any one call; tc-name: the Mistral [ARGS] form */
    for (int pass = 0; pass < (f->kind == TC_MISTRAL ? 2 : 1); pass++) {
        rule(&g, pass ? "tc-name" : "tc-call");
        bool first = true;
        for (size_t i = 0; i < tools->n; i++) {
            if (only >= 0 && (size_t)only != i)
                continue;
            char r[32];
            snprintf(r, sizeof r, pass ? "tc-n%zu" : "tc-c%zu", i);
            put(&g, first ? "" : " | ");
            put(&g, r);
            first = false;
        }
        put(&g, "\n");
    }
    /* calls: one call, or with parallel one or more joined by the family's separator */
    const char *sep = "";
    switch (f->kind) {
    case TC_GLM45:
    case TC_HERMES:
    case TC_DEEPSEEK_V3: sep = "\"\\n\" "; break;
    case TC_LLAMA3_JSON: sep = "\"; \" "; break;
    case TC_MISTRAL: sep = "\", \" "; break;
    default: break;
    }
    char calls[128], names[128];
    if (parallel && f->kind != TC_HARMONY) {
        snprintf(calls, sizeof calls, "tc-call (%stc-call)*", sep);
        snprintf(names, sizeof names, "tc-name (\"[TOOL_CALLS]\" tc-name)*");
    } else {
        snprintf(calls, sizeof calls, "tc-call");
        snprintf(names, sizeof names, "tc-name");
    }
    char root[512];
    switch (f->kind) {
    case TC_GLM45:
    case TC_GLM47:
    case TC_HERMES:
    case TC_LLAMA3_JSON:
    case TC_HARMONY: /* harmony: one call per message, the call ends the turn */
        snprintf(root, sizeof root, "root ::= %s\n", calls);
        break;
    case TC_DEEPSEEK_V32:
        snprintf(root, sizeof root, "root ::= \"<｜DSML｜function_calls>\\n\" %s \"</｜DSML｜function_calls>\"\n", calls);
        break;
    case TC_DEEPSEEK_V3:
    case TC_DEEPSEEK_V31:
        snprintf(root, sizeof root, "root ::= \"<｜tool▁calls▁begin｜>\" %s \"<｜tool▁calls▁end｜>\"\n", calls);
        break;
    case TC_MISTRAL:
        snprintf(root, sizeof root, "root ::= \"[TOOL_CALLS]\" ( \" \"? \"[\" %s \"]\" | %s )\n", calls, names);
        break;
    case TC_KIMI_K2:
        snprintf(root, sizeof root, "root ::= \"<|tool_calls_section_begin|>\" %s \"<|tool_calls_section_end|>\"\n",
                 calls);
        break;
    }
    put(&g, root);
    if (g.oom) {
        rc = sy_err_set(err, SY_ERR_NOMEM, "tool grammar: out of memory");
        goto done;
    }
    rc = sy_gsrc_add_gbnf(src, g.b.p, "tool-call grammar", err);
done:
    sy_buf_free(&g.b);
    return rc;
}
