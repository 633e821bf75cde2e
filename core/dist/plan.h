/*
 * The step plan: what rank 0 tells the other tensor-parallel ranks before
 * each collective-bearing engine call, so that every rank runs the same
 * sy_engine_step on the same batch (or copies the same KV blocks, or stops).
 *
 * Wire format (host byte order: every rank runs the same build on one kind
 * of machine; the header's magic names the format): a fixed 32-byte header, then payload_bytes of int32 values.
 *   STEP:      per sequence n_tokens, ctx_len, n_blocks, want_logits (0 no,
 *              1 a logits row, 2 only the greedy pick; a verify's n_logits
 *              m > 1 rides above them as m << 2), then its tokens and
 *              its block ids;
 *   COPY:      n_pairs source blocks, then n_pairs destination blocks;
 *   MTP:       per sequence n, pos0, n_blocks, target_row, n_out, what it
 *              wants (1 hidden_out, 2 greedy picks, 4 logits) and the
 *              number of hidden-state floats it brings (0 or n x hidden),
 *              then its tokens, its block ids and those floats (a receiver
 *              refuses any other count than n x its own hidden width);
 *   HEARTBEAT, SHUTDOWN: no payload.
 *
 * Transport: a stream socket per follower when rank 0 forked the followers
 * (a follower blocks in poll() while rank 0 is idle, using no CPU, and sees
 * end-of-file the moment rank 0 dies), otherwise two broadcasts through the
 * comm plugin (header, then payload), which is how ranks started by mpirun
 * receive it.
 */
#ifndef SY_DIST_PLAN_H
#define SY_DIST_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"
#include "switchyard/plugin.h"

/* Most logits rows one sequence of a step may ask for (sy_step_seq.n_logits: 1 + [speculative] num_draft_tokens). */
#define SY_PLAN_MAX_ROWS 64

enum { SY_PLAN_STEP = 1, SY_PLAN_HEARTBEAT = 2, SY_PLAN_COPY = 3, SY_PLAN_SHUTDOWN = 4, SY_PLAN_MTP = 5 };

typedef struct sy_plan_hdr {
    uint32_t magic;
    uint32_t kind;
    uint64_t seq; /* plans sent so far: a follower checks none went missing */
    int32_t n_seqs;  /* STEP, MTP */
    int32_t n_pairs; /* COPY */
    uint64_t payload_bytes;
} sy_plan_hdr;

/* A decoded plan; seqs point into the payload buffer. */
typedef struct sy_plan {
    sy_plan_hdr hdr;
    int32_t *payload;
    size_t cap; /* bytes allocated at payload */
    sy_step_seq *seqs;
    int32_t cap_seqs;
    const int32_t *src, *dst; /* COPY */
    /* A decoded greedy_id points here: followers only need to know it is set ([SY_PLAN_MAX_ROWS]: a verify's picks). */
    int32_t greedy_sink[SY_PLAN_MAX_ROWS];
    /* MTP: the sequences; a follower's wanted outputs point at the sinks, which nothing writes (only rank 0
     * takes the outputs, forward_mtp.c), while its hidden rows point into the payload. */
    sy_mtp_seq *mseqs;
    int32_t cap_mseqs;
    float float_sink[1];
    /* MTP, set by the receiver: its model's floats per hidden row, so that a plan whose hidden rows are another
     * size is refused instead of read past its end (the header does not carry the width). */
    int32_t hidden_width;
} sy_plan;

/* Encodes a STEP into p (reusing its buffers). */
int sy_plan_encode_step(sy_plan *p, const sy_step_seq *seqs, int32_t n_seqs, sy_err *err);
/* Encodes an MTP step (hidden: floats per hidden-state row, for the rows that bring theirs). */
int sy_plan_encode_mtp(sy_plan *p, const sy_mtp_seq *seqs, int32_t n_seqs, int32_t hidden, sy_err *err);
/* Encodes a COPY of n block pairs. */
int sy_plan_encode_copy(sy_plan *p, const int32_t *src, const int32_t *dst, int32_t n, sy_err *err);
/* Sets a plan with no payload (HEARTBEAT, SHUTDOWN). */
void sy_plan_encode_empty(sy_plan *p, uint32_t kind);
/* Makes room for hdr.payload_bytes, which a receiver read from the header. */
int sy_plan_reserve(sy_plan *p, sy_err *err);
/* Checks a received payload against its header and points seqs/src/dst into it. */
int sy_plan_decode(sy_plan *p, sy_err *err);
void sy_plan_free(sy_plan *p);

/* How the plan travels: see the top of this file. */
typedef struct sy_plan_chan {
    int rank, world;
    /* Rank 0: fds[r] is follower r's socket (fds[0] unused); a follower:
     * fds[0] is its socket to rank 0. -1: no socket (use the comm plugin). */
    int fds[256];
    bool sockets;
    double timeout_s; /* a follower waits this long for a plan without a heartbeat; <= 0: forever */
    const sy_comm_ops *com;
    void *comm_inst;
    uint64_t seq;
} sy_plan_chan;

/* Rank 0: sends p (its header's seq is set here) to every follower. */
int sy_plan_send(sy_plan_chan *c, sy_plan *p, sy_err *err);
/* A follower: receives the next plan into p. */
int sy_plan_recv(sy_plan_chan *c, sy_plan *p, sy_err *err);

#endif
