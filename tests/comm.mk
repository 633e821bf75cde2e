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

# Every built CUDA plugin calls the CUDA runtime's per-thread-stream entry
# points only (the comm plugins' ordering with the device's kernels); reads
# the plugins' imports, needs no GPU; skipped without CUDA plugins.
TESTS += tests/comm/test_cuda_streams.sh
EXTRA_DIST += tests/comm/test_cuda_streams.sh

# A pretend GPU family (tests/plugins/sytest_gpu.c): bench-comm must open the
# device plugin in each forked rank, with local rank = rank, before a comm
# plugin that works on device memory (as nccl and cuda-p2p on "cuda").
TESTS += tests/comm/test_bench_comm_gpu.sh
EXTRA_DIST += tests/comm/test_bench_comm_gpu.sh
check_LTLIBRARIES += tests/plugins/sytest-gpudev.la tests/plugins/sytest-gpucomm.la
tests_plugins_sytest_gpudev_la_SOURCES = tests/plugins/sytest_gpu.c
tests_plugins_sytest_gpudev_la_CPPFLAGS = $(SY_TEST_PLUGIN_CPPFLAGS) -DSYTEST_GPU_DEVICE
tests_plugins_sytest_gpudev_la_CFLAGS = $(SY_PLUGIN_CFLAGS)
tests_plugins_sytest_gpudev_la_LDFLAGS = $(SY_TEST_PLUGIN_LDFLAGS)
tests_plugins_sytest_gpucomm_la_SOURCES = tests/plugins/sytest_gpu.c plugins/comm/shm/shm_seg.c \
	plugins/comm/shm/shm_seg.h
tests_plugins_sytest_gpucomm_la_CPPFLAGS = $(AM_CPPFLAGS) $(SY_TEST_PLUGIN_CPPFLAGS) \
	-I$(top_srcdir)/plugins/comm/shm -DSYTEST_GPU_COMM
tests_plugins_sytest_gpucomm_la_CFLAGS = $(SY_PLUGIN_CFLAGS)
tests_plugins_sytest_gpucomm_la_LDFLAGS = $(SY_TEST_PLUGIN_LDFLAGS)
tests_plugins_sytest_gpucomm_la_LIBADD = -lrt
