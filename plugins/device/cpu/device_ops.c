/*
 * device/cpu compute ops. Each op first checks every operand (dtype, shape,
 * layout) and fails with SY_ERR_INVALID naming the op and the shapes
 * expected and found; then it splits rows (or, for linear, output columns)
 * over the worker pool. Nothing allocates per call.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>

#include "device_cpu.h"
#include "sydev_args.h"
#include "sykquant.h"

/* Rows per chunk so each worker's piece is worth waking it for (~16k elements). */
static int64_t row_grain(int64_t cols)
{
    return cols >= 16384 ? 1 : 16384 / (cols > 0 ? cols : 1);
}

/* ----------------------------------------------------------------- embed */

typedef struct embed_job {
    const char *table;
    size_t row_bytes;
    sy_dtype dt;
    const int32_t *ids;
    sydev_rows out;
} embed_job;

static void embed_rows(void *arg, int64_t b, int64_t e, int worker)
{
    (void)worker;
    const embed_job *j = arg;
    for (int64_t i = b; i < e; i++)
        syk_row_to_f32(j->out.p + i * j->out.ld, j->table + (size_t)j->ids[i] * j->row_bytes, j->dt, j->out.cols);
}

int sy__cpu_embed(void *inst, const sy_tensor *table, const int32_t *ids, int64_t n, sy_tensor *out, sy_err *err)
{
    sy_cpu_dev *d = inst;
    int64_t vocab, h, ld;
    sydev_rows o;
    int rc;
    if ((rc = sydev_w_rows(table, "embed", "table", &vocab, &h, &ld, err)) || (rc = sydev_f32_rows(out, "embed", "out", &o, err)))
        return rc;
    if (n < 0 || o.rows != n || o.cols != h)
        return sy_err_set(err, SY_ERR_INVALID, "embed: out must be [n, hidden] = [%lld, %lld], found [%lld, %lld]",
                          (long long)n, (long long)h, (long long)o.rows, (long long)o.cols);
    if (n > 0 && !ids)
        return sy_err_set(err, SY_ERR_INVALID, "embed: ids is NULL");
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= vocab)
            return sy_err_set(err, SY_ERR_INVALID, "embed: ids[%lld] = %d is outside the table's [0, %lld) rows",
                              (long long)i, ids[i], (long long)vocab);
    embed_job j = {table->data, (size_t)ld * syk_wdtype_size(table->dtype), table->dtype, ids, o};
    syk_par_for(&d->par, n, row_grain(h), embed_rows, &j);
    return SY_OK;
}

/* --------------------------------------------------------------- rmsnorm */

typedef struct norm_job {
    sydev_rows res, x, out;
    const void *w;
    sy_dtype wdt;
    float eps;
    int add; /* add_rmsnorm: res += x first */
} norm_job;

static void norm_rows(void *arg, int64_t b, int64_t e, int worker)
{
    (void)worker;
    const norm_job *j = arg;
    for (int64_t i = b; i < e; i++) {
        const float *src = j->x.p + i * j->x.ld;
        if (j->add) {
            float *r = j->res.p + i * j->res.ld;
            syk_add(r, src, j->x.cols);
            src = r;
        }
        syk_rmsnorm_row(j->out.p + i * j->out.ld, src, j->w, j->wdt, j->x.cols, j->eps);
    }
}

int sy__cpu_rmsnorm(void *inst, const sy_tensor *x, const sy_tensor *w, float eps, sy_tensor *out, sy_err *err)
{
    sy_cpu_dev *d = inst;
    norm_job j;
    memset(&j, 0, sizeof j);
    int rc;
    if ((rc = sydev_f32_rows(x, "rmsnorm", "x", &j.x, err)) || (rc = sydev_f32_rows(out, "rmsnorm", "out", &j.out, err)) ||
        (rc = sydev_same_shape(&j.x, &j.out, "rmsnorm", "x", "out", err)) ||
        (rc = sydev_vec_param(w, j.x.cols, "rmsnorm", "w", err)) || (rc = sydev_check_eps(eps, "rmsnorm", err)))
        return rc;
    j.w = w->data;
    j.wdt = w->dtype;
    j.eps = eps;
    syk_par_for(&d->par, j.x.rows, row_grain(j.x.cols), norm_rows, &j);
    return SY_OK;
}

