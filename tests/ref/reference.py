#!/usr/bin/env python3
"""Float64 numpy reference forward pass: the independent oracle for switchyard.

Reads a Hugging Face model directory by itself (config.json, model.safetensors
or model.safetensors.index.json + shards; F32, F16, BF16, F64) and runs
LlamaForCausalLM, MixtralForCausalLM or Qwen3MoeForCausalLM in float64 with
Hugging Face's semantics: RMSNorm x * rsqrt(mean(x^2) + eps) * w, rotate-half
RoPE over the whole head_dim (rope_theta; rope_scaling llama3 or linear),
GQA, SiLU-gated MLPs, softmax routers with top-k (lowest expert id wins a
tie), Mixtral's renormalised top-k, Qwen3-MoE's per-head q/k RMSNorm before
RoPE, norm_topk_prob, decoder_sparse_step and mlp_only_layers. No tokenizer:
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

As a library: Model(dir).greedy(prompt_ids, steps) -> (ids, logits rows),
Model(dir).logits(ids) -> teacher-forced logits for every position.
"""

import argparse
import json
import math
import os
import struct
import sys

import numpy as np

SUPPORTED = ("llama", "mixtral", "qwen3_moe")


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
    else:
        raise RefError(f"{where}: dtype {dtype} not supported (F32, F16, BF16, F64)")
    return a.astype(np.float64).reshape(shape)


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
    return tensors


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


def rotate_half(x):
    h = x.shape[-1] // 2
    return np.concatenate([-x[..., h:], x[..., :h]], axis=-1)


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
        self.hd = cfg.get("head_dim") or self.H // self.nh
        self.V = cfg["vocab_size"]
        self.eps = float(cfg.get("rms_norm_eps", 1e-6))
        self.window = cfg.get("sliding_window") if self.arch == "mixtral" else None
        self.max_pos = cfg.get("max_position_embeddings")
        self.inv_freq = rope_inv_freq(cfg, self.hd)
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
                "q": need(p + "self_attn.q_proj.weight", (nh * hd, H)),
                "k": need(p + "self_attn.k_proj.weight", (nkv * hd, H)),
                "v": need(p + "self_attn.v_proj.weight", (nkv * hd, H)),
                "o": need(p + "self_attn.o_proj.weight", (H, nh * hd)),
            }
            if self.arch == "qwen3_moe":
                ly["q_norm"] = need(p + "self_attn.q_norm.weight", (hd,))
                ly["k_norm"] = need(p + "self_attn.k_norm.weight", (hd,))
            ly["mlp"] = self._load_mlp(i, p, need)
            self.layers.append(ly)

    def _load_mlp(self, i, p, need):
        cfg, H = self.cfg, self.H
        if self.arch == "llama":
            F = cfg["intermediate_size"]
            return ("dense", need(p + "mlp.gate_proj.weight", (F, H)), need(p + "mlp.up_proj.weight", (F, H)),
                    need(p + "mlp.down_proj.weight", (H, F)))
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
        return {"len": 0, "cap": capacity,
                "k": [np.zeros((capacity, self.nkv, self.hd)) for _ in range(self.L)],
                "v": [np.zeros((capacity, self.nkv, self.hd)) for _ in range(self.L)]}

    def _rope(self, x, pos):
        ang = pos[:, None] * self.inv_freq[None, :]          # [T, hd/2]
        ang = np.concatenate([ang, ang], axis=-1)[:, None, :]  # [T, 1, hd]
        return x * np.cos(ang) + rotate_half(x) * np.sin(ang)

    def _attention(self, ly, l, h, cache, pos0):
        T, nh, nkv, hd = h.shape[0], self.nh, self.nkv, self.hd
        q = (h @ ly["q"].T).reshape(T, nh, hd)
        k = (h @ ly["k"].T).reshape(T, nkv, hd)
        v = (h @ ly["v"].T).reshape(T, nkv, hd)
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
        if self.window:
            allowed &= (qpos - kpos) < self.window
        scores = np.where(allowed, scores, -np.inf)
        p = softmax(scores, axis=-1)
        out = np.einsum("kgts,skd->tkgd", p, Vv).reshape(T, nh * hd)
        return out @ ly["o"].T

    @staticmethod
    def _dense(h, wg, wu, wd):
        return (silu(h @ wg.T) * (h @ wu.T)) @ wd.T

    def _mlp(self, mlp, h):
        if mlp[0] == "dense":
            return self._dense(h, *mlp[1:])
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
        return rms_norm(x, self.norm, self.eps) @ self.lm_head.T

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
    args = ap.parse_args(argv)
    try:
        ids = parse_ids(args.ids)
        if not ids:
            raise RefError("--ids: expected at least one id")
        model = Model(args.model_dir)
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
