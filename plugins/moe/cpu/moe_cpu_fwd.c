/*
 * moe/cpu forward, per pass of up to chunk_tokens tokens:
 *   1. route every token (parallel over tokens)
 *   2. group the (token, expert) assignments by expert, tokens ascending
 *   3. gather each expert's input rows into one matrix
 *   4. act = silu(x_e . gate_e^T) * (x_e . up_e^T)   parallel over (expert, inter columns)
 *      (or gpt-oss's clamped swiglu; with has_bias each product plus its bias first)
 *   5. y = act . down_e^T (+ down bias)                parallel over (expert, hidden columns)
 *   6. out[t] = sum_k w[t,k] y[row of (t,k)], in selection order (parallel over tokens)
 * With set_expert_range (expert parallelism) steps 2-6 take only the
 * selected experts this instance holds; routing (1) still ranks all of them.
 * Steps 4-5 batch each expert's tokens, so an expert's weight tile is read
 * once per pass for all of them. Their work items are cut by cost (plan_items):
 * routing gives experts very uneven token counts (3 and 126 in one pass of the
 * bench MoE), and one item per expert left a worker idle at the step's end
 * while the other finished the big one.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "moe_cpu.h"
#include "symoe_fp4act.h"
#include "sykquant.h"

typedef struct pass {
    moe_cpu *m;
    const moe_layer *L;
    const float *x, *logits;
    int64_t ldx, ldl;
    float *out;
    int64_t ldo;
    int64_t t0, n;         /* tokens of this pass */
    int32_t n_active;      /* m->work[0, n_active) */
    int64_t n_items;       /* of the current GEMM step (plan_items) */
    syk_par par;
    moe_tile tile; /* this pass's tiles (moe_tune.h); token_block 0: built-in */
} pass;

/* Columns [c0, c1) of an expert's product, its tokens token_block at a time (the tile's rows of x). */
static void expert_tile(const pass *ps, const syk_gemm *g, int64_t c0, int64_t c1)
{
    const int64_t tb = ps->tile.token_block > 0 ? ps->tile.token_block : g->n;
    for (int64_t r = 0; r < g->n; r += tb)
        syk_gemm_tile(ps->m->kern, g, r, r + tb < g->n ? r + tb : g->n, c0, c1);
}

/* Work items per claim, so that at most tile.threads workers share a step. */
static int64_t item_grain(const pass *ps, int64_t items)
{
    const int64_t t = ps->tile.threads;
    return t > 0 ? (items + t - 1) / t : 1;
}

static void route_tokens(void *arg, int64_t b, int64_t e, int worker)
{
    (void)worker;
    pass *ps = arg;
    const moe_cpu *m = ps->m;
    const int64_t K = m->p.top_k;
    for (int64_t i = b; i < e; i++)
        sy__moe_route(&m->p, ps->logits + (ps->t0 + i) * ps->ldl, ps->L->bias, m->ids + i * K, m->wts + i * K);
}

static void gather_rows(void *arg, int64_t b, int64_t e, int worker)
{
    (void)worker;
    pass *ps = arg;
    const moe_cpu *m = ps->m;
    const int64_t H = m->p.hidden;
    for (int64_t a = b; a < e; a++) {
        const float *src = ps->x + (ps->t0 + m->assign_tok[a]) * ps->ldx;
        memcpy(m->xe + a * H, src, sizeof(float) * (size_t)H);
        if (m->matmul.bdot)
            m->matmul.bdot->to_bf16(m->xeb + a * H, src, H);
    }
}

/* activations = nvfp4 / mxfp4: rows [b, e) of xe (the gate/up input) replaced by their NVFP4 / MXFP4 values. */
static void quant_xe_rows(void *arg, int64_t b, int64_t e, int worker)
{
    (void)worker;
    pass *ps = arg;
    moe_cpu *m = ps->m;
    const int64_t H = m->p.hidden;
    for (int64_t a = b; a < e; a++) {
        uint8_t *q = m->qscratch + a * m->qrow;
        if (m->fp4act == 2)
            syx_fake_quant_row(m->xe + a * H, H, q, q + (H + 1) / 2);
        else
            syf_fake_quant_row(m->xe + a * H, H, q, q + (H + 1) / 2);
    }
}

