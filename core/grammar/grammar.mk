# Constrained decoding: grammars (GBNF, JSON schema, regex), the matcher
# and the token masks (docs/structured-outputs.md).
libsycore_a_SOURCES += core/grammar/grammar.h
libsycore_a_SOURCES += core/grammar/grammar_internal.h core/grammar/grammar_impl.h \
	core/grammar/grammar_gbnf.c core/grammar/grammar_compile.c core/grammar/grammar_match.c \
	core/grammar/grammar_vocab.c core/grammar/grammar_mask.c core/grammar/grammar_vocab_tok.c \
	core/grammar/grammar_cache.c core/grammar/grammar_clone.c core/grammar/grammar_sets.c
# Source builders: JSON schema, regex, choice, text_until (grammar_build.h).
libsycore_a_SOURCES += core/grammar/grammar_build.h core/grammar/grammar_builders.c \
	core/grammar/grammar_regex.c core/grammar/grammar_json_schema.h core/grammar/grammar_json_schema.c \
	core/grammar/grammar_json_object.c core/grammar/grammar_json_format.c
