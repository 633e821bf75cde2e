#!/bin/sh
# make check-openai: the official openai package against the http plugin
# on the fake host. Usage: openai_check.sh TEST_HTTP_BIN OPENAI_CHECK_PY
set -eu
bin=$1
py=$2
python=${PYTHON:-python3}
if ! "$python" -c 'import openai' 2>/dev/null; then
    echo "check-openai: FAIL: $python has no openai package (pip install openai, or PYTHON=venv/bin/python)" >&2
    exit 1
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sy-openai.XXXXXX")
mkfifo "$tmp/in"
"$bin" serve 0 <"$tmp/in" >"$tmp/port" &
pid=$!
exec 3>"$tmp/in"
trap 'exec 3>&-; wait $pid 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 50); do [ -s "$tmp/port" ] && break; sleep 0.1; done
port=$(head -n1 "$tmp/port")
[ -n "$port" ] || { echo "check-openai: FAIL: the fake server did not start" >&2; exit 1; }
"$python" "$py" "http://127.0.0.1:$port/v1"
