/*
 * JSON schema grammars against the python jsonschema package: for
 * hand-written and random schemas, random walks of the matcher (a random
 * allowed byte at a time, from the token mask of a one-byte-per-token
 * vocabulary, until the grammar may end) must each be JSON that validates;
 * so must every mutation of a walk that the grammar still accepts; and
 * hand-written invalid documents must be rejected by the grammar and by
 * jsonschema alike.
 *
 * The oracle is tests/unit/jsonschema_oracle.py under $SY_SRCDIR, run by
 * $PYTHON_JSONSCHEMA (configure sets it; python3 when empty). Without an
 * importable jsonschema the test fails: it never skips.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "grammar/grammar.h"
#include "test_check.h"

#define MAX_WALK 3000

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t next(rng *r)
{
    r->s ^= r->s << 13;
    r->s ^= r->s >> 7;
    r->s ^= r->s << 17;
    return r->s;
}

static unsigned pick(rng *r, unsigned n) { return (unsigned)(next(r) % n); }
static bool chance(rng *r, unsigned pct) { return pick(r, 100) < pct; }

/* ------------------------------------------------------------ walks */

typedef struct walker {
    sy_gvocab *vocab; /* token b is the byte b */
    uint32_t *mask;
    size_t words;
    long steps, too_long, dead_ends;
} walker;

static int walker_init(walker *w)
{
    static char bytes[256];
    const char *ptr[256];
    size_t lens[256];
    for (int i = 0; i < 256; i++) {
        bytes[i] = (char)i;
        ptr[i] = &bytes[i];
        lens[i] = 1;
    }
    sy_err err = {{0}};
    memset(w, 0, sizeof *w);
    if (sy_gvocab_new(256, ptr, lens, NULL, NULL, 0, &w->vocab, &err) != SY_OK) {
        fprintf(stderr, "sy_gvocab_new: %s\n", err.msg);
        return -1;
    }
    w->words = sy_gmask_words(w->vocab);
    w->mask = calloc(w->words, sizeof *w->mask);
    return w->mask ? 0 : -1;
}

/* A random sentence of g into out (NUL-terminated); false when the walk ran
 * past MAX_WALK bytes or found no byte to go on with. Closing bytes are
 * favoured so that walks stay short. */
static bool walk(walker *w, const sy_grammar *g, rng *r, char *out, size_t *len)
{
    sy_gmatcher *m;
    sy_err err = {{0}};
    *len = 0;
    if (sy_gmatcher_new(g, w->vocab, &m, &err) != SY_OK) {
        fprintf(stderr, "sy_gmatcher_new: %s\n", err.msg);
        return false;
    }
    bool ok = false;
    for (;;) {
        if (sy_gmatcher_done(m) || (sy_gmatcher_can_end(m) && chance(r, 40))) {
            ok = true;
            break;
        }
        if (*len >= MAX_WALK) {
            w->too_long++;
            break;
        }
        if (sy_gmatcher_fill_mask(m, w->mask, &err) != SY_OK) {
            fprintf(stderr, "fill_mask: %s\n", err.msg);
            break;
        }
        int allowed[256], n = 0, closers[8], nc = 0;
        for (int b = 0; b < 256; b++)
            if (w->mask[b / 32] >> (b % 32) & 1) {
                allowed[n++] = b;
                if (b == '"' || b == '}' || b == ']')
                    closers[nc++] = b;
            }
        if (!n) {
            if (sy_gmatcher_can_end(m)) {
                ok = true;
                break;
            }
            w->dead_ends++;
            fprintf(stderr, "walk: no byte may follow \"%.*s\" and the text cannot end\n", (int)*len, out);
            break;
        }
        int b = nc && chance(r, 30) ? closers[pick(r, (unsigned)nc)] : allowed[pick(r, (unsigned)n)];
        if (sy_gmatcher_accept_token(m, b, &err) != SY_OK) {
            fprintf(stderr, "walk: byte %d was in the mask but accept_token refused it: %s\n", b, err.msg);
            w->dead_ends++;
            break;
        }
        out[(*len)++] = (char)b;
        w->steps++;
    }
    out[*len] = '\0';
    sy_gmatcher_free(m);
    return ok;
}

