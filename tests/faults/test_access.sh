#!/bin/sh
# Where code and sockets come from: a relative `plugin = dir/x.so` in an INI
# file loads from next to that file whatever the working directory (a
# same-named file under the working directory must not be picked up); the
# http frontend listens on loopback unless told otherwise.
set -u
. "${SY_SRCDIR:?run through make check}/tests/faults/lib.sh"

mkdir -p "$tmp/conf" "$tmp/elsewhere/plug"
ln -s "$SY_BUILDDIR/build-plugins" "$tmp/conf/plug"
# A decoy under the working directory with the same relative path: not a plugin at all.
echo "not a plugin" >"$tmp/elsewhere/plug/sy-attn-cpu.so"
awk '/^\[/ { sect = $0 } sect == "[attention]" && /^plugin *=/ { print "plugin = plug/sy-attn-cpu.so"; next } { print }' \
    "$ini" >"$tmp/conf/rel.ini"
grep -q '^plugin = plug/sy-attn-cpu.so' "$tmp/conf/rel.ini" || { echo "FAIL: could not rewrite [attention] in $ini"; exit 1; }
out=$(cd "$tmp/elsewhere" && "$sy" generate -c ../conf/rel.ini --prompt "Hi" -n 2 -v 2>&1)
rc=$?
if [ $rc -eq 0 ] && echo "$out" | grep -q "attention=cpu"; then
    ok "plugin = plug/sy-attn-cpu.so loads from the INI file's directory, not the working directory's decoy"
else
    bad "relative plugin path: exit $rc: $(echo "$out" | tail -2)"
fi
out=$(cd "$tmp/elsewhere" && "$sy" generate -c "$ini" --set attention.plugin=plug/sy-attn-cpu.so --prompt "Hi" -n 2 2>&1)
case $out in *"plug/sy-attn-cpu.so: cannot load"*) ok "from --set, a relative plugin path is the working directory's (and the decoy is refused)" ;;
*) bad "--set attention.plugin=plug/...: $(echo "$out" | tail -1)" ;; esac

# The default listen address is loopback: serve with listen unset.
sed -e '/^listen *=/d' "$ini" >"$tmp/conf/nolisten.ini"
"$sy" serve -c "$tmp/conf/nolisten.ini" >"$tmp/nolisten.out" 2>"$tmp/nolisten.err" &
pid=$!
i=0
while [ $i -lt 100 ] && ! grep -q "listening on\|cannot listen" "$tmp/nolisten.err" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
if grep -q "listening on 127.0.0.1:30000" "$tmp/nolisten.err"; then ok "listen unset: loopback only (127.0.0.1:30000)"
elif grep -q "cannot listen on 127.0.0.1:30000" "$tmp/nolisten.err"; then ok "listen unset: loopback only (127.0.0.1:30000, busy here)"
else bad "listen unset: $(grep -i listen "$tmp/nolisten.err" | head -1)"; fi
kill -TERM "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
pid=
finish
