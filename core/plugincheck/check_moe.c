/*
 * plugin-check for MoE plugins: routing (softmax or sigmoid scoring, with
 * and without renormalised top-k, score-correction bias and grouped top-k)
 * and the weighted sum of SwiGLU experts (silu, or gpt-oss's clamped
 * swiglu with expert biases; F32/F16/BF16 or MXFP4 weights), against
 * float64. A moe plugin of
 * another device (--device) gets x, the router logits and out in that
 * device's memory; the experts stay host views, as the engine hands them.
 */
#include "config.h"

#include "plugincheck/check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct mcase {
    const char *name;
    int32_t n_experts, top_k, hidden, inter, scoring, norm, n_group, topk_group, bias;
    float scaling;
    sy_dtype wdt; /* FP4_E2M1: MXFP4 (E8M0 scales per 32) */
    double tol;
    int act;           /* sy_moe_activation */
    float alpha, limit;
    int ebias;         /* 0: no expert biases; 1: gate/up/down; 2: gate/up, down_bias NULL */
    int nvfp4;         /* wdt FP4_E2M1 with E4M3 scales per 16 (NVFP4) instead of MXFP4 */
} mcase;

/* One forward's x, router logits and out, as the plugin sees them: the host arrays, or copies on pc's device. */
typedef struct fwd_io {
    sy_tensor x, l, o;
    float *host_o;
} fwd_io;

/* Sets io up for n tokens; o's contents (NaN: a plugin that does not write them fails) go along. */
static int io_open(sy_pc *pc, fwd_io *io, float *in, float *lg, float *o, int n, int H, int E, sy_err *err)
{
    io->x = sy_tensor_2d(in, SY_DTYPE_F32, n, H);
    io->l = sy_tensor_2d(lg, SY_DTYPE_F32, n, E);
    io->o = sy_tensor_2d(o, SY_DTYPE_F32, n, H);
    io->host_o = o;
    if (!pc->dev_ops)
        return SY_OK;
    sy_tensor *t[3] = {&io->x, &io->l, &io->o};
    const void *src[3] = {in, lg, o};
    for (int i = 0; i < 3; i++)
        t[i]->data = NULL;
    for (int i = 0; i < 3; i++) {
        const size_t bytes = sizeof(float) * (size_t)sy_tensor_numel(t[i]);
        int rc = pc->dev_ops->alloc(pc->dev_inst, t[i], err);
        if (!rc)
            rc = pc->dev_ops->upload(pc->dev_inst, t[i], src[i], bytes, err);
        if (rc)
            return rc;
    }
    return SY_OK;
}

/* out back on the host (after the device's queued work is done). */
static int io_result(sy_pc *pc, fwd_io *io, sy_err *err)
{
    if (!pc->dev_ops)
        return SY_OK;
    int rc = pc->dev_ops->synchronize(pc->dev_inst, err);
    return rc ? rc
              : pc->dev_ops->download(pc->dev_inst, io->host_o, &io->o,
                                      sizeof(float) * (size_t)sy_tensor_numel(&io->o), err);
}

static void io_close(sy_pc *pc, fwd_io *io)
{
    if (!pc->dev_ops)
        return;
    sy_tensor *t[3] = {&io->x, &io->l, &io->o};
    for (int i = 0; i < 3; i++)
        if (t[i]->data)
            pc->dev_ops->free(pc->dev_inst, t[i]);
    memset(io, 0, sizeof *io);
}

