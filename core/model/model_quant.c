/*
 * Quantised checkpoints (model_quant.h): the scheme from the config files
 * and the scale tensors of each quantised weight.
 */
#include "config.h"

#include "model/model_quant.h"

#include "model/model_json.h"
#include "util/util.h"

#include <fnmatch.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *sy_quant_method_name(sy_quant_method m)
{
    switch (m) {
    case SY_QUANT_FP8: return "fp8";
    case SY_QUANT_NVFP4: return "nvfp4";
    case SY_QUANT_MXFP4: return "mxfp4";
    default: return "none";
    }
}

static int load_json_file(const char *path, json_t **out, sy_err *err)
{
    json_error_t jerr;
    *out = json_load_file(path, 0, &jerr);
    if (!*out)
        return sy_err_set(err, SY_ERR_INVALID, "%s: not valid JSON (line %d, column %d: %s)", path, jerr.line,
                          jerr.column, jerr.text);
    if (!json_is_object(*out)) {
        json_decref(*out);
        *out = NULL;
        return sy_err_set(err, SY_ERR_INVALID, "%s: should hold a JSON object", path);
    }
    return SY_OK;
}

/* Appends the strings of list (obj[key]) to q->exclude. */
static int read_excludes(sy_model_quant *q, const json_t *obj, const char *key, const char *where, sy_err *err)
{
    const json_t *l = sy__mjson_field(obj, key);
    if (!l)
        return SY_OK;
    if (!json_is_array(l))
        return sy_err_set(err, SY_ERR_INVALID, "%s: field '%s' should be a list of module names, found %s", where, key,
                          sy__mjson_type_name(l));
    for (size_t i = 0; i < json_array_size(l); i++) {
        const json_t *s = json_array_get(l, i);
        if (!json_is_string(s))
            return sy_err_set(err, SY_ERR_INVALID, "%s: %s[%zu] should be a string, found %s", where, key, i,
                              sy__mjson_type_name(s));
        if (q->n_exclude == SY_QUANT_MAX_EXCLUDE)
            return sy_err_set(err, SY_ERR_UNSUPPORTED, "%s: %s holds more than %d entries", where, key,
                              SY_QUANT_MAX_EXCLUDE);
        q->exclude[q->n_exclude] = strdup(json_string_value(s));
        if (!q->exclude[q->n_exclude])
            return sy_err_set(err, SY_ERR_NOMEM, "%s: out of memory", where);
        q->n_exclude++;
    }
    return SY_OK;
}

/* NVFP4 from a ModelOpt block ({"quant_algo": "NVFP4", "group_size": 16, "exclude_modules": [...]}). */
static int read_modelopt(sy_model_quant *q, const json_t *o, const char *where, sy_err *err)
{
    const json_t *algo = sy__mjson_field(o, "quant_algo");
    if (!json_is_string(algo))
        return sy_err_set(err, SY_ERR_INVALID, "%s: 'quant_algo' should be a string (\"NVFP4\"), found %s", where,
                          algo ? sy__mjson_type_name(algo) : "nothing");
    if (strcmp(json_string_value(algo), "NVFP4") != 0)
        return sy_err_set(err, SY_ERR_UNSUPPORTED, "%s: quant_algo '%s' is not supported (supported: NVFP4)", where,
                          json_string_value(algo));
    const json_t *gs = sy__mjson_field(o, "group_size");
    if (gs && (!json_is_integer(gs) || json_integer_value(gs) != 16))
        return sy_err_set(err, SY_ERR_UNSUPPORTED, "%s: NVFP4 'group_size' must be 16, found %s", where,
                          json_is_integer(gs) ? "another integer" : sy__mjson_type_name(gs));
    q->method = SY_QUANT_NVFP4;
    return read_excludes(q, o, "exclude_modules", where, err);
}

