/*
 * test_cuda_ops: every op of the CUDA plugins against the CPU plugins on
 * seeded random inputs, both sets loaded through the loader exactly as the
 * engine loads them. Needs an NVIDIA GPU (tests/gpu/run.sh runs it); it is
 * built by every `make check` so it keeps compiling, but it is not in TESTS.
 *
 * Each comparison prints one line: op, case, max |gpu - cpu| / max |cpu|,
 * and the bound. NaN or Inf on either side fails whatever the bound. The
 * bounds: 1e-5 where both sides compute in F32 from the same inputs
 * (glue ops, attention, MoE: only the summation order differs), 2e-5 for
 * linear on 16-bit weights (the GPU multiplies the activations as a 16-bit
 * hi + lo pair, ~16 mantissa bits of each activation), 1e-4 for attention's
 * tensor-core prefill kernel ([attention] prefill_kernel = tensor-cores,
 * which must pass its self-check at prepare: q, K, P and V as bf16 hi + lo
 * pairs; head dim 256 refused), 3e-2 for
 * device.linear = round (activations rounded once to the weight's type).
 * FP8 / NVFP4 weights: 1e-5 (both dequantise to the same F32 values and
 * sum F32 products), 3e-2 with linear = round (BF16 tiles for n > 8).
 * moe cuda's CUDA-core tile variants ([moe] tile) must give the default's
 * bits exactly; its tensor-core tiles (mma*, wgmma*: bf16 split products)
 * must pass their self-check at prepare and stay within 1e-4 of the
 * default and of moe cpu on BF16, FP8 and NVFP4 layers; its expert ranges (set_expert_range) must add up to the
 * whole layer (1e-5: the ranges' sum is a different order). MoE on FP8 /
 * NVFP4 experts: 1e-5 against moe cpu, tiles bit for bit; gpt-oss's MXFP4
 * experts with the clamped SwiGLU and expert biases likewise; moe cuda's
 * routing = device must give routing = host's outputs bit for bit.
 * device sample: ids equal to the CPU device's (the host draw) on grid
 * rows and temperature 0, on >= 99% of random rows (expf and sum order),
 * -1 for a row with more candidates to sort than fit on chip.
 * device cuda with graphs = on: a recorded embed/rmsnorm/linear chain
 * replayed after its pinned ids changed equals the eager chain on the new
 * ids bit for bit (and the CPU within 2e-5); download, synchronize and
 * scratch growth refuse while recording; eager ops work after failed
 * recordings.
 *
 * usage: test_cuda_ops [--plugin-dir DIR] [--attention NAME]   (default $SY_PLUGIN_DIR, auto)
 * exit 0 when every comparison is within its bound, 1 otherwise, 2 when a plugin cannot be loaded.
 */
#include "config.h"

#include "plugin/config.h"
#include "plugin/host.h"
#include "plugin/loader.h"
#include "util/util.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct side {
    const char *name;
    sy_plugin_inst *dev, *attn, *moe;
    const sy_device_ops *d;
    const sy_attn_ops *a;
    const sy_moe_ops *m;
} side;

static int failures, checks;
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static float frand(void) /* uniform in [-1, 1) */
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((double)(rng_state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static float *rand_f32(size_t n, float scale)
{
    float *p = malloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++)
        p[i] = frand() * scale;
    return p;
}

/* Host weight data of n values in dtype dt (rounded from F32). */
static void *as_dtype(const float *src, size_t n, sy_dtype dt)
{
    if (dt == SY_DTYPE_F32) {
        float *p = malloc(sizeof(float) * n);
        memcpy(p, src, sizeof(float) * n);
        return p;
    }
    uint16_t *p = malloc(sizeof(uint16_t) * n);
    for (size_t i = 0; i < n; i++)
        p[i] = dt == SY_DTYPE_BF16 ? sy_f32_to_bf16(src[i]) : sy_f32_to_f16(src[i]);
    return p;
}

static void die(const char *what, const sy_err *err)
{
    fprintf(stderr, "test_cuda_ops: %s: %s\n", what, err->msg);
    exit(2);
}

static void compare(const char *op, const char *cas, const float *gpu, const float *cpu, size_t n, double bound)
{
    double mx = 0, diff = 0;
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(gpu[i]) || !isfinite(cpu[i]))
            bad = 1;
        mx = fmax(mx, fabs((double)cpu[i]));
        diff = fmax(diff, fabs((double)gpu[i] - (double)cpu[i]));
    }
    const double rel = diff / (mx > 1e-30 ? mx : 1e-30);
    checks++;
    const int ok = !bad && rel <= bound && n > 0;
    failures += !ok;
    printf("%-4s %-14s %-44s rel %.2e  bound %.0e%s\n", ok ? "ok" : "FAIL", op, cas, rel, bound,
           bad ? "  (NaN/Inf)" : n == 0 ? "  (empty)" : "");
}

/* ------------------------------------------------------------- tensors */

static sy_tensor dev_tensor(side *s, sy_dtype dt, int64_t rows, int64_t cols)
{
    sy_tensor t;
    int64_t shape[2] = {rows, cols};
    sy_tensor_init(&t, NULL, dt, 2, shape);
    sy_err err = {{0}};
    if (s->d->alloc(s->dev->inst, &t, &err))
        die(s->name, &err);
    return t;
}

static sy_tensor dev_f32(side *s, const float *host, int64_t rows, int64_t cols)
{
    sy_tensor t = dev_tensor(s, SY_DTYPE_F32, rows, cols);
    sy_err err = {{0}};
    if (s->d->upload(s->dev->inst, &t, host, sizeof(float) * (size_t)(rows * cols), &err))
        die(s->name, &err);
    return t;
}

static float *fetch(side *s, const sy_tensor *t)
{
    const size_t n = (size_t)sy_tensor_numel(t);
    float *out = malloc(sizeof(float) * (n ? n : 1));
    sy_err err = {{0}};
    if (s->d->synchronize(s->dev->inst, &err) || s->d->download(s->dev->inst, out, t, sizeof(float) * n, &err))
        die(s->name, &err);
    return out;
}

/* A weight prepared by the side's device from a host view (host_data must outlive it). */
static sy_tensor weight(side *s, const char *name, void *host_data, sy_dtype dt, int ndim, int64_t rows, int64_t cols)
{
    sy_tensor h, w;
    int64_t shape2[2] = {rows, cols}, shape1[1] = {cols};
    sy_tensor_init(&h, host_data, dt, ndim, ndim == 1 ? shape1 : shape2);
    sy_err err = {{0}};
    if (s->d->prepare_weight(s->dev->inst, name, &h, &w, &err))
        die(s->name, &err);
    return w;
}

static void op_ok(side *s, int rc, const char *op, const sy_err *err)
{
    if (rc) {
        fprintf(stderr, "test_cuda_ops: %s %s: %s\n", s->name, op, err->msg);
        failures++;
    }
}

/* ------------------------------------------------------------ the ops */

static void test_glue(side *c, side *g)
{
    side *sd[2] = {c, g};
    const int64_t n = 37, H = 512, V = 1000;
    float *x = rand_f32((size_t)(n * H), 2.0f), *r = rand_f32((size_t)(n * H), 1.0f);
    float *tbl = rand_f32((size_t)(V * H), 1.0f), *wn = rand_f32((size_t)H, 1.0f);
    void *tbl16 = as_dtype(tbl, (size_t)(V * H), SY_DTYPE_BF16), *wn16 = as_dtype(wn, (size_t)H, SY_DTYPE_BF16);
    int32_t ids[37];
    for (int i = 0; i < n; i++)
        ids[i] = (int32_t)((i * 7919 + 3) % V);
    float *res[2][6];
    for (int k = 0; k < 2; k++) {
        side *s = sd[k];
        sy_err err = {{0}};
        sy_tensor T = weight(s, "embed", tbl16, SY_DTYPE_BF16, 2, V, H), W = weight(s, "norm", wn16, SY_DTYPE_BF16, 1, 1, H);
        sy_tensor e = dev_tensor(s, SY_DTYPE_F32, n, H), X = dev_f32(s, x, n, H), R = dev_f32(s, r, n, H);
        sy_tensor o = dev_tensor(s, SY_DTYPE_F32, n, H);
        op_ok(s, s->d->embed(s->dev->inst, &T, ids, n, &e, &err), "embed", &err);
        res[k][0] = fetch(s, &e);
        op_ok(s, s->d->rmsnorm(s->dev->inst, &X, &W, 1e-5f, &o, &err), "rmsnorm", &err);
        res[k][1] = fetch(s, &o);
        op_ok(s, s->d->add_rmsnorm(s->dev->inst, &R, &X, &W, 1e-6f, &o, &err), "add_rmsnorm", &err);
        res[k][2] = fetch(s, &o);
        res[k][3] = fetch(s, &R);
        op_ok(s, s->d->silu_mul(s->dev->inst, &X, &R, &o, &err), "silu_mul", &err);
        res[k][4] = fetch(s, &o);
        op_ok(s, s->d->add(s->dev->inst, &o, &X, &err), "add", &err);
        res[k][5] = fetch(s, &o);
        sy_tensor *ts[] = {&e, &X, &R, &o};
        for (size_t i = 0; i < 4; i++)
            s->d->free(s->dev->inst, ts[i]);
        s->d->release_weight(s->dev->inst, &T);
        s->d->release_weight(s->dev->inst, &W);
    }
    const char *names[6] = {"embed", "rmsnorm", "add_rmsnorm", "add_rmsnorm.res", "silu_mul", "add"};
    for (int i = 0; i < 6; i++) {
        compare(names[i], "37 x 512, bf16 params", res[1][i], res[0][i], (size_t)(n * H), 1e-5);
        free(res[0][i]);
        free(res[1][i]);
    }
    free(x), free(r), free(tbl), free(wn), free(tbl16), free(wn16);
}

static void test_linear(side *c, side *g, double bound16)
{
    static const sy_dtype dts[3] = {SY_DTYPE_F32, SY_DTYPE_F16, SY_DTYPE_BF16};
    static const int64_t ns[2] = {1, 37};
    const int64_t k = 512, m = 384;
    float *wf = rand_f32((size_t)(m * k), 0.05f), *bf = rand_f32((size_t)m, 0.5f);
    for (int di = 0; di < 3; di++)
        for (int ni = 0; ni < 2; ni++)
            for (int with_bias = 0; with_bias < 2; with_bias++) {
                const int64_t n = ns[ni];
                float *x = rand_f32((size_t)(n * k), 3.0f);
                void *w = as_dtype(wf, (size_t)(m * k), dts[di]), *b = as_dtype(bf, (size_t)m, SY_DTYPE_BF16);
                float *out[2];
                side *sd[2] = {c, g};
                for (int s = 0; s < 2; s++) {
                    sy_err err = {{0}};
                    sy_tensor W = weight(sd[s], "w", w, dts[di], 2, m, k), B = weight(sd[s], "b", b, SY_DTYPE_BF16, 1, 1, m);
                    sy_tensor X = dev_f32(sd[s], x, n, k), O = dev_tensor(sd[s], SY_DTYPE_F32, n, m);
                    op_ok(sd[s], sd[s]->d->linear(sd[s]->dev->inst, &X, &W, with_bias ? &B : NULL, &O, &err), "linear",
                          &err);
                    out[s] = fetch(sd[s], &O);
                    sd[s]->d->free(sd[s]->dev->inst, &X);
                    sd[s]->d->free(sd[s]->dev->inst, &O);
                    sd[s]->d->release_weight(sd[s]->dev->inst, &W);
                    sd[s]->d->release_weight(sd[s]->dev->inst, &B);
                }
                char cas[96];
                snprintf(cas, sizeof cas, "n %lld, %s weights%s", (long long)n, sy_dtype_name(dts[di]),
                         with_bias ? ", bias" : "");
                compare("linear", cas, out[1], out[0], (size_t)(n * m), dts[di] == SY_DTYPE_F32 ? 1e-5 : bound16);
                free(out[0]), free(out[1]), free(x), free(w), free(b);
            }
    free(wf), free(bf);
}

/* ----------------------------------------------------- quantised linear */

/* A seeded FP8 (F32 scales per b0 x b1 block) or NVFP4 (E4M3 scales per 16, global scale) host weight [m, k]. Every
 * code byte is drawn, FP8's NaN codes included: both plugins read 0x7f/0xff as +-480. */
typedef struct qweight {
    uint8_t *codes, *scales;
    sy_tensor t;
} qweight;

static uint8_t rand_byte(void)
{
    return (uint8_t)((frand() + 1.0f) * 128.0f) & 0xffu;
}

static qweight make_qweight(sy_dtype dt, int64_t m, int64_t k, int32_t b0, int32_t b1, float global)
{
    qweight q;
    const int fp4 = dt == SY_DTYPE_FP4_E2M1;
    const size_t nc = (size_t)(m * (fp4 ? k / 2 : k)), ns = (size_t)((m + b0 - 1) / b0 * ((k + b1 - 1) / b1));
    q.codes = malloc(nc ? nc : 1);
    for (size_t i = 0; i < nc; i++)
        q.codes[i] = rand_byte();
    q.scales = malloc(ns * (fp4 ? 1 : sizeof(float)));
    for (size_t i = 0; i < ns; i++) {
        if (fp4) /* positive E4M3 with exponents 4..11: 2^-3 .. 2^4 */
            q.scales[i] = (uint8_t)(((4 + rand_byte() % 8) << 3) | (rand_byte() & 7));
        else
            ((float *)q.scales)[i] = (0.75f + 0.5f * frand()) / 256.0f;
    }
    q.t = sy_tensor_2d(q.codes, dt, m, k);
    q.t.scale = q.scales;
    q.t.scale_dtype = fp4 ? SY_DTYPE_FP8_E4M3 : SY_DTYPE_F32;
    q.t.scale_block[0] = b0;
    q.t.scale_block[1] = b1;
    q.t.global_scale = global;
    return q;
}

