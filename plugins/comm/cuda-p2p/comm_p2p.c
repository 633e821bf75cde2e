/*
 * comm/cuda-p2p: collectives between the GPUs of one node through CUDA IPC:
 * each rank exposes a device buffer of two banks, maps every peer's buffer
 * (cudaIpcOpenMemHandle), and the allreduce is one-shot: every rank copies
 * its chunk into its bank, the ranks meet at a host barrier, and every rank
 * sums all ranks' chunks straight from their GPUs in rank order (bitwise
 * the same result everywhere). Chunks alternate the banks, so a bank is
 * only overwritten once every rank has passed the next barrier, i.e.
 * finished reading it (each rank waits for its kernel before the barrier).
 *
 * The rendezvous, the IPC handles and the barriers go through comm/shm's
 * shared segment (shm_seg.c, compiled in): the same timeouts and dead-peer
 * detection as the shm plugin.
 *
 * Every copy and the sum kernel go on the calling thread's per-thread
 * default stream, the one the device plugin's kernels use (sycuda.h), so
 * they follow the work that made the operands without any implicit
 * synchronisation. A host barrier only says something about the GPU once
 * that stream is drained (drain()): before a barrier that publishes this
 * rank's bank (device-to-device copies return before they are done) and
 * before one that lets the peers reuse banks this rank read.
 *
 * probe scores 60 (above nccl's 50) when at least two GPUs are visible
 * and every pair reports peer access, so [comm] plugin = auto tries it
 * first; setup then checks every peer with a real copy under the timeout
 * and refuses (SY_ERR_UNAVAILABLE), with the measured bandwidth, when it is
 * below min_bandwidth, so auto falls back to nccl. Every refusal after the
 * segment is joined goes through fail(), which marks the segment, so every
 * peer refuses at its next barrier too (the setup contract of plugin.h).
 *
 * One visible GPU scores 1 (below nccl), and setup refuses ranks that share
 * a GPU unless same_device = allow: CUDA IPC works between two processes on
 * one device, which lets a one-GPU machine run this plugin's whole path
 * (tests/gpu/run.sh), though it is no use for serving.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "p2p_kern.h"
#include "shm_seg.h"
#include "sycomm_args.h"
#include "sycuda.h"

/* The runtime calls without a stream (cudaMemset) must go to the per-thread stream: SY_CUDA_CPPFLAGS. */
#ifndef CUDA_API_PER_THREAD_DEFAULT_STREAM
#error "comm cuda-p2p: build with SY_CUDA_CPPFLAGS (CUDA_API_PER_THREAD_DEFAULT_STREAM), as every CUDA plugin"
#endif

#define NAME "cuda-p2p"
#define PROBE_BYTES ((size_t)16 << 20)

enum { OP_BARRIER = 2, OP_ALLREDUCE = 3, OP_ALLGATHER = 4, OP_BROADCAST = 5, OP_SETUP = 6, OP_LEAVE = 7 };

/* What each rank publishes in its shm slot at setup. */
typedef struct peer_info {
    cudaIpcMemHandle_t handle;
    char bus[32];
} peer_info;

/*
 * A rank's verdict on its timed peer copies, at VERDICT_AT in its slot
 * (after peer_info, which nobody reads once the buffers are mapped). Every
 * rank refuses if any rank does, and only after the barrier that follows
 * the copies: a rank that refused at once would free its buffer while a
 * peer may still be copying from it.
 */
typedef struct peer_verdict {
    int32_t code; /* SY_OK or SY_ERR_UNAVAILABLE */
    char msg[480];
} peer_verdict;
#define VERDICT_AT 1024
#define SLOT_BYTES 4096
_Static_assert(sizeof(peer_info) <= VERDICT_AT && VERDICT_AT + sizeof(peer_verdict) <= SLOT_BYTES,
               "peer_info and the verdict share a rank's slot");

typedef struct comm_p2p {
    size_t bank_bytes;
    double min_gbs;
    int gpu;            /* [comm] gpu; -1 until setup takes the device current on its thread (the device plugin's) */
    int same_device_ok; /* same_device = allow (tests) */
    int ready, broken;
    uint64_t step;
    shm_seg seg;
    void *buf;                        /* own: 2 banks of bank_bytes */
    void *peer[SYP2P_MAX_RANKS];      /* mapped buffers (peer[rank] = buf) */
    void *scratch;                    /* host-buffer staging */
    size_t scratch_cap;
} comm_p2p;

