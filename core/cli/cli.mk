switchyard_SOURCES += core/cli/main.c