/* Experts chosen for one token and their weights, as the model defines them. */
static void route(const mcase *c, const float *logits, const double *bias, int *ids, double *w)
{
    const int E = c->n_experts;
    double score[256], sel[256];
    unsigned char ok[256];
    double mx = -INFINITY, sum = 0;
    for (int e = 0; e < E; e++)
        mx = logits[e] > mx ? logits[e] : mx;
    for (int e = 0; e < E; e++) {
        score[e] = c->scoring == SY_MOE_SOFTMAX ? exp(logits[e] - mx) : 1.0 / (1.0 + exp(-(double)logits[e]));
        sum += score[e];
    }
    for (int e = 0; e < E; e++) {
        if (c->scoring == SY_MOE_SOFTMAX)
            score[e] /= sum;
        sel[e] = score[e] + (bias ? bias[e] : 0);
        ok[e] = 1;
    }
    if (c->n_group > 1) {
        /* DeepSeek-V3: a group scores the sum of its best two (sigmoid) or its best (softmax). */
        const int per = E / c->n_group;
        double gs[64];
        unsigned char keep[64] = {0};
        for (int g = 0; g < c->n_group; g++) {
            double b1 = -INFINITY, b2 = -INFINITY;
            for (int i = 0; i < per; i++) {
                double v = sel[g * per + i];
                if (v > b1)
                    b2 = b1, b1 = v;
                else if (v > b2)
                    b2 = v;
            }
            gs[g] = c->scoring == SY_MOE_SIGMOID && per >= 2 ? b1 + b2 : b1;
        }
        for (int r = 0; r < c->topk_group; r++) {
            int best = -1;
            for (int g = 0; g < c->n_group; g++)
                if (!keep[g] && (best < 0 || gs[g] > gs[best]))
                    best = g;
            keep[best] = 1;
        }
        for (int e = 0; e < E; e++)
            ok[e] = keep[e / per];
    }
    double wsum = 0;
    for (int k = 0; k < c->top_k; k++) {
        int best = -1;
        for (int e = 0; e < E; e++)
            if (ok[e] && (best < 0 || sel[e] > sel[best]))
                best = e;
        ok[best] = 0;
        ids[k] = best;
        w[k] = score[best];
        wsum += w[k];
    }
    for (int k = 0; k < c->top_k; k++)
        w[k] = (c->norm ? w[k] / wsum : w[k]) * c->scaling;
}

typedef struct experts {
    void *g, *u, *d;       /* host views: [E][inter][hidden], [E][inter][hidden], [E][hidden][inter] */
    double *gr, *ur, *dr;  /* the values they hold */
    uint8_t *sg, *su, *sd; /* MXFP4: their E8M0 scales, [E][rows][cols / 32] (NVFP4: E4M3, cols / 16) */
    sy_tensor tg[64], tu[64], td[64], tb;
    double *bias;
    float *bias_f;
    float *eb;             /* expert biases: gate [E][inter], up [E][inter], down [E][hidden] */
    sy_tensor tgb[64], tub[64], tdb[64];
} experts;

/* E2M1 from its definition (sign, 2 exponent bits of bias 1, 1 mantissa bit; code 1 the subnormal 0.5). */
static double e2m1(unsigned n)
{
    const int e = (n >> 1) & 3, m = n & 1;
    const double v = e == 0 ? m * 0.5 : ldexp(1.0 + m / 2.0, e - 1);
    return (n & 8) ? -v : v;
}

/*
 * n / cols rows of MXFP4: random codes, E8M0 scales around `scale` / 3 (the
 * codes' RMS is about 3), and their values in ref.
 */
static void fill_mxfp4(sy_pc *pc, uint8_t *codes, uint8_t *sc, double *ref, size_t n, size_t cols, float scale,
                       int nvfp4)
{
    const int e0 = 127 + (int)floor(log2(scale / 3.0));
    const size_t blk = nvfp4 ? 16 : 32;
    for (size_t i = 0; i < n / 2; i++)
        codes[i] = (uint8_t)sy_pc_rand_u32(pc);
    for (size_t i = 0; i < n / blk; i++) /* NVFP4: E4M3 exponent e0 - 120, mantissa random */
        sc[i] = nvfp4 ? (uint8_t)(((e0 - 120) << 3) | (int)(sy_pc_rand_u32(pc) % 8))
                      : (uint8_t)(e0 - 1 + (int)(sy_pc_rand_u32(pc) % 3));
    for (size_t i = 0; i < n; i++) {
        const unsigned b = sc[(i / cols) * (cols / blk) + (i % cols) / blk];
        const double s = nvfp4 ? ldexp(1.0 + (b & 7) / 8.0, (int)(b >> 3) - 7) : ldexp(1.0, (int)b - 127);
        ref[i] = e2m1((codes[i / 2] >> ((i & 1) * 4)) & 15u) * s;
    }
}

