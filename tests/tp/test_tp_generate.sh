#!/bin/sh
# Tensor parallelism through `switchyard generate --tp N` (forked ranks over
# comm shm): every checkpoint of ../shared/models, dense and MoE, gives the
# same greedy tokens with 2 ranks as with 1, and as the float64 reference;
# so does a synthetic GLM-4.5-shaped checkpoint with shared experts, and
# DeepSeek-V3- and GLM-5-shaped ones (multi-head latent attention); 4 ranks
# where the model divides by 4; a rank killed mid-generation stops
# the other at once with the rank named; sizes and flags that cannot work
# are refused before anything loads, with the reason.
set -u
. "$SY_SRCDIR/tests/tp/tp_lib.sh"
pid=
follower=
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; [ -n "$follower" ] && kill -9 "$follower" 2>/dev/null; rm -rf "$tmp"' EXIT
# One worker thread per rank: the ranks share the machine's cores.
gen() { "$sy" generate -q -c "$cfg" --set device.threads=1 --ignore-eos --print-ids "$@"; }

# Dense tied (stories260k), dense untied (tiny-llama), MoE (tiny-mixtral), MoE with Q/K norms (tiny-qwen3moe).
for m in stories260k tiny-llama tiny-mixtral tiny-qwen3moe; do
    for i in 0 1 2 3; do
        ids=$(expected "$m" "$i" prompt_ids)
        want=$(expected "$m" "$i" greedy_ids 24)
        gen --model "$models/$m" --prompt-ids "$ids" -n 24 >/dev/null 2>"$tmp/err1"
        one=$(sed -n 's/^generated_ids: //p' "$tmp/err1")
        gen --model "$models/$m" --prompt-ids "$ids" -n 24 --tp 2 >/dev/null 2>"$tmp/err2"
        two=$(sed -n 's/^generated_ids: //p' "$tmp/err2")
        if [ -n "$two" ] && [ "$two" = "$one" ] && [ "$two" = "$want" ]; then
            ok "$m prompt $i: --tp 2 = --tp 1 = reference (24 tokens)"
        else
            bad "$m prompt $i: tp1 [$one] tp2 [$two] reference [$want] ($(cat "$tmp/err2"))"
        fi
    done
done

# Four ranks: stories260k (8 heads, 4 KV heads) and aidreams260k (4 and 4) divide by 4.
for m in stories260k aidreams260k; do
    ids=$(expected "$m" 0 prompt_ids)
    want=$(expected "$m" 0 greedy_ids 24)
    gen --model "$models/$m" --prompt-ids "$ids" -n 24 --tp 4 >/dev/null 2>"$tmp/err"
    got=$(sed -n 's/^generated_ids: //p' "$tmp/err")
    if [ "$got" = "$want" ]; then ok "$m: --tp 4 = reference"; else bad "$m --tp 4: [$got] want [$want] ($(cat "$tmp/err"))"; fi
done

# GLM-4.5-shaped synthetic checkpoint: shared experts (split like a dense MLP), sigmoid routing with a
# score bias, q/k biases and norms, partial RoPE, a dense first layer.
if "$SY_BUILDDIR/sy-mkmodel" --preset test-glm4-moe --out "$tmp/glm4" >/dev/null 2>"$tmp/err"; then
    gen --model "$tmp/glm4" --prompt-ids 1,2,3,4,5 -n 24 >/dev/null 2>"$tmp/err1"
    gen --model "$tmp/glm4" --prompt-ids 1,2,3,4,5 -n 24 --tp 2 >/dev/null 2>"$tmp/err2"
    one=$(sed -n 's/^generated_ids: //p' "$tmp/err1")
    two=$(sed -n 's/^generated_ids: //p' "$tmp/err2")
    if [ -n "$two" ] && [ "$two" = "$one" ]; then ok "test-glm4-moe (shared experts): --tp 2 = --tp 1"; else
        bad "test-glm4-moe: tp1 [$one] tp2 [$two] ($(cat "$tmp/err1" "$tmp/err2"))"; fi
else
    bad "sy-mkmodel --preset test-glm4-moe: $(cat "$tmp/err")"
fi

# The text path too: the README's continuation, streamed by rank 0 only.
want=', there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball.'
got=$("$sy" generate -q -c "$cfg" --set device.threads=1 --model "$models/stories260k" --prompt "Once upon a time" \
    -n 40 --tp 2 2>"$tmp/err")
