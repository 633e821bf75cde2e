#!/bin/sh
# [comm] plugin = auto falls back when the best comm plugin's setup refuses
# (on GPUs: cuda-p2p without peer access, then nccl). Here two test plugins
# (tests/plugins/sytest_comm.c) outrank shm on the CPU and refuse every
# group: sytest-comm-refuse (score 15) and sytest-comm-early (12, found
# first by name). `generate --tp 2` with auto (and with local, the shipped
# config's choice) must try them in score order, warn once for each with its
# reason, meet at a fresh rendezvous each time, join over shm and give the
# reference's greedy ids. Named explicitly, a refusing plugin fails the run
# with its reason; when every candidate refuses, or none can join a group,
# the run fails saying so. No rank may hang or be left behind.
set -u
. "$SY_SRCDIR/tests/tp/tp_lib.sh"
: "${SY_TEST_PLUGIN_DIR:?run through make check}"
: "${SY_PLUGIN_DIR:?run through make check}"
for f in "$SY_TEST_PLUGIN_DIR/sytest-comm-refuse.so" "$SY_TEST_PLUGIN_DIR/sytest-comm-early.so"; do
    [ -f "$f" ] || { echo "FAIL: $f not built"; exit 1; }
done
trap 'rm -rf "$tmp"' EXIT
export SYTEST_PROBE=1 # the test plugins run only when asked to
# The ranks run with a config file of this test's own, so a rank left behind is found by its path;
# every run is bounded, and a rank waiting for a peer that moved on shows as exit 124.
cp "$cfg" "$tmp/fallback.ini"
cfg=$tmp/fallback.ini
gen() { timeout 60 "$sy" generate -c "$cfg" --set device.threads=1 --ignore-eos --print-ids \
    --plugin-dir "$SY_TEST_PLUGIN_DIR" "$@"; }
left() { ps -eo pid=,args= | grep -F "$cfg" | grep -v grep; }
reason='no usable link between the ranks (a test plugin that always refuses)'

for case in "stories260k local" "tiny-llama auto"; do
    set -- $case
    m=$1 spec=$2
    ids=$(expected "$m" 0 prompt_ids)
    want=$(expected "$m" 0 greedy_ids 16)
    gen --model "$models/$m" --prompt-ids "$ids" -n 16 --tp 2 --set comm.plugin="$spec" >/dev/null 2>"$tmp/err"
    rc=$?
    got=$(sed -n 's/^generated_ids: //p' "$tmp/err")
    if [ $rc -eq 0 ] && [ "$got" = "$want" ]; then ok "$m, [comm] plugin = $spec, --tp 2: the reference's ids"; else
        bad "$m, [comm] plugin = $spec: exit $rc, [$got] want [$want] ($(cat "$tmp/err"))"; fi
    grep 'warn:' "$tmp/err" >"$tmp/warn"
    first=$(sed -n 1p "$tmp/warn")
    second=$(sed -n 2p "$tmp/warn")
    rv=$(echo "$first" | sed -n 's/.* refuses rendezvous \([^:]*\):.*/\1/p')
    if [ "$(wc -l <"$tmp/warn")" -eq 2 ] &&
        echo "$first" | grep -qF "tensor parallel rank 0 of 2: comm plugin sytest-comm-refuse cannot join the group: comm sytest-comm-refuse: rank 0 of 2 (local rank 0) refuses rendezvous" &&
        echo "$first" | grep -qF "$reason; [comm] plugin = auto tries the next comm plugin" &&
        echo "$second" | grep -qF "comm plugin sytest-comm-early cannot join the group" &&
        [ -n "$rv" ] && echo "$second" | grep -qF "refuses rendezvous $rv-sytest-comm-early: $reason"; then
        ok "$m: one warning per refused plugin, in score order, with its reason and a fresh rendezvous"
    else
        bad "$m: the fallback warnings are not as expected: $(cat "$tmp/err")"
    fi
    if grep -qF 'the 2 ranks joined over comm shm ([comm] plugin = auto; refused: sytest-comm-refuse, sytest-comm-early)' "$tmp/err" &&
        grep -qF 'comm=shm (tensor parallel)' "$tmp/err"; then
        ok "$m: the ranks joined over shm, and the log says so"
    else
        bad "$m: the final choice is not logged: $(cat "$tmp/err")"
    fi
done