/* ------------------------------------------------------------ cases */

typedef struct cases {
    FILE *f;
    long texts, schemas;
} cases;

/* One line of the oracle's input; texts must be UTF-8 (a grammar that let
 * a walk produce anything else is itself a failure). */
static void add_case(cases *cs, const char *schema, json_t *texts, bool valid)
{
    json_t *s = json_loads(schema, JSON_DECODE_ANY, NULL);
    CHECK(s != NULL);
    json_t *line = json_pack("{s:o, s:O, s:b}", "schema", s, "texts", texts, "valid", valid);
    char *text = line ? json_dumps(line, JSON_COMPACT) : NULL;
    CHECK(text != NULL);
    if (text) {
        fprintf(cs->f, "%s\n", text);
        cs->texts += (long)json_array_size(texts);
        cs->schemas++;
    }
    free(text);
    json_decref(line);
}

static bool push_text(json_t *texts, const char *t, size_t n)
{
    json_t *s = json_stringn(t, n);
    if (!s)
        return false;
    json_array_append_new(texts, s);
    return true;
}

static sy_grammar *compile_schema(const char *schema, unsigned flags)
{
    sy_gsrc *src = sy_gsrc_new();
    sy_err err = {{0}};
    sy_grammar *g = NULL;
    if (sy_gsrc_add_json_schema_flags(src, "root", schema, "schema", flags, &err) != SY_OK ||
        sy_grammar_compile(src, "root", &g, &err) != SY_OK) {
        fprintf(stderr, "schema %s: %s\n", schema, err.msg);
        g = NULL;
    }
    sy_gsrc_free(src);
    return g;
}

/* Walks schema n times (plus mutations of each walk the grammar still
 * accepts) into one oracle case. */
static void walk_schema(cases *cs, walker *w, rng *r, const char *schema, unsigned flags, int n)
{
    sy_grammar *g = compile_schema(schema, flags);
    CHECK(g != NULL);
    if (!g)
        return;
    json_t *texts = json_array();
    static char buf[MAX_WALK + 1], mut[MAX_WALK + 8];
    int walked = 0;
    for (int i = 0; i < n; i++) {
        size_t len;
        if (!walk(w, g, r, buf, &len))
            continue;
        walked++;
        if (!sy_grammar_accepts(g, buf, len)) {
            sy_test_checks++, sy_test_failures++;
            fprintf(stderr, "schema %s: the walk \"%s\" is not accepted by sy_grammar_accepts\n", schema, buf);
        }
        if (!push_text(texts, buf, len)) {
            sy_test_checks++, sy_test_failures++;
            fprintf(stderr, "schema %s: the walk produced invalid UTF-8: \"%s\"\n", schema, buf);
            continue;
        }
        static const char alphabet[] = "\"{}[],: 0123456789-.eEtrufalsn\\ax";
        for (int k = 0; k < 4 && len; k++) {
            size_t at = pick(r, (unsigned)len), ml = 0;
            memcpy(mut, buf, at);
            ml = at;
            switch (pick(r, 3)) {
            case 0: /* delete */
                memcpy(mut + ml, buf + at + 1, len - at - 1);
                ml += len - at - 1;
                break;
            case 1: /* insert */
                mut[ml++] = alphabet[pick(r, sizeof alphabet - 1)];
                memcpy(mut + ml, buf + at, len - at);
                ml += len - at;
                break;
            default: /* replace */
                mut[ml++] = alphabet[pick(r, sizeof alphabet - 1)];
                memcpy(mut + ml, buf + at + 1, len - at - 1);
                ml += len - at - 1;
            }
            if (sy_grammar_accepts(g, mut, ml))
                push_text(texts, mut, ml); /* invalid UTF-8 is never accepted: the bytes were ASCII */
        }
    }
    /* A schema whose every walk ran long would check nothing. */
    sy_test_checks++;
    if (walked < n / 2) {
        sy_test_failures++;
        fprintf(stderr, "schema %s: only %d of %d walks ended within %d bytes\n", schema, walked, n, MAX_WALK);
    }
    if (json_array_size(texts))
        add_case(cs, schema, texts, true);
    json_decref(texts);
    sy_grammar_free(g);
}

