/*
 * Quantised synthetic checkpoints: the same seeded float weights as
 * weights.c, with the linear layers stored the way real quantised releases
 * store them:
 *  - fp8:        F8_E4M3 weight + F32 weight_scale_inv per 128 x 128 block
 *                (DeepSeek-V3), quantization_config in config.json;
 *  - fp8-tensor: F8_E4M3 weight + one F32 weight_scale;
 *  - nvfp4:      ModelOpt NVFP4 (U8 pairs of E2M1, low nibble first;
 *                F8_E4M3 weight_scale per 16; F32 weight_scale_2 and
 *                input_scale), hf_quant_config.json with exclude_modules;
 *  - nvfp4-experts: NVFP4 for the routed experts only.
 * Embeddings, lm_head, routers, norms and any linear whose K is not a
 * multiple of 16 (NVFP4) stay in the spec's float dtype and are listed as
 * excluded. Scales follow the producers: amax / 448 per FP8 block; NVFP4
 * global = amax / (448 * 6), block scale = block amax / 6 / global rounded
 * to E4M3. Rounding is to nearest, ties to the even code.
 */
#include "config.h"

#include "mkmodel.h"
#include "util/util.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name, *base, *what;
    int quant;
    mk_dtype dtype;
} qpresets[] = {
    {"test-llama-fp8", "test-llama", "test-llama with FP8 E4M3 linears, 128x128 block scales (DeepSeek-V3 layout), bf16",
     MK_Q_FP8, MK_BF16},
    {"test-llama-fp8-tensor", "test-llama", "test-llama with FP8 E4M3 linears, one scale per tensor, bf16",
     MK_Q_FP8_TENSOR, MK_BF16},
    {"test-mixtral-nvfp4", "test-mixtral", "test-mixtral with NVFP4 linears (ModelOpt layout), bf16", MK_Q_NVFP4,
     MK_BF16},
    {"tiny-glm5-nvfp4", "test-glm5", "test-glm5 (glm_moe_dsa) with NVFP4 routed experts (ModelOpt layout), bf16",
     MK_Q_NVFP4_EXPERTS, MK_BF16},
};
#define NQ (sizeof qpresets / sizeof qpresets[0])

const char *mk_quant_preset_base(const char *name)
{
    for (size_t i = 0; i < NQ; i++)
        if (strcmp(qpresets[i].name, name) == 0)
            return qpresets[i].base;
    return NULL;
}

void mk_quant_preset_apply(const char *name, mk_spec *s)
{
    for (size_t i = 0; i < NQ; i++)
        if (strcmp(qpresets[i].name, name) == 0) {
            s->quant = qpresets[i].quant;
            s->dtype = qpresets[i].dtype;
        }
}

void mk_quant_presets_list(FILE *f)
{
    for (size_t i = 0; i < NQ; i++)
        fprintf(f, "%-15s %s\n", qpresets[i].name, qpresets[i].what);
}

static const char *const qnames[] = {"none", "fp8", "fp8-tensor", "nvfp4", "nvfp4-experts"};

int mk_quant_parse(const char *v, int *out)
{
    for (int i = 0; i < (int)(sizeof qnames / sizeof qnames[0]); i++)
        if (strcmp(v, qnames[i]) == 0) {
            *out = i;
            return 0;
        }
    return -1;
}

const char *mk_quant_name(int q)
{
    return q >= 0 && q < (int)(sizeof qnames / sizeof qnames[0]) ? qnames[q] : "?";
}

/* ------------------------------------------------------------ encoders */

static double e4m3_value(int code) /* code 0..126, non-negative */
{
    const int e = code >> 3, m = code & 7;
    return e == 0 ? m / 8.0 * ldexp(1.0, -6) : (1.0 + m / 8.0) * ldexp(1.0, e - 7);
}

