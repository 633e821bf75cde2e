/*
 * moe/cpu against a reference written here in double: routing (softmax or
 * sigmoid, selection bias, grouped top-k, norm_topk_prob,
 * routed_scaling_factor; ties to the lower expert id, exercised with
 * quantised logits that tie often) and the experts
 * (down(silu(gate x) * up x)). Every ISA, F32/F16/BF16 experts, token
 * counts 1..150 with passes of max_tokens = 64 and 256.
 *
 * Bound per output element: 2 (max(H, F)/8 + 20) 2^-24 M, with M the
 * first-order error magnitude of the two chained F32 GEMMs (sums of
 * absolute values; the blocked-summation bound of each dot product). Also: a token alone equals the same token in a
 * batch, bitwise; bad shapes and problems are refused.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_cpu_harness.h"

#define U (1.0 / 16777216.0)

static th_plugin dev, moe;
static th_host host;
static void *dev_inst; /* the device whose pool runs the forwards */
static const sy_moe_ops *ops;

typedef struct model {
    sy_moe_problem p;
    sy_tensor *gate, *up, *down; /* per expert, layer 0 and 1 share none */
    void **bufs;
    int n_bufs;
    float bias[64];
    int has_bias;
    int quantise; /* logits in steps of 0.5: many exact ties */
} model;

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return p;
}

static void *rand_matrix(th_rng *r, sy_dtype dt, int64_t rows, int64_t cols, double amp, sy_tensor *t)
{
    void *b = xmalloc((size_t)(rows * cols) * (dt == SY_DTYPE_F32 ? 4 : 2));
    for (int64_t i = 0; i < rows * cols; i++)
        th_put(b, dt, i, (float)th_uniform(r, -amp, amp));
    *t = sy_tensor_2d(b, dt, rows, cols);
    return b;
}

static void model_init(model *m, th_rng *r)
{
    const sy_moe_problem *p = &m->p;
    const int E = p->n_experts;
    m->gate = calloc((size_t)E * 2, sizeof(sy_tensor));
    m->up = calloc((size_t)E * 2, sizeof(sy_tensor));
    m->down = calloc((size_t)E * 2, sizeof(sy_tensor));
    m->bufs = calloc((size_t)E * 6, sizeof(void *));
    m->n_bufs = 0;
    for (int e = 0; e < 2 * E; e++) {
        m->bufs[m->n_bufs++] = rand_matrix(r, p->weight_dtype, p->inter, p->hidden, 2.0 / sqrt(p->hidden), &m->gate[e]);
        m->bufs[m->n_bufs++] = rand_matrix(r, p->weight_dtype, p->inter, p->hidden, 2.0 / sqrt(p->hidden), &m->up[e]);
        m->bufs[m->n_bufs++] = rand_matrix(r, p->weight_dtype, p->hidden, p->inter, 2.0 / sqrt(p->inter), &m->down[e]);
    }
    for (int e = 0; e < E; e++)
        m->bias[e] = m->quantise ? (float)(th_int(r, 0, 2) * 0.25) : (float)th_uniform(r, -0.3, 0.3);
}

static void model_free(model *m)
{
    for (int i = 0; i < m->n_bufs; i++)
        free(m->bufs[i]);
    free(m->bufs);
    free(m->gate);
    free(m->up);
    free(m->down);
}

/* ------------------------------------------------------------ reference */

static int best(const double *v, const int *ok, int n)
{
    int b = -1;
    for (int i = 0; i < n; i++)
        if (ok[i] && (b < 0 || v[i] > v[b]))
            b = i;
    return b;
}

