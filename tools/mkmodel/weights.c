/*
 * The tensors of a checkpoint (Hugging Face names and shapes) and the
 * safetensors writer: one file, or N shards plus model.safetensors.index.json.
 */
#include "config.h"

#include "mkmodel.h"
#include "util/util.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Elements generated per fwrite. */
#define MK_CHUNK (1u << 20)

typedef struct plan {
    mk_tensor *t;
    size_t n, cap;
} plan;

static int plan_add(plan *p, int is_norm, double std, uint64_t d0, uint64_t d1, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

static int plan_add(plan *p, int is_norm, double std, uint64_t d0, uint64_t d1, const char *fmt, ...)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 64;
        mk_tensor *t = realloc(p->t, cap * sizeof(*t));
        if (!t)
            return -1;
        p->t = t;
        p->cap = cap;
    }
    mk_tensor *t = &p->t[p->n++];
    memset(t, 0, sizeof(*t));
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->name, sizeof(t->name), fmt, ap);
    va_end(ap);
    t->is_norm = is_norm;
    t->std = std;
    t->shape[0] = d0;
    t->shape[1] = d1;
    t->ndim = d1 ? 2 : 1;
    return 0;
}

/* A [out, in] linear layer: N(0, 1/in). */
#define LINEAR(out, in, ...) plan_add(&p, 0, 1.0 / sqrt((double)(in)), (uint64_t)(out), (uint64_t)(in), __VA_ARGS__)
#define NORM(n, ...) plan_add(&p, 1, 0.0, (uint64_t)(n), 0, __VA_ARGS__)

/* MLA projections (and the DSA indexer) of layer i, DeepSeek-V3's names. */
static int plan_mla(plan *pp, const mk_spec *s, int i)
{
#define p (*pp)
    const mk_ds *d = &s->ds;
    const int H = s->hidden, qk = d->nope + d->rope;
    int rc = 0;
    if (d->q_lora > 0) {
        rc |= LINEAR(d->q_lora, H, "model.layers.%d.self_attn.q_a_proj.weight", i);
        rc |= NORM(d->q_lora, "model.layers.%d.self_attn.q_a_layernorm.weight", i);
        rc |= LINEAR(s->heads * qk, d->q_lora, "model.layers.%d.self_attn.q_b_proj.weight", i);
    } else {
        rc |= LINEAR(s->heads * qk, H, "model.layers.%d.self_attn.q_proj.weight", i);
    }
    rc |= LINEAR(d->kv_lora + d->rope, H, "model.layers.%d.self_attn.kv_a_proj_with_mqa.weight", i);
    rc |= NORM(d->kv_lora, "model.layers.%d.self_attn.kv_a_layernorm.weight", i);
    rc |= LINEAR(s->heads * (d->nope + d->v_head), d->kv_lora, "model.layers.%d.self_attn.kv_b_proj.weight", i);
    rc |= LINEAR(H, s->heads * d->v_head, "model.layers.%d.self_attn.o_proj.weight", i);
    if (mk_has_indexer(s) && !(s->arch == MK_GLM_MOE_DSA && d->shared_indexer_last && i == s->layers - 1 && i > 0)) {
        const int ID = d->index_head_dim;
        rc |= LINEAR(d->index_heads * ID, d->q_lora, "model.layers.%d.self_attn.indexer.wq_b.weight", i);
        rc |= LINEAR(ID, H, "model.layers.%d.self_attn.indexer.wk.weight", i);
        rc |= NORM(ID, "model.layers.%d.self_attn.indexer.k_norm.weight", i);
        rc |= plan_add(&p, 0, 0.1, (uint64_t)ID, 0, "model.layers.%d.self_attn.indexer.k_norm.bias", i);
        rc |= LINEAR(d->index_heads, H, "model.layers.%d.self_attn.indexer.weights_proj.weight", i);
    }
    return rc;
#undef p
}

