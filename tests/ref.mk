# ref tests: the float64 numpy reference forward pass (tests/ref/reference.py)
# checked against shared/models/expected_greedy.json, and sy-mkmodel's
# checkpoints (determinism, layout, reference.py on each test preset).
TESTS += tests/ref/test_reference_self.sh tests/ref/test_mkmodel.sh
EXTRA_DIST += \
	tests/ref/test_reference_self.sh tests/ref/test_mkmodel.sh \
	tests/ref/reference.py tests/ref/validate_expected.py \
	tests/ref/check_checkpoint.py
# The engine's logits against the reference on seeded synthetic checkpoints.
TESTS += tests/ref/test_engine_vs_reference.sh
EXTRA_DIST += tests/ref/test_engine_vs_reference.sh
# Qwen2, Qwen3 and sliding windows (per layer too) in one-shot, token-by-token and chunked prefill.
TESTS += tests/ref/test_windows_vs_reference.sh
EXTRA_DIST += tests/ref/test_windows_vs_reference.sh
# The MTP layer ([speculative] method = mtp) against the reference, logit by logit.
check_PROGRAMS += tests/ref/mtp_dump
tests_ref_mtp_dump_SOURCES = tests/ref/mtp_dump.c
tests_ref_mtp_dump_CPPFLAGS = $(libsycore_a_CPPFLAGS)
tests_ref_mtp_dump_LDADD = $(SY_CORE_LIBS)
TESTS += tests/ref/test_mtp_vs_reference.sh
EXTRA_DIST += tests/ref/test_mtp_vs_reference.sh
# The MTP draft source: its drafts against a from-scratch computation, greedy identity under serving.
check_PROGRAMS += tests/unit/test_spec_mtp
TESTS += tests/unit/test_spec_mtp
tests_unit_test_spec_mtp_SOURCES = tests/unit/test_spec_mtp.c
tests_unit_test_spec_mtp_CPPFLAGS = $(libsycore_a_CPPFLAGS)
tests_unit_test_spec_mtp_LDADD = $(SY_CORE_LIBS)
