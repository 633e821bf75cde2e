#!/usr/bin/env python3
"""Checkpoints that transformers itself writes, for make check-hf.

    hf_save.py OUT_DIR [--only NAME[,NAME...]] [--list]

For each case below: a tiny seeded random model built with transformers' own
classes (float32), saved with save_pretrained (safetensors) into
OUT_DIR/NAME/v5 (the config.json layout transformers 5 writes:
rope_parameters, dtype, num_local_experts), then the same weights with
config.json rewritten into the layout transformers 4.x wrote into
OUT_DIR/NAME/v4 (top-level rope_theta, rope_scaling, partial_rotary_factor,
torch_dtype, num_experts for Qwen3-MoE, no derived layer_types /
mlp_layer_types lists). transformers must load both to the same logits on the
case's prompt (that is what makes the rewrite faithful), or the script fails.

Weights are redrawn at unit scale (transformers' 0.02 init makes logits so
flat that a misread rope or window hides under any tolerance): matrices
N(0, 1/fan_in), embeddings N(0, 1), norm weights 1 + N(0, 0.1^2), biases,
router score biases and attention sinks N(0, 0.1^2 .. 1).

Prints one line per checkpoint: NAME|LAYOUT|DIR|PROMPT_IDS. Exits 1 when the
two layouts disagree, 2 on bad input.
"""
import argparse
import json
import math
import os
import shutil
import sys
import zlib

# 26 tokens: longer than every sliding window and DSA index_topk below.
PROMPT = [5, 17, 300, 42, 7, 99, 1, 2, 3, 4, 250, 11, 500, 63, 64, 65, 128, 9, 77, 311, 402, 18, 19, 20, 201, 6]
SHARED = os.environ.get("SY_SHARED_DIR", "/work/shared")
TOK_LLAMA = "models/stories260k"  # SentencePiece BPE, 512 ids
TOK_GPT2 = "models/tiny-qwen3moe"  # byte-level BPE, 512 ids

