#!/bin/sh
# sy-bench-cpu on the build's small model: a short run prints its table
# (prefill and decode rows, the bandwidth bound, a --profile table), and
# bad arguments exit 2 with a message naming the option and what it found.
set -u
. "${SY_SRCDIR:?run through make check}/tests/cli/lib.sh"
bc=$SY_BUILDDIR/sy-bench-cpu
plugins=$SY_BUILDDIR/build-plugins
model=$SY_BUILDDIR/models/small

if "$bc" --plugin-dir "$plugins" --model "$model" --threads 2 --repeat 1 --prompts 8 --decode 4 --profile \
    >"$tmp/run.out" 2>"$tmp/run.err"; then
    ok "a short run exits 0"
else
    bad "a short run failed: $(cat "$tmp/run.err")"
fi
for want in "decode bound" "pp8" "tg4" "profile of decode"; do
    if grep -q "$want" "$tmp/run.out"; then ok "the run prints \"$want\""; else
        bad "no \"$want\" in: $(cat "$tmp/run.out")"; fi
done
# The profile's linear rows give GFLOP/s, prefill's measure, against the device's peak.
if grep -Eq '^\| linear[^|]* n=>1 \|[^|]*\|[^|]*\|[^|]*\|[^|]*\| [0-9.]+ \([0-9]+% of peak\) \|$' "$tmp/run.out"; then
    ok "the profile's batched linears print GFLOP/s of the peak"
else
    bad "no 'N (P% of peak)' GFLOP/s on a batched linear: $(grep '^| linear' "$tmp/run.out")"
fi
# A mixture-of-experts model's experts are a row of their own, not "outside the ops".
need_model tiny-mixtral
moe=$SY_SHARED_DIR/models/tiny-mixtral
if "$bc" --plugin-dir "$plugins" --model "$moe" --threads 2 --repeat 1 --prompts 8 --decode 4 --profile \
    >"$tmp/moe.out" 2>"$tmp/moe.err" &&
    grep -Eq '^\| moe forward \(routed experts\) \| [0-9.]+ \| [0-9.]+ \| [0-9.]+% \|  \| [0-9.]+ \([0-9]+% of peak\) \|$' \
        "$tmp/moe.out"; then
    ok "the profile times the moe forward, with its GFLOP/s"
else
    bad "no moe forward row: $(cat "$tmp/moe.out" "$tmp/moe.err")"
fi
# The experts' GFLOP/s are held against the moe plugin's own peak, not the device's: with portable expert
# kernels (no peak) the row has no share of a peak, while the device's linears keep theirs.
if "$bc" --plugin-dir "$plugins" --model "$moe" --threads 2 --repeat 1 --prompts 8 --decode 4 --profile \
    --set moe.isa=portable >"$tmp/moe2.out" 2>"$tmp/moe2.err" &&
    grep -Eq '^\| moe forward \(routed experts\) \| [0-9.]+ \| [0-9.]+ \| [0-9.]+% \|  \| [0-9.]+ \|$' "$tmp/moe2.out"; then
    ok "the moe row's GFLOP/s go against the moe plugin's peak (portable: none)"
else
    bad "moe row with moe.isa=portable: $(grep -F 'moe forward' "$tmp/moe2.out" || cat "$tmp/moe2.err")"
fi

# expect_refusal NAME WANT ARGS...: exit 2 and WANT on stderr
expect_refusal() {
    name=$1 want=$2
    shift 2
    "$bc" "$@" >"$tmp/bad.out" 2>"$tmp/bad.err"
    rc=$?
    if [ $rc -eq 2 ] && grep -qF -- "$want" "$tmp/bad.err"; then ok "$name"; else
        bad "$name: exit $rc, stderr: $(cat "$tmp/bad.err")"; fi
}
expect_refusal "--decode 1 is refused" 'option --decode expects an integer in [2, 1048576], found "1"' \
    --model "$model" --decode 1
expect_refusal "--repeat 0 is refused" 'option --repeat expects an integer in [1, 1000], found "0"' \
    --model "$model" --repeat 0
expect_refusal "--threads two is refused" 'option --threads expects an integer in [1, 1024], found "two"' \
    --model "$model" --threads two
expect_refusal "--decode 8x is refused" 'found "8x"' --model "$model" --decode 8x
expect_refusal "a missing --model is named" "--model DIR is required" --decode 8
expect_refusal "an unknown option is named" "unknown option --frob" --model "$model" --frob 1
expect_refusal "a 33rd --set is named" "found another: --set device.threads=1" --model "$model" \
    $(i=0; while [ $i -lt 33 ]; do printf -- '--set device.threads=1 '; i=$((i + 1)); done)

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
