#!/bin/sh
# `switchyard bench-spec` on the build's small model: the table's columns and
# that its numbers parse and are positive (never their values); the JSON; the
# draft-model source run for real over a greedy continuation (the model as its
# own draft accepts every draft, another checkpoint with the same tokenizer
# fewer, and both give plain greedy decoding's tokens); a draft whose
# tokenizer differs is refused with both paths named.
set -u
. "${SY_SRCDIR:?run through make check}/tests/cli/lib.sh"
need_model tiny-llama
python=${PYTHON:-python3}
ini=$cfg
small=$SY_BUILDDIR/models/small

# 1. --help names the formula's options.
if "$sy" bench-spec --help >"$tmp/h.out" 2>&1 && grep -q -- "--acceptance" "$tmp/h.out" &&
    grep -q "speedup = E \* t_decode" "$tmp/h.out"; then ok "--help"; else bad "--help: $(cat "$tmp/h.out")"; fi

# 2. The ngram table (no [speculative] in the config: prompt lookup is timed), two contexts, two acceptances.
if "$sy" bench-spec -q -c "$ini" --model "$small" --ctx 16,64 -k 3 --rounds 3 --acceptance 0.85,0.9 --measure 48 \
    >"$tmp/t.out" 2>"$tmp/t.err"; then ok "ngram table: exit 0"; else bad "ngram table: exit $?: $(cat "$tmp/t.err")"; fi
cat "$tmp/t.out"
if "$python" - "$tmp/t.out" >"$tmp/t.check" 2>&1 <<'EOP'
import sys
lines = open(sys.argv[1]).read().splitlines()
head = [l.split() for l in lines if l.startswith("#    ctx")]
assert head, "no column header"
cols = head[0][1:]
assert cols[:6] == ["ctx", "decode_ms", "verify_ms", "draft_ms", "verify/", "draft/"], cols
assert cols.count("speedup@") == 3, cols  # two acceptances and the measured one
sub = [l for l in lines if l.startswith("# ") and "0.85" in l and "0.9" in l and "measured" in l]
assert sub, "no acceptance labels under speedup@"
rows = [l.split() for l in lines if not l.startswith("#")]
assert [r[0] for r in rows] == ["16", "64"], rows
for r in rows:
    v = [float(x) for x in r]
    assert len(v) == 9, r
    assert v[1] > 0 and v[2] > 0 and v[3] >= 0 and v[4] > 0, r  # prompt lookup may round to 0.0000 ms
    assert all(x > 0 for x in v[6:]), r
assert any("measured over a 48-token greedy continuation" in l and "identical to plain greedy" in l for l in lines)
assert any(l.startswith("# at acceptance 0.9: E = ") for l in lines)
EOP
then ok "ngram table: columns, two rows of positive numbers"; else bad "ngram table: $(cat "$tmp/t.check")"; fi

# 2a. --batch: a row per (ctx, batch) with the batch column, and a suggested max_batch that parses (not its
#     value: it is the machine's); the JSON carries the same rows and the suggestion.
if "$sy" bench-spec -q -c "$ini" --model "$small" --ctx 16 --batch 4,1 -k 3 --rounds 2 --acceptance 0.85,0.5 \
    --measure 0 >"$tmp/b.out" 2>"$tmp/b.err" &&
    "$sy" bench-spec -q -c "$ini" --model "$small" --ctx 16 --batch 1,4 -k 3 --rounds 2 --measure 0 --json \
        >"$tmp/b.json" 2>>"$tmp/b.err"; then ok "--batch: exit 0"; else bad "--batch: exit $?: $(cat "$tmp/b.err")"; fi
cat "$tmp/b.out"
if "$python" - "$tmp/b.out" "$tmp/b.json" >"$tmp/b.check" 2>&1 <<'EOP'
import json, re, sys
lines = open(sys.argv[1]).read().splitlines()
head = [l.split() for l in lines if l.startswith("#    ctx")]
assert head and head[0][1:8] == ["ctx", "batch", "decode_ms", "verify_ms", "draft_ms", "verify/", "draft/"], head
assert head[0].count("speedup@") == 2, head
rows = [l.split() for l in lines if not l.startswith("#")]
assert [(r[0], r[1]) for r in rows] == [("16", "1"), ("16", "4")], rows  # batches ascending
for r in rows:
    v = [float(x) for x in r]
    assert len(v) == 9 and v[2] > 0 and v[3] > 0 and v[4] >= 0 and all(x > 0 for x in v[7:]), r
