# Serving: the model-free pieces, then the scheduler and server on the real
# engine (small model from the build tree and stories260k from ../shared).
check_PROGRAMS += tests/unit/test_serve_text tests/unit/test_sched
TESTS += tests/unit/test_serve_text tests/unit/test_sched
tests_unit_test_serve_text_SOURCES = tests/unit/test_serve_text.c
tests_unit_test_serve_text_CPPFLAGS = $(libsycore_a_CPPFLAGS)
tests_unit_test_serve_text_LDADD = $(SY_CORE_LIBS)
tests_unit_test_sched_SOURCES = tests/unit/test_sched.c
tests_unit_test_sched_CPPFLAGS = $(libsycore_a_CPPFLAGS)
tests_unit_test_sched_LDADD = $(SY_CORE_LIBS)

# `switchyard serve` end to end with a test frontend plugin (the real one is
# plugins/frontend/http): it starts, serves one request, drains on SIGTERM
# and exits 0; without a frontend it refuses.
check_LTLIBRARIES += tests/plugins/sytest-frontend.la
tests_plugins_sytest_frontend_la_SOURCES = tests/plugins/sytest_frontend.c
tests_plugins_sytest_frontend_la_CPPFLAGS = $(SY_TEST_PLUGIN_CPPFLAGS)
tests_plugins_sytest_frontend_la_CFLAGS = $(SY_PLUGIN_CFLAGS)
tests_plugins_sytest_frontend_la_LDFLAGS = $(SY_TEST_PLUGIN_LDFLAGS)
tests_plugins_sytest_frontend_la_LIBADD = -lpthread
TESTS += tests/cli/test_serve_cli.sh
EXTRA_DIST += tests/cli/test_serve_cli.sh

# /metrics' [device] graphs counters through `switchyard serve` and HTTP, on
# the graph-op test wrappers of tests/graphs.mk (sygraph, sygraph-attn).
TESTS += tests/cli/test_serve_graph_metrics.sh
EXTRA_DIST += tests/cli/test_serve_graph_metrics.sh

# The server's message normalisation before a chat template renders, on the
# shared chat-template oracle (tool calls as sent on the OpenAI wire, content
# parts, the developer role).
check_PROGRAMS += tests/unit/test_chat_glue
TESTS += tests/unit/test_chat_glue
tests_unit_test_chat_glue_SOURCES = tests/unit/test_chat_glue.c tests/unit/test_check.h
tests_unit_test_chat_glue_CPPFLAGS = $(libsycore_a_CPPFLAGS)
tests_unit_test_chat_glue_LDADD = $(SY_CORE_LIBS)

# Constraints, logit_bias and tool calls in the server, on the small model
# with the Qwen3 template (hermes tool calls); outputs checked by python's
# jsonschema ($PYTHON_JSONSCHEMA, found by configure).
check_PROGRAMS += tests/unit/test_serve_guide
TESTS += tests/unit/test_serve_guide
tests_unit_test_serve_guide_SOURCES = tests/unit/test_serve_guide.c tests/unit/test_check.h
tests_unit_test_serve_guide_CPPFLAGS = $(libsycore_a_CPPFLAGS)
tests_unit_test_serve_guide_LDADD = $(SY_CORE_LIBS)

# The same end to end: `switchyard serve` over HTTP with the Qwen3 template,
# python (urllib + jsonschema) as client and oracle.
TESTS += tests/cli/test_serve_guide.sh
EXTRA_DIST += tests/cli/test_serve_guide.sh
