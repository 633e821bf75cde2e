/*
 * Configuration: INI parsing with file:line, --set, and key validation.
 * Every error message is checked for where (file:line), what was expected
 * and what was found.
 */
#include "config.h"

#include "plugin/config.h"
#include "plugin/config_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_check.h"

/* Checks that msg contains each of the NULL-terminated needles. */
#define HAS(msg, ...) has_all(__FILE__, __LINE__, msg, (const char *[]){__VA_ARGS__, NULL})
static void has_all(const char *file, int line, const char *msg, const char **needles)
{
    for (; *needles; needles++)
        if (!strstr(msg, *needles)) {
            fprintf(stderr, "%s:%d: message lacks \"%s\":\n  %s\n", file, line, *needles, msg);
            sy_test_failures++;
        }
}

typedef struct tmpfile_ {
    char path[256];
} tmpfile_;

static void write_ini(tmpfile_ *t, const char *text)
{
    const char *dir = getenv("TMPDIR");
    snprintf(t->path, sizeof t->path, "%s/sy-test-config-XXXXXX.ini", dir && *dir ? dir : "/tmp");
    int fd = mkstemps(t->path, 4);
    if (fd < 0) {
        perror("mkstemps");
        exit(1);
    }
    size_t n = strlen(text);
    if (write(fd, text, n) != (ssize_t)n) {
        perror("write");
        exit(1);
    }
    close(fd);
}

/* Loads text; expects failure, returns the message (static per call site is fine: copied). */
static void load_fail(const char *text, char *msg, size_t cap, char *path, size_t pcap)
{
    tmpfile_ t;
    write_ini(&t, text);
    sy_config *c = NULL;
    sy_err err = {{0}};
    int rc = sy_config_load(t.path, &c, &err);
    if (rc == SY_OK) {
        fprintf(stderr, "expected a load failure for:\n%s\n", text);
        sy_test_failures++;
        sy_config_free(c);
    }
    CHECK(c == NULL);
    snprintf(msg, cap, "%s", err.msg);
    snprintf(path, pcap, "%s", t.path);
    unlink(t.path);
}

static sy_config *load_ok(const char *text, tmpfile_ *t)
{
    write_ini(t, text);
    sy_config *c = NULL;
    sy_err err = {{0}};
    if (sy_config_load(t->path, &c, &err)) {
        fprintf(stderr, "unexpected load failure: %s\n", err.msg);
        sy_test_failures++;
        exit(1);
    }
    return c;
}

static void test_parse(void)
{
    tmpfile_ t;
    sy_config *c = load_ok("\xEF\xBB\xBF; a comment\r\n"
                           "# another comment\n"
                           "[model]\n"
                           "path = /models/x y   ; inline comment\n"
                           "tokenizer=/tok;not-a-comment\n"
                           "\n"
                           "[scheduler]\n"
                           "max_running: 64\n"
                           "[moe]\n"
                           "[frontend:api]\n"
                           "  listen = 0.0.0.0:30000\n"
                           "plugin = http  # hash is not an inline comment\n"
                           "[attention]\n"
                           "plugin = auto\n"
                           "empty =\n",
                           &t);
    CHECK(c != NULL);
    CHECK(strcmp(sy_config_get(c, "model", "path"), "/models/x y") == 0);
    CHECK(strcmp(sy_config_get(c, "model", "tokenizer"), "/tok;not-a-comment") == 0);
    CHECK(strcmp(sy_config_get(c, "scheduler", "max_running"), "64") == 0);
    CHECK(strcmp(sy_config_get(c, "frontend:api", "listen"), "0.0.0.0:30000") == 0);
    CHECK(strcmp(sy_config_get(c, "frontend:api", "plugin"), "http  # hash is not an inline comment") == 0);
    CHECK(strcmp(sy_config_get(c, "attention", "empty"), "") == 0);
    CHECK(sy_config_get(c, "model", "nope") == NULL);
    CHECK(sy_config_get(c, "comm", "plugin") == NULL);
    const sy_config_entry *e = sy_config_find(c, "model", "path");
    CHECK(e && e->line == 4 && strcmp(e->file, t.path) == 0 && strcmp(e->section, "model") == 0);
    e = sy_config_find(c, "attention", "plugin");
    CHECK(e && e->line == 14);
    e = sy_config_find(c, "frontend:api", "listen");
    CHECK(e && e->line == 11);
    CHECK(sy_config_has_section(c, "moe"));
    CHECK(!sy_config_has_section(c, "comm"));
    const char *const *names = NULL;
    size_t ns = sy_config_sections(c, &names);
    CHECK(ns == 5);
    if (ns == 5)
        CHECK(strcmp(names[0], "model") == 0 && strcmp(names[2], "moe") == 0 &&
              strcmp(names[3], "frontend:api") == 0 && strcmp(names[4], "attention") == 0);
    const sy_config_entry *const *ents = NULL;
    size_t n = sy_config_section(c, "frontend:api", &ents);
    CHECK(n == 2 && strcmp(ents[0]->key, "listen") == 0 && strcmp(ents[1]->key, "plugin") == 0);
    CHECK(sy_config_section(c, "moe", &ents) == 0);
    CHECK(sy_config_section(c, "comm", &ents) == 0 && ents == NULL);
    sy_config_free(c);
    unlink(t.path);

    /* An empty file and an empty config are fine. */
    c = load_ok("", &t);
    CHECK(sy_config_sections(c, NULL) == 0);
    sy_config_free(c);
    unlink(t.path);
    c = sy_config_new();
    CHECK(c && sy_config_get(c, "model", "path") == NULL);
    sy_config_free(c);
}

