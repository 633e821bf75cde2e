/*
 * config.json (+ generation_config.json) -> sy_model_config.
 *
 * Generic transformer fields are read here; family-specific ones (MoE sizes,
 * which layers are MoE, sliding windows) by the family's hook in
 * model_arch.c. Defaults follow the family's transformers config class, so
 * a config that omits a field means what it means to transformers.
 */
#include "config.h"

#include "model/model.h"

#include "model/model_arch.h"
#include "model/model_json.h"
#include "util/log.h"
#include "util/util.h"

#include <errno.h>
#include <string.h>

#define MAX_DIM (1 << 24)
#define MAX_HEADS (1 << 16)
#define MAX_LAYERS (1 << 16)

static int load_json(const char *path, json_t **out, sy_err *err)
{
    char *text = NULL;
    size_t len = 0;
    *out = NULL;
    int rc = sy_read_file(path, &text, &len, err);
    if (rc != SY_OK)
        return rc;
    json_error_t jerr;
    json_t *root = json_loadb(text, len, 0, &jerr);
    free(text);
    if (!root)
        return sy_err_set(err, SY_ERR_INVALID, "%s: not valid JSON (line %d, column %d: %s)", path, jerr.line,
                          jerr.column, jerr.text);
    if (!json_is_object(root)) {
        rc = sy_err_set(err, SY_ERR_INVALID, "%s: should hold a JSON object, found %s", path,
                        sy__mjson_type_name(root));
        json_decref(root);
        return rc;
    }
    *out = root;
    return SY_OK;
}

static int read_arch(const sy_json_reader *r, const json_t *root, sy_model_config *cfg, const sy_arch_desc **desc)
{
    json_t *a = sy__mjson_field(root, "architectures");
    if (!a)
        return sy_err_set(r->err, SY_ERR_INVALID, "%s: required field 'architectures' (a list of strings) is %s",
                          r->path, json_object_get(root, "architectures") ? "null" : "missing");
    if (!json_is_array(a))
        return sy_err_set(r->err, SY_ERR_INVALID, "%s: field 'architectures' should be a list of strings, found %s",
                          r->path, sy__mjson_type_name(a));
    if (json_array_size(a) == 0)
        return sy_err_set(r->err, SY_ERR_INVALID, "%s: field 'architectures' is an empty list", r->path);
    json_t *a0 = json_array_get(a, 0);
    if (!json_is_string(a0))
        return sy_err_set(r->err, SY_ERR_INVALID, "%s: field 'architectures' should be a list of strings, but element "
                                                  "0 is %s",
                          r->path, sy__mjson_type_name(a0));
    const char *name = json_string_value(a0);
    *desc = sy__model_arch_find(name);
    if (!*desc) {
        char list[256];
        sy__model_arch_supported(list, sizeof list);
        return sy_err_set(r->err, SY_ERR_UNSUPPORTED, "%s: architecture '%s' is not supported (supported: %s)",
                          r->path, name, list);
    }
    cfg->arch = (*desc)->arch;
    snprintf(cfg->arch_name, sizeof cfg->arch_name, "%s", name);
    return sy__mjson_string(r, root, NULL, "model_type", false, cfg->model_type, sizeof cfg->model_type);
}

/*
 * RoPE, in both config.json layouts: the older top-level rope_theta /
 * partial_rotary_factor with rope_scaling, and transformers 5's
 * rope_parameters object, which carries them all. Where the layouts meet,
 * the value transformers 5 would use wins and a warning names both
 * (docs/models.md, "config.json layouts"):
 *  - rope_scaling and rope_parameters: a non-empty rope_scaling replaces
 *    rope_parameters whole (convert_rope_params_to_dict);
 *  - rope_theta, partial_rotary_factor: the object's; the top level's only
 *    fills a missing one (setdefault);
 *  - rope_type over the legacy type;
 *  - original_max_position_embeddings: the top level's (standardize_rope_params
 *    gives it priority), else the object's, else max_position_embeddings.
 */

/* Keys that only mean something with a scaling type. */
static const char *const rope_scaling_keys[] = {"factor",    "low_freq_factor", "high_freq_factor",
                                                "original_max_position_embeddings", "beta_fast", "beta_slow",
                                                "mscale",    "mscale_all_dim",  "attention_factor",
                                                "truncate",  "short_factor",    "long_factor"};

