#!/bin/sh
# Tensor parallelism across "nodes" without mpirun: two or three processes
# on 127.0.0.1 started with --nnodes/--node-rank/--dist-addr (comm tcp)
# give the reference's greedy ids (those of one process) for a dense and a
# MoE checkpoint with one rank per node, a dense one with --tp 2 per node,
# and one process's ids for a synthetic MoE with --tp 2 per node; `serve`
# across two nodes answers a completion identical to one process and its
# second node stops with it; a node killed mid-generation makes the other
# exit 1 naming the rank; nodes that disagree (model, --tp), a node rank
# given twice, nobody at --dist-addr and a missing node are refused with the
# reason, on both sides; a waiting node other than 0 stops on SIGTERM.
set -u
. "$SY_SRCDIR/tests/tp/tp_lib.sh"
command -v curl >/dev/null || { echo "FAIL: curl not found (tools/install-deps.sh installs it)"; exit 1; }
pids=
trap 'for p in $pids; do kill -9 "$p" 2>/dev/null; done; rm -rf "$tmp"' EXIT
gen() { "$sy" generate -q -c "$cfg" --set device.threads=1 --ignore-eos --print-ids "$@"; }
# gen_bg OUT ERR ARGS...: gen in the background with $! the switchyard process itself (which may be killed).
gen_bg() {
    o=$1 e=$2
    shift 2
    "$sy" generate -q -c "$cfg" --set device.threads=1 --ignore-eos --print-ids "$@" >"$o" 2>"$e" &
}