static int read_quantization_config(sy_model_quant *q, const json_t *qc, const char *path, sy_err *err)
{
    char where[4200];
    snprintf(where, sizeof where, "%s: quantization_config", path);
    if (!json_is_object(qc))
        return sy_err_set(err, SY_ERR_INVALID, "%s should be an object, found %s", where, sy__mjson_type_name(qc));
    const json_t *m = sy__mjson_field(qc, "quant_method");
    if (!json_is_string(m))
        return sy_err_set(err, SY_ERR_INVALID, "%s.quant_method should be a string, found %s", where,
                          m ? sy__mjson_type_name(m) : "nothing");
    const char *method = json_string_value(m);
    snprintf(q->source, sizeof q->source, "%s", where);
    if (strcmp(method, "fp8") == 0) {
        q->method = SY_QUANT_FP8;
        const json_t *b = sy__mjson_field(qc, "weight_block_size");
        if (b) {
            if (!json_is_array(b) || json_array_size(b) != 2 || !json_is_integer(json_array_get(b, 0)) ||
                !json_is_integer(json_array_get(b, 1)))
                return sy_err_set(err, SY_ERR_INVALID, "%s.weight_block_size should be [rows, cols], found %s", where,
                                  sy__mjson_type_name(b));
            const json_int_t b0 = json_integer_value(json_array_get(b, 0)), b1 = json_integer_value(json_array_get(b, 1));
            if (b0 < 1 || b1 < 16 || b1 % 16 != 0 || b0 > (1 << 20) || b1 > (1 << 20))
                return sy_err_set(err, SY_ERR_UNSUPPORTED,
                                  "%s.weight_block_size is [%lld, %lld]; expected rows >= 1 and cols a multiple of 16",
                                  where, (long long)b0, (long long)b1);
            q->block[0] = (int32_t)b0;
            q->block[1] = (int32_t)b1;
        }
        const json_t *act = sy__mjson_field(qc, "activation_scheme");
        if (act && !json_is_string(act))
            return sy_err_set(err, SY_ERR_INVALID, "%s.activation_scheme should be a string, found %s", where,
                              sy__mjson_type_name(act));
        int rc = read_excludes(q, qc, "modules_to_not_convert", where, err);
        return rc ? rc : read_excludes(q, qc, "ignored_layers", where, err);
    }
    if (strcmp(method, "mxfp4") == 0) { /* gpt-oss: the experts' _blocks/_scales (model_gptoss.c) */
        q->method = SY_QUANT_MXFP4;
        return read_excludes(q, qc, "modules_to_not_convert", where, err);
    }
    if (strcmp(method, "modelopt") == 0) {
        const json_t *inner = sy__mjson_field(qc, "quantization");
        return read_modelopt(q, inner && json_is_object(inner) ? inner : qc, where, err);
    }
    return sy_err_set(err, SY_ERR_UNSUPPORTED,
                      "%s.quant_method is '%s'; supported: fp8 (F8_E4M3 with per-tensor or block scales) modelopt "
                      "(NVFP4) and mxfp4 (gpt-oss experts)",
                      where, method);
}

int sy_model_quant_load(const char *dir, sy_model_quant *q, sy_err *err)
{
    memset(q, 0, sizeof *q);
    char path[4096];
    json_t *root = NULL;
    int rc = SY_OK;
    if (sy_path_join(path, sizeof path, dir, "config.json") == 0 && sy_file_exists(path)) {
        rc = load_json_file(path, &root, err);
        if (rc)
            return rc;
        const json_t *qc = sy__mjson_field(root, "quantization_config");
        if (qc)
            rc = read_quantization_config(q, qc, path, err);
        json_decref(root);
        if (rc)
            return rc;
    }
    if (q->method == SY_QUANT_NONE && sy_path_join(path, sizeof path, dir, "hf_quant_config.json") == 0 &&
        sy_file_exists(path)) {
        rc = load_json_file(path, &root, err);
        if (rc)
            return rc;
        const json_t *o = sy__mjson_field(root, "quantization");
        char where[4200];
        snprintf(where, sizeof where, "%s: quantization", path);
        if (!o || !json_is_object(o))
            rc = sy_err_set(err, SY_ERR_INVALID, "%s: field 'quantization' should be an object, found %s", path,
                            o ? sy__mjson_type_name(o) : "nothing");
        else
            rc = read_modelopt(q, o, where, err);
        snprintf(q->source, sizeof q->source, "%s", where);
        json_decref(root);
    }
    return rc;
}

void sy_model_quant_free(sy_model_quant *q)
{
    for (int i = 0; i < q->n_exclude; i++)
        free(q->exclude[i]);
    q->n_exclude = 0;
}

int sy_model_quant_is_scale(const char *name)
{
    static const char *const sfx[] = {".weight_scale", ".weight_scale_inv", ".weight_scale_2", ".input_scale",
                                      "_proj_scales"};
    const size_t n = strlen(name);
    for (size_t i = 0; i < sizeof sfx / sizeof sfx[0]; i++) {
        const size_t k = strlen(sfx[i]);
        if (n > k && strcmp(name + n - k, sfx[i]) == 0)
            return 1;
    }
    return 0;
}