/* v as compact JSON, cut to cap, for warnings. */
static const char *json_brief(const json_t *v, char *buf, size_t cap)
{
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    snprintf(buf, cap, "%s", s ? s : "?");
    free(s);
    return buf;
}

/* The object the RoPE parameters come from (*rope NULL: none) and its name. */
static int rope_object(const sy_json_reader *r, const json_t *root, json_t **rope, const char **field)
{
    json_t *rs = sy__mjson_field(root, "rope_scaling"), *rp = sy__mjson_field(root, "rope_parameters");
    if (rs && !json_is_object(rs))
        return sy_err_set(r->err, SY_ERR_INVALID, "%s: field 'rope_scaling' should be an object or null, found %s",
                          r->path, sy__mjson_type_name(rs));
    if (rp && !json_is_object(rp))
        return sy_err_set(r->err, SY_ERR_INVALID,
                          "%s: field 'rope_parameters' should be an object or null, found %s", r->path,
                          sy__mjson_type_name(rp));
    *rope = NULL;
    *field = "rope_parameters";
    if (rs && json_object_size(rs) > 0) {
        if (rp && json_object_size(rp) > 0 && !json_equal(rs, rp)) {
            char a[160], b[160];
            sy_warn("%s: both rope_scaling %s and rope_parameters %s are given; using rope_scaling, as transformers 5 "
                    "does (it replaces rope_parameters with rope_scaling)",
                    r->path, json_brief(rs, a, sizeof a), json_brief(rp, b, sizeof b));
        }
        *rope = rs;
        *field = "rope_scaling";
    } else if (rp) {
        *rope = rp;
    }
    if (!*rope)
        return SY_OK;
    const char *key;
    json_t *v;
    json_object_foreach (*rope, key, v)
        if (json_is_object(v))
            return sy_err_set(r->err, SY_ERR_UNSUPPORTED,
                              "%s: %s.%s is an object: RoPE parameters per layer type are not supported (expected "
                              "one flat object of rope_type, rope_theta, factor, ...)",
                              r->path, *field, key);
    return SY_OK;
}

/* A number config.json may give in the RoPE object and at the top level: the object's wins. */
static int read_rope_float(const sy_json_reader *r, const json_t *root, const json_t *rope, const char *field,
                           const char *key, double dflt, double min, double max, float *out)
{
    float top = 0.0f;
    int rc = sy__mjson_float(r, root, NULL, key, false, dflt, min, max, &top);
    *out = top;
    if (rc != SY_OK || !rope || !sy__mjson_field(rope, key))
        return rc;
    rc = sy__mjson_float(r, rope, field, key, true, 0, min, max, out);
    if (rc == SY_OK && sy__mjson_field(root, key) && *out != top)
        sy_warn("%s: %s %g and %s.%s %g disagree; using %s.%s, as transformers 5 does (the top-level value only "
                "fills in a missing one)",
                r->path, key, (double)top, field, key, (double)*out, field, key);
    return rc;
}

/* llama3 / yarn: the top-level original_max_position_embeddings wins, then the object's, then max_pos. */
static int read_original_max_pos(const sy_json_reader *r, const json_t *root, const json_t *rope, const char *field,
                                 sy_model_config *cfg)
{
    const char *key = "original_max_position_embeddings";
    int32_t in = 0;
    int rc = sy__mjson_int(r, rope, field, key, false, cfg->max_pos, 1, INT32_MAX, &in);
    if (rc == SY_OK)
        rc = sy__mjson_int(r, root, NULL, key, false, in, 1, INT32_MAX, &cfg->rope_original_max_pos);
    if (rc == SY_OK && sy__mjson_field(rope, key) && sy__mjson_field(root, key) && in != cfg->rope_original_max_pos)
        sy_warn("%s: %s %d and %s.%s %d disagree; using the top-level %d, as transformers 5 does", r->path, key,
                cfg->rope_original_max_pos, field, key, in, cfg->rope_original_max_pos);
    return rc;
}

