/*
 * Shared by the source builders that turn JSON schemas, regexes, choices
 * and stop strings into GBNF (grammar_json_schema.c, grammar_json_format.c,
 * grammar_regex.c, grammar_builders.c): code-point sets, the JSON string
 * encoding of a character, and the pieces the schema compiler borrows from
 * the regex and format builders.
 */
#ifndef SY_GRAMMAR_BUILD_H
#define SY_GRAMMAR_BUILD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grammar/grammar_internal.h"

/* ------------------------------------------------------------ code-point sets */

/* Inclusive ranges of Unicode scalar values; surrogates never belong. */
typedef struct sy_gcp_range {
    uint32_t lo, hi;
} sy_gcp_range;

typedef struct sy_gcpset {
    sy_gcp_range *r;
    size_t n, cap;
    bool oom;
} sy_gcpset;

void sy_gcpset_free(sy_gcpset *s);
void sy_gcpset_add(sy_gcpset *s, uint32_t lo, uint32_t hi);
/* Sorts and merges; drops surrogates (U+D800..U+DFFF). */
void sy_gcpset_normalize(sy_gcpset *s);
/* s := every scalar value not in s (normalises first). */
void sy_gcpset_complement(sy_gcpset *s);
bool sy_gcpset_has(const sy_gcpset *s, uint32_t cp);
/* s := s minus [lo, hi] (normalises first). */
void sy_gcpset_remove(sy_gcpset *s, uint32_t lo, uint32_t hi);
/* Appends the set as one GBNF [class]; s must be normalised and non-empty. */
void sy_gcpset_emit(sy_gbuf *b, const sy_gcpset *s);
/*
 * Appends an expression matching one character of s as it may appear
 * inside a JSON string: the set minus '"', '\' and the control characters
 * as a [class], plus the escape of each of those the set holds. s must be
 * normalised and non-empty.
 */
void sy_gcpset_emit_json(sy_gbuf *b, const sy_gcpset *s);

/* Appends a literal matching code point cp as written in a JSON string
 * ("\"" as \", controls as \n or \u00XX, anything else itself). */
void sy_gjson_cp_literal(sy_gbuf *b, uint32_t cp);

/*
 * Appends the JSON rules every JSON builder uses, named prefix-X:
 *   char    one character of a JSON string body (escapes included; a
 *           \u escape is a BMP non-surrogate or a whole surrogate pair,
 *           so one char is one code point, as minLength counts)
 *   string  "..."          number  a JSON number    int  a JSON integer
 *   value   any JSON value   object  any object     array  any array
 *   colon   ":" " "?         comma  "," " "?
 * Whitespace is one optional space after ':' and ',', nowhere else.
 * Numbers have at most SY_GJSON_MAX_DIGITS integer digits and as many
 * fraction digits, and at most three exponent digits, so every output ends.
 */
#define SY_GJSON_MAX_DIGITS 16
void sy_gjson_basic_rules(sy_gbuf *b, const char *prefix);

/* ------------------------------------------------------------ regex */

/*
 * Appends to out one GBNF expression (parenthesised, no rules) for regex.
 * json_string: the expression spells each matched character as it is
 * written inside a JSON string (for `pattern`). search_any: NULL for a full
 * match (^ and $ at the ends are dropped); otherwise the expression of one
 * arbitrary character, and a branch without ^ (or $) gets search_any* in
 * front (or behind), as JSON schema's unanchored `pattern` requires.
 * Unsupported constructs are SY_ERR_INVALID naming path and the offset.
 */
int sy_gregex_emit(sy_gbuf *out, const char *regex, bool json_string, const char *search_any, const char *path,
                   sy_err *err);

/*
 * Recognises a regex that is one character class repeated, anchored at
 * both ends (^[a-z0-9_]{3,16}$, ^\\d+$, ^.*$): its code points into *set
 * (normalised; the caller frees it) and its counts (*max -1: unbounded).
 * Such a pattern can be intersected with minLength/maxLength.
 */
bool sy_gregex_single_class(const char *regex, sy_gcpset *set, long *min, long *max);

/* ------------------------------------------------------------ formats and ranges */

/* Appends the expression of a string body (no quotes) in format fmt
 * (one of sy_gformat_names); false
 * when fmt is not supported. */
bool sy_gformat_emit(sy_gbuf *out, const char *fmt);
/* The lengths (code points) of fmt's strings as sy_gformat_emit spells them;
 * *max -1: unbounded. */
void sy_gformat_lengths(const char *fmt, long *min, long *max);
/* The supported formats, comma-separated (for errors and docs). */
extern const char sy_gformat_names[];

/*
 * Appends an expression for the decimal integers in [lo, hi] in JSON form
 * (no leading zeros, "-" only before non-zero). has_lo / has_hi false means
 * unbounded on that side. Requires lo <= hi when both are given.
 */
void sy_gint_range_emit(sy_gbuf *out, bool has_lo, int64_t lo, bool has_hi, int64_t hi);

#endif
