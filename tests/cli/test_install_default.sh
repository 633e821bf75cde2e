#!/bin/sh
# `make install` puts the default model, stories260k, where the installed
# switchyard.ini's [model] path points, and that config writes its story;
# `make uninstall` takes the model away again. Only the config's and the
# model's install rules run (nothing rebuilds), into a scratch DESTDIR; the
# build tree's binary and plugins run the config.
set -u
. "${SY_SRCDIR:?run through make check}/tests/cli/lib.sh"
root=$tmp/root
# The parent make's jobserver flags are not ours to use.
submake() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL "${MAKE:-make}" -s -C "$SY_BUILDDIR" DESTDIR="$root" "$@"; }

if ! submake install-swconfDATA install-dist_sydefmodelDATA >"$tmp/install.log" 2>&1; then
    echo "FAIL: installing the config and the model into $root: $(cat "$tmp/install.log")"
    exit 1
fi
ini=$(find "$root" -path '*/switchyard/switchyard.ini' -type f | head -n 1)
[ -n "$ini" ] || { echo "FAIL: the install into $root has no switchyard/switchyard.ini"; exit 1; }
model=$(sed -n '/^\[model\]/,/^\[/s/^path *= *//p' "$ini")
case $model in
/*) ok "installed switchyard.ini: [model] path = $model" ;;
*) bad "installed switchyard.ini: [model] path is [$model], expected an absolute directory"; model=/nonexistent ;;
esac

missing=
for f in "$SY_SRCDIR"/models/stories260k/*; do
    cmp -s "$f" "$root$model/$(basename "$f")" || missing="$missing $(basename "$f")"
done
if [ -z "$missing" ]; then ok "every file of models/stories260k installed in $model"; else
    bad "not installed, or not the same, under $root$model:$missing"; fi

sed "s|^path *= *$model\$|path = $root$model|" "$ini" >"$tmp/installed.ini"
want=', there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball.'
got=$("$sy" generate -q -c "$tmp/installed.ini" --plugin-dir "$SY_BUILDDIR/build-plugins" --prompt "Once upon a time" \
    -n 40 2>"$tmp/err")
if [ "$got" = "$want" ]; then ok "the installed config writes the story"; else
    bad "the installed config: got [$got] want [$want] ($(cat "$tmp/err"))"; fi

if submake uninstall-dist_sydefmodelDATA >"$tmp/uninstall.log" 2>&1 &&
    [ -z "$(find "$root$model" -type f 2>/dev/null)" ]; then
    ok "uninstall removes the model"
else
    bad "uninstall left: $(find "$root$model" -type f 2>/dev/null | tr '\n' ' ') $(cat "$tmp/uninstall.log")"
fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
