# comm plugin tests: shm collectives across forked ranks (correctness,
# determinism, dead and stuck peers), `switchyard bench-comm` for local and
# shm, and mpi under mpirun when the mpi plugin was built; tcp collectives
# across forked ranks on 127.0.0.1 (worlds 2-4, dead peer, refusals).
check_PROGRAMS += tests/comm/test_comm_shm tests/comm/test_comm_tcp
TESTS += tests/comm/test_comm_shm.sh tests/comm/test_bench_comm.sh tests/comm/test_comm_mpi.sh tests/comm/test_comm_tcp.sh
EXTRA_DIST += tests/comm/test_comm_shm.sh tests/comm/test_bench_comm.sh tests/comm/test_comm_mpi.sh tests/comm/test_comm_tcp.sh

tests_comm_test_comm_shm_SOURCES = tests/comm/test_comm_shm.c tests/comm/comm_harness.c \
	tests/comm/comm_harness.h tests/unit/test_check.h
tests_comm_test_comm_shm_CPPFLAGS = $(libsycore_a_CPPFLAGS)
tests_comm_test_comm_shm_LDADD = $(SY_CORE_LIBS)
tests_comm_test_comm_tcp_SOURCES = tests/comm/test_comm_tcp.c tests/comm/comm_harness.c \
	tests/comm/comm_harness.h tests/unit/test_check.h
tests_comm_test_comm_tcp_CPPFLAGS = $(libsycore_a_CPPFLAGS)
tests_comm_test_comm_tcp_LDADD = $(SY_CORE_LIBS)
