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
# The MoE routing both moe plugins run (symoe_route.h) against a sorted oracle, and moe/cuda's device grouping on the host.
TESTS += tests/gpu/test_moe_route_dev
check_PROGRAMS += tests/gpu/test_moe_route_dev
tests_gpu_test_moe_route_dev_SOURCES = tests/gpu/test_moe_route_dev.c plugins/moe/cuda/moe_route_dev.h \
	plugins/common/moe/symoe_route.h plugins/moe/cpu/moe_route.c
tests_gpu_test_moe_route_dev_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/plugins/moe/cuda -I$(top_srcdir)/plugins/moe/cpu \
	-I$(top_srcdir)/plugins/common/cpu -I$(top_srcdir)/plugins/common/moe
tests_gpu_test_moe_route_dev_LDADD = plugins/common/cpu/libsykern.la -lm
# moe/cuda's tile variants, their limits check and its tuning tables' entries, as host C (no GPU needed).
TESTS += tests/gpu/test_moe_cuda_tiles
# tune-moe on a plugin with its own tile candidates (moe cuda's way), with a host-only test plugin standing in.
TESTS += tests/gpu/test_tune_moe_tiles.sh
EXTRA_DIST += tests/gpu/test_tune_moe_tiles.sh
check_LTLIBRARIES += tests/gpu/sytest-tilemoe.la
tests_gpu_sytest_tilemoe_la_SOURCES = tests/gpu/sytest_tilemoe.c plugins/common/moe/sytune.c
tests_gpu_sytest_tilemoe_la_CPPFLAGS = $(SY_TEST_PLUGIN_CPPFLAGS) -I$(top_builddir) -I$(top_srcdir)/plugins/common/moe -D_GNU_SOURCE
tests_gpu_sytest_tilemoe_la_CFLAGS = $(SY_PLUGIN_CFLAGS)
tests_gpu_sytest_tilemoe_la_LDFLAGS = $(SY_TEST_PLUGIN_LDFLAGS)
tests_gpu_sytest_tilemoe_la_LIBADD = -lm
# plugin-check --device (run.sh's way to check moe cuda), with the cpu plugins standing in.
TESTS += tests/gpu/test_plugin_check_device.sh
EXTRA_DIST += tests/gpu/test_plugin_check_device.sh
check_PROGRAMS += tests/gpu/test_moe_cuda_tiles
tests_gpu_test_moe_cuda_tiles_SOURCES = tests/gpu/test_moe_cuda_tiles.c plugins/moe/cuda/moe_tiles.c plugins/moe/cuda/moe_tiles.h \
	plugins/moe/cuda/moe_kern.h plugins/common/moe/sytune.c plugins/common/moe/sytune.h
tests_gpu_test_moe_cuda_tiles_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/plugins/moe/cuda -I$(top_srcdir)/plugins/common/cuda -I$(top_srcdir)/plugins/common/moe
tests_gpu_test_moe_cuda_tiles_LDADD = -lm
# attn/cuda's tensor-core prefill path as host C: fragment maps against the PTX table, the step's plan, the kernel's
# algorithm emulated lane by lane against float64 attention, the key and self-check decisions (no GPU needed).
TESTS += tests/gpu/test_attn_cuda_plan
check_PROGRAMS += tests/gpu/test_attn_cuda_plan
tests_gpu_test_attn_cuda_plan_SOURCES = tests/gpu/test_attn_cuda_plan.c plugins/attn/cuda/attn_plan.c \
	plugins/attn/cuda/attn_plan.h
tests_gpu_test_attn_cuda_plan_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/plugins/attn/cuda -I$(top_srcdir)/plugins/common/cuda
tests_gpu_test_attn_cuda_plan_LDADD = -lm
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