ROPE_LLAMA3 = {"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
ROPE_LINEAR = {"rope_type": "linear", "rope_theta": 50000.0, "factor": 4.0}
# original_max 64 of max_position 256: yarn's ramp falls inside the rotary dims.
ROPE_YARN_MLA = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 64,
                 "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0}
ROPE_YARN = {"rope_type": "yarn", "rope_theta": 150000.0, "factor": 4.0, "original_max_position_embeddings": 64,
             "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False}

COMMON = dict(vocab_size=512, hidden_size=64, num_hidden_layers=2, max_position_embeddings=256)
MLA = dict(num_attention_heads=4, num_key_value_heads=4, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8,
           v_head_dim=16, intermediate_size=96, moe_intermediate_size=24, n_routed_experts=8, num_experts_per_tok=2,
           n_shared_experts=1)


def mla(**over):
    return {**COMMON, **MLA, **over}


def cases():
    """name -> (config class, model class, config kwargs, tokenizer dir, v4 rewrite options)."""
    from transformers import (DeepseekV3Config, DeepseekV3ForCausalLM, DeepseekV32Config, DeepseekV32ForCausalLM,
                              Glm4MoeConfig, Glm4MoeForCausalLM, GlmMoeDsaConfig, GlmMoeDsaForCausalLM, GptOssConfig,
                              GptOssForCausalLM, LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM,
                              MixtralConfig, MixtralForCausalLM, Qwen2Config, Qwen2ForCausalLM, Qwen3Config,
                              Qwen3ForCausalLM, Qwen3MoeConfig, Qwen3MoeForCausalLM)
    c = {}
    # GQA 4:2, untied, llama3 rope scaling.
    c["llama-llama3"] = (LlamaConfig, LlamaForCausalLM, dict(
        COMMON, num_attention_heads=4, num_key_value_heads=2, intermediate_size=96,
        rope_parameters=dict(ROPE_LLAMA3)), TOK_LLAMA, {})
    # LlamaAttention's attention_bias biases q, k, v and o_proj.
    c["llama-attention-bias"] = (LlamaConfig, LlamaForCausalLM, dict(
        COMMON, num_attention_heads=4, num_key_value_heads=2, intermediate_size=96, attention_bias=True),
        TOK_LLAMA, {})
    # MQA, tied embeddings, head_dim != hidden/heads, linear rope scaling.
    c["llama-tied-linear"] = (LlamaConfig, LlamaForCausalLM, dict(
        COMMON, num_attention_heads=4, num_key_value_heads=1, head_dim=32, intermediate_size=80,
        tie_word_embeddings=True, rope_parameters=dict(ROPE_LINEAR)), TOK_LLAMA, {})
    c["mistral-window8"] = (MistralConfig, MistralForCausalLM, dict(
        COMMON, num_attention_heads=4, num_key_value_heads=2, intermediate_size=96, sliding_window=8),
        TOK_LLAMA, {})
    c["mixtral-window12"] = (MixtralConfig, MixtralForCausalLM, dict(
        COMMON, num_attention_heads=4, num_key_value_heads=2, intermediate_size=48, num_local_experts=4,
        num_experts_per_tok=2, sliding_window=12), TOK_LLAMA, {})
    # qk-norm, head_dim 32 (q width 128 != hidden), layer 1 dense (mlp_only_layers).
    c["qwen3moe"] = (Qwen3MoeConfig, Qwen3MoeForCausalLM, dict(
        COMMON, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
        intermediate_size=80, moe_intermediate_size=24, num_experts=6, num_experts_per_tok=2, norm_topk_prob=True,
        mlp_only_layers=[1], rope_parameters={"rope_type": "default", "rope_theta": 1e6}), TOK_GPT2,
        {"num_experts": True})
    # Qwen3MoeAttention's attention_bias biases o_proj too.
    c["qwen3moe-attention-bias"] = (Qwen3MoeConfig, Qwen3MoeForCausalLM, dict(
        COMMON, num_attention_heads=4, num_key_value_heads=2, head_dim=16, intermediate_size=80,
        moe_intermediate_size=24, num_experts=4, num_experts_per_tok=2, attention_bias=True), TOK_GPT2,
        {"num_experts": True})
    # Qwen3MoeConfig: use_sliding_window slides every layer (no max_window_layers there).
    c["qwen3moe-window8"] = (Qwen3MoeConfig, Qwen3MoeForCausalLM, dict(
        COMMON, num_attention_heads=4, num_key_value_heads=2, head_dim=16, intermediate_size=80,
        moe_intermediate_size=24, num_experts=4, num_experts_per_tok=2, use_sliding_window=True,
        sliding_window=8), TOK_GPT2, {"num_experts": True})
    # q_lora, yarn (mscale_all_dim scales the softmax), 2 groups of 4 experts, one dense layer.
    c["deepseek-v3-yarn"] = (DeepseekV3Config, DeepseekV3ForCausalLM, mla(
        num_hidden_layers=3, q_lora_rank=24, n_group=2, topk_group=1, first_k_dense_replace=1,
        routed_scaling_factor=2.5, rope_parameters=dict(ROPE_YARN_MLA)), TOK_LLAMA, {"rope_type_key": "type"})
    c["deepseek-v3-no-q-lora"] = (DeepseekV3Config, DeepseekV3ForCausalLM, mla(
        q_lora_rank=None, n_group=1, topk_group=1, first_k_dense_replace=0, n_shared_experts=2, norm_topk_prob=False,
        routed_scaling_factor=1.5), TOK_LLAMA, {"rope_type_key": "type"})
    c["glm4moe-partial-rotary"] = (Glm4MoeConfig, Glm4MoeForCausalLM, dict(
        COMMON, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        intermediate_size=96, moe_intermediate_size=24, n_routed_experts=8, num_experts_per_tok=2, n_group=2,
        topk_group=1, first_k_dense_replace=1, routed_scaling_factor=1.5, attention_bias=True, use_qk_norm=True,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5}),
        TOK_LLAMA, {})
    # index_topk 4 of a 26-token prompt; layer 2 reuses layer 1's selection. 16 indexer heads: with 2, both
    # relus are often 0 and exact ties at the top-k boundary are broken one way by torch.topk, another by us.
    c["glm5-dsa-topk4"] = (GlmMoeDsaConfig, GlmMoeDsaForCausalLM, mla(
        num_hidden_layers=3, q_lora_rank=24, first_k_dense_replace=1, index_topk=4, index_n_heads=16,
        index_head_dim=16, indexer_types=["full", "full", "shared"],
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0}), TOK_LLAMA,
        {"drop": ["layer_types", "mlp_layer_types"]})
    # q/k/v biases, tied, layers >= max_window_layers slide over 8.
    c["qwen2-window8"] = (Qwen2Config, Qwen2ForCausalLM, dict(
        COMMON, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, intermediate_size=96,
        tie_word_embeddings=True, use_sliding_window=True, sliding_window=8, max_window_layers=1,
        rope_parameters={"rope_type": "default", "rope_theta": 1e6}), TOK_GPT2, {"drop": ["layer_types"]})
    c["qwen3"] = (Qwen3Config, Qwen3ForCausalLM, dict(
        COMMON, num_attention_heads=4, num_key_value_heads=2, head_dim=32, intermediate_size=96,
        tie_word_embeddings=True, rope_parameters={"rope_type": "default", "rope_theta": 1e6}), TOK_GPT2,
        {"drop": ["layer_types"]})
    # gpt-oss: sinks, biases, clamped SwiGLU experts with biases, even layers slide over 8, yarn.
    c["gptoss-window8"] = (GptOssConfig, GptOssForCausalLM, dict(
        COMMON, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        intermediate_size=32, num_local_experts=4, num_experts_per_tok=2, sliding_window=8,
        rope_parameters=dict(ROPE_YARN)), TOK_GPT2, {})
    c["deepseek-v32-topk4"] = (DeepseekV32Config, DeepseekV32ForCausalLM, mla(
        num_hidden_layers=3, q_lora_rank=24, n_group=2, topk_group=1, first_k_dense_replace=1, index_topk=4,
        index_n_heads=16, index_head_dim=16, rope_parameters=dict(ROPE_YARN_MLA)), TOK_LLAMA,
        {"rope_type_key": "type", "drop": ["layer_types", "mlp_layer_types"]})
    return c


