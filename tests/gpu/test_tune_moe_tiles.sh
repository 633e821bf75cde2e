#!/bin/sh
# `switchyard tune-moe` on a moe plugin that lists its own tile candidates
# (get_proc("tile_candidates"), what moe cuda has): the test plugin
# sytest-tilemoe (tests/gpu/sytest_tilemoe.c) runs on the host, so this path
# is checked without a GPU. The sweep times the plugin's candidates (not moe
# cpu's token_block grid), counts the one the plugin refuses as too big for
# the device, writes `tile = NAME` entries (never the refused or the slower
# one), and the plugin then reads that table back through the shared reader.
set -u
: "${SY_BUILDDIR:?run through make check}" "${SY_PLUGIN_DIR:?run through make check}" "${SY_TEST_PLUGIN_DIR:?run through make check}"
SY="$SY_BUILDDIR/switchyard"
MK="$SY_BUILDDIR/sy-mkmodel"
PLUGIN="$SY_TEST_PLUGIN_DIR/sytest-tilemoe.so"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() { # name condition-result message
    if [ "$2" -eq 0 ]; then echo "ok   $1"; else
        echo "FAIL $1: $3"
        fails=$((fails + 1))
    fi
}
[ -e "$PLUGIN" ] || { echo "FAIL $PLUGIN missing"; exit 1; }
"$MK" --preset test-mixtral --seed 5 --quiet --out "$tmp/m" || exit 1
printf '[device]\nplugin = cpu\n[moe]\nplugin = %s\ntuning_dir = %s\n' "$PLUGIN" "$tmp/tables" >"$tmp/c.ini"
table="$tmp/tables/test-arch/test-sku/E=4,N=96,K=64,dtype=BF16.ini"

"$SY" tune-moe -c "$tmp/c.ini" --plugin-dir "$SY_PLUGIN_DIR" --model "$tmp/m" --tokens 1,8 --reps 2 >"$tmp/out" 2>&1
rc=$?
[ $rc -eq 0 ] && grep -q ' 2 candidates (1 refused)' "$tmp/out" && grep -Eq '^ +tokens .* tile +tuned ms' "$tmp/out"
check "tune-moe sweeps the plugin's 3 candidates, 1 refused by its device check" $? "exit $rc: $(cat "$tmp/out")"
grep -q "wrote $table" "$tmp/out" && [ "$(grep -c '^tile = ' "$table")" -eq 2 ] &&
    ! grep -Eq '^tile = (slow|huge)|^token_block|^matmul' "$table" && grep -Eq '^tile = (fast|builtin)$' "$table" &&
    grep -q '^device = sytest-tilemoe' "$table"
check "the table has one tile = line per bucket, none refused or slower" $? "$(cat "$tmp/out"; cat "$table" 2>&1)"

want=$(sed -n '/^\[tokens=1\]/,/^tile/s/^tile = //p' "$table")
# tune-moe forces a tile on every instance; a generation reads the table as the engine does.
"$SY" generate -c "$tmp/c.ini" --plugin-dir "$SY_PLUGIN_DIR" --model "$tmp/m" --prompt-ids 1,2,3 -n 1 --ignore-eos \
    >/dev/null 2>"$tmp/out2"
grep -q "tiles from $table; a 1-token pass takes tile $want" "$tmp/out2"
check "the plugin reads the written table back (1-token bucket: $want)" $? "$(cat "$tmp/out2")"

"$SY" tune-moe -c "$tmp/c.ini" --plugin-dir "$SY_PLUGIN_DIR" --model "$tmp/m" --tokens 1 --reps 1 --dry-run --tiles "huge" >"$tmp/out3" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q 'every candidate tile was refused: .*tile = huge does not fit this device' "$tmp/out3"
check "only a refused candidate: exit 1 with the plugin's reason" $? "exit $rc: $(cat "$tmp/out3")"
[ $fails -eq 0 ]
