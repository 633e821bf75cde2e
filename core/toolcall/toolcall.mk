# Tool calls: per-family parsers of model output and the grammars that
# force a call (docs/tool-calls.md).
libsycore_a_SOURCES += core/toolcall/toolcall.h
libsycore_a_SOURCES += core/toolcall/toolcall_internal.h core/toolcall/toolcall_json.c \
	core/toolcall/toolcall_tools.c core/toolcall/toolcall_parser.h core/toolcall/toolcall_emit.c \
	core/toolcall/toolcall_parse.c core/toolcall/toolcall_grammar.c