int sy__cpu_add_rmsnorm(void *inst, sy_tensor *residual, const sy_tensor *x, const sy_tensor *w, float eps,
                        sy_tensor *out, sy_err *err)
{
    sy_cpu_dev *d = inst;
    norm_job j;
    memset(&j, 0, sizeof j);
    int rc;
    if ((rc = sydev_f32_rows(residual, "add_rmsnorm", "residual", &j.res, err)) ||
        (rc = sydev_f32_rows(x, "add_rmsnorm", "x", &j.x, err)) || (rc = sydev_f32_rows(out, "add_rmsnorm", "out", &j.out, err)) ||
        (rc = sydev_same_shape(&j.res, &j.x, "add_rmsnorm", "residual", "x", err)) ||
        (rc = sydev_same_shape(&j.res, &j.out, "add_rmsnorm", "residual", "out", err)) ||
        (rc = sydev_vec_param(w, j.x.cols, "add_rmsnorm", "w", err)) || (rc = sydev_check_eps(eps, "add_rmsnorm", err)))
        return rc;
    j.w = w->data;
    j.wdt = w->dtype;
    j.eps = eps;
    j.add = 1;
    syk_par_for(&d->par, j.x.rows, row_grain(j.x.cols), norm_rows, &j);
    return SY_OK;
}

/* ---------------------------------------------------------------- linear */

static int overlaps(const void *a, size_t an, const void *b, size_t bn)
{
    const char *pa = a, *pb = b;
    return pa < pb + bn && pb < pa + an;
}

/* Checks one linear's operands and describes it as a syk_gemm (n or m may be 0: nothing to do). */
static int linear_setup(const sy_tensor *x, const sy_tensor *w, const sy_tensor *bias, sy_tensor *out, const char *op,
                        syk_gemm *g, sy_err *err)
{
    sydev_rows xv, ov;
    int64_t m, k, ldw;
    int rc;
    char why[160];
    if (w && syk_wdtype_quant(w->dtype)) { /* FP8 / NVFP4: the scales travel in w (sykquant.h) */
        if (syk_qweight_check(w, why, sizeof why))
            return sy_err_set(err, SY_ERR_INVALID, "%s: w: %s", op, why);
        m = w->shape[0];
        k = ldw = w->shape[1];
        if ((rc = sydev_f32_rows(x, op, "x", &xv, err)) || (rc = sydev_f32_rows(out, op, "out", &ov, err)))
            return rc;
    } else if ((rc = sydev_f32_rows(x, op, "x", &xv, err)) || (rc = sydev_w_rows(w, op, "w", &m, &k, &ldw, err)) ||
               (rc = sydev_f32_rows(out, op, "out", &ov, err)))
        return rc;
    if (xv.cols != k)
        return sy_err_set(err, SY_ERR_INVALID, "%s: x is [%lld, %lld] but w is [%lld, %lld]; expected x [n, %lld]", op,
                          (long long)xv.rows, (long long)xv.cols, (long long)m, (long long)k, (long long)k);
    if (ov.rows != xv.rows || ov.cols != m)
        return sy_err_set(err, SY_ERR_INVALID, "%s: out must be [n, m] = [%lld, %lld], found [%lld, %lld]", op,
                          (long long)xv.rows, (long long)m, (long long)ov.rows, (long long)ov.cols);
    if (bias && (rc = sydev_vec_param(bias, m, op, "bias", err)))
        return rc;
    memset(g, 0, sizeof *g);
    if (xv.rows == 0 || m == 0)
        return SY_OK;
    const size_t xbytes = ((size_t)(xv.rows - 1) * (size_t)xv.ld + (size_t)k) * sizeof(float);
    const size_t obytes = ((size_t)(ov.rows - 1) * (size_t)ov.ld + (size_t)m) * sizeof(float);
    if (overlaps(xv.p, xbytes, ov.p, obytes))
        return sy_err_set(err, SY_ERR_INVALID, "%s: out overlaps x; the product cannot be computed in place", op);
    *g = (syk_gemm){
        .x = xv.p,
        .ldx = xv.ld,
        .w = w->data,
        .wdtype = w->dtype,
        .ldw = ldw,
        .bias = bias ? bias->data : NULL,
        .bias_dtype = bias ? bias->dtype : SY_DTYPE_F32,
        .out = ov.p,
        .ldo = ov.ld,
        .n = xv.rows,
        .m = m,
        .k = k,
        .wq = syk_wdtype_quant(w->dtype) ? w : NULL,
        .amx_w = syk_amx_pack_of(w), /* used only when bdot_setup turns the BF16 path on */
    };
    return SY_OK;
}

/*
 * With `matmul = bf16`: rounds the x of every BF16-weight product to BF16
 * once (parts that share an x share the copy) into the instance's buffer
 * and points the products at it.
 */