/* The same for act (silu(gate) * up, the down input), once every column of a row is done. */
static void quant_act_rows(void *arg, int64_t b, int64_t e, int worker)
{
    (void)worker;
    pass *ps = arg;
    moe_cpu *m = ps->m;
    const int64_t F = m->p.inter;
    for (int64_t a = b; a < e; a++) {
        uint8_t *q = m->qscratch + a * m->qrow;
        if (m->fp4act == 2)
            syx_fake_quant_row(m->act + a * F, F, q, q + (F + 1) / 2);
        else
            syf_fake_quant_row(m->act + a * F, F, q, q + (F + 1) / 2);
    }
}

/* bias: NULL, or the experts' F32 biases [e_count][m_cols] (the GEMM adds them after the dot products). */
static syk_gemm expert_gemm(const pass *ps, int32_t e, int which, const sy_tensor *w, const float *x,
                            const uint16_t *xb, int64_t k, float *out, int64_t m_cols, const float *bias)
{
    const moe_cpu *m = ps->m;
    int64_t r, c, ld;
    syk_view2d(w, &r, &c, &ld);
    syk_gemm g = {
        .x = x + (int64_t)m->offsets[e] * k,
        .ldx = k,
        .w = w->data,
        .wdtype = w->dtype,
        .ldw = ld,
        .bias = bias ? bias + (int64_t)e * m_cols : NULL,
        .bias_dtype = SY_DTYPE_F32,
        .out = out + (int64_t)m->offsets[e] * m_cols,
        .ldo = m_cols,
        .n = m->counts[e],
        .m = m_cols,
        .k = k,
        .wq = syk_wdtype_quant(w->dtype) ? w : NULL,
    };
    if (m->matmul.bdot && w->dtype == SY_DTYPE_BF16) {
        g.bdot = m->matmul.bdot;
        g.xb = xb + (int64_t)m->offsets[e] * k;
        g.ldxb = k;
        if (m->matmul.amx && ps->L->packs) { /* which: 0 gate, 1 up, 2 down */
            g.amx_w = ps->L->packs[(int64_t)which * ps->L->n_packs + e];
            g.amx = m->matmul.amx;
        }
    }
    return g;
}

/* Item it of the current GEMM step of cols columns: its expert and columns [*c0, *c1). */
static int32_t item_at(const pass *ps, int64_t it, int64_t cols, int64_t *c0, int64_t *c1)
{
    const moe_work *w = ps->m->work;
    int32_t lo = 0, hi = ps->n_active - 1; /* the last work whose item0 <= it */
    while (lo < hi) {
        const int32_t mid = lo + (hi - lo + 1) / 2;
        if (w[mid].item0 <= it)
            lo = mid;
        else
            hi = mid - 1;
    }
    *c0 = (it - w[lo].item0) * w[lo].width;
    *c1 = *c0 + w[lo].width < cols ? *c0 + w[lo].width : cols;
    return w[lo].e;
}

