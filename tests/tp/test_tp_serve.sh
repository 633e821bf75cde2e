#!/bin/sh
# `switchyard serve --tp 2` over HTTP: a greedy completion equals the one
# TP=1 serves, also after the server sat idle longer than --dist-timeout
# (heartbeats keep the followers), and both directions of a rank dying end
# the other side with a message naming the rank instead of a hang: kill -9
# of the follower makes rank 0 fail and exit 1; kill -9 of rank 0 makes the
# follower exit.
set -u
. "$SY_SRCDIR/tests/tp/tp_lib.sh"
. "$SY_SRCDIR/tests/lib/serve.sh"
command -v curl >/dev/null || { echo "FAIL: curl not found (tools/install-deps.sh installs it)"; exit 1; }

start() { # NAME ARGS...: serve_start on stories260k with one thread; sets pid and port
    _name=$1
    shift
    serve_start "$_name" -q -c "$cfg" --set device.threads=1 --model "$models/stories260k" "$@"
}
complete() {
    curl -s "http://127.0.0.1:$port/v1/completions" -H 'content-type: application/json' \
        -d '{"prompt": "Once upon a time", "max_tokens": 24, "temperature": 0, "ignore_eos": true}' |
        "$py" -c 'import json, sys; print(json.load(sys.stdin)["choices"][0]["text"])' 2>/dev/null
}
# gone PID: the process is gone or a zombie within 10 s.
gone() {
    i=0
    while [ $i -lt 100 ]; do
        st=$(ps -o stat= -p "$1" 2>/dev/null)
        case "$st" in "" | Z*) return 0 ;; esac
        sleep 0.1
        i=$((i + 1))
    done
    return 1
}

start tp1
one=$(complete)
serve_stop tp1

start tp2 --tp 2 --dist-timeout 2
two=$(complete)
if [ -n "$two" ] && [ "$two" = "$one" ]; then ok "--tp 2 completion = TP=1 completion"; else
    bad "completion: tp1 [$one] tp2 [$two] ($(cat "$tmp/tp2.err"))"; fi
sleep 3 # idle past --dist-timeout 2: rank 0 sends heartbeats
again=$(complete)
if [ "$again" = "$one" ]; then ok "served again after idling past --dist-timeout"; else
    bad "after idling: [$again] ($(cat "$tmp/tp2.err"))"; fi
serve_stop tp2 # exit 0 only when the followers drained and exited too

# A follower dies: rank 0 notices (at the next heartbeat or step), fails and exits 1 naming it.
start kill1 --tp 2 --dist-timeout 2
follower=$(ps -o pid= --ppid "$pid" | tr -d ' ')
kill -9 "$follower"
if gone "$pid"; then
    wait "$pid"
    rc=$?
    pid=
    if [ $rc -eq 1 ] && grep -q 'tensor-parallel group failed: .*rank 1' "$tmp/kill1.err" &&
        grep -q 'tensor parallel rank 1 (pid [0-9]*) was killed' "$tmp/kill1.err"; then
        ok "kill -9 of the follower: rank 0 exits 1 naming rank 1"
    else
        bad "kill -9 of the follower: exit $rc: $(cat "$tmp/kill1.err")"
    fi
else
    bad "kill -9 of the follower: rank 0 still running after 10 s: $(cat "$tmp/kill1.err")"
fi

# Rank 0 dies: the follower sees its plan channel close and exits.
start kill0 --tp 2 --dist-timeout 2
follower=$(ps -o pid= --ppid "$pid" | tr -d ' ')
kill -9 "$pid"
wait "$pid" 2>/dev/null
pid=
if [ -n "$follower" ] && gone "$follower" && grep -q 'rank 0 closed the step-plan channel.*rank 1 stops' "$tmp/kill0.err"; then
    ok "kill -9 of rank 0: the follower exits saying so"
else
    bad "kill -9 of rank 0: follower [$follower] state [$(ps -o stat= -p "$follower")]: $(cat "$tmp/kill0.err")"
    [ -n "$follower" ] && kill -9 "$follower" 2>/dev/null
fi
finish
