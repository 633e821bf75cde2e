# plugin tests: configuration, the loader and its refusals, the host table,
# the `plugins` command, and a plugin built out of tree.
check_PROGRAMS += tests/unit/test_config tests/unit/test_loader
TESTS += tests/unit/test_config tests/unit/test_loader tests/outoftree.sh
EXTRA_DIST += tests/outoftree.sh

tests_unit_test_config_SOURCES = tests/unit/test_config.c tests/unit/test_check.h
tests_unit_test_config_CPPFLAGS = $(libsycore_a_CPPFLAGS)
tests_unit_test_config_LDADD = $(SY_CORE_LIBS)

tests_unit_test_loader_SOURCES = tests/unit/test_loader.c tests/unit/test_check.h
tests_unit_test_loader_CPPFLAGS = $(libsycore_a_CPPFLAGS)
tests_unit_test_loader_LDADD = $(SY_CORE_LIBS)

# Test plugins: one source, one shared object per variant (see the top of
# tests/plugins/sytest.c). -rpath makes libtool build a shared module even
# though they are never installed; build-plugins/ links them for the tests.
SY_TEST_PLUGIN_CPPFLAGS = -I$(top_srcdir)/include
# -module literally here: automake cannot see it inside the configure-time
# SY_PLUGIN_LDFLAGS, and refuses a module name without lib otherwise.
SY_TEST_PLUGIN_LDFLAGS = -module -avoid-version -shared $(SY_PLUGIN_LDFLAGS) -rpath $(abs_builddir)
check_LTLIBRARIES += \
	tests/plugins/sytest-abi2.la \
	tests/plugins/sytest-noentry.la \
	tests/plugins/sytest-minor.la \
	tests/plugins/sytest-moe.la \
	tests/plugins/sytest-cuda.la \
	tests/plugins/sytest-never.la \
	tests/plugins/sytest-low.la \
	tests/plugins/sytest-high.la \
	tests/plugins/sytest-createfail.la \
	tests/plugins/sytest-malformed.la
