/* config.json and generation_config.json, with each architecture's real
 * Hugging Face field names. */
#include "config.h"

#include "mkmodel.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int mk_path(char *out, size_t cap, const char *dir, const char *name)
{
    int k = snprintf(out, cap, "%s/%s", dir, name);
    return (k < 0 || (size_t)k >= cap) ? -1 : 0;
}

int mk_write_json(json_t *j, const char *dir, const char *name, char *err, size_t errcap)
{
    char path[4096];
    if (!j) {
        snprintf(err, errcap, "out of memory building %s", name);
        return -1;
    }
    if (mk_path(path, sizeof(path), dir, name) != 0) {
        json_decref(j);
        snprintf(err, errcap, "--out: path too long");
        return -1;
    }
    /* 15 significant digits print 1e-05 and 0.02 as written, not as the
     * 17-digit expansion of the nearest double. */
    char *text = json_dumps(j, JSON_INDENT(2) | JSON_REAL_PRECISION(15));
    json_decref(j);
    if (!text) {
        snprintf(err, errcap, "out of memory serialising %s", name);
        return -1;
    }
    FILE *f = fopen(path, "wb");
    int rc = 0;
    if (!f) {
        snprintf(err, errcap, "%s: cannot create: %s", path, strerror(errno));
        rc = -1;
    } else {
        size_t len = strlen(text);
        if (fwrite(text, 1, len, f) != len || fputc('\n', f) == EOF)
            rc = -1;
        if (fclose(f) != 0)
            rc = -1;
        if (rc)
            snprintf(err, errcap, "%s: write failed: %s", path, strerror(errno));
    }
    free(text);
    return rc;
}

/* Sets key to a new value; a NULL value (out of memory) is remembered. */
static void put(json_t *o, const char *key, json_t *v, int *oom)
{
    if (!v || json_object_set_new(o, key, v) != 0)
        *oom = 1;
}

static json_t *rope_scaling(const mk_spec *s)
{
    if (!s->rope_llama3)
        return json_null();
    /* Llama 3.1's published values. */
    return json_pack("{s:f,s:f,s:f,s:i,s:s}", "factor", 8.0, "low_freq_factor", 1.0, "high_freq_factor", 4.0,
                     "original_max_position_embeddings", 8192, "rope_type", "llama3");
}

/* DeepSeek-V3's rope_scaling: yarn, factor 4 over 128 original positions, mscale 1 and mscale_all_dim 1. */
static json_t *yarn_scaling(void)
{
    return json_pack("{s:f,s:i,s:f,s:f,s:f,s:f,s:s}", "factor", 4.0, "original_max_position_embeddings", 128,
                     "beta_fast", 32.0, "beta_slow", 1.0, "mscale", 1.0, "mscale_all_dim", 1.0, "type", "yarn");
}

/* The DeepseekV3MoE block, MLA and the DSA indexer, with the published field names. */
static void deepseek_fields(json_t *c, const mk_spec *s, int *oom)
{
    const mk_ds *d = &s->ds;
    put(c, "n_routed_experts", json_integer(s->experts), oom);
    put(c, "num_experts_per_tok", json_integer(s->top_k), oom);
    put(c, "n_shared_experts", json_integer(d->n_shared), oom);
    put(c, "first_k_dense_replace", json_integer(d->first_dense), oom);
    put(c, "n_group", json_integer(d->n_group), oom);
    put(c, "topk_group", json_integer(d->topk_group), oom);
    put(c, "routed_scaling_factor", json_real(d->routed_scaling), oom);
    put(c, "norm_topk_prob", json_boolean(s->norm_topk_prob), oom);
    put(c, "num_nextn_predict_layers", json_integer(d->mtp_layers), oom);
    if (s->arch == MK_GLM4_MOE) {
        put(c, "partial_rotary_factor", json_real(d->partial_rotary_half ? 0.5 : 1.0), oom);
        put(c, "use_qk_norm", json_boolean(d->qk_norm), oom);
        return;
    }
    put(c, "q_lora_rank", d->q_lora > 0 ? json_integer(d->q_lora) : json_null(), oom);
    put(c, "kv_lora_rank", json_integer(d->kv_lora), oom);
    put(c, "qk_nope_head_dim", json_integer(d->nope), oom);
    put(c, "qk_rope_head_dim", json_integer(d->rope), oom);
    put(c, "v_head_dim", json_integer(d->v_head), oom);
    if (s->arch == MK_DEEPSEEK_V3) {
        put(c, "topk_method", json_string("noaux_tc"), oom);
        put(c, "scoring_func", json_string("sigmoid"), oom);
        put(c, "rope_interleave", json_true(), oom);
        return;
    }
    put(c, "index_n_heads", json_integer(d->index_heads), oom);
    put(c, "index_head_dim", json_integer(d->index_head_dim), oom);
    put(c, "index_topk", json_integer(d->index_topk), oom);
    if (s->arch == MK_DEEPSEEK_V32) /* every layer runs its own indexer: there is no indexer_types */
        return;
    json_t *types = json_array();
    for (int i = 0; i < s->layers && types; i++)
        if (json_array_append_new(types, json_string(d->shared_indexer_last && i == s->layers - 1 && i > 0
                                                         ? "shared"
                                                         : "full")) != 0)
            *oom = 1;
    put(c, "indexer_types", types, oom);
}

