/*
 * The grammar source builders (core/grammar: JSON schema, regex, choice,
 * text_until, any JSON): which texts each grammar accepts and rejects, and
 * the 400 messages for what constrained decoding cannot enforce.
 * tests/unit/test_grammar_oracle.c checks random outputs against the
 * python jsonschema package.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"
#include "test_check.h"

static sy_grammar *build(int (*add)(sy_gsrc *, const void *, sy_err *), const void *arg, sy_err *err)
{
    sy_gsrc *src = sy_gsrc_new();
    sy_grammar *g = NULL;
    if (!src || add(src, arg, err) != SY_OK || sy_grammar_compile(src, "root", &g, err) != SY_OK)
        g = NULL;
    if (!g && src) {
        char *dump = sy_gsrc_dump(src);
        if (dump && *dump && getenv("SY_TEST_VERBOSE"))
            fprintf(stderr, "grammar was:\n%s\n", dump);
        free(dump);
    }
    sy_gsrc_free(src);
    return g;
}

typedef struct schema_arg {
    const char *schema;
    unsigned flags;
} schema_arg;

static int add_schema(sy_gsrc *src, const void *arg, sy_err *err)
{
    const schema_arg *a = arg;
    return sy_gsrc_add_json_schema_flags(src, "root", a->schema, "schema", a->flags, err);
}

static sy_grammar *schema_grammar(const char *schema, unsigned flags)
{
    sy_err err = {{0}};
    schema_arg a = {schema, flags};
    sy_grammar *g = build(add_schema, &a, &err);
    if (!g)
        fprintf(stderr, "schema %s: %s\n", schema, err.msg);
    return g;
}

static int add_regex(sy_gsrc *src, const void *arg, sy_err *err)
{
    return sy_gsrc_add_regex(src, "root", arg, "regex", err);
}

static bool accepts(const sy_grammar *g, const char *text) { return g && sy_grammar_accepts(g, text, strlen(text)); }

#define EXPECT(g, text, want)                                                                             \
    do {                                                                                                  \
        bool got_ = accepts((g), (text));                                                                 \
        sy_test_checks++;                                                                                 \
        if (got_ != (want)) {                                                                             \
            sy_test_failures++;                                                                           \
            fprintf(stderr, "%s:%d: %s should be %s\n", __FILE__, __LINE__, (text),                       \
                    (want) ? "accepted" : "rejected");                                                    \
        }                                                                                                 \
    } while (0)

/* Runs the table: texts[i] expected accepted while i < n_ok, rejected after. */
static void expect_schema(const char *schema, unsigned flags, const char *const *ok, const char *const *bad)
{
    sy_grammar *g = schema_grammar(schema, flags);
    CHECK(g != NULL);
    for (size_t i = 0; ok && ok[i]; i++)
        EXPECT(g, ok[i], true);
    for (size_t i = 0; bad && bad[i]; i++)
        EXPECT(g, bad[i], false);
    sy_grammar_free(g);
}