/* yarn: transformers' _compute_yarn_parameters fields. */
static int read_yarn(const sy_json_reader *r, const json_t *root, const json_t *rope, const char *field,
                     sy_model_config *cfg)
{
    int rc = read_original_max_pos(r, root, rope, field, cfg);
    /* beta_fast / beta_slow: transformers takes `or 32` / `or 1`, so 0 means the default too. */
    if (rc == SY_OK)
        rc = sy__mjson_float(r, rope, field, "beta_fast", false, 32.0, 0.0, 1e6, &cfg->rope_beta_fast);
    if (rc == SY_OK)
        rc = sy__mjson_float(r, rope, field, "beta_slow", false, 1.0, 0.0, 1e6, &cfg->rope_beta_slow);
    if (rc == SY_OK)
        rc = sy__mjson_float(r, rope, field, "mscale", false, 0.0, 0.0, 1e6, &cfg->rope_mscale);
    if (rc == SY_OK)
        rc = sy__mjson_float(r, rope, field, "mscale_all_dim", false, 0.0, 0.0, 1e6, &cfg->rope_mscale_all_dim);
    if (rc == SY_OK)
        rc = sy__mjson_bool(r, rope, field, "truncate", true, &cfg->rope_truncate);
    if (rc == SY_OK)
        rc = sy__mjson_float(r, rope, field, "attention_factor", false, 0.0, 1e-6, 1e6, &cfg->rope_attention_factor);
    if (rc != SY_OK)
        return rc;
    if (cfg->rope_beta_fast == 0.0f)
        cfg->rope_beta_fast = 32.0f;
    if (cfg->rope_beta_slow == 0.0f)
        cfg->rope_beta_slow = 1.0f;
    cfg->rope_scaling = SY_ROPE_SCALING_YARN;
    return SY_OK;
}

static int read_rope_scaling(const sy_json_reader *r, const json_t *root, const json_t *rope, const char *field,
                             sy_model_config *cfg)
{
    cfg->rope_scaling = SY_ROPE_SCALING_NONE;
    cfg->rope_factor = 1.0f;
    cfg->rope_truncate = true;
    cfg->rope_attention_factor = 0.0f;
    snprintf(cfg->rope_type_field, sizeof cfg->rope_type_field, "%s.rope_type", field);
    if (!rope)
        return SY_OK;
    char type[64], legacy[64];
    int rc = sy__mjson_string(r, rope, field, "rope_type", false, type, sizeof type);
    if (rc == SY_OK)
        rc = sy__mjson_string(r, rope, field, "type", false, legacy, sizeof legacy);
    if (rc != SY_OK)
        return rc;
    if (type[0] && legacy[0] && strcmp(type, legacy) != 0)
        sy_warn("%s: %s.rope_type '%s' and %s.type '%s' disagree; using rope_type, as transformers 5 does", r->path,
                field, type, field, legacy);
    const char *key = type[0] ? "rope_type" : "type";
    if (!type[0])
        memcpy(type, legacy, sizeof type);
    snprintf(cfg->rope_type_field, sizeof cfg->rope_type_field, "%s.%s", field, key);
    if (!type[0]) {
        /* transformers 5 reads no type as "default" and ignores the rest: refuse what would be ignored. */
        for (size_t i = 0; i < sizeof rope_scaling_keys / sizeof rope_scaling_keys[0]; i++)
            if (sy__mjson_field(rope, rope_scaling_keys[i]))
                return sy_err_set(r->err, SY_ERR_INVALID,
                                  "%s: field '%s' has neither 'rope_type' nor 'type', but sets '%s' (without a type "
                                  "transformers 5 uses the default RoPE and ignores it)",
                                  r->path, field, rope_scaling_keys[i]);
        return SY_OK;
    }
    if (strcmp(type, "default") == 0)
        return SY_OK;
    const bool linear = strcmp(type, "linear") == 0, llama3 = strcmp(type, "llama3") == 0;
    const bool yarn = strcmp(type, "yarn") == 0;
    if (!linear && !llama3 && !yarn)
        return sy_err_set(r->err, SY_ERR_UNSUPPORTED,
                          "%s: %s.%s '%s' is not supported (supported: default, linear, llama3, yarn, or no %s)",
                          r->path, field, key, type, field);
    rc = sy__mjson_float(r, rope, field, "factor", true, 1.0, 1e-6, 1e6, &cfg->rope_factor);
    if (rc != SY_OK)
        return rc;
    if (yarn)
        return read_yarn(r, root, rope, field, cfg);
    if (linear) {
        cfg->rope_scaling = SY_ROPE_SCALING_LINEAR;
        return SY_OK;
    }
    cfg->rope_scaling = SY_ROPE_SCALING_LLAMA3;
    rc = sy__mjson_float(r, rope, field, "low_freq_factor", true, 0, 1e-6, 1e6, &cfg->rope_low_freq_factor);
    if (rc == SY_OK)
        rc = sy__mjson_float(r, rope, field, "high_freq_factor", true, 0, 1e-6, 1e6, &cfg->rope_high_freq_factor);
    if (rc == SY_OK)
        rc = read_original_max_pos(r, root, rope, field, cfg);
    if (rc != SY_OK)
        return rc;
    if (!(cfg->rope_high_freq_factor > cfg->rope_low_freq_factor))
        return sy_err_set(r->err, SY_ERR_INVALID,
                          "%s: %s.high_freq_factor (%g) must be larger than low_freq_factor (%g)", r->path, field,
                          (double)cfg->rope_high_freq_factor, (double)cfg->rope_low_freq_factor);
    return SY_OK;
}