static void fill(sy_pc *pc, void *dst, double *ref, size_t n, sy_dtype dt, float scale)
{
    for (size_t i = 0; i < n; i++) {
        float v = scale * sy_pc_rand(pc);
        if (dt == SY_DTYPE_F32) {
            ((float *)dst)[i] = v;
            ref[i] = v;
        } else {
            uint16_t b = sy_pc_f32_to_half(v, dt);
            ((uint16_t *)dst)[i] = b;
            ref[i] = sy_pc_half_to_f32(b, dt);
        }
    }
}

static int make_experts(sy_pc *pc, const mcase *c, experts *x)
{
    memset(x, 0, sizeof *x);
    const size_t E = (size_t)c->n_experts, H = (size_t)c->hidden, F = (size_t)c->inter;
    const int mx = c->wdt == SY_DTYPE_FP4_E2M1;
    const size_t wb = mx ? E * F * H / 2 : E * F * H * ((size_t)sy_dtype_bits(c->wdt) / 8);
    x->g = malloc(wb);
    x->u = malloc(wb);
    x->d = malloc(wb);
    x->eb = calloc(E * (2 * F + H), sizeof(float));
    if (mx) {
        x->sg = malloc(E * F * H / 16);
        x->su = malloc(E * F * H / 16);
        x->sd = malloc(E * F * H / 16);
        if (!x->sg || !x->su || !x->sd)
            return -1;
    }
    x->gr = malloc(E * F * H * sizeof(double));
    x->ur = malloc(E * F * H * sizeof(double));
    x->dr = malloc(E * F * H * sizeof(double));
    x->bias = calloc(E, sizeof(double));
    x->bias_f = calloc(E, sizeof(float));
    if (!x->g || !x->u || !x->d || !x->gr || !x->ur || !x->dr || !x->bias || !x->bias_f || !x->eb)
        return -1;
    if (mx) {
        fill_mxfp4(pc, x->g, x->sg, x->gr, E * F * H, H, 0.3f, c->nvfp4);
        fill_mxfp4(pc, x->u, x->su, x->ur, E * F * H, H, 0.3f, c->nvfp4);
        fill_mxfp4(pc, x->d, x->sd, x->dr, E * F * H, F, 0.3f, c->nvfp4);
    } else {
        fill(pc, x->g, x->gr, E * F * H, c->wdt, 0.3f);
        fill(pc, x->u, x->ur, E * F * H, c->wdt, 0.3f);
        fill(pc, x->d, x->dr, E * F * H, c->wdt, 0.3f);
    }
    if (c->ebias)
        sy_pc_fill(pc, x->eb, E * (2 * F + H), 0.5f);
    const size_t es = mx ? 0 : (size_t)sy_dtype_bits(c->wdt) / 8, mb = mx ? F * H / 2 : F * H * es;
    for (size_t e = 0; e < E; e++) {
        int64_t nf = (int64_t)F, nh = (int64_t)H;
        sy_tensor_init(&x->tgb[e], x->eb + e * F, SY_DTYPE_F32, 1, &nf);
        sy_tensor_init(&x->tub[e], x->eb + (E + e) * F, SY_DTYPE_F32, 1, &nf);
        sy_tensor_init(&x->tdb[e], x->eb + 2 * E * F + e * H, SY_DTYPE_F32, 1, &nh);
        x->bias_f[e] = 0.2f * sy_pc_rand(pc);
        x->bias[e] = c->bias ? x->bias_f[e] : 0;
        int64_t sgu[2] = {(int64_t)F, (int64_t)H}, sd[2] = {(int64_t)H, (int64_t)F};
        sy_tensor_init(&x->tg[e], (char *)x->g + e * mb, c->wdt, 2, sgu);
        sy_tensor_init(&x->tu[e], (char *)x->u + e * mb, c->wdt, 2, sgu);
        sy_tensor_init(&x->td[e], (char *)x->d + e * mb, c->wdt, 2, sd);
        if (mx) {
            sy_tensor *t[3] = {&x->tg[e], &x->tu[e], &x->td[e]};
            const size_t blk = c->nvfp4 ? 16 : 32;
            const uint8_t *sc[3] = {x->sg + e * F * H / blk, x->su + e * F * H / blk, x->sd + e * F * H / blk};
            for (int i = 0; i < 3; i++) {
                t[i]->scale = sc[i];
                t[i]->scale_dtype = c->nvfp4 ? SY_DTYPE_FP8_E4M3 : SY_DTYPE_E8M0;
                t[i]->scale_block[0] = 1;
                t[i]->scale_block[1] = (int32_t)blk;
            }
        }
    }
    int64_t sb = (int64_t)E;
    sy_tensor_init(&x->tb, x->bias_f, SY_DTYPE_F32, 1, &sb);
    return 0;
}

