/* The architecture table: roles, dimensions and one row per family. */
#include "config.h"

#include "model/model_arch.h"

#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------ roles */

static const sy_role_desc role_descs[SY_ROLE_COUNT] = {
    [SY_ROLE_EMBED] = {"token embedding", SY_SCOPE_MODEL, SY_WHEN_ALWAYS, {SY_DIM_VOCAB, SY_DIM_HIDDEN}},
    [SY_ROLE_FINAL_NORM] = {"final norm", SY_SCOPE_MODEL, SY_WHEN_ALWAYS, {SY_DIM_HIDDEN}},
    [SY_ROLE_LM_HEAD] = {"untied output projection", SY_SCOPE_MODEL, SY_WHEN_UNTIED, {SY_DIM_VOCAB, SY_DIM_HIDDEN}},
    [SY_ROLE_ATTN_NORM] = {"attention norm", SY_SCOPE_LAYER, SY_WHEN_ALWAYS, {SY_DIM_HIDDEN}},
    [SY_ROLE_WQ] = {"query projection", SY_SCOPE_LAYER, SY_WHEN_Q_PROJ, {SY_DIM_Q, SY_DIM_HIDDEN}},
    [SY_ROLE_WK] = {"key projection", SY_SCOPE_LAYER, SY_WHEN_GQA, {SY_DIM_KV, SY_DIM_HIDDEN}},
    [SY_ROLE_WV] = {"value projection", SY_SCOPE_LAYER, SY_WHEN_GQA, {SY_DIM_KV, SY_DIM_HIDDEN}},
    [SY_ROLE_WO] = {"attention output projection", SY_SCOPE_LAYER, SY_WHEN_ALWAYS, {SY_DIM_HIDDEN, SY_DIM_O}},
    [SY_ROLE_BQ] = {"query bias", SY_SCOPE_LAYER, SY_WHEN_ATTN_BIAS, {SY_DIM_Q}},
    [SY_ROLE_BK] = {"key bias", SY_SCOPE_LAYER, SY_WHEN_ATTN_BIAS, {SY_DIM_KV}},
    [SY_ROLE_BV] = {"value bias", SY_SCOPE_LAYER, SY_WHEN_ATTN_BIAS, {SY_DIM_KV}},
    [SY_ROLE_Q_NORM] = {"per-head query norm", SY_SCOPE_LAYER, SY_WHEN_QK_NORM, {SY_DIM_HEAD}},
    [SY_ROLE_K_NORM] = {"per-head key norm", SY_SCOPE_LAYER, SY_WHEN_QK_NORM, {SY_DIM_HEAD}},
    [SY_ROLE_FFN_NORM] = {"MLP norm", SY_SCOPE_LAYER, SY_WHEN_ALWAYS, {SY_DIM_HIDDEN}},
    [SY_ROLE_GATE] = {"MLP gate projection", SY_SCOPE_LAYER, SY_WHEN_DENSE, {SY_DIM_INTER, SY_DIM_HIDDEN}},
    [SY_ROLE_UP] = {"MLP up projection", SY_SCOPE_LAYER, SY_WHEN_DENSE, {SY_DIM_INTER, SY_DIM_HIDDEN}},
    [SY_ROLE_DOWN] = {"MLP down projection", SY_SCOPE_LAYER, SY_WHEN_DENSE, {SY_DIM_HIDDEN, SY_DIM_INTER}},
    [SY_ROLE_ROUTER] = {"MoE router", SY_SCOPE_LAYER, SY_WHEN_MOE, {SY_DIM_EXPERTS, SY_DIM_HIDDEN}},
    [SY_ROLE_SCORE_BIAS] = {"router score correction bias", SY_SCOPE_LAYER, SY_WHEN_SCORE_BIAS, {SY_DIM_EXPERTS}},
    [SY_ROLE_SH_GATE] = {"shared expert gate projection", SY_SCOPE_LAYER, SY_WHEN_SHARED,
                         {SY_DIM_SHARED_INTER, SY_DIM_HIDDEN}},
    [SY_ROLE_SH_UP] = {"shared expert up projection", SY_SCOPE_LAYER, SY_WHEN_SHARED,
                       {SY_DIM_SHARED_INTER, SY_DIM_HIDDEN}},
    [SY_ROLE_SH_DOWN] = {"shared expert down projection", SY_SCOPE_LAYER, SY_WHEN_SHARED,
                         {SY_DIM_HIDDEN, SY_DIM_SHARED_INTER}},
    [SY_ROLE_Q_A] = {"MLA query down projection", SY_SCOPE_LAYER, SY_WHEN_MLA_QLORA, {SY_DIM_Q_LORA, SY_DIM_HIDDEN}},
    [SY_ROLE_Q_A_NORM] = {"MLA query latent norm", SY_SCOPE_LAYER, SY_WHEN_MLA_QLORA, {SY_DIM_Q_LORA}},
    [SY_ROLE_Q_B] = {"MLA query up projection", SY_SCOPE_LAYER, SY_WHEN_MLA_QLORA, {SY_DIM_Q, SY_DIM_Q_LORA}},
    [SY_ROLE_KV_A] = {"MLA key/value down projection", SY_SCOPE_LAYER, SY_WHEN_MLA, {SY_DIM_KV_A, SY_DIM_HIDDEN}},
    [SY_ROLE_KV_A_NORM] = {"MLA key/value latent norm", SY_SCOPE_LAYER, SY_WHEN_MLA, {SY_DIM_KV_LORA}},
    [SY_ROLE_KV_B] = {"MLA key/value up projection", SY_SCOPE_LAYER, SY_WHEN_MLA, {SY_DIM_KV_B, SY_DIM_KV_LORA}},
    [SY_ROLE_IDX_WQ_B] = {"DSA indexer query projection", SY_SCOPE_LAYER, SY_WHEN_INDEXER,
                          {SY_DIM_IDX_Q, SY_DIM_Q_LORA}},
    [SY_ROLE_IDX_WK] = {"DSA indexer key projection", SY_SCOPE_LAYER, SY_WHEN_INDEXER,
                        {SY_DIM_IDX_HEAD, SY_DIM_HIDDEN}},
    [SY_ROLE_IDX_K_NORM] = {"DSA indexer key norm weight", SY_SCOPE_LAYER, SY_WHEN_INDEXER, {SY_DIM_IDX_HEAD}},
    [SY_ROLE_IDX_K_NORM_B] = {"DSA indexer key norm bias", SY_SCOPE_LAYER, SY_WHEN_INDEXER, {SY_DIM_IDX_HEAD}},
    [SY_ROLE_IDX_WPROJ] = {"DSA indexer head weights", SY_SCOPE_LAYER, SY_WHEN_INDEXER,
                           {SY_DIM_IDX_HEADS, SY_DIM_HIDDEN}},
    [SY_ROLE_EXP_GATE] = {"expert gate projection", SY_SCOPE_EXPERT, SY_WHEN_MOE, {SY_DIM_MOE_INTER, SY_DIM_HIDDEN}},
    [SY_ROLE_EXP_UP] = {"expert up projection", SY_SCOPE_EXPERT, SY_WHEN_MOE, {SY_DIM_MOE_INTER, SY_DIM_HIDDEN}},
    [SY_ROLE_EXP_DOWN] = {"expert down projection", SY_SCOPE_EXPERT, SY_WHEN_MOE, {SY_DIM_HIDDEN, SY_DIM_MOE_INTER}},
};

