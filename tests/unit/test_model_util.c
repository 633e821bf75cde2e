#include "config.h"

#include "test_model_util.h"

#include <ftw.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int tm_failures;

void tm_check_err(const char *file, int line, int rc, const char *msg, ...)
{
    if (rc == 0) {
        tm_failures++;
        fprintf(stderr, "FAIL %s:%d: expected an error, the call succeeded\n", file, line);
        return;
    }
    va_list ap;
    va_start(ap, msg);
    for (const char *s = va_arg(ap, const char *); s; s = va_arg(ap, const char *))
        if (!strstr(msg, s)) {
            tm_failures++;
            fprintf(stderr, "FAIL %s:%d: error message lacks \"%s\": %s\n", file, line, s, msg);
        }
    va_end(ap);
    if (getenv("SY_TEST_VERBOSE"))
        fprintf(stderr, "  ok %s:%d: %s\n", file, line, msg);
}

int tm_mkdtemp(char *out, size_t cap)
{
    const char *t = getenv("TMPDIR");
    snprintf(out, cap, "%s/sy-model-test-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(out)) {
        perror("mkdtemp");
        tm_failures++;
        return -1;
    }
    return 0;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void tm_rmtree(const char *path) { nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS); }

int tm_write_file(const char *dir, const char *name, const void *data, size_t len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || (len && fwrite(data, 1, len, f) != len)) {
        perror(path);
        tm_failures++;
        if (f)
            fclose(f);
        return -1;
    }
    return fclose(f) == 0 ? 0 : -1;
}

int tm_write_text(const char *dir, const char *name, const char *text)
{
    return tm_write_file(dir, name, text, strlen(text));
}

int tm_write_config_dir(const char *parent, const char *name, json_t *cfg, char *dir, size_t cap)
{
    snprintf(dir, cap, "%s/%s", parent, name);
    mkdir(dir, 0700);
    char *text = json_dumps(cfg, JSON_INDENT(2));
    json_decref(cfg);
    const int rc = text ? tm_write_text(dir, "config.json", text) : -1;
    free(text);
    return rc;
}

int tm_write_st_raw(const char *path, const char *header, long long hlen_override, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        tm_failures++;
        return -1;
    }
    uint64_t hl = hlen_override >= 0 ? (uint64_t)hlen_override : strlen(header);
    uint8_t le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (uint8_t)(hl >> (8 * i));
    fwrite(le, 1, 8, f);
    fwrite(header, 1, strlen(header), f);
    if (len)
        fwrite(data, 1, len, f);
    return fclose(f) == 0 ? 0 : -1;
}

size_t tm_dtype_size(const char *dtype)
{
    if (!strcmp(dtype, "F32") || !strcmp(dtype, "I32"))
        return 4;
    if (!strcmp(dtype, "F16") || !strcmp(dtype, "BF16"))
        return 2;
    if (!strcmp(dtype, "I64") || !strcmp(dtype, "F64"))
        return 8;
    return 1;
}

void tm_st_init(tm_st *b)
{
    memset(b, 0, sizeof *b);
    b->hdr = json_object();
    json_t *meta = json_object();
    json_object_set_new(meta, "format", json_string("pt"));
    json_object_set_new(b->hdr, "__metadata__", meta);
}

void tm_st_add(tm_st *b, const char *name, const char *dtype, int ndim, const int64_t *shape, const void *bytes)
{
    size_t numel = 1;
    json_t *js = json_array();
    for (int i = 0; i < ndim; i++) {
        numel *= (size_t)shape[i];
        json_array_append_new(js, json_integer(shape[i]));
    }
    size_t nb = numel * tm_dtype_size(dtype);
    size_t begin = (b->len + 7) & ~(size_t)7;
    if (begin + nb > b->cap) {
        b->cap = (begin + nb) * 2 + 64;
        b->data = realloc(b->data, b->cap);
    }
    memset(b->data + b->len, 0, begin - b->len);
    for (size_t i = 0; i < nb; i++)
        b->data[begin + i] = bytes ? ((const uint8_t *)bytes)[i] : (uint8_t)((begin + i) * 7 + 1);
    b->len = begin + nb;
    json_t *e = json_object();
    json_object_set_new(e, "dtype", json_string(dtype));
    json_object_set_new(e, "shape", js);
    json_t *off = json_array();
    json_array_append_new(off, json_integer((json_int_t)begin));
    json_array_append_new(off, json_integer((json_int_t)(begin + nb)));
    json_object_set_new(e, "data_offsets", off);
    json_object_set_new(b->hdr, name, e);
}