static void free_experts(experts *x)
{
    free(x->g);
    free(x->u);
    free(x->d);
    free(x->gr);
    free(x->ur);
    free(x->dr);
    free(x->bias);
    free(x->bias_f);
    free(x->sg);
    free(x->su);
    free(x->sd);
    free(x->eb);
}

static void ref_forward(const mcase *c, const experts *x, const float *in, const float *logits, int n, double *out)
{
    const int H = c->hidden, F = c->inter, E = c->n_experts;
    double *act = malloc(sizeof(double) * (size_t)F);
    for (int t = 0; t < n; t++) {
        int ids[64];
        double w[64];
        route(c, logits + (size_t)t * c->n_experts, c->bias ? x->bias : NULL, ids, w);
        double *o = out + (size_t)t * H;
        for (int i = 0; i < H; i++)
            o[i] = 0;
        for (int k = 0; k < c->top_k; k++) {
            const size_t e = (size_t)ids[k];
            const double *g = x->gr + e * F * H, *u = x->ur + e * F * H, *d = x->dr + e * F * H;
            for (int f = 0; f < F; f++) {
                double a = 0, b = 0;
                for (int i = 0; i < H; i++) {
                    a += g[(size_t)f * H + i] * in[(size_t)t * H + i];
                    b += u[(size_t)f * H + i] * in[(size_t)t * H + i];
                }
                if (c->ebias) {
                    a += x->eb[e * F + (size_t)f];
                    b += x->eb[(E + e) * F + (size_t)f];
                }
                if (c->act == SY_MOE_ACT_SWIGLU_CLAMP) { /* gpt-oss: min(g, limit), clamp(u, +-limit), (u + 1) glu */
                    a = a > c->limit ? c->limit : a;
                    b = b > c->limit ? c->limit : b < -c->limit ? -c->limit : b;
                    act[f] = (b + 1.0) * a / (1.0 + exp(-(double)c->alpha * a));
                } else {
                    act[f] = a / (1.0 + exp(-a)) * b;
                }
            }
            for (int i = 0; i < H; i++) {
                double s = 0;
                for (int f = 0; f < F; f++)
                    s += d[(size_t)i * F + f] * act[f];
                if (c->ebias == 1)
                    s += x->eb[2 * E * F + e * H + (size_t)i];
                o[i] += w[k] * s;
            }
        }
    }
    free(act);
}

static const char *wdt_name(sy_dtype d)
{
    return d == SY_DTYPE_F32 ? "f32" : d == SY_DTYPE_BF16 ? "bf16" : d == SY_DTYPE_FP4_E2M1 ? "mxfp4" : "f16";
}

/* has_bias: the experts' biases through prepare_layer_bias (first: the first expert the views start at). */
static int give_bias(sy_pc *pc, void *inst, const mcase *c, int layer, const experts *x, int first, sy_err *err)
{
    const sy_moe_ops *ops = pc->desc->ops;
    if (!c->ebias)
        return SY_OK;
    if (ops->struct_size < offsetof(sy_moe_ops, prepare_layer_bias) + sizeof ops->prepare_layer_bias ||
        !ops->prepare_layer_bias)
        return sy_err_set(err, SY_ERR_UNSUPPORTED, "supports() took has_bias = 1, but the plugin has no "
                          "prepare_layer_bias");
    return ops->prepare_layer_bias(inst, layer, x->tgb + first, x->tub + first, c->ebias == 1 ? x->tdb + first : NULL,
                                   err);
}

