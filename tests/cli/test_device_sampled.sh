#!/bin/sh
# Sampled rows (temperature > 0, no penalties or logprobs) drawn on the
# device: `switchyard generate` with temperature/top_p/top_k/min_p/seed on
# ../shared's tiny-llama and stories260k gives the same ids with
# [scheduler] device_sampling = auto (the cpu device's sample op) as with
# off (logits copied, the host draws with the same uniform) and with
# --logits-out (the host sampler after each step, the path every request
# took before); --stats counts every draw as the device's with auto and
# none with off. Then `switchyard serve` over HTTP: six concurrent seeded
# completions (sampled, greedy and with logprobs, so steps mix the three
# kinds of rows) give the same texts with auto and off. A test device
# that leaves every other row to the host (-1) gives off's ids too.
set -u
: "${SY_BUILDDIR:?run through make check}"
: "${SY_PLUGIN_DIR:?run through make check}"
: "${SY_TEST_PLUGIN_DIR:?run through make check}"
# sy, cfg, tmp (removed at exit with the server in pid), ok, bad, need_model and start_server.
. "${SY_SRCDIR:?run through make check}/tests/faults/lib.sh"
need_model stories260k
need_model tiny-llama
N=32
threads="--set device.threads=2" # [device] keys of the cpu device (the test device below has its own)
# gen MODEL MODE [ARGS]: the generated ids; "$tmp/err" keeps stderr.
gen() {
    m=$1 mode=$2
    shift 2
    # shellcheck disable=SC2086
    "$sy" generate -q -c "$cfg" $threads --set scheduler.device_sampling="$mode" --model "$m" \
        --ignore-eos --print-ids --stats -n $N "$@" >/dev/null 2>"$tmp/err"
    sed -n 's/^generated_ids: //p' "$tmp/err"
}
draws() { sed -n 's/^sampled picks on the device: //p' "$tmp/err"; }

for model in tiny-llama stories260k; do
    m=$SY_SHARED_DIR/models/$model
    for params in "--temperature 0.8 --top-p 0.95 --seed 1" "--temperature 1.0 --top-k 40 --seed 2" \
        "--temperature 1.3 --top-p 0.5 --top-k 5 --min-p 0.05 --seed 3" "--temperature 0.6 --seed 4"; do
        # shellcheck disable=SC2086
        on=$(gen "$m" auto --prompt-ids 1,403,407 $params)
        n_on=$(draws)
        # shellcheck disable=SC2086
        off=$(gen "$m" off --prompt-ids 1,403,407 $params)
        n_off=$(draws)
        # shellcheck disable=SC2086
        lo=$(gen "$m" auto --prompt-ids 1,403,407 $params --logits-out "$tmp/logits.bin")
        n_lo=$(draws)
        if [ -n "$on" ] && [ "$on" = "$off" ] && [ "$on" = "$lo" ] && [ "$n_on" = $N ] && [ "$n_off" = 0 ] &&
            [ "$n_lo" = 0 ]; then
            ok "$model $params: auto = off = --logits-out; $n_on draws on the device"
        else
            bad "$model $params: auto [$on] ($n_on) off [$off] ($n_off) logits-out [$lo] ($n_lo): $(cat "$tmp/err")"
        fi
    done
done
# Another seed draws another continuation (the draws do use the seed).
a=$(gen "$SY_SHARED_DIR/models/stories260k" auto --prompt-ids 1,403,407 --temperature 1.0 --seed 5)
b=$(gen "$SY_SHARED_DIR/models/stories260k" auto --prompt-ids 1,403,407 --temperature 1.0 --seed 6)
if [ -n "$a" ] && [ "$a" != "$b" ]; then ok "seeds 5 and 6 draw differently"; else bad "seeds 5 and 6: [$a] [$b]"; fi

# Tensor parallelism: sampled rows are gathered as logits and drawn on rank 0, never on a device.
tp=$(gen "$SY_SHARED_DIR/models/stories260k" auto --prompt-ids 1,403,407 --temperature 0.9 --top-p 0.9 --seed 3 --tp 2)
n_tp=$(draws)
if [ -n "$tp" ] && [ "$n_tp" = 0 ]; then ok "--tp 2: sampled rows drawn on the host ($n_tp on the device)"; else
    bad "--tp 2: [$tp] ($n_tp on the device): $(cat "$tmp/err")"; fi

# A device that leaves every other sampled row to the host (-1, as a GPU does past what it can sort on chip):
# the core downloads those rows and draws them with the same uniforms, so the ids stay off's; the device
# counts only the rows it finished (16 of 32: rows alternate between steps).
m=$SY_SHARED_DIR/models/stories260k
off=$(gen "$m" off --prompt-ids 1,403,407 --temperature 0.9 --top-p 0.9 --seed 8)
threads=
half=$(SYSAMPLE_PROBE=1 gen "$m" auto --prompt-ids 1,403,407 --temperature 0.9 --top-p 0.9 --seed 8 \
    --plugin-dir "$SY_TEST_PLUGIN_DIR" --set device.plugin=sysample-half --set "device.inner=$SY_PLUGIN_DIR/sy-device-cpu.so")
n_half=$(draws)
threads="--set device.threads=2"
if [ -n "$half" ] && [ "$half" = "$off" ] && [ "$n_half" = $((N / 2)) ]; then
    ok "rows left to the host (-1): same ids as off; $n_half of $N drawn on the device"
else
    bad "rows left to the host: [$half] ($n_half on the device) vs off [$off]: $(cat "$tmp/err")"
fi

# serve MODE: six concurrent seeded completions, one file each, in $tmp/MODE.
serve() {
    mode=$1
    mkdir -p "$tmp/$mode"
    start_server "$mode" -q --set device.threads=2 --set scheduler.device_sampling="$mode" \
        --model "$SY_SHARED_DIR/models/stories260k"
    clients=
    for k in 1 2 3 4 5 6; do
        # 1-4 sampled on the device with auto; 5 greedy (argmax); 6 asks for logprobs (its row comes back whole)
        case $k in 5) extra='"temperature": 0' ;; 6) extra='"temperature": 0.9, "logprobs": 2' ;;
        *) extra="\"temperature\": 0.$((k + 3)), \"top_p\": 0.9, \"top_k\": $((k * 10))" ;; esac
        curl -s "http://127.0.0.1:$port/v1/completions" -H 'content-type: application/json' \
            -d "{\"prompt\": \"Once upon a time\", \"max_tokens\": 40, \"seed\": $k, $extra}" \
            >"$tmp/$mode/$k.json" &
        clients="$clients $!"
    done
    # shellcheck disable=SC2086
    wait $clients
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    pid=
}
serve auto
serve off
same=0
for k in 1 2 3 4 5 6; do
    ta=$(sed -n 's/.*"text": *"\([^"]*\)".*/\1/p' "$tmp/auto/$k.json" 2>/dev/null)
    to=$(sed -n 's/.*"text": *"\([^"]*\)".*/\1/p' "$tmp/off/$k.json" 2>/dev/null)
    if [ -n "$ta" ] && [ "$ta" = "$to" ]; then same=$((same + 1)); else
        bad "serve request $k: auto [$(cat "$tmp/auto/$k.json" 2>/dev/null)] off [$(cat "$tmp/off/$k.json" 2>/dev/null)]"
    fi
done
[ $same = 6 ] && ok "serve: 6 concurrent seeded completions (4 sampled, 1 greedy, 1 with logprobs), auto = off"

echo "test_device_sampled.sh: $pass ok, $fail failed"
[ $fail -eq 0 ]
