#!/bin/sh
# A field config.json leaves out means what it means to transformers: a
# GLM-4-MoE config without partial_rotary_factor rotates half of each head
# (Glm4MoeConfig's default 0.5, not the generic 1.0). The engine must match
# the numpy reference of that config, and not the reference told 1.0.
set -u
: "${SY_BUILDDIR:?run through make check}" "${SY_SRCDIR:?run through make check}"
PY=${PYTHON_NUMPY:-/usr/bin/python3}
"$PY" -c 'import numpy' 2>/dev/null || { echo "FAIL: no python3 with numpy ($PY)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ids=100,200,300,4,5
"$SY_BUILDDIR/sy-mkmodel" --preset test-glm4-moe --seed 41 --quiet --out "$tmp/m" || { echo "FAIL: sy-mkmodel"; exit 1; }
edit() { # dir python-statement
    "$PY" -c "import json,sys; p=sys.argv[1]; c=json.load(open(p)); $2; json.dump(c, open(p, 'w'))" "$1/config.json"
}
edit "$tmp/m" 'del c["partial_rotary_factor"]'
"$SY_BUILDDIR/switchyard" generate -q -c "$SY_BUILDDIR/etc/switchyard-build.ini" --model "$tmp/m" \
    --prompt-ids $ids -n 12 --ignore-eos --print-ids --logits-out "$tmp/logits.f32" >/dev/null 2>"$tmp/err" ||
    { echo "FAIL: switchyard generate: $(cat "$tmp/err")"; exit 1; }
gen=$(sed -n 's/^generated_ids: //p' "$tmp/err" | tr ' ' ',')
fails=0
if "$PY" "$SY_SRCDIR/tests/ref/reference.py" "$tmp/m" --ids "$ids,$gen" --check-logits "$tmp/logits.f32" \
    --tol 1e-4 >"$tmp/out" 2>&1; then
    echo "ok   no partial_rotary_factor: $(tail -1 "$tmp/out")"
else
    echo "FAIL: no partial_rotary_factor: the engine differs from the reference:"
    cat "$tmp/out"
    fails=$((fails + 1))
fi
cp -r "$tmp/m" "$tmp/full"
edit "$tmp/full" 'c["partial_rotary_factor"] = 1.0'
"$PY" "$SY_SRCDIR/tests/ref/reference.py" "$tmp/full" --ids "$ids,$gen" --check-logits "$tmp/logits.f32" \
    --tol 1e-2 >"$tmp/out" 2>&1
if [ $? -eq 1 ]; then
    echo "ok   and it is not the full-head rotation: $(tail -1 "$tmp/out")"
else
    echo "FAIL: the engine's logits also match partial_rotary_factor 1.0: the default is not exercised"
    fails=$((fails + 1))
fi

# transformers 5's layout (issue 16): partial_rotary_factor and rope_theta only inside rope_parameters. The engine
# on that checkpoint must match the reference told the same values in the older top-level layout.
cp -r "$tmp/m" "$tmp/rp"
edit "$tmp/rp" 't = c.pop("rope_theta", 10000.0); c.pop("partial_rotary_factor", None); '\
'c["rope_parameters"] = {"rope_type": "default", "rope_theta": t * 3, "partial_rotary_factor": 0.25}'
"$SY_BUILDDIR/switchyard" generate -q -c "$SY_BUILDDIR/etc/switchyard-build.ini" --model "$tmp/rp" \
    --prompt-ids $ids -n 12 --ignore-eos --print-ids --logits-out "$tmp/rp-logits.f32" >/dev/null 2>"$tmp/err" ||
    { echo "FAIL: switchyard generate (rope_parameters): $(cat "$tmp/err")"; exit 1; }
gen=$(sed -n 's/^generated_ids: //p' "$tmp/err" | tr ' ' ',')
cp -r "$tmp/m" "$tmp/top"
edit "$tmp/top" 'c["rope_theta"] = c.get("rope_theta", 10000.0) * 3; c["partial_rotary_factor"] = 0.25'
if "$PY" "$SY_SRCDIR/tests/ref/reference.py" "$tmp/top" --ids "$ids,$gen" --check-logits "$tmp/rp-logits.f32" \
    --tol 1e-4 >"$tmp/out" 2>&1; then
    echo "ok   rope_parameters.partial_rotary_factor and rope_theta: $(tail -1 "$tmp/out")"
else
    echo "FAIL: rope_parameters.partial_rotary_factor 0.25 / rope_theta: the engine differs from the reference:"
    cat "$tmp/out"
    fails=$((fails + 1))
fi
# DeepseekV32Config (as DeepseekV3Config) keeps topk_group 4 of its n_group expert groups when topk_group is
# left out: 4 of test-deepseek-v32's 4 groups, not the preset's 2.
"$SY_BUILDDIR/sy-mkmodel" --preset test-deepseek-v32 --seed 43 --quiet --out "$tmp/v32" ||
    { echo "FAIL: sy-mkmodel"; exit 1; }
edit "$tmp/v32" 'del c["topk_group"]'
"$SY_BUILDDIR/switchyard" generate -q -c "$SY_BUILDDIR/etc/switchyard-build.ini" --model "$tmp/v32" \
    --prompt-ids $ids -n 12 --ignore-eos --print-ids --logits-out "$tmp/v32.f32" >/dev/null 2>"$tmp/err" ||
    { echo "FAIL: switchyard generate: $(cat "$tmp/err")"; exit 1; }
gen=$(sed -n 's/^generated_ids: //p' "$tmp/err" | tr ' ' ',')
if "$PY" "$SY_SRCDIR/tests/ref/reference.py" "$tmp/v32" --ids "$ids,$gen" --check-logits "$tmp/v32.f32" \
    --tol 1e-4 >"$tmp/out" 2>&1; then
    echo "ok   deepseek_v32 without topk_group: $(tail -1 "$tmp/out")"
else
    echo "FAIL: deepseek_v32 without topk_group: the engine differs from the reference:"
    cat "$tmp/out"
    fails=$((fails + 1))
fi
edit "$tmp/v32" 'c["topk_group"] = 2'
"$PY" "$SY_SRCDIR/tests/ref/reference.py" "$tmp/v32" --ids "$ids,$gen" --check-logits "$tmp/v32.f32" \
    --tol 1e-2 >"$tmp/out" 2>&1
if [ $? -eq 1 ]; then
    echo "ok   and it is not topk_group 2: $(tail -1 "$tmp/out")"
else
    echo "FAIL: the engine's logits also match topk_group 2: the default is not exercised"
    fails=$((fails + 1))
fi
[ $fails -eq 0 ]
