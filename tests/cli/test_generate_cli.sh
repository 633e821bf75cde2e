#!/bin/sh
# `switchyard generate` as a user runs it: the README's stories260k
# continuation exactly, the default build config writing that story too,
# sampling reproducibility, and clear errors for bad input.
set -u
. "${SY_SRCDIR:?run through make check}/tests/cli/lib.sh"
need_model stories260k

# 1. The continuation that ../shared/models/README.md lists, from the text prompt.
want=', there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball.'
got=$("$sy" generate -q -c "$cfg" --model "$SY_SHARED_DIR/models/stories260k" --prompt "Once upon a time" -n 40 2>"$tmp/err")
if [ "$got" = "$want" ]; then ok "stories260k greedy text"; else bad "stories260k: got [$got] want [$want] ($(cat "$tmp/err"))"; fi

# 2. The default build config serves the model in the source tree, stories260k: a first run writes text
# (the synthetic default it replaced wrote noise).
got=$("$sy" generate -q -c "$cfg" --prompt "Once upon a time" -n 40 2>"$tmp/err")
if [ "$got" = "$want" ]; then ok "default config writes the story"; else
    bad "default config: got [$got] want [$want] ($(cat "$tmp/err"))"; fi

# 3. Same seed, same text; sampling works with every filter.
a=$("$sy" generate -q -c "$cfg" --prompt "Hi" -n 16 --temperature 0.9 --top-p 0.9 --top-k 40 --min-p 0.01 --seed 7 2>&1)
b=$("$sy" generate -q -c "$cfg" --prompt "Hi" -n 16 --temperature 0.9 --top-p 0.9 --top-k 40 --min-p 0.01 --seed 7 2>&1)
if [ -n "$a" ] && [ "$a" = "$b" ]; then ok "seeded sampling reproduces"; else bad "seeded sampling: [$a] vs [$b]"; fi

# 4. Errors: exit status and a message that says what was expected and where.
expect_err() { # name, expected status, expected text, command...
    name=$1 st=$2 text=$3
    shift 3
    "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ $rc -eq "$st" ] && grep -F -- "$text" "$tmp/err" >/dev/null; then
        ok "$name"
    else
        bad "$name: exit $rc (want $st), stderr: $(cat "$tmp/err")"
    fi
}
expect_err "unknown option" 2 'unknown option "--bogus"' "$sy" generate -c "$cfg" --prompt x --bogus
expect_err "bad -n" 2 'expects an integer' "$sy" generate -c "$cfg" --prompt x -n abc
expect_err "bad temperature" 2 'expects a number in [0, 100]' "$sy" generate -c "$cfg" --prompt x --temperature -1
expect_err "no prompt" 2 'exactly one of --prompt' "$sy" generate -c "$cfg"
expect_err "missing model dir" 1 "$tmp/nowhere" "$sy" generate -c "$cfg" --model "$tmp/nowhere" --prompt x
expect_err "bad --set" 1 'expected section.key=value' "$sy" generate -c "$cfg" --set nodot --prompt x
printf '[model]\npath = %s\n[scheduler]\nmax_runing = 4\n' "$SY_BUILDDIR/models/small" >"$tmp/typo.ini"
expect_err "unknown key with file:line" 1 "$tmp/typo.ini:4" "$sy" generate -c "$tmp/typo.ini" --plugin-dir "$SY_BUILDDIR/build-plugins" --prompt x
expect_err "token id out of range" 1 'outside the vocabulary' "$sy" generate -c "$cfg" --prompt-ids 1,2,99999999 -n 2
expect_err "missing config" 1 "$tmp/none.ini" "$sy" generate -c "$tmp/none.ini" --prompt x

# 5. The plugins command lists the CPU plugins with their scores.
if "$sy" plugins -c "$cfg" >"$tmp/out" 2>&1 && grep -E '^device +cpu ' "$tmp/out" >/dev/null &&
    grep -E '^attn +cpu-ref ' "$tmp/out" >/dev/null; then ok "plugins lists device cpu and attn cpu-ref"; else bad "plugins: $(cat "$tmp/out")"; fi

# kv_cache_size is bytes of cache in the configured kv_dtype: BF16 holds twice the tokens of F32
# (it used to be counted at 4 bytes an element whatever the dtype, wasting half the budget).
blocks() { # kv_dtype -> the KV pool's block count
    "$sy" generate -c "$cfg" --model "$SY_SHARED_DIR/models/stories260k" --prompt-ids 1,2 -n 2 \
        --set attention.kv_dtype="$1" --set scheduler.kv_cache_size=2M 2>&1 | sed -n 's/.*KV pool \([0-9]*\) blocks.*/\1/p'
}
b32=$(blocks f32)
b16=$(blocks bf16)
if [ -n "$b32" ] && [ -n "$b16" ] && [ "$b16" -eq $((2 * b32)) ]; then ok "kv_cache_size 2M: $b32 F32 blocks, $b16 BF16"; else
    bad "kv_cache_size 2M: F32 [$b32] blocks, BF16 [$b16] (expected twice as many)"; fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
