libsycore_a_SOURCES += core/plugin/config.h core/plugin/loader.h core/plugin/host.h
