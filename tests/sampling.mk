# Greedy picks on the device (sy_device_ops.argmax, sy_step_seq.greedy_id):
# the engine's mixed steps against the host rule (test_device_sampling), and
# `switchyard generate` with [scheduler] device_sampling = auto and off, one
# process and --tp 2, on a checkpoint whose tokens come in tied pairs.
# Sampled picks (sy_device_ops.sample, sy_step_seq.sample): the shared draw
# against the old host sampler (test_sample_pick), the engine's mixed steps
# (test_device_sampled), generate and serve auto = off
# (test_device_sampled.sh, with a device that leaves rows to the host).
check_PROGRAMS += tests/unit/test_device_sampling tests/unit/test_sample_pick tests/unit/test_device_sampled
TESTS += tests/unit/test_device_sampling tests/unit/test_sample_pick tests/unit/test_device_sampled tests/cli/test_device_sampling.sh \
	tests/cli/test_device_sampled.sh
EXTRA_DIST += tests/cli/test_device_sampling.sh tests/cli/twin_rows.py tests/cli/test_device_sampled.sh
tests_unit_test_device_sampling_SOURCES = tests/unit/test_device_sampling.c tests/unit/engine_sampling.h tests/unit/test_check.h
tests_unit_test_device_sampling_CPPFLAGS = $(libsycore_a_CPPFLAGS)
tests_unit_test_device_sampling_LDADD = $(SY_CORE_LIBS)
tests_unit_test_sample_pick_SOURCES = tests/unit/test_sample_pick.c tests/unit/test_check.h
tests_unit_test_sample_pick_CPPFLAGS = $(libsycore_a_CPPFLAGS)
tests_unit_test_sample_pick_LDADD = $(SY_CORE_LIBS)
tests_unit_test_device_sampled_SOURCES = tests/unit/test_device_sampled.c tests/unit/engine_sampling.h tests/unit/test_check.h
tests_unit_test_device_sampled_CPPFLAGS = $(libsycore_a_CPPFLAGS)
tests_unit_test_device_sampled_LDADD = $(SY_CORE_LIBS)
# A device that leaves every other sampled row to the host (-1): the core's fallback.
check_LTLIBRARIES += tests/plugins/sysample-half.la
tests_plugins_sysample_half_la_SOURCES = tests/plugins/sysample_half.c tests/plugins/sywrap_device.h
tests_plugins_sysample_half_la_CPPFLAGS = $(SY_TEST_PLUGIN_CPPFLAGS)
tests_plugins_sysample_half_la_CFLAGS = $(SY_PLUGIN_CFLAGS)
tests_plugins_sysample_half_la_LDFLAGS = $(SY_TEST_PLUGIN_LDFLAGS)
tests_plugins_sysample_half_la_LIBADD = -ldl
