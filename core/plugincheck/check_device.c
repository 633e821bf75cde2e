/*
 * plugin-check for device plugins: memory round trips and every glue op
 * against a float64 reference, for each weight dtype the plugin accepts.
 */
#include "config.h"

#include "engine/sampler.h"
#include "plugincheck/check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TENSORS 64

typedef struct dev {
    sy_pc *pc;
    const sy_device_ops *ops;
    void *inst;
    sy_tensor act[MAX_TENSORS]; /* alloc'd activations, freed at the end */
    int n_act;
    sy_tensor w[MAX_TENSORS];   /* prepared weights */
    void *w_host[MAX_TENSORS];  /* their host views stay valid until destroy */
    int n_w;
    sy_err err;
    char note[700];
} dev;

static const char *why(dev *d, const char *step, int rc)
{
    d->err.msg[sizeof d->err.msg - 1] = '\0';
    snprintf(d->note, sizeof d->note, "%s returned %d (%s): %s", step, rc, sy_status_str(rc),
             d->err.msg[0] ? d->err.msg : "(no message)");
    return d->note;
}

/* A device F32 activation [rows, cols], filled from host (or left as alloc'd). */
static sy_tensor *act(dev *d, int64_t rows, int64_t cols, const float *host, int *rc)
{
    if (d->n_act == MAX_TENSORS) {
        *rc = sy_err_set(&d->err, SY_ERR_NOMEM, "plugin-check: too many tensors");
        return NULL;
    }
    sy_tensor *t = &d->act[d->n_act];
    *t = sy_tensor_2d(NULL, SY_DTYPE_F32, rows, cols);
    if ((*rc = d->ops->alloc(d->inst, t, &d->err)))
        return NULL;
    d->n_act++;
    if (host && (*rc = d->ops->upload(d->inst, t, host, sizeof(float) * (size_t)(rows * cols), &d->err)))
        return NULL;
    return t;
}

static int get(dev *d, float *dst, const sy_tensor *t, size_t n)
{
    int rc = d->ops->synchronize ? d->ops->synchronize(d->inst, &d->err) : SY_OK;
    return rc ? rc : d->ops->download(d->inst, dst, t, n * sizeof(float), &d->err);
}

/*
 * A weight [rows, cols] of dtype dt through prepare_weight; ref receives
 * the values it holds (rounded to dt) as doubles. Returns NULL with *rc.
 */
static sy_tensor *weight(dev *d, const char *name, sy_dtype dt, int64_t rows, int64_t cols, int ndim, float scale,
                         double *ref, int *rc)
{
    if (d->n_w == MAX_TENSORS) {
        *rc = sy_err_set(&d->err, SY_ERR_NOMEM, "plugin-check: too many weights");
        return NULL;
    }
    size_t n = (size_t)(rows * cols), es = (size_t)sy_dtype_bits(dt) / 8;
    void *h = malloc(n * es);
    if (!h) {
        *rc = sy_err_set(&d->err, SY_ERR_NOMEM, "plugin-check: out of memory");
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        float v = scale * sy_pc_rand(d->pc);
        if (dt == SY_DTYPE_F32) {
            ((float *)h)[i] = v;
            ref[i] = v;
        } else {
            uint16_t b = sy_pc_f32_to_half(v, dt);
            ((uint16_t *)h)[i] = b;
            ref[i] = sy_pc_half_to_f32(b, dt);
        }
    }
    sy_tensor view;
    int64_t shape[2] = {rows, cols};
    if (ndim == 1)
        sy_tensor_init(&view, h, dt, 1, &shape[1]);
    else
        sy_tensor_init(&view, h, dt, 2, shape);
    sy_tensor *w = &d->w[d->n_w];
    memset(w, 0, sizeof *w);
    if ((*rc = d->ops->prepare_weight(d->inst, name, &view, w, &d->err))) {
        free(h);
        return NULL;
    }
    d->w_host[d->n_w++] = h;
    return w;
}

static void release_all(dev *d)
{
    for (int i = 0; i < d->n_act; i++)
        d->ops->free(d->inst, &d->act[i]);
    for (int i = 0; i < d->n_w; i++)
        if (d->ops->release_weight)
            d->ops->release_weight(d->inst, &d->w[i]);
    d->n_act = 0;
    /* Weights' host views must outlive the instance: freed after destroy. */
}

static int begin(dev *d, sy_pc *pc, const char *op, const char *cas)
{
    memset(d, 0, sizeof *d);
    d->pc = pc;
    d->ops = pc->desc->ops;
    d->inst = sy_pc_create(pc, op, cas);
    return d->inst ? 0 : -1;
}

