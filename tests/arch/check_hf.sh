#!/bin/sh
# make check-hf: the engine against Hugging Face transformers, logit by
# logit, on seeded synthetic DeepSeek-V3, GLM-4-MoE and GLM-5 checkpoints
# (the same presets tests/ref/test_engine_vs_reference.sh checks against the
# numpy reference). transformers must load every tensor of the checkpoint
# (no missing or unexpected names) and its float32 eager forward must agree
# within TOL. Needs PyPI: torch, transformers, safetensors, numpy go into
# HF_VENV on first use.
set -u
: "${SY_BUILDDIR:?run through make check-hf}" "${SY_SRCDIR:?run through make check-hf}" "${HF_VENV:?}"
TOL=${TOL:-1e-4}
STEPS=24
py="$HF_VENV/bin/python"
if ! "$py" -c 'import torch, transformers, safetensors, numpy' 2>/dev/null; then
    echo "check-hf: installing torch and transformers into $HF_VENV (once)"
    python3 -m venv "$HF_VENV" && "$HF_VENV/bin/pip" install --quiet torch transformers safetensors numpy || {
        echo "FAIL: cannot install torch and transformers into $HF_VENV" >&2
        exit 1
    }
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
n=0
# name | sy-mkmodel arguments | prompt ids
cases='
deepseek-v3|--preset test-deepseek-v3 --seed 19|5,17,300,42,7,99
deepseek-v3-no-q-lora-f32|--preset test-deepseek-v3 --q-lora-rank 0 --dtype f32 --first-dense 0 --seed 20|9,8,7,6,5
glm4-moe|--preset test-glm4-moe --seed 21|100,200,300,4,5
glm5|--preset test-glm5 --seed 22|5,17,300,42,7,99,1,2,3,4
glm5-topk3-f16|--preset test-glm5 --index-topk 3 --dtype f16 --seed 23|11,12,13
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
    if ! (IFS=' '; "$SY_BUILDDIR/sy-mkmodel" $args --quiet --out "$dir") >"$tmp/mk.log" 2>&1; then
        echo "FAIL $name: sy-mkmodel: $(cat "$tmp/mk.log")"
        fails=$((fails + 1))
        continue
    fi
    if ! "$SY_BUILDDIR/switchyard" generate -q -c "$SY_BUILDDIR/etc/switchyard-build.ini" --model "$dir" \
        --set scheduler.max_batch_tokens=8 --prompt-ids "$ids" -n $STEPS --ignore-eos --print-ids \
        --logits-out "$tmp/logits.f32" >"$tmp/out.txt" 2>"$tmp/err.txt"; then
        echo "FAIL $name: switchyard generate: $(cat "$tmp/err.txt")"
        fails=$((fails + 1))
        continue
    fi
    gen=$(sed -n 's/^generated_ids: //p' "$tmp/err.txt" | tr ' ' ',')
    P=$(echo "$ids" | tr ',' '\n' | wc -l)
    if ! "$py" "$SY_SRCDIR/tests/arch/hf_check.py" "$dir" --ids "$ids,$gen" --prompt-len "$P" \
        --check-logits "$tmp/logits.f32" --tol "$TOL" >"$tmp/check.txt" 2>&1; then
        echo "FAIL $name: logits differ from transformers:"
        cat "$tmp/check.txt"
        fails=$((fails + 1))
        continue
    fi
    echo "ok   $name: $(tail -1 "$tmp/check.txt")"
done
echo "$((n - fails)) passed, $fails failed"
[ $fails -eq 0 ]
