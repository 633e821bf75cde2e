/*
 * plugin-check for attention plugins: several engine-like steps (prefill
 * chunks, decodes, sequences of different lengths in one batch, blocks in
 * shuffled order, then a copy-on-write fork through copy_blocks) on every
 * layer, each compared with float64 causal attention over the sequence's
 * whole history.
 */
#include "config.h"

#include "plugincheck/check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SEQS 4
#define MAX_LEN 256

typedef struct acase {
    const char *name;
    int32_t n_heads, n_kv_heads, head_dim, v_head_dim, block_size, window;
    sy_dtype kv;
    double tol;
    /* {0, 0}: window for both layers; else sy_attn_problem.layer_window (ABI 1.1), one window per layer (0: full) */
    int32_t layer_window[2];
} acase;

/* A sequence's history per layer: the k/v rows written so far. */
typedef struct seq {
    int len;
    int32_t blocks[MAX_LEN];
    float *k, *v; /* [layers][MAX_LEN][kv_heads * dim] */
} seq;

typedef struct run {
    sy_pc *pc;
    const sy_attn_ops *ops;
    void *inst;
    sy_attn_problem p;
    int32_t layer_window[2]; /* p.layer_window points here */
    float sinks[2 * 64];     /* p.sinks points here when the case has sinks ([layers][heads], ABI 1.1) */
    const acase *c;
    seq s[MAX_SEQS];
    int32_t *free_blocks;
    int n_free;
    sy_err err;
    char note[700];
    double worst;
} run;

static int take_block(run *r)
{
    return r->n_free > 0 ? r->free_blocks[--r->n_free] : -1;
}

static float *hist(const run *r, float *base, int layer, int pos, int dim)
{
    return base + ((size_t)layer * MAX_LEN + (size_t)pos) * (size_t)(r->p.n_kv_heads * dim);
}