static void check_case(sy_pc *pc, const mcase *c, int n_tokens)
{
    char cas[120], note[700];
    snprintf(cas, sizeof cas, "%s: %d tok, E %d top %d, %dx%d %s", c->name, n_tokens, c->n_experts, c->top_k,
             c->hidden, c->inter, wdt_name(c->wdt));
    void *inst = sy_pc_create(pc, "forward", cas);
    if (!inst)
        return;
    const sy_moe_ops *ops = pc->desc->ops;
    const int n_layers = 2;
    sy_moe_problem p = {.struct_size = sizeof p, .n_layers = n_layers, .n_experts = c->n_experts, .top_k = c->top_k, .hidden = c->hidden,
                        .inter = c->inter, .scoring = c->scoring, .norm_topk_prob = c->norm, .routed_scaling_factor = c->scaling,
                        .n_group = c->n_group, .topk_group = c->topk_group, .weight_dtype = c->wdt,
                        .activation = c->act, .swiglu_alpha = c->alpha, .swiglu_limit = c->limit,
                        .has_bias = c->ebias != 0};
    sy_err err;
    memset(&err, 0, sizeof err);
    experts x[2];
    int made = 0;
    float *in = malloc(sizeof(float) * (size_t)n_tokens * c->hidden);
    float *lg = malloc(sizeof(float) * (size_t)n_tokens * c->n_experts);
    float *o = malloc(sizeof(float) * (size_t)n_tokens * c->hidden);
    double *ref = malloc(sizeof(double) * (size_t)n_tokens * c->hidden);
    const char *step = "supports";
    int rc = SY_OK;
    double worst = 0;
    if (!ops->supports(inst, &p, &err)) {
        err.msg[sizeof err.msg - 1] = '\0';
        snprintf(note, sizeof note, "supports() says no: %s", err.msg[0] ? err.msg : "(no reason given)");
        sy_pc_row(pc, "forward", cas, SY_PC_SKIP, -1, -1, note);
        goto out;
    }
    if (!in || !lg || !o || !ref) {
        step = "plugin-check";
        rc = sy_err_set(&err, SY_ERR_NOMEM, "out of memory");
        goto done;
    }
    step = "prepare";
    if ((rc = ops->prepare(inst, &p, &err)))
        goto done;
    for (int l = 0; l < n_layers; l++) {
        made = l + 1; /* make_experts zeroes x[l] first: free_experts is safe on failure */
        if (make_experts(pc, c, &x[l])) {
            step = "plugin-check";
            rc = sy_err_set(&err, SY_ERR_NOMEM, "out of memory");
            goto done;
        }
        step = "prepare_layer";
        if ((rc = ops->prepare_layer(inst, l, x[l].tg, x[l].tu, x[l].td, c->bias ? &x[l].tb : NULL, &err)))
            goto done;
        step = "prepare_layer_bias";
        if ((rc = give_bias(pc, inst, c, l, &x[l], 0, &err)))
            goto done;
    }
    /* Layers in reverse: a plugin that ignores `layer` uses the wrong experts. */
    for (int l = n_layers - 1; l >= 0; l--) {
        sy_pc_fill(pc, in, (size_t)n_tokens * c->hidden, 1);
        sy_pc_fill(pc, lg, (size_t)n_tokens * c->n_experts, 3);
        for (size_t i = 0; i < (size_t)n_tokens * c->hidden; i++)
            o[i] = NAN;
        fwd_io io;
        step = "plugin-check (device memory)";
        if (!(rc = io_open(pc, &io, in, lg, o, n_tokens, c->hidden, c->n_experts, &err))) {
            step = "forward";
            if (!(rc = ops->forward(inst, l, &io.x, &io.l, &io.o, &err)))
                rc = io_result(pc, &io, &err);
        }
        io_close(pc, &io);
        if (rc)
            goto done;
        ref_forward(c, &x[l], in, lg, n_tokens, ref);
        double e = sy_pc_err(o, ref, (size_t)n_tokens * c->hidden);
        worst = e > worst || isnan(e) ? e : worst;
    }
done:
    if (rc) {
        err.msg[sizeof err.msg - 1] = '\0';
        snprintf(note, sizeof note, "%s returned %d (%s): %s", step, rc, sy_status_str(rc),
                 err.msg[0] ? err.msg : "(no message)");
        sy_pc_row(pc, "forward", cas, SY_PC_FAIL, -1, c->tol, note);
    } else {
        sy_pc_row(pc, "forward", cas, worst <= c->tol ? SY_PC_OK : SY_PC_FAIL, worst, c->tol,
                  worst <= c->tol ? "" : "wrong results");
    }
out:
    /* Expert views stay valid for the instance's life: freed after destroy. */
    sy_pc_destroy(pc, inst);
    for (int l = 0; l < made; l++)
        free_experts(&x[l]);
    free(in);
    free(lg);
    free(o);
    free(ref);
}

