/*
 * device/cpu against plain double-precision references, for every ISA this
 * machine can run (portable, avx2, avx512) and every weight dtype (F32,
 * F16, BF16), on odd shapes (n = 1..67, k not a multiple of 16, strided
 * rows). Bounds are stated per op; NaN never passes (every check is
 * written as !(err <= bound)).
 *
 * Also: results are bitwise identical whatever the thread count and
 * whether a row is computed alone or in a batch; every op refuses bad
 * shapes with SY_ERR_INVALID naming itself; the pool extra covers every
 * index exactly once.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_cpu_harness.h"

#define U (1.0 / 16777216.0) /* F32 unit roundoff, 2^-24 */

static th_plugin dev;
static th_host host;
static const sy_device_ops *ops;
static const sy_dtype wdts[] = {SY_DTYPE_F32, SY_DTYPE_F16, SY_DTYPE_BF16};

static sy_tensor view2(void *data, sy_dtype dt, int64_t rows, int64_t cols, int64_t ld)
{
    sy_tensor t = sy_tensor_2d(data, dt, rows, cols);
    t.stride[0] = ld;
    return t;
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return p;
}

static void fill_f32(th_rng *r, float *v, int64_t n, double lo, double hi)
{
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)th_uniform(r, lo, hi);
}

static void *make_w(th_rng *r, sy_dtype dt, int64_t n, double lo, double hi)
{
    void *w = xmalloc((size_t)n * (dt == SY_DTYPE_F32 ? 4 : 2));
    for (int64_t i = 0; i < n; i++)
        th_put(w, dt, i, (float)th_uniform(r, lo, hi));
    return w;
}

/* ---------------------------------------------------------------- linear */

/* out = x . w^T (+ bias) with strides; checks against double. Returns max err / bound. */
static double check_linear(void *inst, const char *tag, th_rng *r, sy_dtype dt, int64_t n, int64_t m, int64_t k,
                           int with_bias, int64_t padx, int64_t padw, int64_t pado)
{
    const int64_t ldx = k + padx, ldw = k + padw, ldo = m + pado;
    float *x = xmalloc(sizeof(float) * (size_t)(n * ldx));
    float *out = xmalloc(sizeof(float) * (size_t)(n * ldo));
    fill_f32(r, x, n * ldx, -1, 1);
    void *w = make_w(r, dt, m * ldw, -1, 1);
    void *b = with_bias ? make_w(r, dt, m, -1, 1) : NULL;
    for (int64_t i = 0; i < n * ldo; i++)
        out[i] = NAN; /* every output must be written */
    sy_tensor tx = view2(x, SY_DTYPE_F32, n, k, ldx), tw = view2(w, dt, m, k, ldw), to = view2(out, SY_DTYPE_F32, n, m, ldo);
    sy_tensor tb;
    if (b)
        sy_tensor_init(&tb, b, dt, 1, &m);
    sy_err err;
    int rc = ops->linear(inst, &tx, &tw, b ? &tb : NULL, &to, &err);
    TH_CHECK(rc == SY_OK, "%s linear %s n=%lld m=%lld k=%lld: %s", tag, sy_dtype_name(dt), (long long)n, (long long)m,
             (long long)k, err.msg);
    double worst = 0;
    for (int64_t i = 0; i < n && rc == SY_OK; i++)
        for (int64_t j = 0; j < m; j++) {
            double ref = 0, mag = 0;
            for (int64_t kk = 0; kk < k; kk++) {
                const double p = (double)x[i * ldx + kk] * th_get(w, dt, j * ldw + kk);
                ref += p;
                mag += fabs(p);
            }
            if (b) {
                ref += th_get(b, dt, j);
                mag += fabs(th_get(b, dt, j));
            }
            /* Blocked F32 summation: at most ~k/16 + log terms per path; k/8 + 17 covers all three ISAs. */
            const double bound = ((double)k / 8.0 + 17.0) * U * mag + 1e-30;
            const double e = fabs((double)out[i * ldo + j] - ref);
            if (!(e <= bound)) {
                TH_CHECK(0, "%s linear %s n=%lld m=%lld k=%lld bias=%d: out[%lld][%lld] = %.9g, ref %.9g (err %.3g > %.3g)",
                         tag, sy_dtype_name(dt), (long long)n, (long long)m, (long long)k, with_bias, (long long)i,
                         (long long)j, (double)out[i * ldo + j], ref, e, bound);
                i = n;
                break;
            }
            if (e / bound > worst)
                worst = e / bound;
        }
    free(x);
    free(out);
    free(w);
    free(b);
    return worst;
}

