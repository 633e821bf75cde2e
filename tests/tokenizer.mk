# tokenizer tests: the shared oracles (tokenizers/, models/) and unit tests.
SY_TOK_TESTS = tests/unit/test_tokenizer_oracle tests/unit/test_tokenizer_models tests/unit/test_tokenizer_unit
check_PROGRAMS += $(SY_TOK_TESTS)
TESTS += $(SY_TOK_TESTS)
SY_TOK_TEST_COMMON = tests/unit/test_tokenizer_common.c tests/unit/test_tokenizer_common.h
tests_unit_test_tokenizer_oracle_SOURCES = tests/unit/test_tokenizer_oracle.c $(SY_TOK_TEST_COMMON)
tests_unit_test_tokenizer_oracle_CPPFLAGS = $(libsycore_a_CPPFLAGS)
tests_unit_test_tokenizer_oracle_LDADD = $(SY_CORE_LIBS)
tests_unit_test_tokenizer_models_SOURCES = tests/unit/test_tokenizer_models.c $(SY_TOK_TEST_COMMON)
tests_unit_test_tokenizer_models_CPPFLAGS = $(libsycore_a_CPPFLAGS)
tests_unit_test_tokenizer_models_LDADD = $(SY_CORE_LIBS)
tests_unit_test_tokenizer_unit_SOURCES = tests/unit/test_tokenizer_unit.c $(SY_TOK_TEST_COMMON)
tests_unit_test_tokenizer_unit_CPPFLAGS = $(libsycore_a_CPPFLAGS)
tests_unit_test_tokenizer_unit_LDADD = $(SY_CORE_LIBS)
