# The plugin SDK as a third party meets it: plugin-check on every in-tree
# CPU plugin and on deliberately wrong ones, the examples built out of tree
# against the installed SDK and used through config edits alone, and the
# ABI promises (an older minor's smaller tables, a failing plugin).
TESTS += tests/sdk/test_plugin_check.sh tests/sdk/test_examples.sh tests/sdk/test_abi.sh
EXTRA_DIST += tests/sdk/test_plugin_check.sh tests/sdk/test_examples.sh tests/sdk/test_abi.sh tests/sdk/lib.sh

check_LTLIBRARIES += tests/plugins/sysdk-wrongmoe.la tests/plugins/sysdk-fail.la tests/plugins/sysdk-olddev.la
tests_plugins_sysdk_wrongmoe_la_SOURCES = tests/plugins/sysdk.c tests/plugins/sywrap_device.h
tests_plugins_sysdk_wrongmoe_la_CPPFLAGS = $(SY_TEST_PLUGIN_CPPFLAGS) -DSYSDK_WRONGMOE
tests_plugins_sysdk_wrongmoe_la_CFLAGS = $(SY_PLUGIN_CFLAGS)
tests_plugins_sysdk_wrongmoe_la_LDFLAGS = $(SY_TEST_PLUGIN_LDFLAGS)
tests_plugins_sysdk_fail_la_SOURCES = tests/plugins/sysdk.c tests/plugins/sywrap_device.h
tests_plugins_sysdk_fail_la_CPPFLAGS = $(SY_TEST_PLUGIN_CPPFLAGS) -DSYSDK_FAIL
tests_plugins_sysdk_fail_la_CFLAGS = $(SY_PLUGIN_CFLAGS)
tests_plugins_sysdk_fail_la_LDFLAGS = $(SY_TEST_PLUGIN_LDFLAGS)
tests_plugins_sysdk_olddev_la_SOURCES = tests/plugins/sysdk.c tests/plugins/sywrap_device.h
tests_plugins_sysdk_olddev_la_CPPFLAGS = $(SY_TEST_PLUGIN_CPPFLAGS) -DSYSDK_OLDDEV
tests_plugins_sysdk_olddev_la_CFLAGS = $(SY_PLUGIN_CFLAGS)
tests_plugins_sysdk_olddev_la_LDFLAGS = $(SY_TEST_PLUGIN_LDFLAGS)
tests_plugins_sysdk_olddev_la_LIBADD = -ldl

# The SDK's autoconf macro, and the examples' sources for plugin authors.
aclocaldir = $(datadir)/aclocal
dist_aclocal_DATA = m4/switchyard-plugin.m4
exampledir = $(docdir)/examples/plugins
dist_example_DATA = examples/plugins/Makefile examples/plugins/README.md examples/plugins/example_device.c \
	examples/plugins/example_attn.c \
	examples/plugins/example_moe.c examples/plugins/example_comm.c examples/plugins/example_line.c

# make installcheck (and so distcheck): the examples built against the
# installed SDK with their own plain Makefile and pkg-config, then checked
# by the installed `switchyard plugin-check`.
installcheck-examples:
	SY_SRCDIR="$(abs_top_srcdir)" $(SHELL) $(srcdir)/tests/sdk/test_examples.sh --installed \
	  "$(DESTDIR)$(bindir)/switchyard$(EXEEXT)" "$(DESTDIR)$(pkgconfigdir)" "$(DESTDIR)"
installcheck-local: installcheck-examples
.PHONY: installcheck-examples
