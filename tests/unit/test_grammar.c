/*
 * The grammar core: GBNF parsing and its errors, compile checks, what hand
 * grammars accept, and token masks checked against a brute-force scan of
 * the vocabulary (every token tried on the matcher) on random grammars and
 * random walks, with a synthetic vocabulary and with real ones (cl100k's
 * byte-level BPE and Llama 2's SentencePiece, from SY_SHARED_DIR).
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_impl.h"
#include "tokenizer/tokenizer.h"
#include "test_check.h"

/* xorshift: deterministic runs, seed printed on failure */
static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(uint32_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return n ? (uint32_t)(rng % n) : 0;
}

static sy_grammar *compile(const char *gbnf, const char *root, sy_err *err)
{
    sy_gsrc *src = sy_gsrc_new();
    sy_grammar *g = NULL;
    if (sy_gsrc_add_gbnf(src, gbnf, "test", err) == SY_OK)
        sy_grammar_compile(src, root, &g, err);
    sy_gsrc_free(src);
    return g;
}

static void expect_parse_error(const char *gbnf, const char *n1, const char *n2)
{
    sy_gsrc *src = sy_gsrc_new();
    sy_err err = {{0}};
    int rc = sy_gsrc_add_gbnf(src, gbnf, "t.gbnf", &err);
    CHECK(rc == SY_ERR_INVALID);
    if (rc != SY_ERR_INVALID)
        fprintf(stderr, "  grammar that should not parse: %s\n", gbnf);
    CHECK_CONTAINS(err.msg, n1);
    if (n2)
        CHECK_CONTAINS(err.msg, n2);
    CHECK(src->n == 0); /* a failed call adds nothing */
    sy_gsrc_free(src);
}

static void expect_compile_error(const char *gbnf, const char *root, const char *n1, const char *n2)
{
    sy_err err = {{0}};
    sy_grammar *g = compile(gbnf, root, &err);
    CHECK(g == NULL);
    CHECK_CONTAINS(err.msg, n1);
    if (n2)
        CHECK_CONTAINS(err.msg, n2);
    sy_grammar_free(g);
}

typedef struct lang {
    const char *gbnf;
    const char *yes[12];
    const char *no[12];
} lang;

static const lang langs[] = {
    {"root ::= \"a\" | \"b\" \"c\"*", {"a", "b", "bccc"}, {"", "ab", "c", "bcb"}},
    {"root ::= [0-9]{2,4}", {"12", "1234"}, {"1", "12345", "1a", ""}},
    {"root ::= (\"ab\"){3}", {"ababab"}, {"abab", "abababab"}},
    {"root ::= \"x\"{2,} \"y\"?", {"xx", "xxxxy", "xxy"}, {"x", "xy", "xxyy"}},
    {"root ::= [^\"]+", {"a", "\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80z"}, {"", "\"", "a\"", "\xFF", "\xC3", "\xED\xA0\x80"}},
    {"root ::= [\\u03B1-\\u03C9]+", {"\xCE\xB2", "\xCE\xB1\xCF\x89"}, {"a", "\xCE\xA9", "\xCE"}},
    {"root ::= \"\\u00e9\" \"\\x41\" \"\\n\\t\\\"\\\\\"", {"\xC3\xA9" "A\n\t\"\\"}, {"\xE9" "A\n\t\"\\"}},
    {"root ::= \"<\" .* \">\"", {"<>", "<a>b>", "<\xE4\xB8\xAD>"}, {"<a", "a<>", "<\xFF>"}},
    {"# a comment\nroot ::= item (\",\" item)*   # list\nitem ::= [a-z]+\n", {"a", "ab,c,def"}, {"", "a,", ",a", "A"}},
    {"root ::= (\n  \"a\"\n  | \"b\"\n)\n", {"a", "b"}, {"ab", ""}},
    {"root ::= \"a\"\n  | \"b\"\n  | \"c\"\nother ::= \"z\"", {"a", "b", "c"}, {"z", "d"}},
    {"root ::= [\\[\\]\\-^]+", {"[]-^", "^"}, {"a", ""}},
    {"root ::= x\nx ::= \"(\" x \")\" | \"\"", {"", "()", "((()))"}, {"(", "())", ")("}},
    {"root ::= (\"a\"?)* \"b\"", {"b", "aab"}, {"", "a", "ba"}},
    {"root ::= [a-c]{0,2} [^a-c\\x00-\\x7F]", {"\xC3\xA9", "ab\xE4\xB8\xAD"}, {"abc\xC3\xA9", "a", "abd"}},
};

/* llama.cpp's json.gbnf, as published */
static const char json_gbnf[] =
    "root   ::= object\n"
    "value  ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"
    "\n"
    "object ::=\n"
    "  \"{\" ws (\n"
    "            string \":\" ws value\n"
    "    (\",\" ws string \":\" ws value)*\n"
    "  )? \"}\" ws\n"
    "\n"
    "array  ::=\n"
    "  \"[\" ws (\n"
    "            value\n"
    "    (\",\" ws value)*\n"
    "  )? \"]\" ws\n"
    "\n"
    "string ::=\n"
    "  \"\\\"\" (\n"
    "    [^\"\\\\\\x7F\\x00-\\x1F] |\n"
    "    \"\\\\\" ([\"\\\\bfnrt] | \"u\" [0-9a-fA-F]{4}) # escapes\n"
    "  )* \"\\\"\" ws\n"
    "\n"
    "number ::= (\"-\"? ([0-9] | [1-9] [0-9]{0,15})) (\".\" [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws\n"
    "\n"
    "# Optional space: by convention, applied in this grammar after literal chars when allowed\n"
    "ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n";