static void test_parse_errors(void)
{
    char msg[512], path[256], want[600];

    load_fail("[model]\npath = /a\n\n[atention]\nplugin = cpu\n", msg, sizeof msg, path, sizeof path);
    snprintf(want, sizeof want,
             "%s:4: unknown section [atention] (did you mean [attention]?); known sections: "
             "[model], [scheduler], [plugins], [device], [attention], [moe], [comm], [speculative], [frontend:NAME]",
             path);
    CHECK(strcmp(msg, want) == 0);
    if (strcmp(msg, want))
        fprintf(stderr, "  got:  %s\n  want: %s\n", msg, want);

    /* An unknown section without keys is still caught. */
    load_fail("[model]\n[bogus]\n", msg, sizeof msg, path, sizeof path);
    snprintf(want, sizeof want, "%s:2: unknown section [bogus]; known sections:", path);
    HAS(msg, want);

    load_fail("[model]\npath = /a\ntokenizer = /t\npath = /b\n", msg, sizeof msg, path, sizeof path);
    snprintf(want, sizeof want, "%s:4: duplicate key \"path\" in [model] (already set at %s:2)", path, path);
    CHECK(strcmp(msg, want) == 0);
    if (strcmp(msg, want))
        fprintf(stderr, "  got:  %s\n  want: %s\n", msg, want);

    /* Repeated section headers merge; a key repeated across them is still a duplicate. */
    load_fail("[comm]\nplugin = local\n[model]\n[comm]\nplugin = shm\n", msg, sizeof msg, path, sizeof path);
    snprintf(want, sizeof want, "%s:5: duplicate key \"plugin\" in [comm] (already set at %s:2)", path, path);
    HAS(msg, want);

    load_fail("path = /a\n[model]\n", msg, sizeof msg, path, sizeof path);
    snprintf(want, sizeof want, "%s:1: key \"path\" is outside any section", path);
    HAS(msg, want);

    load_fail("[scheduler]\nmax_running = 4\n  max_batch_tokens = 8\n", msg, sizeof msg, path, sizeof path);
    snprintf(want, sizeof want, "%s:3: indented line \"max_batch_tokens = 8\"", path);
    HAS(msg, want, "continuation", "remove the indentation");

    load_fail("[model\npath = x\n", msg, sizeof msg, path, sizeof path);
    snprintf(want, sizeof want, "%s:1: expected \"]\"", path);
    HAS(msg, want);

    load_fail("[model] extra\n", msg, sizeof msg, path, sizeof path);
    snprintf(want, sizeof want, "%s:1: unexpected text \"extra\"", path);
    HAS(msg, want);

    load_fail("[model]\n; fine\njust words\n", msg, sizeof msg, path, sizeof path);
    snprintf(want, sizeof want,
             "%s:3: expected \"key = value\", a [section] header or a ; comment, found \"just words\"", path);
    HAS(msg, want);

    load_fail("[model]\n= value\n", msg, sizeof msg, path, sizeof path);
    snprintf(want, sizeof want, "%s:2: missing key name", path);
    HAS(msg, want);

    char big[400];
    memset(big, 'a', sizeof big);
    snprintf(big, sizeof big, "[model]\npath = /%0300d\n[comm]\n", 0);
    load_fail(big, msg, sizeof msg, path, sizeof path);
    snprintf(want, sizeof want, "%s:2: line is 308 characters long; the INI parser (inih) accepts at most", path);
    HAS(msg, want);

    load_fail("[frontend:]\n", msg, sizeof msg, path, sizeof path);
    HAS(msg, ":1: [frontend:] needs a name after the colon");
    load_fail("[frontend:a b]\n", msg, sizeof msg, path, sizeof path);
    HAS(msg, ":1: frontend name \"a b\" may hold only letters, digits");

    sy_config *c = NULL;
    sy_err err = {{0}};
    CHECK(sy_config_load("/nonexistent/switchyard.ini", &c, &err) != SY_OK);
    HAS(err.msg, "/nonexistent/switchyard.ini", "cannot open");
}