/* Rows computed alone equal rows computed in a batch; thread counts agree. */
static void check_linear_invariance(void *inst, void *inst1, const char *tag, th_rng *r, sy_dtype dt, int64_t n,
                                    int64_t m, int64_t k)
{
    float *x = xmalloc(sizeof(float) * (size_t)(n * k));
    float *o = xmalloc(sizeof(float) * (size_t)(n * m)), *o1 = xmalloc(sizeof(float) * (size_t)(n * m));
    float *row = xmalloc(sizeof(float) * (size_t)m);
    fill_f32(r, x, n * k, -1, 1);
    void *w = make_w(r, dt, m * k, -1, 1);
    sy_tensor tx = sy_tensor_2d(x, SY_DTYPE_F32, n, k), tw = sy_tensor_2d(w, dt, m, k);
    sy_tensor to = sy_tensor_2d(o, SY_DTYPE_F32, n, m), to1 = sy_tensor_2d(o1, SY_DTYPE_F32, n, m);
    sy_err err;
    TH_CHECK(ops->linear(inst, &tx, &tw, NULL, &to, &err) == SY_OK, "%s", err.msg);
    TH_CHECK(ops->linear(inst1, &tx, &tw, NULL, &to1, &err) == SY_OK, "%s", err.msg);
    TH_CHECK(memcmp(o, o1, sizeof(float) * (size_t)(n * m)) == 0,
             "%s linear %s n=%lld m=%lld k=%lld: 1 thread and the pool disagree", tag, sy_dtype_name(dt), (long long)n,
             (long long)m, (long long)k);
    for (int64_t i = 0; i < n; i += (n > 8 ? 7 : 1)) {
        sy_tensor xi = sy_tensor_2d(x + i * k, SY_DTYPE_F32, 1, k), oi = sy_tensor_2d(row, SY_DTYPE_F32, 1, m);
        TH_CHECK(ops->linear(inst, &xi, &tw, NULL, &oi, &err) == SY_OK, "%s", err.msg);
        TH_CHECK(memcmp(row, o + i * m, sizeof(float) * (size_t)m) == 0,
                 "%s linear %s n=%lld m=%lld k=%lld: row %lld alone differs from the batch", tag, sy_dtype_name(dt),
                 (long long)n, (long long)m, (long long)k, (long long)i);
    }
    free(x);
    free(o);
    free(o1);
    free(row);
    free(w);
}

static void test_linear(void *inst, void *inst1, const char *tag, th_rng *r)
{
    static const int64_t ns[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 31, 64, 65, 67};
    static const int64_t ms[] = {1, 3, 4, 5, 7, 8, 9, 17, 33, 64, 100, 130};
    static const int64_t ks[] = {1, 7, 15, 16, 17, 33, 100, 257, 1025, 1500};
    double worst = 0;
    for (int d = 0; d < 3; d++) {
        for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
            for (int rep = 0; rep < 4; rep++) {
                const int64_t m = ms[th_int(r, 0, (int)(sizeof ms / sizeof ms[0]) - 1)];
                const int64_t k = ks[(a * 4 + (size_t)rep) % (sizeof ks / sizeof ks[0])];
                const double w = check_linear(inst, tag, r, wdts[d], ns[a], m, k, rep & 1, 0, 0, 0);
                worst = w > worst ? w : worst;
            }
        /* strided x, w and out */
        check_linear(inst, tag, r, wdts[d], 7, 13, 33, 1, 5, 3, 2);
        check_linear(inst, tag, r, wdts[d], 1, 40, 100, 0, 1, 7, 9);
        check_linear(inst, tag, r, wdts[d], 66, 21, 19, 1, 1, 1, 1);
        /* GEMV large enough to use the pool */
        check_linear(inst, tag, r, wdts[d], 1, 515, 1030, 0, 0, 0, 0);
        check_linear_invariance(inst, inst1, tag, r, wdts[d], 67, 37, 2051);
        check_linear_invariance(inst, inst1, tag, r, wdts[d], 9, 130, 100);
    }
    printf("  %s linear: worst error %.2f of the bound\n", tag, worst);
}