typedef struct qcase {
    const char *what;
    sy_dtype dt;
    int64_t m, k;
    int32_t b0, b1; /* 0: per-tensor (b0 = m, b1 = k) */
    float global;
} qcase;

/* linear on one quantised weight, gpu side g against the cpu plugin, for each n. */
static void test_linear_q(side *c, side *g, const qcase *qc, const int64_t *ns, int n_ns, double bound)
{
    const int32_t b0 = qc->b0 ? qc->b0 : (int32_t)qc->m, b1 = qc->b1 ? qc->b1 : (int32_t)qc->k;
    qweight q = make_qweight(qc->dt, qc->m, qc->k, b0, b1, qc->global);
    float *bf = rand_f32((size_t)qc->m, 0.5f);
    void *b = as_dtype(bf, (size_t)qc->m, SY_DTYPE_BF16);
    for (int ni = 0; ni < n_ns; ni++) {
        const int64_t n = ns[ni], m = qc->m, k = qc->k;
        const int with_bias = ni % 2 == 1;
        float *x = rand_f32((size_t)(n * k), 3.0f), *out[2];
        side *sd[2] = {c, g};
        for (int s = 0; s < 2; s++) {
            sy_err err = {{0}};
            sy_tensor W, B = weight(sd[s], "b", b, SY_DTYPE_BF16, 1, 1, m);
            if (sd[s]->d->prepare_weight(sd[s]->dev->inst, "wq", &q.t, &W, &err))
                die(sd[s]->name, &err);
            sy_tensor X = dev_f32(sd[s], x, n, k), O = dev_tensor(sd[s], SY_DTYPE_F32, n, m);
            op_ok(sd[s], sd[s]->d->linear(sd[s]->dev->inst, &X, &W, with_bias ? &B : NULL, &O, &err), "linear", &err);
            out[s] = fetch(sd[s], &O);
            sd[s]->d->free(sd[s]->dev->inst, &X);
            sd[s]->d->free(sd[s]->dev->inst, &O);
            sd[s]->d->release_weight(sd[s]->dev->inst, &W);
            sd[s]->d->release_weight(sd[s]->dev->inst, &B);
        }
        char cas[96];
        snprintf(cas, sizeof cas, "n %lld, %s%s", (long long)n, qc->what, with_bias ? ", bias" : "");
        compare("linear", cas, out[1], out[0], (size_t)(n * m), bound);
        free(out[0]), free(out[1]), free(x);
    }
    free(q.codes), free(q.scales), free(bf), free(b);
}

/* A layout the CPU plugin refuses must be refused by the GPU's prepare_weight too (no silent misreading). */
static void test_qweight_refused(side *g)
{
    qweight q = make_qweight(SY_DTYPE_FP8_E4M3, 64, 200, 64, 100, 1.0f); /* b1 100: not a multiple of 16, < K */
    sy_tensor W;
    sy_err err = {{0}};
    const int rc = g->d->prepare_weight(g->dev->inst, "bad", &q.t, &W, &err);
    if (!rc)
        g->d->release_weight(g->dev->inst, &W);
    checks++;
    failures += rc == 0;
    printf("%-4s %-14s %-44s %s\n", rc ? "ok" : "FAIL", "prepare_weight", "FP8 scale block [64, 100] refused",
           rc ? err.msg : "(accepted)");
    free(q.codes), free(q.scales);
}

static void test_linear_quant(side *c, side *g, side *gr)
{
    static const qcase cases[] = {
        {"F8_E4M3 per-tensor scale, 300 x 400", SY_DTYPE_FP8_E4M3, 300, 400, 0, 0, 1.0f},
        {"F8_E4M3 128x128 scales, 300 x 400", SY_DTYPE_FP8_E4M3, 300, 400, 128, 128, 1.0f},
        {"F8_E4M3 128x128 scales, 300 x 392", SY_DTYPE_FP8_E4M3, 300, 392, 128, 128, 1.0f},
        {"NVFP4, 300 x 400, global 0.01", SY_DTYPE_FP4_E2M1, 300, 400, 1, 16, 0.01f},
    };
    static const int64_t ns[3] = {1, 5, 37}, ns_big[2] = {9, 3};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        test_linear_q(c, g, &cases[i], ns, 3, 1e-5);
        test_linear_q(c, gr, &cases[i], ns + 1, 2, 3e-2);
    }
    /* More weight rows than one 64 MiB dequantisation tile (F32): the prefill path's tiling. */
    static const qcase big = {"F8_E4M3 128x128 scales, 4200 x 4096", SY_DTYPE_FP8_E4M3, 4200, 4096, 128, 128, 1.0f};
    test_linear_q(c, g, &big, ns_big, 2, 1e-5);
    static const qcase big4 = {"NVFP4, 4200 x 4096, global 0.02", SY_DTYPE_FP4_E2M1, 4200, 4096, 1, 16, 0.02f};
    test_linear_q(c, g, &big4, ns_big, 2, 1e-5);
    test_qweight_refused(g);
}

static void test_rope(side *c, side *g)
{
    const int64_t n = 29, heads = 4, D = 128;
    float inv[64];
    int32_t pos[29];
    for (int i = 0; i < 29; i++)
        pos[i] = (int32_t)((i * 1237) % 32768);
    for (int neox = 0; neox < 2; neox++)
        for (int partial = 0; partial < 2; partial++) {
            const int rot = partial ? 64 : 128;
            for (int i = 0; i < rot / 2; i++)
                inv[i] = (float)pow(1e6, -2.0 * i / rot);
            const sy_rope_params p = {.struct_size = sizeof p, .head_dim = (int32_t)D, .rotary_dim = rot,
                                      .neox = neox, .inv_freq = inv, .mscale = partial ? 1.25f : 1.0f};
            float *x = rand_f32((size_t)(n * heads * D), 1.0f), *out[2];
            side *sd[2] = {c, g};
            for (int s = 0; s < 2; s++) {
                sy_err err = {{0}};
                sy_tensor X = dev_f32(sd[s], x, n, heads * D);
                op_ok(sd[s], sd[s]->d->rope(sd[s]->dev->inst, &X, pos, &p, &err), "rope", &err);
                out[s] = fetch(sd[s], &X);
                sd[s]->d->free(sd[s]->dev->inst, &X);
            }
            char cas[96];
            snprintf(cas, sizeof cas, "%s, rotary_dim %d, mscale %.2f", neox ? "neox" : "gpt-j", rot, (double)p.mscale);
            compare("rope", cas, out[1], out[0], (size_t)(n * heads * D), 1e-5);
            free(out[0]), free(out[1]), free(x);
        }
}

/* ---------------------------------------------------------- attention */

typedef struct attn_case {
    int n_heads, n_kv, D, window; /* window < 0: per layer (layer_window, ABI 1.1): layer 0 full, layer 1 -window */
    sy_dtype kv;
    int long_ctx; /* 1: 600- and 300-token prefills, then decode: the CUDA plugins split such contexts (split-K);
                   * 2: a step of prefills only (64, 17, 33 tokens), then chunks of 16 and 30 beside a decode row */
} attn_case;

/* The cases' comparisons against attn cpu at bound, labelled op; sinks [2 * n_heads] or NULL (ABI 1.1, gpt-oss). */
static void test_attention_op_sinks(side *c, side *g, const attn_case *ac, const char *op, double bound,
                                    const float *sinks)
{
    sy_attn_problem p = {.struct_size = sizeof p, .n_layers = 2, .n_heads = ac->n_heads, .n_kv_heads = ac->n_kv,
                         .head_dim = ac->D, .v_head_dim = ac->D, .block_size = 16, .n_blocks = ac->long_ctx == 1 ? 160 : 64,
                         .kv_dtype = ac->kv, .scale = 1.0f / sqrtf((float)ac->D),
                         .sliding_window = ac->window > 0 ? ac->window : 0};
    const int32_t layer_window[2] = {0, ac->window < 0 ? -ac->window : 0};
    if (ac->window < 0)
        p.layer_window = layer_window;
    p.sinks = sinks;
    side *sd[2] = {c, g};
    for (int s = 0; s < 2; s++) {
        sy_err err = {{0}};
        if (!sd[s]->a->supports(sd[s]->attn->inst, &p, &err) || sd[s]->a->prepare(sd[s]->attn->inst, &p, &err)) {
            /* A failed self-check of the tensor-core kernel lands here: one failure, the other ops still run. */
            checks++;
            failures++;
            printf("FAIL %-14s %d/%d heads d %d %s win %d: %s: %s\n", op, p.n_heads, p.n_kv_heads, p.head_dim,
                   sy_dtype_name(ac->kv), ac->window, sd[s]->name, err.msg);
            return;
        }
    }
    /* Three sequences with scattered blocks. Step 1: prefills of 40, 9 and 20 tokens; step 2: a decode token, a
     * 7-token chunk and a decode token; step 3 after copying sequence 0's blocks to fresh ones (copy-on-write). */
    enum { S = 3, MB_MAX = 48 };
    const int MB = ac->long_ctx == 1 ? MB_MAX : 8;
    int32_t bt[S * MB_MAX], used[160] = {0};
    for (int i = 0; i < S * MB; i++)
        used[bt[i] = (int32_t)((i * 37 + 5) % p.n_blocks)] = 1;
    const int32_t short_lens[3][S] = {{40, 9, 20}, {1, 7, 1}, {1, 1, 1}};
    const int32_t long_lens[3][S] = {{600, 300, 5}, {1, 1, 1}, {1, 4, 1}};
    const int32_t prefill_lens[3][S] = {{64, 17, 33}, {16, 30, 1}, {1, 1, 1}};
    const int32_t(*lens)[S] = ac->long_ctx == 1 ? long_lens : ac->long_ctx == 2 ? prefill_lens : short_lens;
    int32_t ctx[S] = {0, 0, 0};
    for (int step = 0; step < 3; step++) {
        if (step == 2) { /* sequence 0's first three blocks move to unused ones after a copy */
            int32_t src[3] = {bt[0], bt[1], bt[2]}, dst[3], nd = 0;
            for (int32_t blk = p.n_blocks - 1; blk >= 0 && nd < 3; blk--)
                if (!used[blk])
                    dst[nd++] = blk;
            for (int s = 0; s < 2; s++) {
                sy_err err = {{0}};
                op_ok(sd[s], sd[s]->a->copy_blocks(sd[s]->attn->inst, src, dst, 3, &err), "copy_blocks", &err);
            }
            bt[0] = dst[0], bt[1] = dst[1], bt[2] = dst[2];
        }
        int32_t tok_start[S + 1] = {0};
        for (int s = 0; s < S; s++)
            tok_start[s + 1] = tok_start[s] + lens[step][s];
        const int32_t T = tok_start[S];
        const sy_attn_batch b = {.struct_size = sizeof b, .n_seqs = S, .n_tokens = T, .tok_start = tok_start,
                                 .ctx_len = ctx, .block_table = bt, .max_blocks = MB};
        const int64_t qc = (int64_t)p.n_heads * p.head_dim, kc = (int64_t)p.n_kv_heads * p.head_dim;
        float *q = rand_f32((size_t)(T * qc), 1.0f), *k = rand_f32((size_t)(T * kc), 1.0f);
        float *v = rand_f32((size_t)(T * kc), 1.0f);
        for (int layer = 0; layer < 2; layer++) {
            float *out[2];
            for (int s = 0; s < 2; s++) {
                sy_err err = {{0}};
                sy_tensor Q = dev_f32(sd[s], q, T, qc), K = dev_f32(sd[s], k, T, kc), Vt = dev_f32(sd[s], v, T, kc);
                sy_tensor O = dev_tensor(sd[s], SY_DTYPE_F32, T, qc);
                op_ok(sd[s], sd[s]->a->forward(sd[s]->attn->inst, layer, &b, &Q, &K, &Vt, &O, &err), "attention",
                      &err);
                out[s] = fetch(sd[s], &O);
                sy_tensor *ts[] = {&Q, &K, &Vt, &O};
                for (int i = 0; i < 4; i++)
                    sd[s]->d->free(sd[s]->dev->inst, ts[i]);
            }
            char cas[96];
            snprintf(cas, sizeof cas, "step %d layer %d: %d/%d heads d %d %s win %d%s", step, layer, p.n_heads,
                     p.n_kv_heads, p.head_dim, sy_dtype_name(ac->kv), ac->window,
                     ac->long_ctx == 1 ? " ctx 600" : ac->long_ctx == 2 ? " prefills" : "");
            compare(op, cas, out[1], out[0], (size_t)(T * qc), bound);
            free(out[0]), free(out[1]);
        }
        for (int s = 0; s < S; s++)
            ctx[s] += lens[step][s];
        free(q), free(k), free(v);
    }
}