static void ref_route(const model *m, const float *logits, int *ids, double *w)
{
    const sy_moe_problem *p = &m->p;
    const int E = p->n_experts;
    double score[64], sel[64];
    int ok[64];
    if (p->scoring == SY_MOE_SOFTMAX) {
        double mx = -INFINITY, sum = 0;
        for (int e = 0; e < E; e++)
            mx = fmax(mx, logits[e]);
        for (int e = 0; e < E; e++)
            sum += score[e] = exp(logits[e] - mx);
        for (int e = 0; e < E; e++)
            score[e] /= sum;
    } else {
        for (int e = 0; e < E; e++)
            score[e] = 1.0 / (1.0 + exp(-(double)logits[e]));
    }
    for (int e = 0; e < E; e++) {
        sel[e] = score[e] + (m->has_bias ? (double)m->bias[e] : 0.0);
        ok[e] = 1;
    }
    if (p->n_group > 1) {
        const int per = E / p->n_group;
        double gs[64];
        int gok[64];
        for (int g = 0; g < p->n_group; g++) {
            /* sorted copy, descending */
            double v[64];
            for (int i = 0; i < per; i++)
                v[i] = sel[g * per + i];
            for (int i = 0; i < per; i++)
                for (int j = i + 1; j < per; j++)
                    if (v[j] > v[i]) {
                        const double t = v[i];
                        v[i] = v[j];
                        v[j] = t;
                    }
            gs[g] = p->scoring == SY_MOE_SIGMOID && per >= 2 ? v[0] + v[1] : v[0];
            gok[g] = 1;
        }
        int keep[64] = {0};
        for (int i = 0; i < p->topk_group; i++) {
            const int g = best(gs, gok, p->n_group);
            keep[g] = 1;
            gok[g] = 0;
        }
        for (int e = 0; e < E; e++)
            ok[e] = keep[e / per];
    }
    double sum = 0;
    for (int k = 0; k < p->top_k; k++) {
        ids[k] = best(sel, ok, E);
        ok[ids[k]] = 0;
        w[k] = score[ids[k]];
        sum += w[k];
    }
    for (int k = 0; k < p->top_k; k++) {
        if (p->norm_topk_prob)
            w[k] /= sum + (p->scoring == SY_MOE_SIGMOID ? 1e-20 : 0.0);
        w[k] *= p->routed_scaling_factor;
    }
}

/* out[hidden] in double, and the magnitude M for the bound. */
static void ref_token(const model *m, int layer, const float *x, const float *logits, double *out, double *mag)
{
    const sy_moe_problem *p = &m->p;
    const int H = p->hidden, F = p->inter, E = p->n_experts;
    int ids[64];
    double w[64], h[512], mh[512];
    ref_route(m, logits, ids, w);
    for (int i = 0; i < H; i++)
        out[i] = mag[i] = 0;
    for (int k = 0; k < p->top_k; k++) {
        const int e = ids[k] + layer * E;
        for (int j = 0; j < F; j++) {
            double g = 0, u = 0, mg = 0, mu = 0;
            for (int i = 0; i < H; i++) {
                const double wg = th_get(m->gate[e].data, p->weight_dtype, (int64_t)j * H + i);
                const double wu = th_get(m->up[e].data, p->weight_dtype, (int64_t)j * H + i);
                g += wg * x[i];
                u += wu * x[i];
                mg += fabs(wg * x[i]);
                mu += fabs(wu * x[i]);
            }
            const double silu = g / (1.0 + exp(-g));
            h[j] = silu * u;
            /* first-order error of h from the errors of g (~mg) and u (~mu), plus h itself */
            mh[j] = 1.1 * mg * fabs(u) + mu * fabs(silu) + fabs(h[j]);
        }
        for (int i = 0; i < H; i++) {
            double y = 0, my = 0;
            for (int j = 0; j < F; j++) {
                const double wd = th_get(m->down[e].data, p->weight_dtype, (int64_t)i * F + j);
                y += wd * h[j];
                my += fabs(wd) * mh[j];
            }
            out[i] += w[k] * y;
            mag[i] += fabs(w[k]) * my;
        }
    }
}

/* ----------------------------------------------------------------- tests */

