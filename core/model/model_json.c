/* Typed field readers for the checkpoint's JSON files. */
#include "config.h"

#include "model/model_json.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

const char *sy__mjson_type_name(const json_t *v)
{
    if (!v)
        return "nothing";
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a real number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "?";
}

json_t *sy__mjson_field(const json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    return json_is_null(v) ? NULL : v;
}

/* "parent.key" or "key". */
static const char *field_name(char *buf, size_t cap, const char *parent, const char *key)
{
    if (parent)
        snprintf(buf, cap, "%s.%s", parent, key);
    else
        snprintf(buf, cap, "%s", key);
    return buf;
}

static int missing(const sy_json_reader *r, const json_t *obj, const char *parent, const char *key, const char *what)
{
    char fb[128];
    return sy_err_set(r->err, SY_ERR_INVALID, "%s: required field '%s' (%s) is %s", r->path,
                      field_name(fb, sizeof fb, parent, key), what, json_object_get(obj, key) ? "null" : "missing");
}

static int wrong_type(const sy_json_reader *r, const char *parent, const char *key, const char *what, const json_t *v)
{
    char fb[128];
    return sy_err_set(r->err, SY_ERR_INVALID, "%s: field '%s' should be %s, found %s", r->path,
                      field_name(fb, sizeof fb, parent, key), what, sy__mjson_type_name(v));
}

int sy__mjson_int(const sy_json_reader *r, const json_t *obj, const char *parent, const char *key, bool required,
                 int64_t dflt, int64_t min, int64_t max, int32_t *out)
{
    json_t *v = sy__mjson_field(obj, key);
    int64_t x = dflt;
    if (!v) {
        if (required)
            return missing(r, obj, parent, key, "an integer");
    } else if (!json_is_integer(v)) {
        return wrong_type(r, parent, key, "an integer", v);
    } else {
        x = json_integer_value(v);
    }
    if (v && (x < min || x > max)) {
        char fb[128];
        return sy_err_set(r->err, SY_ERR_INVALID, "%s: field '%s' is %lld; expected an integer in [%lld, %lld]",
                          r->path, field_name(fb, sizeof fb, parent, key), (long long)x, (long long)min,
                          (long long)max);
    }
    *out = (int32_t)x;
    return SY_OK;
}

int sy__mjson_float(const sy_json_reader *r, const json_t *obj, const char *parent, const char *key, bool required,
                   double dflt, double min, double max, float *out)
{
    json_t *v = sy__mjson_field(obj, key);
    double x = dflt;
    if (!v) {
        if (required)
            return missing(r, obj, parent, key, "a number");
    } else if (!json_is_number(v)) {
        return wrong_type(r, parent, key, "a number", v);
    } else {
        x = json_number_value(v);
    }
    if (v && (!isfinite(x) || x < min || x > max)) {
        char fb[128];
        return sy_err_set(r->err, SY_ERR_INVALID, "%s: field '%s' is %g; expected a number in [%g, %g]", r->path,
                          field_name(fb, sizeof fb, parent, key), x, min, max);
    }
    *out = (float)x;
    return SY_OK;
}

int sy__mjson_bool(const sy_json_reader *r, const json_t *obj, const char *parent, const char *key, bool dflt,
                  bool *out)
{
    json_t *v = sy__mjson_field(obj, key);
    if (!v) {
        *out = dflt;
        return SY_OK;
    }
    if (!json_is_boolean(v))
        return wrong_type(r, parent, key, "a boolean", v);
    *out = json_is_true(v);
    return SY_OK;
}

int sy__mjson_string(const sy_json_reader *r, const json_t *obj, const char *parent, const char *key, bool required,
                    char *out, size_t cap)
{
    json_t *v = sy__mjson_field(obj, key);
    out[0] = '\0';
    if (!v)
        return required ? missing(r, obj, parent, key, "a string") : SY_OK;
    if (!json_is_string(v))
        return wrong_type(r, parent, key, "a string", v);
    snprintf(out, cap, "%s", json_string_value(v));
    return SY_OK;
}

int sy__mjson_int_list(const sy_json_reader *r, const json_t *obj, const char *key, bool allow_scalar, int64_t min,
                      int64_t max, int32_t *out, int cap, int *n_found)
{
    json_t *v = sy__mjson_field(obj, key);
    *n_found = 0;
    if (!v)
        return SY_OK;
    const char *what = allow_scalar ? "an integer or a list of integers" : "a list of integers";
    size_t n;
    if (json_is_integer(v) && allow_scalar)
        n = 1;
    else if (json_is_array(v))
        n = json_array_size(v);
    else
        return wrong_type(r, NULL, key, what, v);
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_is_array(v) ? json_array_get(v, i) : v;
        if (!json_is_integer(e))
            return sy_err_set(r->err, SY_ERR_INVALID, "%s: field '%s' should be %s, but element %zu is %s", r->path,
                              key, what, i, sy__mjson_type_name(e));
        json_int_t x = json_integer_value(e);
        if (x < min || x > max)
            return sy_err_set(r->err, SY_ERR_INVALID, "%s: field '%s' holds %lld; expected integers in [%lld, %lld]",
                              r->path, key, (long long)x, (long long)min, (long long)max);
        if ((int)i < cap)
            out[i] = (int32_t)x;
    }
    *n_found = (int)n;
    return SY_OK;
}