static void check_lang(const char *gbnf, const char *const *yes, const char *const *no)
{
    sy_err err = {{0}};
    sy_grammar *g = compile(gbnf, "root", &err);
    CHECK(g != NULL);
    if (!g) {
        fprintf(stderr, "  %s\n  for grammar: %s\n", err.msg, gbnf);
        return;
    }
    for (int i = 0; i < 12 && yes[i]; i++) {
        bool ok = sy_grammar_accepts(g, yes[i], strlen(yes[i]));
        CHECK(ok);
        if (!ok)
            fprintf(stderr, "  should accept \"%s\" for: %s\n", yes[i], gbnf);
    }
    for (int i = 0; i < 12 && no[i]; i++) {
        bool ok = sy_grammar_accepts(g, no[i], strlen(no[i]));
        CHECK(!ok);
        if (ok)
            fprintf(stderr, "  should reject \"%s\" for: %s\n", no[i], gbnf);
    }
    sy_grammar_free(g);
}

static void test_languages(void)
{
    for (size_t i = 0; i < sizeof langs / sizeof *langs; i++) {
        check_lang(langs[i].gbnf, langs[i].yes, langs[i].no);
        /* the dump parses back to the same language */
        sy_gsrc *src = sy_gsrc_new();
        sy_err err = {{0}};
        CHECK(sy_gsrc_add_gbnf(src, langs[i].gbnf, "t", &err) == SY_OK);
        char *dump = sy_gsrc_dump(src);
        CHECK(dump != NULL);
        if (dump)
            check_lang(dump, langs[i].yes, langs[i].no);
        free(dump);
        sy_gsrc_free(src);
    }
    const char *jy[] = {"{}", "{\"a\": 1}", "{\"a\":[1, 2.5e3, \"x\\n\\u00e9\"], \"b\": {\"c\": null}}",
                        "{\"k\": true }", NULL};
    const char *jn[] = {"", "[]", "{\"a\" 1}", "{\"a\": 01x}", "{\"a\": \"\x01\"}", "{\"a\": tru}", "{,}", NULL};
    check_lang(json_gbnf, jy, jn);

    /* done and can_end */
    sy_err err = {{0}};
    sy_grammar *g = compile("root ::= \"ab\" \"c\"?", "root", &err);
    sy_gmatcher *m = NULL;
    CHECK(g && sy_gmatcher_new(g, NULL, &m, &err) == SY_OK);
    if (m) {
        CHECK(!sy_gmatcher_can_end(m));
        CHECK(sy_gmatcher_accept_bytes(m, "ab", 2));
        CHECK(sy_gmatcher_can_end(m) && !sy_gmatcher_done(m));
        CHECK(!sy_gmatcher_accept_bytes(m, "cd", 2)); /* refused whole, nothing changes */
        CHECK(sy_gmatcher_can_end(m) && !sy_gmatcher_done(m));
        CHECK(sy_gmatcher_accept_bytes(m, "c", 1));
        CHECK(sy_gmatcher_done(m));
    }
    sy_gmatcher_free(m);
    sy_grammar_free(g);
}