/* DeepseekV3MoE: router + score bias, routed experts, shared experts. */
static int plan_deepseek_moe(plan *pp, const mk_spec *s, int i)
{
#define p (*pp)
    const int H = s->hidden, EF = mk_expert_ffn(s), SF = EF * s->ds.n_shared;
    int rc = LINEAR(s->experts, H, "model.layers.%d.mlp.gate.weight", i);
    /* A bias large enough to change which experts win. */
    rc |= plan_add(&p, 0, 0.05, (uint64_t)s->experts, 0, "model.layers.%d.mlp.gate.e_score_correction_bias", i);
    for (int e = 0; e < s->experts; e++) {
        rc |= LINEAR(EF, H, "model.layers.%d.mlp.experts.%d.gate_proj.weight", i, e);
        rc |= LINEAR(EF, H, "model.layers.%d.mlp.experts.%d.up_proj.weight", i, e);
        rc |= LINEAR(H, EF, "model.layers.%d.mlp.experts.%d.down_proj.weight", i, e);
    }
    if (SF > 0) {
        rc |= LINEAR(SF, H, "model.layers.%d.mlp.shared_experts.gate_proj.weight", i);
        rc |= LINEAR(SF, H, "model.layers.%d.mlp.shared_experts.up_proj.weight", i);
        rc |= LINEAR(H, SF, "model.layers.%d.mlp.shared_experts.down_proj.weight", i);
    }
    return rc;
#undef p
}

/* Decoder layer i (an MTP layer's block when i >= s->layers). */
static int plan_layer(plan *pp, const mk_spec *s, int i)
{
#define p (*pp)
    const int H = s->hidden, hd = s->head_dim, F = s->ffn, EF = mk_expert_ffn(s);
    int rc = 0;
    rc |= NORM(H, "model.layers.%d.input_layernorm.weight", i);
    if (mk_is_mla(s))
        rc |= plan_mla(&p, s, i);
    else {
        rc |= LINEAR(s->heads * hd, H, "model.layers.%d.self_attn.q_proj.weight", i);
        rc |= LINEAR(s->kv_heads * hd, H, "model.layers.%d.self_attn.k_proj.weight", i);
        rc |= LINEAR(s->kv_heads * hd, H, "model.layers.%d.self_attn.v_proj.weight", i);
        rc |= LINEAR(H, s->heads * hd, "model.layers.%d.self_attn.o_proj.weight", i);
    }
    if ((s->arch == MK_GLM4_MOE && s->ds.attn_bias) || s->arch == MK_QWEN2 || (s->arch == MK_QWEN3 && s->attn_bias)) {
        rc |= plan_add(&p, 0, 0.1, (uint64_t)(s->heads * hd), 0, "model.layers.%d.self_attn.q_proj.bias", i);
        rc |= plan_add(&p, 0, 0.1, (uint64_t)(s->kv_heads * hd), 0, "model.layers.%d.self_attn.k_proj.bias", i);
        rc |= plan_add(&p, 0, 0.1, (uint64_t)(s->kv_heads * hd), 0, "model.layers.%d.self_attn.v_proj.bias", i);
    }
    if (s->arch == MK_QWEN3 && s->attn_bias) /* Qwen3Attention: attention_bias covers o_proj too */
        rc |= plan_add(&p, 0, 0.1, (uint64_t)H, 0, "model.layers.%d.self_attn.o_proj.bias", i);
    if (s->arch == MK_QWEN3_MOE || s->arch == MK_QWEN3 || (s->arch == MK_GLM4_MOE && s->ds.qk_norm)) {
        rc |= NORM(hd, "model.layers.%d.self_attn.q_norm.weight", i);
        rc |= NORM(hd, "model.layers.%d.self_attn.k_norm.weight", i);
    }
    rc |= NORM(H, "model.layers.%d.post_attention_layernorm.weight", i);
    if (s->arch == MK_MIXTRAL) {
        rc |= LINEAR(s->experts, H, "model.layers.%d.block_sparse_moe.gate.weight", i);
        for (int e = 0; e < s->experts; e++) {
            rc |= LINEAR(EF, H, "model.layers.%d.block_sparse_moe.experts.%d.w1.weight", i, e);
            rc |= LINEAR(H, EF, "model.layers.%d.block_sparse_moe.experts.%d.w2.weight", i, e);
            rc |= LINEAR(EF, H, "model.layers.%d.block_sparse_moe.experts.%d.w3.weight", i, e);
        }
    } else if (mk_is_deepseek_family(s) && !mk_layer_is_dense(s, i)) {
        rc |= plan_deepseek_moe(&p, s, i);
    } else if (!mk_layer_is_dense(s, i)) { /* qwen3_moe */
        rc |= LINEAR(s->experts, H, "model.layers.%d.mlp.gate.weight", i);
        for (int e = 0; e < s->experts; e++) {
            rc |= LINEAR(EF, H, "model.layers.%d.mlp.experts.%d.gate_proj.weight", i, e);
            rc |= LINEAR(EF, H, "model.layers.%d.mlp.experts.%d.up_proj.weight", i, e);
            rc |= LINEAR(H, EF, "model.layers.%d.mlp.experts.%d.down_proj.weight", i, e);
        }
    } else {
        rc |= LINEAR(F, H, "model.layers.%d.mlp.gate_proj.weight", i);
        rc |= LINEAR(F, H, "model.layers.%d.mlp.up_proj.weight", i);
        rc |= LINEAR(H, F, "model.layers.%d.mlp.down_proj.weight", i);
    }
    return rc;
#undef p
}