static int bdot_setup(sy_cpu_dev *d, syk_gemm *g, int n, const char *op, sy_err *err)
{
    if (!d->matmul.bdot)
        return SY_OK;
    size_t need = 0;
    for (int i = 0; i < n; i++)
        if (g[i].wdtype == SY_DTYPE_BF16 && g[i].n > 0 && g[i].m > 0 && g[i].k > 0)
            need += (size_t)g[i].n * (size_t)g[i].k;
    if (need == 0)
        return SY_OK;
    if (need > d->xb_cap) {
        /* Grows to the largest batch seen, then never again: ops stay allocation-free in steady state. */
        syk_free(d->host, d->xb);
        d->xb_cap = 0;
        d->xb = syk_alloc(d->host, need * sizeof(uint16_t), 64);
        if (!d->xb)
            return sy_err_set(err, SY_ERR_NOMEM, "%s: cannot allocate %zu bytes for x rounded to BF16", op,
                              need * sizeof(uint16_t));
        d->xb_cap = need;
    }
    size_t used = 0;
    for (int i = 0; i < n; i++) {
        if (!(g[i].wdtype == SY_DTYPE_BF16 && g[i].n > 0 && g[i].m > 0 && g[i].k > 0))
            continue;
        g[i].bdot = d->matmul.bdot;
        g[i].amx = g[i].amx_w ? d->matmul.amx : NULL;
        g[i].ldxb = g[i].k;
        for (int p = 0; p < i && !g[i].xb; p++)
            if (g[p].xb && g[p].x == g[i].x && g[p].ldx == g[i].ldx && g[p].n == g[i].n && g[p].k == g[i].k)
                g[i].xb = g[p].xb;
        if (g[i].xb)
            continue;
        g[i].xb = d->xb + used;
        syk_rows_to_bf16(d->matmul.bdot, d->xb + used, g[i].ldxb, g[i].x, g[i].ldx, g[i].n, g[i].k, &d->par);
        used += (size_t)g[i].n * (size_t)g[i].k;
    }
    return SY_OK;
}

int sy__cpu_linear(void *inst, const sy_tensor *x, const sy_tensor *w, const sy_tensor *bias, sy_tensor *out,
                   sy_err *err)
{
    sy_cpu_dev *d = inst;
    syk_gemm g;
    int rc = linear_setup(x, w, bias, out, "linear", &g, err);
    if (rc || (rc = bdot_setup(d, &g, 1, "linear", err)))
        return rc;
    if (g.n > 0 && g.m > 0)
        syk_gemm_run(d->kern, &g, &d->par);
    return SY_OK;
}

int sy__cpu_linear_multi(void *inst, const sy_tensor *x, int32_t n, const sy_tensor *const *w,
                         const sy_tensor *const *bias, sy_tensor *const *out, sy_err *err)
{
    sy_cpu_dev *d = inst;
    if (n < 1 || n > SYK_GEMM_MULTI_MAX)
        return sy_err_set(err, SY_ERR_INVALID, "linear_multi: n = %d, expected 1..%d", n, SYK_GEMM_MULTI_MAX);
    if (!w || !out)
        return sy_err_set(err, SY_ERR_INVALID, "linear_multi: %s is NULL", w ? "out" : "w");
    syk_gemm g[SYK_GEMM_MULTI_MAX];
    char op[32];
    for (int32_t i = 0; i < n; i++) {
        snprintf(op, sizeof op, "linear_multi part %d", i);
        int rc = linear_setup(x, w[i], bias ? bias[i] : NULL, out[i], op, &g[i], err);
        if (rc)
            return rc;
        for (int32_t p = 0; p < i; p++) /* the parts run concurrently: no output may overlap another */
            if (g[i].n > 0 && g[i].m > 0 && g[p].n > 0 && g[p].m > 0 &&
                overlaps(g[i].out, ((size_t)(g[i].n - 1) * (size_t)g[i].ldo + (size_t)g[i].m) * sizeof(float),
                         g[p].out, ((size_t)(g[p].n - 1) * (size_t)g[p].ldo + (size_t)g[p].m) * sizeof(float)))
                return sy_err_set(err, SY_ERR_INVALID, "linear_multi: out[%d] overlaps out[%d]", i, p);
    }
    int rc = bdot_setup(d, g, n, "linear_multi", err);
    if (rc)
        return rc;
    syk_gemm_run_multi(d->kern, g, n, &d->par);
    return SY_OK;
}

/* ------------------------------------------------------------------ rope */

#define ROPE_MAX_DIM 1024

typedef struct rope_job {
    sydev_rows x;
    const int32_t *pos;
    const sy_rope_params *p;
    int64_t heads;
} rope_job;