static void test_objects(void)
{
    const char *schema = "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
                         "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":150},"
                         "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}}},\"required\":[\"name\"]}";
    const char *ok[] = {"{\"name\":\"x\"}", "{\"name\": \"x\", \"age\": 30}", "{\"name\":\"x\",\"age\":150}",
                        "{\"name\":\"\\u00e9\\\"\",\"tags\":[]}", "{\"name\":\"a\",\"age\":0,\"tags\":[\"p\", \"q\"]}",
                        NULL};
    const char *bad[] = {"{\"age\":3,\"name\":\"x\"}",   /* declared order */
                         "{\"name\":\"x\",\"age\":151}", "{\"name\":\"x\",\"age\":-1}", "{}",
                         "{\"name\":\"x\",\"extra\":1}", /* no additionalProperties: declared only */
                         "{\"name\":\"x\"} ", "{\"name\" : \"x\"}", "{\"name\":  \"x\"}", "{ \"name\":\"x\"}",
                         "{\"name\":\"x\",}", "{\"name\":\"a\nb\"}", "{\"name\":\"x\",\"age\":01}", NULL};
    expect_schema(schema, 0, ok, bad);

    const char *ok_extra[] = {"{\"name\":\"x\",\"extra\":1}", "{\"name\":\"x\",\"age\":2,\"n\":{\"a\":[1]},\"z\":null}",
                              "{\"name\":\"x\",\"names\":true}", NULL};
    const char *bad_extra[] = {"{\"name\":\"x\",\"name\":\"y\"}", "{\"name\":\"x\",\"age\":\"old\"}",
                               "{\"name\":\"x\",\"n\\u0061me\":1}", NULL};
    expect_schema(schema, SY_JSON_SCHEMA_ALLOW_EXTRA, ok_extra, bad_extra);

    /* additionalProperties as a schema, and false with the flag. */
    const char *ok_ap[] = {"{\"id\":1}", "{\"id\":1,\"x\":\"s\",\"y\":\"t\"}", "{\"x\":\"s\"}", "{}", NULL};
    const char *bad_ap[] = {"{\"id\":1,\"x\":2}", "{\"id\":1,\"id\":2}", NULL};
    expect_schema("{\"properties\":{\"id\":{\"type\":\"integer\"}},\"additionalProperties\":{\"type\":\"string\"}}", 0,
                  ok_ap, bad_ap);
    const char *bad_false[] = {"{\"id\":1,\"x\":\"s\"}", NULL};
    expect_schema("{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"}},\"additionalProperties\":false}",
                  SY_JSON_SCHEMA_ALLOW_EXTRA, (const char *[]){"{\"id\":1}", "{}", NULL}, bad_false);

    /* All optional, several: any subset in order. */
    const char *ok_opt[] = {"{}", "{\"a\":1}", "{\"c\":3}", "{\"a\":1,\"c\":3}", "{\"b\":2, \"c\":3}",
                            "{\"a\":1,\"b\":2,\"c\":3}", NULL};
    const char *bad_opt[] = {"{,\"a\":1}", "{\"a\":1,,\"c\":3}", "{\"c\":3,\"a\":1}", "{\"a\":1\"b\":2}", NULL};
    expect_schema("{\"properties\":{\"a\":{\"const\":1},\"b\":{\"const\":2},\"c\":{\"const\":3}}}", 0, ok_opt,
                  bad_opt);
    /* Required in the middle; a required name not in properties. */
    expect_schema("{\"properties\":{\"a\":{\"const\":1},\"b\":{\"const\":2},\"c\":{\"const\":3}},\"required\":[\"b\"]}",
                  0, (const char *[]){"{\"b\":2}", "{\"a\":1,\"b\":2}", "{\"b\":2,\"c\":3}", NULL},
                  (const char *[]){"{}", "{\"a\":1}", "{\"a\":1,\"c\":3}", NULL});
    expect_schema("{\"type\":\"object\",\"required\":[\"q\"]}", 0,
                  (const char *[]){"{\"q\":[1,{\"r\":null}]}", NULL}, (const char *[]){"{}", "{\"r\":1}", NULL});
    /* Every value kind after an optional property (alternatives stay grouped). */
    expect_schema("{\"properties\":{\"a\":{\"type\":\"boolean\"},\"b\":{\"anyOf\":[{\"type\":\"null\"},{\"const\":2}]},"
                  "\"c\":{\"type\":[\"integer\",\"string\"]}},\"required\":[\"c\"]}",
                  0, (const char *[]){"{\"a\":true,\"c\":1}", "{\"b\":2,\"c\":\"s\"}", "{\"a\":false,\"b\":null,\"c\":3}", NULL},
                  (const char *[]){"{\"a\":true}", "{\"a\":false,\"c\":true}", "{\"a\":true,\"b\":false,\"c\":1}",
                                   "{\"c\":\"s\",\"a\":true}", NULL});
    /* Property names that need escapes. */
    expect_schema("{\"properties\":{\"a\\\"b\":{\"type\":\"null\"},\"\\u00e9\":{\"type\":\"boolean\"}},"
                  "\"required\":[\"a\\\"b\",\"\\u00e9\"]}",
                  0, (const char *[]){"{\"a\\\"b\":null,\"\xc3\xa9\":true}", NULL},
                  (const char *[]){"{\"ab\":null,\"\xc3\xa9\":true}", NULL});
}