sug = [re.match(r"# suggested max_batch = (\d+) ", l) for l in lines]
sug = [int(m.group(1)) for m in sug if m]
assert len(sug) == 1 and sug[0] in (0, 1, 4), sug
d = json.load(open(sys.argv[2]))
assert "contexts" not in d and [(b["ctx"], b["batch"]) for b in d["batches"]] == [(16, 1), (16, 4)], d
for b in d["batches"]:
    assert b["decode_ms"] > 0 and b["verify_ms"] > 0 and b["expected"][0]["speedup"] > 0, b
assert d["suggested_max_batch"] in (0, 1, 4) and d["suggested_at_acceptance"] == 0.85, d
assert d["suggested_per_ctx"] == [{"ctx": 16, "max_batch": d["suggested_max_batch"]}], d
print("suggested max_batch %d" % sug[0])
EOP
then ok "--batch: rows per batch, suggested max_batch $(cat "$tmp/b.check")"; else bad "--batch: $(cat "$tmp/b.check")"; fi
"$sy" bench-spec -q -c "$ini" --model "$small" --batch 1,2.5 >"$tmp/b2.out" 2>"$tmp/b2.err"
rc=$?
if [ $rc -eq 2 ] && grep -q -- "--batch expects whole sequence counts, found 2.5" "$tmp/b2.err"; then
    ok "bad --batch: exit 2"; else bad "bad --batch: exit $rc: $(cat "$tmp/b2.err")"; fi

# check_json FILE MIN_ACC MAX_ACC: contexts positive, the measured loop equal to plain greedy, acceptance in range
check_json() {
    "$python" - "$@" <<'EOP'
import json, sys
d = json.load(open(sys.argv[1]))
lo, hi = float(sys.argv[2]), float(sys.argv[3])
assert d["method"] == "draft" and d["k"] == 4, d
assert len(d["contexts"]) == 1 and d["contexts"][0]["ctx"] == 32
c = d["contexts"][0]
for k in ("decode_ms", "verify_ms", "draft_ms", "verify_ratio", "draft_ratio", "speedup_measured"):
    assert c[k] > 0, (k, c)
e = c["expected"][0]
assert e["acceptance"] == 0.85 and abs(e["tokens_per_verify"] - (1 - 0.85 ** 5) / 0.15) < 1e-4 and e["speedup"] > 0
m = d["measured"]
assert m["same_as_plain"] is True, m
assert m["drafted"] > 0 and m["verifies"] > 0, m
assert lo <= m["acceptance_rate"] <= hi, m
assert abs(m["mean_accepted_length"] - (1 + m["accepted"] / m["verifies"])) < 1e-4, m
print("acceptance %.3f, mean accepted length %.3f" % (m["acceptance_rate"], m["mean_accepted_length"]))
EOP
}

# 3. The small model as its own draft: every draft is the target's own greedy pick.
drafted() { # NAME DRAFT_DIR [OPTION...]: bench-spec --json with that draft model
    name=$1 dir=$2
    shift 2
    "$sy" bench-spec -q -c "$ini" --model "$small" --set speculative.method=draft --set "speculative.draft_model=$dir" \
        --ctx 32 --rounds 2 --measure 64 --json "$@" >"$tmp/$name.json" 2>"$tmp/$name.err"
}
if drafted self "$small" && r=$(check_json "$tmp/self.json" 1 1 2>&1); then ok "draft = the target itself: $r"; else
    bad "draft = the target itself: $r $(cat "$tmp/self.err" "$tmp/self.json")"; fi

# 4. Another checkpoint with the same tokenizer (another seed and shape): fewer drafts accepted, same output.
if "$SY_BUILDDIR/sy-mkmodel" --preset small --seed 5 --layers 2 --hidden 64 --heads 2 --kv-heads 1 --ffn 128 \
    --out "$tmp/other" >/dev/null 2>"$tmp/mk.err" && cmp -s "$tmp/other/tokenizer.json" "$small/tokenizer.json"; then
    if drafted other "$tmp/other" && r=$(check_json "$tmp/other.json" 0 0.999 2>&1); then
        ok "draft = another checkpoint: $r"; else bad "draft = another checkpoint: $r $(cat "$tmp/other.err")"; fi