/* One step over sequences ids[i] with n_new[i] new tokens each, all layers. */
static int step(run *r, int n, const int *ids, const int *n_new, const char **fail_step)
{
    const sy_attn_problem *p = &r->p;
    const int H = p->n_heads, KV = p->n_kv_heads, D = p->head_dim, DV = p->v_head_dim, G = H / KV;
    int32_t tok_start[MAX_SEQS + 1], ctx_len[MAX_SEQS];
    int T = 0;
    tok_start[0] = 0;
    for (int i = 0; i < n; i++) {
        seq *s = &r->s[ids[i]];
        ctx_len[i] = s->len;
        for (int pos = s->len; pos < s->len + n_new[i]; pos++)
            if (pos % p->block_size == 0 && (s->blocks[pos / p->block_size] = take_block(r)) < 0) {
                *fail_step = "plugin-check";
                return sy_err_set(&r->err, SY_ERR_INTERNAL, "plugin-check ran out of blocks (a bug in its cases)");
            }
        T += n_new[i];
        tok_start[i + 1] = T;
    }
    const int max_blocks = MAX_LEN / p->block_size;
    int32_t *bt = calloc((size_t)n * (size_t)max_blocks, sizeof *bt);
    float *q = malloc(sizeof(float) * (size_t)T * H * D), *k = malloc(sizeof(float) * (size_t)T * KV * D);
    float *v = malloc(sizeof(float) * (size_t)T * KV * DV), *o = malloc(sizeof(float) * (size_t)T * H * DV);
    double *ref = malloc(sizeof(double) * (size_t)T * H * DV), *sc = malloc(sizeof(double) * MAX_LEN);
    int rc = SY_OK;
    if (!bt || !q || !k || !v || !o || !ref || !sc) {
        *fail_step = "plugin-check";
        rc = sy_err_set(&r->err, SY_ERR_NOMEM, "plugin-check: out of memory");
        goto out;
    }
    for (int i = 0; i < n; i++)
        memcpy(bt + (size_t)i * max_blocks, r->s[ids[i]].blocks, sizeof(int32_t) * (size_t)max_blocks);
    sy_attn_batch b = {sizeof b, n, T, tok_start, ctx_len, bt, max_blocks, 0};
    for (int layer = 0; layer < p->n_layers && !rc; layer++) {
        sy_pc_fill(r->pc, q, (size_t)T * H * D, 1);
        sy_pc_fill(r->pc, k, (size_t)T * KV * D, 1);
        sy_pc_fill(r->pc, v, (size_t)T * KV * DV, 1);
        for (size_t i = 0; i < (size_t)T * H * DV; i++)
            o[i] = NAN; /* every output row must be written */
        sy_tensor tq = sy_tensor_2d(q, SY_DTYPE_F32, T, H * D), tk = sy_tensor_2d(k, SY_DTYPE_F32, T, KV * D);
        sy_tensor tv = sy_tensor_2d(v, SY_DTYPE_F32, T, KV * DV), to = sy_tensor_2d(o, SY_DTYPE_F32, T, H * DV);
        if ((rc = r->ops->forward(r->inst, layer, &b, &tq, &tk, &tv, &to, &r->err))) {
            *fail_step = "forward";
            break;
        }
        for (int i = 0; i < n; i++) {
            seq *s = &r->s[ids[i]];
            for (int t = tok_start[i]; t < tok_start[i + 1]; t++) {
                int pos = s->len + (t - tok_start[i]);
                memcpy(hist(r, s->k, layer, pos, D), k + (size_t)t * KV * D, sizeof(float) * (size_t)KV * D);
                memcpy(hist(r, s->v, layer, pos, DV), v + (size_t)t * KV * DV, sizeof(float) * (size_t)KV * DV);
            }
            for (int t = tok_start[i]; t < tok_start[i + 1]; t++) {
                int pos = s->len + (t - tok_start[i]);
                const int w = p->layer_window ? p->layer_window[layer] : p->sliding_window;
                int lo = w > 0 && pos - w + 1 > 0 ? pos - w + 1 : 0;
                for (int h = 0; h < H; h++) {
                    const float *qv = q + ((size_t)t * H + h) * D;
                    double mx = -INFINITY, sum = 0;
                    for (int j = lo; j <= pos; j++) {
                        const float *kv = hist(r, s->k, layer, j, D) + (size_t)(h / G) * D;
                        double d = 0;
                        for (int x = 0; x < D; x++)
                            d += (double)qv[x] * kv[x];
                        sc[j] = d * p->scale;
                        mx = sc[j] > mx ? sc[j] : mx;
                    }
                    /* gpt-oss's sink: one more term in the denominator, no value */
                    const double sink = p->sinks ? (double)p->sinks[layer * H + h] : -INFINITY;
                    mx = sink > mx ? sink : mx;
                    sum = p->sinks ? exp(sink - mx) : 0.0;
                    for (int j = lo; j <= pos; j++)
                        sum += (sc[j] = exp(sc[j] - mx));
                    double *ro = ref + ((size_t)t * H + h) * DV;
                    for (int x = 0; x < DV; x++)
                        ro[x] = 0;
                    for (int j = lo; j <= pos; j++) {
                        const float *vv = hist(r, s->v, layer, j, DV) + (size_t)(h / G) * DV;
                        for (int x = 0; x < DV; x++)
                            ro[x] += sc[j] / sum * vv[x];
                    }
                }
            }
        }
        double e = sy_pc_err(o, ref, (size_t)T * H * DV);
        r->worst = e > r->worst || isnan(e) ? e : r->worst;
    }
    if (!rc)
        for (int i = 0; i < n; i++)
            r->s[ids[i]].len += n_new[i];
out:
    free(bt);
    free(q);
    free(k);
    free(v);
    free(o);
    free(ref);
    free(sc);
    return rc;
}

/* Sequence dst becomes a copy-on-write fork of src: full blocks are shared,
 * the partly filled last block is copied through copy_blocks. */
