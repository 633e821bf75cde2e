#!/bin/sh
# Qwen2, dense Qwen3 and sliding windows against the float64 numpy reference,
# logit by logit and greedy id by greedy id: Qwen2 (q/k/v biases, tied),
# Qwen3 (q/k norm, head_dim apart from hidden/heads; attention_bias on q/k/v
# and o_proj), Mistral with sliding_window 8, Mixtral with 12, and Qwen2 / Qwen3 with
# use_sliding_window where only the layers from max_window_layers on slide
# (per-layer windows, sy_attn_problem.layer_window). A 30-token prompt and 16
# generated tokens reach well past every window. Each checkpoint runs three
# ways, since each is its own attention path: the whole prompt in one step
# (max_batch_tokens 4096), token by token (max_batch_tokens 1: every prompt
# token is a decode step), and chunked prefill (max_batch_tokens 7); the
# windowed ones through both cpu attention plugins, two of them also with
# --tp 2 (greedy ids). Tolerance as in
# test_engine_vs_reference.sh: 1e-4 absolute on logits of std ~3.
set -u
: "${SY_BUILDDIR:?run through make check}" "${SY_SRCDIR:?run through make check}"
PY=${PYTHON_NUMPY:-/usr/bin/python3}
if ! "$PY" -c 'import numpy' 2>/dev/null; then
    echo "FAIL: no python3 with numpy ($PY); install python3-numpy or set PYTHON_NUMPY" >&2
    exit 1
fi
TOL=1e-4
STEPS=16
PROMPT=5,17,300,42,7,99,1,2,3,4,250,251,252,10,11,12,400,401,33,34,35,36,128,129,130,64,65,66,67,68
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
n=0

# name | sy-mkmodel arguments | attention plugins
cases='
qwen2|--preset test-qwen2 --seed 31|cpu
qwen3|--preset test-qwen3 --seed 32|cpu
qwen3-attention-bias|--preset test-qwen3 --attention-bias --seed 33|cpu
mistral-window8|--arch mistral --sliding-window 8 --seed 34|cpu cpu-ref
mixtral-window12|--preset test-mixtral --sliding-window 12 --seed 37|cpu
qwen2-window8-from-layer1|--preset test-qwen2 --sliding-window 8 --max-window-layers 1 --seed 35|cpu cpu-ref
qwen3-window6-layer1-bias|--preset test-qwen3 --sliding-window 6 --max-window-layers 1 --attention-bias --seed 36|cpu cpu-ref
'
# Tensor parallel over 2 ranks (each rank its half of the heads, the o_proj bias added once): the same greedy ids.
tp_cases='qwen3-window6-layer1-bias qwen2-window8-from-layer1'
IFS='
'
for line in $cases; do
    [ -n "$line" ] || continue
    name=$(echo "$line" | cut -d'|' -f1)
    args=$(echo "$line" | cut -d'|' -f2)
    plugins=$(echo "$line" | cut -d'|' -f3)
    dir="$tmp/$name"
    # shellcheck disable=SC2086
    if ! (IFS=' '; "$SY_BUILDDIR/sy-mkmodel" $args --quiet --out "$dir") >"$tmp/mk.log" 2>&1; then
        n=$((n + 1))
        echo "FAIL $name: sy-mkmodel: $(cat "$tmp/mk.log")"
        fails=$((fails + 1))
        continue
    fi
    if ! want=$("$PY" "$SY_SRCDIR/tests/ref/reference.py" "$dir" --ids "$PROMPT" --steps $STEPS 2>"$tmp/ref.err"); then
        n=$((n + 1))
        echo "FAIL $name: reference.py: $(cat "$tmp/ref.err")"
        fails=$((fails + 1))
        continue
    fi
    for attn in $(echo "$plugins" | tr ' ' '\n'); do
        for mbt in 4096 1 7; do
            n=$((n + 1))
            what="$name [$attn, max_batch_tokens $mbt]"
            if ! "$SY_BUILDDIR/switchyard" generate -q -c "$SY_BUILDDIR/etc/switchyard-build.ini" --model "$dir" \
                --set attention.plugin="$attn" --set scheduler.max_batch_tokens=$mbt \
                --prompt-ids "$PROMPT" -n $STEPS --ignore-eos --print-ids --logits-out "$tmp/logits.f32" \
                >"$tmp/out.txt" 2>"$tmp/err.txt"; then
                echo "FAIL $what: switchyard generate: $(cat "$tmp/err.txt")"
                fails=$((fails + 1))
                continue
            fi
            got=$(sed -n 's/^generated_ids: //p' "$tmp/err.txt")
            if [ "$got" != "$want" ]; then
                echo "FAIL $what: greedy ids differ from the numpy reference's"
                echo "     reference: $want"
                echo "     engine:    $got"
                fails=$((fails + 1))
                continue
            fi
            if ! "$PY" "$SY_SRCDIR/tests/ref/reference.py" "$dir" --ids "$PROMPT,$(echo "$got" | tr ' ' ',')" \
                --check-logits "$tmp/logits.f32" --tol $TOL >"$tmp/check.txt" 2>&1; then
                echo "FAIL $what: logits differ from the numpy reference:"
                cat "$tmp/check.txt"
                fails=$((fails + 1))
                continue
            fi
            echo "ok   $what: $(tail -1 "$tmp/check.txt")"
        done
    done
    case " $tp_cases " in *" $name "*) ;; *) continue ;; esac
    n=$((n + 1))
    got=$("$SY_BUILDDIR/switchyard" generate -q -c "$SY_BUILDDIR/etc/switchyard-build.ini" --model "$dir" --tp 2 \
        --prompt-ids "$PROMPT" -n $STEPS --ignore-eos --print-ids 2>&1 >/dev/null | sed -n 's/^generated_ids: //p')
    if [ "$got" = "$want" ]; then
        echo "ok   $name [--tp 2]: the reference's greedy ids"
    else
        echo "FAIL $name [--tp 2]: greedy ids $got, the reference's $want"
        fails=$((fails + 1))
    fi
done
echo "$((n - fails)) passed, $fails failed"
[ $fails -eq 0 ]