static void gate_up_items(void *arg, int64_t b, int64_t e_, int worker)
{
    (void)worker;
    pass *ps = arg;
    const moe_cpu *m = ps->m;
    const int64_t H = m->p.hidden, F = m->p.inter;
    for (int64_t it = b; it < e_; it++) {
        int64_t c0, c1;
        const int32_t e = item_at(ps, it, F, &c0, &c1);
        const syk_gemm g = expert_gemm(ps, e, 0, &ps->L->gate[e], m->xe, m->xeb, H, m->act, F, ps->L->gbias);
        const syk_gemm u = expert_gemm(ps, e, 1, &ps->L->up[e], m->xe, m->xeb, H, m->upb, F, ps->L->ubias);
        expert_tile(ps, &g, c0, c1);
        expert_tile(ps, &u, c0, c1);
        const int clamp = m->p.activation == SY_MOE_ACT_SWIGLU_CLAMP;
        for (int64_t r = 0; r < g.n; r++) {
            if (clamp)
                syk_swiglu_clamp_vexp(m->kern, g.out + r * F + c0, g.out + r * F + c0, u.out + r * F + c0, c1 - c0,
                                      m->p.swiglu_alpha, m->p.swiglu_limit);
            else
                syk_silu_mul_vexp(m->kern, g.out + r * F + c0, g.out + r * F + c0, u.out + r * F + c0, c1 - c0);
            if (m->matmul.bdot) /* this item's columns of the down projection's input */
                m->matmul.bdot->to_bf16(m->actb + ((int64_t)m->offsets[e] + r) * F + c0, g.out + r * F + c0, c1 - c0);
        }
    }
}

static void down_items(void *arg, int64_t b, int64_t e_, int worker)
{
    (void)worker;
    pass *ps = arg;
    const moe_cpu *m = ps->m;
    const int64_t H = m->p.hidden, F = m->p.inter;
    for (int64_t it = b; it < e_; it++) {
        int64_t c0, c1;
        const int32_t e = item_at(ps, it, H, &c0, &c1);
        const syk_gemm d = expert_gemm(ps, e, 2, &ps->L->down[e], m->act, m->actb, F, m->ye, H, ps->L->dbias);
        expert_tile(ps, &d, c0, c1);
    }
}

static void combine_tokens(void *arg, int64_t b, int64_t e, int worker)
{
    (void)worker;
    pass *ps = arg;
    const moe_cpu *m = ps->m;
    const int64_t H = m->p.hidden, K = m->p.top_k;
    for (int64_t i = b; i < e; i++) {
        float *o = ps->out + (ps->t0 + i) * ps->ldo;
        int first_term = 1;
        for (int64_t k = 0; k < K; k++) {
            const int32_t slot = m->slot_of[i * K + k];
            if (slot < 0) /* held by another rank, which adds it in the allreduce */
                continue;
            const float w = m->wts[i * K + k];
            const float *y = m->ye + (int64_t)slot * H;
            if (first_term)
                for (int64_t d = 0; d < H; d++)
                    o[d] = w * y[d];
            else
                for (int64_t d = 0; d < H; d++)
                    o[d] += w * y[d];
            first_term = 0;
        }
        if (first_term)
            memset(o, 0, sizeof(float) * (size_t)H);
    }
}

/*
 * A weight column's own cost in an item, in tokens' worth of FMAs: the
 * kernel widens (BF16/F16) or streams it from memory once per call whatever
 * the token count, which is most of an item's time in decode (a few tokens
 * per expert).
 */
#define MOE_COL_COST 4
#define MOE_ITEMS_PER_WORKER 8 /* a worker's last item is at most ~1/8 of its share: the step's idle tail */
#define MOE_MIN_WIDTH 32       /* columns; below that the calls' setup shows */

static int work_cmp(const void *a, const void *b)
{
    const moe_work *x = a, *y = b;
    if (x->cost != y->cost)
        return x->cost > y->cost ? -1 : 1;
    return x->e < y->e ? -1 : x->e > y->e;
}

/*
 * Cuts each active expert's cols columns into items of about one cost
 * (MOE_ITEMS_PER_WORKER per worker in all; an expert with a big share of
 * the tokens gets many narrow items, one with few tokens one wide item) and
 * orders the experts costliest item first, so the pool, which hands items
 * out in order, ends the step on small ones (longest-first list
 * scheduling). A table's n_block fixes every width instead. Widths are
 * multiples of 4 (AMX: of its panel), so a column is always computed in the
 * same 4-column group of the kernel: the bits do not depend on the cut.
 */
