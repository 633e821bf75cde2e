# Chat templates: a Jinja-subset interpreter (docs/chat-templates.md).
libsycore_a_SOURCES += core/chat/chat_template.h core/chat/chat_internal.h \
	core/chat/chat_lexer.c core/chat/chat_parser.c core/chat/chat_value.c \
	core/chat/chat_eval.c core/chat/chat_filters.c core/chat/chat_load.c