const sy_role_desc *sy__model_role_desc(sy_role r) { return (unsigned)r < SY_ROLE_COUNT ? &role_descs[r] : NULL; }

bool sy__model_role_needed(const sy_model_config *cfg, sy_role r, int layer)
{
    const sy_role_desc *d = sy__model_role_desc(r);
    if (!d)
        return false;
    switch (d->when) {
    case SY_WHEN_ALWAYS: return true;
    case SY_WHEN_UNTIED: return !cfg->tie_embeddings;
    case SY_WHEN_ATTN_BIAS: return cfg->attention_bias;
    case SY_WHEN_QK_NORM: return cfg->qk_norm;
    case SY_WHEN_DENSE: return !(cfg->layer_is_moe && cfg->layer_is_moe[layer]);
    case SY_WHEN_MOE: return cfg->layer_is_moe && cfg->layer_is_moe[layer];
    case SY_WHEN_Q_PROJ: return !(cfg->mla && cfg->q_lora_rank > 0);
    case SY_WHEN_GQA: return !cfg->mla;
    case SY_WHEN_MLA: return cfg->mla;
    case SY_WHEN_MLA_QLORA: return cfg->mla && cfg->q_lora_rank > 0;
    case SY_WHEN_SCORE_BIAS: return cfg->moe_score_bias && cfg->layer_is_moe && cfg->layer_is_moe[layer];
    case SY_WHEN_SHARED: return cfg->n_shared_experts > 0 && cfg->layer_is_moe && cfg->layer_is_moe[layer];
    case SY_WHEN_INDEXER: return cfg->index_topk > 0 && cfg->layer_has_indexer && cfg->layer_has_indexer[layer];
    }
    return false;
}

int64_t sy__model_dim_value(const sy_model_config *cfg, sy_dim d)
{
    switch (d) {
    case SY_DIM_NONE: return 0;
    case SY_DIM_HIDDEN: return cfg->hidden;
    case SY_DIM_VOCAB: return cfg->vocab;
    case SY_DIM_Q: return (int64_t)cfg->n_heads * cfg->head_dim;
    case SY_DIM_O: return (int64_t)cfg->n_heads * (cfg->mla ? cfg->v_head_dim : cfg->head_dim);
    case SY_DIM_KV: return (int64_t)cfg->n_kv_heads * cfg->head_dim;
    case SY_DIM_HEAD: return cfg->head_dim;
    case SY_DIM_INTER: return cfg->intermediate;
    case SY_DIM_MOE_INTER: return cfg->moe_inter;
    case SY_DIM_EXPERTS: return cfg->n_experts;
    case SY_DIM_SHARED_INTER: return (int64_t)cfg->n_shared_experts * cfg->moe_inter;
    case SY_DIM_Q_LORA: return cfg->q_lora_rank;
    case SY_DIM_KV_LORA: return cfg->kv_lora_rank;
    case SY_DIM_KV_A: return (int64_t)cfg->kv_lora_rank + cfg->qk_rope_dim;
    case SY_DIM_KV_B: return (int64_t)cfg->n_heads * (cfg->qk_nope_dim + cfg->v_head_dim);
    case SY_DIM_IDX_Q: return (int64_t)cfg->index_n_heads * cfg->index_head_dim;
    case SY_DIM_IDX_HEAD: return cfg->index_head_dim;
    case SY_DIM_IDX_HEADS: return cfg->index_n_heads;
    case SY_DIM_COUNT: break;
    }
    return 0;
}

