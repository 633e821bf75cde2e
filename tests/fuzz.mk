# Fuzzing (docs/fuzzing.md). Six targets in tests/fuzz/fuzz_<name>.c, each
# one LLVMFuzzerTestOneInput:
#   config         INI loader (core/plugin/config.c)
#   chat_template  chat-template lexer, parser and evaluator (core/chat)
#   tokenizer      tokenizer.json loading, encoding, decoding (core/tokenizer)
#   safetensors    safetensors header and index parser (core/model/safetensors.c)
#   openai         request JSON -> sy_request (plugins/frontend/http/http_openai.c)
#   http_h1        HTTP/1.1 request parser and routes (plugins/frontend/http/http_h1.c)
#
# `make check` builds each target with replay_main.c (any compiler) and
# replays tests/fuzz/corpus/<name>/ and tests/fuzz/regressions/<name>/.
# `make fuzz` builds the libFuzzer binaries (fuzz/fuzz_<name>) with the clang
# configure found; `make check-fuzz FUZZ_SECONDS=N` runs each for N seconds.
SY_FUZZ_TARGETS = config chat_template tokenizer safetensors openai http_h1
SY_FUZZ_HTTP_CPPOPTS = $(AM_CPPFLAGS) -I$(top_srcdir)/plugins/frontend/http -I$(top_srcdir)/tests/fuzz
SY_FUZZ_HTTP_COPTS = $(AM_CFLAGS) $(NGHTTP2_CFLAGS) $(OPENSSL_CFLAGS) $(JANSSON_CFLAGS)
SY_FUZZ_HTTP_LIBS = $(NGHTTP2_LIBS) $(OPENSSL_LIBS) $(JANSSON_LIBS) $(LIBS) -lpthread -lm

check_PROGRAMS += tests/fuzz/replay_config tests/fuzz/replay_chat_template tests/fuzz/replay_tokenizer \
	tests/fuzz/replay_safetensors tests/fuzz/replay_openai tests/fuzz/replay_http_h1
TESTS += tests/fuzz/replay_config tests/fuzz/replay_chat_template tests/fuzz/replay_tokenizer \
	tests/fuzz/replay_safetensors tests/fuzz/replay_openai tests/fuzz/replay_http_h1

tests_fuzz_replay_config_SOURCES = tests/fuzz/fuzz_config.c tests/fuzz/replay_main.c \
	tests/fuzz/fuzz_common.c tests/fuzz/fuzz_common.h
tests_fuzz_replay_config_CPPFLAGS = $(libsycore_a_CPPFLAGS) -DFUZZ_TARGET='"config"'
tests_fuzz_replay_config_LDADD = $(SY_CORE_LIBS)

tests_fuzz_replay_chat_template_SOURCES = tests/fuzz/fuzz_chat_template.c tests/fuzz/replay_main.c \
	tests/fuzz/fuzz_common.c tests/fuzz/fuzz_common.h
tests_fuzz_replay_chat_template_CPPFLAGS = $(libsycore_a_CPPFLAGS) -DFUZZ_TARGET='"chat_template"'
tests_fuzz_replay_chat_template_LDADD = $(SY_CORE_LIBS)

tests_fuzz_replay_tokenizer_SOURCES = tests/fuzz/fuzz_tokenizer.c tests/fuzz/replay_main.c \
	tests/fuzz/fuzz_common.c tests/fuzz/fuzz_common.h
tests_fuzz_replay_tokenizer_CPPFLAGS = $(libsycore_a_CPPFLAGS) -DFUZZ_TARGET='"tokenizer"' \
	-DSY_FUZZ_SRCDIR='"$(abs_top_srcdir)"'
tests_fuzz_replay_tokenizer_LDADD = $(SY_CORE_LIBS)

tests_fuzz_replay_safetensors_SOURCES = tests/fuzz/fuzz_safetensors.c tests/fuzz/replay_main.c \
	tests/fuzz/fuzz_common.c tests/fuzz/fuzz_common.h
tests_fuzz_replay_safetensors_CPPFLAGS = $(libsycore_a_CPPFLAGS) -DFUZZ_TARGET='"safetensors"'
tests_fuzz_replay_safetensors_LDADD = $(SY_CORE_LIBS)

# The HTTP targets compile the plugin's own sources in (a plugin links no core).
tests_fuzz_replay_openai_SOURCES = tests/fuzz/fuzz_openai.c tests/fuzz/replay_main.c \
	tests/fuzz/fuzz_common.c tests/fuzz/fuzz_common.h tests/fuzz/fuzz_http_env.c tests/fuzz/fuzz_http_env.h \
	$(plugins_frontend_http_sy_frontend_http_la_SOURCES)
tests_fuzz_replay_openai_CPPFLAGS = $(SY_FUZZ_HTTP_CPPOPTS) -DFUZZ_TARGET='"openai"'
tests_fuzz_replay_openai_CFLAGS = $(SY_FUZZ_HTTP_COPTS)
tests_fuzz_replay_openai_LDADD = $(SY_FUZZ_HTTP_LIBS)

