/*
 * gpt-oss's routed experts: one layer's fused expert tensors turned into
 * the per-expert views the moe plugin ABI takes (gate/up [inter, hidden],
 * down [hidden, inter], biases [inter] / [hidden]).
 *
 * Two checkpoint layouts:
 *  - unquantised (what transformers' save_pretrained writes):
 *      mlp.experts.gate_up_proj      [E, hidden, 2*inter]  (x @ W; gate = even columns, up = odd)
 *      mlp.experts.gate_up_proj_bias [E, 2*inter]
 *      mlp.experts.down_proj         [E, inter, hidden]
 *      mlp.experts.down_proj_bias    [E, hidden]
 *    gate/up and down are transposed into owned copies in the checkpoint's
 *    dtype (a layer's experts once: the same bytes as the file).
 *  - MXFP4 (the published checkpoints, quantization_config mxfp4):
 *      X_blocks U8 [E, out, in/32, 16]: 16 bytes = 32 E2M1 codes, element
 *               2i in the low nibble (transformers' integrations/mxfp4.py);
 *      X_scales U8 [E, out, in/32]: E8M0 exponents, 2^(s - 127).
 *    Rows are already [out, in] as the ABI wants: down is a view of the
 *    file; gate/up rows are interleaved (gate = even rows), so their blocks
 *    and scales are de-interleaved into one owned copy per layer (still
 *    packed FP4 + E8M0: the same bytes as the file).
 * The gate/up bias is de-interleaved into an owned copy too; down_proj_bias
 * rows are views. The source pages of what was copied are dropped from the
 * process's mapping afterwards (the file stays in the page cache), so the
 * resident cost of a copy is the copy alone.
 */
#include "config.h"

#include "model/model_arch.h"
#include "model/model_quant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int sy__model_own(sy_model *m, void *p, sy_err *err)
{
    if (m->n_owned == m->cap_owned) {
        size_t cap = m->cap_owned ? m->cap_owned * 2 : 64;
        void **n = realloc(m->owned, cap * sizeof *n);
        if (!n) {
            free(p);
            return sy_err_set(err, SY_ERR_NOMEM, "%s: out of memory tracking the loader's buffers", m->dir);
        }
        m->owned = n;
        m->cap_owned = cap;
    }
    m->owned[m->n_owned++] = p;
    return SY_OK;
}

/* Whole pages of [p, p + n) leave this process's private read-only mapping (nothing reads them again). */
static void drop_pages(const void *p, size_t n)
{
    const long ps = sysconf(_SC_PAGESIZE);
    const uintptr_t page = ps > 0 ? (uintptr_t)ps : 4096;
    const uintptr_t start = (uintptr_t)p, end = start + n;
    const uintptr_t first = (start + page - 1) & ~(page - 1), last = end & ~(page - 1);
    if (last > first)
        (void)madvise((void *)first, last - first, MADV_DONTNEED);
}

typedef struct gctx {
    sy_expert_binder *b;
    int layer;
    int64_t E, H, I;
    char name[4][512]; /* gate_up, gate_up_bias, down, down_bias */
} gctx;

static const sy_st_entry *find(gctx *g, const char *suffix, char *buf, size_t cap)
{
    snprintf(buf, cap, "model.layers.%d.mlp.experts.%s", g->layer, suffix);
    return sy_st_find(g->b->m->st, buf);
}

static void shape_str(char *buf, size_t cap, const sy_tensor *t)
{
    size_t o = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < t->ndim && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    if (o < cap)
        snprintf(buf + o, cap - o, "]");
}

/* e has dtype (want_float: F32/F16/BF16, else U8) and exactly the shape dims[0..nd). */
static int check(gctx *g, const sy_st_entry *e, const char *name, bool want_float, int nd, const int64_t *dims,
                 const char *meaning)
{
    sy_model *m = g->b->m;
    if (!e)
        return sy_err_set(g->b->err, SY_ERR_INVALID,
                          "tensor '%s' (%s of layer %d) is missing from the checkpoint in %s", name, meaning,
                          g->layer, m->dir);
    const sy_dtype dt = e->view.dtype;
    const bool isf = dt == SY_DTYPE_F32 || dt == SY_DTYPE_F16 || dt == SY_DTYPE_BF16;
    if (want_float ? !isf : dt != SY_DTYPE_U8)
        return sy_err_set(g->b->err, SY_ERR_INVALID, "%s: tensor '%s' has dtype %s; expected %s", m->dir, name,
                          sy_dtype_name(dt), want_float ? "F32, F16 or BF16" : "U8 (MXFP4 blocks / E8M0 scales)");
    bool ok = e->view.ndim == nd;
    for (int i = 0; ok && i < nd; i++)
        ok = e->view.shape[i] == dims[i];
    if (ok)
        return SY_OK;
    sy_tensor want = {.ndim = nd};
    for (int i = 0; i < nd; i++)
        want.shape[i] = dims[i];
    char got_s[96], want_s[96];
    shape_str(got_s, sizeof got_s, &e->view);
    shape_str(want_s, sizeof want_s, &want);
    return sy_err_set(g->b->err, SY_ERR_INVALID,
                      "%s: tensor '%s' has shape %s, but config.json (num_local_experts %lld, hidden_size %lld, "
                      "intermediate_size %lld) implies %s (%s)",
                      m->dir, name, got_s, (long long)g->E, (long long)g->H, (long long)g->I, want_s, meaning);
}

