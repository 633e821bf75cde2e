# Real clients (h2load, curl) against `switchyard serve`.
TESTS += tests/load/test_h2load.sh
EXTRA_DIST += tests/load/test_h2load.sh