/*
 * matmul "bf16" rounds the experts' inputs to BF16: no longer within an F32
 * bound of the reference, so checked by the relative RMS over all outputs
 * (each input loses up to 2^-9 of itself, twice), still bitwise batch-invariant.
 */
static void run_case(const char *isa, model *m, const char *max_tokens, const char *matmul, th_rng *r,
                     const char *tag)
{
    const sy_moe_problem *p = &m->p;
    const char *kv[] = {"isa", isa, "max_tokens", max_tokens, "matmul", matmul, NULL};
    const int rounded = strcmp(matmul, "bf16") == 0;
    double sq_err = 0, sq_ref = 0;
    void *inst = NULL;
    sy_err err;
    if (th_create(&moe, &host.api, kv, &inst, &err)) {
        TH_CHECK(0, "%s create: %s", tag, err.msg);
        return;
    }
    TH_CHECK(ops->supports(inst, p, &err) == 1, "%s supports: %s", tag, err.msg);
    TH_CHECK(ops->prepare(inst, p, &err) == SY_OK, "%s prepare: %s", tag, err.msg);
    const int E = p->n_experts, H = p->hidden;
    float bias_f[64];
    memcpy(bias_f, m->bias, sizeof bias_f);
    const int64_t nb = E;
    sy_tensor tb;
    sy_tensor_init(&tb, bias_f, SY_DTYPE_F32, 1, &nb);
    for (int layer = 0; layer < 2; layer++)
        TH_CHECK(ops->prepare_layer(inst, layer, m->gate + layer * E, m->up + layer * E, m->down + layer * E,
                                    m->has_bias ? &tb : NULL, &err) == SY_OK,
                 "%s prepare_layer: %s", tag, err.msg);
    const int64_t counts[] = {1, 5, 33, 150};
    double worst = 0;
    for (size_t c = 0; c < 4; c++)
        for (int layer = 0; layer < 2; layer++) {
            const int64_t n = counts[c];
            float *x = xmalloc(sizeof(float) * (size_t)(n * H)), *lg = xmalloc(sizeof(float) * (size_t)(n * E));
            float *out = xmalloc(sizeof(float) * (size_t)(n * H));
            double *ro = xmalloc(sizeof(double) * (size_t)H), *mag = xmalloc(sizeof(double) * (size_t)H);
            for (int64_t i = 0; i < n * H; i++)
                x[i] = (float)th_uniform(r, -1, 1);
            for (int64_t i = 0; i < n * E; i++)
                lg[i] = m->quantise ? (float)(th_int(r, -4, 4) * 0.5) : (float)th_uniform(r, -2, 2);
            for (int64_t i = 0; i < n * H; i++)
                out[i] = NAN;
            sy_tensor tx = sy_tensor_2d(x, SY_DTYPE_F32, n, H), tl = sy_tensor_2d(lg, SY_DTYPE_F32, n, E);
            sy_tensor to = sy_tensor_2d(out, SY_DTYPE_F32, n, H);
            TH_CHECK(ops->forward(inst, layer, &tx, &tl, &to, &err) == SY_OK, "%s forward n=%lld: %s", tag,
                     (long long)n, err.msg);
            for (int64_t t = 0; t < n; t++) {
                ref_token(m, layer, x + t * H, lg + t * E, ro, mag);
                for (int i = 0; i < H && rounded; i++) {
                    sq_err += (out[t * H + i] - ro[i]) * (out[t * H + i] - ro[i]);
                    sq_ref += ro[i] * ro[i];
                }
                for (int i = 0; i < H && !rounded; i++) {
                    const double bound = 2.0 * ((double)(H > p->inter ? H : p->inter) / 8 + 20) * U * mag[i] + 1e-30;
                    const double e = fabs(out[t * H + i] - ro[i]);
                    if (!(e <= bound)) {
                        TH_CHECK(0, "%s layer %d n=%lld token %lld out[%d] = %.9g, ref %.9g (err %.3g > %.3g)", tag,
                                 layer, (long long)n, (long long)t, i, (double)out[t * H + i], ro[i], e, bound);
                        t = n;
                        break;
                    }
                    worst = e / bound > worst ? e / bound : worst;
                }
            }
            if (n > 1) { /* a token alone: bitwise what it got in the batch */
                const int64_t t = n / 2;
                float one[512];
                sy_tensor x1 = sy_tensor_2d(x + t * H, SY_DTYPE_F32, 1, H), l1 = sy_tensor_2d(lg + t * E, SY_DTYPE_F32, 1, E);
                sy_tensor o1 = sy_tensor_2d(one, SY_DTYPE_F32, 1, H);
                TH_CHECK(ops->forward(inst, layer, &x1, &l1, &o1, &err) == SY_OK, "%s: %s", tag, err.msg);
                TH_CHECK(memcmp(one, out + t * H, sizeof(float) * (size_t)H) == 0,
                         "%s n=%lld: token %lld alone differs from the batch", tag, (long long)n, (long long)t);
            }
            free(x);
            free(lg);
            free(out);
            free(ro);
            free(mag);
        }
    if (rounded) {
        const double rel = sqrt(sq_err / (sq_ref + 1e-300));
        TH_CHECK(rel < 1e-2, "%s matmul=bf16: relative RMS error %.3g, expected < 1e-2", tag, rel);
        printf("  %s max_tokens %s matmul=bf16: relative RMS error %.2e\n", tag, max_tokens, rel);
    } else
        printf("  %s max_tokens %s: worst error %.3f of the bound\n", tag, max_tokens, worst);
    moe.desc->destroy(inst);
}

