/*
 * A Hugging Face checkpoint as the core sees it: the parsed config.json and
 * host views (mmap'd, in the checkpoint's own dtype) of every tensor the
 * forward pass needs, bound by role per layer.
 *
 * Architectures are rows of a table (model_arch.c): tensor name patterns
 * per role and the config fields that matter, so a new family is a table
 * entry plus whatever kernels it needs.
 */
#ifndef SY_MODEL_H
#define SY_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "switchyard/plugin.h"

typedef enum sy_arch {
    SY_ARCH_LLAMA = 0, /* LlamaForCausalLM (also Mistral) */
    SY_ARCH_MIXTRAL,   /* MixtralForCausalLM */
    SY_ARCH_QWEN3_MOE, /* Qwen3MoeForCausalLM */
    SY_ARCH_DEEPSEEK_V3, /* DeepseekV3ForCausalLM: MLA, shared experts, sigmoid grouped routing */
    SY_ARCH_GLM4_MOE,    /* Glm4MoeForCausalLM: GQA + partial RoPE, shared experts, sigmoid routing */
    SY_ARCH_GLM_MOE_DSA, /* GlmMoeDsaForCausalLM (GLM-5): MLA + the DSA sparse-attention indexer */
    SY_ARCH_DEEPSEEK_V32, /* DeepseekV32ForCausalLM (DeepSeek-V3.2): MLA + a DSA indexer in every layer */
    SY_ARCH_GPT_OSS,      /* GptOssForCausalLM: attention sinks, alternating sliding layers, biased clamped-SwiGLU experts */
    SY_ARCH_QWEN2,        /* Qwen2ForCausalLM (Qwen2.5): q/k/v biases, sliding windows from max_window_layers up */
    SY_ARCH_QWEN3,        /* Qwen3ForCausalLM (dense Qwen3): per-head q/k RMSNorm, head_dim apart from hidden/heads */
    SY_ARCH_COUNT
} sy_arch;

typedef enum sy_rope_scaling_type {
    SY_ROPE_SCALING_NONE = 0,
    SY_ROPE_SCALING_LINEAR,
    SY_ROPE_SCALING_LLAMA3,
    SY_ROPE_SCALING_YARN /* read for every family; the engine computes it where sy_rope_check allows */
} sy_rope_scaling_type;

typedef struct sy_model_config {
    sy_arch arch;
    char arch_name[64];  /* architectures[0] as written */
    char model_type[64];

    int32_t hidden;
    int32_t n_layers;
    int32_t n_heads;
    int32_t n_kv_heads;
    int32_t head_dim; /* head_dim field, else hidden / n_heads */
    int32_t intermediate;
    int32_t vocab;
    int32_t max_pos;
    float rms_eps;
    bool tie_embeddings;
    bool attention_bias; /* q/k/v biases */
    bool qk_norm;        /* per-head RMSNorm of q and k (Qwen3) */

    /* RoPE */
    float rope_theta;
    int32_t rotary_dim; /* head_dim unless partial_rotary_factor says less */
    sy_rope_scaling_type rope_scaling;
    float rope_factor;
    float rope_low_freq_factor;
    float rope_high_freq_factor;
    int32_t rope_original_max_pos;
    float rope_beta_fast, rope_beta_slow;       /* yarn */
    float rope_mscale, rope_mscale_all_dim;     /* yarn; 0: absent */
    bool rope_truncate;          /* yarn: floor/ceil the correction range (transformers' default true; gpt-oss false) */
    float rope_attention_factor; /* yarn: cos/sin scale; 0: derived from factor (and mscale) as transformers does */
    bool rope_interleave; /* rotate pairs (2i, 2i+1) instead of halves (MLA families) */
    char rope_type_field[40]; /* where rope_scaling's type was read ("rope_parameters.rope_type"), for messages */

    /* MoE (n_experts == 0: dense) */
    int32_t n_experts;
    int32_t top_k;
    int32_t moe_inter;
    bool norm_topk_prob;
    int32_t decoder_sparse_step; /* layer i is MoE when (i+1) % step == 0 */
    uint8_t *layer_is_moe;       /* [n_layers], derived from step and mlp_only_layers */
    int32_t moe_scoring;         /* sy_moe_scoring: softmax, or sigmoid (DeepSeek-V3, GLM) */
    bool moe_score_bias;         /* the router has e_score_correction_bias (selection only) */
    float routed_scaling_factor; /* 1 when unused */
    int32_t n_group, topk_group; /* grouped top-k; n_group <= 1: none */
    int32_t n_shared_experts;    /* a dense MLP of n_shared*moe_inter added to each MoE layer's output */

    /* Multi-head latent attention (DeepSeek-V3, GLM-5); head_dim is then
     * qk_nope_dim + qk_rope_dim and rotary_dim is qk_rope_dim. */
    bool mla;
    int32_t q_lora_rank; /* 0: a plain q_proj */
    int32_t kv_lora_rank, qk_nope_dim, qk_rope_dim, v_head_dim;

    /* DSA indexer (GLM-5): index_topk past positions per query, chosen by a
     * small multi-head scorer; 0 index_topk: none. */
    int32_t index_n_heads, index_head_dim, index_topk;
    uint8_t *layer_has_indexer; /* [n_layers]: 1 runs its own indexer, 0 reuses the previous one's choice */

    /* Sliding-window attention span in tokens (Mistral, Mixtral); 0: full
     * attention (also when the window covers max_pos anyway). */
    int32_t sliding_window;
    /* Per-layer windows [n_layers] (0: full attention in that layer) when
     * layers differ (gpt-oss layer_types, Qwen2 max_window_layers); NULL:
     * sliding_window holds for every layer. */
    int32_t *layer_window;

    /* gpt-oss: learned attention sinks per head, biases on o_proj, the
     * router and the experts, and the clamped SwiGLU (sy_moe_activation). */
    bool attn_sinks;
    bool o_bias;
    bool router_bias;
    bool expert_bias;
    int32_t moe_activation;
    float swiglu_alpha, swiglu_limit;

    /* DeepSeek-V3 / GLM multi-token prediction: num_nextn_predict_layers
     * layers stored after the last decoder layer (0: none). */
    int32_t n_mtp_layers;
    /* DSA indexer RoPE: interleaved pairs (GLM-5) or halves (DeepSeek-V3.2). */
    bool indexer_rope_interleave;

    /* Special token ids from config.json / generation_config.json; -1 if none. */
    int32_t bos_id;
    int32_t eos_ids[8];
    int32_t n_eos;

    sy_dtype dtype; /* torch_dtype, informational */
} sy_model_config;