# A port nothing listens on now (the kernel's pick for port 0). Another test may take it before node 0
# binds it; pair() then starts over with a new one.
free_port() {
    "$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# pair NAME NODE0-ARGS -- NODE1-ARGS: `generate` as node 0 and node 1 of --nnodes 2;
# $tmp/NAME.{0,1}.{out,err} and rc0, rc1.
pair() {
    name=$1
    shift
    a0=
    while [ "$1" != -- ]; do a0="$a0 $1"; shift; done
    shift
    for _ in 1 2 3; do
        addr=127.0.0.1:$(free_port)
        # shellcheck disable=SC2086 # word splitting of the collected arguments is wanted
        gen_bg "$tmp/$name.1.out" "$tmp/$name.1.err" --nnodes 2 --node-rank 1 --dist-addr "$addr" --dist-timeout 10 "$@"
        p1=$!
        pids="$pids $p1"
        # shellcheck disable=SC2086
        gen --nnodes 2 --node-rank 0 --dist-addr "$addr" --dist-timeout 10 $a0 >"$tmp/$name.0.out" 2>"$tmp/$name.0.err"
        rc0=$?
        wait "$p1"
        rc1=$?
        grep -q "cannot listen on" "$tmp/$name.0.err" || return 0
    done
}

# Greedy ids across two nodes against expected_greedy.json, which is what one process gives
# (test_golden and test_tp_generate check that).
for case in "tiny-llama 1 0" "tiny-mixtral 1 1" "stories260k 2 2"; do
    # shellcheck disable=SC2086
    set -- $case
    m=$1 tp=$2 i=$3
    ids=$(expected "$m" "$i" prompt_ids)
    want=$(expected "$m" "$i" greedy_ids 16)
    args="--model $models/$m --prompt-ids $ids -n 16 --tp $tp"
    # shellcheck disable=SC2086
    pair gen $args -- $args
    two=$(sed -n 's/^generated_ids: //p' "$tmp/gen.0.err")
    if [ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] && [ -n "$two" ] && [ "$two" = "$want" ]; then
        ok "$m prompt $i: 2 nodes x --tp $tp = reference"
    else
        bad "$m prompt $i, 2 nodes x --tp $tp: exit $rc0/$rc1 [$two] reference [$want]" \
            "($(cat "$tmp/gen.0.err" "$tmp/gen.1.err"))"
    fi
done

# Nodes whose configs differ in [scheduler] device_sampling still agree on the greedy exchange: each picks its
# vocabulary slice its own way (device argmax / host) and the ranks trade (value, id) pairs either way (before,
# node 0 gathered pairs while node 1 gathered whole logits slices, and the collective broke).
ids=$(expected tiny-llama 0 prompt_ids)
want=$(expected tiny-llama 0 greedy_ids 16)
args="--model $models/tiny-llama --prompt-ids $ids -n 16"
# shellcheck disable=SC2086
pair mixed $args --set scheduler.device_sampling=auto -- $args --set scheduler.device_sampling=off
two=$(sed -n 's/^generated_ids: //p' "$tmp/mixed.0.err")
if [ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] && [ "$two" = "$want" ]; then
    ok "nodes with device_sampling auto / off: reference ids"
else
    bad "device_sampling auto / off across nodes: exit $rc0/$rc1 [$two] reference [$want]" \
        "($(cat "$tmp/mixed.0.err" "$tmp/mixed.1.err"))"
fi

# MoE with --tp 2 on each node: the shared MoE checkpoints have 2 KV heads, so a synthetic mixtral with 4.
if "$SY_BUILDDIR/sy-mkmodel" --arch mixtral --kv-heads 4 --out "$tmp/mx4" >/dev/null 2>"$tmp/err" &&
    "$SY_BUILDDIR/sy-mkmodel" --heads 3 --kv-heads 3 --hidden 96 --ffn 96 --vocab 513 --out "$tmp/w3" \
        >/dev/null 2>>"$tmp/err"; then
    args="--model $tmp/mx4 --prompt-ids 1,5,9,200 -n 16 --tp 2"
    gen --model "$tmp/mx4" --prompt-ids 1,5,9,200 -n 16 >/dev/null 2>"$tmp/one.err"
    one=$(sed -n 's/^generated_ids: //p' "$tmp/one.err")
    # shellcheck disable=SC2086
    pair gen $args -- $args
    two=$(sed -n 's/^generated_ids: //p' "$tmp/gen.0.err")
    if [ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] && [ -n "$two" ] && [ "$two" = "$one" ]; then
        ok "synthetic mixtral (4 KV heads): 2 nodes x --tp 2 = one process"
    else
        bad "synthetic mixtral, 2 nodes x --tp 2: exit $rc0/$rc1 [$two] one process [$one]" \
            "($(cat "$tmp/gen.0.err" "$tmp/gen.1.err"))"
    fi
else
    bad "sy-mkmodel: $(cat "$tmp/err")"
fi

# Refusals: both sides exit 1 with the reason.
refused() { # name, text on node 0, text on node 1
    if [ $rc0 -eq 1 ] && [ $rc1 -eq 1 ] && grep -qF -- "$2" "$tmp/r.0.err" && grep -qF -- "$3" "$tmp/r.1.err"; then
        ok "$1"
    else
        bad "$1: exit $rc0/$rc1, node 0: $(cat "$tmp/r.0.err") node 1: $(cat "$tmp/r.1.err")"
    fi
}
pair r --model "$models/tiny-llama" --prompt-ids 1,2 -n 2 -- --model "$models/stories260k" --prompt-ids 1,2 -n 2
refused "nodes with different models" "every node needs the same model" "refused --node-rank 1: node 1 (127.0.0.1) runs model $models/stories260k"
pair r --model "$models/stories260k" --prompt-ids 1,2 -n 2 --tp 2 -- --model "$models/stories260k" --prompt-ids 1,2 -n 2
refused "nodes with different --tp" "node 1 (127.0.0.1) was started with --tp 1, node 0 with --tp 2" "refused --node-rank 1"

# The same node rank twice (of three nodes, so node 0 still waits when the second comes; a model that
# divides by 3 ranks): refused naming both.
addr=127.0.0.1:$(free_port)
dup="--model $tmp/w3 --prompt-ids 1,2 -n 2 --nnodes 3 --node-rank 1 --dist-addr $addr --dist-timeout 10"
# shellcheck disable=SC2086 # $dup is a list of arguments
gen_bg /dev/null "$tmp/dup.a.err" $dup
p_a=$!
# shellcheck disable=SC2086
gen_bg /dev/null "$tmp/dup.b.err" $dup
p_b=$!
pids="$pids $p_a $p_b"
gen --model "$tmp/w3" --prompt-ids 1,2 -n 2 --nnodes 3 --node-rank 0 --dist-addr "$addr" --dist-timeout 10 \
    >/dev/null 2>"$tmp/dup.0.err"
rc0=$?
wait "$p_a"
rca=$?
wait "$p_b"
rcb=$?
if [ $rc0 -eq 1 ] && [ $rca -eq 1 ] && [ $rcb -eq 1 ] && grep -q "two nodes say --node-rank 1" "$tmp/dup.0.err"; then
    ok "--node-rank 1 twice: all three exit 1, node 0 says why"
else
    bad "--node-rank 1 twice: exit $rc0/$rca/$rcb: $(cat "$tmp/dup.0.err" "$tmp/dup.a.err" "$tmp/dup.b.err")"
fi

# Nobody at --dist-addr, and a node that never comes: bounded by --dist-timeout, with the address and the node.
addr=127.0.0.1:$(free_port)
start=$(date +%s)
gen --model "$models/tiny-llama" --prompt-ids 1,2 -n 2 --nnodes 2 --node-rank 1 --dist-addr "$addr" --dist-timeout 1 \
    >/dev/null 2>"$tmp/err"
rc=$?
took=$(($(date +%s) - start))
if [ $rc -eq 1 ] && [ $took -le 10 ] && grep -qF "nobody at --dist-addr $addr after 1 s" "$tmp/err"; then
    ok "nobody at --dist-addr: node 1 gives up naming the address"
else bad "nobody at --dist-addr: exit $rc after $took s: $(cat "$tmp/err")"; fi
gen --model "$tmp/w3" --prompt-ids 1,2 -n 2 --nnodes 3 --node-rank 0 --dist-addr "$addr" --dist-timeout 1 \
    >/dev/null 2>"$tmp/err"
rc=$?
if [ $rc -eq 1 ] && grep -qF "node(s) 1, 2 did not join at --dist-addr $addr within 1 s" "$tmp/err"; then
    ok "missing nodes: node 0 gives up naming them"
else bad "missing nodes: exit $rc: $(cat "$tmp/err")"; fi
expect_err() { # name, text, arguments...
    name=$1 text=$2
    shift 2
    gen --model "$models/tiny-llama" --prompt-ids 1,2 -n 2 "$@" >/dev/null 2>"$tmp/err"
    rc=$?
    if [ $rc -eq 1 ] && grep -qF -- "$text" "$tmp/err"; then ok "$name"; else bad "$name: exit $rc: $(cat "$tmp/err")"; fi
}
expect_err "--nnodes without --dist-addr" "--nnodes 2 needs --dist-addr HOST:PORT" --nnodes 2 --node-rank 1
expect_err "--nnodes with comm shm" "shared memory reaches the ranks of one node only" --nnodes 2 --dist-addr \
    127.0.0.1:1 --set comm.plugin=shm

# A node killed mid-generation: the other exits 1 naming the rank, well within --dist-timeout. The
# model has a 64K context, so the generation runs for minutes unless a node stops it.
"$SY_BUILDDIR/sy-mkmodel" --max-pos 65536 --out "$tmp/long" >/dev/null 2>"$tmp/err" || bad "sy-mkmodel: $(cat "$tmp/err")"
# kill_node WHICH: sets rc (124: the survivor did not stop within 20 s; 125: no tokens came, nothing was
# killed), took (s) and surv_err.
kill_node() {
    addr=127.0.0.1:$(free_port)
    long="--model $tmp/long --prompt-ids 1,2,3 -n 100000 --nnodes 2 --dist-addr $addr --dist-timeout 10"
    # shellcheck disable=SC2086 # $long is a list of arguments
    gen_bg "$tmp/k.0.out" "$tmp/k.0.err" $long --node-rank 0
    kp0=$!
    # shellcheck disable=SC2086
    gen_bg "$tmp/k.1.out" "$tmp/k.1.err" $long --node-rank 1
    kp1=$!
    pids="$pids $kp0 $kp1"
    i=0
    while [ "$(wc -c <"$tmp/k.0.out")" -lt 20 ] && [ $i -lt 200 ] && kill -0 "$kp0" 2>/dev/null; do
        sleep 0.05
        i=$((i + 1))
    done
    if [ "$1" = 1 ]; then victim=$kp1 survivor=$kp0 sn=0; else victim=$kp0 survivor=$kp1 sn=1; fi
    surv_err=$tmp/k.$sn.err
    if [ "$(wc -c <"$tmp/k.0.out")" -lt 20 ]; then
        # No tokens within 10 s: the run never started (another test took the port first, or a very
        # loaded machine). Nothing was tested; the caller tries once more.
        kill -9 "$kp0" "$kp1" 2>/dev/null
        wait "$kp0" "$kp1" 2>/dev/null
        rc=125 took=0
        cat "$tmp/k.0.err" "$tmp/k.1.err" >"$surv_err.start"
        return 1
    fi
    kill -9 "$victim" 2>/dev/null
    wait "$victim" 2>/dev/null
    start=$(date +%s)
    i=0
    while [ $i -lt 200 ] && kill -0 "$survivor" 2>/dev/null && [ -z "$(ps -o stat= -p "$survivor" | grep '^Z')" ]; do
        sleep 0.1
        i=$((i + 1))
    done
    kill -9 "$survivor" 2>/dev/null
    wait "$survivor"
    rc=$?
    [ $i -ge 200 ] && rc=124
    took=$(($(date +%s) - start))
}
for n in 1 0; do
    sn=$((1 - n))
    if [ $n = 1 ]; then pat='rank 1 (\(127\.0\.0\.1:[0-9]+\) closed the connection|is gone)'; else
        pat='rank 0 (\(127\.0\.0\.1:[0-9]+\) closed the connection|closed the step-plan channel)'; fi
    kill_node $n || { echo "note: the first try did not start: $(cat "$surv_err.start")"; kill_node $n; }
    if [ $rc -eq 1 ] && [ $took -le 10 ] && grep -Eq "$pat" "$surv_err"; then
        ok "node $n killed mid-generation: node $((1 - n)) exits 1 naming rank $n (${took} s)"
    else bad "node $n killed: node $((1 - n)) exit $rc after $took s: $(cat "$surv_err")"; fi
done

# serve across two nodes: the completion of one process; node 1 stops when node 0 does.
complete_once() {
    curl -s "http://127.0.0.1:$1/v1/completions" -H 'content-type: application/json' \
        -d '{"prompt": "Once upon a time", "max_tokens": 24, "temperature": 0, "ignore_eos": true}' |
        "$py" -c 'import json, sys; print(json.load(sys.stdin)["choices"][0]["text"])' 2>/dev/null
}
serve() { # name, extra args: starts a server, sets sp and hp once /health answers 200
    name=$1
    shift
    hp=$(free_port)
    "$sy" serve -q -c "$cfg" --set "frontend:api.listen=127.0.0.1:$hp" --set device.threads=1 \
        --model "$models/stories260k" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
    sp=$!
    pids="$pids $sp"
    i=0
    while [ $i -lt 300 ] && kill -0 "$sp" 2>/dev/null; do
        [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$hp/health")" = 200 ] && return 0
        sleep 0.1
        i=$((i + 1))
    done
    return 1
}
serve single || bad "serve (one process) did not come up: $(cat "$tmp/single.err")"
want=$(complete_once "$hp")
kill -TERM "$sp"
wait "$sp"
addr=127.0.0.1:$(free_port)
"$sy" serve -q -c "$cfg" --set device.threads=1 --model "$models/stories260k" --nnodes 2 --node-rank 1 \
    --dist-addr "$addr" --dist-timeout 10 >"$tmp/node1.out" 2>"$tmp/node1.err" &
n1=$!
pids="$pids $n1"
if serve node0 --nnodes 2 --node-rank 0 --dist-addr "$addr" --dist-timeout 10; then
    got=$(complete_once "$hp")
    if [ -n "$want" ] && [ "$got" = "$want" ]; then ok "serve on 2 nodes: the completion of one process"; else
        bad "serve on 2 nodes: [$got], one process [$want] ($(cat "$tmp/node0.err" "$tmp/node1.err"))"; fi
    kill -TERM "$sp"
    wait "$sp"
    rc0=$?
    wait "$n1"
    rc1=$?
    if [ $rc0 -eq 0 ] && [ $rc1 -eq 0 ]; then ok "serve on 2 nodes: both stop cleanly on SIGTERM to node 0"; else
        bad "serve on 2 nodes stop: exit $rc0/$rc1: $(cat "$tmp/node0.err" "$tmp/node1.err")"; fi
else
    bad "serve on 2 nodes did not come up: $(cat "$tmp/node0.err" "$tmp/node1.err")"
fi
# A node other than 0 stops on SIGTERM, also while it waits for node 0 (serve blocks the signal on node 0
# so that it can drain; the other nodes have nothing to drain).
addr=127.0.0.1:$(free_port)
"$sy" serve -q -c "$cfg" --set device.threads=1 --model "$models/stories260k" --nnodes 2 --node-rank 1 \
    --dist-addr "$addr" --dist-timeout 30 >/dev/null 2>"$tmp/err" &
n1=$!
pids="$pids $n1"
sleep 0.5
waiting=0
kill -0 "$n1" 2>/dev/null && waiting=1
kill -TERM "$n1"
i=0
while [ $i -lt 50 ] && kill -0 "$n1" 2>/dev/null && [ -z "$(ps -o stat= -p "$n1" | grep '^Z')" ]; do
    sleep 0.1
    i=$((i + 1))
done
if [ $waiting -eq 1 ] && [ $i -lt 50 ]; then ok "serve node 1 waiting for node 0 stops on SIGTERM"; else
    bad "serve node 1 (waiting: $waiting) did not stop on SIGTERM within 5 s: $(cat "$tmp/err")"; fi
kill -9 "$n1" 2>/dev/null
wait "$n1" 2>/dev/null
finish
