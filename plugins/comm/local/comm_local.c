/*
 * comm/local: the single-process "collective" for tensor_parallel = 1.
 * Rank 0 of 1: allreduce and broadcast leave the data as it is, barrier
 * returns at once, allgather is a copy. Still checks its arguments, so a
 * shape bug shows up in a one-process run rather than first under TP.
 *
 * It declares no device (desc->device = NULL: any), so TP = 1 works with
 * every device plugin; the one op that touches memory, allgather, copies
 * host memory only and refuses device memory (sy_tensor.device != 0).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "switchyard/plugin.h"

typedef struct comm_local {
    int unused;
} comm_local;

static int probe(const sy_host *host, sy_err *why)
{
    (void)host;
    (void)why;
    return 1; /* always runs; any real transport should outrank it */
}

static int create(const sy_host *host, const sy_kv *cfg, size_t n_cfg, void **inst, sy_err *err)
{
    (void)host;
    (void)cfg;
    (void)n_cfg;
    comm_local *c = calloc(1, sizeof *c);
    if (!c)
        return sy_err_set(err, SY_ERR_NOMEM, "comm local: cannot allocate the instance");
    *inst = c;
    return SY_OK;
}

static void destroy(void *inst)
{
    free(inst);
}

static int rank(void *inst)
{
    (void)inst;
    return 0;
}

static int size(void *inst)
{
    (void)inst;
    return 1;
}

static int allreduce_sum(void *inst, sy_tensor *t, sy_err *err)
{
    (void)inst;
    if (!t)
        return sy_err_set(err, SY_ERR_INVALID, "allreduce_sum: tensor is NULL");
    if (t->dtype != SY_DTYPE_F32)
        return sy_err_set(err, SY_ERR_INVALID, "allreduce_sum: tensor must be F32, found %s", sy_dtype_name(t->dtype));
    return SY_OK;
}

static int contiguous(const sy_tensor *t)
{
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] > 1 && t->stride[i] != s)
            return 0;
        s *= t->shape[i];
    }
    return 1;
}

static int allgather(void *inst, const sy_tensor *in, sy_tensor *out, sy_err *err)
{
    (void)inst;
    if (!in || !out)
        return sy_err_set(err, SY_ERR_INVALID, "allgather: %s is NULL", in ? "out" : "in");
    if (in->dtype != out->dtype)
        return sy_err_set(err, SY_ERR_INVALID, "allgather: in is %s but out is %s", sy_dtype_name(in->dtype),
                          sy_dtype_name(out->dtype));
    if (in->ndim < 0 || in->ndim > SY_MAX_DIMS || out->ndim < 0 || out->ndim > SY_MAX_DIMS)
        return sy_err_set(err, SY_ERR_INVALID, "allgather: bad ndim (in %d, out %d)", in->ndim, out->ndim);
    /* One rank: out [1 * d0, ...] must equal in's shape. */
    if (in->ndim != out->ndim || memcmp(in->shape, out->shape, sizeof(int64_t) * (size_t)in->ndim) != 0)
        return sy_err_set(err, SY_ERR_INVALID, "allgather: with 1 rank out must have in's shape (%lld elements in "
                          "%d dims), found %lld elements in %d dims",
                          (long long)sy_tensor_numel(in), in->ndim, (long long)sy_tensor_numel(out), out->ndim);
    if (!contiguous(in) || !contiguous(out))
        return sy_err_set(err, SY_ERR_INVALID, "allgather: in and out must be contiguous");
    const size_t bytes = sy_tensor_nbytes(in);
    if (bytes && in->data != out->data && (in->device != 0 || out->device != 0))
        return sy_err_set(err, SY_ERR_UNSUPPORTED, "allgather: comm local copies host memory only (device %d -> %d)",
                          in->device, out->device);
    if (bytes && (!in->data || !out->data))
        return sy_err_set(err, SY_ERR_INVALID, "allgather: %s has no data", in->data ? "out" : "in");
    if (bytes && in->data != out->data)
        memmove(out->data, in->data, bytes);
    return SY_OK;
}

static int broadcast(void *inst, void *buf, size_t bytes, int root, sy_err *err)
{
    (void)inst;
    (void)buf;
    (void)bytes;
    if (root != 0)
        return sy_err_set(err, SY_ERR_INVALID, "broadcast: root %d, but the only rank is 0", root);
    return SY_OK;
}

static int barrier(void *inst, sy_err *err)
{
    (void)inst;
    (void)err;
    return SY_OK;
}

/* One rank only: anything else needs a real transport (shm, mpi). */
static int setup(void *inst, int rank, int world_size, const char *rendezvous, double timeout_s, sy_err *err)
{
    (void)inst;
    (void)rendezvous;
    (void)timeout_s;
    if (world_size != 1 || rank != 0)
        return sy_err_set(err, SY_ERR_UNSUPPORTED,
                          "comm local: rank %d of %d, but local is one process (world_size 1); use shm or mpi for "
                          "tensor_parallel > 1",
                          rank, world_size);
    return SY_OK;
}

static const sy_comm_ops ops = {
    .struct_size = sizeof(sy_comm_ops),
    .rank = rank,
    .size = size,
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
    .name = "local",
    .version = PACKAGE_VERSION,
    .device = NULL,
    .description = "one process, one rank: collectives are no-ops, allgather copies",
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