static void test_nul_byte(void)
{
    char path[256];
    const char *dir = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/sy-test-config-XXXXXX.ini", dir && *dir ? dir : "/tmp");
    int fd = mkstemps(path, 4);
    CHECK(fd >= 0);
    static const char text[] = "[model]\npath = a\0b\n";
    CHECK(write(fd, text, sizeof text - 1) == (ssize_t)(sizeof text - 1));
    close(fd);
    sy_config *c = NULL;
    sy_err err = {{0}};
    CHECK(sy_config_load(path, &c, &err) != SY_OK);
    char want[300];
    snprintf(want, sizeof want, "%s:2: contains a NUL byte", path);
    HAS(err.msg, want);
    unlink(path);
}

static void test_set(void)
{
    tmpfile_ t;
    sy_config *c = load_ok("[scheduler]\nmax_running = 64\n", &t);
    sy_err err = {{0}};
    const sy_config_entry *old = sy_config_find(c, "scheduler", "max_running");
    CHECK(sy_config_set(c, "scheduler.max_running=8", &err) == SY_OK);
    const sy_config_entry *e = sy_config_find(c, "scheduler", "max_running");
    CHECK(e && strcmp(e->value, "8") == 0 && strcmp(e->file, "--set") == 0 && e->line == 0);
    /* Entries found before a --set stay valid. */
    CHECK(old && strcmp(old->value, "64") == 0);
    CHECK(sy_config_section(c, "scheduler", NULL) == 1);

    CHECK(sy_config_set(c, " frontend:api.listen = 0.0.0.0:8080 ", &err) == SY_OK);
    CHECK(strcmp(sy_config_get(c, "frontend:api", "listen"), "0.0.0.0:8080") == 0);
    CHECK(sy_config_has_section(c, "frontend:api"));
    CHECK(sy_config_set(c, "model.path=/a=b", &err) == SY_OK);
    CHECK(strcmp(sy_config_get(c, "model", "path"), "/a=b") == 0);
    CHECK(sy_config_set(c, "model.tokenizer=", &err) == SY_OK);
    CHECK(strcmp(sy_config_get(c, "model", "tokenizer"), "") == 0);

    CHECK(sy_config_set(c, "scheduler.max_running", &err) != SY_OK);
    HAS(err.msg, "expected section.key=value", "found no \"=\"");
    CHECK(sy_config_set(c, "max_running=3", &err) != SY_OK);
    HAS(err.msg, "expected section.key=value", "found no \".\" in \"max_running\"");
    CHECK(sy_config_set(c, "scheduler.=3", &err) != SY_OK);
    HAS(err.msg, "found an empty key");
    CHECK(sy_config_set(c, ".x=3", &err) != SY_OK);
    HAS(err.msg, "found an empty section");
    CHECK(sy_config_set(c, "schedular.max_running=3", &err) != SY_OK);
    HAS(err.msg, "unknown section [schedular] (did you mean [scheduler]?); known sections: [model]");
    CHECK(sy_config_set(c, "model.a b=3", &err) != SY_OK);
    HAS(err.msg, "key \"a b\" holds ' '");
    sy_config_free(c);
    unlink(t.path);

    /* --set on an empty config creates the section. */
    c = sy_config_new();
    CHECK(sy_config_set(c, "comm.plugin=local", &err) == SY_OK);
    CHECK(sy_config_has_section(c, "comm") && strcmp(sy_config_get(c, "comm", "plugin"), "local") == 0);
    sy_config_free(c);
}

