"""Rewrites rows of model.embed_tokens.weight (F32, the tied head) in place
in a model.safetensors so the greedy rule decides: python3 twin_rows.py
FILE MODE, MODE one of
  pairs      row 2k+1 = row 2k: each pair of tokens scores exactly equal,
             the pick is always the even (lower) id;
  halves     row k + V/2 = row k: the ties straddle a 2-way vocabulary
             split, the pick is always below V/2;
  nan-mid    row V/2 is NaN: the first column of the second slice of a
             2-way split is NaN, which never wins;
  nan-first  row 0 is NaN: column 0 is NaN, which always wins (id 0)."""
import json
import struct
import sys

import numpy as np

path, mode = sys.argv[1], sys.argv[2]
with open(path, "r+b") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    hdr = json.loads(f.read(n))
    t = hdr["model.embed_tokens.weight"]
    if t["dtype"] != "F32":
        sys.exit("twin_rows.py: %s: model.embed_tokens.weight is %s, expected F32" % (path, t["dtype"]))
    b, e = t["data_offsets"]
    V, H = t["shape"]
    f.seek(8 + n + b)
    w = np.frombuffer(f.read(e - b), dtype="<f4").reshape(V, H).copy()
    if mode == "pairs":
        w[1::2] = w[0::2][: V // 2]
    elif mode == "halves":
        w[V // 2 :] = w[: V - V // 2]
    elif mode == "nan-mid":
        w[V // 2] = np.nan
    elif mode == "nan-first":
        w[0] = np.nan
    else:
        sys.exit("twin_rows.py: mode %r, expected pairs, halves, nan-mid or nan-first" % mode)
    f.seek(8 + n + b)
    f.write(w.tobytes())
