# Shared by the tests of the commands (tests/cli/*.sh, tests/comm/test_bench_comm*.sh, tests/bench/*.sh, and tests/faults/lib.sh; sourced): the build's
# switchyard and config, a scratch directory removed on exit, and result counting.
: "${SY_BUILDDIR:?run through make check}"
sy=$SY_BUILDDIR/switchyard
cfg=$SY_BUILDDIR/etc/switchyard-build.ini
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sy-cli.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }
# need_model NAME: stops the test, failed, when $SY_SHARED_DIR has no models/NAME (a missing model is a broken
# set-up, not a reason to skip).
need_model() {
    if [ -z "${SY_SHARED_DIR:-}" ] || [ ! -d "$SY_SHARED_DIR/models/$1" ]; then
        echo "FAIL: SY_SHARED_DIR (${SY_SHARED_DIR:-unset}) has no models/$1" >&2
        exit 1
    fi
}
