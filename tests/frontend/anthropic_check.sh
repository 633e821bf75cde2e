#!/bin/sh
# make check-anthropic: the official anthropic package against the http plugin
# on the fake host. Usage: anthropic_check.sh TEST_HTTP_BIN ANTHROPIC_CHECK_PY
set -eu
bin=$1
py=$2
python=${PYTHON:-python3}
if ! "$python" -c 'import anthropic' 2>/dev/null; then
    echo "check-anthropic: FAIL: $python has no anthropic package (pip install anthropic, or PYTHON=venv/bin/python)" >&2
    exit 1
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sy-anthropic.XXXXXX")
mkfifo "$tmp/in"
"$bin" serve 0 <"$tmp/in" >"$tmp/port" &
pid=$!
exec 3>"$tmp/in"
trap 'exec 3>&-; wait $pid 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 50); do [ -s "$tmp/port" ] && break; sleep 0.1; done
port=$(head -n1 "$tmp/port")
[ -n "$port" ] || { echo "check-anthropic: FAIL: the fake server did not start" >&2; exit 1; }
"$python" "$py" "http://127.0.0.1:$port"