static void *own_alloc(gctx *g, size_t bytes, int *rc)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        *rc = sy_err_set(g->b->err, SY_ERR_NOMEM, "%s: cannot allocate %zu bytes for layer %d's experts", g->b->m->dir,
                         bytes, g->layer);
        return NULL;
    }
    *rc = sy__model_own(g->b->m, p, g->b->err);
    return *rc ? NULL : p;
}

/* gate_up_proj_bias [E, 2I] -> gate/up [I] views of one owned copy; down_proj_bias rows as views. */
static int bind_biases(gctx *g, sy_layer_weights *lw)
{
    const sy_st_entry *gb = find(g, "gate_up_proj_bias", g->name[1], sizeof g->name[1]);
    const sy_st_entry *db = find(g, "down_proj_bias", g->name[3], sizeof g->name[3]);
    const int64_t gbd[2] = {g->E, 2 * g->I}, dbd[2] = {g->E, g->H};
    int rc;
    if ((rc = check(g, gb, g->name[1], true, 2, gbd, "the experts' gate/up bias, gate and up interleaved")) ||
        (rc = check(g, db, g->name[3], true, 2, dbd, "the experts' down bias")))
        return rc;
    const size_t es = (size_t)sy_dtype_bits(gb->view.dtype) / 8;
    char *buf = own_alloc(g, (size_t)(g->E * 2 * g->I) * es, &rc);
    if (!buf)
        return rc;
    const char *src = gb->view.data;
    for (int64_t x = 0; x < g->E; x++) {
        char *gd = buf + (size_t)(2 * x * g->I) * es, *ud = gd + (size_t)g->I * es;
        for (int64_t i = 0; i < g->I; i++) {
            memcpy(gd + (size_t)i * es, src + (size_t)((x * 2 * g->I) + 2 * i) * es, es);
            memcpy(ud + (size_t)i * es, src + (size_t)((x * 2 * g->I) + 2 * i + 1) * es, es);
        }
        int64_t one[1] = {g->I}, hid[1] = {g->H};
        sy_tensor_init(&lw->exp_gate_bias[x], gd, gb->view.dtype, 1, one);
        sy_tensor_init(&lw->exp_up_bias[x], ud, gb->view.dtype, 1, one);
        sy_tensor_init(&lw->exp_down_bias[x],
                       (char *)db->view.data + (size_t)(x * g->H) * ((size_t)sy_dtype_bits(db->view.dtype) / 8),
                       db->view.dtype, 1, hid);
    }
    if ((rc = g->b->mark(g->b, gb, false)))
        return rc;
    drop_pages(gb->view.data, gb->nbytes);
    return g->b->mark(g->b, db, true);
}

/*
 * dst [n_out, n_in] = columns c0, c0 + step, ... of src [n_in, ld], transposed: dst[o][i] = src[i][c0 + o*step].
 * Typed loops (2- or 4-byte elements), since a byte-wise copy per element is what makes a 20B model's load slow.
 */
static void transpose_cols(void *dst, const void *src, int64_t n_in, int64_t n_out, int64_t ld, int64_t c0,
                           int64_t step, size_t es)
{
    if (es == 2) {
        uint16_t *d = dst;
        const uint16_t *x = src;
        for (int64_t i = 0; i < n_in; i++)
            for (int64_t o = 0; o < n_out; o++)
                d[o * n_in + i] = x[i * ld + c0 + o * step];
    } else {
        uint32_t *d = dst;
        const uint32_t *x = src;
        for (int64_t i = 0; i < n_in; i++)
            for (int64_t o = 0; o < n_out; o++)
                d[o * n_in + i] = x[i * ld + c0 + o * step];
    }
}