static int fork_seq(run *r, int src, int dst, const char **fail_step)
{
    seq *a = &r->s[src], *b = &r->s[dst];
    const int bs = r->p.block_size, nb = (a->len + bs - 1) / bs;
    const size_t kd = (size_t)r->p.n_kv_heads * r->p.head_dim, vd = (size_t)r->p.n_kv_heads * r->p.v_head_dim;
    for (int l = 0; l < r->p.n_layers; l++) {
        memcpy(hist(r, b->k, l, 0, r->p.head_dim), hist(r, a->k, l, 0, r->p.head_dim),
               sizeof(float) * kd * (size_t)a->len);
        memcpy(hist(r, b->v, l, 0, r->p.v_head_dim), hist(r, a->v, l, 0, r->p.v_head_dim),
               sizeof(float) * vd * (size_t)a->len);
    }
    b->len = a->len;
    memcpy(b->blocks, a->blocks, sizeof b->blocks);
    if (a->len % bs == 0)
        return SY_OK;
    int32_t from = a->blocks[nb - 1], to = take_block(r);
    b->blocks[nb - 1] = to;
    if (!r->ops->copy_blocks) {
        *fail_step = "copy_blocks";
        return sy_err_set(&r->err, SY_ERR_UNSUPPORTED, "no copy_blocks op");
    }
    int rc = r->ops->copy_blocks(r->inst, &from, &to, 1, &r->err);
    if (rc)
        *fail_step = "copy_blocks";
    return rc;
}

static const char *note(run *r, const char *step, int rc)
{
    r->err.msg[sizeof r->err.msg - 1] = '\0';
    snprintf(r->note, sizeof r->note, "%s returned %d (%s): %s", step, rc, sy_status_str(rc),
             r->err.msg[0] ? r->err.msg : "(no message)");
    return r->note;
}

static int setup(run *r, sy_pc *pc, const acase *c, int n_layers, int n_blocks, int sinks, const char *op,
                 char *cas, size_t cap)
{
    memset(r, 0, sizeof *r);
    r->pc = pc;
    r->c = c;
    r->ops = pc->desc->ops;
    r->p = (sy_attn_problem){.struct_size = sizeof(sy_attn_problem),
                             .n_layers = n_layers,
                             .n_heads = c->n_heads,
                             .n_kv_heads = c->n_kv_heads,
                             .head_dim = c->head_dim,
                             .v_head_dim = c->v_head_dim,
                             .block_size = c->block_size,
                             .n_blocks = n_blocks,
                             .kv_dtype = c->kv,
                             .sliding_window = c->window};
    r->p.scale = (float)(1.0 / sqrt((double)c->head_dim));
    const int per_layer = c->layer_window[0] || c->layer_window[1];
    if (per_layer && n_layers == 2) {
        memcpy(r->layer_window, c->layer_window, sizeof r->layer_window);
        r->p.layer_window = r->layer_window;
    }
    if (sinks && (size_t)n_layers * (size_t)c->n_heads <= sizeof r->sinks / sizeof r->sinks[0]) {
        /* Sink logits around the scores' own size (q, k ~ N(0,1), scale 1/sqrt(d)), some far above: each row's
         * weights then sum well below 1, and a sink above every score must not overflow. */
        sy_pc_fill(pc, r->sinks, (size_t)n_layers * (size_t)c->n_heads, 2);
        r->sinks[0] = 30.0f;
        r->p.sinks = r->sinks;
    }
    snprintf(cas, cap, "%s: heads %d/%d dim %d/%d block %d%s%s", c->name, c->n_heads, c->n_kv_heads, c->head_dim,
             c->v_head_dim, c->block_size, per_layer ? " win/layer" : c->window ? " window" : "",
             r->p.sinks ? " sinks" : "");
    if (!(r->inst = sy_pc_create(pc, op, cas)))
        return -1;
    sy_err why;
    memset(&why, 0, sizeof why);
    if (!r->ops->supports(r->inst, &r->p, &why)) {
        why.msg[sizeof why.msg - 1] = '\0';
        char n[600];
        snprintf(n, sizeof n, "supports() says no: %s", why.msg[0] ? why.msg : "(no reason given)");
        sy_pc_row(pc, op, cas, SY_PC_SKIP, -1, -1, n);
        sy_pc_destroy(pc, r->inst);
        return -1;
    }
    int rc = r->ops->prepare(r->inst, &r->p, &r->err);
    if (rc) {
        sy_pc_row(pc, op, cas, SY_PC_FAIL, -1, -1, note(r, "prepare", rc));
        sy_pc_destroy(pc, r->inst);
        return -1;
    }
    r->free_blocks = malloc(sizeof(int32_t) * (size_t)n_blocks);
    for (int i = 0; i < MAX_SEQS; i++) {
        r->s[i].k = malloc(sizeof(float) * (size_t)n_layers * MAX_LEN * (size_t)(c->n_kv_heads * c->head_dim));
        r->s[i].v = malloc(sizeof(float) * (size_t)n_layers * MAX_LEN * (size_t)(c->n_kv_heads * c->v_head_dim));
    }
    /* Blocks handed out in shuffled order: a plugin that assumes a sequence's
     * blocks are contiguous, or indexes the cache by position, fails. */
    for (int i = 0; i < n_blocks; i++)
        r->free_blocks[i] = i;
    for (int i = n_blocks - 1; i > 0; i--) {
        int j = (int)(sy_pc_rand_u32(pc) % (uint32_t)(i + 1));
        int32_t t = r->free_blocks[i];
        r->free_blocks[i] = r->free_blocks[j];
        r->free_blocks[j] = t;
    }
    r->n_free = n_blocks;
    return 0;
}