static const sy_key_decl keys[] = {
    {"buffer_size", SY_KEY_SIZE, "32M", "bytes of GPU memory per rank and bank (two banks); larger messages go in chunks",
     65536, 4294967296.0, NULL},
    {"min_bandwidth", SY_KEY_FLOAT, "10",
     "GB/s a peer copy must reach at setup; slower (PCIe through the CPU) is refused so nccl is used instead", 0,
     100000, NULL},
    {"gpu", SY_KEY_INT, "-1",
     "this rank's CUDA device; -1 = the device plugin's ([device] gpu: by default the rank's local rank)", -1, 1023,
     NULL},
    {"same_device", SY_KEY_ENUM, "refuse",
     "ranks that share one GPU: refuse (no use for serving), or allow (tests only: runs the IPC path on one GPU)", 0, 0,
     "refuse|allow"},
    {NULL, 0, NULL, NULL, 0, 0, NULL},
};

static int probe(const sy_host *host, sy_err *why)
{
    (void)host;
    int ma = 0, mi = 0;
    const int n = syc_probe(0, why, &ma, &mi);
    if (!n)
        return 0;
    if (n < 2)
        return 1; /* below nccl: only same_device = allow (tests) gets past setup with one GPU */
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++) {
            int ok = 0;
            if (a != b && (cudaDeviceCanAccessPeer(&ok, a, b) != cudaSuccess || !ok)) {
                sy_err_set(why, SY_ERR_UNSUPPORTED, "GPU %d cannot access GPU %d (no peer-to-peer): use nccl", a, b);
                return 0;
            }
        }
    return 60;
}

static int create(const sy_host *host, const sy_kv *cfg, size_t n_cfg, void **inst, sy_err *err)
{
    (void)host;
    comm_p2p *c = calloc(1, sizeof *c);
    if (!c)
        return sy_err_set(err, SY_ERR_NOMEM, "comm cuda-p2p: cannot allocate the instance");
    c->bank_bytes = sy_kv_size(cfg, n_cfg, "buffer_size", (size_t)32 << 20) / 4 * 4;
    c->min_gbs = sy_kv_float(cfg, n_cfg, "min_bandwidth", 10.0);
    c->gpu = (int)sy_kv_int(cfg, n_cfg, "gpu", -1);
    const char *same = sy_kv_get(cfg, n_cfg, "same_device");
    c->same_device_ok = same && !strcmp(same, "allow");
    c->seg.world = 1;
    *inst = c;
    return SY_OK;
}

static void destroy(void *inst)
{
    comm_p2p *c = inst;
    if (!c)
        return;
    if (c->gpu >= 0)
        cudaSetDevice(c->gpu); /* the banks and the peer mappings belong to it, whichever thread destroys */
    if (c->ready && !c->broken) {
        /* Peers may still be reading this rank's banks: leave together. The whole device, not one stream:
         * the thread destroying may not be the one that queued the last copies. */
        sy_err err;
        cudaDeviceSynchronize();
        shm_seg_barrier(&c->seg, (uint64_t)OP_LEAVE << 56, 0, "leaving", &err);
    }
    for (int r = 0; r < c->seg.world && r < SYP2P_MAX_RANKS; r++)
        if (c->peer[r] && c->peer[r] != c->buf)
            cudaIpcCloseMemHandle(c->peer[r]);
    if (c->buf)
        cudaFree(c->buf);
    if (c->scratch)
        cudaFree(c->scratch);
    if (c->seg.base)
        shm_seg_leave(&c->seg);
    free(c);
}

static int rank_of(void *inst)
{
    return ((comm_p2p *)inst)->seg.rank;
}