static void test_linear_errors(void *inst)
{
    float x[12], out[12];
    uint16_t w16[12];
    sy_err err;
    sy_tensor tx = sy_tensor_2d(x, SY_DTYPE_F32, 3, 4), tw = sy_tensor_2d(w16, SY_DTYPE_BF16, 2, 3);
    sy_tensor to = sy_tensor_2d(out, SY_DTYPE_F32, 3, 2);
    err.msg[0] = 0;
    TH_CHECK(ops->linear(inst, &tx, &tw, NULL, &to, &err) == SY_ERR_INVALID && strstr(err.msg, "linear"),
             "linear k mismatch: want SY_ERR_INVALID naming linear, got \"%s\"", err.msg);
    tw = sy_tensor_2d(w16, SY_DTYPE_BF16, 2, 4);
    to = sy_tensor_2d(out, SY_DTYPE_F32, 3, 3);
    TH_CHECK(ops->linear(inst, &tx, &tw, NULL, &to, &err) == SY_ERR_INVALID && strstr(err.msg, "[3, 2]"),
             "linear out shape: want the expected [3, 2] in \"%s\"", err.msg);
    to = sy_tensor_2d(out, SY_DTYPE_F32, 3, 2);
    tw.dtype = SY_DTYPE_FP8_E4M3;
    TH_CHECK(ops->linear(inst, &tx, &tw, NULL, &to, &err) == SY_ERR_INVALID, "linear FP8 weight accepted");
    tw.dtype = SY_DTYPE_BF16;
    float b[3];
    sy_tensor tb = sy_tensor_2d(b, SY_DTYPE_F32, 1, 3);
    TH_CHECK(ops->linear(inst, &tx, &tw, &tb, &to, &err) == SY_ERR_INVALID, "linear bias of 3 for m = 2 accepted");
    sy_tensor alias = sy_tensor_2d(x, SY_DTYPE_F32, 3, 2);
    TH_CHECK(ops->linear(inst, &tx, &tw, NULL, &alias, &err) == SY_ERR_INVALID, "linear in place accepted");
    sy_tensor fp8 = sy_tensor_2d(w16, SY_DTYPE_FP8_E4M3, 2, 4), prepared;
    TH_CHECK(ops->prepare_weight(inst, "w", &fp8, &prepared, &err) == SY_ERR_UNSUPPORTED,
             "prepare_weight of FP8 should be unsupported");
    TH_CHECK(ops->prepare_weight(inst, "w", &tw, &prepared, &err) == SY_OK && prepared.data == tw.data,
             "prepare_weight should keep the host view");
    ops->release_weight(inst, &prepared);
}

/* ------------------------------------------------------------ small ops */

static void test_embed(void *inst, const char *tag, th_rng *r)
{
    const int64_t V = 50, H = 37, n = 23;
    for (int d = 0; d < 3; d++) {
        void *table = make_w(r, wdts[d], V * H, -3, 3);
        int32_t ids[23];
        for (int i = 0; i < n; i++)
            ids[i] = th_int(r, 0, (int)V - 1);
        ids[0] = 0;
        ids[1] = (int32_t)V - 1;
        float *out = xmalloc(sizeof(float) * (size_t)(n * H));
        sy_tensor tt = sy_tensor_2d(table, wdts[d], V, H), to = sy_tensor_2d(out, SY_DTYPE_F32, n, H);
        sy_err err;
        TH_CHECK(ops->embed(inst, &tt, ids, n, &to, &err) == SY_OK, "%s embed: %s", tag, err.msg);
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < H; j++)
                if ((double)out[i * H + j] != th_get(table, wdts[d], ids[i] * H + j)) {
                    TH_CHECK(0, "%s embed %s: out[%lld][%lld] is not the table value", tag, sy_dtype_name(wdts[d]),
                             (long long)i, (long long)j);
                    i = n;
                    break;
                }
        ids[5] = (int32_t)V;
        TH_CHECK(ops->embed(inst, &tt, ids, n, &to, &err) == SY_ERR_INVALID && strstr(err.msg, "embed"),
                 "%s embed: id %lld accepted", tag, (long long)V);
        free(table);
        free(out);
    }
}