static void test_errors(void)
{
    expect_parse_error("root ::= \"abc", "t.gbnf:1:14:", "expected a closing \"");
    expect_parse_error("root ::= [a-", "t.gbnf:1:", "expected");
    expect_parse_error("root = \"a\"", "t.gbnf:1:6: expected ::= after the rule name", NULL);
    expect_parse_error("root ::= (\"a\"", "expected ) closing the group opened at 1:10", NULL);
    expect_parse_error("root ::= \"\\q\"", "t.gbnf:1:11: expected an escape", NULL);
    expect_parse_error("root ::= \"a\"{3,1}", "t.gbnf:1:13: expected a repetition {m,n} with m <= n", NULL);
    expect_parse_error("x ::= \"a\"\nroot ::= \"b\" )", "t.gbnf:2:14: expected no ) here", NULL);
    expect_parse_error("x ::= \"a\"\nx ::= \"b\"", "t.gbnf:2:1: rule x is defined twice (first at t.gbnf:1:1)", NULL);
    expect_parse_error("root ::= [z-a]", "t.gbnf:1:11: expected a range whose end is not below its start", NULL);
    expect_parse_error("root ::= \"\\uD800\"", "t.gbnf:1:11: expected a Unicode scalar value", NULL);
    expect_parse_error("root ::= \"\\x4\"", "t.gbnf:1:14: expected 2 hex digits after \\x", NULL);
    expect_parse_error("::= \"a\"", "t.gbnf:1:1: expected a rule name", NULL);
    expect_parse_error("root ::= \"a\" @", "t.gbnf:1:14: expected a literal", "found \"@\"");

    {
        /* nesting is bounded (no stack overflow on hostile input) */
        sy_gbuf b;
        sy_gbuf_init(&b);
        sy_gbuf_puts(&b, "root ::= ");
        for (int i = 0; i < 5000; i++)
            sy_gbuf_puts(&b, "(");
        sy_gbuf_puts(&b, "\"a\"");
        for (int i = 0; i < 5000; i++)
            sy_gbuf_puts(&b, ")");
        expect_parse_error(b.s, "expected groups nested at most 1000 deep", NULL);
        b.len = 0;
        sy_gbuf_puts(&b, "root ::= \"a\"");
        for (int i = 0; i < 5000; i++)
            sy_gbuf_puts(&b, "?");
        expect_parse_error(b.s, "expected at most 1000 repetition operators", NULL);
        sy_gbuf_free(&b);
        /* a long bounded repetition compiles in linear time and matches */
        sy_err err = {{0}};
        sy_grammar *g = compile("root ::= \"a\"{0,50000} \"b\"", "root", &err);
        CHECK(g != NULL);
        char *text = malloc(50002);
        memset(text, 'a', 50000);
        text[50000] = 'b';
        CHECK(g && sy_grammar_accepts(g, text, 50001));
        text[0] = 'a';
        CHECK(g && !sy_grammar_accepts(g, text, 50000)); /* no b */
        memmove(text + 1, text, 50001);
        CHECK(g && !sy_grammar_accepts(g, text, 50002)); /* 50001 a's */
        free(text);
        sy_grammar_free(g);
    }
    expect_compile_error("root ::= foo", "root", "test:1:10: rule root refers to undefined rule foo", NULL);
    expect_compile_error("root ::= expr\nexpr ::= expr \"+\" [0-9] | [0-9]", "root", "rule expr is left-recursive",
                         "test:2:1");
    expect_compile_error("root ::= a\na ::= b \"x\"\nb ::= \"\" | a", "root", "left-recursive", NULL);
    expect_compile_error("root ::= \"a\" root", "root", "rule root derives no finite text", NULL);
    expect_compile_error("root ::= \"a\" | x\nx ::= \"b\" x", "root", "rule x derives no finite text", "test:2:1");
    expect_compile_error("x ::= \"a\"", "root", "no rule root", NULL);
    expect_compile_error("root ::= [^\\x00-\\U0010FFFF]", "root", "matches no character", NULL);
}

/*
 * A rule that can close in two ways nested in itself keeps 2^n stacks after
 * n bytes: the matcher must refuse it, naming why, once the stacks pass
 * GSTACKS_MAX, instead of stalling the step (the fuzzer found 30 bytes of
 * such a text taking over a minute and 1.5 GB). Short texts still match.
 */
static void test_too_ambiguous(void)
{
    sy_err err = {{0}};
    sy_grammar *g = compile("root ::= \"a\" root \"b\" | \"a\" root \"c\" | \"\"", "root", &err);
    CHECK(g != NULL);
    if (!g)
        return;
    CHECK(sy_grammar_accepts(g, "aaaabcbc", 8));
    CHECK(!sy_grammar_accepts(g, "aaaabcb", 7));
    const char *bytes[3] = {"a", "b", "</s>"};
    size_t lens[3] = {1, 1, 4};
    bool special[3] = {false, false, false};
    int32_t eos = 2;
    sy_gvocab *v = NULL;
    sy_gmatcher *m = NULL;
    CHECK(sy_gvocab_new(3, bytes, lens, special, &eos, 1, &v, &err) == SY_OK);
    CHECK(v && sy_gmatcher_new(g, v, &m, &err) == SY_OK);
    int refused_at = -1;
    for (int i = 0; m && i < 20 && refused_at < 0; i++) {
        uint32_t mask[1];
        if (sy_gmatcher_fill_mask(m, mask, &err) != SY_OK || sy_gmatcher_accept_token(m, 0, &err) != SY_OK)
            refused_at = i;
    }
    /* 2^12 = GSTACKS_MAX: refused after about 12 bytes, with the reason and the place */
    CHECK(refused_at >= 8 && refused_at <= 13);
    CHECK(strstr(err.msg, "the grammar is too ambiguous") != NULL);
    CHECK(strstr(err.msg, "more than 4096 parse stacks") != NULL);
    char where[64];
    snprintf(where, sizeof where, "after %d bytes of output", refused_at);
    if (!strstr(err.msg, where))
        fprintf(stderr, "expected \"%s\" in: %s\n", where, err.msg);
    CHECK(strstr(err.msg, where) != NULL);
    sy_gmatcher_free(m);
    sy_gvocab_free(v);
    sy_grammar_free(g);
}

/* ------------------------------------------------------------ masks */

static int n_mismatch_reports;

/* Compares the mask with the brute-force scan: every token tried on the
 * matcher (state saved and restored). Returns the number allowed. */
