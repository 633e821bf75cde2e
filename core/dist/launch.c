#include "config.h"

#include "dist/launch.h"
#include "dist/rendezvous.h"
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
        /* A bad moe_parallel value is the engine's to report, with its file:line. */
        const char *split = sy_config_get(cfg, "model", "moe_parallel");
        rc = sy_engine_parallel_check(&mc, tp, split && strcmp(split, "expert") == 0, err);
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
    if (nnodes > 1 && !o->dist_addr)
        return sy_err_set(err, SY_ERR_INVALID,
                          "--nnodes %d needs --dist-addr HOST:PORT: an address of node 0 where it listens and every "
                          "other node connects",
                          nnodes);
    if (nnodes > 1 && env_int("OMPI_COMM_WORLD_SIZE", 0) > 1)
        return sy_err_set(err, SY_ERR_INVALID,
                          "--nnodes %d under mpirun: mpirun already started every rank on every node; drop --nnodes, "
                          "--node-rank and --dist-addr",
                          nnodes);
    return SY_OK;
}

/*
 * The comm plugin for ranks on several nodes: [comm] plugin = auto (or
 * local, one process's choice) becomes nccl when the ranks use CUDA
 * devices and tcp otherwise; shm and mpi cannot do it.
 */
static int pick_multinode_comm(sy_config *cfg, int nnodes, sy_err *err)
{
    const char *plugin = sy_config_get(cfg, "comm", "plugin");
    if (!plugin || !*plugin || !strcmp(plugin, "auto") || !strcmp(plugin, "local")) {
        const char *dev = sy_config_get(cfg, "device", "plugin");
        const bool cuda = dev && !strcmp(dev, "cuda");
        /* Every node must name the same comm before any device is opened (the rendezvous compares them), so
         * this cannot wait for [device] plugin = auto to resolve: say what it means on GPU nodes. */
        if (!dev || !*dev || !strcmp(dev, "auto"))
            sy_warn("--nnodes %d with [device] plugin = auto: the ranks join over comm tcp (host memory); on GPU nodes "
                    "set [device] plugin = cuda, which makes comm auto nccl", nnodes);
        if (sy_config_set(cfg, cuda ? "comm.plugin=nccl" : "comm.plugin=tcp", err))
            return SY_ERR_INVALID;
        return SY_OK;
    }
    if (!strcmp(plugin, "shm"))
        return sy_err_set(err, SY_ERR_INVALID,
                          "--nnodes %d with [comm] plugin = shm: shared memory reaches the ranks of one node only; use "
                          "plugin = tcp (or auto)",
                          nnodes);
    if (!strcmp(plugin, "mpi"))
        return sy_err_set(err, SY_ERR_INVALID,
                          "--nnodes %d with [comm] plugin = mpi: mpi takes its ranks from mpirun; use plugin = tcp "
                          "(or auto) with --nnodes, or mpirun without it",
                          nnodes);
    return SY_OK;
}

/* Leaves a forked follower only the step-plan socket it owns (fd), as fds[0]. */
static void keep_only(sy_dist *d, int fd, int comm_fd)
{
    for (int j = 0; j < SY_DIST_MAX_RANKS; j++) {
        if (d->fds[j] >= 0 && d->fds[j] != fd)
            close(d->fds[j]);
        d->fds[j] = -1;
    }
    if (comm_fd >= 0)
        close(comm_fd);
    memset(d->pids, 0, sizeof d->pids);
    d->fds[0] = fd;
    d->ed.plan_fds = d->fds;
    d->follower = true;
    /* The first rank already says what every rank does; followers speak up for problems only. */
    if (sy_log_get_level() == SY_LOG_INFO)
        sy_log_set_level(SY_LOG_WARN);
}

/*
 * --nnodes M --node-rank R: the rendezvous (rendezvous.h), then the local
 * ranks fork as on one node. Node 0's process is global rank 0; node R's
 * process is rank R*tp and follows like its own forked ranks.
 */