static void test_scalars(void)
{
    expect_schema("{\"enum\":[\"a\",1,null,{\"k\":[1,2]},\"q\\\"\"]}", 0,
                  (const char *[]){"\"a\"", "1", "null", "{\"k\":[1,2]}", "\"q\\\"\"", NULL},
                  (const char *[]){"\"b\"", "2", "{\"k\":[1, 2]}", "\"a\" ", NULL});
    expect_schema("{\"type\":\"string\",\"enum\":[\"a\",1]}", 0, (const char *[]){"\"a\"", NULL},
                  (const char *[]){"1", NULL});
    expect_schema("{\"const\":\"fixed\"}", 0, (const char *[]){"\"fixed\"", NULL}, (const char *[]){"\"f\"", NULL});
    expect_schema("{\"type\":[\"string\",\"null\"]}", 0, (const char *[]){"\"s\"", "null", NULL},
                  (const char *[]){"1", "nul", NULL});
    expect_schema("{\"type\":\"integer\",\"nullable\":true}", 0, (const char *[]){"-3", "null", NULL},
                  (const char *[]){"1.5", NULL});
    expect_schema("{\"type\":\"boolean\"}", 0, (const char *[]){"true", "false", NULL},
                  (const char *[]){"1", "True", NULL});
    expect_schema("{\"type\":\"number\"}", 0, (const char *[]){"0", "-0.5", "1e10", "2.5E-3", "-12", NULL},
                  (const char *[]){"01", ".5", "1.", "+1", "1e", "--1", NULL});
    expect_schema("{\"type\":\"number\",\"minimum\":-5,\"maximum\":10}", 0,
                  (const char *[]){"10", "10.0", "10.000", "-5", "-5.0", "-4.99", "3.14", "0", "-0.5", NULL},
                  (const char *[]){"10.01", "-5.1", "1e2", "11", "-6", NULL});
    /* Exclusive bounds on numbers: the end itself only with a non-zero fraction. */
    expect_schema("{\"type\":\"number\",\"exclusiveMinimum\":0}", 0,
                  (const char *[]){"0.5", "0.001", "1", "12.0", NULL}, (const char *[]){"0", "0.000", "-0.5", "-1", NULL});
    expect_schema("{\"type\":\"number\",\"exclusiveMinimum\":-2,\"exclusiveMaximum\":3}", 0,
                  (const char *[]){"-1.99", "-0", "0", "2.999", "-1", NULL},
                  (const char *[]){"-2", "-2.0", "3", "3.0", "3.01", "-2.5", NULL});
    expect_schema("{\"type\":\"number\",\"minimum\":-7,\"exclusiveMaximum\":-1}", 0,
                  (const char *[]){"-7", "-7.00", "-1.01", "-6.5", NULL}, (const char *[]){"-1", "-1.0", "-7.5", "0", NULL});
    expect_schema("{\"type\":\"number\",\"exclusiveMaximum\":0,\"minimum\":-1,\"exclusiveMinimum\":-1}", 0,
                  (const char *[]){"-0.5", NULL}, (const char *[]){"-1", "0", "-0.0", NULL});
    expect_schema("{\"type\":\"number\",\"minimum\":2}", 0, (const char *[]){"2", "2.5", "1000.25", NULL},
                  (const char *[]){"1.99", "-3", NULL});
    expect_schema("{\"type\":\"integer\",\"exclusiveMinimum\":0,\"exclusiveMaximum\":10}", 0,
                  (const char *[]){"1", "9", NULL}, (const char *[]){"0", "10", NULL});
    expect_schema("{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", 0,
                  (const char *[]){"\"ab\"", "\"abc\"", "\"\xc3\xa9\xc3\xa9\"", "\"\\n\\t\"", "\"\\ud83d\\ude00x\"",
                                   "\"\\u00e9\\u00e9\"", NULL},
                  (const char *[]){"\"a\"", "\"abcd\"", "\"\\ud83d\"", "\"\\ud83dx\"", NULL});
    expect_schema("{\"type\":\"string\",\"maxLength\":0}", 0, (const char *[]){"\"\"", NULL},
                  (const char *[]){"\"a\"", NULL});
    /* Digits are bounded, or a random-weight model writes one number until
     * max_tokens (seen from the server: "score": 8030020002000...). */
    expect_schema("{\"type\":\"integer\"}", 0, (const char *[]){"1234567890123456", "-1234567890123456", NULL},
                  (const char *[]){"12345678901234567", NULL});
    expect_schema("{\"type\":\"number\"}", 0,
                  (const char *[]){"1234567890123456.1234567890123456", "1e308", "-2.5E-123", NULL},
                  (const char *[]){"12345678901234567", "1.12345678901234567", "1e1000", NULL});
    expect_schema("{\"type\":\"integer\",\"minimum\":5}", 0, (const char *[]){"5", "1234567890123456", NULL},
                  (const char *[]){"12345678901234567", NULL});
    expect_schema("{\"type\":\"number\",\"minimum\":0}", 0, (const char *[]){"0.1234567890123456", NULL},
                  (const char *[]){"0.12345678901234567", NULL});
}

static void test_integer_ranges(void)
{
    /* Every bound shape against every value in a window, and the JSON
     * spellings that are never integers. */
    static const long bounds[][2] = {{0, 0},     {0, 9},       {0, 10},   {1, 99},    {7, 123},   {-5, 5},
                                     {-100, -3}, {-1, 0},      {-9, 17},  {99, 101},  {150, 250}, {-250, -150},
                                     {10, 999},  {-1000, 1000}, {5, 5},   {-7, -7},   {19, 2001}};
    char text[32];
    for (size_t b = 0; b < sizeof bounds / sizeof bounds[0]; b++) {
        for (int side = 0; side < 3; side++) {
            char schema[160];
            bool lo = side != 2, hi = side != 1;
            int len = snprintf(schema, sizeof schema, "{\"type\":\"integer\"");
            if (lo)
                len += snprintf(schema + len, sizeof schema - (size_t)len, ",\"minimum\":%ld", bounds[b][0]);
            if (hi)
                len += snprintf(schema + len, sizeof schema - (size_t)len, ",\"maximum\":%ld", bounds[b][1]);
            snprintf(schema + len, sizeof schema - (size_t)len, "}");
            sy_grammar *g = schema_grammar(schema, 0);
            CHECK(g != NULL);
            if (!g)
                continue;
            int wrong = 0;
            for (long v = -1200; v <= 2100; v++) {
                snprintf(text, sizeof text, "%ld", v);
                bool want = (!lo || v >= bounds[b][0]) && (!hi || v <= bounds[b][1]);
                if (accepts(g, text) != want && wrong++ < 3)
                    fprintf(stderr, "%s: %ld should be %s\n", schema, v, want ? "accepted" : "rejected");
            }
            CHECK(wrong == 0);
            EXPECT(g, "-0", false);
            EXPECT(g, "007", false);
            EXPECT(g, "1.0", false);
            sy_grammar_free(g);
        }
    }
    /* Far bounds: digit counts beyond the window. */
    sy_grammar *g = schema_grammar("{\"type\":\"integer\",\"minimum\":-9007199254740991,\"maximum\":9007199254740991}", 0);
    EXPECT(g, "9007199254740991", true);
    EXPECT(g, "9007199254740992", false);
    EXPECT(g, "-9007199254740991", true);
    EXPECT(g, "-19007199254740991", false);
    EXPECT(g, "12345678901234", true);
    sy_grammar_free(g);
}

