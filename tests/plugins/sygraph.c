/*
 * sygraph: wrappers around real CPU plugins that add the graph ops, for
 * tests/cli/test_graphs.sh (the engine's recorded-step fallbacks).
 *
 * Built twice. As a device plugin (`sygraph`, key `inner` = the path of a
 * real device plugin) it forwards every op and adds host_alloc/host_free
 * and the graph ops, declaring `graphs = off|on` like device cuda. A CPU
 * cannot record work, so its graph ops never pretend to: `fail` names the
 * one that fails (begin, end or launch); the ones before it succeed while
 * the ops in between simply run, and graph_end hands out a token that
 * launch refuses. While "recording" it checks the contract the core must
 * keep: every host array given to embed or rope lies in memory from
 * host_alloc (what a replay would read).
 *
 * With -DSYGRAPH_ATTN it is an attention plugin (`sygraph-attn`) wrapping a
 * real one, adding `stage`; both forward and stage check what
 * sy_attn_batch.ctx_bound promises: one token per sequence and every
 * sequence's end within the bound.
 *
 * Runs only when SYGRAPH_PROBE=1 is in the environment (see probe).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "switchyard/plugin.h"

#ifdef SYGRAPH_ATTN
#define NAME "sygraph-attn"
#define INNER_KIND SY_KIND_ATTN
#else
#define NAME "sygraph"
#define INNER_KIND SY_KIND_DEVICE
#endif

/* Blocks host_alloc handed out (the contract check looks pointers up here). */
#define MAX_HOST_BLOCKS 64

typedef struct graph_inst {
    void *dl;
    const sy_plugin_desc *inner;
    void *inner_inst;
    char fail[16];  /* begin | end | launch | none */
    int recording;
    char bad[256];  /* a contract violation seen while recording: graph_end fails with it */
    struct {
        char *p;
        size_t n;
    } blocks[MAX_HOST_BLOCKS];
    int n_blocks;
} graph_inst;

static int probe(const sy_host *host, sy_err *why)
{
    (void)host;
    /* Score 1 (below every real plugin) and only when the graphs test asks, so it never wins `auto`. */
    const char *on = getenv("SYGRAPH_PROBE");
    if (!on || strcmp(on, "1") != 0)
        return sy_err_set(why, 0, "graph-fallback test plugin: runs only under tests/cli/test_graphs.sh "
                                  "(SYGRAPH_PROBE=1)");
    return 1;
}

static void destroy(void *p)
{
    graph_inst *in = p;
    if (!in)
        return;
    if (in->inner && in->inner_inst)
        in->inner->destroy(in->inner_inst);
    for (int i = 0; i < in->n_blocks; i++)
        free(in->blocks[i].p);
    /* The inner plugin's code may still be referenced by the host's logs; keep it mapped. */
    free(in);
}

static int create(const sy_host *host, const sy_kv *cfg, size_t n_cfg, void **out, sy_err *err)
{
    const char *path = sy_kv_get(cfg, n_cfg, "inner");
    if (!path || !*path)
        return sy_err_set(err, SY_ERR_INVALID, NAME ": key inner: expected the path of a real %s plugin",
                          sy_kind_name(INNER_KIND));
    graph_inst *in = calloc(1, sizeof *in);
    if (!in)
        return sy_err_set(err, SY_ERR_NOMEM, NAME ": no memory for the instance");
    const char *f = sy_kv_get(cfg, n_cfg, "fail");
    snprintf(in->fail, sizeof in->fail, "%s", f ? f : "none");
    in->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    const sy_plugin_desc *(*entry)(void) = NULL;
    if (in->dl)
        *(void **)&entry = dlsym(in->dl, SY_PLUGIN_ENTRY_NAME);
    in->inner = entry ? entry() : NULL;
    if (!in->inner || in->inner->kind != INNER_KIND) {
        const int loaded = in->dl != NULL;
        free(in);
        return sy_err_set(err, SY_ERR_INVALID, NAME ": inner %s: expected a %s plugin (%s)", path,
                          sy_kind_name(INNER_KIND), loaded ? "not one" : "cannot load it");
    }
    /* The inner plugin's keys at their defaults, except one thread for a CPU device (tests share 2 cores). */
    const sy_kv inner_cfg[] = {{"threads", "1"}};
    const int is_cpu_dev = INNER_KIND == SY_KIND_DEVICE && strcmp(in->inner->name, "cpu") == 0;
    int rc = in->inner->create(host, is_cpu_dev ? inner_cfg : NULL, is_cpu_dev ? 1 : 0, &in->inner_inst, err);
    if (rc) {
        free(in);
        return rc;
    }
    *out = in;
    return SY_OK;
}

