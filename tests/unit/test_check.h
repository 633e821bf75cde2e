/* Minimal assertion helpers for the unit tests: count, report, never abort. */
#ifndef SY_TEST_CHECK_H
#define SY_TEST_CHECK_H

#include <stdio.h>
#include <string.h>

static int sy_test_failures;
static int sy_test_checks;

#define CHECK(cond)                                                                      \
    do {                                                                                 \
        sy_test_checks++;                                                                \
        if (!(cond)) {                                                                   \
            sy_test_failures++;                                                          \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);     \
        }                                                                                \
    } while (0)

#define CHECK_CONTAINS(hay, needle)                                                      \
    do {                                                                                 \
        sy_test_checks++;                                                                \
        if (!strstr((hay), (needle))) {                                                  \
            sy_test_failures++;                                                          \
            fprintf(stderr, "%s:%d: expected \"%s\" in \"%s\"\n", __FILE__, __LINE__,    \
                    (needle), (hay));                                                    \
        }                                                                                \
    } while (0)

static inline int sy_test_done(const char *name)
{
    printf("%s: %d checks, %d failed\n", name, sy_test_checks, sy_test_failures);
    return sy_test_failures ? 1 : 0;
}

#endif
