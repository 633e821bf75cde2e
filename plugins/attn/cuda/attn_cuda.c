/*
 * attn/cuda-smXX: paged attention on an NVIDIA GPU. One source, built as
 * three plugins (cuda-sm80, cuda-sm90, cuda-sm120) whose kernels carry the
 * tile that fits each architecture's shared memory (attn_tiles.h); each
 * probe accepts only its own compute capability family, so `auto` picks
 * the variant built for the GPU.
 *
 * The KV cache lives in device memory with the CPU plugins' layout:
 * [layer][KV head][block][slot][dim], F32, F16 or BF16. The step's tables
 * (host memory in the ABI) are packed and copied to the device once per
 * step; bounded steps (sy_attn_batch.ctx_bound, the steps the engine
 * records) use a fixed pinned and device pair per shape, which stage
 * refills before a replay.
 * Argument checks are the CPU plugins' own (libsykern's attn_check.c), so
 * both reject the same inputs with the same messages.
 *
 * Prefill rows go to the tensor-core kernel (k_attend_tc) once prepare's
 * self-check passed ([attention] prefill_kernel, attn_plan.h); each step's
 * plan (which rows go where) is packed behind the tables.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn_kern.h"
#include "attn_plan.h"
#include "attn_tc_check.h"
#include "attn_tiles.h"
#include "sycuda.h"
#include "sykattn.h"
#include "sykern.h"

/* The packed tables of one bounded step shape: pinned (a recorded copy reads them at each replay) and on the
 * device. */
typedef struct bounded_tables {
    int32_t n_seqs, n_tokens, max_blocks;
    int32_t *pin, *dev;
} bounded_tables;

typedef struct attn_cuda {
    const sy_host *host;
    int gpu;                /* the device plugin's GPU (current at create); every op makes it current */
    char kv_key[8];
    sy_attn_problem p;
    sy_dtype kvt;
    int prepared;
    void *kc, *vc;
    float *sinks_dev;       /* the problem's sinks [n_layers * n_heads] on the GPU, or NULL */
    int64_t k_tile, v_tile; /* elements per (layer, KV head, block) tile */
    int32_t *meta_host;     /* packed step tables */
    int32_t *meta_sent;     /* what meta_dev holds now: meta_sent_n entries (0 = nothing valid) */
    size_t meta_sent_n;
    size_t meta_cap;        /* int32 elements of meta_host and meta_dev */
    int32_t *meta_dev;
    int smem_opted_in;
    int sms;           /* multiprocessors: how many blocks keep the GPU busy */
    float *part;       /* split-K partials (syat_params.part) */
    size_t part_cap;   /* floats in part */
    int split_k;       /* [attention] split_k = auto */
    int tc_mode;       /* [attention] prefill_kernel (syat_tc_mode) */
    int tc_on;         /* prepare's decision: prefill rows go to k_attend_tc */
    int tc_opted_in;   /* k_attend_tc's shared memory opt-ins (syat_forward) */
    /* Bounded steps' tables (sy_attn_batch.ctx_bound: steps the engine records), one fixed pair of buffers per
     * shape, so that the recording of a shape and stage for it always meet in the same memory. */
    bounded_tables *bt;
    size_t n_bt;
    /* Once a bounded step came, split-K scratch a later step outgrows is kept until release: recordings still
     * point into it. */
    int bounded;
    void **kept;
    size_t n_kept;
} attn_cuda;

static const sy_key_decl keys[] = {
    {"kv_dtype", SY_KEY_ENUM, "f32",
     "KV cache element type when the engine has no preference (the problem's F16/BF16 wins)", 1, 0,
     SYK_KV_DTYPE_CHOICES},
    {"split_k", SY_KEY_ENUM, "auto",
     "flash-decoding: split long contexts over more blocks when the batch leaves SMs idle (auto), or never (off)",
     1, 0, "auto|off"},
    {"prefill_kernel", SY_KEY_ENUM, "cuda-cores",
     "prefill rows (16+ new tokens of a sequence): tensor cores once a self-check at prepare passed, else CUDA "
     "cores (auto); tensor-cores (an error when it cannot run or fails the check); cuda-cores",
     1, 0, "auto|tensor-cores|cuda-cores"},
    {NULL, 0, NULL, NULL, 0, 0, NULL},
};

