/*
 * sy-mkmodel: writes seeded synthetic Hugging Face checkpoints (config,
 * safetensors weights, a byte-level BPE tokenizer) for tests and benchmarks.
 *
 * Everything is a pure function of the arguments: the same arguments give
 * byte-identical files on any IEEE-754 machine (the normal sampler uses no
 * libm function whose rounding could differ between C libraries).
 */
#ifndef SY_MKMODEL_H
#define SY_MKMODEL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

typedef enum mk_arch { MK_LLAMA, MK_MIXTRAL, MK_QWEN3_MOE, MK_DEEPSEEK_V3, MK_GLM4_MOE, MK_GLM_MOE_DSA, MK_DEEPSEEK_V32,
               MK_GPT_OSS, MK_MISTRAL, MK_QWEN2, MK_QWEN3 } mk_arch;

/* DeepSeek-V3 / GLM-4-MoE / GLM-5 fields (zero for the other families). */
typedef struct mk_ds {
    int n_shared, first_dense, n_group, topk_group;
    double routed_scaling;
    int q_lora, kv_lora, nope, rope, v_head; /* MLA (deepseek_v3, glm_moe_dsa) */
    int yarn;                                /* deepseek_v3: rope_scaling yarn, factor 4 over 128 positions */
    int partial_rotary_half, qk_norm, attn_bias; /* glm4_moe */
    int index_heads, index_head_dim, index_topk; /* glm_moe_dsa */
    int shared_indexer_last;                 /* glm_moe_dsa: the last layer reuses the previous layer's top-k */
    int mtp_layers;                          /* num_nextn_predict_layers: MTP layers after the decoder layers */
} mk_ds;
/* gpt-oss fields (gptoss.c). */
typedef struct mk_oss {
    int window;          /* sliding_window of the even (sliding_attention) layers */
    double swiglu_limit; /* the experts' clamp */
    int mxfp4;           /* --experts-layout mxfp4: _blocks/_scales instead of the fused float tensors */
} mk_oss;
typedef enum mk_dtype { MK_F32, MK_BF16, MK_F16 } mk_dtype;

/* The logit standard deviation that lm_head's init aims at. */
#define MK_LM_HEAD_GAIN 3.0
/* 256 byte tokens + <|endoftext|>, <|im_start|>, <|im_end|>. */
#define MK_MIN_VOCAB 259
#define MK_MAX_VOCAB 1000000
#define MK_MAX_LAYERS 4096

typedef struct mk_spec {
    mk_arch arch;
    int hidden;
    int layers;
    int heads;
    int kv_heads;
    int head_dim; /* 0 until resolved: hidden / heads */
    int ffn;      /* dense MLP width (llama, qwen3_moe's mlp_only layers) */
    int vocab;
    int experts;   /* 0 for llama */
    int top_k;
    int moe_ffn;   /* expert width; mixtral's intermediate_size */
    int max_pos;
    mk_dtype dtype;
    uint64_t seed;
    int tie;
    int shards; /* 1: model.safetensors; N > 1: N shards + index */
    double rope_theta;
    double rms_eps;
    int rope_llama3;     /* rope_scaling = Llama 3.1's llama3 parameters */
    int norm_topk_prob;  /* qwen3_moe */
    int sparse_step;     /* qwen3_moe decoder_sparse_step */
    unsigned char mlp_only[MK_MAX_LAYERS]; /* qwen3_moe mlp_only_layers */
    mk_ds ds;
    mk_oss oss;
    /* mistral, mixtral, qwen2, qwen3 */
    int sliding_window;    /* 0: none (sliding_window null; qwen: use_sliding_window false) */
    int max_window_layers; /* qwen2 / qwen3: layers i >= this slide (max_window_layers) */
    int attn_bias;         /* qwen3: attention_bias (q/k/v and o_proj biases) */
    int quant; /* mk_quant: how linear layers are stored (quant.c) */
} mk_spec;

/* ---- quant.c: FP8 and NVFP4 checkpoints ---- */
enum mk_quant { MK_Q_NONE, MK_Q_FP8, MK_Q_FP8_TENSOR, MK_Q_NVFP4, MK_Q_NVFP4_EXPERTS };
/* --quant value ("none", "fp8", "fp8-tensor", "nvfp4", "nvfp4-experts"); 0 or -1. */
int mk_quant_parse(const char *v, int *out);
const char *mk_quant_name(int q);
/* Quantised presets: the float preset each starts from (NULL: not one), then what it changes. */
const char *mk_quant_preset_base(const char *name);
void mk_quant_preset_apply(const char *name, mk_spec *s);
void mk_quant_presets_list(FILE *f);
/* model.safetensors with quantised linears, and the quantisation config; 0 or -1 with err. */
int mk_write_quant_weights(const mk_spec *s, const char *dir, char *err, size_t errcap);