if [ "$got" = "$want" ]; then ok "stories260k text with --tp 2"; else bad "stories260k text: [$got] ($(cat "$tmp/err"))"; fi

# A rank killed mid-generation (inside a collective, not waiting for a plan): the other side
# stops at once with the rank named, never hangs. A whole generation takes well under a
# second on a fast machine, so once the first tokens are out both ranks are frozen
# (SIGSTOP), one is killed, and the other resumes into the dead peer.
long_gen() {
    rm -f "$tmp/long.out" "$tmp/long.err"
    "$sy" generate -q -c "$cfg" --set device.threads=1 --model "$models/tiny-mixtral" --prompt-ids 1,2,3 \
        -n 100000 --ignore-eos --tp 2 --dist-timeout 10 >"$tmp/long.out" 2>"$tmp/long.err" &
    pid=$!
    i=0
    while [ ! -s "$tmp/long.out" ] && [ $i -lt 2000 ] && kill -0 "$pid" 2>/dev/null; do
        sleep 0.01
        i=$((i + 1))
    done
    follower=$(ps -o pid= --ppid "$pid" | tr -d ' ')
    kill -STOP "$pid" $follower 2>/dev/null
    if [ -z "$follower" ] || ! kill -0 "$pid" 2>/dev/null; then
        bad "generation ended before a rank could be killed: $(cat "$tmp/long.err")"
    fi
}
# One try of each kill; a failed try is printed and tried once more, so a
# rare race in the test's own choreography (where exactly the SIGSTOP caught
# each rank) shows in the log without failing the run, while a real failure
# to stop fails both tries.
kill_follower() {
    long_gen
    kill -9 "$follower"
    kill -CONT "$pid"
    wait "$pid"
    rc=$?
    pid=
    # Which side notices first is a race: the collective ("rank 1 (pid N) died")
    # or the launcher reaping the follower ("... was killed"); either names it.
    if [ $rc -eq 1 ] && grep -Eq "rank 1 \(pid $follower\) (died|was killed)" "$tmp/long.err"; then
        follower=
        return 0
    fi
    why="exit $rc: $(cat "$tmp/long.err")"
    follower=
    return 1
}
kill_leader() {
    long_gen
    kill -9 "$pid"
    kill -CONT "$follower" 2>/dev/null
    wait "$pid" 2>/dev/null
    killed=$pid
    pid=
    # The follower gives up within --dist-timeout (10 s) at worst; allow 30.
    i=0
    while [ $i -lt 300 ] && [ -n "$(ps -o stat= -p "$follower" | grep -v '^Z')" ]; do
        sleep 0.1
        i=$((i + 1))
    done
    state=$(ps -o stat= -p "$follower" | grep -v '^Z')
    [ -n "$follower" ] && kill -9 "$follower" 2>/dev/null
    if [ -n "$follower" ] && [ -z "$state" ] &&
        grep -qE "rank 0 (\(pid $killed\) died|closed the step-plan channel)" "$tmp/long.err"; then
        follower=
        return 0
    fi
    why="follower [$follower] state [$state] after $i x 0.1 s: $(cat "$tmp/long.err")"
    follower=
    return 1
}
if kill_follower; then ok "follower killed mid-generation: rank 0 exits 1 naming rank 1"; else
    echo "note: first try of the follower kill: $why"
    if kill_follower; then ok "follower killed mid-generation (second try): rank 0 exits 1 naming rank 1"; else
        bad "follower killed mid-generation: $why"; fi
fi
if kill_leader; then ok "rank 0 killed mid-generation: the follower exits saying so"; else
    echo "note: first try of the rank 0 kill: $why"
    if kill_leader; then ok "rank 0 killed mid-generation (second try): the follower exits saying so"; else
        bad "rank 0 killed mid-generation: $why"; fi
fi

