# [device] graphs (core/engine/graphs.c): the context-bound buckets, and the
# fallbacks when a graph op fails, through test wrappers around the CPU
# plugins (tests/plugins/sygraph.c). Replays themselves need a GPU:
# tests/gpu/run.sh step 5b.
check_PROGRAMS += tests/unit/test_graphs_bound
TESTS += tests/unit/test_graphs_bound tests/cli/test_graphs.sh
EXTRA_DIST += tests/cli/test_graphs.sh
tests_unit_test_graphs_bound_SOURCES = tests/unit/test_graphs_bound.c tests/unit/test_check.h
tests_unit_test_graphs_bound_CPPFLAGS = $(libsycore_a_CPPFLAGS)
tests_unit_test_graphs_bound_LDADD = $(SY_CORE_LIBS)

check_LTLIBRARIES += tests/plugins/sygraph.la tests/plugins/sygraph-attn.la
tests_plugins_sygraph_la_SOURCES = tests/plugins/sygraph.c
tests_plugins_sygraph_la_CPPFLAGS = $(SY_TEST_PLUGIN_CPPFLAGS)
tests_plugins_sygraph_la_CFLAGS = $(SY_PLUGIN_CFLAGS)
tests_plugins_sygraph_la_LDFLAGS = $(SY_TEST_PLUGIN_LDFLAGS)
tests_plugins_sygraph_attn_la_SOURCES = tests/plugins/sygraph.c
tests_plugins_sygraph_attn_la_CPPFLAGS = $(SY_TEST_PLUGIN_CPPFLAGS) -DSYGRAPH_ATTN
tests_plugins_sygraph_attn_la_CFLAGS = $(SY_PLUGIN_CFLAGS)
tests_plugins_sygraph_attn_la_LDFLAGS = $(SY_TEST_PLUGIN_LDFLAGS)

# Graphs on against off through the engine, for tests/gpu/run.sh step 4d;
# test_graphs.sh also runs it on the CPU wrappers (the fallback's side).
check_PROGRAMS += tests/gpu/test_cuda_graphs
tests_gpu_test_cuda_graphs_SOURCES = tests/gpu/test_cuda_graphs.c
tests_gpu_test_cuda_graphs_CPPFLAGS = $(libsycore_a_CPPFLAGS)
tests_gpu_test_cuda_graphs_LDADD = $(SY_CORE_LIBS)
