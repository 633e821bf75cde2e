# Faults a user would meet: misbehaving clients, KV exhaustion, failing
# plugins, broken checkpoints, SIGTERM under load (tests/faults/). The long
# soak (tens of thousands of requests) is `make check-soak`, not part of check.
TESTS += tests/faults/test_faults.sh tests/faults/test_broken_model.sh tests/faults/test_access.sh
EXTRA_DIST += tests/faults/test_faults.sh tests/faults/test_broken_model.sh tests/faults/test_access.sh tests/faults/lib.sh \
	tests/faults/faultclient.py \
	tests/faults/test_soak.sh

# syfault: an attention plugin that fails on the Nth forward call or at create.
check_LTLIBRARIES += tests/plugins/syfault.la
tests_plugins_syfault_la_SOURCES = tests/plugins/syfault.c
tests_plugins_syfault_la_CPPFLAGS = $(SY_TEST_PLUGIN_CPPFLAGS)
tests_plugins_syfault_la_CFLAGS = $(SY_PLUGIN_CFLAGS)
tests_plugins_syfault_la_LDFLAGS = $(SY_TEST_PLUGIN_LDFLAGS)

# Tens of thousands of requests over HTTP/2 and HTTP/1.1 at concurrency 256:
# zero errors, flat RSS, no KV block leaked. A few minutes on 2 cores.
check-soak: all build-test-plugins/.stamp
	$(AM_V_at)$(AM_TESTS_ENVIRONMENT) $(SHELL) $(srcdir)/tests/faults/test_soak.sh
.PHONY: check-soak
