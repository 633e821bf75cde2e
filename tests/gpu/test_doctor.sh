#!/bin/sh
# `switchyard doctor`: on a machine without an NVIDIA driver (the CI
# machines) it must say so, name the CPU plugins `auto` picks and exit 3;
# with a driver and a GPU it must list the GPU and exit 0. Which case
# applies is decided here independently of doctor: /dev/nvidiactl and a
# loadable libcuda.so.1.
set -u
: "${SY_BUILDDIR:?SY_BUILDDIR must point at the build tree (make check sets it)}"
: "${SY_PLUGIN_DIR:?SY_PLUGIN_DIR must point at build-plugins (make check sets it)}"
sy="$SY_BUILDDIR/switchyard"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # check DESCRIPTION PATTERN FILE
    if grep -q -e "$2" "$3"; then echo "ok: $1"; else echo "FAIL: $1: no line matching '$2' in:"; cat "$3"; fail=1; fi
}

"$sy" doctor --plugin-dir "$SY_PLUGIN_DIR" >"$tmp/out" 2>"$tmp/err"
rc=$?
have_gpu=no
if [ -e /dev/nvidiactl ] && { ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1'; }; then
    have_gpu=yes
fi
echo "doctor exit $rc; a driver and device node present: $have_gpu"
if [ $have_gpu = no ]; then
    [ $rc -eq 3 ] || { echo "FAIL: expected exit 3 (no usable GPU), found $rc"; fail=1; }
    check "names the missing driver" 'no NVIDIA driver/GPU found' "$tmp/out"
    check "auto picks the cpu device" 'device   auto picks cpu' "$tmp/out"
    check "auto picks the cpu attention" 'attn     auto picks cpu' "$tmp/out"
    check "verdict" 'verdict: no usable NVIDIA GPU' "$tmp/out"
else
    [ $rc -eq 0 ] || { echo "FAIL: expected exit 0 (a usable GPU), found $rc"; fail=1; }
    check "lists the GPUs" '^GPUs:' "$tmp/out"
    check "verdict" 'NVIDIA GPUs* usable' "$tmp/out"
fi
check "driver section" 'NVIDIA driver and CUDA runtime:' "$tmp/out"
if [ -s "$tmp/err" ]; then echo "FAIL: doctor wrote to stderr:"; cat "$tmp/err"; fail=1; fi

# Bad usage is exit 2, with the reason on stderr.
"$sy" doctor --no-such-option >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 2 ] || { echo "FAIL: an unknown option should exit 2, found $rc"; fail=1; }
check "unknown option named" 'unknown option "--no-such-option"' "$tmp/err"
exit $fail
