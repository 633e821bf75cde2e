/*
 * moe/cuda: mixture of experts on an NVIDIA GPU (the portable variant
 * `auto` falls back to; arch-specific wgmma / block-scaled FP4 variants
 * would be further plugins with higher probe scores).
 *
 * Per pass of up to max_tokens tokens:
 *   1. the router logits come to the host and each token is routed there
 *      by the CPU plugin's own routing code (moe/cpu/moe_route.c, in
 *      double): the choice of experts is discrete, so both plugin sets pick
 *      the same experts bit for bit;
 *   2. the host groups the (token, expert) assignments by expert and cuts
 *      each group into row tiles, which go to the device with the weights;
 *   3. on the device: gather the rows, grouped GEMMs for gate and up,
 *      silu * up, grouped GEMM for down, and a weighted combine per token
 *      in top-k order.
 * Expert weights are uploaded once per layer into one [E, rows, cols]
 * buffer per matrix, in their own dtype (F32, F16, BF16).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moe_cpu.h"
#include "moe_kern.h"
#include "sycuda.h"

#define SY_MOE_CUDA_NAME "cuda"

typedef struct moe_cuda_layer {
    void *gate, *up, *down; /* device [E, inter, hidden], [E, inter, hidden], [E, hidden, inter] */
    double *bias;           /* host [E] or NULL */
} moe_cuda_layer;

typedef struct moe_cuda {
    const sy_host *host;
    int64_t chunk_tokens;
    int prepared;
    sy_moe_problem p;
    moe_cuda_layer *layers;
    /* Host scratch for one pass (A = chunk_tokens * top_k). */
    float *logits;      /* [chunk, E] */
    int32_t *ids;       /* [chunk, K] */
    float *wts;         /* [chunk, K] */
    int32_t *counts, *offsets; /* [E + 1] */
    int32_t *meta;      /* assign_tok [A] | slot_of [A] | tiles [n_tiles * 3] */
    /* Device scratch for one pass. */
    int32_t *d_meta;
    float *d_wts, *d_xe, *d_act, *d_up, *d_ye;
    size_t max_tiles;
} moe_cuda;

static const sy_key_decl keys[] = {
    {"max_tokens", SY_KEY_INT, "1024",
     "tokens per pass, which sizes the device scratch (about max_tokens x top_k x (2 hidden + 2 inter) floats); "
     "larger batches run in several passes",
     1, 1048576, NULL},
    {NULL, 0, NULL, NULL, 0, 0, NULL},
};

static int probe(const sy_host *host, sy_err *why)
{
    (void)host;
    return syc_probe_gpu0(why) ? 50 : 0; /* the portable variant: an arch-specific one should score higher */
}

static int create(const sy_host *host, const sy_kv *cfg, size_t n_cfg, void **inst, sy_err *err)
{
    const long long mt = sy_kv_int(cfg, n_cfg, "max_tokens", 1024);
    if (mt < 1 || mt > 1048576)
        return sy_err_set(err, SY_ERR_INVALID, "max_tokens = %lld: expected 1..1048576", mt);
    moe_cuda *m = calloc(1, sizeof *m);
    if (!m)
        return sy_err_set(err, SY_ERR_NOMEM, "moe cuda: cannot allocate the instance");
    m->host = host;
    m->chunk_tokens = mt;
    *inst = m;
    return SY_OK;
}

/* cudaFree(NULL) is a no-op, so a partly uploaded layer frees the same way. */
static void layer_free(moe_cuda_layer *L)
{
    cudaFree(L->gate);
    cudaFree(L->up);
    cudaFree(L->down);
    free(L->bias);
}

static void release(moe_cuda *m)
{
    if (m->layers) {
        for (int32_t l = 0; l < m->p.n_layers; l++)
            layer_free(&m->layers[l]);
        free(m->layers);
        m->layers = NULL;
    }
    void *host[] = {m->logits, m->ids, m->wts, m->counts, m->offsets, m->meta};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++)
        free(host[i]);
    void *dev[] = {m->d_meta, m->d_wts, m->d_xe, m->d_act, m->d_up, m->d_ye};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        if (dev[i])
            cudaFree(dev[i]);
    m->logits = m->wts = NULL;
    m->ids = m->counts = m->offsets = m->meta = m->d_meta = NULL;
    m->d_wts = m->d_xe = m->d_act = m->d_up = m->d_ye = NULL;
    m->prepared = 0;
}

static void destroy(void *inst)
{
    moe_cuda *m = inst;
    if (!m)
        return;
    release(m);
    free(m);
}

