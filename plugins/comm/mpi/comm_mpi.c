/*
 * comm/mpi: collectives over MPI_COMM_WORLD (Open MPI from Debian's
 * libopenmpi-dev), for CPU ranks started by mpirun, on one node or many.
 *
 * setup() initialises MPI (MPI_Init_thread, FUNNELED) unless the process
 * already did, and then MPI decides rank and size: the ones the caller
 * passes are checked against them (rank < 0 or world_size <= 0: take
 * MPI's). destroy() finalises MPI if setup initialised it; MPI cannot be
 * initialised again in the same process afterwards.
 *
 * Dead peers: timeout_s is not enforced by this plugin. Open MPI's runtime
 * aborts the whole job when a rank dies (mpirun reports which one and its
 * exit status), so the other ranks never hang on a crashed peer; a peer that
 * is alive but stuck is MPI's to handle (mpirun --timeout SECONDS).
 */
#include "config.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "switchyard/plugin.h"
#include "sycomm_args.h"

typedef struct comm_mpi {
    int rank, world;
    int ready;
    int we_initialised;
} comm_mpi;

static int probe(const sy_host *host, sy_err *why)
{
    (void)host;
    (void)why;
    /* Started by mpirun: MPI is the way to reach the other ranks. Otherwise
     * it still runs (a singleton), but shm is better within one node. */
    if (getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK"))
        return 20;
    return 5;
}

static int create(const sy_host *host, const sy_kv *cfg, size_t n_cfg, void **inst, sy_err *err)
{
    (void)host;
    (void)cfg;
    (void)n_cfg;
    comm_mpi *c = calloc(1, sizeof *c);
    if (!c)
        return sy_err_set(err, SY_ERR_NOMEM, "comm mpi: cannot allocate the instance");
    c->world = 1;
    *inst = c;
    return SY_OK;
}

static void destroy(void *inst)
{
    comm_mpi *c = inst;
    if (c && c->we_initialised) {
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (!finalized)
            MPI_Finalize();
    }
    free(c);
}

/* The MPI error text for rc, with what failed. */
static int mpi_fail(int rc, const char *what, sy_err *err)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof text, "MPI error %d", rc);
    return sy_err_set(err, SY_ERR_UNAVAILABLE, "comm mpi: %s failed: %s", what, text);
}

static int setup(void *inst, int rank, int world_size, const char *rendezvous, double timeout_s, sy_err *err)
{
    comm_mpi *c = inst;
    (void)rendezvous; /* mpirun is the rendezvous */
    (void)timeout_s;  /* see the top of the file */
    if (c->ready)
        return sy_err_set(err, SY_ERR_INVALID, "comm mpi: setup called twice");
    int initialised = 0;
    MPI_Initialized(&initialised);
    if (!initialised) {
        int provided = 0;
        int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
        if (rc != MPI_SUCCESS)
            return sy_err_set(err, SY_ERR_UNAVAILABLE, "comm mpi: MPI_Init_thread failed (error %d)", rc);
        c->we_initialised = 1;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c->world);
    if ((world_size > 0 && world_size != c->world) || (rank >= 0 && rank != c->rank))
        return sy_err_set(err, SY_ERR_INVALID,
                          "comm mpi: asked to be rank %d of %d, but MPI_COMM_WORLD makes this process rank %d of %d "
                          "(start it with mpirun -n %d)",
                          rank, world_size, c->rank, c->world, world_size);
    c->ready = 1;
    return SY_OK;
}

static int rank_of(void *inst)
{
    return ((comm_mpi *)inst)->rank;
}

static int size_of(void *inst)
{
    return ((comm_mpi *)inst)->world;
}

static int need_ready(const comm_mpi *c, const char *op, sy_err *err)
{
    if (!c->ready)
        return sy_err_set(err, SY_ERR_INVALID, "comm mpi: %s before setup (call sy_comm_ops.setup first)", op);
    return SY_OK;
}

/* MPI counts are int: larger messages go in pieces of at most 1 GiB. */
#define MPI_PIECE ((size_t)1 << 30)