const char *sy__model_dim_name(const sy_model_config *cfg, sy_dim d)
{
    switch (d) {
    case SY_DIM_NONE: return "";
    case SY_DIM_HIDDEN: return "hidden_size";
    case SY_DIM_VOCAB: return "vocab_size";
    case SY_DIM_Q: return "num_attention_heads*head_dim";
    case SY_DIM_O: return cfg->mla ? "num_attention_heads*v_head_dim" : "num_attention_heads*head_dim";
    case SY_DIM_KV: return "num_key_value_heads*head_dim";
    case SY_DIM_HEAD: return "head_dim";
    case SY_DIM_INTER: return "intermediate_size";
    case SY_DIM_MOE_INTER: return "expert intermediate size";
    case SY_DIM_EXPERTS: return "number of experts";
    case SY_DIM_SHARED_INTER: return "n_shared_experts*moe_intermediate_size";
    case SY_DIM_Q_LORA: return "q_lora_rank";
    case SY_DIM_KV_LORA: return "kv_lora_rank";
    case SY_DIM_KV_A: return "kv_lora_rank+qk_rope_head_dim";
    case SY_DIM_KV_B: return "num_attention_heads*(qk_nope_head_dim+v_head_dim)";
    case SY_DIM_IDX_Q: return "index_n_heads*index_head_dim";
    case SY_DIM_IDX_HEAD: return "index_head_dim";
    case SY_DIM_IDX_HEADS: return "index_n_heads";
    case SY_DIM_COUNT: break;
    }
    return "?";
}

int sy__model_tensor_name(char *out, size_t cap, const char *pattern, int layer, int expert)
{
    size_t o = 0;
    for (const char *p = pattern; *p;) {
        char num[16];
        const char *ins = NULL;
        if (strncmp(p, "{L}", 3) == 0) {
            snprintf(num, sizeof num, "%d", layer);
            ins = num;
            p += 3;
        } else if (strncmp(p, "{E}", 3) == 0) {
            snprintf(num, sizeof num, "%d", expert);
            ins = num;
            p += 3;
        }
        if (ins) {
            size_t n = strlen(ins);
            if (o + n >= cap)
                return -1;
            memcpy(out + o, ins, n);
            o += n;
        } else {
            if (o + 1 >= cap)
                return -1;
            out[o++] = *p++;
        }
    }
    if (o >= cap)
        return -1;
    out[o] = '\0';
    return 0;
}

sy_tensor *sy__model_role_slot(sy_model *m, sy_role r, int layer, int expert)
{
    switch (r) {
    case SY_ROLE_EMBED: return &m->embed;
    case SY_ROLE_FINAL_NORM: return &m->final_norm;
    case SY_ROLE_LM_HEAD: return &m->lm_head;
    default: break;
    }
    if (!m->layers || layer < 0 || layer >= m->cfg.n_layers)
        return NULL;
    sy_layer_weights *lw = &m->layers[layer];
    const sy_role_desc *rd = sy__model_role_desc(r);
    if (!rd || (rd->scope == SY_SCOPE_EXPERT && (expert < 0 || expert >= m->cfg.n_experts)))
        return NULL;
    switch (r) {
    case SY_ROLE_ATTN_NORM: return &lw->attn_norm;
    case SY_ROLE_WQ: return &lw->wq;
    case SY_ROLE_WK: return &lw->wk;
    case SY_ROLE_WV: return &lw->wv;
    case SY_ROLE_WO: return &lw->wo;
    case SY_ROLE_BQ: return &lw->bq;
    case SY_ROLE_BK: return &lw->bk;
    case SY_ROLE_BV: return &lw->bv;
    case SY_ROLE_Q_NORM: return &lw->q_norm;
    case SY_ROLE_K_NORM: return &lw->k_norm;
    case SY_ROLE_FFN_NORM: return &lw->ffn_norm;
    case SY_ROLE_GATE: return &lw->w_gate;
    case SY_ROLE_UP: return &lw->w_up;
    case SY_ROLE_DOWN: return &lw->w_down;
    case SY_ROLE_ROUTER: return &lw->router;
    case SY_ROLE_SCORE_BIAS: return &lw->score_bias;
    case SY_ROLE_SH_GATE: return &lw->sh_gate;
    case SY_ROLE_SH_UP: return &lw->sh_up;
    case SY_ROLE_SH_DOWN: return &lw->sh_down;
    case SY_ROLE_Q_A: return &lw->q_a;
    case SY_ROLE_Q_A_NORM: return &lw->q_a_norm;
    case SY_ROLE_Q_B: return &lw->q_b;
    case SY_ROLE_KV_A: return &lw->kv_a;
    case SY_ROLE_KV_A_NORM: return &lw->kv_a_norm;
    case SY_ROLE_KV_B: return &lw->kv_b;
    case SY_ROLE_IDX_WQ_B: return &lw->idx_wq_b;
    case SY_ROLE_IDX_WK: return &lw->idx_wk;
    case SY_ROLE_IDX_K_NORM: return &lw->idx_k_norm;
    case SY_ROLE_IDX_K_NORM_B: return &lw->idx_k_norm_b;
    case SY_ROLE_IDX_WPROJ: return &lw->idx_wproj;
    case SY_ROLE_EXP_GATE: return lw->exp_gate ? &lw->exp_gate[expert] : NULL;
    case SY_ROLE_EXP_UP: return lw->exp_up ? &lw->exp_up[expert] : NULL;
    case SY_ROLE_EXP_DOWN: return lw->exp_down ? &lw->exp_down[expert] : NULL;
    default: break;
    }
    return NULL;
}

