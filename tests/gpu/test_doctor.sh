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

# --tp N: which GPU each local rank would use, and whether N ranks can run here.
"$sy" doctor --plugin-dir "$SY_PLUGIN_DIR" --tp 2 >"$tmp/out" 2>"$tmp/err"
rc=$?
check "--tp 2: a line for rank 1" '^  rank 1 ' "$tmp/out"
if [ $have_gpu = no ]; then
    [ $rc -eq 3 ] || { echo "FAIL: --tp 2 without a GPU (the CPU serves): expected exit 3, found $rc"; fail=1; }
    check "--tp 2 on the CPU: rank 1 on the cores" '^  rank 1   the host.s cores: device cpu, attention cpu' "$tmp/out"
    check "--tp 2 on the CPU would run" '^--tp 2 would run here' "$tmp/out"
    # Device cuda named, and no GPU: doctor must say plainly that --tp 2 cannot run.
    if [ -f "$SY_PLUGIN_DIR/sy-device-cuda.so" ]; then
        "$sy" doctor --plugin-dir "$SY_PLUGIN_DIR" --tp 2 --set device.plugin=cuda >"$tmp/out" 2>"$tmp/err"
        rc=$?
        [ $rc -eq 4 ] || { echo "FAIL: --tp 2 with device cuda and no GPU: expected exit 4, found $rc"; fail=1; }
        check "device cuda without a GPU, rank 1" '^  rank 1   device cuda cannot run: .*no CUDA device' "$tmp/out"
        check "device cuda without a GPU: verdict" \
            'verdict: --tp 2 cannot run here with this configuration; no usable NVIDIA GPU (exit 4)' "$tmp/out"
    fi
else
    n=$(grep -c '^  [0-9][0-9]* ' "$tmp/out")
    check "--tp 2: rank 0 on GPU 0" '^  rank 0   GPU 0 (' "$tmp/out"
    if [ "$n" -ge 2 ]; then
        [ $rc -eq 0 ] || { echo "FAIL: --tp 2 with $n GPUs: expected exit 0, found $rc"; fail=1; }
        check "--tp 2: rank 1 on GPU 1" '^  rank 1   GPU 1 (' "$tmp/out"
    else
        [ $rc -eq 4 ] || { echo "FAIL: --tp 2 with one GPU: expected exit 4, found $rc"; fail=1; }
        check "--tp 2 on one GPU: rank 1 has none" '^  rank 1   GPU 1: NONE (1 visible)' "$tmp/out"
        check "--tp 2 on one GPU cannot run" 'CANNOT RUN: 2 ranks but 1 GPU visible' "$tmp/out"
    fi
fi
if [ -s "$tmp/err" ]; then echo "FAIL: doctor --tp 2 wrote to stderr:"; cat "$tmp/err"; fail=1; fi

# The rank -> GPU rule with a pretend GPU family (tests/plugins/sytest_gpu.c: a device plugin with a gpu key,
# -1 = the local rank), which runs without a GPU: rank r on GPU r, and a pinned gpu shared by every rank refused.
if [ -n "${SY_TEST_PLUGIN_DIR:-}" ] && [ -f "$SY_TEST_PLUGIN_DIR/sytest-gpudev.so" ]; then
    SYTEST_PROBE=1 "$sy" doctor --plugin-dir "$SY_PLUGIN_DIR" --plugin-dir "$SY_TEST_PLUGIN_DIR" --tp 3 \
        --set device.plugin=sytest-gpudev >"$tmp/out" 2>"$tmp/err"
    for r in 0 1 2; do check "pretend GPUs: rank $r on GPU $r" "^  rank $r   GPU $r: device sytest-gpudev" "$tmp/out"; done
    SYTEST_PROBE=1 "$sy" doctor --plugin-dir "$SY_PLUGIN_DIR" --plugin-dir "$SY_TEST_PLUGIN_DIR" --tp 2 \
        --set device.plugin=sytest-gpudev --set device.gpu=1 >"$tmp/out" 2>"$tmp/err"
    rc=$?
    [ $rc -eq 4 ] || { echo "FAIL: two ranks pinned to one GPU: expected exit 4, found $rc"; fail=1; }
    check "pinned: rank 0 on GPU 1" '^  rank 0   GPU 1: device sytest-gpudev' "$tmp/out"
    check "pinned: refused" 'CANNOT RUN: \[device\] gpu = 1 puts every rank on one GPU' "$tmp/out"
else
    echo "FAIL: the test plugins are missing (SY_TEST_PLUGIN_DIR=${SY_TEST_PLUGIN_DIR:-unset})"; fail=1
fi

# Bad usage is exit 2, with the reason on stderr.
"$sy" doctor --no-such-option >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 2 ] || { echo "FAIL: an unknown option should exit 2, found $rc"; fail=1; }
check "unknown option named" 'unknown option "--no-such-option"' "$tmp/err"
"$sy" doctor --tp 0 >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 2 ] || { echo "FAIL: --tp 0 should exit 2, found $rc"; fail=1; }
check "--tp 0 refused" '\-\-tp' "$tmp/err"
exit $fail
