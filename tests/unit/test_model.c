/*
 * Loads the five real checkpoints in $SY_SHARED_DIR/models and checks their
 * config, a few tensor shapes and dtypes, the parameter counts the README
 * states, and the progress callback. Fails (never skips) without the data.
 */
#include "config.h"

#include "model/load_progress.h"
#include "model/model.h"
#include "test_model_util.h"

#include "util/log.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct progress_log {
    int calls;
    bool monotonic;
    size_t last_t, total_t;
    uint64_t last_b, total_b;
} progress_log;

static void record(void *arg, size_t td, size_t tt, uint64_t bd, uint64_t bt)
{
    progress_log *p = arg;
    if (p->calls && (td < p->last_t || bd < p->last_b || tt != p->total_t || bt != p->total_b))
        p->monotonic = false;
    if (td > tt || bd > bt)
        p->monotonic = false;
    p->calls++;
    p->last_t = td;
    p->last_b = bd;
    p->total_t = tt;
    p->total_b = bt;
}

static bool shape_is(const sy_tensor *t, int ndim, int64_t d0, int64_t d1)
{
    if (!t->data || t->ndim != ndim || t->shape[0] != d0)
        return false;
    return ndim < 2 || t->shape[1] == d1;
}

#define CHECK_SHAPE(t, nd, a, b, dt)                                                                                  \
    CHECK(shape_is(&(t), nd, a, b) && (t).dtype == (dt), "%s: %s is %dd [%lld, %lld] %s", name, #t, (t).ndim,         \
          (long long)(t).shape[0], (long long)((t).ndim > 1 ? (t).shape[1] : 0), sy_dtype_name((t).dtype))

static sy_model *load(const char *models, const char *name, progress_log *pl)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/%s", models, name);
    sy_model *m = NULL;
    sy_err err = {{0}};
    memset(pl, 0, sizeof *pl);
    pl->monotonic = true;
    int rc = sy_model_load(dir, record, pl, &m, &err);
    CHECK(rc == SY_OK && m, "%s: %s", name, err.msg);
    if (!m)
        return NULL;
    CHECK(pl->monotonic, "%s: progress not monotonic", name);
    CHECK(pl->last_t == pl->total_t && pl->last_b == pl->total_b && pl->total_b == m->weight_bytes,
          "%s: progress ended at %zu/%zu tensors, %llu/%llu bytes (weights %llu)", name, pl->last_t, pl->total_t,
          (unsigned long long)pl->last_b, (unsigned long long)pl->total_b, (unsigned long long)m->weight_bytes);
    CHECK(pl->calls == (int)pl->total_t + 1, "%s: %d progress calls for %zu tensors", name, pl->calls, pl->total_t);
    return m;
}

static void check_common_llama(const char *name, const sy_model *m, sy_dtype dt)
{
    const sy_model_config *c = &m->cfg;
    int64_t q = (int64_t)c->n_heads * c->head_dim, kv = (int64_t)c->n_kv_heads * c->head_dim;
    CHECK_SHAPE(m->embed, 2, c->vocab, c->hidden, dt);
    CHECK_SHAPE(m->final_norm, 1, c->hidden, 0, dt);
    CHECK_SHAPE(m->lm_head, 2, c->vocab, c->hidden, dt);
    for (int l = 0; l < c->n_layers; l++) {
        const sy_layer_weights *w = &m->layers[l];
        CHECK_SHAPE(w->attn_norm, 1, c->hidden, 0, dt);
        CHECK_SHAPE(w->ffn_norm, 1, c->hidden, 0, dt);
        CHECK_SHAPE(w->wq, 2, q, c->hidden, dt);
        CHECK_SHAPE(w->wk, 2, kv, c->hidden, dt);
        CHECK_SHAPE(w->wv, 2, kv, c->hidden, dt);
        CHECK_SHAPE(w->wo, 2, c->hidden, q, dt);
        CHECK(!w->bq.data && !w->bk.data && !w->bv.data, "%s: no biases", name);
    }
    CHECK(c->bos_id == 1 && c->n_eos == 1 && c->eos_ids[0] == 2, "%s: bos %d eos %d", name, c->bos_id, c->eos_ids[0]);
    CHECK(c->rope_scaling == SY_ROPE_SCALING_NONE && c->rotary_dim == c->head_dim, "%s: rope", name);
}