tests_fuzz_replay_http_h1_SOURCES = tests/fuzz/fuzz_http_h1.c tests/fuzz/replay_main.c \
	tests/fuzz/fuzz_common.c tests/fuzz/fuzz_common.h tests/fuzz/fuzz_http_env.c tests/fuzz/fuzz_http_env.h \
	$(plugins_frontend_http_sy_frontend_http_la_SOURCES)
tests_fuzz_replay_http_h1_CPPFLAGS = $(SY_FUZZ_HTTP_CPPOPTS) -DFUZZ_TARGET='"http_h1"'
tests_fuzz_replay_http_h1_CFLAGS = $(SY_FUZZ_HTTP_COPTS)
tests_fuzz_replay_http_h1_LDADD = $(SY_FUZZ_HTTP_LIBS)

EXTRA_DIST += tests/fuzz/corpus tests/fuzz/regressions tests/fuzz/dict tests/fuzz/check-fuzz.sh \
	tests/fuzz/make_seeds.py

# ------------------------------------------------------------ libFuzzer
# Not automake programs: they need FUZZ_CC (clang) whatever CC is. Every
# .c of the core, the http plugin and tests/fuzz is compiled once into
# fuzz/obj/ (again when it or a header it includes changed), the core's
# into fuzz/libsycore-fuzz.a, then each target is linked.
SY_FUZZ_COPTS = -std=c11 -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined \
	-fno-sanitize-recover=undefined -Wall -Wextra -Wno-unused-parameter
SY_FUZZ_CPPOPTS = $(AM_CPPFLAGS) -I$(top_srcdir)/plugins/frontend/http -I$(top_srcdir)/tests/fuzz \
	$(JANSSON_CFLAGS) $(PCRE2_CFLAGS) $(INIH_CFLAGS) $(NGHTTP2_CFLAGS) $(OPENSSL_CFLAGS) \
	-DSY_PLUGIN_INSTALL_DIR='"$(plugindir)"' -DSY_FUZZ_SRCDIR='"$(abs_top_srcdir)"'
SY_FUZZ_LDOPTS = -fsanitize=fuzzer,address,undefined
SY_FUZZ_CORE_LIBS = fuzz/libsycore-fuzz.a $(INIH_LIBS) $(JANSSON_LIBS) $(PCRE2_LIBS) $(LIBS) -lpthread -lm
SY_FUZZ_HARNESS = tests/fuzz/fuzz_config.c tests/fuzz/fuzz_chat_template.c tests/fuzz/fuzz_tokenizer.c \
	tests/fuzz/fuzz_safetensors.c tests/fuzz/fuzz_openai.c tests/fuzz/fuzz_http_h1.c \
	tests/fuzz/fuzz_common.c tests/fuzz/fuzz_http_env.c

if HAVE_FUZZERS
fuzz: config.h
	@$(MKDIR_P) fuzz/obj
	@for f in $(libsycore_a_SOURCES) $(plugins_frontend_http_sy_frontend_http_la_SOURCES) $(SY_FUZZ_HARNESS); do \
	  case $$f in *.c) ;; *) continue ;; esac; \
	  o=fuzz/obj/`echo $$f | sed -e 's|/|_|g' -e 's|\.c$$|.o|'`; \
	  stale=no; test -f $$o || stale=yes; \
	  if test $$stale = no; then \
	    for d in `sed -e 's/^[^:]*://' -e 's/\\\\$$//' $$o.d 2>/dev/null`; do \
	      test $$d -nt $$o && { stale=yes; break; }; \
	    done; \
	  fi; \
	  if test $$stale = yes; then \
	    echo "  FUZZCC   $$f"; \
	    $(FUZZ_CC) $(SY_FUZZ_COPTS) $(SY_FUZZ_CPPOPTS) -MMD -MF $$o.d -c -o $$o $(srcdir)/$$f || exit 1; \
	  fi; \
	done
	@rm -f fuzz/libsycore-fuzz.a
	@objs=; for f in $(libsycore_a_SOURCES); do case $$f in *.c) \
	  objs="$$objs fuzz/obj/`echo $$f | sed -e 's|/|_|g' -e 's|\.c$$|.o|'`";; esac; done; \
	  $(AR) cr fuzz/libsycore-fuzz.a $$objs && $(RANLIB) fuzz/libsycore-fuzz.a
	@http=; for f in $(plugins_frontend_http_sy_frontend_http_la_SOURCES); do case $$f in *.c) \
	  http="$$http fuzz/obj/`echo $$f | sed -e 's|/|_|g' -e 's|\.c$$|.o|'`";; esac; done; \
	for t in $(SY_FUZZ_TARGETS); do \
	  echo "  FUZZLD   fuzz/fuzz_$$t"; \
	  case $$t in \
	    openai|http_h1|anthropic) $(FUZZ_CC) $(SY_FUZZ_LDOPTS) -o fuzz/fuzz_$$t fuzz/obj/tests_fuzz_fuzz_$$t.o \
	      fuzz/obj/tests_fuzz_fuzz_common.o fuzz/obj/tests_fuzz_fuzz_http_env.o $$http $(SY_FUZZ_HTTP_LIBS) || exit 1 ;; \
	    *) $(FUZZ_CC) $(SY_FUZZ_LDOPTS) -o fuzz/fuzz_$$t fuzz/obj/tests_fuzz_fuzz_$$t.o \
	      fuzz/obj/tests_fuzz_fuzz_common.o $(SY_FUZZ_CORE_LIBS) || exit 1 ;; \
	  esac; \
	done

