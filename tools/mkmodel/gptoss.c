/*
 * gpt-oss (GptOssForCausalLM) checkpoints: the tensor plan, the config
 * fields and the MXFP4 writer.
 *
 * Two expert layouts (--experts-layout):
 *  - fused: what transformers' save_pretrained writes for an unquantised
 *    model, mlp.experts.gate_up_proj [E, hidden, 2*inter] (x @ W, gate in
 *    the even columns, up in the odd), gate_up_proj_bias [E, 2*inter],
 *    down_proj [E, inter, hidden], down_proj_bias [E, hidden]; written by
 *    weights.c like every float tensor.
 *  - mxfp4: as the published checkpoints ship, the same seeded values of
 *    gate_up_proj / down_proj quantised into X_blocks U8 [E, out, in/32, 16]
 *    and X_scales U8 [E, out, in/32] (rows = output features, so gate_up's
 *    row 2i is gate i), with config.json quantization_config quant_method
 *    mxfp4. Per row block of 32: E8M0 scale 2^ceil(log2(amax / 6)) (rounded
 *    up, so no value clips: triton_kernels' downcast_to_mxfp default), codes
 *    E2M1 to nearest, ties to the even code, element 2i in the low nibble.
 *    Biases and everything else stay in the spec's float dtype.
 */
#include "config.h"

#include "mkmodel.h"
#include "util/util.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void mk_gptoss_defaults(mk_spec *s)
{
    s->oss.window = 8;
    s->oss.swiglu_limit = 1.5;
}

typedef struct plan {
    mk_tensor *t;
    size_t n, cap;
    int oom;
} plan;

static void add(plan *p, int is_norm, double std, int ndim, uint64_t d0, uint64_t d1, uint64_t d2, const char *fmt,
                ...) __attribute__((format(printf, 8, 9)));

static void add(plan *p, int is_norm, double std, int ndim, uint64_t d0, uint64_t d1, uint64_t d2, const char *fmt,
                ...)
{
    if (p->oom)
        return;
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 64;
        mk_tensor *t = realloc(p->t, cap * sizeof *t);
        if (!t) {
            p->oom = 1;
            return;
        }
        p->t = t;
        p->cap = cap;
    }
    mk_tensor *t = &p->t[p->n++];
    memset(t, 0, sizeof *t);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->name, sizeof t->name, fmt, ap);
    va_end(ap);
    t->is_norm = is_norm;
    t->std = std;
    t->ndim = ndim;
    t->shape[0] = d0;
    t->shape[1] = d1;
    t->shape[2] = d2;
}

