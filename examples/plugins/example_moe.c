/*
 * example-moe: mixture-of-experts on the CPU, written for reading.
 *
 * prepare_layer keeps the host views of each layer's experts (they stay
 * valid, mmap'd, for the instance's life, so nothing is copied). forward
 * routes every token (softmax or sigmoid scores, optional score-correction
 * bias for selection, top-k, optional renormalisation, routed scaling) and
 * sums the chosen SwiGLU experts, one token per work item of the host's
 * workers. Weights in F32, F16 or BF16; grouped top-k (DeepSeek-V3) is
 * refused by supports().
 *
 * Build: cc -shared -fPIC $(pkg-config --cflags switchyard-plugin) example_moe.c -o example-moe.so -lm
 * Use:   [moe]
 *        plugin = /path/to/example-moe.so
 */
#include <switchyard/plugin.h>

#include <math.h>

#define MAX_EXPERTS 256
#define MAX_TOPK 16

typedef struct layer {
    const sy_tensor *gate, *up, *down; /* arrays of n_experts host views */
    const sy_tensor *bias;             /* NULL: none */
} layer;

typedef struct moe {
    const sy_host *host;
    sy_moe_problem p;
    layer *layers;
    float *scratch; /* per worker: gate and up activations, inter floats each */
    int n_workers;
} moe;

static int probe(const sy_host *host, sy_err *why)
{
    (void)host;
    (void)why;
    return 5; /* below the in-tree cpu plugin, so `auto` keeps that one */
}

static int create(const sy_host *host, const sy_kv *cfg, size_t n_cfg, void **out, sy_err *err)
{
    (void)cfg;
    (void)n_cfg;
    moe *m = host->alloc(host->ctx, sizeof *m, sizeof(void *));
    if (!m)
        return sy_err_set(err, SY_ERR_NOMEM, "example-moe: out of memory");
    memset(m, 0, sizeof *m);
    m->host = host;
    *out = m;
    return SY_OK;
}

static void release(moe *m)
{
    m->host->free(m->host->ctx, m->layers);
    m->host->free(m->host->ctx, m->scratch);
    m->layers = NULL;
    m->scratch = NULL;
}

static void destroy(void *inst)
{
    moe *m = inst;
    release(m);
    m->host->free(m->host->ctx, m);
}

static int supports(void *inst, const sy_moe_problem *p, sy_err *why)
{
    (void)inst;
    if (p->n_experts < 1 || p->n_experts > MAX_EXPERTS || p->top_k < 1 || p->top_k > MAX_TOPK ||
        p->top_k > p->n_experts)
        return sy_err_set(why, 0, "example-moe routes 1..%d of up to %d experts, asked top %d of %d", MAX_TOPK,
                          MAX_EXPERTS, p->top_k, p->n_experts);
    if (p->n_group > 1)
        return sy_err_set(why, 0, "example-moe has no grouped top-k (n_group %d)", p->n_group);
    if (p->scoring != SY_MOE_SOFTMAX && p->scoring != SY_MOE_SIGMOID)
        return sy_err_set(why, 0, "example-moe knows softmax and sigmoid scoring, not %d", p->scoring);
    if (p->weight_dtype != SY_DTYPE_F32 && p->weight_dtype != SY_DTYPE_F16 && p->weight_dtype != SY_DTYPE_BF16)
        return sy_err_set(why, 0, "example-moe reads F32, F16 and BF16 experts, not %s", sy_dtype_name(p->weight_dtype));
    /* ABI 1.1 fields, read only when the host's problem has them: this plugin computes silu experts without biases. */
    if (p->struct_size >= offsetof(sy_moe_problem, has_bias) + sizeof p->has_bias &&
        (p->activation != SY_MOE_ACT_SILU || p->has_bias))
        return sy_err_set(why, 0, "example-moe computes silu experts without biases, asked activation %d, has_bias %d",
                          p->activation, p->has_bias);
    return 1;
}