/* Nearest of n increasing magnitudes mag(0..n-1), ties to the even code. */
static int nearest_code(double a, int n, double (*mag)(int))
{
    if (!(a > 0))
        return 0;
    int lo = 0, hi = n - 1;
    if (a >= mag(hi))
        return hi; /* saturate */
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (mag(mid) <= a)
            lo = mid;
        else
            hi = mid;
    }
    const double dl = a - mag(lo), dh = mag(hi) - a;
    return dl < dh ? lo : dh < dl ? hi : (lo % 2 == 0 ? lo : hi);
}

static uint8_t enc_e4m3(double v)
{
    const int c = nearest_code(fabs(v), 127, e4m3_value);
    return (uint8_t)(v < 0 ? c | 0x80 : c);
}

static double e2m1_value(int code)
{
    static const double mag[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};
    return mag[code];
}

static uint8_t enc_e2m1(double v)
{
    const int c = nearest_code(fabs(v), 8, e2m1_value);
    return (uint8_t)(v < 0 ? c | 8 : c);
}

static double dec_e4m3(uint8_t b)
{
    const double m = e4m3_value(b & 0x7f);
    return (b & 0x80) ? -m : m;
}

/* ------------------------------------------------------------- planning */

typedef struct entry {
    char name[160];
    const char *dtype; /* safetensors name */
    int ndim;
    uint64_t shape[2];
    uint64_t bytes;
    size_t align;
    unsigned char *data; /* filled when written */
} entry;

typedef struct out_list {
    entry *e;
    size_t n, cap;
} out_list;

static entry *add_entry(out_list *l, const char *name, const char *dtype, int ndim, uint64_t d0, uint64_t d1,
                        size_t es)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        entry *ne = realloc(l->e, cap * sizeof *ne);
        if (!ne)
            return NULL;
        l->e = ne;
        l->cap = cap;
    }
    entry *e = &l->e[l->n++];
    memset(e, 0, sizeof *e);
    snprintf(e->name, sizeof e->name, "%s", name);
    e->dtype = dtype;
    e->ndim = ndim;
    e->shape[0] = d0;
    e->shape[1] = d1;
    uint64_t n = ndim == 0 ? 1 : ndim == 1 ? d0 : d0 * d1;
    e->bytes = n * es;
    e->align = es;
    return e;
}

static int ends_with(const char *s, const char *suf)
{
    size_t n = strlen(s), k = strlen(suf);
    return n >= k && strcmp(s + n - k, suf) == 0;
}

/* Whether the planned tensor t is stored quantised under s->quant. */
static int quantised(const mk_spec *s, const mk_tensor *t)
{
    if (t->ndim != 2 || t->is_norm || !ends_with(t->name, ".weight"))
        return 0;
    if (strstr(t->name, "embed_tokens") || strcmp(t->name, "lm_head.weight") == 0 ||
        strstr(t->name, "shared_head.head") || ends_with(t->name, ".gate.weight"))
        return 0; /* embeddings, the head and the routers stay float, as in every release */
    if (strstr(t->name, "indexer")) /* GLM-5's DSA indexer stays float */
        return 0;
    if (s->quant == MK_Q_NVFP4_EXPERTS && !strstr(t->name, ".experts."))
        return 0;
    if ((s->quant == MK_Q_NVFP4 || s->quant == MK_Q_NVFP4_EXPERTS) && t->shape[1] % 16 != 0)
        return 0;
    return 1;
}

static void gen_values(const mk_spec *s, const mk_tensor *t, float *v, uint64_t n)
{
    mk_rng rng;
    mk_rng_init(&rng, s->seed, t->name);
    for (uint64_t i = 0; i < n; i++) {
        double z = mk_rng_normal(&rng);
        v[i] = (float)(t->is_norm ? 1.0 + 0.1 * z : t->std * z);
    }
}

static void put_float(unsigned char *o, mk_dtype dt, float v)
{
    if (dt == MK_F32) {
        memcpy(o, &v, 4); /* little-endian hosts only, as weights.c assumes for its output */
    } else {
        uint16_t h = dt == MK_BF16 ? sy_f32_to_bf16(v) : sy_f32_to_f16(v);
        o[0] = (unsigned char)h;
        o[1] = (unsigned char)(h >> 8);
    }
}