/* ------------------------------------------------------------ random schemas */

static const char *const names[] = {"a", "b", "name", "id", "\xc3\xa9t\xc3\xa9", "a b", "q\"t", "x/y", "back\\slash",
                                    "n1", "kind", "items"};
static const char *const patterns[] = {
    "^[a-z]{2,5}$", "[a-f]",       "^\\d+(\\.\\d{1,2})?$", "[A-Z]", "^(foo|bar)-[0-9]{3}$", "x*y?[a-z]",
    "^\\w+@\\w+\\.com$", "^[^\"\\\\]{0,3}$", "\\s", "^\\S{2}$", ".", "^.{1,3}$", "^(?:a|b)+$", "^\xc3\xa9",
    "^[\\u00e0-\\u00ff]+$", "[q-z]$", "^\\W\\D", "^[\\s\\d]*$", "^a|[b-z]$"};
/* (Unanchored patterns are ones a random walk meets soon: it can end only
 * after the pattern matched.) */
static const char *const formats[] = {"date", "time", "date-time", "uuid", "email", "ipv4"};

static json_t *rand_schema(rng *r, int depth);

static json_t *rand_scalar(rng *r, int kind)
{
    json_t *s = json_object();
    switch (kind) {
    case 0: { /* string */
        json_object_set_new(s, "type", json_string("string"));
        switch (pick(r, 6)) {
        case 0: break;
        case 5: { /* one repeated class, with lengths */
            static const char *const cls[] = {"^[a-z_]+$", "^\\d{2,6}$", "^[^\"a]*$", "^.{1,}$", "^\\S*?$", "^[\\u00e0-\\u00ff]*$"};
            long lo = 2 + pick(r, 2), hi = lo + pick(r, 6); /* every pattern has strings this long */
            json_object_set_new(s, "pattern", json_string(cls[pick(r, sizeof cls / sizeof *cls)]));
            json_object_set_new(s, "minLength", json_integer(lo));
            json_object_set_new(s, "maxLength", json_integer(hi));
            break;
        }
        case 1: {
            long lo = pick(r, 4), hi = lo + pick(r, 5);
            if (chance(r, 70))
                json_object_set_new(s, "minLength", json_integer(lo));
            json_object_set_new(s, "maxLength", json_integer(hi));
            break;
        }
        case 2: json_object_set_new(s, "pattern", json_string(patterns[pick(r, sizeof patterns / sizeof *patterns)])); break;
        case 3: json_object_set_new(s, "format", json_string(formats[pick(r, sizeof formats / sizeof *formats)])); break;
        default: {
            json_t *e = json_array();
            for (unsigned i = 0, n = 1 + pick(r, 3); i < n; i++)
                json_array_append_new(e, json_string(names[pick(r, sizeof names / sizeof *names)]));
            json_object_set_new(s, "enum", e);
        }
        }
        break;
    }
    case 1:   /* integer */
    case 2: { /* number */
        json_object_set_new(s, "type", json_string(kind == 1 ? "integer" : "number"));
        long lo = (long)pick(r, 300) - 100, hi = lo + (long)pick(r, 250);
        unsigned shape = pick(r, 4);
        if (shape == 1 || shape == 3)
            json_object_set_new(s, chance(r, 30) ? "exclusiveMinimum" : "minimum", json_integer(lo));
        if (shape == 2 || shape == 3)
            json_object_set_new(s, chance(r, 30) ? "exclusiveMaximum" : "maximum", json_integer(hi + 2));
        break;
    }
    case 3: json_object_set_new(s, "type", json_string("boolean")); break;
    case 4: json_object_set_new(s, "type", json_string("null")); break;
    default: {
        json_t *v = pick(r, 2) ? json_integer((json_int_t)pick(r, 100)) : json_string(names[pick(r, 12)]);
        json_object_set_new(s, "const", v);
    }
    }
    return s;
}

