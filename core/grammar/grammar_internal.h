/*
 * What the source builders (JSON schema, regex, choice, text_until) need
 * from the grammar core: they write GBNF text into an sy_gbuf and hand it
 * to sy_gsrc_add_gbnf, so every builder goes through the one parser and
 * sy_gsrc_dump shows exactly what was built.
 *
 * GBNF escapes: in "literals" and [classes], \xHH, \uHHHH and \UHHHHHHHH
 * name Unicode code points (as in llama.cpp), which the matcher turns into
 * their UTF-8 bytes; raw bytes that are not UTF-8 cannot be spelt.
 */
#ifndef SY_GRAMMAR_INTERNAL_H
#define SY_GRAMMAR_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grammar/grammar.h"

/* A growable NUL-terminated text buffer. Out of memory is sticky: the
 * appends become no-ops and oom stays true, so a builder checks once. */
typedef struct sy_gbuf {
    char *s;
    size_t len, cap;
    bool oom;
} sy_gbuf;

void sy_gbuf_init(sy_gbuf *b);
void sy_gbuf_free(sy_gbuf *b);
void sy_gbuf_putn(sy_gbuf *b, const char *s, size_t n);
void sy_gbuf_puts(sy_gbuf *b, const char *s);
void sy_gbuf_printf(sy_gbuf *b, const char *fmt, ...) SY__PRINTF(2, 3);
/* Appends s (n bytes of UTF-8) as one quoted GBNF literal, "..." with the
 * quotes, escaping what GBNF needs escaped. A special token's text must be
 * written with one call so it stays one literal (see grammar.h). Invalid
 * UTF-8 bytes are written as \xHH, i.e. as the code points U+0080..U+00FF. */
void sy_gbuf_literal(sy_gbuf *b, const char *s, size_t n);
/* Appends code point cp escaped for use inside [ ] (handles ] ^ - \). */
void sy_gbuf_class_cp(sy_gbuf *b, uint32_t cp);

/* True when src already defines rule name (rules may be defined once). */
bool sy_gsrc_has_rule(const sy_gsrc *src, const char *name);

/* Longest rule name sy_gsrc_add_gbnf accepts ([a-zA-Z0-9_-]+). */
#define SY_GRULE_NAME_MAX 256

#endif