tests_plugins_sytest_abi2_la_SOURCES = tests/plugins/sytest.c
tests_plugins_sytest_abi2_la_CPPFLAGS = $(SY_TEST_PLUGIN_CPPFLAGS) -DSYTEST_ABI2
tests_plugins_sytest_abi2_la_CFLAGS = $(SY_PLUGIN_CFLAGS)
tests_plugins_sytest_abi2_la_LDFLAGS = $(SY_TEST_PLUGIN_LDFLAGS)
tests_plugins_sytest_noentry_la_SOURCES = tests/plugins/sytest.c
tests_plugins_sytest_noentry_la_CPPFLAGS = $(SY_TEST_PLUGIN_CPPFLAGS) -DSYTEST_NOENTRY
tests_plugins_sytest_noentry_la_CFLAGS = $(SY_PLUGIN_CFLAGS)
tests_plugins_sytest_noentry_la_LDFLAGS = $(SY_TEST_PLUGIN_LDFLAGS)
tests_plugins_sytest_minor_la_SOURCES = tests/plugins/sytest.c
tests_plugins_sytest_minor_la_CPPFLAGS = $(SY_TEST_PLUGIN_CPPFLAGS) -DSYTEST_MINOR
tests_plugins_sytest_minor_la_CFLAGS = $(SY_PLUGIN_CFLAGS)
tests_plugins_sytest_minor_la_LDFLAGS = $(SY_TEST_PLUGIN_LDFLAGS)
tests_plugins_sytest_moe_la_SOURCES = tests/plugins/sytest.c
tests_plugins_sytest_moe_la_CPPFLAGS = $(SY_TEST_PLUGIN_CPPFLAGS) -DSYTEST_MOE
tests_plugins_sytest_moe_la_CFLAGS = $(SY_PLUGIN_CFLAGS)
tests_plugins_sytest_moe_la_LDFLAGS = $(SY_TEST_PLUGIN_LDFLAGS)
tests_plugins_sytest_cuda_la_SOURCES = tests/plugins/sytest.c
tests_plugins_sytest_cuda_la_CPPFLAGS = $(SY_TEST_PLUGIN_CPPFLAGS) -DSYTEST_CUDA
tests_plugins_sytest_cuda_la_CFLAGS = $(SY_PLUGIN_CFLAGS)
tests_plugins_sytest_cuda_la_LDFLAGS = $(SY_TEST_PLUGIN_LDFLAGS)
tests_plugins_sytest_never_la_SOURCES = tests/plugins/sytest.c
tests_plugins_sytest_never_la_CPPFLAGS = $(SY_TEST_PLUGIN_CPPFLAGS) -DSYTEST_NEVER
tests_plugins_sytest_never_la_CFLAGS = $(SY_PLUGIN_CFLAGS)
tests_plugins_sytest_never_la_LDFLAGS = $(SY_TEST_PLUGIN_LDFLAGS)
tests_plugins_sytest_low_la_SOURCES = tests/plugins/sytest.c
tests_plugins_sytest_low_la_CPPFLAGS = $(SY_TEST_PLUGIN_CPPFLAGS) -DSYTEST_LOW
tests_plugins_sytest_low_la_CFLAGS = $(SY_PLUGIN_CFLAGS)
tests_plugins_sytest_low_la_LDFLAGS = $(SY_TEST_PLUGIN_LDFLAGS)
tests_plugins_sytest_high_la_SOURCES = tests/plugins/sytest.c
tests_plugins_sytest_high_la_CPPFLAGS = $(SY_TEST_PLUGIN_CPPFLAGS) -DSYTEST_HIGH
tests_plugins_sytest_high_la_CFLAGS = $(SY_PLUGIN_CFLAGS)
tests_plugins_sytest_high_la_LDFLAGS = $(SY_TEST_PLUGIN_LDFLAGS)
tests_plugins_sytest_createfail_la_SOURCES = tests/plugins/sytest.c
tests_plugins_sytest_createfail_la_CPPFLAGS = $(SY_TEST_PLUGIN_CPPFLAGS) -DSYTEST_CREATEFAIL
tests_plugins_sytest_createfail_la_CFLAGS = $(SY_PLUGIN_CFLAGS)
tests_plugins_sytest_createfail_la_LDFLAGS = $(SY_TEST_PLUGIN_LDFLAGS)
tests_plugins_sytest_malformed_la_SOURCES = tests/plugins/sytest.c
tests_plugins_sytest_malformed_la_CPPFLAGS = $(SY_TEST_PLUGIN_CPPFLAGS) -DSYTEST_MALFORMED
tests_plugins_sytest_malformed_la_CFLAGS = $(SY_PLUGIN_CFLAGS)
tests_plugins_sytest_malformed_la_LDFLAGS = $(SY_TEST_PLUGIN_LDFLAGS)

# An attention plugin built against ABI 1.0: refused for per-layer windows and sinks (ABI 1.1).
check_LTLIBRARIES += tests/plugins/syabi10-attn.la
tests_plugins_syabi10_attn_la_SOURCES = tests/plugins/syabi10.c
tests_plugins_syabi10_attn_la_CPPFLAGS = $(SY_TEST_PLUGIN_CPPFLAGS)
tests_plugins_syabi10_attn_la_CFLAGS = $(SY_PLUGIN_CFLAGS)
tests_plugins_syabi10_attn_la_LDFLAGS = $(SY_TEST_PLUGIN_LDFLAGS)
TESTS += tests/cli/test_attn_abi10.sh
EXTRA_DIST += tests/cli/test_attn_abi10.sh

# The out-of-tree test against a real installation (make install; make
# installcheck, as distcheck does). `make check` runs tests/outoftree.sh too,
# installing into a scratch DESTDIR itself.
installcheck-outoftree:
	SY_BUILDDIR="$(abs_top_builddir)" $(SHELL) $(srcdir)/tests/outoftree.sh --installed \
	  "$(DESTDIR)$(bindir)/switchyard$(EXEEXT)" "$(DESTDIR)$(pkgconfigdir)" "$(DESTDIR)"
installcheck-local: installcheck-outoftree
.PHONY: installcheck-outoftree