static int prepare(void *inst, const sy_moe_problem *p, sy_err *err)
{
    moe *m = inst;
    if (!supports(inst, p, err))
        return SY_ERR_UNSUPPORTED;
    release(m);
    m->p = *p;
    m->n_workers = m->host->n_workers(m->host->ctx);
    if (m->n_workers < 1)
        m->n_workers = 1;
    m->layers = m->host->alloc(m->host->ctx, sizeof(layer) * (size_t)p->n_layers, sizeof(void *));
    m->scratch = m->host->alloc(m->host->ctx, sizeof(float) * 2 * (size_t)p->inter * (size_t)m->n_workers, 64);
    if (!m->layers || !m->scratch) {
        release(m);
        return sy_err_set(err, SY_ERR_NOMEM, "example-moe: out of memory for %d layers", p->n_layers);
    }
    memset(m->layers, 0, sizeof(layer) * (size_t)p->n_layers);
    return SY_OK;
}

static int prepare_layer(void *inst, int32_t l, const sy_tensor *gate, const sy_tensor *up, const sy_tensor *down,
                         const sy_tensor *bias, sy_err *err)
{
    moe *m = inst;
    if (!m->layers || l < 0 || l >= m->p.n_layers)
        return sy_err_set(err, SY_ERR_INVALID, "example-moe: prepare_layer %d, expected 0..%d after prepare", (int)l,
                          m->p.n_layers - 1);
    if (bias && bias->dtype != SY_DTYPE_F32)
        return sy_err_set(err, SY_ERR_UNSUPPORTED, "example-moe: score bias in %s, expected F32",
                          sy_dtype_name(bias->dtype));
    m->layers[l] = (layer){gate, up, down, bias};
    return SY_OK;
}

/* Element i of a weight row, widened to float. */
static float weight_at(const sy_tensor *w, size_t i)
{
    uint32_t u;
    float f;
    switch (w->dtype) {
    case SY_DTYPE_F32: return ((const float *)w->data)[i];
    case SY_DTYPE_BF16:
        u = (uint32_t)((const uint16_t *)w->data)[i] << 16;
        memcpy(&f, &u, sizeof f);
        return f;
    default: { /* F16 */
        uint16_t h = ((const uint16_t *)w->data)[i];
        uint32_t e = (h >> 10) & 0x1f, mant = h & 0x3ff;
        float v = e == 0 ? ldexpf((float)mant, -24) : e == 31 ? INFINITY : ldexpf((float)(mant | 0x400), (int)e - 25);
        return (h & 0x8000) ? -v : v;
    }
    }
}

/* Row r of w . x, over n columns. */
static float dot_row(const sy_tensor *w, int64_t r, const float *x, int64_t n)
{
    float s = 0;
    for (int64_t c = 0; c < n; c++)
        s += weight_at(w, (size_t)(r * n + c)) * x[c];
    return s;
}

/* The experts a token goes to, and their weights. */
static void route(const sy_moe_problem *p, const float *logits, const sy_tensor *bias, int *ids, float *w)
{
    float score[MAX_EXPERTS], sel[MAX_EXPERTS];
    float mx = -INFINITY, sum = 0;
    for (int e = 0; e < p->n_experts; e++)
        mx = logits[e] > mx ? logits[e] : mx;
    for (int e = 0; e < p->n_experts; e++) {
        score[e] = p->scoring == SY_MOE_SOFTMAX ? expf(logits[e] - mx) : 1.0f / (1.0f + expf(-logits[e]));
        sum += score[e];
    }
    for (int e = 0; e < p->n_experts; e++) {
        if (p->scoring == SY_MOE_SOFTMAX)
            score[e] /= sum;
        /* The bias steers the choice only; the weight stays the score. */
        sel[e] = score[e] + (bias ? ((const float *)bias->data)[e] : 0.0f);
    }
    float wsum = 0;
    for (int k = 0; k < p->top_k; k++) {
        int best = -1;
        for (int e = 0; e < p->n_experts; e++)
            if (sel[e] > -INFINITY && (best < 0 || sel[e] > sel[best]))
                best = e;
        ids[k] = best;
        w[k] = score[best];
        wsum += w[k];
        sel[best] = -INFINITY;
    }
    for (int k = 0; k < p->top_k; k++)
        w[k] = (p->norm_topk_prob ? w[k] / wsum : w[k]) * p->routed_scaling_factor;
}

