#!/bin/sh
# `switchyard bench-comm` for local and shm (2 and 3 forked ranks, small
# slots so messages go in chunks, both algorithms through the crossover):
# the nccl-tests table with #wrong 0 on every row, and clear usage errors.
set -u
. "${SY_SRCDIR:?run through make check}/tests/cli/lib.sh"
dir=$SY_BUILDDIR/build-plugins

# Every data row (not starting with #) has 0 in the #wrong column (8th); n rows at least.
rows_ok() { # file, min rows
    awk -v min="$2" '!/^#/ && NF >= 9 { n++; if ($8 != 0) bad++ } END { exit !(n >= min && !bad) }' "$1"
}

if timeout 60 "$sy" bench-comm --plugin local --plugin-dir "$dir" --max-bytes 64K >"$tmp/local" 2>"$tmp/err" &&
    grep -q '#wrong' "$tmp/local" && grep -q 'busbw' "$tmp/local" && rows_ok "$tmp/local" 14; then
    ok "bench-comm local"
else bad "bench-comm local: $(cat "$tmp/err" "$tmp/local")"; fi

for n in 2 3; do
    # Generous: 3 spinning ranks on a loaded 2-core machine crawl, and only
    # correctness is asserted here.
    # (--timeout bounds each collective: 30 s by default, which 3 spinning ranks once overran there).
    if timeout 300 "$sy" bench-comm --plugin shm --ranks $n --timeout 120 --plugin-dir "$dir" --max-bytes 256K \
        --set comm.slot_size=16K --set comm.crossover=4K >"$tmp/shm$n" 2>"$tmp/err" &&
        rows_ok "$tmp/shm$n" 16 && grep -q ' oneshot$' "$tmp/shm$n" && grep -q ' twoshot$' "$tmp/shm$n" &&
        grep -q "$n ranks" "$tmp/shm$n"; then
        ok "bench-comm shm, $n ranks"
    else bad "bench-comm shm $n ranks: $(cat "$tmp/err" "$tmp/shm$n")"; fi
done
cat "$tmp/shm2"

# --plugin all runs every comm plugin that can run here (local and shm at least).
if timeout 60 "$sy" bench-comm --plugin all --plugin-dir "$dir" --max-bytes 1K >"$tmp/all" 2>"$tmp/err" &&
    grep -q 'comm plugin local' "$tmp/all" && grep -q 'comm plugin shm, 2 ranks' "$tmp/all"; then
    ok "bench-comm all"
else bad "bench-comm all: $(cat "$tmp/err" "$tmp/all")"; fi

if [ -f "$dir/sy-comm-mpi.so" ]; then
    if grep -q 'mpirun -n 2 switchyard bench-comm --plugin mpi --launched' "$tmp/all"; then ok "bench-comm all: mpi command"
    else bad "bench-comm all does not print the mpirun command: $(cat "$tmp/all")"; fi
fi

"$sy" bench-comm --plugin shm --plugin-dir "$dir" --min-bytes 1M --max-bytes 1K >/dev/null 2>"$tmp/err"
if [ $? -eq 2 ] && grep -q 'above --max-bytes' "$tmp/err"; then ok "bad sizes refused"; else bad "bad sizes: $(cat "$tmp/err")"; fi
"$sy" bench-comm --plugin nosuch --plugin-dir "$dir" --max-bytes 1K >/dev/null 2>"$tmp/err"
if [ $? -eq 1 ] && grep -q 'nosuch' "$tmp/err"; then ok "unknown plugin refused"; else bad "unknown plugin: $(cat "$tmp/err")"; fi

echo "test_bench_comm: $pass passed, $fail failed"
[ $fail -eq 0 ]
