#!/bin/sh
# Multi-token-prediction layers (num_nextn_predict_layers, stored as
# model.layers.{n_layers + i}.*) are loaded only when asked for, and never
# get in the way otherwise:
#  1. DeepSeek-V3, GLM-4.5, GLM-5 and DeepSeek-V3.2 checkpoints with an MTP
#     layer generate the same tokens and logits as the same seed without one,
#     and the load warns of no unused tensor;
#  2. with the MTP tensors in a shard of their own (index json) that is then
#     unreadable (mode 000; as root the loads run as nobody through setpriv)
#     or deleted, the model still loads and generates the same tokens; asked
#     for its MTP layers, the load fails naming that file;
#  3. asked for, the MTP layers are bound with their roles' shapes
#     (tests/arch/test_mtp_load.c), and a wrong eh_proj shape is refused,
#     naming the tensor, only when they are asked for.
set -u
: "${SY_BUILDDIR:?run through make check}"
PY=${PYTHON_NUMPY:-/usr/bin/python3}
tmp=$(mktemp -d)
trap 'chmod -R u+rwX "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
fails=0
n=0
ok() { n=$((n + 1)); echo "ok   $*"; }
bad() { n=$((n + 1)); fails=$((fails + 1)); echo "FAIL $*"; }
load="$SY_BUILDDIR/tests/arch/test_mtp_load"
ids=5,17,300,42,7,99

gen() { gen_as "" "$@"; }
gen_as() { # runner dir out-prefix: generated ids into PREFIX.ids, logits into PREFIX.f32, stderr into PREFIX.err
    as_user=$1
    shift
    $as_user "$SY_BUILDDIR/switchyard" generate -c "$SY_BUILDDIR/etc/switchyard-build.ini" --model "$1" \
        --prompt-ids $ids -n 12 --ignore-eos --print-ids --logits-out "$2.f32" >/dev/null 2>"$2.err" || return 1
    sed -n 's/^generated_ids: //p' "$2.err" >"$2.ids"
    [ -s "$2.ids" ]
}

# 1. the same tokens with and without the MTP layers
for p in test-deepseek-v3 test-glm4-moe test-glm5 test-deepseek-v32; do
    if ! "$SY_BUILDDIR/sy-mkmodel" --preset $p --seed 31 --quiet --out "$tmp/$p" ||
        ! "$SY_BUILDDIR/sy-mkmodel" --preset $p --seed 31 --mtp-layers 0 --quiet --out "$tmp/$p-nomtp"; then
        bad "$p: sy-mkmodel"
        continue
    fi
    if ! grep -q '"num_nextn_predict_layers": 1' "$tmp/$p/config.json"; then
        bad "$p: the preset writes no MTP layer"
        continue
    fi
    if ! gen "$tmp/$p" "$tmp/$p.with" || ! gen "$tmp/$p-nomtp" "$tmp/$p.without"; then
        bad "$p: switchyard generate: $(cat "$tmp/$p.with.err" "$tmp/$p.without.err" 2>/dev/null | tail -3)"
        continue
    fi
    if cmp -s "$tmp/$p.with.ids" "$tmp/$p.without.ids" && cmp -s "$tmp/$p.with.f32" "$tmp/$p.without.f32"; then
        ok "$p: with an MTP layer, the same tokens and logits as without ($(cat "$tmp/$p.with.ids"))"
    else
        bad "$p: the MTP layer changed the output: [$(cat "$tmp/$p.with.ids")] vs [$(cat "$tmp/$p.without.ids")]"
    fi
    if grep -q "not used by" "$tmp/$p.with.err"; then
        bad "$p: the load warns of unused tensors: $(grep "not used by" "$tmp/$p.with.err")"
    fi
done

# 3. the bound MTP layers (each family's block: MLA or GQA, experts, indexer)
for p in test-deepseek-v3 test-glm4-moe test-glm5 test-deepseek-v32; do
    [ -d "$tmp/$p" ] || continue
    if out=$("$load" "$tmp/$p" --mtp 2>&1); then ok "$p, MTP asked: $out"; else bad "$p, MTP asked: $out"; fi
    if out=$("$load" "$tmp/$p" 2>&1); then ok "$p, MTP not asked: $out"; else bad "$p, MTP not asked: $out"; fi
done

# 2. the MTP tensors in a shard of their own
p=test-deepseek-v3
split="$tmp/split"
if [ -d "$tmp/$p" ] && "$PY" - "$tmp/$p" "$split" <<'EOF'
import json, os, re, struct, sys
src, dst = sys.argv[1], sys.argv[2]
os.makedirs(dst)
cfg = json.load(open(os.path.join(src, "config.json")))
L, k = cfg["num_hidden_layers"], cfg["num_nextn_predict_layers"]
with open(os.path.join(src, "model.safetensors"), "rb") as f:
    (hn,) = struct.unpack("<Q", f.read(8))
    header = json.loads(f.read(hn))
    data = f.read()
def mtp(name):
    m = re.match(r"model\.layers\.(\d+)\.", name)
    return bool(m) and L <= int(m.group(1)) < L + k