mk_tensor *mk_gptoss_plan(const mk_spec *s, size_t *n)
{
    plan p = {0};
    const uint64_t H = (uint64_t)s->hidden, D = (uint64_t)s->head_dim, Q = (uint64_t)s->heads * D,
                   KV = (uint64_t)s->kv_heads * D, E = (uint64_t)s->experts, I = (uint64_t)mk_expert_ffn(s);
    add(&p, 0, 1.0, 2, (uint64_t)s->vocab, H, 0, "model.embed_tokens.weight");
    for (int i = 0; i < s->layers; i++) {
        add(&p, 1, 0, 1, H, 0, 0, "model.layers.%d.input_layernorm.weight", i);
        add(&p, 0, 1.0 / sqrt((double)H), 2, Q, H, 0, "model.layers.%d.self_attn.q_proj.weight", i);
        add(&p, 0, 0.1, 1, Q, 0, 0, "model.layers.%d.self_attn.q_proj.bias", i);
        add(&p, 0, 1.0 / sqrt((double)H), 2, KV, H, 0, "model.layers.%d.self_attn.k_proj.weight", i);
        add(&p, 0, 0.1, 1, KV, 0, 0, "model.layers.%d.self_attn.k_proj.bias", i);
        add(&p, 0, 1.0 / sqrt((double)H), 2, KV, H, 0, "model.layers.%d.self_attn.v_proj.weight", i);
        add(&p, 0, 0.1, 1, KV, 0, 0, "model.layers.%d.self_attn.v_proj.bias", i);
        add(&p, 0, 1.0 / sqrt((double)Q), 2, H, Q, 0, "model.layers.%d.self_attn.o_proj.weight", i);
        add(&p, 0, 0.1, 1, H, 0, 0, "model.layers.%d.self_attn.o_proj.bias", i);
        /* Sinks of the scores' own size, so that they visibly take weight from the positions. */
        add(&p, 0, 1.0, 1, (uint64_t)s->heads, 0, 0, "model.layers.%d.self_attn.sinks", i);
        add(&p, 1, 0, 1, H, 0, 0, "model.layers.%d.post_attention_layernorm.weight", i);
        add(&p, 0, 1.0 / sqrt((double)H), 2, E, H, 0, "model.layers.%d.mlp.router.weight", i);
        add(&p, 0, 0.5, 1, E, 0, 0, "model.layers.%d.mlp.router.bias", i); /* large enough to change the choice */
        add(&p, 0, 1.0 / sqrt((double)H), 3, E, H, 2 * I, "model.layers.%d.mlp.experts.gate_up_proj", i);
        add(&p, 0, 0.1, 2, E, 2 * I, 0, "model.layers.%d.mlp.experts.gate_up_proj_bias", i);
        add(&p, 0, 1.0 / sqrt((double)I), 3, E, I, H, "model.layers.%d.mlp.experts.down_proj", i);
        add(&p, 0, 0.1, 2, E, H, 0, "model.layers.%d.mlp.experts.down_proj_bias", i);
    }
    add(&p, 1, 0, 1, H, 0, 0, "model.norm.weight");
    if (!s->tie)
        add(&p, 0, MK_LM_HEAD_GAIN / sqrt((double)H), 2, (uint64_t)s->vocab, H, 0, "lm_head.weight");
    if (p.oom) {
        free(p.t);
        return NULL;
    }
    *n = p.n;
    return p.t;
}

/* Sets key to a new value; a NULL value (out of memory) is remembered. */
static void put(json_t *o, const char *key, json_t *v, int *oom)
{
    if (!v || json_object_set_new(o, key, v) != 0)
        *oom = 1;
}

void mk_gptoss_config(json_t *c, const mk_spec *s, int *oom)
{
    put(c, "intermediate_size", json_integer(mk_expert_ffn(s)), oom);
    put(c, "num_local_experts", json_integer(s->experts), oom);
    put(c, "num_experts_per_tok", json_integer(s->top_k), oom);
    put(c, "attention_bias", json_true(), oom);
    put(c, "swiglu_limit", json_real(s->oss.swiglu_limit), oom);
    put(c, "sliding_window", json_integer(s->sliding_window > 0 ? s->sliding_window : s->oss.window), oom);
    json_t *types = json_array();
    for (int i = 0; i < s->layers && types; i++)
        if (json_array_append_new(types, json_string(i % 2 == 0 ? "sliding_attention" : "full_attention")) != 0)
            *oom = 1;
    put(c, "layer_types", types, oom);
    /* The published rope_scaling: yarn, factor 32 over 4096 positions, truncate false. */
    put(c, "rope_scaling",
        json_pack("{s:f,s:f,s:f,s:i,s:s,s:b}", "beta_fast", 32.0, "beta_slow", 1.0, "factor", 32.0,
                  "original_max_position_embeddings", 4096, "rope_type", "yarn", "truncate", 0),
        oom);
    if (s->oss.mxfp4)
        put(c, "quantization_config",
            json_pack("{s:[s,s,s,s],s:s}", "modules_to_not_convert", "model.layers.*.self_attn",
                      "model.layers.*.mlp.router", "model.embed_tokens", "lm_head", "quant_method", "mxfp4"),
            oom);
}

/* ------------------------------------------------------------ MXFP4 writer */

static double e2m1_mag(int c)
{
    static const double mag[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};
    return mag[c];
}

/* Nearest E2M1 code of v (|v| <= 6 after scaling), ties to the even code. */
static uint8_t enc_e2m1(double v)
{
    const double a = fabs(v);
    int best = 0;
    for (int c = 1; c < 8; c++) {
        const double d = fabs(a - e2m1_mag(c)), db = fabs(a - e2m1_mag(best));
        if (d < db || (d == db && c % 2 == 0))
            best = c;
    }
    return (uint8_t)(v < 0 && best ? best | 8 : best);
}

