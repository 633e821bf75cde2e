#!/bin/sh
# `switchyard bench` against a speculating `switchyard serve` (the build's
# small model as its own draft: every greedy draft is the target's pick):
# the table's "speculative draft" line and the JSON's "speculative" object
# carry the acceptance rate and mean accepted length of /metrics' counters
# over the level; a draft pool too small for every request only costs
# drafts; a server without the counters adds neither.
set -u
. "${SY_SRCDIR:?run through make check}/tests/cli/lib.sh"
. "$SY_SRCDIR/tests/lib/serve.sh"
python=${PYTHON:-python3}
small=$SY_BUILDDIR/models/small

# start_server EXTRA_SET...: serve_start on the build's small model; sets $port and $pid, or exits
start_server() {
    serve_start serve -q -c "$cfg" --model "$small" "$@"
}
args="--num-prompts 8 --max-concurrency 1,4 --random-input-len 24 --random-output-len 24 --no-progress"

# 1. A server speculating with the target as its own draft.
start_server --set speculative.method=draft --set "speculative.draft_model=$small" --set speculative.num_draft_tokens=3
if "$sy" bench --port "$port" $args --output-json "$tmp/s.json" >"$tmp/s.out" 2>"$tmp/s.err"; then
    ok "speculating server: exit 0"; else bad "speculating server: exit $?: $(cat "$tmp/s.err")"; fi
cat "$tmp/s.out"
n=$(grep -Ec '^  speculative draft: acceptance 1\.000, mean accepted length [0-9.]+ \([0-9]+ drafts, [0-9]+ accepted, [0-9]+ verifies\)$' "$tmp/s.out")
if [ "$n" -eq 2 ]; then ok "table: one speculative draft line per level, acceptance 1.000"; else
    bad "table: $n speculative lines: $(cat "$tmp/s.out")"; fi
if "$python" - "$tmp/s.json" >"$tmp/s.check" 2>&1 <<'EOP'
import json, sys
lv = json.load(open(sys.argv[1]))["levels"]
assert len(lv) == 2, lv
for l in lv:
    sp = l["speculative"]
    assert list(sp) == ["draft"], sp
    d = sp["draft"]
    assert d["draft_tokens"] > 0 and d["verifies"] > 0, d
    assert d["accepted_tokens"] == d["draft_tokens"] and d["acceptance_rate"] == 1.0, d
    assert abs(d["mean_accepted_length"] - (1 + d["accepted_tokens"] / d["verifies"])) < 1e-9, d
    assert 1 < d["mean_accepted_length"] <= 4, d  # k = 3: at most 3 drafts and the target's pick
    # every output token came from a verify or a plain decode: never more drafts accepted than tokens emitted
    assert d["accepted_tokens"] <= l["total_output"], (d, l["total_output"])
EOP
then ok "JSON: levels[].speculative.draft, acceptance 1, 1 < mean accepted length <= k + 1"; else
    bad "JSON: $(cat "$tmp/s.check")"; fi
serve_stop serve

# 2. A draft pool of 4 blocks (128K at 32 KiB a block) for 4 concurrent requests of 3 blocks each: whoever the
#    pool cannot hold decodes plainly; every request completes, what was drafted is still all accepted.
start_server --set speculative.method=draft --set "speculative.draft_model=$small" --set speculative.num_draft_tokens=3 \
    --set model.max_seq_len=64 --set speculative.draft_kv_cache_size=128K
if "$sy" bench --port "$port" --num-prompts 8 --max-concurrency 4 --random-input-len 24 --random-output-len 24 \
    --no-progress --output-json "$tmp/x.json" >"$tmp/x.out" 2>"$tmp/x.err" &&
    "$python" - "$tmp/x.json" "$tmp/s.json" >"$tmp/x.check" 2>&1 <<'EOP'
import json, sys
l = json.load(open(sys.argv[1]))["levels"][0]
full = json.load(open(sys.argv[2]))["levels"][1]["speculative"]["draft"]
assert l["completed"] == 8 and l["failed"] == 0 and l["total_output"] == 8 * 24, l
d = l["speculative"]["draft"]
assert 0 < d["draft_tokens"] < full["draft_tokens"], (d, full)  # fewer drafts than with a pool for everyone
assert d["accepted_tokens"] == d["draft_tokens"], d
EOP
then ok "draft pool exhausted: every request completes, fewer drafts, all accepted: $(grep speculative "$tmp/x.out")"; else
    bad "draft pool exhausted: $(cat "$tmp/x.check" "$tmp/x.out" "$tmp/x.err" "$tmp/serve.err" | tail -30)"; fi
serve_stop serve

# 3. A server that does not speculate: no speculative line, no key.
start_server
if "$sy" bench --port "$port" $args --output-json "$tmp/p.json" >"$tmp/p.out" 2>"$tmp/p.err" &&
    ! grep -q speculative "$tmp/p.out" &&
    "$python" -c 'import json,sys; sys.exit(any("speculative" in l for l in json.load(open(sys.argv[1]))["levels"]))' "$tmp/p.json"; then
    ok "plain server: no speculative figures"; else bad "plain server: $(cat "$tmp/p.out" "$tmp/p.err")"; fi
serve_stop serve

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