mk_tensor *mk_plan_tensors(const mk_spec *s, size_t *n)
{
    if (s->arch == MK_GPT_OSS)
        return mk_gptoss_plan(s, n);
    plan p = {0};
    const int H = s->hidden;
    int rc = 0;
    /* The embedding's input is one-hot (fan-in 1): N(0,1) rows. Tied, it is
     * also lm_head, so it takes lm_head's scale instead. */
    double embed_std = s->tie ? MK_LM_HEAD_GAIN / sqrt((double)H) : 1.0;
    rc |= plan_add(&p, 0, embed_std, (uint64_t)s->vocab, (uint64_t)H, "model.embed_tokens.weight");
    for (int i = 0; i < s->layers && rc == 0; i++)
        rc |= plan_layer(&p, s, i);
    rc |= NORM(H, "model.norm.weight");
    if (!s->tie)
        rc |= plan_add(&p, 0, MK_LM_HEAD_GAIN / sqrt((double)H), (uint64_t)s->vocab, (uint64_t)H, "lm_head.weight");
    /* MTP layers, named as the releases name them (model.layers.{layers + k}; DeepSeek-V3's carry their own
     * embedding, every release a shared_head). Last: in the last shard(s), as the releases store them. */
    for (int k = 0; mk_is_deepseek_family(s) && k < s->ds.mtp_layers && rc == 0; k++) {
        const int i = s->layers + k;
        rc |= NORM(H, "model.layers.%d.enorm.weight", i);
        rc |= NORM(H, "model.layers.%d.hnorm.weight", i);
        rc |= LINEAR(H, 2 * H, "model.layers.%d.eh_proj.weight", i);
        if (s->arch == MK_DEEPSEEK_V3 || s->arch == MK_DEEPSEEK_V32)
            rc |= plan_add(&p, 0, 1.0, (uint64_t)s->vocab, (uint64_t)H, "model.layers.%d.embed_tokens.weight", i);
        rc |= plan_layer(&p, s, i);
        rc |= NORM(H, "model.layers.%d.shared_head.norm.weight", i);
        rc |= plan_add(&p, 0, MK_LM_HEAD_GAIN / sqrt((double)H), (uint64_t)s->vocab, (uint64_t)H,
                       "model.layers.%d.shared_head.head.weight", i);
    }
    if (rc) {
        free(p.t);
        return NULL;
    }
    *n = p.n;
    return p.t;
}

static uint64_t tensor_elems(const mk_tensor *t)
{
    return t->ndim == 3   ? t->shape[0] * t->shape[1] * t->shape[2]
           : t->ndim == 2 ? t->shape[0] * t->shape[1]
                          : t->shape[0];
}

uint64_t mk_count_params(const mk_tensor *t, size_t n)
{
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += tensor_elems(&t[i]);
    return total;
}

