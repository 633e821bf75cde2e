#!/bin/sh
# `switchyard bench-comm` with a comm plugin that works on device memory
# runs each forked rank as the engine would: local rank = rank in the host
# table, and the device plugin opened (with the [device] keys) before the
# comm plugin, so rank r computes on GPU r. Checked with the pretend GPU
# family of tests/plugins/sytest_gpu.c, whose comm plugin refuses two ranks
# on one GPU as NCCL does (every rank took GPU 0 before).
set -u
. "${SY_SRCDIR:?run through make check}/tests/cli/lib.sh"
: "${SY_TEST_PLUGIN_DIR:?run through make check}"
: "${SY_PLUGIN_DIR:?run through make check}"
dir=$SY_TEST_PLUGIN_DIR
for so in sytest-gpudev sytest-gpucomm; do
    [ -f "$dir/$so.so" ] || { echo "FAIL: $dir/$so.so is missing (make build-test-plugins/.stamp)"; exit 1; }
done
rows_ok() { # file, min rows: every data row has #wrong 0
    awk -v min="$2" '!/^#/ && NF >= 9 { n++; if ($8 != 0) bad++ } END { exit !(n >= min && !bad) }' "$1"
}
export SYTEST_PROBE=1 SYTEST_GPU_LOG="$tmp/log"

# Three ranks, messages above the plugin's 4 KiB slot (chunked).
if timeout 120 "$sy" bench-comm --plugin sytest-gpucomm --ranks 3 --plugin-dir "$dir" --max-bytes 16K \
    --timeout 60 >"$tmp/out" 2>"$tmp/err" && rows_ok "$tmp/out" 12; then
    ok "bench-comm sytest-gpucomm, 3 ranks: every row right"
else bad "bench-comm sytest-gpucomm 3 ranks: $(cat "$tmp/err" "$tmp/out" "$tmp/log" 2>/dev/null)"; fi
if grep -q '^# device sytest-gpudev: rank 0 on GPU 0, rank 1 on GPU 1, rank 2 on GPU 2$' \
    "$tmp/out"; then
    ok "the header names each rank's GPU"
else bad "no device line in the header: $(cat "$tmp/out")"; fi
for r in 0 1 2; do
    if grep -q "^rank $r of 3: local rank $r, GPU $r\$" "$tmp/log"; then ok "rank $r: local rank $r, on GPU $r"
    else bad "rank $r: $(cat "$tmp/log" 2>/dev/null)"; fi
done
cat "$tmp/out"

# The [device] keys reach the device plugin: one GPU pinned for every rank is refused by the comm plugin.
rm -f "$tmp/log"
timeout 120 "$sy" bench-comm --plugin sytest-gpucomm --ranks 2 --plugin-dir "$dir" --max-bytes 1K --timeout 30 \
    --set device.gpu=1 >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 1 ] && grep -q 'rank 0 and rank 1 are both on GPU 1' "$tmp/err" &&
    [ "$(grep -c 'local rank [01], GPU 1$' "$tmp/log")" -eq 2 ]; then
    ok "--set device.gpu=1 pins both ranks, and two ranks on one GPU are refused"
else bad "device.gpu=1 (exit $rc): $(cat "$tmp/err" "$tmp/log" 2>/dev/null)"; fi

# A [device] plugin that does not exist is named in the error.
timeout 60 "$sy" bench-comm --plugin sytest-gpucomm --ranks 2 --plugin-dir "$dir" --max-bytes 1K --timeout 10 \
    --set device.plugin=nosuch-device >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 1 ] && grep -q 'nosuch-device' "$tmp/err" && grep -q 'works on device sytest-gpu' "$tmp/err"; then
    ok "an unknown [device] plugin is refused with its name"
else bad "device.plugin=nosuch-device (exit $rc): $(cat "$tmp/err")"; fi

# A CPU serving config ([device] plugin = cpu, with its keys): the ranks open the comm plugin's device with its
# defaults instead of failing on the cpu plugin.
rm -f "$tmp/log"
timeout 60 "$sy" bench-comm --plugin sytest-gpucomm --ranks 2 --plugin-dir "$dir" --plugin-dir "$SY_PLUGIN_DIR" \
    --max-bytes 1K --timeout 30 --set device.plugin=cpu --set device.threads=1 >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 0 ] && rows_ok "$tmp/out" 4 && grep -q 'plugin = cpu is not for device sytest-gpu; the ranks open sytest-gpudev' "$tmp/err" &&
    [ "$(grep -c 'local rank \([01]\), GPU \1$' "$tmp/log")" -eq 2 ]; then
    ok "[device] plugin = cpu: the ranks open the comm plugin's device with its defaults"
else bad "device.plugin=cpu (exit $rc): $(cat "$tmp/err" "$tmp/out" "$tmp/log" 2>/dev/null)"; fi

echo "test_bench_comm_gpu: $pass passed, $fail failed"
[ $fail -eq 0 ]
