#!/usr/bin/env python3
"""Checks reference.py against shared/models/expected_greedy.json.

    validate_expected.py SHARED_MODELS_DIR [--tol 1e-4]

For every model and prompt there: the greedy ids from prompt_ids must equal
greedy_ids (all 64 steps), and the logprob of each recorded top-5 id must be
within --tol of the recorded value (and no other id may beat the 5th by more
than --tol). The KV-cache decode is also checked against one teacher-forced
batch over the same ids (both paths of reference.py agree to 1e-9).
Prints one line per model and a summary; exits 1 on any mismatch.
"""

import argparse
import json
import os
import sys
import time

import numpy as np

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models_dir")
    ap.add_argument("--tol", type=float, default=1e-4)
    args = ap.parse_args()
    with open(os.path.join(args.models_dir, "expected_greedy.json")) as f:
        expected = json.load(f)["models"]
    failures = 0
    n_prompts = n_prompt_ok = n_tokens = n_token_ok = 0
    worst_lp = worst_batch = 0.0
    t0 = time.time()
    for name, cases in expected.items():
        model = reference.Model(os.path.join(args.models_dir, name))
        m_ok = 0
        m_worst = 0.0
        for c in cases:
            steps = len(c["greedy_ids"])
            ids, rows = model.greedy(c["prompt_ids"], steps)
            lp = reference.log_softmax(rows)
            same = sum(int(a == b) for a, b in zip(ids, c["greedy_ids"]))
            n_tokens += steps
            n_token_ok += same
            problems = []
            if ids != c["greedy_ids"]:
                first = next(i for i, (a, b) in enumerate(zip(ids, c["greedy_ids"])) if a != b)
                problems.append(f"ids differ from step {first} ({ids[first]} vs {c['greedy_ids'][first]})")
            n = min(len(c["top5"]), steps)
            for i in range(n):
                want = c["top5"][i]
                for tid, tlp in want:
                    d = abs(lp[i, tid] - tlp)
                    m_worst = max(m_worst, d)
                    if d > args.tol:
                        problems.append(f"step {i}: logprob of {tid} is {lp[i, tid]:.6f}, expected {tlp:.6f}")
                others = np.delete(lp[i], [t for t, _ in want])
                if others.max() > min(v for _, v in want) + args.tol:
                    problems.append(f"step {i}: id {int(np.argmax(np.where(np.isin(np.arange(lp.shape[1]), [t for t, _ in want]), -np.inf, lp[i])))} "
                                    f"should be in the top 5")
            # the batched (prefill) path over the same ids gives the same rows
            full = c["prompt_ids"] + ids[:-1]
            batch = model.logits(full)[len(c["prompt_ids"]) - 1:]
            worst_batch = max(worst_batch, float(np.max(np.abs(batch - rows))))
            n_prompts += 1
            if problems:
                failures += 1
                print(f"FAIL {name} {c['prompt']!r}: " + "; ".join(problems[:5]))
            else:
                m_ok += 1
                n_prompt_ok += 1
        worst_lp = max(worst_lp, m_worst)
        print(f"{name}: {m_ok}/{len(cases)} prompts equal, max |logprob diff| {m_worst:.2e}")
    if worst_batch > 1e-9:
        failures += 1
        print(f"FAIL: batched and cached logits differ by {worst_batch:.3e}")
    print(f"{n_prompt_ok}/{n_prompts} prompts, {n_token_ok}/{n_tokens} greedy ids equal; "
          f"max |logprob diff| {worst_lp:.2e} (tolerance {args.tol:g}); "
          f"batched vs cached {worst_batch:.1e}; {time.time() - t0:.1f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