static void test_attention_op(side *c, side *g, const attn_case *ac, const char *op, double bound)
{
    test_attention_op_sinks(c, g, ac, op, bound, NULL);
}

/*
 * gpt-oss's attention sinks on k_attend and through split-K's k_combine,
 * with GQA and per-layer windows, against attn cpu; layer 0's first sink
 * far above every score (its rows' weights nearly vanish, nothing
 * overflows). The tensor-core prefill kernel has none: prefill_kernel =
 * tensor-cores refuses such a problem, naming the sinks.
 */
static void test_attention_sinks(side *c, side *g, side *gt)
{
    static const attn_case cases[] = {
        {8, 2, 64, 0, SY_DTYPE_F32, 0}, {8, 2, 64, -7, SY_DTYPE_BF16, 0}, {8, 2, 64, 0, SY_DTYPE_F32, 1},
        {8, 2, 64, -200, SY_DTYPE_F32, 1}, {8, 2, 64, 0, SY_DTYPE_F32, 2},
    };
    float *sinks = rand_f32(2 * 8, 2.0f);
    sinks[0] = 30.0f;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        test_attention_op_sinks(c, g, &cases[i], "attention sinks", 1e-5, sinks);
    const sy_attn_problem p = {.struct_size = sizeof p, .n_layers = 2, .n_heads = 8, .n_kv_heads = 2, .head_dim = 64,
                               .v_head_dim = 64, .block_size = 16, .n_blocks = 8, .kv_dtype = SY_DTYPE_F32,
                               .scale = 0.125f, .sinks = sinks};
    sy_err err = {{0}};
    const int ok = !gt->a->supports(gt->attn->inst, &p, &err) && strstr(err.msg, "sinks") != NULL;
    checks++;
    failures += !ok;
    printf("%-4s attention tc  sinks refused with prefill_kernel = tensor-cores: %s\n", ok ? "ok" : "FAIL", err.msg);
    free(sinks);
}

/* k_attend (prefill_kernel = cuda-cores): F32 sums in another order than the CPU's. */
static void test_attention(side *c, side *g, const attn_case *ac)
{
    test_attention_op(c, g, ac, "attention", 1e-5);
}

/*
 * The tensor-core prefill kernel (prefill_kernel = tensor-cores: prepare
 * fails unless its self-check passed): the cases' prefill rows (sequences
 * of 16 tokens or more) on k_attend_tc beside decode rows and short chunks
 * on k_attend, against attn cpu within its bound (attn_plan.h
 * SYAT_TC_BOUND, 1e-4: bf16 hi + lo split products); then a problem it
 * does not take (head dim 256) refused by supports(), naming the head dim.
 */
static void test_attention_tc(side *c, side *gt)
{
    static const attn_case tc_cases[] = {
        {8, 2, 64, 0, SY_DTYPE_F32, 0},   {8, 2, 64, 24, SY_DTYPE_BF16, 0}, {32, 8, 128, 0, SY_DTYPE_BF16, 0},
        {16, 1, 128, 0, SY_DTYPE_F16, 0}, {4, 4, 64, 0, SY_DTYPE_F16, 0},   {8, 8, 128, 40, SY_DTYPE_F32, 0},
        {32, 4, 128, 0, SY_DTYPE_F32, 0}, {24, 8, 64, 0, SY_DTYPE_BF16, 0},
        /* 600- and 300-token prefills (10 and 5 tiles of 64 rows at group 1..4), then decode with split-K */
        {8, 2, 64, 0, SY_DTYPE_F32, 1},   {8, 2, 64, 200, SY_DTYPE_BF16, 1}, {32, 4, 128, 0, SY_DTYPE_BF16, 1},
        {8, 8, 128, 0, SY_DTYPE_F16, 1},
        /* prefill-only steps, then chunked prefills after cached positions */
        {8, 2, 64, 0, SY_DTYPE_F32, 2},   {32, 4, 128, 20, SY_DTYPE_BF16, 2}, {8, 8, 64, 0, SY_DTYPE_F16, 2},
    };
    for (size_t i = 0; i < sizeof tc_cases / sizeof tc_cases[0]; i++)
        test_attention_op(c, gt, &tc_cases[i], "attention tc", 1e-4);
    const sy_attn_problem p = {.struct_size = sizeof p, .n_layers = 1, .n_heads = 4, .n_kv_heads = 4, .head_dim = 256,
                               .v_head_dim = 256, .block_size = 16, .n_blocks = 8, .kv_dtype = SY_DTYPE_F32,
                               .scale = 0.0625f};
    sy_err err = {{0}};
    const int ok = !gt->a->supports(gt->attn->inst, &p, &err) && strstr(err.msg, "head_dim 256") != NULL;
    checks++;
    failures += !ok;
    printf("%-4s attention tc  head dim 256 refused with prefill_kernel = tensor-cores: %s\n", ok ? "ok" : "FAIL",
           err.msg);
}

/* ---------------------------------------------------------------- MoE */

static void test_moe(side *c, side *g, int scoring)
{
    const int32_t E = 8, K = 2, H = 256, F = 192, n = 13;
    sy_moe_problem p = {.struct_size = sizeof p, .n_layers = 1, .n_experts = E, .top_k = K, .hidden = H, .inter = F,
                        .scoring = scoring, .norm_topk_prob = 1, .routed_scaling_factor = scoring ? 2.5f : 1.0f,
                        .n_group = 0, .topk_group = 0, .weight_dtype = SY_DTYPE_BF16};
    sy_tensor gate[8], up[8], down[8];
    void *data[24];
    for (int e = 0; e < E; e++) {
        float *a = rand_f32((size_t)(F * H), 0.1f), *b = rand_f32((size_t)(F * H), 0.1f), *d = rand_f32((size_t)(H * F), 0.1f);
        data[3 * e] = as_dtype(a, (size_t)(F * H), SY_DTYPE_BF16);
        data[3 * e + 1] = as_dtype(b, (size_t)(F * H), SY_DTYPE_BF16);
        data[3 * e + 2] = as_dtype(d, (size_t)(H * F), SY_DTYPE_BF16);
        free(a), free(b), free(d);
        gate[e] = sy_tensor_2d(data[3 * e], SY_DTYPE_BF16, F, H);
        up[e] = sy_tensor_2d(data[3 * e + 1], SY_DTYPE_BF16, F, H);
        down[e] = sy_tensor_2d(data[3 * e + 2], SY_DTYPE_BF16, H, F);
    }
    float *x = rand_f32((size_t)(n * H), 1.0f), *logits = rand_f32((size_t)(n * E), 3.0f), *out[2];
    side *sd[2] = {c, g};
    for (int s = 0; s < 2; s++) {
        sy_err err = {{0}};
        if (!sd[s]->m->supports(sd[s]->moe->inst, &p, &err) || sd[s]->m->prepare(sd[s]->moe->inst, &p, &err) ||
            sd[s]->m->prepare_layer(sd[s]->moe->inst, 0, gate, up, down, NULL, &err))
            die(sd[s]->name, &err);
        sy_tensor X = dev_f32(sd[s], x, n, H), L = dev_f32(sd[s], logits, n, E), O = dev_tensor(sd[s], SY_DTYPE_F32, n, H);
        op_ok(sd[s], sd[s]->m->forward(sd[s]->moe->inst, 0, &X, &L, &O, &err), "moe", &err);
        out[s] = fetch(sd[s], &O);
        sy_tensor *ts[] = {&X, &L, &O};
        for (int i = 0; i < 3; i++)
            sd[s]->d->free(sd[s]->dev->inst, ts[i]);
    }
    compare("moe", scoring ? "8 experts top-2 sigmoid, bf16, 13 tokens" : "8 experts top-2 softmax, bf16, 13 tokens",
            out[1], out[0], (size_t)(n * H), 1e-5);
    free(out[0]), free(out[1]), free(x), free(logits);
    for (int i = 0; i < 24; i++)
        free(data[i]);
}

/*
 * moe cuda's tile variants against its default, bit for bit, on shapes that
 * no tile divides (hidden 200, inter 72) at decode (1 token) and prefill
 * (37 tokens); then three expert ranges summed against the whole layer.
 */
typedef int (*tile_candidates_fn)(void *inst, const char **names, int cap);

/* moe cuda's tensor-core tiles: mma.sync and wgmma (their names' prefixes, moe_tiles.c). */
static int is_tc_tile(const char *name)
{
    return strncmp(name, "mma", 3) == 0 || strncmp(name, "wgmma", 5) == 0;
}

/* moe cuda's block-scaled FP4 tiles (activations = nvfp4 on NVFP4 experts only): test_moe_fp4act. */
static int is_fp4_tile(const char *name)
{
    return strncmp(name, "fp4mma", 6) == 0;
}

static sy_plugin_inst *open_inst(sy_loader *ld, sy_host_ctx *host, sy_config *cfg, sy_plugin_kind kind,
                                 const char *spec, const char *device, const char *section);

typedef struct moe_case {
    int32_t E, K, H, F;
    sy_moe_problem p;
    sy_tensor gate[8], up[8], down[8];
    void *data[24];
    float *x, *logits;
} moe_case;

static void moe_case_init(moe_case *mc)
{
    *mc = (moe_case){.E = 8, .K = 2, .H = 200, .F = 72};
    mc->p = (sy_moe_problem){.struct_size = sizeof mc->p, .n_layers = 1, .n_experts = mc->E, .top_k = mc->K,
                             .hidden = mc->H, .inter = mc->F, .scoring = SY_MOE_SOFTMAX, .norm_topk_prob = 1,
                             .routed_scaling_factor = 1.0f, .weight_dtype = SY_DTYPE_BF16};
    const int64_t F = mc->F, H = mc->H;
    for (int e = 0; e < mc->E; e++) {
        float *a = rand_f32((size_t)(F * H), 0.1f), *b = rand_f32((size_t)(F * H), 0.1f), *d = rand_f32((size_t)(H * F), 0.1f);
        mc->data[3 * e] = as_dtype(a, (size_t)(F * H), SY_DTYPE_BF16);
        mc->data[3 * e + 1] = as_dtype(b, (size_t)(F * H), SY_DTYPE_BF16);
        mc->data[3 * e + 2] = as_dtype(d, (size_t)(H * F), SY_DTYPE_BF16);
        free(a), free(b), free(d);
        mc->gate[e] = sy_tensor_2d(mc->data[3 * e], SY_DTYPE_BF16, F, H);
        mc->up[e] = sy_tensor_2d(mc->data[3 * e + 1], SY_DTYPE_BF16, F, H);
        mc->down[e] = sy_tensor_2d(mc->data[3 * e + 2], SY_DTYPE_BF16, H, F);
    }
    mc->x = rand_f32((size_t)(37 * H), 1.0f);
    mc->logits = rand_f32((size_t)(37 * mc->E), 3.0f);
}

/* One forward of n tokens by moe instance mi holding experts [first, first + count); the output on the host. */
static float *moe_run(side *g, sy_plugin_inst *mi, const moe_case *mc, int n, int first, int count)
{
    const sy_moe_ops *m = mi->ops;
    sy_err err = {{0}};
    if (m->prepare(mi->inst, &mc->p, &err) ||
        (count < mc->E && m->set_expert_range(mi->inst, first, count, &err)) ||
        m->prepare_layer(mi->inst, 0, mc->gate + first, mc->up + first, mc->down + first, NULL, &err))
        die("moe cuda", &err);
    sy_tensor X = dev_f32(g, mc->x, n, mc->H), L = dev_f32(g, mc->logits, n, mc->E);
    sy_tensor O = dev_tensor(g, SY_DTYPE_F32, n, mc->H);
    op_ok(g, m->forward(mi->inst, 0, &X, &L, &O, &err), "moe", &err);
    float *out = fetch(g, &O);
    sy_tensor *ts[] = {&X, &L, &O};
    for (int i = 0; i < 3; i++)
        g->d->free(g->dev->inst, ts[i]);
    return out;
}