static const sy_key_decl decls[] = {
    {"path", SY_KEY_STRING, NULL, "a Hugging Face model directory", 1, 0, NULL},
    {"max_running", SY_KEY_INT, "64", "sequences per step", 1, 4096, NULL},
    {"fraction", SY_KEY_FLOAT, "0.9", "share of memory", 0, 1, NULL},
    {"stream", SY_KEY_BOOL, "true", "stream tokens", 1, 0, NULL},
    {"kv_dtype", SY_KEY_ENUM, "bf16", "cache dtype", 1, 0, "bf16|fp8|f32"},
    {"cache", SY_KEY_SIZE, "256M", "cache size", 1048576, 1099511627776.0, NULL},
    {"free_int", SY_KEY_INT, "0", "unbounded", 1, 0, NULL},
    {NULL, SY_KEY_STRING, NULL, NULL, 0, 0, NULL},
};

/*
 * Binds a file holding `body` under [model]; returns rc, the message in msg,
 * and on success "key=value" of each bound key in kv (the config is gone by then).
 */
static int bind_text(const char *body, char *msg, size_t cap, char *path, size_t pcap, char (*kv)[64], size_t *n)
{
    char text[1024];
    snprintf(text, sizeof text, "[model]\n%s", body);
    tmpfile_ t;
    sy_config *c = load_ok(text, &t);
    sy_err err = {{0}};
    static const char *const reserved[] = {"plugin", NULL};
    sy_kv *k = NULL;
    size_t nk = 0;
    int rc = sy_config_bind(c, "model", decls, reserved, &k, &nk, &err);
    snprintf(msg, cap, "%s", err.msg);
    snprintf(path, pcap, "%s", t.path);
    if (kv && rc == SY_OK) {
        for (size_t i = 0; i < nk && i < 16; i++)
            snprintf(kv[i], sizeof kv[i], "%s=%s", k[i].key, k[i].value);
        *n = nk;
    }
    free(k);
    sy_config_free(c);
    unlink(t.path);
    return rc;
}

static void bad_value(const char *line, int lineno, const char *expect)
{
    char msg[512], path[256], want[600], body[300];
    snprintf(body, sizeof body, "path = /m\n%s\n", line);
    CHECK(bind_text(body, msg, sizeof msg, path, sizeof path, NULL, NULL) == SY_ERR_INVALID);
    snprintf(want, sizeof want, "%s in %s:%d", expect, path, lineno);
    if (strcmp(msg, want) != 0) {
        fprintf(stderr, "bad value %s:\n  got:  %s\n  want: %s\n", line, msg, want);
        sy_test_failures++;
    }
}