/* ------------------------------------------------ family config hooks */

#define MAX_EXPERTS (1 << 16)

static int unsupported_bool(const sy_json_reader *r, const json_t *root, const char *key, const char *why)
{
    bool b = false;
    int rc = sy__mjson_bool(r, root, NULL, key, false, &b);
    if (rc != SY_OK)
        return rc;
    if (b)
        return sy_err_set(r->err, SY_ERR_UNSUPPORTED, "%s: '%s' is true, which is not supported (%s)", r->path, key,
                          why);
    return SY_OK;
}

/* sliding_window (int or null); none when it covers max_pos anyway. */
static int read_sliding_window(const sy_json_reader *r, const json_t *root, int64_t dflt, sy_model_config *cfg)
{
    int32_t w = 0;
    int rc = json_object_get(root, "sliding_window") && json_is_null(json_object_get(root, "sliding_window"))
                 ? SY_OK
                 : sy__mjson_int(r, root, NULL, "sliding_window", false, dflt, 0, INT32_MAX, &w);
    if (rc != SY_OK)
        return rc;
    cfg->sliding_window = (w > 0 && w < cfg->max_pos) ? w : 0;
    return SY_OK;
}

static int llama_extra(const sy_json_reader *r, const json_t *root, sy_model_config *cfg)
{
    cfg->sliding_window = 0;
    return unsupported_bool(r, root, "mlp_bias", "the MLP projections have no biases here");
}

/* MistralConfig defaults sliding_window to 4096 when the field is absent. */
static int mistral_extra(const sy_json_reader *r, const json_t *root, sy_model_config *cfg)
{
    int rc = llama_extra(r, root, cfg);
    return rc != SY_OK ? rc : read_sliding_window(r, root, 4096, cfg);
}

/* Every layer is MoE; experts use intermediate_size; top-k always renormalised. */
static int mixtral_extra(const sy_json_reader *r, const json_t *root, sy_model_config *cfg)
{
    int rc = sy__mjson_int(r, root, NULL, "num_local_experts", true, 0, 1, MAX_EXPERTS, &cfg->n_experts);
    if (rc == SY_OK)
        rc = sy__mjson_int(r, root, NULL, "num_experts_per_tok", true, 0, 1, cfg->n_experts, &cfg->top_k);
    if (rc != SY_OK)
        return rc;
    cfg->moe_inter = cfg->intermediate;
    cfg->norm_topk_prob = true;
    cfg->decoder_sparse_step = 1;
    for (int i = 0; i < cfg->n_layers; i++)
        cfg->layer_is_moe[i] = 1;
    return read_sliding_window(r, root, 0, cfg);
}

/* The expert count (count_key; 0 means a dense model), then top-k and the
 * expert width, which only a model with experts must give. */
static int read_routed_experts(const sy_json_reader *r, const json_t *root, const char *count_key,
                               sy_model_config *cfg)
{
    int rc = sy__mjson_int(r, root, NULL, count_key, true, 0, 0, MAX_EXPERTS, &cfg->n_experts);
    const bool moe = cfg->n_experts > 0;
    if (rc == SY_OK)
        rc = sy__mjson_int(r, root, NULL, "num_experts_per_tok", moe, 0, moe ? 1 : 0, cfg->n_experts, &cfg->top_k);
    if (rc == SY_OK)
        rc = sy__mjson_int(r, root, NULL, "moe_intermediate_size", moe, 0, moe ? 1 : 0, INT32_MAX, &cfg->moe_inter);
    return rc;
}

/* Layer i is MoE when it is not in mlp_only_layers, there are experts, and
 * (i + 1) % decoder_sparse_step == 0 (transformers' Qwen3MoeDecoderLayer). */
static int qwen3moe_extra(const sy_json_reader *r, const json_t *root, sy_model_config *cfg)
{
    int rc = read_routed_experts(r, root, "num_experts", cfg);
    const bool moe = cfg->n_experts > 0;
    if (rc == SY_OK)
        rc = sy__mjson_bool(r, root, NULL, "norm_topk_prob", false, &cfg->norm_topk_prob);
    if (rc == SY_OK)
        rc = sy__mjson_int(r, root, NULL, "decoder_sparse_step", false, 1, 1, INT32_MAX, &cfg->decoder_sparse_step);
    if (rc == SY_OK)
        rc = unsupported_bool(r, root, "use_sliding_window", "per-layer sliding windows are not implemented");
    if (rc != SY_OK)
        return rc;
    int n_only = 0;
    int32_t *only = calloc((size_t)cfg->n_layers, sizeof *only);
    if (!only)
        return sy_err_set(r->err, SY_ERR_NOMEM, "%s: out of memory", r->path);
    rc = sy__mjson_int_list(r, root, "mlp_only_layers", false, 0, cfg->n_layers - 1, only, cfg->n_layers, &n_only);
    if (rc == SY_OK) {
        for (int i = 0; i < cfg->n_layers; i++)
            cfg->layer_is_moe[i] = moe && (i + 1) % cfg->decoder_sparse_step == 0;
        for (int k = 0; k < n_only && k < cfg->n_layers; k++)
            cfg->layer_is_moe[only[k]] = 0;
    }
    free(only);
    cfg->sliding_window = 0;
    return rc;
}


