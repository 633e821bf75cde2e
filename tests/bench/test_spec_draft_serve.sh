#!/bin/sh
# [speculative] method = draft through `switchyard serve`: greedy output is
# exactly the output without speculation, over concurrent requests (batch
# mixes of prefills, verifies and plain decodes), prompts longer than
# max_batch_tokens (chunked prefill) and a KV pool small enough to preempt;
# the draft is a 3-layer cut of the build's small model (same tokenizer,
# same seed), so some drafts are accepted and some rejected, and /metrics
# says so.
set -u
. "${SY_SRCDIR:?run through make check}/tests/cli/lib.sh"
. "$SY_SRCDIR/tests/lib/serve.sh"
python=${PYTHON:-python3}
small=$SY_BUILDDIR/models/small

"$SY_BUILDDIR/sy-mkmodel" --preset small --layers 3 --out "$tmp/draft" >/dev/null 2>"$tmp/mk.err" &&
    cmp -s "$tmp/draft/tokenizer.json" "$small/tokenizer.json" ||
    { echo "FAIL: sy-mkmodel: a 3-layer small model with the build model's tokenizer: $(cat "$tmp/mk.err")"; exit 1; }

# run NAME SET...: serve with the small pool and chunked prefill (plus SET), send the requests, keep the answers
run() {
    name=$1
    shift
    serve_start "$name" -q -c "$cfg" --model "$small" --set model.max_seq_len=128 --set scheduler.kv_cache_size=512K \
        --set scheduler.max_batch_tokens=32 "$@"
    "$python" - "$port" "$tmp/$name.json" <<'EOP'
import json, random, sys, threading, urllib.request
port, out = sys.argv[1], sys.argv[2]
rng = random.Random(7)
prompts = []
for i in range(10):
    n = rng.choice([8, 20, 45, 70])  # past max_batch_tokens 32: chunked
    base = [rng.randrange(3, 1000) for _ in range(6)]
    prompts.append([base[j % 6] if j % 3 else rng.randrange(3, 1000) for j in range(n)])
res = [None] * len(prompts)
def one(i):
    body = json.dumps({"prompt": prompts[i], "max_tokens": 48, "temperature": 0, "ignore_eos": True}).encode()
    rq = urllib.request.Request("http://127.0.0.1:%s/v1/completions" % port, body, {"Content-Type": "application/json"})
    res[i] = json.load(urllib.request.urlopen(rq, timeout=120))["choices"][0]["text"]
ts = [threading.Thread(target=one, args=(i,)) for i in range(len(prompts))]
for t in ts: t.start()
for t in ts: t.join()
m = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % port, timeout=10).read().decode()
json.dump({"texts": res, "metrics": m}, open(out, "w"))
EOP
    rc=$?
    [ $rc -eq 0 ] || { echo "FAIL: requests to the $name server: $(tail -20 "$tmp/$name.err")"; exit 1; }
    serve_stop "$name"
}

run plain
run draft --set speculative.method=draft --set "speculative.draft_model=$tmp/draft" --set speculative.num_draft_tokens=3 \
    --set speculative.min_acceptance=0
"$python" - "$tmp/plain.json" "$tmp/draft.json" <<'EOP'
import json, re, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
def counter(m, name, method=None):
    lab = r'\{[^}]*method="%s"[^}]*\}' % method if method else r'(?:\{[^}]*\})?'
    v = re.findall(r'^%s%s (\S+)$' % (name, lab), m, re.M)
    return sum(float(x) for x in v)
same = sum(x == y for x, y in zip(a["texts"], b["texts"]))
drafts = counter(b["metrics"], "switchyard_spec_draft_tokens_total", "draft")
acc = counter(b["metrics"], "switchyard_spec_accepted_tokens_total", "draft")
pre = counter(b["metrics"], "switchyard_num_preemptions_total")
print("%d of %d greedy outputs identical; draft: %d drafts, %d accepted; %d preemptions" % (same, len(a["texts"]), drafts, acc, pre))
assert all(t for t in a["texts"]), "an empty output"
assert same == len(a["texts"]), [(x, y) for x, y in zip(a["texts"], b["texts"]) if x != y][:2]
assert 0 < acc < drafts, "want both accepted and rejected drafts"
assert pre > 0, "no preemption: the pool is not small enough to test it"
EOP
rc=$?
if [ $rc -eq 0 ]; then ok "greedy output with a draft model equals plain greedy"; else bad "greedy identity"; fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