static int check(const sy_moe_problem *p, sy_err *why)
{
    int rc = sy__moe_check_problem(p, why);
    if (rc)
        return rc;
    if (p->weight_dtype != SY_DTYPE_F32 && p->weight_dtype != SY_DTYPE_F16 && p->weight_dtype != SY_DTYPE_BF16)
        return sy_err_set(why, SY_ERR_UNSUPPORTED, "expert weights %s: moe cuda reads F32, F16 and BF16",
                          sy_dtype_name(p->weight_dtype));
    return SY_OK;
}

static int supports(void *inst, const sy_moe_problem *p, sy_err *why)
{
    (void)inst;
    return check(p, why) == SY_OK;
}

static int prepare(void *inst, const sy_moe_problem *p, sy_err *err)
{
    moe_cuda *m = inst;
    int rc = check(p, err);
    if (rc)
        return rc;
    release(m);
    m->p = *p;
    const size_t C = (size_t)m->chunk_tokens, K = (size_t)p->top_k, A = C * K, E = (size_t)p->n_experts;
    const size_t H = (size_t)p->hidden, F = (size_t)p->inter;
    /* Row tiles: at most one partial tile per expert beyond A / TILE_N full ones. */
    m->max_tiles = A / SYMK_TILE_N + E + 1;
    m->layers = calloc((size_t)p->n_layers, sizeof *m->layers);
    m->logits = malloc(sizeof(float) * C * E);
    m->ids = malloc(sizeof(int32_t) * A);
    m->wts = malloc(sizeof(float) * A);
    m->counts = malloc(sizeof(int32_t) * (E + 1));
    m->offsets = malloc(sizeof(int32_t) * (E + 1));
    m->meta = malloc(sizeof(int32_t) * (2 * A + 3 * m->max_tiles));
    if (!m->layers || !m->logits || !m->ids || !m->wts || !m->counts || !m->offsets || !m->meta) {
        release(m);
        return sy_err_set(err, SY_ERR_NOMEM, "moe cuda: cannot allocate host scratch for %zu tokens", C);
    }
    cudaError_t e = cudaMalloc((void **)&m->d_meta, sizeof(int32_t) * (2 * A + 3 * m->max_tiles));
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&m->d_wts, sizeof(float) * A);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&m->d_xe, sizeof(float) * A * H);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&m->d_act, sizeof(float) * A * F);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&m->d_up, sizeof(float) * A * F);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&m->d_ye, sizeof(float) * A * H);
    if (e != cudaSuccess) {
        release(m);
        return sy_err_set(err, SY_ERR_NOMEM, "moe cuda: device scratch for %zu tokens x top_k %zu (%.1f MiB): %s; "
                          "lower max_tokens", C, K, (double)(sizeof(float) * A * (2 * H + 2 * F)) / 1048576.0,
                          cudaGetErrorString(e));
    }
    m->prepared = 1;
    sy_logf(m->host, SY_LOG_INFO, SY_MOE_CUDA_NAME, "%d experts top-%d, device scratch for %zu tokens per pass "
            "(%.1f MiB), tile %dx%dx%d", p->n_experts, p->top_k, C,
            (double)(sizeof(float) * A * (2 * H + 2 * F)) / 1048576.0, SYMK_TILE_M, SYMK_TILE_N, SYMK_TILE_K);
    return SY_OK;
}

/* Uploads n_experts [rows, cols] views into one device buffer. */
static int upload_experts(const sy_moe_problem *p, const sy_tensor *v, const char *what, int64_t rows, int64_t cols,
                          void **out, sy_err *err)
{
    const int32_t E = p->n_experts;
    const size_t es = (size_t)sy_dtype_bits(p->weight_dtype) / 8;
    const size_t mat = (size_t)rows * (size_t)cols * es;
    for (int32_t e = 0; e < E; e++) {
        const sy_tensor *t = &v[e];
        if (t->dtype != p->weight_dtype)
            return sy_err_set(err, SY_ERR_INVALID, "moe prepare_layer: expert %d %s is %s; the problem says %s", e,
                              what, sy_dtype_name(t->dtype), sy_dtype_name(p->weight_dtype));
        if (t->ndim != 2 || t->shape[0] != rows || t->shape[1] != cols || t->stride[1] != 1 || t->stride[0] < cols ||
            !t->data)
            return sy_err_set(err, SY_ERR_INVALID,
                              "moe prepare_layer: expert %d %s must be a [%lld, %lld] matrix with contiguous rows, "
                              "found ndim %d [%lld, %lld]", e, what, (long long)rows, (long long)cols, t->ndim,
                              (long long)t->shape[0], (long long)(t->ndim > 1 ? t->shape[1] : 0));
    }
    SYC_TRY(err, cudaMalloc(out, mat * (size_t)E), "moe prepare_layer: expert weights");
    for (int32_t e = 0; e < E; e++)
        SYC_TRY(err,
                cudaMemcpy2D((char *)*out + mat * (size_t)e, (size_t)cols * es, v[e].data, (size_t)v[e].stride[0] * es,
                             (size_t)cols * es, (size_t)rows, cudaMemcpyHostToDevice),
                "moe prepare_layer: expert upload");
    return SY_OK;
}

