/*
 * moe/cpu on gpt-oss's experts against a float64 reference written here:
 * the clamped SwiGLU (g = min(g, limit), u = clamp(u, -limit, limit),
 * (u + 1) * g * sigmoid(alpha g)), the gate/up/down biases of
 * prepare_layer_bias (added before the activation and before the routing
 * weight; down_bias NULL adds none), and MXFP4 experts (E2M1 codes, low
 * nibble first, E8M0 scales per 32, decoded longhand below), on every ISA
 * this machine runs. The limit is small against the products, so both
 * clamps bite on many elements; a wrong clamp, +1, alpha, bias, nibble
 * order or scale exponent moves the outputs by far more than the bound.
 * Also: ABI 1.0-sized problems read as silu without biases, and what moe
 * cpu cannot honour is refused naming it.
 */
#include "config.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_cpu_harness.h"

static th_plugin dev, moe;
static th_host host;
static const sy_moe_ops *ops;

enum { E = 6, TOPK = 2, H = 64, F = 96, MAXN = 40 };

typedef struct gcase {
    const char *name;
    sy_dtype wdt;    /* BF16, or FP4_E2M1 = MXFP4 */
    int act;         /* sy_moe_activation */
    int bias;        /* 0 none, 1 gate/up/down, 2 gate/up with down_bias NULL */
    float alpha, limit;
} gcase;

/* One expert matrix: MXFP4 codes and E8M0 scales, or BF16; its values in double. */
typedef struct mat {
    sy_tensor t;
    uint8_t *codes, *scales;
    uint16_t *bf;
    double *v;
} mat;

typedef struct layer {
    mat g[E], u[E], d[E];
    float gb[E][F], ub[E][F], db[E][H];
    sy_tensor tgb[E], tub[E], tdb[E];
} layer;

/* E2M1 from its definition: sign, two exponent bits (bias 1), one mantissa bit; code 1 is the subnormal 0.5. */
static double ref_e2m1(unsigned n)
{
    const int s = (n >> 3) & 1, e = (n >> 1) & 3, m = n & 1;
    const double v = e == 0 ? m * 0.5 : ldexp(1.0 + m / 2.0, e - 1);
    return s ? -v : v;
}

static void mat_make(mat *m, sy_dtype wdt, int64_t rows, int64_t cols, th_rng *r)
{
    memset(m, 0, sizeof *m);
    m->v = malloc(sizeof(double) * (size_t)(rows * cols));
    if (wdt == SY_DTYPE_FP4_E2M1) {
        m->codes = malloc((size_t)(rows * cols / 2));
        m->scales = malloc((size_t)(rows * cols / 32));
        for (int64_t i = 0; i < rows * cols / 2; i++)
            m->codes[i] = (uint8_t)th_next(r);
        for (int64_t i = 0; i < rows * cols / 32; i++) /* 2^-4 .. 2^-1: products of a few units */
            m->scales[i] = (uint8_t)th_int(r, 123, 126);
        for (int64_t j = 0; j < rows; j++)
            for (int64_t k = 0; k < cols; k++) {
                const int64_t el = j * cols + k;
                const unsigned nib = (m->codes[el / 2] >> ((el & 1) * 4)) & 15u;
                m->v[el] = ref_e2m1(nib) * ldexp(1.0, (int)m->scales[j * (cols / 32) + k / 32] - 127);
            }
        int64_t shape[2] = {rows, cols};
        sy_tensor_init(&m->t, m->codes, SY_DTYPE_FP4_E2M1, 2, shape);
        m->t.scale = m->scales;
        m->t.scale_dtype = SY_DTYPE_E8M0;
        m->t.scale_block[0] = 1;
        m->t.scale_block[1] = 32;
        m->t.global_scale = 1.0f;
        return;
    }
    m->bf = malloc(sizeof(uint16_t) * (size_t)(rows * cols));
    for (int64_t i = 0; i < rows * cols; i++) {
        m->bf[i] = th_f32_to_bf16((float)th_uniform(r, -0.6, 0.6));
        m->v[i] = th_bf16_to_f32(m->bf[i]);
    }
    m->t = sy_tensor_2d(m->bf, SY_DTYPE_BF16, rows, cols);
}

static void mat_free(mat *m)
{
    free(m->codes);
    free(m->scales);
    free(m->bf);
    free(m->v);
}