/* ---- a growing string for the JSON header ---- */
typedef struct sbuf {
    char *p;
    size_t len, cap;
    int oom;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sb_printf(sbuf *b, const char *fmt, ...)
{
    if (b->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->oom = 1;
            return;
        }
        if (b->p && b->len + (size_t)k < b->cap) {
            b->len += (size_t)k;
            return;
        }
        size_t cap = (b->cap ? b->cap : 4096);
        while (cap <= b->len + (size_t)k + 8)
            cap *= 2;
        char *np = realloc(b->p, cap);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
}

/* ---- writing ---- */
static void put_le16(unsigned char *o, uint16_t v)
{
    o[0] = (unsigned char)v;
    o[1] = (unsigned char)(v >> 8);
}

static void put_le32(unsigned char *o, uint32_t v)
{
    o[0] = (unsigned char)v;
    o[1] = (unsigned char)(v >> 8);
    o[2] = (unsigned char)(v >> 16);
    o[3] = (unsigned char)(v >> 24);
}

static int write_tensor_data(FILE *f, const char *path, const mk_spec *s, const mk_tensor *t, unsigned char *buf,
                             char *err, size_t errcap)
{
    mk_rng rng;
    mk_rng_init(&rng, s->seed, t->name);
    const size_t es = mk_dtype_size(s->dtype);
    uint64_t left = tensor_elems(t);
    while (left > 0) {
        size_t n = left < MK_CHUNK ? (size_t)left : MK_CHUNK;
        unsigned char *o = buf;
        for (size_t i = 0; i < n; i++, o += es) {
            double z = mk_rng_normal(&rng);
            float v = (float)(t->is_norm ? 1.0 + 0.1 * z : t->std * z);
            if (s->dtype == MK_F32) {
                uint32_t u;
                memcpy(&u, &v, 4);
                put_le32(o, u);
            } else if (s->dtype == MK_BF16) {
                put_le16(o, sy_f32_to_bf16(v));
            } else {
                put_le16(o, sy_f32_to_f16(v));
            }
        }
        if (fwrite(buf, es, n, f) != n) {
            snprintf(err, errcap, "%s: write failed: %s", path, strerror(errno));
            return -1;
        }
        left -= n;
    }
    return 0;
}

/* Writes tensors [first, last) into one safetensors file. */
static int write_file(const mk_spec *s, const char *path, const mk_tensor *t, size_t first, size_t last,
                      unsigned char *buf, char *err, size_t errcap)
{
    const size_t es = mk_dtype_size(s->dtype);
    sbuf h = {0};
    sb_printf(&h, "{\"__metadata__\":{\"format\":\"pt\"}");
    uint64_t off = 0;
    for (size_t i = first; i < last; i++) {
        uint64_t bytes = tensor_elems(&t[i]) * es;
        sb_printf(&h, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%llu", t[i].name, mk_dtype_st_name(s->dtype),
                  (unsigned long long)t[i].shape[0]);
        for (int d = 1; d < t[i].ndim; d++)
            sb_printf(&h, ",%llu", (unsigned long long)t[i].shape[d]);
        sb_printf(&h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off, (unsigned long long)(off + bytes));
        off += bytes;
    }
    sb_printf(&h, "}");
    while (!h.oom && (8 + h.len) % 8 != 0) /* data starts 8-byte aligned */
        sb_printf(&h, " ");
    if (h.oom) {
        free(h.p);
        snprintf(err, errcap, "out of memory building the safetensors header");
        return -1;
    }
    FILE *f = fopen(path, "wb");
    if (!f) {
        snprintf(err, errcap, "%s: cannot create: %s", path, strerror(errno));
        free(h.p);
        return -1;
    }
    setvbuf(f, NULL, _IOFBF, (size_t)1 << 22);
    unsigned char len8[8];
    for (int k = 0; k < 8; k++)
        len8[k] = (unsigned char)((uint64_t)h.len >> (8 * k));
    int rc = 0;
    if (fwrite(len8, 1, 8, f) != 8 || fwrite(h.p, 1, h.len, f) != h.len) {
        snprintf(err, errcap, "%s: write failed: %s", path, strerror(errno));
        rc = -1;
    }
    free(h.p);
    for (size_t i = first; i < last && rc == 0; i++)
        rc = write_tensor_data(f, path, s, &t[i], buf, err, errcap);
    if (fclose(f) != 0 && rc == 0) {
        snprintf(err, errcap, "%s: write failed: %s", path, strerror(errno));
        rc = -1;
    }
    return rc;
}

/* Removes what an earlier run may have left that would contradict this one
 * (a single file next to shards, or shards of another count). */
static void remove_stale(const char *dir)
{
    char path[4096];
    if (mk_path(path, sizeof(path), dir, "model.safetensors") == 0)
        unlink(path);
    if (mk_path(path, sizeof(path), dir, "model.safetensors.index.json") == 0)
        unlink(path);
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        unsigned a, b;
        char tail[32];
        if (sscanf(e->d_name, "model-%5u-of-%5u.%31s", &a, &b, tail) == 3 && strcmp(tail, "safetensors") == 0 &&
            mk_path(path, sizeof(path), dir, e->d_name) == 0)
            unlink(path);
    }
    closedir(d);
}

/* The shards of one run, handed out to writer threads by index. */
typedef struct {
    const mk_spec *s;
    const char *dir;
    const mk_tensor *t;
    size_t n;
    const int *shard_of;
    int N;
    atomic_int next;
    pthread_mutex_t lock; /* guards failed and err */
    int failed;
    char err[512];
} shard_job;