/*
 * Attention fields of mistral, mixtral, qwen2 and qwen3 over the generic
 * ones: sliding_window (null without one); Qwen2Config / Qwen3Config's
 * use_sliding_window and max_window_layers (no layer_types: transformers
 * derives them); attention_bias only where the config class has it (qwen3).
 */
static void window_fields(json_t *c, const mk_spec *s, int *oom)
{
    const int qwen = s->arch == MK_QWEN2 || s->arch == MK_QWEN3;
    if (s->arch != MK_MISTRAL && s->arch != MK_MIXTRAL && !qwen)
        return;
    put(c, "sliding_window", s->sliding_window > 0 ? json_integer(s->sliding_window) : json_null(), oom);
    if (qwen) {
        put(c, "use_sliding_window", json_boolean(s->sliding_window > 0), oom);
        put(c, "max_window_layers", json_integer(s->max_window_layers), oom);
    }
    if (s->arch == MK_QWEN3)
        put(c, "attention_bias", json_boolean(s->attn_bias), oom);
    else if (s->arch != MK_MIXTRAL)
        json_object_del(c, "attention_bias");
}

static json_t *config_json(const mk_spec *s)
{
    json_t *c = json_object();
    if (!c)
        return NULL;
    int oom = 0;
    const int moe = !mk_is_dense_arch(s);
    put(c, "hidden_size", json_integer(s->hidden), &oom);
    put(c, "intermediate_size", json_integer(s->arch == MK_MIXTRAL ? mk_expert_ffn(s) : s->ffn), &oom);
    if (s->arch == MK_QWEN3_MOE || mk_is_deepseek_family(s))
        put(c, "moe_intermediate_size", json_integer(mk_expert_ffn(s)), &oom);
    put(c, "num_hidden_layers", json_integer(s->layers), &oom);
    put(c, "num_attention_heads", json_integer(s->heads), &oom);
    put(c, "num_key_value_heads", json_integer(s->kv_heads), &oom);
    if (mk_is_mla(s))
        put(c, "head_dim", json_integer(s->ds.rope), &oom); /* what transformers writes: the rope slice */
    else
        put(c, "head_dim", json_integer(s->head_dim), &oom);
    put(c, "vocab_size", json_integer(s->vocab), &oom);
    put(c, "max_position_embeddings", json_integer(s->max_pos), &oom);
    put(c, "rms_norm_eps", json_real(s->rms_eps), &oom);
    put(c, "rope_theta", json_real(s->rope_theta), &oom);
    if (s->arch == MK_MIXTRAL) {
        put(c, "num_local_experts", json_integer(s->experts), &oom);
        put(c, "num_experts_per_tok", json_integer(s->top_k), &oom);
    } else if (s->arch == MK_QWEN3_MOE) {
        put(c, "num_experts", json_integer(s->experts), &oom);
        put(c, "num_experts_per_tok", json_integer(s->top_k), &oom);
        put(c, "norm_topk_prob", json_boolean(s->norm_topk_prob), &oom);
        put(c, "decoder_sparse_step", json_integer(s->sparse_step), &oom);
        json_t *only = json_array();
        for (int i = 0; i < s->layers && only; i++)
            if (s->mlp_only[i] && json_array_append_new(only, json_integer(i)) != 0)
                oom = 1;
        put(c, "mlp_only_layers", only, &oom);
    }
    if (mk_is_deepseek_family(s))
        deepseek_fields(c, s, &oom);
    put(c, "tie_word_embeddings", json_boolean(s->tie), &oom);
    const char *archname = s->arch == MK_LLAMA          ? "LlamaForCausalLM"
                           : s->arch == MK_MIXTRAL      ? "MixtralForCausalLM"
                           : s->arch == MK_DEEPSEEK_V3  ? "DeepseekV3ForCausalLM"
                           : s->arch == MK_GLM4_MOE     ? "Glm4MoeForCausalLM"
                           : s->arch == MK_GLM_MOE_DSA  ? "GlmMoeDsaForCausalLM"
                           : s->arch == MK_DEEPSEEK_V32 ? "DeepseekV32ForCausalLM"
                           : s->arch == MK_GPT_OSS      ? "GptOssForCausalLM"
                           : s->arch == MK_MISTRAL      ? "MistralForCausalLM"
                           : s->arch == MK_QWEN2        ? "Qwen2ForCausalLM"
                           : s->arch == MK_QWEN3        ? "Qwen3ForCausalLM"
                                                        : "Qwen3MoeForCausalLM";
    put(c, "architectures", json_pack("[s]", archname), &oom);
    put(c, "model_type", json_string(mk_arch_name(s->arch)), &oom);
    put(c, "hidden_act", json_string("silu"), &oom);
    put(c, "attention_bias", json_boolean(s->arch == MK_GLM4_MOE && s->ds.attn_bias), &oom);
    put(c, "attention_dropout", json_real(0.0), &oom);
    if (s->arch == MK_LLAMA) {
        put(c, "mlp_bias", json_false(), &oom);
        put(c, "pretraining_tp", json_integer(1), &oom);
    }
    put(c, "initializer_range", json_real(0.02), &oom);
    put(c, "rope_scaling", (s->arch == MK_DEEPSEEK_V3 || s->arch == MK_DEEPSEEK_V32) && s->ds.yarn ? yarn_scaling()
                                                                                                : rope_scaling(s),
        &oom);
    put(c, "use_cache", json_true(), &oom);
    put(c, "torch_dtype", json_string(mk_dtype_torch_name(s->dtype)), &oom);
    if (moe) {
        put(c, "output_router_logits", json_false(), &oom);
        put(c, "router_aux_loss_coef", json_real(0.001), &oom);
        if (s->arch == MK_MIXTRAL)
            put(c, "router_jitter_noise", json_real(0.0), &oom);
        if (!mk_is_deepseek_family(s))
            put(c, "sliding_window", json_null(), &oom);
    }
    if (s->arch == MK_QWEN3_MOE) {
        put(c, "use_sliding_window", json_false(), &oom);
        put(c, "max_window_layers", json_integer(s->layers), &oom);
    }
    if (s->arch == MK_GPT_OSS)
        mk_gptoss_config(c, s, &oom);
    window_fields(c, s, &oom);
    /* The byte-level tokenizer has no BOS token. */
    put(c, "bos_token_id", json_null(), &oom);
    put(c, "eos_token_id", json_integer(mk_eos_id(s)), &oom);
    if (oom) {
        json_decref(c);
        return NULL;
    }
    return c;
}

int mk_write_configs(const mk_spec *s, const char *dir, char *err, size_t errcap)
{
    if (mk_write_json(config_json(s), dir, "config.json", err, errcap) != 0)
        return -1;
    json_t *g = json_pack("{s:i,s:b}", "eos_token_id", mk_eos_id(s), "do_sample", 0);
    return mk_write_json(g, dir, "generation_config.json", err, errcap);
}