static void end(dev *d)
{
    release_all(d);
    sy_pc_destroy(d->pc, d->inst);
    for (int i = 0; i < d->n_w; i++)
        free(d->w_host[i]);
    d->n_w = 0;
}

static const char *dt_name(sy_dtype dt)
{
    return dt == SY_DTYPE_F32 ? "f32" : dt == SY_DTYPE_F16 ? "f16" : "bf16";
}

static double w_tol(sy_dtype dt)
{
    /* The reference uses the weights' rounded values, so what is left is the
     * device's accumulation and whatever it rounds activations to. */
    return dt == SY_DTYPE_F32 ? 1e-3 : dt == SY_DTYPE_F16 ? 5e-3 : 2e-2;
}

#define EW_TOL 1e-4

/* Reports a finished case: an op error is a FAIL (or a SKIP when the plugin
 * says the dtype is not one it takes), else the error against the tolerance. */
static void verdict(dev *d, const char *op, const char *cas, int rc, const char *step, double err, double tol)
{
    if (rc == SY_ERR_UNSUPPORTED && strcmp(step, "prepare_weight") == 0)
        sy_pc_row(d->pc, op, cas, SY_PC_SKIP, -1, -1, why(d, step, rc));
    else if (rc)
        sy_pc_row(d->pc, op, cas, SY_PC_FAIL, -1, tol, why(d, step, rc));
    else
        sy_pc_row(d->pc, op, cas, err <= tol ? SY_PC_OK : SY_PC_FAIL, err, tol, err <= tol ? "" : "wrong results");
}

/* ------------------------------------------------------------- the cases */

static void case_memory(sy_pc *pc)
{
    dev d;
    const char *cas = "upload/download [7, 33] f32";
    if (begin(&d, pc, "memory", cas))
        return;
    float in[7 * 33], out[7 * 33];
    sy_pc_fill(pc, in, 7 * 33, 10);
    int rc;
    sy_tensor *t = act(&d, 7, 33, in, &rc);
    const char *step = "alloc/upload";
    if (t) {
        step = "download";
        rc = get(&d, out, t, 7 * 33);
    }
    double ref[7 * 33];
    for (int i = 0; i < 7 * 33; i++)
        ref[i] = in[i];
    verdict(&d, "memory", cas, rc, step, rc ? 0 : sy_pc_err(out, ref, 7 * 33), 0);
    end(&d);
}

static void case_embed(sy_pc *pc, sy_dtype dt)
{
    enum { V = 50, H = 64, N = 9 };
    char cas[64];
    snprintf(cas, sizeof cas, "%s table [%d, %d], %d ids", dt_name(dt), V, H, N);
    dev d;
    if (begin(&d, pc, "embed", cas))
        return;
    double tab[V * H], ref[N * H];
    float got[N * H];
    int32_t ids[N];
    for (int i = 0; i < N; i++)
        ids[i] = i == 4 ? ids[1] : (int32_t)(sy_pc_rand_u32(pc) % V); /* one id twice */
    int rc;
    const char *step = "prepare_weight";
    sy_tensor *w = weight(&d, "model.embed_tokens.weight", dt, V, H, 2, 1, tab, &rc), *out = NULL;
    if (w && (step = "alloc", out = act(&d, N, H, NULL, &rc)) && (step = "embed", !(rc = d.ops->embed(d.inst, w, ids, N, out, &d.err))))
        step = "download", rc = get(&d, got, out, N * H);
    for (int i = 0; i < N; i++)
        for (int j = 0; j < H; j++)
            ref[i * H + j] = tab[ids[i] * H + j];
    verdict(&d, "embed", cas, rc, step, rc ? 0 : sy_pc_err(got, ref, N * H), EW_TOL);
    end(&d);
}

static void ref_rmsnorm(const double *x, const double *w, int rows, int cols, double eps, double *out)
{
    for (int r = 0; r < rows; r++) {
        double ss = 0;
        for (int c = 0; c < cols; c++)
            ss += x[r * cols + c] * x[r * cols + c];
        double inv = 1.0 / sqrt(ss / cols + eps);
        for (int c = 0; c < cols; c++)
            out[r * cols + c] = x[r * cols + c] * inv * w[c];
    }
}

