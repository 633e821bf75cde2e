/*
 * The loader, against the deliberately bad plugins of tests/plugins/: each
 * refusal names the file and says why; resolution by name, path and auto;
 * instance creation with validated keys; listings; and the host table.
 *
 * The test plugins come from $SY_TEST_PLUGIN_DIR (build-test-plugins/); each case
 * links the ones it wants into a scratch directory of its own, so nothing
 * else there (the real plugins) takes part.
 */
#include "config.h"

#include "plugin/config.h"
#include "plugin/host.h"
#include "plugin/loader.h"
#include "plugin/loader_config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_check.h"

#define HAS(msg, ...) has_all(__FILE__, __LINE__, msg, (const char *[]){__VA_ARGS__, NULL})
static void has_all(const char *file, int line, const char *msg, const char **needles)
{
    for (; *needles; needles++)
        if (!strstr(msg, *needles)) {
            fprintf(stderr, "%s:%d: message lacks \"%s\":\n  %s\n", file, line, *needles, msg);
            sy_test_failures++;
        }
}

#define SAME(got, want)                                                                                            \
    do {                                                                                                           \
        if (strcmp(got, want) != 0) {                                                                              \
            fprintf(stderr, "%s:%d: message differs\n  got:  %s\n  want: %s\n", __FILE__, __LINE__, got, want);    \
            sy_test_failures++;                                                                                    \
        }                                                                                                          \
    } while (0)

typedef struct env {
    const char *src; /* $SY_PLUGIN_DIR */
    char root[256];  /* scratch dir, removed at the end */
    char none[300];  /* an install dir that does not exist */
    sy_host_ctx host;
} env;

/* Makes root/name holding symlinks to the named test plugins; returns its path. */
static const char *mkdir_with(env *e, const char *name, const char *const *plugins, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%s", e->root, name);
    if (mkdir(out, 0700) != 0) {
        perror(out);
        exit(1);
    }
    for (; plugins && *plugins; plugins++) {
        char from[600], to[600];
        snprintf(from, sizeof from, "%s/%s.so", e->src, *plugins);
        snprintf(to, sizeof to, "%s/%s.so", out, *plugins);
        if (symlink(from, to) != 0) {
            perror(to);
            exit(1);
        }
    }
    return out;
}

static void plugin_path(const char *dir, const char *name, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%s.so", dir, name);
}

/* Opens dir/name.so expecting a refusal; the message goes to msg. */
static void open_refused(const char *dir, const char *name, char *msg, size_t cap, char *path, size_t pcap)
{
    plugin_path(dir, name, path, pcap);
    sy_plugin *p = NULL;
    sy_err err = {{0}};
    if (sy_plugin_open(path, &p, &err) == SY_OK) {
        fprintf(stderr, "%s: expected a refusal\n", path);
        sy_test_failures++;
        sy_plugin_close(p);
    }
    CHECK(p == NULL);
    snprintf(msg, cap, "%s", err.msg);
}