static int allreduce_sum(void *inst, sy_tensor *t, sy_err *err)
{
    comm_mpi *c = inst;
    int rc = need_ready(c, "allreduce_sum", err);
    if (rc)
        return rc;
    if ((rc = syc_check_allreduce(t, err)))
        return rc;
    const size_t n = (size_t)sy_tensor_numel(t);
    if (n && (t->device != 0 || !t->data))
        return sy_err_set(err, SY_ERR_INVALID, "allreduce_sum: comm mpi needs host memory");
    float *x = t->data;
    const size_t piece = MPI_PIECE / sizeof(float);
    for (size_t off = 0; off < n || off == 0; off += piece) {
        const size_t m = n - off < piece ? n - off : piece;
        rc = MPI_Allreduce(MPI_IN_PLACE, x ? x + off : NULL, (int)m, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS)
            return mpi_fail(rc, "MPI_Allreduce", err);
        if (n == 0)
            break;
    }
    return SY_OK;
}

static int allgather(void *inst, const sy_tensor *in, sy_tensor *out, sy_err *err)
{
    comm_mpi *c = inst;
    int rc = need_ready(c, "allgather", err);
    if (rc)
        return rc;
    if ((rc = syc_check_allgather(in, out, c->world, err)))
        return rc;
    const size_t bytes = sy_tensor_nbytes(in);
    if (bytes > (size_t)INT_MAX)
        return sy_err_set(err, SY_ERR_UNSUPPORTED, "allgather: %zu bytes per rank, comm mpi takes at most %d",
                          bytes, INT_MAX);
    rc = MPI_Allgather(in->data, (int)bytes, MPI_BYTE, out->data, (int)bytes, MPI_BYTE, MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? SY_OK : mpi_fail(rc, "MPI_Allgather", err);
}

static int broadcast(void *inst, void *buf, size_t bytes, int root, sy_err *err)
{
    comm_mpi *c = inst;
    int rc = need_ready(c, "broadcast", err);
    if (rc)
        return rc;
    if ((rc = syc_check_broadcast(buf, bytes, root, c->world, err)))
        return rc;
    unsigned char *p = buf;
    for (size_t off = 0; off < bytes || off == 0; off += MPI_PIECE) {
        const size_t m = bytes - off < MPI_PIECE ? bytes - off : MPI_PIECE;
        rc = MPI_Bcast(p ? p + off : NULL, (int)m, MPI_BYTE, root, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS)
            return mpi_fail(rc, "MPI_Bcast", err);
        if (bytes == 0)
            break;
    }
    return SY_OK;
}

static int barrier(void *inst, sy_err *err)
{
    comm_mpi *c = inst;
    int rc = need_ready(c, "barrier", err);
    if (rc)
        return rc;
    rc = MPI_Barrier(MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? SY_OK : mpi_fail(rc, "MPI_Barrier", err);
}

static const char *algorithm_for(void *inst, size_t bytes)
{
    (void)inst;
    (void)bytes;
    return "mpi";
}

static void *get_proc(const char *name)
{
    if (strcmp(name, "algorithm") == 0)
        return (void *)algorithm_for;
    return NULL;
}

static const sy_comm_ops ops = {
    .struct_size = sizeof(sy_comm_ops),
    .rank = rank_of,
    .size = size_of,
    .allreduce_sum = allreduce_sum,
    .allgather = allgather,
    .broadcast = broadcast,
    .barrier = barrier,
    .setup = setup,
};

static const sy_plugin_desc desc = {
    .struct_size = sizeof(sy_plugin_desc),
    .abi_major = SY_ABI_MAJOR,
    .abi_minor = SY_ABI_MINOR,
    .kind = SY_KIND_COMM,
    .name = "mpi",
    .version = PACKAGE_VERSION,
    .device = "cpu",
    .description = "MPI_COMM_WORLD collectives (Open MPI), ranks started by mpirun",
    .keys = NULL,
    .probe = probe,
    .create = create,
    .destroy = destroy,
    .ops = &ops,
    .get_proc = get_proc,
};

SY_EXPORT const sy_plugin_desc *SY_PLUGIN_ENTRY(void);
SY_EXPORT const sy_plugin_desc *SY_PLUGIN_ENTRY(void)
{
    return &desc;
}