int tm_st_write(const tm_st *b, const char *path)
{
    char *h = json_dumps(b->hdr, JSON_COMPACT);
    size_t n = strlen(h);
    size_t padded = (8 + n + 7) / 8 * 8 - 8; /* data region 8-aligned, as safetensors writes it */
    char *hp = malloc(padded + 1);
    memcpy(hp, h, n);
    memset(hp + n, ' ', padded - n);
    hp[padded] = '\0';
    int rc = tm_write_st_raw(path, hp, -1, b->data, b->len);
    free(hp);
    free(h);
    return rc;
}

void tm_st_free(tm_st *b)
{
    json_decref(b->hdr);
    free(b->data);
    memset(b, 0, sizeof *b);
}

/* ------------------------------------------------ synthetic checkpoints */

typedef struct tm_ckpt {
    const tm_spec *s;
    tm_st *parts;
    int n_parts, next;
    json_t *weight_map;
} tm_ckpt;

static void put(tm_ckpt *c, const char *name, int ndim, int64_t d0, int64_t d1)
{
    const tm_spec *s = c->s;
    if (s->omit && strcmp(s->omit, name) == 0)
        return;
    int64_t shape[2] = {d0, d1};
    if (s->reshape && strcmp(s->reshape, name) == 0) {
        shape[0] = s->reshape_to[0];
        shape[1] = s->reshape_to[1];
    }
    const char *dt = s->dtype ? s->dtype : "F32";
    if (s->retype && strcmp(s->retype, name) == 0)
        dt = s->retype_to;
    int part = c->next++ % c->n_parts;
    tm_st_add(&c->parts[part], name, dt, ndim, shape, NULL);
    if (c->weight_map) {
        char fn[64];
        snprintf(fn, sizeof fn, "model-%05d-of-%05d.safetensors", part + 1, c->n_parts);
        json_object_set_new(c->weight_map, name, json_string(fn));
    }
}

/* "model.layers.<l>.<mid>" or, for an expert, "model.layers.<l>.<mid><e>.<tail>". */
static const char *ln(char *n, int l, const char *mid, int e, const char *tail)
{
    if (e < 0)
        snprintf(n, 256, "model.layers.%d.%s", l, mid);
    else
        snprintf(n, 256, "model.layers.%d.%s%d.%s", l, mid, e, tail);
    return n;
}

