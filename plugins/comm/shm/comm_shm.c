/*
 * comm/shm: collectives between the ranks of one node over POSIX shared
 * memory (the CPU twin of the GPU custom allreduce).
 *
 * allreduce_sum has two algorithms, chosen per call by size (key
 * crossover) unless the key algorithm forces one:
 *   one-shot  every rank copies its chunk into its slot, barrier, every
 *             rank sums all slots: one barrier, N reads per element;
 *   two-shot  every rank copies its chunk into its slot, barrier, rank r
 *             sums slice r of all slots into the bank's result buffer
 *             (reduce-scatter), barrier, every rank copies the whole result
 *             (all-gather): each rank adds 1/N of the chunk instead of all.
 * Messages larger than a slot go chunk by chunk. Every element is summed
 * in rank order 0..N-1 by both algorithms, so all ranks get bitwise the
 * same result, equal to a serial sum in that order.
 *
 * Rendezvous and failures: see shm_seg.c. The group needs setup() (ABI
 * sy_comm_ops.setup) before any collective.
 */
#include "config.h"

#include "shm_seg.h"
#include "sycomm_args.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "switchyard/plugin.h"

enum { ALGO_AUTO = 0, ALGO_ONESHOT = 1, ALGO_TWOSHOT = 2 };
enum { OP_BARRIER = 2, OP_ALLREDUCE = 3, OP_ALLGATHER = 4, OP_BROADCAST = 5 };

typedef struct comm_shm {
    size_t crossover;
    size_t slot_size;
    int algorithm;
    int ready; /* setup() succeeded */
    uint64_t step; /* chunk steps so far: selects the bank */
    shm_seg seg;
} comm_shm;

static const sy_key_decl keys[] = {
    {"algorithm", SY_KEY_ENUM, "auto", "allreduce algorithm: auto picks one-shot up to crossover, two-shot above",
     0, 0, "auto|oneshot|twoshot"},
    {"crossover", SY_KEY_SIZE, "4K", "message size (bytes) up to which auto uses one-shot", 0, 1099511627776.0,
     NULL},
    {"slot_size", SY_KEY_SIZE, "512K", "bytes of shared memory per rank and bank; larger messages go in chunks",
     4096, 1073741824.0, NULL},
    {NULL, 0, NULL, NULL, 0, 0, NULL},
};

/* Values were validated by the host against the declarations above. */
static int probe(const sy_host *host, sy_err *why)
{
    (void)host;
    if (access("/dev/shm", W_OK) != 0)
        return sy_err_set(why, 0, "comm shm: /dev/shm is not writable (POSIX shared memory unavailable)");
    return 10; /* preferred over local, and over mpi within one node */
}

static int create(const sy_host *host, const sy_kv *cfg, size_t n_cfg, void **inst, sy_err *err)
{
    (void)host;
    comm_shm *c = calloc(1, sizeof *c);
    if (!c)
        return sy_err_set(err, SY_ERR_NOMEM, "comm shm: cannot allocate the instance");
    const char *algo = sy_kv_get(cfg, n_cfg, "algorithm");
    c->algorithm = !algo || !strcmp(algo, "auto") ? ALGO_AUTO : !strcmp(algo, "oneshot") ? ALGO_ONESHOT : ALGO_TWOSHOT;
    c->crossover = sy_kv_size(cfg, n_cfg, "crossover", 4 << 10);
    c->slot_size = sy_kv_size(cfg, n_cfg, "slot_size", 512 << 10) / 64 * 64;
    c->seg.rank = 0;
    c->seg.world = 1;
    *inst = c;
    return SY_OK;
}

static void destroy(void *inst)
{
    comm_shm *c = inst;
    if (c)
        shm_seg_leave(&c->seg);
    free(c);
}

