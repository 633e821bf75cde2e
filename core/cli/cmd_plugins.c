/*
 * `switchyard plugins`: every plugin file in the search path with its
 * kind, name, version, device and probe verdict; the files that were
 * refused and why; and, given a configuration, which plugin each of its
 * sections selects (and whether that plugin accepts the section's keys).
 */
#include "config.h"

#include "cli/cli_common.h"
#include "cli/cmd_plugins.h"
#include "plugin/config_internal.h"
#include "plugin/host.h"
#include "plugin/loader.h"
#include "plugin/loader_config.h"
#include "util/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifndef SY_DEFAULT_CONFIG
#define SY_DEFAULT_CONFIG "/usr/local/etc/switchyard/switchyard.ini"
#endif

/* Status cells wider than this overflow rather than widen every row. */
#define STATUS_COL_MAX 48

static void usage(FILE *f)
{
    fprintf(f,
            "usage: switchyard plugins [-c CONFIG] [--plugin-dir DIR]... [--set section.key=value]... [-v|-q]\n"
            "Lists the plugins in the search path (--plugin-dir dirs, then [plugins] path, then\n"
            "%s), with their probe score or why they cannot run here, and\n"
            "the files that were refused. With a configuration (-c, or the default\n"
            "%s when it exists), also shows which plugin each section selects.\n"
            "Exit status: 0; 1 when a configured section cannot get its plugin; 2 on bad usage.\n",
            SY_PLUGIN_INSTALL_DIR, SY_DEFAULT_CONFIG);
}