/*
 * The MoE block shared by DeepSeek-V3, GLM-4-MoE and GLM-5: n_routed_experts
 * scored by a sigmoid plus e_score_correction_bias for the choice, grouped
 * top-k, routed_scaling_factor, n_shared_experts always-on experts. Layers
 * before first_k_dense_replace are dense (GLM-5: mlp_layer_types when given).
 */
static int deepseek_moe(const sy_json_reader *r, const json_t *root, int32_t dflt_first_dense, double dflt_scaling,
                        int32_t dflt_group, sy_model_config *cfg)
{
    int32_t first_dense = 0;
    int rc = read_routed_experts(r, root, "n_routed_experts", cfg);
    const bool moe = cfg->n_experts > 0;
    if (rc == SY_OK)
        rc = sy__mjson_int(r, root, NULL, "n_shared_experts", false, 1, 0, 1 << 16, &cfg->n_shared_experts);
    if (rc == SY_OK)
        rc = sy__mjson_bool(r, root, NULL, "norm_topk_prob", true, &cfg->norm_topk_prob);
    if (rc == SY_OK)
        rc = sy__mjson_float(r, root, NULL, "routed_scaling_factor", false, dflt_scaling, 1e-6, 1e6,
                             &cfg->routed_scaling_factor);
    if (rc == SY_OK)
        rc = sy__mjson_int(r, root, NULL, "n_group", false, dflt_group, 1, MAX_EXPERTS, &cfg->n_group);
    if (rc == SY_OK)
        rc = sy__mjson_int(r, root, NULL, "topk_group", false, dflt_group, 1, cfg->n_group, &cfg->topk_group);
    if (rc == SY_OK)
        rc = sy__mjson_int(r, root, NULL, "first_k_dense_replace", false, dflt_first_dense, 0, INT32_MAX,
                           &first_dense);
    if (rc != SY_OK)
        return rc;
    char method[32];
    if ((rc = sy__mjson_string(r, root, NULL, "topk_method", false, method, sizeof method)) != SY_OK)
        return rc;
    if (method[0] && strcmp(method, "noaux_tc") != 0)
        return sy_err_set(r->err, SY_ERR_UNSUPPORTED, "%s: topk_method '%s' is not supported (supported: noaux_tc)",
                          r->path, method);
    if ((rc = sy__mjson_string(r, root, NULL, "scoring_func", false, method, sizeof method)) != SY_OK)
        return rc;
    if (method[0] && strcmp(method, "sigmoid") != 0)
        return sy_err_set(r->err, SY_ERR_UNSUPPORTED, "%s: scoring_func '%s' is not supported (supported: sigmoid)",
                          r->path, method);
    if (moe && cfg->n_experts % cfg->n_group != 0)
        return sy_err_set(r->err, SY_ERR_INVALID, "%s: n_group (%d) does not divide n_routed_experts (%d)", r->path,
                          cfg->n_group, cfg->n_experts);
    cfg->moe_scoring = SY_MOE_SIGMOID;
    cfg->moe_score_bias = moe;
    for (int i = 0; i < cfg->n_layers; i++)
        cfg->layer_is_moe[i] = moe && i >= first_dense;
    json_t *types = sy__mjson_field(root, "mlp_layer_types");
    if (types) {
        if (!json_is_array(types) || (int64_t)json_array_size(types) != cfg->n_layers)
            return sy_err_set(r->err, SY_ERR_INVALID, "%s: field 'mlp_layer_types' should list %d strings "
                                                      "(\"dense\" or \"sparse\")",
                              r->path, cfg->n_layers);
        for (int i = 0; i < cfg->n_layers; i++) {
            const char *t = json_string_value(json_array_get(types, (size_t)i));
            if (!t || (strcmp(t, "dense") != 0 && strcmp(t, "sparse") != 0))
                return sy_err_set(r->err, SY_ERR_INVALID, "%s: mlp_layer_types[%d] should be \"dense\" or \"sparse\", "
                                                          "found %s",
                                  r->path, i, t ? t : sy__mjson_type_name(json_array_get(types, (size_t)i)));
            cfg->layer_is_moe[i] = moe && strcmp(t, "sparse") == 0;
        }
    }
    cfg->sliding_window = 0;
    return SY_OK;
}

/* MLA dimensions; head_dim becomes the query/key head (nope + rope) and the
 * rotary part is the rope slice, whatever head_dim config.json carries. */
