#!/usr/bin/env python3
"""Checks a checkpoint written by sy-mkmodel against its own config.json.

    check_checkpoint.py DIR [--params N]

Independently of sy-mkmodel's code: config.json, generation_config.json and
tokenizer_config.json parse; the tensor names and shapes are exactly those
Hugging Face's LlamaForCausalLM / MixtralForCausalLM / Qwen3MoeForCausalLM
load for that config; the safetensors files (or shards + index) are laid out
back to back with sizes that match shape x dtype; the tokenizer is a
consistent byte-level BPE with the special tokens at the end of the vocab.
With --params, the parameter count must equal N. Prints the count; exits 1
with the reasons on any mismatch. Uses only the standard library.
"""

import argparse
import json
import os
import struct
import sys

DTYPE_BYTES = {"F32": 4, "BF16": 2, "F16": 2}
TORCH = {"float32": "F32", "bfloat16": "BF16", "float16": "F16"}


def expected_tensors(c):
    """name -> shape, as transformers builds the model from config c."""
    H, L, V = c["hidden_size"], c["num_hidden_layers"], c["vocab_size"]
    nh, nkv = c["num_attention_heads"], c["num_key_value_heads"]
    hd = c.get("head_dim") or H // nh
    arch = c["model_type"]
    t = {"model.embed_tokens.weight": (V, H), "model.norm.weight": (H,)}
    if not c.get("tie_word_embeddings", False):
        t["lm_head.weight"] = (V, H)
    for i in range(L):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = (H,)
        t[p + "post_attention_layernorm.weight"] = (H,)
        t[p + "self_attn.q_proj.weight"] = (nh * hd, H)
        t[p + "self_attn.k_proj.weight"] = (nkv * hd, H)
        t[p + "self_attn.v_proj.weight"] = (nkv * hd, H)
        t[p + "self_attn.o_proj.weight"] = (H, nh * hd)
        if arch == "qwen2" or (arch == "qwen3" and c.get("attention_bias", False)):
            t.update({p + "self_attn.q_proj.bias": (nh * hd,), p + "self_attn.k_proj.bias": (nkv * hd,),
                      p + "self_attn.v_proj.bias": (nkv * hd,)})
        if arch == "qwen3":
            t.update({p + "self_attn.q_norm.weight": (hd,), p + "self_attn.k_norm.weight": (hd,)})
            if c.get("attention_bias", False):
                t[p + "self_attn.o_proj.bias"] = (H,)
        if arch in ("llama", "mistral", "qwen2", "qwen3"):
            F = c["intermediate_size"]
            t.update({p + "mlp.gate_proj.weight": (F, H), p + "mlp.up_proj.weight": (F, H),
                      p + "mlp.down_proj.weight": (H, F)})
        elif arch == "mixtral":
            E, F = c["num_local_experts"], c["intermediate_size"]
            q = p + "block_sparse_moe."
            t[q + "gate.weight"] = (E, H)
            for e in range(E):
                t.update({f"{q}experts.{e}.w1.weight": (F, H), f"{q}experts.{e}.w2.weight": (H, F),
                          f"{q}experts.{e}.w3.weight": (F, H)})
        elif arch == "qwen3_moe":
            t[p + "self_attn.q_norm.weight"] = (hd,)
            t[p + "self_attn.k_norm.weight"] = (hd,)
            E = c["num_experts"]
            if i not in c["mlp_only_layers"] and E > 0 and (i + 1) % c["decoder_sparse_step"] == 0:
                F = c["moe_intermediate_size"]
                t[p + "mlp.gate.weight"] = (E, H)
                for e in range(E):
                    t.update({f"{p}mlp.experts.{e}.gate_proj.weight": (F, H),
                              f"{p}mlp.experts.{e}.up_proj.weight": (F, H),
                              f"{p}mlp.experts.{e}.down_proj.weight": (H, F)})
            else:
                F = c["intermediate_size"]
                t.update({p + "mlp.gate_proj.weight": (F, H), p + "mlp.up_proj.weight": (F, H),
                          p + "mlp.down_proj.weight": (H, F)})
        elif arch == "gpt_oss":  # the unquantised layout save_pretrained writes (fused experts, x @ W)
            E, F = c["num_local_experts"], c["intermediate_size"]
            t.update({p + "self_attn.q_proj.bias": (nh * hd,), p + "self_attn.k_proj.bias": (nkv * hd,),
                      p + "self_attn.v_proj.bias": (nkv * hd,), p + "self_attn.o_proj.bias": (H,),
                      p + "self_attn.sinks": (nh,), p + "mlp.router.weight": (E, H), p + "mlp.router.bias": (E,),
                      p + "mlp.experts.gate_up_proj": (E, H, 2 * F), p + "mlp.experts.gate_up_proj_bias": (E, 2 * F),
                      p + "mlp.experts.down_proj": (E, F, H), p + "mlp.experts.down_proj_bias": (E, H)})
        else:
            raise ValueError(f"unknown model_type {arch!r}")
    return t


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def check(d, want_params, errors):
    def load(name):
        with open(os.path.join(d, name), encoding="utf-8") as f:
            return json.load(f)

    c = load("config.json")
    g = load("generation_config.json")
    tc = load("tokenizer_config.json")
    tok = load("tokenizer.json")
    arch_class = {"llama": "LlamaForCausalLM", "mixtral": "MixtralForCausalLM", "qwen3_moe": "Qwen3MoeForCausalLM",
                  "mistral": "MistralForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM",
                  "gpt_oss": "GptOssForCausalLM"}
    if c.get("architectures") != [arch_class.get(c.get("model_type"))]:
        errors.append(f"architectures {c.get('architectures')} does not match model_type {c.get('model_type')}")
    V = c["vocab_size"]
    if c.get("eos_token_id") != V - 3 or g.get("eos_token_id") != V - 3:
        errors.append(f"eos_token_id should be {V - 3} (<|endoftext|>) in config and generation_config")
    want = expected_tensors(c)
    st_dtype = TORCH[c["torch_dtype"]]

    # safetensors: one file or shards listed by the index
    index = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(index):
        idx = load("model.safetensors.index.json")
        files = sorted(set(idx["weight_map"].values()))
        if set(idx["weight_map"]) != set(want):
            errors.append("index weight_map names differ from the expected tensors")
        if os.path.exists(os.path.join(d, "model.safetensors")):
            errors.append("both model.safetensors and an index are present")
    else:
        idx, files = None, ["model.safetensors"]
    seen = {}
    total = 0
    for fn in files:
        path = os.path.join(d, fn)
        with open(path, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(n))
        size = os.path.getsize(path)
        if (8 + n) % 8:
            errors.append(f"{fn}: data does not start 8-byte aligned")
        end = 0
        for name, m in header.items():
            if name == "__metadata__":
                continue
            if m["dtype"] != st_dtype:
                errors.append(f"{fn}: {name} is {m['dtype']}, config says {c['torch_dtype']}")
            lo, hi = m["data_offsets"]
            if lo != end:
                errors.append(f"{fn}: {name} starts at {lo}, expected {end} (tensors back to back)")
            nel = 1
            for s in m["shape"]:
                nel *= s
            if hi - lo != nel * DTYPE_BYTES[m["dtype"]]:
                errors.append(f"{fn}: {name} has {hi - lo} bytes for shape {m['shape']}")
            if idx and idx["weight_map"].get(name) != fn:
                errors.append(f"{fn}: {name} is not mapped to this file in the index")
            end = hi
            seen[name] = tuple(m["shape"])
            total += nel
        if size != 8 + n + end:
            errors.append(f"{fn}: {size} bytes, expected {8 + n + end} (8 + header {n} + data {end})")
    if idx and idx["metadata"]["total_size"] != total * DTYPE_BYTES[st_dtype]:
        errors.append(f"index total_size {idx['metadata']['total_size']} != {total * DTYPE_BYTES[st_dtype]}")
    for name in sorted(set(want) | set(seen)):
        if want.get(name) != seen.get(name):
            errors.append(f"tensor {name}: shape {seen.get(name)}, expected {want.get(name)}")
    if want_params is not None and total != want_params:
        errors.append(f"{total} parameters, expected {want_params}")

    # tokenizer
    model = tok["model"]
    vocab, merges = model["vocab"], model["merges"]
    if model["type"] != "BPE" or len(vocab) != V or sorted(vocab.values()) != list(range(V)):
        errors.append(f"tokenizer vocab should hold ids 0..{V - 1} exactly once")
    b2u = bytes_to_unicode()
    for b in range(256):
        if vocab.get(b2u[b]) != b:
            errors.append(f"byte {b} should be token {b} ({b2u[b]!r})")
            break
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    added = [(a["id"], a["content"]) for a in tok["added_tokens"]]
    if added != [(V - 3 + k, s) for k, s in enumerate(specials)]:
        errors.append(f"added_tokens {added} should be {specials} at {V - 3}..{V - 1}")
    if len(merges) < V - 3 - 256:
        errors.append(f"{len(merges)} merges, expected at least {V - 259}")
    for m in merges:
        a, b = m.split(" ")
        if a not in vocab or b not in vocab or a + b not in vocab:
            errors.append(f"merge {m!r} uses or makes a token missing from the vocab")
            break
    pre = tok["pre_tokenizer"]
    if [p["type"] for p in pre.get("pretokenizers", [])] != ["Split", "ByteLevel"] or tok["decoder"]["type"] != "ByteLevel":
        errors.append("pre_tokenizer should be Split + ByteLevel, decoder ByteLevel")
    if tc.get("eos_token") != "<|endoftext|>" or "chat_template" not in tc:
        errors.append("tokenizer_config.json should name <|endoftext|> as eos and carry a chat_template")
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--params", type=int)
    args = ap.parse_args()
    errors = []
    try:
        total = check(args.dir, args.params, errors)
    except (OSError, ValueError, KeyError, struct.error) as e:
        print(f"FAIL {args.dir}: {type(e).__name__}: {e}")
        return 1
    for e in errors[:20]:
        print(f"FAIL {args.dir}: {e}")
    if not errors:
        print(f"ok {args.dir}: {total} params")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
