# cpu tests: the cpu plugins (loaded with dlopen from build-plugins/, as the
# core loads them) against plain double-precision references, and the
# shared kernels (linked directly from libsykern).
SY_CPU_TESTS = \
	tests/unit/test_cpu_plugins \
	tests/unit/test_cpu_kernels \
	tests/unit/test_cpu_device \
	tests/unit/test_cpu_attn \
	tests/unit/test_cpu_moe \
	tests/unit/test_cpu_linear_multi \
	tests/unit/test_cpu_bf16dot \
	tests/unit/test_cpu_amx \
	tests/unit/test_cpu_matmul_choice \
	tests/unit/test_cpu_quant
check_PROGRAMS += $(SY_CPU_TESTS)
TESTS += $(SY_CPU_TESTS)

SY_CPU_TEST_HARNESS = tests/unit/test_cpu_harness.c tests/unit/test_cpu_harness.h
# The harness binds the plugins' keys through the core's config module (SWITCHYARD_SET, as the engine reads it).
SY_CPU_TEST_LIBS = $(SY_CORE_LIBS) -ldl

tests_unit_test_cpu_plugins_SOURCES = tests/unit/test_cpu_plugins.c $(SY_CPU_TEST_HARNESS)
tests_unit_test_cpu_plugins_LDADD = $(SY_CPU_TEST_LIBS)

tests_unit_test_cpu_device_SOURCES = tests/unit/test_cpu_device.c $(SY_CPU_TEST_HARNESS)
tests_unit_test_cpu_device_LDADD = $(SY_CPU_TEST_LIBS)

tests_unit_test_cpu_attn_SOURCES = tests/unit/test_cpu_attn.c $(SY_CPU_TEST_HARNESS)
tests_unit_test_cpu_attn_LDADD = $(SY_CPU_TEST_LIBS)

tests_unit_test_cpu_moe_SOURCES = tests/unit/test_cpu_moe.c $(SY_CPU_TEST_HARNESS)
tests_unit_test_cpu_moe_LDADD = $(SY_CPU_TEST_LIBS)

tests_unit_test_cpu_kernels_SOURCES = tests/unit/test_cpu_kernels.c $(SY_CPU_TEST_HARNESS)
tests_unit_test_cpu_kernels_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/plugins/common/cpu
tests_unit_test_cpu_kernels_LDADD = plugins/common/cpu/libsykern.la $(SY_CPU_TEST_LIBS)

tests_unit_test_cpu_linear_multi_SOURCES = tests/unit/test_cpu_linear_multi.c $(SY_CPU_TEST_HARNESS)
tests_unit_test_cpu_linear_multi_LDADD = $(SY_CPU_TEST_LIBS)

tests_unit_test_cpu_quant_SOURCES = tests/unit/test_cpu_quant.c $(SY_CPU_TEST_HARNESS)
tests_unit_test_cpu_quant_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/plugins/common/cpu
tests_unit_test_cpu_quant_LDADD = plugins/common/cpu/libsykern.la $(SY_CPU_TEST_LIBS)

tests_unit_test_cpu_bf16dot_SOURCES = tests/unit/test_cpu_bf16dot.c $(SY_CPU_TEST_HARNESS)
tests_unit_test_cpu_bf16dot_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/plugins/common/cpu
tests_unit_test_cpu_bf16dot_LDADD = plugins/common/cpu/libsykern.la $(SY_CPU_TEST_LIBS)

tests_unit_test_cpu_matmul_choice_SOURCES = tests/unit/test_cpu_matmul_choice.c $(SY_CPU_TEST_HARNESS)
tests_unit_test_cpu_matmul_choice_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/plugins/common/cpu
tests_unit_test_cpu_matmul_choice_LDADD = plugins/common/cpu/libsykern.la $(SY_CPU_TEST_LIBS)

tests_unit_test_cpu_amx_SOURCES = tests/unit/test_cpu_amx.c $(SY_CPU_TEST_HARNESS)
tests_unit_test_cpu_amx_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/plugins/common/cpu
tests_unit_test_cpu_amx_LDADD = plugins/common/cpu/libsykern.la $(SY_CPU_TEST_LIBS)

# Attention speed, F32 against BF16 KV (prints a table; built, never run by make check).
check_PROGRAMS += tests/unit/bench_cpu_attn
tests_unit_bench_cpu_attn_SOURCES = tests/unit/bench_cpu_attn.c $(SY_CPU_TEST_HARNESS)
tests_unit_bench_cpu_attn_LDADD = $(SY_CPU_TEST_LIBS)