#define INNER(in) ((const OPS_T *)(in)->inner->ops)

#ifndef SYGRAPH_ATTN
/* ------------------------------------------------------------ device wrapper */
#define OPS_T sy_device_ops

/* Whether [p, p + n) lies in one block from host_alloc. */
static int in_host_block(const graph_inst *in, const void *p, size_t n)
{
    const char *c = p;
    for (int i = 0; i < in->n_blocks; i++)
        if (c >= in->blocks[i].p && c + n <= in->blocks[i].p + in->blocks[i].n)
            return 1;
    return 0;
}

/* While recording, a host array an op reads must be one a replay would read again. */
static void check_host_array(graph_inst *in, const char *op, const void *p, int64_t n)
{
    if (in->recording && n > 0 && !in->bad[0] && !in_host_block(in, p, sizeof(int32_t) * (size_t)n))
        snprintf(in->bad, sizeof in->bad, NAME ": %s was recorded with a host array outside host_alloc's memory "
                 "(a replay could not read this step's values)", op);
}

static int d_alloc(void *p, sy_tensor *t, sy_err *err)
{
    graph_inst *in = p;
    return INNER(in)->alloc(in->inner_inst, t, err);
}
static void d_free(void *p, sy_tensor *t)
{
    graph_inst *in = p;
    INNER(in)->free(in->inner_inst, t);
}
static int d_upload(void *p, sy_tensor *dst, const void *src, size_t bytes, sy_err *err)
{
    graph_inst *in = p;
    return INNER(in)->upload(in->inner_inst, dst, src, bytes, err);
}
static int d_download(void *p, void *dst, const sy_tensor *src, size_t bytes, sy_err *err)
{
    graph_inst *in = p;
    if (in->recording) /* a recording device cannot hand data back */
        return sy_err_set(err, SY_ERR_UNSUPPORTED, NAME ": download while recording");
    return INNER(in)->download(in->inner_inst, dst, src, bytes, err);
}
static int d_prepare_weight(void *p, const char *name, const sy_tensor *host, sy_tensor *out, sy_err *err)
{
    graph_inst *in = p;
    return INNER(in)->prepare_weight(in->inner_inst, name, host, out, err);
}
static void d_release_weight(void *p, sy_tensor *w)
{
    graph_inst *in = p;
    INNER(in)->release_weight(in->inner_inst, w);
}
static int d_embed(void *p, const sy_tensor *table, const int32_t *ids, int64_t n, sy_tensor *out, sy_err *err)
{
    graph_inst *in = p;
    check_host_array(in, "embed", ids, n);
    return INNER(in)->embed(in->inner_inst, table, ids, n, out, err);
}
static int d_rmsnorm(void *p, const sy_tensor *x, const sy_tensor *w, float eps, sy_tensor *out, sy_err *err)
{
    graph_inst *in = p;
    return INNER(in)->rmsnorm(in->inner_inst, x, w, eps, out, err);
}
static int d_add_rmsnorm(void *p, sy_tensor *r, const sy_tensor *x, const sy_tensor *w, float eps, sy_tensor *out,
                         sy_err *err)
{
    graph_inst *in = p;
    return INNER(in)->add_rmsnorm(in->inner_inst, r, x, w, eps, out, err);
}
static int d_linear(void *p, const sy_tensor *x, const sy_tensor *w, const sy_tensor *b, sy_tensor *out, sy_err *err)
{
    graph_inst *in = p;
    return INNER(in)->linear(in->inner_inst, x, w, b, out, err);
}
static int d_rope(void *p, sy_tensor *x, const int32_t *pos, const sy_rope_params *rp, sy_err *err)
{
    graph_inst *in = p;
    check_host_array(in, "rope", pos, x->shape[0]);
    return INNER(in)->rope(in->inner_inst, x, pos, rp, err);
}
static int d_silu_mul(void *p, const sy_tensor *g, const sy_tensor *u, sy_tensor *out, sy_err *err)
{
    graph_inst *in = p;
    return INNER(in)->silu_mul(in->inner_inst, g, u, out, err);
}
static int d_add(void *p, sy_tensor *acc, const sy_tensor *x, sy_err *err)
{
    graph_inst *in = p;
    return INNER(in)->add(in->inner_inst, acc, x, err);
}
static int d_synchronize(void *p, sy_err *err)
{
    graph_inst *in = p;
    if (in->recording)
        return sy_err_set(err, SY_ERR_UNSUPPORTED, NAME ": synchronize while recording");
    return INNER(in)->synchronize(in->inner_inst, err);
}
static int d_linear_multi(void *p, const sy_tensor *x, int32_t n, const sy_tensor *const *w,
                          const sy_tensor *const *b, sy_tensor *const *out, sy_err *err)
{
    graph_inst *in = p;
    for (int32_t i = 0; i < n; i++) { /* the inner device may lack the fused op: its result is the same */
        int rc = INNER(in)->linear(in->inner_inst, x, w[i], b ? b[i] : NULL, out[i], err);
        if (rc)
            return rc;
    }
    return SY_OK;
}

