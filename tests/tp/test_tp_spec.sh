#!/bin/sh
# Speculative decoding under tensor parallelism: `switchyard generate --tp 2`
# with [speculative] method = ngram gives the same greedy tokens as one rank
# without speculation, dense and MoE, and drafts were accepted (else the
# comparison proves nothing); with method = mtp on the DeepSeek-V3, GLM-4.5
# and GLM-5 presets the same tokens, and the same drafts as one rank's.
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

# method = mtp: the MTP layer sharded like the target's (MLA or GQA, MoE with shared experts, GLM-5's indexer),
# run by every rank from rank 0's plans. Random weights accept almost no draft, so beyond the tokens (--tp 2
# with mtp = one rank plain = one rank with mtp) the drafts themselves (-v logs each proposal) must be the ones
# one rank proposes.
mtp='--set speculative.method=mtp --set speculative.num_draft_tokens=3 --set speculative.min_acceptance=0'
for p in test-deepseek-v3 test-glm4-moe test-glm5; do
    "$SY_BUILDDIR/sy-mkmodel" --preset "$p" --seed 7 --quiet --out "$tmp/$p" >/dev/null 2>&1
    gen --model "$tmp/$p" --prompt-ids 1,2,3,4,5 -n 24 >/dev/null 2>"$tmp/err0"
    # shellcheck disable=SC2086
    gen -v --model "$tmp/$p" --prompt-ids 1,2,3,4,5 -n 24 $mtp >/dev/null 2>"$tmp/err1"
    # shellcheck disable=SC2086
    gen -v --model "$tmp/$p" --prompt-ids 1,2,3,4,5 -n 24 --tp 2 --stats $mtp >/dev/null 2>"$tmp/err2"
    plain=$(sed -n 's/^generated_ids: //p' "$tmp/err0")
    one=$(sed -n 's/^generated_ids: //p' "$tmp/err1")
    two=$(sed -n 's/^generated_ids: //p' "$tmp/err2")
    n=$(sed -n 's/^speculative (mtp): \([0-9]*\) drafts, .*/\1/p' "$tmp/err2")
    if [ -n "$two" ] && [ "$two" = "$plain" ] && [ "$one" = "$plain" ] && [ "${n:-0}" -gt 0 ]; then
        ok "$p: --tp 2 with mtp = --tp 1 plain = --tp 1 with mtp (24 tokens, $n drafts)"
    else
        bad "$p: tp1 plain [$plain] tp1 mtp [$one] tp2 mtp [$two] drafts [$n] ($(grep -v DEBUG "$tmp/err2"))"
    fi
    same_mtp_drafts "$p: --tp 2" "$tmp/err1" "$tmp/err2"
done
finish
