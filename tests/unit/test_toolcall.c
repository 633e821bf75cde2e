/*
 * Tool-call parsers on the text each model family writes: every recorded
 * output is fed whole, split in two at every byte boundary, byte by byte,
 * and with the family's markers as special-token pieces; each way must
 * give the same content, reasoning and calls (names, ids, arguments as
 * JSON equal to what the model meant), and no markup in content.
 */
#include "config.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "test_check.h"
#include "toolcall/toolcall.h"

/* the case tables leave trailing fields (no_special, unused calls) to their zero default */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

static const char *TOOLS =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Weather\","
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"},"
    "\"unit\":{\"type\":\"string\",\"enum\":[\"celsius\",\"fahrenheit\"]},\"days\":{\"type\":\"integer\"}},"
    "\"required\":[\"city\"]}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"search\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"query\":{\"type\":\"string\"},\"filters\":{\"type\":\"object\"},"
    "\"limit\":{\"type\":\"integer\"},\"exact\":{\"type\":\"boolean\"},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}}},\"required\":[\"query\"]}}}]";

#define MAX_CALLS 8

typedef struct want {
    const char *name, *id, *args; /* id NULL: a made one */
} want;

typedef struct tcase {
    const char *family;
    const char *what;
    const char *text;
    const char *content, *reasoning;
    want calls[MAX_CALLS];
    bool no_special; /* markup-like text inside raw values: markers as special tokens would end them */
} tcase;

typedef struct got {
    sy_buf content, reasoning;
    int n;
    char *name[MAX_CALLS], *id[MAX_CALLS];
    sy_buf args[MAX_CALLS];
    bool bad_order;
} got;

static void got_free(got *g)
{
    sy_buf_free(&g->content);
    sy_buf_free(&g->reasoning);
    for (int i = 0; i < MAX_CALLS; i++) {
        free(g->name[i]);
        free(g->id[i]);
        sy_buf_free(&g->args[i]);
    }
    memset(g, 0, sizeof *g);
}

static void collect(got *g, const sy_tool_out *o)
{
    sy_buf_append(&g->content, o->content.p ? o->content.p : "", o->content.len);
    sy_buf_append(&g->reasoning, o->reasoning.p ? o->reasoning.p : "", o->reasoning.len);
    for (size_t i = 0; i < o->n_deltas; i++) {
        const sy_tool_call_delta *d = &o->deltas[i];
        if (d->index < 0 || d->index >= MAX_CALLS || d->index > g->n) {
            g->bad_order = true;
            continue;
        }
        if (d->index == g->n) {
            /* a new call: its first piece names it */
            if (!d->id || !d->name)
                g->bad_order = true;
            g->name[g->n] = strdup(d->name ? d->name : "");
            g->id[g->n] = strdup(d->id ? d->id : "");
            g->n++;
        } else if (d->id || d->name || d->index != g->n - 1) {
            g->bad_order = true;
        }
        sy_buf_append(&g->args[d->index], d->arguments, d->arguments_len);
    }
}

typedef struct piece {
    size_t at, len;
    bool special;
} piece;

static const sy_tools *tools_once(void)
{
    static sy_tools *t; /* test-only cache; freed at exit below */
    if (!t) {
        sy_err err;
        if (sy_tools_parse(TOOLS, &t, &err)) {
            fprintf(stderr, "tools: %s\n", err.msg);
            exit(1);
        }
    }
    return t;
}

static void feed(const sy_tool_family *f, const char *text, const piece *pc, size_t np, got *g)
{
    sy_tool_parser *p;
    sy_err err;
    memset(g, 0, sizeof *g);
    CHECK(sy_tool_parser_new(f, tools_once(), 42, &p, &err) == 0);
    sy_tool_out o = {0};
    for (size_t i = 0; i < np; i++) {
        sy_tool_out_reset(&o);
        int rc = sy_tool_parser_push(p, text + pc[i].at, pc[i].len, pc[i].special, i + 1 == np, &o, &err);
        CHECK(rc == 0);
        collect(g, &o);
    }
    sy_tool_out_fini(&o);
    sy_tool_parser_free(p);
}

static bool args_equal(const char *got_s, size_t n, const char *want_s)
{
    json_error_t e;
    json_t *a = json_loadb(got_s ? got_s : "", n, 0, &e);
    json_t *b = json_loads(want_s, 0, &e);
    bool eq = json_is_object(a) && json_equal(a, b);
    json_decref(a);
    json_decref(b);
    return eq;
}

static bool id_ok(const char *family, const char *id)
{
    size_t n = strlen(id);
    if (!strcmp(family, "mistral"))
        return n == 9;
    return n == 29 && !strncmp(id, "call_", 5);
}

static int case_failures;