static int size_of(void *inst)
{
    return ((comm_p2p *)inst)->seg.world;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Fails the group (peers learn it at their next barrier) with a cuda-p2p message. */
static int fail(comm_p2p *c, int code, sy_err *err)
{
    c->broken = 1;
    if (c->seg.base)
        return shm_seg_fail(&c->seg, code, err);
    return code;
}

static int cuda_fail(comm_p2p *c, cudaError_t e, const char *what, sy_err *err)
{
    sy_err_set(err, SY_ERR_UNAVAILABLE, "comm cuda-p2p: rank %d: %s: %s", c->seg.rank, what, cudaGetErrorString(e));
    return fail(c, SY_ERR_UNAVAILABLE, err);
}

#define P2P_TRY(c, call, what, err)                      \
    do {                                                 \
        cudaError_t p2p_e_ = (call);                     \
        if (p2p_e_ != cudaSuccess)                       \
            return cuda_fail((c), p2p_e_, (what), (err)); \
    } while (0)

/* Waits for everything this thread queued (see the top): its copies and kernels are then done. */
static int drain(comm_p2p *c, const char *what, sy_err *err)
{
    P2P_TRY(c, cudaStreamSynchronize(cudaStreamPerThread), what, err);
    return SY_OK;
}

static int setup(void *inst, int rank, int world, const char *rendezvous, double timeout_s, sy_err *err)
{
    comm_p2p *c = inst;
    if (c->ready)
        return sy_err_set(err, SY_ERR_INVALID, "comm cuda-p2p: setup called twice");
    if (world < 1 || world > SYP2P_MAX_RANKS)
        return sy_err_set(err, SY_ERR_INVALID, "comm cuda-p2p: world size %d, expected 1..%d GPUs of one node", world,
                          SYP2P_MAX_RANKS);
    if (rank < 0 || rank >= world)
        return sy_err_set(err, SY_ERR_INVALID, "comm cuda-p2p: rank %d is not in 0..%d", rank, world - 1);
    if (!rendezvous || !*rendezvous)
        return sy_err_set(err, SY_ERR_INVALID, "comm cuda-p2p: an empty rendezvous string; expected one unique per run");
    char rv[240];
    snprintf(rv, sizeof rv, "p2p-%s", rendezvous);
    int rc = shm_seg_join(&c->seg, rank, world, rv, SLOT_BYTES, timeout_s, err);
    if (rc)
        return rc;
    /* Only once joined: from here a failure on one rank fails the segment, so every rank refuses. */
    /* The peer mappings and the sum kernel belong to this GPU; later ops may come from another thread, whose
     * current device may be another one, so they make it current again (check_ready). */
    if (c->gpu < 0)
        c->gpu = syc_current_gpu();
    P2P_TRY(c, cudaSetDevice(c->gpu), "cudaSetDevice", err);
    const int dev = c->gpu;
    P2P_TRY(c, cudaMalloc(&c->buf, 2 * c->bank_bytes), "allocating the peer buffer", err);
    peer_info me;
    memset(&me, 0, sizeof me);
    P2P_TRY(c, cudaIpcGetMemHandle(&me.handle, c->buf), "cudaIpcGetMemHandle", err);
    P2P_TRY(c, cudaDeviceGetPCIBusId(me.bus, sizeof me.bus, dev), "cudaDeviceGetPCIBusId", err);
    memcpy(shm_slot(&c->seg, 0, rank), &me, sizeof me);
    if ((rc = shm_seg_barrier(&c->seg, (uint64_t)OP_SETUP << 56, 1, "exchanging IPC handles", err)))
        return fail(c, rc, err);
    for (int r = 0; r < world; r++) {
        if (r == rank) {
            c->peer[r] = c->buf;
            continue;
        }
        peer_info pi;
        memcpy(&pi, shm_slot(&c->seg, 0, r), sizeof pi);
        int pdev = -1, ok = 0;
        const int found = cudaDeviceGetByPCIBusId(&pdev, pi.bus) == cudaSuccess;
        if (found && pdev == dev && !c->same_device_ok) {
            sy_err_set(err, SY_ERR_UNAVAILABLE,
                       "comm cuda-p2p: rank %d and rank %d share GPU %s: peer-to-peer needs one GPU per rank "
                       "(same_device = allow is for tests only)", rank, r, me.bus);
            return fail(c, SY_ERR_UNAVAILABLE, err);
        }
        if (found && pdev != dev && (cudaDeviceCanAccessPeer(&ok, dev, pdev) != cudaSuccess || !ok)) {
            sy_err_set(err, SY_ERR_UNAVAILABLE,
                       "comm cuda-p2p: rank %d: GPU %s cannot access rank %d's GPU %s (no peer-to-peer); use "
                       "[comm] plugin = nccl", rank, me.bus, r, pi.bus);
            return fail(c, SY_ERR_UNAVAILABLE, err);
        }
        cudaGetLastError();
        cudaError_t e = cudaIpcOpenMemHandle(&c->peer[r], pi.handle, cudaIpcMemLazyEnablePeerAccess);
        if (e != cudaSuccess) {
            c->peer[r] = NULL;
            sy_err_set(err, SY_ERR_UNAVAILABLE, "comm cuda-p2p: rank %d cannot map rank %d's buffer (GPU %s): %s; use "
                       "[comm] plugin = nccl", rank, r, pi.bus, cudaGetErrorString(e));
            return fail(c, SY_ERR_UNAVAILABLE, err);
        }
    }
    /* A real transfer from every peer, timed: mapped is not the same as fast. */
    const size_t probe = PROBE_BYTES < c->bank_bytes ? PROBE_BYTES : c->bank_bytes;
    P2P_TRY(c, cudaMemsetAsync(c->buf, rank & 0xff, 2 * c->bank_bytes, cudaStreamPerThread),
            "clearing the peer buffer", err);
    if ((rc = drain(c, "clearing the peer buffer", err)))
        return rc;
    if ((rc = shm_seg_barrier(&c->seg, (uint64_t)OP_SETUP << 56 | 1, 1, "peer buffers ready", err)))
        return fail(c, rc, err);
    peer_verdict mine = {SY_OK, ""};
    for (int r = 0; r < world && mine.code == SY_OK; r++) {
        if (r == rank)
            continue;
        const double t0 = now_s();
        /* Into bank 1 of this rank's own buffer: nobody reads it before the next barrier. */
        P2P_TRY(c, cudaMemcpyAsync((char *)c->buf + c->bank_bytes, c->peer[r], probe, cudaMemcpyDeviceToDevice,
                                   cudaStreamPerThread), "peer copy", err);
        /* Timed to the copy's end: a device-to-device cudaMemcpy returns once queued. */
        if ((rc = drain(c, "peer copy", err)))
            return rc;
        const double dt = now_s() - t0, gbs = (double)probe / (dt > 1e-9 ? dt : 1e-9) / 1e9;
        unsigned char first = 0;
        P2P_TRY(c, cudaMemcpy(&first, (char *)c->buf + c->bank_bytes, 1, cudaMemcpyDeviceToHost), "peer check", err);
        if (first != (unsigned char)(r & 0xff))
            snprintf(mine.msg, sizeof mine.msg, "comm cuda-p2p: rank %d read %u from rank %d's buffer, expected %u: "
                     "peer copies are broken here; use [comm] plugin = nccl", rank, first, r, (unsigned)(r & 0xff));
        else if (timeout_s > 0 && dt > timeout_s)
            snprintf(mine.msg, sizeof mine.msg, "comm cuda-p2p: rank %d: a %zu-byte copy from rank %d took %.1f s, over "
                     "the %.1f s timeout", rank, probe, r, dt, timeout_s);
        else if (gbs < c->min_gbs)
            snprintf(mine.msg, sizeof mine.msg, "comm cuda-p2p: rank %d: copies from rank %d run at %.1f GB/s, under "
                     "min_bandwidth %.1f; use [comm] plugin = nccl", rank, r, gbs, c->min_gbs);
        if (mine.msg[0])
            mine.code = SY_ERR_UNAVAILABLE;
    }
    memcpy(shm_slot(&c->seg, 0, rank) + VERDICT_AT, &mine, sizeof mine);
    if ((rc = shm_seg_barrier(&c->seg, (uint64_t)OP_SETUP << 56 | 2, 1, "peer copies checked", err)))
        return fail(c, rc, err);
    for (int r = 0; r < world; r++) {
        peer_verdict v;
        memcpy(&v, shm_slot(&c->seg, 0, r) + VERDICT_AT, sizeof v);
        if (v.code != SY_OK) {
            /* Every rank read the same verdicts: all refuse together, none fails the segment under the others. */
            v.msg[sizeof v.msg - 1] = 0;
            c->broken = 1;
            return sy_err_set(err, SY_ERR_UNAVAILABLE, "%s%s", v.msg,
                              r == rank ? "" : " (every rank refuses with it)");
        }
    }
    c->ready = 1;
    return SY_OK;
}

/* Also makes the instance's GPU current: every op that touches the GPU starts here. */
static int check_ready(const comm_p2p *c, const char *op, sy_err *err)
{
    if (c->broken)
        return sy_err_set(err, SY_ERR_UNAVAILABLE, "comm cuda-p2p: %s after a failed collective; destroy the instance",
                          op);
    if (!c->ready && c->seg.world > 1)
        return sy_err_set(err, SY_ERR_INVALID, "comm cuda-p2p: %s before setup", op);
    if (c->gpu >= 0)
        return syc_enter(c->gpu, err, "comm cuda-p2p");
    return SY_OK;
}

static int is_device_ptr(const void *p)
{
    struct cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

static int scratch(comm_p2p *c, size_t bytes, sy_err *err)
{
    if (bytes <= c->scratch_cap)
        return SY_OK;
    if (c->scratch)
        cudaFree(c->scratch);
    c->scratch = NULL;
    c->scratch_cap = 0;
    P2P_TRY(c, cudaMalloc(&c->scratch, bytes), "staging buffer", err);
    c->scratch_cap = bytes;
    return SY_OK;
}

static uint64_t desc_of(int op, size_t bytes)
{
    return (uint64_t)op << 56 | ((uint64_t)bytes & ((1ull << 56) - 1));
}

static int allreduce_sum(void *inst, sy_tensor *t, sy_err *err)
{
    comm_p2p *c = inst;
    int rc = check_ready(c, "allreduce_sum", err);
    if (rc)
        return rc;
    if ((rc = syc_check_allreduce(t, err)))
        return rc;
    const size_t n = (size_t)sy_tensor_numel(t), bytes = n * sizeof(float);
    if (c->seg.world == 1 || n == 0)
        return SY_OK;
    float *data = t->data;
    const int host = !is_device_ptr(data);
    if (host) {
        if ((rc = scratch(c, bytes, err)))
            return rc;
        P2P_TRY(c, cudaMemcpy(c->scratch, t->data, bytes, cudaMemcpyHostToDevice), "stage in", err);
        data = c->scratch;
    }
    const size_t chunk = c->bank_bytes / sizeof(float);
    for (size_t off = 0; off < n; off += chunk, c->step++) {
        const size_t len = n - off < chunk ? n - off : chunk;
        const size_t bank_off = (size_t)(c->step & 1) * c->bank_bytes;
        P2P_TRY(c, cudaMemcpyAsync((char *)c->buf + bank_off, data + off, len * sizeof(float),
                                   cudaMemcpyDeviceToDevice, cudaStreamPerThread), "allreduce: copy in", err);
        if ((rc = drain(c, "allreduce: copy in", err)))
            return rc;
        if ((rc = shm_seg_barrier(&c->seg, desc_of(OP_ALLREDUCE, len * sizeof(float)), 1, "allreduce_sum", err)))
            return fail(c, rc, err);
        const float *src[SYP2P_MAX_RANKS];
        for (int r = 0; r < c->seg.world; r++)
            src[r] = (const float *)((const char *)c->peer[r] + bank_off);
        P2P_TRY(c, syp2p_sum(data + off, src, c->seg.world, len), "allreduce: sum kernel launch", err);
        /* Done reading the peers' bank before the next barrier lets them reuse it. */
        if ((rc = drain(c, "allreduce: sum", err)))
            return rc;
    }
    if (host)
        P2P_TRY(c, cudaMemcpy(t->data, c->scratch, bytes, cudaMemcpyDeviceToHost), "stage out", err);
    return SY_OK;
}

static int allgather(void *inst, const sy_tensor *in, sy_tensor *out, sy_err *err)
{
    comm_p2p *c = inst;
    int rc = check_ready(c, "allgather", err);
    if (rc)
        return rc;
    if (!in || !out || in->dtype != out->dtype)
        return sy_err_set(err, SY_ERR_INVALID, "comm cuda-p2p: allgather needs in and out of one dtype");
    const size_t bytes = sy_tensor_nbytes(in), W = (size_t)c->seg.world;
    if (sy_tensor_nbytes(out) != bytes * W)
        return sy_err_set(err, SY_ERR_INVALID, "comm cuda-p2p: allgather out holds %zu bytes, expected %zu x %zu ranks",
                          sy_tensor_nbytes(out), bytes, W);
    for (size_t off = 0; off < bytes; off += c->bank_bytes, c->step++) {
        const size_t len = bytes - off < c->bank_bytes ? bytes - off : c->bank_bytes;
        const size_t bank_off = (size_t)(c->step & 1) * c->bank_bytes;
        P2P_TRY(c, cudaMemcpyAsync((char *)c->buf + bank_off, (const char *)in->data + off, len, cudaMemcpyDefault,
                                   cudaStreamPerThread), "allgather: copy in", err);
        if ((rc = drain(c, "allgather: copy in", err)))
            return rc;
        if ((rc = shm_seg_barrier(&c->seg, desc_of(OP_ALLGATHER, len), 1, "allgather", err)))
            return fail(c, rc, err);
        for (size_t r = 0; r < W; r++)
            P2P_TRY(c, cudaMemcpyAsync((char *)out->data + r * bytes + off, (const char *)c->peer[r] + bank_off, len,
                                       cudaMemcpyDefault, cudaStreamPerThread), "allgather: copy out", err);
        if ((rc = drain(c, "allgather: copy out", err)))
            return rc;
    }
    return SY_OK;
}

static int broadcast(void *inst, void *buf, size_t bytes, int root, sy_err *err)
{
    comm_p2p *c = inst;
    int rc = check_ready(c, "broadcast", err);
    if (rc)
        return rc;
    if ((rc = syc_check_broadcast(buf, bytes, root, c->seg.world, err)))
        return rc;
    if (c->seg.world == 1)
        return SY_OK;
    for (size_t off = 0; off < bytes; off += c->bank_bytes, c->step++) {
        const size_t len = bytes - off < c->bank_bytes ? bytes - off : c->bank_bytes;
        const size_t bank_off = (size_t)(c->step & 1) * c->bank_bytes;
        if (c->seg.rank == root) {
            P2P_TRY(c, cudaMemcpyAsync((char *)c->buf + bank_off, (char *)buf + off, len, cudaMemcpyDefault,
                                       cudaStreamPerThread), "broadcast: copy in", err);
            if ((rc = drain(c, "broadcast: copy in", err)))
                return rc;
        }
        if ((rc = shm_seg_barrier(&c->seg, desc_of(OP_BROADCAST, len), 1, "broadcast", err)))
            return fail(c, rc, err);
        if (c->seg.rank != root) {
            P2P_TRY(c, cudaMemcpyAsync((char *)buf + off, (const char *)c->peer[root] + bank_off, len,
                                       cudaMemcpyDefault, cudaStreamPerThread), "broadcast: copy out", err);
            if ((rc = drain(c, "broadcast: copy out", err)))
                return rc;
        }
    }
    return SY_OK;
}

static int barrier(void *inst, sy_err *err)
{
    comm_p2p *c = inst;
    int rc = check_ready(c, "barrier", err);
    if (rc || c->seg.world == 1)
        return rc;
    /* This thread's work (every CUDA plugin's, sycuda.h) is done before the ranks meet. */
    if ((rc = drain(c, "barrier", err)))
        return rc;
    if ((rc = shm_seg_barrier(&c->seg, desc_of(OP_BARRIER, 0), 1, "barrier", err)))
        return fail(c, rc, err);
    return SY_OK;
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
    .name = NAME,
    .version = PACKAGE_VERSION,
    .device = "cuda",
    .description = "GPUs of one node over CUDA IPC peer mappings: one-shot allreduce in rank order; refuses at setup "
                   "when a peer copy fails or is slow",
    .keys = keys,
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