static sy_moe_problem problem(int E, int K, int H, int F, int scoring, int norm, float scale, int ng, int tg,
                              sy_dtype dt)
{
    sy_moe_problem p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.n_layers = 2;
    p.n_experts = E;
    p.top_k = K;
    p.hidden = H;
    p.inter = F;
    p.scoring = scoring;
    p.norm_topk_prob = norm;
    p.routed_scaling_factor = scale;
    p.n_group = ng;
    p.topk_group = tg;
    p.weight_dtype = dt;
    return p;
}

static void check_refusals(void)
{
    void *inst = NULL;
    sy_err err;
    if (th_create(&moe, &host.api, NULL, &inst, &err)) {
        TH_CHECK(0, "create: %s", err.msg);
        return;
    }
    sy_moe_problem p = problem(4, 5, 8, 8, SY_MOE_SOFTMAX, 1, 1, 0, 0, SY_DTYPE_F32);
    TH_CHECK(ops->supports(inst, &p, &err) == 0 && strstr(err.msg, "top_k"), "top_k > n_experts accepted");
    p = problem(6, 2, 8, 8, SY_MOE_SIGMOID, 1, 1, 4, 2, SY_DTYPE_F32);
    TH_CHECK(ops->supports(inst, &p, &err) == 0 && strstr(err.msg, "n_group"), "4 groups of 6 experts accepted");
    p = problem(4, 2, 8, 8, SY_MOE_SOFTMAX, 1, 0, 0, 0, SY_DTYPE_F32);
    TH_CHECK(ops->supports(inst, &p, &err) == 0 && strstr(err.msg, "routed_scaling_factor"),
             "routed_scaling_factor 0 accepted");
    p = problem(4, 2, 8, 8, SY_MOE_SOFTMAX, 1, 1, 0, 0, SY_DTYPE_I32);
    TH_CHECK(ops->supports(inst, &p, &err) == 0 && strstr(err.msg, "I32"), "I32 experts accepted");
    /* FP8 and NVFP4 experts are read in their own bytes (sykquant.h; tests/quant/). */
    p = problem(4, 2, 8, 8, SY_MOE_SOFTMAX, 1, 1, 0, 0, SY_DTYPE_FP8_E4M3);
    TH_CHECK(ops->supports(inst, &p, &err) == 1, "FP8 experts refused: %s", err.msg);
    p = problem(4, 2, 8, 8, SY_MOE_SOFTMAX, 1, 1, 0, 0, SY_DTYPE_FP4_E2M1);
    TH_CHECK(ops->supports(inst, &p, &err) == 1, "NVFP4 experts refused: %s", err.msg);
    p = problem(2, 1, 8, 6, SY_MOE_SOFTMAX, 1, 1, 0, 0, SY_DTYPE_F32);
    TH_CHECK(ops->prepare(inst, &p, &err) == SY_OK, "prepare: %s", err.msg);
    float w[2][48], d[2][48], x[8], lg[2], out[8];
    memset(w, 0, sizeof w);
    memset(d, 0, sizeof d);
    sy_tensor g[2] = {sy_tensor_2d(w[0], SY_DTYPE_F32, 6, 8), sy_tensor_2d(w[1], SY_DTYPE_F32, 6, 8)};
    sy_tensor dn[2] = {sy_tensor_2d(d[0], SY_DTYPE_F32, 8, 6), sy_tensor_2d(d[1], SY_DTYPE_F32, 6, 8)};
    TH_CHECK(ops->prepare_layer(inst, 0, g, g, dn, NULL, &err) == SY_ERR_INVALID && strstr(err.msg, "expert 1 down"),
             "a [6, 8] down projection accepted (\"%s\")", err.msg);
    sy_tensor tx = sy_tensor_2d(x, SY_DTYPE_F32, 1, 8), tl = sy_tensor_2d(lg, SY_DTYPE_F32, 1, 2);
    sy_tensor to = sy_tensor_2d(out, SY_DTYPE_F32, 1, 8);
    TH_CHECK(ops->forward(inst, 0, &tx, &tl, &to, &err) == SY_ERR_INVALID, "forward before prepare_layer accepted");
    dn[1] = sy_tensor_2d(d[1], SY_DTYPE_F32, 8, 6);
    TH_CHECK(ops->prepare_layer(inst, 0, g, g, dn, NULL, &err) == SY_OK, "prepare_layer: %s", err.msg);
    sy_tensor tl3 = sy_tensor_2d(lg, SY_DTYPE_F32, 1, 1);
    TH_CHECK(ops->forward(inst, 0, &tx, &tl3, &to, &err) == SY_ERR_INVALID && strstr(err.msg, "router_logits"),
             "router_logits of 1 expert accepted");
    TH_CHECK(ops->forward(inst, 2, &tx, &tl, &to, &err) == SY_ERR_INVALID, "layer 2 accepted");
    moe.desc->destroy(inst);
}