static void base_name(char *out, size_t cap, const char *weight_name)
{
    size_t n = strlen(weight_name) - strlen(".weight");
    snprintf(out, cap, "%.*s", (int)n, weight_name);
}

/* Fills the entries of one planned tensor (weight and scales) from its float values. */
static int fill_quant(const mk_spec *s, const mk_tensor *t, entry *w, entry *sc, entry *s2, entry *in)
{
    const uint64_t N = t->shape[0], K = t->shape[1];
    float *v = malloc(sizeof(float) * N * K);
    if (!v)
        return -1;
    gen_values(s, t, v, N * K);
    if (s->quant == MK_Q_FP8 || s->quant == MK_Q_FP8_TENSOR) {
        const uint64_t b0 = s->quant == MK_Q_FP8 ? 128 : N, b1 = s->quant == MK_Q_FP8 ? 128 : K;
        const uint64_t R = (N + b0 - 1) / b0, C = (K + b1 - 1) / b1;
        for (uint64_t br = 0; br < R; br++)
            for (uint64_t bc = 0; bc < C; bc++) {
                double amax = 0;
                for (uint64_t i = br * b0; i < N && i < (br + 1) * b0; i++)
                    for (uint64_t j = bc * b1; j < K && j < (bc + 1) * b1; j++)
                        amax = fabs(v[i * K + j]) > amax ? fabs(v[i * K + j]) : amax;
                float scale = amax > 0 ? (float)(amax / 448.0) : 1.0f;
                memcpy(sc->data + 4 * (br * C + bc), &scale, 4);
                for (uint64_t i = br * b0; i < N && i < (br + 1) * b0; i++)
                    for (uint64_t j = bc * b1; j < K && j < (bc + 1) * b1; j++)
                        w->data[i * K + j] = enc_e4m3(v[i * K + j] / (double)scale);
            }
    } else {
        double amax = 0;
        for (uint64_t i = 0; i < N * K; i++)
            amax = fabs(v[i]) > amax ? fabs(v[i]) : amax;
        const float g = amax > 0 ? (float)(amax / (448.0 * 6.0)) : 1.0f;
        const float one = 1.0f;
        memcpy(s2->data, &g, 4);
        memcpy(in->data, &one, 4);
        memset(w->data, 0, N * K / 2);
        for (uint64_t i = 0; i < N; i++)
            for (uint64_t b = 0; b < K / 16; b++) {
                const float *blk = v + i * K + b * 16;
                double bmax = 0;
                for (int j = 0; j < 16; j++)
                    bmax = fabs(blk[j]) > bmax ? fabs(blk[j]) : bmax;
                const uint8_t code = enc_e4m3(bmax / 6.0 / (double)g);
                sc->data[i * (K / 16) + b] = code;
                const double step = dec_e4m3(code) * (double)g;
                for (int j = 0; j < 16; j++) {
                    const uint8_t q = step > 0 ? enc_e2m1(blk[j] / step) : 0;
                    const uint64_t e = i * K + b * 16 + (uint64_t)j;
                    w->data[e / 2] |= (uint8_t)(q << ((e & 1) * 4)); /* element 2i in the low nibble */
                }
            }
    }
    free(v);
    return 0;
}

static int cmp_align(const void *a, const void *b)
{
    const entry *x = *(entry *const *)a, *y = *(entry *const *)b;
    return x->align != y->align ? (x->align > y->align ? -1 : 1) : 0;
}

