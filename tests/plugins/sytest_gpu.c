/*
 * A pretend GPU family for testing on the CPU how a rank picks its GPU.
 * One source, built twice (tests/comm.mk):
 *
 *   sytest-gpudev   (-DSYTEST_GPU_DEVICE) a device plugin for device
 *                   "sytest-gpu" with a key gpu (-1 = the host's local
 *                   rank), as device cuda. create "makes its GPU current"
 *                   and exports get_proc("gpu").
 *   sytest-gpucomm  (-DSYTEST_GPU_COMM) a comm plugin for device
 *                   "sytest-gpu" that, like nccl with gpu = -1, computes on
 *                   the GPU current in its process (GPU 0 when no device
 *                   plugin chose one) and refuses at setup, as NCCL does,
 *                   when two ranks share a GPU. Its collectives are
 *                   comm/shm's shared segment (shm_seg.c compiled in), on
 *                   host memory: a one-shot sum in rank order.
 *
 * The "current GPU" is the environment variable SYTEST_GPU_CURRENT: the
 * two plugins are separate shared objects that share nothing else, and
 * like CUDA's current device it is state of the process the rank runs in
 * (each forked rank has its own). The comm plugin also appends "rank R of
 * W: local rank L, GPU G" to $SYTEST_GPU_LOG when that is set, so that
 * tests/comm/test_bench_comm_gpu.sh sees every rank's choice.
 *
 * They live in build-test-plugins/, and their probes are 0 unless the
 * environment holds SYTEST_PROBE=1.
 */
#define _POSIX_C_SOURCE 200809L /* setenv */

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "switchyard/plugin.h"

#define DEVICE "sytest-gpu"

static int probe(const sy_host *host, sy_err *why)
{
    (void)host;
    const char *on = getenv("SYTEST_PROBE");
    if (!on || strcmp(on, "1") != 0)
        return sy_err_set(why, 0, "test plugin: runs only when SYTEST_PROBE=1");
    return 1; /* below device cpu: `auto` without a device named never takes it */
}

static int host_local_rank(const sy_host *host)
{
    return host && host->struct_size >= offsetof(sy_host, local_rank) + sizeof host->local_rank ? host->local_rank
                                                                                                : -1;
}

#if defined(SYTEST_GPU_DEVICE)
/* ------------------------------------------------------------ device */

#define NAME "sytest-gpudev"

typedef struct dev {
    int gpu;
} dev;

static const sy_key_decl keys[] = {
    {"gpu", SY_KEY_INT, "-1", "pretend GPU index; -1 = the host's local rank", -1, 1023, NULL},
    {NULL, 0, NULL, NULL, 0, 0, NULL},
};

static int create(const sy_host *host, const sy_kv *cfg, size_t n_cfg, void **out, sy_err *err)
{
    long long gpu = sy_kv_int(cfg, n_cfg, "gpu", -1);
    if (gpu < 0)
        gpu = host_local_rank(host) >= 0 ? host_local_rank(host) : 0;
    dev *d = calloc(1, sizeof *d);
    if (!d)
        return sy_err_set(err, SY_ERR_NOMEM, "device " NAME ": cannot allocate the instance");
    d->gpu = (int)gpu;
    char v[16];
    snprintf(v, sizeof v, "%d", d->gpu);
    setenv("SYTEST_GPU_CURRENT", v, 1);
    *out = d;
    return SY_OK;
}

static void destroy(void *d)
{
    free(d);
}

static int gpu_of(void *inst)
{
    return inst ? ((dev *)inst)->gpu : -1;
}

static void *get_proc(const char *name)
{
    if (name && strcmp(name, "gpu") == 0) {
        int (*f)(void *) = gpu_of;
        return (void *)f;
    }
    return NULL;
}