static void test_open_refusals(env *e)
{
    static const char *const all[] = {"sytest-abi2", "sytest-noentry", "sytest-minor", "sytest-malformed", NULL};
    char dir[300], path[600], msg[512], want[1200];
    mkdir_with(e, "refusals", all, dir, sizeof dir);

    open_refused(dir, "sytest-abi2", msg, sizeof msg, path, sizeof path);
    snprintf(want, sizeof want, "%s: plugin ABI 2.x (it exports sy_plugin_v2), this switchyard speaks %d.%d", path,
             SY_ABI_MAJOR, SY_ABI_MINOR);
    SAME(msg, want);

    open_refused(dir, "sytest-noentry", msg, sizeof msg, path, sizeof path);
    snprintf(want, sizeof want, "%s: not a switchyard plugin: no symbol sy_plugin_v1", path);
    SAME(msg, want);

    open_refused(dir, "sytest-minor", msg, sizeof msg, path, sizeof path);
    snprintf(want, sizeof want,
             "%s: plugin ABI %d.%d is newer than this switchyard's %d.%d: upgrade switchyard, or rebuild the plugin "
             "against plugin.h %d.%d",
             path, SY_ABI_MAJOR, SY_ABI_MINOR + 1, SY_ABI_MAJOR, SY_ABI_MINOR, SY_ABI_MAJOR, SY_ABI_MINOR);
    SAME(msg, want);

    /* Files that are not shared objects at all, and files that do not exist. */
    snprintf(path, sizeof path, "%s/text.so", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs("not an ELF file\n", f);
        fclose(f);
    }
    open_refused(dir, "text", msg, sizeof msg, path, sizeof path);
    snprintf(want, sizeof want, "%s: cannot load: ", path);
    HAS(msg, want);
    open_refused(dir, "absent", msg, sizeof msg, path, sizeof path);
    HAS(msg, path, ": cannot load: ");

    /* Broken descriptors: one plugin, the defect picked by the environment. */
    static const struct {
        const char *defect;
        const char *expect;
    } bad[] = {
        {"tiny", ": descriptor struct_size 4 is too small to hold its ABI version (not built against "
                 "switchyard/plugin.h?)"},
        {"size", ": descriptor struct_size 40 is smaller than ABI 1.0's sy_plugin_desc ("},
        {"kind", ": unknown plugin kind 9 (expected 1 device, 2 attn, 3 moe, 4 comm or 5 frontend)"},
        {"noops", ": attn plugin sytest-malformed has no ops table (sy_attn_ops)"},
        {"opssize", ": attn plugin sytest-malformed: sy_attn_ops struct_size 8 is smaller than ABI 1.0's"},
        {"noforward", ": attn plugin sytest-malformed lacks the required op sy_attn_ops.forward"},
        {"noname", ": plugin name \"(null)\" is not usable"},
        {"badkey", ": attn plugin sytest-malformed: the default of key \"level\" expects an integer in [0, 9], found "
                   "\"99\""},
        {"reserved", ": attn plugin sytest-malformed: it declares key \"plugin\", which the core reserves"},
        {"noprobe", ": attn plugin sytest-malformed has no probe function"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("SYTEST_MALFORMED", bad[i].defect, 1);
        open_refused(dir, "sytest-malformed", msg, sizeof msg, path, sizeof path);
        snprintf(want, sizeof want, "%s%s", path, bad[i].expect);
        HAS(msg, want);
    }
    unsetenv("SYTEST_MALFORMED");
    sy_plugin *p = NULL;
    sy_err err = {{0}};
    plugin_path(dir, "sytest-malformed", path, sizeof path);
    CHECK(sy_plugin_open(path, &p, &err) == SY_OK);
    CHECK(p && p->desc->kind == SY_KIND_ATTN && strcmp(p->path, path) == 0);
    sy_plugin_close(p);

    /* A listing shows every file, refused or not, with its reason. */
    sy_loader *ld = sy_loader_new(dir, e->none);
    sy_plugin_listing *l = NULL;
    size_t n = 0;
    CHECK(sy_loader_list(ld, &e->host.api, &l, &n, &err) == SY_OK);
    CHECK(n == 5);
    int refused = 0, listed = 0;
    for (size_t i = 0; i < n; i++) {
        if (l[i].desc) {
            listed++;
            CHECK(strcmp(l[i].desc->name, "sytest-malformed") == 0 && l[i].score == 0);
            HAS(l[i].why, "needs the sytest accelerator");
        } else {
            refused++;
            CHECK(strncmp(l[i].error, l[i].path, strlen(l[i].path)) == 0);
        }
    }
    CHECK(refused == 4 && listed == 1);
    sy_loader_list_free(ld, l, n);
    sy_loader_free(ld);
}

static int resolve(env *e, sy_loader *ld, sy_plugin_kind kind, const char *spec, const char *device, sy_plugin **p,
                   char *msg, size_t cap)
{
    sy_err err = {{0}};
    *p = NULL;
    int rc = sy_loader_resolve(ld, kind, spec, device, &e->host.api, p, &err);
    snprintf(msg, cap, "%s", rc ? err.msg : "");
    return rc;
}

static void test_resolve(env *e)
{
    static const char *const a_set[] = {"sytest-low",  "sytest-high", "sytest-never", "sytest-moe",
                                        "sytest-cuda", "sytest-abi2", "sytest-noentry", NULL};
    static const char *const never[] = {"sytest-never", NULL};
    char a[300], b[300], empty[300], path[600], msg[512], want[1200];
    mkdir_with(e, "a", a_set, a, sizeof a);
    mkdir_with(e, "b", never, b, sizeof b);
    mkdir_with(e, "empty", NULL, empty, sizeof empty);
    sy_plugin *p = NULL;

    /* auto: the best score among the kind's plugins for the device. */
    sy_loader *ld = sy_loader_new(a, e->none);
    CHECK(resolve(e, ld, SY_KIND_ATTN, "auto", "sytest", &p, msg, sizeof msg) == SY_OK);
    plugin_path(a, "sytest-high", path, sizeof path);
    CHECK(p && strcmp(p->desc->name, "sytest-high") == 0 && strcmp(p->path, path) == 0);
    sy_plugin_close(p);

    /* By name, by path. */
    CHECK(resolve(e, ld, SY_KIND_ATTN, "sytest-low", "sytest", &p, msg, sizeof msg) == SY_OK);
    CHECK(p && strcmp(p->desc->name, "sytest-low") == 0);
    sy_plugin_close(p);
    plugin_path(a, "sytest-low", path, sizeof path);
    CHECK(resolve(e, ld, SY_KIND_ATTN, path, "sytest", &p, msg, sizeof msg) == SY_OK);
    CHECK(p && strcmp(p->desc->name, "sytest-low") == 0 && strcmp(p->path, path) == 0);
    sy_plugin_close(p);

    /* Wrong kind, by path and by name. */
    plugin_path(a, "sytest-moe", path, sizeof path);
    CHECK(resolve(e, ld, SY_KIND_ATTN, path, "sytest", &p, msg, sizeof msg) == SY_ERR_INVALID && !p);
    snprintf(want, sizeof want, "%s is a moe plugin, [attention] needs an attn plugin", path);
    SAME(msg, want);
    /* By name, another kind's plugin is only a hint: kinds name their plugins apart (device cpu, attn cpu). */
    CHECK(resolve(e, ld, SY_KIND_ATTN, "sytest-moe", "sytest", &p, msg, sizeof msg) == SY_ERR_UNSUPPORTED);
    snprintf(want, sizeof want, "; %s is a moe plugin named \"sytest-moe\"", path);
    HAS(msg, "no attn plugin named \"sytest-moe\" in ", want);
    plugin_path(a, "sytest-high", path, sizeof path);
    CHECK(resolve(e, ld, SY_KIND_COMM, path, NULL, &p, msg, sizeof msg) == SY_ERR_INVALID);
    snprintf(want, sizeof want, "%s is an attn plugin, [comm] needs a comm plugin", path);
    SAME(msg, want);

    /* Another device, by path and by name. */
    plugin_path(a, "sytest-cuda", path, sizeof path);
    CHECK(resolve(e, ld, SY_KIND_ATTN, path, "cpu", &p, msg, sizeof msg) == SY_ERR_INVALID);
    snprintf(want, sizeof want, "%s runs on device cuda, but [device] is cpu", path);
    SAME(msg, want);
    CHECK(resolve(e, ld, SY_KIND_ATTN, "sytest-cuda", "cpu", &p, msg, sizeof msg) == SY_ERR_INVALID);
    SAME(msg, want);

    /* A pinned plugin that cannot run says why. */
    plugin_path(a, "sytest-never", path, sizeof path);
    CHECK(resolve(e, ld, SY_KIND_ATTN, "sytest-never", "sytest", &p, msg, sizeof msg) == SY_ERR_UNAVAILABLE);
    snprintf(want, sizeof want,
             "%s: attn plugin sytest-never cannot run here: needs the sytest accelerator, and none is attached", path);
    SAME(msg, want);

    /* Unknown names: what there is, a suggestion, and the refused count. */
    CHECK(resolve(e, ld, SY_KIND_ATTN, "sytest-hihg", "sytest", &p, msg, sizeof msg) == SY_ERR_UNSUPPORTED);
    snprintf(want, sizeof want,
             "no attn plugin named \"sytest-hihg\" in %s, %s (did you mean \"sytest-high\"?); found: ", a, e->none);
    HAS(msg, want, "sytest-low", "sytest-never", "2 files refused: `switchyard plugins` lists why");

    /* auto where nothing of the device exists: every candidate and why. */
    CHECK(resolve(e, ld, SY_KIND_ATTN, "auto", "cpu", &p, msg, sizeof msg) == SY_ERR_UNAVAILABLE);
    HAS(msg, "auto: no attn plugin can run on device cpu; candidates: ",
        "sytest-high.so (sytest-high) runs on device sytest", "sytest-cuda.so (sytest-cuda) runs on device cuda");
    CHECK(resolve(e, ld, SY_KIND_ATTN, "", "cpu", &p, msg, sizeof msg) == SY_ERR_INVALID);
    HAS(msg, "[attention]: no plugin given: expected a plugin name, a path to a .so, or auto");
    sy_loader_free(ld);

    ld = sy_loader_new(b, e->none);
    CHECK(resolve(e, ld, SY_KIND_ATTN, "auto", "sytest", &p, msg, sizeof msg) == SY_ERR_UNAVAILABLE);
    plugin_path(b, "sytest-never", path, sizeof path);
    snprintf(want, sizeof want,
             "auto: no attn plugin can run on device sytest; candidates: %s (sytest-never) cannot run: needs the "
             "sytest accelerator, and none is attached",
             path);
    SAME(msg, want);
    sy_loader_free(ld);

    ld = sy_loader_new(empty, e->none);
    CHECK(resolve(e, ld, SY_KIND_MOE, "auto", "cpu", &p, msg, sizeof msg) == SY_ERR_UNSUPPORTED);
    snprintf(want, sizeof want, "auto: no moe plugin found in %s, %s", empty, e->none);
    SAME(msg, want);
    sy_loader_free(ld);

    /* The first directory wins for a name; auto ignores the shadowed copy. */
    char c[300], copy[600], src[600];
    mkdir_with(e, "c", NULL, c, sizeof c);
    snprintf(src, sizeof src, "%s/sytest-low.so", e->src);
    snprintf(copy, sizeof copy, "%s/zz-copy-of-low.so", c);
    FILE *in = fopen(src, "rb"), *out = fopen(copy, "wb");
    CHECK(in && out);
    if (in && out) {
        char buf[8192];
        size_t k;
        while ((k = fread(buf, 1, sizeof buf, in)) > 0)
            CHECK(fwrite(buf, 1, k, out) == k);
    }
    if (in)
        fclose(in);
    if (out)
        fclose(out);
    char ac[700], ca[700];
    snprintf(ac, sizeof ac, "%s:%s", a, c);
    snprintf(ca, sizeof ca, "%s:%s", c, a);
    ld = sy_loader_new(ac, e->none);
    CHECK(resolve(e, ld, SY_KIND_ATTN, "sytest-low", "sytest", &p, msg, sizeof msg) == SY_OK);
    plugin_path(a, "sytest-low", path, sizeof path);
    CHECK(p && strcmp(p->path, path) == 0);
    sy_plugin_close(p);
    sy_loader_free(ld);
    ld = sy_loader_new(ca, e->none);
    CHECK(resolve(e, ld, SY_KIND_ATTN, "sytest-low", "sytest", &p, msg, sizeof msg) == SY_OK);
    CHECK(p && strcmp(p->path, copy) == 0);
    sy_plugin_close(p);
    sy_loader_free(ld);

    /* add_dir: checked, and takes a list. */
    ld = sy_loader_new(NULL, e->none);
    sy_err err = {{0}};
    char nodir[400];
    snprintf(nodir, sizeof nodir, "%s/no-such-dir", e->root);
    CHECK(sy_loader_add_dir(ld, nodir, &err) == SY_ERR_IO);
    snprintf(want, sizeof want, "plugin directory \"%s\": No such file or directory", nodir);
    SAME(err.msg, want);
    CHECK(sy_loader_add_dir(ld, ca, &err) == SY_OK);
    CHECK(resolve(e, ld, SY_KIND_ATTN, "auto", "sytest", &p, msg, sizeof msg) == SY_OK);
    CHECK(p && strcmp(p->desc->name, "sytest-high") == 0);
    sy_plugin_close(p);
    sy_loader_free(ld);
}

/* Everything auto could take, best first: what [comm] plugin = auto walks when a setup refuses. */
static void test_candidates(env *e)
{
    static const char *const first[] = {"sytest-low", "sytest-never", NULL};
    static const char *const second[] = {"sytest-high", "sytest-cuda", "sytest-comm-refuse", NULL};
    char d1[300], d[300], dirs[700], want[1200];
    mkdir_with(e, "cand1", first, d1, sizeof d1);
    mkdir_with(e, "cand2", second, d, sizeof d);
    snprintf(dirs, sizeof dirs, "%s:%s", d1, d);
    sy_loader *ld = sy_loader_new(dirs, e->none);
    sy_plugin_candidate *c = NULL;
    size_t n = 0;
    sy_err err = {{0}};
    /* Scores 20 and 10 in that order although the search path finds low first; never (0) and cuda are out. */
    CHECK(sy_loader_candidates(ld, SY_KIND_ATTN, "sytest", &e->host.api, &c, &n, &err) == SY_OK);
    CHECK(n == 2);
    if (n == 2) {
        CHECK(strcmp(c[0].plugin->desc->name, "sytest-high") == 0 && c[0].score == 20);
        CHECK(strcmp(c[1].plugin->desc->name, "sytest-low") == 0 && c[1].score == 10);
    }
    /* The caller may take one (as sy_plugin_create does) and free the rest. */
    sy_plugin *taken = n ? c[0].plugin : NULL;
    if (n)
        c[0].plugin = NULL;
    sy_loader_candidates_free(c, n);
    sy_plugin_close(taken);

    /* A comm plugin for the CPU is no candidate on another device; none left is auto's own error. */
    CHECK(sy_loader_candidates(ld, SY_KIND_COMM, "cpu", &e->host.api, &c, &n, &err) == SY_OK);
    CHECK(n == 1 && strcmp(c[0].plugin->desc->name, "sytest-comm-refuse") == 0 && c[0].score == 15);
    sy_loader_candidates_free(c, n);
    CHECK(sy_loader_candidates(ld, SY_KIND_COMM, "cuda", &e->host.api, &c, &n, &err) == SY_ERR_UNAVAILABLE);
    CHECK(c == NULL && n == 0);
    snprintf(want, sizeof want,
             "auto: no comm plugin can run on device cuda; candidates: %s/sytest-comm-refuse.so (sytest-comm-refuse) "
             "runs on device cpu",
             d);
    SAME(err.msg, want);
    sy_loader_free(ld);
}

static sy_config *ini(env *e, const char *text, char *path, size_t cap)
{
    snprintf(path, cap, "%s/cfg-XXXXXX.ini", e->root);
    int fd = mkstemps(path, 4);
    CHECK(fd >= 0);
    CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
    sy_config *c = NULL;
    sy_err err = {{0}};
    if (sy_config_load(path, &c, &err)) {
        fprintf(stderr, "config: %s\n", err.msg);
        exit(1);
    }
    return c;
}

/* Resolves the plugin named for [attention] in cfg and creates it (which takes the plugin over). */
static int create_from(env *e, sy_loader *ld, const sy_config *c, sy_plugin_inst **pi, sy_err *err)
{
    sy_plugin *p = NULL;
    *pi = NULL;
    int rc = sy_loader_resolve(ld, SY_KIND_ATTN, sy_config_get(c, "attention", "plugin"), "sytest", &e->host.api, &p,
                               err);
    return rc ? rc : sy_plugin_create(p, &e->host.api, c, "attention", pi, err);
}

static void test_create(env *e)
{
    static const char *const set[] = {"sytest-high", "sytest-createfail", NULL};
    char dir[300], path[600], cpath[400], want[1200];
    mkdir_with(e, "create", set, dir, sizeof dir);
    sy_loader *ld = sy_loader_new(dir, e->none);
    sy_err err = {{0}};
    plugin_path(dir, "sytest-high", path, sizeof path);

    sy_config *c = ini(e, "[attention]\nplugin = sytest-high\nlabel = first\nthreads = 8\ncache = 1G\n", cpath,
                       sizeof cpath);
    sy_plugin_inst *pi = NULL;
    CHECK(create_from(e, ld, c, &pi, &err) == SY_OK);
    sy_config_free(c); /* the instance keeps its own copy of its keys */
    CHECK(pi && pi->n_cfg == 6 && pi->inst && pi->plugin && pi->ops == pi->plugin->desc->ops);
    if (pi && pi->n_cfg == 6) {
        CHECK(strcmp(pi->plugin->path, path) == 0);
        CHECK(strcmp(sy_kv_get(pi->cfg, pi->n_cfg, "label"), "first") == 0);
        CHECK(sy_kv_int(pi->cfg, pi->n_cfg, "threads", 0) == 8);
        CHECK(strcmp(sy_kv_get(pi->cfg, pi->n_cfg, "ratio"), "0.5") == 0);
        CHECK(strcmp(sy_kv_get(pi->cfg, pi->n_cfg, "mode"), "fast") == 0);
        CHECK(strcmp(sy_kv_get(pi->cfg, pi->n_cfg, "cache"), "1G") == 0);
        CHECK(sy_kv_bool(pi->cfg, pi->n_cfg, "verbose", 1) == 0);
    }
    CHECK(sy_host_metric(&e->host, "sytest.created") == 1.0);
    sy_plugin_inst_destroy(pi);

    c = ini(e, "[attention]\nplugin = sytest-high\nlabel = x\nthreds = 8\n", cpath, sizeof cpath);
    CHECK(create_from(e, ld, c, &pi, &err) == SY_ERR_INVALID && !pi);
    snprintf(want, sizeof want,
             "unknown key \"threds\" in [attention] at %s:4 (did you mean \"threads\"?); plugin sytest-high (%s) "
             "accepts: label, threads, ratio, verbose, mode, cache",
             cpath, path);
    SAME(err.msg, want);
    sy_config_free(c);

    c = ini(e, "[attention]\nplugin = sytest-high\nlabel = x\nthreads = 100\n", cpath, sizeof cpath);
    CHECK(create_from(e, ld, c, &pi, &err) == SY_ERR_INVALID);
    snprintf(want, sizeof want, "\"threads\" expects an integer in [1, 64], found \"100\" in %s:4", cpath);
    SAME(err.msg, want);
    sy_config_free(c);

    c = ini(e, "[attention]\nplugin = sytest-high\n", cpath, sizeof cpath);
    CHECK(create_from(e, ld, c, &pi, &err) == SY_ERR_INVALID);
    snprintf(want, sizeof want, "[attention] needs \"label\" (a name for the instance), in %s", cpath);
    HAS(err.msg, want);
    sy_config_free(c);

    c = ini(e, "[attention]\nplugin = sytest-createfail\n", cpath, sizeof cpath);
    CHECK(create_from(e, ld, c, &pi, &err) == SY_ERR_UNAVAILABLE && !pi);
    plugin_path(dir, "sytest-createfail", path, sizeof path);
    snprintf(want, sizeof want, "%s: create failed: no sytest accelerator attached (checked /dev/sytest0)", path);
    SAME(err.msg, want);
    sy_config_free(c);

    /* No config at all: defaults only, so a required key is missing. */
    sy_plugin *p = NULL;
    CHECK(sy_loader_resolve(ld, SY_KIND_ATTN, "sytest-high", "sytest", &e->host.api, &p, &err) == SY_OK);
    CHECK(sy_plugin_create(p, &e->host.api, NULL, "attention", &pi, &err) == SY_ERR_INVALID);
    HAS(err.msg, "[attention] needs \"label\"");
    sy_loader_free(ld);
}

static void test_from_config(env *e)
{
    static const char *const set[] = {"sytest-low", NULL};
    char dir[300], cpath[400], want[1200];
    mkdir_with(e, "rel", set, dir, sizeof dir);
    /* A relative [plugins] path is relative to the file's directory. */
    sy_config *c = ini(e, "[plugins]\npath = rel:/nonexistent-sy-dir\n", cpath, sizeof cpath);
    sy_loader *ld = NULL;
    sy_err err = {{0}};
    CHECK(sy_loader_from_config(c, NULL, e->none, &ld, &err) == SY_ERR_IO && !ld);
    snprintf(want, sizeof want,
             "plugin directory \"/nonexistent-sy-dir\": No such file or directory, from [plugins] path at %s:2",
             cpath);
    SAME(err.msg, want);
    sy_config_free(c);

    c = ini(e, "[plugins]\npath = rel\n", cpath, sizeof cpath);
    CHECK(sy_loader_from_config(c, NULL, e->none, &ld, &err) == SY_OK && ld);
    const char *const *dirs = NULL;
    const char *install = NULL;
    CHECK(sy__loader_dirs(ld, &dirs, &install) == 1 && strcmp(dirs[0], dir) == 0 && strcmp(install, e->none) == 0);
    sy_plugin *p = NULL;
    CHECK(sy_loader_resolve(ld, SY_KIND_ATTN, "sytest-low", "sytest", &e->host.api, &p, &err) == SY_OK);
    sy_plugin_close(p);
    sy_loader_free(ld);
    sy_config_free(c);

    c = ini(e, "[plugins]\ndirs = /x\n", cpath, sizeof cpath);
    CHECK(sy_loader_from_config(c, NULL, e->none, &ld, &err) == SY_ERR_INVALID);
    snprintf(want, sizeof want, "unknown key \"dirs\" in [plugins] at %s:2; [plugins] accepts: path", cpath);
    SAME(err.msg, want);
    sy_config_free(c);
}

/* ------------------------------------------------------------------ host */

typedef struct calls {
    int n;
    int64_t begin, end;
    int worker;
} calls;

static void record_range(void *arg, int64_t begin, int64_t end, int worker)
{
    calls *c = arg;
    c->n++;
    c->begin = begin;
    c->end = end;
    c->worker = worker;
}

static int pool_runs;
static void fake_pool(void *inst, int64_t n, int64_t grain, sy_range_fn fn, void *arg)
{
    pool_runs += inst == (void *)&pool_runs;
    fn(arg, 0, n / 2, 0);
    fn(arg, n / 2, n, 1);
}
static int fake_workers(void *inst)
{
    return 2;
}

static void *adder(void *arg)
{
    const sy_host *h = arg;
    for (int i = 0; i < 1000; i++)
        h->metric_add(h->ctx, i & 1 ? "odd" : "even", 1.0);
    return NULL;
}

static void test_host(void)
{
    sy_host_ctx hc;
    sy_host_init(&hc);
    const sy_host *h = &hc.api;
    CHECK(h->struct_size == sizeof(sy_host) && h->abi_major == SY_ABI_MAJOR && h->abi_minor == SY_ABI_MINOR);
    CHECK(h->ctx == &hc);
    calls c = {0, -1, -1, -1};
    h->parallel_for(h->ctx, 10, 1, record_range, &c);
    CHECK(c.n == 1 && c.begin == 0 && c.end == 10 && c.worker == 0);
    c.n = 0;
    h->parallel_for(h->ctx, 0, 1, record_range, &c);
    CHECK(c.n == 0);
    CHECK(h->n_workers(h->ctx) == 1);
    sy_host_set_pool(&hc, fake_pool, fake_workers, &pool_runs);
    h->parallel_for(h->ctx, 10, 1, record_range, &c);
    CHECK(pool_runs == 1 && c.n == 2 && c.end == 10 && c.worker == 1);
    CHECK(h->n_workers(h->ctx) == 2);
    sy_host_set_pool(&hc, NULL, NULL, NULL);
    CHECK(h->n_workers(h->ctx) == 1);

    void *p = h->alloc(h->ctx, 1000, 256);
    CHECK(p && ((uintptr_t)p & 255) == 0);
    h->free(h->ctx, p);
    p = h->alloc(h->ctx, 0, 1);
    CHECK(p != NULL);
    h->free(h->ctx, p);
    CHECK(h->alloc(h->ctx, 16, 48) == NULL); /* not a power of two */

    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        CHECK(pthread_create(&t[i], NULL, adder, (void *)h) == 0);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    CHECK(sy_host_metric(&hc, "odd") == 2000.0 && sy_host_metric(&hc, "even") == 2000.0);
    CHECK(sy_host_metric(&hc, "never") == 0.0);

    h->log(h->ctx, SY_LOG_DEBUG, "test", "dropped at the default level");
    h->log(h->ctx, SY_LOG_WARN, "test", "a multi\nline message from a plugin, flattened");
    h->log(h->ctx, (sy_log_level)99, NULL, NULL);
    sy_host_fini(&hc);
    sy_host_fini(&hc);
}

static void rm_rf(const char *root)
{
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", root);
}

int main(void)
{
    env e;
    memset(&e, 0, sizeof e);
    e.src = getenv("SY_TEST_PLUGIN_DIR");
    if (!e.src || !*e.src) {
        fprintf(stderr, "test_loader: SY_TEST_PLUGIN_DIR is not set (run through `make check`, which points it at "
                        "build-test-plugins/)\n");
        return 1;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(e.root, sizeof e.root, "%s/sy-test-loader-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(e.root)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(e.none, sizeof e.none, "%s/not-installed", e.root);
    setenv("SYTEST_PROBE", "1", 1);
    sy_host_init(&e.host);

    test_open_refusals(&e);
    test_resolve(&e);
    test_candidates(&e);
    test_create(&e);
    test_from_config(&e);
    test_host();

    sy_host_fini(&e.host);
    rm_rf(e.root);
    return sy_test_done("test_loader");
}
