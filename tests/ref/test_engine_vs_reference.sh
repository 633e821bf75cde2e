#!/bin/sh
# The engine against the float64 numpy reference, logit by logit, on seeded
# synthetic checkpoints of every architecture (sy-mkmodel), including the
# variants that exercise separate code paths: f16 and bf16 weights, tied
# heads, llama3 RoPE scaling, Qwen3-MoE dense layers, sharded files, and both
# attention plugins; DeepSeek-V3 (MLA with and without the query LoRA, yarn,
# grouped sigmoid routing, shared experts; FP8 weights, kv_b_proj dequantised
# through the device), GLM-4-MoE (partial RoPE, q/k/v biases, q/k norm) and
# GLM-5 (MLA + the DSA indexer, whose 6 kept positions are fewer than the 30 a
# sequence reaches; prefill in chunks of 8 rows), DeepSeek-V3.2 (the DSA
# indexer in every layer, with half-split RoPE), gpt-oss (attention sinks, a
# sliding window of 8 on alternate layers that 16-token prompts pass,
# head_dim apart from hidden/heads, yarn without truncation, q/k/v/o, router
# and expert biases, the clamped SwiGLU; fused float experts and MXFP4).
# Tolerance: 1e-4 absolute on
# logits of std ~3 (the engine computes in float32, the reference in float64;
# observed ~1e-5).
set -u
: "${SY_BUILDDIR:?run through make check}" "${SY_SRCDIR:?run through make check}"
PY=${PYTHON_NUMPY:-/usr/bin/python3}
if ! "$PY" -c 'import numpy' 2>/dev/null; then
    echo "FAIL: no python3 with numpy ($PY); install python3-numpy or set PYTHON_NUMPY" >&2
    exit 1
fi
TOL=1e-4
STEPS=24
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
n=0

# name | sy-mkmodel arguments | prompt ids | attention plugin
cases='
llama-f32|--preset test-llama --seed 11|5,17,300,42,7,99|cpu
llama-gqa-bf16-tied|--arch llama --hidden 96 --layers 3 --heads 6 --kv-heads 2 --ffn 160 --vocab 384 --dtype bf16 --tie --seed 12|1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20|cpu
llama-f16-llama3rope|--preset test-llama --dtype f16 --rope-scaling llama3 --seed 13|3,1,4,1,5,9,2,6|cpu
llama-sharded|--preset test-llama --shards 3 --seed 14|8,6,7,5,3,0,9|cpu-ref
mixtral-bf16|--preset test-mixtral --seed 15|10,20,30,40,50|cpu
mixtral-ref-attn|--preset test-mixtral --seed 16|7,7,7,7|cpu-ref
qwen3moe-bf16|--preset test-qwen3moe --seed 17|100,200,300,4,5|cpu
qwen3moe-dense-layers|--preset test-qwen3moe --layers 4 --sparse-step 2 --mlp-only-layers 0 --no-norm-topk-prob --seed 18|1,2,3|cpu
deepseek-v3|--preset test-deepseek-v3 --seed 19|5,17,300,42,7,99|cpu
deepseek-v3-fp8|--preset test-deepseek-v3 --quant fp8 --seed 24|5,17,300,42,7,99|cpu
deepseek-v3-no-q-lora-f32|--preset test-deepseek-v3 --q-lora-rank 0 --dtype f32 --first-dense 0 --seed 20|9,8,7,6,5|cpu
glm4-moe|--preset test-glm4-moe --seed 21|100,200,300,4,5|cpu
glm5|--preset test-glm5 --seed 22|5,17,300,42,7,99,1,2,3,4|cpu
glm5-topk3-f16|--preset test-glm5 --index-topk 3 --dtype f16 --seed 23|11,12,13|cpu
gpt-oss|--preset test-gpt-oss --seed 27|5,17,300,42,7,99,1,2,3,4,5,6,7,8,9,10|cpu
gpt-oss-ref-attn-f32|--preset test-gpt-oss --dtype f32 --seed 29|5,17,300,42,7,99,1,2,3,4,5,6,7,8,9,10,11,12|cpu-ref
gpt-oss-mxfp4|--preset test-gpt-oss --experts-layout mxfp4 --seed 28|5,17,300,42,7,99,1,2,3,4,5,6,7,8,9,10|cpu
deepseek-v32|--preset test-deepseek-v32 --seed 25|5,17,300,42,7,99,1,2,3,4|cpu
deepseek-v32-topk3-f32-no-mtp|--preset test-deepseek-v32 --index-topk 3 --dtype f32 --mtp-layers 0 --seed 26|11,12,13|cpu
'
IFS='
'
for line in $cases; do
    [ -n "$line" ] || continue
    name=$(echo "$line" | cut -d'|' -f1)
    args=$(echo "$line" | cut -d'|' -f2)
    ids=$(echo "$line" | cut -d'|' -f3)
    attn=$(echo "$line" | cut -d'|' -f4)
    n=$((n + 1))
    dir="$tmp/$name"
    # shellcheck disable=SC2086
    if ! (IFS=' '; "$SY_BUILDDIR/sy-mkmodel" $args --quiet --out "$dir") >"$tmp/mk.log" 2>&1; then
        echo "FAIL $name: sy-mkmodel: $(cat "$tmp/mk.log")"
        fails=$((fails + 1))
        continue
    fi
    if ! "$SY_BUILDDIR/switchyard" generate -q -c "$SY_BUILDDIR/etc/switchyard-build.ini" --model "$dir" \
        --set attention.plugin="$attn" --set scheduler.max_batch_tokens=8 \
        --prompt-ids "$ids" -n $STEPS --ignore-eos --print-ids --logits-out "$tmp/logits.f32" \
        >"$tmp/out.txt" 2>"$tmp/err.txt"; then
        echo "FAIL $name: switchyard generate: $(cat "$tmp/err.txt")"
        fails=$((fails + 1))
        continue
    fi
    gen=$(sed -n 's/^generated_ids: //p' "$tmp/err.txt" | tr ' ' ',')
    if ! "$PY" "$SY_SRCDIR/tests/ref/reference.py" "$dir" --ids "$ids,$gen" --check-logits "$tmp/logits.f32" \
        --tol $TOL >"$tmp/check.txt" 2>&1; then
        echo "FAIL $name: logits differ from the numpy reference:"
        cat "$tmp/check.txt"
        fails=$((fails + 1))
        continue
    fi
    echo "ok   $name [$attn]: $(tail -1 "$tmp/check.txt")"
