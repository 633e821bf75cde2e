#!/bin/sh
# `switchyard bench` against `switchyard serve` on the build's small model:
# HTTP/1.1 and h2c runs at two concurrency levels (table rows, token counts,
# the JSON and the PNG checked), --single-stream, a jsonl dataset, and the
# failures: a closed port and bad arguments; discovery against a server
# that answers like llama-server.
set -u
. "${SY_SRCDIR:?run through make check}/tests/cli/lib.sh"
. "$SY_SRCDIR/tests/lib/serve.sh"
python=${PYTHON:-python3}
serve_start serve -q -c "$cfg" --model "$SY_BUILDDIR/models/small"

# check_run NAME FILE_PREFIX ROWS NPROMPTS OUTLEN: the table, JSON and PNG of a run
check_run() {
    name=$1 pre=$2 rows=$3 np=$4 ol=$5
    n=$(grep -Ec "^[0-9]+ +$np +0 " "$pre.out")
    if [ "$n" -eq "$rows" ]; then ok "$name: $rows table rows with $np completed"; else
        bad "$name: expected $rows rows with $np completed: $(cat "$pre.out" "$pre.err")"; fi
    if "$python" - "$pre.json" "$rows" "$np" "$ol" >"$pre.check" 2>&1 <<'EOP'
import json, sys
d = json.load(open(sys.argv[1]))
rows, n, ol = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
lv = d["levels"]
assert len(lv) == rows, "levels: %d" % len(lv)
need = ["completed", "failed", "duration", "total_input", "total_output", "request_throughput",
        "input_throughput", "output_throughput", "total_throughput", "peak_output_throughput",
        "ttft_mean", "ttft_p50", "ttft_p99", "tpot_mean", "tpot_p50", "tpot_p99", "itl_p50", "itl_p99",
        "e2e_mean", "e2e_p50", "e2e_p99", "max_concurrency"]
for l in lv:
    for k in need:
        assert k in l, "missing " + k
    assert l["completed"] == n and l["failed"] == 0, l
    assert l["total_output"] == n * ol, "total_output %d" % l["total_output"]
    assert l["total_input"] == n * 32, "total_input %d" % l["total_input"]
    assert l["duration"] > 0 and l["output_throughput"] > 0 and l["ttft_mean"] > 0
    assert l["e2e_p50"] >= l["ttft_p50"] and l["peak_output_throughput"] > 0
assert d["config"]["num_prompts"] == n
EOP
    then ok "$name: JSON"; else bad "$name: JSON: $(cat "$pre.check")"; fi
}

check_png() {
    "$python" - "$1" <<'EOP'
import struct, sys, zlib
b = open(sys.argv[1], "rb").read()
assert b[:8] == b"\x89PNG\r\n\x1a\n", "signature"
off, kinds, idat = 8, [], b""
while off < len(b):
    n, = struct.unpack(">I", b[off:off + 4])
    t = b[off + 4:off + 8]
    data = b[off + 8:off + 8 + n]
    crc, = struct.unpack(">I", b[off + 8 + n:off + 12 + n])
    assert zlib.crc32(t + data) & 0xffffffff == crc, "bad CRC in " + t.decode()
    kinds.append(t)
    if t == b"IDAT":
        idat += data
    off += 12 + n
assert kinds[0] == b"IHDR" and kinds[-1] == b"IEND", kinds
w, h = struct.unpack(">II", b[16:24])
raw = zlib.decompress(idat)
assert len(raw) == h * (w + 1), "pixel data %d" % len(raw)
assert len(set(raw)) > 3, "a blank image"
EOP
}

# 1. HTTP/1.1, two levels, JSON and plot.
args="--port $port --num-prompts 16 --max-concurrency 1,4 --random-input-len 32 --random-output-len 16 --no-progress"
if "$sy" bench $args --output-json "$tmp/h1.json" --plot "$tmp/h1.png" >"$tmp/h1.out" 2>"$tmp/h1.err"; then
    ok "HTTP/1.1 run: exit 0"; else bad "HTTP/1.1 run: exit $?: $(cat "$tmp/h1.err")"; fi
