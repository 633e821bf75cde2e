#!/bin/sh
# Checks that every CUDA kernel fits the shared memory of the architecture
# it was compiled for: ptxas's static shared memory per kernel (from the
# .res reports the nvcc rule in plugins/common/cuda/cuda.mk writes beside
# each object) plus the object's declared dynamic shared memory (its
# SY_SMEM_QUERY line) must not exceed the per-block opt-in limit. That line
# may name other amounts for some kernels after the object's:
#   sy_dyn_smem EXPR; NAME: EXPR2; ...   (kernels whose name holds NAME get EXPR2)
# The limits:
#   sm_80 166912 bytes (163 KB), sm_90 and sm_90a 232448 (227 KB), sm_120 and sm_120a 101376 (99 KB).
# Usage: check-cuda-smem.sh [BUILDDIR]   (default $SY_BUILDDIR, else .)
# Prints one line per kernel and architecture; exit 1 when one is over or
# when no report is found (a build without the CUDA plugins cannot pass).
set -u
dir=${1:-${SY_BUILDDIR:-.}}
reports=$(find "$dir/plugins" -name '*.res' 2>/dev/null | sort)
if [ -z "$reports" ]; then
    echo "check-cuda-smem: no nvcc resource reports (*.res) under $dir/plugins; build the CUDA plugins first" >&2
    exit 1
fi
status=0
n=0
for r in $reports; do
    line=$(sed -n 's/^sy_dyn_smem //p' "$r")
    expr=${line%%;*}
    # "NAME=BYTES ..." for the per-kernel amounts after the first ';'.
    kern=""
    rest=""
    [ "$expr" != "$line" ] && rest=${line#*;}
    bad=""
    case $expr in *[!0-9\ \(\)\*+-]*|'') bad=$expr ;; esac
    while [ -n "$rest" ] && [ -z "$bad" ]; do
        item=${rest%%;*}
        if [ "$item" = "$rest" ]; then rest=""; else rest=${rest#*;}; fi
        name=$(echo "${item%%:*}" | tr -d ' ')
        kexpr=${item#*:}
        case $name in ''|*[!A-Za-z0-9_]*) bad=$item; break ;; esac
        case $kexpr in "$item"|*[!0-9\ \(\)\*+-]*|'') bad=$item; break ;; esac
        # shellcheck disable=SC2004 # kexpr holds an expression, not a number: it must expand first
        kern="$kern $name=$(( $kexpr ))"
    done
    if [ -n "$bad" ]; then
        echo "check-cuda-smem: $r: dynamic shared memory '$bad' is not an integer expression (or NAME: expression)" >&2
        status=1
        continue
    fi
    # shellcheck disable=SC2004 # expr holds an expression, not a number: it must expand first
    dyn=$(( $expr ))
    # ptxas -v: "Compiling entry function 'NAME' for 'sm_NN'" ... "Used R registers, ... S bytes smem".
    out=$(awk -v dyn0="$dyn" -v kern="$kern" -v obj="$r" '
        BEGIN { nk = split(kern, kv, " ") }
        /Compiling entry function/ {
            fn = $0; sub(/.*function \047/, "", fn); sub(/\047.*/, "", fn)
            arch = $0; sub(/.*for \047/, "", arch); sub(/\047.*/, "", arch)
        }
        /Used [0-9]+ registers/ && fn != "" {
            smem = 0
            if (match($0, /[0-9]+ bytes smem/)) smem = substr($0, RSTART, RLENGTH) + 0
            dyn = dyn0
            for (i = 1; i <= nk; i++) {
                eq = index(kv[i], "=")
                if (index(fn, substr(kv[i], 1, eq - 1)) > 0) dyn = substr(kv[i], eq + 1) + 0
            }
            lim = arch == "sm_80" ? 166912 : arch == "sm_90" || arch == "sm_90a" ? 232448 : arch == "sm_120" || arch == "sm_120a" ? 101376 : 0
            total = smem + dyn
            verdict = lim == 0 ? "UNKNOWN-ARCH" : total > lim ? "OVER" : "ok"
            printf "%-7s %8d + %8d = %8d / %8d  %-4s %s (%s)\n", arch, smem, dyn, total, lim, verdict, fn, obj
            fn = ""
        }' "$r")
    if [ -z "$out" ]; then
        echo "check-cuda-smem: $r holds no ptxas kernel report" >&2
        status=1
        continue
    fi
    echo "$out"
    n=$((n + $(echo "$out" | wc -l)))
    if echo "$out" | grep -q -e ' OVER ' -e 'UNKNOWN-ARCH'; then
        status=1
    fi
done
echo "check-cuda-smem: $n kernel/architecture pairs checked (static + dynamic <= limit)"
[ $status -eq 0 ] || echo "check-cuda-smem: FAILED: see OVER/UNKNOWN-ARCH lines above" >&2
exit $status