/* The unquantised layout: transposed copies in the checkpoint's dtype. */
static int bind_fused(gctx *g, sy_layer_weights *lw, const sy_st_entry *gu)
{
    const int64_t E = g->E, H = g->H, I = g->I;
    const sy_st_entry *dn = find(g, "down_proj", g->name[2], sizeof g->name[2]);
    const int64_t gud[3] = {E, H, 2 * I}, dnd[3] = {E, I, H};
    int rc;
    if ((rc = check(g, gu, g->name[0], true, 3, gud, "the experts' fused gate/up projection, x @ W, gate and up "
                                                     "interleaved by column")) ||
        (rc = check(g, dn, g->name[2], true, 3, dnd, "the experts' down projection, x @ W")))
        return rc;
    if (dn->view.dtype != gu->view.dtype)
        return sy_err_set(g->b->err, SY_ERR_INVALID, "%s: '%s' is %s but '%s' is %s; expected one dtype", g->b->m->dir,
                          g->name[0], sy_dtype_name(gu->view.dtype), g->name[2], sy_dtype_name(dn->view.dtype));
    const sy_dtype dt = gu->view.dtype;
    const size_t es = (size_t)sy_dtype_bits(dt) / 8;
    char *gbuf = own_alloc(g, (size_t)(E * 2 * I * H) * es, &rc);
    if (!gbuf)
        return rc;
    char *dbuf = own_alloc(g, (size_t)(E * H * I) * es, &rc);
    if (!dbuf)
        return rc;
    const char *gs = gu->view.data, *ds = dn->view.data;
    for (int64_t x = 0; x < E; x++) {
        char *gd = gbuf + (size_t)(x * 2 * I * H) * es, *ud = gd + (size_t)(I * H) * es;
        const char *src = gs + (size_t)(x * H * 2 * I) * es;
        transpose_cols(gd, src, H, I, 2 * I, 0, 2, es); /* gate: the even columns */
        transpose_cols(ud, src, H, I, 2 * I, 1, 2, es); /* up: the odd ones */
        char *dd = dbuf + (size_t)(x * H * I) * es;
        transpose_cols(dd, ds + (size_t)(x * I * H) * es, I, H, H, 0, 1, es);
        lw->exp_gate[x] = sy_tensor_2d(gd, dt, I, H);
        lw->exp_up[x] = sy_tensor_2d(ud, dt, I, H);
        lw->exp_down[x] = sy_tensor_2d(dd, dt, H, I);
    }
    if ((rc = g->b->mark(g->b, gu, false)) || (rc = g->b->mark(g->b, dn, false)))
        return rc;
    drop_pages(gu->view.data, gu->nbytes);
    drop_pages(dn->view.data, dn->nbytes);
    return SY_OK;
}

static sy_tensor fp4_view(void *data, const void *scale, int64_t rows, int64_t cols)
{
    sy_tensor t = sy_tensor_2d(data, SY_DTYPE_FP4_E2M1, rows, cols);
    t.scale = scale;
    t.scale_dtype = SY_DTYPE_E8M0;
    t.scale_block[0] = 1;
    t.scale_block[1] = 32;
    t.global_scale = 1.0f;
    return t;
}

