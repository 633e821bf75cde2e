#!/bin/sh
# tools/check-cuda-smem.sh itself, on made-up ptxas reports (no CUDA
# needed): a kernel whose static + declared dynamic shared memory exceeds
# its architecture's limit must fail the check, one within it must pass, a
# build without reports must fail, and so must an unknown architecture.
set -u
: "${SY_SRCDIR:?SY_SRCDIR must point at the source tree (make check sets it)}"
check="$SY_SRCDIR/tools/check-cuda-smem.sh"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
report() { # report DIR ARCH STATIC DYN_EXPR
    mkdir -p "$1/plugins/x"
    cat >"$1/plugins/x/k.res" <<EOR
ptxas info    : Compiling entry function '_Z6kernelv' for '$2'
ptxas info    : Function properties for _Z6kernelv
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, $3 bytes smem, 360 bytes cmem[0]
sy_dyn_smem $4
EOR
}
expect() { # expect RC DESCRIPTION DIR
    "$check" "$3" >"$tmp/out" 2>&1
    rc=$?
    if [ "$rc" -eq "$1" ]; then echo "ok: $2 (exit $rc)"; else echo "FAIL: $2: exit $rc, expected $1"; cat "$tmp/out"; fail=1; fi
}
report "$tmp/fits" sm_120 1024 "(8 * (16) + 4 * (1000))"
expect 0 "sm_120 kernel within 101376 bytes" "$tmp/fits"
grep -q ' ok ' "$tmp/out" || { echo "FAIL: no ok line"; fail=1; }
report "$tmp/over" sm_120 90000 "(20000)"
expect 1 "sm_120 kernel at 110000 bytes" "$tmp/over"
grep -q ' OVER ' "$tmp/out" || { echo "FAIL: no OVER line"; fail=1; }
report "$tmp/sm90" sm_90 200000 "(30000)"
expect 0 "sm_90 kernel at 230000 bytes (limit 232448)" "$tmp/sm90"
report "$tmp/sm90a" sm_90a 200000 "(30000)"
expect 0 "sm_90a kernel (wgmma) at 230000 bytes (limit 232448)" "$tmp/sm90a"
report "$tmp/sm90a-over" sm_90a 230000 "(3000)"
expect 1 "sm_90a kernel at 233000 bytes" "$tmp/sm90a-over"
report "$tmp/sm120a" sm_120a 100000 "(1376)"
expect 0 "sm_120a kernel (block-scaled FP4 MMA) at 101376 bytes (limit 101376)" "$tmp/sm120a"
report "$tmp/sm120a-over" sm_120a 100000 "(1377)"
expect 1 "sm_120a kernel at 101377 bytes" "$tmp/sm120a-over"
report "$tmp/arch" sm_75 0 "0"
expect 1 "an architecture without a known limit" "$tmp/arch"
mkdir -p "$tmp/empty/plugins"
expect 1 "no reports at all" "$tmp/empty"
report "$tmp/expr" sm_80 0 "sizeof(float)"
expect 1 "a dynamic size that is not integer arithmetic" "$tmp/expr"
# A per-kernel amount (attn/cuda's k_attend_tc: "sy_dyn_smem EXPR; NAME: EXPR2") applies to kernels whose name
# holds NAME only: over the limit it fails even when the object's own amount fits, and the reverse.
report "$tmp/perk-over" sm_120 0 "(1000); kernel: (100000 + 2000)"
expect 1 "sm_120 kernel with its own amount of 102000 bytes" "$tmp/perk-over"
grep -q '102000 / *101376  OVER' "$tmp/out" || { echo "FAIL: the per-kernel amount was not applied"; cat "$tmp/out"; fail=1; }
report "$tmp/perk-other" sm_120 0 "(200000); other_kernel: (1000)"
expect 1 "a per-kernel amount naming another kernel leaves the object's 200000 bytes" "$tmp/perk-other"
report "$tmp/perk-fits" sm_120 0 "(200000); kernel: (90000)"
expect 0 "sm_120 kernel whose own 90000 bytes replace the object's 200000" "$tmp/perk-fits"
report "$tmp/perk-bad" sm_80 0 "(1000); kernel (2000)"
expect 1 "a per-kernel amount without NAME:" "$tmp/perk-bad"
exit $fail
