#!/bin/sh
# MLA and the DSA indexer in continuous batches and after a copy-on-write
# fork (tests/arch/test_mla_batch.c), on DeepSeek-V3, GLM-5 and DeepSeek-V3.2 shaped
# synthetic checkpoints.
set -u
: "${SY_BUILDDIR:?run through make check}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
for preset in test-deepseek-v3 test-glm5 test-deepseek-v32; do
    if ! "$SY_BUILDDIR/sy-mkmodel" --preset "$preset" --quiet --out "$tmp/$preset"; then
        echo "FAIL $preset: sy-mkmodel"
        fails=$((fails + 1))
        continue
    fi
    if "$SY_BUILDDIR/tests/arch/test_mla_batch" "$tmp/$preset" "$SY_BUILDDIR/build-plugins" >"$tmp/out" 2>&1; then
        sed "s/^/$preset: /" "$tmp/out"
    else
        echo "FAIL $preset:"
        cat "$tmp/out"
        fails=$((fails + 1))
    fi
done
[ $fails -eq 0 ]