static void case_rmsnorm(sy_pc *pc, int in_place, int with_add)
{
    enum { R = 5, C = 96 };
    const char *op = with_add ? "add_rmsnorm" : "rmsnorm";
    char cas[64];
    snprintf(cas, sizeof cas, "[%d, %d] f32 weight%s", R, C, in_place ? ", out = x" : "");
    dev d;
    if (begin(&d, pc, op, cas))
        return;
    float x[R * C], res[R * C], got[R * C], got_res[R * C];
    double wr[C], xin[R * C], ref[R * C], refres[R * C];
    sy_pc_fill(pc, x, R * C, 2);
    sy_pc_fill(pc, res, R * C, 3);
    const float eps = 1e-5f;
    int rc;
    const char *step = "prepare_weight";
    sy_tensor *w = weight(&d, "model.norm.weight", SY_DTYPE_F32, 1, C, 1, 1.5f, wr, &rc), *tx = NULL, *tr = NULL,
              *to = NULL;
    if (w) {
        step = "alloc/upload";
        tx = act(&d, R, C, x, &rc);
        tr = tx && with_add ? act(&d, R, C, res, &rc) : NULL;
        to = tx && (!with_add || tr) ? (in_place && !with_add ? tx : act(&d, R, C, NULL, &rc)) : NULL;
    }
    if (to) {
        step = op;
        rc = with_add ? d.ops->add_rmsnorm(d.inst, tr, tx, w, eps, to, &d.err)
                      : d.ops->rmsnorm(d.inst, tx, w, eps, to, &d.err);
        if (!rc)
            step = "download", rc = get(&d, got, to, R * C);
        if (!rc && with_add)
            rc = get(&d, got_res, tr, R * C);
    }
    for (int i = 0; i < R * C; i++)
        xin[i] = with_add ? (double)res[i] + (double)x[i] : x[i];
    for (int i = 0; i < R * C; i++)
        refres[i] = xin[i];
    ref_rmsnorm(xin, wr, R, C, eps, ref);
    double err = 0;
    if (!rc) {
        err = sy_pc_err(got, ref, R * C);
        if (with_add) {
            double e2 = sy_pc_err(got_res, refres, R * C);
            err = e2 > err || isnan(e2) ? e2 : err;
        }
    }
    verdict(&d, op, cas, rc, step, err, EW_TOL);
    end(&d);
}

/* out[n, m] = x[n, k] . w[m, k]^T (+ bias) in float64. */
static void ref_linear(const float *x, const double *w, const double *bias, int n, int k, int m, double *out)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < m; j++) {
            double s = bias ? bias[j] : 0;
            for (int c = 0; c < k; c++)
                s += (double)x[i * k + c] * w[(size_t)j * k + c];
            out[i * m + j] = s;
        }
}

static void case_linear(sy_pc *pc, sy_dtype dt, int n, int k, int m, int with_bias)
{
    char cas[80];
    snprintf(cas, sizeof cas, "%s n=%d k=%d m=%d%s", dt_name(dt), n, k, m, with_bias ? " +bias" : "");
    dev d;
    if (begin(&d, pc, "linear", cas))
        return;
    float *x = malloc(sizeof(float) * (size_t)(n * k)), *got = malloc(sizeof(float) * (size_t)(n * m));
    double *wr = malloc(sizeof(double) * (size_t)(m * k)), *ref = malloc(sizeof(double) * (size_t)(n * m));
    double br[1024];
    int rc = SY_ERR_NOMEM;
    const char *step = "malloc";
    if (x && got && wr && ref && m <= 1024) {
        sy_pc_fill(pc, x, (size_t)(n * k), 1);
        step = "prepare_weight";
        sy_tensor *w = weight(&d, "model.layers.0.mlp.down_proj.weight", dt, m, k, 2, 0.5f, wr, &rc);
        sy_tensor *b = w && with_bias ? weight(&d, "model.layers.0.mlp.down_proj.bias", SY_DTYPE_F32, 1, m, 1, 1, br, &rc)
                                      : NULL;
        sy_tensor *tx = NULL, *to = NULL;
        if (w && (!with_bias || b)) {
            step = "alloc/upload";
            if ((tx = act(&d, n, k, x, &rc)))
                to = act(&d, n, m, NULL, &rc);
        }
        if (to) {
            step = "linear";
            if (!(rc = d.ops->linear(d.inst, tx, w, b, to, &d.err)))
                step = "download", rc = get(&d, got, to, (size_t)(n * m));
        }
        ref_linear(x, wr, with_bias ? br : NULL, n, k, m, ref);
    }
    verdict(&d, "linear", cas, rc, step, rc ? 0 : sy_pc_err(got, ref, (size_t)(n * m)), w_tol(dt));
    end(&d);
    free(x);
    free(got);
    free(wr);
    free(ref);
}

