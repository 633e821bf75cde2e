/* The architecture table: roles, dimensions and one row per family. */
#include "config.h"

#include "model/model_arch.h"
#include "util/log.h"

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
    [SY_ROLE_BO] = {"attention output bias", SY_SCOPE_LAYER, SY_WHEN_O_BIAS, {SY_DIM_HIDDEN}},
    [SY_ROLE_SINKS] = {"attention sinks", SY_SCOPE_LAYER, SY_WHEN_SINKS, {SY_DIM_HEADS}},
    [SY_ROLE_ROUTER_BIAS] = {"MoE router bias", SY_SCOPE_LAYER, SY_WHEN_ROUTER_BIAS, {SY_DIM_EXPERTS}},
    [SY_ROLE_MTP_ENORM] = {"MTP embedding norm", SY_SCOPE_LAYER, SY_WHEN_MTP, {SY_DIM_HIDDEN}},
    [SY_ROLE_MTP_HNORM] = {"MTP hidden-state norm", SY_SCOPE_LAYER, SY_WHEN_MTP, {SY_DIM_HIDDEN}},
    [SY_ROLE_MTP_EH_PROJ] = {"MTP input projection", SY_SCOPE_LAYER, SY_WHEN_MTP, {SY_DIM_HIDDEN, SY_DIM_2HIDDEN}},
    [SY_ROLE_MTP_HEAD_NORM] = {"MTP head norm", SY_SCOPE_LAYER, SY_WHEN_MTP, {SY_DIM_HIDDEN}},
    [SY_ROLE_MTP_HEAD] = {"MTP output projection", SY_SCOPE_LAYER, SY_WHEN_MTP_IF_PRESENT,
                          {SY_DIM_VOCAB, SY_DIM_HIDDEN}},
    [SY_ROLE_MTP_EMBED] = {"MTP token embedding", SY_SCOPE_LAYER, SY_WHEN_MTP_IF_PRESENT,
                           {SY_DIM_VOCAB, SY_DIM_HIDDEN}},
    [SY_ROLE_EXP_GATE] = {"expert gate projection", SY_SCOPE_EXPERT, SY_WHEN_MOE, {SY_DIM_MOE_INTER, SY_DIM_HIDDEN}},
    [SY_ROLE_EXP_UP] = {"expert up projection", SY_SCOPE_EXPERT, SY_WHEN_MOE, {SY_DIM_MOE_INTER, SY_DIM_HIDDEN}},
    [SY_ROLE_EXP_DOWN] = {"expert down projection", SY_SCOPE_EXPERT, SY_WHEN_MOE, {SY_DIM_HIDDEN, SY_DIM_MOE_INTER}},
};

const sy_role_desc *sy__model_role_desc(sy_role r) { return (unsigned)r < SY_ROLE_COUNT ? &role_descs[r] : NULL; }

/* An MTP layer (SGLang's is_nextn decoder layer): MoE whenever there are
 * experts, its own indexer whenever the model has one; every other rule
 * does not depend on the layer, so layer 0's answer holds. */
static bool mtp_role_needed(const sy_model_config *cfg, sy_role r, sy_role_when when)
{
    const bool moe = cfg->n_experts > 0;
    switch (when) {
    case SY_WHEN_MTP: return true;
    case SY_WHEN_MTP_IF_PRESENT: return false;
    case SY_WHEN_DENSE: return !moe;
    case SY_WHEN_MOE: return moe;
    case SY_WHEN_SCORE_BIAS: return moe && cfg->moe_score_bias;
    case SY_WHEN_SHARED: return moe && cfg->n_shared_experts > 0;
    case SY_WHEN_ROUTER_BIAS: return moe && cfg->router_bias;
    case SY_WHEN_INDEXER: return cfg->index_topk > 0;
    default: return sy__model_role_needed(cfg, r, 0);
    }
}

