#!/bin/sh
# `switchyard plugin-check --device DEVICE.so` (how tests/gpu/run.sh checks
# moe cuda on a GPU): a moe plugin's x, router logits and out go through
# the device plugin's alloc/upload/download. The cpu device and moe plugins
# stand in for cuda here: the same rows as without --device must pass, the
# expert-range cases included; a plugin of the wrong kind or device is
# refused with the reason; moe cuda lists its tile and tuning_dir keys (and,
# on a GPU, without --device its ops are skipped with a note naming it).
set -u
: "${SY_BUILDDIR:?run through make check}" "${SY_PLUGIN_DIR:?run through make check}"
SY="$SY_BUILDDIR/switchyard"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() { # name condition-result message
    if [ "$2" -eq 0 ]; then echo "ok   $1"; else
        echo "FAIL $1: $3"
        fails=$((fails + 1))
    fi
}
"$SY" plugin-check --device "$SY_PLUGIN_DIR/sy-device-cpu.so" "$SY_PLUGIN_DIR/sy-moe-cpu.so" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] && [ "$(grep -Ec '^moe +forward .* OK ' "$tmp/out")" -eq 21 ] &&
    [ "$(grep -Ec '^moe +forward .*expert ranges +OK ' "$tmp/out")" -eq 3 ]
check "moe cpu through the cpu device's memory: 21 forward rows OK, 3 of them expert ranges" $? \
    "exit $rc: $(cat "$tmp/out")"
"$SY" plugin-check --device "$SY_PLUGIN_DIR/sy-attn-cpu.so" "$SY_PLUGIN_DIR/sy-moe-cpu.so" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 2 ] && grep -q 'sy-attn-cpu.so is not a device plugin of device cpu' "$tmp/err"
check "--device with an attn plugin: refused, exit 2" $? "exit $rc: $(cat "$tmp/err")"
if [ -e "$SY_PLUGIN_DIR/sy-moe-cuda.so" ] && [ -e "$SY_PLUGIN_DIR/sy-device-cuda.so" ]; then
    # Its ops need a GPU (run.sh runs them with --device sy-device-cuda.so); its keys are listed anywhere.
    "$SY" plugin-check "$SY_PLUGIN_DIR/sy-moe-cuda.so" >"$tmp/out" 2>&1
    grep -Eq '^moe +keys .*max_tokens, tile, tuning_dir' "$tmp/out"
    check "moe cuda declares tile and tuning_dir" $? "$(cat "$tmp/out")"
    if grep -Eq '^moe +ops .*SKIP' "$tmp/out"; then # a GPU: without --device the ops are skipped, saying why
        grep -q 'moe plugins on another device.s with --device' "$tmp/out"
        check "moe cuda without --device: skipped, naming --device" $? "$(cat "$tmp/out")"
    fi
fi
[ $fails -eq 0 ]