int sy_model_quant_excluded(const sy_model_quant *q, const char *name)
{
    char module[512];
    snprintf(module, sizeof module, "%s", name);
    size_t n = strlen(module);
    if (n > 7 && strcmp(module + n - 7, ".weight") == 0)
        module[n - 7] = '\0';
    for (int i = 0; i < q->n_exclude; i++) {
        const char *p = q->exclude[i];
        if (fnmatch(p, module, 0) == 0 || strcmp(p, module) == 0)
            return 1;
        /* A bare suffix ("lm_head", "mlp.gate") names the module wherever it sits. */
        size_t pl = strlen(p), ml = strlen(module);
        if (ml > pl && module[ml - pl - 1] == '.' && strcmp(module + ml - pl, p) == 0)
            return 1;
    }
    return 0;
}

static int is_scalar(const sy_tensor *t)
{
    return t->ndim == 0 || (t->ndim == 1 && t->shape[0] == 1);
}

/* name with its ".weight" suffix replaced by suffix. */
static const sy_st_entry *sibling(const sy_safetensors *st, const char *name, const char *suffix, char *buf, size_t cap)
{
    size_t n = strlen(name);
    if (n > 7 && strcmp(name + n - 7, ".weight") == 0)
        n -= 7;
    snprintf(buf, cap, "%.*s%s", (int)n, name, suffix);
    return sy_st_find(st, buf);
}

static void shape_s(char *buf, size_t cap, const sy_tensor *t)
{
    size_t o = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < t->ndim && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    if (o < cap)
        snprintf(buf + o, cap - o, "]");
}

static int bind_fp8(const sy_model_quant *q, const sy_safetensors *st, const char *file, const char *name,
                    const sy_st_entry *e, sy_tensor *out, const sy_st_entry **used, int *n_used, sy_err *err)
{
    char sn[600], got[64];
    if (e->view.dtype != SY_DTYPE_FP8_E4M3 || e->view.ndim != 2)
        return sy_err_set(err, SY_ERR_INVALID, "%s: tensor '%s' should be a 2-D F8_E4M3 weight (%s), found %s ndim %d",
                          file, name, q->source, sy_dtype_name(e->view.dtype), e->view.ndim);
    const int64_t N = e->view.shape[0], K = e->view.shape[1];
    const sy_st_entry *s = sibling(st, name, ".weight_scale_inv", sn, sizeof sn);
    if (!s)
        s = sibling(st, name, ".weight_scale", sn, sizeof sn);
    if (!s) {
        sibling(st, name, ".weight_scale_inv", sn, sizeof sn);
        return sy_err_set(err, SY_ERR_INVALID, "%s: F8_E4M3 weight '%s' has no scale: expected '%s' (or "
                          "'.weight_scale') in the checkpoint",
                          file, name, sn);
    }
    if (s->view.dtype != SY_DTYPE_F32)
        return sy_err_set(err, SY_ERR_INVALID, "%s: scale '%s' should be F32, found %s", file, s->name,
                          sy_dtype_name(s->view.dtype));
    *out = e->view;
    out->scale = s->view.data;
    out->scale_dtype = SY_DTYPE_F32;
    out->global_scale = 1.0f;
    if (is_scalar(&s->view)) { /* one scale for the whole tensor */
        out->scale_block[0] = (int32_t)N;
        out->scale_block[1] = (int32_t)K;
    } else {
        if (!q->block[0]) {
            shape_s(got, sizeof got, &s->view);
            return sy_err_set(err, SY_ERR_INVALID,
                              "%s: scale '%s' has shape %s but %s has no weight_block_size: expected a scalar", file,
                              s->name, got, q->source);
        }
        const int64_t r = (N + q->block[0] - 1) / q->block[0], c = (K + q->block[1] - 1) / q->block[1];
        if (s->view.ndim != 2 || s->view.shape[0] != r || s->view.shape[1] != c) {
            shape_s(got, sizeof got, &s->view);
            return sy_err_set(err, SY_ERR_INVALID,
                              "%s: scale '%s' has shape %s; weight [%lld, %lld] with weight_block_size [%d, %d] "
                              "needs [%lld, %lld]",
                              file, s->name, got, (long long)N, (long long)K, q->block[0], q->block[1], (long long)r,
                              (long long)c);
        }
        out->scale_block[0] = q->block[0];
        out->scale_block[1] = q->block[1];
    }
    used[(*n_used)++] = s;
    return SY_OK;
}

