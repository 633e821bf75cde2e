# Constrained decoding: grammars (GBNF, JSON schema, regex), the matcher
# and the token masks (docs/structured-outputs.md).
libsycore_a_SOURCES += core/grammar/grammar.h