static void test_moe_tiles(sy_loader *ld, sy_host_ctx *host, side *g)
{
    moe_case mc;
    moe_case_init(&mc);
    tile_candidates_fn cands = NULL;
    *(void **)&cands = g->moe->plugin->desc->get_proc ? g->moe->plugin->desc->get_proc("tile_candidates") : NULL;
    const char *names[32];
    const int nv = cands ? cands(g->moe->inst, names, 32) : 0;
    checks++;
    if (nv < 2) {
        failures++;
        printf("FAIL moe tiles     moe cuda lists %d tile variants (get_proc(\"tile_candidates\")), expected several\n", nv);
    }
    static const int ns[] = {1, 37};
    for (int k = 0; k < 2; k++) {
        const int n = ns[k];
        float *ref = NULL;
        for (int v = 0; v < nv; v++) {
            if (is_tc_tile(names[v]) || is_fp4_tile(names[v]))
                continue; /* not bit-identical by design: test_moe_tc, test_moe_fp4act */
            sy_config *cfg = sy_config_new();
            char set[96];
            snprintf(set, sizeof set, "moe.tile=%s", names[v]);
            sy_err err = {{0}};
            if (!cfg || sy_config_set(cfg, set, &err))
                die("set-up", &err);
            sy_plugin_inst *mi = open_inst(ld, host, cfg, SY_KIND_MOE, "cuda", "cuda", "moe");
            float *out = moe_run(g, mi, &mc, n, 0, mc.E);
            sy_plugin_inst_destroy(mi);
            sy_config_free(cfg);
            if (v == 0) {
                ref = out;
                continue;
            }
            size_t diff = 0;
            for (size_t i = 0; i < (size_t)(n * mc.H); i++)
                diff += memcmp(&out[i], &ref[i], sizeof(float)) != 0;
            checks++;
            failures += diff != 0;
            printf("%-4s %-14s tile %-10s vs %-10s %3d tokens, hidden 200, inter 72: %zu of %d outputs differ in bits\n",
                   diff ? "FAIL" : "ok", "moe tiles", names[v], names[0], n, diff, n * mc.H);
            free(out);
        }
        free(ref);
    }
    /* Expert parallelism: [0, 3) + [3, 5) + [5, 8) of the experts, each routing among all 8. */
    const int cut[4] = {0, 3, 5, 8}, n = 37;
    float *whole = moe_run(g, g->moe, &mc, n, 0, mc.E);
    double *sum = calloc((size_t)(n * mc.H), sizeof(double));
    for (int r = 0; r < 3; r++) {
        sy_config *cfg = sy_config_new();
        sy_plugin_inst *mi = open_inst(ld, host, cfg, SY_KIND_MOE, "cuda", "cuda", "moe");
        float *part = moe_run(g, mi, &mc, n, cut[r], cut[r + 1] - cut[r]);
        for (size_t i = 0; i < (size_t)(n * mc.H); i++)
            sum[i] += part[i];
        free(part);
        sy_plugin_inst_destroy(mi);
        sy_config_free(cfg);
    }
    float *sumf = malloc(sizeof(float) * (size_t)(n * mc.H));
    for (size_t i = 0; i < (size_t)(n * mc.H); i++)
        sumf[i] = (float)sum[i];
    compare("moe ranges", "experts [0,3)+[3,5)+[5,8) of 8 vs all, 37 tok", sumf, whole, (size_t)(n * mc.H), 1e-5);
    free(sumf), free(sum), free(whole), free(mc.x), free(mc.logits);
    for (int i = 0; i < 24; i++)
        free(mc.data[i]);
}

/* ------------------------------------------- MoE: FP8 / NVFP4 experts, device routing */

/* One forward of n tokens through moe instance mi (prepared for p, layer 0) on side s; the output on the host. */
static float *moe_fwd(side *s, sy_plugin_inst *mi, const sy_moe_problem *p, const sy_tensor *gate, const sy_tensor *up,
                      const sy_tensor *down, const sy_tensor *bias, const float *x, const float *logits, int n)
{
    const sy_moe_ops *m = mi->ops;
    sy_err err = {{0}};
    if (!m->supports(mi->inst, p, &err) || m->prepare(mi->inst, p, &err) ||
        m->prepare_layer(mi->inst, 0, gate, up, down, bias, &err)) {
        fprintf(stderr, "test_cuda_ops: %s moe %s: %s\n", s->name, mi->plugin->desc->name, err.msg);
        failures++;
        return NULL;
    }
    sy_tensor X = dev_f32(s, x, n, p->hidden), L = dev_f32(s, logits, n, p->n_experts);
    sy_tensor O = dev_tensor(s, SY_DTYPE_F32, n, p->hidden);
    op_ok(s, m->forward(mi->inst, 0, &X, &L, &O, &err), "moe", &err);
    float *out = fetch(s, &O);
    sy_tensor *ts[] = {&X, &L, &O};
    for (int i = 0; i < 3; i++)
        s->d->free(s->dev->inst, ts[i]);
    return out;
}

/* Bit-for-bit equality of two outputs (NULL: the run failed, already counted). */
static void same_bits(const char *op, const char *cas, const float *a, const float *b, size_t n)
{
    if (!a || !b)
        return;
    size_t diff = 0;
    for (size_t i = 0; i < n; i++)
        diff += memcmp(&a[i], &b[i], sizeof(float)) != 0;
    checks++;
    failures += diff != 0;
    printf("%-4s %-14s %-44s %zu of %zu outputs differ in bits\n", diff ? "FAIL" : "ok", op, cas, diff, n);
}

typedef struct qmoe_case {
    const char *what;
    sy_dtype dt;
    int per_tensor; /* FP8: one scale per matrix, else 128 x 128 blocks */
} qmoe_case;

/*
 * FP8 (128x128 blocks, per-tensor) and NVFP4 experts (each expert its own
 * global scale): moe cuda against moe cpu (1e-5: same element values, F32
 * sums in another order) at decode and prefill; every tile variant gives
 * the default's bits; expert ranges add up to the whole layer.
 */
static void test_moe_quant(sy_loader *ld, sy_host_ctx *host, side *c, side *g, const qmoe_case *qc)
{
    const int32_t E = 8, K = 2, H = 256, F = 192;
    const int fp4 = qc->dt == SY_DTYPE_FP4_E2M1;
    sy_moe_problem p = {.struct_size = sizeof p, .n_layers = 1, .n_experts = E, .top_k = K, .hidden = H, .inter = F,
                        .scoring = SY_MOE_SOFTMAX, .norm_topk_prob = 1, .routed_scaling_factor = 1.0f,
                        .weight_dtype = qc->dt};
    qweight qw[24];
    sy_tensor gate[8], up[8], down[8];
    for (int e = 0; e < E; e++) {
        const float gl = fp4 ? 0.002f * (float)(1 + e % 3) : 1.0f;
        const int32_t gb0 = fp4 ? 1 : qc->per_tensor ? F : 128, gb1 = fp4 ? 16 : qc->per_tensor ? H : 128;
        const int32_t db0 = fp4 ? 1 : qc->per_tensor ? H : 128, db1 = fp4 ? 16 : qc->per_tensor ? F : 128;
        qw[3 * e] = make_qweight(qc->dt, F, H, gb0, gb1, gl);
        qw[3 * e + 1] = make_qweight(qc->dt, F, H, gb0, gb1, gl);
        qw[3 * e + 2] = make_qweight(qc->dt, H, F, db0, db1, gl);
        gate[e] = qw[3 * e].t, up[e] = qw[3 * e + 1].t, down[e] = qw[3 * e + 2].t;
    }
    const int n_max = 37;
    float *x = rand_f32((size_t)(n_max * H), 1.0f), *logits = rand_f32((size_t)(n_max * E), 3.0f);
    static const int ns[] = {1, 37};
    for (int k = 0; k < 2; k++) {
        const int n = ns[k];
        float *cpu = moe_fwd(c, c->moe, &p, gate, up, down, NULL, x, logits, n);
        float *gpu = moe_fwd(g, g->moe, &p, gate, up, down, NULL, x, logits, n);
        char cas[96];
        snprintf(cas, sizeof cas, "%s, %d tok", qc->what, n);
        if (cpu && gpu)
            compare("moe quant", cas, gpu, cpu, (size_t)(n * H), 1e-5);
        /* every tile variant against the default */
        tile_candidates_fn cands = NULL;
        *(void **)&cands = g->moe->plugin->desc->get_proc ? g->moe->plugin->desc->get_proc("tile_candidates") : NULL;
        const char *names[32];
        const int nv = cands ? cands(g->moe->inst, names, 32) : 0;
        for (int v = 1; v < nv; v++) {
            if (is_tc_tile(names[v]) || is_fp4_tile(names[v]))
                continue; /* test_moe_tc, test_moe_fp4act */
            sy_config *cfg = sy_config_new();
            char set[96];
            snprintf(set, sizeof set, "moe.tile=%s", names[v]);
            sy_err err = {{0}};
            if (!cfg || sy_config_set(cfg, set, &err))
                die("set-up", &err);
            sy_plugin_inst *mi = open_inst(ld, host, cfg, SY_KIND_MOE, "cuda", "cuda", "moe");
            float *o = moe_fwd(g, mi, &p, gate, up, down, NULL, x, logits, n);
            snprintf(cas, sizeof cas, "%s, %d tok, tile %s", qc->what, n, names[v]);
            same_bits("moe quant tile", cas, o, gpu, (size_t)(n * H));
            free(o);
            sy_plugin_inst_destroy(mi);
            sy_config_free(cfg);
        }
        free(cpu), free(gpu);
    }
    /* expert ranges [0, 3) + [3, 8) against the whole layer */
    const int n = 37;
    float *whole = moe_fwd(g, g->moe, &p, gate, up, down, NULL, x, logits, n);
    double *sum = calloc((size_t)(n * H), sizeof(double));
    const int cut[3] = {0, 3, 8};
    for (int r = 0; r < 2; r++) {
        sy_config *cfg = sy_config_new();
        sy_plugin_inst *mi = open_inst(ld, host, cfg, SY_KIND_MOE, "cuda", "cuda", "moe");
        const sy_moe_ops *m = mi->ops;
        sy_err err = {{0}};
        if (m->prepare(mi->inst, &p, &err) || m->set_expert_range(mi->inst, cut[r], cut[r + 1] - cut[r], &err) ||
            m->prepare_layer(mi->inst, 0, gate + cut[r], up + cut[r], down + cut[r], NULL, &err))
            die("moe cuda expert range", &err);
        sy_tensor X = dev_f32(g, x, n, H), L = dev_f32(g, logits, n, E), O = dev_tensor(g, SY_DTYPE_F32, n, H);
        op_ok(g, m->forward(mi->inst, 0, &X, &L, &O, &err), "moe", &err);
        float *part = fetch(g, &O);
        sy_tensor *ts[] = {&X, &L, &O};
        for (int i = 0; i < 3; i++)
            g->d->free(g->dev->inst, ts[i]);
        for (size_t i = 0; i < (size_t)(n * H); i++)
            sum[i] += part[i];
        free(part);
        sy_plugin_inst_destroy(mi);
        sy_config_free(cfg);
    }
    float *sumf = malloc(sizeof(float) * (size_t)(n * H));
    for (size_t i = 0; i < (size_t)(n * H); i++)
        sumf[i] = (float)sum[i];
    char cas[96];
    snprintf(cas, sizeof cas, "%s, experts [0,3)+[3,8) vs all", qc->what);
    if (whole)
        compare("moe quant rng", cas, sumf, whole, (size_t)(n * H), 1e-5);
    free(sumf), free(sum), free(whole), free(x), free(logits);
    for (int i = 0; i < 24; i++)
        free(qw[i].codes), free(qw[i].scales);
}

typedef struct route_case {
    const char *what;
    int32_t E, K, scoring, n_group, topk_group, norm, bias;
    float scale;
} route_case;

/*
 * routing = device against routing = host on the same layer: the same
 * experts and weights, so the same outputs bit for bit (the GEMMs do not
 * change), and both against moe cpu (1e-5). Logits: random and on a coarse
 * grid (ties between experts and groups); 70 tokens through max_tokens 32
 * (three passes).
 */
static void test_moe_routing(sy_loader *ld, sy_host_ctx *host, side *c, side *g, const route_case *rc)
{
    const int32_t E = rc->E, H = 64, F = 32, n = 70;
    sy_moe_problem p = {.struct_size = sizeof p, .n_layers = 1, .n_experts = E, .top_k = rc->K, .hidden = H,
                        .inter = F, .scoring = rc->scoring, .norm_topk_prob = rc->norm,
                        .routed_scaling_factor = rc->scale, .n_group = rc->n_group, .topk_group = rc->topk_group,
                        .weight_dtype = SY_DTYPE_BF16};
    sy_tensor *w = malloc(sizeof(sy_tensor) * 3 * (size_t)E);
    void **data = malloc(sizeof(void *) * 3 * (size_t)E);
    for (int i = 0; i < 3 * E; i++) {
        float *a = rand_f32((size_t)(F * H), 0.2f);
        data[i] = as_dtype(a, (size_t)(F * H), SY_DTYPE_BF16);
        free(a);
        w[i] = i < 2 * E ? sy_tensor_2d(data[i], SY_DTYPE_BF16, F, H) : sy_tensor_2d(data[i], SY_DTYPE_BF16, H, F);
    }
    float *bf = rand_f32((size_t)E, 0.05f);
    sy_tensor bias = sy_tensor_2d(bf, SY_DTYPE_F32, 1, E);
    bias.ndim = 1, bias.shape[0] = E, bias.stride[0] = 1;
    float *x = rand_f32((size_t)(n * H), 1.0f), *logits = rand_f32((size_t)(n * E), 3.0f);
    for (int i = n / 2 * E; i < n * E; i++) /* the second half on a grid: ties */
        logits[i] = floorf(logits[i]);
    const sy_tensor *b = rc->bias ? &bias : NULL;
    float *out[2];
    for (int r = 0; r < 2; r++) {
        sy_config *cfg = sy_config_new();
        sy_err err = {{0}};
        if (!cfg || sy_config_set(cfg, r ? "moe.routing=host" : "moe.routing=device", &err) ||
            sy_config_set(cfg, "moe.max_tokens=32", &err))
            die("set-up", &err);
        sy_plugin_inst *mi = open_inst(ld, host, cfg, SY_KIND_MOE, "cuda", "cuda", "moe");
        out[r] = moe_fwd(g, mi, &p, w, w + E, w + 2 * E, b, x, logits, n);
        sy_plugin_inst_destroy(mi);
        sy_config_free(cfg);
    }
    char cas[96];
    snprintf(cas, sizeof cas, "%s, %d tok", rc->what, n);
    same_bits("moe routing", cas, out[0], out[1], (size_t)(n * H));
    float *cpu = moe_fwd(c, c->moe, &p, w, w + E, w + 2 * E, b, x, logits, n);
    if (cpu && out[0])
        compare("moe routing", cas, out[0], cpu, (size_t)(n * H), 1e-5);
    free(cpu), free(out[0]), free(out[1]), free(x), free(logits), free(bf);
    for (int i = 0; i < 3 * E; i++)
        free(data[i]);
    free(data), free(w);
}