/* Whether this variant's SASS/PTX runs on compute capability major.minor. */
static int variant_runs_on(int major)
{
#if SY_ATTN_SM == 80
    return major == 8;
#elif SY_ATTN_SM == 90
    return major == 9;
#else
    return major >= 12;
#endif
}

/* The rank's GPU (its local rank, as device cuda's gpu = -1): on a node with mixed GPUs each rank's `auto`
 * picks the variant for its own GPU. create checks the GPU it is really given (a pinned [device] gpu). */
static int probe(const sy_host *host, sy_err *why)
{
    const int gpu = syc_probe_target(host);
    int ma = 0, mi = 0;
    if (!syc_probe(gpu, why, &ma, &mi))
        return 0;
    if (!variant_runs_on(ma)) {
        sy_err_set(why, SY_ERR_UNSUPPORTED, "built for compute capability %d.x; GPU %d is %d.%d", SY_ATTN_SM / 10,
                   gpu, ma, mi);
        return 0;
    }
    return 100;
}

static int create(const sy_host *host, const sy_kv *cfg, size_t n_cfg, void **inst, sy_err *err)
{
    const char *kv = sy_kv_get(cfg, n_cfg, "kv_dtype");
    sy_dtype dt;
    int rc = syk_attn_kv_dtype(kv, SY_DTYPE_F32, &dt, err);
    if (rc)
        return rc;
    const int gpu = syc_current_gpu();
    sy_err why = {{0}};
    int ma = 0, mi = 0;
    if (!syc_probe(gpu, &why, &ma, &mi))
        return sy_err_set(err, SY_ERR_UNAVAILABLE, "attn %s: %s", SY_ATTN_NAME, why.msg);
    if (!variant_runs_on(ma))
        return sy_err_set(err, SY_ERR_UNSUPPORTED,
                          "attn %s is built for compute capability %d.x, but the device plugin computes on GPU %d "
                          "(%d.%d): name the variant for that GPU in [attention] plugin, or leave it auto",
                          SY_ATTN_NAME, SY_ATTN_SM / 10, gpu, ma, mi);
    attn_cuda *a = calloc(1, sizeof *a);
    if (!a)
        return sy_err_set(err, SY_ERR_NOMEM, "attn %s: cannot allocate the instance", SY_ATTN_NAME);
    a->host = host;
    a->gpu = gpu;
    const char *sk = sy_kv_get(cfg, n_cfg, "split_k");
    a->split_k = !sk || strcmp(sk, "off") != 0;
    const char *pk = sy_kv_get(cfg, n_cfg, "prefill_kernel");
    a->tc_mode = syat_tc_mode_parse(pk);
    if (a->tc_mode < 0) {
        free(a);
        return sy_err_set(err, SY_ERR_INVALID, "attn %s: prefill_kernel = %s: expected auto, tensor-cores or "
                          "cuda-cores", SY_ATTN_NAME, pk);
    }
    snprintf(a->kv_key, sizeof a->kv_key, "%s", kv ? kv : "f32");
    *inst = a;
    return SY_OK;
}

static void release(attn_cuda *a)
{
    cudaSetDevice(a->gpu); /* the memory is on the instance's GPU, whichever thread releases it */
    for (size_t i = 0; i < a->n_kept; i++)
        cudaFree(a->kept[i]);
    free(a->kept);
    a->kept = NULL;
    a->n_kept = 0;
    for (size_t i = 0; i < a->n_bt; i++) {
        cudaFreeHost(a->bt[i].pin);
        cudaFree(a->bt[i].dev);
    }
    free(a->bt);
    a->bt = NULL;
    a->n_bt = 0;
    a->bounded = 0;
    if (a->kc)
        cudaFree(a->kc);
    if (a->vc)
        cudaFree(a->vc);
    if (a->sinks_dev)
        cudaFree(a->sinks_dev);
    a->sinks_dev = NULL;
    if (a->meta_dev)
        cudaFree(a->meta_dev);
    if (a->part)
        cudaFree(a->part);
    a->part = NULL;
    a->part_cap = 0;
    free(a->meta_host);
    free(a->meta_sent);
    a->meta_sent = NULL;
    a->meta_sent_n = 0;
    a->kc = a->vc = NULL;
    a->meta_dev = a->meta_host = NULL;
    a->meta_cap = 0;
    a->prepared = 0;
    a->tc_on = 0;
}