cat "$tmp/h1.out"
check_run "HTTP/1.1" "$tmp/h1" 2 16 16
if check_png "$tmp/h1.png" >"$tmp/png.check" 2>&1; then ok "PNG: signature, chunk CRCs, pixel data"; else
    bad "PNG: $(cat "$tmp/png.check")"; fi

# 2. h2c, same figures.
if "$sy" bench $args --http2 --output-json "$tmp/h2.json" >"$tmp/h2.out" 2>"$tmp/h2.err"; then
    ok "h2c run: exit 0"; else bad "h2c run: exit $?: $(cat "$tmp/h2.err")"; fi
grep -q "HTTP/2" "$tmp/h2.out" && ok "h2c run: says HTTP/2" || bad "h2c run: header: $(head -1 "$tmp/h2.out")"
check_run "h2c" "$tmp/h2" 2 16 16

# 3. --single-stream with --base-url.
if "$sy" bench --base-url "http://127.0.0.1:$port" --single-stream --random-output-len 64 --no-progress \
    >"$tmp/ss.out" 2>"$tmp/ss.err" && grep -Eq '^[0-9.]+ tok/s single stream' "$tmp/ss.out"; then
    ok "--single-stream: tok/s single stream"; else bad "--single-stream: $(cat "$tmp/ss.out" "$tmp/ss.err")"; fi

# 4. A jsonl dataset, reused to fill --num-prompts, with a request rate.
printf '{"prompt": "Once upon a time", "output_len": 8}\n\n{"prompt": "The cat", "output_len": 4}\n' >"$tmp/p.jsonl"
if "$sy" bench --port "$port" --dataset jsonl --dataset-path "$tmp/p.jsonl" --num-prompts 6 --request-rate 100 \
    --ignore-eos --no-progress --output-json "$tmp/j.json" >"$tmp/j.out" 2>"$tmp/j.err" &&
    "$python" -c 'import json,sys; l=json.load(open(sys.argv[1]))["levels"][0]; sys.exit(not (l["completed"] == 6 and l["total_output"] == 36))' "$tmp/j.json"; then
    ok "jsonl dataset at a request rate"; else bad "jsonl: $(cat "$tmp/j.out" "$tmp/j.err")"; fi

# 4b. --json-schema at --constrained-fraction 0.5: every other request is
# constrained to one of two short words, so the server ends it after a few
# tokens while the free ones run to --random-output-len (ignore_eos).
printf '{"enum": ["yes", "no"]}\n' >"$tmp/schema.json"
if "$sy" bench --port "$port" --num-prompts 8 --random-input-len 16 --random-output-len 24 --max-concurrency 4 \
    --json-schema "$tmp/schema.json" --constrained-fraction 0.5 --no-progress --output-json "$tmp/c.json" \
    >"$tmp/c.out" 2>"$tmp/c.err" &&
    "$python" -c '
import json, sys
d = json.load(open(sys.argv[1])); l = d["levels"][0]
ok = (l["completed"] == 8 and l["failed"] == 0 and 4 * 24 < l["total_output"] <= 4 * 24 + 4 * 6
      and d["config"]["constrained_fraction"] == 0.5)
sys.exit(not ok)' "$tmp/c.json"; then
    ok "--json-schema --constrained-fraction 0.5: half the requests end by the grammar"; else
    bad "--json-schema: $(cat "$tmp/c.out" "$tmp/c.err"; cat "$tmp/c.json" 2>/dev/null | head -40)"; fi

# 5. Non-2xx answers: counted as failed, the first error shown, exit 1.
printf '{"prompt": "Once", "output_len": 100000}\n{"prompt": "The", "output_len": 2}\n' >"$tmp/bad.jsonl"
"$sy" bench --port "$port" --dataset jsonl --dataset-path "$tmp/bad.jsonl" --num-prompts 4 --no-progress \
    >"$tmp/f.out" 2>"$tmp/f.err"