/* One layer's weights; unused roles have data == NULL. */
typedef struct sy_layer_weights {
    sy_tensor attn_norm; /* [hidden] */
    sy_tensor wq;        /* [n_heads*head_dim, hidden] */
    sy_tensor wk;        /* [n_kv_heads*head_dim, hidden] */
    sy_tensor wv;        /* [n_kv_heads*head_dim, hidden] */
    sy_tensor wo;        /* [hidden, n_heads*head_dim] */
    sy_tensor bq, bk, bv; /* attention_bias only */
    sy_tensor q_norm, k_norm; /* [head_dim], qk_norm only */
    sy_tensor ffn_norm; /* [hidden] */

    /* dense MLP */
    sy_tensor w_gate; /* [intermediate, hidden] */
    sy_tensor w_up;   /* [intermediate, hidden] */
    sy_tensor w_down; /* [hidden, intermediate] */

    /* MoE */
    bool is_moe;
    sy_tensor router;      /* [n_experts, hidden] */
    sy_tensor *exp_gate;   /* [n_experts] of [moe_inter, hidden] */
    sy_tensor *exp_up;     /* [n_experts] of [moe_inter, hidden] */
    sy_tensor *exp_down;   /* [n_experts] of [hidden, moe_inter] */
    sy_tensor score_bias;  /* [n_experts] e_score_correction_bias */
    sy_tensor sh_gate, sh_up; /* [n_shared*moe_inter, hidden] shared experts */
    sy_tensor sh_down;        /* [hidden, n_shared*moe_inter] */

    /* MLA (wq is then q_proj [n_heads*(nope+rope), hidden] when q_lora_rank is 0) */
    sy_tensor q_a, q_a_norm, q_b; /* [q_lora, hidden], [q_lora], [n_heads*(nope+rope), q_lora] */
    sy_tensor kv_a;               /* [kv_lora + rope, hidden] (kv_a_proj_with_mqa) */
    sy_tensor kv_a_norm;          /* [kv_lora] */
    sy_tensor kv_b;               /* [n_heads*(nope + v_head_dim), kv_lora] */
    /* DSA indexer */
    sy_tensor idx_wq_b;           /* [index_n_heads*index_head_dim, q_lora] */
    sy_tensor idx_wk;             /* [index_head_dim, hidden] */
    sy_tensor idx_k_norm, idx_k_norm_b; /* LayerNorm [index_head_dim] weight and bias */
    sy_tensor idx_wproj;          /* [index_n_heads, hidden] (weights_proj) */
    /* gpt-oss */
    sy_tensor bo;                 /* [hidden] o_proj bias (cfg.o_bias) */
    sy_tensor sinks;              /* [n_heads] attention-sink logits (cfg.attn_sinks) */
    sy_tensor router_bias;        /* [n_experts] (cfg.router_bias) */
    sy_tensor *exp_gate_bias;     /* [n_experts] of [moe_inter] (cfg.expert_bias) */
    sy_tensor *exp_up_bias;       /* [n_experts] of [moe_inter] */
    sy_tensor *exp_down_bias;     /* [n_experts] of [hidden] */
} sy_layer_weights;