/* No compute: bench-comm only opens the device. Every op refuses. */
#define NO(what) sy_err_set(err, SY_ERR_UNSUPPORTED, "device " NAME ": " what " is not implemented (a test plugin)")
static int d_alloc(void *i, sy_tensor *t, sy_err *err) { (void)i; (void)t; return NO("alloc"); }
static void d_free(void *i, sy_tensor *t) { (void)i; (void)t; }
static int d_upload(void *i, sy_tensor *d, const void *s, size_t b, sy_err *err)
{ (void)i; (void)d; (void)s; (void)b; return NO("upload"); }
static int d_download(void *i, void *d, const sy_tensor *s, size_t b, sy_err *err)
{ (void)i; (void)d; (void)s; (void)b; return NO("download"); }
static int d_prepare(void *i, const char *n, const sy_tensor *h, sy_tensor *o, sy_err *err)
{ (void)i; (void)n; (void)h; (void)o; return NO("prepare_weight"); }
static void d_release(void *i, sy_tensor *w) { (void)i; (void)w; }
static int d_embed(void *i, const sy_tensor *t, const int32_t *ids, int64_t n, sy_tensor *o, sy_err *err)
{ (void)i; (void)t; (void)ids; (void)n; (void)o; return NO("embed"); }
static int d_rmsnorm(void *i, const sy_tensor *x, const sy_tensor *w, float e, sy_tensor *o, sy_err *err)
{ (void)i; (void)x; (void)w; (void)e; (void)o; return NO("rmsnorm"); }
static int d_add_rmsnorm(void *i, sy_tensor *r, const sy_tensor *x, const sy_tensor *w, float e, sy_tensor *o,
                         sy_err *err)
{ (void)i; (void)r; (void)x; (void)w; (void)e; (void)o; return NO("add_rmsnorm"); }
static int d_linear(void *i, const sy_tensor *x, const sy_tensor *w, const sy_tensor *b, sy_tensor *o, sy_err *err)
{ (void)i; (void)x; (void)w; (void)b; (void)o; return NO("linear"); }
static int d_rope(void *i, sy_tensor *x, const int32_t *pos, const sy_rope_params *p, sy_err *err)
{ (void)i; (void)x; (void)pos; (void)p; return NO("rope"); }
static int d_silu_mul(void *i, const sy_tensor *g, const sy_tensor *u, sy_tensor *o, sy_err *err)
{ (void)i; (void)g; (void)u; (void)o; return NO("silu_mul"); }
static int d_add(void *i, sy_tensor *a, const sy_tensor *x, sy_err *err) { (void)i; (void)a; (void)x; return NO("add"); }
static int d_sync(void *i, sy_err *err) { (void)i; (void)err; return SY_OK; }

static const sy_device_ops ops = {
    .struct_size = sizeof(sy_device_ops),
    .alloc = d_alloc,
    .free = d_free,
    .upload = d_upload,
    .download = d_download,
    .prepare_weight = d_prepare,
    .release_weight = d_release,
    .embed = d_embed,
    .rmsnorm = d_rmsnorm,
    .add_rmsnorm = d_add_rmsnorm,
    .linear = d_linear,
    .rope = d_rope,
    .silu_mul = d_silu_mul,
    .add = d_add,
    .synchronize = d_sync,
};

static const sy_plugin_desc desc = {
    .struct_size = sizeof(sy_plugin_desc),
    .abi_major = SY_ABI_MAJOR,
    .abi_minor = SY_ABI_MINOR,
    .kind = SY_KIND_DEVICE,
    .name = NAME,
    .version = "0",
    .device = DEVICE,
    .description = "test plugin: a pretend GPU that takes the host's local rank as its index (gpu = -1)",
    .keys = keys,
    .probe = probe,
    .create = create,
    .destroy = destroy,
    .ops = &ops,
    .get_proc = get_proc,
};

#elif defined(SYTEST_GPU_COMM)
/* -------------------------------------------------------------- comm */

#include "shm_seg.h"

#define NAME "sytest-gpucomm"
#define SLOT 4096

enum { OP_SETUP = 1, OP_ALLREDUCE = 2, OP_BARRIER = 3 };

typedef struct comm {
    int local_rank;
    int gpu;
    int ready;
    uint64_t step;
    shm_seg seg;
} comm;

static int create(const sy_host *host, const sy_kv *cfg, size_t n_cfg, void **out, sy_err *err)
{
    (void)cfg;
    (void)n_cfg;
    comm *c = calloc(1, sizeof *c);
    if (!c)
        return sy_err_set(err, SY_ERR_NOMEM, "comm " NAME ": cannot allocate the instance");
    c->local_rank = host_local_rank(host);
    c->seg.world = 1;
    *out = c;
    return SY_OK;
}

static void destroy(void *p)
{
    comm *c = p;
    if (c && c->seg.base)
        shm_seg_leave(&c->seg);
    free(c);
}

static int rank_of(void *c)
{
    return ((comm *)c)->seg.rank;
}

static int size_of(void *c)
{
    return ((comm *)c)->seg.world;
}