/* Expert scale layouts moe cuda cannot read are refused at prepare_layer, naming the expert and the matrix. */
static void test_moe_quant_refused(side *g)
{
    const int32_t E = 8, H = 256, F = 192;
    sy_moe_problem p = {.struct_size = sizeof p, .n_layers = 1, .n_experts = E, .top_k = 2, .hidden = H, .inter = F,
                        .scoring = SY_MOE_SOFTMAX, .norm_topk_prob = 1, .routed_scaling_factor = 1.0f,
                        .weight_dtype = SY_DTYPE_FP8_E4M3};
    static const struct {
        const char *what, *want;
        int32_t b0, b1; /* expert 5's down blocks */
    } cases[] = {
        {"FP8 expert 5 down [64, 128] among [128, 128]", "expert 5 down", 64, 128},
        {"FP8 expert 5 down scale block [128, 100]", "expert 5 down", 128, 100},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        qweight qw[24];
        sy_tensor gate[8], up[8], down[8];
        for (int e = 0; e < E; e++) {
            qw[3 * e] = make_qweight(p.weight_dtype, F, H, 128, 128, 1.0f);
            qw[3 * e + 1] = make_qweight(p.weight_dtype, F, H, 128, 128, 1.0f);
            qw[3 * e + 2] = e == 5 ? make_qweight(p.weight_dtype, H, F, cases[i].b0, cases[i].b1, 1.0f)
                                   : make_qweight(p.weight_dtype, H, F, 128, 128, 1.0f);
            gate[e] = qw[3 * e].t, up[e] = qw[3 * e + 1].t, down[e] = qw[3 * e + 2].t;
        }
        sy_err err = {{0}};
        int rc = g->m->prepare(g->moe->inst, &p, &err);
        if (!rc)
            rc = g->m->prepare_layer(g->moe->inst, 0, gate, up, down, NULL, &err);
        const int ok = rc != 0 && strstr(err.msg, cases[i].want) != NULL;
        checks++;
        failures += !ok;
        printf("%-4s %-14s %-44s %s\n", ok ? "ok" : "FAIL", "moe refused", cases[i].what, rc ? err.msg : "(accepted)");
        for (int k = 0; k < 24; k++)
            free(qw[k].codes), free(qw[k].scales);
    }
}

/*
 * moe cuda's tensor-core tiles (tile_candidates named mma* / wgmma*) on
 * BF16 (hidden 200, inter 72: no tile divides them), FP8 128x128 blocks
 * and NVFP4 experts, 1 and 37 tokens: prepare with `tile = NAME` must
 * succeed, which means the tile passed its self-check on this GPU (a
 * failed one is an error there), and the output must be within 1e-4
 * (SYMT_TC_BOUND) of the default fmaf tile's and of moe cpu's. A wgmma
 * tile on a GPU other than 9.0 must be refused at prepare, saying so.
 */
static void test_moe_tc(sy_loader *ld, sy_host_ctx *host, side *c, side *g)
{
    tile_candidates_fn cands = NULL;
    *(void **)&cands = g->moe->plugin->desc->get_proc ? g->moe->plugin->desc->get_proc("tile_candidates") : NULL;
    const char *names[32];
    const int nv = cands ? cands(g->moe->inst, names, 32) : 0;
    int n_tc = 0;
    for (int v = 0; v < nv; v++)
        n_tc += is_tc_tile(names[v]);
    checks++;
    failures += n_tc < 4;
    printf("%-4s %-14s %d tensor-core tiles among %d candidates (expected 3 mma + 2 wgmma)\n", n_tc < 4 ? "FAIL" : "ok",
           "moe tc tiles", n_tc, nv);
    static const struct {
        const char *what;
        sy_dtype dt;
        int32_t H, F;
    } layers[] = {
        {"BF16 h200 i72", SY_DTYPE_BF16, 200, 72},
        {"F8_E4M3 128x128", SY_DTYPE_FP8_E4M3, 256, 192},
        {"NVFP4", SY_DTYPE_FP4_E2M1, 256, 192},
    };
    for (size_t li = 0; li < sizeof layers / sizeof layers[0]; li++) {
        const int32_t E = 8, K = 2, H = layers[li].H, F = layers[li].F;
        const sy_dtype dt = layers[li].dt;
        const int fp4 = dt == SY_DTYPE_FP4_E2M1, q = dt != SY_DTYPE_BF16;
        sy_moe_problem p = {.struct_size = sizeof p, .n_layers = 1, .n_experts = E, .top_k = K, .hidden = H,
                            .inter = F, .scoring = SY_MOE_SOFTMAX, .norm_topk_prob = 1, .routed_scaling_factor = 1.0f,
                            .weight_dtype = dt};
        qweight qw[24];
        void *data[24] = {NULL};
        sy_tensor gate[8], up[8], down[8];
        for (int e = 0; e < E; e++) {
            for (int m = 0; m < 3; m++) {
                const int64_t rows = m < 2 ? F : H, cols = m < 2 ? H : F;
                sy_tensor *t = m == 0 ? &gate[e] : m == 1 ? &up[e] : &down[e];
                if (q) {
                    qw[3 * e + m] = make_qweight(dt, rows, cols, fp4 ? 1 : 128, fp4 ? 16 : 128,
                                                 fp4 ? 0.002f * (float)(1 + e % 3) : 1.0f);
                    *t = qw[3 * e + m].t;
                } else {
                    float *a = rand_f32((size_t)(rows * cols), 0.1f);
                    data[3 * e + m] = as_dtype(a, (size_t)(rows * cols), dt);
                    free(a);
                    *t = sy_tensor_2d(data[3 * e + m], dt, rows, cols);
                }
            }
        }
        float *x = rand_f32((size_t)(37 * H), 1.0f), *logits = rand_f32((size_t)(37 * E), 3.0f);
        static const int ns[] = {1, 37};
        for (int k = 0; k < 2; k++) {
            const int n = ns[k];
            float *cpu = moe_fwd(c, c->moe, &p, gate, up, down, NULL, x, logits, n);
            float *ref = moe_fwd(g, g->moe, &p, gate, up, down, NULL, x, logits, n);
            for (int v = 0; v < nv; v++) {
                if (!is_tc_tile(names[v]))
                    continue;
                sy_config *cfg = sy_config_new();
                char set[96], cas[96];
                snprintf(set, sizeof set, "moe.tile=%s", names[v]);
                sy_err err = {{0}};
                if (!cfg || sy_config_set(cfg, set, &err))
                    die("set-up", &err);
                sy_plugin_inst *mi = open_inst(ld, host, cfg, SY_KIND_MOE, "cuda", "cuda", "moe");
                snprintf(cas, sizeof cas, "%s, %d tok, tile %s", layers[li].what, n, names[v]);
                const int rc = mi->ops ? ((const sy_moe_ops *)mi->ops)->prepare(mi->inst, &p, &err) : -1;
                if (rc && strncmp(names[v], "wgmma", 5) == 0 && strstr(err.msg, "compute capability 9.0 only")) {
                    checks++;
                    printf("ok   %-14s %-44s refused off 9.0: %s\n", "moe tc", cas, err.msg);
                } else if (rc) {
                    checks++;
                    failures++;
                    printf("FAIL %-14s %-44s prepare (self-check): %s\n", "moe tc", cas, err.msg);
                } else {
                    float *o = moe_fwd(g, mi, &p, gate, up, down, NULL, x, logits, n);
                    if (o && ref)
                        compare("moe tc vs fmaf", cas, o, ref, (size_t)(n * H), 1e-4);
                    if (o && cpu)
                        compare("moe tc vs cpu", cas, o, cpu, (size_t)(n * H), 1e-4);
                    free(o);
                }
                sy_plugin_inst_destroy(mi);
                sy_config_free(cfg);
            }
            free(cpu), free(ref);
        }
        free(x), free(logits);
        for (int i = 0; i < 24; i++) {
            if (q)
                free(qw[i].codes), free(qw[i].scales);
            free(data[i]);
        }
    }
}

/*
 * W4A4 outputs of n tokens x h against a reference. The down GEMM's input
 * is quantised from silu(gate) x up, which two GEMMs summing in different
 * orders give within F32 rounding of each other: an element that close to
 * a rounding boundary goes to neighbouring codes, which moves that token's
 * outputs by up to ~1e-2 of their size. So: every token within bound
 * (relative to the layer's max |ref|), except at most one within 3e-2; a
 * wrong kernel misses on every token.
 */
static void compare_w4a4(const char *op, const char *cas, const float *got, const float *ref, int n, int h,
                         double bound)
{
    double mx = 0, worst = 0;
    int bad = 0, over = 0;
    for (int i = 0; i < n * h; i++) {
        bad |= !isfinite(got[i]) || !isfinite(ref[i]);
        mx = fmax(mx, fabs((double)ref[i]));
    }
    for (int t = 0; t < n; t++) {
        double d = 0;
        for (int i = 0; i < h; i++)
            d = fmax(d, fabs((double)got[t * h + i] - (double)ref[t * h + i]));
        d /= mx > 1e-30 ? mx : 1e-30;
        over += d > bound;
        worst = fmax(worst, d);
    }
    const int ok = !bad && n > 0 && (over == 0 || (over == 1 && n > 1 && worst <= 3e-2));
    checks++;
    failures += !ok;
    printf("%-4s %-14s %-44s rel %.2e  bound %.0e, %d of %d tokens over it%s\n", ok ? "ok" : "FAIL", op, cas, worst,
           bound, over, n, bad ? "  (NaN/Inf)" : "");
}

/*
 * A moe instance of plugin spec ("cpu" / "cuda") with activations = nvfp4
 * (mxfp4 when mx) and, unless NULL, tile = tile; *cfg_out its
 * configuration, to free after it.
 */
static sy_plugin_inst *open_fp4act(sy_loader *ld, sy_host_ctx *host, const char *spec, const char *tile, int mx,
                                   sy_config **cfg_out)
{
    sy_config *cfg = sy_config_new();
    char set[96];
    sy_err err = {{0}};
    snprintf(set, sizeof set, "moe.tile=%s", tile ? tile : "");
    /* SWITCHYARD_SET (run.sh) pins moe cpu's matmul = f32: the reference stays exact on a CPU with AMX. */
    if (!cfg || sy_config_apply_env(cfg, &err) ||
        sy_config_set(cfg, mx ? "moe.activations=mxfp4" : "moe.activations=nvfp4", &err) ||
        (tile && sy_config_set(cfg, set, &err)))
        die("set-up", &err);
    *cfg_out = cfg;
    return open_inst(ld, host, cfg, SY_KIND_MOE, spec, spec, "moe");
}

/*
 * [moe] activations = nvfp4 (W4A4) on NVFP4 experts (hidden 256, inter
 * 192), 1 and 37 tokens: moe cuda's default tile (fmaf on the dequantised
 * activations) against moe cpu in the same mode (1e-5: the same quantised
 * values; the quantiser's bytes are the host's; compare_w4a4 says why one
 * token may be further off), and each block-scaled
 * FP4 tile (tile = fp4mma...): on compute capability 12.0 its prepare must
 * pass the self-check (printed in the log as "tile fp4mma... self-check:
 * relative error ...") and its output be within 1e-4 of the default's and
 * of moe cpu's; elsewhere it must be refused for its compute capability.
 * The mode must change the outputs (against activations = f32). With mx
 * the same for activations = mxfp4 on MXFP4 experts (E8M0 scales per 32,
 * 2^-6 .. 2^-3): the fp4mma tiles' MX form (kind::mxf4).
 */