/* config.json gains quantization_config (fp8); hf_quant_config.json is written (nvfp4). */
static int write_quant_config(const mk_spec *s, const char *dir, json_t *excluded, char *err, size_t errcap)
{
    if (s->quant == MK_Q_FP8 || s->quant == MK_Q_FP8_TENSOR) {
        char path[4096];
        if (mk_path(path, sizeof path, dir, "config.json") != 0) {
            snprintf(err, errcap, "--out: path too long");
            return -1;
        }
        json_error_t je;
        json_t *c = json_load_file(path, JSON_PRESERVE_ORDER, &je);
        if (!c) {
            snprintf(err, errcap, "%s: cannot re-read: %s", path, je.text);
            return -1;
        }
        json_t *qc = s->quant == MK_Q_FP8
                         ? json_pack("{s:s,s:s,s:[i,i],s:O}", "quant_method", "fp8", "activation_scheme", "dynamic",
                                     "weight_block_size", 128, 128, "modules_to_not_convert", excluded)
                         : json_pack("{s:s,s:s,s:O}", "quant_method", "fp8", "activation_scheme", "dynamic",
                                     "modules_to_not_convert", excluded);
        if (!qc || json_object_set_new(c, "quantization_config", qc) != 0) {
            json_decref(c);
            snprintf(err, errcap, "out of memory building quantization_config");
            return -1;
        }
        return mk_write_json(c, dir, "config.json", err, errcap);
    }
    json_t *h = json_pack("{s:{s:s,s:s},s:{s:s,s:s,s:i,s:O}}", "producer", "name", "modelopt", "version",
                          "sy-mkmodel", "quantization", "quant_algo", "NVFP4", "kv_cache_quant_algo", "none",
                          "group_size", 16, "exclude_modules", excluded);
    return mk_write_json(h, dir, "hf_quant_config.json", err, errcap);
}