/*
 * The optional set_expert_range (expert parallelism): instances holding
 * three uneven ranges of the experts, each routing among all of them, give
 * partial outputs whose sum is the whole layer's (a token with none of an
 * instance's experts must get zeros from it, not leftovers).
 */
static void check_ranges(sy_pc *pc, const mcase *c, int n_tokens)
{
    const sy_moe_ops *ops = pc->desc->ops;
    if (ops->struct_size < offsetof(sy_moe_ops, set_expert_range) + sizeof ops->set_expert_range ||
        !ops->set_expert_range)
        return;
    char cas[120], note[700];
    snprintf(cas, sizeof cas, "%s: %d tok, E %d top %d, 3 expert ranges", c->name, n_tokens, c->n_experts,
             c->top_k);
    const int32_t E = c->n_experts, cut[4] = {0, E / 3, E / 3 + E / 4, E};
    sy_moe_problem p = {.struct_size = sizeof p, .n_layers = 1, .n_experts = c->n_experts, .top_k = c->top_k, .hidden = c->hidden,
                        .inter = c->inter, .scoring = c->scoring, .norm_topk_prob = c->norm, .routed_scaling_factor = c->scaling,
                        .n_group = c->n_group, .topk_group = c->topk_group, .weight_dtype = c->wdt,
                        .activation = c->act, .swiglu_alpha = c->alpha, .swiglu_limit = c->limit,
                        .has_bias = c->ebias != 0};
    sy_err err;
    memset(&err, 0, sizeof err);
    experts x;
    const size_t nh = (size_t)n_tokens * c->hidden;
    float *in = malloc(sizeof(float) * nh), *lg = malloc(sizeof(float) * (size_t)n_tokens * E);
    float *o = malloc(sizeof(float) * nh);
    double *sum = calloc(nh, sizeof(double)), *ref = malloc(sizeof(double) * nh);
    int rc = make_experts(pc, c, &x) || !in || !lg || !o || !sum || !ref
                 ? sy_err_set(&err, SY_ERR_NOMEM, "out of memory")
                 : SY_OK;
    const char *step = "plugin-check";
    if (!rc) {
        sy_pc_fill(pc, in, nh, 1);
        sy_pc_fill(pc, lg, (size_t)n_tokens * E, 3);
    }
    for (int r = 0; r < 3 && !rc; r++) {
        void *inst = sy_pc_create(pc, "forward", cas);
        if (!inst) /* sy_pc_create reported it */
            goto out;
        const int32_t first = cut[r], count = cut[r + 1] - cut[r];
        for (size_t i = 0; i < nh; i++)
            o[i] = NAN;
        fwd_io io;
        memset(&io, 0, sizeof io);
        step = "prepare";
        rc = ops->prepare(inst, &p, &err);
        if (!rc) {
            step = "set_expert_range";
            rc = ops->set_expert_range(inst, first, count, &err);
        }
        if (!rc) {
            step = "prepare_layer";
            rc = ops->prepare_layer(inst, 0, x.tg + first, x.tu + first, x.td + first, c->bias ? &x.tb : NULL, &err);
        }
        if (!rc) {
            step = "prepare_layer_bias";
            rc = give_bias(pc, inst, c, 0, &x, first, &err);
        }
        if (!rc) {
            step = "plugin-check (device memory)";
            rc = io_open(pc, &io, in, lg, o, n_tokens, c->hidden, E, &err);
        }
        if (!rc) {
            step = "forward";
            if (!(rc = ops->forward(inst, 0, &io.x, &io.l, &io.o, &err)))
                rc = io_result(pc, &io, &err);
        }
        io_close(pc, &io);
        for (size_t i = 0; !rc && i < nh; i++)
            sum[i] += o[i];
        sy_pc_destroy(pc, inst);
    }
    if (rc) {
        err.msg[sizeof err.msg - 1] = '\0';
        snprintf(note, sizeof note, "%s returned %d (%s): %s", step, rc, sy_status_str(rc),
                 err.msg[0] ? err.msg : "(no message)");
        sy_pc_row(pc, "forward", cas, SY_PC_FAIL, -1, c->tol, note);
    } else {
        for (size_t i = 0; i < nh; i++)
            o[i] = (float)sum[i];
        ref_forward(c, &x, in, lg, n_tokens, ref);
        const double e = sy_pc_err(o, ref, nh);
        sy_pc_row(pc, "forward", cas, e <= c->tol ? SY_PC_OK : SY_PC_FAIL, e, c->tol,
                  e <= c->tol ? "" : "the ranges' partial sums do not add up to the layer");
    }
out:
    free_experts(&x);
    free(in);
    free(lg);
    free(o);
    free(sum);
    free(ref);
}