# Each feature a case is there for must move transformers' logits when it is
# taken away (else the case could not fail on a misreading of it): label ->
# config attributes that take it away.
NO_ROPE = {"rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}
PROBES = {
    "llama-llama3": {"llama3 rope scaling": NO_ROPE},
    "llama-attention-bias": {"attention biases": {"attention_bias": False}},
    "llama-tied-linear": {"linear rope scaling": {"rope_parameters": {"rope_type": "default", "rope_theta": 50000.0}}},
    "mistral-window8": {"sliding_window 8": {"sliding_window": None}},
    "mixtral-window12": {"sliding_window 12": {"sliding_window": None}},
    "qwen3moe": {"norm_topk_prob": {"norm_topk_prob": False}},
    "qwen3moe-attention-bias": {"attention biases": {"attention_bias": False}},
    "qwen3moe-window8": {"sliding_window 8": {"use_sliding_window": False, "sliding_window": None}},
    "deepseek-v3-yarn": {"yarn": NO_ROPE, "expert groups": {"n_group": 1, "topk_group": 1}},
    "deepseek-v3-no-q-lora": {"norm_topk_prob false": {"norm_topk_prob": True}},
    "glm4moe-partial-rotary": {"partial_rotary_factor 0.5": {
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 1.0}},
        "expert groups": {"n_group": 1, "topk_group": 1}},
    "glm5-dsa-topk4": {"index_topk 4": {"index_topk": 2048}},
    "qwen2-window8": {"sliding window from layer 1": {"sliding_window": None, "layer_types": ["full_attention"] * 3}},
    "qwen3": {},
    "gptoss-window8": {"sliding_window 8": {"sliding_window": 4096},
                       "yarn": {"rope_parameters": {"rope_type": "default", "rope_theta": 150000.0}}},
    "deepseek-v32-topk4": {"index_topk 4": {"index_topk": 2048}, "yarn": NO_ROPE},
}


def redraw(model, seed):
    """Unit-scale weights (see the module docstring)."""
    import torch
    g = torch.Generator().manual_seed(seed)
    gpt_oss = model.config.model_type == "gpt_oss"
    with torch.no_grad():
        tensors = dict(model.named_parameters())
        tensors.update((n, b) for n, b in model.named_buffers() if n.endswith("e_score_correction_bias"))
        for name, t in sorted(tensors.items()):
            if not t.is_floating_point():
                continue
            r = torch.randn(t.shape, generator=g, dtype=torch.float32)
            leaf = name.rsplit(".", 1)[-1]
            if "norm" in name and leaf == "weight":
                v = 1.0 + 0.1 * r
            elif leaf == "bias" or name.endswith("_bias") or name.endswith("e_score_correction_bias"):
                v = 0.1 * r
            elif leaf == "sinks":
                v = r
            elif "embed_tokens" in name:
                v = r
            elif t.dim() >= 2:
                # nn.Linear is [out, in]; gpt-oss's fused experts are [E, in, out].
                fan_in = t.shape[1] if gpt_oss and t.dim() == 3 else t.shape[-1]
                v = r / math.sqrt(fan_in)
            else:
                v = 0.1 * r
            t.copy_(v.to(t.dtype))


