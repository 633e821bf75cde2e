# Tensor parallelism: the step-plan wire format and transport (test_plan),
# `generate --tp N` over comm shm against one process and the float64
# reference (dense and MoE checkpoints) and its refusals, the same under
# mpirun (skipped only without the mpi plugin), `serve --tp 2` with
# dead ranks, and expert parallelism ([model] moe_parallel = expert).
check_PROGRAMS += tests/tp/test_plan
TESTS += tests/tp/test_plan tests/tp/test_tp_generate.sh tests/tp/test_tp_mpi.sh tests/tp/test_tp_serve.sh tests/tp/test_tp_multinode.sh \
	tests/tp/test_tp_ep.sh
EXTRA_DIST += tests/tp/test_tp_generate.sh tests/tp/test_tp_mpi.sh tests/tp/test_tp_serve.sh tests/tp/test_tp_multinode.sh tests/tp/tp_lib.sh \
	tests/tp/test_tp_ep.sh
tests_tp_test_plan_SOURCES = tests/tp/test_plan.c tests/unit/test_check.h
tests_tp_test_plan_CPPFLAGS = $(libsycore_a_CPPFLAGS)
tests_tp_test_plan_LDADD = $(SY_CORE_LIBS)
