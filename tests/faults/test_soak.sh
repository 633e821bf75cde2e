#!/bin/sh
# Soak (`make check-soak`, not part of `make check`): `switchyard serve` on
# the build's small model under SY_SOAK_REQUESTS (default 50000) requests per
# protocol at 256 in flight, over HTTP/2 (64 connections x 4 streams) and
# HTTP/1.1 (256 connections), short outputs. Zero failed requests, every KV
# block back afterwards, and the server's RSS after the soak within
# SY_SOAK_RSS_MIB (default 32) MiB of its RSS after a warm-up round: a leak
# of a few hundred bytes per request would exceed that.
set -u
. "${SY_SRCDIR:?run through make check-soak}/tests/faults/lib.sh"
need_tool h2load
n=${SY_SOAK_REQUESTS:-50000}
rss_bound=${SY_SOAK_RSS_MIB:-32}
json='content-type: application/json'

# 256 in flight need room in the waiting queue; io_threads 2 as an operator would run it.
start_server soak --set scheduler.max_waiting=1024 --set frontend:api.io_threads=2
url=http://127.0.0.1:$port/v1/completions
printf '{"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0, "ignore_eos": true}' >"$tmp/body.json"
rss_kib() { sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$pid/status"; }

run() { # name count h2load-args...
    name=$1 want=$2
    shift 2
    out=$tmp/$(echo "$name" | tr -c 'a-zA-Z0-9\n' _).h2load
    t0=$(date +%s.%N)
    h2load "$@" -n "$want" -d "$tmp/body.json" -H "$json" "$url" >"$out" 2>&1
    t1=$(date +%s.%N)
    secs=$(echo "$t1 $t0" | awk '{printf "%.1f", $1 - $2}')
    rps=$(echo "$want $t1 $t0" | awk '{printf "%.0f", $1 / ($2 - $3)}')
    if grep -q "requests: $want total, $want started, $want done, $want succeeded, 0 failed, 0 errored, 0 timeout" \
        "$out" && grep -q "status codes: $want 2xx" "$out"; then
        ok "$name: $want requests, all 2xx, ${secs} s, $rps req/s"
    else
        bad "$name: $(grep -E 'requests:|status codes:' "$out" | tr '\n' ' ') $(tail -2 "$out")"
    fi
}

run "warm-up h2c" 2000 -c 64 -m 4
run "warm-up HTTP/1.1" 2000 --h1 -c 256
rss0=$(rss_kib)
run "soak h2c 64x4" "$n" -c 64 -m 4
run "soak HTTP/1.1 256" "$n" --h1 -c 256
rss1=$(rss_kib)
grow=$((rss1 - rss0))
echo "RSS after warm-up ${rss0} KiB, after $((2 * n)) more requests ${rss1} KiB, growth ${grow} KiB"
if [ $grow -le $((rss_bound * 1024)) ]; then ok "RSS flat: grew $grow KiB (bound $rss_bound MiB)"; else
    bad "RSS grew $grow KiB over $((2 * n)) requests (bound $rss_bound MiB)"; fi
wait_drained "after the soak"
failed=$(curl -s "http://127.0.0.1:$port/metrics" | sed -n 's/^switchyard_requests_total{.*outcome="failed"} //p')
[ "$failed" = 0 ] && ok "no request failed in the engine" || bad "switchyard_requests_total{outcome=failed} = $failed"
serve_stop soak 30
finish