static int setup(void *inst, int rank, int world_size, const char *rendezvous, double timeout_s, sy_err *err)
{
    comm_shm *c = inst;
    if (c->ready)
        return sy_err_set(err, SY_ERR_INVALID, "comm shm: setup called twice");
    if (world_size < 1 || world_size > SHM_MAX_RANKS)
        return sy_err_set(err, SY_ERR_INVALID, "comm shm: world_size %d, expected 1..%d (ranks of one node)",
                          world_size, SHM_MAX_RANKS);
    if (rank < 0 || rank >= world_size)
        return sy_err_set(err, SY_ERR_INVALID, "comm shm: rank %d is not in 0..%d", rank, world_size - 1);
    int rc = shm_seg_join(&c->seg, rank, world_size, rendezvous, c->slot_size, timeout_s, err);
    if (rc) {
        shm_seg_leave(&c->seg);
        c->seg.rank = 0;
        c->seg.world = 1;
        return rc;
    }
    c->ready = 1;
    return SY_OK;
}

static int rank_of(void *inst)
{
    return ((comm_shm *)inst)->seg.rank;
}

static int size_of(void *inst)
{
    return ((comm_shm *)inst)->seg.world;
}

static int need_ready(const comm_shm *c, const char *op, sy_err *err)
{
    if (!c->ready)
        return sy_err_set(err, SY_ERR_INVALID, "comm shm: %s before setup (call sy_comm_ops.setup first)", op);
    return SY_OK;
}

static uint64_t desc(int op, unsigned aux, uint64_t bytes)
{
    return ((uint64_t)op << 56) | ((uint64_t)(aux & 0xff) << 48) | (bytes & ((1ull << 48) - 1));
}

static int pick(const comm_shm *c, size_t bytes)
{
    if (c->algorithm != ALGO_AUTO)
        return c->algorithm;
    return bytes <= c->crossover ? ALGO_ONESHOT : ALGO_TWOSHOT;
}

/* Optional extra (get_proc "algorithm"): which allreduce a size takes. */
static const char *algorithm_for(void *inst, size_t bytes)
{
    const comm_shm *c = inst;
    if (c->seg.world <= 1)
        return "none";
    return pick(c, bytes) == ALGO_ONESHOT ? "oneshot" : "twoshot";
}

/*
 * dst[0..n) = slot0[lo..) + slot1[lo..) + ... summed in rank order for
 * every element (((s0 + s1) + s2) + ...). dst never overlaps a slot.
 */
static void sum_slots(const shm_seg *s, int bank, size_t lo, size_t n, float *dst)
{
    const float *s0 = (const float *)shm_slot(s, bank, 0) + lo;
    if (s->world == 1) {
        memcpy(dst, s0, n * sizeof(float));
        return;
    }
    const float *s1 = (const float *)shm_slot(s, bank, 1) + lo;
    for (size_t i = 0; i < n; i++)
        dst[i] = s0[i] + s1[i];
    for (int j = 2; j < s->world; j++) {
        const float *sj = (const float *)shm_slot(s, bank, j) + lo;
        for (size_t i = 0; i < n; i++)
            dst[i] += sj[i];
    }
}

static int allreduce_sum(void *inst, sy_tensor *t, sy_err *err)
{
    comm_shm *c = inst;
    int rc = need_ready(c, "allreduce_sum", err);
    if (rc)
        return rc;
    if ((rc = syc_check_allreduce(t, err)))
        return rc;
    const size_t n = (size_t)sy_tensor_numel(t);
    if (n && (t->device != 0 || !t->data))
        return sy_err_set(err, SY_ERR_INVALID, "allreduce_sum: comm shm needs host memory (device %d, data %p)",
                          t->device, t->data);
    shm_seg *s = &c->seg;
    const int algo = pick(c, n * sizeof(float));
    const uint64_t d = desc(OP_ALLREDUCE, (unsigned)algo, n * sizeof(float));
    float *x = t->data;
    const size_t chunk = s->slot_size / sizeof(float);
    if (n == 0)
        return shm_seg_barrier(s, d, 1, "allreduce_sum", err);
    for (size_t off = 0; off < n; off += chunk) {
        const size_t cn = n - off < chunk ? n - off : chunk;
        const int bank = (int)(c->step++ & 1);
        memcpy(shm_slot(s, bank, s->rank), x + off, cn * sizeof(float));
        rc = shm_seg_barrier(s, d, off == 0, "allreduce_sum", err);
        if (rc)
            return rc;
        if (algo == ALGO_ONESHOT) {
            sum_slots(s, bank, 0, cn, x + off);
            continue;
        }
        /* Slices of 16 floats (64 B) so no two ranks write one cache line. */
        const size_t per = ((cn + (size_t)s->world - 1) / (size_t)s->world + 15) / 16 * 16;
        const size_t lo = (size_t)s->rank * per < cn ? (size_t)s->rank * per : cn;
        const size_t hi = lo + per < cn ? lo + per : cn;
        float *res = (float *)shm_res(s, bank);
        sum_slots(s, bank, lo, hi - lo, res + lo);
        rc = shm_seg_barrier(s, d, 0, "allreduce_sum", err);
        if (rc)
            return rc;
        memcpy(x + off, res, cn * sizeof(float));
    }
    return SY_OK;
}