static int has_linear_multi(const sy_device_ops *o)
{
    return o->struct_size >= offsetof(sy_device_ops, linear_multi) + sizeof o->linear_multi && o->linear_multi;
}

static void case_linear_multi(sy_pc *pc, sy_dtype dt)
{
    enum { N = 3, K = 64, P = 3 };
    static const int ms[P] = {48, 16, 16};
    char cas[80];
    snprintf(cas, sizeof cas, "%s n=%d k=%d m=48,16,16 +bias on part 0", dt_name(dt), N, K);
    if (!has_linear_multi(pc->desc->ops)) {
        sy_pc_row(pc, "linear_multi", cas, SY_PC_SKIP, -1, -1, "optional op not provided");
        return;
    }
    dev d;
    if (begin(&d, pc, "linear_multi", cas))
        return;
    float x[N * K], got[N * 48];
    double wr[P][48 * K], br[48], ref[N * 48];
    sy_pc_fill(pc, x, N * K, 1);
    const sy_tensor *w[P], *bias[P] = {NULL, NULL, NULL};
    sy_tensor *out[P];
    int rc = SY_OK;
    const char *step = "prepare_weight";
    for (int i = 0; i < P && !rc; i++)
        if (!(w[i] = weight(&d, "model.layers.0.self_attn.qkv.weight", dt, ms[i], K, 2, 0.5f, wr[i], &rc)))
            break;
    if (!rc && !(bias[0] = weight(&d, "model.layers.0.self_attn.q_proj.bias", SY_DTYPE_F32, 1, ms[0], 1, 1, br, &rc)))
        step = "prepare_weight";
    sy_tensor *tx = NULL;
    if (!rc) {
        step = "alloc/upload";
        tx = act(&d, N, K, x, &rc);
        for (int i = 0; i < P && !rc; i++)
            out[i] = act(&d, N, ms[i], NULL, &rc);
    }
    double err = 0;
    if (!rc) {
        step = "linear_multi";
        rc = d.ops->linear_multi(d.inst, tx, P, w, bias, out, &d.err);
        for (int i = 0; i < P && !rc; i++) {
            step = "download";
            if ((rc = get(&d, got, out[i], (size_t)(N * ms[i]))))
                break;
            ref_linear(x, wr[i], i == 0 ? br : NULL, N, K, ms[i], ref);
            double e = sy_pc_err(got, ref, (size_t)(N * ms[i]));
            err = e > err || isnan(e) ? e : err;
        }
    }
    verdict(&d, "linear_multi", cas, rc, step, err, w_tol(dt));
    end(&d);
}

static int has_argmax(const sy_device_ops *o)
{
    return o->struct_size >= offsetof(sy_device_ops, argmax) + sizeof o->argmax && o->argmax;
}

/* The rule plugin.h gives for argmax, written as its loop. */
static int32_t ref_argmax(const float *x, int64_t n)
{
    int32_t best = 0;
    for (int64_t j = 1; j < n; j++)
        if (x[j] > x[best])
            best = (int32_t)j;
    return best;
}

/*
 * Rows with planted cases of the greedy rule. quantised: random values on
 * a coarse grid, so most rows hold equal maxima; otherwise, per row r (mod
 * 9): a tie far apart (the lower wins, across a parallel split of a long
 * row), NaN at column 0 (it is the pick), NaNs around a planted maximum,
 * all NaN but column 0, all -inf, -0 before +0 as the maximum, +inf twice,
 * all NaN, plain random.
 */
static void fill_argmax_rows(sy_pc *pc, float *x, int64_t R, int64_t V, int quantised)
{
    sy_pc_fill(pc, x, (size_t)(R * V), 4);
    for (int64_t r = 0; r < R; r++) {
        float *row = x + r * V;
        const int64_t a = V / 3, b = V - 1 - V / 5;
        if (quantised) {
            for (int64_t j = 0; j < V; j++)
                row[j] = floorf(row[j]);
            continue;
        }
        switch (r % 9) {
        case 0:
            row[a] = row[b] = 9.0f;
            break;
        case 1:
            row[0] = NAN;
            row[b] = 9.0f;
            break;
        case 2:
            for (int64_t j = 1; j < V; j += 7)
                row[j] = NAN;
            row[b] = 9.0f;
            if (b > 0)
                row[b - 1] = NAN;
            break;
        case 3:
            for (int64_t j = 1; j < V; j++)
                row[j] = NAN;
            break;
        case 4:
            for (int64_t j = 0; j < V; j++)
                row[j] = -INFINITY;
            break;
        case 5:
            for (int64_t j = 0; j < V; j++)
                row[j] = -1.0f - fabsf(row[j]);
            row[a] = -0.0f;
            row[b] = 0.0f;
            break;
        case 6:
            row[a] = row[b] = INFINITY;
            break;
        case 7:
            for (int64_t j = 0; j < V; j++)
                row[j] = NAN;
            break;
        default:
            break;
        }
    }
}