static size_t brute_compare(sy_gmatcher *m, const sy_gvocab *v, const uint32_t *mask, const char *what)
{
    size_t allowed = 0, bad = 0;
    for (int32_t t = 0; t < v->n_vocab; t++) {
        gsaved s;
        if (!gmatcher_save(m, &s)) {
            CHECK(!"out of memory");
            return 0;
        }
        sy_err err;
        bool ok = sy_gmatcher_accept_token(m, t, &err) == SY_OK;
        gmatcher_restore(m, &s);
        bool bit = (mask[t >> 5] >> (t & 31)) & 1u;
        allowed += ok;
        if (ok != bit) {
            bad++;
            if (n_mismatch_reports++ < 10) {
                char ex[64] = "";
                size_t n = v->lens[t] < 20 ? v->lens[t] : 20;
                for (size_t i = 0, o = 0; i < n && o < 56; i++)
                    o += (size_t)snprintf(ex + o, sizeof ex - o, (unsigned char)v->bytes[t][i] >= 0x20 &&
                                                                         (unsigned char)v->bytes[t][i] < 0x7F
                                                                     ? "%c"
                                                                     : "\\x%02X",
                                          (unsigned char)v->bytes[t][i]);
                fprintf(stderr, "  %s: token %d \"%s\": mask %d, brute force %d\n", what, (int)t, ex, bit, ok);
            }
        }
    }
    CHECK(bad == 0);
    return allowed;
}

/* A random walk: at each step the mask must equal the brute-force scan;
 * then a random allowed token is taken. */
static void walk_c(const sy_grammar *g, const sy_gvocab *v, int steps, const char *what, bool compact)
{
    sy_gmatcher *m = NULL;
    sy_err err = {{0}};
    CHECK(sy_gmatcher_new(g, v, &m, &err) == SY_OK);
    if (!m)
        return;
    if (compact) /* a fresh arena before every mask: ids change under the caches */
        m->compact_nodes = 0;
    uint32_t *mask = calloc(sy_gmask_words(v), sizeof *mask);
    int32_t *ids = malloc((size_t)v->n_vocab * sizeof *ids), *puncts = malloc((size_t)v->n_vocab * sizeof *ids);
    for (int s = 0; s < steps && !sy_gmatcher_done(m); s++) {
        int rc = sy_gmatcher_fill_mask(m, mask, &err);
        if (rc) {
            /* only a grammar that cannot go on may refuse */
            CHECK_CONTAINS(err.msg, "stuck");
            break;
        }
        size_t allowed = brute_compare(m, v, mask, what);
        CHECK(allowed > 0);
        size_t n = 0, np = 0;
        for (int32_t t = 0; t < v->n_vocab; t++)
            if ((mask[t >> 5] >> (t & 31)) & 1u && v->kind[t] != GV_EOS) {
                ids[n++] = t;
                if (v->lens[t] == 1 && strchr("\",:{}[]", v->bytes[t][0]))
                    puncts[np++] = t;
            }
        if (n == 0)
            break;
        /* punctuation now and then walks through the structure */
        int32_t t = np && rnd(10) < 3 ? puncts[rnd((uint32_t)np)] : ids[rnd((uint32_t)n)];
        rc = sy_gmatcher_accept_token(m, t, &err);
        CHECK(rc == SY_OK);
        if (rc) {
            fprintf(stderr, "  %s: %s\n", what, err.msg);
            break;
        }
    }
    free(ids);
    free(puncts);
    free(mask);
    sy_gmatcher_free(m);
}

static void walk(const sy_grammar *g, const sy_gvocab *v, int steps, const char *what)
{
    walk_c(g, v, steps, what, false);
}

/* Bytes that make UTF-8 interesting: whole and partial characters. */
static const char *const frags[] = {"a", "b", "c", "\"", "{", "}", ":", ",", " ", "0", "1", "\\", "n",
                                    "\xC3\xA9", "\xC3", "\xA9", "\xE4\xB8\xAD", "\xE4\xB8", "\xAD", "\xF0\x9F\x98\x80",
                                    "\xFF", "<", ">", "_", "[", "]", "x", "\n"};

static sy_gvocab *synthetic_vocab(void)
{
    enum { N = 1400 };
    char *bytes[N];
    size_t lens[N];
    bool special[N] = {0};
    size_t n = 0;
    for (int b = 0; b < 256; b++) {
        bytes[n] = malloc(1);
        bytes[n][0] = (char)b;
        lens[n++] = 1;
    }
    size_t nf = sizeof frags / sizeof *frags;
    for (size_t i = 0; i < nf; i++)
        for (size_t j = 0; j < nf; j++) {
            char buf[16];
            size_t l = 0;
            memcpy(buf, frags[i], strlen(frags[i]));
            l += strlen(frags[i]);
            memcpy(buf + l, frags[j], strlen(frags[j]));
            l += strlen(frags[j]);
            bytes[n] = malloc(l);
            memcpy(bytes[n], buf, l);
            lens[n++] = l;
        }
    while (n < N - 8) {
        char buf[64];
        size_t l = 0;
        int k = 3 + (int)rnd(5);
        for (int i = 0; i < k; i++) {
            const char *f = frags[rnd((uint32_t)nf)];
            memcpy(buf + l, f, strlen(f));
            l += strlen(f);
        }
        bytes[n] = malloc(l);
        memcpy(bytes[n], buf, l);
        lens[n++] = l;
    }
    const char *specials[] = {"<tool_call>", "</tool_call>", "<|end|>", "ab"};
    for (int i = 0; i < 4; i++) {
        lens[n] = strlen(specials[i]);
        bytes[n] = malloc(lens[n]);
        memcpy(bytes[n], specials[i], lens[n]);
        special[n++] = true;
    }
    bytes[n] = malloc(2);
    memcpy(bytes[n], "ab", 2); /* an ordinary duplicate of "ab" */
    lens[n++] = 2;
    bytes[n] = NULL; /* an unused id */
    lens[n++] = 0;
    int32_t eos[2] = {(int32_t)n, (int32_t)n + 1};
    bytes[n] = malloc(5);
    memcpy(bytes[n], "</s>!", 5);
    lens[n++] = 5;
    bytes[n] = malloc(5);
    memcpy(bytes[n], "<eot>", 5);
    lens[n++] = 5;
    sy_gvocab *v = NULL;
    sy_err err = {{0}};
    CHECK(sy_gvocab_new((int32_t)n, (const char *const *)bytes, lens, special, eos, 2, &v, &err) == SY_OK);
    for (size_t i = 0; i < n; i++)
        free(bytes[i]);
    return v;
}

