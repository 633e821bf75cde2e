#!/bin/sh
# Runs each libFuzzer target for SECONDS (make check-fuzz FUZZ_SECONDS=N).
#   check-fuzz.sh SECONDS FUZZ_SRC_DIR BUILD_FUZZ_DIR TARGET...
# New inputs accumulate in BUILD_FUZZ_DIR/corpus-<target>/ (so repeated runs
# go deeper); the seed corpus and the regression inputs are read as well.
# A crash, leak, sanitizer report or an input slower than 10 s fails the
# run and leaves the input as BUILD_FUZZ_DIR/crash-<target>-*: after the fix,
# copy it to tests/fuzz/regressions/<target>/ so `make check` replays it.
# FUZZ_SEED=N (CI sets 1) fixes libFuzzer's seed, so a run explores the same
# inputs in the same order as the run that was checked before landing: CI
# then fails on a regression, not on the luck of a new random walk.
set -u
seconds=$1 src=$2 dir=$3
shift 3
n_targets=$#
case $seconds in ''|*[!0-9]*) echo "check-fuzz: FUZZ_SECONDS must be a whole number of seconds, found '$seconds'" >&2; exit 2 ;; esac
failed=
for t in "$@"; do
    bin=$dir/fuzz_$t
    if [ ! -x "$bin" ]; then
        echo "check-fuzz: $bin is missing (run make fuzz)" >&2
        exit 2
    fi
    if [ ! -d "$src/corpus/$t" ]; then
        echo "check-fuzz: no seed corpus $src/corpus/$t" >&2
        exit 2
    fi
    mkdir -p "$dir/corpus-$t"
    set -- "$dir/corpus-$t" "$src/corpus/$t"
    [ -d "$src/regressions/$t" ] && set -- "$@" "$src/regressions/$t"
    dict=
    [ -f "$src/dict/$t.dict" ] && dict=-dict=$src/dict/$t.dict
    seed=
    [ -n "${FUZZ_SEED:-}" ] && seed=-seed=$FUZZ_SEED
    echo "check-fuzz: $t for ${seconds}s"
    if ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} "$bin" -max_total_time="$seconds" -timeout=10 \
        -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 $dict $seed \
        -artifact_prefix="$dir/crash-$t-" "$@" >"$dir/fuzz-$t.log" 2>&1; then
        grep -E '^stat::(number_of_executed_units|new_units_added)|DONE' "$dir/fuzz-$t.log" | tr '\n' ' '
        echo
    else
        echo "check-fuzz: $t FAILED; the end of $dir/fuzz-$t.log:" >&2
        tail -40 "$dir/fuzz-$t.log" >&2
        failed="$failed $t"
    fi
done
if [ -n "$failed" ]; then
    echo "check-fuzz: failed:$failed (inputs: $dir/crash-*)" >&2
    exit 1
fi
echo "check-fuzz: all $n_targets targets ran ${seconds}s each without a finding"