static void *shard_worker(void *arg)
{
    shard_job *j = arg;
    unsigned char *buf = malloc((size_t)MK_CHUNK * 4);
    char err[512] = "out of memory for a shard buffer";
    for (;;) {
        int k = atomic_fetch_add(&j->next, 1);
        if (k >= j->N)
            break;
        pthread_mutex_lock(&j->lock);
        int stop = j->failed;
        pthread_mutex_unlock(&j->lock);
        if (stop)
            break;
        size_t first = 0;
        while (first < j->n && j->shard_of[first] != k)
            first++;
        size_t last = first;
        while (last < j->n && j->shard_of[last] == k)
            last++;
        char fname[64], path[4096];
        snprintf(fname, sizeof(fname), "model-%05d-of-%05d.safetensors", k + 1, j->N);
        int rc = -1;
        if (!buf)
            ;
        else if (mk_path(path, sizeof(path), j->dir, fname) != 0)
            snprintf(err, sizeof err, "--out: path too long");
        else
            rc = write_file(j->s, path, j->t, first, last, buf, err, sizeof err);
        if (rc != 0) {
            pthread_mutex_lock(&j->lock);
            if (!j->failed)
                snprintf(j->err, sizeof j->err, "%s", err);
            j->failed = 1;
            pthread_mutex_unlock(&j->lock);
            break;
        }
    }
    free(buf);
    return NULL;
}

int mk_write_weights(const mk_spec *s, const char *dir, char *err, size_t errcap)
{
    size_t n = 0;
    mk_tensor *t = mk_plan_tensors(s, &n);
    unsigned char *buf = malloc((size_t)MK_CHUNK * 4);
    if (!t || !buf) {
        free(t);
        free(buf);
        snprintf(err, errcap, "out of memory planning the tensors");
        return -1;
    }
    const size_t es = mk_dtype_size(s->dtype);
    int rc = 0;
    remove_stale(dir);
    char path[4096];
    if (s->shards <= 1) {
        if (mk_path(path, sizeof(path), dir, "model.safetensors") != 0) {
            snprintf(err, errcap, "--out: path too long");
            rc = -1;
        } else {
            rc = write_file(s, path, t, 0, n, buf, err, errcap);
        }
        free(t);
        free(buf);
        return rc;
    }
    /* Shards split the tensors in order, each about total/N bytes, none
     * empty (the caller checked N <= number of tensors). */
    const int N = s->shards;
    uint64_t total = mk_count_params(t, n) * es;
    int *shard_of = malloc(n * sizeof(int));
    json_t *map = json_object();
    if (!shard_of || !map) {
        snprintf(err, errcap, "out of memory planning the shards");
        rc = -1;
    }
    uint64_t before = 0;
    int cur = 0;
    size_t in_cur = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (in_cur > 0 && cur < N - 1 &&
            (before * (uint64_t)N >= total * (uint64_t)(cur + 1) || n - i == (size_t)(N - 1 - cur))) {
            cur++;
            in_cur = 0;
        }
        shard_of[i] = cur;
        in_cur++;
        before += tensor_elems(&t[i]) * es;
    }
    /* Shards are written by up to one thread per CPU: each tensor's values
     * come from its own name-seeded stream, so the files are identical to a
     * serial run, and an 8B-class checkpoint takes seconds, not minutes. */
    shard_job job = {.s = s, .dir = dir, .t = t, .n = n, .shard_of = shard_of, .N = N,
                   .lock = PTHREAD_MUTEX_INITIALIZER};
    if (rc == 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        int nt = cpus < 1 ? 1 : cpus > N ? N : (int)cpus;
        pthread_t th[64];
        if (nt > 64)
            nt = 64;
        int started = 0;
        for (int i = 1; i < nt; i++, started++)
            if (pthread_create(&th[i - 1], NULL, shard_worker, &job) != 0)
                break;
        shard_worker(&job);
        for (int i = 0; i < started; i++)
            pthread_join(th[i], NULL);
        if (job.failed) {
            snprintf(err, errcap, "%s", job.err);
            rc = -1;
        }
    }
    for (size_t i = 0; i < n && rc == 0; i++) {
        char fname[64];
        snprintf(fname, sizeof(fname), "model-%05d-of-%05d.safetensors", shard_of[i] + 1, N);
        if (json_object_set_new(map, t[i].name, json_string(fname)) != 0) {
            snprintf(err, errcap, "out of memory building the shard index");
            rc = -1;
        }
    }
    if (rc == 0) {
        json_t *idx = json_pack("{s:{s:I},s:O}", "metadata", "total_size", (json_int_t)total, "weight_map", map);
        if (!idx) {
            snprintf(err, errcap, "out of memory building the shard index");
            rc = -1;
        } else {
            rc = mk_write_json(idx, dir, "model.safetensors.index.json", err, errcap);
        }
    }
    json_decref(map);
    free(shard_of);
    free(t);
    free(buf);
    return rc;
}
