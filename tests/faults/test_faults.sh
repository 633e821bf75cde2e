#!/bin/sh
# Faults a user or an operator would meet, against `switchyard serve` on the
# build's small model. After each, the server must still serve (or have
# stopped cleanly), every cancelled request must have given its KV blocks
# back, and SIGTERM must end it with exit 0:
#   misbehaving clients (tests/faults/faultclient.py): HTTP/2 RST_STREAM and
#     a TCP close mid-stream, a client that never reads (max_pending_output),
#     pipelined requests whose answers are never read (reading pauses), a
#     client gone without a FIN (half-open: idle_timeout on pending output),
#     slowloris (header_timeout), a silent connection (idle_timeout);
#   a prompt over the context: 400 naming the JSON field;
#   KV exhaustion: a 32-block pool under 24 concurrent requests;
#   an attention plugin failing at create, and on one forward call mid-run;
#   SIGTERM with requests in flight (drain, and abort at drain_timeout).
set -u
. "${SY_SRCDIR:?run through make check}/tests/faults/lib.sh"
need_tool h2load
client="python3 $SY_SRCDIR/tests/faults/faultclient.py"
json='content-type: application/json'

# ---------------------------------------------------------------- clients
start_server clients --set frontend:api.header_timeout=2 --set frontend:api.idle_timeout=3 \
    --set frontend:api.max_pending_output=4096
for c in h2-reset h1-close h2-stall h1-stall "h1-halfopen 3" h1-flood "slowloris 2" "idle 3"; do
    # shellcheck disable=SC2086 # c holds the subcommand and its argument
    set -- $c
    out=$($client "$1" "$port" ${2:-} 2>&1 | tail -1)
    case $out in ok*) ok "${out#ok   }" ;; *) bad "${out#FAIL }" ;; esac
done
grep -q "is not reading its response" "$tmp/clients.err" && ok "the log names the slow reader" ||
    bad "no slow-reader line in the log"
grep -q "closing a connection that read nothing of .* (idle_timeout)" "$tmp/clients.err" &&
    ok "the log names the half-open connection" || bad "no half-open line in the log"
aborted=$(curl -s "http://127.0.0.1:$port/metrics" | sed -n 's/^switchyard_requests_total{.*outcome="aborted"} //p')
[ "${aborted:-0}" -ge 4 ] && ok "the 4 abandoned requests count as aborted ($aborted)" ||
    bad "switchyard_requests_total{outcome=aborted} is ${aborted:-missing}, expected at least 4"
wait_drained "after the client faults"
long=$(python3 -c 'print("once upon a time " * 1000)')
body=$(curl -s -w ' %{http_code}' "http://127.0.0.1:$port/v1/completions" -H "$json" \
    -d "{\"prompt\": \"$long\", \"max_tokens\": 4}")
case $body in
*'"param":"prompt"'*'"code":"context_length_exceeded"'*' 400') ok "a prompt over the context: 400 naming \"prompt\"" ;;
*) bad "a prompt over the context: $(echo "$body" | cut -c1-200)" ;;
esac
out=$(curl -s "http://127.0.0.1:$port/v1/completions" -H "$json" -d '{"prompt": "Hi", "max_tokens": 4}')
case $out in *'"finish_reason"'*) ok "still serving after the client faults" ;; *) bad "no answer after the faults: $out" ;; esac
serve_stop clients

# ---------------------------------------------------------------- KV exhaustion
# 32 blocks of 16 tokens; each request needs 13 of them, 24 run at once.
start_server kv --set scheduler.kv_cache_size=1M --set model.max_seq_len=512
printf '{"prompt": "Once upon a time", "max_tokens": 200, "temperature": 0, "ignore_eos": true}' >"$tmp/kv.json"
timeout 120 h2load -n 48 -c 24 -d "$tmp/kv.json" -H "$json" "http://127.0.0.1:$port/v1/completions" >"$tmp/kv.h2load" 2>&1
if grep -q "requests: 48 total, 48 started, 48 done, 48 succeeded, 0 failed" "$tmp/kv.h2load" &&
    grep -q "status codes: 48 2xx" "$tmp/kv.h2load"; then
    ok "KV exhaustion: 48 requests on a 32-block pool all answered ($(metric switchyard_num_preemptions_total) preemptions)"
else
    bad "KV exhaustion: $(grep -E 'requests:|status codes:' "$tmp/kv.h2load" | tr '\n' ' ')"
fi
out=$(curl -s -w ' %{http_code}' "http://127.0.0.1:$port/v1/completions" -H "$json" \
    -d '{"prompt": "Hi", "max_tokens": 600}')
case $out in *'"param":"max_tokens"'*' 400') ok "KV exhaustion: max_tokens over max_seq_len: 400 naming \"max_tokens\"" ;;
*) bad "max_tokens over max_seq_len: $out" ;; esac
wait_drained "after KV exhaustion"
serve_stop kv

# ---------------------------------------------------------------- failing plugins
export SYFAULT_PROBE=1
inner=$SY_BUILDDIR/build-plugins/sy-attn-cpu.so
timeout 30 "$sy" serve -c "$ini" --plugin-dir "$SY_BUILDDIR/build-test-plugins" --set attention.plugin=syfault \
    --set attention.fail_create=true --set frontend:api.listen=127.0.0.1:0 >"$tmp/create.out" 2>"$tmp/create.err"
