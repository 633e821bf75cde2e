#!/usr/bin/env python3
"""Float64 numpy reference forward pass: the independent oracle for switchyard.

Reads a Hugging Face model directory by itself (config.json, model.safetensors
or model.safetensors.index.json + shards; F32, F16, BF16, F64) and runs
LlamaForCausalLM, MixtralForCausalLM, Qwen3MoeForCausalLM, DeepseekV3ForCausalLM,
Glm4MoeForCausalLM, GlmMoeDsaForCausalLM (GLM-5) or DeepseekV32ForCausalLM
(DeepSeek-V3.2) in float64 with Hugging
Face's semantics: RMSNorm x * rsqrt(mean(x^2) + eps) * w, rotate-half
RoPE over the whole head_dim (rope_theta; rope_scaling llama3 or linear),
GQA, SiLU-gated MLPs, softmax routers with top-k (lowest expert id wins a
tie), Mixtral's renormalised top-k, Qwen3-MoE's per-head q/k RMSNorm before
RoPE, norm_topk_prob, decoder_sparse_step and mlp_only_layers. Mistral, Qwen2
(q/k/v biases) and dense Qwen3 (q/k norm, attention_bias on q/k/v/o) with
their sliding windows per layer (use_sliding_window, max_window_layers,
layer_types). The DeepSeek
family: sigmoid routing with e_score_correction_bias, grouped top-k,
routed_scaling_factor, shared experts, first_k_dense_replace; GLM-4-MoE's
partial RoPE, q/k/v biases and use_qk_norm; multi-head latent attention
computed the plain way (K and V expanded per head through kv_b_proj, not
absorbed as the engine does), interleaved RoPE as transformers writes it
(de-interleaved output), yarn; GLM-5's DSA indexer (LayerNorm keys, relu
scores weighted per head, the index_topk best past positions, "shared"
layers reusing the previous choice; the lowest position wins a tie), and
DeepSeek-V3.2's (one in every layer, RoPE over halves). The first MTP layer
(num_nextn_predict_layers, stored after the decoder layers) of DeepSeek-V3,
GLM-4.5 and GLM-5 with --mtp-check: transformers does not implement these
layers (it drops their weights), so this reference is their oracle; the
semantics are vLLM's deepseek_mtp.py / SGLang's deepseek_nextn.py (see
Model.mtp_extend). No tokenizer:
it works on token ids. Needs only numpy (Debian's python3-numpy); run it with
$PYTHON_NUMPY (default /usr/bin/python3).

Greedy (argmax, lowest id wins exact ties; EOS is not special):

    reference.py MODEL_DIR --ids 1,403,407 --steps 32
        prints the 32 generated ids, space-separated, on one line
    ... --logits-out F
        also writes the logits as raw little-endian float32 rows of vocab_size
        values: row i is the distribution that chose generated token i (row 0 =
        the last prompt position), so --steps N gives N rows
    ... --json
        prints {"prompt_ids", "greedy_ids", "top5": [[[id, logprob] x5] per
        step], "min_margin"} instead

Checking another implementation's logits (teacher-forced, one batch):

    reference.py MODEL_DIR --ids PROMPT+GENERATED --check-logits F --tol 1e-3
        [--prompt-len P]

    F holds R rows of vocab_size little-endian float32 values, the same layout
    as --logits-out: row i = logits after consuming the prompt plus i generated
    tokens (the row that predicted generated token i). --ids is the whole
    sequence, prompt followed by the generated tokens. The prompt length is
    --prompt-len, else len(ids) - R (one row per generated token); a file may
    also carry one extra row after the last token (then give --prompt-len).
    Prints the max abs error of each row, and whether the argmaxes agree, then
    a summary; exits 1 when any row's max abs error exceeds --tol (or a row
    holds NaN/inf), 2 on bad input, 0 otherwise.

Checking another implementation's MTP logits:

    reference.py MODEL_DIR --ids IDS --mtp-check F [--mtp-chain D1,D2,...] --tol 1e-4

    F holds len(IDS) - 1 + len(chain) float32 rows of vocab_size values: row p
    (p < len(IDS) - 1) = the MTP logits at position p (the target's hidden at
    p with IDS[p + 1]: they predict IDS[p + 2]); then one row per chained step
    j = 1, 2, ...: at position len(IDS) - 2 + j, with token D_j and the MTP
    hidden of the previous position. Same output and exit status as
    --check-logits.

As a library: Model(dir).greedy(prompt_ids, steps) -> (ids, logits rows),
Model(dir).logits(ids) -> teacher-forced logits for every position,
Model(dir).mtp_extend(ids) / .mtp_chain(...) -> the MTP layer's outputs.
"""

import argparse
import json
import math
import os
import struct
import sys

import numpy as np

SUPPORTED = ("llama", "mistral", "qwen2", "qwen3", "mixtral", "qwen3_moe", "deepseek_v3", "glm4_moe", "glm_moe_dsa", "deepseek_v32",
             "gpt_oss")
DEEPSEEK_FAMILY = ("deepseek_v3", "glm4_moe", "glm_moe_dsa", "deepseek_v32")
MLA = ("deepseek_v3", "glm_moe_dsa", "deepseek_v32")
DSA = ("glm_moe_dsa", "deepseek_v32")


class RefError(Exception):
    """A problem with the model directory or the input (exit status 2)."""


# --------------------------------------------------------------- safetensors
def _read_header(path):
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise RefError(f"{path}: too short for a safetensors header")
        (n,) = struct.unpack("<Q", raw)
        size = os.fstat(f.fileno()).st_size
        if n > size - 8:
            raise RefError(f"{path}: header length {n} exceeds the file ({size} bytes)")
        header = json.loads(f.read(n))
    return header, 8 + n, size


def _decode(buf, dtype, shape, where):
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if dtype == "F32":
        a = np.frombuffer(buf, dtype="<f4", count=n)
    elif dtype == "F16":
        a = np.frombuffer(buf, dtype="<f2", count=n)
    elif dtype == "BF16":
        a = (np.frombuffer(buf, dtype="<u2", count=n).astype(np.uint32) << 16).view(np.float32)
    elif dtype == "F64":
        a = np.frombuffer(buf, dtype="<f8", count=n)
    elif dtype == "F8_E4M3":
        a = e4m3_decode(np.frombuffer(buf, dtype=np.uint8, count=n))
    elif dtype == "U8":  # NVFP4 packed pairs: kept as codes until dequantize() unpacks them
        a = np.frombuffer(buf, dtype=np.uint8, count=n)
    else:
        raise RefError(f"{where}: dtype {dtype} not supported (F32, F16, BF16, F64, F8_E4M3, U8)")
    return a.astype(np.float64).reshape(shape)