static void test_moe_fp4act(sy_loader *ld, sy_host_ctx *host, side *c, side *g, int mx)
{
    const char *fmt = mx ? "MXFP4" : "NVFP4";
    const int32_t E = 8, K = 2, H = 256, F = 192;
    sy_moe_problem p = {.struct_size = sizeof p, .n_layers = 1, .n_experts = E, .top_k = K, .hidden = H, .inter = F,
                        .scoring = SY_MOE_SOFTMAX, .norm_topk_prob = 1, .routed_scaling_factor = 1.0f,
                        .weight_dtype = SY_DTYPE_FP4_E2M1};
    qweight qw[24];
    sy_tensor gate[8], up[8], down[8];
    for (int e = 0; e < E; e++) {
        const float gl = 0.002f * (float)(1 + e % 3);
        for (int i = 0; i < 3; i++) {
            const int64_t rows = i < 2 ? F : H, cols = i < 2 ? H : F;
            qw[3 * e + i] = make_qweight(p.weight_dtype, rows, cols, 1, mx ? 32 : 16, mx ? 1.0f : gl);
            for (int64_t j = 0; mx && j < rows * cols / 32; j++) /* E8M0 2^-6 .. 2^-3 */
                qw[3 * e + i].scales[j] = (uint8_t)(121 + rand_byte() % 4);
            if (mx)
                qw[3 * e + i].t.scale_dtype = SY_DTYPE_E8M0;
        }
        gate[e] = qw[3 * e].t, up[e] = qw[3 * e + 1].t, down[e] = qw[3 * e + 2].t;
    }
    tile_candidates_fn cands = NULL;
    *(void **)&cands = g->moe->plugin->desc->get_proc ? g->moe->plugin->desc->get_proc("tile_candidates") : NULL;
    const char *names[32];
    const int nv = cands ? cands(g->moe->inst, names, 32) : 0;
    int n_fp4 = 0;
    for (int v = 0; v < nv; v++)
        n_fp4 += is_fp4_tile(names[v]);
    checks++;
    failures += n_fp4 != 3;
    printf("%-4s %-14s %d block-scaled FP4 tiles among %d candidates (expected 3)\n", n_fp4 != 3 ? "FAIL" : "ok",
           "moe fp4 tiles", n_fp4, nv);
    sy_config *cpu_cfg, *gpu_cfg, *tile_cfg;
    sy_plugin_inst *cpu_i = open_fp4act(ld, host, "cpu", NULL, mx, &cpu_cfg);
    sy_plugin_inst *gpu_i = open_fp4act(ld, host, "cuda", NULL, mx, &gpu_cfg);
    float *x = rand_f32((size_t)(37 * H), 1.0f), *logits = rand_f32((size_t)(37 * E), 3.0f);
    static const int ns[] = {1, 37};
    for (int k = 0; k < 2; k++) {
        const int n = ns[k];
        char cas[96];
        float *cpu = moe_fwd(c, cpu_i, &p, gate, up, down, NULL, x, logits, n);
        float *ref = moe_fwd(g, gpu_i, &p, gate, up, down, NULL, x, logits, n);
        float *f32 = moe_fwd(c, c->moe, &p, gate, up, down, NULL, x, logits, n);
        snprintf(cas, sizeof cas, "%s W4A4, %d tok, default tile", fmt, n);
        if (cpu && ref)
            compare_w4a4("moe w4a4", cas, ref, cpu, n, H, 1e-5);
        if (cpu && f32) { /* the mode is on: the f32 outputs are far from the W4A4 ones */
            double amax = 0, diff = 0;
            for (int i = 0; i < n * H; i++)
                amax = fmax(amax, fabs((double)cpu[i])), diff = fmax(diff, fabs((double)cpu[i] - (double)f32[i]));
            checks++;
            failures += !(diff > 1e-3 * amax);
            printf("%-4s %-14s %-44s rel %.2e from activations = f32 (must exceed 1e-3)\n",
                   diff > 1e-3 * amax ? "ok" : "FAIL", "moe w4a4", cas, diff / (amax > 0 ? amax : 1));
        }
        for (int v = 0; v < nv; v++) {
            if (!is_fp4_tile(names[v]))
                continue;
            sy_plugin_inst *mi = open_fp4act(ld, host, "cuda", names[v], mx, &tile_cfg);
            sy_err err = {{0}};
            snprintf(cas, sizeof cas, "%s W4A4, %d tok, tile %s", fmt, n, names[v]);
            const int rc = mi->ops ? ((const sy_moe_ops *)mi->ops)->prepare(mi->inst, &p, &err) : -1;
            if (rc && strstr(err.msg, "compute capability 12.0 only")) {
                checks++;
                printf("ok   %-14s %-44s refused off 12.0: %s\n", "moe fp4", cas, err.msg);
            } else if (rc) {
                checks++;
                failures++;
                printf("FAIL %-14s %-44s prepare (self-check): %s\n", "moe fp4", cas, err.msg);
            } else {
                float *o = moe_fwd(g, mi, &p, gate, up, down, NULL, x, logits, n);
                if (o && ref)
                    compare_w4a4("moe fp4 vs fmaf", cas, o, ref, n, H, 1e-4);
                if (o && cpu)
                    compare_w4a4("moe fp4 vs cpu", cas, o, cpu, n, H, 1e-4);
                free(o);
            }
            sy_plugin_inst_destroy(mi);
            sy_config_free(tile_cfg);
        }
        free(cpu), free(ref), free(f32);
    }
    /* An fp4 tile without the mode is refused, saying what it needs. */
    {
        sy_config *cfg = sy_config_new();
        sy_err err = {{0}};
        if (!cfg || sy_config_set(cfg, "moe.tile=fp4mma64x8x128", &err))
            die("set-up", &err);
        sy_plugin_inst *mi = open_inst(ld, host, cfg, SY_KIND_MOE, "cuda", "cuda", "moe");
        const int rc = mi->ops ? ((const sy_moe_ops *)mi->ops)->prepare(mi->inst, &p, &err) : -1;
        const int ok = rc && (strstr(err.msg, "activations = nvfp4") || strstr(err.msg, "12.0 only"));
        checks++;
        failures += !ok;
        printf("%-4s %-14s %-44s %s\n", ok ? "ok" : "FAIL", "moe fp4", "tile fp4mma64x8x128, activations = f32",
               rc ? err.msg : "(accepted)");
        sy_plugin_inst_destroy(mi);
        sy_config_free(cfg);
    }
    sy_plugin_inst_destroy(cpu_i);
    sy_plugin_inst_destroy(gpu_i);
    sy_config_free(cpu_cfg);
    sy_config_free(gpu_cfg);
    free(x), free(logits);
    for (int i = 0; i < 24; i++)
        free(qw[i].codes), free(qw[i].scales);
}

/* One forward of n tokens by mi with gpt-oss's expert biases (down_bias may be NULL); the output on the host. */
static float *moe_fwd_bias(side *s, sy_plugin_inst *mi, const sy_moe_problem *p, const sy_tensor *gate,
                           const sy_tensor *up, const sy_tensor *down, const sy_tensor *gb, const sy_tensor *ub,
                           const sy_tensor *db, const float *x, const float *logits, int n)
{
    const sy_moe_ops *m = mi->ops;
    sy_err err = {{0}};
    if (!m->supports(mi->inst, p, &err) || m->prepare(mi->inst, p, &err) ||
        m->prepare_layer(mi->inst, 0, gate, up, down, NULL, &err) ||
        (p->has_bias && m->prepare_layer_bias(mi->inst, 0, gb, ub, db, &err))) {
        fprintf(stderr, "test_cuda_ops: %s moe %s (gpt-oss): %s\n", s->name, mi->plugin->desc->name, err.msg);
        failures++;
        return NULL;
    }
    sy_tensor X = dev_f32(s, x, n, p->hidden), L = dev_f32(s, logits, n, p->n_experts);
    sy_tensor O = dev_tensor(s, SY_DTYPE_F32, n, p->hidden);
    op_ok(s, m->forward(mi->inst, 0, &X, &L, &O, &err), "moe", &err);
    float *out = fetch(s, &O);
    sy_tensor *ts[] = {&X, &L, &O};
    for (int i = 0; i < 3; i++)
        s->d->free(s->dev->inst, ts[i]);
    return out;
}

/*
 * gpt-oss's experts: MXFP4 (E2M1 codes, E8M0 scales per 32, decoded in the
 * tile load), the clamped SwiGLU (limit 1.5 against products of a few
 * units: both clamps bite) and the gate/up/down biases of
 * prepare_layer_bias (and down_bias NULL). moe cuda against moe cpu (1e-5:
 * the same element values, F32 sums in another order, expf against the
 * CPU's vector exp), with routing = host and device; every CUDA-core tile
 * gives the default's bits.
 */
static void test_moe_gptoss(sy_loader *ld, sy_host_ctx *host, side *c, side *g)
{
    const int32_t E = 8, K = 2, H = 256, F = 192;
    qweight qw[24];
    sy_tensor gate[8], up[8], down[8], gbt[8], ubt[8], dbt[8];
    float *gb = rand_f32((size_t)(E * F), 1.0f), *ub = rand_f32((size_t)(E * F), 1.0f);
    float *db = rand_f32((size_t)(E * H), 1.0f);
    for (int e = 0; e < E; e++) {
        for (int i = 0; i < 3; i++) {
            const int64_t rows = i < 2 ? F : H, cols = i < 2 ? H : F;
            qw[3 * e + i] = make_qweight(SY_DTYPE_FP4_E2M1, rows, cols, 1, 32, 1.0f);
            for (int64_t j = 0; j < rows * cols / 32; j++) /* E8M0 2^-6 .. 2^-3 */
                qw[3 * e + i].scales[j] = (uint8_t)(121 + rand_byte() % 4);
            qw[3 * e + i].t.scale_dtype = SY_DTYPE_E8M0;
        }
        gate[e] = qw[3 * e].t, up[e] = qw[3 * e + 1].t, down[e] = qw[3 * e + 2].t;
        gbt[e] = sy_tensor_2d(gb + e * F, SY_DTYPE_F32, 1, F);
        ubt[e] = sy_tensor_2d(ub + e * F, SY_DTYPE_F32, 1, F);
        dbt[e] = sy_tensor_2d(db + e * H, SY_DTYPE_F32, 1, H);
    }
    const int n_max = 37;
    float *x = rand_f32((size_t)(n_max * H), 1.0f), *logits = rand_f32((size_t)(n_max * E), 3.0f);
    static const struct {
        const char *what;
        int act, bias; /* bias 2: down_bias NULL */
    } cases[] = {
        {"MXFP4 swiglu-clamp, biases", SY_MOE_ACT_SWIGLU_CLAMP, 1},
        {"MXFP4 swiglu-clamp, no down bias", SY_MOE_ACT_SWIGLU_CLAMP, 2},
        {"MXFP4 silu, no biases", SY_MOE_ACT_SILU, 0},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const sy_moe_problem p = {.struct_size = sizeof p, .n_layers = 1, .n_experts = E, .top_k = K, .hidden = H,
                                  .inter = F, .scoring = SY_MOE_SOFTMAX, .norm_topk_prob = 1,
                                  .routed_scaling_factor = 1.0f, .weight_dtype = SY_DTYPE_FP4_E2M1,
                                  .activation = cases[ci].act, .swiglu_alpha = 1.702f, .swiglu_limit = 1.5f,
                                  .has_bias = cases[ci].bias != 0};
        const sy_tensor *dbp = cases[ci].bias == 1 ? dbt : NULL;
        static const int ns[] = {1, 37};
        for (int k = 0; k < 2; k++) {
            const int n = ns[k];
            float *cpu = moe_fwd_bias(c, c->moe, &p, gate, up, down, gbt, ubt, dbp, x, logits, n);
            float *gpu = moe_fwd_bias(g, g->moe, &p, gate, up, down, gbt, ubt, dbp, x, logits, n);
            char cas[112];
            snprintf(cas, sizeof cas, "%s, %d tok", cases[ci].what, n);
            if (cpu && gpu)
                compare("moe gpt-oss", cas, gpu, cpu, (size_t)(n * H), 1e-5);
            tile_candidates_fn cands = NULL;
            *(void **)&cands = g->moe->plugin->desc->get_proc ? g->moe->plugin->desc->get_proc("tile_candidates") : NULL;
            const char *names[32];
            const int nv = cands ? cands(g->moe->inst, names, 32) : 0;
            for (int v = 0; v < nv; v++) { /* v = 0 with routing = device; the other CUDA-core tiles as they are */
                if (is_tc_tile(names[v]) || is_fp4_tile(names[v]))
                    continue;
                sy_config *cfg = sy_config_new();
                char set[96];
                if (v)
                    snprintf(set, sizeof set, "moe.tile=%s", names[v]);
                else
                    snprintf(set, sizeof set, "moe.routing=device");
                sy_err err = {{0}};
                if (!cfg || sy_config_set(cfg, set, &err))
                    die("set-up", &err);
                sy_plugin_inst *mi = open_inst(ld, host, cfg, SY_KIND_MOE, "cuda", "cuda", "moe");
                float *o = moe_fwd_bias(g, mi, &p, gate, up, down, gbt, ubt, dbp, x, logits, n);
                snprintf(cas, sizeof cas, "%s, %d tok, %s", cases[ci].what, n, v ? names[v] : "routing=device");
                same_bits("moe gpt-oss", cas, o, gpu, (size_t)(n * H));
                free(o);
                sy_plugin_inst_destroy(mi);
                sy_config_free(cfg);
            }
            free(cpu), free(gpu);
        }
    }
    free(x), free(logits), free(gb), free(ub), free(db);
    for (int i = 0; i < 24; i++)
        free(qw[i].codes), free(qw[i].scales);
}