static void check_dense(const char *name, const sy_model *m)
{
    const sy_model_config *c = &m->cfg;
    CHECK(c->n_experts == 0, "%s: dense", name);
    for (int l = 0; l < c->n_layers; l++) {
        const sy_layer_weights *w = &m->layers[l];
        CHECK(!w->is_moe && !w->exp_gate && !w->router.data && !c->layer_is_moe[l], "%s: layer %d dense", name, l);
        CHECK_SHAPE(w->w_gate, 2, c->intermediate, c->hidden, SY_DTYPE_F32);
        CHECK_SHAPE(w->w_up, 2, c->intermediate, c->hidden, SY_DTYPE_F32);
        CHECK_SHAPE(w->w_down, 2, c->hidden, c->intermediate, SY_DTYPE_F32);
        CHECK(!w->q_norm.data && !w->k_norm.data, "%s: no qk norm", name);
    }
}

static void test_stories(const char *models)
{
    const char *name = "stories260k";
    progress_log pl;
    sy_model *m = load(models, name, &pl);
    if (!m)
        return;
    const sy_model_config *c = &m->cfg;
    CHECK(c->arch == SY_ARCH_LLAMA && strcmp(c->arch_name, "LlamaForCausalLM") == 0 &&
              strcmp(c->model_type, "llama") == 0,
          "arch");
    CHECK(c->hidden == 64 && c->n_layers == 5 && c->n_heads == 8 && c->n_kv_heads == 4 && c->head_dim == 8 &&
              c->intermediate == 172 && c->vocab == 512 && c->max_pos == 512,
          "stories dims");
    CHECK(c->rms_eps == 1e-5f && c->rope_theta == 10000.0f && c->tie_embeddings && !c->attention_bias &&
              !c->qk_norm && c->dtype == SY_DTYPE_F32 && c->sliding_window == 0,
          "stories scalars");
    check_common_llama(name, m, SY_DTYPE_F32);
    check_dense(name, m);
    CHECK(m->lm_head.data == m->embed.data, "tied: lm_head is the embedding");
    CHECK_EQ_INT(m->n_params, 260032); /* README */
    CHECK_EQ_INT(m->weight_bytes, 260032 * 4);
    CHECK_EQ_INT(pl.total_t, 47);
    const char *tn = sy_model_tensor_name(m, &m->layers[4].wk);
    CHECK(tn && strcmp(tn, "model.layers.4.self_attn.k_proj.weight") == 0, "tensor name %s", tn ? tn : "(null)");
    tn = sy_model_tensor_name(m, &m->lm_head);
    CHECK(tn && strcmp(tn, "model.embed_tokens.weight") == 0, "tied lm_head name %s", tn ? tn : "(null)");
    sy_tensor other = m->embed;
    other.data = &other;
    CHECK(sy_model_tensor_name(m, &other) == NULL, "foreign view has no name");
    sy_model_free(m);
}

static void test_aidreams(const char *models)
{
    const char *name = "aidreams260k";
    progress_log pl;
    sy_model *m = load(models, name, &pl);
    if (!m)
        return;
    const sy_model_config *c = &m->cfg;
    CHECK(c->hidden == 64 && c->n_layers == 4 && c->n_heads == 4 && c->n_kv_heads == 4 && c->head_dim == 16 &&
              c->max_pos == 128 && c->tie_embeddings,
          "aidreams dims");
    check_common_llama(name, m, SY_DTYPE_F32);
    check_dense(name, m);
    CHECK_EQ_INT(m->n_params, 230976); /* README */
    sy_model_free(m);
}

static void test_tiny_llama(const char *models)
{
    const char *name = "tiny-llama";
    progress_log pl;
    sy_model *m = load(models, name, &pl);
    if (!m)
        return;
    const sy_model_config *c = &m->cfg;
    CHECK(c->hidden == 64 && c->n_layers == 2 && c->n_heads == 4 && c->n_kv_heads == 2 && c->head_dim == 16 &&
              c->intermediate == 192 && !c->tie_embeddings,
          "tiny-llama dims");
    check_common_llama(name, m, SY_DTYPE_F32);
    check_dense(name, m);
    CHECK(m->lm_head.data && m->lm_head.data != m->embed.data, "untied lm_head");
    CHECK_SHAPE(m->layers[1].wk, 2, 32, 64, SY_DTYPE_F32); /* GQA: 2 kv heads x 16 */
    CHECK_EQ_INT(m->n_params, 164160);
    CHECK_EQ_INT(pl.total_t, 21);
    sy_model_free(m);
}