/*
 * Tiles (the `tile` key, as a tuning table entry gives them) change the loop
 * order and the split over workers, never the arithmetic: every tile gives
 * the built-in tiles' bits, for passes of several sizes, in both matmul
 * modes. This is what makes a tuning table safe to ship. A tile too big for
 * the L2 is refused at prepare with its numbers.
 */
static void check_tiles(const char *isa)
{
    model m;
    memset(&m, 0, sizeof m);
    m.p = problem(6, 2, 64, 200, SY_MOE_SOFTMAX, 1, 1.0f, 0, 0, SY_DTYPE_BF16);
    th_rng r = {0x7113u};
    model_init(&m, &r);
    const int E = m.p.n_experts, H = m.p.hidden;
    const int64_t n = 150;
    float *x = xmalloc(sizeof(float) * (size_t)(n * H)), *lg = xmalloc(sizeof(float) * (size_t)(n * E));
    float *ref = xmalloc(sizeof(float) * (size_t)(n * H)), *out = xmalloc(sizeof(float) * (size_t)(n * H));
    for (int64_t i = 0; i < n * H; i++)
        x[i] = (float)th_uniform(&r, -1, 1);
    for (int64_t i = 0; i < n * E; i++)
        lg[i] = (float)th_uniform(&r, -2, 2);
    /* 1, 5, 12 and 150 tokens per pass (max_tokens), the last with ~50 rows per expert. */
    static const char *const tiles[] = {"builtin", "12,256,0", "1,4,0", "6,16,1", "5,8,0", "48,200,0", "12,0,1"};
    static const char *const passes[] = {"1", "5", "12", "150"};
    for (int mm = 0; mm < 2; mm++)
        for (size_t pi = 0; pi < sizeof passes / sizeof passes[0]; pi++)
            for (size_t ti = 0; ti < sizeof tiles / sizeof tiles[0]; ti++) {
                const char *kv[] = {"isa", isa, "max_tokens", passes[pi], "matmul", mm ? "bf16" : "f32",
                                    "tile", tiles[ti], NULL};
                void *inst = NULL;
                sy_err err;
                if (th_create(&moe, &host.api, kv, &inst, &err)) {
                    TH_CHECK(0, "tile %s create: %s", tiles[ti], err.msg);
                    continue;
                }
                int ok = ops->prepare(inst, &m.p, &err) == SY_OK;
                TH_CHECK(ok, "tile %s prepare: %s", tiles[ti], err.msg);
                ok = ok && ops->prepare_layer(inst, 0, m.gate, m.up, m.down, NULL, &err) == SY_OK;
                sy_tensor tx = sy_tensor_2d(x, SY_DTYPE_F32, n, H), tl = sy_tensor_2d(lg, SY_DTYPE_F32, n, E);
                sy_tensor to = sy_tensor_2d(ti == 0 ? ref : out, SY_DTYPE_F32, n, H);
                ok = ok && ops->forward(inst, 0, &tx, &tl, &to, &err) == SY_OK;
                TH_CHECK(ok, "[%s] tile %s max_tokens %s: %s", isa, tiles[ti], passes[pi], err.msg);
                if (ok && ti > 0)
                    TH_CHECK(memcmp(ref, out, sizeof(float) * (size_t)(n * H)) == 0,
                             "[%s] tile %s, passes of %s tokens, matmul %s: output differs from the built-in tiles'",
                             isa, tiles[ti], passes[pi], mm ? "bf16" : "f32");
                moe.desc->destroy(inst);
            }
    /* Too big for any L2 (2^20 columns x 64 x 2 B = 128 MiB): refused at prepare, with the numbers. */
    const char *kv[] = {"isa", isa, "tile", "4,1048576,0", NULL};
    void *inst = NULL;
    sy_err err;
    if (th_create(&moe, &host.api, kv, &inst, &err) == SY_OK) {
        TH_CHECK(ops->prepare(inst, &m.p, &err) == SY_ERR_UNSUPPORTED &&
                     strstr(err.msg, "tile = 4,1048576,0 does not fit this device: n_block 1048576 x K") &&
                     strstr(err.msg, "exceeds the L2 per core"),
                 "[%s] a tile bigger than the L2 was not refused with its numbers (\"%s\")", isa, err.msg);
        moe.desc->destroy(inst);
    } else
        TH_CHECK(0, "create: %s", err.msg);
    free(x);
    free(lg);
    free(ref);
    free(out);
    model_free(&m);
}