static int read_mla(const sy_json_reader *r, const json_t *root, bool q_lora_required, sy_model_config *cfg)
{
    int rc = sy__mjson_int(r, root, NULL, "q_lora_rank", q_lora_required, 0, 0, 1 << 20, &cfg->q_lora_rank);
    if (rc == SY_OK)
        rc = sy__mjson_int(r, root, NULL, "kv_lora_rank", true, 0, 1, 1 << 20, &cfg->kv_lora_rank);
    if (rc == SY_OK)
        rc = sy__mjson_int(r, root, NULL, "qk_nope_head_dim", true, 0, 1, 1 << 16, &cfg->qk_nope_dim);
    if (rc == SY_OK)
        rc = sy__mjson_int(r, root, NULL, "qk_rope_head_dim", true, 0, 2, 1 << 16, &cfg->qk_rope_dim);
    if (rc == SY_OK)
        rc = sy__mjson_int(r, root, NULL, "v_head_dim", true, 0, 1, 1 << 16, &cfg->v_head_dim);
    if (rc == SY_OK)
        rc = unsupported_bool(r, root, "attention_bias", "MLA projections have no biases here");
    if (rc != SY_OK)
        return rc;
    if (cfg->qk_rope_dim % 2)
        return sy_err_set(r->err, SY_ERR_INVALID, "%s: qk_rope_head_dim %d: expected an even number", r->path,
                          cfg->qk_rope_dim);
    cfg->mla = true;
    cfg->head_dim = cfg->qk_nope_dim + cfg->qk_rope_dim;
    cfg->rotary_dim = cfg->qk_rope_dim;
    return SY_OK;
}

static int deepseek_v3_extra(const sy_json_reader *r, const json_t *root, sy_model_config *cfg)
{
    int rc = read_mla(r, root, false, cfg);
    if (rc == SY_OK)
        rc = sy__mjson_bool(r, root, NULL, "rope_interleave", true, &cfg->rope_interleave);
    return rc != SY_OK ? rc : deepseek_moe(r, root, 3, 2.5, 8, cfg);
}

/* Glm4MoeConfig defaults partial_rotary_factor to 0.5 (the generic reader's default is 1). */
static int glm4_moe_extra(const sy_json_reader *r, const json_t *root, sy_model_config *cfg)
{
    const json_t *rp = sy__mjson_field(root, "rope_parameters");
    if (!sy__mjson_field(root, "partial_rotary_factor") && !(rp && sy__mjson_field(rp, "partial_rotary_factor"))) {
        cfg->rotary_dim = cfg->head_dim / 2;
        if (cfg->rotary_dim < 2 || cfg->rotary_dim % 2)
            return sy_err_set(r->err, SY_ERR_INVALID,
                              "%s: the default partial_rotary_factor 0.5 of head_dim %d gives rotary dimension %d; "
                              "expected an even number >= 2",
                              r->path, cfg->head_dim, cfg->rotary_dim);
    }
    int rc = sy__mjson_bool(r, root, NULL, "use_qk_norm", false, &cfg->qk_norm);
    return rc != SY_OK ? rc : deepseek_moe(r, root, 1, 1.0, 1, cfg);
}

/* GLM-5: MLA (always with q_lora_rank: the indexer reads the query latent),
 * interleaved RoPE, and the indexer; indexer_types "shared" layers reuse the
 * previous layer's choice. */
static int glm_moe_dsa_extra(const sy_json_reader *r, const json_t *root, sy_model_config *cfg)
{
    int rc = read_mla(r, root, true, cfg);
    if (rc == SY_OK && cfg->q_lora_rank <= 0)
        rc = sy_err_set(r->err, SY_ERR_INVALID, "%s: q_lora_rank should be a positive integer for glm_moe_dsa",
                        r->path);
    if (rc == SY_OK)
        rc = sy__mjson_int(r, root, NULL, "index_n_heads", false, 32, 1, 1 << 16, &cfg->index_n_heads);
    if (rc == SY_OK)
        rc = sy__mjson_int(r, root, NULL, "index_head_dim", false, 128, cfg->qk_rope_dim, 1 << 16,
                           &cfg->index_head_dim);
    if (rc == SY_OK)
        rc = sy__mjson_int(r, root, NULL, "index_topk", false, 2048, 1, INT32_MAX, &cfg->index_topk);
    if (rc != SY_OK)
        return rc;
    cfg->rope_interleave = true;
    cfg->layer_has_indexer = calloc((size_t)cfg->n_layers, 1);
    if (!cfg->layer_has_indexer)
        return sy_err_set(r->err, SY_ERR_NOMEM, "%s: out of memory", r->path);
    json_t *types = sy__mjson_field(root, "indexer_types");
    if (types && (!json_is_array(types) || (int64_t)json_array_size(types) != cfg->n_layers))
        return sy_err_set(r->err, SY_ERR_INVALID, "%s: field 'indexer_types' should list %d strings (\"full\" or "
                                                  "\"shared\")",
                          r->path, cfg->n_layers);
    for (int i = 0; i < cfg->n_layers; i++) {
        const char *t = types ? json_string_value(json_array_get(types, (size_t)i)) : "full";
        if (!t || (strcmp(t, "full") != 0 && strcmp(t, "shared") != 0) || (i == 0 && strcmp(t, "shared") == 0))
            return sy_err_set(r->err, SY_ERR_INVALID, "%s: indexer_types should list %d strings, \"full\" or "
                                                      "\"shared\" (the first \"full\"); element %d is not",
                              r->path, cfg->n_layers, i);
        cfg->layer_has_indexer[i] = strcmp(t, "full") == 0;
    }
    return deepseek_moe(r, root, 3, 2.5, 1, cfg);
}

