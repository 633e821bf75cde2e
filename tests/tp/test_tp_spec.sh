#!/bin/sh
# Speculative decoding (ngram) under tensor parallelism: `switchyard
# generate --tp 2` with [speculative] method = ngram gives the same greedy
# tokens as one rank without speculation, dense and MoE, and drafts were
# accepted (else the comparison proves nothing).
set -u
. "$SY_SRCDIR/tests/tp/tp_lib.sh"
trap 'rm -rf "$tmp"' EXIT
gen() { "$sy" generate -q -c "$cfg" --set device.threads=1 --ignore-eos --print-ids "$@"; }

accepted=0
for m in stories260k tiny-mixtral; do
    for i in 0 1 2; do
        ids=$(expected "$m" "$i" prompt_ids)
        gen --model "$models/$m" --prompt-ids "$ids" -n 40 >/dev/null 2>"$tmp/err1"
        one=$(sed -n 's/^generated_ids: //p' "$tmp/err1")
        gen --model "$models/$m" --prompt-ids "$ids" -n 40 --tp 2 --stats --set speculative.method=ngram \
            --set speculative.num_draft_tokens=3 >/dev/null 2>"$tmp/err2"
        two=$(sed -n 's/^generated_ids: //p' "$tmp/err2")
        acc=$(sed -n 's/^speculative (ngram): [0-9]* drafts, \([0-9]*\) accepted.*/\1/p' "$tmp/err2")
        if [ -n "$two" ] && [ "$two" = "$one" ] && [ -n "$acc" ]; then
            ok "$m prompt $i: --tp 2 with ngram = --tp 1 plain (40 tokens, $acc drafts accepted)"
            accepted=$((accepted + acc))
        else
            bad "$m prompt $i: tp1 plain [$one] tp2 ngram [$two] ($(cat "$tmp/err2"))"
        fi
    done
done
if [ "$accepted" -gt 0 ]; then ok "drafts were accepted under --tp 2 ($accepted)"; else
    bad "no draft was accepted under --tp 2: the identity above proves nothing"; fi
finish
