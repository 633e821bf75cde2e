# Shared by the tests that run `switchyard serve` (sourced after $sy and $tmp are set): start a server on a free
# loopback port and wait until it answers, stop it and check how it exited. Sourcing it replaces the EXIT trap with
# one that also kills every server started here, so a test that fails half-way leaves no server behind.
: "${sy:?set sy (the switchyard binary) before sourcing tests/lib/serve.sh}"
: "${tmp:?set tmp (the scratch directory) before sourcing tests/lib/serve.sh}"
pid=
port=
serve_pids=
trap 'for p in $pid $serve_pids; do kill -9 "$p" 2>/dev/null; done; rm -rf "$tmp"' EXIT

# serve_up PORT: 0 when GET /health on 127.0.0.1:PORT answers 200 (curl when present, else Python).
serve_up() {
    if command -v curl >/dev/null; then
        [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$1/health")" = 200 ]
        return
    fi
    "${PYTHON:-python3}" - "$1" <<'EOP'
import sys, urllib.request
try:
    sys.exit(0 if urllib.request.urlopen("http://127.0.0.1:%s/health" % sys.argv[1], timeout=2).status == 200 else 1)
except Exception:
    sys.exit(1)
EOP
}

# serve_start NAME ARG...: runs `$sy serve ARG... --set frontend:api.listen=127.0.0.1:PORT` in the background,
# output in $tmp/NAME.out and $tmp/NAME.err, and waits up to 30 s for /health to answer 200; sets pid and port.
# The port comes from the process id and NAME, so tests that make check runs side by side pick different ones;
# another port is tried only when the log says the address is in use. A server that does not come up fails the
# whole test with the end of its log. Its variables start with _sv_, so a caller's loop counters survive.
serve_start() {
    _sv_name=$1
    shift
    port=
    _sv_salt=$(printf '%s' "$0 $_sv_name" | cksum | cut -d' ' -f1)
    _sv_try=0
    while [ $_sv_try -lt 8 ] && [ -z "$port" ]; do
        _sv_p=$((20000 + ($$ * 17 + _sv_salt + _sv_try * 7919) % 40000))
        _sv_try=$((_sv_try + 1))
        "$sy" serve "$@" --set "frontend:api.listen=127.0.0.1:$_sv_p" >"$tmp/$_sv_name.out" 2>"$tmp/$_sv_name.err" &
        pid=$!
        serve_pids="$serve_pids $pid"
        _sv_i=0
        while [ $_sv_i -lt 300 ] && kill -0 "$pid" 2>/dev/null; do
            if serve_up "$_sv_p"; then
                port=$_sv_p
                break
            fi
            sleep 0.1
            _sv_i=$((_sv_i + 1))
        done
        if [ -z "$port" ]; then
            kill "$pid" 2>/dev/null
            wait "$pid" 2>/dev/null
            pid=
            grep -q "Address already in use" "$tmp/$_sv_name.err" || break
        fi
    done
    [ -n "$port" ] || { echo "FAIL: switchyard serve ($_sv_name) did not come up: $(tail -5 "$tmp/$_sv_name.err")"; exit 1; }
}

# serve_stop NAME [MAX_SECONDS]: SIGTERM to the last server started; it must exit 0 within MAX_SECONDS (default
# 15), else it is killed. Counts the result with ok/bad, which the sourcing test defines.
serve_stop() {
    _sv_max=${2:-15}
    kill -TERM "$pid" 2>/dev/null
    _sv_i=0
    while kill -0 "$pid" 2>/dev/null && [ $_sv_i -lt $((_sv_max * 10)) ]; do
        sleep 0.1
        _sv_i=$((_sv_i + 1))
    done
    if kill -0 "$pid" 2>/dev/null; then
        bad "$1: still running $_sv_max s after SIGTERM: $(tail -3 "$tmp/$1.err")"
        kill -9 "$pid"
        wait "$pid" 2>/dev/null
    else
        wait "$pid"
        _sv_rc=$?
        if [ $_sv_rc -eq 0 ]; then ok "$1: SIGTERM: exit 0 after $((_sv_i / 10)).$((_sv_i % 10)) s"; else
            bad "$1: SIGTERM: exit $_sv_rc: $(tail -3 "$tmp/$1.err")"; fi
    fi
    pid=
}