static int allgather(void *inst, const sy_tensor *in, sy_tensor *out, sy_err *err)
{
    comm_shm *c = inst;
    int rc = need_ready(c, "allgather", err);
    if (rc)
        return rc;
    shm_seg *s = &c->seg;
    if ((rc = syc_check_allgather(in, out, s->world, err)))
        return rc;
    const size_t bytes = sy_tensor_nbytes(in);
    if (bytes && (in->device != 0 || out->device != 0 || !in->data || !out->data))
        return sy_err_set(err, SY_ERR_INVALID, "allgather: comm shm needs host memory with data");
    const uint64_t d = desc(OP_ALLGATHER, 0, bytes);
    if (bytes == 0)
        return shm_seg_barrier(s, d, 1, "allgather", err);
    const unsigned char *src = in->data;
    unsigned char *dst = out->data;
    for (size_t off = 0; off < bytes; off += s->slot_size) {
        const size_t cb = bytes - off < s->slot_size ? bytes - off : s->slot_size;
        const int bank = (int)(c->step++ & 1);
        memcpy(shm_slot(s, bank, s->rank), src + off, cb);
        rc = shm_seg_barrier(s, d, off == 0, "allgather", err);
        if (rc)
            return rc;
        for (int j = 0; j < s->world; j++)
            memcpy(dst + (size_t)j * bytes + off, shm_slot(s, bank, j), cb);
    }
    return SY_OK;
}

static int broadcast(void *inst, void *buf, size_t bytes, int root, sy_err *err)
{
    comm_shm *c = inst;
    int rc = need_ready(c, "broadcast", err);
    if (rc)
        return rc;
    shm_seg *s = &c->seg;
    if ((rc = syc_check_broadcast(buf, bytes, root, s->world, err)))
        return rc;
    const uint64_t d = desc(OP_BROADCAST, (unsigned)root, bytes);
    if (bytes == 0)
        return shm_seg_barrier(s, d, 1, "broadcast", err);
    /* A bank's slots are contiguous: the root uses the whole bank. */
    const size_t chunk = s->slot_size * (size_t)s->world;
    unsigned char *p = buf;
    for (size_t off = 0; off < bytes; off += chunk) {
        const size_t cb = bytes - off < chunk ? bytes - off : chunk;
        const int bank = (int)(c->step++ & 1);
        if (s->rank == root)
            memcpy(shm_slot(s, bank, 0), p + off, cb);
        rc = shm_seg_barrier(s, d, off == 0, "broadcast", err);
        if (rc)
            return rc;
        if (s->rank != root)
            memcpy(p + off, shm_slot(s, bank, 0), cb);
    }
    return SY_OK;
}

static int barrier(void *inst, sy_err *err)
{
    comm_shm *c = inst;
    int rc = need_ready(c, "barrier", err);
    return rc ? rc : shm_seg_barrier(&c->seg, desc(OP_BARRIER, 0, 0), 1, "barrier", err);
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
    .name = "shm",
    .version = PACKAGE_VERSION,
    .device = "cpu",
    .description = "ranks of one node over POSIX shared memory: one-shot/two-shot allreduce, deterministic",
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