static void check_moe_layers(const char *name, const sy_model *m, int64_t mi)
{
    const sy_model_config *c = &m->cfg;
    for (int l = 0; l < c->n_layers; l++) {
        const sy_layer_weights *w = &m->layers[l];
        CHECK(w->is_moe && c->layer_is_moe[l], "%s: layer %d is MoE", name, l);
        CHECK(!w->w_gate.data && !w->w_up.data && !w->w_down.data, "%s: no dense MLP", name);
        CHECK_SHAPE(w->router, 2, c->n_experts, c->hidden, SY_DTYPE_BF16);
        for (int e = 0; w->exp_gate && e < c->n_experts; e++) {
            CHECK_SHAPE(w->exp_gate[e], 2, mi, c->hidden, SY_DTYPE_BF16);
            CHECK_SHAPE(w->exp_up[e], 2, mi, c->hidden, SY_DTYPE_BF16);
            CHECK_SHAPE(w->exp_down[e], 2, c->hidden, mi, SY_DTYPE_BF16);
        }
    }
}

static void test_tiny_mixtral(const char *models)
{
    const char *name = "tiny-mixtral";
    progress_log pl;
    sy_model *m = load(models, name, &pl);
    if (!m)
        return;
    const sy_model_config *c = &m->cfg;
    CHECK(c->arch == SY_ARCH_MIXTRAL && c->n_experts == 4 && c->top_k == 2 && c->moe_inter == 96 &&
              c->norm_topk_prob && c->decoder_sparse_step == 1 && c->rope_theta == 1e6f && c->rms_eps == 1e-5f &&
              c->dtype == SY_DTYPE_BF16 && !c->tie_embeddings && c->sliding_window == 0,
          "mixtral config");
    check_common_llama(name, m, SY_DTYPE_BF16);
    check_moe_layers(name, m, 96);
    const char *tn = sy_model_tensor_name(m, &m->layers[1].exp_down[3]);
    CHECK(tn && strcmp(tn, "model.layers.1.block_sparse_moe.experts.3.w2.weight") == 0, "w2 name %s",
          tn ? tn : "(null)");
    tn = sy_model_tensor_name(m, &m->layers[0].exp_up[2]);
    CHECK(tn && strcmp(tn, "model.layers.0.block_sparse_moe.experts.2.w3.weight") == 0, "w3 name %s",
          tn ? tn : "(null)");
    CHECK_EQ_INT(m->n_params, 238400);
    CHECK_EQ_INT(m->weight_bytes, 238400 * 2); /* bf16 stays bf16 */
    CHECK_EQ_INT(pl.total_t, 41);
    sy_model_free(m);
}

static void test_tiny_qwen3moe(const char *models)
{
    const char *name = "tiny-qwen3moe";
    progress_log pl;
    sy_model *m = load(models, name, &pl);
    if (!m)
        return;
    const sy_model_config *c = &m->cfg;
    CHECK(c->arch == SY_ARCH_QWEN3_MOE && c->hidden == 64 && c->n_heads == 4 && c->n_kv_heads == 2 &&
              c->head_dim == 32 && c->rotary_dim == 32 && c->qk_norm && c->n_experts == 4 && c->top_k == 2 &&
              c->moe_inter == 64 && c->intermediate == 128 && c->norm_topk_prob && c->decoder_sparse_step == 1 &&
              c->rms_eps == 1e-6f && c->rope_theta == 1e6f && c->dtype == SY_DTYPE_BF16,
          "qwen3moe config");
    CHECK(c->bos_id == -1 && c->n_eos == 1 && c->eos_ids[0] == 509, "qwen3 bos %d eos %d", c->bos_id,
          c->n_eos ? c->eos_ids[0] : -1);
    CHECK_SHAPE(m->layers[0].wq, 2, 128, 64, SY_DTYPE_BF16); /* head_dim 32 != hidden / heads */
    CHECK_SHAPE(m->layers[0].wk, 2, 64, 64, SY_DTYPE_BF16);
    CHECK_SHAPE(m->layers[0].wo, 2, 64, 128, SY_DTYPE_BF16);
    CHECK_SHAPE(m->layers[1].q_norm, 1, 32, 0, SY_DTYPE_BF16);
    CHECK_SHAPE(m->layers[1].k_norm, 1, 32, 0, SY_DTYPE_BF16);
    CHECK_SHAPE(m->lm_head, 2, 512, 64, SY_DTYPE_BF16);
    CHECK(m->lm_head.data != m->embed.data, "untied");
    check_moe_layers(name, m, 64);
    CHECK_EQ_INT(m->n_params, 213952);
    CHECK_EQ_INT(pl.total_t, 45);
    sy_model_free(m);
}