else
    bad "sy-mkmodel: another small checkpoint with the same tokenizer: $(cat "$tmp/mk.err")"
fi

# 4a. The measuring loop follows the per-request switch-off: with min_acceptance 1 judged after every verify, the
# first verify with a rejected draft ends speculation (the rest decodes plainly, same output); a draft that is the
# target itself never switches off. --prompt-repeat 2: the prompt is a 32-token block twice.
if drafted strict "$tmp/other" --prompt-repeat 2 --set speculative.min_acceptance=1 --set speculative.policy_window=1 &&
    r=$("$python" - "$tmp/strict.json" "$tmp/self.json" 2>&1 <<'EOP'
import json, sys
m, s = json.load(open(sys.argv[1]))["measured"], json.load(open(sys.argv[2]))["measured"]
assert m["same_as_plain"] is True and m["prompt_tokens"] == 64, m
assert m["accepted"] < m["drafted"] and 0 <= m["switched_off_at"] < m["tokens"], m
assert s["switched_off_at"] == -1 and s["prompt_tokens"] == 32, s
print("switched off after %d of %d tokens (%d verifies)" % (m["switched_off_at"], m["tokens"], m["verifies"]))
EOP
); then ok "bench-spec loop switch-off: $r"; else bad "bench-spec loop switch-off: $r $(cat "$tmp/strict.err")"; fi

# 4b. Through the scheduler (generate --stats): greedy output with the model as its own draft equals plain
#     decoding's, and every draft is accepted.
gen() { "$sy" generate -q -c "$ini" --model "$small" --prompt "Once upon" -n 40 --ignore-eos --print-ids --stats "$@"; }
gen >/dev/null 2>"$tmp/g0.err"
gen --set speculative.method=draft --set "speculative.draft_model=$small" >/dev/null 2>"$tmp/g1.err"
if [ -n "$(grep generated_ids "$tmp/g0.err")" ] &&
    [ "$(grep generated_ids "$tmp/g0.err")" = "$(grep generated_ids "$tmp/g1.err")" ] &&
    grep -Eq "speculative \(draft\): ([0-9]+) drafts, \1 accepted \(acceptance 1.000\)" "$tmp/g1.err"; then
    ok "generate with the model as its own draft: same ids, acceptance 1"; else
    bad "generate with a draft model: $(cat "$tmp/g0.err" "$tmp/g1.err")"; fi

# 5. A draft with another tokenizer: refused, both paths and the difference named.
"$sy" bench-spec -q -c "$ini" --model "$small" --set speculative.method=draft \
    --set "speculative.draft_model=$SY_SHARED_DIR/models/tiny-llama" --ctx 16 --measure 0 >"$tmp/r.out" 2>"$tmp/r.err"
rc=$?
if [ $rc -eq 1 ] && grep -q "draft_model $SY_SHARED_DIR/models/tiny-llama: its tokenizer has 512 tokens, the target's ($small) 1024" "$tmp/r.err"; then
    ok "another vocabulary: refused"; else bad "another vocabulary: exit $rc: $(cat "$tmp/r.err")"; fi
"$sy" bench-spec -q -c "$ini" --model "$SY_SHARED_DIR/models/stories260k" --set speculative.method=draft \
    --set "speculative.draft_model=$SY_SHARED_DIR/models/aidreams260k" --ctx 16 --measure 0 >"$tmp/r.out" 2>"$tmp/r.err"
rc=$?
if [ $rc -eq 1 ] && grep -q "aidreams260k: token [0-9]* is \".*\" in its tokenizer but \".*\" in the target's (.*stories260k)" "$tmp/r.err"; then
    ok "same vocabulary size, other tokens: refused at the first difference"; else
    bad "same vocabulary size, other tokens: exit $rc: $(cat "$tmp/r.err")"; fi

# 6. Bad arguments: exit 2 naming the option.
"$sy" bench-spec --acceptance 1.5 >"$tmp/a.out" 2>"$tmp/a.err"
rc=$?
if [ $rc -eq 2 ] && grep -q -- "--acceptance" "$tmp/a.err"; then ok "bad --acceptance: exit 2"; else
    bad "bad --acceptance: exit $rc: $(cat "$tmp/a.err")"; fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
