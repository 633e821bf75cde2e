# switchyard bench against switchyard serve on the build's small model; sy-bench-cpu's table and arguments.
TESTS += tests/bench/test_bench_cli.sh tests/bench/test_bench_keepalive.sh tests/bench/test_bench_cpu_cli.sh
EXTRA_DIST += tests/bench/test_bench_cpu_cli.sh tests/bench/test_bench_cli.sh tests/bench/test_bench_keepalive.sh tests/bench/keepalive_server.py