static void speed_case(sy_pc *pc, const mcase *c, int n_tokens)
{
    char cas[120], note[700];
    snprintf(cas, sizeof cas, "%s: %d tok, E %d top %d, %dx%d", c->name, n_tokens, c->n_experts, c->top_k,
             c->hidden, c->inter);
    void *inst = sy_pc_create(pc, "forward", cas);
    if (!inst)
        return;
    const sy_moe_ops *ops = pc->desc->ops;
    sy_moe_problem p = {.struct_size = sizeof p, .n_layers = 1, .n_experts = c->n_experts, .top_k = c->top_k, .hidden = c->hidden,
                        .inter = c->inter, .scoring = c->scoring, .norm_topk_prob = c->norm, .routed_scaling_factor = c->scaling,
                        .n_group = c->n_group, .topk_group = c->topk_group, .weight_dtype = c->wdt,
                        .activation = c->act, .swiglu_alpha = c->alpha, .swiglu_limit = c->limit,
                        .has_bias = c->ebias != 0};
    sy_err err;
    memset(&err, 0, sizeof err);
    experts x;
    float *in = malloc(sizeof(float) * (size_t)n_tokens * c->hidden);
    float *lg = malloc(sizeof(float) * (size_t)n_tokens * c->n_experts);
    float *o = malloc(sizeof(float) * (size_t)n_tokens * c->hidden);
    int rc = make_experts(pc, c, &x) || !in || !lg || !o ? sy_err_set(&err, SY_ERR_NOMEM, "out of memory") : SY_OK;
    const char *step = "prepare";
    if (!rc && !(rc = ops->prepare(inst, &p, &err)))
        step = "prepare_layer", rc = ops->prepare_layer(inst, 0, x.tg, x.tu, x.td, NULL, &err);
    if (!rc)
        step = "prepare_layer_bias", rc = give_bias(pc, inst, c, 0, &x, 0, &err);
    long runs = 0;
    double t = 0;
    if (!rc) {
        sy_pc_fill(pc, in, (size_t)n_tokens * c->hidden, 1);
        sy_pc_fill(pc, lg, (size_t)n_tokens * c->n_experts, 3);
        fwd_io io;
        step = "plugin-check (device memory)";
        if (!(rc = io_open(pc, &io, in, lg, o, n_tokens, c->hidden, c->n_experts, &err))) {
            step = "forward";
            double t0 = sy_pc_now();
            while (!rc && (runs < 3 || t < pc->min_time)) {
                rc = ops->forward(inst, 0, &io.x, &io.l, &io.o, &err);
                if (!rc && pc->dev_ops) /* a device's forward returns once queued */
                    rc = pc->dev_ops->synchronize(pc->dev_inst, &err);
                runs++;
                t = sy_pc_now() - t0;
            }
        }
        io_close(pc, &io);
    }
    if (rc) {
        err.msg[sizeof err.msg - 1] = '\0';
        snprintf(note, sizeof note, "%s returned %d (%s): %s", step, rc, sy_status_str(rc), err.msg);
        sy_pc_row(pc, "forward", cas, SY_PC_FAIL, -1, -1, note);
    } else {
        /* Batches say how far from the expert GEMMs' peak they are, where the plugin knows it. */
        char peak[96] = "";
        void *f = n_tokens > 1 && pc->desc->get_proc ? pc->desc->get_proc("matmul_peak") : NULL;
        char path[32] = "";
        const double pk = f ? ((sy_device_matmul_peak_fn)f)(inst, c->wdt, path, sizeof path) : 0;
        if (pk > 0)
            snprintf(peak, sizeof peak, "of %.0f peak (%s)", pk, path);
        sy_pc_time_row_note(pc, "forward", cas, t / (double)runs * 1e6, runs,
                            6.0 * n_tokens * c->top_k * (double)c->hidden * c->inter, "GFLOP/s", peak);
    }
    sy_pc_destroy(pc, inst);
    free_experts(&x);
    free(in);
    free(lg);
    free(o);
}

