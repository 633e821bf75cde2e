# tools

# sy-mkmodel: seeded synthetic Hugging Face checkpoints (tests, benchmarks,
# the build's models/small). util.c is compiled in rather than linking libsycore.a
# so the tool builds on its own (it needs only the float conversions).
bin_PROGRAMS += sy-mkmodel
sy_mkmodel_SOURCES = \
	tools/mkmodel/main.c tools/mkmodel/mkmodel.h \
	tools/mkmodel/spec.c tools/mkmodel/rng.c \
	tools/mkmodel/weights.c tools/mkmodel/config.c \
	tools/mkmodel/bpe.c tools/mkmodel/corpus.c \
	tools/mkmodel/quant.c tools/mkmodel/gptoss.c \
	core/util/util.c core/util/util.h
sy_mkmodel_CPPFLAGS = $(libsycore_a_CPPFLAGS)
sy_mkmodel_LDADD = $(JANSSON_LIBS) $(PCRE2_LIBS) $(LIBS) -lm
EXTRA_DIST += tools/mkmodel/README.md