static void *d_host_alloc(void *p, size_t bytes, sy_err *err)
{
    graph_inst *in = p;
    if (in->n_blocks == MAX_HOST_BLOCKS) {
        sy_err_set(err, SY_ERR_NOMEM, NAME ": more than %d host_alloc blocks", MAX_HOST_BLOCKS);
        return NULL;
    }
    char *b = malloc(bytes ? bytes : 1);
    if (!b) {
        sy_err_set(err, SY_ERR_NOMEM, NAME ": host_alloc of %zu bytes", bytes);
        return NULL;
    }
    in->blocks[in->n_blocks].p = b;
    in->blocks[in->n_blocks++].n = bytes;
    return b;
}
static void d_host_free(void *p, void *ptr)
{
    graph_inst *in = p;
    for (int i = 0; i < in->n_blocks; i++)
        if (in->blocks[i].p == ptr) {
            free(ptr);
            in->blocks[i] = in->blocks[--in->n_blocks];
            return;
        }
}

/* The token graph_end hands out: nothing a CPU could replay, which launch says. */
typedef struct fake_graph {
    int unused;
} fake_graph;

static int d_graph_begin(void *p, sy_err *err)
{
    graph_inst *in = p;
    if (strcmp(in->fail, "begin") == 0)
        return sy_err_set(err, SY_ERR_UNSUPPORTED, NAME ": injected graph_begin failure");
    in->recording = 1;
    in->bad[0] = 0;
    return SY_OK;
}
static int d_graph_end(void *p, void **graph, sy_err *err)
{
    graph_inst *in = p;
    *graph = NULL;
    in->recording = 0;
    if (in->bad[0])
        return sy_err_set(err, SY_ERR_INVALID, "%s", in->bad);
    if (strcmp(in->fail, "end") == 0)
        return sy_err_set(err, SY_ERR_UNSUPPORTED, NAME ": injected graph_end failure");
    *graph = calloc(1, sizeof(fake_graph));
    return *graph ? SY_OK : sy_err_set(err, SY_ERR_NOMEM, NAME ": graph token");
}
static int d_graph_launch(void *p, void *graph, sy_err *err)
{
    (void)p;
    (void)graph;
    return sy_err_set(err, SY_ERR_UNSUPPORTED, NAME ": injected graph_launch failure (a CPU cannot replay)");
}
static void d_graph_free(void *p, void *graph)
{
    (void)p;
    free(graph);
}

static const sy_device_ops ops = {
    .struct_size = sizeof(sy_device_ops),
    .alloc = d_alloc,
    .free = d_free,
    .upload = d_upload,
    .download = d_download,
    .prepare_weight = d_prepare_weight,
    .release_weight = d_release_weight,
    .embed = d_embed,
    .rmsnorm = d_rmsnorm,
    .add_rmsnorm = d_add_rmsnorm,
    .linear = d_linear,
    .rope = d_rope,
    .silu_mul = d_silu_mul,
    .add = d_add,
    .synchronize = d_synchronize,
    .linear_multi = d_linear_multi,
    .host_alloc = d_host_alloc,
    .host_free = d_host_free,
    .graph_begin = d_graph_begin,
    .graph_end = d_graph_end,
    .graph_launch = d_graph_launch,
    .graph_free = d_graph_free,
};

/* The inner CPU device's worker pool, which the host then offers every plugin: called with our instance. */
static void d_parallel_for(void *p, int64_t n, int64_t grain, sy_range_fn fn, void *arg)
{
    graph_inst *in = p;
    sy_device_parallel_for_fn f = (sy_device_parallel_for_fn)in->inner->get_proc("parallel_for");
    f(in->inner_inst, n, grain, fn, arg);
}
static int d_n_workers(void *p)
{
    graph_inst *in = p;
    sy_device_n_workers_fn f = (sy_device_n_workers_fn)in->inner->get_proc("n_workers");
    return f(in->inner_inst);
}
static void *get_proc(const char *name)
{
    if (name && strcmp(name, "parallel_for") == 0) {
        sy_device_parallel_for_fn f = d_parallel_for;
        return (void *)f;
    }
    if (name && strcmp(name, "n_workers") == 0) {
        sy_device_n_workers_fn f = d_n_workers;
        return (void *)f;
    }
    return NULL;
}

