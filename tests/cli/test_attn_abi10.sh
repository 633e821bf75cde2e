#!/bin/sh
# An attention plugin built against ABI 1.0 reads neither
# sy_attn_problem.layer_window nor sinks (ABI 1.1), so it would attend over
# every position of a layer that slides: the host refuses it, saying why,
# for a model with per-layer windows (Qwen2 with max_window_layers) or
# sinks (gpt-oss), and
# serves with it a model whose one window covers every layer (Mistral: ABI
# 1.0's sliding_window), giving attn cpu's ids. The 1.0 plugin is
# tests/plugins/syabi10.c wrapping attn cpu.
set -u
: "${SY_BUILDDIR:?run through make check}"
sy=$SY_BUILDDIR/switchyard
cfg=$SY_BUILDDIR/etc/switchyard-build.ini
inner=$SY_BUILDDIR/build-plugins/sy-attn-cpu.so
for f in "$inner" "$SY_BUILDDIR/build-test-plugins/syabi10-attn.so"; do
    [ -e "$f" ] || { echo "FAIL: $f missing"; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
export SYABI10_PROBE=1
ids=5,17,300,42,7,99,1,2,3,4,250,251,252,10,11,12,400,401,33,34,35,36,128,129
gen() { # MODEL ATTENTION-ARGS...: the generated ids on stdout, stderr in $tmp/err
    model=$1
    shift
    "$sy" generate -q -c "$cfg" --plugin-dir "$SY_BUILDDIR/build-test-plugins" --model "$model" "$@" \
        --prompt-ids "$ids" -n 12 --ignore-eos --print-ids >/dev/null 2>"$tmp/err" &&
        sed -n 's/^generated_ids: //p' "$tmp/err"
}
abi10="--set attention.plugin=syabi10-attn --set attention.inner=$inner"
"$SY_BUILDDIR/sy-mkmodel" --preset test-qwen2 --sliding-window 8 --max-window-layers 1 --quiet --out "$tmp/qwen2w" &&
    "$SY_BUILDDIR/sy-mkmodel" --arch mistral --sliding-window 8 --quiet --out "$tmp/mistral" || {
    echo "FAIL: sy-mkmodel"
    exit 1
}

# shellcheck disable=SC2086
if gen "$tmp/qwen2w" $abi10 >/dev/null; then
    echo "FAIL qwen2 (windows from layer 1) on an ABI 1.0 attention plugin: served, expected a refusal"
    fails=$((fails + 1))
elif grep -q "attention plugin syabi10-attn (.*) is built against ABI 1.0, but Qwen2ForCausalLM needs per-layer sliding windows (ABI 1.1)" "$tmp/err"; then
    echo "ok   qwen2 (windows from layer 1) on an ABI 1.0 attention plugin: refused ($(grep -o 'is built against.*' "$tmp/err" | head -1))"
else
    echo "FAIL qwen2 on an ABI 1.0 attention plugin: refused without the reason: $(tail -2 "$tmp/err")"
    fails=$((fails + 1))
fi

# gpt-oss: sinks as well as windows on even layers only.
if "$SY_BUILDDIR/sy-mkmodel" --preset test-gpt-oss --quiet --out "$tmp/gptoss" >"$tmp/mk.log" 2>&1; then
    # shellcheck disable=SC2086
    if gen "$tmp/gptoss" $abi10 >/dev/null; then
        echo "FAIL gpt-oss on an ABI 1.0 attention plugin: served, expected a refusal"
        fails=$((fails + 1))
    elif grep -q "is built against ABI 1.0, but GptOssForCausalLM needs per-layer sliding windows and attention sinks (ABI 1.1)" "$tmp/err"; then
        echo "ok   gpt-oss (sinks, windows on even layers) on an ABI 1.0 attention plugin: refused"
    else
        echo "FAIL gpt-oss on an ABI 1.0 attention plugin: refused without the reason: $(tail -2 "$tmp/err")"
        fails=$((fails + 1))
    fi
else
    echo "FAIL: sy-mkmodel --preset test-gpt-oss: $(tail -1 "$tmp/mk.log")"
    fails=$((fails + 1))
fi

want=$(gen "$tmp/mistral" --set attention.plugin=cpu)
# shellcheck disable=SC2086
got=$(gen "$tmp/mistral" $abi10)
if [ -n "$want" ] && [ "$got" = "$want" ]; then
    echo "ok   mistral (one window, every layer) on an ABI 1.0 attention plugin: attn cpu's ids"
else
    echo "FAIL mistral on an ABI 1.0 attention plugin: ids $got, attn cpu's $want ($(tail -1 "$tmp/err"))"
    fails=$((fails + 1))
fi
[ $fails -eq 0 ]