static void test_number_ranges(void)
{
    /* Quarter steps in [-6, 6] (with ".0" spellings of the integers)
     * against every mix of open, closed and absent ends. */
    static const long ends[] = {-3, 0, 2};
    static const char *const frac[] = {"", ".25", ".5", ".75"};
    for (int li = 0; li < 4; li++)
        for (int hi_i = 0; hi_i < 4; hi_i++)
            for (int open = 0; open < 4; open++) {
                bool has_lo = li < 3, has_hi = hi_i < 3, lo_open = open & 1, hi_open = open & 2;
                if ((!has_lo && lo_open) || (!has_hi && hi_open) || (!has_lo && !has_hi))
                    continue;
                long lo = has_lo ? ends[li] : 0, hi = has_hi ? ends[hi_i] : 0;
                if (has_lo && has_hi && (lo > hi || (lo == hi && open)))
                    continue;
                char schema[160];
                int len = snprintf(schema, sizeof schema, "{\"type\":\"number\"");
                if (has_lo)
                    len += snprintf(schema + len, sizeof schema - (size_t)len, ",\"%s\":%ld",
                                    lo_open ? "exclusiveMinimum" : "minimum", lo);
                if (has_hi)
                    len += snprintf(schema + len, sizeof schema - (size_t)len, ",\"%s\":%ld",
                                    hi_open ? "exclusiveMaximum" : "maximum", hi);
                snprintf(schema + len, sizeof schema - (size_t)len, "}");
                sy_grammar *g = schema_grammar(schema, 0);
                CHECK(g != NULL);
                if (!g)
                    continue;
                int wrong = 0;
                for (long q = -24; q <= 24; q++) {
                    long a = q < 0 ? -q : q;
                    for (int zero = 0; zero < 2; zero++) {
                        if (zero && a % 4)
                            continue;
                        char text[32];
                        snprintf(text, sizeof text, "%s%ld%s", q < 0 ? "-" : "", a / 4, zero ? ".0" : frac[a % 4]);
                        bool want = (!has_lo || (lo_open ? q > 4 * lo : q >= 4 * lo)) &&
                                    (!has_hi || (hi_open ? q < 4 * hi : q <= 4 * hi));
                        if (accepts(g, text) != want && wrong++ < 3)
                            fprintf(stderr, "%s: %s should be %s\n", schema, text, want ? "accepted" : "rejected");
                    }
                }
                CHECK(wrong == 0);
                sy_grammar_free(g);
            }
}

static void test_arrays(void)
{
    expect_schema("{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":2,\"maxItems\":3}", 0,
                  (const char *[]){"[1,2]", "[1, 2, 3]", NULL},
                  (const char *[]){"[1]", "[1,2,3,4]", "[]", "[1,\"a\"]", "[ 1,2]", "[1,2 ]", NULL});
    expect_schema("{\"prefixItems\":[{\"type\":\"string\"},{\"type\":\"boolean\"}],\"items\":false}", 0,
                  (const char *[]){"[\"a\",true]", "[\"a\"]", "[]", NULL},
                  (const char *[]){"[\"a\",true,1]", "[true]", NULL});
    expect_schema("{\"prefixItems\":[{\"const\":1}],\"items\":{\"type\":\"string\"},\"minItems\":2}", 0,
                  (const char *[]){"[1,\"a\"]", "[1,\"a\",\"b\"]", NULL},
                  (const char *[]){"[1]", "[1,2]", "[\"a\",\"b\"]", NULL});
    expect_schema("{\"type\":\"array\"}", 0, (const char *[]){"[]", "[1,{\"a\":[null]},\"x\"]", NULL},
                  (const char *[]){"[1,]", "[,]", NULL});
    expect_schema("{\"type\":\"array\",\"maxItems\":0}", 0, (const char *[]){"[]", NULL},
                  (const char *[]){"[1]", NULL});
}

