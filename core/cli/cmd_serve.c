/*
 * `switchyard serve`: the engine on its own thread behind the host serving
 * API, and every [frontend:NAME] section's plugin in front of it. SIGINT
 * and SIGTERM are taken with sigwait on the main thread (blocked in every
 * thread before any is started), so no work happens in a signal handler:
 * frontends stop accepting, in-flight requests drain for up to [scheduler]
 * drain_timeout seconds, and the process exits 0.
 */
#include "config.h"

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "plugin/loader_config.h"
#include "serve/server.h"
#include "serve/serving_proxy.h"
#include "util/log.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FRONTENDS 16

static void usage(FILE *f)
{
    fprintf(f, "usage: switchyard serve -c CONFIG [--model DIR] [--tp N] [--set section.key=value] [--plugin-dir DIR]\n"
               "                        [-q|-v]\n"
               "Loads the model and serves it through every [frontend:NAME] section of the configuration\n"
               "(e.g. [frontend:api] with plugin = http). SIGINT or SIGTERM stops accepting, lets in-flight\n"
               "requests finish for up to [scheduler] drain_timeout seconds, then exits 0. With --tp, rank 0\n"
               "serves and the other ranks follow; when a rank dies the server fails its requests and exits 1.\n"
               SY_CLI_DIST_HELP);
}

typedef struct frontend {
    char section[128];
    sy_plugin_inst *inst;
    const sy_frontend_ops *ops;
    bool started;
} frontend;

static size_t frontend_sections(const sy_config *cfg, const char **names, size_t max)
{
    const char *const *all = NULL;
    size_t n = sy_config_sections(cfg, &all), k = 0;
    for (size_t i = 0; i < n && k < max; i++)
        if (strncmp(all[i], "frontend:", 9) == 0)
            names[k++] = all[i];
    return k;
}

/* Loads and starts one frontend with the host whose serving API is set. */
static int start_frontend(sy_loader *ld, const sy_host *host, const sy_config *cfg, const char *section, frontend *fe,
                          sy_err *err)
{
    snprintf(fe->section, sizeof fe->section, "%s", section);
    const char *spec = sy_config_get(cfg, section, "plugin");
    if (!spec || !*spec)
        return sy_err_set(err, SY_ERR_INVALID, "[%s] needs \"plugin\" (e.g. plugin = http)", section);
    sy_plugin *p = NULL;
    int rc = sy_loader_resolve(ld, SY_KIND_FRONTEND, spec, NULL, host, &p, err);
    if (rc)
        return rc;
    if ((rc = sy_plugin_create(p, host, cfg, section, &fe->inst, err)))
        return rc;
    fe->ops = fe->inst->ops;
    char why[sizeof err->msg];
    if ((rc = fe->ops->start(fe->inst->inst, err))) {
        snprintf(why, sizeof why, "%s", err->msg);
        return sy_err_set(err, rc, "frontend [%s] (%s) did not start: %s", section, fe->inst->plugin->path, why);
    }
    fe->started = true;
    return SY_OK;
}

static void stop_frontends(frontend *fes, size_t n)
{
    for (size_t i = n; i-- > 0;) {
        if (fes[i].started)
            fes[i].ops->stop(fes[i].inst->inst);
        fes[i].started = false;
    }
}

static void destroy_frontends(frontend *fes, size_t n)
{
    for (size_t i = n; i-- > 0;)
        if (fes[i].inst) {
            sy_plugin_inst_destroy(fes[i].inst);
            fes[i].inst = NULL;
        }
}