static void case_argmax(sy_pc *pc, int64_t R, int64_t V, int quantised)
{
    char cas[80];
    snprintf(cas, sizeof cas, "[%lld, %lld] %s", (long long)R, (long long)V,
             quantised ? "values on a grid (ties)" : "planted ties, NaN, +-0, +-inf");
    if (!has_argmax(pc->desc->ops)) {
        sy_pc_row(pc, "argmax", cas, SY_PC_SKIP, -1, -1, "optional op not provided");
        return;
    }
    dev d;
    if (begin(&d, pc, "argmax", cas))
        return;
    float *x = malloc(sizeof(float) * (size_t)(R * V));
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)R);
    float *vals = malloc(sizeof(float) * (size_t)R);
    int rc = SY_ERR_NOMEM;
    const char *step = "alloc/upload";
    double wrong = 0;
    if (x && ids && vals) {
        fill_argmax_rows(pc, x, R, V, quantised);
        sy_tensor *t = act(&d, R, V, x, &rc);
        if (t) {
            step = "argmax";
            rc = d.ops->argmax(d.inst, t, ids, vals, &d.err);
        }
        /* Rows whose id or value differs from the loop's (a NaN value matches a NaN). */
        for (int64_t r = 0; r < R && !rc; r++) {
            const int32_t want = ref_argmax(x + r * V, V);
            const float wv = x[r * V + want];
            if (ids[r] != want || !(vals[r] == wv || (vals[r] != vals[r] && wv != wv))) {
                if (wrong == 0)
                    snprintf(d.note, sizeof d.note, "row %lld: id %d value %g, expected id %d value %g", (long long)r,
                             ids[r], (double)vals[r], want, (double)wv);
                wrong++;
            }
        }
    }
    if (!rc && wrong > 0)
        sy_pc_row(pc, "argmax", cas, SY_PC_FAIL, wrong, 0, d.note);
    else
        verdict(&d, "argmax", cas, rc, step, wrong, 0);
    end(&d);
    free(x);
    free(ids);
    free(vals);
}

static int has_sample(const sy_device_ops *o)
{
    return o->struct_size >= offsetof(sy_device_ops, sample) + sizeof o->sample && o->sample;
}

/*
 * The sample op against the host sampler's draw (sy_sample_pick, the code
 * plugin.h's rule is written as) on rows of argmax's planted cases or of
 * values on a grid (ties decide the order), each row with its own
 * temperature (0 included: the greedy pick), top_k, top_p, min_p and
 * uniform. A row the device leaves to the host (-1) is allowed, and
 * counted in the note; any other id must be the host's.
 */