int sy_pc_check_moe(sy_pc *pc)
{
    static const mcase cases[] = {
        {"softmax", 8, 2, 64, 48, SY_MOE_SOFTMAX, 0, 0, 0, 0, 1.0f, SY_DTYPE_F32, 1e-4, 0, 0, 0, 0, 0},
        {"softmax norm", 8, 2, 64, 48, SY_MOE_SOFTMAX, 1, 0, 0, 0, 1.0f, SY_DTYPE_BF16, 2e-2, 0, 0, 0, 0, 0},
        {"sigmoid bias", 8, 2, 32, 24, SY_MOE_SIGMOID, 1, 0, 0, 1, 2.5f, SY_DTYPE_F32, 1e-4, 0, 0, 0, 0, 0},
        {"sigmoid bias group", 16, 4, 32, 24, SY_MOE_SIGMOID, 1, 4, 2, 1, 2.5f, SY_DTYPE_F32, 1e-4, 0, 0, 0, 0, 0},
        {"softmax", 4, 1, 32, 64, SY_MOE_SOFTMAX, 0, 0, 0, 0, 1.0f, SY_DTYPE_F16, 5e-3, 0, 0, 0, 0, 0},
        /* gpt-oss: MXFP4 experts, clamped swiglu, expert biases; limit 1 so both clamps bite at these sizes */
        {"gpt-oss swiglu-clamp biases", 8, 2, 64, 96, SY_MOE_SOFTMAX, 1, 0, 0, 0, 1.0f, SY_DTYPE_FP4_E2M1, 1e-4,
         SY_MOE_ACT_SWIGLU_CLAMP, 1.702f, 1.0f, 1, 0},
        {"gpt-oss limit 7, no down bias", 8, 2, 64, 64, SY_MOE_SOFTMAX, 1, 0, 0, 0, 1.0f, SY_DTYPE_F32, 1e-4,
         SY_MOE_ACT_SWIGLU_CLAMP, 1.702f, 7.0f, 2, 0},
        {"mxfp4 silu", 8, 2, 32, 64, SY_MOE_SOFTMAX, 0, 0, 0, 0, 1.0f, SY_DTYPE_FP4_E2M1, 1e-4, 0, 0, 0, 0, 0},
        {"silu expert biases", 4, 2, 32, 24, SY_MOE_SOFTMAX, 1, 0, 0, 0, 1.0f, SY_DTYPE_BF16, 2e-2, 0, 0, 0, 1, 0},
    };
    if (pc->speed) {
        static const mcase sp = {"softmax bf16", 8, 2, 1024, 1408, SY_MOE_SOFTMAX, 1, 0, 0, 0, 1.0f, SY_DTYPE_BF16, 0,
                                 0, 0, 0, 0, 0};
        static const mcase spx = {"gpt-oss mxfp4", 8, 2, 1024, 1408, SY_MOE_SOFTMAX, 1, 0, 0, 0, 1.0f,
                                  SY_DTYPE_FP4_E2M1, 0, SY_MOE_ACT_SWIGLU_CLAMP, 1.702f, 7.0f, 1, 0};
        static const mcase spn = {"softmax nvfp4", 8, 2, 1024, 1408, SY_MOE_SOFTMAX, 1, 0, 0, 0, 1.0f,
                                  SY_DTYPE_FP4_E2M1, 0, 0, 0, 0, 0, 1};
        const mcase *sps[3] = {&sp, &spn, &spx};
        for (int i = 0; i < 3; i++) {
            speed_case(pc, sps[i], 1);
            speed_case(pc, sps[i], 16);
            speed_case(pc, sps[i], 128);
        }
        return 0;
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        check_case(pc, &cases[i], 1);
        check_case(pc, &cases[i], 13);
    }
    check_ranges(pc, &cases[1], 13);
    check_ranges(pc, &cases[3], 13);
    check_ranges(pc, &cases[5], 13);
    return 0;
}
