#!/bin/sh
# Tensor parallelism with ranks started by mpirun (comm mpi): `mpirun -n 2
# switchyard generate` gives the greedy tokens of one process for a dense
# and a MoE checkpoint, only rank 0 prints, and a comm plugin other than mpi
# under mpirun is refused with the reason; MTP speculation under mpirun gives
# the same tokens and drafts as one process. Skipped (77) only when configure
# did not build the mpi plugin. See tests/comm/test_comm_mpi.sh for the
# Open MPI settings containers and root need.
set -u
. "$SY_SRCDIR/tests/tp/tp_lib.sh"
trap 'rm -rf "$tmp"' EXIT
if [ ! -f "$SY_BUILDDIR/build-plugins/sy-comm-mpi.so" ]; then
    echo "SKIP: the mpi comm plugin was not built (configure found no mpicc)"
    rm -rf "$tmp"
    exit 77
fi
command -v mpirun >/dev/null 2>&1 || { echo "FAIL: the mpi plugin was built but mpirun is not in PATH" >&2; exit 1; }
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM OMPI_MCA_btl_vader_single_copy_mechanism
export OMPI_MCA_rmaps_base_oversubscribe
# Open MPI's runtime leaks by design (see test_comm_mpi.sh).
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
export ASAN_OPTIONS
gen() { "$sy" generate -q -c "$cfg" --set device.threads=1 --ignore-eos --print-ids "$@"; }

for m in tiny-llama tiny-mixtral; do
    ids=$(expected "$m" 0 prompt_ids)
    want=$(expected "$m" 0 greedy_ids 24)
    timeout 120 mpirun -n 2 --oversubscribe --mca btl self,vader "$sy" generate -q -c "$cfg" --set comm.plugin=mpi \
        --set device.threads=1 --model "$models/$m" --prompt-ids "$ids" -n 24 --ignore-eos --print-ids \
        >"$tmp/out" 2>"$tmp/err"
    rc=$?
    got=$(sed -n 's/^generated_ids: //p' "$tmp/err")
    n_out=$(grep -c '^generated_ids:' "$tmp/err")
    if [ $rc -eq 0 ] && [ "$got" = "$want" ] && [ "$n_out" -eq 1 ]; then
        ok "$m: mpirun -n 2 = reference, printed once"
    else
        bad "$m under mpirun: exit $rc, got [$got] want [$want], $n_out outputs ($(cat "$tmp/err"))"
    fi
done

# Speculative decoding under mpirun: [speculative] method = mtp on the DeepSeek-V3 preset, the MTP layer sharded
# over the two mpirun ranks from rank 0's plans, gives one process's plain greedy tokens and proposes the drafts one
# process proposes (random weights accept almost none, so the drafts are what is compared).
mtp='--set speculative.method=mtp --set speculative.num_draft_tokens=3 --set speculative.min_acceptance=0'
"$SY_BUILDDIR/sy-mkmodel" --preset test-deepseek-v3 --seed 7 --quiet --out "$tmp/dsv3" >/dev/null 2>&1 ||
    bad "sy-mkmodel --preset test-deepseek-v3"
gen --model "$tmp/dsv3" --prompt-ids 1,2,3,4,5 -n 24 >/dev/null 2>"$tmp/plain.err"
# shellcheck disable=SC2086
gen -v --model "$tmp/dsv3" --prompt-ids 1,2,3,4,5 -n 24 $mtp >/dev/null 2>"$tmp/one.err"
# shellcheck disable=SC2086
timeout 180 mpirun -n 2 --oversubscribe --mca btl self,vader "$sy" generate -v -c "$cfg" --set comm.plugin=mpi \
    --set device.threads=1 --ignore-eos --print-ids --stats --model "$tmp/dsv3" --prompt-ids 1,2,3,4,5 -n 24 $mtp \
    >"$tmp/out" 2>"$tmp/mpi.err"
rc=$?
plain=$(sed -n 's/^generated_ids: //p' "$tmp/plain.err")
got=$(sed -n 's/^generated_ids: //p' "$tmp/mpi.err")
n=$(sed -n 's/^speculative (mtp): \([0-9]*\) drafts, .*/\1/p' "$tmp/mpi.err")
if [ $rc -eq 0 ] && [ -n "$plain" ] && [ "$got" = "$plain" ] && [ "${n:-0}" -gt 0 ]; then
    ok "test-deepseek-v3: mpirun -n 2 with mtp = one process plain (24 tokens, $n drafts)"
else
    bad "mtp under mpirun: exit $rc, got [$got] want [$plain], drafts [$n] ($(grep -v DEBUG "$tmp/mpi.err" | tail -5))"
fi
same_mtp_drafts "test-deepseek-v3: mpirun -n 2" "$tmp/one.err" "$tmp/mpi.err"

# A launcher that binds one GPU per rank (CUDA_VISIBLE_DEVICES with one entry): local rank 1 computes on the only
# GPU it sees (the GPU plugins' default device becomes 0), and says so.
CUDA_VISIBLE_DEVICES=3 timeout 120 mpirun -n 2 --oversubscribe --mca btl self,vader -x CUDA_VISIBLE_DEVICES "$sy" \
    generate -c "$cfg" --set comm.plugin=mpi --set device.threads=1 --model "$models/tiny-llama" --prompt-ids 1,2 -n 2 \
    >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 0 ] && grep -qF 'mpirun local rank 1 sees one GPU (CUDA_VISIBLE_DEVICES=3) and computes on it' "$tmp/err" &&
    ! grep -qF 'local rank 0 sees' "$tmp/err"; then
    ok "mpirun with one GPU per rank: local rank 1 takes the GPU it sees"
else
    bad "mpirun with CUDA_VISIBLE_DEVICES=3: exit $rc: $(cat "$tmp/err")"
fi

# Under mpirun the ranks are mpirun's: another comm plugin, or a different --tp, is refused.
timeout 120 mpirun -n 2 --oversubscribe --mca btl self,vader "$sy" generate -q -c "$cfg" --set comm.plugin=shm \
    --model "$models/tiny-llama" --prompt-ids 1,2 -n 2 >"$tmp/out" 2>"$tmp/err"
if grep -q 'started by mpirun as rank 0 of 2, but \[comm\] plugin = shm' "$tmp/err"; then ok "mpirun with comm shm: refused"; else
    bad "mpirun with comm shm: $(cat "$tmp/err")"; fi
timeout 120 mpirun -n 2 --oversubscribe --mca btl self,vader "$sy" generate -q -c "$cfg" --set comm.plugin=mpi \
    --model "$models/tiny-llama" --prompt-ids 1,2 -n 2 --tp 4 >"$tmp/out" 2>"$tmp/err"
if grep -q -- '--tp 4, but mpirun started 2 ranks' "$tmp/err"; then ok "mpirun -n 2 with --tp 4: refused"; else
    bad "mpirun with --tp 4: $(cat "$tmp/err")"; fi
finish
