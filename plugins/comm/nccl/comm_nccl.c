/*
 * comm/nccl: collectives between GPUs (one per rank, any number of nodes)
 * through NCCL.
 *
 * Rendezvous: rank 0 makes the ncclUniqueId and hands it to the others.
 * A rendezvous of the form HOST:PORT[/RUNID][;fd=N] (what `--nnodes`
 * passes) goes over TCP: rank 0 listens at HOST:PORT (or on the listening
 * socket N its launcher opened there) and sends the id to every rank that
 * connects and says its rank; the others connect, retrying until
 * timeout_s. Any other string names a file in id_dir (written to a
 * temporary name, then renamed, so a reader never sees half of it) that
 * the other ranks poll for until timeout_s; across nodes id_dir must then
 * be a shared file system. Rank 0 removes the file once the communicator
 * is up (every rank has read it by then).
 *
 * Timeouts: the communicator is non-blocking (ncclConfig_t.blocking = 0);
 * init and every collective are polled with ncclCommGetAsyncError and the
 * completion event, and a peer that does not answer within timeout_s makes
 * the op fail with SY_ERR_UNAVAILABLE after ncclCommAbort (the instance
 * then only reports errors). Each collective therefore completes before it
 * returns.
 *
 * Buffers may be device memory (the engine's activations) or host memory
 * (sy bench-comm); host buffers are staged through a device scratch buffer.
 *
 * Streams: the device plugin's kernels and this plugin's copies run on the
 * calling thread's per-thread default stream (sycuda.h). The collectives
 * themselves cannot be handed that stream: a non-blocking communicator
 * launches them from a thread of NCCL's own, where cudaStreamPerThread
 * would name that thread's stream (NVIDIA/nccl issue 1976), and the legacy
 * default stream would order them only by its implicit synchronisation.
 * So they go on a stream of this instance, joined both ways by events: it
 * waits for what the calling thread queued before the collective, and the
 * calling thread's stream waits for the collective (besides the host wait
 * of finish), so the copy out of a staged buffer and the next kernels read
 * the result.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
/* nccl.h declares a few functions with empty parameter lists (not prototypes in C). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>

#include "sycomm_args.h"
#include "sycuda.h"

/* The runtime calls without a stream (cudaMemcpy) must go to the per-thread stream: comm-nccl.mk's SY_CUDA_CPPFLAGS. */
#ifndef CUDA_API_PER_THREAD_DEFAULT_STREAM
#error "comm nccl: build with SY_CUDA_CPPFLAGS (CUDA_API_PER_THREAD_DEFAULT_STREAM), as every CUDA plugin"
#endif

#define NAME "nccl"

typedef struct comm_nccl {
    char id_dir[1024];
    int gpu; /* [comm] gpu; -1 until setup takes the device current on its thread (the device plugin's) */
    int rank, world;
    int ready, broken;
    double timeout_s;
    ncclComm_t comm;
    cudaStream_t stream; /* where the collectives run (see the top) */
    cudaEvent_t queued;  /* recorded on the caller's stream before a collective; the collective waits for it */
    cudaEvent_t done;    /* recorded after a collective; the host and the caller's stream wait for it */
    void *stage;
    size_t stage_cap;
} comm_nccl;