static void test_bind(void)
{
    char msg[512], path[256], want[700];
    char s[16][64];
    size_t n = 0;
    CHECK(bind_text("path = /m\nplugin = ignored\nstream = off\ncache = 1G\n", msg, sizeof msg, path, sizeof path, s,
                    &n) == SY_OK);
    CHECK(n == 7);
    if (n == 7) {
        CHECK(strcmp(s[0], "path=/m") == 0 && strcmp(s[1], "max_running=64") == 0 &&
              strcmp(s[2], "fraction=0.9") == 0 && strcmp(s[3], "stream=off") == 0 &&
              strcmp(s[4], "kv_dtype=bf16") == 0 && strcmp(s[5], "cache=1G") == 0);
    }

    bad_value("max_running = abc", 3, "\"max_running\" expects an integer in [1, 4096], found \"abc\"");
    bad_value("max_running = 0", 3, "\"max_running\" expects an integer in [1, 4096], found \"0\"");
    bad_value("max_running = 5000", 3, "\"max_running\" expects an integer in [1, 4096], found \"5000\"");
    bad_value("max_running = 12x", 3, "\"max_running\" expects an integer in [1, 4096], found \"12x\"");
    bad_value("max_running = 99999999999999999999", 3,
              "\"max_running\" expects an integer in [1, 4096], found \"99999999999999999999\"");
    bad_value("free_int = 1.5", 3, "\"free_int\" expects an integer, found \"1.5\"");
    bad_value("fraction = 1.5", 3, "\"fraction\" expects a number in [0, 1], found \"1.5\"");
    bad_value("fraction = nan", 3, "\"fraction\" expects a number in [0, 1], found \"nan\"");
    bad_value("fraction = half", 3, "\"fraction\" expects a number in [0, 1], found \"half\"");
    bad_value("stream = maybe", 3,
              "\"stream\" expects true, false, yes, no, on, off, 1 or 0 (lower case), found \"maybe\"");
    bad_value("stream = True", 3,
              "\"stream\" expects true, false, yes, no, on, off, 1 or 0 (lower case), found \"True\"");
    bad_value("kv_dtype = fp16", 3, "\"kv_dtype\" expects one of bf16, fp8, f32, found \"fp16\"");
    bad_value("cache = lots", 3,
              "\"cache\" expects a size in bytes, optionally with K, M, G or T (powers of 1024) in [1M, 1T], found "
              "\"lots\"");
    bad_value("cache = 512K", 3,
              "\"cache\" expects a size in bytes, optionally with K, M, G or T (powers of 1024) in [1M, 1T], found "
              "\"512K\"");
    bad_value("cache = 2T", 3,
              "\"cache\" expects a size in bytes, optionally with K, M, G or T (powers of 1024) in [1M, 1T], found "
              "\"2T\"");

    /* Unknown key: where, a suggestion, and what is accepted. */
    CHECK(bind_text("path = /m\nmax_runing = 3\n", msg, sizeof msg, path, sizeof path, NULL, NULL) == SY_ERR_INVALID);
    snprintf(want, sizeof want,
             "unknown key \"max_runing\" in [model] at %s:3 (did you mean \"max_running\"?); [model] accepts: path, "
             "max_running, fraction, stream, kv_dtype, cache, free_int",
             path);
    CHECK(strcmp(msg, want) == 0);
    if (strcmp(msg, want))
        fprintf(stderr, "  got:  %s\n  want: %s\n", msg, want);

    /* Missing required key. */
    CHECK(bind_text("stream = on\n", msg, sizeof msg, path, sizeof path, NULL, NULL) == SY_ERR_INVALID);
    snprintf(want, sizeof want,
             "[model] needs \"path\" (a Hugging Face model directory), in %s: add \"path = ...\" under [model] or pass "
             "--set model.path=...",
             path);
    CHECK(strcmp(msg, want) == 0);
    if (strcmp(msg, want))
        fprintf(stderr, "  got:  %s\n  want: %s\n", msg, want);
    CHECK(bind_text("path =\n", msg, sizeof msg, path, sizeof path, NULL, NULL) == SY_ERR_INVALID);
    snprintf(want, sizeof want, "\"path\" needs a value (a Hugging Face model directory), found an empty one in %s:2",
             path);
    HAS(msg, want);

    /* Values from --set say so. */
    sy_config *c = sy_config_new();
    sy_err err = {{0}};
    sy_kv *k = NULL;
    size_t nk = 0;
    CHECK(sy_config_set(c, "model.path=/m", &err) == SY_OK);
    CHECK(sy_config_set(c, "model.max_running=-1", &err) == SY_OK);
    CHECK(sy_config_bind(c, "model", decls, NULL, &k, &nk, &err) == SY_ERR_INVALID);
    HAS(err.msg, "\"max_running\" expects an integer in [1, 4096], found \"-1\" in --set model.max_running=-1");
    CHECK(sy_config_set(c, "model.max_running=2", &err) == SY_OK);
    CHECK(sy_config_set(c, "model.plugin=x", &err) == SY_OK);
    CHECK(sy_config_bind(c, "model", decls, NULL, &k, &nk, &err) == SY_ERR_INVALID);
    HAS(err.msg, "unknown key \"plugin\" in [model] at --set model.plugin=x; [model] accepts: path,");
    /* A plugin's section names the plugin in the list. */
    static const char *const reserved[] = {"plugin", NULL};
    CHECK(sy_config_set(c, "model.colour=red", &err) == SY_OK);
    CHECK(sy__config_bind(c, "model", decls, reserved, "plugin cpu (/p/attn-cpu.so)", &k, &nk, &err) == SY_ERR_INVALID);
    HAS(err.msg, "unknown key \"colour\" in [model] at --set model.colour=red; plugin cpu (/p/attn-cpu.so) accepts: "
                 "path, max_running,");
    static const sy_key_decl none[] = {{NULL, SY_KEY_STRING, NULL, NULL, 0, 0, NULL}};
    CHECK(sy__config_bind(c, "model", none, reserved, "plugin x (/x.so)", &k, &nk, &err) == SY_ERR_INVALID);
    HAS(err.msg, "plugin x (/x.so) accepts no keys besides \"plugin\"");
    sy_config_free(c);

    /* An absent section binds to the defaults; a required key then names no file. */
    c = sy_config_new();
    CHECK(sy_config_bind(c, "scheduler", decls + 1, NULL, &k, &nk, &err) == SY_OK);
    CHECK(nk == 6 && strcmp(k[0].key, "max_running") == 0 && strcmp(k[0].value, "64") == 0);
    free(k);
    CHECK(sy_config_bind(c, "model", decls, NULL, &k, &nk, &err) == SY_ERR_INVALID);
    HAS(err.msg, "[model] needs \"path\"", "in the configuration (no file loaded)");
    CHECK(sy_config_bind(NULL, "scheduler", NULL, NULL, &k, &nk, &err) == SY_OK && nk == 0);
    free(k);
    sy_config_free(c);

    /* A broken declaration table is reported, not trusted. */
    static const sy_key_decl broken[] = {
        {"n", SY_KEY_INT, "100", "n", 0, 9, NULL},
        {NULL, SY_KEY_STRING, NULL, NULL, 0, 0, NULL},
    };
    CHECK(sy_config_bind(NULL, "scheduler", broken, NULL, &k, &nk, &err) == SY_ERR_INVALID);
    HAS(err.msg, "bad key declarations for [scheduler]", "\"n\" expects an integer in [0, 9], found \"100\"");
}