/* ------------------------------------------------------------ families */

#define LLAMA_ATTN_TENSORS                                                                                            \
    [SY_ROLE_EMBED] = "model.embed_tokens.weight",                                                                    \
    [SY_ROLE_FINAL_NORM] = "model.norm.weight",                                                                       \
    [SY_ROLE_LM_HEAD] = "lm_head.weight",                                                                             \
    [SY_ROLE_ATTN_NORM] = "model.layers.{L}.input_layernorm.weight",                                                  \
    [SY_ROLE_WQ] = "model.layers.{L}.self_attn.q_proj.weight",                                                        \
    [SY_ROLE_WK] = "model.layers.{L}.self_attn.k_proj.weight",                                                        \
    [SY_ROLE_WV] = "model.layers.{L}.self_attn.v_proj.weight",                                                        \
    [SY_ROLE_WO] = "model.layers.{L}.self_attn.o_proj.weight",                                                        \
    [SY_ROLE_BQ] = "model.layers.{L}.self_attn.q_proj.bias",                                                          \
    [SY_ROLE_BK] = "model.layers.{L}.self_attn.k_proj.bias",                                                          \
    [SY_ROLE_BV] = "model.layers.{L}.self_attn.v_proj.bias",                                                          \
    [SY_ROLE_FFN_NORM] = "model.layers.{L}.post_attention_layernorm.weight"

#define LLAMA_MLP_TENSORS                                                                                             \
    [SY_ROLE_GATE] = "model.layers.{L}.mlp.gate_proj.weight", [SY_ROLE_UP] = "model.layers.{L}.mlp.up_proj.weight",   \
    [SY_ROLE_DOWN] = "model.layers.{L}.mlp.down_proj.weight"


/* DeepSeek-V3's MLA names (GLM-5 shares them). */
#define MLA_TENSORS                                                                                                   \
    [SY_ROLE_EMBED] = "model.embed_tokens.weight", [SY_ROLE_FINAL_NORM] = "model.norm.weight",                        \
    [SY_ROLE_LM_HEAD] = "lm_head.weight", [SY_ROLE_ATTN_NORM] = "model.layers.{L}.input_layernorm.weight",            \
    [SY_ROLE_WQ] = "model.layers.{L}.self_attn.q_proj.weight",                                                        \
    [SY_ROLE_Q_A] = "model.layers.{L}.self_attn.q_a_proj.weight",                                                     \
    [SY_ROLE_Q_A_NORM] = "model.layers.{L}.self_attn.q_a_layernorm.weight",                                           \
    [SY_ROLE_Q_B] = "model.layers.{L}.self_attn.q_b_proj.weight",                                                     \
    [SY_ROLE_KV_A] = "model.layers.{L}.self_attn.kv_a_proj_with_mqa.weight",                                         \
    [SY_ROLE_KV_A_NORM] = "model.layers.{L}.self_attn.kv_a_layernorm.weight",                                         \
    [SY_ROLE_KV_B] = "model.layers.{L}.self_attn.kv_b_proj.weight",                                                   \
    [SY_ROLE_WO] = "model.layers.{L}.self_attn.o_proj.weight",                                                        \
    [SY_ROLE_FFN_NORM] = "model.layers.{L}.post_attention_layernorm.weight"

/* Per-head query/key norms (Qwen3-MoE, GLM-4-MoE with use_qk_norm). */
#define QK_NORM_TENSORS                                                                                               \
    [SY_ROLE_Q_NORM] = "model.layers.{L}.self_attn.q_norm.weight",                                                    \
    [SY_ROLE_K_NORM] = "model.layers.{L}.self_attn.k_norm.weight"

/* Router and routed experts under mlp. (Qwen3-MoE and the DeepSeek family). */
#define MLP_EXPERT_TENSORS                                                                                            \
    [SY_ROLE_ROUTER] = "model.layers.{L}.mlp.gate.weight",                                                            \
    [SY_ROLE_EXP_GATE] = "model.layers.{L}.mlp.experts.{E}.gate_proj.weight",                                         \
    [SY_ROLE_EXP_UP] = "model.layers.{L}.mlp.experts.{E}.up_proj.weight",                                             \
    [SY_ROLE_EXP_DOWN] = "model.layers.{L}.mlp.experts.{E}.down_proj.weight"

/* DeepseekV3MoE's names (also GLM-4-MoE's and GLM-5's). */
#define DEEPSEEK_MOE_TENSORS                                                                                          \
    MLP_EXPERT_TENSORS,                                                                                               \
    [SY_ROLE_SCORE_BIAS] = "model.layers.{L}.mlp.gate.e_score_correction_bias",                                       \
    [SY_ROLE_SH_GATE] = "model.layers.{L}.mlp.shared_experts.gate_proj.weight",                                       \
    [SY_ROLE_SH_UP] = "model.layers.{L}.mlp.shared_experts.up_proj.weight",                                           \
    [SY_ROLE_SH_DOWN] = "model.layers.{L}.mlp.shared_experts.down_proj.weight"