bool sy__model_role_needed(const sy_model_config *cfg, sy_role r, int layer)
{
    const sy_role_desc *d = sy__model_role_desc(r);
    if (!d)
        return false;
    if (d->scope != SY_SCOPE_MODEL && layer >= cfg->n_layers)
        return mtp_role_needed(cfg, r, d->when);
    switch (d->when) {
    case SY_WHEN_MTP:
    case SY_WHEN_MTP_IF_PRESENT: return false;
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
    case SY_WHEN_O_BIAS: return cfg->o_bias;
    case SY_WHEN_SINKS: return cfg->attn_sinks;
    case SY_WHEN_ROUTER_BIAS: return cfg->router_bias && cfg->layer_is_moe && cfg->layer_is_moe[layer];
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
    case SY_DIM_HEADS: return cfg->n_heads;
    case SY_DIM_2HIDDEN: return 2 * (int64_t)cfg->hidden;
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
    case SY_DIM_HEADS: return "num_attention_heads";
    case SY_DIM_2HIDDEN: return "2*hidden_size";
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
    sy_mtp_layer *mtp = NULL;
    if (m->mtp && layer >= m->cfg.n_layers && layer - m->cfg.n_layers < m->n_mtp)
        mtp = &m->mtp[layer - m->cfg.n_layers];
    else if (!m->layers || layer < 0 || layer >= m->cfg.n_layers)
        return NULL;
    sy_layer_weights *lw = mtp ? &mtp->block : &m->layers[layer];
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
    case SY_ROLE_BO: return &lw->bo;
    case SY_ROLE_SINKS: return &lw->sinks;
    case SY_ROLE_ROUTER_BIAS: return &lw->router_bias;
    case SY_ROLE_MTP_ENORM: return mtp ? &mtp->enorm : NULL;
    case SY_ROLE_MTP_HNORM: return mtp ? &mtp->hnorm : NULL;
    case SY_ROLE_MTP_EH_PROJ: return mtp ? &mtp->eh_proj : NULL;
    case SY_ROLE_MTP_HEAD_NORM: return mtp ? &mtp->head_norm : NULL;
    case SY_ROLE_MTP_HEAD: return mtp ? &mtp->head : NULL;
    case SY_ROLE_MTP_EMBED: return mtp ? &mtp->embed : NULL;
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

/* LlamaAttention: attention_bias puts a bias on o_proj too (Mistral reads no attention_bias). */
static int llama_extra(const sy_json_reader *r, const json_t *root, sy_model_config *cfg)
{
    cfg->sliding_window = 0;
    cfg->o_bias = cfg->attention_bias;
    return unsupported_bool(r, root, "mlp_bias", "the MLP projections have no biases here");
}

/* MistralConfig defaults sliding_window to 4096 when the field is absent. */
static int mistral_extra(const sy_json_reader *r, const json_t *root, sy_model_config *cfg)
{
    int rc = llama_extra(r, root, cfg);
    return rc != SY_OK ? rc : read_sliding_window(r, root, 4096, cfg);
}

/*
 * The expert count under the config class's own field name or the aliases
 * transformers 5 also takes (attribute_map, __post_init__ re-routing). An
 * alias is not a dataclass field, so transformers sets it after the fields
 * (PreTrainedConfig.__post_init__) and it wins; aliases[] is in increasing
 * order of precedence. A disagreement is logged naming both. dflt < 0: required.
 */
static int read_expert_count(const sy_json_reader *r, const json_t *root, const char *field,
                             const char *const *aliases, int n_aliases, int32_t min, int32_t dflt,
                             sy_model_config *cfg)
{
    const char *key = field;
    int32_t n = dflt;
    int rc = sy__mjson_int(r, root, NULL, field, false, dflt, min, MAX_EXPERTS, &n);
    for (int i = 0; rc == SY_OK && i < n_aliases; i++) {
        int32_t a = 0;
        if (!sy__mjson_field(root, aliases[i]))
            continue;
        rc = sy__mjson_int(r, root, NULL, aliases[i], true, 0, min, MAX_EXPERTS, &a);
        if (rc == SY_OK && sy__mjson_field(root, key) && a != n)
            sy_warn("%s: %s (%d) and %s (%d) both give the number of experts; using %s, as transformers 5 does",
                    r->path, key, n, aliases[i], a, aliases[i]);
        key = aliases[i];
        n = a;
    }
    if (rc == SY_OK && dflt < 0 && !sy__mjson_field(root, key)) {
        char also[96] = "";
        for (int i = 0, o = 0; i < n_aliases && o < (int)sizeof also; i++)
            o += snprintf(also + o, sizeof also - (size_t)o, " or '%s'", aliases[i]);
        return sy_err_set(r->err, SY_ERR_INVALID, "%s: required field '%s'%s (an integer) is %s", r->path, field,
                          also, json_object_get(root, field) ? "null" : "missing");
    }
    cfg->n_experts = n;
    return rc;
}

/* Every layer is MoE; experts use intermediate_size; top-k always renormalised. */
static int mixtral_extra(const sy_json_reader *r, const json_t *root, sy_model_config *cfg)
{
    static const char *const alias[] = {"num_experts"}; /* MixtralConfig.attribute_map */
    int rc = read_expert_count(r, root, "num_local_experts", alias, 1, 1, -1, cfg);
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

/* The expert count (field, or an alias; 0 means a dense model), then top-k
 * and the expert width, which only a model with experts must give. */
static int read_routed_experts(const sy_json_reader *r, const json_t *root, const char *field,
                               const char *const *aliases, int n_aliases, sy_model_config *cfg)
{
    int rc = read_expert_count(r, root, field, aliases, n_aliases, 0, -1, cfg);
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
    /* Qwen3MoeConfig maps num_experts to num_local_experts, which transformers 5 then saves. */
    static const char *const alias[] = {"num_local_experts"};
    int rc = read_routed_experts(r, root, "num_experts", alias, 1, cfg);
    const bool moe = cfg->n_experts > 0;
    if (rc == SY_OK)
        rc = sy__mjson_bool(r, root, NULL, "norm_topk_prob", false, &cfg->norm_topk_prob);
    if (rc == SY_OK)
        rc = sy__mjson_int(r, root, NULL, "decoder_sparse_step", false, 1, 1, INT32_MAX, &cfg->decoder_sparse_step);
    /* Qwen3MoeConfig keeps sliding_window only under use_sliding_window, and then every layer slides
     * (no max_window_layers, unlike Qwen2 and dense Qwen3). */
    bool use_window = false;
    if (rc == SY_OK)
        rc = sy__mjson_bool(r, root, NULL, "use_sliding_window", false, &use_window);
    if (rc == SY_OK)
        rc = use_window ? read_sliding_window(r, root, 4096, cfg) : SY_OK;
    if (rc != SY_OK)
        return rc;
    if (!use_window)
        cfg->sliding_window = 0;
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
    cfg->o_bias = cfg->attention_bias; /* Qwen3MoeAttention biases o_proj too */
    return rc;
}


/*
 * The MoE block shared by DeepSeek-V3, GLM-4-MoE, GLM-5 and DeepSeek-V3.2:
 * n_routed_experts scored by a sigmoid plus e_score_correction_bias for the
 * choice, grouped top-k (DeepseekV3Config / DeepseekV32Config default to 8
 * groups keeping 4, the GLM configs to 1 and 1), routed_scaling_factor,
 * n_shared_experts always-on experts. Layers before first_k_dense_replace are
 * dense (GLM-5: mlp_layer_types when given).
 */
static int deepseek_moe(const sy_json_reader *r, const json_t *root, int32_t dflt_first_dense, double dflt_scaling,
                        int32_t dflt_group, int32_t dflt_topk_group, sy_model_config *cfg)
{
    int32_t first_dense = 0;
    /* attribute_map num_local_experts -> n_routed_experts; GLM-5 and DeepSeek-V3.2 also re-route num_experts
     * in __post_init__, before the attribute_map alias is set. */
    static const char *const alias[] = {"num_experts", "num_local_experts"};
    const bool reroutes = cfg->arch == SY_ARCH_GLM_MOE_DSA || cfg->arch == SY_ARCH_DEEPSEEK_V32;
    int rc = read_routed_experts(r, root, "n_routed_experts", reroutes ? alias : alias + 1, reroutes ? 2 : 1, cfg);
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
        rc = sy__mjson_int(r, root, NULL, "topk_group", false, dflt_topk_group, 1, cfg->n_group, &cfg->topk_group);
    if (rc == SY_OK && cfg->topk_group > cfg->n_group) /* only a default can get here */
        rc = sy_err_set(r->err, SY_ERR_INVALID,
                        "%s: topk_group defaults to %d, more than n_group (%d): give topk_group explicitly", r->path,
                        cfg->topk_group, cfg->n_group);
    if (rc == SY_OK)
        rc = sy__mjson_int(r, root, NULL, "first_k_dense_replace", false, dflt_first_dense, 0, INT32_MAX,
                           &first_dense);
    if (rc == SY_OK) /* the MTP layers stored after the decoder layers (all four families have them) */
        rc = sy__mjson_int(r, root, NULL, "num_nextn_predict_layers", false, 0, 0, 1 << 10, &cfg->n_mtp_layers);
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
    return rc != SY_OK ? rc : deepseek_moe(r, root, 3, 2.5, 8, 4, cfg);
}

/* GLM-4-MoE: GQA with partial RoPE (default_partial_rotary 0.5, Glm4MoeConfig's
 * __post_init__ default) and DeepSeek's MoE block. */
static int glm4_moe_extra(const sy_json_reader *r, const json_t *root, sy_model_config *cfg)
{
    int rc = sy__mjson_bool(r, root, NULL, "use_qk_norm", false, &cfg->qk_norm);
    return rc != SY_OK ? rc : deepseek_moe(r, root, 1, 1.0, 1, 1, cfg);
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
    cfg->indexer_rope_interleave = true; /* GlmMoeDsaIndexer: apply_rotary_pos_emb_interleave */
    cfg->layer_has_indexer = calloc((size_t)cfg->n_layers, 1);
    if (!cfg->layer_has_indexer)
        return sy_err_set(r->err, SY_ERR_NOMEM, "%s: out of memory", r->path);
    /* GlmMoeDsaConfig.__post_init__: without indexer_types, index_topk_pattern ("FSSF...", or a list) gives
     * them, else every index_topk_freq-th layer from index_skip_topk_offset - 1 on is "full" (1, 2: all). */
    const char *src = "indexer_types";
    json_t *types = sy__mjson_field(root, src);
    if (!types && (types = sy__mjson_field(root, "index_topk_pattern")) != NULL)
        src = "index_topk_pattern";
    const char *pat = json_is_string(types) ? json_string_value(types) : NULL;
    int32_t freq = 1, offset = 2;
    if (!types && (rc = sy__mjson_int(r, root, NULL, "index_topk_freq", false, 1, INT32_MIN, INT32_MAX, &freq)) == SY_OK)
        rc = sy__mjson_int(r, root, NULL, "index_skip_topk_offset", false, 2, INT32_MIN + 1, INT32_MAX, &offset);
    if (rc != SY_OK)
        return rc;
    if (types && !(pat && (int64_t)strlen(pat) == cfg->n_layers) &&
        (!json_is_array(types) || (int64_t)json_array_size(types) != cfg->n_layers))
        return sy_err_set(r->err, SY_ERR_INVALID, "%s: field '%s' should list %d strings (\"full\" or "
                                                  "\"shared\")%s, found %s",
                          r->path, src, cfg->n_layers, pat ? " or be a string of as many F and S" : "",
                          sy__mjson_type_name(types));
    for (int i = 0; i < cfg->n_layers; i++) {
        const int64_t k = (int64_t)i - offset + 1;
        const char *t = pat ? (pat[i] == 'F' ? "full" : pat[i] == 'S' ? "shared" : NULL)
                        : types ? json_string_value(json_array_get(types, (size_t)i))
                        : (k > 0 ? k : 0) % (freq > 1 ? freq : 1) == 0 ? "full" : "shared";
        if (!t || (strcmp(t, "full") != 0 && strcmp(t, "shared") != 0) || (i == 0 && strcmp(t, "shared") == 0))
            return sy_err_set(r->err, SY_ERR_INVALID, "%s: %s should give %d layers \"full\" or "
                                                      "\"shared\" (the first \"full\"); element %d is not",
                              r->path, types ? src : "index_topk_freq / index_skip_topk_offset", cfg->n_layers, i);
        cfg->layer_has_indexer[i] = strcmp(t, "full") == 0;
    }
    return deepseek_moe(r, root, 3, 2.5, 1, 1, cfg);
}

/*
 * DeepSeek-V3.2 (DeepseekV32Config): GLM-5's MLA + DSA, but every layer runs
 * its own indexer (there is no indexer_types), the indexer's RoPE rotates
 * halves (DeepseekV32Indexer's apply_rotary_pos_emb) while the main
 * attention interleaves pairs, and the defaults differ: q_lora_rank 1536,
 * index_n_heads 64, 8 expert groups choosing 4.
 */
static int deepseek_v32_extra(const sy_json_reader *r, const json_t *root, sy_model_config *cfg)
{
    int rc = read_mla(r, root, false, cfg);
    if (rc == SY_OK && !json_object_get(root, "q_lora_rank"))
        cfg->q_lora_rank = 1536;
    if (rc == SY_OK && cfg->q_lora_rank <= 0)
        rc = sy_err_set(r->err, SY_ERR_INVALID, "%s: q_lora_rank should be a positive integer for deepseek_v32 "
                                                "(its indexer reads the query latent), found %s",
                        r->path, json_object_get(root, "q_lora_rank") ? "null or 0" : "nothing");
    if (rc == SY_OK)
        rc = sy__mjson_int(r, root, NULL, "index_n_heads", false, 64, 1, 1 << 16, &cfg->index_n_heads);
    if (rc == SY_OK)
        rc = sy__mjson_int(r, root, NULL, "index_head_dim", false, 128, cfg->qk_rope_dim, 1 << 16,
                           &cfg->index_head_dim);
    if (rc == SY_OK)
        rc = sy__mjson_int(r, root, NULL, "index_topk", false, 2048, 1, INT32_MAX, &cfg->index_topk);
    if (rc != SY_OK)
        return rc;
    cfg->rope_interleave = true;
    cfg->indexer_rope_interleave = false;
    cfg->layer_has_indexer = calloc((size_t)cfg->n_layers, 1);
    if (!cfg->layer_has_indexer)
        return sy_err_set(r->err, SY_ERR_NOMEM, "%s: out of memory", r->path);
    memset(cfg->layer_has_indexer, 1, (size_t)cfg->n_layers);
    return deepseek_moe(r, root, 3, 2.5, 8, 4, cfg);
}

/*
 * gpt-oss (GptOssConfig): every layer MoE (num_local_experts,
 * intermediate_size wide), softmax over the top-k router logits (= softmax
 * then renormalised top-k), biases on q/k/v/o (attention_bias, default
 * true), the router and the experts, learned sinks, the clamped SwiGLU, and
 * layer_types alternating sliding_attention / full_attention (default: even
 * layers slide). Without rope_scaling / rope_parameters the config class
 * means yarn factor 32 over 4096 positions, beta 32/1, truncate false.
 */
static int gptoss_extra(const sy_json_reader *r, const json_t *root, sy_model_config *cfg)
{
    static const char *const alias[] = {"num_experts"}; /* GptOssConfig.attribute_map */
    int rc = read_expert_count(r, root, "num_local_experts", alias, 1, 1, 128, cfg);
    if (rc == SY_OK)
        rc = sy__mjson_int(r, root, NULL, "num_experts_per_tok", false, 4, 1, cfg->n_experts, &cfg->top_k);
    if (rc == SY_OK)
        rc = sy__mjson_bool(r, root, NULL, "attention_bias", true, &cfg->attention_bias);
    if (rc == SY_OK)
        rc = sy__mjson_float(r, root, NULL, "swiglu_alpha", false, 1.702, 1e-6, 1e6, &cfg->swiglu_alpha);
    if (rc == SY_OK)
        rc = sy__mjson_float(r, root, NULL, "swiglu_limit", false, 7.0, 1e-6, 1e30, &cfg->swiglu_limit);
    const json_t *sw = json_object_get(root, "sliding_window");
    if (rc == SY_OK && !(sw && json_is_null(sw)))
        rc = sy__mjson_int(r, root, NULL, "sliding_window", false, 128, 0, INT32_MAX, &cfg->sliding_window);
    if (rc != SY_OK)
        return rc;
    cfg->moe_inter = cfg->intermediate;
    cfg->norm_topk_prob = true;
    cfg->moe_scoring = SY_MOE_SOFTMAX;
    cfg->o_bias = cfg->attention_bias;
    cfg->attn_sinks = cfg->router_bias = cfg->expert_bias = true;
    cfg->moe_activation = SY_MOE_ACT_SWIGLU_CLAMP;
    for (int i = 0; i < cfg->n_layers; i++)
        cfg->layer_is_moe[i] = 1;
    if (!sy__mjson_field(root, "rope_scaling") && !sy__mjson_field(root, "rope_parameters")) {
        cfg->rope_scaling = SY_ROPE_SCALING_YARN;
        cfg->rope_factor = 32.0f;
        cfg->rope_beta_fast = 32.0f;
        cfg->rope_beta_slow = 1.0f;
        cfg->rope_original_max_pos = 4096;
        cfg->rope_truncate = false;
        cfg->rope_mscale = cfg->rope_mscale_all_dim = 0.0f;
        cfg->rope_attention_factor = 0.0f;
    }
    const int32_t w = cfg->sliding_window;
    cfg->sliding_window = 0; /* per layer, below */
    cfg->layer_window = calloc((size_t)cfg->n_layers, sizeof *cfg->layer_window);
    if (!cfg->layer_window)
        return sy_err_set(r->err, SY_ERR_NOMEM, "%s: out of memory", r->path);
    json_t *types = sy__mjson_field(root, "layer_types");
    if (types && (!json_is_array(types) || (int64_t)json_array_size(types) != cfg->n_layers))
        return sy_err_set(r->err, SY_ERR_INVALID, "%s: field 'layer_types' should list %d strings "
                                                  "(\"sliding_attention\" or \"full_attention\"), found %s",
                          r->path, cfg->n_layers,
                          json_is_array(types) ? "a list of another length" : sy__mjson_type_name(types));
    for (int i = 0; i < cfg->n_layers; i++) {
        const char *t = types ? json_string_value(json_array_get(types, (size_t)i))
                              : (i + 1) % 2 ? "sliding_attention" : "full_attention";
        if (!t || (strcmp(t, "sliding_attention") != 0 && strcmp(t, "full_attention") != 0))
            return sy_err_set(r->err, SY_ERR_INVALID, "%s: layer_types[%d] should be \"sliding_attention\" or "
                                                      "\"full_attention\", found %s",
                              r->path, i, t ? t : sy__mjson_type_name(json_array_get(types, (size_t)i)));
        cfg->layer_window[i] = strcmp(t, "sliding_attention") == 0 && w < cfg->max_pos ? w : 0;
    }
    return SY_OK;
}

/*
 * Qwen2Config / Qwen3Config windows: use_sliding_window (default false)
 * keeps sliding_window (default 4096, null: none), else it is None; without
 * layer_types, layers i >= max_window_layers (default 28) slide when there
 * is a window (__post_init__); transformers 5 saves that list as
 * layer_types, which then decides. A "sliding_attention" layer without a
 * window is refused, as transformers' create_sliding_window_causal_mask
 * does. Equal windows everywhere stay one sliding_window (no layer_window,
 * so an ABI 1.0 attention plugin still serves them).
 */
static int qwen_windows(const sy_json_reader *r, const json_t *root, sy_model_config *cfg)
{
    bool use = false;
    int32_t w = 0, max_window_layers = 28;
    int rc = sy__mjson_bool(r, root, NULL, "use_sliding_window", false, &use);
    if (rc == SY_OK && use)
        rc = sy__mjson_int(r, root, NULL, "sliding_window", false, 4096, 1, INT32_MAX, &w);
    if (rc == SY_OK)
        rc = sy__mjson_int(r, root, NULL, "max_window_layers", false, 28, 0, INT32_MAX, &max_window_layers);
    if (rc != SY_OK)
        return rc;
    if (use && json_object_get(root, "sliding_window") && json_is_null(json_object_get(root, "sliding_window")))
        w = 0;
    json_t *types = sy__mjson_field(root, "layer_types");
    if (types && (!json_is_array(types) || (int64_t)json_array_size(types) != cfg->n_layers))
        return sy_err_set(r->err, SY_ERR_INVALID, "%s: field 'layer_types' should list %d strings "
                                                  "(\"sliding_attention\" or \"full_attention\"), found %s",
                          r->path, cfg->n_layers,
                          json_is_array(types) ? "a list of another length" : sy__mjson_type_name(types));
    int32_t *lw = calloc((size_t)cfg->n_layers, sizeof *lw);
    if (!lw)
        return sy_err_set(r->err, SY_ERR_NOMEM, "%s: out of memory", r->path);
    bool differ = false;
    for (int i = 0; i < cfg->n_layers; i++) {
        const char *t = types ? json_string_value(json_array_get(types, (size_t)i))
                              : w > 0 && i >= max_window_layers ? "sliding_attention" : "full_attention";
        if (!t || (strcmp(t, "sliding_attention") != 0 && strcmp(t, "full_attention") != 0)) {
            free(lw);
            return sy_err_set(r->err, SY_ERR_INVALID, "%s: layer_types[%d] should be \"sliding_attention\" or "
                                                      "\"full_attention\", found %s",
                              r->path, i, t ? t : sy__mjson_type_name(json_array_get(types, (size_t)i)));
        }
        const bool slides = strcmp(t, "sliding_attention") == 0;
        if (slides && w <= 0) {
            free(lw);
            return sy_err_set(r->err, SY_ERR_INVALID, "%s: layer_types[%d] is \"sliding_attention\", but there is no "
                                                      "window (use_sliding_window %s, sliding_window %s); transformers "
                                                      "refuses this too",
                              r->path, i, use ? "true" : "false or absent", use ? "null" : "ignored");
        }
        lw[i] = slides && w < cfg->max_pos ? w : 0; /* a window past max_position_embeddings never cuts */
        differ = differ || lw[i] != lw[0];
    }
    cfg->sliding_window = differ ? 0 : lw[0];
    if (differ)
        cfg->layer_window = lw;
    else
        free(lw);
    return SY_OK;
}

/* Qwen2 (Qwen2.5): q/k/v always biased, o_proj never (Qwen2Attention), no attention_bias field. */
static int qwen2_extra(const sy_json_reader *r, const json_t *root, sy_model_config *cfg)
{
    cfg->attention_bias = true;
    cfg->o_bias = false;
    return qwen_windows(r, root, cfg);
}

/* Dense Qwen3: attention_bias (default false) biases q/k/v and o_proj alike (Qwen3Attention); the q/k norms come
 * from the row's qk_norm, head_dim's default (128) from default_head_dim. */
static int qwen3_extra(const sy_json_reader *r, const json_t *root, sy_model_config *cfg)
{
    cfg->o_bias = cfg->attention_bias;
    return qwen_windows(r, root, cfg);
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

/* Multi-token prediction layers (model.layers.{n_layers + i}): their own
 * names beside a decoder layer's (DeepSeek-V3, GLM-4.5, GLM-5, V3.2). */
#define MTP_TENSORS                                                                                                   \
    [SY_ROLE_MTP_ENORM] = "model.layers.{L}.enorm.weight", [SY_ROLE_MTP_HNORM] = "model.layers.{L}.hnorm.weight",     \
    [SY_ROLE_MTP_EH_PROJ] = "model.layers.{L}.eh_proj.weight",                                                        \
    [SY_ROLE_MTP_HEAD_NORM] = "model.layers.{L}.shared_head.norm.weight",                                             \
    [SY_ROLE_MTP_HEAD] = "model.layers.{L}.shared_head.head.weight",                                                  \
    [SY_ROLE_MTP_EMBED] = "model.layers.{L}.embed_tokens.weight"

/* The DSA indexer (GLM-5, DeepSeek-V3.2). */
#define DSA_INDEXER_TENSORS                                                                                           \
    [SY_ROLE_IDX_WQ_B] = "model.layers.{L}.self_attn.indexer.wq_b.weight",                                            \
    [SY_ROLE_IDX_WK] = "model.layers.{L}.self_attn.indexer.wk.weight",                                                \
    [SY_ROLE_IDX_K_NORM] = "model.layers.{L}.self_attn.indexer.k_norm.weight",                                        \
    [SY_ROLE_IDX_K_NORM_B] = "model.layers.{L}.self_attn.indexer.k_norm.bias",                                        \
    [SY_ROLE_IDX_WPROJ] = "model.layers.{L}.self_attn.indexer.weights_proj.weight"

static const sy_arch_desc arch_table[] = {
    {
        .arch = SY_ARCH_LLAMA,
        .hf_name = "LlamaForCausalLM",
        .default_max_pos = 2048,
        .default_rms_eps = 1e-6,
        .default_rope_theta = 10000.0,
        .reads_attention_bias = true,
        .parse_extra = llama_extra,
        .tensors = {LLAMA_ATTN_TENSORS, LLAMA_MLP_TENSORS, [SY_ROLE_BO] = "model.layers.{L}.self_attn.o_proj.bias"},
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
                [SY_ROLE_BO] = "model.layers.{L}.self_attn.o_proj.bias",
            },
    },
    {
        .arch = SY_ARCH_DEEPSEEK_V3,
        .hf_name = "DeepseekV3ForCausalLM",
        .default_max_pos = 4096,
        .default_rms_eps = 1e-6,
        .default_rope_theta = 10000.0,
        .parse_extra = deepseek_v3_extra,
        .tensors = {MLA_TENSORS, LLAMA_MLP_TENSORS, DEEPSEEK_MOE_TENSORS, MTP_TENSORS},
    },
    {
        .arch = SY_ARCH_GLM4_MOE,
        .hf_name = "Glm4MoeForCausalLM",
        .default_max_pos = 131072,
        .default_rms_eps = 1e-5,
        .default_rope_theta = 10000.0,
        .default_partial_rotary = 0.5,
        .reads_attention_bias = true,
        .parse_extra = glm4_moe_extra,
        .tensors =
            {
                LLAMA_ATTN_TENSORS,
                LLAMA_MLP_TENSORS,
                DEEPSEEK_MOE_TENSORS,
                QK_NORM_TENSORS,
                MTP_TENSORS,
            },
    },
    {
        .arch = SY_ARCH_GLM_MOE_DSA,
        .hf_name = "GlmMoeDsaForCausalLM",
        .default_max_pos = 202752,
        .default_rms_eps = 1e-5,
        .default_rope_theta = 10000.0,
        .parse_extra = glm_moe_dsa_extra,
        .tensors = {MLA_TENSORS, LLAMA_MLP_TENSORS, DEEPSEEK_MOE_TENSORS, DSA_INDEXER_TENSORS, MTP_TENSORS},
    },
    {
        .arch = SY_ARCH_DEEPSEEK_V32,
        .hf_name = "DeepseekV32ForCausalLM",
        .default_max_pos = 163840,
        .default_rms_eps = 1e-6,
        .default_rope_theta = 10000.0,
        .parse_extra = deepseek_v32_extra,
        .tensors = {MLA_TENSORS, LLAMA_MLP_TENSORS, DEEPSEEK_MOE_TENSORS, DSA_INDEXER_TENSORS, MTP_TENSORS},
    },
    {
        .arch = SY_ARCH_GPT_OSS,
        .hf_name = "GptOssForCausalLM",
        .default_max_pos = 131072,
        .default_rms_eps = 1e-5,
        .default_rope_theta = 150000.0,
        .parse_extra = gptoss_extra,
        .bind_experts = sy__gptoss_bind_experts,
        .tensors =
            {
                LLAMA_ATTN_TENSORS,
                [SY_ROLE_BO] = "model.layers.{L}.self_attn.o_proj.bias",
                [SY_ROLE_SINKS] = "model.layers.{L}.self_attn.sinks",
                [SY_ROLE_ROUTER] = "model.layers.{L}.mlp.router.weight",
                [SY_ROLE_ROUTER_BIAS] = "model.layers.{L}.mlp.router.bias",
            },
    },
    {
        .arch = SY_ARCH_QWEN2,
        .hf_name = "Qwen2ForCausalLM",
        .default_max_pos = 32768,
        .default_rms_eps = 1e-6,
        .default_rope_theta = 10000.0,
        .parse_extra = qwen2_extra,
        .tensors = {LLAMA_ATTN_TENSORS, LLAMA_MLP_TENSORS},
    },
    {
        .arch = SY_ARCH_QWEN3,
        .hf_name = "Qwen3ForCausalLM",
        .default_max_pos = 32768,
        .default_rms_eps = 1e-6,
        .default_rope_theta = 10000.0,
        .default_head_dim = 128,
        .qk_norm = true,
        .reads_attention_bias = true,
        .parse_extra = qwen3_extra,
        .tensors =
            {
                LLAMA_ATTN_TENSORS,
                [SY_ROLE_BO] = "model.layers.{L}.self_attn.o_proj.bias",
                QK_NORM_TENSORS,
                LLAMA_MLP_TENSORS,
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