static void test_refs_and_unions(void)
{
    const char *tree = "{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},"
                       "\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/node\"}}},\"required\":[\"v\"]}},"
                       "\"$ref\":\"#/$defs/node\"}";
    expect_schema(tree, 0,
                  (const char *[]){"{\"v\":1}", "{\"v\":1,\"kids\":[{\"v\":2},{\"v\":3,\"kids\":[{\"v\":4}]}]}", NULL},
                  (const char *[]){"{\"v\":1,\"kids\":[{}]}", "{\"kids\":[]}", NULL});
    expect_schema("{\"definitions\":{\"a\":{\"type\":\"string\"}},\"type\":\"object\",\"properties\":{\"x\":"
                  "{\"$ref\":\"#/definitions/a\"},\"y\":{\"$ref\":\"#/definitions/a\",\"description\":\"d\"}}}",
                  0, (const char *[]){"{\"x\":\"1\",\"y\":\"2\"}", NULL}, (const char *[]){"{\"x\":1}", NULL});
    expect_schema("{\"type\":\"object\",\"properties\":{\"next\":{\"$ref\":\"#\"}}}", 0,
                  (const char *[]){"{}", "{\"next\":{\"next\":{}}}", NULL}, (const char *[]){"{\"next\":1}", NULL});
    expect_schema("{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"null\"}],\"default\":null,\"title\":\"T\"}", 0,
                  (const char *[]){"1", "null", NULL}, (const char *[]){"\"1\"", NULL});
    expect_schema("{\"oneOf\":[{\"type\":\"string\",\"maxLength\":1},{\"type\":\"array\",\"items\":{\"type\":"
                  "\"integer\"}}]}",
                  0, (const char *[]){"\"a\"", "[1,2]", NULL}, (const char *[]){"\"ab\"", "[\"a\"]", NULL});
    expect_schema("{\"allOf\":[{\"type\":\"boolean\"}]}", 0, (const char *[]){"true", NULL},
                  (const char *[]){"1", NULL});
    /* Pointer escapes: ~1 is '/', ~0 is '~'. */
    expect_schema("{\"$defs\":{\"a/b\":{\"const\":1},\"c~d\":{\"const\":2}},\"type\":\"array\",\"prefixItems\":"
                  "[{\"$ref\":\"#/$defs/a~1b\"},{\"$ref\":\"#/$defs/c~0d\"}]}",
                  0, (const char *[]){"[1,2]", NULL}, (const char *[]){"[2,1]", NULL});
}

static void test_strings(void)
{
    expect_schema("{\"type\":\"string\",\"pattern\":\"ab+c\"}", 0,
                  (const char *[]){"\"xxabbcyy\"", "\"abc\"", "\"\\n abc\"", NULL},
                  (const char *[]){"\"ac\"", "\"xyz\"", NULL});
    expect_schema("{\"type\":\"string\",\"pattern\":\"^ab+c$\"}", 0, (const char *[]){"\"abbbc\"", NULL},
                  (const char *[]){"\"xabc\"", "\"abcx\"", NULL});
    expect_schema("{\"type\":\"string\",\"pattern\":\"^ab\"}", 0, (const char *[]){"\"abzz\"", "\"ab\"", NULL},
                  (const char *[]){"\"zab\"", NULL});
    expect_schema("{\"type\":\"string\",\"pattern\":\"z$|^q\"}", 0,
                  (const char *[]){"\"aaz\"", "\"qa\"", NULL}, (const char *[]){"\"za\"", "\"aq\"", NULL});
    expect_schema("{\"type\":\"string\",\"pattern\":\"^[a-z]+\\\\.json$\"}", 0,
                  (const char *[]){"\"file.json\"", NULL}, (const char *[]){"\"filexjson\"", "\"F.json\"", NULL});
    /* Characters JSON must escape, matched through their escapes. */
    expect_schema("{\"type\":\"string\",\"pattern\":\"^\\\"[\\\\\\\\n]\\\\d{2}\\\\s$\"}", 0,
                  (const char *[]){"\"\\\"\\\\12\\t\"", "\"\\\"n34 \"", NULL},
                  (const char *[]){"\"\"\\\\12 \"", "\"\\\"x12 \"", NULL});
    expect_schema("{\"type\":\"string\",\"pattern\":\"^(?:ab|cd){2,3}?x?$\"}", 0,
                  (const char *[]){"\"abcd\"", "\"cdcdabx\"", NULL},
                  (const char *[]){"\"ab\"", "\"abababab\"", NULL});
    expect_schema("{\"type\":\"string\",\"pattern\":\"^[^a-c]\\\\W.$\"}", 0,
                  (const char *[]){"\"d!\xc3\xa9\"", NULL}, (const char *[]){"\"a!x\"", "\"dxx\"", "\"d!\\n\"", NULL});
    /* A pattern that is one repeated class meets minLength/maxLength. */
    expect_schema("{\"type\":\"string\",\"pattern\":\"^[a-z_]+$\",\"maxLength\":3}", 0,
                  (const char *[]){"\"abc\"", "\"_\"", NULL}, (const char *[]){"\"abcd\"", "\"ab1\"", "\"\"", NULL});
    expect_schema("{\"type\":\"string\",\"pattern\":\"^\\\\d{2,6}$\",\"minLength\":3,\"maxLength\":9}", 0,
                  (const char *[]){"\"123\"", "\"123456\"", NULL}, (const char *[]){"\"12\"", "\"1234567\"", NULL});
    expect_schema("{\"type\":\"string\",\"pattern\":\"^[^\\\"]*?$\",\"maxLength\":2}", 0,
                  (const char *[]){"\"\\n\\\\\"", "\"\"", NULL}, (const char *[]){"\"\\\"\"", "\"abc\"", NULL});
    /* Lengths that every string of a format meets are no constraint. */
    expect_schema("{\"type\":\"string\",\"format\":\"uuid\",\"minLength\":36,\"maxLength\":40}", 0,
                  (const char *[]){"\"123e4567-e89b-12d3-a456-426614174000\"", NULL}, NULL);
    expect_schema("{\"type\":\"string\",\"format\":\"date\"}", 0,
                  (const char *[]){"\"2024-02-28\"", "\"1999-12-31\"", "\"0001-01-01\"", NULL},
                  (const char *[]){"\"2024-02-30\"", "\"2024-13-01\"", "\"2024-04-31\"", "\"0000-01-01\"", "\"24-01-01\"",
                                   NULL});
    expect_schema("{\"type\":\"string\",\"format\":\"date-time\"}", 0,
                  (const char *[]){"\"2024-01-02T03:04:05Z\"", "\"2024-01-02T23:59:59.123+05:30\"", NULL},
                  (const char *[]){"\"2024-01-02 03:04:05Z\"", "\"2024-01-02T24:00:00Z\"", "\"2024-01-02T03:04:05\"",
                                   NULL});
    expect_schema("{\"type\":\"string\",\"format\":\"time\"}", 0, (const char *[]){"\"12:00:00-01:00\"", NULL},
                  (const char *[]){"\"12:00\"", NULL});
    expect_schema("{\"type\":\"string\",\"format\":\"uuid\"}", 0,
                  (const char *[]){"\"123e4567-e89b-12d3-a456-426614174000\"", NULL},
                  (const char *[]){"\"123e4567e89b12d3a456426614174000\"", "\"123e4567-e89b-12d3-a456-42661417400g\"", NULL});
    expect_schema("{\"type\":\"string\",\"format\":\"ipv4\"}", 0,
                  (const char *[]){"\"192.168.0.1\"", "\"255.255.255.255\"", "\"0.0.0.0\"", NULL},
                  (const char *[]){"\"256.1.1.1\"", "\"01.1.1.1\"", "\"1.1.1\"", NULL});
    expect_schema("{\"type\":\"string\",\"format\":\"email\"}", 0,
                  (const char *[]){"\"a.b+c@example.com\"", NULL},
                  (const char *[]){"\"a@b\"", "\"@example.com\"", "\"a b@example.com\"", NULL});
}

