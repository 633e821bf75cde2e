libsycore_a_SOURCES += core/plugin/config.h core/plugin/loader.h core/plugin/host.h \
	core/plugin/config_internal.h core/plugin/loader_config.h core/plugin/loader_config.c \
	core/plugin/config.c core/plugin/config_keys.c core/plugin/loader.c core/plugin/host.c
# The `plugins` command lives with the loader it reports on.
switchyard_SOURCES += core/cli/cmd_plugins.c core/cli/cmd_plugins.h
