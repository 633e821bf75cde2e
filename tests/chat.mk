# chat-template tests: the shared oracle (chat-templates/) and engine unit checks.
check_PROGRAMS += tests/unit/test_chat_templates
TESTS += tests/unit/test_chat_templates
tests_unit_test_chat_templates_SOURCES = tests/unit/test_chat_templates.c tests/unit/test_check.h
tests_unit_test_chat_templates_CPPFLAGS = $(libsycore_a_CPPFLAGS)
tests_unit_test_chat_templates_LDADD = $(SY_CORE_LIBS)