static void expect_error(const char *schema, const char *want)
{
    sy_gsrc *src = sy_gsrc_new();
    sy_err err = {{0}};
    int rc = sy_gsrc_add_json_schema(src, "root", schema, "response_format.json_schema.schema", &err);
    sy_test_checks++;
    if (rc != SY_ERR_INVALID || !strstr(err.msg, want)) {
        sy_test_failures++;
        fprintf(stderr, "schema %s: expected SY_ERR_INVALID with \"%s\", got %d \"%s\"\n", schema, want, rc, err.msg);
    }
    sy_gsrc_free(src);
}

static void test_errors(void)
{
    expect_error("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\",\"multipleOf\":3}}}",
                 "response_format.json_schema.schema.properties.a.multipleOf: 'multipleOf' is not supported by "
                 "constrained decoding");
    expect_error("{\"type\":\"array\",\"items\":{\"not\":{}}}",
                 "response_format.json_schema.schema.items.not: 'not' is not supported by constrained decoding");
    expect_error("{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"object\",\"minProperties\":1}]}",
                 "response_format.json_schema.schema.anyOf[1].minProperties: 'minProperties' is not supported");
    expect_error("{\"$defs\":{\"x\":{\"if\":{}}},\"$ref\":\"#/$defs/x\"}",
                 "response_format.json_schema.schema.$defs.x.if: 'if' is not supported");
    expect_error("{\"type\":\"array\",\"uniqueItems\":true}", "schema.uniqueItems: 'uniqueItems' is not supported");
    expect_error("{\"patternProperties\":{\"a\":{}}}", "schema.patternProperties: 'patternProperties' is not supported");
    expect_error("{\"type\":\"number\",\"exclusiveMinimum\":0.5}", "schema.exclusiveMinimum: 'exclusiveMinimum' that is "
                                                                   "not an integer");
    expect_error("{\"type\":\"number\",\"exclusiveMinimum\":2,\"maximum\":2}", "no number lies between");
    expect_error("{\"type\":\"number\",\"maximum\":1.5}", "schema.maximum: 'maximum' that is not an integer");
    expect_error("{\"type\":\"string\",\"format\":\"uri\"}", "schema.format: 'uri' is not supported by constrained "
                                                             "decoding (supported: date, time");
    expect_error("{\"type\":\"string\",\"pattern\":\"(a)\\\\1\"}", "schema.pattern: regex /(a)\\1/ at offset 4: "
                                                                   "backreferences are not supported");
    expect_error("{\"type\":\"string\",\"pattern\":\"a(?=b)\"}", "lookahead is not supported");
    expect_error("{\"type\":\"string\",\"pattern\":\"\\\\bx\"}", "word boundaries");
    expect_error("{\"type\":\"string\",\"pattern\":\"a^b\"}", "'^' is supported only at the start");
    expect_error("{\"type\":\"string\",\"pattern\":\"x\",\"maxLength\":3}", "'maxLength' together with 'pattern'");
    expect_error("{\"type\":\"string\",\"pattern\":\"^(ab)+$\",\"maxLength\":3}", "is supported only when the pattern "
                                                                                  "is one repeated class");
    expect_error("{\"type\":\"string\",\"pattern\":\"^a{5}$\",\"maxLength\":3}", "no string matches both");
    expect_error("{\"type\":\"string\",\"format\":\"email\",\"maxLength\":254}",
                 "schema.maxLength: 'maxLength' together with 'format' is supported only when");
    expect_error("{\"type\":\"string\",\"format\":\"date\",\"maxLength\":9}", "'maxLength' together with 'format'");
    expect_error("{\"type\":\"string\",\"format\":\"uri\",\"maxLength\":9}", "schema.format: 'uri' is not supported");
    expect_error("{\"allOf\":[{\"type\":\"string\"},{\"maxLength\":2}]}", "'allOf' with more than one schema");
    expect_error("{\"$ref\":\"https://example.com/s.json\"}", "schema.$ref: '$ref' must be a local reference");
    expect_error("{\"$ref\":\"#/$defs/missing\"}", "'#/$defs/missing' points at nothing");
    expect_error("{\"$ref\":\"#/$defs/a\",\"type\":\"string\",\"$defs\":{\"a\":{}}}",
                 "schema.type: 'type' beside $ref is not supported");
    expect_error("{\"type\":\"strin\"}", "schema.type: expected one of null, boolean");
    expect_error("{\"enum\":[]}", "schema.enum: no value is allowed");
    expect_error("{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}", "no integer lies between");
    expect_error("{\"type\":\"array\",\"minItems\":3,\"maxItems\":2}", "minItems 3 is above maxItems 2");
    expect_error("{\"properties\":{\"a\":false},\"required\":[\"a\"]}", "required but its schema is false");
    expect_error("{\"type\":\"object\",\"required\":[\"z\"],\"additionalProperties\":false}",
                 "'z' is required but additionalProperties is false");
    expect_error("{\"type\":", "schema is not valid JSON");
    expect_error("false", "the schema false allows no value");
    expect_error("{\"type\":\"string\",\"maxLength\":1001}", "schema.maxLength: 'maxLength' more than 1000 above "
                                                                "minLength is not supported");
    expect_error("{\"type\":\"array\",\"minItems\":1,\"maxItems\":1002}", "'maxItems' more than 1000 above minItems");
    expect_error("{\"type\":\"string\",\"minLength\":-1}", "schema.minLength: expected a non-negative integer");
    /* Annotations are accepted and ignored. */
    sy_grammar *g = schema_grammar("{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\",\"$id\":\"x\","
                                   "\"title\":\"t\",\"description\":\"d\",\"default\":1,\"examples\":[1],"
                                   "\"$comment\":\"c\",\"deprecated\":false,\"readOnly\":true,\"type\":\"integer\"}",
                                   0);
    EXPECT(g, "7", true);
    sy_grammar_free(g);
}