done
# yarn for GQA models (core/engine/rope.c) beyond gpt-oss's own settings: the correction range rounded
# (truncate true, transformers' default) and an explicit attention_factor, on test-gpt-oss's config.
for v in 'truncate-true|rs["truncate"] = True' 'attention-factor-1.2|rs["attention_factor"] = 1.2'; do
    n=$((n + 1))
    name="gpt-oss-yarn-${v%%|*}"
    dir="$tmp/yarn"
    rm -rf "$dir"
    ids=5,17,300,42,7,99,1,2,3,4,5,6,7,8,9,10
    if ! "$SY_BUILDDIR/sy-mkmodel" --preset test-gpt-oss --seed 30 --quiet --out "$dir" >"$tmp/mk.log" 2>&1 ||
        ! "$PY" -c "import json,sys; p=sys.argv[1]; c=json.load(open(p)); rs=c['rope_scaling']; ${v#*|}; \
json.dump(c, open(p, 'w'))" "$dir/config.json" ||
        ! "$SY_BUILDDIR/switchyard" generate -q -c "$SY_BUILDDIR/etc/switchyard-build.ini" --model "$dir" \
            --set scheduler.max_batch_tokens=8 --prompt-ids "$ids" -n $STEPS --ignore-eos --print-ids \
            --logits-out "$tmp/logits.f32" >"$tmp/out.txt" 2>"$tmp/err.txt"; then
        echo "FAIL $name: $(cat "$tmp/mk.log" "$tmp/err.txt" 2>/dev/null | tail -2)"
        fails=$((fails + 1))
        continue
    fi
    gen=$(sed -n 's/^generated_ids: //p' "$tmp/err.txt" | tr ' ' ',')
    if ! "$PY" "$SY_SRCDIR/tests/ref/reference.py" "$dir" --ids "$ids,$gen" --check-logits "$tmp/logits.f32" \
        --tol $TOL >"$tmp/check.txt" 2>&1; then
        echo "FAIL $name: logits differ from the numpy reference:"
        cat "$tmp/check.txt"
        fails=$((fails + 1))
        continue
    fi
    echo "ok   $name [cpu]: $(tail -1 "$tmp/check.txt")"
done
echo "$((n - fails)) passed, $fails failed"
[ $fails -eq 0 ]
