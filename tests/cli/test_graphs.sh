#!/bin/sh
# [device] graphs = on, the fallbacks (core/engine/graphs.c). The CPU
# cannot record work, so tests/plugins/sygraph.c wraps the CPU device and
# attention plugins with graph ops that fail in turn at graph_begin,
# graph_end (after the step's ops were "recorded", checked to read only
# host_alloc memory) and graph_launch (after the attention wrapper's stage
# checked ctx_bound). Each must give the plain CPU run's ids on
# ../shared's stories260k, warn exactly once naming the op and its error,
# and run every later step op by op (--stats: no replay). Without the
# attention's stage op, or with graphs = off, nothing is recorded and
# nothing fails. Replays themselves: tests/gpu/run.sh on a GPU.
set -u
. "${SY_SRCDIR:?run through make check}/tests/cli/lib.sh"
need_model stories260k
model=$SY_SHARED_DIR/models/stories260k
inner_dev=$SY_BUILDDIR/build-plugins/sy-device-cpu.so
inner_attn=$SY_BUILDDIR/build-plugins/sy-attn-cpu.so
for f in "$inner_dev" "$inner_attn" "$SY_BUILDDIR/build-test-plugins/sygraph.so" \
    "$SY_BUILDDIR/build-test-plugins/sygraph-attn.so"; do
    [ -f "$f" ] || { echo "FAIL: $f is missing (make check builds it)"; exit 1; }
done
export SYGRAPH_PROBE=1
# gen NAME [--set ...]: the generated ids of 24 greedy tokens, stderr in $tmp/NAME.err (the wrappers run
# their inner CPU device on one thread).
gen() {
    name=$1
    shift
    "$sy" generate -c "$cfg" --plugin-dir "$SY_BUILDDIR/build-test-plugins" --model "$model" \
        --prompt "Once upon a time" --ignore-eos --print-ids --stats -n 24 "$@" >/dev/null 2>"$tmp/$name.err"
    echo "rc=$?" >>"$tmp/$name.err"
    sed -n 's/^generated_ids: //p' "$tmp/$name.err"
}
counts() { sed -n 's/^engine steps replayed from graphs: //p' "$tmp/$1.err"; }
wrapped="--set device.plugin=sygraph --set device.inner=$inner_dev --set attention.plugin=sygraph-attn
    --set attention.inner=$inner_attn"

plain=$(gen plain --set device.plugin=cpu --set device.threads=1 --set attention.plugin=cpu)
n=$(echo "$plain" | wc -w)
[ "$n" = 24 ] && ok "plain CPU run: 24 ids" || { bad "plain CPU run: $n ids: $(tail -3 "$tmp/plain.err")"; exit 1; }

for op in begin end launch; do
    # shellcheck disable=SC2086
    ids=$(gen "$op" $wrapped --set device.graphs=on --set device.fail=$op)
    [ "$ids" = "$plain" ] && ok "graph_$op fails: the same ids as the plain run" ||
        bad "graph_$op fails: ids '$ids', plain '$plain': $(tail -3 "$tmp/$op.err")"
    warn=$(grep -c "\[device\] graphs: .*failed" "$tmp/$op.err")
    what=graph_$op
    if [ "$warn" = 1 ] && grep -q "graphs: $what failed: sygraph: injected $what failure" "$tmp/$op.err"; then
        ok "graph_$op fails: one warning naming $what and the plugin's reason"
    else
        bad "graph_$op fails: $warn warnings: $(grep 'graphs' "$tmp/$op.err")"
    fi
    c=$(counts "$op")
    rec=1
    [ "$op" = launch ] || rec=0
    case $c in "0 (recorded $rec, op by op "*"; graphs off)") ok "graph_$op fails: no replay, $c" ;;
    *) bad "graph_$op fails: counts '$c'" ;; esac
done

# No stage op on the attention plugin: graphs stay off, said once at open.
# shellcheck disable=SC2086
ids=$(gen nostage --set device.plugin=sygraph --set device.inner=$inner_dev --set attention.plugin=cpu \
    --set device.graphs=on --set device.fail=begin)
if [ "$ids" = "$plain" ] && grep -q "graphs = on: decode steps run op by op: the attention plugin has no stage op" \
    "$tmp/nostage.err" && ! grep -q "failed" "$tmp/nostage.err"; then
    ok "attention without stage: op by op, said why, same ids"
else
    bad "attention without stage: ids '$ids': $(grep graphs "$tmp/nostage.err")"
fi
# graphs = off: the wrapper's failing ops are never called.
# shellcheck disable=SC2086
ids=$(gen off $wrapped --set device.graphs=off --set device.fail=begin)
c=$(counts off)
if [ "$ids" = "$plain" ] && ! grep -q "\[device\] graphs" "$tmp/off.err" &&
    case $c in "0 (recorded 0, op by op "*"; graphs off)") true ;; *) false ;; esac; then
    ok "graphs = off: no graph op called, same ids ($c)"
else
    bad "graphs = off: ids '$ids', counts '$c': $(grep -i graph "$tmp/off.err")"
fi

# tests/gpu/test_cuda_graphs (run.sh's check on a GPU) on the wrappers: six
# sequences crossing the 256 bound, a shrinking batch, a full logits row;
# the attention wrapper checks every bounded forward and stage; graphs off
# and on (falling back at graph_launch) give the same ids and logits.
# shellcheck disable=SC2086
if "$SY_BUILDDIR/tests/gpu/test_cuda_graphs" -c "$cfg" --plugin-dir "$SY_BUILDDIR/build-test-plugins" \
    --set "model.path=$model" $wrapped --set device.fail=launch --expect-fallback --bitwise \
    >"$tmp/tcg.out" 2>"$tmp/tcg.err" && grep -q "graph_launch failed" "$tmp/tcg.err"; then
    ok "test_cuda_graphs on the CPU wrappers: $(sed -n 's/^graphs off: //p' "$tmp/tcg.out")"
else
    bad "test_cuda_graphs on the CPU wrappers: $(tail -5 "$tmp/tcg.out" "$tmp/tcg.err")"
fi

echo "test_graphs: $pass passed, $fail failed"
[ $fail -eq 0 ]
