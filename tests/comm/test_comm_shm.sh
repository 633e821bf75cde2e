#!/bin/sh
# Runs test_comm_shm under a hard time limit: a hang is a failure, not a stuck `make check`.
: "${SY_BUILDDIR:?run through make check}"
timeout 60 "$SY_BUILDDIR/tests/comm/test_comm_shm"
rc=$?
[ $rc -eq 124 ] && echo "FAIL: test_comm_shm hung (killed after 60 s)" >&2
exit $rc
