#!/bin/sh
# `switchyard plugin-check` as a plugin author uses it: every in-tree CPU
# plugin passes (each op against the float64 reference, OK rows with their
# errors); a plugin that computes the wrong thing, one whose ops all fail,
# a file that is no plugin and one of another ABI major each FAIL with a
# nonzero exit and a row saying why; --speed prints a timing row per op.
set -u
. "$(dirname "$0")/lib.sh"
: "${SY_BUILDDIR:?run through make check}"
: "${SY_PLUGIN_DIR:?run through make check}"
: "${SY_TEST_PLUGIN_DIR:?run through make check}"
sy=$SY_BUILDDIR/switchyard

passes() { # file, expected OK rows at least, then extra arguments
    f=$1
    min=$2
    shift 2
    name=$(basename "$f" .so)
    if [ ! -f "$f" ]; then
        bad "$name: $f is missing"
        return
    fi
    "$sy" plugin-check "$f" "$@" >"$tmp/out" 2>&1
    rc=$?
    n_ok=$(grep -c ' OK ' "$tmp/out")
    if [ $rc -eq 0 ] && [ "$n_ok" -ge "$min" ] && ! grep -q ' FAIL ' "$tmp/out"; then
        ok "$name passes: $(tail -n 1 "$tmp/out" | sed 's/.*: //')"
    else
        bad "$name: exit $rc, $n_ok OK rows (want >= $min): $(cat "$tmp/out")"
    fi
}
# descriptor, keys, probe, create + the kind's cases
passes "$SY_PLUGIN_DIR/sy-device-cpu.so" 31 # 23 + the four argmax rows + the four sample rows
passes "$SY_PLUGIN_DIR/sy-attn-cpu.so" 10
passes "$SY_PLUGIN_DIR/sy-attn-cpu-ref.so" 10
passes "$SY_PLUGIN_DIR/sy-moe-cpu.so" 16 # 14 + the two set_expert_range rows
passes "$SY_PLUGIN_DIR/sy-comm-local.so" 10
passes "$SY_PLUGIN_DIR/sy-comm-shm.so" 10
passes "$SY_PLUGIN_DIR/sy-comm-tcp.so" 10
passes "$SY_PLUGIN_DIR/sy-frontend-http.so" 5 --set listen=127.0.0.1:0

# The rows say what was compared and how closely.
"$sy" plugin-check "$SY_PLUGIN_DIR/sy-device-cpu.so" >"$tmp/dev.out" 2>&1
if grep -Eq '^device +linear +bf16 n=7 k=96 m=130 \+bias +OK +[0-9.]+e-[0-9]+ +2e-02' "$tmp/dev.out"; then
    ok "a device row names the op, dtype, shape, error and tolerance"
else
    bad "device rows: $(cat "$tmp/dev.out")"
fi
# The greedy pick on the device against the host loop: planted ties, NaN, +-0, +-inf, long rows split over workers.
if [ "$(grep -Ec '^device +argmax .* OK ' "$tmp/dev.out")" -eq 4 ]; then
    ok "device argmax: 4 cases agree with the host rule"
else
    bad "device argmax rows: $(grep argmax "$tmp/dev.out")"
fi
# The sampled draw on the device against the host sampler's (sy_sample_pick): the same rows, per-row parameters.
if [ "$(grep -Ec '^device +sample .* OK ' "$tmp/dev.out")" -eq 4 ]; then
    ok "device sample: 4 cases agree with the host draw"
else
    bad "device sample rows: $(grep sample "$tmp/dev.out")"
fi

fails() { # label, expected text, file, then extra arguments
    label=$1
    want=$2
    f=$3
    shift 3
    "$sy" plugin-check "$f" "$@" >"$tmp/out" 2>&1
    rc=$?
    if [ $rc -eq 1 ] && grep -q ' FAIL ' "$tmp/out" && grep -qF "$want" "$tmp/out"; then
        ok "$label: FAIL, exit 1"
    else
        bad "$label: exit $rc, expected a FAIL row with \"$want\": $(cat "$tmp/out")"
    fi
}
SYSDK_PROBE=1
export SYSDK_PROBE
fails "moe plugin with wrong results" "wrong results" "$SY_TEST_PLUGIN_DIR/sysdk-wrongmoe.so"
grep -Eq '^moe +forward +softmax: 1 tok.* FAIL +[0-9.]+e[-+][0-9]+ +1e-04 +wrong results' "$tmp/out" ||
    bad "the wrong moe's row lacks its error and tolerance: $(cat "$tmp/out")"
