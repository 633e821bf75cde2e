# switchyard bench against switchyard serve on the build's small model.
TESTS += tests/bench/test_bench_cli.sh tests/bench/test_bench_keepalive.sh
EXTRA_DIST += tests/bench/test_bench_cli.sh tests/bench/test_bench_keepalive.sh tests/bench/keepalive_server.py