int mk_write_quant_weights(const mk_spec *s, const char *dir, char *err, size_t errcap)
{
    if (s->shards > 1) {
        snprintf(err, errcap, "--shards %d: quantised checkpoints are written as one file", s->shards);
        return -1;
    }
    size_t n = 0;
    mk_tensor *t = mk_plan_tensors(s, &n);
    out_list l = {0};
    json_t *excluded = json_array();
    entry **order = NULL;
    unsigned char *blob = NULL;
    FILE *f = NULL;
    int rc = -1;
    if (!t || !excluded)
        goto oom;
    const int nv = s->quant == MK_Q_NVFP4 || s->quant == MK_Q_NVFP4_EXPERTS;
    const size_t fes = mk_dtype_size(s->dtype);
    /* Plan: indices into l.e; per planned tensor either one float entry or a quantised group. */
    size_t *first = malloc(sizeof(size_t) * (n ? n : 1));
    if (!first)
        goto oom;
    for (size_t i = 0; i < n; i++) {
        first[i] = l.n;
        const uint64_t N = t[i].shape[0], K = t[i].ndim == 2 ? t[i].shape[1] : 0;
        char b[160], nm[200];
        if (!quantised(s, &t[i])) {
            if (!add_entry(&l, t[i].name, mk_dtype_st_name(s->dtype), t[i].ndim, N, K, fes))
                goto oom_first;
            if (t[i].ndim == 2 && ends_with(t[i].name, ".weight")) {
                base_name(b, sizeof b, t[i].name);
                json_array_append_new(excluded, json_string(b));
            }
            continue;
        }
        base_name(b, sizeof b, t[i].name);
        int ok;
        if (!nv) {
            ok = add_entry(&l, t[i].name, "F8_E4M3", 2, N, K, 1) != NULL;
            snprintf(nm, sizeof nm, "%s%s", b, s->quant == MK_Q_FP8 ? ".weight_scale_inv" : ".weight_scale");
            ok = ok && (s->quant == MK_Q_FP8 ? add_entry(&l, nm, "F32", 2, (N + 127) / 128, (K + 127) / 128, 4)
                                             : add_entry(&l, nm, "F32", 0, 0, 0, 4)) != NULL;
        } else {
            ok = add_entry(&l, t[i].name, "U8", 2, N, K / 2, 1) != NULL;
            snprintf(nm, sizeof nm, "%s.weight_scale", b);
            ok = ok && add_entry(&l, nm, "F8_E4M3", 2, N, K / 16, 1) != NULL;
            snprintf(nm, sizeof nm, "%s.weight_scale_2", b);
            ok = ok && add_entry(&l, nm, "F32", 0, 0, 0, 4) != NULL;
            snprintf(nm, sizeof nm, "%s.input_scale", b);
            ok = ok && add_entry(&l, nm, "F32", 0, 0, 0, 4) != NULL;
        }
        if (!ok)
            goto oom_first;
    }
    /* Offsets: widest elements first, so every tensor starts aligned to its element size. */
    order = malloc(sizeof(entry *) * (l.n ? l.n : 1));
    if (!order)
        goto oom_first;
    for (size_t i = 0; i < l.n; i++)
        order[i] = &l.e[i];
    qsort(order, l.n, sizeof *order, cmp_align); /* ties keep no particular order: offsets are recorded anyway */
    uint64_t total = 0;
    for (size_t i = 0; i < l.n; i++)
        total += order[i]->bytes;
    blob = calloc(1, total ? total : 1);
    if (!blob)
        goto oom_first;
    uint64_t off = 0;
    json_t *hdr = json_pack("{s:{s:s}}", "__metadata__", "format", "pt");
    for (size_t i = 0; i < l.n && hdr; i++) {
        entry *e = order[i];
        e->data = blob + off;
        json_t *shape = json_array();
        for (int d = 0; d < e->ndim; d++)
            json_array_append_new(shape, json_integer((json_int_t)e->shape[d]));
        json_object_set_new(hdr, e->name,
                            json_pack("{s:s,s:o,s:[I,I]}", "dtype", e->dtype, "shape", shape, "data_offsets",
                                      (json_int_t)off, (json_int_t)(off + e->bytes)));
        off += e->bytes;
    }
    /* Data, tensor by tensor. */
    for (size_t i = 0; i < n; i++) {
        entry *e = &l.e[first[i]];
        if (!quantised(s, &t[i])) {
            const uint64_t cnt = t[i].ndim == 2 ? t[i].shape[0] * t[i].shape[1] : t[i].shape[0];
            float *v = malloc(sizeof(float) * (cnt ? cnt : 1));
            if (!v)
                goto oom_hdr;
            gen_values(s, &t[i], v, cnt);
            for (uint64_t k = 0; k < cnt; k++)
                put_float(e->data + k * fes, s->dtype, v[k]);
            free(v);
        } else if (fill_quant(s, &t[i], e, e + 1, nv ? e + 2 : NULL, nv ? e + 3 : NULL) != 0) {
            goto oom_hdr;
        }
    }
    char *text = hdr ? json_dumps(hdr, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(hdr);
    hdr = NULL;
    if (!text)
        goto oom_first;
    size_t hl = strlen(text), pad = (8 - (8 + hl) % 8) % 8;
    char path[4096];
    if (mk_path(path, sizeof path, dir, "model.safetensors") != 0) {
        free(text);
        snprintf(err, errcap, "--out: path too long");
        goto out_first;
    }
    f = fopen(path, "wb");
    if (!f) {
        free(text);
        snprintf(err, errcap, "%s: cannot create: %s", path, strerror(errno));
        goto out_first;
    }
    unsigned char len8[8];
    for (int k = 0; k < 8; k++)
        len8[k] = (unsigned char)((uint64_t)(hl + pad) >> (8 * k));
    int wok = fwrite(len8, 1, 8, f) == 8 && fwrite(text, 1, hl, f) == hl && fwrite("        ", 1, pad, f) == pad &&
              (total == 0 || fwrite(blob, 1, total, f) == total);
    free(text);
    if (fclose(f) != 0 || !wok) {
        snprintf(err, errcap, "%s: write failed: %s", path, strerror(errno));
        goto out_first;
    }
    rc = write_quant_config(s, dir, excluded, err, errcap);
    goto out_first;
oom_hdr:
    json_decref(hdr);
oom_first:
    snprintf(err, errcap, "out of memory writing the quantised checkpoint");
out_first:
    free(first);
    goto out;
oom:
    snprintf(err, errcap, "out of memory writing the quantised checkpoint");
out:
    free(order);
    free(blob);
    free(l.e);
    free(t);
    json_decref(excluded);
    return rc;
}