static void destroy(void *inst)
{
    attn_cuda *a = inst;
    if (!a)
        return;
    release(a);
    free(a);
}

/* Whether k_attend_tc takes the problem on this GPU: its shapes (syat_tc_fits) and its shared memory. */
static int tc_fits(const attn_cuda *a, const sy_attn_problem *p, char *why, size_t cap)
{
    if (!syat_tc_fits(p->head_dim, p->v_head_dim, p->n_heads / p->n_kv_heads, why, cap))
        return 0;
    int optin = 0;
    const int need = SY_ATTN_TC_SMEM_BYTES(p->head_dim, SY_ATTN_TC_KV_TILE);
    if (cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, a->gpu) != cudaSuccess ||
        need > optin) {
        snprintf(why, cap, "the tensor-core prefill kernel needs %d bytes of shared memory per block; GPU %d allows %d",
                 need, a->gpu, optin);
        return 0;
    }
    return 1;
}

static int check(const attn_cuda *a, const sy_attn_problem *p, sy_dtype *dt, sy_err *why)
{
    int rc;
    if ((rc = syk_attn_check_problem(p, why)) || (rc = syk_attn_kv_dtype(a->kv_key, p->kv_dtype, dt, why)))
        return rc;
    const int group = p->n_heads / p->n_kv_heads;
    if (p->head_dim > SY_ATTN_MAX_DIM || p->v_head_dim > SY_ATTN_MAX_DIM || group > SY_ATTN_MAX_GROUP)
        return sy_err_set(why, SY_ERR_UNSUPPORTED,
                          "head_dim %d / v_head_dim %d / %d query heads per KV head: attn %s handles up to %d / %d / %d",
                          p->head_dim, p->v_head_dim, group, SY_ATTN_NAME, SY_ATTN_MAX_DIM, SY_ATTN_MAX_DIM,
                          SY_ATTN_MAX_GROUP);
    const int dev = a->gpu;
    int optin = 0;
    if (cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) == cudaSuccess) {
        const int need = SY_ATTN_SMEM_BYTES(group, p->head_dim, p->v_head_dim, SY_ATTN_KV_TILE);
        if (need > optin)
            return sy_err_set(why, SY_ERR_UNSUPPORTED,
                              "attn %s needs %d bytes of shared memory per block for this problem; GPU %d allows %d",
                              SY_ATTN_NAME, need, dev, optin);
    }
    char fit[200];
    if (a->tc_mode == SYAT_TC_FORCE && syk_attn_sinks(p, 0))
        return sy_err_set(why, SY_ERR_UNSUPPORTED, "attn %s: prefill_kernel = tensor-cores: the tensor-core prefill "
                          "kernel has no attention sinks, which this model has; use auto or cuda-cores",
                          SY_ATTN_NAME);
    if (a->tc_mode == SYAT_TC_FORCE && !tc_fits(a, p, fit, sizeof fit))
        return sy_err_set(why, SY_ERR_UNSUPPORTED, "attn %s: prefill_kernel = tensor-cores: %s; use auto or cuda-cores",
                          SY_ATTN_NAME, fit);
    return SY_OK;
}

static int supports(void *inst, const sy_attn_problem *p, sy_err *why)
{
    sy_dtype dt;
    return check(inst, p, &dt, why) == SY_OK;
}

/*
 * Whether prefill rows go to k_attend_tc (a->tc_on): never with
 * cuda-cores; else when the problem fits and the self-check on this GPU
 * passes. auto warns once and keeps k_attend when it fails; tensor-cores
 * makes that an error.
 */
