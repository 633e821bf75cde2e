/* Chat templates: every expectation of the shared oracle
 * ($SY_SHARED_DIR/chat-templates) reproduced byte for byte, the expected
 * errors (gemma-2's raise_exception), and unit checks of the engine. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "chat/chat_template.h"
#include "test_check.h"
#include "util/util.h"

static void show_diff(const char *got, size_t gn, const char *want, size_t wn)
{
    size_t i = 0;
    while (i < gn && i < wn && got[i] == want[i])
        i++;
    size_t from = i > 60 ? i - 60 : 0;
    fprintf(stderr, "  first difference at byte %zu (got %zu bytes, expected %zu)\n", i, gn, wn);
    fprintf(stderr, "  expected: ...%.*s<<HERE>>%.*s...\n", (int)(i - from), want + from,
            (int)(wn - i > 60 ? 60 : wn - i), want + i);
    fprintf(stderr, "  got:      ...%.*s<<HERE>>%.*s...\n", (int)(i - from), got + from,
            (int)(gn - i > 60 ? 60 : gn - i), got + i);
}

static int render_str(const char *src, json_t *msgs, json_t *kw, char **out, sy_err *err)
{
    sy_chat_template *t;
    size_t n;
    int rc = sy_chat_template_compile(src, strlen(src), &t, err);
    if (rc)
        return rc;
    rc = sy_chat_template_render(t, msgs, NULL, 1, "<s>", NULL, kw, out, &n, err);
    sy_chat_template_free(t);
    return rc;
}

static void expect_render(const char *src, const char *want)
{
    json_t *msgs = json_pack("[{s:s,s:s},{s:s,s:s}]", "role", "system", "content", " Hi there ",
                             "role", "user", "content", "a,b,c");
    char *out = NULL;
    sy_err err = {{0}};
    int rc = render_str(src, msgs, NULL, &out, &err);
    sy_test_checks++;
    if (rc || strcmp(out, want)) {
        sy_test_failures++;
        fprintf(stderr, "render of %s\n  gave [%s] (%s), expected [%s]\n", src, rc ? "" : out,
                rc ? err.msg : "ok", want);
    }
    free(out);
    json_decref(msgs);
}

static void expect_error(const char *src, const char *needle)
{
    json_t *msgs = json_pack("[{s:s,s:s}]", "role", "user", "content", "x");
    char *out = NULL;
    sy_err err = {{0}};
    int rc = render_str(src, msgs, NULL, &out, &err);
    CHECK(rc != 0);
    if (rc)
        CHECK_CONTAINS(err.msg, needle);
    free(out);
    json_decref(msgs);
}

static void unit_checks(void)
{
    expect_render("{{ messages[0].content.strip() }}|{{ messages[1].content.split(',')[-1] }}",
                  "Hi there|c");
    expect_render("{% for m in messages %}{{ loop.index0 }}{{ m.role[:3] }}{% if not loop.last %},{% endif %}{% endfor %}",
                  "0sys,1use");
    expect_render("{{ 'abc'[::-1] }} {{ [1,2,3][-2:] }} {{ 7 // 2 }} {{ -7 % 3 }} {{ 1 / 2 }}",
                  "cba [2, 3] 3 2 0.5");
    expect_render("{% set ns = namespace(n=0) %}{% for i in range(5) %}{% if i == 3 %}{% break %}{% endif %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}",
                  "3");
    expect_render("{{ {'a': 1, 'b': [true, none, 'x\"y']} | tojson }}", "{\"a\": 1, \"b\": [true, null, \"x\\\"y\"]}");
    expect_render("{{ {'a': [1]} | tojson(indent=2) }}", "{\n  \"a\": [\n    1\n  ]\n}");
    /* repr and tojson escape alike where Python and JSON agree, and differently elsewhere. */
    expect_render("{{ ['a\\\\b', \"it's\", 'x\\ny\\tz\\r', -12] }}", "['a\\\\b', \"it's\", 'x\\ny\\tz\\r', -12]");
    expect_render("{{ 'a\\\\b\"\\n\\t\\r\\u0008\\u000c\\u0001' | tojson }} {{ [-12] | tojson }}",
                  "\"a\\\\b\\\"\\n\\t\\r\\b\\f\\u0001\" [-12]");
    /* and / or: left-associative, 'and' binds tighter, operands as values. */
    expect_render("{{ 1 and 0 or 2 }} {{ none or 'd' }} {{ 'a' and 'b' and 'c' }} {{ not 0 and 1 }} "
                  "{{ false or false or 'x' }} {{ 0 or 1 and 0 }}",
                  "2 d c 1 x 0");
    expect_render("{% macro f(x, y='d') %}[{{ x }}{{ y }}]{% endmacro %}{{ f(1) }}{{ f(2, y=3) }}",
                  "[1d][23]");
    expect_render("{{ none }} {{ true }} {{ undefined_thing }}|{{ [1, 'a'] }} {{ 2.0 }}",
                  "None True |[1, 'a'] 2.0");
    expect_render("{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | join('/') }}",
                  "a,b,c");
    expect_render("{{ 'a\\\nb' }}{# c #}{{ \"\\u00e9\\t\" | length }}", "ab2");
    expect_render("  {% if true %}\nx\n  {% endif %}\ny", "x\ny");
    expect_render("{%- if true -%}  a  {%- endif -%}  ", "a");
    expect_render("{{ bos_token }}{{ eos_token is defined }}{{ x if false }}|{{ 1 if 0 else 2 }}",
                  "<s>False|2");
    expect_render("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% else %}none{% endfor %}",
                  "a=1;b=2;");
    expect_render("{% for x in [] %}{{ x }}{% else %}empty{% endfor %}", "empty");
    /* Integer ** by squaring: a huge exponent of 0, 1 or -1 is instant (it
     * looped once per unit of the exponent), the rest as Python gives. */
    expect_render("{{ 0 ** 9000000000000000000 }} {{ 1 ** 9000000000000000000 }} {{ (-1) ** 9000000000000000001 }}",
                  "0 1 -1");
    expect_render("{{ 2 ** 10 }} {{ 3 ** 0 }} {{ (-3) ** 3 }} {{ 2 ** 62 }} {{ 7 ** 1 }}",
                  "1024 1 -27 4611686018427387904 7");
    expect_error("{{ 2 ** 63 }}", "integer overflow");
    expect_error("{{ 3 ** 9000000000000000000 }}", "integer overflow");
    expect_render("{{ strftime_now('%d %b %Y') }} {{ 'x' ~ 1 ~ none }} {{ 'ab' in 'cabd' }}",
                  "15 Jan 2025 x1None True");
    expect_error("{{ raise_exception('boom here') }}", "boom here");
    expect_error("{{ messages[0].nope.deeper }}", "'dict object' has no attribute 'nope'");
    expect_error("{{ nothing.deeper }}", "'nothing' is undefined");
    expect_error("{{ 'a' + 1 }}", "can only concatenate str");
    expect_error("{% macro r(n) %}{{ r(n) }}{% endmacro %}{{ r(1) }}", "too deep");
    expect_error("{% for i in range(100000000) %}{% endfor %}", "range too large");

    /* syntax errors say where and what was expected */
    static const struct {
        const char *src, *needle;
    } bad[] = {
        {"{% if x %}abc", "expected '{% endif %}'"},
        {"{% if x %}a{% else %}b", "expected '{% endif %}'"},
        {"{% for x in y %}a{% else %}b", "expected '{% endfor %}'"},
        {"{% set x %}abc", "expected '{% endset %}'"},
        {"{% macro m() %}abc", "expected '{% endmacro %}'"},
        {"{% generation %}abc", "expected '{% endgeneration %}'"},
        {"{{ [1, 2 3] }}", "expected ','"},
        {"{{ f(1 2) }}", "expected ','"},
        {"line1\n{{ a + }}", "2:"},
        {"{{ a b }}", "expected '}}'"},
        {"{% for x y %}", "expected 'in'"},
        {"{% frobnicate %}", "supported statement"},
        {"{{ 'unterminated }}", "unterminated string"},
        {"{# never closed", "unclosed comment"},
        {"{% endfor %}", "expected"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sy_chat_template *t = NULL;
        sy_err err = {{0}};
        int rc = sy_chat_template_compile(bad[i].src, strlen(bad[i].src), &t, &err);
        CHECK(rc != 0 && t == NULL);
        if (rc)
            CHECK_CONTAINS(err.msg, bad[i].needle);
        sy_chat_template_free(t);
    }

    /* nesting is capped with a clear error, not a stack overflow */
    {
        char deep[1200];
        size_t k = 0;
        k += (size_t)snprintf(deep + k, sizeof deep - k, "{{ ");
        for (int i = 0; i < 500; i++)
            deep[k++] = '(';
        deep[k++] = '1';
        for (int i = 0; i < 500; i++)
            deep[k++] = ')';
        snprintf(deep + k, sizeof deep - k, " }}");
        sy_chat_template *t = NULL;
        sy_err err = {{0}};
        CHECK(sy_chat_template_compile(deep, strlen(deep), &t, &err) != 0 && !t);
        CHECK_CONTAINS(err.msg, "nested");
    }

    /* fuzz-style: every prefix of a real-looking template compiles or fails cleanly */
    const char *src = "{%- set ns = namespace(a=[1, 2]) -%}{% for m in messages if m.role != 'x' %}"
                      "{{- m['content'] | trim ~ (ns.a[-1:] | string) }}{% endfor %}";
    for (size_t n = 0; n <= strlen(src); n++) {
        sy_chat_template *t = NULL;
        sy_err err = {{0}};
        if (sy_chat_template_compile(src, n, &t, &err) == 0) {
            json_t *msgs = json_pack("[{s:s,s:s}]", "role", "user", "content", "x");
            char *out = NULL;
            size_t len;
            if (sy_chat_template_render(t, msgs, NULL, 0, NULL, NULL, NULL, &out, &len, &err) == 0)
                free(out);
            json_decref(msgs);
            sy_chat_template_free(t);
        }
    }

    /* loader: tokenizer_config.json list form, chat_template.jinja, ChatML fallback */
    char dir[] = "/tmp/sy_chat_tpl_XXXXXX";
    if (mkdtemp(dir)) {
        char path[256], *s = NULL;
        int fb = -1;
        sy_err err = {{0}};
        CHECK(sy_chat_template_load_source(dir, &s, &fb, &err) == 0 && fb == 1 &&
              strstr(s, "im_start"));
        free(s);
        snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
        FILE *f = fopen(path, "w");
        if (f) {
            fputs("JINJA", f);
            fclose(f);
        }
        CHECK(sy_chat_template_load_source(dir, &s, &fb, &err) == 0 && fb == 0 && !strcmp(s, "JINJA"));
        free(s);
        char cpath[256];
        snprintf(cpath, sizeof cpath, "%s/tokenizer_config.json", dir);
        f = fopen(cpath, "w");
        if (f) {
            fputs("{\"chat_template\": [{\"name\": \"tool_use\", \"template\": \"T\"},"
                  " {\"name\": \"default\", \"template\": \"D\"}]}", f);
            fclose(f);
        }
        CHECK(sy_chat_template_load_source(dir, &s, &fb, &err) == 0 && fb == 0 && !strcmp(s, "D"));
        free(s);
        sy_chat_template *t = NULL;
        CHECK(sy_chat_template_load(dir, &t, &fb, &err) == 0 && t);
        sy_chat_template_free(t);
        unlink(cpath);
        unlink(path);
        rmdir(dir);
    }

    /* the ChatML fallback renders */
    sy_chat_template *t = NULL;
    sy_err err = {{0}};
    const char *cm = sy_chat_template_chatml();
    CHECK(sy_chat_template_compile(cm, strlen(cm), &t, &err) == 0);
    if (t) {
        json_t *msgs = json_pack("[{s:s,s:s}]", "role", "user", "content", "hi");
        char *out = NULL;
        size_t len;
        CHECK(sy_chat_template_render(t, msgs, NULL, 1, NULL, NULL, NULL, &out, &len, &err) == 0);
        if (out)
            CHECK(!strcmp(out, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"));
        free(out);
        json_decref(msgs);
        sy_chat_template_free(t);
    }

    /* strftime_now: the frozen oracle clock by default, the given time for a server */
    const char *clock_src = "{{ strftime_now('%Y-%m-%d %H:%M') }}";
    t = NULL;
    CHECK(sy_chat_template_compile(clock_src, strlen(clock_src), &t, &err) == 0);
    if (t) {
        json_t *msgs = json_array();
        char *out = NULL;
        size_t len;
        CHECK(sy_chat_template_render(t, msgs, NULL, 0, NULL, NULL, NULL, &out, &len, &err) == 0);
        CHECK(out && !strcmp(out, "2025-01-15 12:00"));
        free(out);
        out = NULL;
        CHECK(sy_chat_template_render_at(t, msgs, NULL, 0, NULL, NULL, NULL, 86400 * 366 + 3600, &out, &len, &err) == 0);
        CHECK(out && !strcmp(out, "1971-01-02 01:00"));
        free(out);
        json_decref(msgs);
        sy_chat_template_free(t);
    }
}

int main(void)
{
    const char *shared = getenv("SY_SHARED_DIR");
    char path[8192], base[2048];
    sy_err err = {{0}};
    unit_checks();
    if (!shared || !*shared) {
        fprintf(stderr, "FAIL: SY_SHARED_DIR is not set (the chat-template oracle lives there)\n");
        return 1;
    }
    if (strlen(shared) > 1900) {
        fprintf(stderr, "FAIL: SY_SHARED_DIR too long\n");
        return 1;
    }
    snprintf(base, sizeof base, "%s/chat-templates", shared);
    snprintf(path, sizeof path, "%s/cases.json", base);
    json_error_t je;
    json_t *cases = json_load_file(path, 0, &je);
    snprintf(path, sizeof path, "%s/skips.json", base);
    json_t *skips = json_load_file(path, 0, &je);
    if (!cases || !skips) {
        fprintf(stderr, "FAIL: cannot read %s/cases.json or skips.json\n", base);
        return 1;
    }
    json_t *tpls = json_object_get(cases, "templates");
    const char *name;
    json_t *info;
    int total = 0, exact = 0, expected_errors = 0, skip_ok = 0;
    json_object_foreach(tpls, name, info) {
        char *src = NULL;
        size_t slen;
        snprintf(path, sizeof path, "%s/%s", base, json_string_value(json_object_get(info, "file")));
        sy_test_checks++;
        if (sy_read_file(path, &src, &slen, &err)) {
            sy_test_failures++;
            fprintf(stderr, "FAIL %s: %s\n", name, err.msg);
            continue;
        }
        sy_chat_template *t = NULL;
        sy_test_checks++;
        if (sy_chat_template_compile(src, slen, &t, &err)) {
            sy_test_failures++;
            fprintf(stderr, "FAIL %s: compile: %s\n", name, err.msg);
            free(src);
            continue;
        }
        free(src);
        json_t *bos = json_object_get(info, "bos_token"), *eos = json_object_get(info, "eos_token");
        int n_t = 0, ok_t = 0;
        size_t ci;
        json_t *cs;
        json_array_foreach(json_object_get(cases, "cases"), ci, cs) {
            int applies = 0;
            size_t k;
            json_t *a;
            json_array_foreach(json_object_get(cs, "applies_to"), k, a)
                if (!strcmp(json_string_value(a), name))
                    applies = 1;
            if (!applies)
                continue;
            const char *cid = json_string_value(json_object_get(cs, "id"));
            const char *skip_err = NULL;
            json_t *sk;
            json_array_foreach(skips, k, sk)
                if (!strcmp(json_string_value(json_object_get(sk, "template")), name) &&
                    !strcmp(json_string_value(json_object_get(sk, "case")), cid))
                    skip_err = json_string_value(json_object_get(sk, "error"));
            json_t *tools = json_object_get(cs, "tools");
            char *out = NULL;
            size_t olen = 0;
            sy_err rerr = {{0}};
            int rc = sy_chat_template_render(
                t, json_object_get(cs, "messages"), json_is_null(tools) ? NULL : tools,
                json_is_true(json_object_get(cs, "add_generation_prompt")),
                json_string_value(bos), json_string_value(eos), json_object_get(cs, "kwargs"),
                &out, &olen, &rerr);
            if (skip_err) {
                /* no expectation; errors raised through raise_exception must surface */
                if (strstr(skip_err, "System role not supported")) {
                    expected_errors++;
                    CHECK(rc != 0);
                    if (rc)
                        CHECK_CONTAINS(rerr.msg, "System role not supported");
                } else {
                    skip_ok++;
                }
                free(out);
                continue;
            }
            snprintf(path, sizeof path, "%s/expected/%s__%s.txt", base, name, cid);
            char *want = NULL;
            size_t wlen;
            total++;
            n_t++;
            sy_test_checks++;
            if (sy_read_file(path, &want, &wlen, &err)) {
                sy_test_failures++;
                fprintf(stderr, "FAIL %s/%s: no expectation: %s\n", name, cid, err.msg);
            } else if (rc) {
                sy_test_failures++;
                fprintf(stderr, "FAIL %s/%s: render error: %s\n", name, cid, rerr.msg);
            } else if (olen != wlen || memcmp(out, want, wlen)) {
                sy_test_failures++;
                fprintf(stderr, "FAIL %s/%s: output differs\n", name, cid);
                show_diff(out, olen, want, wlen);
            } else {
                exact++;
                ok_t++;
            }
            free(want);
            free(out);
        }
        printf("%-50s %2d/%2d exact\n", name, ok_t, n_t);
        sy_chat_template_free(t);
    }
    printf("chat templates: %d/%d exact, %d expected errors checked, %d other skips rendered or failed cleanly\n",
           exact, total, expected_errors, skip_ok);
    CHECK(total == 220);
    json_decref(cases);
    json_decref(skips);
    return sy_test_done("test_chat_templates");
}
