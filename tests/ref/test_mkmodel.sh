#!/bin/sh
# sy-mkmodel: deterministic (two runs are byte-identical), every preset
# writes a checkpoint whose files match its config.json (names, shapes,
# sizes, parameter counts, tokenizer), bad arguments are refused with a
# message saying what was expected, and reference.py runs on the generated
# test checkpoints (greedy, --logits-out, --check-logits, shards == one file).
#
# Needs SY_BUILDDIR (sy-mkmodel) and SY_SRCDIR (tests/ref/*.py), as
# `make check` sets them, and PYTHON_NUMPY (default /usr/bin/python3).
set -u

srcdir=${SY_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
builddir=${SY_BUILDDIR:-.}
py=${PYTHON_NUMPY:-/usr/bin/python3}
mk="$builddir/sy-mkmodel"
ref="$srcdir/tests/ref/reference.py"
check="$srcdir/tests/ref/check_checkpoint.py"

fails=0
passes=0
ok() { passes=$((passes + 1)); echo "ok: $*"; }
bad() { fails=$((fails + 1)); echo "FAIL: $*"; }

if [ ! -x "$mk" ]; then
    echo "FAIL: $mk not found (build it first; SY_BUILDDIR=$builddir)"
    exit 1
fi
if ! "$py" -c 'import numpy' 2>/dev/null; then
    echo "FAIL: '$py' cannot import numpy (install python3-numpy or set PYTHON_NUMPY)"
    exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/sy-mkmodel-test.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM

# same arguments, same bytes
same_twice() { # name args...
    name=$1
    shift
    if "$mk" --quiet --out "$tmp/$name.a" "$@" && "$mk" --quiet --out "$tmp/$name.b" "$@"; then
        diffs=0
        for f in "$tmp/$name.a"/*; do
            cmp -s "$f" "$tmp/$name.b/$(basename "$f")" || { diffs=1; echo "  differs: $(basename "$f")"; }
        done
        [ "$(ls "$tmp/$name.a" | wc -l)" -eq "$(ls "$tmp/$name.b" | wc -l)" ] || diffs=1
        if [ $diffs -eq 0 ]; then ok "$name: two runs are byte-identical"; else bad "$name: two runs differ"; fi
        rm -rf "$tmp/$name.b"
    else
        bad "$name: sy-mkmodel $* failed"
    fi
}

checkpoint() { # dir [params]
    if [ $# -ge 2 ]; then out=$("$py" "$check" "$1" --params "$2"); else out=$("$py" "$check" "$1"); fi
    if [ $? -eq 0 ]; then ok "$out"; else bad "$out"; fi
}

# --- small presets and variants: determinism + layout ---
same_twice small --preset small
same_twice test-llama --preset test-llama
same_twice test-mixtral --preset test-mixtral
same_twice test-qwen3moe --preset test-qwen3moe
same_twice llama-f16-tied --preset test-llama --dtype f16 --tie --seed 123
same_twice llama3-rope --preset test-llama --rope-scaling llama3 --rope-theta 500000
same_twice qwen3-dense-layers --preset test-qwen3moe --layers 3 --mlp-only-layers 0 --sparse-step 1 \
    --no-norm-topk-prob --head-dim 16
same_twice qwen3-sharded --preset test-qwen3moe --shards 3
same_twice mixtral-f32-sharded --preset test-mixtral --dtype f32 --experts 3 --top-k 1 --shards 2
same_twice test-deepseek-v3 --preset test-deepseek-v3
same_twice test-glm4-moe --preset test-glm4-moe
same_twice test-glm5 --preset test-glm5
same_twice test-deepseek-v32 --preset test-deepseek-v32
same_twice test-qwen2 --preset test-qwen2
same_twice qwen3-bias-window --preset test-qwen3 --attention-bias --sliding-window 6 --max-window-layers 1
same_twice mistral-window --arch mistral --sliding-window 8
same_twice test-gpt-oss --preset test-gpt-oss
same_twice gpt-oss-mxfp4 --preset test-gpt-oss --experts-layout mxfp4
same_twice gpt-oss-f32 --preset test-gpt-oss --dtype f32
same_twice gpt-oss-mxfp4-f32 --preset test-gpt-oss --experts-layout mxfp4 --dtype f32

checkpoint "$tmp/small.a" 1049728
checkpoint "$tmp/test-llama.a" 164160
checkpoint "$tmp/test-mixtral.a" 238400
checkpoint "$tmp/test-qwen3moe.a" 213952
checkpoint "$tmp/llama-f16-tied.a"
checkpoint "$tmp/llama3-rope.a"
checkpoint "$tmp/qwen3-dense-layers.a"
checkpoint "$tmp/qwen3-sharded.a" 213952
checkpoint "$tmp/mixtral-f32-sharded.a"
checkpoint "$tmp/test-qwen2.a" 162624
checkpoint "$tmp/qwen3-bias-window.a" 177216
checkpoint "$tmp/mistral-window.a" 164160
checkpoint "$tmp/test-gpt-oss.a" 341600
# MXFP4 experts are the fused layout's values quantised: per block of 32 the E8M0 scale is the smallest power
# of two with amax / scale <= 6 (no code clips), each code the nearest E2M1 value (within half a step).
if out=$("$py" - "$tmp/gpt-oss-f32.a" "$tmp/gpt-oss-mxfp4-f32.a" "$srcdir/tests/ref" <<'EOF'
import sys
import numpy as np
sys.path.insert(0, sys.argv[3])
import reference as r
fused, mx = r.load_tensors(sys.argv[1]), r.read_safetensors(sys.argv[2] + "/model.safetensors")
deq = r.dequantize(sys.argv[2], dict(mx))
worst, n = 0.0, 0
for name in sorted(k for k in mx if k.endswith("_blocks")):
    base = name[:-len("_blocks")]
    want = np.transpose(fused[base], (0, 2, 1))                          # [E, out, in]
    E, N, K = want.shape
    scale = np.exp2(mx[base + "_scales"] - 127.0)                        # [E, out, in/32]
    blk = np.abs(want).reshape(E, N, K // 32, 32).max(-1)
    assert np.all(blk <= 6 * scale) and np.all((blk == 0) | (blk > 3 * scale)), f"{base}: a scale is not minimal"
    err = np.abs(np.transpose(deq[base], (0, 2, 1)) - want).reshape(E, N, K // 32, 32)
    x = np.abs(want).reshape(E, N, K // 32, 32) / scale[..., None]     # in code units
    half = np.where(x < 2, 0.25, np.where(x < 4, 0.5, 1.0)) * scale[..., None]
    assert np.all(err <= half * (1 + 1e-6)), f"{base}: a code is not the nearest E2M1 value"
    worst, n = max(worst, float((err / half).max())), n + 1
print(f"{n} MXFP4 expert tensors: scales minimal, codes nearest (worst error {worst:.2f} of half a step)")
EOF
); then ok "$out"; else bad "MXFP4 quantisation: $out"; fi

# the seed matters, and the arguments reach the files
if cmp -s "$tmp/test-llama.a/model.safetensors" "$tmp/llama-f16-tied.a/model.safetensors"; then
    bad "different seeds/dtypes gave the same weights"
else
    ok "different arguments give different weights"
fi
if grep -q '"rope_type": "llama3"' "$tmp/llama3-rope.a/config.json"; then ok "rope_scaling llama3 in config.json"; else bad "rope_scaling missing"; fi

# --- bench presets: generated once each (hundreds of MB), checked, removed ---
for p in bench-110m:109529856 bench-moe-250m:253701888; do
    name=${p%%:*}
    params=${p#*:}
    if "$mk" --quiet --out "$tmp/$name" --preset "$name"; then
        checkpoint "$tmp/$name" "$params"
    else
        bad "$name: sy-mkmodel failed"
    fi
    rm -rf "$tmp/$name"
done

# --- bad arguments: exit 2 and a message that says what was expected ---
refuse() { # pattern args...
    pat=$1
    shift
    msg=$("$mk" "$@" 2>&1 >/dev/null)
    rc=$?
    if [ $rc -eq 2 ] && printf '%s' "$msg" | grep -q -- "$pat"; then
        ok "refused ($*): $msg"
    else
        bad "sy-mkmodel $* exited $rc with '$msg' (expected exit 2 and '$pat')"
    fi
}
refuse "is required" --preset test-llama
refuse "expected llama, mixtral, qwen3_moe" --out "$tmp/x" --arch gpt2
refuse "unknown preset" --out "$tmp/x" --preset huge
refuse "expected f32, bf16 or f16" --out "$tmp/x" --dtype q4
refuse "must divide" --out "$tmp/x" --preset test-llama --kv-heads 3
refuse "expected an integer in 259" --out "$tmp/x" --vocab 100
refuse "expected 1..4" --out "$tmp/x" --preset test-mixtral --top-k 5
refuse "llama has no experts" --out "$tmp/x" --preset test-llama --experts 4
refuse "expected at most" --out "$tmp/x" --preset test-llama --shards 100
refuse "expected an integer" --out "$tmp/x" --hidden abc
refuse "expected a value" --out
refuse "unknown argument" --out "$tmp/x" --bogus
refuse "even" --out "$tmp/x" --preset test-llama --head-dim 15
refuse "does not exist" --out "$tmp/x" --preset test-qwen3moe --mlp-only-layers 7
refuse "needs a query LoRA" --out "$tmp/x" --preset test-glm5 --q-lora-rank 0
refuse "needs a query LoRA" --out "$tmp/x" --preset test-deepseek-v32 --q-lora-rank 0
refuse "deepseek-family option" --out "$tmp/x" --preset test-llama --mtp-layers 1
refuse "expected a multiple of 4" --out "$tmp/x" --preset test-deepseek-v3 --experts 6 --top-k 2
refuse "is a mistral, mixtral, qwen2, qwen3 or gpt_oss option" --out "$tmp/x" --preset test-llama --sliding-window 8
refuse "is a qwen2 or qwen3 option" --out "$tmp/x" --arch mistral --max-window-layers 1
refuse "is a qwen3 option" --out "$tmp/x" --preset test-qwen2 --attention-bias

# --- reference.py on the generated test checkpoints ---
prompt=7,300,41,99,12
for d in small test-llama test-mixtral test-qwen3moe llama-f16-tied llama3-rope qwen3-dense-layers test-qwen2 \
    qwen3-bias-window mistral-window; do
    dir="$tmp/$d.a"
    gen=$("$py" "$ref" "$dir" --ids $prompt --steps 8 --logits-out "$tmp/$d.logits") || { bad "$d: reference.py greedy failed"; continue; }
    n=$(echo "$gen" | wc -w)
    size=$(wc -c <"$tmp/$d.logits")
    vocab=$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["vocab_size"])' "$dir/config.json")
    if [ "$n" -eq 8 ] && [ "$size" -eq $((8 * vocab * 4)) ]; then
        ok "$d: greedy 8 ids ($gen), 8 logits rows"
    else
        bad "$d: greedy gave '$gen' and $size bytes of logits (expected 8 ids, $((8 * vocab * 4)) bytes)"
        continue
    fi
    full="$prompt,$(echo $gen | tr ' ' ',')"
    echo "$full" >"$tmp/$d.ids"
    # its own logits, teacher-forced in one batch, agree to float32 rounding
    if "$py" "$ref" "$dir" --ids "$full" --check-logits "$tmp/$d.logits" --tol 1e-4 >"$tmp/$d.check"; then
        ok "$d: --check-logits: $(tail -n 1 "$tmp/$d.check")"
    else
        bad "$d: --check-logits on its own logits failed: $(tail -n 3 "$tmp/$d.check")"
    fi
    # the prompt-length rule: the full sequence with one row too many is refused
    if "$py" "$ref" "$dir" --ids "$prompt" --check-logits "$tmp/$d.logits" --tol 1e-4 >/dev/null 2>&1; then
        bad "$d: --check-logits accepted 8 rows for a 5-id sequence"
    fi
done

# rope_scaling and rope_theta change the logits (the reference reads them)
if [ -f "$tmp/llama3-rope.logits" ] && ! cmp -s "$tmp/llama3-rope.logits" "$tmp/test-llama.logits"; then
    ok "llama3 rope scaling changes the reference's logits"
else
    bad "llama3 rope scaling did not change the reference's logits"
fi

# a perturbed logit is caught (exit 1, OVER TOLERANCE on that step only)
d=test-mixtral
if [ -f "$tmp/$d.logits" ]; then
    "$py" -c '
import numpy as np, sys
a = np.fromfile(sys.argv[1], dtype="<f4"); v = a.size // 8
a[3 * v + 17] += 0.01
a.tofile(sys.argv[2])' "$tmp/$d.logits" "$tmp/$d.bad"
    "$py" "$ref" "$tmp/$d.a" --ids "$(cat "$tmp/$d.ids")" --check-logits "$tmp/$d.bad" --tol 1e-3 >"$tmp/$d.badcheck"
    rc=$?
    if [ $rc -eq 1 ] && grep -q "step    3.*OVER TOLERANCE" "$tmp/$d.badcheck" && [ "$(grep -c OVER "$tmp/$d.badcheck")" -eq 1 ]; then
        ok "--check-logits catches a 0.01 error at step 3"
    else
        bad "--check-logits on a perturbed file exited $rc: $(cat "$tmp/$d.badcheck")"
    fi
fi

# sharded and single-file checkpoints give identical logits
"$py" "$ref" "$tmp/qwen3-sharded.a" --ids $prompt --steps 8 --logits-out "$tmp/sharded.logits" >/dev/null
if cmp -s "$tmp/sharded.logits" "$tmp/test-qwen3moe.logits"; then
    ok "sharded test-qwen3moe gives the same logits as the single file"
else
    bad "sharded and single-file test-qwen3moe logits differ"
fi

echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