/* Row block x[0..32) -> 16 code bytes and its E8M0 scale byte. */
static uint8_t quant_block(const float *x, uint8_t *codes)
{
    double amax = 0;
    for (int j = 0; j < 32; j++)
        amax = fabs(x[j]) > amax ? fabs(x[j]) : amax;
    int e = 0;
    if (amax > 0) {
        e = (int)ceil(log2(amax / 6.0));
        e = e < -127 ? -127 : e > 127 ? 127 : e;
    }
    const double scale = ldexp(1.0, e);
    memset(codes, 0, 16);
    for (int j = 0; j < 32; j++)
        codes[j / 2] |= (uint8_t)(enc_e2m1(x[j] / scale) << ((j & 1) * 4));
    return (uint8_t)(e + 127);
}

static void gen(const mk_spec *s, const mk_tensor *t, float *v, uint64_t n)
{
    mk_rng r;
    mk_rng_init(&r, s->seed, t->name);
    for (uint64_t i = 0; i < n; i++) {
        const double z = mk_rng_normal(&r);
        v[i] = (float)(t->is_norm ? 1.0 + 0.1 * z : t->std * z);
    }
}

static uint64_t elems(const mk_tensor *t)
{
    uint64_t n = 1;
    for (int d = 0; d < t->ndim; d++)
        n *= t->shape[d];
    return n;
}

static int is_expert_weight(const mk_tensor *t)
{
    const size_t n = strlen(t->name);
    return t->ndim == 3 && ((n > 12 && strcmp(t->name + n - 12, "gate_up_proj") == 0) ||
                            (n > 9 && strcmp(t->name + n - 9, "down_proj") == 0));
}

typedef struct blob {
    unsigned char *p;
    size_t len, cap;
} blob;

static unsigned char *grow(blob *b, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 1 << 16;
        while (cap < b->len + n)
            cap *= 2;
        unsigned char *np = realloc(b->p, cap);
        if (!np)
            return NULL;
        b->p = np;
        b->cap = cap;
    }
    unsigned char *o = b->p + b->len;
    b->len += n;
    return o;
}

/* Header entry for data [off, off + bytes). */
static int header_add(json_t *hdr, const char *name, const char *dtype, int ndim, const uint64_t *shape, size_t off,
                      size_t bytes)
{
    json_t *sh = json_array();
    for (int d = 0; d < ndim && sh; d++)
        json_array_append_new(sh, json_integer((json_int_t)shape[d]));
    json_t *e = sh ? json_pack("{s:s,s:o,s:[I,I]}", "dtype", dtype, "shape", sh, "data_offsets", (json_int_t)off,
                               (json_int_t)(off + bytes))
                   : NULL;
    return e && json_object_set_new(hdr, name, e) == 0 ? 0 : -1;
}

/* One expert weight [E, K, N] (x @ W) -> X_blocks [E, N, K/32, 16] and X_scales [E, N, K/32]. */
static int write_mxfp4(const mk_spec *s, const mk_tensor *t, json_t *hdr, blob *b)
{
    const uint64_t E = t->shape[0], K = t->shape[1], N = t->shape[2], G = K / 32;
    float *v = malloc(sizeof(float) * E * K * N), row[32];
    if (!v)
        return -1;
    gen(s, t, v, E * K * N);
    char nm[160];
    const size_t boff = b->len;
    unsigned char *codes = grow(b, E * N * G * 16);
    unsigned char *scales = codes ? malloc(E * N * G) : NULL;
    if (!scales) {
        free(v);
        return -1;
    }
    codes = b->p + boff;
    for (uint64_t e = 0; e < E; e++)
        for (uint64_t n = 0; n < N; n++)
            for (uint64_t g = 0; g < G; g++) {
                for (int j = 0; j < 32; j++)
                    row[j] = v[(e * K + g * 32 + (uint64_t)j) * N + n];
                scales[(e * N + n) * G + g] = quant_block(row, codes + ((e * N + n) * G + g) * 16);
            }
    free(v);
    const uint64_t bs[4] = {E, N, G, 16};
    snprintf(nm, sizeof nm, "%s_blocks", t->name);
    int rc = header_add(hdr, nm, "U8", 4, bs, boff, E * N * G * 16);
    const size_t soff = b->len;
    unsigned char *so = grow(b, E * N * G);
    if (!so || rc) {
        free(scales);
        return -1;
    }
    memcpy(so, scales, E * N * G);
    free(scales);
    snprintf(nm, sizeof nm, "%s_scales", t->name);
    return header_add(hdr, nm, "U8", 3, bs, soff, E * N * G);
}