# Named, the refusal is the run's error: both ranks stop, neither falls back or waits.
gen --model "$models/stories260k" --prompt-ids 1,2,3 -n 4 --tp 2 --set comm.plugin=sytest-comm-refuse \
    >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 1 ] && grep -F 'comm plugin sytest-comm-refuse cannot join the group' "$tmp/err" | grep -qF "$reason" &&
    ! grep -q 'joined over comm' "$tmp/err" && [ -z "$(left)" ]; then
    ok "[comm] plugin = sytest-comm-refuse named: exit 1 with its reason, no fallback"
else
    bad "named sytest-comm-refuse: exit $rc (124: a rank hung), left [$(left)]: $(cat "$tmp/err")"
fi
# The launcher tells each forked rank its place on the node (sy_host.local_rank: a GPU device plugin's default GPU).
if grep -qF 'rank 0 of 2 (local rank 0) refuses' "$tmp/err" && grep -qF 'rank 1 of 2 (local rank 1) refuses' "$tmp/err"; then
    ok "--tp 2: the plugins of rank r see local rank r"
else
    bad "--tp 2: local ranks not as expected: $(cat "$tmp/err")"
fi

# Under auto each candidate gets the [comm] keys it declares: shm's slot_size does not stop the refusing plugins
# (which declare none) and reaches shm; a key no candidate declares is a config error naming where it was set.
ids=$(expected stories260k 0 prompt_ids)
want=$(expected stories260k 0 greedy_ids 8)
gen --model "$models/stories260k" --prompt-ids "$ids" -n 8 --tp 2 --set comm.plugin=auto --set comm.slot_size=64K \
    >"$tmp/out" 2>"$tmp/err"
rc=$?
got=$(sed -n 's/^generated_ids: //p' "$tmp/err")
if [ $rc -eq 0 ] && [ "$got" = "$want" ] && grep -qF 'joined over comm shm' "$tmp/err" && [ -z "$(left)" ]; then
    ok "auto with shm's slot_size: the refusing plugins take no keys, shm takes it, the reference's ids"
else
    bad "[comm] slot_size under auto: exit $rc [$got] want [$want], left [$(left)]: $(cat "$tmp/err")"
fi
gen --model "$models/stories260k" --prompt-ids 1,2,3 -n 4 --tp 2 --set comm.plugin=auto --set comm.nosuch=1 \
    >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 1 ] &&
    grep -qF -- '--set: [comm] nosuch: no comm plugin that [comm] plugin = auto tries here declares it' "$tmp/err" &&
    ! grep -q 'joined over comm' "$tmp/err" && [ -z "$(left)" ]; then
    ok "a [comm] key no candidate declares: exit 1 naming the key and where it was set"
else
    bad "[comm] nosuch under auto: exit $rc, left [$(left)]: $(cat "$tmp/err")"
fi

# Without shm on the plugin path: every candidate refuses, and the run says which and why.
mkdir "$tmp/few"
for p in sy-device-cpu sy-attn-cpu sy-comm-local; do ln -s "$SY_PLUGIN_DIR/$p.so" "$tmp/few/$p.so"; done
if "$sy" plugins --plugin-dir "$tmp/few" --plugin-dir "$SY_TEST_PLUGIN_DIR" --set plugins.path= 2>&1 |
    grep -Eq '^comm +shm '; then
    echo "note: an installed comm shm is on the plugin path; the exhausted cases are not run"
else
    gen --model "$models/stories260k" --prompt-ids 1,2,3 -n 4 --tp 2 --set plugins.path="$tmp/few" \
        >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ $rc -eq 1 ] &&
        grep -qF '[comm] plugin = auto: no comm plugin for device cpu could join the 2 ranks (refused: sytest-comm-refuse, sytest-comm-early); the last said: tensor parallel rank 0 of 2: comm plugin sytest-comm-early cannot join the group' "$tmp/err" &&
        [ -z "$(left)" ]; then
        ok "every candidate refuses: exit 1 naming them and the last reason"
    else
        bad "every candidate refuses: exit $rc, left [$(left)]: $(cat "$tmp/err")"
    fi
    SYTEST_PROBE=0 gen --model "$models/stories260k" --prompt-ids 1,2,3 -n 4 --tp 2 --set plugins.path="$tmp/few" \
        >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ $rc -eq 1 ] &&
        grep -qF '[comm] plugin = auto: no comm plugin for device cpu can join 2 ranks of one node (auto does not try local, mpi or tcp' "$tmp/err" &&
        [ -z "$(left)" ]; then
        ok "no candidate but local: exit 1 saying auto does not try it"
    else
        bad "no candidate but local: exit $rc, left [$(left)]: $(cat "$tmp/err")"
    fi
fi
finish
