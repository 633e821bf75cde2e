/* Helpers shared by the tokenizer tests: shared data, JSON lines, printing. */
#ifndef SY_TEST_TOKENIZER_COMMON_H
#define SY_TEST_TOKENIZER_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* $SY_SHARED_DIR, or NULL after printing why the test cannot run. */
const char *sy_tt_shared_dir(void);
/* Reads a JSON-lines file into an array of values (NULL on error, printed). */
json_t *sy_tt_read_jsonl(const char *path);
/* Loads a JSON file (NULL on error, printed). */
json_t *sy_tt_read_json(const char *path);
/* A JSON array of integers into a malloc'd array (NULL if not one). */
int32_t *sy_tt_ids(const json_t *arr, size_t *n);
/* Prints s with C escapes, at most max bytes. */
void sy_tt_print_escaped(const char *label, const char *s, size_t n, size_t max);
void sy_tt_print_ids(const char *label, const int32_t *ids, size_t n);

#endif
