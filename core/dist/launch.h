/*
 * Starting the ranks of a tensor-parallel group: on one node rank 0 (the
 * process the operator ran) forks one follower per other rank, each with a
 * socket that carries rank 0's step plans (plan.h). With --nnodes the
 * process on each node meets node 0 first (rendezvous.h) and then forks
 * its node's other ranks the same way. Under mpirun the ranks are the
 * launcher's processes instead and nothing is forked.
 */
#ifndef SY_DIST_LAUNCH_H
#define SY_DIST_LAUNCH_H

#include <stdbool.h>
#include <sys/types.h>

#include "engine/engine.h"
#include "plugin/config.h"

#define SY_DIST_MAX_RANKS 256

/* The command line's say (0 / NULL: not given). */
typedef struct sy_dist_opts {
    int tp;                /* --tp N */
    int nnodes, node_rank; /* --nnodes N --node-rank R */
    const char *dist_addr; /* --dist-addr HOST:PORT */
    double timeout_s;      /* --dist-timeout S (default 60) */
} sy_dist_opts;

typedef struct sy_dist {
    sy_engine_dist ed; /* for sy_engine_opts.dist; world 1: a group of one */
    bool follower;     /* this process is a rank > 0: run sy_dist_follower_main */
    int fds[SY_DIST_MAX_RANKS];
    pid_t pids[SY_DIST_MAX_RANKS]; /* rank 0 of a forked group: the followers */
    char rendezvous[160];
} sy_dist;

/*
 * Works out this process's place from the options, the mpirun environment
 * (OMPI_COMM_WORLD_RANK/SIZE) and [comm] plugin, which it may set (to shm
 * for --tp on one node, to mpi under mpirun when unset, to tcp or nccl for
 * --nnodes). Refuses, with the reason, a size that does not divide the
 * model, a comm plugin that cannot do it, and nodes that disagree. Forks
 * the followers, so call it before any thread exists. The child returns
 * with follower set, as does the process of every node but node 0. what
 * names the command in messages.
 */
int sy_dist_start(sy_dist *d, const sy_dist_opts *o, sy_config *cfg, const char *what, sy_err *err);

/* A follower's life: opens the engine, runs rank 0's plans, closes. Returns the exit status. */
int sy_dist_follower_main(sy_dist *d, const sy_config *cfg, const sy_engine_opts *eo);

/*
 * Rank 0 when done (after sy_engine_close, which told the followers to
 * stop): waits up to the timeout for the forked followers, kills those
 * still running, and says which rank failed. Returns 1 if any did.
 */
int sy_dist_finish(sy_dist *d);

#endif
