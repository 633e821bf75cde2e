/* Names and derived numbers of a model spec. */
#include "config.h"

#include "mkmodel.h"

const char *mk_arch_name(mk_arch a)
{
    switch (a) {
    case MK_LLAMA:
        return "llama";
    case MK_MIXTRAL:
        return "mixtral";
    case MK_QWEN3_MOE:
        return "qwen3_moe";
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
        return 1;
    case MK_MIXTRAL:
        return 0;
    case MK_QWEN3_MOE:
        /* Hugging Face's Qwen3MoeDecoderLayer rule. */
        return s->mlp_only[layer] || s->experts <= 0 || (layer + 1) % s->sparse_step != 0;
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