/* A random grammar over the fragments; rules refer to later rules, and
 * back to earlier ones only after a literal (so no left recursion). */
static void random_expr(sy_gbuf *b, int rule, int nrules, int depth)
{
    int k = (int)rnd(depth > 2 ? 4 : 8);
    switch (k) {
    case 0:
    case 1: {
        const char *f = frags[rnd(sizeof frags / sizeof *frags - 1)]; /* not \xFF: literals are UTF-8 */
        if ((unsigned char)f[0] >= 0x80 && (strlen(f) < 2 || ((unsigned char)f[0] == 0xE4 && strlen(f) < 3)))
            f = "a";
        sy_gbuf_literal(b, f, strlen(f));
        if (rnd(3) == 0) {
            sy_gbuf_literal(b, "ab", 2);
        }
        break;
    }
    case 2: {
        static const char *const cls[] = {"[a-c]", "[^a\"]", "[\\u00e9-\\u4e2d]", "[0-9]", "[^\\x00-\\x7F]", ".",
                                          "[a\\u00e9]"};
        sy_gbuf_puts(b, cls[rnd(7)]);
        break;
    }
    case 3:
        if (rule + 1 < nrules)
            sy_gbuf_printf(b, "r%d", rule + 1 + (int)rnd((uint32_t)(nrules - rule - 1)));
        else
            sy_gbuf_puts(b, "\"x\"");
        break;
    case 4:
        sy_gbuf_puts(b, "\"{\" ");
        sy_gbuf_printf(b, "r%d", (int)rnd((uint32_t)nrules));
        sy_gbuf_puts(b, " \"}\"");
        break;
    case 5:
        sy_gbuf_puts(b, "(");
        random_expr(b, rule, nrules, depth + 1);
        sy_gbuf_puts(b, " | ");
        random_expr(b, rule, nrules, depth + 1);
        sy_gbuf_puts(b, ")");
        break;
    case 6: {
        static const char *const reps[] = {"*", "+", "?", "{2}", "{1,3}", "{0,2}", "{2,}"};
        sy_gbuf_puts(b, "(");
        random_expr(b, rule, nrules, depth + 1);
        sy_gbuf_puts(b, ")");
        sy_gbuf_puts(b, reps[rnd(7)]);
        break;
    }
    default:
        random_expr(b, rule, nrules, depth + 1);
        sy_gbuf_puts(b, " ");
        random_expr(b, rule, nrules, depth + 1);
        break;
    }
}

