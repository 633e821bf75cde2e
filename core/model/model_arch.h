/*
 * Architecture table (private to core/model).
 *
 * A tensor's role (query projection, expert up projection, ...) is an enum
 * with one generic description: which part of the model it belongs to
 * (model / layer / expert), when it is needed (always, only untied, only in
 * MoE layers, ...), its shape in terms of config dimensions, and where it
 * lands in sy_model. Each architecture is a row: the checkpoint's name for
 * every role it has ("{L}" is the layer index, "{E}" the expert index), its
 * config defaults, and a hook that reads its family-specific config fields
 * (MoE sizes, which layers are MoE).
 *
 * Adding a family means: new roles and dimensions here, their slots in
 * sy_layer_weights, config fields in sy_model_config, and one more row with
 * its hook (DeepSeek-V3, GLM-4-MoE and GLM-5 were added that way).
 */
#ifndef SY_MODEL_ARCH_H
#define SY_MODEL_ARCH_H

#include <jansson.h>
#include <stdbool.h>

#include "model/model.h"
#include "model/model_json.h"
#include "model/safetensors.h"

typedef enum sy_role {
    /* model scope */
    SY_ROLE_EMBED = 0,
    SY_ROLE_FINAL_NORM,
    SY_ROLE_LM_HEAD,
    /* layer scope */
    SY_ROLE_ATTN_NORM,
    SY_ROLE_WQ,
    SY_ROLE_WK,
    SY_ROLE_WV,
    SY_ROLE_WO,
    SY_ROLE_BQ,
    SY_ROLE_BK,
    SY_ROLE_BV,
    SY_ROLE_Q_NORM,
    SY_ROLE_K_NORM,
    SY_ROLE_FFN_NORM,
    SY_ROLE_GATE,
    SY_ROLE_UP,
    SY_ROLE_DOWN,
    SY_ROLE_ROUTER,
    SY_ROLE_SCORE_BIAS,
    SY_ROLE_SH_GATE,
    SY_ROLE_SH_UP,
    SY_ROLE_SH_DOWN,
    SY_ROLE_Q_A,
    SY_ROLE_Q_A_NORM,
    SY_ROLE_Q_B,
    SY_ROLE_KV_A,
    SY_ROLE_KV_A_NORM,
    SY_ROLE_KV_B,
    SY_ROLE_IDX_WQ_B,
    SY_ROLE_IDX_WK,
    SY_ROLE_IDX_K_NORM,
    SY_ROLE_IDX_K_NORM_B,
    SY_ROLE_IDX_WPROJ,
    SY_ROLE_BO,          /* gpt-oss o_proj bias */
    SY_ROLE_SINKS,       /* gpt-oss attention sinks */
    SY_ROLE_ROUTER_BIAS, /* gpt-oss router bias */
    /* multi-token prediction layers only (model.layers.{n_layers + i}) */
    SY_ROLE_MTP_ENORM,
    SY_ROLE_MTP_HNORM,
    SY_ROLE_MTP_EH_PROJ,
    SY_ROLE_MTP_HEAD_NORM,
    SY_ROLE_MTP_HEAD,
    SY_ROLE_MTP_EMBED,
    /* expert scope */
    SY_ROLE_EXP_GATE,
    SY_ROLE_EXP_UP,
    SY_ROLE_EXP_DOWN,
    SY_ROLE_COUNT
} sy_role;

typedef enum sy_role_scope { SY_SCOPE_MODEL, SY_SCOPE_LAYER, SY_SCOPE_EXPERT } sy_role_scope;

/* When a role's tensor must be present. */
typedef enum sy_role_when {
    SY_WHEN_ALWAYS,
    SY_WHEN_UNTIED,    /* tie_word_embeddings false */
    SY_WHEN_ATTN_BIAS, /* attention_bias true */
    SY_WHEN_QK_NORM,   /* cfg.qk_norm */
    SY_WHEN_DENSE,     /* a layer with a dense MLP */
    SY_WHEN_MOE,       /* an MoE layer */
    SY_WHEN_Q_PROJ,    /* a plain query projection: not MLA with q_lora_rank */
    SY_WHEN_GQA,       /* per-head k/v projections: not MLA */
    SY_WHEN_MLA,       /* MLA */
    SY_WHEN_MLA_QLORA, /* MLA with q_lora_rank */
    SY_WHEN_SCORE_BIAS, /* an MoE layer whose router has e_score_correction_bias */
    SY_WHEN_SHARED,    /* an MoE layer with n_shared_experts > 0 */
    SY_WHEN_INDEXER,   /* a layer that runs its own DSA indexer */
    SY_WHEN_O_BIAS,    /* cfg.o_bias */
    SY_WHEN_SINKS,     /* cfg.attn_sinks */
    SY_WHEN_ROUTER_BIAS, /* an MoE layer with cfg.router_bias */
    SY_WHEN_MTP,         /* an MTP layer (index >= n_layers) */
    SY_WHEN_MTP_IF_PRESENT /* an MTP layer's own copy of a model tensor: bound when the checkpoint has it */
} sy_role_when;

