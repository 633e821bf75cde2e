# Greedy picks on the device (sy_device_ops.argmax, sy_step_seq.greedy_id):
# the engine's mixed steps against the host rule (test_device_sampling), and
# `switchyard generate` with [scheduler] device_sampling = auto and off, one
# process and --tp 2, on a checkpoint whose tokens come in tied pairs.
check_PROGRAMS += tests/unit/test_device_sampling
TESTS += tests/unit/test_device_sampling tests/cli/test_device_sampling.sh
EXTRA_DIST += tests/cli/test_device_sampling.sh tests/cli/twin_rows.py
tests_unit_test_device_sampling_SOURCES = tests/unit/test_device_sampling.c tests/unit/test_check.h
tests_unit_test_device_sampling_CPPFLAGS = $(libsycore_a_CPPFLAGS)
tests_unit_test_device_sampling_LDADD = $(SY_CORE_LIBS)
