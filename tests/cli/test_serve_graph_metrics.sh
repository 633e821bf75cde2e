#!/bin/sh
# `switchyard serve`'s /metrics report [device] graphs (core/serve/metrics.c,
# fed from sy_engine_graph_stats after every step), on ../shared's
# stories260k through the real HTTP frontend:
#   graphs = on through the CPU graph-op wrappers (tests/plugins/sygraph.c,
#     whose graph_launch always fails: a CPU cannot replay): enabled reads 1
#     before any request; after one greedy request it reads 0 (the fallback),
#     one recording was made, nothing was replayed, and every engine step ran
#     op by op;
#   graphs = off: enabled, recordings and replays read 0 and the op-by-op
#     count is the step count.
# A replay that succeeds needs a GPU (tests/gpu/run.sh's graph steps).
set -u
. "${SY_SRCDIR:?run through make check}/tests/faults/lib.sh"
need_model stories260k
model=$SY_SHARED_DIR/models/stories260k
for f in "$SY_BUILDDIR/build-plugins/sy-device-cpu.so" "$SY_BUILDDIR/build-plugins/sy-attn-cpu.so" \
    "$SY_TEST_PLUGIN_DIR/sygraph.so" "$SY_TEST_PLUGIN_DIR/sygraph-attn.so"; do
    [ -f "$f" ] || { echo "FAIL: $f is missing (make check builds it)"; exit 1; }
done
export SYGRAPH_PROBE=1
json='content-type: application/json'
max_tokens=12

# counts: "enabled replays recordings eager steps" from one /metrics read.
counts() {
    curl -s "http://127.0.0.1:$port/metrics" >"$tmp/metrics.txt"
    for m in switchyard_graphs_enabled switchyard_graph_replays_total switchyard_graph_recordings_total \
        switchyard_graph_eager_steps_total switchyard_engine_steps_total; do
        v=$(sed -n "s/^$m{model_name=\"[^\"]*\"} //p" "$tmp/metrics.txt")
        printf '%s ' "${v:-missing}"
    done
}

# request NAME: one greedy completion of max_tokens tokens; ok when it finished by length.
request() {
    out=$(curl -s "http://127.0.0.1:$port/v1/completions" -H "$json" \
        -d "{\"prompt\": \"Once upon a time\", \"max_tokens\": $max_tokens, \"temperature\": 0, \"ignore_eos\": true}")
    case $out in *'"finish_reason":"length"'*) ok "$1: request served" ;; *) bad "$1: request: $out" ;; esac
}

# ---------------------------------------------------------------- graphs = on, launch fails
start_server on --model "$model" --plugin-dir "$SY_TEST_PLUGIN_DIR" \
    --set device.plugin=sygraph --set "device.inner=$SY_BUILDDIR/build-plugins/sy-device-cpu.so" \
    --set attention.plugin=sygraph-attn --set "attention.inner=$SY_BUILDDIR/build-plugins/sy-attn-cpu.so" \
    --set device.graphs=on --set device.fail=launch
c=$(counts)
[ "$c" = "1 0 0 0 0 " ] && ok "graphs on, before any request: enabled 1, nothing counted ($c)" ||
    bad "graphs on, before any request: enabled/replays/recordings/eager/steps '$c', expected '1 0 0 0 0'"
grep -q "^# TYPE switchyard_graph_replays_total counter$" "$tmp/metrics.txt" &&
    grep -q "^# TYPE switchyard_graphs_enabled gauge$" "$tmp/metrics.txt" &&
    ok "graph metrics carry their Prometheus types" ||
    bad "graph metrics: no TYPE lines: $(grep graph "$tmp/metrics.txt")"
request on
c=$(counts)
# shellcheck disable=SC2086
set -- $c
if [ "$1" = 0 ] && [ "$2" = 0 ] && [ "$3" = 1 ] && [ "$5" = "$max_tokens" ] && [ "$4" = "$5" ]; then
    ok "graphs on, graph_launch failed: enabled 0, 0 replays, 1 recording, every step op by op ($c)"
else
    bad "graphs on, graph_launch failed: enabled/replays/recordings/eager/steps '$c'," \
        "expected 0 0 1 N N with N = $max_tokens"
fi
n=$(grep -c "\[device\] graphs: graph_launch failed" "$tmp/on.err")
[ "$n" = 1 ] && ok "the log says once why graphs went off" || bad "$n graph_launch warnings in the log"
request "on, after the fallback"
c=$(counts)
# shellcheck disable=SC2086
set -- $c
[ "$1" = 0 ] && [ "$2" = 0 ] && [ "$3" = 1 ] && [ "$4" = "$5" ] && [ "$5" = $((2 * max_tokens)) ] &&
    ok "graphs stay off after the fallback: no new recording ($c)" || bad "after the fallback: '$c'"
stop_server on

# ---------------------------------------------------------------- graphs = off
start_server off --model "$model" --plugin-dir "$SY_TEST_PLUGIN_DIR" \
    --set device.plugin=sygraph --set "device.inner=$SY_BUILDDIR/build-plugins/sy-device-cpu.so" \
    --set attention.plugin=sygraph-attn --set "attention.inner=$SY_BUILDDIR/build-plugins/sy-attn-cpu.so" \
    --set device.graphs=off --set device.fail=launch
request off
c=$(counts)
# shellcheck disable=SC2086
set -- $c
[ "$1" = 0 ] && [ "$2" = 0 ] && [ "$3" = 0 ] && [ "$5" = "$max_tokens" ] && [ "$4" = "$5" ] &&
    ok "graphs off: enabled 0, no replay or recording, every step op by op ($c)" || bad "graphs off: '$c'"
stop_server off
finish
