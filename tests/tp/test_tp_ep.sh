#!/bin/sh
# Expert parallelism ([model] moe_parallel = expert with --tp N): each rank
# holds whole routed experts, E/N of them, and the MoE outputs are summed by
# the allreduce that follows the layer. Greedy tokens equal one process's
# and the float64 reference's on the shared MoE checkpoints; the same on
# synthetic ones with shared experts and sigmoid grouped routing
# (GLM-4.5-shaped), with top-4 of 8 experts over 2 and 4 ranks, and with an
# expert width 4 ranks cannot slice (tensor mode refuses it, expert mode
# runs it), on gpt-oss (sinks, biases; MXFP4 experts whole), on
# DeepSeek-V3 (multi-head latent attention), and under
# mpirun when the mpi plugin is built; `serve --tp 2`
# answers what TP=1 answers; what cannot work is refused with the reason.
set -u
. "$SY_SRCDIR/tests/tp/tp_lib.sh"
. "$SY_SRCDIR/tests/lib/serve.sh"
: "${SY_TEST_PLUGIN_DIR:?run through make check}"
command -v curl >/dev/null || { echo "FAIL: curl not found (tools/install-deps.sh installs it)"; exit 1; }
ep='model.moe_parallel=expert'
# One worker thread per rank: the ranks share the machine's cores.
gen() { "$sy" generate -q -c "$cfg" --set device.threads=1 --ignore-eos --print-ids "$@"; }
ids_of() { sed -n 's/^generated_ids: //p' "$1"; }

for m in tiny-mixtral tiny-qwen3moe; do
    for i in 0 1 2 3; do
        ids=$(expected "$m" "$i" prompt_ids)
        want=$(expected "$m" "$i" greedy_ids 24)
        gen --model "$models/$m" --prompt-ids "$ids" -n 24 >/dev/null 2>"$tmp/err1"
        gen --model "$models/$m" --prompt-ids "$ids" -n 24 --tp 2 --set "$ep" >/dev/null 2>"$tmp/err2"
        one=$(ids_of "$tmp/err1")
        two=$(ids_of "$tmp/err2")
        if [ -n "$two" ] && [ "$two" = "$one" ] && [ "$two" = "$want" ]; then
            ok "$m prompt $i: expert parallel --tp 2 = --tp 1 = reference (24 tokens)"
        else
            bad "$m prompt $i: tp1 [$one] ep2 [$two] reference [$want] ($(cat "$tmp/err2"))"
        fi
    done
done

# The split really is by expert: rank 0 says which experts it holds.
"$sy" generate -c "$cfg" --set device.threads=1 --model "$models/tiny-mixtral" --prompt-ids 1,2 -n 2 --tp 2 \
    --set "$ep" >/dev/null 2>"$tmp/log"
if grep -q 'expert parallel rank 0 of 2: routed experts \[0, 2) of 4, whole' "$tmp/log"; then
    ok "rank 0 holds experts [0, 2) of tiny-mixtral's 4"
else
    bad "no expert-parallel line from rank 0: $(cat "$tmp/log")"
fi

# same NAME MODEL ARGS...: the expert-parallel run's 24 tokens equal one process's.
same() {
    name=$1 model=$2
    shift 2
    gen --model "$model" --prompt-ids 1,2,3,4,5 -n 24 >/dev/null 2>"$tmp/err1"
    gen --model "$model" --prompt-ids 1,2,3,4,5 -n 24 --set "$ep" "$@" >/dev/null 2>"$tmp/err2"
    one=$(ids_of "$tmp/err1")
    two=$(ids_of "$tmp/err2")
    if [ -n "$two" ] && [ "$two" = "$one" ]; then ok "$name: expert parallel $* = --tp 1"; else
        bad "$name $*: tp1 [$one] ep [$two] ($(cat "$tmp/err1" "$tmp/err2"))"; fi
}
mk() { # dir, sy-mkmodel arguments...
    d=$1
    shift
    "$SY_BUILDDIR/sy-mkmodel" --quiet --out "$tmp/$d" "$@" 2>"$tmp/mkerr" || bad "sy-mkmodel $*: $(cat "$tmp/mkerr")"
}