/*
 * Skewed routing, as real routers give it: every token picks expert 0 and
 * all but one also expert 1, that one token expert 2, and experts 3 and 4
 * none. The forward cuts the heavy experts' columns into many items (widths
 * that do not divide 200 inter or 70 hidden columns, so each ends on a
 * narrower item) and the light one into one; every output is checked
 * against the reference, and the cut for 3 workers must give the bits of
 * the cut for one (the pool cleared: a serial forward) and of passes of 64.
 */
static void check_skew(const char *isa)
{
    model m;
    memset(&m, 0, sizeof m);
    m.p = problem(5, 2, 70, 200, SY_MOE_SOFTMAX, 1, 1.0f, 0, 0, SY_DTYPE_BF16);
    th_rng r = {0x5e3a1u};
    model_init(&m, &r);
    const int E = m.p.n_experts, H = m.p.hidden;
    const int64_t n = 150, lone = 77;
    float *x = xmalloc(sizeof(float) * (size_t)(n * H)), *lg = xmalloc(sizeof(float) * (size_t)(n * E));
    float *out[3];
    for (int i = 0; i < 3; i++)
        out[i] = xmalloc(sizeof(float) * (size_t)(n * H));
    for (int64_t i = 0; i < n * H; i++)
        x[i] = (float)th_uniform(&r, -1, 1);
    for (int64_t t = 0; t < n; t++) {
        lg[t * E + 0] = 8.0f + (float)th_uniform(&r, 0, 1);
        lg[t * E + 1] = 4.0f + (float)th_uniform(&r, 0, 1);
        lg[t * E + 2] = t == lone ? 12.0f : (float)th_uniform(&r, -1, 1);
        lg[t * E + 3] = (float)th_uniform(&r, -2, 0);
        lg[t * E + 4] = (float)th_uniform(&r, -2, 0);
    }
    static const char *const passes[] = {"256", "256", "64"}; /* pooled, serial, pooled in 3 passes */
    for (int run = 0; run < 3; run++) {
        const char *kv[] = {"isa", isa, "max_tokens", passes[run], "matmul", "f32", NULL};
        void *inst = NULL;
        sy_err err;
        if (th_create(&moe, &host.api, kv, &inst, &err)) {
            TH_CHECK(0, "[%s] skew create: %s", isa, err.msg);
            continue;
        }
        int ok = ops->prepare(inst, &m.p, &err) == SY_OK &&
                 ops->prepare_layer(inst, 0, m.gate, m.up, m.down, NULL, &err) == SY_OK;
        if (run == 1)
            th_host_clear_pool(&host);
        sy_tensor tx = sy_tensor_2d(x, SY_DTYPE_F32, n, H), tl = sy_tensor_2d(lg, SY_DTYPE_F32, n, E);
        sy_tensor to = sy_tensor_2d(out[run], SY_DTYPE_F32, n, H);
        for (int64_t i = 0; i < n * H; i++)
            out[run][i] = NAN;
        ok = ok && ops->forward(inst, 0, &tx, &tl, &to, &err) == SY_OK;
        if (run == 1)
            th_host_set_pool(&host, dev.desc, dev_inst);
        TH_CHECK(ok, "[%s] skew run %d: %s", isa, run, err.msg);
        if (ok && run == 0) {
            double ro[512], mag[512], worst = 0;
            for (int64_t t = 0; t < n; t++) {
                ref_token(&m, 0, x + t * H, lg + t * E, ro, mag);
                for (int i = 0; i < H; i++) {
                    const double bound = 2.0 * ((double)m.p.inter / 8 + 20) * U * mag[i] + 1e-30;
                    const double e = fabs(out[0][t * H + i] - ro[i]);
                    if (!(e <= bound)) {
                        TH_CHECK(0, "[%s] skew token %lld out[%d] = %.9g, ref %.9g (err %.3g > %.3g)", isa,
                                 (long long)t, i, (double)out[0][t * H + i], ro[i], e, bound);
                        t = n;
                        break;
                    }
                    worst = e / bound > worst ? e / bound : worst;
                }
            }
            printf("  [%s] skewed routing (150/149/1/0/0 tokens): worst error %.3f of the bound\n", isa, worst);
            float one[70];
            sy_tensor x1 = sy_tensor_2d(x + lone * H, SY_DTYPE_F32, 1, H);
            sy_tensor l1 = sy_tensor_2d(lg + lone * E, SY_DTYPE_F32, 1, E), o1 = sy_tensor_2d(one, SY_DTYPE_F32, 1, H);
            TH_CHECK(ops->forward(inst, 0, &x1, &l1, &o1, &err) == SY_OK &&
                         memcmp(one, out[0] + lone * H, sizeof one) == 0,
                     "[%s] skew: the token of expert 2 alone differs from the batch", isa);
        }
        if (ok && run > 0)
            TH_CHECK(memcmp(out[0], out[run], sizeof(float) * (size_t)(n * H)) == 0,
                     "[%s] skew: %s differs from the pooled single pass", isa,
                     run == 1 ? "the serial forward" : "passes of 64 tokens");
        moe.desc->destroy(inst);
    }
    free(x);
    free(lg);
    for (int i = 0; i < 3; i++)
        free(out[i]);
    model_free(&m);
}