fails "attn plugin whose ops fail" "prepare returned -5 (internal error): sysdk-fail: prepare fails on purpose" \
    "$SY_TEST_PLUGIN_DIR/sysdk-fail.so"
fails "attn plugin whose forward fails" "forward returned -5 (internal error): sysdk-fail: forward fails on purpose" \
    "$SY_TEST_PLUGIN_DIR/sysdk-fail.so" --set fail_from=forward
printf 'int helper(void);\nint helper(void) { return 1; }\n' >"$tmp/helper.c"
${CC:-cc} -shared -fPIC "$tmp/helper.c" -o "$tmp/libhelper.so" || bad "cannot build a helper library"
fails "a library that is no plugin" "not a switchyard plugin: no symbol sy_plugin_v1" "$tmp/libhelper.so"
fails "ABI major 2" "plugin ABI 2.x (it exports sy_plugin_v2), this switchyard speaks 1." \
    "$SY_TEST_PLUGIN_DIR/sytest-abi2.so"
fails "a plugin that cannot run here" "runs only under test_loader" "$SY_TEST_PLUGIN_DIR/sytest-low.so"
fails "an unknown key" 'unknown key "colour" in [attention]' "$SY_PLUGIN_DIR/sy-attn-cpu.so" --set colour=red

# --speed: one timing row per op and case.
if "$sy" plugin-check --speed --time 0 "$SY_PLUGIN_DIR/sy-device-cpu.so" >"$tmp/speed.out" 2>&1 &&
    [ "$(grep -c ' us/run ' "$tmp/speed.out")" -ge 7 ] &&
    grep -Eq '^device +linear +bf16 n=1 k=2048 m=2048 +[0-9.]+ us/run +[0-9]+ runs +[0-9.]+ GB/s' "$tmp/speed.out"; then
    ok "--speed: a timing row per op"
else
    bad "--speed: $(cat "$tmp/speed.out")"
fi
# Batched linears say how far from the path's peak they are (measured on x86-64, else the clock in /proc/cpuinfo).
if [ "$(uname -m)" = x86_64 ] || grep -q '^cpu MHz' /proc/cpuinfo 2>/dev/null; then
    if grep -Eq '^device +linear +bf16 n=32 k=2048 m=2048 .* [0-9.]+ GFLOP/s of [0-9]+ peak \(f32-[a-z0-9]+\)$' \
        "$tmp/speed.out"; then
        ok "--speed: GFLOP/s of the path's peak"
    else
        bad "--speed: no 'GFLOP/s of N peak (path)' on the n=32 linear: $(grep 'n=32' "$tmp/speed.out")"
    fi
    # So do the moe plugin's batched forwards, against its expert GEMMs' path on the pool's workers.
    "$sy" plugin-check --speed --time 0 --pool "$SY_PLUGIN_DIR/sy-device-cpu.so" "$SY_PLUGIN_DIR/sy-moe-cpu.so" \
        >"$tmp/moespeed.out" 2>&1
    if grep -Eq '^moe +forward +softmax bf16: 128 tok, .* GFLOP/s of [0-9]+ peak \(f32-[a-z0-9]+\)$' "$tmp/moespeed.out"
    then
        ok "--speed: moe forward GFLOP/s of the experts' path's peak"
    else
        bad "--speed: no 'GFLOP/s of N peak (path)' on the 128-token moe forward: $(cat "$tmp/moespeed.out")"
    fi
fi

# Bad usage is exit 2.
"$sy" plugin-check >/dev/null 2>&1
[ $? -eq 2 ] && ok "no file: exit 2" || bad "no file: not exit 2"

finish