static void case_sample(sy_pc *pc, int64_t R, int64_t V, int quantised)
{
    char cas[80];
    snprintf(cas, sizeof cas, "[%lld, %lld] %s", (long long)R, (long long)V,
             quantised ? "values on a grid (ties)" : "planted ties, NaN, +-0, +-inf");
    if (!has_sample(pc->desc->ops)) {
        sy_pc_row(pc, "sample", cas, SY_PC_SKIP, -1, -1, "optional op not provided");
        return;
    }
    dev d;
    if (begin(&d, pc, "sample", cas))
        return;
    static const float temps[] = {0.0f, 0.5f, 1.0f, 1.7f, 0.8f};
    static const float top_ps[] = {1.0f, 0.9f, 0.5f};
    static const float min_ps[] = {0.0f, 0.05f};
    static const int32_t top_ks[] = {0, 3, 50, 2000};
    float *x = malloc(sizeof(float) * (size_t)(R * V));
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)R);
    sy_sample_row *rows = malloc(sizeof(sy_sample_row) * (size_t)R);
    float *prob = malloc(sizeof(float) * (size_t)V);
    int32_t *idx = malloc(sizeof(int32_t) * (size_t)V);
    int rc = SY_ERR_NOMEM;
    const char *step = "alloc/upload";
    double wrong = 0;
    int64_t to_host = 0;
    if (x && ids && rows && prob && idx) {
        fill_argmax_rows(pc, x, R, V, quantised);
        for (int64_t r = 0; r < R; r++) {
            double u = (double)r * 0.6180339887498949;
            rows[r] = (sy_sample_row){.struct_size = sizeof(sy_sample_row),
                                      .temperature = temps[r % 5],
                                      .top_p = top_ps[r % 3],
                                      .min_p = min_ps[(r / 3) % 2],
                                      .top_k = top_ks[(r / 2) % 4] < V ? top_ks[(r / 2) % 4] : 0,
                                      .u = u - floor(u)};
        }
        sy_tensor *t = act(&d, R, V, x, &rc);
        if (t) {
            step = "sample";
            rc = d.ops->sample(d.inst, t, rows, ids, &d.err);
        }
        for (int64_t r = 0; r < R && !rc; r++) {
            const int32_t want = sy_sample_pick(x + r * V, (int32_t)V, &rows[r], prob, idx);
            if (ids[r] == -1) {
                to_host++;
            } else if (ids[r] != want) {
                if (wrong == 0)
                    snprintf(d.note, sizeof d.note, "row %lld (T %g top_k %d top_p %g min_p %g u %.17g): id %d, "
                             "expected %d", (long long)r, (double)rows[r].temperature, rows[r].top_k,
                             (double)rows[r].top_p, (double)rows[r].min_p, rows[r].u, ids[r], want);
                wrong++;
            }
        }
    }
    if (!rc && wrong > 0) {
        sy_pc_row(pc, "sample", cas, SY_PC_FAIL, wrong, 0, d.note);
    } else {
        if (!rc && to_host > 0)
            snprintf(d.note, sizeof d.note, "%lld of %lld rows left to the host (-1)", (long long)to_host,
                     (long long)R);
        verdict(&d, "sample", cas, rc, step, wrong, 0);
    }
    end(&d);
    free(x);
    free(ids);
    free(rows);
    free(prob);
    free(idx);
}

static void case_rope(sy_pc *pc, int neox, int rotary, float mscale)
{
    enum { N = 6, HEADS = 3, D = 32 };
    char cas[80];
    snprintf(cas, sizeof cas, "%s head_dim %d rotary_dim %d mscale %.1f", neox ? "neox" : "gptj", D, rotary,
             (double)mscale);
    dev d;
    if (begin(&d, pc, "rope", cas))
        return;
    float x[N * HEADS * D], got[N * HEADS * D], inv[D / 2];
    double ref[N * HEADS * D];
    int32_t pos[N];
    sy_pc_fill(pc, x, N * HEADS * D, 1);
    for (int i = 0; i < N; i++)
        pos[i] = (int32_t)(sy_pc_rand_u32(pc) % 600);
    for (int i = 0; i < rotary / 2; i++)
        inv[i] = (float)pow(10000.0, -2.0 * i / rotary);
    sy_rope_params p = {sizeof p, D, rotary, neox, inv, mscale};
    int rc;
    const char *step = "alloc/upload";
    sy_tensor *t = act(&d, N, HEADS * D, x, &rc);
    if (t) {
        step = "rope";
        if (!(rc = d.ops->rope(d.inst, t, pos, &p, &d.err)))
            step = "download", rc = get(&d, got, t, N * HEADS * D);
    }
    const int half = rotary / 2;
    for (int i = 0; i < N; i++)
        for (int h = 0; h < HEADS; h++) {
            const float *xv = x + (i * HEADS + h) * D;
            double *o = ref + (i * HEADS + h) * D;
            for (int c = 0; c < D; c++)
                o[c] = xv[c];
            for (int j = 0; j < half; j++) {
                double a = (double)pos[i] * (double)inv[j], c = cos(a) * mscale, s = sin(a) * mscale;
                int i0 = neox ? j : 2 * j, i1 = neox ? j + half : 2 * j + 1;
                o[i0] = xv[i0] * c - xv[i1] * s;
                o[i1] = xv[i1] * c + xv[i0] * s;
            }
        }
    /* Angles up to 600 radians in float: a few ulps of the angle are ~1e-4. */
    verdict(&d, "rope", cas, rc, step, rc ? 0 : sy_pc_err(got, ref, N * HEADS * D), 5e-4);
    end(&d);
}

