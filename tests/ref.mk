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
