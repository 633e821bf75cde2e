# Tool-call tests: per-family parsers on recorded model text, family grammars.
check_PROGRAMS += tests/unit/test_toolcall
TESTS += tests/unit/test_toolcall
tests_unit_test_toolcall_SOURCES = tests/unit/test_toolcall.c tests/unit/test_check.h
tests_unit_test_toolcall_CPPFLAGS = $(libsycore_a_CPPFLAGS)
tests_unit_test_toolcall_LDADD = $(SY_CORE_LIBS)
check_PROGRAMS += tests/unit/test_toolcall_grammar
TESTS += tests/unit/test_toolcall_grammar
tests_unit_test_toolcall_grammar_SOURCES = tests/unit/test_toolcall_grammar.c tests/unit/test_check.h
tests_unit_test_toolcall_grammar_CPPFLAGS = $(libsycore_a_CPPFLAGS)
tests_unit_test_toolcall_grammar_LDADD = $(SY_CORE_LIBS)
