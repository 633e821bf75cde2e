#!/bin/sh
# Real clients against `switchyard serve` on the build's small model: h2load
# (nghttp2's load generator) over h2c with many streams per connection and
# over HTTP/1.1, then curl; every request must succeed with a 2xx, and the
# metrics must show every KV block back in the pool afterwards.
set -u
for tool in h2load curl; do
    command -v "$tool" >/dev/null || { echo "FAIL: $tool not found (tools/install-deps.sh installs nghttp2-client and curl)"; exit 1; }
done
. "${SY_SRCDIR:?run through make check}/tests/cli/lib.sh"
. "$SY_SRCDIR/tests/lib/serve.sh"
serve_start serve -q -c "$cfg" --model "$SY_BUILDDIR/models/small"

printf '{"prompt": "Once upon a time", "max_tokens": 24, "temperature": 0, "ignore_eos": true}' >"$tmp/body.json"
url=http://127.0.0.1:$port/v1/completions

# h2load prints "requests: N total, N started, N done, N succeeded, 0 failed, 0 errored, 0 timeout"
# and "status codes: N 2xx, ...".
check_h2load() { # name, expected count, h2load arguments...
    name=$1 want=$2
    shift 2
    h2load "$@" -d "$tmp/body.json" -H 'content-type: application/json' "$url" >"$tmp/h2load.out" 2>&1
    if grep -q "requests: $want total, $want started, $want done, $want succeeded, 0 failed, 0 errored, 0 timeout" \
        "$tmp/h2load.out" && grep -q "status codes: $want 2xx" "$tmp/h2load.out"; then
        ok "$name: $want requests, all 2xx"
    else
        bad "$name: $(grep -E 'requests:|status codes:' "$tmp/h2load.out" | tr '\n' ' ') $(tail -3 "$tmp/h2load.out")"
    fi
}
check_h2load "h2c, 16 connections x 8 streams" 800 -n 800 -c 16 -m 8
check_h2load "HTTP/1.1, 32 connections" 400 --h1 -n 400 -c 32

# A streamed request after the load still works, and nothing is left running or holding KV blocks.
if curl -sN "$url" -H 'content-type: application/json' \
    -d '{"prompt": "Hi", "max_tokens": 4, "stream": true}' | grep -q '^data: \[DONE\]'; then
    ok "streaming after the load"
else
    bad "streaming after the load"
fi
metrics=$(curl -s "http://127.0.0.1:$port/metrics")
running=$(echo "$metrics" | sed -n 's/^switchyard_num_requests_running{[^}]*} //p')
used=$(echo "$metrics" | sed -n 's/^switchyard_kv_blocks_used{[^}]*} //p')
if [ "$running" = 0 ] && [ "$used" = 0 ]; then ok "no request running and no KV block held afterwards"; else
    bad "after the load: running=$running kv_blocks_used=$used"; fi

serve_stop serve

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