def e4m3_decode(codes):
    """FP8 E4M3 (bias 7, subnormals m/8 * 2^-6) to float64, from the definition."""
    c = codes.astype(np.int64)
    e, m = (c >> 3) & 15, c & 7
    mag = np.where(e == 0, m / 8.0 * 2.0 ** -6, (1.0 + m / 8.0) * np.exp2(e - 7.0))
    return np.where(c & 0x80, -mag, mag)


E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])


def quant_scheme(model_dir):
    """'fp8' (with weight_block_size or None), 'nvfp4' or None, from config.json / hf_quant_config.json."""
    with open(os.path.join(model_dir, "config.json")) as f:
        qc = json.load(f).get("quantization_config")
    if qc:
        if qc.get("quant_method") == "fp8":
            return "fp8", qc.get("weight_block_size")
        if qc.get("quant_method") == "modelopt":
            return "nvfp4", None
        if qc.get("quant_method") == "mxfp4":  # gpt-oss experts: X_blocks / X_scales
            return "mxfp4", None
        raise RefError(f"{model_dir}: quant_method {qc.get('quant_method')} not supported")
    hq = os.path.join(model_dir, "hf_quant_config.json")
    if os.path.exists(hq):
        with open(hq) as f:
            algo = json.load(f)["quantization"]["quant_algo"]
        if algo != "NVFP4":
            raise RefError(f"{hq}: quant_algo {algo} not supported")
        return "nvfp4", None
    return None, None


def dequantize(model_dir, tensors):
    """Replaces every quantised weight by its float64 value (w = q * scales) and drops the scale tensors."""
    scheme, block = quant_scheme(model_dir)
    if scheme is None:
        return tensors
    out = {}
    for name, t in tensors.items():
        base = name[:-len(".weight")] if name.endswith(".weight") else None
        if scheme == "fp8" and base and (base + ".weight_scale_inv" in tensors or base + ".weight_scale" in tensors):
            s = tensors.get(base + ".weight_scale_inv", tensors.get(base + ".weight_scale"))
            if s.size == 1:
                out[name] = t * s.reshape(())
            else:
                b0, b1 = block
                full = np.repeat(np.repeat(s, b0, axis=0), b1, axis=1)[:t.shape[0], :t.shape[1]]
                out[name] = t * full
        elif scheme == "nvfp4" and base and base + ".weight_scale_2" in tensors:
            codes = t.astype(np.uint8)
            nib = np.stack([codes & 15, codes >> 4], axis=-1).reshape(t.shape[0], t.shape[1] * 2)  # low nibble first
            scale = np.repeat(tensors[base + ".weight_scale"], 16, axis=1)
            out[name] = E2M1[nib] * scale * tensors[base + ".weight_scale_2"].reshape(())
        elif scheme == "mxfp4" and name.endswith("_blocks") and name[:-len("_blocks")] + "_scales" in tensors:
            # [E, out, in/32, 16] bytes, element 2i in the low nibble, times 2^(scale - 127) per 32; back to the
            # unquantised layout's [E, in, out] (x @ W), as transformers' convert_moe_packed_tensors does
            codes = t.astype(np.uint8)
            E_, N_, G_ = codes.shape[:3]
            nib = np.stack([codes & 15, codes >> 4], axis=-1).reshape(E_, N_, G_ * 32)
            scale = np.repeat(np.exp2(tensors[name[:-len("_blocks")] + "_scales"] - 127.0), 32, axis=-1)
            out[name[:-len("_blocks")]] = (E2M1[nib] * scale).transpose(0, 2, 1)
        elif scheme == "mxfp4" and name.endswith("_proj_scales"):
            continue
        elif any(name.endswith(sfx) for sfx in (".weight_scale_inv", ".weight_scale", ".weight_scale_2",
                                                ".input_scale")):
            continue
        else:
            out[name] = t
    return out


def read_safetensors(path):
    """All tensors of one file as float64 arrays."""
    header, base, size = _read_header(path)
    data = np.memmap(path, dtype=np.uint8, mode="r")
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        lo, hi = meta["data_offsets"]
        if base + hi > size:
            raise RefError(f"{path}: tensor {name} ends at {base + hi}, past the end ({size} bytes)")
        out[name] = _decode(data[base + lo:base + hi], meta["dtype"], tuple(meta["shape"]), f"{path}: {name}")
    return out


def load_tensors(model_dir):
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    elif os.path.exists(os.path.join(model_dir, "model.safetensors")):
        files = ["model.safetensors"]
    else:
        files = sorted(p for p in os.listdir(model_dir) if p.endswith(".safetensors"))
        if not files:
            raise RefError(f"{model_dir}: no model.safetensors, index or *.safetensors file")
    tensors = {}
    for fn in files:
        tensors.update(read_safetensors(os.path.join(model_dir, fn)))
    return dequantize(model_dir, tensors)


# -------------------------------------------------------------------- model
def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def silu(x):
    return x / (1.0 + np.exp(-x))


def softmax(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def rope_inv_freq(cfg, head_dim):
    theta = float(cfg.get("rope_theta", 10000.0))
    inv = 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    rs = cfg.get("rope_scaling")
    if not rs:
        return inv
    kind = rs.get("rope_type", rs.get("type"))
    if kind in (None, "default"):
        return inv
    if kind == "linear":
        return inv / float(rs["factor"])
    if kind == "llama3":
        factor = float(rs["factor"])
        low, high = float(rs["low_freq_factor"]), float(rs["high_freq_factor"])
        old = float(rs["original_max_position_embeddings"])
        low_wavelen, high_wavelen = old / low, old / high
        wavelen = 2.0 * math.pi / inv
        out = np.where(wavelen > low_wavelen, inv / factor, inv)
        smooth = (old / wavelen - low) / (high - low)
        smoothed = (1.0 - smooth) * out / factor + smooth * out
        medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
        return np.where(medium, smoothed, out)
    raise RefError(f"rope_scaling type {kind!r} is not supported (llama3, linear)")


def yarn_get_mscale(scale, mscale=1.0):
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def yarn_inv_freq(cfg, rs, dim):
    """transformers' _compute_yarn_parameters: (inv_freq, cos/sin factor)."""
    base = float(cfg.get("rope_theta", 10000.0))
    factor = float(rs["factor"])
    orig = float(rs["original_max_position_embeddings"])
    beta_fast, beta_slow = float(rs.get("beta_fast") or 32), float(rs.get("beta_slow") or 1)
    mscale, mscale_all = rs.get("mscale"), rs.get("mscale_all_dim")
    att = (yarn_get_mscale(factor, mscale) / yarn_get_mscale(factor, mscale_all) if mscale and mscale_all
           else yarn_get_mscale(factor))

    def corr(rot):
        return (dim * math.log(orig / (rot * 2 * math.pi))) / (2 * math.log(base))

    low, high = corr(beta_fast), corr(beta_slow)
    if rs.get("truncate", True):  # gpt-oss: false, the fractional correction range
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    pos_freqs = base ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
    ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - low) / (high - low), 0, 1)
    extra = 1.0 - ramp
    return (1.0 / (factor * pos_freqs)) * (1 - extra) + (1.0 / pos_freqs) * extra, att