static void case_elementwise(sy_pc *pc, int silu)
{
    enum { R = 4, C = 100 };
    const char *op = silu ? "silu_mul" : "add";
    const char *cas = "[4, 100] f32";
    dev d;
    if (begin(&d, pc, op, cas))
        return;
    float a[R * C], b[R * C], got[R * C];
    double ref[R * C];
    sy_pc_fill(pc, a, R * C, 4);
    sy_pc_fill(pc, b, R * C, 2);
    int rc;
    const char *step = "alloc/upload";
    sy_tensor *ta = act(&d, R, C, a, &rc), *tb = ta ? act(&d, R, C, b, &rc) : NULL;
    sy_tensor *to = tb && silu ? act(&d, R, C, NULL, &rc) : tb ? ta : NULL;
    if (to) {
        step = op;
        rc = silu ? d.ops->silu_mul(d.inst, ta, tb, to, &d.err) : d.ops->add(d.inst, ta, tb, &d.err);
        if (!rc)
            step = "download", rc = get(&d, got, to, R * C);
    }
    for (int i = 0; i < R * C; i++)
        ref[i] = silu ? (double)a[i] / (1.0 + exp(-(double)a[i])) * b[i] : (double)a[i] + (double)b[i];
    verdict(&d, op, cas, rc, step, rc ? 0 : sy_pc_err(got, ref, R * C), EW_TOL);
    end(&d);
}

/* ---------------------------------------------------------------- speed */

typedef int (*timed_fn)(dev *d, void *arg);

/* "of Y peak (path)" for a linear on weights of wdt when the plugin has get_proc("matmul_peak"); else "". */
static void peak_note(dev *d, sy_dtype wdt, char *note, size_t len)
{
    note[0] = 0;
    void *f = d->pc->desc->get_proc ? d->pc->desc->get_proc("matmul_peak") : NULL;
    if (!f)
        return;
    char path[32] = "";
    const double peak = ((sy_device_matmul_peak_fn)f)(d->inst, wdt, path, sizeof path);
    if (peak > 0)
        snprintf(note, len, "of %.0f peak (%s)", peak, path);
}

static void time_op_note(dev *d, const char *op, const char *cas, timed_fn fn, void *arg, double work, const char *unit,
                         const char *note);

static void time_op(dev *d, const char *op, const char *cas, timed_fn fn, void *arg, double work, const char *unit)
{
    time_op_note(d, op, cas, fn, arg, work, unit, NULL);
}

static void time_op_note(dev *d, const char *op, const char *cas, timed_fn fn, void *arg, double work, const char *unit,
                         const char *note)
{
    sy_pc *pc = d->pc;
    int rc = fn(d, arg); /* warm-up, and the error check */
    long runs = 0;
    double t0 = sy_pc_now(), t = 0;
    while (!rc && (runs < 3 || t < pc->min_time)) {
        rc = fn(d, arg);
        runs++;
        if (!rc && d->ops->synchronize && (runs & 15) == 0)
            rc = d->ops->synchronize(d->inst, &d->err);
        t = sy_pc_now() - t0;
    }
    if (!rc && d->ops->synchronize)
        rc = d->ops->synchronize(d->inst, &d->err);
    t = sy_pc_now() - t0;
    if (rc)
        sy_pc_row(pc, op, cas, SY_PC_FAIL, -1, -1, why(d, op, rc));
    else
        sy_pc_time_row_note(pc, op, cas, t / (double)runs * 1e6, runs, work, unit, note);
}

typedef struct lin_args {
    sy_tensor *x, *w, *out;
} lin_args;

static int run_linear(dev *d, void *arg)
{
    lin_args *a = arg;
    return d->ops->linear(d->inst, a->x, a->w, NULL, a->out, &d->err);
}

static int run_rmsnorm(dev *d, void *arg)
{
    lin_args *a = arg;
    return d->ops->rmsnorm(d->inst, a->x, a->w, 1e-5f, a->out, &d->err);
}

static int run_silu(dev *d, void *arg)
{
    lin_args *a = arg;
    return d->ops->silu_mul(d->inst, a->x, a->w, a->out, &d->err);
}

