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

/* The literal f with a in it. */
static void lit_fmt(gb *g, const char *f, const char *a)
{
    char *s = fmt(f, a);
    if (!s) {
        g->oom = true;
        return;
    }
    lit(g, s);
    free(s);
}

/* " mid " and the literal close: what follows an opening literal in every call and pair. */
static void then(gb *g, const char *mid, const char *close)
{
    put(g, " "), put(g, mid), put(g, " "), lit(g, close);
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

/*
 * A string parameter's raw value (GLM and DSML write strings unquoted, up to
 * the closing tag), held to the keywords of its schema: enum and const as
 * choices, a pattern anchored at both ends as a full match, minLength /
 * maxLength as a count of characters other than '<' (so the closing tag
 * cannot start inside the counted run). What cannot be enforced on raw text
 * is a 400 naming it, as sy_gsrc_add_json_schema does for JSON.
 */
#define TC_RAW_MAX_SPAN 1000 /* as the JSON schema compiler's limit on maxLength - minLength */
static int raw_string_value(sy_gsrc *src, const char *name, json_t *prop, const char *stop, const char *path,
                            sy_err *err)
{
    static const char *const annotations[] = {"type", "description", "title", "default", "examples", "enum",
                                              "const", "minLength", "maxLength", "pattern", "$comment", NULL};
    const char *k;
    json_t *v;
    json_object_foreach(prop, k, v)
    {
        bool known = false;
        for (size_t a = 0; annotations[a]; a++)
            known = known || !strcmp(k, annotations[a]);
        if (!known)
            return sy_err_set(err, SY_ERR_INVALID,
                              "%s.%s: '%s' is not supported by constrained decoding on a string parameter "
                              "(this model's tool-call format writes string values unquoted)",
                              path, k, k);
    }
    json_t *en = json_object_get(prop, "enum"), *cn = json_object_get(prop, "const");
    json_t *pat = json_object_get(prop, "pattern");
    json_t *mn = json_object_get(prop, "minLength"), *mx = json_object_get(prop, "maxLength");
    if (cn) {
        if (!json_is_string(cn))
            return sy_err_set(err, SY_ERR_INVALID, "%s.const: expected a string for a string parameter", path);
        const char *one = json_string_value(cn);
        return sy_gsrc_add_choice(src, name, &one, 1, err);
    }
    if (json_is_array(en) && json_array_size(en)) {
        size_t n = json_array_size(en), m = 0;
        const char **ch = calloc(n, sizeof *ch);
        if (!ch)
            return sy_err_set(err, SY_ERR_NOMEM, "%s: out of memory", path);
        for (size_t e = 0; e < n; e++)
            if (json_is_string(json_array_get(en, e)))
                ch[m++] = json_string_value(json_array_get(en, e));
        int rc = m ? sy_gsrc_add_choice(src, name, ch, m, err)
                   : sy_err_set(err, SY_ERR_INVALID, "%s.enum: no string among the values of a string parameter", path);
        free(ch);
        return rc;
    }
    if (pat && (mn || mx))
        return sy_err_set(err, SY_ERR_INVALID,
                          "%s.pattern: 'pattern' together with minLength/maxLength is not supported by constrained "
                          "decoding on a string parameter of this model's tool-call format",
                          path);
    if (pat) {
        const char *re = json_is_string(pat) ? json_string_value(pat) : NULL;
        size_t n = re ? strlen(re) : 0;
        if (!re || n < 2 || re[0] != '^' || re[n - 1] != '$' || (n >= 3 && re[n - 2] == '\\'))
            return sy_err_set(err, SY_ERR_INVALID,
                              "%s.pattern: only a pattern anchored at both ends (^...$) is supported by constrained "
                              "decoding on a string parameter of this model's tool-call format",
                              path);
        char ppath[300];
        snprintf(ppath, sizeof ppath, "%s.pattern", path);
        return sy_gsrc_add_regex(src, name, re, ppath, err);
    }
    if (mn || mx) {
        if ((mn && (!json_is_integer(mn) || json_integer_value(mn) < 0)) ||
            (mx && (!json_is_integer(mx) || json_integer_value(mx) < 0)))
            return sy_err_set(err, SY_ERR_INVALID, "%s.%s: expected a non-negative integer", path,
                              mn && !(json_is_integer(mn) && json_integer_value(mn) >= 0) ? "minLength" : "maxLength");
        long long lo = mn ? json_integer_value(mn) : 0, hi = mx ? json_integer_value(mx) : -1;
        if (hi >= 0 && hi < lo)
            return sy_err_set(err, SY_ERR_INVALID, "%s: maxLength %lld is below minLength %lld", path, hi, lo);
        if ((hi >= 0 ? hi : lo) - lo > TC_RAW_MAX_SPAN || lo > TC_RAW_MAX_SPAN)
            return sy_err_set(err, SY_ERR_INVALID,
                              "%s.maxLength: a span over %d characters is not supported by constrained decoding",
                              path, TC_RAW_MAX_SPAN);
        char rule[256];
        if (hi >= 0)
            snprintf(rule, sizeof rule, "%s ::= [^<]{%lld,%lld}\n", name, lo, hi);
        else
            snprintf(rule, sizeof rule, "%s ::= [^<]{%lld,}\n", name, lo);
        return sy_gsrc_add_gbnf(src, rule, path, err);
    }
    return sy_gsrc_add_text_until(src, name, stop, err);
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
            rc = raw_string_value(src, name, prop, stop, path, err);
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
    lit_fmt(g, "<arg_key>%s</arg_key>\n<arg_value>", key);
    then(g, vr, "</arg_value>\n");
}

static void glm47_kv(gb *g, const char *key, const char *vr, bool s)
{
    (void)s;
    lit_fmt(g, "<arg_key>%s</arg_key><arg_value>", key);
    then(g, vr, "</arg_value>");
}

static void dsml_kv(gb *g, const char *key, const char *vr, bool s)
{
    lit_fmt(g, s ? "<｜DSML｜parameter name=\"%s\" string=\"true\">" : "<｜DSML｜parameter name=\"%s\" string=\"false\">",
            key);
    then(g, vr, "</｜DSML｜parameter>\n");
}

/* A GLM / DSML call: the literal open with the name in it, the pairs, the literal close. */
static void kv_call(gb *g, const char *open, const char *nm, const sy_tools *t, size_t i, kv_fn kv,
                    const char *free_pair, const char *close)
{
    lit_fmt(g, open, nm);
    put(g, " ");
    kv_body(g, t, i, kv, free_pair);
    lit(g, close);
}

/* One call of tool i as the family writes it (rule tc-cI). */
static void call_rule(gb *g, const sy_tool_family *f, const sy_tools *t, size_t i)
{
    char r[32], args[32];
    snprintf(r, sizeof r, "tc-c%zu", i);
    snprintf(args, sizeof args, "tc-t%zu-args", i);
    const char *nm = t->v[i].name;
    rule(g, r);
    switch (f->kind) {
    case TC_GLM45:
        kv_call(g, "<tool_call>%s\n", nm, t, i, glm45_kv,
                "\"<arg_key>\" tc-key \"</arg_key>\" \"\\n\" \"<arg_value>\" tc-val \"</arg_value>\" \"\\n\"", "</tool_call>");
        break;
    case TC_GLM47:
        kv_call(g, "<tool_call>%s", nm, t, i, glm47_kv,
                "\"<arg_key>\" tc-key \"</arg_key>\" \"<arg_value>\" tc-val \"</arg_value>\"", "</tool_call>");
        break;
    case TC_DEEPSEEK_V32:
        kv_call(g, "<｜DSML｜invoke name=\"%s\">\n", nm, t, i, dsml_kv,
                "\"<｜DSML｜parameter name=\\\"\" tc-key \"\\\" string=\\\"true\\\">\" tc-val \"</｜DSML｜parameter>\\n\"",
                "</｜DSML｜invoke>\n");
        break;
    case TC_DEEPSEEK_V3:
        lit_fmt(g, "<｜tool▁call▁begin｜>function<｜tool▁sep｜>%s\n```json\n", nm);
        then(g, args, "\n```<｜tool▁call▁end｜>");
        break;
    case TC_DEEPSEEK_V31:
        lit_fmt(g, "<｜tool▁call▁begin｜>%s<｜tool▁sep｜>", nm);
        then(g, args, "<｜tool▁call▁end｜>");
        break;
    case TC_HERMES:
        lit_fmt(g, "<tool_call>\n{\"name\": \"%s\", \"arguments\": ", nm);
        then(g, args, "}\n</tool_call>");
        break;
    case TC_LLAMA3_JSON:
        lit_fmt(g, "{\"name\": \"%s\", \"parameters\": ", nm);
        then(g, args, "}");
        break;
    case TC_MISTRAL:
        /* the array object; the [ARGS] form is tc-nI */
        lit_fmt(g, "{\"name\": \"%s\", \"arguments\": ", nm);
        then(g, args, "}");
        put(g, "\n");
        snprintf(r, sizeof r, "tc-n%zu", i);
        rule(g, r);
        lit_fmt(g, "%s[ARGS]", nm);
        put(g, " "), put(g, args);
        break;
    case TC_KIMI_K2:
        lit_fmt(g, "<|tool_call_begin|>functions.%s:", nm);
        then(g, "[0-9] [0-9]? [0-9]?", "<|tool_call_argument_begin|>");
        then(g, args, "<|tool_call_end|>");
        break;
    case TC_HARMONY:
        lit_fmt(g, "<|channel|>commentary to=functions.%s <|constrain|>json<|message|>", nm);
        then(g, args, "<|call|>");
        break;
    }
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
