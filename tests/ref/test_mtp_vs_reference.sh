#!/bin/sh
# The engine's MTP layer ([speculative] method = mtp) against the float64
# numpy reference, logit by logit, on sy-mkmodel's DeepSeek-V3 (MLA, its own
# MTP embedding), GLM-4.5 (GQA with partial RoPE, q/k/v biases, q/k norm; the
# model's embedding) and GLM-5 (MLA + the MTP layer's own DSA indexer, whose
# 6 kept positions are fewer than a sequence reaches) presets: every position
# of two sequences after a real prefill of the target (one extended in two MTP
# steps), then 3 chained steps on the MTP's own hidden state and picks
# (tests/ref/mtp_dump.c). transformers has no MTP layers: reference.py is the
# oracle. Tolerance as test_engine_vs_reference.sh's: 1e-4 on logits of std ~3.
set -u
: "${SY_BUILDDIR:?run through make check}" "${SY_SRCDIR:?run through make check}"
PY=${PYTHON_NUMPY:-/usr/bin/python3}
if ! "$PY" -c 'import numpy' 2>/dev/null; then
    echo "FAIL: no python3 with numpy ($PY); install python3-numpy or set PYTHON_NUMPY" >&2
    exit 1
fi
TOL=1e-4
K=3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
n=0
# name | sy-mkmodel arguments | ids of A | ids of B
cases='
deepseek-v3|--preset test-deepseek-v3 --seed 19|5,17,300,42,7,99,1,2,3,4,5,6,7|11,12,13,14
glm4-moe|--preset test-glm4-moe --seed 21|100,200,300,4,5,6,7,8,9,10|9,8,7
glm5|--preset test-glm5 --seed 22|5,17,300,42,7,99,1,2,3,4,8,9,10,11|21,22,23,24,25
'
IFS='
'
for line in $cases; do
    [ -n "$line" ] || continue
    name=$(echo "$line" | cut -d'|' -f1)
    args=$(echo "$line" | cut -d'|' -f2)
    ida=$(echo "$line" | cut -d'|' -f3)
    idb=$(echo "$line" | cut -d'|' -f4)
    n=$((n + 1))
    dir="$tmp/$name"
    # shellcheck disable=SC2086
    if ! (IFS=' '; "$SY_BUILDDIR/sy-mkmodel" $args --quiet --out "$dir") >"$tmp/mk.log" 2>&1; then
        echo "FAIL $name: sy-mkmodel: $(cat "$tmp/mk.log")"
        fails=$((fails + 1))
        continue
    fi
    if ! "$SY_BUILDDIR/tests/ref/mtp_dump" "$dir" "$ida" "$idb" "$tmp/a.f32" "$tmp/b.f32" $K >"$tmp/out.txt" \
        2>"$tmp/err.txt"; then
        echo "FAIL $name: mtp_dump: $(cat "$tmp/err.txt")"
        fails=$((fails + 1))
        continue
    fi
    # The exact comparison needs the suite's pin (SWITCHYARD_SET, matmul = f32); a program that skips it
    # runs the default, bf16 on an AVX512-BF16 or AMX CPU, and fails only there. Its start-up line says so
    # on every CPU ("matmul = auto: ...").
    if grep -q 'matmul = auto' "$tmp/err.txt"; then
        echo "FAIL $name: mtp_dump did not apply SWITCHYARD_SET=\"${SWITCHYARD_SET:-}\": $(grep -m1 'matmul = auto' "$tmp/err.txt")"
        fails=$((fails + 1))
        continue
    fi
    ok=1
    for s in a b; do
        if [ $s = a ]; then ids=$ida; tag=A; else ids=$idb; tag=B; fi
        chain=$(sed -n "s/^chain $tag: //p" "$tmp/out.txt")
        if ! "$PY" "$SY_SRCDIR/tests/ref/reference.py" "$dir" --ids "$ids" --mtp-check "$tmp/$s.f32" \
            --mtp-chain "$chain" --tol $TOL >"$tmp/check.txt" 2>&1; then
            echo "FAIL $name (sequence $tag): MTP logits differ from the numpy reference:"
            cat "$tmp/check.txt"
            ok=0
        fi
    done
    if [ $ok = 1 ]; then
        echo "ok   $name: $(tail -1 "$tmp/check.txt")"
    else
        fails=$((fails + 1))
    fi
done
echo "$((n - fails)) passed, $fails failed"
[ $fails -eq 0 ]