static void speed(sy_pc *pc)
{
    static const struct {
        sy_dtype dt;
        int n, k, m;
    } lin[] = {{SY_DTYPE_F32, 1, 2048, 2048}, {SY_DTYPE_BF16, 1, 2048, 2048}, {SY_DTYPE_BF16, 1, 2048, 8192},
               {SY_DTYPE_BF16, 32, 2048, 2048}, {SY_DTYPE_BF16, 256, 2048, 2048}};
    for (size_t i = 0; i < sizeof lin / sizeof lin[0]; i++) {
        char cas[80];
        int n = lin[i].n, k = lin[i].k, m = lin[i].m;
        snprintf(cas, sizeof cas, "%s n=%d k=%d m=%d", dt_name(lin[i].dt), n, k, m);
        dev d;
        if (begin(&d, pc, "linear", cas))
            continue;
        double *wr = malloc(sizeof(double) * (size_t)m * (size_t)k);
        float *x = malloc(sizeof(float) * (size_t)n * (size_t)k);
        int rc = SY_ERR_NOMEM;
        lin_args a = {NULL, NULL, NULL};
        if (wr && x) {
            sy_pc_fill(pc, x, (size_t)n * (size_t)k, 1);
            if ((a.w = weight(&d, "speed.weight", lin[i].dt, m, k, 2, 0.5f, wr, &rc)) &&
                (a.x = act(&d, n, k, x, &rc)))
                a.out = act(&d, n, m, NULL, &rc);
        }
        if (a.out) {
            /* Batch 1 is bound by weight bytes, large batches by flops. */
            if (n == 1)
                time_op(&d, "linear", cas, run_linear, &a, (double)m * k * sy_dtype_bits(lin[i].dt) / 8, "GB/s");
            else {
                char note[64];
                peak_note(&d, lin[i].dt, note, sizeof note);
                time_op_note(&d, "linear", cas, run_linear, &a, 2.0 * n * m * k, "GFLOP/s", note);
            }
        } else {
            verdict(&d, "linear", cas, rc, "setup", 0, 0);
        }
        free(wr);
        free(x);
        end(&d);
    }
    {
        enum { R = 32, C = 2048 };
        dev d;
        const char *cas = "[32, 2048] f32";
        if (!begin(&d, pc, "rmsnorm", cas)) {
            double wr[C];
            float *x = malloc(sizeof(float) * R * C);
            int rc = SY_ERR_NOMEM;
            lin_args a = {NULL, NULL, NULL};
            if (x) {
                sy_pc_fill(pc, x, R * C, 1);
                if ((a.w = weight(&d, "speed.norm", SY_DTYPE_F32, 1, C, 1, 1, wr, &rc)) && (a.x = act(&d, R, C, x, &rc)))
                    a.out = act(&d, R, C, NULL, &rc);
            }
            free(x);
            if (a.out)
                time_op(&d, "rmsnorm", cas, run_rmsnorm, &a, 2.0 * R * C * 4, "GB/s");
            else
                verdict(&d, "rmsnorm", cas, rc, "setup", 0, 0);
            end(&d);
        }
    }
    {
        enum { R = 32, C = 5632 };
        dev d;
        const char *cas = "[32, 5632] f32";
        if (!begin(&d, pc, "silu_mul", cas)) {
            float *x = malloc(sizeof(float) * R * C);
            int rc = SY_ERR_NOMEM;
            lin_args a = {NULL, NULL, NULL};
            if (x) {
                sy_pc_fill(pc, x, R * C, 1);
                if ((a.x = act(&d, R, C, x, &rc)) && (a.w = act(&d, R, C, x, &rc)))
                    a.out = act(&d, R, C, NULL, &rc);
            }
            free(x);
            if (a.out)
                time_op(&d, "silu_mul", cas, run_silu, &a, 3.0 * R * C * 4, "GB/s");
            else
                verdict(&d, "silu_mul", cas, rc, "setup", 0, 0);
            end(&d);
        }
    }
}

int sy_pc_check_device(sy_pc *pc)
{
    if (pc->speed) {
        speed(pc);
        return 0;
    }
    static const sy_dtype dts[] = {SY_DTYPE_F32, SY_DTYPE_F16, SY_DTYPE_BF16};
    case_memory(pc);
    for (int i = 0; i < 3; i++)
        case_embed(pc, dts[i]);
    case_rmsnorm(pc, 0, 0);
    case_rmsnorm(pc, 1, 0);
    case_rmsnorm(pc, 0, 1);
    for (int i = 0; i < 3; i++) {
        case_linear(pc, dts[i], 1, 256, 72, 0);
        case_linear(pc, dts[i], 7, 96, 130, 1);
    }
    case_linear_multi(pc, SY_DTYPE_F32);
    case_linear_multi(pc, SY_DTYPE_BF16);
    case_argmax(pc, 9, 70001, 0);
    case_argmax(pc, 18, 37, 0);
    case_argmax(pc, 3, 1, 0);
    case_argmax(pc, 70, 1000, 1);
    case_sample(pc, 10, 70001, 0);
    case_sample(pc, 18, 37, 0);
    case_sample(pc, 3, 1, 0);
    case_sample(pc, 40, 3000, 1);
    case_rope(pc, 1, 32, 1.0f);
    case_rope(pc, 0, 16, 1.2f);
    case_elementwise(pc, 1);
    case_elementwise(pc, 0);
    return 0;
}
