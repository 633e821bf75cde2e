# Shared by tests/sdk/*.sh (sourced). Result counting and a scratch dir.
: "${SY_SRCDIR:?run through make check (or make installcheck)}"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sy-sdk.XXXXXX")
pids=
cleanup() {
    for p in $pids; do kill "$p" 2>/dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }
finish() {
    echo "$pass passed, $fail failed"
    [ "$fail" -eq 0 ]
}
need_shared() {
    if [ -z "${SY_SHARED_DIR:-}" ] || [ ! -d "$SY_SHARED_DIR/models/stories260k" ]; then
        echo "FAIL: SY_SHARED_DIR (${SY_SHARED_DIR:-unset}) has no models/stories260k" >&2
        exit 1
    fi
}
# Generated ids of a generate run's stderr file (--print-ids).
ids_of() { grep '^generated_ids:' "$1"; }
