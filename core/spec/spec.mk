# Speculative decoding: the [speculative] configuration and the draft
# sources (n-gram lookup, MTP layers, a draft model); verification is the
# scheduler's (core/serve/scheduler.c).
libsycore_a_SOURCES += \
	core/spec/spec.h
libsycore_a_SOURCES += core/spec/spec_mtp.c core/spec/spec_draft.c
libsycore_a_SOURCES += core/spec/spec_config.c core/spec/spec_source.c core/spec/spec_ngram.c