static void layer_make(layer *L, sy_dtype wdt, th_rng *r)
{
    for (int e = 0; e < E; e++) {
        mat_make(&L->g[e], wdt, F, H, r);
        mat_make(&L->u[e], wdt, F, H, r);
        mat_make(&L->d[e], wdt, H, F, r);
        for (int j = 0; j < F; j++) {
            L->gb[e][j] = (float)th_uniform(r, -1, 1);
            L->ub[e][j] = (float)th_uniform(r, -1, 1);
        }
        for (int i = 0; i < H; i++)
            L->db[e][i] = (float)th_uniform(r, -1, 1);
        int64_t nf = F, nh = H;
        sy_tensor_init(&L->tgb[e], L->gb[e], SY_DTYPE_F32, 1, &nf);
        sy_tensor_init(&L->tub[e], L->ub[e], SY_DTYPE_F32, 1, &nf);
        sy_tensor_init(&L->tdb[e], L->db[e], SY_DTYPE_F32, 1, &nh);
    }
}

static void layer_free(layer *L)
{
    for (int e = 0; e < E; e++) {
        mat_free(&L->g[e]);
        mat_free(&L->u[e]);
        mat_free(&L->d[e]);
    }
}

/* softmax over all experts, the best TOPK (ties to the lower id), renormalised: gpt-oss's softmax of the top logits. */
static void ref_route(const float *lg, int *ids, double *w)
{
    double p[E], mx = -INFINITY, s = 0;
    int used[E] = {0};
    for (int e = 0; e < E; e++)
        mx = lg[e] > mx ? lg[e] : mx;
    for (int e = 0; e < E; e++)
        s += (p[e] = exp(lg[e] - mx));
    double ws = 0;
    for (int k = 0; k < TOPK; k++) {
        int b = -1;
        for (int e = 0; e < E; e++)
            if (!used[e] && (b < 0 || p[e] > p[b]))
                b = e;
        used[b] = 1;
        ids[k] = b;
        w[k] = p[b] / s;
        ws += w[k];
    }
    for (int k = 0; k < TOPK; k++)
        w[k] /= ws;
}

/* One token in double; *clamped counts the gate and up elements a clamp changed. */
static void ref_token(const gcase *c, const layer *L, const float *x, const float *lg, double *out, long *clamped)
{
    int ids[TOPK];
    double w[TOPK], h[F];
    ref_route(lg, ids, w);
    for (int i = 0; i < H; i++)
        out[i] = 0;
    for (int k = 0; k < TOPK; k++) {
        const int e = ids[k];
        for (int j = 0; j < F; j++) {
            double g = 0, u = 0;
            for (int i = 0; i < H; i++) {
                g += L->g[e].v[j * H + i] * x[i];
                u += L->u[e].v[j * H + i] * x[i];
            }
            if (c->bias) {
                g += L->gb[e][j];
                u += L->ub[e][j];
            }
            if (c->act == SY_MOE_ACT_SWIGLU_CLAMP) {
                const double lim = c->limit;
                *clamped += (g > lim) + (u > lim || u < -lim);
                g = g > lim ? lim : g;
                u = u > lim ? lim : u < -lim ? -lim : u;
                h[j] = (u + 1.0) * g / (1.0 + exp(-(double)c->alpha * g));
            } else {
                h[j] = g / (1.0 + exp(-g)) * u;
            }
        }
        for (int i = 0; i < H; i++) {
            double y = 0;
            for (int j = 0; j < F; j++)
                y += L->d[e].v[i * F + j] * h[j];
            if (c->bias == 1)
                y += L->db[e][i];
            out[i] += w[k] * y;
        }
    }
}

static sy_moe_problem problem(const gcase *c)
{
    sy_moe_problem p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.n_layers = 2;
    p.n_experts = E;
    p.top_k = TOPK;
    p.hidden = H;
    p.inter = F;
    p.scoring = SY_MOE_SOFTMAX;
    p.norm_topk_prob = 1;
    p.routed_scaling_factor = 1.0f;
    p.weight_dtype = c->wdt;
    p.activation = c->act;
    p.swiglu_alpha = c->alpha;
    p.swiglu_limit = c->limit;
    p.has_bias = c->bias != 0;
    return p;
}