static json_t *rand_schema(rng *r, int depth)
{
    unsigned kind = depth <= 0 ? pick(r, 6) : pick(r, 11);
    if (kind < 6)
        return rand_scalar(r, (int)kind);
    json_t *s = json_object();
    if (kind == 6 || kind == 7) { /* object */
        json_object_set_new(s, "type", json_string("object"));
        json_t *props = json_object(), *req = json_array();
        for (unsigned i = 0, n = pick(r, 5); i < n; i++) {
            const char *k = names[pick(r, sizeof names / sizeof *names)];
            if (json_object_get(props, k))
                continue;
            json_object_set_new(props, k, rand_schema(r, depth - 1));
            if (chance(r, 50))
                json_array_append_new(req, json_string(k));
        }
        json_object_set_new(s, "properties", props);
        if (chance(r, 10))
            json_array_append_new(req, json_string("undeclared"));
        if (json_array_size(req))
            json_object_set_new(s, "required", req);
        else
            json_decref(req);
        switch (pick(r, 4)) {
        case 0: break;
        case 1: json_object_set_new(s, "additionalProperties", json_false()); break;
        case 2: json_object_set_new(s, "additionalProperties", json_true()); break;
        default: json_object_set_new(s, "additionalProperties", rand_scalar(r, (int)pick(r, 5)));
        }
        /* "undeclared" must stay possible. */
        json_t *ap = json_object_get(s, "additionalProperties");
        if (json_is_false(ap) && json_object_get(s, "required")) {
            json_t *rq = json_object_get(s, "required");
            for (size_t i = 0; i < json_array_size(rq); i++)
                if (!strcmp(json_string_value(json_array_get(rq, i)), "undeclared"))
                    json_object_del(s, "additionalProperties");
        }
    } else if (kind == 8) { /* array */
        json_object_set_new(s, "type", json_string("array"));
        if (chance(r, 30)) {
            json_t *pre = json_array();
            for (unsigned i = 0, n = 1 + pick(r, 3); i < n; i++)
                json_array_append_new(pre, rand_schema(r, depth - 1));
            json_object_set_new(s, "prefixItems", pre);
            json_object_set_new(s, "items", chance(r, 50) ? json_false() : rand_schema(r, depth - 1));
        } else {
            json_object_set_new(s, "items", rand_schema(r, depth - 1));
        }
        long lo = pick(r, 3);
        if (chance(r, 50))
            json_object_set_new(s, "minItems", json_integer(lo));
        if (chance(r, 50))
            json_object_set_new(s, "maxItems", json_integer(lo + pick(r, 4)));
        if (json_is_false(json_object_get(s, "items")) && json_object_get(s, "minItems") &&
            (size_t)lo > json_array_size(json_object_get(s, "prefixItems")))
            json_object_del(s, "minItems");
    } else if (kind == 9) { /* anyOf: branches may overlap */
        json_t *alts = json_array();
        for (unsigned i = 0, n = 2 + pick(r, 2); i < n; i++)
            json_array_append_new(alts, rand_schema(r, depth - 1));
        json_object_set_new(s, "anyOf", alts);
    } else { /* oneOf: branches of different types, so exactly one matches */
        static const int kinds[] = {0, 1, 3, 4};
        unsigned a = pick(r, 4), b = (a + 1 + pick(r, 3)) % 4;
        json_t *alts = json_array();
        json_array_append_new(alts, rand_scalar(r, kinds[a]));
        json_array_append_new(alts, rand_scalar(r, kinds[b]));
        /* A const or enum branch may hold any type: keep the types apart. */
        json_object_set_new(s, "oneOf", alts);
    }
    return s;
}

/* ------------------------------------------------------------ hand-written */