# GLM-4.5-shaped: 8 experts in 2 groups (topk_group 1, so one rank often holds every chosen expert),
# sigmoid scores with a selection bias, routed_scaling_factor 1.5, a shared expert split by rows.
mk glm4 --preset test-glm4-moe
same "test-glm4-moe (shared experts, grouped sigmoid routing)" "$tmp/glm4" --tp 2

# Top-4 of 8 experts: a token's experts spread over the ranks and their sums meet in the allreduce.
mk q8 --arch qwen3_moe --experts 8 --top-k 4 --heads 4 --kv-heads 4 --moe-ffn 36
same "qwen3_moe 8 experts top-4" "$tmp/q8" --tp 2
same "qwen3_moe 8 experts top-4" "$tmp/q8" --tp 4

# Expert width 34: 4 ranks cannot slice it, so tensor mode refuses; whole experts need no slicing.
mk m8 --arch mixtral --experts 8 --heads 4 --kv-heads 4 --moe-ffn 34
same "mixtral 8 experts of width 34" "$tmp/m8" --tp 4
gen --model "$tmp/m8" --prompt-ids 1,2 -n 2 --tp 4 >/dev/null 2>"$tmp/err"
if grep -q 'tensor parallel size 4 does not divide the experts. intermediate size (moe_intermediate_size) 34' \
    "$tmp/err" && grep -q 'or set \[model\] moe_parallel = expert' "$tmp/err"; then
    ok "the same model in tensor mode: --tp 4 refused, pointing at moe_parallel = expert"
else
    bad "tensor mode --tp 4: $(cat "$tmp/err")"
fi

# gpt-oss: attention sinks (each rank its heads'), the o_proj and experts' down biases on rank 0 only in
# tensor mode, each rank its own experts' biases in expert mode; MXFP4 experts only whole (tensor mode refuses).
mk oss --preset test-gpt-oss
mk oss4 --preset test-gpt-oss --experts-layout mxfp4
same "test-gpt-oss (sinks, biases)" "$tmp/oss" --tp 2
same "test-gpt-oss MXFP4" "$tmp/oss4" --tp 2
gen --model "$tmp/oss" --prompt-ids 1,2,3,4,5 -n 24 >/dev/null 2>"$tmp/err1"
gen --model "$tmp/oss" --prompt-ids 1,2,3,4,5 -n 24 --tp 2 >/dev/null 2>"$tmp/err2"
if [ -n "$(ids_of "$tmp/err2")" ] && [ "$(ids_of "$tmp/err2")" = "$(ids_of "$tmp/err1")" ]; then
    ok "test-gpt-oss: tensor parallel --tp 2 = --tp 1"
else
    bad "test-gpt-oss tensor --tp 2: tp1 [$(ids_of "$tmp/err1")] tp2 [$(ids_of "$tmp/err2")] ($(cat "$tmp/err2"))"
fi
gen --model "$tmp/oss4" --prompt-ids 1,2 -n 2 --tp 2 >/dev/null 2>"$tmp/err"
if grep -q "routed experts are F4_E2M1 with block scales, which are not sliced" "$tmp/err" &&
    grep -q 'set \[model\] moe_parallel = expert' "$tmp/err"; then
    ok "MXFP4 experts in tensor mode: refused, pointing at moe_parallel = expert"
else
    bad "MXFP4 tensor mode --tp 2: $(cat "$tmp/err")"
fi

# Ranks from mpirun (comm mpi) when the mpi plugin was built (test_tp_mpi.sh has the Open MPI settings).
if [ -f "$SY_BUILDDIR/build-plugins/sy-comm-mpi.so" ]; then
    gen --model "$tmp/glm4" --prompt-ids 1,2,3,4,5 -n 24 >/dev/null 2>"$tmp/err1"
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none \
        ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" timeout 120 mpirun -n 2 --oversubscribe \
        --mca btl self,vader "$sy" generate -q -c "$cfg" --set comm.plugin=mpi --set device.threads=1 --set "$ep" \
        --model "$tmp/glm4" --prompt-ids 1,2,3,4,5 -n 24 --ignore-eos --print-ids >/dev/null 2>"$tmp/err2"
    one=$(ids_of "$tmp/err1")
    two=$(grep '^generated_ids: ' "$tmp/err2" | sed 's/^generated_ids: //')
    if [ -n "$two" ] && [ "$two" = "$one" ]; then ok "test-glm4-moe: mpirun -n 2 expert parallel = --tp 1"; else
        bad "mpirun expert parallel: tp1 [$one] mpi [$two] ($(cat "$tmp/err2"))"; fi
