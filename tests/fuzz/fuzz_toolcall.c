/*
 * Fuzz target: the tool-call parsers (core/toolcall). The input is model
 * output fed to every family's parser twice: whole, and in random pieces
 * (the first byte seeds the splits) with the family's markers sometimes
 * sent as special tokens. Invariants, checked with abort(): no push
 * fails; each call's first piece has its id and name and later pieces
 * neither; indices count up from 0; every call's arguments concatenate to
 * a JSON object; and without special pieces the split feed gives exactly
 * the content, reasoning and calls of the whole feed.
 */
#include "config.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "toolcall/toolcall.h"

static const char *TOOLS =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"city\":{\"type\":\"string\"},\"days\":{\"type\":\"integer\"},\"opts\":{\"type\":\"object\"}}}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"search\"}}]";

#define MAX_TRACKED 64

typedef struct result {
    sy_buf content, reasoning, calls; /* calls: "index\x01id\x01name\x01args\x02" per call */
    sy_buf args[MAX_TRACKED];
    int n;
} result;

static void result_free(result *r)
{
    sy_buf_free(&r->content);
    sy_buf_free(&r->reasoning);
    sy_buf_free(&r->calls);
    for (int i = 0; i < MAX_TRACKED; i++)
        sy_buf_free(&r->args[i]);
}

static void fail(const char *family, const char *what)
{
    fprintf(stderr, "fuzz_toolcall: %s: %s\n", family, what);
    abort();
}

static void collect(const char *family, result *r, const sy_tool_out *o)
{
    sy_buf_append(&r->content, o->content.p ? o->content.p : "", o->content.len);
    sy_buf_append(&r->reasoning, o->reasoning.p ? o->reasoning.p : "", o->reasoning.len);
    for (size_t i = 0; i < o->n_deltas; i++) {
        const sy_tool_call_delta *d = &o->deltas[i];
        if (d->index == r->n) {
            if (!d->id || !d->name)
                fail(family, "a call's first piece lacks its id or name");
            char head[32];
            snprintf(head, sizeof head, "%d\x01", d->index);
            sy_buf_append(&r->calls, head, strlen(head));
            sy_buf_append(&r->calls, d->id, strlen(d->id));
            sy_buf_append(&r->calls, "\x01", 1);
            sy_buf_append(&r->calls, d->name, strlen(d->name));
            sy_buf_append(&r->calls, "\x02", 1);
            r->n++;
        } else if (d->index != r->n - 1 || d->id || d->name) {
            fail(family, "a piece of a call that is not the current one, or a repeated id/name");
        }
        if (d->index < MAX_TRACKED)
            sy_buf_append(&r->args[d->index], d->arguments, d->arguments_len);
    }
}

static uint64_t next(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

static void run(const sy_tool_family *f, const sy_tools *tools, const char *text, size_t n, uint64_t seed,
                bool split, bool specials, result *r)
{
    sy_tool_parser *p;
    sy_err err;
    memset(r, 0, sizeof *r);
    if (sy_tool_parser_new(f, tools, 11, &p, &err))
        fail(sy_tool_family_name(f), err.msg);
    sy_tool_out o = {0};
    const char *const *m = sy_tool_family_markers(f);
    size_t i = 0;
    while (i < n || i == 0) {
        size_t len = n - i;
        bool special = false;
        if (split && n) {
            len = 1 + next(&seed) % 8;
            if (len > n - i)
                len = n - i;
            if (specials) {
                for (size_t k = 0; m[k]; k++)
                    if (n - i >= strlen(m[k]) && !memcmp(text + i, m[k], strlen(m[k])) && next(&seed) % 2) {
                        len = strlen(m[k]);
                        special = true;
                    }
            }
        }
        bool final = i + len >= n;
        sy_tool_out_reset(&o);
        if (sy_tool_parser_push(p, text + i, len, special, final, &o, &err))
            fail(sy_tool_family_name(f), err.msg);
        collect(sy_tool_family_name(f), r, &o);
        i += len;
        if (final)
            break;
    }
    sy_tool_out_fini(&o);
    if (r->n != sy_tool_parser_calls(p))
        fail(sy_tool_family_name(f), "sy_tool_parser_calls differs from the calls reported");
    sy_tool_parser_free(p);
    for (int k = 0; k < r->n && k < MAX_TRACKED; k++) {
        json_t *v = json_loadb(r->args[k].p ? r->args[k].p : "", r->args[k].len, 0, NULL);
        if (!json_is_object(v)) {
            fprintf(stderr, "arguments: %.*s\n", (int)r->args[k].len, r->args[k].p ? r->args[k].p : "");
            fail(sy_tool_family_name(f), "a call's arguments are not a JSON object");
        }
        json_decref(v);
    }
}

static bool same(const sy_buf *a, const sy_buf *b)
{
    return a->len == b->len && (!a->len || !memcmp(a->p, b->p, a->len));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint64_t seed = data[0];
    const char *text = (const char *)data + 1;
    size_t n = size - 1;
    sy_tools *tools;
    sy_err err;
    if (sy_tools_parse(TOOLS, &tools, &err))
        fail("tools", err.msg);
    static const char *const families[] = {"glm45",   "glm47",       "deepseek_v3", "deepseek_v31", "deepseek_v32",
                                           "hermes",  "llama3_json", "mistral",     "kimi_k2",      "harmony"};
    for (size_t k = 0; k < sizeof families / sizeof families[0]; k++) {
        const sy_tool_family *f = sy_tool_family_by_name(families[k]);
        result whole, split, spec;
        run(f, tools, text, n, seed, false, false, &whole);
        run(f, tools, text, n, seed, true, false, &split);
        run(f, tools, text, n, seed, true, true, &spec);
        bool eq = same(&whole.content, &split.content) && same(&whole.reasoning, &split.reasoning) &&
                  same(&whole.calls, &split.calls) && whole.n == split.n;
        for (int i = 0; eq && i < whole.n && i < MAX_TRACKED; i++)
            eq = same(&whole.args[i], &split.args[i]);
        if (!eq)
            fail(families[k], "fed in pieces, the text gave other content or calls than fed whole");
        fuzz_note("toolcall %s: %d calls, %zu content bytes", families[k], whole.n, whole.content.len);
        result_free(&whole);
        result_free(&split);
        result_free(&spec);
    }
    sy_tools_free(tools);
    return 0;
}
