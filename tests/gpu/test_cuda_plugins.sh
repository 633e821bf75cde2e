#!/bin/sh
# The CUDA plugins (built when configure finds nvcc): every one must dlopen
# and probe without a driver, `switchyard plugins` must list each with its
# reason (or a score on a GPU machine) and keep `auto` on the CPU plugins
# when there is no GPU; and every kernel must fit its architecture's shared
# memory (tools/check-cuda-smem.sh on the nvcc resource reports).
set -u
: "${SY_BUILDDIR:?SY_BUILDDIR must point at the build tree (make check sets it)}"
: "${SY_SRCDIR:?SY_SRCDIR must point at the source tree (make check sets it)}"
: "${SY_PLUGIN_DIR:?SY_PLUGIN_DIR must point at build-plugins (make check sets it)}"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0

"$SY_BUILDDIR/switchyard" plugins --plugin-dir "$SY_PLUGIN_DIR" >"$tmp/out" 2>&1
rc=$?
[ $rc -eq 0 ] || { echo "FAIL: switchyard plugins exited $rc"; cat "$tmp/out"; fail=1; }
gpu=no
[ -e /dev/nvidiactl ] && gpu=yes
for p in "device cuda" "attn cuda-sm80" "attn cuda-sm90" "attn cuda-sm120" "moe cuda" "comm nccl" "comm cuda-p2p"; do
    kind=${p% *}
    name=${p#* }
    line=$(grep -E "^$kind +$name +" "$tmp/out")
    if [ -z "$line" ]; then
        echo "FAIL: $kind $name not listed"
        fail=1
    elif [ $gpu = no ] && ! echo "$line" | grep -q 'cannot run: no CUDA device: cudaGetDeviceCount returned'; then
        echo "FAIL: $kind $name: expected 'cannot run: no CUDA device ...' without a GPU, found: $line"
        fail=1
    else
        echo "ok: $kind $name listed"
    fi
done
if [ $gpu = no ]; then
    # With every CUDA probe at 0, the default configuration must still resolve to the CPU plugins.
    "$SY_BUILDDIR/switchyard" plugins --plugin-dir "$SY_PLUGIN_DIR" --set device.plugin=auto --set attention.plugin=auto \
        >"$tmp/sel" 2>&1 || { echo "FAIL: auto selection failed"; cat "$tmp/sel"; fail=1; }
    grep -q '\[device\] *plugin = auto -> device cpu' "$tmp/sel" || { echo "FAIL: auto device is not cpu:"; cat "$tmp/sel"; fail=1; }
    grep -q '\[attention\] *plugin = auto -> attn cpu ' "$tmp/sel" || { echo "FAIL: auto attn is not cpu:"; cat "$tmp/sel"; fail=1; }
fi

"$SY_SRCDIR/tools/check-cuda-smem.sh" "$SY_BUILDDIR" >"$tmp/smem" 2>&1 || { echo "FAIL: shared memory check:"; cat "$tmp/smem"; fail=1; }
tail -1 "$tmp/smem"
for k in k_attend k_rmsnorm k_grouped_gemm k_mma_gemm k_wgmma_gemm k_sum; do
    grep -q "$k" "$tmp/smem" || { echo "FAIL: kernel $k missing from the shared memory report"; fail=1; }
done
# moe cuda's tensor-core tiles: mma.sync within SM120's limit as sm_120 code, wgmma as sm_90a code (its only target).
grep -Eq '^sm_120 .* ok +_Z[0-9]+k_mma_gemm' "$tmp/smem" || { echo "FAIL: no sm_120 report of k_mma_gemm within its limit"; fail=1; }
grep -Eq '^sm_90a .* ok +_Z[0-9]+k_wgmma_gemm' "$tmp/smem" || { echo "FAIL: no sm_90a report of k_wgmma_gemm within its limit"; fail=1; }
if grep -Eq '^sm_(80|90|120) .*k_wgmma_gemm' "$tmp/smem"; then
    echo "FAIL: k_wgmma_gemm compiled for a target other than sm_90a"; fail=1
fi
exit $fail
