switchyard_SOURCES += core/cli/main.c core/cli/commands.h \
	core/cli/cli_common.c core/cli/cli_common.h \
	core/cli/cmd_generate.c core/cli/cmd_serve.c \
	core/cli/cmd_bench_comm.c core/cli/cmd_bench_grammar.c core/cli/cmd_bench_spec.c core/cli/cmd_doctor.c \
	core/cli/cmd_tune_moe.c
switchyard_CPPFLAGS += -DSY_DEFAULT_CONFIG='"$(sysconfdir)/switchyard/switchyard.ini"'