/* Each forward of 1, 7 and MAXN tokens on both layers, every output within 1e-5 of the token's largest (F32 sums). */
static void run_case(const char *isa, const gcase *c, layer *Ls)
{
    char tag[128];
    snprintf(tag, sizeof tag, "[%s %s]", isa, c->name);
    const char *kv[] = {"isa", isa, "max_tokens", "16", "tile", "builtin", NULL};
    void *inst = NULL;
    sy_err err;
    if (th_create(&moe, &host.api, kv, &inst, &err)) {
        TH_CHECK(0, "%s create: %s", tag, err.msg);
        return;
    }
    const sy_moe_problem p = problem(c);
    TH_CHECK(ops->supports(inst, &p, &err) == 1, "%s supports: %s", tag, err.msg);
    TH_CHECK(ops->prepare(inst, &p, &err) == SY_OK, "%s prepare: %s", tag, err.msg);
    for (int l = 0; l < 2; l++) {
        sy_tensor tg[E], tu[E], td[E];
        for (int e = 0; e < E; e++)
            tg[e] = Ls[l].g[e].t, tu[e] = Ls[l].u[e].t, td[e] = Ls[l].d[e].t;
        TH_CHECK(ops->prepare_layer(inst, l, tg, tu, td, NULL, &err) == SY_OK, "%s prepare_layer: %s", tag, err.msg);
        if (c->bias)
            TH_CHECK(ops->prepare_layer_bias(inst, l, Ls[l].tgb, Ls[l].tub, c->bias == 1 ? Ls[l].tdb : NULL, &err) ==
                         SY_OK,
                     "%s prepare_layer_bias: %s", tag, err.msg);
    }
    th_rng r = {0x9a7055u};
    static const int counts[] = {1, 7, MAXN};
    double worst = 0;
    long clamped = 0, elems = 0;
    for (int ci = 0; ci < 3; ci++)
        for (int l = 1; l >= 0; l--) { /* layer 1 first: a plugin that ignores `layer` fails */
            const int n = counts[ci];
            float x[MAXN * H], lg[MAXN * E], out[MAXN * H];
            double ref[H];
            for (int i = 0; i < n * H; i++)
                x[i] = (float)th_uniform(&r, -1, 1);
            for (int i = 0; i < n * E; i++)
                lg[i] = (float)th_uniform(&r, -2, 2);
            for (int i = 0; i < n * H; i++)
                out[i] = NAN;
            sy_tensor tx = sy_tensor_2d(x, SY_DTYPE_F32, n, H), tl = sy_tensor_2d(lg, SY_DTYPE_F32, n, E);
            sy_tensor to = sy_tensor_2d(out, SY_DTYPE_F32, n, H);
            TH_CHECK(ops->forward(inst, l, &tx, &tl, &to, &err) == SY_OK, "%s forward n=%d: %s", tag, n, err.msg);
            for (int t = 0; t < n; t++) {
                ref_token(c, &Ls[l], x + t * H, lg + t * E, ref, &clamped);
                elems += 2 * TOPK * F;
                double mx = 0, e = 0;
                for (int i = 0; i < H; i++) {
                    mx = fabs(ref[i]) > mx ? fabs(ref[i]) : mx;
                    const double d = fabs(out[t * H + i] - ref[i]);
                    e = d > e || isnan(d) ? d : e;
                }
                const double rel = e / (mx > 0 ? mx : 1);
                if (!(rel <= 1e-5)) {
                    TH_CHECK(0, "%s layer %d n=%d token %d: error %.3g of max |ref| %.4g (bound 1e-5)", tag, l, n, t,
                             rel, mx);
                    t = n;
                }
                worst = rel > worst ? rel : worst;
            }
        }
    if (c->act == SY_MOE_ACT_SWIGLU_CLAMP) /* the clamps must have something to do, and not everything */
        TH_CHECK(clamped > elems / 10 && clamped < elems * 9 / 10, "%s: the clamps changed %ld of %ld elements; "
                 "expected between 10%% and 90%%", tag, clamped, elems);
    printf("  %-28s worst error %.2e of max |ref|%s\n", tag, worst,
           c->act == SY_MOE_ACT_SWIGLU_CLAMP ? "" : " (silu)");
    moe.desc->destroy(inst);
}