static void test_moe_quant_routing(sy_loader *ld, sy_host_ctx *host, side *c, side *g)
{
    test_moe_quant_refused(g);
    static const qmoe_case qcases[] = {
        {"F8_E4M3 128x128 scales", SY_DTYPE_FP8_E4M3, 0},
        {"F8_E4M3 per-tensor scale", SY_DTYPE_FP8_E4M3, 1},
        {"NVFP4, per-expert global", SY_DTYPE_FP4_E2M1, 0},
    };
    for (size_t i = 0; i < sizeof qcases / sizeof qcases[0]; i++)
        test_moe_quant(ld, host, c, g, &qcases[i]);
    test_moe_gptoss(ld, host, c, g);
    static const route_case rcases[] = {
        {"Mixtral 8 top-2 softmax", 8, 2, SY_MOE_SOFTMAX, 0, 0, 1, 0, 1.0f},
        {"Qwen2 60 top-4 softmax, no norm", 60, 4, SY_MOE_SOFTMAX, 0, 0, 0, 0, 1.0f},
        {"DeepSeek-V2 64 top-6 softmax 8/3 groups", 64, 6, SY_MOE_SOFTMAX, 8, 3, 0, 0, 16.0f},
        {"DeepSeek-V3 256 top-8 sigmoid 8/4, bias", 256, 8, SY_MOE_SIGMOID, 8, 4, 1, 1, 2.5f},
        {"GLM 160 top-8 sigmoid, bias", 160, 8, SY_MOE_SIGMOID, 1, 1, 1, 1, 2.5f},
    };
    for (size_t i = 0; i < sizeof rcases / sizeof rcases[0]; i++)
        test_moe_routing(ld, host, c, g, &rcases[i]);
}

/* ------------------------------------------------------------- set-up */

static sy_plugin_inst *open_inst(sy_loader *ld, sy_host_ctx *host, sy_config *cfg, sy_plugin_kind kind,
                                 const char *spec, const char *device, const char *section)
{
    sy_plugin *p = NULL;
    sy_plugin_inst *pi = NULL;
    sy_err err = {{0}};
    if (sy_loader_resolve(ld, kind, spec, device, &host->api, &p, &err) ||
        sy_plugin_create(p, &host->api, cfg, section, &pi, &err)) {
        char what[128];
        snprintf(what, sizeof what, "%s plugin %s", sy_kind_name(kind), spec);
        die(what, &err);
    }
    printf("loaded %-6s %-10s %s\n", sy_kind_name(kind), pi->plugin->desc->name, pi->plugin->path);
    return pi;
}

/* ------------------------------------------------- recorded steps (graph ops) */

/* One check with its message (graph ops: pass/fail lines like compare's). */
static void expect(int ok, const char *what, const char *detail)
{
    checks++;
    failures += !ok;
    printf("%-4s graphs         %s%s%s\n", ok ? "ok" : "FAIL", what, detail && *detail ? ": " : "", detail ? detail : "");
}

/* embed(ids) -> rmsnorm -> linear on side s: the chain a recording holds. */
static int chain(side *s, const sy_tensor *T, const sy_tensor *W, const sy_tensor *L, const int32_t *ids, int64_t n,
                 sy_tensor *e, sy_tensor *o, sy_err *err)
{
    void *di = s->dev->inst;
    int rc;
    if ((rc = s->d->embed(di, T, ids, n, e, err)) || (rc = s->d->rmsnorm(di, e, W, 1e-5f, e, err)))
        return rc;
    return s->d->linear(di, e, L, NULL, o, err);
}

/*
 * device cuda with graphs = on: a chain recorded once, then replayed after the
 * pinned ids changed, equals the eager chain on the new ids bit for bit and
 * the CPU's within 2e-5; while recording, download, synchronize and a buffer
 * that would grow refuse, naming themselves; a recording broken by a copy
 * from pageable memory makes graph_end fail, and eager ops work afterwards
 * (no CUDA error left behind).
 */
static void test_graphs(sy_loader *ld, sy_host_ctx *host, side *c)
{
    sy_config *cfg = sy_config_new();
    sy_err err = {{0}};
    if (!cfg || sy_config_set(cfg, "device.graphs=on", &err))
        die("graphs set-up", &err);
    side g = {.name = "cuda (graphs = on)"};
    g.dev = open_inst(ld, host, cfg, SY_KIND_DEVICE, "cuda", NULL, "device");
    g.d = g.dev->ops;
    const sy_device_ops *d = g.d;
    void *di = g.dev->inst;
    if (d->struct_size < offsetof(sy_device_ops, graph_free) + sizeof d->graph_free || !d->host_alloc ||
        !d->graph_begin || !d->graph_end || !d->graph_launch || !d->graph_free) {
        expect(0, "device cuda has the graph ops", "missing");
        sy_plugin_inst_destroy(g.dev);
        sy_config_free(cfg);
        return;
    }
    const int64_t n = 8, H = 256, V = 1000, M = 300;
    float *tbl = rand_f32((size_t)(V * H), 1.0f), *wn = rand_f32((size_t)H, 1.0f), *wl = rand_f32((size_t)(M * H), 0.1f);
    void *tbl16 = as_dtype(tbl, (size_t)(V * H), SY_DTYPE_BF16), *wl16 = as_dtype(wl, (size_t)(M * H), SY_DTYPE_BF16);
    int32_t *ids = d->host_alloc(di, sizeof(int32_t) * (size_t)n, &err);
    if (!ids)
        die("host_alloc", &err);
    for (int64_t i = 0; i < n; i++)
        ids[i] = (int32_t)((i * 7919 + 3) % V);
    side *sd[2] = {c, &g};
    sy_tensor T[2], W[2], L[2], e[2], o[2];
    for (int k = 0; k < 2; k++) {
        T[k] = weight(sd[k], "embed", tbl16, SY_DTYPE_BF16, 2, V, H);
        W[k] = weight(sd[k], "norm", wn, SY_DTYPE_F32, 1, 1, H);
        L[k] = weight(sd[k], "proj", wl16, SY_DTYPE_BF16, 2, M, H);
        e[k] = dev_tensor(sd[k], SY_DTYPE_F32, n, H);
        o[k] = dev_tensor(sd[k], SY_DTYPE_F32, n, M);
    }
    /* Eager first: every scratch buffer grows to this shape. */
    op_ok(&g, chain(&g, &T[1], &W[1], &L[1], ids, n, &e[1], &o[1], &err), "eager chain", &err);
    free(fetch(&g, &o[1]));

    void *graph = NULL;
    int rc = d->graph_begin(di, &err);
    expect(rc == SY_OK, "graph_begin", rc ? err.msg : "");
    if (!rc) {
        rc = chain(&g, &T[1], &W[1], &L[1], ids, n, &e[1], &o[1], &err);
        expect(rc == SY_OK, "the chain records", rc ? err.msg : "");
        float tmp[4];
        sy_err e2 = {{0}};
        const int dl = d->download(di, tmp, &o[1], sizeof tmp, &e2);
        expect(dl != SY_OK && strstr(e2.msg, "download") && strstr(e2.msg, "recorded"), "download refused while recording",
               e2.msg);
        const int sy = d->synchronize(di, &e2);
        expect(sy != SY_OK && strstr(e2.msg, "synchronize"), "synchronize refused while recording", e2.msg);
        rc = d->graph_end(di, &graph, &err);
        expect(rc == SY_OK && graph, "graph_end", rc ? err.msg : "");
    }
    if (graph) {
        for (int64_t i = 0; i < n; i++) /* new ids in the pinned array: the replay must read them */
            ids[i] = (int32_t)((i * 104729 + 11) % V);
        rc = d->graph_launch(di, graph, &err);
        expect(rc == SY_OK, "graph_launch", rc ? err.msg : "");
        float *replayed = fetch(&g, &o[1]);
        op_ok(&g, chain(&g, &T[1], &W[1], &L[1], ids, n, &e[1], &o[1], &err), "eager chain (new ids)", &err);
        float *eager = fetch(&g, &o[1]);
        op_ok(c, chain(c, &T[0], &W[0], &L[0], ids, n, &e[0], &o[0], &err), "cpu chain", &err);
        float *cpu = fetch(c, &o[0]);
        expect(memcmp(replayed, eager, sizeof(float) * (size_t)(n * M)) == 0, "replay = eager on the new ids, bit for bit",
               "");
        compare("graph replay", "embed+rmsnorm+linear bf16, 8 x 256 -> 300", replayed, cpu, (size_t)(n * M), 2e-5);
        free(replayed), free(eager), free(cpu);
        d->graph_free(di, graph);
    }
    /* Growth refused while recording: a linear over more rows than the scratch holds. */
    sy_tensor ebig = dev_tensor(&g, SY_DTYPE_F32, 64, H), obig = dev_tensor(&g, SY_DTYPE_F32, 64, M);
    if (!d->graph_begin(di, &err)) {
        rc = d->linear(di, &ebig, &L[1], NULL, &obig, &err);
        expect(rc != SY_OK && strstr(err.msg, "cannot grow"), "scratch growth refused while recording", err.msg);
        graph = NULL;
        if (!d->graph_end(di, &graph, &err) && graph)
            d->graph_free(di, graph);
    }
    /* A copy from pageable memory while recording (what the engine avoids with host_alloc): whatever CUDA makes
     * of it (the recording refused, or a copy of the bytes of the moment), nothing may be left behind for the
     * eager ops after it. */
    int32_t pageable[8];
    memcpy(pageable, ids, sizeof pageable);
    if (!d->graph_begin(di, &err)) {
        sy_err e3 = {{0}};
        const int erc = d->embed(di, &T[1], pageable, n, &e[1], &e3);
        graph = NULL;
        rc = d->graph_end(di, &graph, &err);
        printf("note graphs         a pageable copy while recording: embed %s, graph_end %s\n",
               erc ? e3.msg : "ok", rc ? err.msg : "ok");
        if (!rc && graph)
            d->graph_free(di, graph);
    }
    rc = chain(&g, &T[1], &W[1], &L[1], ids, n, &e[1], &o[1], &err);
    expect(rc == SY_OK, "eager ops after failed recordings", rc ? err.msg : "");
    free(fetch(&g, &o[1]));
    for (int k = 0; k < 2; k++) {
        sy_tensor *ts[] = {&e[k], &o[k]};
        for (size_t i = 0; i < 2; i++)
            sd[k]->d->free(sd[k]->dev->inst, ts[i]);
        sd[k]->d->release_weight(sd[k]->dev->inst, &T[k]);
        sd[k]->d->release_weight(sd[k]->dev->inst, &W[k]);
        sd[k]->d->release_weight(sd[k]->dev->inst, &L[k]);
    }
    d->free(di, &ebig);
    d->free(di, &obig);
    d->host_free(di, ids);
    free(tbl), free(wn), free(wl), free(tbl16), free(wl16);
    sy_plugin_inst_destroy(g.dev);
    sy_config_free(cfg);
}

/* ---------------------------------------------------------- argmax (greedy picks) */

/* The greedy rule (plugin.h, sy_greedy_pick): the loop's pick. */
static int32_t ref_pick(const float *x, int64_t n)
{
    int32_t best = 0;
    for (int64_t j = 1; j < n; j++)
        if (x[j] > x[best])
            best = (int32_t)j;
    return best;
}

/*
 * Rows of [R, V] with planted cases per row (r mod 8): a tie far apart, NaN
 * at column 0, NaNs around a planted maximum, all NaN but column 0, -0
 * before +0 as the maximum, +inf twice, all NaN, random; grid: values on a
 * coarse grid (ties everywhere). The CUDA ids and values must equal the
 * CPU plugin's and the loop's exactly.
 */
static void test_argmax_case(side *c, side *g, int64_t R, int64_t V, int grid)
{
    float *x = rand_f32((size_t)(R * V), 4.0f);
    for (int64_t r = 0; r < R; r++) {
        float *row = x + r * V;
        const int64_t a = V / 3, b = V - 1 - V / 5;
        if (grid) {
            for (int64_t j = 0; j < V; j++)
                row[j] = floorf(row[j]);
            continue;
        }
        switch (r % 8) {
        case 0: row[a] = row[b] = 9.0f; break;
        case 1: row[0] = NAN; row[b] = 9.0f; break;
        case 2:
            for (int64_t j = 1; j < V; j += 7)
                row[j] = NAN;
            row[b] = 9.0f;
            break;
        case 3:
            for (int64_t j = 1; j < V; j++)
                row[j] = NAN;
            break;
        case 4:
            for (int64_t j = 0; j < V; j++)
                row[j] = -1.0f - fabsf(row[j]);
            row[a] = -0.0f;
            row[b] = 0.0f;
            break;
        case 5: row[a] = row[b] = INFINITY; break;
        case 6:
            for (int64_t j = 0; j < V; j++)
                row[j] = NAN;
            break;
        default: break;
        }
    }
    side *sd[2] = {c, g};
    int32_t *ids[2];
    float *vals[2];
    for (int k = 0; k < 2; k++) {
        side *s = sd[k];
        ids[k] = malloc(sizeof(int32_t) * (size_t)R);
        vals[k] = malloc(sizeof(float) * (size_t)R);
        sy_err err = {{0}};
        sy_tensor X = dev_f32(s, x, R, V);
        if (s->d->struct_size < offsetof(sy_device_ops, argmax) + sizeof s->d->argmax || !s->d->argmax) {
            fprintf(stderr, "test_cuda_ops: %s has no argmax op\n", s->name);
            failures++;
            memset(ids[k], 0xff, sizeof(int32_t) * (size_t)R);
        } else {
            op_ok(s, s->d->argmax(s->dev->inst, &X, ids[k], vals[k], &err), "argmax", &err);
        }
        s->d->free(s->dev->inst, &X);
    }
    int64_t wrong = 0, first = -1;
    for (int64_t r = 0; r < R; r++) {
        const int32_t want = ref_pick(x + r * V, V);
        const float wv = x[r * V + want];
        for (int k = 0; k < 2; k++)
            if (ids[k][r] != want || !(vals[k][r] == wv || (vals[k][r] != vals[k][r] && wv != wv))) {
                wrong++;
                first = first < 0 ? r : first;
            }
    }
    char cas[64];
    snprintf(cas, sizeof cas, "[%lld, %lld] %s", (long long)R, (long long)V, grid ? "grid ties" : "ties, NaN, +-0, inf");
    checks++;
    failures += wrong > 0;
    printf("%-4s %-14s %-44s %lld wrong rows", wrong ? "FAIL" : "ok", "argmax", cas, (long long)wrong);
    if (wrong)
        printf(" (row %lld: cpu %d cuda %d, loop %d)", (long long)first, ids[0][first], ids[1][first],
               ref_pick(x + first * V, V));
    printf("\n");
    for (int k = 0; k < 2; k++)
        free(ids[k]), free(vals[k]);
    free(x);
}