static int prepare_layer(void *inst, int32_t layer, const sy_tensor *gate, const sy_tensor *up, const sy_tensor *down,
                         const sy_tensor *score_bias, sy_err *err)
{
    moe_cuda *m = inst;
    if (!m->prepared)
        return sy_err_set(err, SY_ERR_INVALID, "moe cuda: prepare_layer before prepare");
    if (layer < 0 || layer >= m->p.n_layers)
        return sy_err_set(err, SY_ERR_INVALID, "moe prepare_layer: layer %d outside [0, %d)", layer, m->p.n_layers);
    if (!gate || !up || !down)
        return sy_err_set(err, SY_ERR_INVALID, "moe prepare_layer: gate, up and down arrays are required");
    const int32_t E = m->p.n_experts;
    double *bias = NULL;
    if (score_bias) {
        if (score_bias->ndim != 1 || score_bias->shape[0] != E || !score_bias->data ||
            (score_bias->dtype != SY_DTYPE_F32 && score_bias->dtype != SY_DTYPE_F16 &&
             score_bias->dtype != SY_DTYPE_BF16))
            return sy_err_set(err, SY_ERR_INVALID, "moe prepare_layer: score_bias must be [%d] F32/F16/BF16", E);
        float *tmp = malloc(sizeof(float) * (size_t)E);
        if (!tmp || !(bias = malloc(sizeof(double) * (size_t)E))) {
            free(tmp);
            return sy_err_set(err, SY_ERR_NOMEM, "moe prepare_layer: cannot allocate the score bias");
        }
        syk_row_to_f32(tmp, score_bias->data, score_bias->dtype, E);
        for (int32_t e = 0; e < E; e++)
            bias[e] = tmp[e];
        free(tmp);
    }
    moe_cuda_layer L = {NULL, NULL, NULL, bias};
    int rc;
    if ((rc = upload_experts(&m->p, gate, "gate", m->p.inter, m->p.hidden, &L.gate, err)) ||
        (rc = upload_experts(&m->p, up, "up", m->p.inter, m->p.hidden, &L.up, err)) ||
        (rc = upload_experts(&m->p, down, "down", m->p.hidden, m->p.inter, &L.down, err))) {
        layer_free(&L);
        return rc;
    }
    layer_free(&m->layers[layer]);
    m->layers[layer] = L;
    return SY_OK;
}

static int f32_2d(const sy_tensor *t, const char *what, int64_t cols, int64_t *rows, int64_t *ld, sy_err *err)
{
    if (!t || t->dtype != SY_DTYPE_F32 || t->ndim != 2 || t->stride[1] != 1 || t->shape[1] != cols ||
        (t->shape[0] > 1 && t->stride[0] < cols) || (!t->data && t->shape[0] > 0))
        return sy_err_set(err, SY_ERR_INVALID, "moe forward: %s must be F32 [n, %lld] with contiguous rows", what,
                          (long long)cols);
    *rows = t->shape[0];
    *ld = t->shape[0] > 1 ? t->stride[0] : cols;
    return SY_OK;
}

