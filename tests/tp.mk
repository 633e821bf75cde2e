# Tensor parallelism: the step-plan wire format and transport (test_plan),
# `generate --tp N` over comm shm against one process and the float64
# reference (dense and MoE checkpoints) and its refusals, the same under
# mpirun (skipped only without the mpi plugin), `serve --tp 2` with
# dead ranks, expert parallelism ([model] moe_parallel = expert), and
# [comm] plugin = auto falling back when the best plugin's setup refuses.
check_PROGRAMS += tests/tp/test_plan
TESTS += tests/tp/test_plan tests/tp/test_tp_generate.sh tests/tp/test_tp_mpi.sh tests/tp/test_tp_serve.sh tests/tp/test_tp_multinode.sh \
	tests/tp/test_tp_ep.sh tests/tp/test_tp_fallback.sh
EXTRA_DIST += tests/tp/test_tp_generate.sh tests/tp/test_tp_mpi.sh tests/tp/test_tp_serve.sh tests/tp/test_tp_multinode.sh tests/tp/tp_lib.sh \
	tests/tp/test_tp_ep.sh tests/tp/test_tp_fallback.sh

# CPU comm plugins that outrank shm and refuse every group (tests/plugins/sytest_comm.c).
check_LTLIBRARIES += tests/plugins/sytest-comm-refuse.la tests/plugins/sytest-comm-early.la
tests_plugins_sytest_comm_refuse_la_SOURCES = tests/plugins/sytest_comm.c
tests_plugins_sytest_comm_refuse_la_CPPFLAGS = $(SY_TEST_PLUGIN_CPPFLAGS)
tests_plugins_sytest_comm_refuse_la_CFLAGS = $(SY_PLUGIN_CFLAGS)
tests_plugins_sytest_comm_refuse_la_LDFLAGS = $(SY_TEST_PLUGIN_LDFLAGS)
tests_plugins_sytest_comm_early_la_SOURCES = tests/plugins/sytest_comm.c
tests_plugins_sytest_comm_early_la_CPPFLAGS = $(SY_TEST_PLUGIN_CPPFLAGS) -DSYTEST_COMM_EARLY
tests_plugins_sytest_comm_early_la_CFLAGS = $(SY_PLUGIN_CFLAGS)
tests_plugins_sytest_comm_early_la_LDFLAGS = $(SY_TEST_PLUGIN_LDFLAGS)
tests_tp_test_plan_SOURCES = tests/tp/test_plan.c tests/unit/test_check.h
tests_tp_test_plan_CPPFLAGS = $(libsycore_a_CPPFLAGS)
tests_tp_test_plan_LDADD = $(SY_CORE_LIBS)