/* The ready-made reporter: its line, and both modes driven through a load. */
static void test_progress_reporter(const char *models)
{
    char buf[160];
    sy_load_progress_format(buf, sizeof buf, 123, 456, (uint64_t)(1.2 * 1073741824.0), (uint64_t)(3.4 * 1073741824.0),
                            1.5);
    CHECK(strstr(buf, "123/456 tensors, 1.2/3.4 GiB, ") && strstr(buf, " MiB/s, ") && strstr(buf, "s left"), "%s",
          buf);
    sy_load_progress_format(buf, sizeof buf, 10, 10, 2u << 20, 2u << 20, 0.5);
    CHECK(strcmp(buf, "10/10 tensors, 2.0/2.0 MiB, 4 MiB/s, done in 1s") == 0, "%s", buf);
    sy_load_progress_format(buf, sizeof buf, 0, 10, 0, 1u << 20, 0.0);
    CHECK(strcmp(buf, "0/10 tensors, 0.0/1.0 MiB") == 0, "%s", buf);
    sy_load_progress_format(buf, sizeof buf, 1, 10, 1u << 20, 100u << 20, 1.0);
    CHECK(strstr(buf, "1 MiB/s, 1m39s left"), "%s", buf);

    char dir[4200];
    snprintf(dir, sizeof dir, "%s/tiny-llama", models);
    FILE *f = tmpfile();
    sy_load_progress lp;
    sy_load_progress_init(&lp, true);
    lp.tty = true;
    lp.interval = 0;
    lp.out = f;
    sy_model *m = NULL;
    sy_err err = {{0}};
    int rc = sy_model_load(dir, sy_load_progress_report, &lp, &m, &err);
    sy_load_progress_done(&lp);
    CHECK(rc == SY_OK, "%s", err.msg);
    sy_model_free(m);
    if (f) {
        char out[8192] = {0};
        rewind(f);
        size_t n = fread(out, 1, sizeof out - 1, f);
        fclose(f);
        CHECK(n > 0 && strstr(out, "\rloading: 0/21 tensors") && strstr(out, "\rloading: 21/21 tensors, 0.6/0.6 MiB"),
              "tty output: %s", out);
        CHECK(n > 0 && out[n - 1] == '\n' && strstr(out, "done in"), "tty line ends with a newline");
        CHECK(strchr(out, '\n') == out + n - 1, "a single line");
    }
    /* Disabled: nothing at all. */
    f = tmpfile();
    sy_load_progress_init(&lp, false);
    lp.out = f;
    lp.tty = true;
    rc = sy_model_load(dir, sy_load_progress_report, &lp, &m, &err);
    sy_load_progress_done(&lp);
    CHECK(rc == SY_OK, "%s", err.msg);
    sy_model_free(m);
    if (f) {
        CHECK(ftell(f) == 0, "disabled reporter wrote %ld bytes", ftell(f));
        fclose(f);
    }
}

int main(void)
{
    sy_log_set_level(SY_LOG_WARN);
    const char *shared = getenv("SY_SHARED_DIR");
    if (!shared || !*shared) {
        fprintf(stderr, "FAIL test_model: SY_SHARED_DIR is not set; it must point at the directory holding models/ "
                        "(configure --with-shared-dir, or export SY_SHARED_DIR)\n");
        return 1;
    }
    char models[4000];
    snprintf(models, sizeof models, "%s/models", shared);
    struct stat sb;
    if (stat(models, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "FAIL test_model: %s is not a directory (SY_SHARED_DIR=%s)\n", models, shared);
        return 1;
    }
    test_stories(models);
    test_aidreams(models);
    test_tiny_llama(models);
    test_tiny_mixtral(models);
    test_tiny_qwen3moe(models);
    test_progress_reporter(models);
    if (tm_failures) {
        fprintf(stderr, "test_model: %d failures\n", tm_failures);
        return 1;
    }
    printf("test_model: all passed\n");
    return 0;
}
