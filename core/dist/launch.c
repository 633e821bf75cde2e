#include "config.h"

#include "dist/launch.h"
#include "model/model.h"
#include "util/log.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int env_int(const char *name, int dflt)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

/* Refuses a size that does not divide the model before any rank loads it. */
static int check_model(const sy_config *cfg, int tp, sy_err *err)
{
    const char *dir = sy_config_get(cfg, "model", "path");
    if (!dir || !*dir)
        return SY_OK; /* the engine says what is missing */
    sy_model_config mc;
    memset(&mc, 0, sizeof mc);
    int rc = sy_model_config_load(dir, &mc, err);
    if (rc == SY_OK) {
        rc = sy_engine_tp_check(&mc, tp, err);
        if (rc) {
            char why[sizeof err->msg];
            snprintf(why, sizeof why, "%s", err->msg);
            sy_err_set(err, rc, "%s (model %s)", why, dir);
        }
    }
    sy_model_config_free(&mc);
    return rc;
}

static int check_multinode(const sy_dist_opts *o, sy_err *err)
{
    const int nnodes = o->nnodes > 0 ? o->nnodes : 1;
    if (o->node_rank < 0 || o->node_rank >= nnodes)
        return sy_err_set(err, SY_ERR_INVALID, "--node-rank %d is not in 0..%d (--nnodes %d)", o->node_rank,
                          nnodes - 1, nnodes);
    if (o->dist_addr) {
        const char *colon = strrchr(o->dist_addr, ':');
        char *end = NULL;
        long port = colon ? strtol(colon + 1, &end, 10) : 0;
        if (!colon || colon == o->dist_addr || !end || *end || port < 1 || port > 65535)
            return sy_err_set(err, SY_ERR_INVALID, "--dist-addr expects HOST:PORT with a port in 1..65535, found \"%s\"",
                              o->dist_addr);
    }
    if (nnodes > 1)
        return sy_err_set(err, SY_ERR_UNSUPPORTED,
                          "--nnodes %d: no comm plugin here has a TCP rendezvous (shm is one node), so switchyard "
                          "does not start ranks on other nodes itself; run the ranks of every node under mpirun "
                          "with [comm] plugin = mpi instead, e.g. mpirun -n 4 --host a:2,b:2 switchyard serve -c "
                          "CONFIG --set comm.plugin=mpi",
                          nnodes);
    return SY_OK;
}

/* Under mpirun: the launcher's ranks, over comm mpi. */
static int start_launched(sy_dist *d, const sy_dist_opts *o, sy_config *cfg, int rank, int world, sy_err *err)
{
    const char *plugin = sy_config_get(cfg, "comm", "plugin");
    if (!plugin || !*plugin || !strcmp(plugin, "auto")) {
        if (sy_config_set(cfg, "comm.plugin=mpi", err))
            return SY_ERR_INVALID;
    } else if (strcmp(plugin, "mpi") != 0) {
        return sy_err_set(err, SY_ERR_INVALID,
                          "started by mpirun as rank %d of %d, but [comm] plugin = %s; ranks started by mpirun "
                          "reach each other with plugin = mpi",
                          rank, world, plugin);
    }
    if (o->tp > 0 && o->tp != world)
        return sy_err_set(err, SY_ERR_INVALID,
                          "--tp %d, but mpirun started %d ranks; under mpirun the group is mpirun's ranks (drop "
                          "--tp or make them agree)",
                          o->tp, world);
    int rc = check_model(cfg, world, err);
    if (rc)
        return rc;
    snprintf(d->rendezvous, sizeof d->rendezvous, "mpirun");
    d->ed = (sy_engine_dist){.rank = -1, .world = world, .rendezvous = d->rendezvous,
                             .timeout_s = o->timeout_s > 0 ? o->timeout_s : 60, .plan_fds = NULL};
    d->follower = rank != 0;
    if (d->follower && sy_log_get_level() == SY_LOG_INFO)
        sy_log_set_level(SY_LOG_WARN);
    return SY_OK;
}

