#!/bin/sh
# reference.py against shared/models/expected_greedy.json: for all five
# models and four prompts, 64 greedy ids equal and top-5 logprobs within
# 1e-4. Fails (never skips) when SY_SHARED_DIR or numpy is missing: without
# this check the numpy oracle is not known to be right.
set -u

srcdir=${SY_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
py=${PYTHON_NUMPY:-/usr/bin/python3}

if [ -z "${SY_SHARED_DIR:-}" ] || [ ! -f "$SY_SHARED_DIR/models/expected_greedy.json" ]; then
    echo "FAIL: SY_SHARED_DIR must name the shared/ directory holding models/expected_greedy.json (got '${SY_SHARED_DIR:-}')"
    exit 1
fi
if ! "$py" -c 'import numpy' 2>/dev/null; then
    echo "FAIL: '$py' cannot import numpy (install python3-numpy, or set PYTHON_NUMPY to a python3 that has it)"
    exit 1
fi
exec "$py" "$srcdir/tests/ref/validate_expected.py" "$SY_SHARED_DIR/models" --tol 1e-4