static void test_norms(void *inst, const char *tag, th_rng *r)
{
    const int64_t shapes[][2] = {{1, 64}, {3, 17}, {67, 5}, {200, 96}, {2, 1}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int d = 0; d < 3; d++) {
            const int64_t R = shapes[s][0], D = shapes[s][1];
            float *x = xmalloc(sizeof(float) * (size_t)(R * D)), *x0 = xmalloc(sizeof(float) * (size_t)(R * D));
            float *res = xmalloc(sizeof(float) * (size_t)(R * D)), *res0 = xmalloc(sizeof(float) * (size_t)(R * D));
            float *out = xmalloc(sizeof(float) * (size_t)(R * D));
            fill_f32(r, x0, R * D, -2, 2);
            fill_f32(r, res0, R * D, -2, 2);
            void *w = make_w(r, wdts[d], D, 0.5, 1.5);
            const float eps = 1e-5f;
            sy_tensor tw;
            sy_tensor_init(&tw, w, wdts[d], 1, &D);
            sy_err err;
            for (int mode = 0; mode < 3; mode++) { /* rmsnorm, rmsnorm in place, add_rmsnorm */
                memcpy(x, x0, sizeof(float) * (size_t)(R * D));
                memcpy(res, res0, sizeof(float) * (size_t)(R * D));
                sy_tensor tx = sy_tensor_2d(x, SY_DTYPE_F32, R, D), tr = sy_tensor_2d(res, SY_DTYPE_F32, R, D);
                sy_tensor to = sy_tensor_2d(mode == 1 ? x : out, SY_DTYPE_F32, R, D);
                const int rc = mode == 2 ? ops->add_rmsnorm(inst, &tr, &tx, &tw, eps, &to, &err)
                                         : ops->rmsnorm(inst, &tx, &tw, eps, &to, &err);
                TH_CHECK(rc == SY_OK, "%s norm mode %d: %s", tag, mode, err.msg);
                const float *o = mode == 1 ? x : out;
                for (int64_t i = 0; i < R; i++) {
                    double ss = 0;
                    const float *src = x0 + i * D;
                    float sum_row[96];
                    if (mode == 2) {
                        for (int64_t j = 0; j < D; j++) {
                            sum_row[j] = res0[i * D + j] + x0[i * D + j];
                            TH_CHECK(res[i * D + j] == sum_row[j], "%s add_rmsnorm: residual[%lld][%lld] not res + x",
                                     tag, (long long)i, (long long)j);
                        }
                        src = sum_row;
                    }
                    for (int64_t j = 0; j < D; j++)
                        ss += (double)src[j] * src[j];
                    const double inv = 1.0 / sqrt(ss / (double)D + eps);
                    for (int64_t j = 0; j < D; j++) {
                        const double ref = src[j] * inv * th_get(w, wdts[d], j);
                        const double e = fabs(o[i * D + j] - ref);
                        if (!(e <= 5 * U * fabs(ref) + 1e-37)) {
                            TH_CHECK(0, "%s norm mode %d %s [%lld x %lld]: out[%lld][%lld] = %.9g, ref %.9g", tag, mode,
                                     sy_dtype_name(wdts[d]), (long long)R, (long long)D, (long long)i, (long long)j,
                                     (double)o[i * D + j], ref);
                            i = R;
                            break;
                        }
                    }
                }
            }
            sy_tensor tx = sy_tensor_2d(x, SY_DTYPE_F32, R, D), to = sy_tensor_2d(out, SY_DTYPE_F32, R, D);
            sy_tensor bad = tw;
            bad.shape[0] = D + 1;
            TH_CHECK(ops->rmsnorm(inst, &tx, &bad, eps, &to, &err) == SY_ERR_INVALID && strstr(err.msg, "rmsnorm"),
                     "%s rmsnorm with a [D+1] weight accepted", tag);
            free(x);
            free(x0);
            free(res);
            free(res0);
            free(out);
            free(w);
        }
}