static int decide_tc(attn_cuda *a, const sy_attn_problem *p, sy_dtype dt, sy_err *err)
{
    a->tc_on = 0;
    if (a->tc_mode == SYAT_TC_CUDA_CORES || syk_attn_sinks(p, 0)) /* k_attend_tc has no sinks */
        return SY_OK;
    char fit[200] = "", why[300];
    const int fits = tc_fits(a, p, fit, sizeof fit);
    int pass = 0, warn = 0, rc;
    double worst = INFINITY;
    if (fits) {
        /* The windowed path whenever some layer has a window: the kernel takes the window as a launch value. */
        int32_t window = 0;
        for (int32_t l = 0; l < p->n_layers && !window; l++)
            window = syk_attn_window(p, l);
        const syat_tc_check_in in = {SY_ATTN_NAME, p->n_heads / p->n_kv_heads, p->head_dim, p->block_size,
                                     window, dt, p->scale};
        if ((rc = syat_tc_selfcheck(&in, &a->tc_opted_in, &pass, &worst, err)))
            return rc;
        sy_logf(a->host, SY_LOG_INFO, SY_ATTN_NAME, "tensor-core prefill self-check: relative error %.3g against "
                "k_attend (bound %.0e): %s", worst, SYAT_TC_BOUND, pass ? "passed" : "FAILED");
    }
    const int on = syat_tc_decide(a->tc_mode, fits, fit, pass, worst, &warn, why, sizeof why);
    if (on < 0)
        return sy_err_set(err, SY_ERR_UNSUPPORTED, "attn %s: %s", SY_ATTN_NAME, why);
    if (warn)
        sy_logf(a->host, SY_LOG_WARN, SY_ATTN_NAME, "the tensor-core prefill kernel failed its self-check on this GPU "
                "(relative error %.3g against k_attend, bound %.0e): prefill stays on CUDA cores", worst,
                SYAT_TC_BOUND);
    a->tc_on = on;
    return SY_OK;
}

static int prepare(void *inst, const sy_attn_problem *p, sy_err *err)
{
    attn_cuda *a = inst;
    sy_dtype dt;
    int rc = check(a, p, &dt, err);
    if (rc || (rc = syc_enter(a->gpu, err, "attn prepare")))
        return rc;
    release(a);
    a->p = *p;
    a->kvt = dt;
    a->k_tile = (int64_t)p->block_size * p->head_dim;
    a->v_tile = (int64_t)p->block_size * p->v_head_dim;
    const size_t es = dt == SY_DTYPE_F32 ? 4 : 2;
    const size_t tiles = (size_t)p->n_layers * (size_t)p->n_blocks * (size_t)p->n_kv_heads;
    const size_t kb = tiles * (size_t)a->k_tile * es, vb = tiles * (size_t)a->v_tile * es;
    cudaError_t e = cudaMalloc(&a->kc, kb);
    if (e == cudaSuccess)
        e = cudaMalloc(&a->vc, vb);
    /* Zeroed so a read of a never-written slot (a caller bug) is at least finite and deterministic. */
    if (e == cudaSuccess)
        e = cudaMemset(a->kc, 0, kb);
    if (e == cudaSuccess)
        e = cudaMemset(a->vc, 0, vb);
    const size_t sink_bytes = sizeof(float) * (size_t)p->n_layers * (size_t)p->n_heads;
    if (e == cudaSuccess && syk_attn_sinks(p, 0)) {
        e = cudaMalloc((void **)&a->sinks_dev, sink_bytes);
        if (e == cudaSuccess)
            e = cudaMemcpy(a->sinks_dev, syk_attn_sinks(p, 0), sink_bytes, cudaMemcpyHostToDevice);
    }
    if (e != cudaSuccess) {
        release(a);
        return sy_err_set(err, e == cudaErrorMemoryAllocation ? SY_ERR_NOMEM : SY_ERR_INTERNAL,
                          "attn %s: KV cache of %zu bytes (and the sinks): %s", SY_ATTN_NAME, kb + vb,
                          cudaGetErrorString(e));
    }
    if (cudaDeviceGetAttribute(&a->sms, cudaDevAttrMultiProcessorCount, a->gpu) != cudaSuccess)
        a->sms = 0; /* unknown: never split */
    if ((rc = decide_tc(a, p, dt, err))) {
        release(a);
        return rc;
    }
    a->prepared = 1;
    sy_logf(a->host, SY_LOG_INFO, SY_ATTN_NAME, "KV cache %.1f MiB (%s), %d layers x %d blocks x %d tokens, tile %d; "
            "prefill on %s", (double)(kb + vb) / 1048576.0, sy_dtype_name(dt), p->n_layers, p->n_blocks,
            p->block_size, SY_ATTN_KV_TILE, a->tc_on ? "tensor cores" : "CUDA cores");
    return SY_OK;
}