static void verify(const tcase *c, const got *g, const char *how)
{
    int before = sy_test_failures;
    CHECK(!g->bad_order);
    CHECK(g->content.len == strlen(c->content) && !memcmp(g->content.p ? g->content.p : "", c->content,
                                                              g->content.len));
    const char *r = c->reasoning ? c->reasoning : "";
    CHECK(g->reasoning.len == strlen(r) && !memcmp(g->reasoning.p ? g->reasoning.p : "", r, g->reasoning.len));
    int nw = 0;
    while (nw < MAX_CALLS && c->calls[nw].name)
        nw++;
    CHECK(g->n == nw);
    for (int i = 0; i < nw && i < g->n; i++) {
        CHECK(!strcmp(g->name[i], c->calls[i].name));
        if (c->calls[i].id)
            CHECK(!strcmp(g->id[i], c->calls[i].id));
        else
            CHECK(id_ok(c->family, g->id[i]));
        CHECK(args_equal(g->args[i].p, g->args[i].len, c->calls[i].args));
    }
    if (sy_test_failures != before && case_failures++ < 12) {
        fprintf(stderr, "  case %s/%s fed %s: content [%.*s] reasoning [%.*s] %d calls\n", c->family, c->what,
                how, (int)g->content.len, g->content.p ? g->content.p : "", (int)g->reasoning.len,
                g->reasoning.p ? g->reasoning.p : "", g->n);
        for (int i = 0; i < g->n; i++)
            fprintf(stderr, "    %s id=%s args=%.*s\n", g->name[i], g->id[i], (int)g->args[i].len,
                    g->args[i].p ? g->args[i].p : "");
    }
}

static void run_case(const tcase *c)
{
    const sy_tool_family *f = sy_tool_family_by_name(c->family);
    CHECK(f != NULL);
    if (!f)
        return;
    size_t n = strlen(c->text);
    piece *pc = calloc(n + 2, sizeof *pc);
    got g;

    pc[0] = (piece){0, n, false};
    feed(f, c->text, pc, 1, &g);
    verify(c, &g, "whole");
    got_free(&g);

    int fails = sy_test_failures;
    for (size_t cut = 1; cut < n && sy_test_failures == fails; cut++) {
        pc[0] = (piece){0, cut, false};
        pc[1] = (piece){cut, n - cut, false};
        feed(f, c->text, pc, 2, &g);
        char how[64];
        snprintf(how, sizeof how, "split at byte %zu", cut);
        verify(c, &g, how);
        got_free(&g);
    }

    for (size_t i = 0; i < n; i++)
        pc[i] = (piece){i, 1, false};
    feed(f, c->text, pc, n, &g);
    verify(c, &g, "byte by byte");
    got_free(&g);

    if (!c->no_special) {
        /* markers as whole special tokens, the text between byte by byte, and an end token */
        const char *const *m = sy_tool_family_markers(f);
        size_t np = 0;
        for (size_t i = 0; i < n;) {
            size_t ml = 0;
            for (size_t k = 0; m[k]; k++)
                if (!strncmp(c->text + i, m[k], strlen(m[k])) && strlen(m[k]) > ml)
                    ml = strlen(m[k]);
            if (ml) {
                pc[np++] = (piece){i, ml, true};
                i += ml;
            } else {
                pc[np++] = (piece){i, 1, false};
                i++;
            }
        }
        feed(f, c->text, pc, np, &g);
        verify(c, &g, "as special tokens");
        got_free(&g);
    }
    free(pc);
}

/* ------------------------------------------------------------ recorded outputs */