def write(fn, names):
    h, blobs, off = {}, [], 0
    for n in names:
        lo, hi = header[n]["data_offsets"]
        h[n] = {"dtype": header[n]["dtype"], "shape": header[n]["shape"], "data_offsets": [off, off + hi - lo]}
        blobs.append(data[lo:hi])
        off += hi - lo
    raw = json.dumps(h).encode()
    raw += b" " * (-(8 + len(raw)) % 8)
    with open(os.path.join(dst, fn), "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw + b"".join(blobs))
names = [n for n in header if n != "__metadata__"]
main, extra = [n for n in names if not mtp(n)], [n for n in names if mtp(n)]
assert extra, "no MTP tensors"
write("model-main.safetensors", main)
write("model-mtp.safetensors", extra)
wm = {n: "model-main.safetensors" for n in main}
wm.update({n: "model-mtp.safetensors" for n in extra})
json.dump({"metadata": {}, "weight_map": wm}, open(os.path.join(dst, "model.safetensors.index.json"), "w"))
for fn in os.listdir(src):
    if not fn.endswith(".safetensors"):
        open(os.path.join(dst, fn), "wb").write(open(os.path.join(src, fn), "rb").read())
EOF
then
    if gen "$split" "$tmp/split.all" && cmp -s "$tmp/split.all.ids" "$tmp/$p.with.ids"; then
        ok "$p split into a main and an MTP shard: the same tokens"
    else
        bad "$p split: generate gave [$(cat "$tmp/split.all.ids" 2>/dev/null)]: $(tail -2 "$tmp/split.all.err")"
    fi
    if out=$("$load" "$split" --mtp 2>&1); then ok "$p split, MTP asked, both shards there: $out"; else
        bad "$p split, MTP asked: $out"; fi
    # unreadable, then deleted. Root reads a mode-000 file anyway, so as root the unreadable case runs as
    # nobody (setpriv); without setpriv it cannot fail there and is left out.
    cases=deleted
    as=
    if [ "$(id -u)" -ne 0 ]; then
        cases="unreadable deleted"
    elif setpriv --reuid=65534 --regid=65534 --clear-groups true 2>/dev/null; then
        cases="unreadable deleted"
        as="setpriv --reuid=65534 --regid=65534 --clear-groups"
        chmod 755 "$tmp" && mkdir -m 777 "$tmp/out"
    fi
    mkdir -p "$tmp/out"
    for how in $cases; do
        run=
        if [ $how = unreadable ]; then
            chmod 000 "$split/model-mtp.safetensors"
            run=$as
        else
            rm -f "$split/model-mtp.safetensors"
        fi
        o="$tmp/out/split.$how"
        if gen_as "$run" "$split" "$o" &&
            cmp -s "$o.ids" "$tmp/$p.with.ids"; then
            ok "$p, MTP shard $how, MTP not asked: loads and generates the same tokens"
        else
            bad "$p, MTP shard $how, MTP not asked: [$(cat "$o.ids" 2>/dev/null)]: $(tail -2 "$o.err" 2>/dev/null)"
        fi
        if out=$($run "$load" "$split" 2>&1); then ok "$p, MTP shard $how, MTP not asked: $out"; else
            bad "$p, MTP shard $how, MTP not asked: $out"; fi
        out=$($run "$load" "$split" --mtp 2>&1)
        rc=$?
        if [ $rc -eq 1 ] && printf '%s' "$out" | grep -q "model-mtp.safetensors"; then
            ok "$p, MTP shard $how, MTP asked: refused naming the file: $out"
        else
            bad "$p, MTP shard $how, MTP asked: exit $rc (expected 1 and a message naming model-mtp.safetensors): $out"
        fi
    done
else
    bad "$p: cannot split the checkpoint into a main and an MTP shard"
fi

# 3b. a wrong MTP shape is refused when the layer is asked for, and does not matter otherwise
p=test-glm5
bad_dir="$tmp/bad-eh"
if [ -d "$tmp/$p" ] && cp -r "$tmp/$p" "$bad_dir" && "$PY" - "$bad_dir/model.safetensors" <<'EOF'
import json, struct, sys
path = sys.argv[1]
raw = bytearray(open(path, "rb").read())
(hn,) = struct.unpack("<Q", raw[:8])
h = json.loads(raw[8:8 + hn])
name = "model.layers.3.eh_proj.weight"
old = json.dumps(h[name]["shape"]).encode()
h[name]["shape"] = h[name]["shape"][::-1]  # [64, 128] -> [128, 64]: the same bytes, the wrong shape
text = json.dumps(h, separators=(",", ":")).encode()
assert len(text) <= hn, "the edited header grew"
raw[8:8 + hn] = text + b" " * (hn - len(text))
open(path, "wb").write(raw)
EOF
then
    out=$("$load" "$bad_dir" --mtp 2>&1)
    rc=$?
    if [ $rc -eq 1 ] && printf '%s' "$out" | grep -q "eh_proj.weight' has shape \[128, 64\]" &&
        printf '%s' "$out" | grep -q "2\*hidden_size\] = \[64, 128\]"; then
        ok "$p, eh_proj transposed, MTP asked: $out"
    else
        bad "$p, eh_proj transposed, MTP asked: exit $rc: $out"
    fi
    if out=$("$load" "$bad_dir" 2>&1); then ok "$p, eh_proj transposed, MTP not asked: $out"; else
        bad "$p, eh_proj transposed, MTP not asked: $out"; fi
else
    bad "$p: cannot edit eh_proj's shape"
fi

echo "$((n - fails)) passed, $fails failed"
[ $fails -eq 0 ]
