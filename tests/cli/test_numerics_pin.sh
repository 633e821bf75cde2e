#!/bin/sh
# The tests' numerics pin and the SWITCHYARD_SET overrides as a user meets
# them: make check's environment pins [device] and [moe] matmul = f32 (the
# default, auto, is bf16 on a CPU with AMX or AVX512_BF16, where the exact
# tests would fail), the engine's start-up line says what each plugin
# resolved, and the variable sits between the config file and --set.
set -u
. "${SY_SRCDIR:?run through make check}/tests/cli/lib.sh"
need_model tiny-mixtral
moe_model=$SY_SHARED_DIR/models/tiny-mixtral
gen() { # CONFIG [ARGS]: 2 tokens on the MoE model (device and moe plugins), stderr to $tmp/log
    c=$1
    shift
    "$sy" generate -c "$c" --model "$moe_model" --prompt-ids 1,2,3 -n 2 "$@" >"$tmp/out" 2>"$tmp/log"
}
count() { grep -c -F -- "$1" "$tmp/log"; }
matmul_lines() { grep -F 'matmul' "$tmp/log" || cat "$tmp/log"; }

# 1. The suite's environment pins f32, for both plugins.
case " ${SWITCHYARD_SET:-} " in
*" device.matmul=f32 "*) case " ${SWITCHYARD_SET:-} " in
    *" moe.matmul=f32 "*) ok "make check exports SWITCHYARD_SET=\"$SWITCHYARD_SET\"" ;;
    *) bad "SWITCHYARD_SET=\"${SWITCHYARD_SET:-}\" lacks moe.matmul=f32 (Makefile.am AM_TESTS_ENVIRONMENT)" ;;
    esac ;;
*) bad "SWITCHYARD_SET=\"${SWITCHYARD_SET:-}\" lacks device.matmul=f32 (Makefile.am AM_TESTS_ENVIRONMENT): the exact tests would run bf16 on an AMX CPU" ;;
esac

# 2. Under it the engine runs f32 in both plugins, one line each.
if gen "$cfg" && [ "$(count 'matmul = f32: F32 products')" -eq 2 ] && [ "$(count 'matmul = ')" -eq 2 ]; then
    ok "engine under the suite's environment: device and moe say matmul = f32"
else
    bad "engine under the suite's environment: $(matmul_lines)"
fi

# 3. Without the variable the default is auto, resolved once per plugin (bf16 or f32 by CPU, never a warning
# on a CPU that simply lacks BF16).
if (unset SWITCHYARD_SET && gen "$cfg") &&
    [ "$(count 'matmul = auto: ')" -eq 2 ] && ! grep -F 'matmul = ' "$tmp/log" | grep -qi 'warn'; then
    ok "default: $(grep -F -m1 'matmul = auto' "$tmp/log" | sed 's/.*matmul = /matmul = /')"
else
    bad "default matmul: $(matmul_lines)"
fi

# 4. --set beats the environment (a test of auto or bf16 names the key).
if gen "$cfg" --set device.matmul=auto && [ "$(count 'matmul = auto: ')" -eq 1 ] && [ "$(count 'matmul = f32: ')" -eq 1 ]; then
    ok "--set device.matmul=auto over SWITCHYARD_SET (moe stays pinned)"
else
    bad "--set over SWITCHYARD_SET: $(matmul_lines)"
fi

# 5. The environment beats the file.
sed 's/^\[device\]$/[device]\nmatmul = bf16/' "$cfg" >"$tmp/bf16.ini"
if grep -q '^matmul = bf16' "$tmp/bf16.ini" && gen "$tmp/bf16.ini" && [ "$(count 'matmul = f32: ')" -eq 2 ]; then
    ok "SWITCHYARD_SET over the file's [device] matmul = bf16"
else
    bad "SWITCHYARD_SET over the file: $(matmul_lines)"
fi

# 6. Errors name the variable; a key the plugin does not declare is ignored (device.matmul means nothing to cuda).
expect_err() { # name, text, SWITCHYARD_SET value
    SWITCHYARD_SET=$3 "$sy" generate -c "$cfg" --prompt-ids 1,2 -n 1 >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ $rc -eq 1 ] && grep -F -- "$2" "$tmp/err" >/dev/null; then ok "$1"; else bad "$1: exit $rc, stderr: $(cat "$tmp/err")"; fi
}
expect_err "SWITCHYARD_SET entry without =" \
    'SWITCHYARD_SET entry 2, "nodot": expected section.key=value (e.g. scheduler.max_running=64), found no "=" in "nodot"' \
    "device.matmul=f32 nodot"
expect_err "SWITCHYARD_SET bad value" 'found "fp8" in SWITCHYARD_SET device.matmul=fp8' "device.matmul=fp8"
expect_err "SWITCHYARD_SET unknown section" 'unknown section [devce]' "devce.matmul=f32"
if SWITCHYARD_SET="device.matmul=f32 device.no_such_key=1" "$sy" generate -c "$cfg" --prompt-ids 1,2 -n 1 >"$tmp/out" 2>"$tmp/log"; then
    ok "a key the plugin does not declare is ignored"
else
    bad "undeclared key from SWITCHYARD_SET: $(cat "$tmp/log")"
fi
if "$sy" generate -c "$cfg" --prompt-ids 1,2 -n 1 --set device.no_such_key=1 >"$tmp/out" 2>"$tmp/err"; then
    bad "--set device.no_such_key=1 accepted"
elif grep -F 'unknown key "no_such_key"' "$tmp/err" >/dev/null; then
    ok "the same key from --set is still an error"
else
    bad "--set device.no_such_key: $(cat "$tmp/err")"
fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
