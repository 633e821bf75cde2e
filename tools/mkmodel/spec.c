/* Names and derived numbers of a model spec. */
#include "config.h"

#include "mkmodel.h"

#include <string.h>

const char *mk_arch_name(mk_arch a)
{
    switch (a) {
    case MK_LLAMA:
        return "llama";
    case MK_MIXTRAL:
        return "mixtral";
    case MK_QWEN3_MOE:
        return "qwen3_moe";
    case MK_DEEPSEEK_V3:
        return "deepseek_v3";
    case MK_GLM4_MOE:
        return "glm4_moe";
    case MK_GLM_MOE_DSA:
        return "glm_moe_dsa";
    case MK_DEEPSEEK_V32:
        return "deepseek_v32";
    case MK_GPT_OSS:
        return "gpt_oss";
    case MK_MISTRAL:
        return "mistral";
    case MK_QWEN2:
        return "qwen2";
    case MK_QWEN3:
        return "qwen3";
    }
    return "?";
}

const char *mk_dtype_name(mk_dtype d)
{
    return d == MK_F32 ? "f32" : d == MK_BF16 ? "bf16" : "f16";
}

const char *mk_dtype_st_name(mk_dtype d)
{
    return d == MK_F32 ? "F32" : d == MK_BF16 ? "BF16" : "F16";
}

const char *mk_dtype_torch_name(mk_dtype d)
{
    return d == MK_F32 ? "float32" : d == MK_BF16 ? "bfloat16" : "float16";
}

size_t mk_dtype_size(mk_dtype d)
{
    return d == MK_F32 ? 4 : 2;
}

int mk_layer_is_dense(const mk_spec *s, int layer)
{
    switch (s->arch) {
    case MK_LLAMA:
    case MK_MISTRAL:
    case MK_QWEN2:
    case MK_QWEN3:
        return 1;
    case MK_MIXTRAL:
    case MK_GPT_OSS:
        return 0;
    case MK_QWEN3_MOE:
        /* Hugging Face's Qwen3MoeDecoderLayer rule. */
        return s->mlp_only[layer] || s->experts <= 0 || (layer + 1) % s->sparse_step != 0;
    case MK_DEEPSEEK_V3:
    case MK_GLM4_MOE:
    case MK_GLM_MOE_DSA:
    case MK_DEEPSEEK_V32:
        return layer < s->ds.first_dense; /* an MTP layer (index >= layers) is MoE too */
    }
    return 1;
}

int mk_expert_ffn(const mk_spec *s)
{
    return s->moe_ffn > 0 ? s->moe_ffn : s->ffn;
}

int mk_eos_id(const mk_spec *s)
{
    return s->vocab - 3;
}

int mk_is_deepseek_family(const mk_spec *s)
{
    return s->arch == MK_DEEPSEEK_V3 || s->arch == MK_GLM4_MOE || s->arch == MK_GLM_MOE_DSA ||
           s->arch == MK_DEEPSEEK_V32;
}

int mk_is_dense_arch(const mk_spec *s)
{
    return s->arch == MK_LLAMA || s->arch == MK_MISTRAL || s->arch == MK_QWEN2 || s->arch == MK_QWEN3;
}

int mk_is_mla(const mk_spec *s)
{
    return s->arch == MK_DEEPSEEK_V3 || s->arch == MK_GLM_MOE_DSA || s->arch == MK_DEEPSEEK_V32;
}

int mk_has_indexer(const mk_spec *s)
{
    return s->arch == MK_GLM_MOE_DSA || s->arch == MK_DEEPSEEK_V32;
}

/*
 * Tiny shapes that still exercise every path: a dense first layer, shared
 * experts, grouped sigmoid routing with a score bias, MLA with both rope
 * layouts, yarn, (GLM-5, DeepSeek-V3.2) an indexer that keeps fewer
 * positions than a test sequence has, and one MTP layer.
 */
void mk_ds_defaults(mk_spec *s)
{
    mk_ds *d = &s->ds;
    memset(d, 0, sizeof *d);
    d->n_shared = 1;
    d->first_dense = 1;
    d->mtp_layers = mk_is_deepseek_family(s) ? 1 : 0;
    switch (s->arch) {
    case MK_DEEPSEEK_V3:
        d->n_group = 4;
        d->topk_group = 2;
        d->routed_scaling = 2.5;
        d->q_lora = 32;
        d->kv_lora = 32;
        d->nope = 16;
        d->rope = 8;
        d->v_head = 24;
        d->yarn = 1;
        break;
    case MK_GLM4_MOE:
        d->n_group = 2;
        d->topk_group = 1;
        d->routed_scaling = 1.5;
        d->partial_rotary_half = 1;
        d->qk_norm = 1;
        d->attn_bias = 1;
        break;
    case MK_GLM_MOE_DSA:
        d->n_group = 1;
        d->topk_group = 1;
        d->routed_scaling = 2.5;
        d->q_lora = 32;
        d->kv_lora = 48;
        d->nope = 16;
        d->rope = 8;
        d->v_head = 16;
        /* 16 heads: with few, every head's relu is often 0 for some position, and an exact tie of index scores at
         * the top-k boundary is broken differently by each implementation (torch.topk leaves it unspecified). */
        d->index_heads = 16;
        d->index_head_dim = 16;
        d->index_topk = 6;
        d->shared_indexer_last = 1;
        break;
    case MK_DEEPSEEK_V32:
        /* DeepSeek-V3.2's grouped routing and yarn, GLM-5's indexer sizes (every layer has one) */
        d->n_group = 4;
        d->topk_group = 2;
        d->routed_scaling = 2.5;
        d->q_lora = 32;
        d->kv_lora = 32;
        d->nope = 16;
        d->rope = 8;
        d->v_head = 24;
        d->yarn = 1;
        d->index_heads = 16;
        d->index_head_dim = 16;
        d->index_topk = 6;
        break;
    default:
        break;
    }
}