static int write_float(const mk_spec *s, const mk_tensor *t, json_t *hdr, blob *b)
{
    const uint64_t n = elems(t);
    const size_t es = mk_dtype_size(s->dtype);
    float *v = malloc(sizeof(float) * (n ? n : 1));
    if (!v)
        return -1;
    gen(s, t, v, n);
    const size_t off = b->len;
    unsigned char *o = grow(b, n * es);
    if (!o) {
        free(v);
        return -1;
    }
    for (uint64_t i = 0; i < n; i++, o += es) {
        if (s->dtype == MK_F32) {
            memcpy(o, &v[i], 4); /* little-endian hosts, as weights.c */
        } else {
            const uint16_t h = s->dtype == MK_BF16 ? sy_f32_to_bf16(v[i]) : sy_f32_to_f16(v[i]);
            o[0] = (unsigned char)h;
            o[1] = (unsigned char)(h >> 8);
        }
    }
    free(v);
    return header_add(hdr, t->name, mk_dtype_st_name(s->dtype), t->ndim, t->shape, off, n * es);
}

int mk_gptoss_write_mxfp4(const mk_spec *s, const char *dir, char *err, size_t errcap)
{
    if (s->shards > 1) {
        snprintf(err, errcap, "--shards %d: MXFP4 checkpoints are written as one file", s->shards);
        return -1;
    }
    if (s->hidden % 32 || mk_expert_ffn(s) % 32) {
        snprintf(err, errcap, "--experts-layout mxfp4: hidden (%d) and the expert width (%d) must be multiples of 32",
                 s->hidden, mk_expert_ffn(s));
        return -1;
    }
    size_t n = 0;
    mk_tensor *t = mk_gptoss_plan(s, &n);
    json_t *hdr = json_pack("{s:{s:s}}", "__metadata__", "format", "pt");
    blob b = {0};
    int rc = t && hdr ? 0 : -1;
    /* Floats first (each tensor then starts at a multiple of its element size), packed bytes last. */
    for (size_t i = 0; i < n && rc == 0; i++)
        if (!is_expert_weight(&t[i]))
            rc = write_float(s, &t[i], hdr, &b);
    for (size_t i = 0; i < n && rc == 0; i++)
        if (is_expert_weight(&t[i]))
            rc = write_mxfp4(s, &t[i], hdr, &b);
    char *text = rc == 0 ? json_dumps(hdr, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(hdr);
    free(t);
    if (!text) {
        free(b.p);
        snprintf(err, errcap, "out of memory writing the MXFP4 checkpoint");
        return -1;
    }
    char path[4096];
    FILE *f = mk_path(path, sizeof path, dir, "model.safetensors") == 0 ? fopen(path, "wb") : NULL;
    if (!f) {
        snprintf(err, errcap, "%s/model.safetensors: cannot create: %s", dir, strerror(errno));
        free(text);
        free(b.p);
        return -1;
    }
    const size_t hl = strlen(text), pad = (8 - (8 + hl) % 8) % 8;
    unsigned char len8[8];
    for (int k = 0; k < 8; k++)
        len8[k] = (unsigned char)((uint64_t)(hl + pad) >> (8 * k));
    const int ok = fwrite(len8, 1, 8, f) == 8 && fwrite(text, 1, hl, f) == hl && fwrite("        ", 1, pad, f) == pad &&
                   (b.len == 0 || fwrite(b.p, 1, b.len, f) == b.len);
    free(text);
    free(b.p);
    if (fclose(f) != 0 || !ok) {
        snprintf(err, errcap, "%s: write failed: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}
