/*
 * Loads a checkpoint with or without its multi-token-prediction layers and
 * checks what sy_model_load_with bound.
 *
 *     test_mtp_load MODEL_DIR [--mtp]
 *
 * Without --mtp: the load succeeds, cfg.n_mtp_layers is what config.json
 * says and no MTP layer is bound. With --mtp: every MTP layer is bound
 * under its checkpoint name (model.layers.{n_layers + i}.*) with the shape
 * its role has (eh_proj [hidden, 2*hidden], the decoder block's attention,
 * MoE experts and indexer as a decoder layer's), views distinct from the
 * decoder layers', its own head and embedding when the checkpoint has them
 * and the model's otherwise. A failed load prints the loader's message on
 * stdout and exits 1 (the caller greps it); a wrong binding exits 2.
 */
#include "config.h"

#include "model/model.h"
#include "util/log.h"

#include <stdio.h>
#include <string.h>

static int failures;

#define EXPECT(cond, ...)                                                                                             \
    do {                                                                                                              \
        if (!(cond)) {                                                                                                \
            failures++;                                                                                               \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                                               \
            printf(__VA_ARGS__);                                                                                      \
            putchar('\n');                                                                                            \
        }                                                                                                             \
    } while (0)

/* t is bound, [d0] or [d0, d1] (d1 < 0: one dimension), and named name. */
static void expect_tensor(const sy_model *m, const sy_tensor *t, const char *name, int64_t d0, int64_t d1)
{
    const int nd = d1 < 0 ? 1 : 2;
    if (!t->data) {
        EXPECT(0, "%s is not bound", name);
        return;
    }
    EXPECT(t->ndim == nd && t->shape[0] == d0 && (nd == 1 || t->shape[1] == d1),
           "%s has shape [%lld%s%lld] (%d dims), expected [%lld, %lld]", name, (long long)t->shape[0],
           t->ndim > 1 ? ", " : "", t->ndim > 1 ? (long long)t->shape[1] : 0LL, t->ndim, (long long)d0,
           (long long)d1);
    const char *got = sy_model_tensor_name(m, t);
    EXPECT(got && strcmp(got, name) == 0, "the view bound for %s is the checkpoint's '%s'", name,
           got ? got : "(none)");
}

static void expect_layer_tensor(const sy_model *m, const sy_tensor *t, int layer, const char *suffix, int64_t d0,
                                int64_t d1)
{
    char name[256];
    snprintf(name, sizeof name, "model.layers.%d.%s", layer, suffix);
    expect_tensor(m, t, name, d0, d1);
}

static void check_block(const sy_model *m, const sy_layer_weights *w, int l)
{
    const sy_model_config *c = &m->cfg;
    const int64_t H = c->hidden;
    expect_layer_tensor(m, &w->attn_norm, l, "input_layernorm.weight", H, -1);
    expect_layer_tensor(m, &w->ffn_norm, l, "post_attention_layernorm.weight", H, -1);
    if (c->mla) {
        const int64_t qk = (int64_t)c->n_heads * (c->qk_nope_dim + c->qk_rope_dim);
        if (c->q_lora_rank > 0) {
            expect_layer_tensor(m, &w->q_a, l, "self_attn.q_a_proj.weight", c->q_lora_rank, H);
            expect_layer_tensor(m, &w->q_b, l, "self_attn.q_b_proj.weight", qk, c->q_lora_rank);
        } else {
            expect_layer_tensor(m, &w->wq, l, "self_attn.q_proj.weight", qk, H);
        }
        expect_layer_tensor(m, &w->kv_a, l, "self_attn.kv_a_proj_with_mqa.weight", c->kv_lora_rank + c->qk_rope_dim,
                            H);
        expect_layer_tensor(m, &w->kv_b, l, "self_attn.kv_b_proj.weight",
                            (int64_t)c->n_heads * (c->qk_nope_dim + c->v_head_dim), c->kv_lora_rank);
        expect_layer_tensor(m, &w->wo, l, "self_attn.o_proj.weight", H, (int64_t)c->n_heads * c->v_head_dim);
    } else {
        expect_layer_tensor(m, &w->wq, l, "self_attn.q_proj.weight", (int64_t)c->n_heads * c->head_dim, H);
        expect_layer_tensor(m, &w->wk, l, "self_attn.k_proj.weight", (int64_t)c->n_kv_heads * c->head_dim, H);
        expect_layer_tensor(m, &w->wo, l, "self_attn.o_proj.weight", H, (int64_t)c->n_heads * c->head_dim);
    }
    if (c->index_topk > 0) {
        expect_layer_tensor(m, &w->idx_wq_b, l, "self_attn.indexer.wq_b.weight",
                            (int64_t)c->index_n_heads * c->index_head_dim, c->q_lora_rank);
        expect_layer_tensor(m, &w->idx_wk, l, "self_attn.indexer.wk.weight", c->index_head_dim, H);
        expect_layer_tensor(m, &w->idx_wproj, l, "self_attn.indexer.weights_proj.weight", c->index_n_heads, H);
    }
    EXPECT(w->is_moe == (c->n_experts > 0), "MTP layer %d: is_moe %d with %d experts", l, w->is_moe, c->n_experts);
    if (c->n_experts > 0) {
        expect_layer_tensor(m, &w->router, l, "mlp.gate.weight", c->n_experts, H);
        for (int e = 0; e < c->n_experts; e++) {
            char sfx[96];
            snprintf(sfx, sizeof sfx, "mlp.experts.%d.down_proj.weight", e);
            expect_layer_tensor(m, &w->exp_down[e], l, sfx, H, c->moe_inter);
        }
        if (c->n_shared_experts > 0)
            expect_layer_tensor(m, &w->sh_up, l, "mlp.shared_experts.up_proj.weight",
                                (int64_t)c->n_shared_experts * c->moe_inter, H);
    }
}

