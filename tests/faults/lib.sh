# Shared by tests/faults/*.sh (sourced): start and stop `switchyard serve`
# on a free loopback port, read its metrics, count results.
: "${SY_BUILDDIR:?run through make check}"
sy=$SY_BUILDDIR/switchyard
ini=$SY_BUILDDIR/etc/switchyard-build.ini
# The build's synthetic model, not the config's default (stories260k): the
# timings and limits here were set for its speed and its 2048-token context.
small=$SY_BUILDDIR/models/small
for tool in h2load curl python3; do
    command -v "$tool" >/dev/null || { echo "FAIL: $tool not found (tools/install-deps.sh installs it)"; exit 1; }
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sy-faults.XXXXXX")
pid=
port=
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }

# start_server NAME [serve arguments...]: sets pid and port; the log goes to
# $tmp/NAME.err. Serves $small unless the arguments say --model. Fails the
# whole test when the server does not come up.
start_server() {
    name=$1
    shift
    port=
    try=0
    while [ $try -lt 8 ] && [ -z "$port" ]; do
        p=$((20000 + ($$ * 17 + try * 7919 + ${#name} * 101) % 40000))
        try=$((try + 1))
        "$sy" serve -c "$ini" --model "$small" --set "frontend:api.listen=127.0.0.1:$p" "$@" >"$tmp/$name.out" \
            2>"$tmp/$name.err" &
        pid=$!
        i=0
        while [ $i -lt 300 ] && kill -0 "$pid" 2>/dev/null; do
            if [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$p/health")" = 200 ]; then
                port=$p
                break
            fi
            sleep 0.1
            i=$((i + 1))
        done
        if [ -z "$port" ]; then
            kill "$pid" 2>/dev/null
            wait "$pid" 2>/dev/null
            pid=
            grep -q "Address already in use" "$tmp/$name.err" || break
        fi
    done
    [ -n "$port" ] || { echo "FAIL: switchyard serve ($name) did not come up: $(tail -5 "$tmp/$name.err")"; exit 1; }
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

# stop_server NAME [MAX_SECONDS]: SIGTERM; must exit 0 within MAX_SECONDS (default 15).
stop_server() {
    max=${2:-15}
    kill -TERM "$pid"
    i=0
    while kill -0 "$pid" 2>/dev/null && [ $i -lt $((max * 10)) ]; do
        sleep 0.1
        i=$((i + 1))
    done
    if kill -0 "$pid" 2>/dev/null; then
        bad "$1: still running $max s after SIGTERM: $(tail -3 "$tmp/$1.err")"
        kill -9 "$pid"
        wait "$pid" 2>/dev/null
    else
        wait "$pid"
        rc=$?
        if [ $rc -eq 0 ]; then ok "$1: SIGTERM: exit 0 after $((i / 10)).$((i % 10)) s"; else
            bad "$1: SIGTERM: exit $rc: $(tail -3 "$tmp/$1.err")"; fi
    fi
    pid=
}

finish() {
    echo "$pass passed, $fail failed"
    [ $fail -eq 0 ]
}