else
    echo "skip mpirun expert parallel: the mpi comm plugin was not built (configure found no mpicc)"
fi

# Refusals: exit 1 and the reason.
expect_err() { # name, expected text, arguments...
    name=$1 text=$2
    shift 2
    gen --prompt-ids 1,2 -n 2 "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ $rc -eq 1 ] && grep -F -- "$text" "$tmp/err" >/dev/null; then ok "$name"; else
        bad "$name: exit $rc, stderr: $(cat "$tmp/err")"; fi
}
expect_err "3 ranks on 8 experts" 'expert parallel size 3 does not divide n_routed_experts 8' \
    --model "$tmp/glm4" --tp 3 --set "$ep"
expect_err "expert parallel on a dense model" 'is a dense model, it has no routed experts to split' \
    --model "$models/tiny-llama" --tp 2 --set "$ep"
# Multi-head latent attention splits its heads like GQA ones, with whole experts behind it.
mk dsv3 --preset test-deepseek-v3
same "test-deepseek-v3 (multi-head latent attention)" "$tmp/dsv3" --tp 2
# The build's [moe] keys are the cpu plugin's; this plugin takes none.
awk '/^\[/ { sec = $1 } !(sec == "[moe]" && /^[a-z_]+ *=/)' "$cfg" >"$tmp/nomoe.ini"
export SYSDK_PROBE=1 # the SDK's test plugins run only when asked to
cfg_all=$cfg
cfg=$tmp/nomoe.ini
expect_err "a moe plugin without set_expert_range" 'moe plugin sysdk-wrongmoe' --model "$models/tiny-mixtral" \
    --tp 2 --set "$ep" --plugin-dir "$SY_TEST_PLUGIN_DIR" --set moe.plugin=sysdk-wrongmoe
cfg=$cfg_all
unset SYSDK_PROBE
grep -q 'has no set_expert_range op' "$tmp/err" || bad "the missing op is not named: $(cat "$tmp/err")"
# Experts with biases (gpt-oss) need the ABI 1.1 op that hands them over: a moe plugin without it is refused.
export SYSDK_PROBE=1
cfg=$tmp/nomoe.ini
expect_err "a moe plugin without prepare_layer_bias for gpt-oss" \
    'moe plugin sysdk-wrongmoe' --model "$tmp/oss" --plugin-dir "$SY_TEST_PLUGIN_DIR" --set moe.plugin=sysdk-wrongmoe
cfg=$cfg_all
unset SYSDK_PROBE
grep -q "has no prepare_layer_bias op (ABI 1.1), but GptOssForCausalLM's experts have biases" "$tmp/err" ||
    bad "the missing prepare_layer_bias is not named: $(cat "$tmp/err")"
expect_err "a misspelt value" '"moe_parallel" expects one of tensor, expert, found "experts"' \
    --model "$models/tiny-mixtral" --tp 2 --set model.moe_parallel=experts

# serve --tp 2 with expert parallel: the completion TP=1 serves.
start() { # NAME ARGS...: serve_start on tiny-mixtral with one thread; sets pid and port
    _name=$1
    shift
    serve_start "$_name" -q -c "$cfg" --set device.threads=1 --model "$models/tiny-mixtral" "$@"
}
complete() {
    curl -s "http://127.0.0.1:$port/v1/completions" -H 'content-type: application/json' \
        -d '{"prompt": "Once upon a time", "max_tokens": 24, "temperature": 0, "ignore_eos": true}' |
        "$py" -c 'import json, sys; print(json.load(sys.stdin)["choices"][0]["text"])' 2>/dev/null
}
start tp1
one=$(complete)
serve_stop tp1
start ep2 --tp 2 --set "$ep"
two=$(complete)
if [ -n "$two" ] && [ "$two" = "$one" ]; then ok "serve --tp 2 expert parallel: completion = TP=1's"; else
    bad "serve completion: tp1 [$one] ep2 [$two] ($(cat "$tmp/ep2.err"))"; fi
serve_stop ep2
finish
