/*
 * comm/tcp internals: a full mesh of TCP connections between the ranks and
 * the framed, poll-driven transfers the collectives are made of.
 *
 * Rendezvous ("HOST:PORT[/TOKEN][;fd=N]"): rank 0 listens at HOST:PORT
 * (or on the already-listening socket N its launcher opened there, which
 * avoids a race for the port); every other rank opens a listener of its
 * own on the interface it reaches rank 0 by, connects to rank 0 (retrying
 * until the timeout) and says its rank, world size, token and listen
 * address. Rank 0 checks them (world sizes agree, no rank twice, the same
 * run), then sends every rank the table of listen addresses; rank j
 * connects to each rank 1..j-1 and accepts from j+1..world-1. The
 * connection to rank 0 is also the mesh link to rank 0.
 *
 * Every transfer is a 32-byte frame header (op, sequence number, payload
 * bytes) and the payload; a receiver checks the header against the
 * collective it is in, so ranks that disagree about the call sequence fail
 * with both sides named instead of reading garbage.
 */
#ifndef SY_COMM_TCP_MESH_H
#define SY_COMM_TCP_MESH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "switchyard/plugin.h"

#define TCP_MAX_RANKS 256
#define TCP_ADDR_LEN 64

typedef struct tcp_peer {
    int fd; /* -1 for this rank itself */
    char addr[TCP_ADDR_LEN]; /* "ip:port" as the peer listens (rank 0: the rendezvous address) */
} tcp_peer;

typedef struct tcp_mesh {
    int rank, world;
    double timeout_s; /* <= 0: wait forever */
    uint64_t seq;     /* collectives so far */
    tcp_peer peers[TCP_MAX_RANKS];
    bool broken;
    char broken_msg[512];
} tcp_mesh;

/* One transfer with one peer inside a collective: send sbuf, receive into rbuf (either may be empty). */
typedef struct tcp_xfer {
    const void *sbuf;
    size_t slen;
    bool send;
    void *rbuf;
    size_t rlen;
    bool recv;
} tcp_xfer;

void tcp_mesh_init(tcp_mesh *m);
/* Joins the group (see the top of this file). listen_host: "" or the address other ranks reach this one by. */
int tcp_mesh_join(tcp_mesh *m, int rank, int world, const char *rendezvous, const char *listen_host, double timeout_s,
                  sy_err *err);
void tcp_mesh_close(tcp_mesh *m);

/*
 * Runs the transfers x[peer] (x[m->rank] ignored) concurrently as one
 * collective named op. Fails with SY_ERR_UNAVAILABLE naming the peer when
 * one closes its connection or sends nothing for the timeout, and breaks
 * the mesh for good.
 */
int tcp_mesh_exchange(tcp_mesh *m, const char *op, tcp_xfer *x, sy_err *err);

#endif
