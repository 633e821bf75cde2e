/*
 * The multi-node rendezvous (`--nnodes M --node-rank R --dist-addr
 * HOST:PORT`): node 0's process listens at HOST:PORT; every other node's
 * process opens one connection per local rank there (retrying until the
 * timeout) and says who it is and what it runs. Node 0 checks that every
 * node runs the same model, --tp, --nnodes and comm plugin and that no
 * node rank comes twice, then answers every connection with the comm
 * plugin's rendezvous string, or with the reason it refuses the run (which
 * both sides print before exiting 1).
 *
 * After that each connection is the step-plan channel (plan.h) between
 * rank 0 and one remote rank: global rank R*N + l is local rank l of node
 * R, and its connection is the l-th its node opened. So rank 0 writes each
 * plan to every rank directly, local followers over socketpairs and remote
 * ones over TCP, with no relaying, and a dead node closes its connections,
 * which rank 0 and the node's followers notice as they do on one node.
 */
#ifndef SY_DIST_RENDEZVOUS_H
#define SY_DIST_RENDEZVOUS_H

#include <stddef.h>
#include <stdint.h>

#include "switchyard/plugin.h"

/* What a node says about itself; nodes that disagree on any of it are refused. */
typedef struct sy_rdv_self {
    int nnodes, node_rank, tp;
    uint64_t digest;   /* sy_rdv_model_digest of the model */
    const char *model; /* its path, for messages */
    const char *comm;  /* the [comm] plugin every rank uses */
    const char *addr;  /* --dist-addr */
    double timeout_s;
} sy_rdv_self;

typedef struct sy_rdv_result {
    int fds[256];     /* node 0: fds[g] for every remote global rank g; other nodes: fds[l] per local rank */
    char comm_rdv[160]; /* the comm plugin's rendezvous string (node 0's carries ";fd=N" for tcp and nccl) */
    int comm_fd;      /* node 0: the comm plugin's listening socket, handed to rank 0's tcp or nccl; -1 */
} sy_rdv_result;

/* A digest of the model a node would load: config.json and the names and sizes of its weight files. */
uint64_t sy_rdv_model_digest(const char *model_dir);

/* Runs this node's side of the rendezvous. On failure every fd in r is closed. */
int sy_rdv_run(const sy_rdv_self *self, sy_rdv_result *r, sy_err *err);

#endif
