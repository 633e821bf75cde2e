# GPU tests. In `make check`: `switchyard doctor` and the shared-memory
# checker on made-up reports (every build), and when
# the CUDA plugins are built, their listing without a driver and the
# shared-memory check of every kernel. The GPU run itself
# (tests/gpu/run.sh) needs an NVIDIA GPU and is run by hand: see docs/gpu.md.
TESTS += tests/gpu/test_doctor.sh tests/gpu/test_check_smem.sh
# The CUDA plugin's FP8/NVFP4 decoding compiled as host C against the CPU plugin's (no GPU needed).
TESTS += tests/gpu/test_cuda_quant_decode
check_PROGRAMS += tests/gpu/test_cuda_quant_decode
tests_gpu_test_cuda_quant_decode_SOURCES = tests/gpu/test_cuda_quant_decode.c
tests_gpu_test_cuda_quant_decode_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/plugins/common/cpu -I$(top_srcdir)/plugins/device/cuda
tests_gpu_test_cuda_quant_decode_LDADD = plugins/common/cpu/libsykern.la -lm
EXTRA_DIST += tests/gpu/test_doctor.sh tests/gpu/test_check_smem.sh tests/gpu/test_cuda_plugins.sh tests/gpu/run.sh tools/check-cuda-smem.sh
if HAVE_CUDA
TESTS += tests/gpu/test_cuda_plugins.sh
endif

# Programs tests/gpu/run.sh runs on a GPU machine. Built by `make check`
# (never run there) so they keep compiling; bw_probe links the CUDA runtime.
check_PROGRAMS += tests/gpu/test_cuda_ops tests/gpu/bench_decode tests/gpu/bench_qlinear
tests_gpu_test_cuda_ops_SOURCES = tests/gpu/test_cuda_ops.c
tests_gpu_test_cuda_ops_CPPFLAGS = $(libsycore_a_CPPFLAGS)
tests_gpu_test_cuda_ops_LDADD = $(SY_CORE_LIBS)
tests_gpu_bench_decode_SOURCES = tests/gpu/bench_decode.c
tests_gpu_bench_decode_CPPFLAGS = $(libsycore_a_CPPFLAGS)
tests_gpu_bench_decode_LDADD = $(SY_CORE_LIBS)
tests_gpu_bench_qlinear_SOURCES = tests/gpu/bench_qlinear.c
tests_gpu_bench_qlinear_CPPFLAGS = $(libsycore_a_CPPFLAGS)
tests_gpu_bench_qlinear_LDADD = $(SY_CORE_LIBS)
if HAVE_CUDA
check_PROGRAMS += tests/gpu/bw_probe
tests_gpu_bw_probe_SOURCES = tests/gpu/bw_probe.c
tests_gpu_bw_probe_CPPFLAGS = $(CUDA_CFLAGS)
tests_gpu_bw_probe_LDADD = $(CUDA_LIBS)
endif
