libsycore_a_SOURCES += core/util/log.c core/util/log.h core/util/util.c core/util/util.h
libsycore_a_SOURCES += core/util/utf8.c core/util/utf8.h
