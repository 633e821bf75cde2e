#!/bin/sh
# A checkpoint broken the ways downloads break: a sharded checkpoint whose
# index names a shard that is not there, a truncated .safetensors, a shard
# whose header promises more bytes than the file has. `switchyard serve`
# must refuse to start with exit 1 and an error naming the file (and the
# tensor where there is one), never crash or hang. The intact split must
# serve, which proves the split itself is sound.
set -u
. "${SY_SRCDIR:?run through make check}/tests/faults/lib.sh"
src=$SY_BUILDDIR/models/small
[ -f "$src/model.safetensors" ] || { echo "FAIL: $src/model.safetensors missing (make builds it)"; exit 1; }

# Splits model.safetensors into two shards plus model.safetensors.index.json.
split_model() { # dest
    mkdir -p "$1"
    for f in "$src"/*.json; do cp "$f" "$1/"; done
    python3 - "$src/model.safetensors" "$1" <<'EOF'
import json, struct, sys
blob = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", blob[:8])[0]
header = json.loads(blob[8:8 + n])
data = blob[8 + n:]
names = [k for k in header if k != "__metadata__"]
halves = [names[: len(names) // 2], names[len(names) // 2:]]
weight_map = {}
for i, part in enumerate(halves):
    fname = "model-%05d-of-00002.safetensors" % (i + 1)
    h, out, off = {}, b"", 0
    for k in part:
        b, e = header[k]["data_offsets"]
        h[k] = dict(header[k], data_offsets=[off, off + (e - b)])
        out += data[b:e]
        off += e - b
        weight_map[k] = fname
    hj = json.dumps(h).encode()
    hj += b" " * (-len(hj) % 8)
    with open("%s/%s" % (sys.argv[2], fname), "wb") as f:
        f.write(struct.pack("<Q", len(hj)) + hj + out)
json.dump({"metadata": {}, "weight_map": weight_map}, open(sys.argv[2] + "/model.safetensors.index.json", "w"))
EOF
}

# expect_refusal NAME MODEL_DIR PATTERN: serve must exit != 0 with PATTERN in its error.
expect_refusal() {
    timeout 60 "$sy" serve -c "$ini" --model "$2" --set frontend:api.listen=127.0.0.1:0 \
        >"$tmp/$1.out" 2>"$tmp/$1.err"
    rc=$?
    # Exactly 1: a sanitizer's report (exit 23) or a crash is not a clean refusal.
    if [ $rc -eq 1 ] && grep -q -- "$3" "$tmp/$1.err"; then
        ok "$1: exit $rc: $(grep -- "$3" "$tmp/$1.err" | head -1 | cut -c1-160)"
    else
        bad "$1: exit $rc, expected an error matching '$3': $(tail -2 "$tmp/$1.err")"
    fi
}

split_model "$tmp/sharded"
start_server intact --model "$tmp/sharded"
out=$(curl -s "http://127.0.0.1:$port/v1/completions" -H 'content-type: application/json' \
    -d '{"prompt": "Hi", "max_tokens": 4}')
case $out in *'"finish_reason"'*) ok "the intact two-shard split serves" ;; *) bad "the intact split: $out" ;; esac
serve_stop intact

cp -r "$tmp/sharded" "$tmp/missing"
rm "$tmp/missing/model-00002-of-00002.safetensors"
expect_refusal "a shard named by the index is missing" "$tmp/missing" "model-00002-of-00002.safetensors"

cp -r "$tmp/sharded" "$tmp/short-shard"
f=$tmp/short-shard/model-00001-of-00002.safetensors
head -c $(($(wc -c <"$f") - 1000)) "$f" >"$f.tmp" && mv "$f.tmp" "$f"
expect_refusal "a shard 1000 bytes short" "$tmp/short-shard" "model-00001-of-00002.safetensors"

mkdir -p "$tmp/truncated"
for f in "$src"/*.json; do cp "$f" "$tmp/truncated/"; done
head -c 4000 "$src/model.safetensors" >"$tmp/truncated/model.safetensors"
expect_refusal "a .safetensors cut inside its header" "$tmp/truncated" "model.safetensors"
head -c $(($(wc -c <"$src/model.safetensors") / 2)) "$src/model.safetensors" >"$tmp/truncated/model.safetensors"
expect_refusal "a .safetensors cut in half" "$tmp/truncated" "model.safetensors"

finish
