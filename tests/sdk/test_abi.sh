#!/bin/sh
# The ABI promises, through the real engine:
#  - a device plugin built against ABI 1.0 before linear_multi was appended
#    (sysdk-olddev: its op table is its own smaller struct, struct_size to
#    match) loads, and generate gives the in-tree cpu device's tokens: the
#    core never reads past the table (ASan builds would report it);
#  - another ABI major, or a newer minor, is refused naming the file and both
#    versions;
#  - an attention plugin whose every op fails (sysdk-fail) cannot crash the
#    core: generate and serve stop with its message and a nonzero exit.
set -u
. "$(dirname "$0")/lib.sh"
: "${SY_BUILDDIR:?run through make check}"
: "${SY_PLUGIN_DIR:?run through make check}"
: "${SY_TEST_PLUGIN_DIR:?run through make check}"
need_shared
sy=$SY_BUILDDIR/switchyard
model=$SY_SHARED_DIR/models/stories260k
sed '/^\[frontend:api\]/,$d' "$SY_BUILDDIR/etc/switchyard-build.ini" >"$tmp/base.ini"
SYSDK_PROBE=1
export SYSDK_PROBE

gen() { # out-prefix, then extra arguments
    o=$1
    shift
    "$sy" generate -q -c "$tmp/base.ini" --model "$model" --prompt "Once upon a time" -n 16 --ignore-eos \
        --print-ids --plugin-dir "$SY_TEST_PLUGIN_DIR" "$@" >"$o.txt" 2>"$o.err"
}

# 1. An older minor's smaller device table.
gen "$tmp/cpu" || bad "generate on device cpu: $(cat "$tmp/cpu.err")"
if gen "$tmp/old" --set device.plugin=sysdk-olddev --set "device.inner=$SY_PLUGIN_DIR/sy-device-cpu.so" &&
    [ -n "$(ids_of "$tmp/cpu.err")" ] && [ "$(ids_of "$tmp/old.err")" = "$(ids_of "$tmp/cpu.err")" ]; then
    ok "device table without linear_multi (ABI 1.0 as first shipped): loads, same 16 tokens"
else
    bad "old device table: $(ids_of "$tmp/old.err") vs $(ids_of "$tmp/cpu.err"): $(cat "$tmp/old.err")"
fi
"$sy" plugin-check "$SY_TEST_PLUGIN_DIR/sysdk-olddev.so" --set "inner=$SY_PLUGIN_DIR/sy-device-cpu.so" >"$tmp/pc.out" 2>&1
# The host's table grows with each appended op: any size past the old table's 120 bytes.
host_size=$(sed -n 's/.*ops table 120 bytes (host \([0-9]*\)).*/\1/p' "$tmp/pc.out" | head -1)
if [ "${host_size:-0}" -gt 120 ] &&
    grep -Eq '^device +linear_multi .* SKIP .*optional op not provided' "$tmp/pc.out" &&
    grep -Eq '^device +argmax .* SKIP .*optional op not provided' "$tmp/pc.out" &&
    grep -Eq '^device +sample .* SKIP .*optional op not provided' "$tmp/pc.out" &&
    grep -q ' 0 failed' "$tmp/pc.out"; then
    ok "plugin-check: the old table's size is shown, linear_multi, argmax and sample skipped, every op OK"
else
    bad "plugin-check of the old table: $(cat "$tmp/pc.out")"
fi

# 2. Majors and minors.
"$sy" plugins --plugin-dir "$SY_TEST_PLUGIN_DIR" >"$tmp/plugins.out" 2>&1
if grep -qF "sytest-abi2.so: plugin ABI 2.x (it exports sy_plugin_v2), this switchyard speaks 1." "$tmp/plugins.out"; then
    ok "ABI major 2: refused, naming the file and both versions"
else
    bad "ABI major 2: $(grep abi2 "$tmp/plugins.out")"
fi
if grep -Eq "sytest-minor.so: plugin ABI 1\.[0-9]+ is newer than this switchyard's 1\.[0-9]+" "$tmp/plugins.out"; then
    ok "newer minor: refused, naming both versions"
else
    bad "newer minor: $(grep minor "$tmp/plugins.out")"
fi

# 3. Every op fails: a clean error and a nonzero exit, never a crash.
for from in prepare forward; do
    gen "$tmp/fail-$from" --set attention.plugin=sysdk-fail --set "attention.fail_from=$from"
    rc=$?
    if [ $rc -ne 0 ] && [ $rc -lt 128 ] && grep -q "sysdk-fail: $from fails on purpose" "$tmp/fail-$from.err"; then
        ok "generate, attention failing from $from: exit $rc with the plugin's message"
    else
        bad "generate, attention failing from $from: exit $rc: $(cat "$tmp/fail-$from.err")"
    fi
done
cat "$tmp/base.ini" >"$tmp/serve.ini"
# The http frontend on a port of the kernel's choosing: it starts before the
# model loads and must be stopped cleanly when start-up fails.
printf '[frontend:api]\nplugin = http\nlisten = 127.0.0.1:0\n' >>"$tmp/serve.ini"
"$sy" serve -q -c "$tmp/serve.ini" --model "$model" --plugin-dir "$SY_TEST_PLUGIN_DIR" \
    --set attention.plugin=sysdk-fail >"$tmp/serve.out" 2>"$tmp/serve.err"
rc=$?
if [ $rc -ne 0 ] && [ $rc -lt 128 ] && grep -q "sysdk-fail: prepare fails on purpose" "$tmp/serve.err"; then
    ok "serve, attention prepare failing: exit $rc with the plugin's message"
else
    bad "serve, attention prepare failing: exit $rc: $(cat "$tmp/serve.err")"
fi

finish
