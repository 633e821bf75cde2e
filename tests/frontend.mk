# frontend tests: the http plugin against a fake serving host
# (tests/frontend/fake_host.c), driven by raw sockets and curl.
check_PROGRAMS += tests/frontend/test_http
TESTS += tests/frontend/test_http
tests_frontend_test_http_SOURCES = tests/frontend/test_http.c tests/frontend/fake_host.c tests/frontend/fake_host.h \
	tests/frontend/fake_script.c tests/frontend/fake_script.h \
	tests/frontend/h2_client.c tests/frontend/h2_client.h
tests_frontend_test_http_CPPFLAGS = $(AM_CPPFLAGS) $(JANSSON_CFLAGS) $(NGHTTP2_CFLAGS)
tests_frontend_test_http_LDADD = $(NGHTTP2_LIBS) $(JANSSON_LIBS) $(LIBS) -lpthread

# The Anthropic Messages API (/v1/messages) against the same fake host.
check_PROGRAMS += tests/frontend/test_anthropic
TESTS += tests/frontend/test_anthropic
tests_frontend_test_anthropic_SOURCES = tests/frontend/test_anthropic.c tests/frontend/fake_host.c \
	tests/frontend/fake_host.h tests/frontend/fake_script.c tests/frontend/fake_script.h
tests_frontend_test_anthropic_CPPFLAGS = $(AM_CPPFLAGS) $(JANSSON_CFLAGS)
tests_frontend_test_anthropic_LDADD = $(JANSSON_LIBS) $(LIBS) -lpthread

# The official openai Python package against the same fake host. Not part
# of `make check` (it needs `pip install openai`); fails, never skips, when
# the package is missing.
EXTRA_DIST += tests/frontend/openai_check.sh tests/frontend/openai_check.py
check-openai: tests/frontend/test_http build-plugins/.stamp
	SY_PLUGIN_DIR="$(abs_top_builddir)/build-plugins" \
	  $(SHELL) $(srcdir)/tests/frontend/openai_check.sh $(abs_top_builddir)/tests/frontend/test_http \
	  $(srcdir)/tests/frontend/openai_check.py
.PHONY: check-openai

# The official anthropic Python package against the Messages API on the
# same fake host; like check-openai, outside `make check`, and it fails
# (never skips) without the package.
EXTRA_DIST += tests/frontend/anthropic_check.sh tests/frontend/anthropic_check.py
check-anthropic: tests/frontend/test_http build-plugins/.stamp
	SY_PLUGIN_DIR="$(abs_top_builddir)/build-plugins" \
	  $(SHELL) $(srcdir)/tests/frontend/anthropic_check.sh $(abs_top_builddir)/tests/frontend/test_http \
	  $(srcdir)/tests/frontend/anthropic_check.py
.PHONY: check-anthropic