# Multi-head latent attention: heads split, latents and the DSA indexer replicated. DeepSeek-V3 with its query
# latent and without one (a plain q_proj), GLM-5 with the indexer choosing among more positions than it keeps.
mla_same() { # name, model dir, --tp
    gen --model "$2" --prompt-ids 1,2,3,4,5 -n 24 >/dev/null 2>"$tmp/err1"
    gen --model "$2" --prompt-ids 1,2,3,4,5 -n 24 --tp "$3" >/dev/null 2>"$tmp/err2"
    one=$(sed -n 's/^generated_ids: //p' "$tmp/err1")
    two=$(sed -n 's/^generated_ids: //p' "$tmp/err2")
    if [ -n "$two" ] && [ "$two" = "$one" ]; then ok "$1: --tp $3 = --tp 1 (24 tokens)"; else
        bad "$1 --tp $3: tp1 [$one] tp$3 [$two] ($(cat "$tmp/err1" "$tmp/err2"))"; fi
}
"$SY_BUILDDIR/sy-mkmodel" --preset test-deepseek-v3 --quiet --out "$tmp/dsv3" >/dev/null 2>&1
"$SY_BUILDDIR/sy-mkmodel" --preset test-deepseek-v3 --q-lora-rank 0 --seed 3 --quiet --out "$tmp/dsv3q" >/dev/null 2>&1
"$SY_BUILDDIR/sy-mkmodel" --preset test-glm5 --quiet --out "$tmp/glm5" >/dev/null 2>&1
mla_same "test-deepseek-v3 (MLA)" "$tmp/dsv3" 2
mla_same "test-deepseek-v3 (MLA)" "$tmp/dsv3" 4
mla_same "test-deepseek-v3, q_lora_rank null" "$tmp/dsv3q" 2
mla_same "test-glm5 (MLA, DSA indexer)" "$tmp/glm5" 2

# Refusals: exit 1 and the reason, before any rank starts.
expect_err() { # name, expected text, arguments...
    name=$1 text=$2
    shift 2
    gen --prompt-ids 1,2 -n 2 "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ $rc -eq 1 ] && grep -F -- "$text" "$tmp/err" >/dev/null; then ok "$name"; else
        bad "$name: exit $rc, stderr: $(cat "$tmp/err")"; fi
}
expect_err "--tp 3 on 4 heads" 'tensor parallel size 3 does not divide num_attention_heads 4' \
    --model "$models/tiny-llama" --tp 3
expect_err "--tp 4 on 2 KV heads" 'tensor parallel size 4 does not divide num_key_value_heads 2' \
    --model "$models/tiny-llama" --tp 4
expect_err "--tp 8 on stories260k's 4 KV heads" 'does not divide num_key_value_heads 4' \
    --model "$models/stories260k" --tp 8
"$SY_BUILDDIR/sy-mkmodel" --preset test-llama-fp8 --out "$tmp/fp8" >/dev/null 2>&1
expect_err "--tp on FP8 weights" 'layer 0 q_proj is F8_E4M3; slicing is implemented for F32, F16 and BF16' \
    --model "$tmp/fp8" --tp 2
expect_err "--tp with comm mpi" 'takes its ranks from mpirun' --model "$models/tiny-llama" --tp 2 \
    --set comm.plugin=mpi
expect_err "--nnodes 2 with comm mpi" 'mpi takes its ranks from mpirun; use plugin = tcp' --model "$models/tiny-llama" \
    --nnodes 2 --node-rank 1 --dist-addr 10.0.0.1:29500 --set comm.plugin=mpi
expect_err "--node-rank past --nnodes" '--node-rank 2 is not in 0..1' --model "$models/tiny-llama" --nnodes 2 \
    --node-rank 2
expect_err "bad --dist-addr" 'expects HOST:PORT' --model "$models/tiny-llama" --dist-addr nowhere
# On GPUs the launcher pins no CPU transport: each rank picks among its device's comm plugins (cuda-p2p,
# then nccl; tests/tp/test_tp_fallback.sh has the fallback). No GPU here: the device then fails to start.
"$sy" generate -c "$cfg" --model "$models/tiny-llama" --prompt-ids 1,2 -n 2 --tp 2 --set device.plugin=cuda \
    >"$tmp/out" 2>"$tmp/err"
if grep -q 'plugin = local; each rank takes the best comm plugin for its device' "$tmp/err" &&
    ! grep -q 'comm shm' "$tmp/err"; then ok "--tp 2 with device cuda: comm auto, not shm"; else
    bad "--tp 2 with device cuda: $(cat "$tmp/err")"; fi
gen --prompt-ids 1,2 -n 2 --tp 0 >"$tmp/out" 2>"$tmp/err"
if [ $? -eq 2 ] && grep -q 'option --tp expects an integer in \[1, 256\]' "$tmp/err"; then ok "--tp 0: usage error"; else
    bad "--tp 0: $(cat "$tmp/err")"; fi
finish
