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
    [SY_ROLE_WQ] = {"query projection", SY_SCOPE_LAYER, SY_WHEN_ALWAYS, {SY_DIM_Q, SY_DIM_HIDDEN}},
    [SY_ROLE_WK] = {"key projection", SY_SCOPE_LAYER, SY_WHEN_ALWAYS, {SY_DIM_KV, SY_DIM_HIDDEN}},
    [SY_ROLE_WV] = {"value projection", SY_SCOPE_LAYER, SY_WHEN_ALWAYS, {SY_DIM_KV, SY_DIM_HIDDEN}},
    [SY_ROLE_WO] = {"attention output projection", SY_SCOPE_LAYER, SY_WHEN_ALWAYS, {SY_DIM_HIDDEN, SY_DIM_Q}},
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
    case SY_DIM_KV: return (int64_t)cfg->n_kv_heads * cfg->head_dim;
    case SY_DIM_HEAD: return cfg->head_dim;
    case SY_DIM_INTER: return cfg->intermediate;
    case SY_DIM_MOE_INTER: return cfg->moe_inter;
    case SY_DIM_EXPERTS: return cfg->n_experts;
    case SY_DIM_COUNT: break;
    }
    return 0;
}

const char *sy__model_dim_name(sy_dim d)
{
    switch (d) {
    case SY_DIM_NONE: return "";
    case SY_DIM_HIDDEN: return "hidden_size";
    case SY_DIM_VOCAB: return "vocab_size";
    case SY_DIM_Q: return "num_attention_heads*head_dim";
    case SY_DIM_KV: return "num_key_value_heads*head_dim";
    case SY_DIM_HEAD: return "head_dim";
    case SY_DIM_INTER: return "intermediate_size";
    case SY_DIM_MOE_INTER: return "expert intermediate size";
    case SY_DIM_EXPERTS: return "number of experts";
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

/* Layer i is MoE when it is not in mlp_only_layers, there are experts, and
 * (i + 1) % decoder_sparse_step == 0 (transformers' Qwen3MoeDecoderLayer). */
static int qwen3moe_extra(const sy_json_reader *r, const json_t *root, sy_model_config *cfg)
{
    int rc = sy__mjson_int(r, root, NULL, "num_experts", true, 0, 0, MAX_EXPERTS, &cfg->n_experts);
    bool moe = cfg->n_experts > 0;
    if (rc == SY_OK)
        rc = sy__mjson_int(r, root, NULL, "num_experts_per_tok", moe, 0, moe ? 1 : 0, cfg->n_experts, &cfg->top_k);
    if (rc == SY_OK)
        rc = sy__mjson_int(r, root, NULL, "moe_intermediate_size", moe, 0, moe ? 1 : 0, INT32_MAX, &cfg->moe_inter);
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
                [SY_ROLE_Q_NORM] = "model.layers.{L}.self_attn.q_norm.weight",
                [SY_ROLE_K_NORM] = "model.layers.{L}.self_attn.k_norm.weight",
                [SY_ROLE_ROUTER] = "model.layers.{L}.mlp.gate.weight",
                [SY_ROLE_EXP_GATE] = "model.layers.{L}.mlp.experts.{E}.gate_proj.weight",
                [SY_ROLE_EXP_UP] = "model.layers.{L}.mlp.experts.{E}.up_proj.weight",
                [SY_ROLE_EXP_DOWN] = "model.layers.{L}.mlp.experts.{E}.down_proj.weight",
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
