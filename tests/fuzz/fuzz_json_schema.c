/*
 * Fuzz target: the grammar source builders (core/grammar). The input up to
 * the first NUL byte is a JSON schema; it is compiled (with and without
 * SY_JSON_SCHEMA_ALLOW_EXTRA) and, when it compiles, what follows the NUL
 * is matched against it, whole and one byte at a time through a matcher
 * (the two must agree). The same first part is also compiled as a regex
 * (full match) and, when short, as a text_until stop string, each matched
 * against the tail. Errors are fine; crashes, leaks, and disagreement are not.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "grammar/grammar.h"

/* Matches tail against g whole and byte by byte; they must agree. */
static void match(const sy_grammar *g, const char *tail, size_t n)
{
    bool whole = sy_grammar_accepts(g, tail, n);
    sy_gmatcher *m;
    sy_err err = {{0}};
    if (sy_gmatcher_new(g, NULL, &m, &err) != SY_OK)
        abort(); /* a compiled grammar always starts a matcher */
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++)
        ok = sy_gmatcher_accept_bytes(m, tail + i, 1);
    if (whole != (ok && sy_gmatcher_can_end(m)))
        abort(); /* byte-wise matching must agree with the whole-text check */
    sy_gmatcher_free(m);
}

static void try_build(int kind, const char *head, const char *tail, size_t n)
{
    sy_gsrc *src = sy_gsrc_new();
    if (!src)
        return;
    sy_err err = {{0}};
    int rc;
    switch (kind) {
    case 0: rc = sy_gsrc_add_json_schema(src, "root", head, "schema", &err); break;
    case 1: rc = sy_gsrc_add_json_schema_flags(src, "root", head, "schema", SY_JSON_SCHEMA_ALLOW_EXTRA, &err); break;
    case 2: rc = sy_gsrc_add_regex(src, "root", head, "regex", &err); break;
    default: rc = sy_gsrc_add_text_until(src, "root", head, &err); break;
    }
    if (rc == SY_OK) {
        sy_grammar *g = NULL;
        if (sy_grammar_compile(src, "root", &g, &err) == SY_OK) {
            match(g, tail, n);
            sy_grammar_free(g);
        } else {
            /* What a builder emits must compile, but for languages the
             * builders cannot see are empty (e.g. a $ref cycle). */
            fuzz_note("json_schema: compile (%d): %s", kind, err.msg);
        }
    } else {
        if (!err.msg[0])
            abort(); /* every refusal says why */
        fuzz_note("json_schema: build (%d): %s", kind, err.msg);
    }
    sy_gsrc_free(src);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0; /* big schemas only make runs slow */
    const uint8_t *nul = memchr(data, '\0', size);
    size_t head_len = nul ? (size_t)(nul - data) : size;
    char *head = malloc(head_len + 1);
    if (!head)
        return 0;
    memcpy(head, data, head_len);
    head[head_len] = '\0';
    const char *tail = nul ? (const char *)nul + 1 : "";
    size_t tail_len = nul ? size - head_len - 1 : 0;
    /* A long stop string costs the compiler much and teaches little. */
    for (int kind = 0; kind < (head_len <= 64 ? 4 : 3); kind++)
        try_build(kind, head, tail, tail_len);
    free(head);
    return 0;
}
