#!/bin/sh
# `switchyard serve` as an operator runs it, with a test frontend plugin in
# place of http: the frontend's request is served (the stories260k greedy
# continuation), SIGTERM drains and exits 0, and a config without a
# [frontend:NAME] section is refused with a message saying what to add.
set -u
: "${SY_BUILDDIR:?run through make check}"
: "${SY_TEST_PLUGIN_DIR:?run through make check}"
if [ -z "${SY_SHARED_DIR:-}" ] || [ ! -d "$SY_SHARED_DIR/models/stories260k" ]; then
    echo "FAIL: SY_SHARED_DIR (${SY_SHARED_DIR:-unset}) has no models/stories260k" >&2
    exit 1
fi
sy=$SY_BUILDDIR/switchyard
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }

# 1. No frontend: refused, with the section to add.
if "$sy" serve -q -c "$SY_BUILDDIR/etc/switchyard-build.ini" >"$tmp/out" 2>"$tmp/err"; then
    bad "serve without a frontend succeeded"
elif grep -q 'no \[frontend:NAME\] section' "$tmp/err"; then
    ok "no frontend: refused"
else
    bad "no frontend: unexpected message: $(cat "$tmp/err")"
fi

# 2. A frontend's request is served; SIGTERM drains and exits 0.
cat "$SY_BUILDDIR/etc/switchyard-build.ini" >"$tmp/serve.ini"
cat >>"$tmp/serve.ini" <<EOI
[frontend:test]
plugin = sytest-frontend
out = $tmp/result
max_tokens = 20
EOI
"$sy" serve -q -c "$tmp/serve.ini" --model "$SY_SHARED_DIR/models/stories260k" \
    --plugin-dir "$SY_TEST_PLUGIN_DIR" >"$tmp/serve.out" 2>"$tmp/serve.err" &
pid=$!
i=0
while [ ! -f "$tmp/result" ] && [ $i -lt 300 ] && kill -0 "$pid" 2>/dev/null; do
    sleep 0.1
    i=$((i + 1))
done
want='text=, there was a little girl named Lily. She loved to play outsid'
if [ -f "$tmp/result" ] && grep -qF "$want" "$tmp/result" && grep -q '^finish=length$' "$tmp/result" &&
    grep -q '^completion_tokens=20$' "$tmp/result" && grep -q '^ready=1$' "$tmp/result"; then
    ok "frontend request served"
else
    bad "frontend request: $(cat "$tmp/result" 2>/dev/null) $(cat "$tmp/serve.err")"
fi
kill -TERM "$pid" 2>/dev/null
wait "$pid"
rc=$?
pid=
if [ $rc -eq 0 ]; then ok "SIGTERM: exit 0"; else bad "SIGTERM: exit $rc: $(cat "$tmp/serve.err")"; fi

echo "test_serve_cli: $pass passed, $fail failed"
[ $fail -eq 0 ]
