/*
 * sytest-comm-refuse: a CPU comm plugin that outranks shm (probe 15 against
 * shm's 10) and whose setup refuses every group with SY_ERR_UNAVAILABLE, as
 * cuda-p2p does on a host without peer access. tests/tp/test_tp_fallback.sh
 * checks that [comm] plugin = auto then falls back to shm on every rank,
 * and that naming this plugin fails with its reason. Built a second time
 * with -DSYTEST_COMM_EARLY as sytest-comm-early (probe 12: found first in
 * name order, tried second in score order).
 *
 * Every rank refuses, so the refusal is seen group-wide as the setup
 * contract asks (plugin.h); rank 0 refuses at once and the others only
 * after a pause, so the fallback's rendezvous is met by ranks that left the
 * refused plugin at different times.
 *
 * It lives in build-test-plugins/ beside other test plugins that tests put
 * on the plugin path, so it only runs when asked to: its probe is 0 unless
 * the environment holds SYTEST_PROBE=1.
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "switchyard/plugin.h"

#ifdef SYTEST_COMM_EARLY
#define NAME "sytest-comm-early"
#define SCORE 12
#else
#define NAME "sytest-comm-refuse"
#define SCORE 15
#endif

typedef struct inst {
    int rank, world;
    int local_rank; /* the host's, to show what the launcher gave this rank */
} inst;

static int probe(const sy_host *host, sy_err *why)
{
    (void)host;
    const char *on = getenv("SYTEST_PROBE");
    if (!on || strcmp(on, "1") != 0)
        return sy_err_set(why, 0, "test plugin: runs only when SYTEST_PROBE=1");
    return SCORE;
}

static int create(const sy_host *host, const sy_kv *cfg, size_t n_cfg, void **out, sy_err *err)
{
    (void)cfg;
    (void)n_cfg;
    inst *c = calloc(1, sizeof *c);
    if (!c)
        return sy_err_set(err, SY_ERR_NOMEM, "comm " NAME ": cannot allocate the instance");
    c->world = 1;
    c->local_rank = host->struct_size >= offsetof(sy_host, local_rank) + sizeof host->local_rank ? host->local_rank
                                                                                                 : -1;
    *out = c;
    return SY_OK;
}

static void destroy(void *c)
{
    free(c);
}

static int rank_of(void *c)
{
    return ((inst *)c)->rank;
}

static int size_of(void *c)
{
    return ((inst *)c)->world;
}

/* A group of one (never joined) has nothing to add. */
static int allreduce_sum(void *c, sy_tensor *t, sy_err *err)
{
    (void)t;
    if (((inst *)c)->world != 1)
        return sy_err_set(err, SY_ERR_INVALID, "comm " NAME ": allreduce_sum in a group it refused");
    return SY_OK;
}

static int setup(void *c, int rank, int world, const char *rendezvous, double timeout_s, sy_err *err)
{
    (void)timeout_s;
    if (rank != 0) {
        struct timespec pause = {0, 300 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    return sy_err_set(err, SY_ERR_UNAVAILABLE,
                      "comm " NAME ": rank %d of %d (local rank %d) refuses rendezvous %s: no usable link between "
                      "the ranks (a test plugin that always refuses)",
                      rank, world, ((inst *)c)->local_rank, rendezvous ? rendezvous : "(none)");
}

static const sy_comm_ops ops = {
    .struct_size = sizeof(sy_comm_ops),
    .rank = rank_of,
    .size = size_of,
    .allreduce_sum = allreduce_sum,
    .setup = setup,
};

static const sy_plugin_desc desc = {
    .struct_size = sizeof(sy_plugin_desc),
    .abi_major = SY_ABI_MAJOR,
    .abi_minor = SY_ABI_MINOR,
    .kind = SY_KIND_COMM,
    .name = NAME,
    .version = "0",
    .device = "cpu",
    .description = "test plugin: outranks shm and refuses every group at setup",
    .keys = NULL,
    .probe = probe,
    .create = create,
    .destroy = destroy,
    .ops = &ops,
    .get_proc = NULL,
};

SY_EXPORT const sy_plugin_desc *SY_PLUGIN_ENTRY(void);
SY_EXPORT const sy_plugin_desc *SY_PLUGIN_ENTRY(void)
{
    return &desc;
}