static void plan_items(pass *ps, int64_t cols)
{
    moe_cpu *m = ps->m;
    const int64_t align = m->matmul.amx ? SYK_AMX_PANEL : 4; /* AMX: whole panels, none computed twice */
    int64_t total = 0;
    for (int32_t a = 0; a < ps->n_active; a++)
        total += ((int64_t)m->counts[m->work[a].e] + MOE_COL_COST) * cols;
    const int64_t workers = ps->par.n_workers > 1 ? ps->par.n_workers : 1;
    const int64_t target = (total + workers * MOE_ITEMS_PER_WORKER - 1) / (workers * MOE_ITEMS_PER_WORKER);
    for (int32_t a = 0; a < ps->n_active; a++) {
        moe_work *w = &m->work[a];
        const int64_t per_col = (int64_t)m->counts[w->e] + MOE_COL_COST;
        int64_t width = ps->tile.n_block;
        if (width <= 0) {
            int64_t n = (per_col * cols + target - 1) / (target > 0 ? target : 1);
            const int64_t max_n = cols / MOE_MIN_WIDTH > 1 ? cols / MOE_MIN_WIDTH : 1;
            n = n < 1 ? 1 : n > max_n ? max_n : n;
            width = (cols + n - 1) / n;
            width = (width + align - 1) / align * align;
        }
        w->width = (int32_t)width;
        w->cost = per_col * width;
    }
    qsort(m->work, (size_t)ps->n_active, sizeof *m->work, work_cmp);
    int64_t items = 0;
    for (int32_t a = 0; a < ps->n_active; a++) {
        m->work[a].item0 = items;
        items += (cols + m->work[a].width - 1) / m->work[a].width;
    }
    ps->n_items = items;
}

static void run_pass(pass *ps)
{
    moe_cpu *m = ps->m;
    /* Local expert indices (expert - e_first); all experts without expert parallelism. */
    const int32_t E = m->e_count, e0 = m->e_first, K = m->p.top_k;
    const int64_t n = ps->n, A = n * K;

    syk_par_for(&ps->par, n, 4, route_tokens, ps);

    memset(m->counts, 0, sizeof(int32_t) * (size_t)E);
    for (int64_t a = 0; a < A; a++) {
        const int32_t e = m->ids[a] - e0;
        if (e >= 0 && e < E)
            m->counts[e]++;
    }
    m->offsets[0] = 0;
    ps->n_active = 0;
    for (int32_t e = 0; e < E; e++) {
        m->offsets[e + 1] = m->offsets[e] + m->counts[e];
        if (m->counts[e])
            m->work[ps->n_active++].e = e;
    }
    /* Fill in token order; counts doubles as the per-expert cursor. */
    memset(m->counts, 0, sizeof(int32_t) * (size_t)E);
    for (int64_t i = 0; i < n; i++)
        for (int32_t k = 0; k < K; k++) {
            const int32_t e = m->ids[i * K + k] - e0;
            if (e < 0 || e >= E) {
                m->slot_of[i * K + k] = -1;
                continue;
            }
            const int32_t row = m->offsets[e] + m->counts[e]++;
            m->assign_tok[row] = (int32_t)i;
            m->slot_of[i * K + k] = row;
        }

    syk_par_for(&ps->par, m->offsets[E], 64, gather_rows, ps);
    if (m->fp4act)
        syk_par_for(&ps->par, m->offsets[E], 16, quant_xe_rows, ps);
    plan_items(ps, m->p.inter);
    syk_par_for(&ps->par, ps->n_items, item_grain(ps, ps->n_items), gate_up_items, ps);
    if (m->fp4act)
        syk_par_for(&ps->par, m->offsets[E], 16, quant_act_rows, ps);
    plan_items(ps, m->p.hidden);
    syk_par_for(&ps->par, ps->n_items, item_grain(ps, ps->n_items), down_items, ps);
    syk_par_for(&ps->par, n, 16, combine_tokens, ps);
}

