#include "config.h"

#include "cli/cli_common.h"
#include "util/log.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef SY_DEFAULT_CONFIG
#define SY_DEFAULT_CONFIG "/usr/local/etc/switchyard/switchyard.ini"
#endif

const char *sy_cli_value(int argc, char **argv, int *i)
{
    if (*i + 1 >= argc) {
        fprintf(stderr, "switchyard: option %s needs a value\n", argv[*i]);
        return NULL;
    }
    return argv[++*i];
}

int sy_cli_common_arg(sy_cli_common *o, int argc, char **argv, int *i)
{
    const char *a = argv[*i];
    const char *v;
    if (strcmp(a, "-c") == 0 || strcmp(a, "--config") == 0) {
        if (!(v = sy_cli_value(argc, argv, i)))
            return -1;
        o->config_path = v;
        return 1;
    }
    if (strcmp(a, "--set") == 0) {
        if (!(v = sy_cli_value(argc, argv, i)))
            return -1;
        if (o->n_sets >= (int)(sizeof o->sets / sizeof o->sets[0])) {
            fprintf(stderr, "switchyard: too many --set options (at most %zu)\n", sizeof o->sets / sizeof o->sets[0]);
            return -1;
        }
        o->sets[o->n_sets++] = v;
        return 1;
    }
    if (strcmp(a, "--plugin-dir") == 0) {
        if (!(v = sy_cli_value(argc, argv, i)))
            return -1;
        size_t len = strlen(o->plugin_dirs);
        int n = snprintf(o->plugin_dirs + len, sizeof o->plugin_dirs - len, "%s%s", len ? ":" : "", v);
        if (n < 0 || (size_t)n >= sizeof o->plugin_dirs - len) {
            fprintf(stderr, "switchyard: --plugin-dir values too long\n");
            return -1;
        }
        return 1;
    }
    if (strcmp(a, "--model") == 0 || strcmp(a, "-m") == 0) {
        if (!(v = sy_cli_value(argc, argv, i)))
            return -1;
        o->model = v;
        return 1;
    }
    if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
        o->verbosity = -1;
        sy_log_set_level(SY_LOG_WARN);
        return 1;
    }
    if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
        o->verbosity = 1;
        sy_log_set_level(SY_LOG_DEBUG);
        return 1;
    }
    return 0;
}

int sy_cli_dist_arg(sy_dist_opts *o, int argc, char **argv, int *i)
{
    const char *a = argv[*i];
    const char *v;
    long long n;
    if (!strcmp(a, "--tp") || !strcmp(a, "--nnodes") || !strcmp(a, "--node-rank")) {
        if (!(v = sy_cli_value(argc, argv, i)) ||
            sy_cli_int(a, v, !strcmp(a, "--node-rank") ? 0 : 1, SY_DIST_MAX_RANKS, &n))
            return -1;
        *(!strcmp(a, "--tp") ? &o->tp : !strcmp(a, "--nnodes") ? &o->nnodes : &o->node_rank) = (int)n;
        return 1;
    }
    if (!strcmp(a, "--dist-addr")) {
        if (!(o->dist_addr = sy_cli_value(argc, argv, i)))
            return -1;
        return 1;
    }
    if (!strcmp(a, "--dist-timeout")) {
        if (!(v = sy_cli_value(argc, argv, i)) || sy_cli_float(a, v, 0.1, 86400, &o->timeout_s))
            return -1;
        return 1;
    }
    return 0;
}

/* What follows the file: the environment's overrides, then --model, then --set, so the command line has the last
 * word. Errors are printed after who. */
static int apply_cli_overrides(const sy_cli_common *o, const char *who, sy_config *c)
{
    sy_err err = {{0}};
    if (sy_config_apply_env(c, &err)) {
        fprintf(stderr, "%s: %s\n", who, err.msg);
        return -1;
    }
    if (o->model) {
        char buf[4200];
        snprintf(buf, sizeof buf, "model.path=%s", o->model);
        if (sy_config_set(c, buf, &err)) {
            fprintf(stderr, "%s: --model: %s\n", who, err.msg);
            return -1;
        }
    }
    if (sy_config_set_all(c, o->sets, (size_t)o->n_sets, &err)) {
        fprintf(stderr, "%s: %s\n", who, err.msg);
        return -1;
    }
    return 0;
}

int sy_cli_load_config(sy_cli_common *o, sy_config **out)
{
    sy_err err = {{0}};
    const char *path = o->config_path ? o->config_path : SY_DEFAULT_CONFIG;
    sy_config *c = NULL;
    if (sy_config_load(path, &c, &err)) {
        fprintf(stderr, "switchyard: %s\n", err.msg);
        if (!o->config_path)
            fprintf(stderr, "switchyard: (no -c given, so the default config was tried; pass -c FILE)\n");
        return -1;
    }
    if (apply_cli_overrides(o, "switchyard", c)) {
        sy_config_free(c);
        return -1;
    }
    *out = c;
    return 0;
}

int sy_cli_config_without_file(const sy_cli_common *o, const char *who, sy_config **out)
{
    sy_config *c = sy_config_new();
    if (!c) {
        fprintf(stderr, "%s: out of memory\n", who);
        return -1;
    }
    if (apply_cli_overrides(o, who, c)) {
        sy_config_free(c);
        return -1;
    }
    *out = c;
    return 0;
}