static void test_key_check_and_size(void)
{
    unsigned long long v = 0;
    CHECK(sy_parse_size("4096", &v) == 0 && v == 4096);
    CHECK(sy_parse_size("64M", &v) == 0 && v == 64ULL << 20);
    CHECK(sy_parse_size("2g", &v) == 0 && v == 2ULL << 30);
    CHECK(sy_parse_size("1T", &v) == 0 && v == 1ULL << 40);
    CHECK(sy_parse_size("3k", &v) == 0 && v == 3072);
    CHECK(sy_parse_size("", &v) != 0);
    CHECK(sy_parse_size("M", &v) != 0);
    CHECK(sy_parse_size("1.5G", &v) != 0);
    CHECK(sy_parse_size("1MB", &v) != 0);
    CHECK(sy_parse_size("-1", &v) != 0);
    CHECK(sy_parse_size(" 1", &v) != 0);
    CHECK(sy_parse_size("99999999999999999999", &v) != 0);
    CHECK(sy_parse_size("17179869184T", &v) != 0);

    sy_err why;
    CHECK(sy_key_check(&decls[1], "4096", &why) == SY_OK);
    CHECK(sy_key_check(&decls[1], "+7", &why) == SY_OK);
    CHECK(sy_key_check(&decls[1], "", &why) != SY_OK);
    HAS(why.msg, "\"max_running\" expects an integer in [1, 4096], found \"\"");
    CHECK(sy_key_check(&decls[1], NULL, &why) != SY_OK);
    CHECK(sy_key_check(&decls[2], "1e-3", &why) == SY_OK);
    CHECK(sy_key_check(&decls[3], "0", &why) == SY_OK);
    CHECK(sy_key_check(&decls[4], "fp8", &why) == SY_OK);
    CHECK(sy_key_check(&decls[4], "fp", &why) != SY_OK);
    CHECK(sy_key_check(&decls[5], "1T", &why) == SY_OK);
    CHECK(sy_key_check(&decls[0], "anything at all", &why) == SY_OK);
    sy_key_decl odd = {"odd", (sy_key_type)42, "x", "", 1, 0, NULL};
    CHECK(sy_key_check(&odd, "x", &why) != SY_OK);
    HAS(why.msg, "unknown key type 42");

    CHECK(sy__edit_distance("kitten", "sitting", 5) == 3);
    CHECK(sy__edit_distance("same", "same", 2) == 0);
    CHECK(sy__edit_distance("a", "abcdef", 2) == 3);

    CHECK(sy_section_kind("attention") == SY_KIND_ATTN);
    CHECK(sy_section_kind("frontend:api") == SY_KIND_FRONTEND);
    CHECK(sy_section_kind("scheduler") == 0);
    CHECK(strcmp(sy_kind_section(SY_KIND_MOE), "[moe]") == 0);
}