rc=$?
if [ $rc -eq 1 ] && grep -Eq "^inf +2 +2 " "$tmp/f.out" && grep -q "2 requests failed; the first: HTTP 400: .*max_tokens" "$tmp/f.err"; then
    ok "failed requests: counted, first error shown"; else
    bad "failed requests: exit $rc: $(cat "$tmp/f.out" "$tmp/f.err")"; fi

# 6. A closed port: non-zero, and says it cannot connect.
serve_stop serve
if "$sy" bench --port "$port" --num-prompts 2 --no-progress >"$tmp/c.out" 2>"$tmp/c.err"; then
    bad "closed port: exit 0"
elif grep -q "cannot connect to 127.0.0.1:$port" "$tmp/c.err"; then
    ok "closed port: $(cat "$tmp/c.err")"
else
    bad "closed port: unexpected message: $(cat "$tmp/c.err")"
fi

# 7. Bad arguments: exit 2 with the option named.
"$sy" bench --max-concurrency 1,0 >"$tmp/a.out" 2>"$tmp/a.err"
rc=$?
if [ $rc -eq 2 ] && grep -q -- "--max-concurrency" "$tmp/a.err"; then ok "bad --max-concurrency: exit 2"; else
    bad "bad --max-concurrency: exit $rc: $(cat "$tmp/a.err")"; fi
"$sy" bench --dataset jsonl >"$tmp/a.out" 2>"$tmp/a.err"
rc=$?
if [ $rc -eq 2 ] && grep -q -- "--dataset-path" "$tmp/a.err"; then ok "jsonl without a path: exit 2"; else
    bad "jsonl without a path: exit $rc: $(cat "$tmp/a.err")"; fi

# 8. A server that discovers like llama-server: the vocabulary only in /v1/models ("meta": {"n_vocab"}),
#    500 for an out-of-range /detokenize. The bench must take n_vocab and draw its ids below it.
cat >"$tmp/llama_like.py" <<'EOP'
import http.server, json, sys
VOCAB = 77
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def answer(self, code, body, ctype="application/json", close=False):
        b = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(b)))
        if close:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(b)
    def do_GET(self):
        if self.path == "/v1/models":
            self.answer(200, json.dumps({"object": "list", "data": [{"id": "m", "meta": {"n_vocab": VOCAB}}]}))
        else:
            self.answer(404, "{}")
    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path == "/detokenize":
            return self.answer(500, json.dumps({"error": {"message": "out of range"}}))
        ids = req["prompt"]
        if any(not 0 <= i < VOCAB for i in ids):
            return self.answer(400, json.dumps({"error": {"message": "token id out of range: %r" % max(ids)}}))
        n = req["max_tokens"]
        ev = "".join("data: %s\n\n" % json.dumps({"choices": [{"index": 0, "text": "x", "finish_reason": None}]})
                     for _ in range(n))
        ev += "data: %s\n\n" % json.dumps({"choices": [{"index": 0, "text": "", "finish_reason": "length"}]})
        ev += "data: %s\n\n" % json.dumps({"choices": [], "usage": {"prompt_tokens": len(ids), "completion_tokens": n}})
        ev += "data: [DONE]\n\n"
        self.answer(200, ev, "text/event-stream")
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(srv.server_address[1], flush=True)
srv.serve_forever()
EOP
"$python" "$tmp/llama_like.py" >"$tmp/ll.port" 2>"$tmp/ll.err" &
pid=$!
i=0
while [ ! -s "$tmp/ll.port" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
llport=$(cat "$tmp/ll.port")
if [ -n "$llport" ] && "$sy" bench --port "$llport" --num-prompts 8 --max-concurrency 4 --random-input-len 50 \
    --random-output-len 3 --no-progress >"$tmp/ll.out" 2>"$tmp/ll.err2" && grep -Eq "^4 +8 +0 " "$tmp/ll.out"; then
    ok "llama-server-like discovery: vocabulary from /v1/models meta.n_vocab"; else
    bad "llama-server-like discovery: $(cat "$tmp/ll.out" "$tmp/ll.err2" "$tmp/ll.err")"; fi
kill "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
pid=

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