static int read_shapes(const sy_json_reader *r, const json_t *root, const sy_arch_desc *d, sy_model_config *cfg)
{
    int rc = sy__mjson_int(r, root, NULL, "hidden_size", true, 0, 1, MAX_DIM, &cfg->hidden);
    if (rc == SY_OK)
        rc = sy__mjson_int(r, root, NULL, "num_hidden_layers", true, 0, 1, MAX_LAYERS, &cfg->n_layers);
    if (rc == SY_OK)
        rc = sy__mjson_int(r, root, NULL, "num_attention_heads", true, 0, 1, MAX_HEADS, &cfg->n_heads);
    if (rc == SY_OK)
        rc = sy__mjson_int(r, root, NULL, "num_key_value_heads", false, cfg->n_heads, 1, cfg->n_heads,
                          &cfg->n_kv_heads);
    if (rc == SY_OK)
        rc = sy__mjson_int(r, root, NULL, "intermediate_size", true, 0, 1, MAX_DIM, &cfg->intermediate);
    if (rc == SY_OK)
        rc = sy__mjson_int(r, root, NULL, "vocab_size", true, 0, 1, INT32_MAX, &cfg->vocab);
    if (rc == SY_OK)
        rc = sy__mjson_int(r, root, NULL, "max_position_embeddings", false, d->default_max_pos, 1, INT32_MAX,
                          &cfg->max_pos);
    if (rc == SY_OK)
        rc = sy__mjson_float(r, root, NULL, "rms_norm_eps", false, d->default_rms_eps, 1e-30, 1.0, &cfg->rms_eps);
    if (rc != SY_OK)
        return rc;
    if (cfg->n_heads % cfg->n_kv_heads != 0)
        return sy_err_set(r->err, SY_ERR_INVALID,
                          "%s: num_attention_heads (%d) is not a multiple of num_key_value_heads (%d)", r->path,
                          cfg->n_heads, cfg->n_kv_heads);
    if (!sy__mjson_field(root, "head_dim") && d->default_head_dim <= 0 && cfg->hidden % cfg->n_heads != 0)
        return sy_err_set(r->err, SY_ERR_INVALID,
                          "%s: no head_dim, and hidden_size (%d) is not a multiple of num_attention_heads (%d)",
                          r->path, cfg->hidden, cfg->n_heads);
    rc = sy__mjson_int(r, root, NULL, "head_dim", false,
                       d->default_head_dim > 0 ? d->default_head_dim : cfg->hidden / cfg->n_heads, 1, MAX_DIM,
                       &cfg->head_dim);
    if (rc != SY_OK)
        return rc;
    if ((int64_t)cfg->n_heads * cfg->head_dim > MAX_DIM)
        return sy_err_set(r->err, SY_ERR_INVALID, "%s: num_attention_heads*head_dim (%d*%d) is too large", r->path,
                          cfg->n_heads, cfg->head_dim);
    return SY_OK;
}