static void test_regex_builder(void)
{
    sy_err err = {{0}};
    sy_grammar *g = build(add_regex, "[0-9]{3}-[0-9]{4}", &err);
    CHECK(g != NULL);
    EXPECT(g, "555-1234", true);
    EXPECT(g, "x555-1234", false);
    EXPECT(g, "555-12345", false);
    sy_grammar_free(g);
    /* Full-match semantics: ^ and $ at the ends change nothing. */
    g = build(add_regex, "^(yes|no)$", &err);
    EXPECT(g, "yes", true);
    EXPECT(g, "no", true);
    EXPECT(g, "yesno", false);
    sy_grammar_free(g);
    g = build(add_regex, "a.c\\x41\\u00e9[\\s]\\S+", &err);
    EXPECT(g, "a\xe2\x82\xac" "cA\xc3\xa9 x\"", true);
    EXPECT(g, "a\ncA\xc3\xa9 x", false);
    EXPECT(g, "abcA\xc3\xa9\tx y", false);
    sy_grammar_free(g);
    g = build(add_regex, "[^\\n]*", &err);
    EXPECT(g, "", true);
    EXPECT(g, "any \"thing\" \xf0\x9f\x98\x80", true);
    EXPECT(g, "a\nb", false);
    sy_grammar_free(g);
    g = build(add_regex, "a{0}b{2,}c{1,2}", &err);
    EXPECT(g, "bbc", true);
    EXPECT(g, "bbbbcc", true);
    EXPECT(g, "abbc", false);
    EXPECT(g, "bc", false);
    sy_grammar_free(g);
    g = build(add_regex, "a|(|b)c", &err); /* empty branches */
    EXPECT(g, "a", true);
    EXPECT(g, "c", true);
    EXPECT(g, "bc", true);
    EXPECT(g, "", false);
    sy_grammar_free(g);
    g = build(add_regex, "x{y", &err); /* '{' that is no quantifier is a literal */
    EXPECT(g, "x{y", true);
    sy_grammar_free(g);
    static const char *const bad[][2] = {{"(?<=a)b", "lookbehind"}, {"a**", "nothing to repeat"},
                                         {"(a", "expected ')'"},     {"a)", "unmatched ')'"},
                                         {"[b-a]", "out of order"},  {"\\p{L}", "Unicode property"},
                                         {"(?i)a", "inline flags"},  {"a{3,1}", "n < m"},
                                         {"[]a]", "may not start with ']'"}, {"\\k<x>", "backreferences"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sy_gsrc *src = sy_gsrc_new();
        err.msg[0] = 0;
        int rc = sy_gsrc_add_regex(src, "root", bad[i][0], "structured_outputs.regex", &err);
        CHECK(rc == SY_ERR_INVALID);
        CHECK_CONTAINS(err.msg, bad[i][1]);
        CHECK_CONTAINS(err.msg, "structured_outputs.regex: regex /");
        sy_gsrc_free(src);
    }
}

typedef struct until_arg {
    const char *stop;
} until_arg;

static int add_until(sy_gsrc *src, const void *arg, sy_err *err)
{
    return sy_gsrc_add_text_until(src, "root", ((const until_arg *)arg)->stop, err);
}

static void test_text_until(void)
{
    /* Every string over {a, b, c} up to length 8 against a naive search. */
    static const char *const stops[] = {"aab", "abab", "a", "abcab", "cc"};
    for (size_t s = 0; s < sizeof stops / sizeof stops[0]; s++) {
        sy_err err = {{0}};
        until_arg a = {stops[s]};
        sy_grammar *g = build(add_until, &a, &err);
        CHECK(g != NULL);
        if (!g) {
            fprintf(stderr, "text_until %s: %s\n", stops[s], err.msg);
            continue;
        }
        int wrong = 0;
        char text[16];
        for (size_t len = 0; len <= 8; len++) {
            size_t total = 1;
            for (size_t i = 0; i < len; i++)
                total *= 3;
            for (size_t k = 0; k < total; k++) {
                size_t x = k;
                for (size_t i = 0; i < len; i++, x /= 3)
                    text[i] = (char)('a' + x % 3);
                text[len] = 0;
                bool want = !strstr(text, stops[s]);
                if (accepts(g, text) != want && wrong++ < 3)
                    fprintf(stderr, "text_until %s: \"%s\" should be %s\n", stops[s], text,
                            want ? "accepted" : "rejected");
            }
        }
        CHECK(wrong == 0);
        sy_grammar_free(g);
    }
    sy_err err = {{0}};
    until_arg a = {"</think>"};
    sy_grammar *g = build(add_until, &a, &err);
    EXPECT(g, "Let me think. <b>bold</b> </thin", true);
    EXPECT(g, "x\n\xe4\xb8\x96</think", true);
    EXPECT(g, "a</think>b", false);
    EXPECT(g, "</think>", false);
    sy_grammar_free(g);
    a.stop = "\xc3\xa9!";
    g = build(add_until, &a, &err);
    EXPECT(g, "\xc3\xa9\xc3\xa9?!", true);
    EXPECT(g, "x\xc3\xa9\xc3\xa9!", false);
    sy_grammar_free(g);
    sy_gsrc *src = sy_gsrc_new();
    CHECK(sy_gsrc_add_text_until(src, "root", "", &err) == SY_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "non-empty stop");
    sy_gsrc_free(src);
}

typedef struct choice_arg {
    const char *const *choices;
    size_t n;
} choice_arg;

static int add_choice(sy_gsrc *src, const void *arg, sy_err *err)
{
    const choice_arg *a = arg;
    return sy_gsrc_add_choice(src, "root", a->choices, a->n, err);
}

static int add_any(sy_gsrc *src, const void *arg, sy_err *err)
{
    return sy_gsrc_add_json_any(src, "root", *(const bool *)arg, err);
}

static void test_choice_and_any(void)
{
    static const char *const ch[] = {"yes", "no", "maybe \"so\"", "n", ""};
    choice_arg a = {ch, 5};
    sy_err err = {{0}};
    sy_grammar *g = build(add_choice, &a, &err);
    EXPECT(g, "yes", true);
    EXPECT(g, "maybe \"so\"", true);
    EXPECT(g, "n", true);
    EXPECT(g, "", true);
    EXPECT(g, "ye", false);
    EXPECT(g, "yesno", false);
    sy_grammar_free(g);
    sy_gsrc *src = sy_gsrc_new();
    CHECK(sy_gsrc_add_choice(src, "root", ch, 0, &err) == SY_ERR_INVALID);
    sy_gsrc_free(src);

    bool object_only = false;
    g = build(add_any, &object_only, &err);
    EXPECT(g, "[1, {\"a\":[true,false,null]}, \"x\", -0.5e+3]", true);
    EXPECT(g, "\"s\"", true);
    EXPECT(g, "{\"a\":1,}", false);
    EXPECT(g, "{\"a\"  :1}", false);
    EXPECT(g, "[1,,2]", false);
    sy_grammar_free(g);
    object_only = true;
    g = build(add_any, &object_only, &err);
    EXPECT(g, "{\"a\": {\"b\": []}}", true);
    EXPECT(g, "[1]", false);
    sy_grammar_free(g);
}

int main(void)
{
    test_objects();
    test_scalars();
    test_integer_ranges();
    test_number_ranges();
    test_arrays();
    test_refs_and_unions();
    test_strings();
    test_errors();
    test_regex_builder();
    test_text_until();
    test_choice_and_any();
    return sy_test_done("test_grammar_schema");
}
