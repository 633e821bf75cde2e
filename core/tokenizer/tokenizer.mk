# tokenizer: tokenizer.json loading, encoding (normalizers, PCRE2
# pre-tokenizers, added tokens, BPE), streaming decoding.
libsycore_a_SOURCES += core/tokenizer/tokenizer.h core/tokenizer/tok_internal.h \
	core/tokenizer/tokenizer_load.c core/tokenizer/encode.c core/tokenizer/tok_util.c \
	core/tokenizer/regex.c core/tokenizer/normalizer.c core/tokenizer/pretokenizer.c \
	core/tokenizer/bpe.c core/tokenizer/added_tokens.c core/tokenizer/decoder.c \
	core/tokenizer/detok.c core/tokenizer/unicode.c core/tokenizer/unicode_data.h \
	core/tokenizer/unicode_data_decomp.c core/tokenizer/unicode_data_seq.c \
	core/tokenizer/unicode_data_case.c
EXTRA_DIST += core/tokenizer/gen_unicode_data.py