static const tcase CASES[] = {
    /* GLM-4.5 / 4.6 */
    {"glm45", "two calls, typed values, markup in a string",
     "Let me check both.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>東京 \"Tokyo\"</arg_value>\n"
     "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>\n<tool_call>search\n<arg_key>query</arg_key>\n"
     "<arg_value>what is <tool_call> and </arg_key>?</arg_value>\n<arg_key>filters</arg_key>\n"
     "<arg_value>{\"site\": \"example.com\", \"nested\": {\"a\": [1, 2, {\"b\": \"</tool_call>\"}]}}</arg_value>\n"
     "<arg_key>limit</arg_key>\n<arg_value>10</arg_value>\n<arg_key>exact</arg_key>\n<arg_value>true</arg_value>\n"
     "<arg_key>tags</arg_key>\n<arg_value>[\"x\", \"y\"]</arg_value>\n</tool_call>",
     "Let me check both.\n",
     NULL,
     {{"get_weather", NULL, "{\"city\":\"東京 \\\"Tokyo\\\"\",\"days\":3}"},
      {"search", NULL,
       "{\"query\":\"what is <tool_call> and </arg_key>?\",\"filters\":{\"site\":\"example.com\","
       "\"nested\":{\"a\":[1,2,{\"b\":\"</tool_call>\"}]}},\"limit\":10,\"exact\":true,\"tags\":[\"x\",\"y\"]}"}},
     true},
    {"glm45", "the schema types raw text",
     "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>123</arg_value>\n<arg_key>days</arg_key>\n"
     "<arg_value>three</arg_value>\n<arg_key>extra</arg_key>\n<arg_value>[1, 2]</arg_value>\n"
     "<arg_key>note</arg_key>\n<arg_value>plain words</arg_value>\n</tool_call>",
     "",
     NULL,
     {{"get_weather", NULL, "{\"city\":\"123\",\"days\":\"three\",\"extra\":[1,2],\"note\":\"plain words\"}"}}},
    {"glm45", "as glm_4_5's template lays it out",
     "<tool_call>get_weather<arg_key>city</arg_key>\n<arg_value>Paris</arg_value><arg_key>unit</arg_key>\n"
     "<arg_value>celsius</arg_value></tool_call>",
     "",
     NULL,
     {{"get_weather", NULL, "{\"city\":\"Paris\",\"unit\":\"celsius\"}"}}},
    {"glm45", "an unknown function, no arguments, text after",
     "<tool_call>no_such_tool\n<arg_key>x</arg_key>\n<arg_value>1</arg_value>\n</tool_call>\n"
     "<tool_call>get_weather\n</tool_call>\nDone.",
     "Done.",
     NULL,
     {{"no_such_tool", NULL, "{\"x\":1}"}, {"get_weather", NULL, "{}"}}},
    {"glm45", "text that only looks like a tag", "Use <tool> or <tool_cal>; a < b.\n", "Use <tool> or <tool_cal>; a < b.\n",
     NULL, {{0}}},
    {"glm45", "only whitespace", "\n \n", "\n \n", NULL, {{0}}},
    {"glm45", "whitespace, then prose", "\n  Hello <", "\n  Hello <", NULL, {{0}}},
    {"glm45", "a tag prefix at the end", "the end <tool_ca", "the end <tool_ca", NULL, {{0}}},
    /* GLM-4.7 / GLM-5 */
    {"glm47", "two calls, no newlines",
     "I'll look.<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value><arg_key>days</arg_key>"
     "<arg_value>2</arg_value></tool_call><tool_call>search<arg_key>query</arg_key><arg_value>line1\nline2 \\ \"q\" "
     "é😀</arg_value><arg_key>exact</arg_key><arg_value>false</arg_value></tool_call>",
     "I'll look.",
     NULL,
     {{"get_weather", NULL, "{\"city\":\"Paris\",\"days\":2}"},
      {"search", NULL, "{\"query\":\"line1\\nline2 \\\\ \\\"q\\\" é😀\",\"exact\":false}"}}},
    /* DeepSeek V3 */
    {"deepseek_v3", "two calls in fences",
     "Sure.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
     "{\"city\": \"Paris\", \"days\": 3}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>search\n"
     "```json\n{\"query\": \"```json <｜tool▁call▁end｜> \\\"x\\\" é\", \"filters\": {\"a\": [1, {\"b\": null}]}}\n```"
     "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
     "Sure.",
     NULL,
     {{"get_weather", NULL, "{\"city\":\"Paris\",\"days\":3}"},
      {"search", NULL, "{\"query\":\"```json <｜tool▁call▁end｜> \\\"x\\\" é\",\"filters\":{\"a\":[1,{\"b\":null}]}}"}}},
    /* DeepSeek V3.1 */
    {"deepseek_v31", "two calls",
     "Checking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Berlin\", \"unit\": "
     "\"celsius\"}<｜tool▁call▁end｜><｜tool▁call▁begin｜>search<｜tool▁sep｜>{\"query\": \"a\\nb\", \"limit\": 5, "
     "\"exact\": false, \"tags\": []}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
     "Checking.",
     NULL,
     {{"get_weather", NULL, "{\"city\":\"Berlin\",\"unit\":\"celsius\"}"},
      {"search", NULL, "{\"query\":\"a\\nb\",\"limit\":5,\"exact\":false,\"tags\":[]}"}}},
    /* DeepSeek V3.2 */
    {"deepseek_v32", "DSML, two invokes",
     "Let me check.\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" "
     "string=\"true\">Paris</｜DSML｜parameter>\n<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>\n"
     "</｜DSML｜invoke>\n<｜DSML｜invoke name=\"search\">\n<｜DSML｜parameter name=\"query\" string=\"true\">x < y & "
     "\"z\" </｜DSML｜invoke></｜DSML｜parameter>\n<｜DSML｜parameter name=\"filters\" string=\"false\">{\"k\": [1, 2]}"
     "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
     "Let me check.\n\n",
     NULL,
     {{"get_weather", NULL, "{\"city\":\"Paris\",\"days\":3}"},
      {"search", NULL, "{\"query\":\"x < y & \\\"z\\\" </｜DSML｜invoke>\",\"filters\":{\"k\":[1,2]}}"}}},
    /* Hermes (Qwen2.5, Qwen3) */
    {"hermes", "two calls, markup and escapes in strings",
     "I'll check the weather.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"São Paulo\", "
     "\"days\": 2}}\n</tool_call>\n<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"</tool_call> "
     "<tool_call> {\\\"name\\\": 1}\", \"filters\": {\"deep\": {\"deeper\": [[], {}, [\"\\u00e9\\ud83d\\ude00\"]]}}, "
     "\"limit\": 1e2}}\n</tool_call>",
     "I'll check the weather.\n",
     NULL,
     {{"get_weather", NULL, "{\"city\":\"São Paulo\",\"days\":2}"},
      {"search", NULL,
       "{\"query\":\"</tool_call> <tool_call> {\\\"name\\\": 1}\",\"filters\":{\"deep\":{\"deeper\":[[],{},"
       "[\"é😀\"]]}},\"limit\":100.0}"}}},
    {"hermes", "arguments before the name",
     "<tool_call>\n{\"arguments\": {\"city\": \"Lima\"}, \"name\": \"get_weather\"}\n</tool_call>",
     "",
     NULL,
     {{"get_weather", NULL, "{\"city\":\"Lima\"}"}}},
    {"hermes", "arguments as a JSON string",
     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Kyiv\\\"}\"}\n</tool_call>",
     "",
     NULL,
     {{"get_weather", NULL, "{\"city\":\"Kyiv\"}"}}},
    {"hermes", "numbers beyond int64 and double",
     "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"n\": 123456789012345678901234567890, \"r\": -1e999, "
     "\"ok\": [0, -0.5, 2E+3]}}\n</tool_call>",
     "",
     NULL,
     {{"search", NULL, "{\"n\":123456789012345678901234567890.0,\"r\":-1.7976931348623157e308,\"ok\":[0,-0.5,2000.0]}"}}},
    {"hermes", "text like a tag", "a <tool_call-ish> thing and <tool_c", "a <tool_call-ish> thing and <tool_c", NULL,
     {{0}}},
    /* Llama 3.1-3.3 */
    {"llama3_json", "two calls separated by ;",
     "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"days\": 1}}; {\"name\": \"search\", "
     "\"parameters\": {\"query\": \"semi;colon {braces} }\"}}",
     "",
     NULL,
     {{"get_weather", NULL, "{\"city\":\"Paris\",\"days\":1}"}, {"search", NULL, "{\"query\":\"semi;colon {braces} }\"}"}}},
    {"llama3_json", "after <|python_tag|>",
     "<|python_tag|>{\"type\": \"function\", \"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\"}}", "", NULL,
     {{"get_weather", NULL, "{\"city\":\"Rome\"}"}}},
    {"llama3_json", "content, then a call", "Let me look that up. <|python_tag|>{\"name\": \"search\", "
     "\"parameters\": {\"query\": \"x\"}}",
     "Let me look that up. ", NULL, {{"search", NULL, "{\"query\":\"x\"}"}}},
    {"llama3_json", "JSON that is not a call", "{\"answer\": 42}", "{\"answer\": 42}", NULL, {{0}}},
    {"llama3_json", "prose", "Hello there {not a call}", "Hello there {not a call}", NULL, {{0}}},
    /* Mistral */
    {"mistral", "array form (Nemo)",
     "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}, \"id\": "
     "\"a1B2c3D4e\"}, {\"name\": \"search\", \"arguments\": {\"query\": \"]}[TOOL_CALLS] ok\"}}]",
     "",
     NULL,
     {{"get_weather", NULL, "{\"city\":\"Paris\",\"unit\":\"celsius\"}"}, {"search", NULL, "{\"query\":\"]}[TOOL_CALLS] ok\"}"}}},
    {"mistral", "array form after a space (Small 3.1)",
     "Sure. [TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Nice\"}}]", "Sure. ", NULL,
     {{"get_weather", NULL, "{\"city\":\"Nice\"}"}}},
    {"mistral", "name[ARGS] form (v11+)",
     "Let me check.[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]search[ARGS]{\"query\": \"q\", "
     "\"limit\": 3}",
     "Let me check.",
     NULL,
     {{"get_weather", NULL, "{\"city\":\"Paris\"}"}, {"search", NULL, "{\"query\":\"q\",\"limit\":3}"}}},
    {"mistral", "with [CALL_ID]", "[TOOL_CALLS]get_weather[CALL_ID]abc123XYZ[ARGS]{\"city\": \"Oslo\"}", "", NULL,
     {{"get_weather", "abc123XYZ", "{\"city\":\"Oslo\"}"}}},
    /* Kimi K2 */
    {"kimi_k2", "two calls with the model's ids",
     "Let me check.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
     "<|tool_call_argument_begin|>{\"city\": \"Beijing\"}<|tool_call_end|><|tool_call_begin|>functions.search:1"
     "<|tool_call_argument_begin|>{\"query\": \"<|tool_call_end|> ok\", \"tags\": [\"a\"]}<|tool_call_end|>"
     "<|tool_calls_section_end|>",
     "Let me check.",
     NULL,
     {{"get_weather", "functions.get_weather:0", "{\"city\":\"Beijing\"}"},
      {"search", "functions.search:1", "{\"query\":\"<|tool_call_end|> ok\",\"tags\":[\"a\"]}"}}},
    /* gpt-oss harmony */
    {"harmony", "analysis then a call",
     "<|channel|>analysis<|message|>User wants weather; call the tool.<|end|><|start|>assistant<|channel|>commentary "
     "to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Tokyo\",\"days\":2}<|call|>",
     "",
     "User wants weather; call the tool.",
     {{"get_weather", NULL, "{\"city\":\"Tokyo\",\"days\":2}"}}},
    {"harmony", "analysis then final",
     "<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final<|message|>It is sunny.<|return|>",
     "It is sunny.",
     "Easy.",
     {{0}}},
    {"harmony", "preamble, recipient before the channel",
     "<|channel|>commentary<|message|>Checking now.<|end|><|start|>assistant to=functions.search<|channel|>commentary "
     "<|constrain|>json<|message|>{\"query\":\"x\"}<|call|>",
     "Checking now.",
     NULL,
     {{"search", NULL, "{\"query\":\"x\"}"}}},
};