int sy_dist_start(sy_dist *d, const sy_dist_opts *o, sy_config *cfg, const char *what, sy_err *err)
{
    memset(d, 0, sizeof *d);
    for (int r = 0; r < SY_DIST_MAX_RANKS; r++)
        d->fds[r] = -1;
    d->ed = (sy_engine_dist){.rank = 0, .world = 1, .rendezvous = "", .timeout_s = o->timeout_s > 0 ? o->timeout_s : 60};
    int rc = check_multinode(o, err);
    if (rc)
        return rc;
    const int mpi_world = env_int("OMPI_COMM_WORLD_SIZE", 0);
    if (mpi_world > 1)
        return start_launched(d, o, cfg, env_int("OMPI_COMM_WORLD_RANK", 0), mpi_world, err);
    if (o->tp <= 1)
        return SY_OK;
    if (o->tp > SY_DIST_MAX_RANKS)
        return sy_err_set(err, SY_ERR_INVALID, "--tp %d: at most %d ranks on one node", o->tp, SY_DIST_MAX_RANKS);

    const char *plugin = sy_config_get(cfg, "comm", "plugin");
    if (!plugin || !*plugin || !strcmp(plugin, "auto") || !strcmp(plugin, "local")) {
        /* local (the shipped config's choice for one process) is a group of one; the forked ranks of one node
         * join over shm. */
        if (plugin && !strcmp(plugin, "local"))
            sy_info("--tp %d: [comm] plugin = local is a group of one; the ranks use comm shm", o->tp);
        if (sy_config_set(cfg, "comm.plugin=shm", err))
            return SY_ERR_INVALID;
    } else if (!strcmp(plugin, "mpi")) {
        return sy_err_set(err, SY_ERR_INVALID,
                          "[comm] plugin = mpi takes its ranks from mpirun, so --tp %d cannot fork them; run "
                          "mpirun -n %d switchyard %s ... without --tp, or use plugin = shm",
                          o->tp, o->tp, what);
    }
    if ((rc = check_model(cfg, o->tp, err)))
        return rc;

    snprintf(d->rendezvous, sizeof d->rendezvous, "sy-tp-%ld-%ld", (long)getpid(), (long)time(NULL));
    d->ed.world = o->tp;
    d->ed.rendezvous = d->rendezvous;
    fflush(stdout);
    fflush(stderr);
    for (int r = 1; r < o->tp; r++) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
            rc = sy_err_set(err, SY_ERR_IO, "tensor parallel: socketpair for rank %d: %s", r, strerror(errno));
            goto fail;
        }
        pid_t pid = fork();
        if (pid < 0) {
            rc = sy_err_set(err, SY_ERR_IO, "tensor parallel: fork for rank %d: %s", r, strerror(errno));
            close(sv[0]);
            close(sv[1]);
            goto fail;
        }
        if (pid == 0) {
            /* The follower keeps only its own end; rank 0's ends to earlier followers are not its business. */
            close(sv[0]);
            for (int j = 1; j < r; j++)
                close(d->fds[j]);
            memset(d->pids, 0, sizeof d->pids);
            for (int j = 0; j < SY_DIST_MAX_RANKS; j++)
                d->fds[j] = -1;
            d->fds[0] = sv[1];
            d->ed.rank = r;
            d->ed.plan_fds = d->fds;
            d->follower = true;
            /* Rank 0 already says what every rank does; followers speak up for problems only. */
            if (sy_log_get_level() == SY_LOG_INFO)
                sy_log_set_level(SY_LOG_WARN);
            return SY_OK;
        }
        close(sv[1]);
        d->fds[r] = sv[0];
        d->pids[r] = pid;
    }
    d->ed.plan_fds = d->fds;
    return SY_OK;
fail:
    sy_dist_finish(d);
    return rc;
}

int sy_dist_follower_main(sy_dist *d, const sy_config *cfg, const sy_engine_opts *eo)
{
    sy_engine_opts o = *eo;
    o.dist = &d->ed;
    o.progress = false;
    sy_engine *e = NULL;
    sy_err err = {{0}};
    int status = 0;
    const int rank = d->ed.rank;
    if (sy_engine_open(cfg, &o, &e, &err)) {
        fprintf(stderr, "switchyard: tensor parallel rank %d: %s\n", rank < 0 ? env_int("OMPI_COMM_WORLD_RANK", -1) : rank,
                err.msg);
        status = 1;
    } else if (sy_engine_follow(e, &err)) {
        fprintf(stderr, "switchyard: tensor parallel rank %d: %s\n", sy_engine_tp_rank(e), err.msg);
        status = 1;
    }
    sy_engine_close(e);
    if (d->fds[0] >= 0)
        close(d->fds[0]);
    d->fds[0] = -1;
    return status;
}

int sy_dist_finish(sy_dist *d)
{
    int failed = 0;
    for (int r = 1; r < SY_DIST_MAX_RANKS; r++)
        if (d->fds[r] >= 0) {
            close(d->fds[r]); /* a follower still waiting for a plan sees end of file */
            d->fds[r] = -1;
        }
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const double limit = d->ed.timeout_s > 0 ? d->ed.timeout_s : 60;
    for (int r = 1; r < SY_DIST_MAX_RANKS; r++) {
        if (d->pids[r] <= 0)
            continue;
        int ws = 0;
        for (;;) {
            pid_t p = waitpid(d->pids[r], &ws, WNOHANG);
            if (p == d->pids[r] || (p < 0 && errno != EINTR))
                break;
            struct timespec t;
            clock_gettime(CLOCK_MONOTONIC, &t);
            if ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) * 1e-9 > limit) {
                fprintf(stderr, "switchyard: tensor parallel rank %d (pid %d) did not stop within %g s; killing it\n",
                        r, (int)d->pids[r], limit);
                kill(d->pids[r], SIGKILL);
                waitpid(d->pids[r], &ws, 0);
                failed = 1;
                break;
            }
            struct timespec nap = {0, 10 * 1000 * 1000};
            nanosleep(&nap, NULL);
        }
        if (WIFSIGNALED(ws) && WTERMSIG(ws) != SIGKILL) {
            fprintf(stderr, "switchyard: tensor parallel rank %d (pid %d) was killed by signal %d\n", r,
                    (int)d->pids[r], WTERMSIG(ws));
            failed = 1;
        } else if (WIFSIGNALED(ws)) {
            fprintf(stderr, "switchyard: tensor parallel rank %d (pid %d) was killed (signal 9)\n", r, (int)d->pids[r]);
            failed = 1;
        } else if (WIFEXITED(ws) && WEXITSTATUS(ws) != 0) {
            fprintf(stderr, "switchyard: tensor parallel rank %d (pid %d) exited with status %d\n", r, (int)d->pids[r],
                    WEXITSTATUS(ws));
            failed = 1;
        }
        d->pids[r] = 0;
    }
    return failed;
}