static int setup(void *p, int rank, int world, const char *rendezvous, double timeout_s, sy_err *err)
{
    comm *c = p;
    const char *cur = getenv("SYTEST_GPU_CURRENT");
    c->gpu = cur ? atoi(cur) : 0; /* like CUDA: a process that chose no device is on GPU 0 */
    const char *log = getenv("SYTEST_GPU_LOG");
    FILE *f = log ? fopen(log, "a") : NULL;
    if (f) {
        fprintf(f, "rank %d of %d: local rank %d, GPU %d%s\n", rank, world, c->local_rank, c->gpu,
                cur ? "" : " (no device plugin opened)");
        fclose(f);
    }
    char rv[240];
    snprintf(rv, sizeof rv, "gpu-%s", rendezvous ? rendezvous : "");
    int rc = shm_seg_join(&c->seg, rank, world, rv, SLOT, timeout_s, err);
    if (rc)
        return rc;
    memcpy(shm_slot(&c->seg, 0, rank), &c->gpu, sizeof c->gpu);
    if ((rc = shm_seg_barrier(&c->seg, (uint64_t)OP_SETUP << 56, 1, "exchanging GPUs", err)))
        return rc;
    for (int r = 0; r < world; r++) {
        int g;
        memcpy(&g, shm_slot(&c->seg, 0, r), sizeof g);
        if (r != rank && g == c->gpu)
            return sy_err_set(err, SY_ERR_UNAVAILABLE,
                              "comm " NAME ": rank %d and rank %d are both on GPU %d: one GPU per rank (as NCCL's "
                              "\"duplicate GPU\")", rank, r, g);
    }
    /* Everyone read every slot before bank 0 is written again. */
    if ((rc = shm_seg_barrier(&c->seg, (uint64_t)OP_SETUP << 56 | 1, 1, "GPUs checked", err)))
        return rc;
    c->ready = 1;
    return SY_OK;
}

/* One-shot in rank order, chunk by chunk through alternating banks (comm/shm's scheme). */
static int allreduce_sum(void *p, sy_tensor *t, sy_err *err)
{
    comm *c = p;
    if (!t || t->dtype != SY_DTYPE_F32)
        return sy_err_set(err, SY_ERR_INVALID, "comm " NAME ": allreduce_sum needs an F32 tensor");
    const size_t n = (size_t)sy_tensor_numel(t), chunk = SLOT / sizeof(float);
    if (c->seg.world == 1 || n == 0)
        return SY_OK;
    if (!c->ready)
        return sy_err_set(err, SY_ERR_INVALID, "comm " NAME ": allreduce_sum before setup");
    float *x = t->data;
    for (size_t off = 0; off < n; off += chunk, c->step++) {
        const size_t len = n - off < chunk ? n - off : chunk;
        const int bank = (int)(c->step & 1);
        memcpy(shm_slot(&c->seg, bank, c->seg.rank), x + off, len * sizeof(float));
        int rc = shm_seg_barrier(&c->seg, (uint64_t)OP_ALLREDUCE << 56 | len, 1, "allreduce_sum", err);
        if (rc)
            return rc;
        for (size_t i = 0; i < len; i++) {
            float s = 0;
            for (int r = 0; r < c->seg.world; r++)
                s += ((const float *)shm_slot(&c->seg, bank, r))[i];
            x[off + i] = s;
        }
    }
    return SY_OK;
}

static int barrier(void *p, sy_err *err)
{
    comm *c = p;
    if (c->seg.world == 1)
        return SY_OK;
    return shm_seg_barrier(&c->seg, (uint64_t)OP_BARRIER << 56, 1, "barrier", err);
}

static const sy_comm_ops ops = {
    .struct_size = sizeof(sy_comm_ops),
    .rank = rank_of,
    .size = size_of,
    .allreduce_sum = allreduce_sum,
    .barrier = barrier,
    .setup = setup,
};

static const sy_plugin_desc desc = {
    .struct_size = sizeof(sy_plugin_desc),
    .abi_major = SY_ABI_MAJOR,
    .abi_minor = SY_ABI_MINOR,
    .kind = SY_KIND_COMM,
    .name = NAME,
    .version = "0",
    .device = DEVICE,
    .description = "test plugin: collectives on the pretend GPU current in the process; refuses ranks sharing one",
    .keys = NULL,
    .probe = probe,
    .create = create,
    .destroy = destroy,
    .ops = &ops,
    .get_proc = NULL,
};

#else
#error "build with -DSYTEST_GPU_DEVICE or -DSYTEST_GPU_COMM"
#endif

SY_EXPORT const sy_plugin_desc *SY_PLUGIN_ENTRY(void);
SY_EXPORT const sy_plugin_desc *SY_PLUGIN_ENTRY(void)
{
    return &desc;
}
