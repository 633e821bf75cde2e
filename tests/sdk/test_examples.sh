#!/bin/sh
# The example plugins (examples/plugins/) as a plugin author builds them:
# their own plain Makefile and pkg-config against an installed SDK, nothing
# else; only the entry point exported; `switchyard plugin-check` passes each;
# and a configuration edit alone puts them to work: generate through
# example-device, example-attn, example-moe and example-comm gives the
# in-tree plugins' tokens, and serve with example-line answers prompts over
# its Unix socket, streaming, and reports a failing attention plugin as
# "error: 500 ..." while staying up.
#
#   tests/sdk/test_examples.sh
#       (make check) installs the SDK from $SY_BUILDDIR into a scratch DESTDIR.
#   tests/sdk/test_examples.sh --installed SWITCHYARD_BIN PKGCONFIG_DIR [DESTDIR]
#       (make installcheck, so distcheck) an existing installation; builds and
#       plugin-checks the examples only.
set -u
. "$(dirname "$0")/lib.sh"

if [ "${1:-}" = --installed ]; then
    [ $# -ge 3 ] || { echo "usage: $0 --installed SWITCHYARD_BIN PKGCONFIG_DIR [DESTDIR]" >&2; exit 2; }
    installed=1
    sy=$2
    pcdir=$3
    sysroot=${4:-}
else
    installed=0
    : "${SY_BUILDDIR:?run through make check}"
    need_shared
    sy=$SY_BUILDDIR/switchyard
    sysroot=$tmp/root
    # Only the SDK's install rules; the parent make's jobserver is not ours.
    if ! env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL "${MAKE:-make}" -s -C "$SY_BUILDDIR" DESTDIR="$sysroot" \
        install-pkgincludeHEADERS install-pkgconfigDATA install-dist_aclocalDATA >"$tmp/install.log" 2>&1; then
        cat "$tmp/install.log" >&2
        echo "FAIL: installing the SDK into $sysroot failed" >&2
        exit 1
    fi
    pc=$(find "$sysroot" -name switchyard-plugin.pc | head -n 1)
    [ -n "$pc" ] || { echo "FAIL: the SDK install in $sysroot has no switchyard-plugin.pc" >&2; exit 1; }
    pcdir=$(dirname "$pc")
fi
[ -x "$sy" ] || { echo "FAIL: $sy is not an executable" >&2; exit 1; }

# 1. The examples' own Makefile, with pkg-config seeing only the SDK under test.
ex=$tmp/ex
mkdir "$ex"
if env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL PKG_CONFIG_PATH="$pcdir" PKG_CONFIG_LIBDIR="$pcdir" \
    PKG_CONFIG_SYSROOT_DIR="$sysroot" PKG_CONFIG_ALLOW_SYSTEM_CFLAGS=1 \
    "${MAKE:-make}" -f "$SY_SRCDIR/examples/plugins/Makefile" OUT="$ex" >"$tmp/build.log" 2>&1; then
    ok "examples build with their Makefile and pkg-config alone"
else
    bad "examples build: $(cat "$tmp/build.log")"
fi
for p in device attn moe comm line; do
    so=$ex/example-$p.so
    exports=$("${NM:-nm}" -D --defined-only "$so" 2>/dev/null | awk '$3 !~ /^_/ { print $3 }' | tr '\n' ' ')
    if [ "$exports" = "sy_plugin_v1 " ]; then ok "example-$p.so exports only sy_plugin_v1"; else
        bad "example-$p.so exports: $exports"; fi
done

# 2. plugin-check passes every example.
check() { # name, then plugin-check arguments
    name=$1
    shift
    if "$sy" plugin-check "$@" >"$tmp/check.out" 2>&1 && grep -q ' 0 failed' "$tmp/check.out" &&
        ! grep -q ' FAIL ' "$tmp/check.out"; then
        ok "plugin-check $name: $(tail -n 1 "$tmp/check.out" | sed 's/.*: //')"
    else
        bad "plugin-check $name: $(cat "$tmp/check.out")"
    fi
}
check example-device "$ex/example-device.so"
check example-attn "$ex/example-attn.so"
grep -q 'forward .*f32 kv: heads 4/2.* OK ' "$tmp/check.out" || bad "example-attn: the f32 forward row is not OK"
check example-moe "$ex/example-moe.so"
grep -q 'forward .*sigmoid bias: 13 tok.* OK ' "$tmp/check.out" || bad "example-moe: the sigmoid-bias row is not OK"
check example-comm "$ex/example-comm.so"
if [ "$installed" = 1 ]; then
    plugindir=$(PKG_CONFIG_PATH="$pcdir" PKG_CONFIG_LIBDIR="$pcdir" "${PKG_CONFIG:-pkg-config}" --variable=plugindir \
        switchyard-plugin)
    plugindir=$sysroot$plugindir
else
    plugindir=${SY_PLUGIN_DIR:?run through make check}
fi
check "example-comm forwarding to comm-local" "$ex/example-comm.so" --set "inner=$plugindir/sy-comm-local.so"
check example-line "$ex/example-line.so" --set "socket=$tmp/check.sock"

if [ "$installed" = 1 ]; then
    finish
    exit
fi

# 3. generate: a config edit puts example-device, example-attn, example-moe
# and example-comm into the engine, with the built-in plugins' greedy tokens.
sed '/^\[frontend:api\]/,$d' "$SY_BUILDDIR/etc/switchyard-build.ini" >"$tmp/base.ini"
model=$SY_SHARED_DIR/models/stories260k
gen() { # out-file, then --set arguments
    o=$1
    shift
    "$sy" generate -q -c "$tmp/base.ini" --model "$model" --prompt "Once upon a time" -n 24 --ignore-eos \
        --print-ids "$@" >"$o.txt" 2>"$o.err"
}
gen "$tmp/cpu" --set attention.plugin=cpu || bad "generate with attention cpu: $(cat "$tmp/cpu.err")"
if gen "$tmp/ex-attn" --set "attention.plugin=$ex/example-attn.so" &&
    [ -n "$(ids_of "$tmp/cpu.err")" ] && [ "$(ids_of "$tmp/ex-attn.err")" = "$(ids_of "$tmp/cpu.err")" ]; then
    ok "generate through example-attn: the cpu plugin's 24 tokens"
else
    bad "generate through example-attn: $(ids_of "$tmp/ex-attn.err") vs $(ids_of "$tmp/cpu.err"): $(cat "$tmp/ex-attn.err")"
fi
if gen "$tmp/ex-dev" --set "device.plugin=$ex/example-device.so" &&
    [ "$(ids_of "$tmp/ex-dev.err")" = "$(ids_of "$tmp/cpu.err")" ]; then
    ok "generate on example-device: the cpu device's 24 tokens"
else
    bad "generate on example-device: $(ids_of "$tmp/ex-dev.err") vs $(ids_of "$tmp/cpu.err"): $(cat "$tmp/ex-dev.err")"
fi
for m in tiny-mixtral tiny-qwen3moe; do
    "$sy" generate -q -c "$tmp/base.ini" --model "$SY_SHARED_DIR/models/$m" --prompt "Once upon a time" -n 24 \
        --ignore-eos --print-ids --set moe.plugin=cpu >/dev/null 2>"$tmp/moe-cpu.err"
    "$sy" generate -q -c "$tmp/base.ini" --model "$SY_SHARED_DIR/models/$m" --prompt "Once upon a time" -n 24 \
        --ignore-eos --print-ids --set "moe.plugin=$ex/example-moe.so" >/dev/null 2>"$tmp/moe-ex.err"
    if [ -n "$(ids_of "$tmp/moe-cpu.err")" ] && [ "$(ids_of "$tmp/moe-ex.err")" = "$(ids_of "$tmp/moe-cpu.err")" ]; then
        ok "generate $m through example-moe: the cpu plugin's 24 tokens"
    else
        bad "generate $m through example-moe: $(ids_of "$tmp/moe-ex.err") vs $(ids_of "$tmp/moe-cpu.err"): $(cat "$tmp/moe-ex.err")"
    fi
done
if gen "$tmp/ex-comm" --set "comm.plugin=$ex/example-comm.so" &&
    [ "$(ids_of "$tmp/ex-comm.err")" = "$(ids_of "$tmp/cpu.err")" ]; then
    ok "generate with [comm] example-comm: same tokens"
else
    bad "generate with example-comm: $(cat "$tmp/ex-comm.err")"
fi

# 4. serve with the line frontend: answers each line over the socket.
sock=$tmp/line.sock
ask() { # socket, then prompt lines; prints each answer line
    python3 - "$@" <<'PY'
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.settimeout(120)
s.connect(sys.argv[1])
def once(line):
    s.sendall(line.encode() + b"\n")
    buf = b""
    while not buf.endswith(b"\n"):
        d = s.recv(4096)
        if not d:
            break
        buf += d
    return buf.decode()
# The socket is up before the model has loaded (frontends start first and
# answer 503 meanwhile); retry those as a real client would.
deadline = time.time() + 120
for line in sys.argv[2:]:
    ans = once(line)
    while ans.startswith("error: 503") and time.time() < deadline:
        time.sleep(0.1)
        ans = once(line)
    sys.stdout.write(ans)
PY
}
serve() { # log name, then extra serve arguments
    name=$1
    shift
    cat "$tmp/base.ini" >"$tmp/serve.ini"
    printf '[frontend:line]\nplugin = %s\nsocket = %s\nmax_tokens = 20\n' "$ex/example-line.so" "$sock" >>"$tmp/serve.ini"
    rm -f "$sock"
    "$sy" serve -q -c "$tmp/serve.ini" --model "$model" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
    spid=$!
    pids="$pids $spid"
    i=0
    while [ ! -S "$sock" ] && [ $i -lt 300 ] && kill -0 "$spid" 2>/dev/null; do
        sleep 0.1
        i=$((i + 1))
    done
}
stop_serve() { # name
    kill -TERM "$spid" 2>/dev/null
    wait "$spid"
    rc=$?
    if [ $rc -eq 0 ]; then ok "$1: SIGTERM, exit 0"; else bad "$1: exit $rc after SIGTERM: $(cat "$tmp/$1.err")"; fi
}

serve line
"$sy" generate -q -c "$tmp/base.ini" --model "$model" --prompt "Once upon a time" -n 20 >"$tmp/want20.txt" 2>/dev/null
want=$(cat "$tmp/want20.txt")
got=$(ask "$sock" "Once upon a time" "Once upon a time" 2>"$tmp/ask.err")
first=$(printf '%s\n' "$got" | sed -n 1p)
second=$(printf '%s\n' "$got" | sed -n 2p)
if [ -n "$want" ] && [ "$first" = "$want" ] && [ "$second" = "$want" ]; then
    ok "serve + example-line: two prompts on one connection, each the greedy text"
else
    bad "serve + example-line: got [$got] want [$want] $(cat "$tmp/ask.err" "$tmp/line.err")"
fi
stop_serve line

# 5. An attention plugin whose every op fails (sysdk-fail, forward fails):
# each request is answered with the error, status 500, and the server stays up.
SYSDK_PROBE=1
export SYSDK_PROBE
: "${SY_TEST_PLUGIN_DIR:?run through make check}"
serve failing --plugin-dir "$SY_TEST_PLUGIN_DIR" --set attention.plugin=sysdk-fail --set attention.fail_from=forward
got=$(ask "$sock" "Once upon a time" "Another prompt" 2>"$tmp/ask.err")
n=$(printf '%s\n' "$got" | grep -c '^error: 500 .*forward fails on purpose')
if [ "$n" = 2 ]; then ok "failing attention plugin: both prompts answered \"error: 500 ...\" with its message"; else
    bad "failing attention plugin: [$got] $(cat "$tmp/ask.err" "$tmp/failing.err")"; fi
stop_serve failing

finish
