# Shared by tests/faults/*.sh and the serve tests of tests/cli (sourced): what tests/cli/lib.sh gives (sy, cfg,
# tmp, ok/bad, need_model), starting and stopping `switchyard serve` on a free loopback port (tests/lib/serve.sh),
# and reading its metrics.
. "${SY_SRCDIR:?run through make check}/tests/cli/lib.sh"
ini=$cfg
# The build's synthetic model, not the config's default (stories260k): the
# timings and limits here were set for its speed and its 2048-token context.
small=$SY_BUILDDIR/models/small
# need_tool TOOL...: fails the test when one is missing (tools/install-deps.sh installs them all); each test names
# the ones it runs, so a test without h2load does not need it.
need_tool() {
    for tool in "$@"; do
        command -v "$tool" >/dev/null || { echo "FAIL: $tool not found (tools/install-deps.sh installs it)"; exit 1; }
    done
}
need_tool curl python3
. "$SY_SRCDIR/tests/lib/serve.sh"

# start_server NAME [serve arguments...]: serve_start on the build's config and $small (a --model in the arguments
# wins); sets pid and port.
start_server() {
    name=$1
    shift
    serve_start "$name" -c "$ini" --model "$small" "$@"
}

# metric NAME: the value of an unlabelled-but-model gauge/counter, e.g. metric switchyard_kv_blocks_used
metric() {
    curl -s "http://127.0.0.1:$port/metrics" | sed -n "s/^$1{[^}]*} //p" | head -1
}

# wait_drained NAME: up to 10 s for no running/waiting request and no KV block held.
wait_drained() {
    i=0
    while [ $i -lt 100 ]; do
        r=$(metric switchyard_num_requests_running)
        w=$(metric switchyard_num_requests_waiting)
        u=$(metric switchyard_kv_blocks_used)
        [ "$r" = 0 ] && [ "$w" = 0 ] && [ "$u" = 0 ] && { ok "$1: no request left and every KV block back"; return; }
        sleep 0.1
        i=$((i + 1))
    done
    bad "$1: running=$r waiting=$w kv_blocks_used=$u after 10 s"
}

finish() {
    echo "$pass passed, $fail failed"
    [ $fail -eq 0 ]
}
