#!/bin/sh
# make check-hf: the engine against Hugging Face transformers, logit by
# logit, on seeded synthetic checkpoints sy-mkmodel writes (the presets
# tests/ref/test_engine_vs_reference.sh checks against the numpy reference)
# and on tiny random checkpoints transformers' own save_pretrained writes
# (tests/arch/hf_save.py), in both config.json layouts. HF_CASES=a,b limits
# the latter to some of hf_save.py's cases. transformers must load every tensor of the checkpoint
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
    # The versions these comparisons were last checked with: a newer transformers may change a default.
    python3 -m venv "$HF_VENV" && "$HF_VENV/bin/pip" install --quiet "torch==${HF_TORCH:-2.15.0}" \
        "transformers==${HF_TRANSFORMERS:-5.24.0}" safetensors numpy || {
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
qwen2|--preset test-qwen2 --seed 31|5,17,300,42,7,99,1,2,3,4
qwen3-attention-bias|--preset test-qwen3 --attention-bias --seed 33|100,200,300,4,5
mistral-window8|--arch mistral --sliding-window 8 --seed 34|5,17,300,42,7,99,1,2,3,4,250,251,252,10,11,12,400,401,33,34,35,36,128,129
qwen2-window8-from-layer1|--preset test-qwen2 --sliding-window 8 --max-window-layers 1 --seed 35|5,17,300,42,7,99,1,2,3,4,250,251,252,10,11,12,400,401,33,34,35,36,128,129
qwen3-window6-layer1|--preset test-qwen3 --sliding-window 6 --max-window-layers 1 --seed 36|5,17,300,42,7,99,1,2,3,4,250,251,252,10,11,12,400,401,33,34,35,36,128,129
deepseek-v32|--preset test-deepseek-v32 --seed 25|5,17,300,42,7,99,1,2,3,4
deepseek-v32-topk3-f32-no-mtp|--preset test-deepseek-v32 --index-topk 3 --dtype f32 --mtp-layers 0 --seed 26|11,12,13
gpt-oss|--preset test-gpt-oss --seed 27|5,17,300,42,7,99,1,2,3,4,5,6,7,8,9,10
gpt-oss-mxfp4-f32|--preset test-gpt-oss --experts-layout mxfp4 --dtype f32 --seed 28|5,17,300,42,7,99,1,2,3,4,5,6,7,8,9,10
'
# check NAME DIR IDS: the engine's greedy run on DIR, its logits against
# transformers' teacher-forced forward over the same ids.
check() {
    n=$((n + 1))
    if ! "$SY_BUILDDIR/switchyard" generate -q -c "$SY_BUILDDIR/etc/switchyard-build.ini" --model "$2" \
        --set scheduler.max_batch_tokens=8 --prompt-ids "$3" -n $STEPS --ignore-eos --print-ids \
        --logits-out "$tmp/logits.f32" >"$tmp/out.txt" 2>"$tmp/err.txt"; then
        echo "FAIL $1: switchyard generate: $(cat "$tmp/err.txt")"
        fails=$((fails + 1))
        return
    fi
    gen=$(sed -n 's/^generated_ids: //p' "$tmp/err.txt" | tr ' ' ',')
    P=$(echo "$3" | tr ',' '\n' | wc -l)
    if ! "$py" "$SY_SRCDIR/tests/arch/hf_check.py" "$2" --ids "$3,$gen" --prompt-len "$P" \
        --check-logits "$tmp/logits.f32" --tol "$TOL" >"$tmp/check.txt" 2>&1; then
        echo "FAIL $1: logits differ from transformers: $(tail -1 "$tmp/check.txt")"
        sed '$d; s/^/    /' "$tmp/check.txt"
        fails=$((fails + 1))
        return
    fi
    echo "ok   $1: $(tail -1 "$tmp/check.txt")"
}
IFS='
'
for line in $cases; do
    [ -n "$line" ] || continue
    name=$(echo "$line" | cut -d'|' -f1)
    args=$(echo "$line" | cut -d'|' -f2)
    ids=$(echo "$line" | cut -d'|' -f3)
    dir="$tmp/$name"
    # shellcheck disable=SC2086
    if ! (IFS=' '; "$SY_BUILDDIR/sy-mkmodel" $args --quiet --out "$dir") >"$tmp/mk.log" 2>&1; then
        n=$((n + 1))
        echo "FAIL $name: sy-mkmodel: $(cat "$tmp/mk.log")"
        fails=$((fails + 1))
        continue
    fi
    check "$name" "$dir" "$ids"
done
# Checkpoints transformers' own save_pretrained wrote (a checkpoint our own
# sy-mkmodel wrote can hide a misreading both sides share), each in the
# config.json layout of transformers 5 (v5) and of 4.x (v4). hf_save.py has
# already checked that transformers reads both layouts the same.
"$py" "$SY_SRCDIR/tests/arch/hf_save.py" "$tmp/hf" --only "${HF_CASES:-}" >"$tmp/hf.list" 2>"$tmp/hf.err" || {
    n=$((n + 1))
    echo "FAIL hf_save.py: $(grep -v '^ *$' "$tmp/hf.err" | tail -5)"
    fails=$((fails + 1))
}
# IFS is a newline here; a while-read loop would hand the list to the
# commands' stdin.
# shellcheck disable=SC2013
for line in $(cat "$tmp/hf.list"); do
    check "$(echo "$line" | cut -d'|' -f1) [$(echo "$line" | cut -d'|' -f2)]" "$(echo "$line" | cut -d'|' -f3)" \
        "$(echo "$line" | cut -d'|' -f4)"
done
echo "$((n - fails)) passed, $fails failed"
[ $fails -eq 0 ]
