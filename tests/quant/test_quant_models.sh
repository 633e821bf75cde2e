#!/bin/sh
# Quantised checkpoints end to end: sy-mkmodel writes FP8 (128x128 block
# scales, DeepSeek-V3 layout; and one scale per tensor) and NVFP4 (ModelOpt
# layout) checkpoints of a small llama, mixtral and GLM-5 (glm_moe_dsa,
# NVFP4 experts); `switchyard generate`
# (device cpu linear/linear_multi, moe cpu experts on the quantised bytes)
# must match the float64 numpy reference (which dequantises on load) logit
# by logit. Then malformed checkpoints are refused naming the tensor, and
# peak RSS shows the weights are not widened: an FP8 / NVFP4 model takes
# less memory than its bf16 twin by most of the bytes saved on disk.
set -u
: "${SY_BUILDDIR:?run through make check}" "${SY_SRCDIR:?run through make check}"
PY=${PYTHON_NUMPY:-/usr/bin/python3}
if ! "$PY" -c 'import numpy' 2>/dev/null; then
    echo "FAIL: no python3 with numpy ($PY); install python3-numpy or set PYTHON_NUMPY" >&2
    exit 1
fi
MK="$SY_BUILDDIR/sy-mkmodel"
SY="$SY_BUILDDIR/switchyard"
INI="$SY_BUILDDIR/etc/switchyard-build.ini"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
n=0
fail() {
    echo "FAIL $*"
    fails=$((fails + 1))
}

# name | sy-mkmodel arguments | prompt ids
cases='
llama-fp8-block|--preset test-llama-fp8|5,17,300,42,7,99
llama-fp8-tensor|--preset test-llama-fp8-tensor --seed 21|3,1,4,1,5,9,2,6
llama-nvfp4|--preset test-llama --dtype bf16 --quant nvfp4 --seed 22|8,6,7,5,3,0,9
mixtral-nvfp4|--preset test-mixtral-nvfp4|10,20,30,40,50
mixtral-fp8-block|--preset test-mixtral --quant fp8 --moe-ffn 160 --seed 23|1,2,3,4,5,6,7,8,9,10,11,12
mixtral-nvfp4-experts|--preset test-mixtral --quant nvfp4-experts --seed 24|7,7,7,7
glm5-nvfp4-experts|--preset tiny-glm5-nvfp4|1,2,3,4,5,6,7,8,9
'
IFS='
'
for line in $cases; do
    [ -n "$line" ] || continue
    name=$(echo "$line" | cut -d'|' -f1)
    args=$(echo "$line" | cut -d'|' -f2)
    ids=$(echo "$line" | cut -d'|' -f3)
    n=$((n + 1))
    dir="$tmp/$name"
    # shellcheck disable=SC2086
    if ! (IFS=' '; "$MK" $args --quiet --out "$dir") >"$tmp/mk.log" 2>&1; then
        fail "$name: sy-mkmodel: $(cat "$tmp/mk.log")"
        continue
    fi
    if ! "$SY" generate -q -c "$INI" --model "$dir" --set scheduler.max_batch_tokens=8 --prompt-ids "$ids" -n 24 \
        --ignore-eos --print-ids --logits-out "$tmp/logits.f32" >"$tmp/out.txt" 2>"$tmp/err.txt"; then
        fail "$name: switchyard generate: $(cat "$tmp/err.txt")"
        continue
    fi
    gen=$(sed -n 's/^generated_ids: //p' "$tmp/err.txt" | tr ' ' ',')
    if ! "$PY" "$SY_SRCDIR/tests/ref/reference.py" "$dir" --ids "$ids,$gen" --check-logits "$tmp/logits.f32" \
        --tol 1e-4 >"$tmp/check.txt" 2>&1; then
        fail "$name: logits differ from the numpy reference:"
        cat "$tmp/check.txt"
        continue
    fi
    echo "ok   $name: $(tail -1 "$tmp/check.txt")"
done
IFS=' '