static void teardown(run *r)
{
    sy_pc_destroy(r->pc, r->inst);
    free(r->free_blocks);
    for (int i = 0; i < MAX_SEQS; i++) {
        free(r->s[i].k);
        free(r->s[i].v);
    }
}

static void check_case(sy_pc *pc, const acase *c, int sinks)
{
    run r;
    char cas[96];
    if (setup(&r, pc, c, 2, 64, sinks, "forward", cas, sizeof cas))
        return;
    const char *fail_step = "forward";
    /* prefill 37 + 5 together, a chunk of 9 with a decode, decodes of 3 seqs,
     * then seq 3 forks seq 0 and both decode. */
    static const int ids1[] = {0, 1}, n1[] = {37, 5};
    static const int ids2[] = {1, 0}, n2[] = {9, 1};
    static const int ids3[] = {0, 1, 2}, n3[] = {1, 1, 20};
    static const int ids4[] = {3, 0, 2}, n4[] = {1, 1, 1};
    int rc = step(&r, 2, ids1, n1, &fail_step);
    if (!rc)
        rc = step(&r, 2, ids2, n2, &fail_step);
    if (!rc)
        rc = step(&r, 3, ids3, n3, &fail_step);
    int forked = 0;
    if (!rc && r.ops->copy_blocks) {
        if (!(rc = fork_seq(&r, 0, 3, &fail_step))) {
            rc = step(&r, 3, ids4, n4, &fail_step);
            forked = 1;
        }
    }
    if (rc)
        sy_pc_row(pc, "forward", cas, SY_PC_FAIL, -1, c->tol, note(&r, fail_step, rc));
    else
        sy_pc_row(pc, "forward", cas, r.worst <= c->tol ? SY_PC_OK : SY_PC_FAIL, r.worst, c->tol,
                  r.worst <= c->tol ? (forked ? "4 steps, 2 layers, copy_blocks fork" : "3 steps, 2 layers; no copy_blocks")
                                    : "wrong results");
    teardown(&r);
}

/* ---------------------------------------------------------------- speed */