static void put_layer(tm_ckpt *c, int l)
{
    const tm_spec *s = c->s;
    char n[256];
    int64_t h = s->hidden, q = (int64_t)s->heads * s->head_dim, kv = (int64_t)s->kv_heads * s->head_dim;
    put(c, ln(n, l, "input_layernorm.weight", -1, NULL), 1, h, 0);
    put(c, ln(n, l, "post_attention_layernorm.weight", -1, NULL), 1, h, 0);
    put(c, ln(n, l, "self_attn.q_proj.weight", -1, NULL), 2, q, h);
    put(c, ln(n, l, "self_attn.k_proj.weight", -1, NULL), 2, kv, h);
    put(c, ln(n, l, "self_attn.v_proj.weight", -1, NULL), 2, kv, h);
    put(c, ln(n, l, "self_attn.o_proj.weight", -1, NULL), 2, h, q);
    if (s->bias) {
        put(c, ln(n, l, "self_attn.q_proj.bias", -1, NULL), 1, q, 0);
        put(c, ln(n, l, "self_attn.k_proj.bias", -1, NULL), 1, kv, 0);
        put(c, ln(n, l, "self_attn.v_proj.bias", -1, NULL), 1, kv, 0);
        put(c, ln(n, l, "self_attn.o_proj.bias", -1, NULL), 1, h, 0); /* Llama, Qwen3-MoE: attention_bias too */
    }
    bool qwen = strcmp(s->family, "qwen3moe") == 0;
    if (qwen) {
        put(c, ln(n, l, "self_attn.q_norm.weight", -1, NULL), 1, s->head_dim, 0);
        put(c, ln(n, l, "self_attn.k_norm.weight", -1, NULL), 1, s->head_dim, 0);
    }
    bool moe = s->experts > 0 && (!s->moe_layers || s->moe_layers[l]);
    if (!moe) {
        put(c, ln(n, l, "mlp.gate_proj.weight", -1, NULL), 2, s->inter, h);
        put(c, ln(n, l, "mlp.up_proj.weight", -1, NULL), 2, s->inter, h);
        put(c, ln(n, l, "mlp.down_proj.weight", -1, NULL), 2, h, s->inter);
        return;
    }
    int64_t mi = s->moe_inter;
    if (qwen) {
        put(c, ln(n, l, "mlp.gate.weight", -1, NULL), 2, s->experts, h);
        for (int e = 0; e < s->experts; e++) {
            put(c, ln(n, l, "mlp.experts.", e, "gate_proj.weight"), 2, mi, h);
            put(c, ln(n, l, "mlp.experts.", e, "up_proj.weight"), 2, mi, h);
            put(c, ln(n, l, "mlp.experts.", e, "down_proj.weight"), 2, h, mi);
        }
    } else {
        put(c, ln(n, l, "block_sparse_moe.gate.weight", -1, NULL), 2, s->experts, h);
        for (int e = 0; e < s->experts; e++) {
            put(c, ln(n, l, "block_sparse_moe.experts.", e, "w1.weight"), 2, mi, h);
            put(c, ln(n, l, "block_sparse_moe.experts.", e, "w2.weight"), 2, h, mi);
            put(c, ln(n, l, "block_sparse_moe.experts.", e, "w3.weight"), 2, mi, h);
        }
    }
}

int tm_write_checkpoint(const char *dir, const tm_spec *s)
{
    tm_ckpt c = {.s = s, .n_parts = s->shards > 1 ? s->shards : 1};
    c.parts = calloc((size_t)c.n_parts, sizeof *c.parts);
    for (int i = 0; i < c.n_parts; i++)
        tm_st_init(&c.parts[i]);
    if (c.n_parts > 1)
        c.weight_map = json_object();
    put(&c, "model.embed_tokens.weight", 2, s->vocab, s->hidden);
    put(&c, "model.norm.weight", 1, s->hidden, 0);
    if (!s->tied)
        put(&c, "lm_head.weight", 2, s->vocab, s->hidden);
    for (int l = 0; l < s->layers; l++)
        put_layer(&c, l);
    int rc = 0;
    char path[4096];
    for (int i = 0; i < c.n_parts; i++) {
        if (c.n_parts > 1)
            snprintf(path, sizeof path, "%s/model-%05d-of-%05d.safetensors", dir, i + 1, c.n_parts);
        else
            snprintf(path, sizeof path, "%s/model.safetensors", dir);
        rc |= tm_st_write(&c.parts[i], path);
        tm_st_free(&c.parts[i]);
    }
    if (c.weight_map) {
        json_t *idx = json_object();
        json_t *meta = json_object();
        json_object_set_new(meta, "total_size", json_integer(0));
        json_object_set_new(idx, "metadata", meta);
        json_object_set_new(idx, "weight_map", c.weight_map);
        char *text = json_dumps(idx, JSON_INDENT(2));
        rc |= tm_write_text(dir, "model.safetensors.index.json", text);
        free(text);
        json_decref(idx);
    }
    free(c.parts);
    return rc;
}