static int f32_rows(const sy_tensor *t, const char *what, int64_t rows, int64_t cols, int64_t *ld, sy_err *err)
{
    int64_t r, c;
    if (!t)
        return sy_err_set(err, SY_ERR_INVALID, "moe forward: %s is NULL", what);
    if (t->dtype != SY_DTYPE_F32)
        return sy_err_set(err, SY_ERR_INVALID, "moe forward: %s must be F32, found %s", what, sy_dtype_name(t->dtype));
    if (syk_view2d(t, &r, &c, ld))
        return sy_err_set(err, SY_ERR_INVALID, "moe forward: %s must be rows of contiguous elements", what);
    if ((rows >= 0 && r != rows) || c != cols)
        return sy_err_set(err, SY_ERR_INVALID, "moe forward: %s must be [%lld, %lld], found [%lld, %lld]", what,
                          (long long)(rows >= 0 ? rows : r), (long long)cols, (long long)r, (long long)c);
    if (!t->data && r * c > 0)
        return sy_err_set(err, SY_ERR_INVALID, "moe forward: %s has no data", what);
    return SY_OK;
}

int sy__moe_cpu_forward(void *inst, int32_t layer, const sy_tensor *x, const sy_tensor *router_logits, sy_tensor *out,
                        sy_err *err)
{
    moe_cpu *m = inst;
    if (!m->prepared)
        return sy_err_set(err, SY_ERR_INVALID, "moe cpu: forward before prepare");
    if (layer < 0 || layer >= m->p.n_layers || !m->layers[layer].ready)
        return sy_err_set(err, SY_ERR_INVALID, "moe forward: layer %d has no experts (prepare_layer not called)", layer);
    if (m->p.has_bias && !m->layers[layer].bias_ready)
        return sy_err_set(err, SY_ERR_INVALID, "moe forward: layer %d has no expert biases (the problem's has_bias is "
                          "set; prepare_layer_bias not called after prepare_layer)", layer);
    pass ps;
    memset(&ps, 0, sizeof ps);
    int64_t ldl;
    int rc;
    if ((rc = f32_rows(x, "x", -1, m->p.hidden, &ps.ldx, err)))
        return rc;
    const int64_t n = sy_tensor_numel(x) / m->p.hidden;
    if ((rc = f32_rows(router_logits, "router_logits", n, m->p.n_experts, &ldl, err)) ||
        (rc = f32_rows(out, "out", n, m->p.hidden, &ps.ldo, err)))
        return rc;
    ps.m = m;
    ps.L = &m->layers[layer];
    ps.x = x->data;
    ps.logits = router_logits->data;
    ps.ldl = ldl;
    ps.out = out->data;
    ps.par = syk_par_from_host(m->host);
    /* out may alias x: a pass gathers its x rows before it writes their out rows. */
    for (int64_t t0 = 0; t0 < n; t0 += m->chunk_tokens) {
        ps.t0 = t0;
        ps.n = n - t0 < m->chunk_tokens ? n - t0 : m->chunk_tokens;
        ps.tile = moe_tune_pick(&m->tune, ps.n);
        const int bucket = moe_tune_bucket(&m->tune, ps.n);
        const uint64_t bit = (uint64_t)1 << (bucket >= 0 ? bucket : 63);
        if (!(m->logged_buckets & bit)) { /* once per bucket: which entry its passes really run with */
            m->logged_buckets |= bit;
            if (bucket >= 0)
                sy_logf(m->host, SY_LOG_DEBUG, SY_MOE_CPU_NAME,
                        "pass of %lld tokens: bucket tokens=%lld, tile %lld,%lld,%lld (token_block,n_block,threads)",
                        (long long)ps.n, (long long)m->tune.tokens[bucket], (long long)ps.tile.token_block,
                        (long long)ps.tile.n_block, (long long)ps.tile.threads);
            else
                sy_logf(m->host, SY_LOG_DEBUG, SY_MOE_CPU_NAME, "pass of %lld tokens: built-in tiles", (long long)ps.n);
        }
        run_pass(&ps);
    }
    return SY_OK;
}