static const char *const hand_schemas[] = {
    /* A 10-property nested record. */
    "{\"type\":\"object\",\"properties\":{"
    "\"id\":{\"type\":\"string\",\"format\":\"uuid\"},"
    "\"name\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":20},"
    "\"email\":{\"type\":\"string\",\"format\":\"email\"},"
    "\"born\":{\"type\":\"string\",\"format\":\"date\"},"
    "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":130},"
    "\"score\":{\"type\":\"number\",\"exclusiveMinimum\":0,\"maximum\":1},"
    "\"status\":{\"enum\":[\"active\",\"banned\",\"pending\"]},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"pattern\":\"^[a-z]+$\"},\"maxItems\":4},"
    "\"address\":{\"type\":\"object\",\"properties\":{\"street\":{\"type\":\"string\"},\"zip\":{\"type\":\"string\","
    "\"pattern\":\"^[0-9]{5}$\"},\"geo\":{\"type\":\"array\",\"prefixItems\":[{\"type\":\"number\"},{\"type\":"
    "\"number\"}],\"items\":false,\"minItems\":2}},\"required\":[\"zip\"],\"additionalProperties\":false},"
    "\"nickname\":{\"type\":[\"string\",\"null\"],\"maxLength\":8}},"
    "\"required\":[\"id\",\"name\",\"status\",\"address\"]}",
    /* A tool's arguments. */
    "{\"type\":\"object\",\"properties\":{\"location\":{\"type\":\"string\",\"description\":\"City\"},"
    "\"unit\":{\"type\":\"string\",\"enum\":[\"celsius\",\"fahrenheit\"]},\"days\":{\"type\":\"integer\","
    "\"minimum\":1,\"maximum\":14}},\"required\":[\"location\"]}",
    /* What pydantic writes: $defs, anyOf with null, titles and defaults. */
    "{\"$defs\":{\"Item\":{\"properties\":{\"sku\":{\"title\":\"Sku\",\"type\":\"string\"},\"qty\":{\"title\":\"Qty\","
    "\"type\":\"integer\",\"exclusiveMinimum\":0}},\"required\":[\"sku\",\"qty\"],\"title\":\"Item\",\"type\":"
    "\"object\"}},\"properties\":{\"items\":{\"items\":{\"$ref\":\"#/$defs/Item\"},\"title\":\"Items\",\"type\":"
    "\"array\"},\"note\":{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"null\"}],\"default\":null,\"title\":\"Note\"}},"
    "\"required\":[\"items\"],\"title\":\"Order\",\"type\":\"object\"}",
    /* Recursion. */
    "{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},\"kids\":{\"type\":"
    "\"array\",\"items\":{\"$ref\":\"#/$defs/node\"},\"maxItems\":2}},\"required\":[\"v\"]}},\"$ref\":\"#/$defs/node\"}",
    /* Unanchored and anchored patterns (ones a random walk meets soon:
     * the walk can end only once the pattern matched), the other formats. */
    "{\"type\":\"array\",\"prefixItems\":[{\"type\":\"string\",\"pattern\":\"[0-9]\"},{\"type\":\"string\",\"pattern\":"
    "\"^do\"},{\"type\":\"string\",\"pattern\":\"[gh]$\"},{\"type\":\"string\",\"format\":\"time\"},{\"type\":\"string\","
    "\"format\":\"date-time\"},{\"type\":\"string\",\"format\":\"ipv4\"}],\"items\":false,\"minItems\":6}",
    /* Any JSON, any object. */
    "true",
    "{\"type\":\"object\"}",
    "{\"type\":\"object\",\"properties\":{\"k\":{\"type\":\"integer\"}},\"additionalProperties\":{\"type\":"
    "\"array\",\"items\":{\"type\":\"boolean\"}}}",
};

/* Invalid documents: the grammar must reject each, and jsonschema agrees. */
static const char *const invalid[][2] = {
    {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\",\"maximum\":5}},\"required\":[\"a\"]}",
     "{\"a\":6}"},
    {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]}", "{}"},
    {"{\"type\":\"object\",\"properties\":{\"a\":{}},\"additionalProperties\":false}", "{\"b\":1}"},
    {"{\"type\":\"string\",\"pattern\":\"^ab\"}", "\"xab\""},
    {"{\"type\":\"string\",\"pattern\":\"ab\"}", "\"ba\""},
    {"{\"type\":\"string\",\"format\":\"date\"}", "\"2023-02-29\""},
    {"{\"type\":\"string\",\"format\":\"ipv4\"}", "\"1.2.3.256\""},
    {"{\"type\":\"string\",\"minLength\":2}", "\"\\ud83d\\ude00\""},
    {"{\"type\":\"array\",\"maxItems\":1}", "[1,2]"},
    {"{\"enum\":[1,2]}", "3"},
    {"{\"type\":\"number\",\"maximum\":3}", "3.5"},
    {"{\"oneOf\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}", "true"},
    {"{\"type\":\"object\",\"properties\":{\"n\":{\"$ref\":\"#\"},\"v\":{\"type\":\"boolean\"}},\"required\":[\"v\"]}",
     "{\"n\":{\"n\":{}},\"v\":true}"},
};

