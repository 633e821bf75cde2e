/* Small helpers shared by the core's modules. */
#ifndef SY_UTIL_H
#define SY_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "switchyard/plugin.h"

/* Reads a whole file into a malloc'd NUL-terminated buffer. */
int sy_read_file(const char *path, char **data, size_t *len, sy_err *err);
/* dir + "/" + name into out (size cap); returns 0, or -1 if it does not fit. */
int sy_path_join(char *out, size_t cap, const char *dir, const char *name);
int sy_file_exists(const char *path);
/* Monotonic seconds. */
double sy_now(void);
/* strdup that never returns NULL for a non-NULL input unless out of memory. */
char *sy_strdup(const char *s);
/* Converts a half-float or bfloat16 bit pattern to float. */
float sy_f16_to_f32(uint16_t h);
float sy_bf16_to_f32(uint16_t b);
uint16_t sy_f32_to_bf16(float f);
uint16_t sy_f32_to_f16(float f);

/*
 * A command-line option's number, parsed strictly (the whole string, in [lo, hi]); otherwise prints
 * "who: option OPT expects an integer in [lo, hi], found \"S\"" on stderr and returns -1.
 */
int sy_opt_int(const char *who, const char *opt, const char *s, long long lo, long long hi, long long *out);
int sy_opt_float(const char *who, const char *opt, const char *s, double lo, double hi, double *out);

#endif