static void test_masks_synthetic(void)
{
    sy_gvocab *v = synthetic_vocab();
    if (!v)
        return;
    int compiled = 0;
    for (int iter = 0; iter < 120; iter++) {
        sy_gbuf b;
        sy_gbuf_init(&b);
        int nrules = 1 + (int)rnd(4);
        for (int r = 0; r < nrules; r++) {
            if (r == 0)
                sy_gbuf_puts(&b, "root ::= ");
            else
                sy_gbuf_printf(&b, "r%d ::= ", r);
            random_expr(&b, r, nrules, 0);
            if (rnd(2)) {
                sy_gbuf_puts(&b, " | ");
                random_expr(&b, r, nrules, 1);
            }
            sy_gbuf_puts(&b, "\n");
        }
        sy_gbuf_puts(&b, "r0 ::= \"<\" root \">\"\n");
        sy_err err = {{0}};
        sy_grammar *g = compile(b.s, "root", &err);
        if (!g) {
            /* only the documented refusals */
            bool known = strstr(err.msg, "left-recursive") || strstr(err.msg, "derives no finite text");
            CHECK(known);
            if (!known)
                fprintf(stderr, "  %s\n  for grammar:\n%s", err.msg, b.s);
            sy_gbuf_free(&b);
            continue;
        }
        compiled++;
        char what[64];
        snprintf(what, sizeof what, "random grammar %d", iter);
        int before = sy_test_failures;
        for (int w = 0; w < 3; w++)
            walk_c(g, v, 12, what, w == 2);
        if (sy_test_failures != before)
            fprintf(stderr, "  grammar %d:\n%s", iter, b.s);
        sy_grammar_free(g);
        sy_gbuf_free(&b);
    }
    CHECK(compiled >= 60);
    printf("random grammars: %d compiled and walked\n", compiled);

    /* special tokens: only as a whole literal */
    sy_err err = {{0}};
    const char *sp = "root ::= \"<tool_call>\" [a-z]+ \"<|end|>\" | \"<tool\" \"_call>\" \"!\" | [^x]* \"</tool_call>\"";
    sy_grammar *g = compile(sp, "root", &err);
    CHECK(g != NULL);
    if (g) {
        walk(g, v, 10, "special grammar");
        sy_gmatcher *m = NULL;
        sy_gmatcher_new(g, v, &m, &err);
        uint32_t *mask = calloc(sy_gmask_words(v), sizeof *mask);
        int32_t tool = -1, end = -1;
        for (int32_t t = 0; t < v->n_vocab; t++) {
            if (v->kind[t] == GV_SPECIAL && v->lens[t] == 11 && !memcmp(v->bytes[t], "<tool_call>", 11))
                tool = t;
            if (v->kind[t] == GV_SPECIAL && v->lens[t] == 7 && !memcmp(v->bytes[t], "<|end|>", 7))
                end = t;
        }
        CHECK(m && sy_gmatcher_fill_mask(m, mask, &err) == SY_OK);
        CHECK(tool >= 0 && ((mask[tool >> 5] >> (tool & 31)) & 1u));
        CHECK(end >= 0 && !((mask[end >> 5] >> (end & 31)) & 1u)); /* [^x]* never admits a special token */
        CHECK(m && sy_gmatcher_accept_token(m, tool, &err) == SY_OK);
        CHECK(m && sy_gmatcher_accept_token(m, end, &err) != SY_OK); /* [a-z]+ needs a letter first */
        CHECK(m && sy_gmatcher_accept_bytes(m, "q", 1));
        CHECK(m && sy_gmatcher_accept_token(m, end, &err) == SY_OK && sy_gmatcher_done(m));
        free(mask);
        sy_gmatcher_free(m);
        sy_grammar_free(g);
    }
    /* a grammar that ends with no EOS token in reach still says so */
    g = compile("root ::= \"a\"", "root", &err);
    if (g) {
        sy_gmatcher *m = NULL;
        sy_gmatcher_new(g, v, &m, &err);
        uint32_t *mask = calloc(sy_gmask_words(v), sizeof *mask);
        CHECK(m && sy_gmatcher_accept_bytes(m, "a", 1) && sy_gmatcher_done(m));
        CHECK(m && sy_gmatcher_fill_mask(m, mask, &err) == SY_OK);
        CHECK(m && ((mask[v->eos[0] >> 5] >> (v->eos[0] & 31)) & 1u));
        CHECK(m && sy_gmatcher_accept_token(m, v->eos[0], &err) == SY_OK);
        CHECK(m && sy_gmatcher_fill_mask(m, mask, &err) != SY_OK);
        CHECK_CONTAINS(err.msg, "ended");
        free(mask);
        sy_gmatcher_free(m);
        sy_grammar_free(g);
    }
    sy_gvocab_free(v);
}

/* ------------------------------------------------------------ real vocabularies */

static sy_tokenizer *load_tok(const char *shared, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tokenizers/%s/tokenizer.json", shared, name);
    sy_tokenizer *t = NULL;
    sy_err err = {{0}};
    int rc = sy_tokenizer_load_file(path, &t, &err);
    CHECK(rc == SY_OK);
    if (rc)
        fprintf(stderr, "  %s: %s\n", path, err.msg);
    return t;
}

static void expect_bytes(const sy_tokenizer *t, const char *piece, const char *bytes, size_t n)
{
    int32_t id = sy_tokenizer_token_id(t, piece);
    CHECK(id >= 0);
    char buf[64];
    int len = id >= 0 ? sy_tokenizer_token_bytes(t, id, buf, sizeof buf) : -1;
    CHECK(len == (int)n && memcmp(buf, bytes, n) == 0);
    if (len != (int)n || memcmp(buf, bytes, n))
        fprintf(stderr, "  piece %s: %d bytes\n", piece, len);
}

/* Encoding then joining the tokens' bytes gives the text back (SentencePiece
 * adds its leading space). */
static void check_roundtrip(const sy_tokenizer *t, const char *text, bool spm)
{
    int32_t *ids = NULL;
    size_t n = 0;
    sy_err err;
    CHECK(sy_tokenizer_encode(t, text, strlen(text), 0, &ids, &n, &err) == SY_OK);
    sy_gbuf b;
    sy_gbuf_init(&b);
    for (size_t i = 0; i < n; i++) {
        char buf[256];
        int len = sy_tokenizer_token_bytes(t, ids[i], buf, sizeof buf);
        CHECK(len > 0 && len <= 256);
        if (len > 0)
            sy_gbuf_putn(&b, buf, (size_t)len);
    }
    const char *got = b.s ? b.s : "";
    if (spm && got[0] == ' ')
        got++;
    CHECK(strcmp(got, text) == 0);
    if (strcmp(got, text))
        fprintf(stderr, "  round trip of \"%s\" gave \"%s\"\n", text, got);
    sy_gbuf_free(&b);
    free(ids);
}