static int is_dir(const char *d)
{
    struct stat st;
    return stat(d, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Each --plugin-dir must exist: a typo should not look like "no plugins". */
static int check_cli_dirs(const char *dirs)
{
    for (const char *p = dirs; *p;) {
        const char *colon = strchr(p, ':');
        int len = colon ? (int)(colon - p) : (int)strlen(p);
        char d[4096];
        snprintf(d, sizeof d, "%.*s", len, p);
        struct stat st;
        int bad = len && stat(d, &st) != 0 ? errno : 0;
        if (len && (bad || !S_ISDIR(st.st_mode))) {
            fprintf(stderr, "switchyard plugins: --plugin-dir %s: %s\n", d, bad ? strerror(bad) : "not a directory");
            return -1;
        }
        p = colon ? colon + 1 : p + len;
    }
    return 0;
}

static int load_config(sy_cli_common *o, sy_config **cfg, const char **name)
{
    if (o->config_path || sy_file_exists(SY_DEFAULT_CONFIG)) {
        *name = o->config_path ? o->config_path : SY_DEFAULT_CONFIG;
        return sy_cli_load_config(o, cfg);
    }
    /* No file: the listing needs none, but --set still applies. */
    *name = NULL;
    return sy_cli_config_without_file(o, "switchyard plugins", cfg);
}

static const char *or_dash(const char *s)
{
    return s && *s ? s : "-";
}

/* Index of an earlier listing with the same kind and name, or -1. */
static long shadowed_by(const sy_plugin_listing *l, size_t i)
{
    for (size_t j = 0; j < i; j++)
        if (l[j].desc && l[j].desc->kind == l[i].desc->kind && strcmp(l[j].desc->name, l[i].desc->name) == 0)
            return (long)j;
    return -1;
}

static void status_of(const sy_plugin_listing *l, size_t i, char *buf, size_t cap)
{
    long s = shadowed_by(l, i);
    if (s >= 0)
        snprintf(buf, cap, "shadowed by %s", l[s].path);
    else if (l[i].score > 0)
        snprintf(buf, cap, "score %d", l[i].score);
    else
        snprintf(buf, cap, "cannot run: %s", l[i].why);
}

static void print_table(const sy_plugin_listing *l, size_t n)
{
    static const char *const head[5] = {"KIND", "NAME", "VERSION", "DEVICE", "STATUS"};
    int w[5];
    for (int c = 0; c < 5; c++)
        w[c] = (int)strlen(head[c]);
    size_t valid = 0;
    char status[4400];
    for (size_t i = 0; i < n; i++) {
        const sy_plugin_desc *d = l[i].desc;
        if (!d)
            continue;
        valid++;
        status_of(l, i, status, sizeof status);
        const char *cell[5] = {sy_kind_name(d->kind), d->name, or_dash(d->version), or_dash(d->device), status};
        for (int c = 0; c < 5; c++) {
            int len = (int)strlen(cell[c]);
            if (c == 4 && len > STATUS_COL_MAX)
                len = STATUS_COL_MAX;
            if (len > w[c])
                w[c] = len;
        }
    }
    if (!valid) {
        printf("no plugins found\n");
        return;
    }
    printf("%-*s  %-*s  %-*s  %-*s  %-*s  FILE\n", w[0], head[0], w[1], head[1], w[2], head[2], w[3], head[3], w[4],
           head[4]);
    /* Grouped by kind, in search order within a kind. */
    for (int k = SY_KIND_DEVICE; k <= SY_KIND_FRONTEND; k++)
        for (size_t i = 0; i < n; i++) {
            const sy_plugin_desc *d = l[i].desc;
            if (!d || d->kind != k)
                continue;
            status_of(l, i, status, sizeof status);
            printf("%-*s  %-*s  %-*s  %-*s  %-*s  %s\n", w[0], sy_kind_name(d->kind), w[1], d->name, w[2],
                   or_dash(d->version), w[3], or_dash(d->device), w[4], status, l[i].path);
        }
}

static void print_dirs(const sy_loader *ld)
{
    const char *const *dirs = NULL;
    const char *install = NULL;
    size_t nd = sy__loader_dirs(ld, &dirs, &install);
    printf("plugin directories, searched in this order:\n");
    for (size_t i = 0; i < nd; i++)
        printf("  %s%s\n", dirs[i], is_dir(dirs[i]) ? "" : " (missing)");
    printf("  %s (install dir%s)\n\n", install, is_dir(install) ? "" : ", missing");
}

/* One section's choice; returns 0 when it resolves and accepts its keys. */
static int show_choice(sy_loader *ld, const sy_host *host, const sy_config *cfg, const char *section,
                       const char *device, const char **device_out)
{
    static const char *const reserved[] = {"plugin", NULL};
    int kind = sy_section_kind(section);
    const char *spec = sy_config_get(cfg, section, "plugin");
    char label[64];
    snprintf(label, sizeof label, "[%s]", section);
    if (!spec || !*spec) {
        printf("  %-18s no \"plugin\" key: the engine's default applies\n", label);
        return 0;
    }
    sy_plugin *p = NULL;
    sy_err err = {{0}};
    if (sy_loader_resolve(ld, (sy_plugin_kind)kind, spec, device, host, &p, &err)) {
        printf("  %-18s plugin = %s: %s\n", label, spec, err.msg);
        return 1;
    }
    const sy_plugin_desc *d = p->desc;
    printf("  %-18s plugin = %s -> %s %s %s (%s)\n", label, spec, sy_kind_name(d->kind), d->name, or_dash(d->version),
           p->path);
    char owner[4200];
    snprintf(owner, sizeof owner, "plugin %s (%s)", d->name, p->path);
    sy_kv *kv = NULL;
    size_t nkv = 0;
    int rc = sy__config_bind(cfg, section, d->keys, reserved, owner, &kv, &nkv, &err);
    free(kv);
    if (rc)
        printf("  %-18s keys: %s\n", "", err.msg);
    if (device_out)
        *device_out = d->device; /* the descriptor outlives p: see loader.c */
    sy_plugin_close(p);
    return rc ? 1 : 0;
}

static int print_choices(sy_loader *ld, const sy_host *host, const sy_config *cfg, const char *cfg_name)
{
    const char *const *secs = NULL;
    size_t ns = sy_config_sections(cfg, &secs);
    int any = 0, bad = 0;
    for (size_t i = 0; i < ns; i++)
        any |= sy_section_kind(secs[i]) != 0;
    if (!any)
        return 0;
    if (cfg_name)
        printf("\nconfiguration %s selects:\n", cfg_name);
    else
        printf("\nthe --set options select:\n");
    /* [device] first: the others must run on its device. */
    const char *device = NULL;
    if (sy_config_has_section(cfg, "device"))
        bad |= show_choice(ld, host, cfg, "device", NULL, &device);
    for (size_t i = 0; i < ns; i++)
        if (sy_section_kind(secs[i]) && strcmp(secs[i], "device") != 0)
            bad |= show_choice(ld, host, cfg, secs[i], device, NULL);
    return bad;
}

int sy_cmd_plugins(int argc, char **argv)
{
    sy_cli_common o;
    memset(&o, 0, sizeof o);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        }
        int r = sy_cli_common_arg(&o, argc, argv, &i);
        if (r < 0)
            return 2;
        if (r == 0) {
            fprintf(stderr, "switchyard plugins: unknown option \"%s\"\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (check_cli_dirs(o.plugin_dirs))
        return 2;
    sy_config *cfg = NULL;
    const char *cfg_name = NULL;
    if (load_config(&o, &cfg, &cfg_name))
        return 1;

    sy_err err = {{0}};
    sy_loader *ld = NULL;
    if (sy_loader_from_config(cfg, o.plugin_dirs[0] ? o.plugin_dirs : NULL, NULL, &ld, &err)) {
        fprintf(stderr, "switchyard plugins: %s\n", err.msg);
        sy_config_free(cfg);
        return 1;
    }
    sy_host_ctx host;
    sy_host_init(&host);
    sy_plugin_listing *l = NULL;
    size_t n = 0;
    int status = 0;
    if (sy_loader_list(ld, &host.api, &l, &n, &err)) {
        fprintf(stderr, "switchyard plugins: %s\n", err.msg);
        status = 1;
    } else {
        print_dirs(ld);
        print_table(l, n);
        int refused = 0;
        for (size_t i = 0; i < n; i++)
            if (!l[i].desc)
                printf("%s  %s\n", refused++ ? "" : "\nrefused:\n", l[i].error);
        status = print_choices(ld, &host.api, cfg, cfg_name);
        sy_loader_list_free(ld, l, n);
    }
    sy_loader_free(ld);
    sy_host_fini(&host);
    sy_config_free(cfg);
    return status;
}