int main(void)
{
    th_load("sy-device-cpu", &dev);
    th_load("sy-moe-cpu", &moe);
    th_host_init(&host);
    ops = moe.desc->ops;
    const char *kvd[] = {"threads", "3", NULL};
    void *d = NULL;
    sy_err why;
    if (th_create(&dev, &host.api, kvd, &d, &why)) {
        fprintf(stderr, "FAIL: device create: %s\n", why.msg);
        return 1;
    }
    dev_inst = d;
    th_host_set_pool(&host, dev.desc, d);
    check_refusals();

    struct {
        const char *name;
        sy_moe_problem p;
        int bias, quantise;
    } cases[] = {
        {"mixtral", problem(4, 2, 64, 96, SY_MOE_SOFTMAX, 1, 1.0f, 0, 0, SY_DTYPE_BF16), 0, 0},
        {"qwen2-moe", problem(8, 4, 40, 36, SY_MOE_SOFTMAX, 0, 1.0f, 0, 0, SY_DTYPE_F32), 0, 1},
        {"deepseek-v3", problem(16, 4, 48, 24, SY_MOE_SIGMOID, 1, 2.5f, 4, 2, SY_DTYPE_BF16), 1, 0},
        {"deepseek-v3-ties", problem(16, 4, 48, 24, SY_MOE_SIGMOID, 1, 2.5f, 4, 2, SY_DTYPE_F32), 1, 1},
        {"deepseek-v2", problem(12, 3, 33, 20, SY_MOE_SOFTMAX, 0, 1.5f, 3, 2, SY_DTYPE_F16), 0, 1},
        {"one-expert", problem(1, 1, 17, 9, SY_MOE_SOFTMAX, 1, 1.0f, 0, 0, SY_DTYPE_F32), 0, 0},
        {"sigmoid", problem(6, 2, 20, 70, SY_MOE_SIGMOID, 0, 1.0f, 0, 0, SY_DTYPE_F16), 0, 0},
    };
    const char *isas[3];
    const int n_isa = th_isas(&moe, &host.api, isas, 3);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        model m;
        memset(&m, 0, sizeof m);
        m.p = cases[c].p;
        m.has_bias = cases[c].bias;
        m.quantise = cases[c].quantise;
        th_rng r = {0x30e00000u + c};
        model_init(&m, &r);
        for (int i = 0; i < n_isa; i++) {
            char tag[96];
            snprintf(tag, sizeof tag, "[%s %s %s]", isas[i], cases[c].name, sy_dtype_name(m.p.weight_dtype));
            run_case(isas[i], &m, i % 2 == 0 ? "64" : "256", "f32", &r, tag);
            if (m.p.weight_dtype == SY_DTYPE_BF16 && !strcmp(isas[i], "avx512"))
                run_case(isas[i], &m, "64", "bf16", &r, tag);
        }
        model_free(&m);
    }
    for (int i = 0; i < n_isa; i++) {
        check_tiles(isas[i]);
        check_skew(isas[i]);
    }
    th_host_clear_pool(&host);
    dev.desc->destroy(d);
    TH_CHECK(atomic_load(&host.live_allocs) == 0, "%ld host allocations leaked", atomic_load(&host.live_allocs));
    th_unload(&moe);
    th_unload(&dev);
    return th_done("test_cpu_moe");
}
