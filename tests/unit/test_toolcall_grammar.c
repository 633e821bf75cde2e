/*
 * The grammars that force a call: each family's grammar accepts the call
 * as the model writes it, the family's parser reads that text back as the
 * same call, and texts with free text before the call, an undeclared
 * function, a missing required parameter or an argument of the wrong type
 * are rejected.
 */
#include "config.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "test_check.h"
#include "toolcall/toolcall.h"

/* rejected cases leave names/args to their zero default */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

static const char *TOOLS =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"},"
    "\"unit\":{\"type\":\"string\",\"enum\":[\"celsius\",\"fahrenheit\"]},\"days\":{\"type\":\"integer\"}},"
    "\"required\":[\"city\"]}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"search\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"query\":{\"type\":\"string\"},\"exact\":{\"type\":\"boolean\"}},\"required\":[\"query\"]}}}]";

typedef struct gcase {
    const char *family, *only;
    bool parallel, accept;
    const char *text;
    const char *names[3], *args[3]; /* what the parser must read from an accepted text */
} gcase;

static const gcase CASES[] = {
    /* Hermes */
    {"hermes", NULL, false, true,
     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>",
     {"get_weather"}, {"{\"city\":\"Paris\",\"days\":3}"}},
    {"hermes", NULL, true, true,
     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"</tool_call>\"}}\n</tool_call>\n"
     "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"q\", \"exact\": true}}\n</tool_call>",
     {"get_weather", "search"}, {"{\"city\":\"</tool_call>\"}", "{\"query\":\"q\",\"exact\":true}"}},
    {"hermes", NULL, false, false,
     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"a\"}}\n</tool_call>\n<tool_call>\n"
     "{\"name\": \"search\", \"arguments\": {\"query\": \"q\"}}\n</tool_call>"},
    {"hermes", NULL, false, false,
     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": \"3\"}}\n</tool_call>"},
    {"hermes", NULL, false, false, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"days\": 3}}\n</tool_call>"},
    {"hermes", NULL, false, false, "<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>"},
    {"hermes", NULL, false, false,
     "Sure. <tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"q\"}}\n</tool_call>"},
    {"hermes", "search", false, false,
     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"},
    {"hermes", "search", false, true, "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"q\"}}\n</tool_call>",
     {"search"}, {"{\"query\":\"q\"}"}},
    /* GLM */
    {"glm45", NULL, false, true,
     "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>東京 </arg_key></arg_value>\n<arg_key>unit</arg_key>\n"
     "<arg_value>celsius</arg_value>\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>",
     {"get_weather"}, {"{\"city\":\"東京 </arg_key>\",\"unit\":\"celsius\",\"days\":3}"}},
    {"glm45", NULL, false, false,
     "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n<arg_key>days</arg_key>\n"
     "<arg_value>three</arg_value>\n</tool_call>"},
    {"glm45", NULL, false, false,
     "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n<arg_key>unit</arg_key>\n"
     "<arg_value>kelvin</arg_value>\n</tool_call>"},
    {"glm45", NULL, true, true,
     "<tool_call>search\n<arg_key>query</arg_key>\n<arg_value>a\nb</arg_value>\n<arg_key>exact</arg_key>\n"
     "<arg_value>false</arg_value>\n</tool_call>\n<tool_call>get_weather\n<arg_key>city</arg_key>\n"
     "<arg_value>Rome</arg_value>\n</tool_call>",
     {"search", "get_weather"}, {"{\"query\":\"a\\nb\",\"exact\":false}", "{\"city\":\"Rome\"}"}},
    {"glm47", NULL, false, true,
     "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value><arg_key>days</arg_key>"
     "<arg_value>2</arg_value></tool_call>",
     {"get_weather"}, {"{\"city\":\"Paris\",\"days\":2}"}},
    {"glm47", NULL, false, false, "<tool_call>get_weather<arg_key>days</arg_key><arg_value>2</arg_value></tool_call>"},
    /* DeepSeek */
    {"deepseek_v3", NULL, false, true,
     "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Paris\"}\n```"
     "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
     {"get_weather"}, {"{\"city\":\"Paris\"}"}},
    {"deepseek_v31", NULL, true, true,
     "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Paris\"}<｜tool▁call▁end｜>"
     "<｜tool▁call▁begin｜>search<｜tool▁sep｜>{\"query\": \"x\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
     {"get_weather", "search"}, {"{\"city\":\"Paris\"}", "{\"query\":\"x\"}"}},
    {"deepseek_v31", NULL, false, false,
     "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": 5}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
    {"deepseek_v32", NULL, false, true,
     "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">"
     "Paris</｜DSML｜parameter>\n<｜DSML｜parameter name=\"days\" string=\"false\">4</｜DSML｜parameter>\n"
     "</｜DSML｜invoke>\n</｜DSML｜function_calls>",
     {"get_weather"}, {"{\"city\":\"Paris\",\"days\":4}"}},
    {"deepseek_v32", NULL, false, false,
     "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">"
     "Paris</｜DSML｜parameter>\n<｜DSML｜parameter name=\"days\" string=\"false\">x</｜DSML｜parameter>\n"
     "</｜DSML｜invoke>\n</｜DSML｜function_calls>"},
    /* Llama, Mistral, Kimi, harmony */
    {"llama3_json", NULL, true, true,
     "{\"name\": \"search\", \"parameters\": {\"query\": \"a\"}}; {\"name\": \"get_weather\", \"parameters\": "
     "{\"city\": \"b\"}}",
     {"search", "get_weather"}, {"{\"query\":\"a\"}", "{\"city\":\"b\"}"}},
    {"llama3_json", NULL, false, false, "{\"name\": \"search\", \"parameters\": {\"query\": 1}}"},
    {"mistral", NULL, false, true, "[TOOL_CALLS][{\"name\": \"search\", \"arguments\": {\"query\": \"a\"}}]", {"search"},
     {"{\"query\":\"a\"}"}},
    {"mistral", NULL, true, true, "[TOOL_CALLS]search[ARGS]{\"query\": \"a\"}[TOOL_CALLS]get_weather[ARGS]{\"city\": \"c\"}",
     {"search", "get_weather"}, {"{\"query\":\"a\"}", "{\"city\":\"c\"}"}},
    {"mistral", NULL, false, false, "[TOOL_CALLS]search[ARGS]{\"query\": \"a\"}[TOOL_CALLS]search[ARGS]{\"query\": \"b\"}"},
    {"kimi_k2", NULL, false, true,
     "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
     "{\"city\": \"Beijing\"}<|tool_call_end|><|tool_calls_section_end|>",
     {"get_weather"}, {"{\"city\":\"Beijing\"}"}},
    {"harmony", NULL, true, true,
     "<|channel|>commentary to=functions.search <|constrain|>json<|message|>{\"query\": \"x\"}<|call|>", {"search"},
     {"{\"query\":\"x\"}"}},
    {"harmony", NULL, false, false,
     "<|channel|>commentary to=functions.search <|constrain|>json<|message|>{\"query\": true}<|call|>"},
};

/* GLM writes string values unquoted: the grammar still holds them to the
 * schema's maxLength, const and anchored pattern (a forced call once ran a
 * maxLength-8 city to max_tokens), and refuses what raw text cannot hold. */
static void raw_accepts(const char *params, const char *value, bool want)
{
    char tj[1024], text[512];
    snprintf(tj, sizeof tj, "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\","
             "\"properties\":{\"a\":%s},\"required\":[\"a\"]}}}]", params);
    snprintf(text, sizeof text, "<tool_call>f<arg_key>a</arg_key><arg_value>%s</arg_value></tool_call>", value);
    sy_tools *t = NULL;
    sy_err err = {{0}};
    CHECK(sy_tools_parse(tj, &t, &err) == SY_OK);
    sy_gsrc *src = sy_gsrc_new();
    sy_grammar *g = NULL;
    CHECK(sy_tool_family_grammar(sy_tool_family_by_name("glm47"), t, NULL, false, src, &err) == SY_OK);
    CHECK(sy_grammar_compile(src, "root", &g, &err) == SY_OK);
    bool got = g && sy_grammar_accepts(g, text, strlen(text));
    CHECK(got == want);
    if (got != want)
        fprintf(stderr, "  %s with %s: expected %s\n", value, params, want ? "accepted" : "rejected");
    sy_grammar_free(g);
    sy_gsrc_free(src);
    sy_tools_free(t);
}

static void raw_refused(const char *params, const char *what)
{
    char tj[1024];
    snprintf(tj, sizeof tj, "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\","
             "\"properties\":{\"a\":%s}}}}]", params);
    sy_tools *t = NULL;
    sy_err err = {{0}};
    CHECK(sy_tools_parse(tj, &t, &err) == SY_OK);
    sy_gsrc *src = sy_gsrc_new();
    CHECK(sy_tool_family_grammar(sy_tool_family_by_name("glm47"), t, NULL, false, src, &err) == SY_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "tools[0].function.parameters.properties.a");
    CHECK_CONTAINS(err.msg, what);
    sy_gsrc_free(src);
    sy_tools_free(t);
}

static void test_raw_strings(void)
{
    const char *len = "{\"type\":\"string\",\"minLength\":2,\"maxLength\":4}";
    raw_accepts(len, "ab", true);
    raw_accepts(len, "\xe6\x9d\xb1\xe4\xba\xac\xe9\x83\xbd", true); /* three characters */
    raw_accepts(len, "abcd", true);
    raw_accepts(len, "a", false);
    raw_accepts(len, "abcde", false);
    raw_accepts("{\"type\":\"string\",\"const\":\"x y\"}", "x y", true);
    raw_accepts("{\"type\":\"string\",\"const\":\"x y\"}", "x", false);
    raw_accepts("{\"type\":\"string\",\"pattern\":\"^[0-9]{2}-[a-z]+$\"}", "12-ab", true);
    raw_accepts("{\"type\":\"string\",\"pattern\":\"^[0-9]{2}-[a-z]+$\"}", "1-ab", false);
    raw_accepts("{\"type\":\"string\",\"description\":\"free\"}", "any <b>text</b>", true);
    raw_refused("{\"type\":\"string\",\"pattern\":\"[0-9]\"}", "pattern");
    raw_refused("{\"type\":\"string\",\"format\":\"date\"}", "format");
    raw_refused("{\"type\":\"string\",\"maxLength\":5000}", "maxLength");
}

static void parse_back(const gcase *c, const sy_tools *tools)
{
    sy_tool_parser *p;
    sy_err err;
    sy_tool_out o = {0};
    CHECK(sy_tool_parser_new(sy_tool_family_by_name(c->family), tools, 3, &p, &err) == 0);
    CHECK(sy_tool_parser_push(p, c->text, strlen(c->text), false, true, &o, &err) == 0);
    CHECK(o.content.len == 0);
    sy_buf args[3] = {{0}};
    const char *names[3] = {0};
    for (size_t i = 0; i < o.n_deltas; i++) {
        int k = o.deltas[i].index;
        if (k < 0 || k >= 3)
            continue;
        if (o.deltas[i].name)
            names[k] = o.deltas[i].name;
        sy_buf_append(&args[k], o.deltas[i].arguments, o.deltas[i].arguments_len);
    }
    for (int k = 0; k < 3; k++) {
        CHECK((names[k] == NULL) == (c->names[k] == NULL));
        if (names[k] && c->names[k]) {
            CHECK(!strcmp(names[k], c->names[k]));
            json_t *a = json_loadb(args[k].p, args[k].len, 0, NULL), *b = json_loads(c->args[k], 0, NULL);
            bool eq = a && json_equal(a, b);
            if (!eq)
                fprintf(stderr, "  %s: read %.*s, expected %s\n", c->family, (int)args[k].len, args[k].p, c->args[k]);
            CHECK(eq);
            json_decref(a);
            json_decref(b);
        }
        sy_buf_free(&args[k]);
    }
    sy_tool_out_fini(&o);
    sy_tool_parser_free(p);
}

/* The markers are special tokens in the model's vocabulary: the grammar must admit those tokens where the markup goes. */
static void test_special_tokens(const sy_tools *tools)
{
    enum { N = 259, CALL = 256, END = 257, IM_END = 258 };
    char bytes[256];
    const char *tok[N];
    size_t lens[N];
    bool special[N];
    for (int i = 0; i < 256; i++) {
        bytes[i] = (char)i;
        tok[i] = &bytes[i];
        lens[i] = 1;
        special[i] = false;
    }
    tok[CALL] = "<tool_call>", tok[END] = "</tool_call>", tok[IM_END] = "<|im_end|>";
    for (int i = CALL; i < N; i++) {
        lens[i] = strlen(tok[i]);
        special[i] = true;
    }
    const int32_t eos[] = {IM_END};
    sy_gvocab *v = NULL;
    sy_err err;
    CHECK(sy_gvocab_new(N, tok, lens, special, eos, 1, &v, &err) == 0);
    sy_gsrc *src = sy_gsrc_new();
    sy_grammar *g = NULL;
    CHECK(sy_tool_family_grammar(sy_tool_family_by_name("hermes"), tools, "search", false, src, &err) == 0);
    CHECK(sy_grammar_compile(src, "root", &g, &err) == 0);
    sy_gmatcher *m = NULL;
    if (v && g)
        CHECK(sy_gmatcher_new(g, v, &m, &err) == 0);
    if (m) {
        uint32_t mask[(N + 31) / 32];
#define ALLOWED(t) ((mask[(t) / 32] >> ((t) % 32)) & 1u)
        CHECK(sy_gmatcher_fill_mask(m, mask, &err) == 0);
        CHECK(ALLOWED(CALL));
        CHECK(ALLOWED('<'));   /* the tag spelt by ordinary tokens is text the parser reads too */
        CHECK(!ALLOWED('S'));  /* nothing before the call */
        CHECK(!ALLOWED(IM_END));
        CHECK(sy_gmatcher_accept_token(m, CALL, &err) == 0);
        const char *body = "\n{\"name\": \"search\", \"arguments\": {\"query\": \"<tool_call>\"}}\n";
        CHECK(sy_gmatcher_accept_bytes(m, body, strlen(body)));
        CHECK(sy_gmatcher_fill_mask(m, mask, &err) == 0);
        CHECK(ALLOWED(END));
        CHECK(!ALLOWED(CALL));
        CHECK(sy_gmatcher_accept_token(m, END, &err) == 0);
        CHECK(sy_gmatcher_can_end(m));
        CHECK(sy_gmatcher_fill_mask(m, mask, &err) == 0);
        CHECK(ALLOWED(IM_END));
#undef ALLOWED
    }
    sy_gmatcher_free(m);
    sy_grammar_free(g);
    sy_gsrc_free(src);
    sy_gvocab_free(v);
}

int main(void)
{
    sy_tools *tools;
    sy_err err;
    if (sy_tools_parse(TOOLS, &tools, &err)) {
        fprintf(stderr, "tools: %s\n", err.msg);
        return 1;
    }
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        const gcase *c = &CASES[i];
        sy_gsrc *src = sy_gsrc_new();
        sy_grammar *g = NULL;
        int rc = sy_tool_family_grammar(sy_tool_family_by_name(c->family), tools, c->only, c->parallel, src, &err);
        if (rc == 0)
            rc = sy_grammar_compile(src, "root", &g, &err);
        if (rc) {
            char *dump = sy_gsrc_dump(src);
            fprintf(stderr, "case %zu (%s): %s\n%s\n", i, c->family, err.msg, dump ? dump : "");
            free(dump);
        }
        CHECK(rc == 0);
        if (g) {
            bool acc = sy_grammar_accepts(g, c->text, strlen(c->text));
            if (acc != c->accept)
                fprintf(stderr, "case %zu (%s): expected the grammar to %s:\n%s\n", i, c->family,
                        c->accept ? "accept" : "reject", c->text);
            CHECK(acc == c->accept);
            if (c->accept)
                parse_back(c, tools);
        }
        sy_grammar_free(g);
        sy_gsrc_free(src);
    }
    test_special_tokens(tools);
    /* errors name what is wrong */
    sy_gsrc *src = sy_gsrc_new();
    CHECK(sy_tool_family_grammar(sy_tool_family_by_name("hermes"), tools, "nope", false, src, &err) == SY_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "tool_choice.function.name");
    sy_gsrc_free(src);
    /* a keyword the schema compiler cannot enforce is an error under the tool's path */
    sy_tools *bad;
    CHECK(sy_tools_parse("[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\","
                         "\"properties\":{\"a\":{\"$ref\":\"http://example.com/s.json\"}}}}}]",
                         &bad, &err) == 0);
    const char *fams[] = {"hermes", "glm45"};
    for (int k = 0; k < 2; k++) {
        src = sy_gsrc_new();
        err.msg[0] = 0;
        CHECK(sy_tool_family_grammar(sy_tool_family_by_name(fams[k]), bad, NULL, false, src, &err) == SY_ERR_INVALID);
        CHECK_CONTAINS(err.msg, "tools[0].function.parameters");
        CHECK_CONTAINS(err.msg, "$ref");
        sy_gsrc_free(src);
    }
    sy_tools_free(bad);
    test_raw_strings();
    sy_tools_free(tools);
    return sy_test_done("test_toolcall_grammar");
}
