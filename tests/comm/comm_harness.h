/*
 * Test harness for the comm plugins: forks N ranks, each of which loads a
 * comm plugin through the core's loader ($SY_PLUGIN_DIR), creates it with
 * [comm] keys and joins the group with setup(). A rank's checks count in
 * its own process; its exit status says whether all passed.
 */
#ifndef SY_TEST_COMM_HARNESS_H
#define SY_TEST_COMM_HARNESS_H

#include "plugin/config.h"
#include "plugin/host.h"
#include "plugin/loader.h"

typedef struct comm_rank {
    sy_host_ctx host;
    sy_config *cfg;
    sy_loader *ld;
    sy_plugin_inst *pi;
    const sy_comm_ops *ops;
    void *inst;
    int rank, world;
} comm_rank;

/* sets: NULL-terminated "comm.key=value" list (may be NULL). Prints and returns -1 on failure. */
int comm_rank_open(comm_rank *r, const char *plugin, const char *const *sets);
/* setup(rank, world, rendezvous, timeout_s); returns its status, err filled. */
int comm_rank_setup(comm_rank *r, int rank, int world, const char *rendezvous, double timeout_s, sy_err *err);
void comm_rank_close(comm_rank *r);

/*
 * Forks world ranks running fn(rank, world, rendezvous, arg) (its return is
 * the child's exit status) and waits for them. Returns the number of ranks
 * that failed. The rendezvous is made of the pid, the time and tag, which
 * the caller keeps unique per call.
 */
typedef int (*comm_rank_fn)(int rank, int world, const char *rendezvous, void *arg);
int comm_run_ranks(const char *tag, int world, comm_rank_fn fn, void *arg);

/* Deterministic test data: float x of rank r at index i for a seed, with
 * varied magnitudes so that the summation order shows in the last bits. */
float comm_test_value(unsigned seed, int r, size_t i);

#endif