static const sy_key_decl keys[] = {
    {"id_dir", SY_KEY_STRING, "/dev/shm",
     "directory where rank 0 publishes the NCCL unique id when the rendezvous is not HOST:PORT (--nnodes sends it over "
     "TCP instead)",
     1, 0, NULL},
    {"gpu", SY_KEY_INT, "-1",
     "CUDA device of this rank; -1 = the device plugin's ([device] gpu: by default the rank's local rank)", -1, 1023,
     NULL},
    {NULL, 0, NULL, NULL, 0, 0, NULL},
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int probe(const sy_host *host, sy_err *why)
{
    (void)host;
    int ma = 0, mi = 0;
    if (!syc_probe(0, why, &ma, &mi))
        return 0;
    return 50;
}

static int create(const sy_host *host, const sy_kv *cfg, size_t n_cfg, void **inst, sy_err *err)
{
    (void)host;
    comm_nccl *c = calloc(1, sizeof *c);
    if (!c)
        return sy_err_set(err, SY_ERR_NOMEM, "comm nccl: cannot allocate the instance");
    const char *dir = sy_kv_get(cfg, n_cfg, "id_dir");
    snprintf(c->id_dir, sizeof c->id_dir, "%s", dir && *dir ? dir : "/dev/shm");
    c->gpu = (int)sy_kv_int(cfg, n_cfg, "gpu", -1);
    c->rank = 0;
    c->world = 1;
    *inst = c;
    return SY_OK;
}

static void destroy(void *inst)
{
    comm_nccl *c = inst;
    if (!c)
        return;
    if (c->gpu >= 0)
        cudaSetDevice(c->gpu); /* the communicator, event and buffer live there, whichever thread destroys */
    if (c->comm) {
        if (c->broken)
            ncclCommAbort(c->comm);
        else
            ncclCommDestroy(c->comm);
    }
    if (c->done)
        cudaEventDestroy(c->done);
    if (c->queued)
        cudaEventDestroy(c->queued);
    if (c->stream)
        cudaStreamDestroy(c->stream);
    if (c->stage)
        cudaFree(c->stage);
    free(c);
}

static int rank_of(void *inst)
{
    return ((comm_nccl *)inst)->rank;
}

static int size_of(void *inst)
{
    return ((comm_nccl *)inst)->world;
}

/* The id file for a rendezvous string: its characters outside [A-Za-z0-9._-] become '_'. */
static void id_path(const comm_nccl *c, const char *rendezvous, char *out, size_t cap)
{
    char name[200];
    size_t i = 0;
    for (const char *p = rendezvous; *p && i + 1 < sizeof name; p++, i++) {
        const char ch = *p;
        const int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
                       ch == '_' || ch == '-';
        name[i] = ok ? ch : '_';
    }
    name[i] = 0;
    snprintf(out, cap, "%s/sy-nccl-%s.id", c->id_dir, name);
}

static int publish_id(const char *path, const ncclUniqueId *id, sy_err *err)
{
    char tmp[1300];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        return sy_err_set(err, SY_ERR_IO, "comm nccl: rank 0 cannot write the unique id to %s: %s", tmp,
                          strerror(errno));
    const ssize_t w = write(fd, id, sizeof *id);
    close(fd);
    if (w != (ssize_t)sizeof *id || rename(tmp, path) != 0) {
        unlink(tmp);
        return sy_err_set(err, SY_ERR_IO, "comm nccl: rank 0 cannot publish the unique id as %s: %s", path,
                          strerror(errno));
    }
    return SY_OK;
}

static int read_id(const char *path, int rank, double deadline, ncclUniqueId *id, sy_err *err)
{
    for (;;) {
        int fd = open(path, O_RDONLY);
        if (fd >= 0) {
            const ssize_t r = read(fd, id, sizeof *id);
            close(fd);
            if (r == (ssize_t)sizeof *id)
                return SY_OK;
            return sy_err_set(err, SY_ERR_IO, "comm nccl: rank %d: %s holds %zd bytes, expected a %zu-byte unique id",
                              rank, path, r, sizeof *id);
        }
        if (deadline > 0 && now_s() > deadline)
            return sy_err_set(err, SY_ERR_UNAVAILABLE,
                              "comm nccl: rank %d: rank 0 did not publish the unique id (%s) in time", rank, path);
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* ------------------------------------------------ the id over TCP (--nnodes) */

#define ID_HELLO_MAGIC 0x5359494eu /* "SYIN" */

typedef struct id_hello {
    uint32_t magic;
    int32_t rank, world;
    uint32_t pad;
} id_hello;

/* HOST and PORT of "HOST:PORT[/RUNID][;fd=N]" (numeric port), *fd from ";fd=N" or -1; 0, or -1 when not that form. */
static int tcp_rendezvous(const char *s, char *host, size_t hcap, char *port, size_t pcap, int *fd)
{
    const size_t alen = strcspn(s, "/;");
    const char *colon = NULL;
    for (size_t i = 0; i < alen; i++)
        if (s[i] == ':')
            colon = s + i;
    if (!colon || colon == s || colon + 1 == s + alen)
        return -1;
    for (const char *p = colon + 1; p < s + alen; p++)
        if (*p < '0' || *p > '9')
            return -1;
    const char *h = s, *he = colon;
    if (*h == '[' && he[-1] == ']') {
        h++;
        he--;
    }
    const size_t hl = (size_t)(he - h), pl = (size_t)(s + alen - colon - 1);
    if (hl == 0 || hl >= hcap || pl >= pcap)
        return -1;
    memcpy(host, h, hl);
    host[hl] = 0;
    memcpy(port, colon + 1, pl);
    port[pl] = 0;
    const char *semi = strchr(s, ';');
    *fd = semi && !strncmp(semi, ";fd=", 4) ? atoi(semi + 4) : -1;
    return 0;
}

static int io_full(int fd, void *buf, size_t n, int out, double deadline)
{
    char *b = buf;
    while (n) {
        struct pollfd p = {.fd = fd, .events = out ? POLLOUT : POLLIN};
        const double left = deadline > 0 ? deadline - now_s() : 1;
        if (left <= 0 || poll(&p, 1, deadline > 0 ? (int)(left * 1000) + 1 : -1) == 0)
            return -1;
        ssize_t k = out ? send(fd, b, n, MSG_NOSIGNAL) : recv(fd, b, n, 0);
        if (k < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (k <= 0)
            return -1;
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Rank 0: the id to world-1 ranks that connect at host:port (or on the launcher's socket lfd). */
static int serve_id(const char *host, const char *port, int lfd, int world, double deadline, const ncclUniqueId *id,
                    sy_err *err)
{
    if (lfd < 0) {
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai;
        if (getaddrinfo(host, port, &hints, &ai) != 0)
            return sy_err_set(err, SY_ERR_INVALID, "comm nccl: rank 0 cannot resolve the rendezvous %s:%s", host,
                              port);
        lfd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        int one = 1;
        if (lfd >= 0)
            setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (lfd < 0 || bind(lfd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(lfd, 256) != 0) {
            const int e = errno;
            freeaddrinfo(ai);
            if (lfd >= 0)
                close(lfd);
            return sy_err_set(err, SY_ERR_IO, "comm nccl: rank 0 cannot listen on the rendezvous %s:%s: %s", host,
                              port, strerror(e));
        }
        freeaddrinfo(ai);
    }
    unsigned char seen[4096] = {0};
    int got = 1, rc = SY_OK;
    while (got < world) {
        struct pollfd p = {.fd = lfd, .events = POLLIN};
        const double left = deadline > 0 ? deadline - now_s() : 1;
        if (left <= 0 || poll(&p, 1, deadline > 0 ? (int)(left * 1000) + 1 : -1) == 0) {
            rc = sy_err_set(err, SY_ERR_UNAVAILABLE,
                            "comm nccl: rank 0 waited at %s:%s, but only %d of %d ranks came for the unique id", host,
                            port, got, world);
            break;
        }
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        id_hello h;
        /* Something that is not one of our ranks (a stale run, a port scan) is dropped. */
        if (io_full(fd, &h, sizeof h, 0, now_s() + 5) == 0 && h.magic == ID_HELLO_MAGIC && h.world == world &&
            h.rank > 0 && h.rank < world && h.rank < (int)sizeof seen && !seen[h.rank] &&
            io_full(fd, (void *)id, sizeof *id, 1, now_s() + 5) == 0) {
            seen[h.rank] = 1;
            got++;
        }
        close(fd);
    }
    close(lfd);
    return rc;
}

static int fetch_id(const char *host, const char *port, int rank, int world, double deadline, ncclUniqueId *id,
                    sy_err *err)
{
    int e = 0;
    for (;;) {
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
        if (getaddrinfo(host, port, &hints, &ai) == 0) {
            for (struct addrinfo *a = ai; a; a = a->ai_next) {
                int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
                if (fd < 0)
                    continue;
                if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
                    id_hello h = {.magic = ID_HELLO_MAGIC, .rank = rank, .world = world};
                    const int ok = io_full(fd, &h, sizeof h, 1, deadline) == 0 &&
                                   io_full(fd, id, sizeof *id, 0, deadline) == 0;
                    close(fd);
                    freeaddrinfo(ai);
                    if (ok)
                        return SY_OK;
                    return sy_err_set(err, SY_ERR_UNAVAILABLE,
                                      "comm nccl: rank %d: rank 0 at %s:%s did not send the unique id (it refused "
                                      "world size %d, or gave up)",
                                      rank, host, port, world);
                }
                e = errno;
                close(fd);
            }
            freeaddrinfo(ai);
        }
        if (deadline > 0 && now_s() > deadline)
            return sy_err_set(err, SY_ERR_UNAVAILABLE, "comm nccl: rank %d found nobody at the rendezvous %s:%s: %s",
                              rank, host, port, strerror(e));
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* Polls a non-blocking communicator until its last call finished; aborts it on error or timeout. */
static int wait_comm(comm_nccl *c, const char *what, double deadline, sy_err *err)
{
    for (;;) {
        ncclResult_t st = ncclInProgress;
        ncclResult_t r = ncclCommGetAsyncError(c->comm, &st);
        if (r != ncclSuccess)
            st = r;
        if (st == ncclSuccess)
            return SY_OK;
        if (st != ncclInProgress) {
            c->broken = 1;
            return sy_err_set(err, SY_ERR_UNAVAILABLE, "comm nccl: rank %d of %d: %s failed: %s (%s)", c->rank,
                              c->world, what, ncclGetErrorString(st), ncclGetLastError(c->comm));
        }
        if (deadline > 0 && now_s() > deadline) {
            c->broken = 1;
            return sy_err_set(err, SY_ERR_UNAVAILABLE,
                              "comm nccl: rank %d of %d: %s did not finish within %.1f s (a peer is dead or stuck); "
                              "communicator aborted",
                              c->rank, c->world, what, c->timeout_s);
        }
        sched_yield();
    }
}

static int env_int(const char *const *names, int *out)
{
    for (const char *const *n = names; *n; n++) {
        const char *v = getenv(*n);
        if (v && *v) {
            *out = atoi(v);
            return 1;
        }
    }
    return 0;
}

static int setup(void *inst, int rank, int world, const char *rendezvous, double timeout_s, sy_err *err)
{
    comm_nccl *c = inst;
    if (c->ready)
        return sy_err_set(err, SY_ERR_INVALID, "comm nccl: setup called twice");
    if (rank < 0 || world <= 0) {
        static const char *const rk[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "RANK", NULL};
        static const char *const ws[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "WORLD_SIZE", NULL};
        if (!env_int(rk, &rank) || !env_int(ws, &world))
            return sy_err_set(err, SY_ERR_INVALID,
                              "comm nccl: rank/world size not given and not in the environment "
                              "(OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/SIZE, RANK/WORLD_SIZE)");
    }
    if (rank < 0 || world <= 0 || rank >= world)
        return sy_err_set(err, SY_ERR_INVALID, "comm nccl: rank %d of world size %d", rank, world);
    if (!rendezvous || !*rendezvous)
        return sy_err_set(err, SY_ERR_INVALID, "comm nccl: an empty rendezvous string; expected one unique per run");
    c->rank = rank;
    c->world = world;
    c->timeout_s = timeout_s;
    const double deadline = timeout_s > 0 ? now_s() + timeout_s : 0;
    /* ncclCommInitRank binds the communicator to the current device; remember it, because later ops may come
     * from another thread, whose current device may be another GPU (GPU 0 when it never chose one). */
    if (c->gpu < 0)
        c->gpu = syc_current_gpu();
    SYC_TRY(err, cudaSetDevice(c->gpu), "comm nccl: cudaSetDevice");
    char path[1280] = "", host[256], port[32];
    int lfd = -1;
    const int over_tcp = tcp_rendezvous(rendezvous, host, sizeof host, port, sizeof port, &lfd) == 0;
    if (!over_tcp)
        id_path(c, rendezvous, path, sizeof path);
    ncclUniqueId id;
    int rc;
    if (rank == 0) {
        ncclResult_t r = ncclGetUniqueId(&id);
        if (r != ncclSuccess) {
            if (lfd >= 0)
                close(lfd);
            return sy_err_set(err, SY_ERR_UNAVAILABLE, "comm nccl: ncclGetUniqueId: %s", ncclGetErrorString(r));
        }
        rc = over_tcp ? serve_id(host, port, lfd, world, deadline, &id, err) : publish_id(path, &id, err);
        if (rc)
            return rc;
    } else if ((rc = over_tcp ? fetch_id(host, port, rank, world, deadline, &id, err)
                              : read_id(path, rank, deadline, &id, err))) {
        return rc;
    }
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclResult_t r = ncclCommInitRankConfig(&c->comm, world, id, rank, &cfg);
    if (r != ncclSuccess && r != ncclInProgress) {
        if (rank == 0 && path[0])
            unlink(path);
        return sy_err_set(err, SY_ERR_UNAVAILABLE, "comm nccl: rank %d of %d: ncclCommInitRankConfig: %s", rank, world,
                          ncclGetErrorString(r));
    }
    rc = wait_comm(c, "communicator init (waiting for every rank)", deadline, err);
    if (rank == 0 && path[0])
        unlink(path);
    if (rc)
        return rc;
    SYC_TRY(err, cudaEventCreateWithFlags(&c->done, cudaEventDisableTiming), "comm nccl: event");
    SYC_TRY(err, cudaEventCreateWithFlags(&c->queued, cudaEventDisableTiming), "comm nccl: event");
    /* Non-blocking: ordered with the device plugin's work by the events only, never by the legacy stream. */
    SYC_TRY(err, cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking), "comm nccl: stream");
    c->ready = 1;
    return SY_OK;
}

/* Also makes the communicator's GPU current: every op that touches the GPU starts here. */
static int check_ready(const comm_nccl *c, const char *op, sy_err *err)
{
    if (c->broken)
        return sy_err_set(err, SY_ERR_UNAVAILABLE, "comm nccl: %s after a failed collective; destroy the instance", op);
    if (!c->ready && c->world > 1)
        return sy_err_set(err, SY_ERR_INVALID, "comm nccl: %s before setup", op);
    if (c->gpu >= 0)
        return syc_enter(c->gpu, err, "comm nccl");
    return SY_OK;
}

/* Before a collective: its stream waits for everything the calling thread queued so far (the operands). */
static int join_caller(comm_nccl *c, sy_err *err)
{
    SYC_TRY(err, cudaEventRecord(c->queued, cudaStreamPerThread), "comm nccl: event record (caller's stream)");
    SYC_TRY(err, cudaStreamWaitEvent(c->stream, c->queued, 0), "comm nccl: collective stream waits for the caller");
    return SY_OK;
}

/* Queued collective done: waits for the completion event and the communicator, under the timeout; the calling
 * thread's stream then waits for the collective too. */
static int finish(comm_nccl *c, ncclResult_t r, const char *what, sy_err *err)
{
    if (r != ncclSuccess && r != ncclInProgress) {
        c->broken = 1;
        return sy_err_set(err, SY_ERR_UNAVAILABLE, "comm nccl: rank %d of %d: %s: %s", c->rank, c->world, what,
                          ncclGetErrorString(r));
    }
    const double deadline = c->timeout_s > 0 ? now_s() + c->timeout_s : 0;
    int rc = wait_comm(c, what, deadline, err);
    if (rc)
        return rc;
    /* After wait_comm: a non-blocking communicator has only queued the work on c->stream once it reports done. */
    SYC_TRY(err, cudaEventRecord(c->done, c->stream), "comm nccl: event record");
    for (;;) {
        cudaError_t e = cudaEventQuery(c->done);
        if (e == cudaSuccess) {
            SYC_TRY(err, cudaStreamWaitEvent(cudaStreamPerThread, c->done, 0),
                    "comm nccl: caller's stream waits for the collective");
            return SY_OK;
        }
        if (e != cudaErrorNotReady)
            return syc_fail(err, e, "comm nccl: collective");
        if ((rc = wait_comm(c, what, deadline, err)))
            return rc;
        sched_yield();
    }
}

static int is_device_ptr(const void *p)
{
    struct cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky "invalid value" of a plain host pointer on old runtimes */
        return 0;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

static int stage(comm_nccl *c, size_t bytes, sy_err *err)
{
    if (bytes <= c->stage_cap)
        return SY_OK;
    if (c->stage)
        cudaFree(c->stage);
    c->stage = NULL;
    c->stage_cap = 0;
    SYC_TRY(err, cudaMalloc(&c->stage, bytes), "comm nccl: staging buffer");
    c->stage_cap = bytes;
    return SY_OK;
}

static int nccl_type(sy_dtype dt, ncclDataType_t *t)
{
    switch (dt) {
    case SY_DTYPE_F32: *t = ncclFloat32; return 1;
    case SY_DTYPE_F16: *t = ncclFloat16; return 1;
    case SY_DTYPE_BF16: *t = ncclBfloat16; return 1;
    case SY_DTYPE_I32: *t = ncclInt32; return 1;
    case SY_DTYPE_I64: *t = ncclInt64; return 1;
    case SY_DTYPE_U8: *t = ncclUint8; return 1;
    default: return 0;
    }
}

static int allreduce_sum(void *inst, sy_tensor *t, sy_err *err)
{
    comm_nccl *c = inst;
    int rc = check_ready(c, "allreduce_sum", err);
    if (rc)
        return rc;
    if ((rc = syc_check_allreduce(t, err)))
        return rc;
    const size_t n = (size_t)sy_tensor_numel(t), bytes = n * sizeof(float);
    if (c->world == 1 || n == 0)
        return SY_OK;
    void *buf = t->data;
    const int host = !is_device_ptr(buf);
    if (host) {
        if ((rc = stage(c, bytes, err)))
            return rc;
        SYC_TRY(err, cudaMemcpy(c->stage, t->data, bytes, cudaMemcpyHostToDevice), "comm nccl: stage in");
        buf = c->stage;
    }
    if ((rc = join_caller(c, err)) ||
        (rc = finish(c, ncclAllReduce(buf, buf, n, ncclFloat32, ncclSum, c->comm, c->stream), "allreduce_sum", err)))
        return rc;
    if (host)
        SYC_TRY(err, cudaMemcpy(t->data, c->stage, bytes, cudaMemcpyDeviceToHost), "comm nccl: stage out");
    return SY_OK;
}

static int allgather(void *inst, const sy_tensor *in, sy_tensor *out, sy_err *err)
{
    comm_nccl *c = inst;
    int rc = check_ready(c, "allgather", err);
    if (rc)
        return rc;
    ncclDataType_t ty;
    if (!in || !out || in->dtype != out->dtype || !nccl_type(in->dtype, &ty))
        return sy_err_set(err, SY_ERR_INVALID, "comm nccl: allgather needs in and out of one dtype among F32, F16, "
                          "BF16, I32, I64, U8");
    const size_t n = (size_t)sy_tensor_numel(in), es = (size_t)sy_dtype_bits(in->dtype) / 8;
    if ((size_t)sy_tensor_numel(out) != n * (size_t)c->world)
        return sy_err_set(err, SY_ERR_INVALID, "comm nccl: allgather out holds %lld elements, expected %zu x %d ranks",
                          (long long)sy_tensor_numel(out), n, c->world);
    if (c->world == 1) {
        if (n && out->data != in->data)
            SYC_TRY(err, cudaMemcpy(out->data, in->data, n * es, cudaMemcpyDefault), "comm nccl: allgather copy");
        return SY_OK;
    }
    const void *src = in->data;
    void *dst = out->data;
    const int host = !is_device_ptr(dst);
    if (host) {
        if ((rc = stage(c, n * es * ((size_t)c->world + 1), err)))
            return rc;
        SYC_TRY(err, cudaMemcpy((char *)c->stage + n * es * (size_t)c->world, in->data, n * es, cudaMemcpyDefault),
                "comm nccl: stage in");
        src = (char *)c->stage + n * es * (size_t)c->world;
        dst = c->stage;
    }
    if ((rc = join_caller(c, err)) ||
        (rc = finish(c, ncclAllGather(src, dst, n, ty, c->comm, c->stream), "allgather", err)))
        return rc;
    if (host)
        SYC_TRY(err, cudaMemcpy(out->data, c->stage, n * es * (size_t)c->world, cudaMemcpyDeviceToHost),
                "comm nccl: stage out");
    return SY_OK;
}

static int broadcast(void *inst, void *buf, size_t bytes, int root, sy_err *err)
{
    comm_nccl *c = inst;
    int rc = check_ready(c, "broadcast", err);
    if (rc)
        return rc;
    if ((rc = syc_check_broadcast(buf, bytes, root, c->world, err)))
        return rc;
    if (c->world == 1 || bytes == 0)
        return SY_OK;
    void *b = buf;
    const int host = !is_device_ptr(buf);
    if (host) {
        if ((rc = stage(c, bytes, err)))
            return rc;
        SYC_TRY(err, cudaMemcpy(c->stage, buf, bytes, cudaMemcpyHostToDevice), "comm nccl: stage in");
        b = c->stage;
    }
    if ((rc = join_caller(c, err)) ||
        (rc = finish(c, ncclBroadcast(b, b, bytes, ncclUint8, root, c->comm, c->stream), "broadcast", err)))
        return rc;
    if (host)
        SYC_TRY(err, cudaMemcpy(buf, c->stage, bytes, cudaMemcpyDeviceToHost), "comm nccl: stage out");
    return SY_OK;
}

static int barrier(void *inst, sy_err *err)
{
    comm_nccl *c = inst;
    int rc = check_ready(c, "barrier", err);
    if (rc || c->world == 1)
        return rc;
    if ((rc = stage(c, sizeof(float), err)))
        return rc;
    if ((rc = join_caller(c, err)))
        return rc;
    return finish(c, ncclAllReduce(c->stage, c->stage, 1, ncclFloat32, ncclSum, c->comm, c->stream), "barrier", err);
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
    .description = "NCCL collectives between GPUs, one per rank (unique id over TCP for a HOST:PORT rendezvous, "
                   "else through a file named by it; "
                   "non-blocking communicator with timeouts and abort)",
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
