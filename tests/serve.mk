# Serving: the model-free pieces, then the scheduler and server on the real
# engine (small model from the build tree and stories260k from ../shared).
check_PROGRAMS += tests/unit/test_serve_text tests/unit/test_sched
TESTS += tests/unit/test_serve_text tests/unit/test_sched
tests_unit_test_serve_text_SOURCES = tests/unit/test_serve_text.c
tests_unit_test_serve_text_CPPFLAGS = $(libsycore_a_CPPFLAGS)
tests_unit_test_serve_text_LDADD = $(SY_CORE_LIBS)
tests_unit_test_sched_SOURCES = tests/unit/test_sched.c
tests_unit_test_sched_CPPFLAGS = $(libsycore_a_CPPFLAGS)
tests_unit_test_sched_LDADD = $(SY_CORE_LIBS)

# `switchyard serve` end to end with a test frontend plugin (the real one is
# plugins/frontend/http): it starts, serves one request, drains on SIGTERM
# and exits 0; without a frontend it refuses.
check_LTLIBRARIES += tests/plugins/sytest-frontend.la
tests_plugins_sytest_frontend_la_SOURCES = tests/plugins/sytest_frontend.c
tests_plugins_sytest_frontend_la_CPPFLAGS = $(SY_TEST_PLUGIN_CPPFLAGS)
tests_plugins_sytest_frontend_la_CFLAGS = $(SY_PLUGIN_CFLAGS)
tests_plugins_sytest_frontend_la_LDFLAGS = $(SY_TEST_PLUGIN_LDFLAGS)
tests_plugins_sytest_frontend_la_LIBADD = -lpthread
TESTS += tests/cli/test_serve_cli.sh
EXTRA_DIST += tests/cli/test_serve_cli.sh

# /metrics' [device] graphs counters through `switchyard serve` and HTTP, on
# the graph-op test wrappers of tests/graphs.mk (sygraph, sygraph-attn).
TESTS += tests/cli/test_serve_graph_metrics.sh
EXTRA_DIST += tests/cli/test_serve_graph_metrics.sh