static const char schema_like[] =
    "root ::= \"{\" ws \"\\\"name\\\"\" ws \":\" ws string ws \",\" ws \"\\\"age\\\"\" ws \":\" ws int ws "
    "(\",\" ws \"\\\"tags\\\"\" ws \":\" ws \"[\" ws (string (ws \",\" ws string)*)? ws \"]\")? ws \"}\"\n"
    "string ::= \"\\\"\" ([^\"\\\\\\x00-\\x1F] | \"\\\\\" [\"\\\\/bfnrt])* \"\\\"\"\n"
    "int ::= \"-\"? (\"0\" | [1-9] [0-9]{0,8})\n"
    "ws ::= \" \"?\n";

static const char nested_schema[] =
    "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"},\"name\":{\"type\":\"string\"},"
    "\"ok\":{\"type\":\"boolean\"},\"role\":{\"enum\":[\"admin\",\"user\"]},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"maxItems\":3},"
    "\"addr\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"]}},"
    "\"required\":[\"name\",\"addr\"]}";

static void test_real_vocab(const char *shared, const char *name, bool spm)
{
    sy_tokenizer *t = load_tok(shared, name);
    if (!t)
        return;
    if (spm) {
        expect_bytes(t, "\xE2\x96\x81the", " the", 4);
        expect_bytes(t, "<0x0A>", "\n", 1);
        expect_bytes(t, "<0xE4>", "\xE4", 1);
    } else {
        expect_bytes(t, "\xC4\xA0the", " the", 4);
        expect_bytes(t, "\xC4\x8A", "\n", 1);
    }
    check_roundtrip(t, "Hello world, \xE4\xB8\xAD\xE6\x96\x87 and {\"json\": [1, 2]}\n\ttabs", spm);
    check_roundtrip(t, "caf\xC3\xA9 \xF0\x9F\x98\x80 emoji", spm);
    sy_gvocab *v = NULL;
    sy_err err = {{0}};
    int32_t eos = 0;
    CHECK(sy_gvocab_from_tokenizer(t, &eos, 1, &v, &err) == SY_OK);
    if (v) {
        const char *grams[] = {json_gbnf, schema_like, "root ::= [a-z ]{1,30} \".\""};
        for (int i = 0; i < 3; i++) {
            sy_grammar *g = compile(grams[i], "root", &err);
            CHECK(g != NULL);
            if (!g)
                continue;
            char what[64];
            snprintf(what, sizeof what, "%s grammar %d", name, i);
            walk(g, v, 14, what);
            sy_grammar_free(g);
        }
        /* the builders' grammars: a nested schema (shared rules copied per
         * call site) and any JSON object */
        for (int i = 0; i < 2; i++) {
            sy_gsrc *src = sy_gsrc_new();
            sy_grammar *g = NULL;
            int rc = i == 0 ? sy_gsrc_add_json_schema(src, "root", nested_schema, "schema", &err)
                            : sy_gsrc_add_json_any(src, "root", true, &err);
            if (rc == SY_OK)
                rc = sy_grammar_compile(src, "root", &g, &err);
            CHECK(rc == SY_OK);
            if (rc)
                fprintf(stderr, "  %s\n", err.msg);
            sy_gsrc_free(src);
            if (!g)
                continue;
            char what[64];
            snprintf(what, sizeof what, "%s %s", name, i == 0 ? "nested schema" : "json object");
            for (int w = 0; w < 2; w++)
                walk(g, v, 16, what);
            sy_grammar_free(g);
        }
    }
    sy_gvocab_free(v);
    sy_tokenizer_free(t);
}

/* ------------------------------------------------------------ cache */

typedef struct cache_arg {
    pthread_mutex_t mu;
    int builds;
    const char *gbnf;
} cache_arg;

static int cache_build(void *arg, sy_gsrc *src, sy_err *err)
{
    cache_arg *a = arg;
    pthread_mutex_lock(&a->mu);
    a->builds++;
    pthread_mutex_unlock(&a->mu);
    return sy_gsrc_add_gbnf(src, a->gbnf, "cached", err);
}

typedef struct cache_job {
    sy_grammar_cache *c;
    cache_arg *arg;
    const sy_grammar *g;
    int rc;
} cache_job;

static void *cache_thread(void *p)
{
    cache_job *j = p;
    sy_err err;
    j->rc = sy_grammar_cache_get(j->c, "k1", 2, cache_build, j->arg, &j->g, &err);
    return NULL;
}

