# comm plugin tests: shm collectives across forked ranks (correctness,
# determinism, dead and stuck peers), `switchyard bench-comm` for local and
# shm, and mpi under mpirun when the mpi plugin was built.
check_PROGRAMS += tests/comm/test_comm_shm
TESTS += tests/comm/test_comm_shm.sh tests/comm/test_bench_comm.sh tests/comm/test_comm_mpi.sh
EXTRA_DIST += tests/comm/test_comm_shm.sh tests/comm/test_bench_comm.sh tests/comm/test_comm_mpi.sh

tests_comm_test_comm_shm_SOURCES = tests/comm/test_comm_shm.c tests/comm/comm_harness.c \
	tests/comm/comm_harness.h tests/unit/test_check.h
tests_comm_test_comm_shm_CPPFLAGS = $(libsycore_a_CPPFLAGS)
tests_comm_test_comm_shm_LDADD = $(SY_CORE_LIBS)