static void speed_case(sy_pc *pc, const acase *c, int ctx, int n_seqs, int n_new)
{
    run r;
    char cas[96], full[128];
    if (setup(&r, pc, c, 1, MAX_LEN / c->block_size * MAX_SEQS, 0, "forward", cas, sizeof cas))
        return;
    snprintf(full, sizeof full, "%s ctx %d, %d seqs x %d", c->name, ctx, n_seqs, n_new);
    const char *fail_step = "forward";
    int ids[MAX_SEQS], nn[MAX_SEQS];
    for (int i = 0; i < n_seqs; i++)
        ids[i] = i, nn[i] = ctx;
    int rc = step(&r, n_seqs, ids, nn, &fail_step);
    /* Timed: the same step repeated at ctx (the cache slots are rewritten, the
     * reference is not computed). */
    const sy_attn_problem *p = &r.p;
    const int H = p->n_heads, KV = p->n_kv_heads, D = p->head_dim, DV = p->v_head_dim;
    const int T = n_seqs * n_new, max_blocks = MAX_LEN / p->block_size;
    int32_t tok_start[MAX_SEQS + 1], ctx_len[MAX_SEQS];
    int32_t *bt = calloc((size_t)n_seqs * (size_t)max_blocks, sizeof *bt);
    float *q = malloc(sizeof(float) * (size_t)T * H * D), *kv = malloc(sizeof(float) * (size_t)T * KV * (D > DV ? D : DV));
    float *o = malloc(sizeof(float) * (size_t)T * H * DV);
    long runs = 0;
    double t = 0;
    if (!rc && bt && q && kv && o) {
        for (int i = 0; i < n_seqs; i++) {
            tok_start[i] = i * n_new;
            ctx_len[i] = ctx - n_new;
            memcpy(bt + (size_t)i * max_blocks, r.s[i].blocks, sizeof(int32_t) * (size_t)max_blocks);
        }
        tok_start[n_seqs] = T;
        sy_pc_fill(pc, q, (size_t)T * H * D, 1);
        sy_pc_fill(pc, kv, (size_t)T * KV * (D > DV ? D : DV), 1);
        sy_attn_batch b = {sizeof b, n_seqs, T, tok_start, ctx_len, bt, max_blocks, 0};
        sy_tensor tq = sy_tensor_2d(q, SY_DTYPE_F32, T, H * D), tk = sy_tensor_2d(kv, SY_DTYPE_F32, T, KV * D);
        sy_tensor tv = sy_tensor_2d(kv, SY_DTYPE_F32, T, KV * DV), to = sy_tensor_2d(o, SY_DTYPE_F32, T, H * DV);
        double t0 = sy_pc_now();
        while (!rc && (runs < 3 || t < pc->min_time)) {
            rc = r.ops->forward(r.inst, 0, &b, &tq, &tk, &tv, &to, &r.err);
            runs++;
            t = sy_pc_now() - t0;
        }
    }
    if (rc)
        sy_pc_row(pc, "forward", full, SY_PC_FAIL, -1, -1, note(&r, fail_step, rc));
    else
        sy_pc_time_row(pc, "forward", full, t / (double)runs * 1e6, runs,
                       2.0 * n_seqs * n_new * (double)ctx * H * (D + DV), "GFLOP/s");
    free(bt);
    free(q);
    free(kv);
    free(o);
    teardown(&r);
}

int sy_pc_check_attn(sy_pc *pc)
{
    static const acase cases[] = {
        {"f32 kv", 4, 2, 32, 32, 16, 0, SY_DTYPE_F32, 1e-4, {0, 0}},
        {"f32 kv mha", 2, 2, 64, 64, 32, 0, SY_DTYPE_F32, 1e-4, {0, 0}},
        {"f32 kv v_dim", 4, 1, 32, 16, 16, 0, SY_DTYPE_F32, 1e-4, {0, 0}},
        {"f32 kv", 4, 2, 32, 32, 16, 24, SY_DTYPE_F32, 1e-4, {0, 0}},
        /* per-layer windows (gpt-oss, Qwen2 max_window_layers): one layer full, the other sliding, both ways round */
        {"f32 kv", 4, 2, 32, 32, 16, 0, SY_DTYPE_F32, 1e-4, {0, 7}},
        {"bf16 kv", 4, 2, 32, 32, 16, 0, SY_DTYPE_BF16, 2e-2, {13, 0}},
        {"bf16 kv", 4, 2, 32, 32, 16, 0, SY_DTYPE_BF16, 2e-2, {0, 0}},
        {"f16 kv", 4, 2, 32, 32, 16, 0, SY_DTYPE_F16, 5e-3, {0, 0}},
    };
    if (pc->speed) {
        static const acase sp[] = {{"f32 kv", 32, 8, 64, 64, 16, 0, SY_DTYPE_F32, 0, {0, 0}},
                                   {"bf16 kv", 32, 8, 64, 64, 16, 0, SY_DTYPE_BF16, 0, {0, 0}}};
        for (int i = 0; i < 2; i++) {
            speed_case(pc, &sp[i], 256, 1, 1);
            speed_case(pc, &sp[i], 256, 4, 1);
            speed_case(pc, &sp[i], 128, 2, 64);
        }
        return 0;
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_case(pc, &cases[i], 0);
    /* gpt-oss: attention sinks with GQA, alone, with per-layer windows, and over a BF16 cache */
    static const size_t with_sinks[] = {0, 4, 5};
    for (size_t i = 0; i < sizeof with_sinks / sizeof with_sinks[0]; i++)
        check_case(pc, &cases[with_sinks[i]], 1);
    return 0;
}