static void test_rope(void *inst, const char *tag, th_rng *r)
{
    const int cfg[][4] = {/* head_dim, rotary_dim, heads, neox */ {16, 16, 4, 1}, {16, 16, 4, 0}, {64, 32, 3, 1},
                          {64, 32, 3, 0},  {10, 6, 2, 1},   {128, 128, 2, 1}};
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
        const int hd = cfg[c][0], rd = cfg[c][1], heads = cfg[c][2], neox = cfg[c][3];
        const int64_t n = 19, cols = (int64_t)heads * hd;
        float inv_freq[64];
        for (int i = 0; i < rd / 2; i++)
            inv_freq[i] = (float)pow(10000.0, -2.0 * i / rd);
        int32_t pos[19];
        for (int i = 0; i < n; i++)
            pos[i] = th_int(r, 0, 5000);
        pos[0] = 0;
        float *x = xmalloc(sizeof(float) * (size_t)(n * cols)), *x0 = xmalloc(sizeof(float) * (size_t)(n * cols));
        fill_f32(r, x0, n * cols, -2, 2);
        memcpy(x, x0, sizeof(float) * (size_t)(n * cols));
        const float mscale = c % 2 ? 1.25f : 1.0f;
        sy_rope_params p = {sizeof p, hd, rd, neox, inv_freq, mscale};
        sy_tensor tx = sy_tensor_2d(x, SY_DTYPE_F32, n, cols);
        sy_err err;
        TH_CHECK(ops->rope(inst, &tx, pos, &p, &err) == SY_OK, "%s rope: %s", tag, err.msg);
        for (int64_t t = 0; t < n; t++)
            for (int h = 0; h < heads; h++) {
                const float *a0 = x0 + t * cols + h * hd;
                const float *o = x + t * cols + h * hd;
                for (int i = 0; i < hd; i++) {
                    double ref;
                    if (i >= rd) {
                        ref = a0[i];
                    } else {
                        const int f = neox ? i % (rd / 2) : i / 2;
                        const int first = neox ? i < rd / 2 : i % 2 == 0;
                        const int partner = neox ? (first ? i + rd / 2 : i - rd / 2) : (first ? i + 1 : i - 1);
                        const double ang = (double)pos[t] * (double)inv_freq[f];
                        const double cs = cos(ang) * mscale, sn = sin(ang) * mscale;
                        ref = first ? a0[i] * cs - a0[partner] * sn : a0[i] * cs + a0[partner] * sn;
                    }
                    const double mag = (fabs(a0[i]) + fabs(a0[i < rd ? (neox ? (i + rd / 2) % rd : i ^ 1) : i])) * mscale;
                    if (!(fabs(o[i] - ref) <= 4 * U * mag + 1e-37)) {
                        TH_CHECK(0, "%s rope hd=%d rd=%d neox=%d: token %lld head %d elem %d = %.9g, ref %.9g", tag, hd,
                                 rd, neox, (long long)t, h, i, (double)o[i], ref);
                        t = n;
                        h = heads;
                        break;
                    }
                }
            }
        sy_rope_params bad = p;
        bad.rotary_dim = hd + 2;
        TH_CHECK(ops->rope(inst, &tx, pos, &bad, &err) == SY_ERR_INVALID && strstr(err.msg, "rope"),
                 "%s rope with rotary_dim > head_dim accepted", tag);
        free(x);
        free(x0);
    }
}