/* Frees outgrown split-K scratch, or keeps it until release once recordings may point into it. */
static int drop_part(attn_cuda *a, sy_err *err)
{
    if (!a->part)
        return SY_OK;
    if (a->bounded) {
        void **grown = realloc(a->kept, (a->n_kept + 1) * sizeof *a->kept);
        if (!grown)
            return sy_err_set(err, SY_ERR_NOMEM, "attn %s: no memory to keep outgrown split-K partials",
                              SY_ATTN_NAME);
        a->kept = grown;
        a->kept[a->n_kept++] = a->part;
    } else {
        cudaFree(a->part); /* synchronous: no queued kernel still reads it */
    }
    a->part = NULL;
    a->part_cap = 0;
    return SY_OK;
}

/*
 * The tables of bounded steps of b's shape: made by the first such step (the
 * run before a recording), never moved afterwards. NULL with err set when
 * they cannot be made, or while recording when that run has not come.
 */
static bounded_tables *bounded_for(attn_cuda *a, const sy_attn_batch *b, size_t n, sy_err *err)
{
    for (size_t i = 0; i < a->n_bt; i++)
        if (a->bt[i].n_seqs == b->n_seqs && a->bt[i].n_tokens == b->n_tokens && a->bt[i].max_blocks == b->max_blocks)
            return &a->bt[i];
    if (syc_capturing()) {
        sy_err_set(err, SY_ERR_UNSUPPORTED, "attn %s: no tables yet for %d sequences of %d tokens: a recorded step "
                   "(CUDA graph) cannot allocate them; the step's run before its recording makes them",
                   SY_ATTN_NAME, b->n_seqs, b->n_tokens);
        return NULL;
    }
    bounded_tables *grown = realloc(a->bt, (a->n_bt + 1) * sizeof *a->bt);
    if (!grown) {
        sy_err_set(err, SY_ERR_NOMEM, "attn %s: bounded step tables", SY_ATTN_NAME);
        return NULL;
    }
    a->bt = grown;
    bounded_tables t = {.n_seqs = b->n_seqs, .n_tokens = b->n_tokens, .max_blocks = b->max_blocks};
    cudaError_t e = cudaHostAlloc((void **)&t.pin, n * sizeof(int32_t), cudaHostAllocDefault);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&t.dev, n * sizeof(int32_t));
    if (e != cudaSuccess) {
        if (t.pin)
            cudaFreeHost(t.pin);
        sy_err_set(err, SY_ERR_NOMEM, "attn %s: bounded step tables of %zu entries: %s", SY_ATTN_NAME, n,
                   cudaGetErrorString(e));
        return NULL;
    }
    a->bt[a->n_bt] = t;
    return &a->bt[a->n_bt++];
}

static int meta_reserve(attn_cuda *a, size_t n, sy_err *err)
{
    if (n <= a->meta_cap)
        return SY_OK;
    size_t cap = a->meta_cap ? a->meta_cap : 1024;
    while (cap < n)
        cap *= 2;
    int32_t *h = realloc(a->meta_host, cap * sizeof(int32_t));
    if (h)
        a->meta_host = h;
    int32_t *hs = h ? realloc(a->meta_sent, cap * sizeof(int32_t)) : NULL;
    if (hs)
        a->meta_sent = hs;
    a->meta_sent_n = 0;
    if (!h || !hs)
        return sy_err_set(err, SY_ERR_NOMEM, "attn %s: step tables of %zu entries", SY_ATTN_NAME, cap);

    if (a->meta_dev)
        cudaFree(a->meta_dev); /* synchronous: no queued kernel still reads it */
    a->meta_dev = NULL;
    a->meta_cap = 0;
    SYC_TRY(err, cudaMalloc((void **)&a->meta_dev, cap * sizeof(int32_t)), "attn: step tables");
    a->meta_cap = cap;
    return SY_OK;
}

/* Entries of the packed tables: seq_of[T] | tok_start[S+1] | ctx_len[S] | block_table[S * max_blocks]. */
static size_t meta_entries(const sy_attn_batch *b)
{
    const size_t T = (size_t)b->n_tokens, S = (size_t)b->n_seqs, MB = (size_t)b->max_blocks;
    return T + (S + 1) + S + S * MB;
}