FUZZ_SECONDS = 20
FUZZ_SEED =
check-fuzz: fuzz
	FUZZ_SEED="$(FUZZ_SEED)" $(SHELL) $(srcdir)/tests/fuzz/check-fuzz.sh $(FUZZ_SECONDS) $(srcdir)/tests/fuzz fuzz $(SY_FUZZ_TARGETS)
else
fuzz check-fuzz:
	@echo "make $@: configure found no clang that links -fsanitize=fuzzer (install clang and" \
	  "libclang-rt-14-dev, or give FUZZ_CC=...; see docs/fuzzing.md)" >&2; exit 1
endif
.PHONY: fuzz check-fuzz

# toolcall: the tool-call parsers of every family (core/toolcall), fed whole and in random pieces.
SY_FUZZ_TARGETS += toolcall
SY_FUZZ_HARNESS += tests/fuzz/fuzz_toolcall.c
check_PROGRAMS += tests/fuzz/replay_toolcall
TESTS += tests/fuzz/replay_toolcall
tests_fuzz_replay_toolcall_SOURCES = tests/fuzz/fuzz_toolcall.c tests/fuzz/replay_main.c \
	tests/fuzz/fuzz_common.c tests/fuzz/fuzz_common.h
tests_fuzz_replay_toolcall_CPPFLAGS = $(libsycore_a_CPPFLAGS) -DFUZZ_TARGET='"toolcall"'
tests_fuzz_replay_toolcall_LDADD = $(SY_CORE_LIBS)

# anthropic: the Messages API request parser and its answers (plugins/frontend/http/http_anthropic*.c).
SY_FUZZ_TARGETS += anthropic
SY_FUZZ_HARNESS += tests/fuzz/fuzz_anthropic.c
check_PROGRAMS += tests/fuzz/replay_anthropic
TESTS += tests/fuzz/replay_anthropic
tests_fuzz_replay_anthropic_SOURCES = tests/fuzz/fuzz_anthropic.c tests/fuzz/replay_main.c \
	tests/fuzz/fuzz_common.c tests/fuzz/fuzz_common.h tests/fuzz/fuzz_http_env.c tests/fuzz/fuzz_http_env.h \
	$(plugins_frontend_http_sy_frontend_http_la_SOURCES)
tests_fuzz_replay_anthropic_CPPFLAGS = $(SY_FUZZ_HTTP_CPPOPTS) -DFUZZ_TARGET='"anthropic"'
tests_fuzz_replay_anthropic_CFLAGS = $(SY_FUZZ_HTTP_COPTS)
tests_fuzz_replay_anthropic_LDADD = $(SY_FUZZ_HTTP_LIBS)

# json_schema: the JSON schema, regex and text_until grammar builders (core/grammar), then the compiler and matcher.
SY_FUZZ_TARGETS += json_schema
SY_FUZZ_HARNESS += tests/fuzz/fuzz_json_schema.c
check_PROGRAMS += tests/fuzz/replay_json_schema
TESTS += tests/fuzz/replay_json_schema
tests_fuzz_replay_json_schema_SOURCES = tests/fuzz/fuzz_json_schema.c tests/fuzz/replay_main.c \
	tests/fuzz/fuzz_common.c tests/fuzz/fuzz_common.h
tests_fuzz_replay_json_schema_CPPFLAGS = $(libsycore_a_CPPFLAGS) -DFUZZ_TARGET='"json_schema"'
tests_fuzz_replay_json_schema_LDADD = $(SY_CORE_LIBS)

# gbnf: the GBNF parser and dump, the compiler, the matcher and the token masks
# (each mask checked against a brute-force scan of a small vocabulary).
SY_FUZZ_TARGETS += gbnf
SY_FUZZ_HARNESS += tests/fuzz/fuzz_gbnf.c
check_PROGRAMS += tests/fuzz/replay_gbnf
TESTS += tests/fuzz/replay_gbnf
tests_fuzz_replay_gbnf_SOURCES = tests/fuzz/fuzz_gbnf.c tests/fuzz/replay_main.c \
	tests/fuzz/fuzz_common.c tests/fuzz/fuzz_common.h
tests_fuzz_replay_gbnf_CPPFLAGS = $(libsycore_a_CPPFLAGS) -DFUZZ_TARGET='"gbnf"'
tests_fuzz_replay_gbnf_LDADD = $(SY_CORE_LIBS)