/* ABI 1.0's problem ends before activation: whatever follows in memory is not read. */
static void check_old_problem(const layer *L)
{
    const gcase silu = {"silu", SY_DTYPE_BF16, SY_MOE_ACT_SILU, 0, 0, 0};
    sy_moe_problem p = problem(&silu);
    p.struct_size = (uint32_t)offsetof(sy_moe_problem, activation);
    p.activation = SY_MOE_ACT_SWIGLU_CLAMP; /* garbage beyond struct_size */
    p.has_bias = 1;
    const char *kv[] = {"tile", "builtin", NULL};
    void *inst = NULL;
    sy_err err;
    if (th_create(&moe, &host.api, kv, &inst, &err)) {
        TH_CHECK(0, "create: %s", err.msg);
        return;
    }
    TH_CHECK(ops->prepare(inst, &p, &err) == SY_OK, "ABI 1.0 problem: prepare: %s", err.msg);
    sy_tensor tg[E], tu[E], td[E];
    for (int e = 0; e < E; e++)
        tg[e] = L->g[e].t, tu[e] = L->u[e].t, td[e] = L->d[e].t;
    TH_CHECK(ops->prepare_layer(inst, 0, tg, tu, td, NULL, &err) == SY_OK, "ABI 1.0 prepare_layer: %s", err.msg);
    float x[H], lg[E], out[H];
    double ref[H];
    long cl = 0;
    th_rng r = {41};
    for (int i = 0; i < H; i++)
        x[i] = (float)th_uniform(&r, -1, 1);
    for (int i = 0; i < E; i++)
        lg[i] = (float)th_uniform(&r, -2, 2);
    sy_tensor tx = sy_tensor_2d(x, SY_DTYPE_F32, 1, H), tl = sy_tensor_2d(lg, SY_DTYPE_F32, 1, E);
    sy_tensor to = sy_tensor_2d(out, SY_DTYPE_F32, 1, H);
    TH_CHECK(ops->forward(inst, 0, &tx, &tl, &to, &err) == SY_OK, "ABI 1.0 forward (no biases expected): %s",
             err.msg);
    ref_token(&silu, L, x, lg, ref, &cl);
    double e = 0, mx = 0;
    for (int i = 0; i < H; i++) {
        e = fabs(out[i] - ref[i]) > e ? fabs(out[i] - ref[i]) : e;
        mx = fabs(ref[i]) > mx ? fabs(ref[i]) : mx;
    }
    TH_CHECK(e <= 1e-5 * mx, "ABI 1.0 problem: error %.3g of %.3g; expected silu without biases", e, mx);
    moe.desc->destroy(inst);
}

static void check_refusals(const layer *L)
{
    const char *kv[] = {"tile", "builtin", NULL}, *kvq[] = {"activations", "nvfp4", "tile", "builtin", NULL};
    void *inst = NULL;
    sy_err err;
    if (th_create(&moe, &host.api, kv, &inst, &err)) {
        TH_CHECK(0, "create: %s", err.msg);
        return;
    }
    const gcase gc = {"g", SY_DTYPE_FP4_E2M1, SY_MOE_ACT_SWIGLU_CLAMP, 1, 1.702f, 7.0f};
    sy_moe_problem p = problem(&gc);
    p.activation = 7;
    memset(&err, 0, sizeof err);
    TH_CHECK(ops->supports(inst, &p, &err) == 0 && strstr(err.msg, "activation 7"),
             "unknown activation 7 not refused by name: '%s'", err.msg);
    p = problem(&gc);
    p.swiglu_alpha = 0.0f;
    TH_CHECK(ops->supports(inst, &p, &err) == 0 && strstr(err.msg, "swiglu_alpha"), "alpha 0 accepted: '%s'",
             err.msg);
    p = problem(&gc);
    TH_CHECK(ops->prepare(inst, &p, &err) == SY_OK, "prepare: %s", err.msg);
    sy_tensor tg[E], tu[E], td[E];
    for (int e = 0; e < E; e++)
        tg[e] = L->g[e].t, tu[e] = L->u[e].t, td[e] = L->d[e].t;
    TH_CHECK(ops->prepare_layer(inst, 0, tg, tu, td, NULL, &err) == SY_OK, "prepare_layer: %s", err.msg);
    float x[H] = {0}, lg[E] = {0}, out[H];
    sy_tensor tx = sy_tensor_2d(x, SY_DTYPE_F32, 1, H), tl = sy_tensor_2d(lg, SY_DTYPE_F32, 1, E);
    sy_tensor to = sy_tensor_2d(out, SY_DTYPE_F32, 1, H);
    TH_CHECK(ops->forward(inst, 0, &tx, &tl, &to, &err) != SY_OK && strstr(err.msg, "prepare_layer_bias"),
             "forward with has_bias but no biases not refused: '%s'", err.msg);
    sy_tensor short_b[E];
    memcpy(short_b, L->tgb, sizeof short_b);
    short_b[3].shape[0] = F - 1;
    TH_CHECK(ops->prepare_layer_bias(inst, 0, short_b, L->tub, L->tdb, &err) != SY_OK && strstr(err.msg, "expert 3") &&
                 strstr(err.msg, "gate"),
             "a [%d] gate bias not refused by expert: '%s'", F - 1, err.msg);
    TH_CHECK(ops->prepare_layer_bias(inst, 1, L->tgb, L->tub, L->tdb, &err) != SY_OK, "biases before a layer's "
             "experts accepted");
    moe.desc->destroy(inst);
    /* MXFP4 experts with the NVFP4 activation quantiser: refused, naming the key. */
    if (th_create(&moe, &host.api, kvq, &inst, &err)) {
        TH_CHECK(0, "create: %s", err.msg);
        return;
    }
    TH_CHECK(ops->prepare(inst, &p, &err) == SY_OK, "prepare: %s", err.msg);
    TH_CHECK(ops->prepare_layer(inst, 0, tg, tu, td, NULL, &err) == SY_ERR_UNSUPPORTED &&
                 strstr(err.msg, "activations"),
             "MXFP4 experts with activations = nvfp4 not refused: '%s'", err.msg);
    moe.desc->destroy(inst);
}