/*
 * The plan behind the tables (tensor-core steps): k_attend's rows, then the
 * tiles (syat_plan), in room for 3 T entries; returns the entries used.
 */
static size_t pack_plan(const sy_attn_batch *b, int group, int32_t *m, int32_t *n_rows, int32_t *n_tiles)
{
    const int32_t T = b->n_tokens;
    syat_plan(b->n_seqs, b->tok_start, group, SYAT_TC_MIN_TOKENS, m, n_rows, m + T, n_tiles);
    memmove(m + *n_rows, m + T, sizeof(int32_t) * 2 * (size_t)*n_tiles);
    return (size_t)*n_rows + 2 * (size_t)*n_tiles;
}

static void pack_meta(const sy_attn_batch *b, int32_t *m)
{
    const size_t T = (size_t)b->n_tokens, S = (size_t)b->n_seqs, MB = (size_t)b->max_blocks;
    for (int32_t s = 0; s < b->n_seqs; s++)
        for (int32_t t = b->tok_start[s]; t < b->tok_start[s + 1]; t++)
            m[t] = s;
    memcpy(m + T, b->tok_start, (S + 1) * sizeof(int32_t));
    memcpy(m + T + S + 1, b->ctx_len, S * sizeof(int32_t));
    memcpy(m + T + 2 * S + 1, b->block_table, S * MB * sizeof(int32_t));
}

/* sy_attn_batch.ctx_bound, 0 from a caller built before it. */
static int32_t batch_bound(const sy_attn_batch *b)
{
    return b->struct_size >= offsetof(sy_attn_batch, ctx_bound) + sizeof b->ctx_bound ? b->ctx_bound : 0;
}

