#!/bin/sh
# comm/mpi under mpirun -n 2 (when configure found MPI and built the
# plugin): bench-comm --launched checks every allreduce (#wrong 0), and
# test_comm_shm --mpi checks allreduce, allgather, broadcast and barrier.
# Open MPI refuses root without --allow-run-as-root (the environment
# variables below), and in containers wants --oversubscribe and the vader
# shared-memory transport without CMA single copy.
set -u
: "${SY_BUILDDIR:?run through make check}"
dir=$SY_BUILDDIR/build-plugins
if [ ! -f "$dir/sy-comm-mpi.so" ]; then
    echo "SKIP: the mpi comm plugin was not built (configure found no mpicc)"
    exit 77
fi
if ! command -v mpirun >/dev/null 2>&1; then
    echo "FAIL: the mpi plugin was built but mpirun is not in PATH" >&2
    exit 1
fi
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM OMPI_MCA_btl_vader_single_copy_mechanism
export OMPI_MCA_rmaps_base_oversubscribe
# Under --enable-sanitizers: Open MPI's runtime leaks by design (strings and
# component state from MPI_Init, in components dlclose'd at MPI_Finalize, so
# no suppression can name them); leak checks stay on for shm and bench-comm.
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
export ASAN_OPTIONS
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
timeout 120 mpirun -n 2 --oversubscribe --mca btl self,vader "$SY_BUILDDIR/switchyard" bench-comm --plugin mpi \
    --launched --plugin-dir "$dir" --max-bytes 4M --factor 4 >"$tmp/out" 2>"$tmp/err"
rc=$?
cat "$tmp/out"
if [ $rc -ne 0 ]; then
    echo "FAIL: mpirun bench-comm exited $rc: $(cat "$tmp/err")" >&2
    exit 1
fi
if ! grep -q 'comm plugin mpi, 2 ranks' "$tmp/out" ||
    ! awk '!/^#/ && NF >= 9 { n++; if ($8 != 0) bad++ } END { exit !(n >= 10 && !bad) }' "$tmp/out"; then
    echo "FAIL: expected 10+ rows with #wrong 0 from 2 MPI ranks" >&2
    exit 1
fi
echo "ok   mpi allreduce under mpirun -n 2"

# allreduce (bitwise across ranks), allgather, broadcast, barrier through the plugin.
if ! timeout 120 mpirun -n 2 --oversubscribe --mca btl self,vader "$SY_BUILDDIR/tests/comm/test_comm_shm" --mpi \
    >"$tmp/out" 2>"$tmp/err"; then
    cat "$tmp/out"
    echo "FAIL: test_comm_shm --mpi under mpirun: $(cat "$tmp/err")" >&2
    exit 1
fi
cat "$tmp/out"
echo "ok   mpi collectives under mpirun -n 2"
