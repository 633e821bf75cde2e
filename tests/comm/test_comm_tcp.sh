#!/bin/sh
# Runs test_comm_tcp under a hard time limit: a hang is a failure, not a stuck `make check`.
: "${SY_BUILDDIR:?run through make check}"
timeout 90 "$SY_BUILDDIR/tests/comm/test_comm_tcp"
rc=$?
[ $rc -eq 124 ] && echo "FAIL: test_comm_tcp hung (killed after 90 s)" >&2
exit $rc
