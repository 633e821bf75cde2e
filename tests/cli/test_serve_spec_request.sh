#!/bin/sh
# A request's num_draft_tokens through `switchyard serve` and the real HTTP
# frontend, on ../shared's stories260k with [speculative] method = ngram,
# num_draft_tokens = 3 (greedy stories260k loops, so prompt lookup drafts):
#   - -1, "3", 2.5 and 4 (> k) get a 400 whose message names the field and
#     says what it found, on /v1/completions, /v1/chat/completions and
#     /v1/messages; /v1/messages/count_tokens refuses the field, naming it;
#   - /metrics: num_draft_tokens = 0 adds verifies and drafts of 0, = 1
#     adds at most one draft per verify, left out it drafts more than one
#     per verify (else the limit proves nothing);
#   - the greedy text is the same with the field left out, 0, 1 and 3, and
#     the same as a server without speculation;
#   - on that server (no [speculative] method) any value, 0 included, is a
#     400 naming the field, and leaving it out works.
set -u
. "${SY_SRCDIR:?run through make check}/tests/faults/lib.sh"
need_model stories260k
model=$SY_SHARED_DIR/models/stories260k
json='content-type: application/json'
prompt='Once upon a time, there was a little girl named Lily. Once upon a time, there was a little'

# post PATH BODY: the response body, then a line with the HTTP status.
post() { curl -s -w '\n%{http_code}' "http://127.0.0.1:$port$1" -H "$json" -d "$2"; }

# refused NAME PATH BODY WANT: a 400 whose body names num_draft_tokens and contains WANT.
refused() {
    out=$(post "$2" "$3")
    code=$(echo "$out" | tail -n 1)
    case $code:$out in
    400:*num_draft_tokens*"$4"*) ok "$1: 400 naming num_draft_tokens ($4)" ;;
    *) bad "$1: expected a 400 naming num_draft_tokens with '$4', got: $out" ;;
    esac
}

# spec_counts: "drafts verifies" of method ngram from one /metrics read.
spec_counts() {
    curl -s "http://127.0.0.1:$port/metrics" >"$tmp/metrics.txt"
    for m in switchyard_spec_draft_tokens_total switchyard_spec_verifies_total; do
        v=$(sed -n "s/^$m{model_name=\"[^\"]*\",method=\"ngram\"} //p" "$tmp/metrics.txt")
        printf '%s ' "${v:-missing}"
    done
}

# complete FIELD: the greedy text of one /v1/completions request (FIELD: extra JSON, e.g. ', "num_draft_tokens": 1').
complete() {
    post /v1/completions "{\"prompt\": \"$prompt\", \"max_tokens\": 40, \"temperature\": 0, \"ignore_eos\": true$1}" |
        python3 -c 'import json, sys; print(json.loads(sys.stdin.read().rsplit("\n", 1)[0])["choices"][0]["text"])'
}

# ---------------------------------------------------------------- speculation on, k = 3
start_server spec --model "$model" --set speculative.method=ngram --set speculative.num_draft_tokens=3
for ep in /v1/completions /v1/chat/completions /v1/messages; do
    case $ep in
    /v1/completions) base='"prompt": "Once upon a time", "max_tokens": 4' ;;
    /v1/chat/completions) base='"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4' ;;
    *) base='"model": "stories260k", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4' ;;
    esac
    refused "$ep -1" $ep "{$base, \"num_draft_tokens\": -1}" "found -1"
    refused "$ep \"3\"" $ep "{$base, \"num_draft_tokens\": \"3\"}" "found a string"
    refused "$ep 2.5" $ep "{$base, \"num_draft_tokens\": 2.5}" "found a number with a fraction"
    refused "$ep 4 > k" $ep "{$base, \"num_draft_tokens\": 4}" "[0, 3]"
done
refused "count_tokens" /v1/messages/count_tokens \
    '{"model": "stories260k", "messages": [{"role": "user", "content": "hi"}], "num_draft_tokens": 1}' \
    "count_tokens does not take this field"

# shellcheck disable=SC2046
set -- $(spec_counts)
d0=$1 v0=$2
t_absent=$(complete '')
set -- $(spec_counts)
d1=$1 v1=$2
t_zero=$(complete ', "num_draft_tokens": 0')
set -- $(spec_counts)
d2=$1 v2=$2
t_one=$(complete ', "num_draft_tokens": 1')
set -- $(spec_counts)
d3=$1 v3=$2
t_three=$(complete ', "num_draft_tokens": 3')
if [ $((d1 - d0)) -gt $((v1 - v0)) ] && [ $((v1 - v0)) -gt 0 ]; then
    ok "left out: $((d1 - d0)) drafts in $((v1 - v0)) verifies (more than one per verify)"
else bad "left out: $((d1 - d0)) drafts in $((v1 - v0)) verifies; expected more than one per verify"; fi
[ "$d2" = "$d1" ] && [ "$v2" = "$v1" ] && ok "num_draft_tokens 0: no drafts, no verifies" ||
    bad "num_draft_tokens 0: $((d2 - d1)) drafts, $((v2 - v1)) verifies; expected 0"
if [ $((v3 - v2)) -gt 0 ] && [ $((d3 - d2)) -le $((v3 - v2)) ]; then
    ok "num_draft_tokens 1: $((d3 - d2)) drafts in $((v3 - v2)) verifies (at most one per verify)"
else bad "num_draft_tokens 1: $((d3 - d2)) drafts in $((v3 - v2)) verifies; expected verifies and <= 1 per verify"; fi
[ -n "$t_absent" ] && [ "$t_zero" = "$t_absent" ] && [ "$t_one" = "$t_absent" ] && [ "$t_three" = "$t_absent" ] &&
    ok "greedy text identical with the field left out, 0, 1 and 3" ||
    bad "greedy texts differ: [$t_absent] [$t_zero] [$t_one] [$t_three]"
stop_server spec

# ---------------------------------------------------------------- no speculation
start_server plain --model "$model"
t_plain=$(complete '')
[ "$t_plain" = "$t_absent" ] && ok "greedy text identical to the server without speculation" ||
    bad "without speculation: [$t_plain], with: [$t_absent]"
refused "off: /v1/completions 0" /v1/completions \
    '{"prompt": "Once upon a time", "max_tokens": 4, "num_draft_tokens": 0}' "does not speculate"
refused "off: /v1/chat/completions 2" /v1/chat/completions \
    '{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "num_draft_tokens": 2}' "does not speculate"
refused "off: /v1/messages 1" /v1/messages \
    '{"model": "stories260k", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "num_draft_tokens": 1}' \
    "does not speculate"
stop_server plain
finish