static const sy_key_decl keys[] = {
    {"inner", SY_KEY_STRING, "", "path of the real device plugin every op goes to (it must offer a worker pool)", 1,
     0, NULL},
    {"graphs", SY_KEY_ENUM, "off", "as device cuda's key: record and replay decode steps", 1, 0, "off|on"},
    {"fail", SY_KEY_ENUM, "launch", "the graph op that fails (the ones before it succeed)", 1, 0,
     "begin|end|launch"},
    {NULL, SY_KEY_STRING, NULL, NULL, 0, 0, NULL},
};
#define GET_PROC get_proc
#define DESC_DEVICE "cpu"
#define DESC_TEXT "graph-op test wrapper around a real device plugin (tests/cli/test_graphs.sh)"

#else
/* --------------------------------------------------------- attention wrapper */
#define OPS_T sy_attn_ops

/* What ctx_bound promises (plugin.h): checked on every recorded forward and every stage. */
static int check_bound(const sy_attn_batch *b, const char *op, sy_err *err)
{
    if (b->struct_size < offsetof(sy_attn_batch, ctx_bound) + sizeof b->ctx_bound || b->ctx_bound <= 0)
        return sy_err_set(err, SY_ERR_INVALID, NAME ": %s without a ctx_bound (struct_size %u)", op, b->struct_size);
    if (b->n_tokens != b->n_seqs)
        return sy_err_set(err, SY_ERR_INVALID, NAME ": %s of %d tokens for %d sequences; a recorded step has one each",
                          op, b->n_tokens, b->n_seqs);
    for (int32_t s = 0; s < b->n_seqs; s++) {
        const int64_t end = (int64_t)b->ctx_len[s] + (b->tok_start[s + 1] - b->tok_start[s]);
        if (end > b->ctx_bound)
            return sy_err_set(err, SY_ERR_INVALID, NAME ": %s: sequence %d ends at %lld, past ctx_bound %d", op, s,
                              (long long)end, b->ctx_bound);
    }
    return SY_OK;
}

static int a_supports(void *p, const sy_attn_problem *pr, sy_err *why)
{
    graph_inst *in = p;
    return INNER(in)->supports(in->inner_inst, pr, why);
}
static int a_prepare(void *p, const sy_attn_problem *pr, sy_err *err)
{
    graph_inst *in = p;
    return INNER(in)->prepare(in->inner_inst, pr, err);
}
static int a_forward(void *p, int32_t layer, const sy_attn_batch *b, const sy_tensor *q, const sy_tensor *k,
                     const sy_tensor *v, sy_tensor *out, sy_err *err)
{
    graph_inst *in = p;
    int rc;
    if (b->struct_size >= offsetof(sy_attn_batch, ctx_bound) + sizeof b->ctx_bound && b->ctx_bound > 0 &&
        (rc = check_bound(b, "forward", err)))
        return rc;
    return INNER(in)->forward(in->inner_inst, layer, b, q, k, v, out, err);
}
static int a_copy_blocks(void *p, const int32_t *src, const int32_t *dst, int32_t n, sy_err *err)
{
    graph_inst *in = p;
    return INNER(in)->copy_blocks(in->inner_inst, src, dst, n, err);
}
static int a_stage(void *p, const sy_attn_batch *b, sy_err *err)
{
    (void)p;
    return check_bound(b, "stage", err);
}

static const sy_attn_ops ops = {
    .struct_size = sizeof(sy_attn_ops),
    .supports = a_supports,
    .prepare = a_prepare,
    .forward = a_forward,
    .copy_blocks = a_copy_blocks,
    .stage = a_stage,
};
#define GET_PROC NULL
static const sy_key_decl keys[] = {
    {"inner", SY_KEY_STRING, "", "path of the real attention plugin every op goes to", 1, 0, NULL},
    {NULL, SY_KEY_STRING, NULL, NULL, 0, 0, NULL},
};
#define DESC_DEVICE "cpu"
#define DESC_TEXT "stage-op test wrapper around a real attention plugin (tests/cli/test_graphs.sh)"
#endif

static const sy_plugin_desc desc = {
    .struct_size = sizeof(sy_plugin_desc),
    .abi_major = SY_ABI_MAJOR,
    .abi_minor = SY_ABI_MINOR,
    .kind = INNER_KIND,
    .name = NAME,
    .version = "0.0.1",
    .device = DESC_DEVICE,
    .description = DESC_TEXT,
    .keys = keys,
    .probe = probe,
    .create = create,
    .destroy = destroy,
    .ops = &ops,
    .get_proc = GET_PROC,
};

SY_EXPORT const sy_plugin_desc *SY_PLUGIN_ENTRY(void);
SY_EXPORT const sy_plugin_desc *SY_PLUGIN_ENTRY(void)
{
    return &desc;
}
