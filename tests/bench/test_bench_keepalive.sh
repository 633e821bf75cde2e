#!/bin/sh
# `switchyard bench` against servers that close keep-alive connections
# (tests/bench/keepalive_server.py): every request completes and is counted
# once, a request that met the close of a reused connection before any byte
# of its answer is sent once more and reported ("resent"), and a request
# whose answer had begun fails rather than being sent again.
set -u
: "${SY_BUILDDIR:?run through make check}"
: "${SY_SRCDIR:?run through make check}"
sy=$SY_BUILDDIR/switchyard
python=${PYTHON:-python3}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sy-bench-ka.XXXXXX")
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; [ -n "$pid" ] && wait "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }

start() { # start MODE: the fake server, its port in $port
    "$python" "$SY_SRCDIR/tests/bench/keepalive_server.py" "$1" >"$tmp/$1.port" 2>"$tmp/$1.log" &
    pid=$!
    i=0
    while [ ! -s "$tmp/$1.port" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    port=$(cat "$tmp/$1.port")
    [ -n "$port" ] || { echo "FAIL: keepalive_server.py $1 did not start: $(cat "$tmp/$1.log")"; exit 1; }
}
stop() { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; pid=; }

# check NAME JSON EXPR: EXPR over the first level l of the JSON
check() {
    if "$python" -c 'import json,sys; l=json.load(open(sys.argv[1]))["levels"][0]; sys.exit(0 if eval(sys.argv[2]) else 1)' \
        "$2" "$3" 2>/dev/null; then ok "$1"; else bad "$1: $3 is false for $(cat "$2" 2>/dev/null)"; fi
}

# 1. Closed 50 ms after each answer that promised keep-alive (cpp-httplib's
#    streamed answers): 24 prompts at concurrency 4 all complete, each once.
start late-close
"$sy" bench --port "$port" --num-prompts 24 --max-concurrency 4 --random-input-len 10 --random-output-len 5 \
    --no-progress --output-json "$tmp/late.json" >"$tmp/late.out" 2>"$tmp/late.err"
rc=$?
stop
cat "$tmp/late.out" "$tmp/late.err"
[ $rc -eq 0 ] && ok "late close: exit 0" || bad "late close: exit $rc"
check "late close: 24 completed, none failed, 120 output tokens" "$tmp/late.json" \
    'l["completed"] == 24 and l["failed"] == 0 and l["total_output"] == 120'
check "late close: the resent requests are reported" "$tmp/late.json" '1 <= l["resent"] <= 24'
# what the server read: every request, plus one per resend (the first copy
# died unread or was read and dropped: never more than that)
got=$(grep -c "POST /v1/completions" "$tmp/late-close.log")
resent=$("$python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["levels"][0]["resent"])' "$tmp/late.json" 2>/dev/null)
if [ -n "$resent" ] && [ "$got" -ge 24 ] && [ "$got" -le $((24 + resent)) ]; then
    ok "late close: the server read $got requests for 24 prompts and $resent resends"; else
    bad "late close: the server read $got requests for 24 prompts and ${resent:-?} resends"; fi
grep -q "sent a second time on a new connection" "$tmp/late.err" && ok "late close: says so on stderr" ||
    bad "late close: no note on stderr"

# 2. "Connection: close" on every answer: honoured, nothing resent.
start say-close
"$sy" bench --port "$port" --num-prompts 12 --max-concurrency 3 --random-input-len 10 --random-output-len 4 \
    --no-progress --output-json "$tmp/say.json" >"$tmp/say.out" 2>"$tmp/say.err"
rc=$?
stop
[ $rc -eq 0 ] && ok "Connection: close: exit 0" || bad "Connection: close: exit $rc: $(cat "$tmp/say.err")"
check "Connection: close: 12 completed, none resent" "$tmp/say.json" \
    'l["completed"] == 12 and l["failed"] == 0 and l["resent"] == 0 and l["total_output"] == 48'

# 3. The second answer on each connection stops after one event: that
#    request failed (its answer had begun), is not sent again, and the
#    first one on each connection counts.
start mid-close
"$sy" bench --port "$port" --num-prompts 4 --max-concurrency 1 --random-input-len 10 --random-output-len 3 \
    --no-progress --output-json "$tmp/mid.json" >"$tmp/mid.out" 2>"$tmp/mid.err"
rc=$?
stop
[ $rc -eq 1 ] && ok "close mid-answer: exit 1" || bad "close mid-answer: exit $rc: $(cat "$tmp/mid.err")"
check "close mid-answer: 2 completed, 2 failed, none resent" "$tmp/mid.json" \
    'l["completed"] == 2 and l["failed"] == 2 and l["resent"] == 0 and l["total_output"] == 6'
got=$(grep -c "POST /v1/completions" "$tmp/mid-close.log")
[ "$got" -eq 4 ] && ok "close mid-answer: the server read 4 requests" || bad "close mid-answer: the server read $got"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