static void test_elementwise(void *inst, const char *tag, th_rng *r)
{
    const int64_t R = 33, C = 130;
    float *g = xmalloc(sizeof(float) * R * C), *u = xmalloc(sizeof(float) * R * C), *o = xmalloc(sizeof(float) * R * C);
    fill_f32(r, g, R * C, -12, 12);
    fill_f32(r, u, R * C, -3, 3);
    g[0] = -100.0f;
    g[1] = 100.0f;
    g[2] = 0.0f;
    sy_tensor tg = sy_tensor_2d(g, SY_DTYPE_F32, R, C), tu = sy_tensor_2d(u, SY_DTYPE_F32, R, C);
    sy_tensor to = sy_tensor_2d(o, SY_DTYPE_F32, R, C);
    sy_err err;
    TH_CHECK(ops->silu_mul(inst, &tg, &tu, &to, &err) == SY_OK, "%s silu_mul: %s", tag, err.msg);
    for (int64_t i = 0; i < R * C; i++) {
        const double ref = (double)g[i] / (1.0 + exp(-(double)g[i])) * u[i];
        if (!(fabs(o[i] - ref) <= 8 * U * fabs(ref) + 1e-37)) {
            TH_CHECK(0, "%s silu_mul[%lld]: silu(%g) * %g = %.9g, ref %.9g", tag, (long long)i, (double)g[i],
                     (double)u[i], (double)o[i], ref);
            break;
        }
    }
    /* out aliasing gate, as the engine calls it */
    float *g2 = xmalloc(sizeof(float) * R * C);
    memcpy(g2, g, sizeof(float) * R * C);
    sy_tensor tg2 = sy_tensor_2d(g2, SY_DTYPE_F32, R, C);
    TH_CHECK(ops->silu_mul(inst, &tg2, &tu, &tg2, &err) == SY_OK && memcmp(g2, o, sizeof(float) * R * C) == 0,
             "%s silu_mul in place differs", tag);
    memcpy(g2, g, sizeof(float) * R * C);
    TH_CHECK(ops->add(inst, &tg2, &tu, &err) == SY_OK, "%s add: %s", tag, err.msg);
    for (int64_t i = 0; i < R * C; i++)
        if (g2[i] != g[i] + u[i]) {
            TH_CHECK(0, "%s add[%lld] is not the F32 sum", tag, (long long)i);
            break;
        }
    sy_tensor short_u = sy_tensor_2d(u, SY_DTYPE_F32, R - 1, C);
    TH_CHECK(ops->add(inst, &tg2, &short_u, &err) == SY_ERR_INVALID && strstr(err.msg, "add"),
             "%s add with mismatched rows accepted", tag);
    TH_CHECK(ops->silu_mul(inst, &tg, &short_u, &to, &err) == SY_ERR_INVALID && strstr(err.msg, "silu_mul"),
             "%s silu_mul with mismatched rows accepted", tag);
    free(g);
    free(u);
    free(o);
    free(g2);
}

static void test_memory(void *inst, const char *tag)
{
    int64_t shape[3] = {3, 5, 7};
    sy_tensor t;
    sy_tensor_init(&t, NULL, SY_DTYPE_BF16, 3, shape);
    sy_err err;
    TH_CHECK(ops->alloc(inst, &t, &err) == SY_OK && t.data && ((uintptr_t)t.data % 64) == 0,
             "%s alloc: %s", tag, err.msg);
    uint16_t src[105], back[105];
    for (int i = 0; i < 105; i++)
        src[i] = (uint16_t)(i * 611);
    TH_CHECK(ops->upload(inst, &t, src, sizeof src, &err) == SY_OK, "%s upload: %s", tag, err.msg);
    TH_CHECK(ops->download(inst, back, &t, sizeof back, &err) == SY_OK && memcmp(src, back, sizeof src) == 0,
             "%s download does not return what was uploaded", tag);
    TH_CHECK(ops->upload(inst, &t, src, sizeof src + 2, &err) == SY_ERR_INVALID, "%s upload overflow accepted", tag);
    ops->free(inst, &t);
    TH_CHECK(t.data == NULL, "%s free leaves data set", tag);
    TH_CHECK(ops->synchronize(inst, &err) == SY_OK, "%s synchronize", tag);
}

/* ------------------------------------------------------------------ pool */

typedef struct cover {
    atomic_int *hits;
    int n_workers;
    atomic_int bad_worker;
    sy_device_parallel_for_fn run;
    void *inst;
} cover;

static void cover_range(void *arg, int64_t b, int64_t e, int worker)
{
    cover *c = arg;
    if (worker < 0 || worker >= c->n_workers)
        atomic_store(&c->bad_worker, 1);
    for (int64_t i = b; i < e; i++)
        atomic_fetch_add(&c->hits[i], 1);
}

static void nested_range(void *arg, int64_t b, int64_t e, int worker)
{
    (void)worker;
    cover *c = arg;
    for (int64_t i = b; i < e; i++)
        c->run(c->inst, 8, 1, cover_range, c); /* runs serially inside: must not deadlock */
}

