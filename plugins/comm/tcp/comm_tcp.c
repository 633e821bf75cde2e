/*
 * comm/tcp: collectives between ranks on any number of nodes over a full
 * mesh of TCP connections (tcp_mesh.h), for CPU tensor parallelism across
 * nodes without MPI (`switchyard serve --nnodes`).
 *
 * allreduce_sum: up to `crossover` bytes every rank sends its whole tensor
 * to every other and sums all of them (one round trip, the latency-bound
 * decode case); above it, reduce-scatter then all-gather: rank r receives
 * slice r from every rank, sums it, and sends the sum back to every rank,
 * so each rank moves 2(N-1)/N of the tensor. Both sum every element in
 * rank order 0..N-1, so every rank gets bitwise the same result, equal to a
 * serial sum in that order.
 */
#include "config.h"

#include "sycomm_args.h"
#include "tcp_mesh.h"

#include <stdlib.h>
#include <string.h>

#include "switchyard/plugin.h"

typedef struct comm_tcp {
    size_t crossover;
    char listen_host[128];
    int ready;
    tcp_mesh mesh;
    float *scratch; /* received contributions, then the summed slice */
    size_t scratch_cap; /* floats */
} comm_tcp;

static const sy_key_decl keys[] = {
    {"crossover", SY_KEY_SIZE, "64K",
     "message size (bytes) up to which allreduce sends whole tensors (one round trip); above it reduce-scatter + "
     "all-gather",
     0, 1099511627776.0, NULL},
    {"listen_host", SY_KEY_STRING, "",
     "address this rank's listener binds and other ranks connect to; empty: the local address of its connection to "
     "rank 0",
     0, 0, NULL},
    {NULL, 0, NULL, NULL, 0, 0, NULL},
};

/* Values were validated by the host against the declarations above. */
static int probe(const sy_host *host, sy_err *why)
{
    (void)host;
    (void)why;
    return 2; /* below every other transport: the launcher names tcp itself for --nnodes */
}

static int create(const sy_host *host, const sy_kv *cfg, size_t n_cfg, void **inst, sy_err *err)
{
    (void)host;
    comm_tcp *c = calloc(1, sizeof *c);
    if (!c)
        return sy_err_set(err, SY_ERR_NOMEM, "comm tcp: cannot allocate the instance");
    c->crossover = sy_kv_size(cfg, n_cfg, "crossover", 64 << 10);
    const char *lh = sy_kv_get(cfg, n_cfg, "listen_host");
    snprintf(c->listen_host, sizeof c->listen_host, "%s", lh ? lh : "");
    tcp_mesh_init(&c->mesh);
    *inst = c;
    return SY_OK;
}

static void destroy(void *inst)
{
    comm_tcp *c = inst;
    if (!c)
        return;
    tcp_mesh_close(&c->mesh);
    free(c->scratch);
    free(c);
}

static int setup(void *inst, int rank, int world_size, const char *rendezvous, double timeout_s, sy_err *err)
{
    comm_tcp *c = inst;
    if (c->ready)
        return sy_err_set(err, SY_ERR_INVALID, "comm tcp: setup called twice");
    int rc = tcp_mesh_join(&c->mesh, rank, world_size, rendezvous, c->listen_host, timeout_s, err);
    if (rc) {
        tcp_mesh_init(&c->mesh);
        return rc;
    }
    c->ready = 1;
    return SY_OK;
}

static int rank_of(void *inst) { return ((comm_tcp *)inst)->mesh.rank; }
static int size_of(void *inst) { return ((comm_tcp *)inst)->mesh.world; }

static int need_ready(const comm_tcp *c, const char *op, sy_err *err)
{
    if (!c->ready)
        return sy_err_set(err, SY_ERR_INVALID, "comm tcp: %s before setup (call sy_comm_ops.setup first)", op);
    return SY_OK;
}