typedef struct job {
    const moe *m;
    const layer *l;
    const float *x, *logits;
    float *out;
} job;

static void tokens(void *arg, int64_t begin, int64_t end, int worker)
{
    const job *j = arg;
    const sy_moe_problem *p = &j->m->p;
    const int64_t H = p->hidden, F = p->inter;
    float *g = j->m->scratch + (size_t)worker * 2 * (size_t)F, *u = g + F;
    for (int64_t t = begin; t < end; t++) {
        int ids[MAX_TOPK];
        float w[MAX_TOPK];
        route(p, j->logits + t * p->n_experts, j->l->bias, ids, w);
        const float *x = j->x + t * H;
        float *o = j->out + t * H;
        for (int64_t i = 0; i < H; i++)
            o[i] = 0;
        for (int k = 0; k < p->top_k; k++) {
            const int e = ids[k];
            for (int64_t f = 0; f < F; f++) {
                g[f] = dot_row(&j->l->gate[e], f, x, H);
                u[f] = dot_row(&j->l->up[e], f, x, H);
                g[f] = g[f] / (1.0f + expf(-g[f])) * u[f]; /* silu(gate) * up */
            }
            for (int64_t i = 0; i < H; i++)
                o[i] += w[k] * dot_row(&j->l->down[e], i, g, F);
        }
    }
}

static int forward(void *inst, int32_t l, const sy_tensor *x, const sy_tensor *router_logits, sy_tensor *out,
                   sy_err *err)
{
    moe *m = inst;
    if (!m->layers || l < 0 || l >= m->p.n_layers || !m->layers[l].gate)
        return sy_err_set(err, SY_ERR_INVALID, "example-moe: forward on layer %d before its prepare_layer", (int)l);
    if (x->dtype != SY_DTYPE_F32 || router_logits->dtype != SY_DTYPE_F32 || out->dtype != SY_DTYPE_F32)
        return sy_err_set(err, SY_ERR_INVALID, "example-moe: x, router_logits and out must be F32");
    if (x->shape[x->ndim - 1] != m->p.hidden || router_logits->shape[router_logits->ndim - 1] != m->p.n_experts)
        return sy_err_set(err, SY_ERR_INVALID, "example-moe: x is [.., %lld] and router_logits [.., %lld], expected "
                          "hidden %d and n_experts %d", (long long)x->shape[x->ndim - 1],
                          (long long)router_logits->shape[router_logits->ndim - 1], m->p.hidden, m->p.n_experts);
    job j = {m, &m->layers[l], x->data, router_logits->data, out->data};
    m->host->parallel_for(m->host->ctx, x->shape[0], 1, tokens, &j);
    return SY_OK;
}

/* The optional set_expert_range is left out: the host refuses [model] moe_parallel = expert with this plugin. */
static const sy_moe_ops ops = {.struct_size = sizeof(sy_moe_ops),
                               .supports = supports,
                               .prepare = prepare,
                               .prepare_layer = prepare_layer,
                               .forward = forward};

static const sy_plugin_desc desc = {
    .struct_size = sizeof(sy_plugin_desc),
    .abi_major = SY_ABI_MAJOR,
    .abi_minor = SY_ABI_MINOR,
    .kind = SY_KIND_MOE,
    .name = "example-moe",
    .version = "1.0.0",
    .device = "cpu",
    .description = "example: routed SwiGLU experts read in place from the checkpoint",
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
