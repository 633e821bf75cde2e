# The W4A4 modes' activation quantisers (plugins/common/moe/symoe_fp4act.h)
# against brute-force oracles, and moe cpu with activations = nvfp4 / mxfp4
# against a float64 reference on the dequantised values (no GPU needed).
TESTS += tests/unit/test_moe_fp4act
check_PROGRAMS += tests/unit/test_moe_fp4act
tests_unit_test_moe_fp4act_SOURCES = tests/unit/test_moe_fp4act.c plugins/common/moe/symoe_fp4act.h $(SY_CPU_TEST_HARNESS)
tests_unit_test_moe_fp4act_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/plugins/common/moe -I$(top_srcdir)/tests/unit
tests_unit_test_moe_fp4act_LDADD = $(SY_CPU_TEST_LIBS)
# gpt-oss's experts on moe cpu (clamped SwiGLU, expert biases, MXFP4 weights) against float64, every ISA.
TESTS += tests/unit/test_moe_gptoss
check_PROGRAMS += tests/unit/test_moe_gptoss
tests_unit_test_moe_gptoss_SOURCES = tests/unit/test_moe_gptoss.c $(SY_CPU_TEST_HARNESS)
tests_unit_test_moe_gptoss_LDADD = $(SY_CPU_TEST_LIBS)
