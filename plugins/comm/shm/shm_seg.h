/*
 * comm/shm internals: the shared segment and its synchronisation.
 *
 * Layout of the segment (one per run, named after the rendezvous string):
 *
 *   shm_hdr                      magic, world size, slot size, abort record
 *   shm_line[world]              one cache line per rank: its epoch, the
 *                                description of its current collective, pid
 *   data[2][world][slot_size]    two banks of one slot per rank
 *   res[2][slot_size]            per bank, the reduced chunk (two-shot: rank r
 *                                writes slice r, every rank reads it all)
 *
 * Synchronisation is an epoch barrier: every rank counts the barriers it
 * has passed; arriving at barrier e stores e into its own line (release),
 * then waits until every line holds >= e (acquire). Nothing is ever reset.
 * Collectives alternate the two banks chunk by chunk, so a rank can only
 * overwrite a bank once every rank has passed the next barrier, that is,
 * finished reading it: one barrier per chunk for one-shot, two for two-shot.
 */
#ifndef SY_COMM_SHM_SEG_H
#define SY_COMM_SHM_SEG_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "switchyard/plugin.h"

#define SHM_MAX_RANKS 256

typedef struct shm_hdr {
    _Atomic uint32_t magic; /* SHM_MAGIC once rank 0 has initialised the rest */
    uint32_t world;
    uint64_t slot_size;
    uint64_t total_bytes;
    _Atomic int32_t abort_rank; /* -1, or the first rank that gave up */
    char abort_msg[512];
} shm_hdr;

typedef struct shm_line {
    _Alignas(64) _Atomic uint64_t epoch;
    _Atomic uint64_t desc[2]; /* the collective at barrier e is in desc[e & 1] */
    _Atomic int32_t pid;      /* 0 until the rank joined */
    _Atomic int32_t left;     /* 1 once the rank destroyed its instance */
} shm_line;

typedef struct shm_seg {
    char name[256]; /* "/sy-shm-<rendezvous>" */
    int rank, world;
    double timeout_s;
    size_t slot_size;
    void *base;
    size_t map_bytes;
    shm_hdr *hdr;
    shm_line *lines;
    unsigned char *data;
    uint64_t epoch;  /* barriers passed by this rank */
    int unlinked;
    int broken;      /* a collective failed: refuse every later one */
    char broken_msg[512];
} shm_seg;

/* Joins (rank 0 creates) the segment; waits for every rank within timeout_s. */
int shm_seg_join(shm_seg *s, int rank, int world, const char *rendezvous, size_t slot_size, double timeout_s,
                 sy_err *err);
/* Marks this rank gone, unmaps, and (rank 0) unlinks the name if still there. */
void shm_seg_leave(shm_seg *s);

/*
 * Barrier. desc (op << 56 | bytes ...) describes the collective; when
 * check is set every rank's desc must match (a rank that called a different
 * collective or another size is an error, not a silent corruption).
 */
int shm_seg_barrier(shm_seg *s, uint64_t desc, int check, const char *what, sy_err *err);

/* Slot of rank r in bank b. */
static inline unsigned char *shm_slot(const shm_seg *s, int bank, int r)
{
    return s->data + ((size_t)bank * (size_t)s->world + (size_t)r) * s->slot_size;
}

/* The reduced chunk of bank b (two-shot). */
static inline unsigned char *shm_res(const shm_seg *s, int bank)
{
    return s->data + ((size_t)2 * (size_t)s->world + (size_t)bank) * s->slot_size;
}

/* Records err as the reason the group is broken (so peers fail fast) and returns code. */
int shm_seg_fail(shm_seg *s, int code, sy_err *err);

#endif
