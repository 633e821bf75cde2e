# Grammar tests: GBNF, JSON schema and regex compilers, matcher, token masks.
# Source builders (JSON schema, regex, choice, text_until, any JSON): texts
# accepted and rejected, and the 400 messages (test_grammar_schema); random
# schemas and random walks of the matcher validated by the python
# jsonschema package (test_grammar_oracle: $PYTHON_JSONSCHEMA, from
# configure, else python3; it fails when jsonschema cannot be imported).
check_PROGRAMS += tests/unit/test_grammar_schema tests/unit/test_grammar_oracle
TESTS += tests/unit/test_grammar_schema tests/unit/test_grammar_oracle
EXTRA_DIST += tests/unit/jsonschema_oracle.py
tests_unit_test_grammar_schema_SOURCES = tests/unit/test_grammar_schema.c tests/unit/test_check.h
tests_unit_test_grammar_schema_CPPFLAGS = $(libsycore_a_CPPFLAGS)
tests_unit_test_grammar_schema_LDADD = $(SY_CORE_LIBS)
tests_unit_test_grammar_oracle_SOURCES = tests/unit/test_grammar_oracle.c tests/unit/test_check.h
tests_unit_test_grammar_oracle_CPPFLAGS = $(libsycore_a_CPPFLAGS)
tests_unit_test_grammar_oracle_LDADD = $(SY_CORE_LIBS)
# The core (test_grammar): GBNF parse and compile errors, hand grammars,
# the cache, and every mask checked against a brute-force vocabulary scan
# (synthetic, cl100k and llama2-spm vocabularies from SY_SHARED_DIR).
check_PROGRAMS += tests/unit/test_grammar
TESTS += tests/unit/test_grammar
tests_unit_test_grammar_SOURCES = tests/unit/test_grammar.c tests/unit/test_check.h
tests_unit_test_grammar_CPPFLAGS = $(libsycore_a_CPPFLAGS)
tests_unit_test_grammar_LDADD = $(SY_CORE_LIBS)
