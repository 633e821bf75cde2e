libsycore_a_SOURCES += core/tokenizer/tokenizer.h