static int bind_nvfp4(const sy_model_quant *q, const sy_safetensors *st, const char *file, const char *name,
                      const sy_st_entry *e, sy_tensor *out, const sy_st_entry **used, int *n_used, sy_err *err)
{
    char sn[600], got[64];
    if (e->view.dtype != SY_DTYPE_U8 || e->view.ndim != 2)
        return sy_err_set(err, SY_ERR_INVALID,
                          "%s: tensor '%s' should be a 2-D U8 weight of packed E2M1 pairs (%s), found %s ndim %d",
                          file, name, q->source, sy_dtype_name(e->view.dtype), e->view.ndim);
    const int64_t N = e->view.shape[0], K = e->view.shape[1] * 2;
    const sy_st_entry *s = sibling(st, name, ".weight_scale", sn, sizeof sn);
    if (!s)
        return sy_err_set(err, SY_ERR_INVALID, "%s: NVFP4 weight '%s' has no block scales: expected '%s'", file, name,
                          sn);
    if (s->view.dtype != SY_DTYPE_FP8_E4M3 || s->view.ndim != 2 || s->view.shape[0] != N ||
        s->view.shape[1] * 16 != K) {
        shape_s(got, sizeof got, &s->view);
        return sy_err_set(err, SY_ERR_INVALID,
                          "%s: scale '%s' is %s %s; weight '%s' holds [%lld, %lld] E2M1 values, so it needs F8_E4M3 "
                          "[%lld, %lld] (one per 16)",
                          file, s->name, sy_dtype_name(s->view.dtype), got, name, (long long)N, (long long)K,
                          (long long)N, (long long)(K / 16));
    }
    const sy_st_entry *g = sibling(st, name, ".weight_scale_2", sn, sizeof sn);
    if (!g)
        return sy_err_set(err, SY_ERR_INVALID, "%s: NVFP4 weight '%s' has no global scale: expected '%s'", file, name,
                          sn);
    if (g->view.dtype != SY_DTYPE_F32 || !is_scalar(&g->view))
        return sy_err_set(err, SY_ERR_INVALID, "%s: global scale '%s' should be an F32 scalar, found %s ndim %d",
                          file, g->name, sy_dtype_name(g->view.dtype), g->view.ndim);
    float gs;
    memcpy(&gs, g->view.data, sizeof gs);
    if (!(gs > 0.0f) || gs != gs || gs > 3.0e38f)
        return sy_err_set(err, SY_ERR_INVALID, "%s: global scale '%s' = %g; expected a finite positive number", file,
                          g->name, (double)gs);
    int64_t shape[2] = {N, K};
    sy_tensor_init(out, e->view.data, SY_DTYPE_FP4_E2M1, 2, shape);
    out->scale = s->view.data;
    out->scale_dtype = SY_DTYPE_FP8_E4M3;
    out->scale_block[0] = 1;
    out->scale_block[1] = 16;
    out->global_scale = gs;
    used[(*n_used)++] = s;
    used[(*n_used)++] = g;
    const sy_st_entry *in = sibling(st, name, ".input_scale", sn, sizeof sn);
    if (in)
        used[(*n_used)++] = in; /* static activation scale: activations stay F32 here */
    return SY_OK;
}

int sy_model_quant_bind(const sy_model_quant *q, const sy_safetensors *st, const char *file, const char *name,
                        const sy_st_entry *e, sy_tensor *out, const sy_st_entry **used, int *n_used, sy_err *err)
{
    *n_used = 0;
    if (q->method == SY_QUANT_NONE)
        return sy_err_set(err, SY_ERR_UNSUPPORTED,
                          "%s: tensor '%s' has dtype %s but the checkpoint declares no quantisation (config.json "
                          "quantization_config or hf_quant_config.json)",
                          file, name, sy_dtype_name(e->view.dtype));
    if (sy_model_quant_excluded(q, name))
        return sy_err_set(err, SY_ERR_INVALID, "%s: tensor '%s' has dtype %s but %s excludes its module from "
                          "quantisation",
                          file, name, sy_dtype_name(e->view.dtype), q->source);
    if (q->method == SY_QUANT_FP8)
        return bind_fp8(q, st, file, name, e, out, used, n_used, err);
    if (q->method == SY_QUANT_MXFP4)
        return sy_err_set(err, SY_ERR_UNSUPPORTED, "%s: tensor '%s' has dtype %s; %s (mxfp4) quantises only the "
                          "routed experts' _blocks / _scales tensors",
                          file, name, sy_dtype_name(e->view.dtype), q->source);
    return bind_nvfp4(q, st, file, name, e, out, used, n_used, err);
}