/* SWITCHYARD_SET: after the file, before --set; errors name it; keys the bound plugin lacks are skipped. */
static void test_env(void)
{
    tmpfile_ t;
    sy_config *c = load_ok("[device]\nmatmul = bf16\nthreads = 2\n", &t);
    sy_err err = {{0}};
    setenv(SY_CONFIG_ENV, "  device.matmul=f32\tmoe.matmul=f32 device.gpu=3 ", 1);
    CHECK(sy_config_apply_env(c, &err) == SY_OK);
    const sy_config_entry *e = sy_config_find(c, "device", "matmul");
    CHECK(e && strcmp(e->value, "f32") == 0 && sy_config_entry_from_env(e) && strcmp(e->file, SY_CONFIG_ENV) == 0);
    CHECK(strcmp(sy_config_get(c, "moe", "matmul"), "f32") == 0);
    CHECK(!sy_config_entry_from_env(sy_config_find(c, "device", "threads")));
    CHECK(sy_config_set(c, "device.matmul=auto", &err) == SY_OK);
    e = sy_config_find(c, "device", "matmul");
    CHECK(e && strcmp(e->value, "auto") == 0 && !sy_config_entry_from_env(e));
    /* The cpu device declares matmul, not gpu: gpu from the environment is skipped; from --set it is an error. */
    static const sy_key_decl dev[] = {
        {"threads", SY_KEY_INT, "0", "threads", 0, 4096, NULL},
        {"matmul", SY_KEY_ENUM, "auto", "numerics", 1, 0, "f32|bf16|auto"},
        {NULL, SY_KEY_STRING, NULL, NULL, 0, 0, NULL},
    };
    sy_kv *k = NULL;
    size_t nk = 0;
    CHECK(sy_config_bind(c, "device", dev, NULL, &k, &nk, &err) == SY_OK);
    CHECK(nk == 2 && strcmp(k[1].value, "auto") == 0);
    free(k);
    CHECK(sy_config_set(c, "device.gpu=3", &err) == SY_OK);
    CHECK(sy_config_bind(c, "device", dev, NULL, &k, &nk, &err) == SY_ERR_INVALID);
    HAS(err.msg, "unknown key \"gpu\" in [device] at --set device.gpu=3");
    sy_config_free(c);
    unlink(t.path);

    /* A bad value names the variable as its place. */
    c = sy_config_new();
    setenv(SY_CONFIG_ENV, "device.matmul=fp8", 1);
    CHECK(sy_config_apply_env(c, &err) == SY_OK);
    CHECK(sy_config_bind(c, "device", dev, NULL, &k, &nk, &err) == SY_ERR_INVALID);
    HAS(err.msg, "found \"fp8\" in SWITCHYARD_SET device.matmul=fp8");
    sy_config_free(c);

    /* A malformed entry: the variable, which entry, what was expected and what was found. */
    static const struct {
        const char *env, *entry, *found;
    } bad[] = {
        {"device.matmul=f32 nodot", "entry 2, \"nodot\"", "found no \"=\" in \"nodot\""},
        {"matmul=f32", "entry 1, \"matmul=f32\"", "found no \".\" in \"matmul\""},
        {"moe.matmul=f32 device.=f32", "entry 2, \"device.=f32\"", "found an empty key in \"device.\""},
        {" =f32", "entry 1, \"=f32\"", "found no \".\" in \"\""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        c = sy_config_new();
        setenv(SY_CONFIG_ENV, bad[i].env, 1);
        CHECK(sy_config_apply_env(c, &err) == SY_ERR_INVALID);
        HAS(err.msg, "SWITCHYARD_SET ", bad[i].entry, "expected section.key=value", bad[i].found);
        char whole[128];
        snprintf(whole, sizeof whole, "(SWITCHYARD_SET=\"%s\")", bad[i].env);
        HAS(err.msg, whole);
        sy_config_free(c);
    }
    c = sy_config_new();
    setenv(SY_CONFIG_ENV, "devce.matmul=f32", 1);
    CHECK(sy_config_apply_env(c, &err) != SY_OK);
    HAS(err.msg, "SWITCHYARD_SET entry 1, \"devce.matmul=f32\": ", "unknown section [devce] (did you mean [device]?)");
    sy_config_free(c);

    c = sy_config_new();
    unsetenv(SY_CONFIG_ENV);
    CHECK(sy_config_apply_env(c, &err) == SY_OK && sy_config_sections(c, NULL) == 0);
    setenv(SY_CONFIG_ENV, " \t ", 1);
    CHECK(sy_config_apply_env(c, &err) == SY_OK && sy_config_sections(c, NULL) == 0);
    sy_config_free(c);
}

/* sy_config_apply_overrides: the environment first, then the list in order (the last word wins); the first bad
 * entry stops it, named with its reason. */
static void test_overrides(void)
{
    sy_err err = {{0}};
    sy_config *c = sy_config_new();
    setenv(SY_CONFIG_ENV, "device.matmul=f32 device.threads=2", 1);
    const char *sets[] = {"device.threads=3", "scheduler.max_running=8", "scheduler.max_running=9"};
    CHECK(sy_config_apply_overrides(c, sets, 3, &err) == SY_OK);
    CHECK(strcmp(sy_config_get(c, "device", "matmul"), "f32") == 0);
    CHECK(strcmp(sy_config_get(c, "device", "threads"), "3") == 0);
    CHECK(strcmp(sy_config_get(c, "scheduler", "max_running"), "9") == 0);
    const char *bad[] = {"scheduler.max_running=4", "devce.threads=1", "scheduler.max_running=5"};
    CHECK(sy_config_apply_overrides(c, bad, 3, &err) == SY_ERR_INVALID);
    HAS(err.msg, "--set devce.threads=1: ", "unknown section [devce] (did you mean [device]?)");
    CHECK(strcmp(sy_config_get(c, "scheduler", "max_running"), "4") == 0); /* stopped at the bad one */
    setenv(SY_CONFIG_ENV, "nodot", 1);
    const char *after[] = {"scheduler.max_running=11"};
    CHECK(sy_config_apply_overrides(c, after, 1, &err) == SY_ERR_INVALID);
    HAS(err.msg, "SWITCHYARD_SET entry 1, \"nodot\"");
    CHECK(strcmp(sy_config_get(c, "scheduler", "max_running"), "4") == 0); /* a bad variable applies nothing after */
    unsetenv(SY_CONFIG_ENV);
    CHECK(sy_config_set_all(c, sets, 1, &err) == SY_OK && strcmp(sy_config_get(c, "device", "threads"), "3") == 0);
    sy_config_free(c);
}

int main(void)
{
    test_parse();
    test_parse_errors();
    test_nul_byte();
    test_set();
    test_bind();
    test_key_check_and_size();
    test_env();
    test_overrides();
    return sy_test_done("test_config");
}