int main(int argc, char **argv)
{
    if (argc < 2 || (argc == 3 && strcmp(argv[2], "--mtp") != 0) || argc > 3) {
        fprintf(stderr, "usage: test_mtp_load MODEL_DIR [--mtp]\n");
        return 2;
    }
    const bool want = argc == 3;
    sy_log_set_level(SY_LOG_WARN); /* the caller greps what is printed */
    sy_model_load_opts o = {.load_mtp = want};
    sy_model *m = NULL;
    sy_err err = {0};
    if (sy_model_load_with(argv[1], &o, &m, &err) != SY_OK) {
        printf("load failed: %s\n", err.msg);
        return 1;
    }
    const sy_model_config *c = &m->cfg;
    const int64_t H = c->hidden, V = c->vocab;
    if (!want) {
        EXPECT(m->n_mtp == 0 && m->mtp == NULL, "%d MTP layers bound, none asked for", m->n_mtp);
    } else {
        EXPECT(m->n_mtp == c->n_mtp_layers && m->mtp, "%d MTP layers bound, config.json has %d", m->n_mtp,
               c->n_mtp_layers);
        for (int i = 0; m->mtp && i < m->n_mtp; i++) {
            const sy_mtp_layer *t = &m->mtp[i];
            const int l = c->n_layers + i;
            expect_layer_tensor(m, &t->enorm, l, "enorm.weight", H, -1);
            expect_layer_tensor(m, &t->hnorm, l, "hnorm.weight", H, -1);
            expect_layer_tensor(m, &t->eh_proj, l, "eh_proj.weight", H, 2 * H);
            expect_layer_tensor(m, &t->head_norm, l, "shared_head.norm.weight", H, -1);
            /* sy-mkmodel writes shared_head.head for every family, embed_tokens for DeepSeek's only */
            expect_layer_tensor(m, &t->head, l, "shared_head.head.weight", V, H);
            if (c->arch == SY_ARCH_DEEPSEEK_V3 || c->arch == SY_ARCH_DEEPSEEK_V32)
                expect_layer_tensor(m, &t->embed, l, "embed_tokens.weight", V, H);
            else
                EXPECT(t->embed.data == m->embed.data, "MTP layer %d has no embed_tokens but does not use the "
                                                       "model's embedding", l);
            check_block(m, &t->block, l);
            EXPECT(t->block.attn_norm.data != m->layers[c->n_layers - 1].attn_norm.data,
                   "MTP layer %d shares a view with the last decoder layer", l);
        }
    }
    printf("%s: %d MTP layers in config.json, %d bound (%s), %llu parameters\n", c->arch_name, c->n_mtp_layers,
           m->n_mtp, want ? "asked" : "not asked", (unsigned long long)m->n_params);
    sy_model_free(m);
    return failures ? 2 : 0;
}