def rope_any(x, pos, inv_freq, factor=1.0, interleave=False):
    """RoPE over the last axis of x [T, heads, 2*len(inv_freq)]. Interleaved is
    transformers' apply_rotary_pos_emb_interleave: pairs (2i, 2i+1) rotated, the
    result de-interleaved (evens first)."""
    ang = pos[:, None] * inv_freq[None, :]                      # [T, d/2]
    cos, sin = (np.cos(ang) * factor)[:, None, :], (np.sin(ang) * factor)[:, None, :]
    if interleave:
        a, b = x[..., 0::2], x[..., 1::2]
    else:
        h = x.shape[-1] // 2
        a, b = x[..., :h], x[..., h:]
    return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)


def layer_norm(x, w, b, eps):
    mu = np.mean(x, axis=-1, keepdims=True)
    var = np.mean((x - mu) ** 2, axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def rotate_half(x):
    h = x.shape[-1] // 2
    return np.concatenate([-x[..., h:], x[..., :h]], axis=-1)


def layer_windows(cfg, arch, n_layers):
    """Each layer's sliding window (None: full attention), as the config classes decide: Mistral's
    sliding_window (default 4096) and Mixtral's (default None) for every layer; Qwen2 / Qwen3's only with
    use_sliding_window, on the layers layer_types names sliding_attention, which __post_init__ derives as
    i >= max_window_layers (default 28) when config.json has no layer_types."""
    if arch in ("mistral", "mixtral"):
        w = cfg.get("sliding_window", 4096 if arch == "mistral" else None)
        return [w or None] * n_layers
    if arch == "gpt_oss":  # GptOssConfig: sliding_window 128, even layers slide by default
        w = cfg.get("sliding_window", 128)
        types = cfg.get("layer_types") or ["sliding_attention" if (i + 1) % 2 else "full_attention"
                                           for i in range(n_layers)]
        return [w if t == "sliding_attention" and w else None for t in types]
    if arch not in ("qwen2", "qwen3"):
        return [None] * n_layers
    w = cfg.get("sliding_window", 4096) if cfg.get("use_sliding_window", False) else None
    types = cfg.get("layer_types") or ["sliding_attention" if w is not None and i >= cfg.get("max_window_layers", 28)
                                       else "full_attention" for i in range(n_layers)]
    if "sliding_attention" in types and w is None:
        raise RefError("layer_types has sliding_attention layers but there is no sliding_window")
    return [w if t == "sliding_attention" else None for t in types]


class Model:
    def __init__(self, model_dir):
        with open(os.path.join(model_dir, "config.json")) as f:
            cfg = json.load(f)
        self.cfg = cfg
        self.arch = cfg.get("model_type")
        if self.arch not in SUPPORTED:
            raise RefError(f"{model_dir}: model_type {self.arch!r} is not supported ({', '.join(SUPPORTED)})")
        if cfg.get("use_sliding_window") and self.arch == "qwen3_moe":
            raise RefError(f"{model_dir}: use_sliding_window is not supported")
        self.H = cfg["hidden_size"]
        self.L = cfg["num_hidden_layers"]
        self.nh = cfg["num_attention_heads"]
        self.nkv = cfg.get("num_key_value_heads") or self.nh
        self.hd = cfg.get("head_dim") or (128 if self.arch == "qwen3" else self.H // self.nh)  # Qwen3Config: 128
        self.V = cfg["vocab_size"]
        self.eps = float(cfg.get("rms_norm_eps", 1e-6))
        self.windows = layer_windows(cfg, self.arch, self.L) + [None]  # [L]: the MTP layer, full attention
        self.max_pos = cfg.get("max_position_embeddings")
        self.rope_factor, self.interleave = 1.0, False
        if self.arch in MLA:
            self._mla_config(cfg)
        else:
            # Glm4MoeConfig defaults partial_rotary_factor to 0.5
            prf = cfg.get("partial_rotary_factor", 0.5 if self.arch == "glm4_moe" else 1.0)
            self.rot = int(self.hd * float(prf))
            if self.arch == "gpt_oss":
                self._oss_rope(cfg)
            else:
                self.inv_freq = rope_inv_freq(cfg, self.rot)
        if self.nh % self.nkv:
            raise RefError(f"{model_dir}: num_key_value_heads {self.nkv} does not divide num_attention_heads {self.nh}")
        t = load_tensors(model_dir)
        self.t = t

        def need(name, shape):
            if name not in t:
                raise RefError(f"{model_dir}: tensor {name} is missing")
            if tuple(t[name].shape) != tuple(shape):
                raise RefError(f"{model_dir}: tensor {name} has shape {list(t[name].shape)}, expected {list(shape)}")
            return t[name]

        H, hd, nh, nkv = self.H, self.hd, self.nh, self.nkv
        self.need = need
        self.embed = need("model.embed_tokens.weight", (self.V, H))
        if cfg.get("tie_word_embeddings", False) or "lm_head.weight" not in t:
            if not cfg.get("tie_word_embeddings", False):
                raise RefError(f"{model_dir}: lm_head.weight is missing and tie_word_embeddings is false")
            self.lm_head = self.embed
        else:
            self.lm_head = need("lm_head.weight", (self.V, H))
        self.norm = need("model.norm.weight", (H,))
        self.layers = []
        for i in range(self.L):
            p = f"model.layers.{i}."
            ly = {
                "in_norm": need(p + "input_layernorm.weight", (H,)),
                "post_norm": need(p + "post_attention_layernorm.weight", (H,)),
            }
            if self.arch in MLA:
                ly.update(self._load_mla(i, p, need))
            else:
                ly.update({
                    "q": need(p + "self_attn.q_proj.weight", (nh * hd, H)),
                    "k": need(p + "self_attn.k_proj.weight", (nkv * hd, H)),
                    "v": need(p + "self_attn.v_proj.weight", (nkv * hd, H)),
                    "o": need(p + "self_attn.o_proj.weight", (H, nh * hd)),
                })
            if (self.arch == "glm4_moe" and cfg.get("attention_bias", False)) or self.arch == "qwen2" or \
                    (self.arch == "qwen3" and cfg.get("attention_bias", False)):
                ly["bq"] = need(p + "self_attn.q_proj.bias", (nh * hd,))
                ly["bk"] = need(p + "self_attn.k_proj.bias", (nkv * hd,))
                ly["bv"] = need(p + "self_attn.v_proj.bias", (nkv * hd,))
            if self.arch == "qwen3" and cfg.get("attention_bias", False):  # Qwen3Attention biases o_proj too
                ly["bo"] = need(p + "self_attn.o_proj.bias", (H,))
            if self.arch == "gpt_oss":
                if cfg.get("attention_bias", True):  # GptOssConfig's default: q/k/v/o biases
                    for n, rows in (("q", nh * hd), ("k", nkv * hd), ("v", nkv * hd), ("o", H)):
                        ly["b" + n] = need(p + f"self_attn.{n}_proj.bias", (rows,))
                ly["sinks"] = need(p + "self_attn.sinks", (nh,))
            if self.arch in ("qwen3_moe", "qwen3") or (self.arch == "glm4_moe" and cfg.get("use_qk_norm", False)):
                ly["q_norm"] = need(p + "self_attn.q_norm.weight", (hd,))
                ly["k_norm"] = need(p + "self_attn.k_norm.weight", (hd,))
            ly["mlp"] = self._load_mlp(i, p, need)
            self.layers.append(ly)

    def _oss_rope(self, cfg):
        """gpt-oss: yarn (GptOssConfig's default without rope_scaling / rope_parameters: factor 32 over 4096
        positions, beta 32 / 1, truncate false), cos and sin times the attention factor."""
        rs = cfg.get("rope_scaling") or cfg.get("rope_parameters") or {
            "rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
            "original_max_position_embeddings": 4096}
        c = dict(cfg, rope_theta=cfg.get("rope_theta") or rs.get("rope_theta") or 150000.0)
        if rs.get("rope_type", rs.get("type")) == "yarn":
            self.inv_freq, self.rope_factor = yarn_inv_freq(c, rs, self.rot)
            if rs.get("attention_factor"):
                self.rope_factor = float(rs["attention_factor"])
        else:
            self.inv_freq = rope_inv_freq(dict(c, rope_scaling=rs), self.rot)

    def _mla_config(self, cfg):
        # DeepseekV32Config defaults q_lora_rank to 1536 (its indexer reads the query latent)
        self.q_lora = cfg.get("q_lora_rank", 1536 if self.arch == "deepseek_v32" else None) or 0
        self.kv_lora, self.nope = cfg["kv_lora_rank"], cfg["qk_nope_head_dim"]
        self.rope_d, self.vd = cfg["qk_rope_head_dim"], cfg["v_head_dim"]
        self.interleave = bool(cfg.get("rope_interleave", True)) if self.arch == "deepseek_v3" else True
        self.scale = (self.nope + self.rope_d) ** -0.5
        rs = cfg.get("rope_scaling") or cfg.get("rope_parameters")
        kind = rs.get("rope_type", rs.get("type")) if rs else None
        if kind == "yarn":
            self.inv_freq, self.rope_factor = yarn_inv_freq(cfg, rs, self.rope_d)
            if rs.get("mscale_all_dim"):
                m = yarn_get_mscale(float(rs["factor"]), float(rs["mscale_all_dim"]))
                self.scale *= m * m
        elif kind in (None, "default"):
            self.inv_freq = rope_inv_freq(cfg, self.rope_d)
        else:
            raise RefError(f"rope_scaling type {kind!r} is not supported for MLA (yarn, default)")
        self.dsa = self.arch in DSA
        if self.dsa:
            v32 = self.arch == "deepseek_v32"
            self.ih, self.idh = cfg.get("index_n_heads", 64 if v32 else 32), cfg.get("index_head_dim", 128)
            self.topk = cfg.get("index_topk", 2048)
            # DeepSeek-V3.2: an indexer in every layer, its RoPE over halves (GLM-5's interleaves pairs)
            self.indexer_types = ["full"] * self.L if v32 else cfg.get("indexer_types") or ["full"] * self.L
            self.idx_interleave = not v32

    def _load_mla(self, i, p, need):
        H, nh, qk = self.H, self.nh, self.nope + self.rope_d
        a = p + "self_attn."
        ly = {"kv_a": need(a + "kv_a_proj_with_mqa.weight", (self.kv_lora + self.rope_d, H)),
              "kv_norm": need(a + "kv_a_layernorm.weight", (self.kv_lora,)),
              "kv_b": need(a + "kv_b_proj.weight", (nh * (self.nope + self.vd), self.kv_lora)),
              "o": need(a + "o_proj.weight", (H, nh * self.vd))}
        if self.q_lora:
            ly.update({"q_a": need(a + "q_a_proj.weight", (self.q_lora, H)),
                       "q_a_norm": need(a + "q_a_layernorm.weight", (self.q_lora,)),
                       "q_b": need(a + "q_b_proj.weight", (nh * qk, self.q_lora))})
        else:
            ly["q"] = need(a + "q_proj.weight", (nh * qk, H))
        if self.dsa and (i >= self.L or self.indexer_types[i] == "full"):  # an MTP layer has its own indexer
            x = a + "indexer."
            ly["idx"] = {"wq_b": need(x + "wq_b.weight", (self.ih * self.idh, self.q_lora)),
                         "wk": need(x + "wk.weight", (self.idh, H)),
                         "k_norm": need(x + "k_norm.weight", (self.idh,)),
                         "k_norm_b": need(x + "k_norm.bias", (self.idh,)),
                         "wproj": need(x + "weights_proj.weight", (self.ih, H))}
        return ly

    def _load_mlp(self, i, p, need):
        cfg, H = self.cfg, self.H
        if self.arch in DEEPSEEK_FAMILY:
            E = cfg.get("n_routed_experts", 0)
            ds = self.arch in ("deepseek_v3", "deepseek_v32")  # DeepseekV3Config: 8 groups keeping 4; GLM's 1 and 1
            types = cfg.get("mlp_layer_types")
            # an MTP layer (i >= L) is MoE whenever there are experts (SGLang's is_nextn decoder layer)
            sparse = i >= self.L or ((types[i] == "sparse") if types else i >= cfg.get("first_k_dense_replace", 0))
            if E and sparse:
                F, k, q = cfg["moe_intermediate_size"], cfg["num_experts_per_tok"], p + "mlp."
                SF = F * cfg.get("n_shared_experts", 1)
                experts = [(need(f"{q}experts.{e}.gate_proj.weight", (F, H)),
                            need(f"{q}experts.{e}.up_proj.weight", (F, H)),
                            need(f"{q}experts.{e}.down_proj.weight", (H, F))) for e in range(E)]
                shared = ((need(q + "shared_experts.gate_proj.weight", (SF, H)),
                           need(q + "shared_experts.up_proj.weight", (SF, H)),
                           need(q + "shared_experts.down_proj.weight", (H, SF))) if SF else None)
                return ("sigmoid", need(q + "gate.weight", (E, H)), need(q + "gate.e_score_correction_bias", (E,)),
                        experts, k, bool(cfg.get("norm_topk_prob", True)), cfg.get("n_group") or (8 if ds else 1),
                        cfg.get("topk_group") or (4 if ds else 1),
                        float(cfg.get("routed_scaling_factor", 1.0 if self.arch == "glm4_moe" else 2.5)), shared)
            F = cfg["intermediate_size"]
            return ("dense", need(p + "mlp.gate_proj.weight", (F, H)), need(p + "mlp.up_proj.weight", (F, H)),
                    need(p + "mlp.down_proj.weight", (H, F)))
        if self.arch in ("llama", "mistral", "qwen2", "qwen3"):
            F = cfg["intermediate_size"]
            return ("dense", need(p + "mlp.gate_proj.weight", (F, H)), need(p + "mlp.up_proj.weight", (F, H)),
                    need(p + "mlp.down_proj.weight", (H, F)))
        if self.arch == "gpt_oss":
            E, k, F, q = cfg.get("num_local_experts", 128), cfg.get("num_experts_per_tok", 4), \
                cfg["intermediate_size"], p + "mlp."
            gu, gub = need(q + "experts.gate_up_proj", (E, H, 2 * F)), need(q + "experts.gate_up_proj_bias", (E, 2 * F))
            dn, dnb = need(q + "experts.down_proj", (E, F, H)), need(q + "experts.down_proj_bias", (E, H))
            return ("oss", need(q + "router.weight", (E, H)), need(q + "router.bias", (E,)),
                    [(gu[e], gub[e], dn[e], dnb[e]) for e in range(E)], k,
                    float(cfg.get("swiglu_alpha", 1.702)), float(cfg.get("swiglu_limit", 7.0)))
        if self.arch == "mixtral":
            E, k, F = cfg["num_local_experts"], cfg["num_experts_per_tok"], cfg["intermediate_size"]
            q = p + "block_sparse_moe."
            experts = [(need(f"{q}experts.{e}.w1.weight", (F, H)), need(f"{q}experts.{e}.w3.weight", (F, H)),
                        need(f"{q}experts.{e}.w2.weight", (H, F))) for e in range(E)]
            return ("moe", need(q + "gate.weight", (E, H)), experts, k, True)
        # qwen3_moe: Qwen3MoeDecoderLayer's choice between MoE and a dense MLP
        E = cfg.get("num_experts", 0)
        step = cfg.get("decoder_sparse_step", 1) or 1
        if i not in (cfg.get("mlp_only_layers") or []) and E > 0 and (i + 1) % step == 0:
            F, k = cfg["moe_intermediate_size"], cfg["num_experts_per_tok"]
            q = p + "mlp."
            experts = [(need(f"{q}experts.{e}.gate_proj.weight", (F, H)), need(f"{q}experts.{e}.up_proj.weight", (F, H)),
                        need(f"{q}experts.{e}.down_proj.weight", (H, F))) for e in range(E)]
            return ("moe", need(q + "gate.weight", (E, H)), experts, k, bool(cfg.get("norm_topk_prob", False)))
        F = cfg["intermediate_size"]
        return ("dense", need(p + "mlp.gate_proj.weight", (F, H)), need(p + "mlp.up_proj.weight", (F, H)),
                need(p + "mlp.down_proj.weight", (H, F)))

    # -- pieces
    def new_cache(self, capacity):
        if self.arch in MLA:  # the latent and the rope key, like transformers' MLA cache; indexer keys
            return {"len": 0, "cap": capacity,
                    "lat": [np.zeros((capacity, self.kv_lora)) for _ in range(self.L + 1)],
                    "kpe": [np.zeros((capacity, self.rope_d)) for _ in range(self.L + 1)],
                    "ik": [np.zeros((capacity, self.idh)) if self.dsa else None for _ in range(self.L + 1)],
                    "sel": None}
        return {"len": 0, "cap": capacity,
                "k": [np.zeros((capacity, self.nkv, self.hd)) for _ in range(self.L + 1)],
                "v": [np.zeros((capacity, self.nkv, self.hd)) for _ in range(self.L + 1)]}

    def _rope(self, x, pos):
        r = self.rot  # partial rotary (GLM-4-MoE): the first r dims, the rest passes
        ang = pos[:, None] * self.inv_freq[None, :]          # [T, r/2]
        ang = np.concatenate([ang, ang], axis=-1)[:, None, :]  # [T, 1, r]
        f = self.rope_factor  # yarn's attention factor (gpt-oss); 1 otherwise
        xr = x[..., :r] * (np.cos(ang) * f) + rotate_half(x[..., :r]) * (np.sin(ang) * f)
        return np.concatenate([xr, x[..., r:]], axis=-1)

    def _indexer(self, ly, l, h, qr, cache, pos0):
        """The DSA indexer (GLM-5, DeepSeek-V3.2): the positions each query of h attends to."""
        ix, T, S = ly["idx"], h.shape[0], pos0 + h.shape[0]
        pos = np.arange(pos0, S, dtype=np.float64)
        r = self.rope_d
        q = (qr @ ix["wq_b"].T).reshape(T, self.ih, self.idh)
        il = self.idx_interleave
        q = np.concatenate([rope_any(q[..., :r], pos, self.inv_freq, self.rope_factor, il), q[..., r:]], -1)
        k = layer_norm(h @ ix["wk"].T, ix["k_norm"], ix["k_norm_b"], 1e-6)[:, None, :]
        k = np.concatenate([rope_any(k[..., :r], pos, self.inv_freq, self.rope_factor, il), k[..., r:]], -1)[:, 0]
        cache["ik"][l][pos0:S] = k
        K = cache["ik"][l][:S]
        sc = np.maximum(np.einsum("thd,sd->ths", q, K) * self.idh ** -0.5, 0.0)
        w = (h @ ix["wproj"].T) * self.ih ** -0.5                   # [T, ih]
        score = np.einsum("ths,th->ts", sc, w)
        sel = []
        for t in range(T):
            n = pos0 + t + 1
            order = np.argsort(-score[t, :n], kind="stable")   # the lowest position wins a tie
            if n > self.topk and score[t, order[self.topk - 1]] == score[t, order[self.topk]]:
                # torch.topk breaks such a tie its own way: transformers may then attend elsewhere
                print(f"reference.py: layer {l} position {pos0 + t}: DSA index scores tie at the top-k boundary",
                      file=sys.stderr)
            sel.append(np.sort(order[:min(self.topk, n)]))
        return sel

    def _mla(self, ly, l, h, cache, pos0):
        """Multi-head latent attention, K and V expanded per head (no absorption)."""
        T, nh, nope, rd, vd, R = h.shape[0], self.nh, self.nope, self.rope_d, self.vd, self.kv_lora
        pos = np.arange(pos0, pos0 + T, dtype=np.float64)
        if self.q_lora:
            qr = rms_norm(h @ ly["q_a"].T, ly["q_a_norm"], 1e-6)
            q = (qr @ ly["q_b"].T).reshape(T, nh, nope + rd)
        else:
            qr, q = None, (h @ ly["q"].T).reshape(T, nh, nope + rd)
        ckv = h @ ly["kv_a"].T
        lat = rms_norm(ckv[:, :R], ly["kv_norm"], 1e-6)
        kpe = rope_any(ckv[:, None, R:], pos, self.inv_freq, self.rope_factor, self.interleave)[:, 0]
        qpe = rope_any(q[..., nope:], pos, self.inv_freq, self.rope_factor, self.interleave)
        S = pos0 + T
        cache["lat"][l][pos0:S], cache["kpe"][l][pos0:S] = lat, kpe
        kv = (cache["lat"][l][:S] @ ly["kv_b"].T).reshape(S, nh, nope + vd)
        K = np.concatenate([kv[..., :nope], np.broadcast_to(cache["kpe"][l][:S, None, :], (S, nh, rd))], -1)
        Q = np.concatenate([q[..., :nope], qpe], -1)
        scores = np.einsum("thd,shd->hts", Q, K) * self.scale
        allowed = np.arange(S)[None, :] <= np.arange(pos0, S)[:, None]
        if self.dsa:
            if "idx" in ly:
                cache["sel"] = self._indexer(ly, l, h, qr, cache, pos0)
            keep = np.zeros_like(allowed)
            for t, chosen in enumerate(cache["sel"]):
                keep[t, chosen] = True
            allowed &= keep
        p = softmax(np.where(allowed[None], scores, -np.inf), axis=-1)
        out = np.einsum("hts,shd->thd", p, kv[..., nope:]).reshape(T, nh * vd)
        return out @ ly["o"].T

    def _attention(self, ly, l, h, cache, pos0):
        if self.arch in MLA:
            return self._mla(ly, l, h, cache, pos0)
        T, nh, nkv, hd = h.shape[0], self.nh, self.nkv, self.hd
        q = (h @ ly["q"].T + ly.get("bq", 0.0)).reshape(T, nh, hd)
        k = (h @ ly["k"].T + ly.get("bk", 0.0)).reshape(T, nkv, hd)
        v = (h @ ly["v"].T + ly.get("bv", 0.0)).reshape(T, nkv, hd)
        if "q_norm" in ly:
            q = rms_norm(q, ly["q_norm"], self.eps)
            k = rms_norm(k, ly["k_norm"], self.eps)
        pos = np.arange(pos0, pos0 + T, dtype=np.float64)
        q, k = self._rope(q, pos), self._rope(k, pos)
        S = pos0 + T
        cache["k"][l][pos0:S] = k
        cache["v"][l][pos0:S] = v
        K, Vv = cache["k"][l][:S], cache["v"][l][:S]              # [S, nkv, hd]
        g = nh // nkv
        qg = q.reshape(T, nkv, g, hd)                              # q head i uses kv head i // g
        scores = np.einsum("tkgd,skd->kgts", qg, K) / math.sqrt(hd)  # [nkv, g, T, S]
        qpos = np.arange(pos0, S)[:, None]
        kpos = np.arange(S)[None, :]
        allowed = kpos <= qpos
        if self.windows[l]:
            allowed &= (qpos - kpos) < self.windows[l]
        scores = np.where(allowed, scores, -np.inf)
        if "sinks" in ly:  # gpt-oss: one more logit per head in each row's denominator, with no value
            sink = ly["sinks"].reshape(nkv, g)[:, :, None, None]
            m = np.maximum(np.max(scores, axis=-1, keepdims=True), sink)
            e = np.exp(scores - m)
            p = e / (np.sum(e, axis=-1, keepdims=True) + np.exp(sink - m))
        else:
            p = softmax(scores, axis=-1)
        out = np.einsum("kgts,skd->tkgd", p, Vv).reshape(T, nh * hd)
        return out @ ly["o"].T + ly.get("bo", 0.0)

    @staticmethod
    def _dense(h, wg, wu, wd):
        return (silu(h @ wg.T) * (h @ wu.T)) @ wd.T

    def _sigmoid_moe(self, mlp, h):
        """DeepseekV3MoE: sigmoid scores, biased choice in topk_group groups (ranked by their best two), weights
        from the unbiased scores, renormalised, times routed_scaling_factor; plus the shared experts."""
        _, router, bias, experts, k, renorm, G, TG, scale, shared = mlp
        scores = 1.0 / (1.0 + np.exp(-(h @ router.T)))             # [T, E]
        choice = scores + bias
        T, E = scores.shape
        grp = np.sort(choice.reshape(T, G, E // G), axis=-1)[..., -2:].sum(-1) if E // G >= 2 \
            else choice.reshape(T, G, E // G).max(-1)
        keep_g = np.argsort(-grp, axis=-1, kind="stable")[:, :TG]
        mask = np.zeros((T, G), dtype=bool)
        np.put_along_axis(mask, keep_g, True, axis=-1)
        choice = np.where(np.repeat(mask, E // G, axis=-1), choice, -np.inf)
        top = np.argsort(-choice, axis=-1, kind="stable")[:, :k]
        w = np.take_along_axis(scores, top, axis=-1)
        if renorm:
            w = w / (np.sum(w, axis=-1, keepdims=True) + 1e-20)
        w = w * scale
        out = np.zeros_like(h)
        for e, (wg, wu, wd) in enumerate(experts):
            rows, slot = np.nonzero(top == e)
            if rows.size:
                out[rows] += w[rows, slot][:, None] * self._dense(h[rows], wg, wu, wd)
        return out + (self._dense(h, *shared) if shared else 0.0)

    @staticmethod
    def _oss_moe(mlp, h):
        """GptOssMLP: top-k of the biased router logits (lowest id wins ties), softmax over those k, experts
        x @ W + b with gate/up interleaved by column and the clamped SwiGLU (up + 1) * g * sigmoid(alpha g)."""
        _, wr, br, experts, k, alpha, limit = mlp
        logits = h @ wr.T + br
        top = np.argsort(-logits, axis=-1, kind="stable")[:, :k]
        w = softmax(np.take_along_axis(logits, top, axis=-1), axis=-1)
        out = np.zeros_like(h)
        for e, (gu, gub, dn, dnb) in enumerate(experts):
            rows, slot = np.nonzero(top == e)
            if rows.size:
                x = h[rows] @ gu + gub
                gate, up = np.minimum(x[:, 0::2], limit), np.clip(x[:, 1::2], -limit, limit)
                y = ((up + 1.0) * gate / (1.0 + np.exp(-alpha * gate))) @ dn + dnb
                out[rows] += w[rows, slot][:, None] * y
        return out

    def _mlp(self, mlp, h):
        if mlp[0] == "dense":
            return self._dense(h, *mlp[1:])
        if mlp[0] == "oss":
            return self._oss_moe(mlp, h)
        if mlp[0] == "sigmoid":
            return self._sigmoid_moe(mlp, h)
        _, router, experts, k, renorm = mlp
        probs = softmax(h @ router.T, axis=-1)                    # [T, E]
        top = np.argsort(-probs, axis=-1, kind="stable")[:, :k]   # lowest id wins ties
        w = np.take_along_axis(probs, top, axis=-1)
        if renorm:
            w = w / np.sum(w, axis=-1, keepdims=True)
        out = np.zeros_like(h)
        for e, (wg, wu, wd) in enumerate(experts):
            rows, slot = np.nonzero(top == e)
            if rows.size:
                out[rows] += w[rows, slot][:, None] * self._dense(h[rows], wg, wu, wd)
        return out

    def forward(self, ids, cache):
        """Runs ids (appended to cache); returns logits [len(ids), vocab]."""
        return self.hidden(ids, cache) @ self.lm_head.T

    def hidden(self, ids, cache):
        """Runs ids (appended to cache); returns the final-normed hidden states [len(ids), H]."""
        ids = np.asarray(ids, dtype=np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= self.V):
            raise RefError(f"token id out of range 0..{self.V - 1}")
        pos0 = cache["len"]
        if pos0 + len(ids) > cache["cap"]:
            raise RefError("KV cache capacity exceeded")
        x = self.embed[ids]
        for l, ly in enumerate(self.layers):
            x = x + self._attention(ly, l, rms_norm(x, ly["in_norm"], self.eps), cache, pos0)
            x = x + self._mlp(ly["mlp"], rms_norm(x, ly["post_norm"], self.eps))
        cache["len"] = pos0 + len(ids)
        return rms_norm(x, self.norm, self.eps)

    # -- multi-token prediction (the first MTP layer; layer index L in the caches)
    def _load_mtp(self):
        if getattr(self, "mtp", None) is not None:
            return self.mtp
        if self.arch not in DEEPSEEK_FAMILY or not self.cfg.get("num_nextn_predict_layers", 0):
            raise RefError(f"model_type {self.arch!r} with num_nextn_predict_layers "
                           f"{self.cfg.get('num_nextn_predict_layers', 0)} has no MTP layer")
        L, H, need, t = self.L, self.H, self.need, self.t
        p = f"model.layers.{L}."
        mt = {"enorm": need(p + "enorm.weight", (H,)), "hnorm": need(p + "hnorm.weight", (H,)),
              "eh_proj": need(p + "eh_proj.weight", (H, 2 * H)),
              "head_norm": need(p + "shared_head.norm.weight", (H,)),
              # GLM-4.5 ships no MTP embedding and some releases no head: the model's own then
              "head": need(p + "shared_head.head.weight", (self.V, H)) if p + "shared_head.head.weight" in t
              else self.lm_head,
              "embed": need(p + "embed_tokens.weight", (self.V, H)) if p + "embed_tokens.weight" in t
              else self.embed,
              "in_norm": need(p + "input_layernorm.weight", (H,)),
              "post_norm": need(p + "post_attention_layernorm.weight", (H,))}
        if self.arch in MLA:
            mt.update(self._load_mla(L, p, need))
        else:
            nh, nkv, hd, a = self.nh, self.nkv, self.hd, p + "self_attn."
            mt.update({"q": need(a + "q_proj.weight", (nh * hd, H)), "k": need(a + "k_proj.weight", (nkv * hd, H)),
                       "v": need(a + "v_proj.weight", (nkv * hd, H)), "o": need(a + "o_proj.weight", (H, nh * hd))})
            if self.cfg.get("attention_bias", False):
                mt.update({"bq": need(a + "q_proj.bias", (nh * hd,)), "bk": need(a + "k_proj.bias", (nkv * hd,)),
                           "bv": need(a + "v_proj.bias", (nkv * hd,))})
            if self.cfg.get("use_qk_norm", False):
                mt.update({"q_norm": need(a + "q_norm.weight", (hd,)), "k_norm": need(a + "k_norm.weight", (hd,))})
        mt["mlp"] = self._load_mlp(L, p, need)
        self.mtp = mt
        return mt

    def _mtp_rows(self, tokens, hid, cache, pos0):
        """The MTP layer at positions pos0.. : x = eh_proj([enorm(embed(token)); hnorm(hid)]) (embedding
        first), one decoder block with its own KV (layer index L); returns (g, logits): g the block's output
        (the residual stream, before shared_head.norm), logits = head(shared_head.norm(g))."""
        mt, eps = self._load_mtp(), self.eps
        e = rms_norm(mt["embed"][np.asarray(tokens, dtype=np.int64)], mt["enorm"], eps)
        x = np.concatenate([e, rms_norm(hid, mt["hnorm"], eps)], axis=-1) @ mt["eh_proj"].T
        x = x + self._attention(mt, self.L, rms_norm(x, mt["in_norm"], eps), cache, pos0)
        x = x + self._mlp(mt["mlp"], rms_norm(x, mt["post_norm"], eps))
        return x, rms_norm(x, mt["head_norm"], eps) @ mt["head"].T

    def mtp_extend(self, ids, extra=8):
        """Teacher-forced: the target over ids, then the MTP layer at every position p < len(ids) - 1 from the
        target's final-normed hidden at p and ids[p + 1] (predicting ids[p + 2]). Returns (g [N-1, H], logits
        [N-1, V], cache): the cache holds room for `extra` chained steps."""
        ids = list(ids)
        if len(ids) < 2:
            raise RefError("the MTP needs at least two ids (a position and the token after it)")
        cache = self.new_cache(len(ids) + extra)
        hid = self.hidden(ids, cache)
        g, logits = self._mtp_rows(ids[1:], hid[:-1], cache, 0)
        return g, logits, cache

    def mtp_chain(self, cache, pos, token, g_prev):
        """One chained step at pos: embed(token) with the MTP hidden of pos - 1. Returns (g [H], logits [V])."""
        g, logits = self._mtp_rows([token], np.asarray(g_prev)[None, :], cache, pos)
        return g[0], logits[0]

    # -- entry points
    def logits(self, ids):
        """Teacher-forced logits of every position of ids, in one batch."""
        return self.forward(ids, self.new_cache(len(ids)))

    def greedy(self, prompt, steps):
        """Greedy continuation: (generated ids, logits rows [steps, vocab])."""
        if not len(prompt):
            raise RefError("the prompt needs at least one token")
        cache = self.new_cache(len(prompt) + steps)
        row = self.forward(prompt, cache)[-1]
        ids, rows = [], []
        for i in range(steps):
            rows.append(row)
            nxt = int(np.argmax(row))  # first maximum: lowest id wins ties
            ids.append(nxt)
            if i + 1 < steps:
                row = self.forward([nxt], cache)[-1]
        return ids, np.array(rows).reshape(steps, self.V)


def log_softmax(rows):
    m = np.max(rows, axis=-1, keepdims=True)
    return rows - m - np.log(np.sum(np.exp(rows - m), axis=-1, keepdims=True))


def top_logprobs(row, n=5):
    lp = log_softmax(row[None, :])[0]
    order = np.argsort(-lp, kind="stable")[:n]
    return [[int(i), float(lp[i])] for i in order]


def margin(row):
    two = np.sort(row)[-2:]
    return float(two[1] - two[0])


# ---------------------------------------------------------------------- CLI
def parse_ids(s):
    try:
        return [int(x) for x in s.replace(",", " ").split()]
    except ValueError:
        raise RefError(f"--ids: expected comma-separated integers, got {s!r}")


def check_logits(model, args, ids):
    V = model.V
    size = os.path.getsize(args.check_logits)
    if size == 0 or size % (4 * V):
        raise RefError(f"{args.check_logits}: {size} bytes is not a whole number of rows of {V} float32 values")
    R = size // (4 * V)
    P = args.prompt_len if args.prompt_len is not None else len(ids) - R
    if P < 1 or P + R - 1 > len(ids):
        raise RefError(f"{args.check_logits}: {R} rows do not fit {len(ids)} ids with a prompt of {P} "
                       f"(expected 1 <= prompt <= len(ids) - rows + 1)")
    got = np.fromfile(args.check_logits, dtype="<f4").astype(np.float64).reshape(R, V)
    ref = model.logits(ids)[P - 1:P - 1 + R]
    worst = 0.0
    bad = 0
    for i in range(R):
        finite = bool(np.all(np.isfinite(got[i])))
        err = float(np.max(np.abs(got[i] - ref[i]))) if finite else float("inf")
        worst = max(worst, err)
        over = err > args.tol
        bad += over
        a, b = int(np.argmax(ref[i])), int(np.argmax(got[i])) if finite else -1
        print(f"step {i:4d}: max abs err {err:.3e}  argmax ref {a} file {b}"
              f"{'' if a == b else ' (differ)'}{'  OVER TOLERANCE' if over else ''}")
    verdict = "FAIL" if bad else "OK"
    print(f"{verdict}: max abs error {worst:.3e} over {R} rows (prompt {P} tokens, tolerance {args.tol:g})"
          f"{f'; {bad} rows over' if bad else ''}")
    return 1 if bad else 0


def check_mtp(model, args, ids):
    chain = parse_ids(args.mtp_chain) if args.mtp_chain else []
    g, ref, cache = model.mtp_extend(ids, extra=len(chain) + 1)
    rows, prev = list(ref), g[-1]
    for j, tok in enumerate(chain, start=1):
        prev, row = model.mtp_chain(cache, len(ids) - 2 + j, tok, prev)
        rows.append(row)
    ref = np.array(rows)
    V, R = model.V, len(rows)
    size = os.path.getsize(args.mtp_check)
    if size != 4 * V * R:
        raise RefError(f"{args.mtp_check}: {size} bytes, expected {R} rows ({len(ids) - 1} positions + "
                       f"{len(chain)} chained) of {V} float32 values")
    got = np.fromfile(args.mtp_check, dtype="<f4").astype(np.float64).reshape(R, V)
    bad, worst = 0, 0.0
    for i in range(R):
        finite = bool(np.all(np.isfinite(got[i])))
        err = float(np.max(np.abs(got[i] - ref[i]))) if finite else float("inf")
        worst = max(worst, err)
        over = err > args.tol
        bad += over
        a, b = int(np.argmax(ref[i])), int(np.argmax(got[i])) if finite else -1
        what = f"position {i:3d}" if i < len(ids) - 1 else f"chained {i - len(ids) + 2}"
        print(f"{what}: max abs err {err:.3e}  argmax ref {a} file {b}{'' if a == b else ' (differ)'}"
              f"{'  OVER TOLERANCE' if over else ''}")
    print(f"{'FAIL' if bad else 'OK'}: MTP max abs error {worst:.3e} over {R} rows ({len(chain)} chained, "
          f"tolerance {args.tol:g}){f'; {bad} rows over' if bad else ''}")
    return 1 if bad else 0


def main(argv=None):
    ap = argparse.ArgumentParser(description="Float64 numpy reference forward pass (see the module docstring).")
    ap.add_argument("model_dir")
    ap.add_argument("--ids", required=True, help="token ids, comma-separated (the prompt; with --check-logits the "
                                                 "whole sequence)")
    ap.add_argument("--steps", type=int, default=16, help="greedy tokens to generate (default 16)")
    ap.add_argument("--logits-out", metavar="F", help="write the greedy steps' logits as float32 rows")
    ap.add_argument("--json", action="store_true", help="print ids, top-5 logprobs and the smallest margin as JSON")
    ap.add_argument("--check-logits", metavar="F", help="compare F's float32 rows with teacher-forced logits")
    ap.add_argument("--prompt-len", type=int, help="with --check-logits: prompt length (default len(ids) - rows)")
    ap.add_argument("--tol", type=float, default=1e-3, help="with --check-logits: max abs error allowed (1e-3)")
    ap.add_argument("--mtp-check", metavar="F", help="compare F's float32 rows with the MTP layer's logits")
    ap.add_argument("--mtp-chain", default="", help="with --mtp-check: the chained steps' tokens, comma-separated")
    args = ap.parse_args(argv)
    try:
        ids = parse_ids(args.ids)
        if not ids:
            raise RefError("--ids: expected at least one id")
        model = Model(args.model_dir)
        if args.mtp_check:
            return check_mtp(model, args, ids)
        if args.check_logits:
            return check_logits(model, args, ids)
        if args.steps < 1:
            raise RefError("--steps: expected a positive number")
        out, rows = model.greedy(ids, args.steps)
        if args.logits_out:
            rows.astype("<f4").tofile(args.logits_out)
        if args.json:
            print(json.dumps({"prompt_ids": ids, "greedy_ids": out,
                              "top5": [top_logprobs(r) for r in rows],
                              "min_margin": min(margin(r) for r in rows)}))
        else:
            print(" ".join(str(i) for i in out))
        return 0
    except (RefError, OSError, KeyError, ValueError) as e:
        print(f"reference.py: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
