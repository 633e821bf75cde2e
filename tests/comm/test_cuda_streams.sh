#!/bin/sh
# Every CUDA plugin queues its work on the calling thread's per-thread
# default stream (plugins/common/cuda/sycuda.h): a step's kernels, copies
# and collectives are then ordered explicitly, and device cuda's graph ops
# can record them. A .c file built without SY_CUDA_CPPFLAGS
# (CUDA_API_PER_THREAD_DEFAULT_STREAM), or a .cu built without
# --default-stream per-thread, calls the legacy-stream entry points of the
# CUDA runtime (cudaMemcpy instead of cudaMemcpy_ptds, cudaEventRecord
# instead of cudaEventRecord_ptsz, ...): this finds such calls in the built
# plugins' imports, without a GPU. The runtime's own exports say which
# functions have per-thread variants. (The stream handed to NCCL is not an
# import: comm_nccl.c passes its own stream, joined by events.)
set -u
: "${SY_PLUGIN_DIR:?run through make check}"
for tool in nm ldd; do
    command -v "$tool" >/dev/null || { echo "FAIL: $tool not found (binutils, libc-bin)"; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
n=0
for so in "$SY_PLUGIN_DIR"/*.so; do
    [ -f "$so" ] || continue
    cudart=$(ldd "$so" 2>/dev/null | sed -n 's/^[[:space:]]*libcudart\.so[^ ]* => \([^ ]*\) .*/\1/p' | head -1)
    [ -n "$cudart" ] || continue
    n=$((n + 1))
    # Functions with a per-thread variant: NAME_ptds / NAME_ptsz exported beside NAME.
    nm -D --defined-only "$cudart" | awk '{print $3}' | sed -n 's/@.*//; s/_pt[sd][zs]$//p' | sort -u >"$tmp/variants"
    if [ ! -s "$tmp/variants" ]; then
        echo "FAIL: $cudart exports no _ptds/_ptsz functions: cannot tell the per-thread entry points"
        exit 1
    fi
    legacy=$(nm -D --undefined-only "$so" | awk '{print $2}' | sed 's/@.*//' | grep -x -F -f "$tmp/variants" |
        tr '\n' ' ')
    name=$(basename "$so")
    if [ -z "$legacy" ]; then
        pass=$((pass + 1))
        echo "ok   $name: every stream-taking runtime call is the per-thread one"
    else
        fail=$((fail + 1))
        echo "FAIL $name calls the legacy default stream's entry points: $legacy(build its .c with" \
            "SY_CUDA_CPPFLAGS, its .cu with SY_NVCC_FLAGS)"
    fi
done
if [ "$n" = 0 ]; then
    echo "SKIP: no plugin in $SY_PLUGIN_DIR links libcudart (configure found no CUDA)"
    exit 77
fi
echo "test_cuda_streams: $pass passed, $fail failed"
[ $fail -eq 0 ]
