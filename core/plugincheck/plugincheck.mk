# `switchyard plugin-check`: the command and its float64 reference checks.
switchyard_SOURCES += core/cli/cmd_plugin_check.c core/plugincheck/check.h \
	core/plugincheck/check_common.c core/plugincheck/check_device.c \
	core/plugincheck/check_attn.c core/plugincheck/check_moe.c core/plugincheck/check_misc.c
