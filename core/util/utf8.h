/* Strict UTF-8 (RFC 3629), one scalar value at a time, and hex digits. */
#ifndef SY_UTF8_H
#define SY_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Decodes one scalar value at s[0..n); returns its length (1-4), or 0 when
 * the bytes there are not UTF-8: n == 0, truncated, a stray continuation
 * byte, overlong, a surrogate, or above U+10FFFF. */
size_t sy_utf8_decode(const char *s, size_t n, uint32_t *cp);
/* Writes cp (at most U+10FFFF; surrogates are the caller's to avoid) as
 * UTF-8 into out; returns the length, 1-4. */
size_t sy_utf8_encode(uint32_t cp, char out[4]);
/* The value of hex digit c (0-9, a-f, A-F), or -1. */
int sy_hex_digit(int c);

#endif
