# Speculative decoding: greedy identity, distribution (chi-square), the rejection rule, [speculative] errors;
# under tensor parallelism through `switchyard generate --tp 2`; `generate --stats` at --tp 1; a request's
# num_draft_tokens through `switchyard serve` and HTTP.
check_PROGRAMS += tests/unit/test_spec
TESTS += tests/unit/test_spec tests/tp/test_tp_spec.sh tests/cli/test_generate_spec.sh tests/cli/test_serve_spec_request.sh
EXTRA_DIST += tests/tp/test_tp_spec.sh tests/cli/test_generate_spec.sh tests/cli/test_serve_spec_request.sh
tests_unit_test_spec_SOURCES = tests/unit/test_spec.c
tests_unit_test_spec_CPPFLAGS = $(libsycore_a_CPPFLAGS)
tests_unit_test_spec_LDADD = $(SY_CORE_LIBS)