/* MXFP4: gate/up rows de-interleaved into one packed copy; down is a view. */
static int bind_mxfp4(gctx *g, sy_layer_weights *lw, const sy_st_entry *gub)
{
    const int64_t E = g->E, H = g->H, I = g->I;
    sy_model *m = g->b->m;
    if (m->quant->method != SY_QUANT_MXFP4)
        return sy_err_set(g->b->err, SY_ERR_INVALID, "%s: '%s' is an MXFP4 block tensor, but config.json's "
                          "quantization_config does not declare quant_method mxfp4 (it declares %s)",
                          m->dir, g->name[0], sy_quant_method_name(m->quant->method));
    if (H % 32 || I % 32)
        return sy_err_set(g->b->err, SY_ERR_INVALID, "%s: MXFP4 experts need hidden_size (%lld) and "
                          "intermediate_size (%lld) to be multiples of 32 (the block)",
                          m->dir, (long long)H, (long long)I);
    char sn[2][512];
    const sy_st_entry *gus = find(g, "gate_up_proj_scales", sn[0], sizeof sn[0]);
    const sy_st_entry *dnb = find(g, "down_proj_blocks", g->name[2], sizeof g->name[2]);
    const sy_st_entry *dns = find(g, "down_proj_scales", sn[1], sizeof sn[1]);
    const int64_t gubd[4] = {E, 2 * I, H / 32, 16}, gusd[3] = {E, 2 * I, H / 32};
    const int64_t dnbd[4] = {E, H, I / 32, 16}, dnsd[3] = {E, H, I / 32};
    int rc;
    if ((rc = check(g, gub, g->name[0], false, 4, gubd, "MXFP4 blocks of the gate/up rows, gate and up interleaved")) ||
        (rc = check(g, gus, sn[0], false, 3, gusd, "E8M0 scales of the gate/up blocks")) ||
        (rc = check(g, dnb, g->name[2], false, 4, dnbd, "MXFP4 blocks of the down projection")) ||
        (rc = check(g, dns, sn[1], false, 3, dnsd, "E8M0 scales of the down blocks")))
        return rc;
    const size_t rb = (size_t)H / 2, rs = (size_t)H / 32; /* bytes of one gate/up row: codes, scales */
    const size_t per_x = (size_t)(2 * I) * (rb + rs);
    char *buf = own_alloc(g, (size_t)E * per_x, &rc);
    if (!buf)
        return rc;
    const unsigned char *bsrc = gub->view.data, *ssrc = gus->view.data;
    for (int64_t x = 0; x < E; x++) {
        char *gd = buf + (size_t)x * per_x, *ud = gd + (size_t)I * rb;
        char *gsc = gd + (size_t)(2 * I) * rb, *usc = gsc + (size_t)I * rs;
        for (int64_t i = 0; i < I; i++) {
            const size_t r0 = (size_t)(x * 2 * I + 2 * i), r1 = r0 + 1;
            memcpy(gd + (size_t)i * rb, bsrc + r0 * rb, rb);
            memcpy(ud + (size_t)i * rb, bsrc + r1 * rb, rb);
            memcpy(gsc + (size_t)i * rs, ssrc + r0 * rs, rs);
            memcpy(usc + (size_t)i * rs, ssrc + r1 * rs, rs);
        }
        lw->exp_gate[x] = fp4_view(gd, gsc, I, H);
        lw->exp_up[x] = fp4_view(ud, usc, I, H);
        lw->exp_down[x] = fp4_view((char *)dnb->view.data + (size_t)(x * H) * ((size_t)I / 2),
                                   (const char *)dns->view.data + (size_t)(x * H) * ((size_t)I / 32), H, I);
    }
    if ((rc = g->b->mark(g->b, gub, false)) || (rc = g->b->mark(g->b, gus, false)) ||
        (rc = g->b->mark(g->b, dnb, true)) || (rc = g->b->mark(g->b, dns, true)))
        return rc;
    drop_pages(gub->view.data, gub->nbytes);
    drop_pages(gus->view.data, gus->nbytes);
    return SY_OK;
}

int sy__gptoss_bind_experts(sy_expert_binder *b, int layer)
{
    sy_model *m = b->m;
    sy_layer_weights *lw = &m->layers[layer];
    gctx g = {.b = b, .layer = layer, .E = m->cfg.n_experts, .H = m->cfg.hidden, .I = m->cfg.moe_inter};
    const size_t E = (size_t)g.E;
    lw->exp_gate_bias = calloc(E, sizeof(sy_tensor));
    lw->exp_up_bias = calloc(E, sizeof(sy_tensor));
    lw->exp_down_bias = calloc(E, sizeof(sy_tensor));
    if (!lw->exp_gate_bias || !lw->exp_up_bias || !lw->exp_down_bias)
        return sy_err_set(b->err, SY_ERR_NOMEM, "out of memory for the expert biases of layer %d", layer);
    int rc = bind_biases(&g, lw);
    if (rc)
        return rc;
    const sy_st_entry *gub = find(&g, "gate_up_proj_blocks", g.name[0], sizeof g.name[0]);
    if (gub)
        return bind_mxfp4(&g, lw, gub);
    const sy_st_entry *gu = find(&g, "gate_up_proj", g.name[0], sizeof g.name[0]);
    if (!gu) {
        char alt[512];
        snprintf(alt, sizeof alt, "model.layers.%d.mlp.experts.gate_up_proj_blocks", layer);
        return sy_err_set(b->err, SY_ERR_INVALID,
                          "neither '%s' (unquantised) nor '%s' (MXFP4) is in the checkpoint in %s", g.name[0], alt,
                          m->dir);
    }
    return bind_fused(&g, lw, gu);
}