/* Config dimensions a shape is made of. */
typedef enum sy_dim {
    SY_DIM_NONE = 0,
    SY_DIM_HIDDEN,
    SY_DIM_VOCAB,
    SY_DIM_Q,  /* n_heads * head_dim (MLA: head_dim = qk_nope + qk_rope) */
    SY_DIM_O,  /* attention output width: n_heads * (MLA ? v_head_dim : head_dim) */
    SY_DIM_KV, /* n_kv_heads * head_dim */
    SY_DIM_HEAD,
    SY_DIM_INTER,
    SY_DIM_MOE_INTER,
    SY_DIM_EXPERTS,
    SY_DIM_SHARED_INTER, /* n_shared_experts * moe_inter */
    SY_DIM_Q_LORA,
    SY_DIM_KV_LORA,
    SY_DIM_KV_A,         /* kv_lora_rank + qk_rope_head_dim */
    SY_DIM_KV_B,         /* n_heads * (qk_nope_head_dim + v_head_dim) */
    SY_DIM_IDX_Q,        /* index_n_heads * index_head_dim */
    SY_DIM_IDX_HEAD,
    SY_DIM_IDX_HEADS,
    SY_DIM_HEADS,        /* num_attention_heads */
    SY_DIM_2HIDDEN,      /* 2 * hidden_size: the MTP projection's input [embedding; hidden state] */
    SY_DIM_COUNT
} sy_dim;

#define SY_ROLE_MAX_DIMS 2

typedef struct sy_role_desc {
    const char *what; /* for messages: "query projection" */
    sy_role_scope scope;
    sy_role_when when;
    sy_dim shape[SY_ROLE_MAX_DIMS]; /* SY_DIM_NONE ends it */
} sy_role_desc;

struct sy_expert_binder;

typedef struct sy_arch_desc {
    sy_arch arch;
    const char *hf_name; /* architectures[0] */
    /* Defaults of the family's transformers config class. */
    int32_t default_max_pos;
    double default_rms_eps;
    double default_rope_theta;
    /* partial_rotary_factor when config.json gives none (Glm4MoeConfig: 0.5); 0 means 1, the whole head */
    double default_partial_rotary;
    /* head_dim when config.json gives none (Qwen3Config: 128); 0: hidden_size / num_attention_heads */
    int32_t default_head_dim;
    bool qk_norm;
    bool reads_attention_bias; /* the config's attention_bias field applies */
    /*
     * Family-specific config: MoE sizes and routing, which layers are MoE
     * (cfg->layer_is_moe, already allocated and zeroed), sliding window.
     * Runs after the generic fields are read.
     */
    int (*parse_extra)(const sy_json_reader *r, const json_t *root, sy_model_config *cfg);
    /* Checkpoint name per role; NULL: the family has no such tensor. */
    const char *tensors[SY_ROLE_COUNT];
    /*
     * Non-NULL: the family stores its routed experts in fused tensors
     * (gpt-oss); the expert-scope roles are not looked up by name, this
     * hook fills the layer's expert views instead (model_gptoss.c).
     */
    int (*bind_experts)(struct sy_expert_binder *b, int layer);
} sy_arch_desc;

/*
 * What a bind_experts hook gets from the loader: the model, and mark(),
 * which records a checkpoint entry as read (fault_in: also page it in with
 * the other bound tensors and count its bytes; false for an entry the
 * hook copied and released itself).
 */
typedef struct sy_expert_binder {
    sy_model *m;
    const char *file_hint; /* for messages */
    int (*mark)(struct sy_expert_binder *b, const sy_st_entry *e, bool fault_in);
    void *ctx;
    sy_err *err;
} sy_expert_binder;

/* gpt-oss (model_gptoss.c): the fused experts of one layer, both checkpoint layouts. */
int sy__gptoss_bind_experts(sy_expert_binder *b, int layer);
/* Takes ownership of p (freed with the model); on failure frees p. */
int sy__model_own(sy_model *m, void *p, sy_err *err);

const sy_role_desc *sy__model_role_desc(sy_role r);
/* NULL if hf_name is not a supported architectures[0]. */
const sy_arch_desc *sy__model_arch_find(const char *hf_name);
/* Writes the comma-separated list of supported architectures[0] names. */
void sy__model_arch_supported(char *buf, size_t cap);

/* Whether role r is needed for layer (ignored for model scope). Layers
 * n_layers .. n_layers + n_mtp_layers - 1 are the MTP layers: an MoE MLP
 * whenever the model has experts, an indexer whenever it has a DSA indexer. */
bool sy__model_role_needed(const sy_model_config *cfg, sy_role r, int layer);
/* Value and config spelling ("num_attention_heads*head_dim") of a dimension. */
int64_t sy__model_dim_value(const sy_model_config *cfg, sy_dim d);
const char *sy__model_dim_name(const sy_model_config *cfg, sy_dim d);
/* Expands "{L}" and "{E}" in pattern; -1 if it does not fit. */
int sy__model_tensor_name(char *out, size_t cap, const char *pattern, int layer, int expert);
/* Where role r of layer / expert lives in m. */
sy_tensor *sy__model_role_slot(sy_model *m, sy_role r, int layer, int expert);

#endif