static void test_cache(void)
{
    sy_grammar_cache *c = sy_grammar_cache_new(2);
    cache_arg a = {PTHREAD_MUTEX_INITIALIZER, 0, "root ::= [a-z]+ \"!\""};
    enum { T = 8 };
    pthread_t th[T];
    cache_job jobs[T];
    for (int i = 0; i < T; i++) {
        jobs[i] = (cache_job){c, &a, NULL, -1};
        pthread_create(&th[i], NULL, cache_thread, &jobs[i]);
    }
    for (int i = 0; i < T; i++)
        pthread_join(th[i], NULL);
    CHECK(a.builds == 1); /* one compile for eight concurrent requests */
    for (int i = 0; i < T; i++) {
        CHECK(jobs[i].rc == SY_OK && jobs[i].g == jobs[0].g);
        if (jobs[i].g)
            CHECK(sy_grammar_accepts(jobs[i].g, "abc!", 4) && !sy_grammar_accepts(jobs[i].g, "abc", 3));
    }
    /* two more keys while k1 is held: k1 stays (in use) */
    const sy_grammar *g2 = NULL, *g3 = NULL, *again = NULL;
    sy_err err = {{0}};
    CHECK(sy_grammar_cache_get(c, "k2", 2, cache_build, &a, &g2, &err) == SY_OK);
    CHECK(sy_grammar_cache_get(c, "k3", 2, cache_build, &a, &g3, &err) == SY_OK);
    CHECK(a.builds == 3);
    CHECK(sy_grammar_cache_get(c, "k1", 2, cache_build, &a, &again, &err) == SY_OK && again == jobs[0].g);
    CHECK(a.builds == 3);
    sy_grammar_cache_release(c, again);
    for (int i = 0; i < T; i++)
        sy_grammar_cache_release(c, jobs[i].g);
    sy_grammar_cache_release(c, g2);
    sy_grammar_cache_release(c, g3);
    /* now over the bound with nothing in use: the least recent (k1) went */
    CHECK(sy_grammar_cache_get(c, "k3", 2, cache_build, &a, &again, &err) == SY_OK && a.builds == 3);
    sy_grammar_cache_release(c, again);
    CHECK(sy_grammar_cache_get(c, "k1", 2, cache_build, &a, &again, &err) == SY_OK && a.builds == 4);
    sy_grammar_cache_release(c, again);
    /* a failing build is reported and not cached */
    cache_arg bad = {PTHREAD_MUTEX_INITIALIZER, 0, "root ::= nope"};
    CHECK(sy_grammar_cache_get(c, "bad", 3, cache_build, &bad, &again, &err) == SY_ERR_INVALID && !again);
    CHECK_CONTAINS(err.msg, "undefined rule nope");
    CHECK(sy_grammar_cache_get(c, "bad", 3, cache_build, &bad, &again, &err) == SY_ERR_INVALID && bad.builds == 2);
    sy_grammar_cache_free(c);
}

/* Matchers of one grammar filling masks on several threads at once (the
 * token caches fill concurrently) give the masks one thread gives. */
typedef struct mask_job {
    const sy_grammar *g;
    const sy_gvocab *v;
    const uint32_t *want; /* n_prefixes masks */
    int bad;
} mask_job;

static const char *const mask_prefixes[] = {"", "{", "{\"name\": \"a", "{\"name\": \"ab\", \"age\": 1",
                                            "{\"name\": \"\xC3\xA9\",\"age\":-2,\"tags\": [\"x\""};
enum { N_PREFIXES = sizeof mask_prefixes / sizeof *mask_prefixes };

static int masks_for(const sy_grammar *g, const sy_gvocab *v, uint32_t *out)
{
    size_t words = sy_gmask_words(v);
    for (int k = 0; k < N_PREFIXES; k++) {
        sy_gmatcher *m = NULL;
        sy_err err;
        if (sy_gmatcher_new(g, v, &m, &err))
            return -1;
        int rc = sy_gmatcher_accept_bytes(m, mask_prefixes[k], strlen(mask_prefixes[k])) ? 0 : -1;
        if (!rc)
            rc = sy_gmatcher_fill_mask(m, out + (size_t)k * words, &err);
        sy_gmatcher_free(m);
        if (rc)
            return -1;
    }
    return 0;
}

static void *mask_thread(void *p)
{
    mask_job *j = p;
    size_t words = sy_gmask_words(j->v);
    uint32_t *got = calloc(words * N_PREFIXES, sizeof *got);
    j->bad = !got || masks_for(j->g, j->v, got) || memcmp(got, j->want, words * N_PREFIXES * sizeof *got) != 0;
    free(got);
    return NULL;
}

static void test_concurrent_masks(void)
{
    sy_gvocab *v = synthetic_vocab();
    sy_err err = {{0}};
    sy_grammar *ref = compile(schema_like, "root", &err), *g = compile(schema_like, "root", &err);
    CHECK(v && ref && g);
    if (v && ref && g) {
        size_t words = sy_gmask_words(v);
        uint32_t *want = calloc(words * N_PREFIXES, sizeof *want);
        CHECK(masks_for(ref, v, want) == 0);
        enum { T = 4 };
        pthread_t th[T];
        mask_job jobs[T];
        for (int i = 0; i < T; i++) {
            jobs[i] = (mask_job){g, v, want, 1};
            pthread_create(&th[i], NULL, mask_thread, &jobs[i]);
        }
        for (int i = 0; i < T; i++) {
            pthread_join(th[i], NULL);
            CHECK(jobs[i].bad == 0);
        }
        free(want);
    }
    sy_grammar_free(ref);
    sy_grammar_free(g);
    sy_gvocab_free(v);
}

int main(void)
{
    const char *shared = getenv("SY_SHARED_DIR");
    if (!shared || !*shared) {
        fprintf(stderr, "test_grammar: SY_SHARED_DIR is not set (make check sets it to the shared test data)\n");
        return 1;
    }
    test_errors();
    test_too_ambiguous();
    test_languages();
    test_cache();
    test_concurrent_masks();
    test_masks_synthetic();
    test_real_vocab(shared, "llama2-spm", true);
    test_real_vocab(shared, "cl100k", false);
    return sy_test_done("test_grammar");
}