int sy_cmd_serve(int argc, char **argv)
{
    sy_cli_common co = {0};
    sy_dist_opts dopt = {0};
    for (int i = 1; i < argc; i++) {
        int r = sy_cli_common_arg(&co, argc, argv, &i);
        if (r == 0)
            r = sy_cli_dist_arg(&dopt, argc, argv, &i);
        if (r < 0)
            return 2;
        if (r > 0)
            continue;
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        }
        fprintf(stderr, "switchyard serve: unknown option \"%s\"\n", argv[i]);
        usage(stderr);
        return 2;
    }
    sy_config *cfg = NULL;
    if (sy_cli_load_config(&co, &cfg))
        return 1;
    const char *sections[MAX_FRONTENDS];
    const size_t n_fe = frontend_sections(cfg, sections, MAX_FRONTENDS);
    if (n_fe == 0) {
        fprintf(stderr, "switchyard serve: the configuration has no [frontend:NAME] section, so nothing would "
                        "listen; add one, e.g.\n  [frontend:api]\n  plugin = http\n  listen = 127.0.0.1:30000\n");
        sy_config_free(cfg);
        return 1;
    }

    /* Block the stop signals before any thread exists, so every thread inherits the mask and only
     * sigwait below ever sees them. */
    sigset_t stop_sigs;
    sigemptyset(&stop_sigs);
    sigaddset(&stop_sigs, SIGINT);
    sigaddset(&stop_sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_sigs, NULL);

    int rc = 1;
    sy_err err = {{0}};
    /* The followers fork here, before any thread, with the stop signals blocked: they stop when rank 0
     * tells them (after its drain) or when it is gone, never halfway through a step on a Ctrl-C. */
    sy_dist dist;
    if (sy_dist_start(&dist, &dopt, cfg, "serve", &err)) {
        fprintf(stderr, "switchyard: %s\n", err.msg);
        sy_config_free(cfg);
        return 1;
    }
    if (dist.follower) {
        sy_engine_opts fo = {.plugin_dirs = co.plugin_dirs[0] ? co.plugin_dirs : NULL};
        int st = sy_dist_follower_main(&dist, cfg, &fo);
        sy_config_free(cfg);
        return st;
    }
    sy_engine *e = NULL;
    sy_server *srv = NULL;
    sy_loader *ld = NULL;
    frontend fes[MAX_FRONTENDS];
    memset(fes, 0, sizeof fes);
    const char *dirs = co.plugin_dirs[0] ? co.plugin_dirs : NULL;
    /* Frontends start first, on a proxy host that answers "not ready" (/health 503) until the
     * model has loaded: a load takes minutes, and load balancers should see it happening. */
    sy_serving_proxy *proxy = sy_serving_proxy_new();
    if (!proxy) {
        fprintf(stderr, "switchyard: out of memory\n");
        goto out;
    }
    if (sy_loader_from_config(cfg, dirs, NULL, &ld, &err)) {
        fprintf(stderr, "switchyard: %s\n", err.msg);
        goto out;
    }
    for (size_t i = 0; i < n_fe; i++)
        if (start_frontend(ld, sy_serving_proxy_host(proxy), cfg, sections[i], &fes[i], &err)) {
            fprintf(stderr, "switchyard: %s\n", err.msg);
            goto out;
        }
    sy_engine_opts eo = {.plugin_dirs = dirs, .progress = co.verbosity >= 0, .dist = &dist.ed};
    if (sy_engine_open(cfg, &eo, &e, &err)) {
        fprintf(stderr, "switchyard: %s\n", err.msg);
        goto out;
    }
    const char *mw = sy_config_get(cfg, "scheduler", "max_waiting");
    const char *dt = sy_config_get(cfg, "scheduler", "drain_timeout");
    const double drain_s = dt ? strtod(dt, NULL) : 30.0;
    sy_server_opts so = {.max_waiting = mw ? (int32_t)strtol(mw, NULL, 10) : 1024, .model_id = NULL, .config = cfg};
    if (sy_server_new(e, &so, &srv, &err) || sy_server_start(srv, &err)) {
        fprintf(stderr, "switchyard: %s\n", err.msg);
        goto out;
    }
    sy_serving_proxy_set_target(proxy, sy_server_host(srv));
    sy_info("serving %s with %zu frontend%s (%s); SIGINT or SIGTERM to stop", sy_engine_describe(e), n_fe,
            n_fe == 1 ? "" : "s", sections[0]);

    int sig = 0;
    while (sigwait(&stop_sigs, &sig) != 0)
        ;
    sy_info("%s: no longer accepting; draining in-flight requests for up to %g s", sig == SIGINT ? "SIGINT" : "SIGTERM",
            drain_s);
    /*
     * Order matters. Submissions are refused first (ready() turns 0, /health answers 503) while
     * the frontends stay up, so in-flight requests still stream to their clients; what is left at
     * the timeout is aborted, so every request gets its final event while its frontend can take
     * it. Only then do the frontends stop (their stop may still cancel or read metrics: the
     * server outlives it), and the server goes last.
     */
    if (!sy_server_drain(srv, drain_s)) {
        sy_server_stats st;
        sy_server_stats_get(srv, &st);
        sy_warn("drain timeout after %g s: aborting %d running and %d waiting requests", drain_s, st.sched.running,
                st.sched.waiting + st.incoming);
        sy_server_abort_all(srv);
    }
    stop_frontends(fes, n_fe);
    char why[512];
    if (sy_server_failed(srv, why, sizeof why)) {
        fprintf(stderr, "switchyard: stopped because the tensor-parallel group failed: %s\n", why);
        goto out;
    }
    sy_info("stopped");
    rc = 0;
out:
    if (srv)
        sy_server_abort_all(srv); /* a failed start: requests already in get their final events */
    stop_frontends(fes, n_fe);
    if (proxy)
        sy_serving_proxy_set_target(proxy, NULL);
    sy_server_free(srv);
    destroy_frontends(fes, n_fe);
    sy_serving_proxy_free(proxy);
    sy_loader_free(ld);
    sy_engine_close(e);
    if (sy_dist_finish(&dist))
        rc = 1;
    sy_config_free(cfg);
    return rc;
}
