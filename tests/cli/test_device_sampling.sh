#!/bin/sh
# Greedy picks on the device through `switchyard generate`: synthetic
# checkpoints with exact ties (within a vocabulary slice and across the
# slices of --tp 2) and NaN logits (at column 0, at the second slice's
# first column), made by tests/cli/twin_rows.py, give the same ids with
# [scheduler] device_sampling = auto as with off (logits copied, host
# picks) and with --tp 2 (picks merged across slices), and each id obeys
# the rule (lowest id wins a tie; NaN loses unless at id 0); --stats counts
# every pick as made on the device with auto, none with off. --logits-out
# keeps the host path. The real stories260k: auto = off = ../shared's
# expected greedy ids.
set -u
. "${SY_SRCDIR:?run through make check}/tests/cli/lib.sh"
need_model stories260k
PY=${PYTHON_NUMPY:-/usr/bin/python3}
N=24
# gen MODEL MODE [ARGS]: the generated ids; "$tmp/err" keeps stderr.
gen() {
    m=$1 mode=$2
    shift 2
    "$sy" generate -q -c "$cfg" --set device.threads=1 --set scheduler.device_sampling="$mode" --model "$m" \
        --ignore-eos --print-ids --stats -n $N "$@" >/dev/null 2>"$tmp/err"
    sed -n 's/^generated_ids: //p' "$tmp/err"
}
picks() { sed -n 's/^greedy picks on the device: //p' "$tmp/err"; }

# rule MODE IDS: whether every id obeys what MODE forces (see twin_rows.py); V = 4096.
rule() {
    case $1 in
    pairs) echo "$2" | tr ' ' '\n' | awk '$1 % 2 == 1 { bad = 1 } END { exit bad }' ;;
    halves) echo "$2" | tr ' ' '\n' | awk '$1 >= 2048 { bad = 1 } END { exit bad }' ;;
    nan-mid) echo "$2" | tr ' ' '\n' | awk '$1 == 2048 { bad = 1 } END { exit bad }' ;;
    nan-first) echo "$2" | tr ' ' '\n' | awk '$1 != 0 { bad = 1 } END { exit bad }' ;;
    esac
}
for mode in pairs halves nan-mid nan-first; do
    m="$tmp/$mode"
    if ! "$SY_BUILDDIR/sy-mkmodel" --out "$m" --vocab 4096 --tie --dtype f32 --quiet 2>"$tmp/err" ||
        ! "$PY" "$SY_SRCDIR/tests/cli/twin_rows.py" "$m/model.safetensors" $mode 2>>"$tmp/err"; then
        bad "making the $mode checkpoint: $(cat "$tmp/err")"
        continue
    fi
    for p in 1,2,3 700,9,4000,31; do
        on=$(gen "$m" auto --prompt-ids $p)
        n_on=$(picks)
        off=$(gen "$m" off --prompt-ids $p)
        n_off=$(picks)
        tp=$(gen "$m" auto --prompt-ids $p --tp 2)
        n_tp=$(picks)
        if [ -n "$on" ] && [ "$on" = "$off" ] && [ "$on" = "$tp" ] && rule $mode "$on" && [ "$n_on" = $N ] &&
            [ "$n_off" = 0 ] && [ "$n_tp" = $N ]; then
            ok "$mode, prompt $p: auto = off = --tp 2 and the rule holds; $n_on picks on the device"
        else
            bad "$mode, prompt $p: auto [$on] ($n_on on the device) off [$off] ($n_off) tp2 [$tp] ($n_tp): $(cat "$tmp/err")"
        fi
    done
done

# The logits callback needs host logits: --logits-out keeps the host path, with the same ids.
lo=$(gen "$SY_SHARED_DIR/models/stories260k" auto --prompt-ids 1,403,407 --logits-out "$tmp/logits.bin")
n_lo=$(picks)
on=$(gen "$SY_SHARED_DIR/models/stories260k" auto --prompt-ids 1,403,407)
if [ -n "$on" ] && [ "$lo" = "$on" ] && [ "$n_lo" = 0 ] && [ "$(wc -c <"$tmp/logits.bin")" -gt 0 ]; then
    ok "--logits-out: host path ($n_lo picks on the device), same ids"
else
    bad "--logits-out: [$lo] ($n_lo on the device) vs [$on]: $(cat "$tmp/err")"
fi

# The real model against the expected greedy ids.
exp="$SY_SHARED_DIR/models/expected_greedy.json"
for i in 0 1; do
    ids=$("$PY" -c "import json,sys; d=json.load(open(sys.argv[1]))['models']['stories260k'][int(sys.argv[2])]; print(','.join(map(str,d['prompt_ids'])))" "$exp" $i)
    want=$("$PY" -c "import json,sys; d=json.load(open(sys.argv[1]))['models']['stories260k'][int(sys.argv[2])]; print(' '.join(map(str,d['greedy_ids'][:$N])))" "$exp" $i)
    on=$(gen "$SY_SHARED_DIR/models/stories260k" auto --prompt-ids "$ids")
    off=$(gen "$SY_SHARED_DIR/models/stories260k" off --prompt-ids "$ids")
    if [ -n "$on" ] && [ "$on" = "$want" ] && [ "$off" = "$want" ]; then ok "stories260k prompt $i: auto = off = expected"; else
        bad "stories260k prompt $i: auto [$on] off [$off] expected [$want]"; fi
done

echo "test_device_sampling.sh: $pass ok, $fail failed"
[ $fail -eq 0 ]
