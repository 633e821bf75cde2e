# Tool calls: per-family parsers of model output and the grammars that
# force a call (docs/tool-calls.md).
libsycore_a_SOURCES += core/toolcall/toolcall.h