/*
 * One multi-token-prediction layer (DeepSeek-V3, GLM-4.5, GLM-5): stored as
 * model.layers.{n_layers + i}.*, it predicts a further token from the main
 * model's last hidden state h and the next token's embedding e:
 * block(eh_proj([enorm(e); hnorm(h)])), then shared_head.norm and a head.
 */
typedef struct sy_mtp_layer {
    sy_tensor enorm, hnorm; /* [hidden] */
    sy_tensor eh_proj;      /* [hidden, 2*hidden] */
    sy_tensor head_norm;    /* [hidden] shared_head.norm */
    sy_tensor head;         /* [vocab, hidden] shared_head.head; the model's lm_head when the checkpoint has none */
    sy_tensor embed;        /* [vocab, hidden] embed_tokens (DeepSeek-V3); the model's embedding when absent */
    sy_layer_weights block; /* the decoder layer, with an MoE MLP when the model has experts */
} sy_mtp_layer;

typedef struct sy_safetensors sy_safetensors; /* safetensors.h */
typedef struct sy_model_quant sy_model_quant; /* model_quant.h */

typedef struct sy_model {
    char dir[4096];
    sy_model_config cfg;
    sy_safetensors *st; /* owns the mmaps behind every view below */
    sy_model_quant *quant; /* the checkpoint's quantisation scheme (method NONE for float checkpoints) */

    sy_tensor embed;      /* [vocab, hidden] */
    sy_tensor final_norm; /* [hidden] */
    sy_tensor lm_head;    /* [vocab, hidden]; == embed when tied */
    sy_layer_weights *layers; /* [n_layers] */
    /* [n_mtp] MTP layers, bound only when the load asked for them (sy_model_load_opts.load_mtp);
     * otherwise n_mtp is 0 and their tensors are never read (cfg.n_mtp_layers says how many exist). */
    sy_mtp_layer *mtp;
    int32_t n_mtp;

    /* Buffers the loader made (gpt-oss's de-interleaved experts: model_gptoss.c), freed with the model. */
    void **owned;
    size_t n_owned, cap_owned;

    uint64_t n_params;
    uint64_t weight_bytes;
} sy_model;

/* Load progress callback: done/total tensors and bytes. */
typedef void (*sy_load_progress_fn)(void *arg, size_t tensors_done, size_t tensors_total, uint64_t bytes_done,
                                    uint64_t bytes_total);

/*
 * Parses <dir>/config.json into cfg. Errors name the field and what was
 * expected. Returns SY_OK or an sy_status.
 */
int sy_model_config_load(const char *dir, sy_model_config *cfg, sy_err *err);
void sy_model_config_free(sy_model_config *cfg);

/*
 * Loads a checkpoint directory: config, safetensors (single file or sharded
 * index), binds every tensor by role and checks its shape. progress may be
 * NULL. On failure *out is NULL and err names the tensor or field.
 */
int sy_model_load(const char *dir, sy_load_progress_fn progress, void *progress_arg, sy_model **out, sy_err *err);

typedef struct sy_model_load_opts {
    sy_load_progress_fn progress; /* may be NULL */
    void *progress_arg;
    /* Bind the cfg.n_mtp_layers MTP layers too (speculative decoding). When
     * false their tensors are skipped without a byte read, and a shard that
     * holds nothing else is not even opened. */
    bool load_mtp;
} sy_model_load_opts;

/* sy_model_load with options; opts NULL means all defaults. */
int sy_model_load_with(const char *dir, const sy_model_load_opts *opts, sy_model **out, sy_err *err);
void sy_model_free(sy_model *m);

/*
 * The checkpoint's name of a view bound in m (for prepare_weight and
 * messages), matched by data pointer; NULL if t is not one of m's views.
 */
const char *sy_model_tensor_name(const sy_model *m, const sy_tensor *t);

/* The name architectures[0] must have for arch, e.g. "LlamaForCausalLM". */
const char *sy_arch_name(sy_arch a);

#endif