static void test_argmax(side *c, side *g)
{
    test_argmax_case(c, g, 8, 152064, 0);
    test_argmax_case(c, g, 24, 37, 0);
    test_argmax_case(c, g, 3, 1, 0);
    test_argmax_case(c, g, 128, 1000, 1);
    test_argmax_case(c, g, 2, 262144, 1);
}

/* ---------------------------------------------------------- sample (sampled picks) */

/*
 * The sample op of the CUDA device against the CPU device's (whose ids are
 * the host sampler's bit for bit, make check shows). Per row its own
 * temperature (0 included), top_k, top_p, min_p and uniform. The GPU's expf
 * and its tree sums differ from the host's in the last bits, which moves a
 * draw only when u * total falls that close to a boundary: random rows must
 * agree on at least 99% of the ids the GPU returns, grid rows (coarse,
 * tied probabilities) and temperature-0 rows on all of them. A row with more
 * candidates to sort than fit on chip must come back -1 (the host finishes
 * it); -1 elsewhere is counted, not failed. kind: 0 random, 1 grid, 2 flat.
 */
static void test_sample_case(side *c, side *g, int64_t R, int64_t V, int kind)
{
    static const float temps[] = {0.0f, 0.6f, 1.0f, 1.5f, 0.8f};
    static const float top_ps[] = {1.0f, 0.95f, 0.5f};
    static const float min_ps[] = {0.0f, 0.05f};
    static const int32_t top_ks[] = {0, 5, 50, 1000};
    float *x = rand_f32((size_t)(R * V), kind == 1 ? 8.0f : 4.0f);
    sy_sample_row *rows = malloc(sizeof(sy_sample_row) * (size_t)R);
    for (int64_t r = 0; r < R; r++) {
        float *row = x + r * V;
        if (kind == 1)
            for (int64_t j = 0; j < V; j++)
                row[j] = floorf(row[j]);
        rows[r] = (sy_sample_row){.struct_size = sizeof(sy_sample_row),
                                  .temperature = temps[r % 5],
                                  .top_p = top_ps[r % 3],
                                  .min_p = min_ps[(r / 3) % 2],
                                  .top_k = top_ks[(r / 2) % 4] < V ? top_ks[(r / 2) % 4] : 0,
                                  .u = 0.5 * (1.0 + (double)frand())};
        if (kind == 2) { /* flat: every token a candidate and top_p cuts, so they must be sorted: too many */
            for (int64_t j = 0; j < V; j++)
                row[j] = 0.0f;
            rows[r].temperature = 1.0f;
            rows[r].top_p = 0.9f;
            rows[r].top_k = 0;
            rows[r].min_p = 0.0f;
        }
    }
    side *sd[2] = {c, g};
    int32_t *ids[2];
    for (int k = 0; k < 2; k++) {
        side *s = sd[k];
        ids[k] = malloc(sizeof(int32_t) * (size_t)R);
        sy_err err = {{0}};
        sy_tensor X = dev_f32(s, x, R, V);
        if (s->d->struct_size < offsetof(sy_device_ops, sample) + sizeof s->d->sample || !s->d->sample) {
            fprintf(stderr, "test_cuda_ops: %s has no sample op\n", s->name);
            failures++;
            memset(ids[k], 0xff, sizeof(int32_t) * (size_t)R);
        } else {
            op_ok(s, s->d->sample(s->dev->inst, &X, rows, ids[k], &err), "sample", &err);
        }
        s->d->free(s->dev->inst, &X);
    }
    int64_t same = 0, to_host = 0, differ = 0, strict_differ = 0, first = -1;
    for (int64_t r = 0; r < R; r++) {
        if (ids[1][r] == -1) {
            to_host++;
            continue;
        }
        if (ids[1][r] == ids[0][r]) {
            same++;
            continue;
        }
        differ++;
        strict_differ += rows[r].temperature <= 0.0f || kind == 1;
        first = first < 0 ? r : first;
    }
    const int64_t done = same + differ;
    const int bad = kind == 2 ? to_host != R
                              : strict_differ > 0 || (double)differ > 0.01 * (double)(done > 0 ? done : 1) || done == 0;
    char cas[64];
    snprintf(cas, sizeof cas, "[%lld, %lld] %s", (long long)R, (long long)V,
             kind == 2 ? "flat, top_p: -1 expected" : kind == 1 ? "grid ties" : "random");
    checks++;
    failures += bad;
    printf("%-4s %-14s %-44s %lld same, %lld differ, %lld left to the host (-1)", bad ? "FAIL" : "ok", "sample", cas,
           (long long)same, (long long)differ, (long long)to_host);
    if (first >= 0)
        printf(" (row %lld: T %g top_k %d top_p %g: cpu %d cuda %d)", (long long)first,
               (double)rows[first].temperature, rows[first].top_k, (double)rows[first].top_p, ids[0][first],
               ids[1][first]);
    printf("\n");
    for (int k = 0; k < 2; k++)
        free(ids[k]);
    free(rows);
    free(x);
}

static void test_sample(side *c, side *g)
{
    test_sample_case(c, g, 200, 152064, 0);
    test_sample_case(c, g, 400, 1000, 0);
    test_sample_case(c, g, 24, 37, 0);
    test_sample_case(c, g, 3, 1, 0);
    test_sample_case(c, g, 200, 3000, 1);
    test_sample_case(c, g, 2, 262144, 2);
}

/* ------------------------------------------------- ops from another thread */

typedef struct thread_job {
    side *c, *g;
    const attn_case *ac;
} thread_job;

static void *thread_main(void *arg)
{
    thread_job *j = arg;
    test_glue(j->c, j->g);
    test_linear(j->c, j->g, 2e-5);
    test_attention(j->c, j->g, j->ac);
    return NULL;
}

/*
 * The device and attention ops called from a thread that never chose a CUDA
 * device, as serve's engine thread calls instances the main thread created:
 * each op makes its instance's GPU current first (sycuda.h syc_enter). On a
 * one-GPU machine that thread is on the right GPU anyway, so this checks the
 * cross-thread path runs and stays right, not the GPU it picks.
 */
static void test_other_thread(side *c, side *g, const attn_case *ac)
{
    thread_job j = {c, g, ac};
    pthread_t t;
    if (pthread_create(&t, NULL, thread_main, &j) != 0) {
        printf("FAIL other thread: pthread_create\n");
        failures++;
        return;
    }
    pthread_join(t, NULL);
    printf("ops from a second thread: done (comparisons above)\n");
}

int main(int argc, char **argv)
{
    const char *dir = getenv("SY_PLUGIN_DIR"), *attn = "auto";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--plugin-dir") == 0)
            dir = argv[i + 1];
        else if (strcmp(argv[i], "--attention") == 0)
            attn = argv[i + 1];
        else {
            fprintf(stderr, "usage: test_cuda_ops [--plugin-dir DIR] [--attention NAME]\n");
            return 2;
        }
    }
    if (!dir) {
        fprintf(stderr, "test_cuda_ops: no --plugin-dir and SY_PLUGIN_DIR is unset\n");
        return 2;
    }
    sy_loader *ld = sy_loader_new(dir, NULL);
    sy_config *cfg = sy_config_new(), *cfg_round = sy_config_new(), *cfg_cc = sy_config_new(), *cfg_tc = sy_config_new();
    sy_err err = {{0}};
    /* SWITCHYARD_SET (run.sh) pins the cpu reference's matmul = f32 (the cuda plugins do not declare it). */
    if (!ld || !cfg || !cfg_round || !cfg_cc || !cfg_tc || sy_config_apply_env(cfg, &err) ||
        sy_config_set(cfg_round, "device.linear=round", &err) ||
        sy_config_set(cfg_cc, "attention.prefill_kernel=cuda-cores", &err) ||
        sy_config_set(cfg_tc, "attention.prefill_kernel=tensor-cores", &err))
        die("set-up", &err);
    sy_host_ctx host;
    sy_host_init(&host);
    side c = {.name = "cpu"}, g = {.name = "cuda"}, gr = {.name = "cuda (linear = round)"};
    side gt = {.name = "cuda (prefill_kernel = tensor-cores)"};
    c.dev = open_inst(ld, &host, cfg, SY_KIND_DEVICE, "cpu", NULL, "device");
    /* The CPU attention and MoE plugins compute on the cpu device's worker pool. */
    sy_device_parallel_for_fn run = NULL;
    sy_device_n_workers_fn nw = NULL;
    *(void **)&run = c.dev->plugin->desc->get_proc("parallel_for");
    *(void **)&nw = c.dev->plugin->desc->get_proc("n_workers");
    sy_host_set_pool(&host, run, nw, c.dev->inst);
    c.attn = open_inst(ld, &host, cfg, SY_KIND_ATTN, "cpu", "cpu", "attention");
    c.moe = open_inst(ld, &host, cfg, SY_KIND_MOE, "cpu", "cpu", "moe");
    g.dev = open_inst(ld, &host, cfg, SY_KIND_DEVICE, "cuda", NULL, "device");
    /* g's attention: k_attend for every row; gt's: prefill rows on the tensor-core kernel. */
    g.attn = open_inst(ld, &host, cfg_cc, SY_KIND_ATTN, attn, "cuda", "attention");
    gt.attn = open_inst(ld, &host, cfg_tc, SY_KIND_ATTN, attn, "cuda", "attention");
    g.moe = open_inst(ld, &host, cfg, SY_KIND_MOE, "cuda", "cuda", "moe");
    gr.dev = open_inst(ld, &host, cfg_round, SY_KIND_DEVICE, "cuda", NULL, "device");
    side *all[3] = {&c, &g, &gr};
    for (int i = 0; i < 3; i++) {
        all[i]->d = all[i]->dev->ops;
        all[i]->a = all[i]->attn ? all[i]->attn->ops : NULL;
        all[i]->m = all[i]->moe ? all[i]->moe->ops : NULL;
    }
    gt.dev = g.dev;
    gt.d = g.d;
    gt.a = gt.attn->ops;

    test_glue(&c, &g);
    test_linear(&c, &g, 2e-5);
    test_linear(&c, &gr, 3e-2);
    test_linear_quant(&c, &g, &gr);
    test_rope(&c, &g);
    test_argmax(&c, &g);
    test_sample(&c, &g);
    static const attn_case cases[] = {
        {8, 2, 64, 0, SY_DTYPE_F32, 0}, {8, 2, 64, 24, SY_DTYPE_BF16, 0}, {32, 8, 128, 0, SY_DTYPE_BF16, 0},
        {16, 1, 128, 0, SY_DTYPE_F16, 0}, {4, 4, 256, 0, SY_DTYPE_F32, 0},
        /* split-K: decode over 600 positions, with a window that empties the first splits, and GQA 8 */
        {8, 2, 64, 0, SY_DTYPE_F32, 1}, {8, 2, 64, 200, SY_DTYPE_BF16, 1}, {32, 4, 128, 0, SY_DTYPE_BF16, 1},
        /* per-layer windows (Qwen2 max_window_layers, gpt-oss): layer 1 slides, layer 0 does not; split-K too */
        {8, 2, 64, -7, SY_DTYPE_F32, 0}, {8, 2, 64, -200, SY_DTYPE_BF16, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        test_attention(&c, &g, &cases[i]);
    test_other_thread(&c, &g, &cases[1]);
    test_attention_tc(&c, &gt);
    test_attention_sinks(&c, &g, &gt);
    test_moe(&c, &g, 0);
    test_moe(&c, &g, 1);
    test_moe_tiles(ld, &host, &g);
    test_moe_quant_routing(ld, &host, &c, &g);
    test_moe_tc(ld, &host, &c, &g);
    test_moe_fp4act(ld, &host, &c, &g, 0);
    test_moe_fp4act(ld, &host, &c, &g, 1);
    test_graphs(ld, &host, &c);

    sy_plugin_inst *insts[] = {g.moe, gt.attn, g.attn, g.dev, gr.dev, c.moe, c.attn};
    for (size_t i = 0; i < sizeof insts / sizeof insts[0]; i++)
        sy_plugin_inst_destroy(insts[i]);
    sy_host_set_pool(&host, NULL, NULL, NULL);
    sy_plugin_inst_destroy(c.dev);
    sy_host_fini(&host);
    sy_config_free(cfg);
    sy_config_free(cfg_round);
    sy_config_free(cfg_cc);
    sy_config_free(cfg_tc);
    sy_loader_free(ld);
    printf("test_cuda_ops: %d comparisons, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