static int run_oracle(const char *cases_path)
{
    const char *py = getenv("PYTHON_JSONSCHEMA");
    if (!py || !*py)
        py = "python3";
    const char *srcdir = getenv("SY_SRCDIR");
    if (!srcdir || !*srcdir) {
        fprintf(stderr, "test_grammar_oracle: SY_SRCDIR is not set (run through make check)\n");
        return -1;
    }
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' -c 'import jsonschema' 2>&1", py);
    if (system(cmd) != 0) {
        fprintf(stderr, "test_grammar_oracle: FAIL: %s cannot import jsonschema; configure with "
                        "PYTHON_JSONSCHEMA=/path/to/python (one with `pip install jsonschema`)\n", py);
        return -1;
    }
    snprintf(cmd, sizeof cmd, "'%s' '%s/tests/unit/jsonschema_oracle.py' '%s'", py, srcdir, cases_path);
    int st = system(cmd);
    return st == 0 ? 0 : -1;
}

int main(void)
{
    walker w;
    if (walker_init(&w) != 0)
        return 1;
    char path[] = "/tmp/sy-grammar-oracle-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) {
        perror("mkstemp");
        return 1;
    }
    cases cs = {fdopen(fd, "w"), 0, 0};
    rng r = {0x9E3779B97F4A7C15ull};
    const char *seed = getenv("SY_TEST_SEED");
    if (seed && *seed)
        r.s ^= strtoull(seed, NULL, 0) * 0xBF58476D1CE4E5B9ull;

    for (size_t i = 0; i < sizeof hand_schemas / sizeof *hand_schemas; i++) {
        walk_schema(&cs, &w, &r, hand_schemas[i], 0, 40);
        walk_schema(&cs, &w, &r, hand_schemas[i], SY_JSON_SCHEMA_ALLOW_EXTRA, 10);
    }
    for (int i = 0; i < 120; i++) {
        json_t *s = rand_schema(&r, 1 + (int)pick(&r, 3));
        char *text = json_dumps(s, JSON_COMPACT);
        walk_schema(&cs, &w, &r, text, chance(&r, 30) ? SY_JSON_SCHEMA_ALLOW_EXTRA : 0, 12);
        free(text);
        json_decref(s);
    }
    for (size_t i = 0; i < sizeof invalid / sizeof *invalid; i++) {
        sy_grammar *g = compile_schema(invalid[i][0], 0);
        CHECK(g != NULL);
        if (g && sy_grammar_accepts(g, invalid[i][1], strlen(invalid[i][1]))) {
            sy_test_checks++, sy_test_failures++;
            fprintf(stderr, "schema %s: the grammar accepts the invalid %s\n", invalid[i][0], invalid[i][1]);
        }
        sy_grammar_free(g);
        json_t *texts = json_array();
        push_text(texts, invalid[i][1], strlen(invalid[i][1]));
        add_case(&cs, invalid[i][0], texts, false);
        json_decref(texts);
    }
    fclose(cs.f);
    printf("test_grammar_oracle: %ld texts over %ld cases (%ld walk steps, %ld walks too long)\n", cs.texts,
           cs.schemas, w.steps, w.too_long);
    CHECK(w.dead_ends == 0);
    CHECK(cs.texts > 1000);
    CHECK(run_oracle(path) == 0);
    if (getenv("SY_TEST_KEEP_CASES"))
        printf("test_grammar_oracle: cases kept in %s\n", path);
    else
        unlink(path);
    free(w.mask);
    sy_gvocab_free(w.vocab);
    return sy_test_done("test_grammar_oracle");
}
