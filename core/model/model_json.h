/*
 * Typed field readers for config.json and generation_config.json (private
 * to core/model). Every error names the file, the field (with its parent
 * object, e.g. "rope_scaling.factor"), what was expected and what was found.
 *
 * A field that is absent or JSON null counts as missing: a required one is
 * an error, an optional one takes the default. Each reader returns SY_OK or
 * an sy_status with r->err filled in.
 */
#ifndef SY_MODEL_JSON_H
#define SY_MODEL_JSON_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "switchyard/plugin.h"

typedef struct sy_json_reader {
    const char *path; /* the file, for messages */
    sy_err *err;
} sy_json_reader;

/* "a string", "an integer", ... for messages. */
const char *sy__mjson_type_name(const json_t *v);

/* obj[key] or NULL when absent or null. */
json_t *sy__mjson_field(const json_t *obj, const char *key);

/* parent may be NULL (top level); it prefixes key in messages. */
int sy__mjson_int(const sy_json_reader *r, const json_t *obj, const char *parent, const char *key, bool required,
                 int64_t dflt, int64_t min, int64_t max, int32_t *out);
int sy__mjson_float(const sy_json_reader *r, const json_t *obj, const char *parent, const char *key, bool required,
                   double dflt, double min, double max, float *out);
int sy__mjson_bool(const sy_json_reader *r, const json_t *obj, const char *parent, const char *key, bool dflt,
                  bool *out);
/* Copies into out (cap bytes); "" when absent and optional. */
int sy__mjson_string(const sy_json_reader *r, const json_t *obj, const char *parent, const char *key, bool required,
                    char *out, size_t cap);
/*
 * A list of integers in [min, max], or with allow_scalar also a single
 * integer (absent/null: *n_found = 0). At most cap values are stored in out;
 * *n_found says how many there were.
 */
int sy__mjson_int_list(const sy_json_reader *r, const json_t *obj, const char *key, bool allow_scalar, int64_t min,
                      int64_t max, int32_t *out, int cap, int *n_found);

#endif