def old_layout(cfg, opts):
    """config.json as transformers 4.x wrote it."""
    out = dict(cfg)
    rp = out.pop("rope_parameters", None)
    if rp is not None:
        rp = dict(rp)
        out["rope_theta"] = rp.pop("rope_theta")
        prf = rp.pop("partial_rotary_factor", None)
        if prf is not None:
            out["partial_rotary_factor"] = prf
        rtype = rp.pop("rope_type", "default")
        out["rope_scaling"] = None if rtype == "default" else {opts.get("rope_type_key", "rope_type"): rtype, **rp}
    if "dtype" in out:
        out["torch_dtype"] = out.pop("dtype")
    if opts.get("num_experts"):
        out["num_experts"] = out.pop("num_local_experts")
    for k in opts.get("drop", []):
        out.pop(k, None)
    out["transformers_version"] = "4.57.1"
    return out


def logits(path, ids, override=None):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    cfg = AutoConfig.from_pretrained(path)
    for k, v in (override or {}).items():
        setattr(cfg, k, v)
    m = AutoModelForCausalLM.from_pretrained(path, config=cfg, dtype=torch.float32, attn_implementation="eager")
    m.eval()
    with torch.no_grad():
        return m(torch.tensor([ids])).logits[0]


def save(name, spec, out, seed):
    import torch
    cfg_cls, model_cls, kw, tok, opts = spec
    torch.manual_seed(seed)
    model = model_cls(cfg_cls(**kw)).to(torch.float32)
    redraw(model, seed)
    v5, v4 = os.path.join(out, name, "v5"), os.path.join(out, name, "v4")
    model.save_pretrained(v5, safe_serialization=True)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        src = os.path.join(SHARED, tok, f)
        if os.path.exists(src):
            shutil.copy(src, os.path.join(v5, f))
    shutil.copytree(v5, v4)
    with open(os.path.join(v5, "config.json")) as f:
        cfg = json.load(f)
    with open(os.path.join(v4, "config.json"), "w") as f:
        json.dump(old_layout(cfg, opts), f, indent=2, sort_keys=True)
        f.write("\n")
    a, b = logits(v5, PROMPT), logits(v4, PROMPT)
    diff = float((a - b).abs().max())
    if diff != 0.0:
        print(f"hf_save.py: {name}: transformers gives different logits for the v4 layout (max abs diff {diff:.3e}); "
              f"the rewrite of {v4}/config.json is not faithful", file=sys.stderr)
        return False
    spread = float(a.std())
    if spread < 0.1:
        print(f"hf_save.py: {name}: logits spread {spread:.3g} is too flat to show a misreading", file=sys.stderr)
        return False
    for label, override in PROBES.get(name, {}).items():
        moved = float((logits(v5, PROMPT, override) - a).abs().max())
        if moved < 1e-2:
            print(f"hf_save.py: {name}: without {label} ({override}) transformers' logits move only by {moved:.3e}; "
                  f"the case does not exercise it", file=sys.stderr)
            return False
    return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir")
    ap.add_argument("--only", default="")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    try:
        import torch  # noqa: F401
        import transformers
    except ImportError as e:
        print(f"hf_save.py: {e}", file=sys.stderr)
        return 2
    transformers.utils.logging.disable_progress_bar()
    try:
        all_cases = cases()
    except ImportError as e:
        print(f"hf_save.py: transformers {transformers.__version__} lacks an architecture: {e}", file=sys.stderr)
        return 2
    names = [n for n in a.only.split(",") if n] or list(all_cases)
    unknown = [n for n in names if n not in all_cases]
    if unknown:
        print(f"hf_save.py: unknown case {unknown}; known: {', '.join(all_cases)}", file=sys.stderr)
        return 2
    if a.list:
        print("\n".join(names))
        return 0
    ok = True
    ids = ",".join(map(str, PROMPT))
    for name in names:
        if not save(name, all_cases[name], a.out_dir, zlib.crc32(name.encode()) % 100000):
            ok = False
            continue
        for layout in ("v5", "v4"):
            print(f"{name}|{layout}|{os.path.join(a.out_dir, name, layout)}|{ids}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
