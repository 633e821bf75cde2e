#!/usr/bin/env python3
"""Regenerates the tokenizer seeds in tests/fuzz/corpus/tokenizer/ from the
shared tokenizers: each vocabulary is cut to its first KEEP ids (plus the
added tokens, renumbered right after them) and the merges whose parts and
result survive, so a seed loads in a millisecond yet keeps the real
normalizer, pre-tokenizer, decoder and post-processor. A seed is the
tokenizer.json, a NUL byte, then the text the target encodes.

    python3 tests/fuzz/make_seeds.py /work/shared tests/fuzz/corpus/tokenizer
"""
import json
import os
import sys

KEEP = 600
TEXT = "Hello world! It's 2025, caf\u00e9 \u4e16\u754c \U0001F600  \n\tthe end<s></s><|endoftext|>"


def trim(src):
    j = json.load(open(src, encoding="utf-8"))
    model = j["model"]
    vocab = {t: i for t, i in model["vocab"].items() if i < KEEP}
    merges = []
    for m in model["merges"]:
        a, b = m.split(" ", 1) if isinstance(m, str) else m
        if a in vocab and b in vocab and a + b in vocab:
            merges.append(m)
    model["vocab"] = vocab
    model["merges"] = merges
    renum = {}
    for k, tok in enumerate(j["added_tokens"]):
        if tok["id"] >= KEEP:
            renum[tok["id"]] = KEEP + k
            tok["id"] = KEEP + k
    pp = j.get("post_processor") or {}
    for st in (pp.get("special_tokens") or {}).values():
        st["ids"] = [renum.get(i, i) for i in st.get("ids", [])]
    return json.dumps(j, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def main():
    shared, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    for name in ("gpt2", "llama2-spm", "cl100k", "o200k"):
        data = trim(os.path.join(shared, "tokenizers", name, "tokenizer.json"))
        with open(os.path.join(out, name + ".seed"), "wb") as f:
            f.write(data + b"\0" + TEXT.encode("utf-8"))


if __name__ == "__main__":
    main()