static int start_nodes(sy_dist *d, const sy_dist_opts *o, sy_config *cfg, sy_err *err)
{
    const int tp = o->tp > 0 ? o->tp : 1, world = o->nnodes * tp;
    if (world > SY_DIST_MAX_RANKS)
        return sy_err_set(err, SY_ERR_INVALID, "--nnodes %d x --tp %d is %d ranks, at most %d", o->nnodes, tp, world,
                          SY_DIST_MAX_RANKS);
    int rc = pick_multinode_comm(cfg, o->nnodes, err);
    if (rc || (rc = check_model(cfg, world, err)))
        return rc;
    if (o->node_rank > 0) {
        /* serve blocks the stop signals so that rank 0 drains before its ranks stop; a node that only
         * follows has nothing to drain, and its operator must be able to stop it, also while it waits for
         * node 0. Stopping it fails the group as a dead node does. */
        sigset_t stop;
        sigemptyset(&stop);
        sigaddset(&stop, SIGINT);
        sigaddset(&stop, SIGTERM);
        sigprocmask(SIG_UNBLOCK, &stop, NULL);
    }
    const char *model = sy_config_get(cfg, "model", "path");
    sy_rdv_self self = {.nnodes = o->nnodes, .node_rank = o->node_rank, .tp = tp,
                        .digest = sy_rdv_model_digest(model), .model = model,
                        .comm = sy_config_get(cfg, "comm", "plugin"), .addr = o->dist_addr,
                        .timeout_s = d->ed.timeout_s};
    sy_rdv_result *r = calloc(1, sizeof *r);
    if (!r)
        return sy_err_set(err, SY_ERR_NOMEM, "multi-node rendezvous: out of memory");
    if ((rc = sy_rdv_run(&self, r, err))) {
        free(r);
        return rc;
    }
    snprintf(d->rendezvous, sizeof d->rendezvous, "%s", r->comm_rdv);
    d->ed.world = world;
    d->ed.rendezvous = d->rendezvous;
    d->ed.plan_fds = d->fds;
    const int base = o->node_rank * tp;
    const int comm_fd = r->comm_fd;
    if (o->node_rank == 0) {
        for (int g = tp; g < world; g++)
            d->fds[g] = r->fds[g];
        sy_info("--nnodes %d: every node joined at %s; ranks 0..%d of %d on this node", o->nnodes, o->dist_addr,
                tp - 1, world);
    } else {
        sy_info("--nnodes %d: node %d joined node 0 at %s as ranks %d..%d of %d", o->nnodes, o->node_rank,
                o->dist_addr, base, base + tp - 1, world);
    }
    fflush(stdout);
    fflush(stderr);
    for (int l = 1; l < tp; l++) {
        int sv[2] = {-1, -1};
        if (o->node_rank == 0 && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
            rc = sy_err_set(err, SY_ERR_IO, "tensor parallel: socketpair for rank %d: %s", l, strerror(errno));
            break;
        }
        pid_t pid = fork();
        if (pid < 0) {
            rc = sy_err_set(err, SY_ERR_IO, "tensor parallel: fork for rank %d: %s", base + l, strerror(errno));
            if (sv[0] >= 0) {
                close(sv[0]);
                close(sv[1]);
            }
            break;
        }
        if (pid == 0) {
            int mine = o->node_rank == 0 ? sv[1] : r->fds[l];
            if (o->node_rank == 0)
                close(sv[0]);
            else
                for (int j = 0; j < tp; j++)
                    if (j != l && r->fds[j] >= 0)
                        close(r->fds[j]);
            keep_only(d, mine, comm_fd);
            /* The ";fd=" part hands node 0's comm socket to rank 0 only. */
            d->rendezvous[strcspn(d->rendezvous, ";")] = 0;
            d->ed.rank = base + l;
            d->ed.local_rank = l;
            free(r);
            return SY_OK;
        }
        if (o->node_rank == 0) {
            close(sv[1]);
            d->fds[l] = sv[0];
        } else {
            close(r->fds[l]);
            r->fds[l] = -1;
        }
        d->pids[l] = pid;
    }
    if (o->node_rank != 0) {
        d->fds[0] = r->fds[0];
        d->ed.rank = base;
        d->ed.local_rank = 0;
        d->follower = true;
        if (sy_log_get_level() == SY_LOG_INFO)
            sy_log_set_level(SY_LOG_WARN);
    }
    free(r);
    if (rc)
        sy_dist_finish(d);
    return rc;
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
    int local = env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0);
    const char *vis = getenv("CUDA_VISIBLE_DEVICES");
    if (local > 0 && vis && *vis && !strchr(vis, ',')) {
        /* The launcher bound one GPU to this rank (mpirun wrappers, Slurm's --gpus-per-task=1): the GPU plugins'
         * default device is then the only one it sees, not the local rank's index among the node's GPUs. */
        sy_info("mpirun local rank %d sees one GPU (CUDA_VISIBLE_DEVICES=%s) and computes on it", local, vis);
        local = 0;
    }
    d->ed = (sy_engine_dist){.rank = -1, .world = world, .local_rank = local, .rendezvous = d->rendezvous,
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
    if (o->nnodes > 1)
        return start_nodes(d, o, cfg, err);
    if (o->tp <= 1)
        return SY_OK;
    if (o->tp > SY_DIST_MAX_RANKS)
        return sy_err_set(err, SY_ERR_INVALID, "--tp %d: at most %d ranks on one node", o->tp, SY_DIST_MAX_RANKS);

    const char *plugin = sy_config_get(cfg, "comm", "plugin");
    if (!plugin || !*plugin || !strcmp(plugin, "auto") || !strcmp(plugin, "local")) {
        /* local (the shipped config's choice for one process) is a group of one. Which plugin joins the
         * forked ranks is left to each rank's engine: only it knows the device and can fall back when the
         * best one's setup refuses (cuda-p2p without peer access: nccl; on CPUs: shm), see join_auto. */
        sy_info("--tp %d: [comm] plugin = %s; each rank takes the best comm plugin for its device that accepts "
                "the group (auto)",
                o->tp, plugin && *plugin ? plugin : "auto");
        if (sy_config_set(cfg, "comm.plugin=auto", err))
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
            d->ed.local_rank = r;
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
    /* Node R > 0 of --nnodes: this process forked its node's other ranks; they stop with rank 0 too. */
    if (sy_dist_finish(d))
        status = 1;
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