static const sy_arch_desc arch_table[] = {
    {
        .arch = SY_ARCH_LLAMA,
        .hf_name = "LlamaForCausalLM",
        .default_max_pos = 2048,
        .default_rms_eps = 1e-6,
        .default_rope_theta = 10000.0,
        .reads_attention_bias = true,
        .parse_extra = llama_extra,
        .tensors = {LLAMA_ATTN_TENSORS, LLAMA_MLP_TENSORS},
    },
    {
        .arch = SY_ARCH_LLAMA,
        .hf_name = "MistralForCausalLM",
        .default_max_pos = 4096 * 32,
        .default_rms_eps = 1e-6,
        .default_rope_theta = 10000.0,
        .parse_extra = mistral_extra,
        .tensors = {LLAMA_ATTN_TENSORS, LLAMA_MLP_TENSORS},
    },
    {
        .arch = SY_ARCH_MIXTRAL,
        .hf_name = "MixtralForCausalLM",
        .default_max_pos = 4096 * 32,
        .default_rms_eps = 1e-5,
        .default_rope_theta = 1e6,
        .parse_extra = mixtral_extra,
        .tensors =
            {
                LLAMA_ATTN_TENSORS,
                [SY_ROLE_ROUTER] = "model.layers.{L}.block_sparse_moe.gate.weight",
                [SY_ROLE_EXP_GATE] = "model.layers.{L}.block_sparse_moe.experts.{E}.w1.weight",
                [SY_ROLE_EXP_DOWN] = "model.layers.{L}.block_sparse_moe.experts.{E}.w2.weight",
                [SY_ROLE_EXP_UP] = "model.layers.{L}.block_sparse_moe.experts.{E}.w3.weight",
            },
    },
    {
        .arch = SY_ARCH_QWEN3_MOE,
        .hf_name = "Qwen3MoeForCausalLM",
        .default_max_pos = 32768,
        .default_rms_eps = 1e-6,
        .default_rope_theta = 10000.0,
        .qk_norm = true,
        .reads_attention_bias = true,
        .parse_extra = qwen3moe_extra,
        .tensors =
            {
                LLAMA_ATTN_TENSORS,
                LLAMA_MLP_TENSORS, /* layers listed in mlp_only_layers */
                QK_NORM_TENSORS,
                MLP_EXPERT_TENSORS,
            },
    },
    {
        .arch = SY_ARCH_DEEPSEEK_V3,
        .hf_name = "DeepseekV3ForCausalLM",
        .default_max_pos = 4096,
        .default_rms_eps = 1e-6,
        .default_rope_theta = 10000.0,
        .parse_extra = deepseek_v3_extra,
        .tensors = {MLA_TENSORS, LLAMA_MLP_TENSORS, DEEPSEEK_MOE_TENSORS},
    },
    {
        .arch = SY_ARCH_GLM4_MOE,
        .hf_name = "Glm4MoeForCausalLM",
        .default_max_pos = 131072,
        .default_rms_eps = 1e-5,
        .default_rope_theta = 10000.0,
        .reads_attention_bias = true,
        .parse_extra = glm4_moe_extra,
        .tensors =
            {
                LLAMA_ATTN_TENSORS,
                LLAMA_MLP_TENSORS,
                DEEPSEEK_MOE_TENSORS,
                QK_NORM_TENSORS,
            },
    },
    {
        .arch = SY_ARCH_GLM_MOE_DSA,
        .hf_name = "GlmMoeDsaForCausalLM",
        .default_max_pos = 202752,
        .default_rms_eps = 1e-5,
        .default_rope_theta = 10000.0,
        .parse_extra = glm_moe_dsa_extra,
        .tensors =
            {
                MLA_TENSORS,
                LLAMA_MLP_TENSORS,
                DEEPSEEK_MOE_TENSORS,
                [SY_ROLE_IDX_WQ_B] = "model.layers.{L}.self_attn.indexer.wq_b.weight",
                [SY_ROLE_IDX_WK] = "model.layers.{L}.self_attn.indexer.wk.weight",
                [SY_ROLE_IDX_K_NORM] = "model.layers.{L}.self_attn.indexer.k_norm.weight",
                [SY_ROLE_IDX_K_NORM_B] = "model.layers.{L}.self_attn.indexer.k_norm.bias",
                [SY_ROLE_IDX_WPROJ] = "model.layers.{L}.self_attn.indexer.weights_proj.weight",
            },
    },
};

#define N_ARCHS (sizeof arch_table / sizeof arch_table[0])

const sy_arch_desc *sy__model_arch_find(const char *hf_name)
{
    for (size_t i = 0; i < N_ARCHS; i++)
        if (strcmp(arch_table[i].hf_name, hf_name) == 0)
            return &arch_table[i];
    return NULL;
}

void sy__model_arch_supported(char *buf, size_t cap)
{
    size_t o = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < N_ARCHS && o < cap; i++) {
        int n = snprintf(buf + o, cap - o, "%s%s", i ? ", " : "", arch_table[i].hf_name);
        if (n < 0)
            break;
        o += (size_t)n;
    }
}

const char *sy_arch_name(sy_arch a)
{
    for (size_t i = 0; i < N_ARCHS; i++)
        if (arch_table[i].arch == a)
            return arch_table[i].hf_name;
    return "?";
}