static int forward(void *inst, int32_t layer, const sy_attn_batch *b, const sy_tensor *q, const sy_tensor *k,
                   const sy_tensor *v, sy_tensor *out, sy_err *err)
{
    attn_cuda *a = inst;
    if (!a->prepared)
        return sy_err_set(err, SY_ERR_INVALID, "attn %s: forward before prepare", SY_ATTN_NAME);
    syk_attn_io io;
    int rc = syk_attn_check_forward(&a->p, layer, b, q, k, v, out, &io, err);
    if (rc)
        return rc;
    if (b->n_tokens == 0)
        return SY_OK;
    if ((rc = syc_enter(a->gpu, err, "attn forward")))
        return rc;
    size_t n = meta_entries(b);
    const int32_t bound = batch_bound(b);
    const int32_t *meta_dev = NULL;
    /* Recorded steps keep every row on k_attend: a replay's tables may hold other lengths than this plan's. */
    const int use_tc = a->tc_on && bound <= 0;
    int32_t n_rows = 0, n_tiles = 0;
    size_t plan_at = n;
    if (bound > 0) {
        /* A recorded step, or the run before it: layer 0 copies the shape's pinned tables, so that a recording
         * holds the copy and a replay reads what stage wrote there. The engine waits for each step before the
         * next one refills them. */
        bounded_tables *t = bounded_for(a, b, n, err);
        if (!t)
            return SY_ERR_UNSUPPORTED;
        a->bounded = 1;
        if (layer == 0) {
            pack_meta(b, t->pin);
            SYC_TRY(err, cudaMemcpyAsync(t->dev, t->pin, n * sizeof(int32_t), cudaMemcpyHostToDevice, 0),
                    "attn: step tables upload");
        }
        meta_dev = t->dev;
    } else {
        if ((rc = meta_reserve(a, n + (use_tc ? 3 * (size_t)b->n_tokens : 0), err)))
            return rc;
        int32_t *m = a->meta_host;
        pack_meta(b, m);
        if (use_tc)
            n += pack_plan(b, a->p.n_heads / a->p.n_kv_heads, m + plan_at, &n_rows, &n_tiles);
        /* Every layer of a step brings the same tables: upload them once. From pageable memory the copy
         * returns once the host buffer has been staged, so it may be refilled next call. */
        if (n != a->meta_sent_n || memcmp(m, a->meta_sent, n * sizeof(int32_t)) != 0) {
            a->meta_sent_n = 0;
            SYC_TRY(err, cudaMemcpyAsync(a->meta_dev, m, n * sizeof(int32_t), cudaMemcpyHostToDevice, 0),
                    "attn: step tables upload");
            memcpy(a->meta_sent, m, n * sizeof(int32_t));
            a->meta_sent_n = n;
        }
        meta_dev = a->meta_dev;
    }
    /* Flash-decoding when the batch alone leaves most multiprocessors idle: enough splits for about two blocks
     * per SM, each at least two KV tiles long (shorter ones cost more to merge than they save). */
    int64_t max_len = bound; /* a recording's launches must serve every replay up to the bound */
    for (int32_t s = 0; s < b->n_seqs && bound <= 0; s++) {
        const int32_t new_tokens = b->tok_start[s + 1] - b->tok_start[s];
        if (use_tc && new_tokens >= SYAT_TC_MIN_TOKENS)
            continue; /* a prefill: its rows are k_attend_tc's, never split */
        const int64_t len = (int64_t)b->ctx_len[s] + new_tokens;
        max_len = len > max_len ? len : max_len;
    }
    /* Split-K sizes from k_attend's rows only (a step of prefill tiles alone runs no k_attend block). */
    const int64_t n_att = use_tc ? n_rows : b->n_tokens;
    const int64_t blocks = n_att * a->p.n_kv_heads, want = 2 * (int64_t)a->sms;
    int n_splits = 1, split_len = 0;
    if (a->split_k && blocks > 0 && blocks < want && max_len >= 4 * SY_ATTN_KV_TILE) {
        int64_t ns = (want + blocks - 1) / blocks, most = max_len / (2 * SY_ATTN_KV_TILE);
        ns = ns < most ? ns : most;
        ns = ns < SY_ATTN_MAX_SPLITS ? ns : SY_ATTN_MAX_SPLITS;
        const int64_t len = ((max_len + ns - 1) / ns + SY_ATTN_KV_TILE - 1) / SY_ATTN_KV_TILE * SY_ATTN_KV_TILE;
        n_splits = (int)((max_len + len - 1) / len);
        split_len = (int)len;
    }
    if (n_splits > 1) {
        /* Indexed by token: every token's room, whichever kernel takes it. */
        const size_t need = (size_t)b->n_tokens * (size_t)a->p.n_heads * (size_t)n_splits *
                            (size_t)(a->p.v_head_dim + 2);
        if (need > a->part_cap) {
            if (syc_capturing())
                return sy_err_set(err, SY_ERR_UNSUPPORTED, "attn %s: split-K partials of %zu floats, room for %zu: a "
                                  "recorded step (CUDA graph) cannot grow them", SY_ATTN_NAME, need, a->part_cap);
            if ((rc = drop_part(a, err)))
                return rc;
            a->part_cap = 0;
            SYC_TRY(err, cudaMalloc((void **)&a->part, need * sizeof(float)), "attn: split-K partials");
            a->part_cap = need;
        }
    }
    const syat_params prm = {
        .q = io.q, .k = io.k, .v = io.v, .out = io.out,
        .ldq = io.ldq, .ldk = io.ldk, .ldv = io.ldv, .ldo = io.ldo,
        .kc = a->kc, .vc = a->vc, .kvt = (int)a->kvt,
        .meta = meta_dev,
        .n_tokens = b->n_tokens, .n_seqs = b->n_seqs, .max_blocks = b->max_blocks,
        .n_kv_heads = a->p.n_kv_heads, .group = a->p.n_heads / a->p.n_kv_heads,
        .head_dim = a->p.head_dim, .v_head_dim = a->p.v_head_dim, .block_size = a->p.block_size,
        .n_blocks = a->p.n_blocks, .layer = layer, .window = syk_attn_window(&a->p, layer),
        .scale = a->p.scale,
        .sinks = a->sinks_dev ? a->sinks_dev + (size_t)layer * (size_t)a->p.n_heads : NULL,
        .n_splits = n_splits, .split_len = split_len, .part = a->part,
        .rows = use_tc ? meta_dev + plan_at : NULL, .n_rows = n_rows,
        .tiles = use_tc ? meta_dev + plan_at + n_rows : NULL, .n_tiles = n_tiles,
    };
    if (syat_forward(&prm, &a->smem_opted_in, &a->tc_opted_in) < 0)
        return sy_err_set(err, SY_ERR_UNSUPPORTED, "attn %s: cannot opt in to the shared memory the kernel needs",
                          SY_ATTN_NAME);
    return syc_launched(err, "attn forward");
}