int main(void)
{
    th_load("sy-device-cpu", &dev);
    th_load("sy-moe-cpu", &moe);
    th_host_init(&host);
    ops = moe.desc->ops;
    TH_CHECK(ops->struct_size >= offsetof(sy_moe_ops, prepare_layer_bias) + sizeof ops->prepare_layer_bias &&
                 ops->prepare_layer_bias,
             "moe cpu has no prepare_layer_bias");
    const char *kvd[] = {"threads", "3", NULL};
    void *d = NULL;
    sy_err why;
    if (th_create(&dev, &host.api, kvd, &d, &why)) {
        fprintf(stderr, "FAIL: device create: %s\n", why.msg);
        return 1;
    }
    th_host_set_pool(&host, dev.desc, d);

    static const gcase cases[] = {
        /* limit 2 against products of a few units: both clamps bite (gpt-oss's 7 would rarely) */
        {"mxfp4 swiglu-clamp biases", SY_DTYPE_FP4_E2M1, SY_MOE_ACT_SWIGLU_CLAMP, 1, 1.702f, 2.0f},
        {"mxfp4 silu", SY_DTYPE_FP4_E2M1, SY_MOE_ACT_SILU, 0, 0, 0},
        {"bf16 swiglu-clamp no down bias", SY_DTYPE_BF16, SY_MOE_ACT_SWIGLU_CLAMP, 2, 1.702f, 1.5f},
        {"bf16 silu biases", SY_DTYPE_BF16, SY_MOE_ACT_SILU, 1, 0, 0},
    };
    layer *mx = malloc(2 * sizeof(layer)), *bf = malloc(2 * sizeof(layer));
    th_rng r = {0x6b7055u};
    for (int l = 0; l < 2; l++) {
        layer_make(&mx[l], SY_DTYPE_FP4_E2M1, &r);
        layer_make(&bf[l], SY_DTYPE_BF16, &r);
    }
    check_refusals(&mx[0]);
    check_old_problem(&bf[0]);
    const char *isas[3];
    const int n_isa = th_isas(&moe, &host.api, isas, 3);
    for (int i = 0; i < n_isa; i++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
            run_case(isas[i], &cases[c], cases[c].wdt == SY_DTYPE_FP4_E2M1 ? mx : bf);
    for (int l = 0; l < 2; l++) {
        layer_free(&mx[l]);
        layer_free(&bf[l]);
    }
    free(mx);
    free(bf);
    th_host_clear_pool(&host);
    dev.desc->destroy(d);
    th_unload(&moe);
    th_unload(&dev);
    return th_done("test_moe_gptoss");
}
