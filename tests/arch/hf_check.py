#!/usr/bin/env python3
"""Hugging Face transformers as the oracle: teacher-forced logits of a checkpoint
compared with logits the engine wrote (the layout of reference.py --logits-out:
row i = the distribution after the prompt plus i generated tokens).

    hf_check.py MODEL_DIR --ids PROMPT+GENERATED --check-logits F --prompt-len P [--tol T]

Runs the model in float32 on the CPU with eager attention (the path that
applies the DSA indexer's mask). Prints the max abs error per row and a
summary line; exits 1 when a row is over --tol, 2 on bad input (or when
transformers lacks the architecture).
"""
import argparse
import json
import os
import re
import sys

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("--ids", required=True)
    ap.add_argument("--check-logits", required=True)
    ap.add_argument("--prompt-len", type=int, required=True)
    ap.add_argument("--tol", type=float, default=1e-3)
    a = ap.parse_args()
    try:
        import torch
        import transformers
        from transformers import AutoModelForCausalLM
    except ImportError as e:
        print(f"hf_check.py: {e} (make check-hf installs torch and transformers into a venv)", file=sys.stderr)
        return 2
    ids = [int(x) for x in a.ids.split(",") if x]
    # gpt-oss's MXFP4 experts: without a GPU (triton kernels) transformers runs them only dequantised, into the
    # float32 parameters here; E2M1 values times powers of two are exact in float32, so nothing is rounded.
    with open(os.path.join(a.model_dir, "config.json")) as f:
        qm = (json.load(f).get("quantization_config") or {}).get("quant_method")
    extra = {"quantization_config": transformers.Mxfp4Config(dequantize=True)} if qm == "mxfp4" else {}
    try:
        model, info = AutoModelForCausalLM.from_pretrained(a.model_dir, dtype=torch.float32,
                                                           attn_implementation="eager", output_loading_info=True,
                                                           **extra)
    except (ValueError, KeyError) as e:
        print(f"hf_check.py: transformers {transformers.__version__} cannot load {a.model_dir}: {e}", file=sys.stderr)
        return 2
    # The MTP layers (num_nextn_predict_layers of them, stored as model.layers.{n_layers + i}) are no part of
    # the causal LM: transformers leaves them unloaded (it ignores only the release's own layer number), and
    # so does the engine unless speculative decoding asks. Any other unexpected tensor still fails.
    with open(os.path.join(a.model_dir, "config.json")) as f:
        c = json.load(f)
    L, n_mtp = c["num_hidden_layers"], c.get("num_nextn_predict_layers") or 0
    mtp = re.compile(r"model\.layers\.(\d+)\.")

    def is_mtp(key):
        m = mtp.match(key)
        return bool(m) and L <= int(m.group(1)) < L + n_mtp

    if info.get("unexpected_keys"):
        info["unexpected_keys"] = [k for k in info["unexpected_keys"] if not is_mtp(k)]
    odd = {k: sorted(v) for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    if odd:
        print(f"FAIL: transformers loads {a.model_dir} with {odd}")
        return 1
    model.eval()
    with torch.no_grad():
        ref = model(torch.tensor([ids])).logits[0].double().numpy()
    V = ref.shape[1]
    got = np.fromfile(a.check_logits, dtype="<f4").astype(np.float64)
    if got.size == 0 or got.size % V:
        print(f"hf_check.py: {a.check_logits}: {got.size} values is not a whole number of rows of {V}", file=sys.stderr)
        return 2
    got = got.reshape(-1, V)
    P, R = a.prompt_len, got.shape[0]
    if P < 1 or P - 1 + R > len(ids):
        print(f"hf_check.py: {R} rows do not fit {len(ids)} ids with a prompt of {P}", file=sys.stderr)
        return 2
    worst, bad, first = 0.0, 0, None
    for i in range(R):
        r = ref[P - 1 + i]
        err = float(np.max(np.abs(got[i] - r))) if np.all(np.isfinite(got[i])) else float("inf")
        worst = max(worst, err)
        bad += err > a.tol
        if err > a.tol and first is None:
            first = (i, err)
        print(f"step {i:4d}: max abs err {err:.3e}  argmax hf {int(np.argmax(r))} file {int(np.argmax(got[i]))}")
    where = f"; {bad} rows over, the first at step {first[0]} ({first[1]:.3e})" if first else ""
    print(f"{'FAIL' if bad else 'OK'}: max abs error {worst:.3e} over {R} rows vs transformers "
          f"{transformers.__version__} (tolerance {a.tol:g}){where}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