static int reserve(comm_tcp *c, size_t floats, sy_err *err)
{
    if (floats <= c->scratch_cap)
        return SY_OK;
    float *p = realloc(c->scratch, floats * sizeof(float));
    if (!p)
        return sy_err_set(err, SY_ERR_NOMEM, "comm tcp: cannot allocate %zu bytes of receive buffer",
                          floats * sizeof(float));
    c->scratch = p;
    c->scratch_cap = floats;
    return SY_OK;
}

/* out[0..n) = src[0][i] + src[1][i] + ... in rank order. */
static void sum_in_order(float *const *src, int world, size_t n, float *out)
{
    memcpy(out, src[0], n * sizeof(float));
    for (int j = 1; j < world; j++)
        for (size_t i = 0; i < n; i++)
            out[i] += src[j][i];
}

static int allreduce_sum(void *inst, sy_tensor *t, sy_err *err)
{
    comm_tcp *c = inst;
    int rc = need_ready(c, "allreduce_sum", err);
    if (rc)
        return rc;
    if ((rc = syc_check_allreduce(t, err)))
        return rc;
    const size_t n = (size_t)sy_tensor_numel(t);
    if (n && (t->device != 0 || !t->data))
        return sy_err_set(err, SY_ERR_INVALID, "allreduce_sum: comm tcp needs host memory (device %d, data %p)",
                          t->device, t->data);
    tcp_mesh *m = &c->mesh;
    const int W = m->world, me = m->rank;
    if (W == 1)
        return SY_OK;
    float *x = t->data;
    tcp_xfer xf[TCP_MAX_RANKS];
    float *src[TCP_MAX_RANKS];
    if (n == 0) {
        /* Still a collective: every rank takes part, so a rank that disagrees on the size is caught. */
        for (int q = 0; q < W; q++)
            xf[q] = (tcp_xfer){.send = true, .recv = true};
        return tcp_mesh_exchange(m, "allreduce_sum", xf, err);
    }
    if (n * sizeof(float) <= c->crossover) {
        /* Everyone's whole tensor, then the sum: scratch holds W-1 copies and the result. */
        if ((rc = reserve(c, n * (size_t)W, err)))
            return rc;
        for (int q = 0, k = 0; q < W; q++) {
            src[q] = q == me ? x : c->scratch + (size_t)k++ * n;
            xf[q] = (tcp_xfer){.sbuf = x, .slen = n * sizeof(float), .send = true, .rbuf = src[q],
                               .rlen = n * sizeof(float), .recv = true};
        }
        if ((rc = tcp_mesh_exchange(m, "allreduce_sum", xf, err)))
            return rc;
        float *out = c->scratch + (size_t)(W - 1) * n;
        sum_in_order(src, W, n, out);
        memcpy(x, out, n * sizeof(float));
        return SY_OK;
    }
    const size_t per = (n + (size_t)W - 1) / (size_t)W;
#define LO(r) ((size_t)(r) * per < n ? (size_t)(r) * per : n)
#define HI(r) (LO(r) + per < n ? LO(r) + per : n)
    const size_t mine = HI(me) - LO(me);
    if ((rc = reserve(c, per * (size_t)W, err)))
        return rc;
    for (int q = 0, k = 0; q < W; q++) {
        src[q] = q == me ? x + LO(me) : c->scratch + (size_t)k++ * per;
        xf[q] = (tcp_xfer){.sbuf = x + LO(q), .slen = (HI(q) - LO(q)) * sizeof(float), .send = true,
                           .rbuf = src[q], .rlen = mine * sizeof(float), .recv = true};
    }
    if ((rc = tcp_mesh_exchange(m, "allreduce_sum", xf, err)))
        return rc;
    float *out = c->scratch + (size_t)(W - 1) * per;
    sum_in_order(src, W, mine, out);
    memcpy(x + LO(me), out, mine * sizeof(float));
    for (int q = 0; q < W; q++)
        xf[q] = (tcp_xfer){.sbuf = x + LO(me), .slen = mine * sizeof(float), .send = true, .rbuf = x + LO(q),
                           .rlen = (HI(q) - LO(q)) * sizeof(float), .recv = true};
#undef LO
#undef HI
    return tcp_mesh_exchange(m, "allreduce_sum", xf, err);
}