/* ------------------------------------------------------------ other checks */

static void test_unterminated(void)
{
    /* the output stops inside a call: the call is reported, its arguments closed up as JSON */
    static const struct {
        const char *family, *text, *name, *args;
    } t[] = {
        {"hermes", "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"abc", "search", "{\"query\":\"abc\"}"},
        {"glm45", "<tool_call>search\n<arg_key>query</arg_key>\n<arg_value>par", "search", "{\"query\":\"par\"}"},
        {"glm45", "<tool_call>search\n<arg_key>limit</arg_key>\n<arg_value>1", "search", "{\"limit\":1}"},
        {"kimi_k2", "<|tool_call_begin|>functions.search:0<|tool_call_argument_begin|>{\"tags\": [\"a\", ", "search",
         "{\"tags\":[\"a\"]}"},
        {"deepseek_v31", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>search<｜tool▁sep｜>{\"limit\": 1", "search",
         "{\"limit\":1}"},
        {"mistral", "[TOOL_CALLS]search[ARGS]{\"query\": \"q\", \"filters\": {\"a\":", "search",
         "{\"query\":\"q\",\"filters\":{\"a\":null}}"},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        const char *id = strcmp(t[i].family, "kimi_k2") ? NULL : "functions.search:0";
        tcase c = {t[i].family, "unterminated", t[i].text, "", NULL, {{t[i].name, id, t[i].args}}, true};
        run_case(&c);
    }
}

/* Content comes out as soon as it cannot be markup, and a call's name and arguments before the call ends. */
static void test_incremental(void)
{
    static const struct {
        const char *family;
        const char *pieces[4];
        const char *content[4]; /* content after each piece */
        const char *args[4];    /* arguments so far after each piece (NULL: no call yet) */
    } t[] = {
        {"hermes",
         {"Let me check. ", "<tool", "_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"ab", "c\"}}"},
         {"Let me check. ", "Let me check. ", "Let me check. ", "Let me check. "},
         {NULL, NULL, "{\"query\":\"ab", "{\"query\":\"abc\"}"}},
        {"hermes", {"a <tool", "box> b", NULL}, {"a ", "a <toolbox> b"}, {NULL, NULL}},
        {"glm47",
         {"Ok.<tool_call>search<arg_key>query</arg_key><arg_value>par", "tial", "</arg_value><arg_key>limit</arg_key><arg_value>4",
          "</arg_value></tool_call>"},
         {"Ok.", "Ok.", "Ok.", "Ok."},
         {"{\"query\":\"par", "{\"query\":\"partial", "{\"query\":\"partial\",\"limit\":",
          "{\"query\":\"partial\",\"limit\":4}"}},
        {"llama3_json", {"Hello", " there", NULL}, {"Hello", "Hello there"}, {NULL, NULL}},
        {"harmony", {"<|channel|>final<|message|>Hi", " you", NULL}, {"Hi", "Hi you"}, {NULL, NULL}},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        sy_tool_parser *p;
        sy_err err;
        sy_tool_out o = {0};
        got g;
        memset(&g, 0, sizeof g);
        CHECK(sy_tool_parser_new(sy_tool_family_by_name(t[i].family), tools_once(), 5, &p, &err) == 0);
        for (int k = 0; k < 4 && t[i].pieces[k]; k++) {
            sy_tool_out_reset(&o);
            CHECK(sy_tool_parser_push(p, t[i].pieces[k], strlen(t[i].pieces[k]), false, false, &o, &err) == 0);
            collect(&g, &o);
            bool ok = g.content.len == strlen(t[i].content[k]) &&
                      !memcmp(g.content.p ? g.content.p : "", t[i].content[k], g.content.len);
            if (t[i].args[k])
                ok = ok && g.n == 1 && g.args[0].len == strlen(t[i].args[k]) &&
                     !memcmp(g.args[0].p, t[i].args[k], g.args[0].len);
            else
                ok = ok && g.n == 0;
            if (!ok)
                fprintf(stderr, "incremental %s after piece %d: content [%.*s] args [%.*s]\n", t[i].family, k,
                        (int)g.content.len, g.content.p ? g.content.p : "", (int)g.args[0].len,
                        g.args[0].p ? g.args[0].p : "");
            CHECK(ok);
        }
        sy_tool_out_fini(&o);
        sy_tool_parser_free(p);
        got_free(&g);
    }
}

static void test_special_dropped(void)
{
    /* a special token that is not markup never reaches content */
    const sy_tool_family *f = sy_tool_family_by_name("hermes");
    sy_tool_parser *p;
    sy_err err;
    CHECK(sy_tool_parser_new(f, NULL, 1, &p, &err) == 0);
    sy_tool_out o = {0};
    CHECK(sy_tool_parser_push(p, "Hi", 2, false, false, &o, &err) == 0);
    CHECK(sy_tool_parser_push(p, "<|im_end|>", 10, true, true, &o, &err) == 0);
    CHECK(o.content.len == 2 && !memcmp(o.content.p, "Hi", 2));
    CHECK(sy_tool_parser_calls(p) == 0);
    sy_tool_out_fini(&o);
    sy_tool_parser_free(p);
}

static void test_ids_reproducible(void)
{
    const sy_tool_family *f = sy_tool_family_by_name("hermes");
    const char *text = "<tool_call>{\"name\":\"search\",\"arguments\":{}}</tool_call>";
    char ids[3][64];
    uint64_t seeds[3] = {7, 7, 8};
    for (int k = 0; k < 3; k++) {
        sy_tool_parser *p;
        sy_err err;
        sy_tool_out o = {0};
        CHECK(sy_tool_parser_new(f, NULL, seeds[k], &p, &err) == 0);
        CHECK(sy_tool_parser_push(p, text, strlen(text), false, true, &o, &err) == 0);
        CHECK(o.n_deltas >= 1 && o.deltas[0].id);
        snprintf(ids[k], sizeof ids[k], "%s", o.n_deltas && o.deltas[0].id ? o.deltas[0].id : "");
        sy_tool_out_fini(&o);
        sy_tool_parser_free(p);
    }
    CHECK(!strcmp(ids[0], ids[1]));
    CHECK(strcmp(ids[0], ids[2]));
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    size_t nread = fread(s, 1, (size_t)n, f);
    s[nread] = 0;
    fclose(f);
    return s;
}

/*
 * What each template renders for a past assistant call (the shared expected
 * renderings, dict and string arguments) is what its model emits: cut out
 * of the rendering, it must parse back as that call.
 */
static void test_renderings(const char *shared)
{
    static const struct {
        const char *file, *family, *call, *start, *end;
    } t[] = {
        {"GLM-4.6__tool_call_dict_args", "glm45", "<tool_call>get_weather", "<think></think>", "<|observation|>"},
        {"glm_4_5__tool_call_dict_args", "glm45", "<tool_call>get_weather", "<think></think>", "<|observation|>"},
        {"GLM-4.7-Flash__tool_call_dict_args", "glm47", "<tool_call>get_weather", "</think>", "<|observation|>"},
        {"DeepSeek-V3.2__tool_call_dict_args", "deepseek_v32", "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">",
         "<think></think>",
         "<｜end▁of▁sentence｜>"},
        {"deepseek-ai-DeepSeek-V3.1__tool_call_str_args", "deepseek_v31", "<｜tool▁calls▁begin｜>", "</think>",
         "<｜end▁of▁sentence｜>"},
        {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B__tool_call_str_args", "deepseek_v3", "<｜tool▁calls▁begin｜>",
         "<｜Assistant｜>", "<｜tool▁outputs▁begin｜>"},
        {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B__tool_call_str_args", "deepseek_v3", "<｜tool▁calls▁begin｜>",
         "<｜Assistant｜>", "<｜tool▁outputs▁begin｜>"},
        {"Qwen-Qwen2.5-7B-Instruct__tool_call_dict_args", "hermes", "<tool_call>\n{\"name\": \"get_weather\"",
         "<|im_start|>assistant\n", "<|im_end|>"},
        {"Qwen-Qwen2.5-7B-Instruct__tool_call_str_args", "hermes", "<tool_call>\n{\"name\": \"get_weather\"",
         "<|im_start|>assistant\n", "<|im_end|>"},
        {"Qwen-Qwen3-0.6B__tool_call_dict_args", "hermes", "<tool_call>\n{\"name\": \"get_weather\"",
         "<|im_start|>assistant\n", "<|im_end|>"},
        {"meta-llama-Llama-3.1-8B-Instruct__tool_call_dict_args", "llama3_json", "{\"name\": \"get_weather\"",
         "assistant<|end_header_id|>\n\n", "<|eot_id|>"},
        {"meta-llama-Llama-3.1-8B-Instruct__tool_call_str_args", "llama3_json", "{\"name\": \"get_weather\"",
         "assistant<|end_header_id|>\n\n", "<|eot_id|>"},
        {"meta-llama-Llama-3.2-3B-Instruct__tool_call_dict_args", "llama3_json", "{\"name\": \"get_weather\"",
         "assistant<|end_header_id|>\n\n", "<|eot_id|>"},
        {"meta-llama-Llama-3.3-70B-Instruct__tool_call_str_args", "llama3_json", "{\"name\": \"get_weather\"",
         "assistant<|end_header_id|>\n\n", "<|eot_id|>"},
        {"mistralai-Mistral-Nemo-Instruct-2407__tool_call_dict_args", "mistral", "[TOOL_CALLS]", "[/INST]", "</s>"},
        {"mistralai-Mistral-Nemo-Instruct-2407__tool_call_str_args", "mistral", "[TOOL_CALLS]", "[/INST]", "</s>"},
        {"mistralai-Mistral-Small-3.1-24B-Instruct-2503__tool_call_dict_args", "mistral", "[TOOL_CALLS]", "[/INST]",
         "</s>"},
        {"mistralai-Mistral-Small-3.1-24B-Instruct-2503__tool_call_str_args", "mistral", "[TOOL_CALLS]", "[/INST]",
         "</s>"},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/chat-templates/expected/%s.txt", shared, t[i].file);
        char *src = read_file(path);
        if (!src) {
            fprintf(stderr, "missing %s\n", path);
            CHECK(src != NULL);
            continue;
        }
        const char *call = strstr(src, t[i].call);
        const char *from = NULL;
        for (const char *q = src; call && (q = strstr(q, t[i].start)) && q < call; q++)
            from = q + strlen(t[i].start);
        const char *to = call ? strstr(call, t[i].end) : NULL;
        if (!(call && from && to))
            fprintf(stderr, "%s: no assistant call between \"%s\" and \"%s\"\n", t[i].file, t[i].start, t[i].end);
        CHECK(call && from && to);
        if (call && from && to) {
            char *text = strndup(from, (size_t)(to - from));
            tcase c = {t[i].family, t[i].file, text, "", NULL,
                       {{"get_weather", NULL, "{\"city\":\"Paris\",\"unit\":\"celsius\"}"}}};
            run_case(&c);
            free(text);
        }
        free(src);
    }
}

static void test_detect(const char *shared)
{
    static const struct {
        const char *file, *family;
    } t[] = {
        {"GLM-4.6.jinja", "glm45"},
        {"glm_4_5.jinja", "glm45"},
        {"GLM-4.7-Flash.jinja", "glm47"},
        {"DeepSeek-V3.2.jinja", "deepseek_v32"},
        {"deepseek-ai-DeepSeek-V3.1.jinja", "deepseek_v31"},
        /* the distills' templates write V3's call markup */
        {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", "deepseek_v3"},
        {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", "deepseek_v3"},
        {"Qwen-Qwen2.5-7B-Instruct.jinja", "hermes"},
        {"Qwen-Qwen3-0.6B.jinja", "hermes"},
        {"meta-llama-Llama-3.1-8B-Instruct.jinja", "llama3_json"},
        {"meta-llama-Llama-3.2-3B-Instruct.jinja", "llama3_json"},
        {"meta-llama-Llama-3.3-70B-Instruct.jinja", "llama3_json"},
        {"mistralai-Mistral-Nemo-Instruct-2407.jinja", "mistral"},
        {"mistralai-Mistral-Small-3.1-24B-Instruct-2503.jinja", "mistral"},
        {"moonshotai-Kimi-K2.jinja", "kimi_k2"},
        {"google-gemma-2-2b-it.jinja", NULL},
        {"microsoft-Phi-3.5-mini-instruct.jinja", NULL},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/chat-templates/templates/%s", shared, t[i].file);
        char *src = read_file(path);
        if (!src) {
            fprintf(stderr, "missing %s\n", path);
            CHECK(src != NULL);
            continue;
        }
        const sy_tool_family *f = sy_tool_family_detect(src);
        const char *found = f ? sy_tool_family_name(f) : NULL;
        bool ok = t[i].family ? found && !strcmp(found, t[i].family) : found == NULL;
        if (!ok)
            fprintf(stderr, "detect %s: expected %s, found %s\n", t[i].file, t[i].family ? t[i].family : "none",
                    found ? found : "none");
        CHECK(ok);
        free(src);
    }
    const char *harmony = "{{- '<|start|>assistant<|channel|>commentary to=functions.' + name + ' <|constrain|>json"
                          "<|message|>' + args + '<|call|>' }}";
    CHECK(sy_tool_family_detect(harmony) == sy_tool_family_by_name("harmony"));
    CHECK(sy_tool_family_detect("{{ messages }}") == NULL);
    /* every name round-trips and is in the list */
    const char *names[] = {"glm45", "glm47", "deepseek_v3", "deepseek_v31", "deepseek_v32", "hermes",
                           "llama3_json", "mistral", "kimi_k2", "harmony"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const sy_tool_family *f = sy_tool_family_by_name(names[i]);
        CHECK(f && !strcmp(sy_tool_family_name(f), names[i]));
        CHECK_CONTAINS(sy_tool_family_list(), names[i]);
    }
    CHECK(sy_tool_family_by_name("qwen") == NULL);
}

static void test_tools_parse(void)
{
    static const struct {
        const char *json, *err;
    } bad[] = {
        {"{}", "tools: expected an array, found an object"},
        {"[1]", "tools[0]: expected an object, found a number"},
        {"[{\"type\":\"function\",\"function\":{\"name\":\"a\"}},{\"type\":\"tool\"}]", "tools[1].type: expected \"function\""},
        {"[{\"type\":\"function\"}]", "tools[0].function: expected an object, found nothing"},
        {"[{\"type\":\"function\",\"function\":{\"name\":5}}]", "tools[0].function.name: expected a string, found a number"},
        {"[{\"type\":\"function\",\"function\":{\"name\":\"a b\"}}]", "tools[0].function.name: expected 1-128 characters"},
        {"[{\"type\":\"function\",\"function\":{\"name\":\"\"}}]", "tools[0].function.name: expected 1-128 characters"},
        {"[{\"type\":\"function\",\"function\":{\"name\":\"a\"}},{\"type\":\"function\",\"function\":{\"name\":\"a\"}}]",
         "tools[1].function.name: \"a\" is already tools[0]'s name"},
        {"[{\"type\":\"function\",\"function\":{\"name\":\"a\",\"parameters\":[]}}]",
         "tools[0].function.parameters: expected an object (a JSON schema), found an array"},
        {"[{\"type\":\"function\",\"function\":{\"name\":\"a\",\"description\":3}}]",
         "tools[0].function.description: expected a string, found a number"},
        {"[{\"type\":\"function\",", "tools: expected a JSON array, found invalid JSON"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sy_tools *t = (sy_tools *)1;
        sy_err err = {{0}};
        CHECK(sy_tools_parse(bad[i].json, &t, &err) == SY_ERR_INVALID);
        CHECK(t == NULL);
        CHECK_CONTAINS(err.msg, bad[i].err);
    }
    const sy_tools *t = tools_once();
    CHECK(sy_tools_count(t) == 2);
    CHECK(!strcmp(sy_tools_name(t, 1), "search"));
    CHECK(sy_tools_find(t, "search") == 1 && sy_tools_find(t, "nope") == -1);
    CHECK_CONTAINS(sy_tools_parameters(t, 0), "\"city\":{\"type\":\"string\"}");
    sy_tools *u;
    sy_err err;
    CHECK(sy_tools_parse("[{\"type\":\"function\",\"function\":{\"name\":\"x.y-z_1\"}}]", &u, &err) == 0);
    CHECK(!strcmp(sy_tools_parameters(u, 0), "{}"));
    sy_tools_free(u);
}

int main(void)
{
    const char *shared = getenv("SY_SHARED_DIR");
    if (!shared || !*shared) {
        fprintf(stderr, "SY_SHARED_DIR is not set (make check sets it)\n");
        return 1;
    }
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++)
        run_case(&CASES[i]);
    test_unterminated();
    test_incremental();
    test_special_dropped();
    test_ids_reproducible();
    test_detect(shared);
    test_renderings(shared);
    test_tools_parse();
    sy_tools_free((sy_tools *)tools_once());
    return sy_test_done("test_toolcall");
}
