#!/bin/sh
# GLM-5's DSA indexer really changes what attention sees: the engine's
# logits on a test-glm5 checkpoint (6 positions kept per query, sequences of
# 34) must match the numpy reference of that checkpoint, and must NOT match
# the reference of the same weights with index_topk 4096 (dense attention).
# DeepSeek-V3.2's indexer rotates halves where GLM-5's interleaves: the
# engine's test-deepseek-v32 logits match its reference, and not the
# reference of the same checkpoint read as GLM-5 (interleaved indexer RoPE).
set -u
: "${SY_BUILDDIR:?run through make check}" "${SY_SRCDIR:?run through make check}"
PY=${PYTHON_NUMPY:-/usr/bin/python3}
"$PY" -c 'import numpy' 2>/dev/null || { echo "FAIL: no python3 with numpy ($PY)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ids=5,17,300,42,7,99,1,2,3,4
"$SY_BUILDDIR/sy-mkmodel" --preset test-glm5 --seed 31 --quiet --out "$tmp/sparse" || { echo "FAIL: sy-mkmodel"; exit 1; }
"$SY_BUILDDIR/switchyard" generate -q -c "$SY_BUILDDIR/etc/switchyard-build.ini" --model "$tmp/sparse" \
    --prompt-ids $ids -n 24 --ignore-eos --print-ids --logits-out "$tmp/logits.f32" >/dev/null 2>"$tmp/err" ||
    { echo "FAIL: switchyard generate: $(cat "$tmp/err")"; exit 1; }
gen=$(sed -n 's/^generated_ids: //p' "$tmp/err" | tr ' ' ',')
cp -r "$tmp/sparse" "$tmp/dense"
"$PY" -c "import json,sys; p=sys.argv[1]; c=json.load(open(p)); c['index_topk'] = 4096; json.dump(c, open(p, 'w'))" \
    "$tmp/dense/config.json"
fails=0
if "$PY" "$SY_SRCDIR/tests/ref/reference.py" "$tmp/sparse" --ids "$ids,$gen" --check-logits "$tmp/logits.f32" \
    --tol 1e-4 >"$tmp/sparse.txt" 2>&1; then
    echo "ok   index_topk 6: $(tail -1 "$tmp/sparse.txt")"
else
    echo "FAIL: the engine differs from the reference with the indexer:"
    cat "$tmp/sparse.txt"
    fails=$((fails + 1))
fi
"$PY" "$SY_SRCDIR/tests/ref/reference.py" "$tmp/dense" --ids "$ids,$gen" --check-logits "$tmp/logits.f32" \
    --tol 1e-2 >"$tmp/dense.txt" 2>&1
rc=$?
if [ $rc -eq 1 ]; then
    echo "ok   the same weights with dense attention give other logits: $(tail -1 "$tmp/dense.txt")"
else
    echo "FAIL: dense attention (index_topk 4096) matched the sparse engine run within 1e-2 (exit $rc): the indexer" \
        "selected nothing"
    tail -3 "$tmp/dense.txt"
    fails=$((fails + 1))
fi

"$SY_BUILDDIR/sy-mkmodel" --preset test-deepseek-v32 --seed 32 --quiet --out "$tmp/v32" ||
    { echo "FAIL: sy-mkmodel"; exit 1; }
"$SY_BUILDDIR/switchyard" generate -q -c "$SY_BUILDDIR/etc/switchyard-build.ini" --model "$tmp/v32" \
    --prompt-ids $ids -n 24 --ignore-eos --print-ids --logits-out "$tmp/v32.f32" >/dev/null 2>"$tmp/err" ||
    { echo "FAIL: switchyard generate: $(cat "$tmp/err")"; exit 1; }
gen=$(sed -n 's/^generated_ids: //p' "$tmp/err" | tr ' ' ',')
cp -r "$tmp/v32" "$tmp/v32-as-glm5"
"$PY" -c "import json,sys; p=sys.argv[1]; c=json.load(open(p)); c['model_type'] = 'glm_moe_dsa'; \
c['architectures'] = ['GlmMoeDsaForCausalLM']; json.dump(c, open(p, 'w'))" "$tmp/v32-as-glm5/config.json"
if "$PY" "$SY_SRCDIR/tests/ref/reference.py" "$tmp/v32" --ids "$ids,$gen" --check-logits "$tmp/v32.f32" \
    --tol 1e-4 >"$tmp/v32.txt" 2>&1; then
    echo "ok   deepseek_v32: $(tail -1 "$tmp/v32.txt")"
else
    echo "FAIL: deepseek_v32: the engine differs from the reference:"
    cat "$tmp/v32.txt"
    fails=$((fails + 1))
fi
"$PY" "$SY_SRCDIR/tests/ref/reference.py" "$tmp/v32-as-glm5" --ids "$ids,$gen" --check-logits "$tmp/v32.f32" \
    --tol 1e-2 >"$tmp/v32-as-glm5.txt" 2>&1
rc=$?
if [ $rc -eq 1 ]; then
    echo "ok   the same weights with GLM-5's interleaved indexer RoPE give other logits:" \
        "$(tail -1 "$tmp/v32-as-glm5.txt")"
else
    echo "FAIL: the deepseek_v32 engine run matched the interleaved-indexer reference within 1e-2 (exit $rc): the" \
        "half-split RoPE is not exercised"
    tail -3 "$tmp/v32-as-glm5.txt"
    fails=$((fails + 1))
fi
[ $fails -eq 0 ]