/* deepseek_v3, glm4_moe, glm_moe_dsa or deepseek_v32 (the DeepseekV3MoE block). */
int mk_is_deepseek_family(const mk_spec *s);
/* MLA attention: deepseek_v3, glm_moe_dsa, deepseek_v32. */
int mk_is_mla(const mk_spec *s);
/* A DSA indexer: glm_moe_dsa, deepseek_v32. */
int mk_has_indexer(const mk_spec *s);
/* Dense families (one MLP per layer, no experts): llama, mistral, qwen2, qwen3. */
int mk_is_dense_arch(const mk_spec *s);
/* Their tiny test defaults (spec.c). */
void mk_ds_defaults(mk_spec *s);

/* ---- rng.c: splitmix64 streams and normal samples, no global state ---- */
typedef struct mk_rng {
    uint64_t state;
    double spare;
    int has_spare;
} mk_rng;

/* A stream for one tensor: seed mixed with a hash of the tensor's name, so
 * values do not depend on the order (or the shard) tensors are written in. */
void mk_rng_init(mk_rng *r, uint64_t seed, const char *name);
uint64_t mk_rng_next(mk_rng *r);
/* Standard normal N(0, 1) (Marsaglia's polar form of Box-Muller). */
double mk_rng_normal(mk_rng *r);
/* Natural log built from + - * / only (bit-reproducible everywhere). */
double mk_log(double x);

/* ---- spec.c: presets, names, derived numbers ---- */
const char *mk_arch_name(mk_arch a);
const char *mk_dtype_name(mk_dtype d);       /* "f32" */
const char *mk_dtype_st_name(mk_dtype d);    /* "F32" (safetensors) */
const char *mk_dtype_torch_name(mk_dtype d); /* "float32" (config.json) */
size_t mk_dtype_size(mk_dtype d);
/* 0 when the layer holds experts, 1 when it is a dense MLP. */
int mk_layer_is_dense(const mk_spec *s, int layer);
/* Expert width for mixtral/qwen3_moe. */
int mk_expert_ffn(const mk_spec *s);
/* Ids of the special tokens (they end the vocabulary). */
int mk_eos_id(const mk_spec *s);

/* ---- weights.c ---- */
typedef struct mk_tensor {
    char name[128];
    int ndim;
    uint64_t shape[3]; /* 3-D: gpt-oss's fused experts */
    int is_norm; /* 1 + 0.1 N(0,1) */
    double std;  /* N(0, std^2) otherwise */
} mk_tensor;

/* The tensors of the checkpoint in file order; *n set. Caller frees. */
mk_tensor *mk_plan_tensors(const mk_spec *s, size_t *n);
uint64_t mk_count_params(const mk_tensor *t, size_t n);
/* Writes model.safetensors or the shards and the index; 0 or -1 with a
 * message in err. */
int mk_write_weights(const mk_spec *s, const char *dir, char *err, size_t errcap);

/* ---- gptoss.c ---- */
void mk_gptoss_defaults(mk_spec *s);
/* The checkpoint's tensors (fused expert layout); *n set. Caller frees. */
mk_tensor *mk_gptoss_plan(const mk_spec *s, size_t *n);
/* gpt-oss's config.json fields over the generic ones. */
void mk_gptoss_config(json_t *c, const mk_spec *s, int *oom);
/* model.safetensors with MXFP4 experts; 0 or -1 with err. */
int mk_gptoss_write_mxfp4(const mk_spec *s, const char *dir, char *err, size_t errcap);

/* ---- config.c ---- */
int mk_write_configs(const mk_spec *s, const char *dir, char *err, size_t errcap);

/* ---- bpe.c ---- */
int mk_write_tokenizer(const mk_spec *s, const char *dir, char *err, size_t errcap);
/* The built-in training text (corpus.c). */
extern const char mk_corpus_text[];

/* ---- small helpers (config.c) ---- */
/* dir/name into out; -1 when it does not fit. */
int mk_path(char *out, size_t cap, const char *dir, const char *name);
/* Writes j (indent 2, keys in insertion order, newline at the end) to
 * dir/name and releases j. */
int mk_write_json(json_t *j, const char *dir, const char *name, char *err, size_t errcap);

#endif
