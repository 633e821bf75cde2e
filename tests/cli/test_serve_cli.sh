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

# The build config ends with its [frontend:api] (http on port 30000); these
# tests use their own frontends, so they start from the config without it.
sed '/^\[frontend:api\]/,$d' "$SY_BUILDDIR/etc/switchyard-build.ini" >"$tmp/base.ini"

# 1. No frontend: refused, with the section to add.
if "$sy" serve -q -c "$tmp/base.ini" >"$tmp/out" 2>"$tmp/err"; then
    bad "serve without a frontend succeeded"
elif grep -q 'no \[frontend:NAME\] section' "$tmp/err"; then
    ok "no frontend: refused"
else
    bad "no frontend: unexpected message: $(cat "$tmp/err")"
fi

# 2. A frontend's request is served; SIGTERM drains and exits 0.
cat "$tmp/base.ini" >"$tmp/serve.ini"
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
    grep -q '^completion_tokens=20$' "$tmp/result"; then
    ok "frontend request served"
else
    bad "frontend request: $(cat "$tmp/result" 2>/dev/null) $(cat "$tmp/serve.err")"
fi
# Frontends start before the model loads, so /health can say 503 meanwhile.
if grep -q '^ready=0$' "$tmp/result"; then ok "frontend started before the model was ready"; else
    bad "the frontend saw ready() = 1 at start: $(cat "$tmp/result")"; fi
kill -TERM "$pid" 2>/dev/null
wait "$pid"
rc=$?
pid=
if [ $rc -eq 0 ]; then ok "SIGTERM: exit 0"; else bad "SIGTERM: exit $rc: $(cat "$tmp/serve.err")"; fi

# 3. A configured chat template that is missing or does not compile stops start-up, naming it.
"$sy" serve -q -c "$tmp/serve.ini" --set model.chat_template="$tmp/none.jinja" --plugin-dir "$SY_TEST_PLUGIN_DIR" \
    >"$tmp/out" 2>"$tmp/err" && bad "serve with a missing chat template started"
if grep -qF "[model] chat_template" "$tmp/err" && grep -qF "$tmp/none.jinja" "$tmp/err"; then
    ok "missing chat_template file: refused"
else
    bad "missing chat_template file: $(cat "$tmp/err")"
fi
printf '{%% for m in messages %%}{{ m.content }\n' >"$tmp/bad.jinja"
"$sy" serve -q -c "$tmp/serve.ini" --set model.chat_template="$tmp/bad.jinja" --plugin-dir "$SY_TEST_PLUGIN_DIR" \
    >"$tmp/out" 2>"$tmp/err" && bad "serve with a broken chat template started"
if grep -qF "$tmp/bad.jinja" "$tmp/err" && grep -q "syntax error" "$tmp/err"; then
    ok "broken chat_template file: refused with the syntax error"
else
    bad "broken chat_template file: $(cat "$tmp/err")"
fi

echo "test_serve_cli: $pass passed, $fail failed"
[ $fail -eq 0 ]
