#!/bin/sh
# The whole path for a GLM-5-shaped NVFP4 checkpoint: sy-mkmodel's
# tiny-glm5-nvfp4 (glm_moe_dsa config fields, MLA + DSA indexer, NVFP4
# routed experts in the ModelOpt layout) is served by `switchyard serve`
# and answers a streamed chat completion over HTTP: SSE chunks of
# chat.completion.chunk, a finish_reason, [DONE], and the streamed text
# equal to the same request unstreamed (greedy).
set -u
: "${SY_BUILDDIR:?run through make check}"
command -v curl >/dev/null || { echo "FAIL: curl not found (tools/install-deps.sh installs it)"; exit 1; }
PY=${PYTHON_NUMPY:-/usr/bin/python3}
. "${SY_SRCDIR:?run through make check}/tests/cli/lib.sh"
. "$SY_SRCDIR/tests/lib/serve.sh"

"$SY_BUILDDIR/sy-mkmodel" --preset tiny-glm5-nvfp4 --quiet --out "$tmp/glm5" || { echo "FAIL: sy-mkmodel"; exit 1; }
grep -q '"quant_algo": "NVFP4"' "$tmp/glm5/hf_quant_config.json" && grep -q '"glm_moe_dsa"' "$tmp/glm5/config.json" ||
    bad "the checkpoint is not a glm_moe_dsa NVFP4 one"

serve_start serve -c "$cfg" --model "$tmp/glm5"
grep -q "GlmMoeDsaForCausalLM.*quantised nvfp4" "$tmp/serve.err" && ok "served as GlmMoeDsaForCausalLM, NVFP4" ||
    bad "load line: $(grep -i loaded "$tmp/serve.err")"

url=http://127.0.0.1:$port/v1/chat/completions
body='"messages": [{"role": "user", "content": "Tell me a story."}], "max_tokens": 12, "temperature": 0'
curl -s -N -H 'Content-Type: application/json' -d "{$body, \"stream\": true}" "$url" >"$tmp/stream.txt"
curl -s -H 'Content-Type: application/json' -d "{$body}" "$url" >"$tmp/plain.json"
if "$PY" - "$tmp/stream.txt" "$tmp/plain.json" <<'PYEOF'; then ok "streamed chat completion: chunks, finish_reason, [DONE], same text as unstreamed"; else bad "streamed chat completion: $(head -c 600 "$tmp/stream.txt")"; fi
import json, sys
lines = [l for l in open(sys.argv[1]).read().split("\n") if l.startswith("data: ")]
assert lines and lines[-1] == "data: [DONE]", "no [DONE] at the end"
chunks = [json.loads(l[6:]) for l in lines[:-1]]
assert len(chunks) >= 3, f"only {len(chunks)} chunks"
assert all(c["object"] == "chat.completion.chunk" for c in chunks)
text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
finish = [c["choices"][0].get("finish_reason") for c in chunks if c["choices"] and c["choices"][0].get("finish_reason")]
assert finish and finish[-1] in ("length", "stop"), f"finish_reason {finish}"
plain = json.load(open(sys.argv[2]))
want = plain["choices"][0]["message"]["content"]
assert text == want, f"streamed {text!r} != unstreamed {want!r}"
print(f"  {len(chunks)} chunks, finish_reason {finish[-1]}, text {text!r}")
PYEOF
serve_stop serve
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
