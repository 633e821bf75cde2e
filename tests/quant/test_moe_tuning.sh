#!/bin/sh
# MoE tuning tables (plugins/moe/cpu/moe_tune.h) as a user meets them:
# no table -> one warning naming the files looked for; a table of another
# CPU of the same ISA -> used, with a warning; this CPU's table -> used
# silently; an entry too big for this CPU's L2 -> refused at load with its
# numbers; a malformed table -> file:line. `switchyard tune-moe` writes a
# table the plugin then reads. Tiles change the loop order, never the
# arithmetic (k is sliced at a fixed SYK_KC), so every run generates the
# same ids.
set -u
: "${SY_BUILDDIR:?run through make check}" "${SY_SRCDIR:?run through make check}"
MK="$SY_BUILDDIR/sy-mkmodel"
SY="$SY_BUILDDIR/switchyard"
INI="$SY_BUILDDIR/etc/switchyard-build.ini"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
n=0
check() { # name condition-result message
    n=$((n + 1))
    if [ "$2" -eq 0 ]; then echo "ok   $1"; else
        echo "FAIL $1: $3"
        fails=$((fails + 1))
    fi
}
"$MK" --preset test-mixtral --seed 31 --quiet --out "$tmp/m" || exit 1
gen() { # tuning_dir -> ids on stdout, log in $tmp/err.txt
    "$SY" generate -c "$INI" --model "$tmp/m" --prompt-ids 5,6,7,8,9,10,11,12,13,14,15,16 -n 8 --ignore-eos \
        --print-ids --set moe.tuning_dir="$1" --set scheduler.max_batch_tokens=5 >/dev/null 2>"$tmp/err.txt"
    rc=$?
    sed -n 's/^generated_ids: //p' "$tmp/err.txt"
    return $rc
}
fname='E=4,N=96,K=64,dtype=BF16.ini'
ref=$(gen "$tmp/tables")
grep -q "no MoE tuning table: looked for $tmp/tables/cpu-.*/$fname and $tmp/tables/cpu-.*/\*/$fname" "$tmp/err.txt"
check "no table: one warning naming both places" $? "$(grep -i tuning "$tmp/err.txt")"
[ "$(grep -c 'no MoE tuning table' "$tmp/err.txt")" -eq 1 ]
check "no table: the warning appears once" $? "$(grep -c 'no MoE tuning table' "$tmp/err.txt") times"
own=$(sed -n "s|.*looked for \($tmp/tables/cpu-[^ ]*\)/$fname and.*|\1|p" "$tmp/err.txt" | head -1)
arch=$(dirname "$own")
[ -n "$own" ] || { echo "FAIL cannot read this CPU's table path from: $(cat "$tmp/err.txt")"; exit 1; }

table() { # file token_block n_block
    mkdir -p "$(dirname "$1")"
    printf '[table]\nmatmul = f32\nexperts = 4\nn = 96\nk = 64\ndtype = BF16\n[tokens=1]\ntoken_block = 1\nn_block = 16\nthreads = 1\n[tokens=8]\ntoken_block = %s\nn_block = %s\nthreads = 0\n' "$2" "$3" >"$1"
}
table "$arch/Another-CPU-Model/$fname" 2 8
ids=$(gen "$tmp/tables")
grep -q "using $arch/Another-CPU-Model/$fname, tuned on another" "$tmp/err.txt"
check "another SKU's table: used with a warning" $? "$(grep -i tuning "$tmp/err.txt")"
[ "$ids" = "$ref" ]
check "another SKU's tiles: same ids as the built-in tiles" $? "'$ids' vs '$ref'"

table "$own/$fname" 3 4
ids=$(gen "$tmp/tables")
! grep -q "warn.*tuning table" "$tmp/err.txt" && grep -q "expert GEMM tiles: $own/$fname (2 buckets)" "$tmp/err.txt"
check "this CPU's table: used, no warning" $? "$(grep -i tiles "$tmp/err.txt")"
[ "$ids" = "$ref" ]
check "this CPU's tiles: same ids" $? "'$ids' vs '$ref'"
# The entry a bucket's passes run with is logged (debug) on its first pass: the 5-token prefill
# chunks take [tokens=8] (nearest by ratio), the 2-token rest and the decode steps [tokens=1].
"$SY" generate -v -c "$INI" --model "$tmp/m" --prompt-ids 5,6,7,8,9,10,11,12,13,14,15,16 -n 2 --ignore-eos \
    --set moe.tuning_dir="$tmp/tables" --set scheduler.max_batch_tokens=5 >/dev/null 2>"$tmp/v.txt"
grep -q "pass of 5 tokens: bucket tokens=8, tile 3,4,0 " "$tmp/v.txt" &&
    grep -q "pass of [12] tokens: bucket tokens=1, tile 1,16,1 " "$tmp/v.txt"
check "each pass runs its bucket's entry (logged)" $? "$(grep 'pass of' "$tmp/v.txt")"

table "$own/$fname" 4 1048576
gen "$tmp/tables" >/dev/null
grep -q "$own/$fname:11: \[tokens=8\] does not fit this device: n_block 1048576 x K 64 x 16 bits (134217728 B) + token_block 4 x K 64 x 4 B (1024 B) = 134218752 B exceeds the L2 per core" "$tmp/err.txt"
check "an entry too big for L2: refused at load with its numbers" $? "$(grep -i fit "$tmp/err.txt")"

table "$own/$fname" 4 8
echo "tile_rows = 3" >>"$own/$fname"
gen "$tmp/tables" >/dev/null
grep -q "$own/$fname:15: unknown key 'tile_rows' in \[tokens=8\]" "$tmp/err.txt"
check "a malformed table: file:line" $? "$(grep -i key "$tmp/err.txt")"

rm -f "$own/$fname"
"$SY" tune-moe -q -c "$INI" --model "$tmp/m" --set moe.tuning_dir="$tmp/tables" --tokens 1,8 --reps 1 \
    >"$tmp/tune.txt" 2>&1
check "tune-moe runs" $? "$(cat "$tmp/tune.txt")"
grep -q "wrote $own/$fname" "$tmp/tune.txt" && grep -q '^\[tokens=8\]' "$own/$fname" && grep -q '^matmul = f32' "$own/$fname"
check "tune-moe writes this CPU's table, with the matmul it timed" $? "$(cat "$tmp/tune.txt") $(cat "$own/$fname")"
"$SY" tune-moe -q -c "$INI" --model "$tmp/m" --set moe.tuning_dir="$tmp/tables" --tokens 8 --reps 2 \
    --tiles "2,16,0" --dry-run >"$tmp/tiles.txt" 2>&1
grep -Eq '^ +8 +[0-9.]+ +2,16,0 +[0-9.]+ +[0-9.]+x' "$tmp/tiles.txt" && grep -q ' 1 candidates (0 refused)' "$tmp/tiles.txt"
check "tune-moe --tiles times just the tiles given" $? "$(cat "$tmp/tiles.txt")"
ids=$(gen "$tmp/tables")
grep -q "expert GEMM tiles: $own/$fname" "$tmp/err.txt" && [ "$ids" = "$ref" ]
check "the plugin reads tune-moe's table; same ids" $? "'$ids' vs '$ref': $(grep -i tiles "$tmp/err.txt")"
echo "$((n - fails)) passed, $fails failed"
[ $fails -eq 0 ]