/* After read_shapes: max_pos and head_dim are known. */
static int read_rope(const sy_json_reader *r, const json_t *root, const sy_arch_desc *d, sy_model_config *cfg)
{
    json_t *rope = NULL;
    const char *field = NULL;
    float prf = 1.0f;
    const double dflt_prf = d->default_partial_rotary > 0 ? d->default_partial_rotary : 1.0;
    int rc = rope_object(r, root, &rope, &field);
    if (rc == SY_OK)
        rc = read_rope_float(r, root, rope, field, "rope_theta", d->default_rope_theta, 1.0, 1e15, &cfg->rope_theta);
    if (rc == SY_OK)
        rc = read_rope_float(r, root, rope, field, "partial_rotary_factor", dflt_prf, 1e-6, 1.0, &prf);
    if (rc == SY_OK)
        rc = read_rope_scaling(r, root, rope, field, cfg);
    if (rc != SY_OK)
        return rc;
    cfg->rotary_dim = (int32_t)((double)cfg->head_dim * (double)prf);
    if (cfg->rotary_dim < 2 || cfg->rotary_dim % 2 != 0)
        return sy_err_set(r->err, SY_ERR_INVALID,
                          "%s: partial_rotary_factor %g%s of head_dim %d gives rotary dimension %d; expected an even "
                          "number >= 2",
                          r->path, (double)prf,
                          sy__mjson_field(root, "partial_rotary_factor") ||
                                  (rope && sy__mjson_field(rope, "partial_rotary_factor"))
                              ? ""
                              : " (the config class's default)",
                          cfg->head_dim, cfg->rotary_dim);
    return SY_OK;
}

static int read_flags(const sy_json_reader *r, const json_t *root, const sy_arch_desc *d, sy_model_config *cfg)
{
    int rc = sy__mjson_bool(r, root, NULL, "tie_word_embeddings", false, &cfg->tie_embeddings);
    if (rc == SY_OK && d->reads_attention_bias)
        rc = sy__mjson_bool(r, root, NULL, "attention_bias", false, &cfg->attention_bias);
    cfg->qk_norm = d->qk_norm;
    char act[64];
    if (rc == SY_OK)
        rc = sy__mjson_string(r, root, NULL, "hidden_act", false, act, sizeof act);
    if (rc != SY_OK)
        return rc;
    if (act[0] && strcmp(act, "silu") != 0)
        return sy_err_set(r->err, SY_ERR_UNSUPPORTED, "%s: hidden_act '%s' is not supported (supported: silu)",
                          r->path, act);
    return SY_OK;
}

static void set_dtype(const char *s, sy_model_config *cfg)
{
    static const struct {
        const char *name;
        sy_dtype dt;
    } map[] = {{"float32", SY_DTYPE_F32}, {"float16", SY_DTYPE_F16}, {"bfloat16", SY_DTYPE_BF16},
               {"float8_e4m3fn", SY_DTYPE_FP8_E4M3}};
    cfg->dtype = SY_DTYPE_F32;
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strcmp(s, map[i].name) == 0)
            cfg->dtype = map[i].dt;
}

/* Token ids: eos_token_id is an int, a list or null; -1 means none. */
static int read_special_ids(const sy_json_reader *r, const json_t *root, int32_t *bos, int32_t *eos, int *n_eos)
{
    int32_t b[1];
    int nb = 0;
    int rc = sy__mjson_int_list(r, root, "bos_token_id", true, -1, INT32_MAX, b, 1, &nb);
    if (rc != SY_OK)
        return rc;
    if (nb > 1)
        return sy_err_set(r->err, SY_ERR_INVALID, "%s: field 'bos_token_id' should be one integer, found a list of %d",
                          r->path, nb);
    *bos = nb == 1 ? b[0] : -1;
    int32_t e[8];
    int ne = 0;
    rc = sy__mjson_int_list(r, root, "eos_token_id", true, -1, INT32_MAX, e, 8, &ne);
    if (rc != SY_OK)
        return rc;
    if (ne > 8)
        sy_warn("%s: eos_token_id lists %d ids; only the first 8 are used", r->path, ne);
    *n_eos = 0;
    for (int i = 0; i < ne && i < 8; i++)
        if (e[i] >= 0)
            eos[(*n_eos)++] = e[i];
    return SY_OK;
}