static void test_pool(void *inst, const char *tag)
{
    void *pr = dev.desc->get_proc("parallel_for"), *pn = dev.desc->get_proc("n_workers");
    TH_CHECK(pr && pn, "%s: get_proc parallel_for / n_workers missing", tag);
    if (!pr || !pn)
        return;
    sy_device_parallel_for_fn run;
    sy_device_n_workers_fn nw;
    memcpy(&run, &pr, sizeof run);
    memcpy(&nw, &pn, sizeof nw);
    TH_CHECK(dev.desc->get_proc("no such thing") == NULL, "get_proc of an unknown name");
    const int64_t sizes[] = {0, 1, 2, 7, 1000, 100003};
    const int64_t grains[] = {1, 3, 64};
    cover c;
    c.n_workers = nw(inst);
    c.run = run;
    c.inst = inst;
    atomic_init(&c.bad_worker, 0);
    TH_CHECK(c.n_workers >= 1, "%s: n_workers %d", tag, c.n_workers);
    c.hits = xmalloc(sizeof(atomic_int) * 100003);
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (size_t g = 0; g < 3; g++)
            for (int rep = 0; rep < 20; rep++) {
                for (int64_t i = 0; i < sizes[s]; i++)
                    atomic_init(&c.hits[i], 0);
                run(inst, sizes[s], grains[g], cover_range, &c);
                for (int64_t i = 0; i < sizes[s]; i++)
                    if (atomic_load(&c.hits[i]) != 1) {
                        TH_CHECK(0, "%s parallel_for n=%lld grain=%lld: index %lld ran %d times", tag,
                                 (long long)sizes[s], (long long)grains[g], (long long)i, atomic_load(&c.hits[i]));
                        break;
                    }
            }
    TH_CHECK(!atomic_load(&c.bad_worker), "%s parallel_for passed a worker index outside [0, n_workers)", tag);
    for (int i = 0; i < 8; i++)
        atomic_init(&c.hits[i], 0);
    run(inst, 64, 1, nested_range, &c);
    for (int i = 0; i < 8; i++)
        TH_CHECK(atomic_load(&c.hits[i]) == 64, "%s nested parallel_for: index %d ran %d times, want 64", tag, i,
                 atomic_load(&c.hits[i]));
    free(c.hits);
}

/* ------------------------------------------------------------------ main */

int main(void)
{
    th_load("sy-device-cpu", &dev);
    th_host_init(&host);
    ops = dev.desc->ops;
    TH_CHECK(dev.desc->kind == SY_KIND_DEVICE && strcmp(dev.desc->name, "cpu") == 0, "descriptor kind/name");
    sy_err why;
    TH_CHECK(dev.desc->probe(&host.api, &why) > 0, "probe should be > 0 on any CPU");

    const char *isas[3];
    const int n_isa = th_isas(&dev, &host.api, isas, 3);
    TH_CHECK(n_isa >= 1 && strcmp(isas[0], "portable") == 0, "portable must always be available");
    for (int i = 0; i < n_isa; i++) {
        const char *kv[] = {"isa", isas[i], "threads", "3", NULL};
        const char *kv1[] = {"isa", isas[i], "threads", "1", NULL};
        void *inst = NULL, *inst1 = NULL;
        sy_err err;
        if (th_create(&dev, &host.api, kv, &inst, &err) || th_create(&dev, &host.api, kv1, &inst1, &err)) {
            TH_CHECK(0, "create isa=%s: %s", isas[i], err.msg);
            continue;
        }
        const char *(*isa_name)(void *);
        void *f = dev.desc->get_proc("isa");
        memcpy(&isa_name, &f, sizeof f);
        TH_CHECK(f && strcmp(isa_name(inst), isas[i]) == 0, "instance runs %s, asked for %s", f ? isa_name(inst) : "?",
                 isas[i]);
        printf("isa %s\n", isas[i]);
        th_rng r = {0x5eed0000u + (uint64_t)i};
        th_host_set_pool(&host, dev.desc, inst);
        test_memory(inst, isas[i]);
        test_pool(inst, isas[i]);
        test_linear(inst, inst1, isas[i], &r);
        test_linear_errors(inst);
        test_embed(inst, isas[i], &r);
        test_norms(inst, isas[i], &r);
        test_rope(inst, isas[i], &r);
        test_elementwise(inst, isas[i], &r);
        th_host_clear_pool(&host);
        dev.desc->destroy(inst);
        dev.desc->destroy(inst1);
    }
    const char *bad[] = {"isa", "sse9", NULL};
    void *inst = NULL;
    TH_CHECK(th_create(&dev, &host.api, bad, &inst, &why) != SY_OK && inst == NULL, "isa = sse9 accepted");
    TH_CHECK(atomic_load(&host.live_allocs) == 0, "%ld host allocations leaked", atomic_load(&host.live_allocs));
    th_unload(&dev);
    return th_done("test_cpu_device");
}