# --- malformed checkpoints: refused, naming the tensor and what was expected
expect_refusal() { # name dir pattern
    n=$((n + 1))
    if "$SY" generate -q -c "$INI" --model "$2" --prompt-ids 1,2 -n 1 >/dev/null 2>"$tmp/err.txt"; then
        fail "$1: a malformed checkpoint was accepted"
    elif ! grep -q -- "$3" "$tmp/err.txt"; then
        fail "$1: error does not say '$3': $(cat "$tmp/err.txt")"
    else
        echo "ok   $1: $(grep -- "$3" "$tmp/err.txt" | head -1 | cut -c1-160)"
    fi
}
base="$tmp/llama-fp8-block"
cp -r "$base" "$tmp/noconf"
"$PY" - "$tmp/noconf/config.json" <<'PYEOF'
import json, sys
p = sys.argv[1]
c = json.load(open(p))
del c["quantization_config"]
json.dump(c, open(p, "w"))
PYEOF
expect_refusal no-quant-config "$tmp/noconf" "declares no quantisation"
cp -r "$base" "$tmp/noscale"
# Rename one scale tensor in the header (same length, so offsets stay valid).
"$PY" - "$tmp/noscale/model.safetensors" <<'PYEOF'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
old = b"model.layers.1.mlp.down_proj.weight_scale_inv"
i = b.find(old)
assert i > 0
b[i:i + len(old)] = b"model.layers.1.mlp.down_proj.weight_scale_xxx"
open(p, "wb").write(b)
PYEOF
expect_refusal missing-scale "$tmp/noscale" "model.layers.1.mlp.down_proj.weight_scale_inv"
cp -r "$base" "$tmp/badalgo"
"$PY" - "$tmp/badalgo/config.json" <<'PYEOF'
import json, sys
p = sys.argv[1]
c = json.load(open(p))
c["quantization_config"]["quant_method"] = "gptq"
json.dump(c, open(p, "w"))
PYEOF
expect_refusal unknown-method "$tmp/badalgo" "quant_method is 'gptq'"

# --- no widening: peak RSS of a 4-layer model with ~60M linear parameters
rss_kb() { # dir -> peak RSS of a one-token generate, in KiB
    /usr/bin/time -f '%M' -o "$tmp/rss" "$SY" generate -q -c "$INI" --model "$1" --prompt-ids 1,2,3 -n 1 \
        --set device.threads=1 >/dev/null 2>&1 && cat "$tmp/rss"
}
shape="--preset test-llama --hidden 1024 --heads 8 --kv-heads 4 --ffn 4096 --layers 4 --vocab 512 --seed 30 --quiet"
# shellcheck disable=SC2086
"$MK" $shape --dtype bf16 --out "$tmp/big-bf16" &&
    "$MK" $shape --dtype bf16 --quant fp8 --out "$tmp/big-fp8" &&
    "$MK" $shape --dtype bf16 --quant nvfp4 --out "$tmp/big-nvfp4" || fail "sy-mkmodel of the RSS models"
r16=$(rss_kb "$tmp/big-bf16")
r8=$(rss_kb "$tmp/big-fp8")
r4=$(rss_kb "$tmp/big-nvfp4")
s16=$(du -k "$tmp/big-bf16/model.safetensors" | cut -f1)
s8=$(du -k "$tmp/big-fp8/model.safetensors" | cut -f1)
s4=$(du -k "$tmp/big-nvfp4/model.safetensors" | cut -f1)
echo "peak RSS (KiB): bf16 $r16 (weights $s16), fp8 $r8 (weights $s8), nvfp4 $r4 (weights $s4)"
n=$((n + 1))
if [ -z "$r16" ] || [ -z "$r8" ] || [ -z "$r4" ]; then
    fail "rss: a generate run failed"
# Saved memory must be at least 80% of the bytes saved on disk: widening to bf16 would save none.
elif [ $((r16 - r8)) -lt $(((s16 - s8) * 8 / 10)) ] || [ $((r16 - r4)) -lt $(((s16 - s4) * 8 / 10)) ]; then
    fail "rss: quantised models do not save the memory their files save"
else
    echo "ok   rss: fp8 saves $((r16 - r8)) KiB of $((s16 - s8)) on disk, nvfp4 $((r16 - r4)) of $((s16 - s4))"
fi
echo "$((n - fails)) passed, $fails failed"
[ $fails -eq 0 ]