/* config.json's ids, then generation_config.json's eos (and bos if config has none). */
static int read_tokens(const char *dir, const sy_json_reader *r, const json_t *root, sy_model_config *cfg)
{
    int rc = read_special_ids(r, root, &cfg->bos_id, cfg->eos_ids, &cfg->n_eos);
    if (rc != SY_OK)
        return rc;
    char gpath[4096];
    if (sy_path_join(gpath, sizeof gpath, dir, "generation_config.json") != 0 || !sy_file_exists(gpath))
        return SY_OK;
    json_t *g = NULL;
    rc = load_json(gpath, &g, r->err);
    if (rc != SY_OK)
        return rc;
    sy_json_reader gr = {gpath, r->err};
    int32_t bos = -1, eos[8];
    int n_eos = 0;
    rc = read_special_ids(&gr, g, &bos, eos, &n_eos);
    if (rc == SY_OK) {
        if (cfg->bos_id < 0)
            cfg->bos_id = bos;
        if (sy__mjson_field(g, "eos_token_id")) {
            memcpy(cfg->eos_ids, eos, sizeof eos);
            cfg->n_eos = n_eos;
        }
    }
    json_decref(g);
    return rc;
}

int sy_model_config_load(const char *dir, sy_model_config *cfg, sy_err *err)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->bos_id = -1;
    char path[4096];
    if (sy_path_join(path, sizeof path, dir, "config.json") != 0)
        return sy_err_set(err, SY_ERR_INVALID, "%s: path too long", dir);
    if (!sy_file_exists(path))
        return sy_err_set(err, SY_ERR_IO, "%s: no config.json (is this a Hugging Face model directory?)", dir);
    json_t *root = NULL;
    int rc = load_json(path, &root, err);
    if (rc != SY_OK)
        return rc;
    sy_json_reader r = {path, err};
    const sy_arch_desc *d = NULL;
    rc = read_arch(&r, root, cfg, &d);
    if (rc == SY_OK)
        rc = read_shapes(&r, root, d, cfg);
    if (rc == SY_OK)
        rc = read_rope(&r, root, d, cfg);
    if (rc == SY_OK)
        rc = read_flags(&r, root, d, cfg);
    if (rc == SY_OK) {
        cfg->layer_is_moe = calloc((size_t)cfg->n_layers, 1);
        if (!cfg->layer_is_moe)
            rc = sy_err_set(err, SY_ERR_NOMEM, "%s: out of memory", path);
    }
    if (rc == SY_OK) {
        cfg->decoder_sparse_step = 1;
        cfg->routed_scaling_factor = 1.0f;
        rc = d->parse_extra(&r, root, cfg);
    }
    if (rc == SY_OK)
        rc = read_tokens(dir, &r, root, cfg);
    if (rc == SY_OK) {
        /* transformers 5 keeps dtype when both are given (PreTrainedConfig.__post_init__). */
        char dt[32], tdt[32];
        rc = sy__mjson_string(&r, root, NULL, "dtype", false, dt, sizeof dt);
        if (rc == SY_OK)
            rc = sy__mjson_string(&r, root, NULL, "torch_dtype", false, tdt, sizeof tdt);
        if (rc == SY_OK && dt[0] && tdt[0] && strcmp(dt, tdt) != 0)
            sy_warn("%s: dtype '%s' and torch_dtype '%s' disagree; using dtype, as transformers 5 does", path, dt,
                    tdt);
        if (rc == SY_OK)
            set_dtype(dt[0] ? dt : tdt, cfg);
    }
    json_decref(root);
    if (rc != SY_OK)
        sy_model_config_free(cfg);
    return rc;
}

void sy_model_config_free(sy_model_config *cfg)
{
    if (!cfg)
        return;
    free(cfg->layer_is_moe);
    cfg->layer_is_moe = NULL;
    free(cfg->layer_has_indexer);
    cfg->layer_has_indexer = NULL;
    free(cfg->layer_window);
    cfg->layer_window = NULL;
}
