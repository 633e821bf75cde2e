# Shared by the tensor-parallel tests (sourced): the build, a temp dir,
# ok/bad counters, and the expected greedy ids of /work/shared/models.
: "${SY_BUILDDIR:?run through make check}"
if [ -z "${SY_SHARED_DIR:-}" ] || [ ! -f "$SY_SHARED_DIR/models/expected_greedy.json" ]; then
    echo "FAIL: SY_SHARED_DIR (${SY_SHARED_DIR:-unset}) has no models/expected_greedy.json" >&2
    exit 1
fi
py=${PYTHON_NUMPY:-python3}
command -v "$py" >/dev/null 2>&1 || { echo "FAIL: no python3 to read expected_greedy.json" >&2; exit 1; }
sy=$SY_BUILDDIR/switchyard
cfg=$SY_BUILDDIR/etc/switchyard-build.ini
models=$SY_SHARED_DIR/models
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sy-tp.XXXXXX")
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }
finish() {
    echo "$pass passed, $fail failed"
    [ $fail -eq 0 ]
}

# expected MODEL INDEX FIELD [N]: prompt_ids or the first N greedy_ids, comma- or space-separated.
expected() {
    "$py" - "$models/expected_greedy.json" "$1" "$2" "$3" "${4:-64}" <<'EOP'
import json, sys
path, model, idx, field, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
case = json.load(open(path))["models"][model][idx]
if field == "prompt_ids":
    print(",".join(str(i) for i in case["prompt_ids"]))
else:
    print(" ".join(str(i) for i in case["greedy_ids"][:n]))
EOP
}

# same_mtp_drafts WHAT ONE_LOG MANY_LOG: ok when the MTP proposals `generate -v` logged in MANY_LOG (several ranks)
# are exactly those in ONE_LOG (one rank), and there are some: random weights accept almost no draft, so the tokens
# alone would not show that the sharded MTP layer computes what one rank's does.
same_mtp_drafts() {
    sed -n 's/.*\(speculative (mtp): request [0-9]* at [0-9]* drafts.*\)/\1/p' "$2" >"$tmp/drafts.one"
    sed -n 's/.*\(speculative (mtp): request [0-9]* at [0-9]* drafts.*\)/\1/p' "$3" >"$tmp/drafts.many"
    if [ -s "$tmp/drafts.one" ] && cmp -s "$tmp/drafts.one" "$tmp/drafts.many"; then
        ok "$1 proposes the drafts one rank proposes ($(wc -l <"$tmp/drafts.one") proposals)"
    else
        bad "$1: drafts differ: one rank [$(head -3 "$tmp/drafts.one")] several [$(head -3 "$tmp/drafts.many")]"
    fi
}