/*
 * Before a replay: this step's tables into meta_host, where the recorded
 * copy of layer 0 reads them. The recording was made for this shape, so the
 * tables fit the buffers it holds; they never move here.
 */
static int stage(void *inst, const sy_attn_batch *b, sy_err *err)
{
    attn_cuda *a = inst;
    if (!a->prepared)
        return sy_err_set(err, SY_ERR_INVALID, "attn %s: stage before prepare", SY_ATTN_NAME);
    const int32_t bound = batch_bound(b);
    if (bound <= 0 || b->n_seqs <= 0 || b->n_tokens <= 0 || b->max_blocks <= 0)
        return sy_err_set(err, SY_ERR_INVALID, "attn %s: stage of %d sequences, %d tokens, %d blocks each, ctx_bound "
                          "%d: expected all > 0", SY_ATTN_NAME, b->n_seqs, b->n_tokens, b->max_blocks, bound);
    for (int32_t s = 0; s < b->n_seqs; s++) {
        const int64_t end = (int64_t)b->ctx_len[s] + (b->tok_start[s + 1] - b->tok_start[s]);
        if (end > bound)
            return sy_err_set(err, SY_ERR_INVALID, "attn %s: stage: sequence %d ends at %lld, past ctx_bound %d",
                              SY_ATTN_NAME, s, (long long)end, bound);
    }
    bounded_tables *t = NULL;
    for (size_t i = 0; i < a->n_bt && !t; i++)
        if (a->bt[i].n_seqs == b->n_seqs && a->bt[i].n_tokens == b->n_tokens && a->bt[i].max_blocks == b->max_blocks)
            t = &a->bt[i];
    if (!t)
        return sy_err_set(err, SY_ERR_INVALID, "attn %s: stage of %d sequences of %d tokens: no bounded forward of "
                          "that shape came before", SY_ATTN_NAME, b->n_seqs, b->n_tokens);
    pack_meta(b, t->pin);
    return SY_OK;
}

static int copy_blocks(void *inst, const int32_t *src, const int32_t *dst, int32_t n, sy_err *err)
{
    attn_cuda *a = inst;
    if (!a->prepared)
        return sy_err_set(err, SY_ERR_INVALID, "attn %s: copy_blocks before prepare", SY_ATTN_NAME);
    int rc = syk_attn_check_copy(&a->p, src, dst, n, err);
    if (rc || n == 0 || (rc = syc_enter(a->gpu, err, "attn copy_blocks")))
        return rc;
    int32_t *pairs = malloc(sizeof(int32_t) * 2 * (size_t)n);
    if (!pairs)
        return sy_err_set(err, SY_ERR_NOMEM, "attn %s: copy_blocks of %d pairs", SY_ATTN_NAME, n);
    for (int32_t i = 0; i < n; i++) {
        pairs[2 * i] = src[i];
        pairs[2 * i + 1] = dst[i];
    }
    syat_copy_blocks(a->kc, a->vc, (int)a->kvt, pairs, n, (int64_t)a->p.n_layers * a->p.n_kv_heads, a->p.n_blocks,
                     a->k_tile, a->v_tile);
    free(pairs);
    return syc_launched(err, "attn copy_blocks");
}

static const sy_attn_ops ops = {
    .struct_size = sizeof(sy_attn_ops),
    .supports = supports,
    .prepare = prepare,
    .forward = forward,
    .copy_blocks = copy_blocks,
    .stage = stage,
};

static const sy_plugin_desc desc = {
    .struct_size = sizeof(sy_plugin_desc),
    .abi_major = SY_ABI_MAJOR,
    .abi_minor = SY_ABI_MINOR,
    .kind = SY_KIND_ATTN,
    .name = SY_ATTN_NAME,
    .version = PACKAGE_VERSION,
    .device = "cuda",
    .description = "paged attention on NVIDIA GPUs (GQA, sliding windows, attention sinks, F32/BF16/F16 KV cache; "
                   "prefill on tensor cores once self-checked, decode split-K), tiles for this compute capability",
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
