#!/bin/sh
# `switchyard generate --stats` with [speculative] method = ngram at --tp 1:
# the greedy ids equal a plain run's, and the stats line reports the
# drafts, the acceptance rate and the mean accepted length, consistent with
# each other (acceptance = accepted / drafts, mean = 1 + accepted /
# verifies) and with drafts accepted (else the identity proves nothing).
set -u
. "${SY_SRCDIR:?run through make check}/tests/cli/lib.sh"
need_model stories260k
gen() { "$sy" generate -q -c "$cfg" --model "$SY_SHARED_DIR/models/stories260k" --print-ids --ignore-eos -n 48 "$@"; }

prompt='Once upon a time, there was a little girl named Lily. Once upon a time, there was a little'
gen --prompt "$prompt" >/dev/null 2>"$tmp/plain"
plain=$(sed -n 's/^generated_ids: //p' "$tmp/plain")
gen --prompt "$prompt" --stats --set speculative.method=ngram --set speculative.num_draft_tokens=3 \
    >/dev/null 2>"$tmp/spec"
spec=$(sed -n 's/^generated_ids: //p' "$tmp/spec")
line=$(grep '^speculative (ngram): ' "$tmp/spec")
if [ -n "$plain" ] && [ "$spec" = "$plain" ]; then ok "ngram greedy ids = plain ids (48 tokens)"; else
    bad "ids: plain [$plain] ngram [$spec] ($(cat "$tmp/spec"))"; fi
# speculative (ngram): D drafts, A accepted (acceptance R); V verifies, mean accepted length M tokens per verify
set -- $(echo "$line" | sed -n 's/^speculative (ngram): \([0-9]*\) drafts, \([0-9]*\) accepted (acceptance \([0-9.]*\)); \([0-9]*\) verifies, mean accepted length \([0-9.]*\) tokens per verify$/\1 \2 \3 \4 \5/p')
if [ $# -eq 5 ] && [ "$2" -gt 0 ] &&
    awk -v d="$1" -v a="$2" -v r="$3" -v v="$4" -v m="$5" \
        'BEGIN { exit !(d > 0 && v > 0 && (r - a / d) ^ 2 < 1e-6 && (m - 1 - a / v) ^ 2 < 1e-6 && m > 1) }'; then
    ok "stats: $1 drafts, $2 accepted, acceptance $3, $4 verifies, mean accepted length $5"
else
    bad "stats line missing, inconsistent or without accepted drafts: [$line] ($(cat "$tmp/spec"))"
fi
echo "# $pass passed, $fail failed"
[ "$fail" -eq 0 ]