static void rope_rows(void *arg, int64_t b, int64_t e, int worker)
{
    (void)worker;
    const rope_job *j = arg;
    const int64_t half = j->p->rotary_dim / 2;
    float cs[ROPE_MAX_DIM];
    for (int64_t t = b; t < e; t++) {
        /* The angle in double: pos * inv_freq reaches thousands of radians, where
         * an F32 product would lose the low bits that cos/sin depend on. */
        for (int64_t i = 0; i < half; i++) {
            const double a = (double)j->pos[t] * (double)j->p->inv_freq[i];
            cs[i] = (float)(cos(a) * (double)j->p->mscale);
            cs[half + i] = (float)(sin(a) * (double)j->p->mscale);
        }
        syk_rope_row(j->x.p + t * j->x.ld, j->heads, j->p->head_dim, j->p->rotary_dim, j->p->neox, cs);
    }
}

int sy__cpu_rope(void *inst, sy_tensor *x, const int32_t *pos, const sy_rope_params *p, sy_err *err)
{
    sy_cpu_dev *d = inst;
    rope_job j;
    int rc = sydev_f32_rows(x, "rope", "x", &j.x, err);
    if (rc)
        return rc;
    if (!p || p->struct_size < offsetof(sy_rope_params, mscale) + sizeof p->mscale)
        return sy_err_set(err, SY_ERR_INVALID, "rope: params missing or too old (struct_size %u)",
                          p ? p->struct_size : 0u);
    if (p->head_dim <= 0 || j.x.cols % p->head_dim)
        return sy_err_set(err, SY_ERR_INVALID, "rope: x is [%lld, %lld], not a whole number of heads of head_dim %d",
                          (long long)j.x.rows, (long long)j.x.cols, p->head_dim);
    if (p->rotary_dim <= 0 || p->rotary_dim > p->head_dim || p->rotary_dim % 2)
        return sy_err_set(err, SY_ERR_INVALID, "rope: rotary_dim %d must be even and in (0, head_dim %d]",
                          p->rotary_dim, p->head_dim);
    if (p->rotary_dim > ROPE_MAX_DIM)
        return sy_err_set(err, SY_ERR_UNSUPPORTED, "rope: rotary_dim %d is over this plugin's %d", p->rotary_dim,
                          ROPE_MAX_DIM);
    if (!p->inv_freq || (j.x.rows > 0 && !pos))
        return sy_err_set(err, SY_ERR_INVALID, "rope: %s is NULL", p->inv_freq ? "pos" : "inv_freq");
    j.pos = pos;
    j.p = p;
    j.heads = j.x.cols / p->head_dim;
    syk_par_for(&d->par, j.x.rows, row_grain(j.x.cols * 4), rope_rows, &j);
    return SY_OK;
}

/* ------------------------------------------------------ silu_mul and add */

typedef struct ew_job {
    sydev_rows a, b, out;
    int op; /* 0: out = silu(a) * b; 1: a += b */
    const syk_kernels *kern;
} ew_job;

static void ew_rows(void *arg, int64_t b, int64_t e, int worker)
{
    (void)worker;
    const ew_job *j = arg;
    for (int64_t i = b; i < e; i++) {
        if (j->op == 0)
            syk_silu_mul_vexp(j->kern, j->out.p + i * j->out.ld, j->a.p + i * j->a.ld, j->b.p + i * j->b.ld,
                              j->a.cols);
        else
            syk_add(j->a.p + i * j->a.ld, j->b.p + i * j->b.ld, j->a.cols);
    }
}

int sy__cpu_silu_mul(void *inst, const sy_tensor *gate, const sy_tensor *up, sy_tensor *out, sy_err *err)
{
    sy_cpu_dev *d = inst;
    ew_job j;
    memset(&j, 0, sizeof j);
    int rc;
    if ((rc = sydev_f32_rows(gate, "silu_mul", "gate", &j.a, err)) || (rc = sydev_f32_rows(up, "silu_mul", "up", &j.b, err)) ||
        (rc = sydev_f32_rows(out, "silu_mul", "out", &j.out, err)) ||
        (rc = sydev_same_shape(&j.a, &j.b, "silu_mul", "gate", "up", err)) ||
        (rc = sydev_same_shape(&j.a, &j.out, "silu_mul", "gate", "out", err)))
        return rc;
    j.op = 0;
    j.kern = d->kern;
    syk_par_for(&d->par, j.a.rows, row_grain(j.a.cols * 4), ew_rows, &j);
    return SY_OK;
}

int sy__cpu_add(void *inst, sy_tensor *acc, const sy_tensor *x, sy_err *err)
{
    sy_cpu_dev *d = inst;
    ew_job j;
    memset(&j, 0, sizeof j);
    int rc;
    if ((rc = sydev_f32_rows(acc, "add", "acc", &j.a, err)) || (rc = sydev_f32_rows(x, "add", "x", &j.b, err)) ||
        (rc = sydev_same_shape(&j.a, &j.b, "add", "acc", "x", err)))
        return rc;
    j.op = 1;
    syk_par_for(&d->par, j.a.rows, row_grain(j.a.cols), ew_rows, &j);
    return SY_OK;
}