static int allgather(void *inst, const sy_tensor *in, sy_tensor *out, sy_err *err)
{
    comm_tcp *c = inst;
    int rc = need_ready(c, "allgather", err);
    if (rc)
        return rc;
    tcp_mesh *m = &c->mesh;
    if ((rc = syc_check_allgather(in, out, m->world, err)))
        return rc;
    const size_t bytes = sy_tensor_nbytes(in);
    if (bytes && (in->device != 0 || out->device != 0 || !in->data || !out->data))
        return sy_err_set(err, SY_ERR_INVALID, "allgather: comm tcp needs host memory with data");
    unsigned char *dst = out->data;
    if (bytes)
        memcpy(dst + (size_t)m->rank * bytes, in->data, bytes);
    tcp_xfer xf[TCP_MAX_RANKS];
    for (int q = 0; q < m->world; q++)
        xf[q] = (tcp_xfer){.sbuf = in->data, .slen = bytes, .send = true, .rbuf = dst ? dst + (size_t)q * bytes : NULL,
                           .rlen = bytes, .recv = true};
    return m->world == 1 ? SY_OK : tcp_mesh_exchange(m, "allgather", xf, err);
}

static int broadcast(void *inst, void *buf, size_t bytes, int root, sy_err *err)
{
    comm_tcp *c = inst;
    int rc = need_ready(c, "broadcast", err);
    if (rc)
        return rc;
    tcp_mesh *m = &c->mesh;
    if ((rc = syc_check_broadcast(buf, bytes, root, m->world, err)))
        return rc;
    if (m->world == 1)
        return SY_OK;
    tcp_xfer xf[TCP_MAX_RANKS];
    for (int q = 0; q < m->world; q++)
        xf[q] = (tcp_xfer){.sbuf = buf, .slen = bytes, .send = m->rank == root, .rbuf = buf, .rlen = bytes,
                           .recv = q == root};
    return tcp_mesh_exchange(m, "broadcast", xf, err);
}

static int barrier(void *inst, sy_err *err)
{
    comm_tcp *c = inst;
    int rc = need_ready(c, "barrier", err);
    if (rc || c->mesh.world == 1)
        return rc;
    tcp_xfer xf[TCP_MAX_RANKS];
    for (int q = 0; q < c->mesh.world; q++)
        xf[q] = (tcp_xfer){.send = true, .recv = true};
    return tcp_mesh_exchange(&c->mesh, "barrier", xf, err);
}

/* Optional extra (get_proc "algorithm"), as comm shm has: which allreduce a size takes. */
static const char *algorithm_for(void *inst, size_t bytes)
{
    const comm_tcp *c = inst;
    if (c->mesh.world <= 1)
        return "none";
    return bytes <= c->crossover ? "whole" : "scatter-gather";
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

static const sy_plugin_desc desc_ = {
    .struct_size = sizeof(sy_plugin_desc),
    .abi_major = SY_ABI_MAJOR,
    .abi_minor = SY_ABI_MINOR,
    .kind = SY_KIND_COMM,
    .name = "tcp",
    .version = PACKAGE_VERSION,
    .device = "cpu",
    .description = "ranks on any nodes over a TCP mesh (rendezvous HOST:PORT at rank 0); deterministic rank-order sums",
    .keys = keys,
    .probe = probe,
    .create = create,
    .destroy = destroy,
    .ops = &ops,
    .get_proc = get_proc,
};

SY_EXPORT const sy_plugin_desc *SY_PLUGIN_ENTRY(void);
SY_EXPORT const sy_plugin_desc *SY_PLUGIN_ENTRY(void)
{
    return &desc_;
}