rc=$?
if [ $rc -eq 1 ] && grep -q "syfault.so: create failed: syfault: injected create failure" "$tmp/create.err"; then
    ok "a plugin failing at create: exit $rc, the error names the plugin and the reason"
else
    bad "a plugin failing at create: exit $rc: $(tail -2 "$tmp/create.err")"
fi

# Forward call 5 is layer 0 of the first request's second step (4 layers).
start_server midrun --plugin-dir "$SY_BUILDDIR/build-test-plugins" --set attention.plugin=syfault \
    --set "attention.inner=$inner" --set attention.fail_at=5
out=$(curl -s -w ' %{http_code}' "http://127.0.0.1:$port/v1/completions" -H "$json" -d '{"prompt": "Hi", "max_tokens": 8}')
case $out in *'injected attention failure on forward call 5'*'"type":"server_error"'*' 500')
    ok "a plugin failing mid-run: the step's request gets a 500 with the reason" ;;
*) bad "a plugin failing mid-run: $out" ;; esac
# The engine thread logs the failure after the step has sent its error
# events, so the 500 can reach the client first: give the log a moment.
i=0
while ! grep -q "engine step failed.*injected attention failure" "$tmp/midrun.err" && [ $i -lt 50 ]; do
    sleep 0.1
    i=$((i + 1))
done
grep -q "engine step failed.*injected attention failure" "$tmp/midrun.err" && ok "the failed step is in the log" ||
    bad "no 'engine step failed' line in the log"
out=$(curl -sN "http://127.0.0.1:$port/v1/completions" -H "$json" -d '{"prompt": "Hi", "max_tokens": 8, "stream": true}')
case $out in *'data: [DONE]'*) ok "the server keeps serving after the failed step" ;; *) bad "after the failed step: $out" ;; esac
failed=$(curl -s "http://127.0.0.1:$port/metrics" | sed -n 's/^switchyard_requests_total{.*outcome="failed"} //p')
[ "$failed" = 1 ] && ok "switchyard_requests_total{outcome=failed} counts it" || bad "failed requests: $failed"
wait_drained "after the failed step"
serve_stop midrun
unset SYFAULT_PROBE

# ---------------------------------------------------------------- SIGTERM under load
printf '{"prompt": "Once upon a time", "max_tokens": 48, "temperature": 0, "ignore_eos": true}' >"$tmp/short.json"
start_server drain --set scheduler.drain_timeout=20
timeout 60 h2load -n 20000 -c 32 -m 2 -d "$tmp/short.json" -H "$json" "http://127.0.0.1:$port/v1/completions" \
    >"$tmp/drain.h2load" 2>&1 &
load=$!
sleep 2
serve_stop drain 25
i=0
while kill -0 $load 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
if kill -0 $load 2>/dev/null; then
    kill $load
    bad "SIGTERM under load: h2load still waiting 10 s after the server exited"
else
    # In flight at SIGTERM: finished (2xx). Sent on an open connection after
    # it: 503 with Retry-After. Later: refused at the socket. Never a 4xx.
    succeeded=$(sed -n 's/^requests: .* \([0-9]*\) succeeded.*/\1/p' "$tmp/drain.h2load")
    c4=$(sed -n 's/^status codes: .* \([0-9]*\) 4xx.*/\1/p' "$tmp/drain.h2load")
    if [ "${succeeded:-0}" -gt 0 ] && [ "${c4:-1}" = 0 ]; then
        ok "SIGTERM under load: h2load ended; $(grep '^status codes:' "$tmp/drain.h2load")"
    else
        bad "SIGTERM under load: $(grep -E 'requests:|status codes:' "$tmp/drain.h2load" | tr '\n' ' ')"
    fi
fi
grep -q "no longer accepting; draining" "$tmp/drain.err" && ok "the log says it drains" || bad "no drain line in the log"

# Requests longer than drain_timeout: aborted at the deadline, still exit 0.
printf '{"prompt": "Once upon a time", "max_tokens": 1900, "n": 8, "ignore_eos": true, "stream": true}' \
    >"$tmp/long.json"
start_server abort --set scheduler.drain_timeout=0.3
for k in 1 2 3 4; do
    curl -sN "http://127.0.0.1:$port/v1/completions" -H "$json" -d @"$tmp/long.json" >"$tmp/abort.$k" 2>&1 &
done
sleep 1
serve_stop abort 15
wait
grep -q "drain timeout after 0.3 s: aborting" "$tmp/abort.err" && ok "drain_timeout: the log says what was aborted" ||
    bad "drain_timeout: no abort line in the log: $(tail -2 "$tmp/abort.err")"
ended=0
for k in 1 2 3 4; do
    grep -q '"finish_reason":"abort"' "$tmp/abort.$k" && [ "$(tail -2 "$tmp/abort.$k" | head -1)" = "data: [DONE]" ] &&
        ended=$((ended + 1))
done
[ $ended -eq 4 ] && ok "drain_timeout: each of the 4 streams ended with finish_reason \"abort\" and [DONE]" ||
    bad "drain_timeout: $ended of 4 streams ended with finish_reason abort: $(tail -c 200 "$tmp/abort.1")"

finish