/* One pass over tokens [t0, t0 + n). */
static int run_pass(moe_cuda *m, const moe_cuda_layer *L, const float *x, int64_t ldx, const float *logits,
                    int64_t ldl, float *out, int64_t ldo, int64_t t0, int64_t n, sy_err *err)
{
    const int64_t E = m->p.n_experts, K = m->p.top_k, H = m->p.hidden, F = m->p.inter, A = n * K;
    SYC_TRY(err,
            cudaMemcpy2D(m->logits, sizeof(float) * (size_t)E, logits + t0 * ldl, sizeof(float) * (size_t)ldl,
                         sizeof(float) * (size_t)E, (size_t)n, cudaMemcpyDeviceToHost),
            "moe forward: router logits download");
    for (int64_t i = 0; i < n; i++)
        sy__moe_route(&m->p, m->logits + i * E, L->bias, m->ids + i * K, m->wts + i * K);
    /* Group assignments by expert, tokens ascending within an expert. */
    memset(m->counts, 0, sizeof(int32_t) * (size_t)(E + 1));
    for (int64_t a = 0; a < A; a++)
        m->counts[m->ids[a]]++;
    m->offsets[0] = 0;
    for (int64_t e = 0; e < E; e++)
        m->offsets[e + 1] = m->offsets[e] + m->counts[e];
    int32_t *assign_tok = m->meta, *slot_of = m->meta + A;
    symk_tile *tiles = (symk_tile *)(m->meta + 2 * A);
    memset(m->counts, 0, sizeof(int32_t) * (size_t)(E + 1));
    for (int64_t a = 0; a < A; a++) {
        const int32_t e = m->ids[a];
        const int32_t row = m->offsets[e] + m->counts[e]++;
        assign_tok[row] = (int32_t)(a / K);
        slot_of[a] = row;
    }
    int64_t nt = 0;
    for (int64_t e = 0; e < E; e++)
        for (int32_t r = 0; r < m->counts[e]; r += SYMK_TILE_N) {
            const int32_t left = m->counts[e] - r;
            tiles[nt++] = (symk_tile){(int32_t)e, m->offsets[e] + r, left < SYMK_TILE_N ? left : SYMK_TILE_N};
        }
    SYC_TRY(err, cudaMemcpy(m->d_meta, m->meta, sizeof(int32_t) * (size_t)(2 * A + 3 * nt), cudaMemcpyHostToDevice),
            "moe forward: assignment upload");
    SYC_TRY(err, cudaMemcpy(m->d_wts, m->wts, sizeof(float) * (size_t)A, cudaMemcpyHostToDevice),
            "moe forward: weight upload");
    const int wdt = (int)m->p.weight_dtype;
    const symk_tile *d_tiles = (const symk_tile *)(m->d_meta + 2 * A);
    symk_gather(x + t0 * ldx, ldx, m->d_meta, A, H, m->d_xe);
    symk_grouped_gemm(m->d_xe, H, L->gate, wdt, F, d_tiles, nt, m->d_act);
    symk_grouped_gemm(m->d_xe, H, L->up, wdt, F, d_tiles, nt, m->d_up);
    symk_silu_mul(m->d_act, m->d_up, A * F);
    symk_grouped_gemm(m->d_act, F, L->down, wdt, H, d_tiles, nt, m->d_ye);
    symk_combine(m->d_ye, H, m->d_meta + A, m->d_wts, n, (int)K, out + t0 * ldo, ldo);
    return syc_launched(err, "moe forward");
}

static int forward(void *inst, int32_t layer, const sy_tensor *x, const sy_tensor *router_logits, sy_tensor *out,
                   sy_err *err)
{
    moe_cuda *m = inst;
    if (!m->prepared)
        return sy_err_set(err, SY_ERR_INVALID, "moe cuda: forward before prepare");
    if (layer < 0 || layer >= m->p.n_layers || !m->layers[layer].gate)
        return sy_err_set(err, SY_ERR_INVALID, "moe forward: layer %d has no experts (prepare_layer first)", layer);
    int64_t n, nl, no, ldx, ldl, ldo;
    int rc;
    if ((rc = f32_2d(x, "x", m->p.hidden, &n, &ldx, err)) ||
        (rc = f32_2d(router_logits, "router_logits", m->p.n_experts, &nl, &ldl, err)) ||
        (rc = f32_2d(out, "out", m->p.hidden, &no, &ldo, err)))
        return rc;
    if (nl != n || no != n)
        return sy_err_set(err, SY_ERR_INVALID, "moe forward: x has %lld rows, router_logits %lld, out %lld; expected "
                          "the same", (long long)n, (long long)nl, (long long)no);
    for (int64_t t0 = 0; t0 < n; t0 += m->chunk_tokens) {
        const int64_t len = n - t0 < m->chunk_tokens ? n - t0 : m->chunk_tokens;
        if ((rc = run_pass(m, &m->layers[layer], x->data, ldx, router_logits->data, ldl, out->data, ldo, t0, len, err)))
            return rc;
    }
    return SY_OK;
}

static const sy_moe_ops ops = {
    .struct_size = sizeof(sy_moe_ops),
    .supports = supports,
    .prepare = prepare,
    .prepare_layer = prepare_layer,
    .forward = forward,
};

static const sy_plugin_desc desc = {
    .struct_size = sizeof(sy_plugin_desc),
    .abi_major = SY_ABI_MAJOR,
    .abi_minor = SY_ABI_MINOR,
    .kind = SY_KIND_MOE,
    .name = SY_MOE_CUDA_NAME,
    .version = PACKAGE_VERSION,
    .device = "cuda",
    .description = "mixture of experts on NVIDIA GPUs (portable): the CPU plugin's routing, grouped expert GEMMs on "
                   "F32/F16/BF16 weights with F32 accumulation",
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
