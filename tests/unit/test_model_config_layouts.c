/*
 * config.json in both layouts: the older top-level rope_theta /
 * partial_rotary_factor / rope_scaling / num_experts / torch_dtype and
 * transformers 5's rope_parameters / num_local_experts / dtype. Each case
 * writes a config.json and checks what sy_model_config_load parsed; where
 * both layouts are given and disagree, the value transformers 5 would use
 * and one warning naming both fields (docs/models.md, "config.json layouts").
 */
#include "config.h"

#include "model/model.h"
#include "test_model_util.h"

#include "util/log.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmp[256];
static char logged[8192]; /* what the last load() wrote to stderr */

/* 2 layers, hidden 64, 4 heads / 2 kv heads of 16, max_pos 256. */
static json_t *base(const char *arch)
{
    return json_pack("{s:[s], s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:f, s:s}", "architectures", arch,
                     "hidden_size", 64, "intermediate_size", 32, "num_hidden_layers", 2, "num_attention_heads", 4,
                     "num_key_value_heads", 2, "head_dim", 16, "vocab_size", 64, "max_position_embeddings", 256,
                     "rms_norm_eps", 1e-5, "hidden_act", "silu");
}

static json_t *moe(const char *arch, const char *count_key, int n)
{
    json_t *c = base(arch);
    if (count_key)
        json_object_set_new(c, count_key, json_integer(n));
    json_object_set_new(c, "num_experts_per_tok", json_integer(2));
    json_object_set_new(c, "moe_intermediate_size", json_integer(16));
    json_object_set_new(c, "norm_topk_prob", json_true());
    return c;
}

/* DeepSeek-V3 / GLM-5 MLA dimensions on top of moe(). */
static json_t *mla(const char *arch, const char *count_key, int n)
{
    json_t *c = moe(arch, count_key, n);
    json_t *d = json_pack("{s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:b, s:i, s:i}", "q_lora_rank", 32, "kv_lora_rank",
                          32, "qk_nope_head_dim", 16, "qk_rope_head_dim", 8, "v_head_dim", 16,
                          "first_k_dense_replace", 1, "n_shared_experts", 1, "rope_interleave", 1, "n_group", 1,
                          "topk_group", 1);
    json_object_update(c, d);
    json_decref(d);
    return c;
}

/* Loads cfg (taken) as <tmp>/<name>/config.json, with stderr (the log) captured into logged. */
static int load(const char *name, json_t *cfg, sy_model_config *c, sy_err *err)
{
    char dir[512];
    tm_write_config_dir(tmp, name, cfg, dir, sizeof dir);
    memset(err, 0, sizeof *err);
    logged[0] = '\0';
    fflush(stderr);
    FILE *f = tmpfile();
    int saved = dup(2);
    if (f && saved >= 0)
        dup2(fileno(f), 2);
    int rc = sy_model_config_load(dir, c, err);
    fflush(stderr);
    if (f && saved >= 0) {
        dup2(saved, 2);
        rewind(f);
        size_t n = fread(logged, 1, sizeof logged - 1, f);
        logged[n] = '\0';
    }
    if (saved >= 0)
        close(saved);
    if (f)
        fclose(f);
    return rc;
}

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* One warning line holding every substring; none at all when the first is NULL. */
static void check_warned(const char *name, const char *a, const char *b, const char *c)
{
    if (!a) {
        CHECK(count(logged, "switchyard warn: ") == 0, "%s: expected no warning, got: %s", name, logged);
        return;
    }
    CHECK(count(logged, "switchyard warn: ") == 1, "%s: expected one warning, got: %s", name, logged);
    CHECK(strstr(logged, a) && (!b || strstr(logged, b)) && (!c || strstr(logged, c)),
          "%s: warning lacks '%s' / '%s' / '%s': %s", name, a, b ? b : "", c ? c : "", logged);
}

static json_t *rope_params(const char *type, double theta)
{
    return json_pack("{s:s, s:f}", "rope_type", type, "rope_theta", theta);
}

static void test_partial_rotary(void)
{
    sy_model_config c;
    sy_err err;
    /* Issue 16: Glm4Moe in transformers 5's layout, partial_rotary_factor only inside rope_parameters. */
    json_t *cfg = moe("Glm4MoeForCausalLM", "n_routed_experts", 4);
    json_t *rp = rope_params("default", 10000.0);
    json_object_set_new(rp, "partial_rotary_factor", json_real(0.25));
    json_object_set_new(cfg, "rope_parameters", rp);
    int rc = load("glm4-rp-partial", cfg, &c, &err);
    CHECK(rc == SY_OK && c.rotary_dim == 4, "glm4 rope_parameters.partial_rotary_factor 0.25: rotary_dim %d (%s)",
          c.rotary_dim, err.msg);
    check_warned("glm4-rp-partial", NULL, NULL, NULL);
    sy_model_config_free(&c);

    /* The same for a family whose default is the whole head. */
    cfg = base("LlamaForCausalLM");
    rp = rope_params("default", 10000.0);
    json_object_set_new(rp, "partial_rotary_factor", json_real(0.5));
    json_object_set_new(cfg, "rope_parameters", rp);
    rc = load("llama-rp-partial", cfg, &c, &err);
    CHECK(rc == SY_OK && c.rotary_dim == 8, "llama rope_parameters.partial_rotary_factor 0.5: rotary_dim %d (%s)",
          c.rotary_dim, err.msg);
    sy_model_config_free(&c);

    /* Glm4MoeConfig's default 0.5 with neither; the top level's alone; both: rope_parameters' wins. */
    cfg = moe("Glm4MoeForCausalLM", "n_routed_experts", 4);
    json_object_set_new(cfg, "rope_parameters", rope_params("default", 10000.0));
    rc = load("glm4-default-partial", cfg, &c, &err);
    CHECK(rc == SY_OK && c.rotary_dim == 8, "glm4 default partial: rotary_dim %d (%s)", c.rotary_dim, err.msg);
    sy_model_config_free(&c);

    cfg = moe("Glm4MoeForCausalLM", "n_routed_experts", 4);
    json_object_set_new(cfg, "partial_rotary_factor", json_real(0.25));
    rc = load("glm4-top-partial", cfg, &c, &err);
    CHECK(rc == SY_OK && c.rotary_dim == 4, "glm4 top-level partial: rotary_dim %d (%s)", c.rotary_dim, err.msg);
    sy_model_config_free(&c);

    cfg = moe("Glm4MoeForCausalLM", "n_routed_experts", 4);
    json_object_set_new(cfg, "partial_rotary_factor", json_real(0.25));
    rp = rope_params("default", 10000.0);
    json_object_set_new(rp, "partial_rotary_factor", json_real(0.5));
    json_object_set_new(cfg, "rope_parameters", rp);
    rc = load("glm4-both-partial", cfg, &c, &err);
    CHECK(rc == SY_OK && c.rotary_dim == 8, "glm4 both partial: rotary_dim %d (%s)", c.rotary_dim, err.msg);
    check_warned("glm4-both-partial", "partial_rotary_factor 0.25", "rope_parameters.partial_rotary_factor 0.5",
                 NULL);
    sy_model_config_free(&c);

    /* The default of 0.5 over an odd half is refused, naming the default. */
    cfg = moe("Glm4MoeForCausalLM", "n_routed_experts", 4);
    json_object_set_new(cfg, "head_dim", json_integer(6));
    rc = load("glm4-default-odd", cfg, &c, &err);
    CHECK_ERR(rc, err.msg, "partial_rotary_factor 0.5 (the config class's default)", "rotary dimension 3");
}

static void test_rope_theta(void)
{
    sy_model_config c;
    sy_err err;
    json_t *cfg = base("LlamaForCausalLM");
    json_object_set_new(cfg, "rope_parameters", rope_params("default", 500000.0));
    int rc = load("theta-rp", cfg, &c, &err);
    CHECK(rc == SY_OK && c.rope_theta == 500000.0f && c.rope_scaling == SY_ROPE_SCALING_NONE, "theta-rp: %g (%s)",
          (double)c.rope_theta, err.msg);
    check_warned("theta-rp", NULL, NULL, NULL);
    sy_model_config_free(&c);

    cfg = base("LlamaForCausalLM");
    json_object_set_new(cfg, "rope_theta", json_real(10000.0));
    json_object_set_new(cfg, "rope_parameters", rope_params("default", 500000.0));
    rc = load("theta-both", cfg, &c, &err);
    CHECK(rc == SY_OK && c.rope_theta == 500000.0f, "theta-both: %g (%s)", (double)c.rope_theta, err.msg);
    check_warned("theta-both", "rope_theta 10000", "rope_parameters.rope_theta 500000", "using rope_parameters");
    sy_model_config_free(&c);

    /* Equal values are no disagreement. */
    cfg = base("LlamaForCausalLM");
    json_object_set_new(cfg, "rope_theta", json_real(500000.0));
    json_object_set_new(cfg, "rope_parameters", rope_params("default", 500000.0));
    rc = load("theta-same", cfg, &c, &err);
    CHECK(rc == SY_OK && c.rope_theta == 500000.0f, "theta-same (%s)", err.msg);
    check_warned("theta-same", NULL, NULL, NULL);
    sy_model_config_free(&c);

    /* No rope_type: transformers 5 reads the default RoPE. */
    cfg = base("LlamaForCausalLM");
    json_object_set_new(cfg, "rope_parameters", json_pack("{s:f}", "rope_theta", 250000.0));
    rc = load("theta-no-type", cfg, &c, &err);
    CHECK(rc == SY_OK && c.rope_theta == 250000.0f && c.rope_scaling == SY_ROPE_SCALING_NONE, "theta-no-type (%s)",
          err.msg);
    sy_model_config_free(&c);

    /* Neither: the class's default_theta (MixtralConfig: 1e6). */
    cfg = moe("MixtralForCausalLM", "num_local_experts", 4);
    rc = load("theta-default", cfg, &c, &err);
    CHECK(rc == SY_OK && c.rope_theta == 1e6f, "theta-default: %g (%s)", (double)c.rope_theta, err.msg);
    sy_model_config_free(&c);
}

static void test_rope_objects(void)
{
    sy_model_config c;
    sy_err err;
    /* rope_scaling replaces rope_parameters whole: linear, and the top-level theta, not rope_parameters'. */
    json_t *cfg = base("LlamaForCausalLM");
    json_object_set_new(cfg, "rope_theta", json_real(70000.0));
    json_object_set_new(cfg, "rope_scaling", json_pack("{s:s, s:f}", "rope_type", "linear", "factor", 2.0));
    json_object_set_new(cfg, "rope_parameters", rope_params("default", 500000.0));
    int rc = load("scaling-and-params", cfg, &c, &err);
    CHECK(rc == SY_OK && c.rope_scaling == SY_ROPE_SCALING_LINEAR && c.rope_factor == 2.0f &&
              c.rope_theta == 70000.0f,
          "scaling-and-params: type %d factor %g theta %g (%s)", c.rope_scaling, (double)c.rope_factor,
          (double)c.rope_theta, err.msg);
    check_warned("scaling-and-params", "both rope_scaling", "and rope_parameters", "using rope_scaling");
    sy_model_config_free(&c);

    /* An empty rope_scaling is none. */
    cfg = base("LlamaForCausalLM");
    json_object_set_new(cfg, "rope_scaling", json_object());
    json_object_set_new(cfg, "rope_parameters", rope_params("default", 500000.0));
    rc = load("scaling-empty", cfg, &c, &err);
    CHECK(rc == SY_OK && c.rope_theta == 500000.0f, "scaling-empty: %g (%s)", (double)c.rope_theta, err.msg);
    check_warned("scaling-empty", NULL, NULL, NULL);
    sy_model_config_free(&c);

    /* rope_type over the legacy type. */
    cfg = base("LlamaForCausalLM");
    json_object_set_new(cfg, "rope_scaling",
                        json_pack("{s:s, s:s, s:f}", "type", "linear", "rope_type", "default", "factor", 2.0));
    rc = load("type-vs-rope-type", cfg, &c, &err);
    CHECK(rc == SY_OK && c.rope_scaling == SY_ROPE_SCALING_NONE, "type-vs-rope-type (%s)", err.msg);
    check_warned("type-vs-rope-type", "rope_scaling.rope_type 'default'", "rope_scaling.type 'linear'", NULL);
    sy_model_config_free(&c);

    /* The older layout's type key still names the type. */
    cfg = base("LlamaForCausalLM");
    json_object_set_new(cfg, "rope_scaling", json_pack("{s:s, s:f}", "type", "linear", "factor", 3.0));
    rc = load("legacy-type", cfg, &c, &err);
    CHECK(rc == SY_OK && c.rope_scaling == SY_ROPE_SCALING_LINEAR && c.rope_factor == 3.0f &&
              strcmp(c.rope_type_field, "rope_scaling.type") == 0,
          "legacy-type: %s (%s)", c.rope_type_field, err.msg);
    sy_model_config_free(&c);
}

static void test_llama3(void)
{
    sy_model_config c;
    sy_err err;
    json_t *rp = json_pack("{s:s, s:f, s:f, s:f, s:f}", "rope_type", "llama3", "rope_theta", 500000.0, "factor", 8.0,
                           "low_freq_factor", 1.0, "high_freq_factor", 4.0);
    json_t *cfg = base("LlamaForCausalLM");
    json_object_set_new(cfg, "rope_parameters", json_deep_copy(rp));
    int rc = load("llama3-rp", cfg, &c, &err);
    /* original_max_position_embeddings absent: max_position_embeddings (standardize_rope_params). */
    CHECK(rc == SY_OK && c.rope_scaling == SY_ROPE_SCALING_LLAMA3 && c.rope_factor == 8.0f &&
              c.rope_low_freq_factor == 1.0f && c.rope_high_freq_factor == 4.0f && c.rope_original_max_pos == 256 &&
              c.rope_theta == 500000.0f,
          "llama3-rp: orig %d (%s)", c.rope_original_max_pos, err.msg);
    sy_model_config_free(&c);

    /* The top-level original_max_position_embeddings wins over the object's. */
    cfg = base("LlamaForCausalLM");
    json_object_set_new(rp, "original_max_position_embeddings", json_integer(8192));
    json_object_set_new(cfg, "rope_parameters", rp);
    json_object_set_new(cfg, "original_max_position_embeddings", json_integer(333));
    rc = load("llama3-top-orig", cfg, &c, &err);
    CHECK(rc == SY_OK && c.rope_original_max_pos == 333, "llama3-top-orig: %d (%s)", c.rope_original_max_pos,
          err.msg);
    check_warned("llama3-top-orig", "original_max_position_embeddings 333",
                 "rope_parameters.original_max_position_embeddings 8192", "using the top-level");
    sy_model_config_free(&c);
}

static void test_yarn(void)
{
    sy_model_config c;
    sy_err err;
    /* Every field, for a GQA family (gpt-oss's shape: truncate false). */
    json_t *cfg = base("LlamaForCausalLM");
    json_object_set_new(cfg, "rope_parameters",
                        json_pack("{s:s, s:f, s:f, s:i, s:f, s:f, s:f, s:f, s:b, s:f}", "rope_type", "yarn",
                                  "rope_theta", 150000.0, "factor", 32.0, "original_max_position_embeddings", 64,
                                  "beta_fast", 16.0, "beta_slow", 2.0, "mscale", 0.5, "mscale_all_dim", 0.25,
                                  "truncate", 0, "attention_factor", 1.25));
    int rc = load("yarn-all", cfg, &c, &err);
    CHECK(rc == SY_OK && c.rope_scaling == SY_ROPE_SCALING_YARN && c.rope_factor == 32.0f &&
              c.rope_original_max_pos == 64 && c.rope_beta_fast == 16.0f && c.rope_beta_slow == 2.0f &&
              c.rope_mscale == 0.5f && c.rope_mscale_all_dim == 0.25f && !c.rope_truncate &&
              c.rope_attention_factor == 1.25f && c.rope_theta == 150000.0f,
          "yarn-all (%s)", err.msg);
    CHECK(strcmp(c.rope_type_field, "rope_parameters.rope_type") == 0, "yarn-all: %s", c.rope_type_field);
    sy_model_config_free(&c);

    /* The older layout, for an MoE family; the defaults of what is left out. */
    cfg = moe("Qwen3MoeForCausalLM", "num_experts", 4);
    json_object_set_new(cfg, "rope_scaling", json_pack("{s:s, s:f}", "type", "yarn", "factor", 4.0));
    rc = load("yarn-defaults", cfg, &c, &err);
    CHECK(rc == SY_OK && c.rope_scaling == SY_ROPE_SCALING_YARN && c.rope_factor == 4.0f &&
              c.rope_original_max_pos == 256 && c.rope_beta_fast == 32.0f && c.rope_beta_slow == 1.0f &&
              c.rope_mscale == 0.0f && c.rope_mscale_all_dim == 0.0f && c.rope_truncate &&
              c.rope_attention_factor == 0.0f,
          "yarn-defaults: orig %d beta %g/%g truncate %d af %g (%s)", c.rope_original_max_pos,
          (double)c.rope_beta_fast, (double)c.rope_beta_slow, c.rope_truncate, (double)c.rope_attention_factor,
          err.msg);
    sy_model_config_free(&c);

    /* MLA: DeepSeek-V3's yarn still reads, rotary_dim is the rope slice. */
    cfg = mla("DeepseekV3ForCausalLM", "n_routed_experts", 4);
    json_object_set_new(cfg, "rope_parameters",
                        json_pack("{s:s, s:f, s:f, s:i, s:f, s:f}", "rope_type", "yarn", "rope_theta", 10000.0,
                                  "factor", 40.0, "original_max_position_embeddings", 128, "mscale", 1.0,
                                  "mscale_all_dim", 1.0));
    rc = load("yarn-mla", cfg, &c, &err);
    CHECK(rc == SY_OK && c.mla && c.rotary_dim == 8 && c.rope_scaling == SY_ROPE_SCALING_YARN &&
              c.rope_factor == 40.0f && c.rope_mscale == 1.0f && c.rope_truncate,
          "yarn-mla (%s)", err.msg);
    sy_model_config_free(&c);
}

static void test_rope_refusals(void)
{
    sy_model_config c;
    sy_err err;
    json_t *cfg = base("LlamaForCausalLM");
    json_object_set_new(cfg, "rope_parameters", json_string("default"));
    int rc = load("rp-not-object", cfg, &c, &err);
    CHECK_ERR(rc, err.msg, "config.json", "'rope_parameters'", "an object or null", "a string");

    cfg = base("LlamaForCausalLM");
    json_object_set_new(cfg, "rope_parameters", json_pack("{s:s, s:f}", "rope_type", "dynamic", "factor", 2.0));
    rc = load("rp-unknown-type", cfg, &c, &err);
    CHECK(rc == SY_ERR_UNSUPPORTED, "rp-unknown-type: rc %d", rc);
    CHECK_ERR(rc, err.msg, "rope_parameters.rope_type 'dynamic' is not supported", "default, linear, llama3, yarn");

    cfg = base("LlamaForCausalLM");
    json_object_set_new(cfg, "rope_parameters",
                        json_pack("{s:{s:s}, s:{s:s}}", "full_attention", "rope_type", "default", "sliding_attention",
                                  "rope_type", "default"));
    rc = load("rp-nested", cfg, &c, &err);
    CHECK_ERR(rc, err.msg, "rope_parameters.full_attention", "per layer type");

    cfg = base("LlamaForCausalLM");
    json_object_set_new(cfg, "rope_parameters", json_pack("{s:f, s:f}", "rope_theta", 1e4, "factor", 4.0));
    rc = load("rp-factor-no-type", cfg, &c, &err);
    CHECK_ERR(rc, err.msg, "'rope_parameters'", "neither 'rope_type' nor 'type'", "'factor'");

    cfg = base("LlamaForCausalLM");
    json_object_set_new(cfg, "rope_parameters", json_pack("{s:s}", "rope_type", "yarn"));
    rc = load("rp-yarn-no-factor", cfg, &c, &err);
    CHECK_ERR(rc, err.msg, "'rope_parameters.factor'", "missing");

    cfg = base("LlamaForCausalLM");
    json_object_set_new(cfg, "rope_parameters",
                        json_pack("{s:s, s:f, s:s}", "rope_type", "yarn", "factor", 4.0, "truncate", "no"));
    rc = load("rp-truncate-type", cfg, &c, &err);
    CHECK_ERR(rc, err.msg, "'rope_parameters.truncate'", "a boolean", "a string");

    cfg = base("LlamaForCausalLM");
    json_object_set_new(cfg, "rope_parameters",
                        json_pack("{s:s, s:f, s:f}", "rope_type", "yarn", "factor", 4.0, "attention_factor", 0.0));
    rc = load("rp-attention-factor-0", cfg, &c, &err);
    CHECK_ERR(rc, err.msg, "'rope_parameters.attention_factor' is 0");

    cfg = base("LlamaForCausalLM");
    json_object_set_new(cfg, "rope_parameters", json_pack("{s:s, s:s}", "rope_type", "default", "rope_theta", "1e4"));
    rc = load("rp-theta-type", cfg, &c, &err);
    CHECK_ERR(rc, err.msg, "'rope_parameters.rope_theta'", "a number", "a string");
}

static void test_experts(void)
{
    sy_model_config c;
    sy_err err;
    /* Issue 16: Qwen3Moe as transformers 5 saves it. */
    int rc = load("qwen3moe-local", moe("Qwen3MoeForCausalLM", "num_local_experts", 6), &c, &err);
    CHECK(rc == SY_OK && c.n_experts == 6, "qwen3moe num_local_experts: %d (%s)", c.n_experts, err.msg);
    sy_model_config_free(&c);

    rc = load("qwen3moe-old", moe("Qwen3MoeForCausalLM", "num_experts", 6), &c, &err);
    CHECK(rc == SY_OK && c.n_experts == 6, "qwen3moe num_experts: %d (%s)", c.n_experts, err.msg);
    check_warned("qwen3moe-old", NULL, NULL, NULL);
    sy_model_config_free(&c);

    json_t *cfg = moe("Qwen3MoeForCausalLM", "num_experts", 4);
    json_object_set_new(cfg, "num_local_experts", json_integer(8));
    rc = load("qwen3moe-both", cfg, &c, &err);
    CHECK(rc == SY_OK && c.n_experts == 8, "qwen3moe both: %d (%s)", c.n_experts, err.msg);
    check_warned("qwen3moe-both", "num_experts (4)", "num_local_experts (8)", "using num_local_experts");
    sy_model_config_free(&c);

    rc = load("qwen3moe-none", moe("Qwen3MoeForCausalLM", NULL, 0), &c, &err);
    CHECK_ERR(rc, err.msg, "'num_experts' or 'num_local_experts'", "missing");

    /* Mixtral's field is num_local_experts, its alias num_experts (which then wins). */
    rc = load("mixtral-alias", moe("MixtralForCausalLM", "num_experts", 4), &c, &err);
    CHECK(rc == SY_OK && c.n_experts == 4, "mixtral num_experts: %d (%s)", c.n_experts, err.msg);
    sy_model_config_free(&c);
    cfg = moe("MixtralForCausalLM", "num_local_experts", 8);
    json_object_set_new(cfg, "num_experts", json_integer(4));
    rc = load("mixtral-both", cfg, &c, &err);
    CHECK(rc == SY_OK && c.n_experts == 4, "mixtral both: %d (%s)", c.n_experts, err.msg);
    check_warned("mixtral-both", "num_local_experts (8)", "num_experts (4)", "using num_experts");
    sy_model_config_free(&c);

    /* The DeepSeek family: num_local_experts over n_routed_experts; num_experts means nothing to DeepSeek-V3 ... */
    cfg = mla("DeepseekV3ForCausalLM", "n_routed_experts", 8);
    json_object_set_new(cfg, "num_local_experts", json_integer(4));
    json_object_set_new(cfg, "num_experts", json_integer(2));
    rc = load("deepseek-both", cfg, &c, &err);
    CHECK(rc == SY_OK && c.n_experts == 4, "deepseek both: %d (%s)", c.n_experts, err.msg);
    check_warned("deepseek-both", "n_routed_experts (8)", "num_local_experts (4)", NULL);
    sy_model_config_free(&c);

    cfg = moe("Glm4MoeForCausalLM", "num_local_experts", 4);
    rc = load("glm4-local", cfg, &c, &err);
    CHECK(rc == SY_OK && c.n_experts == 4, "glm4 num_local_experts: %d (%s)", c.n_experts, err.msg);
    sy_model_config_free(&c);

    /* ... but GLM-5 re-routes it (GlmMoeDsaConfig.__post_init__). */
    cfg = mla("GlmMoeDsaForCausalLM", "n_routed_experts", 8);
    json_object_set_new(cfg, "num_experts", json_integer(4));
    rc = load("glm5-num-experts", cfg, &c, &err);
    CHECK(rc == SY_OK && c.n_experts == 4, "glm5 num_experts: %d (%s)", c.n_experts, err.msg);
    check_warned("glm5-num-experts", "n_routed_experts (8)", "num_experts (4)", NULL);
    sy_model_config_free(&c);
}

static void test_dtype(void)
{
    sy_model_config c;
    sy_err err;
    json_t *cfg = base("LlamaForCausalLM");
    json_object_set_new(cfg, "dtype", json_string("bfloat16"));
    int rc = load("dtype", cfg, &c, &err);
    CHECK(rc == SY_OK && c.dtype == SY_DTYPE_BF16, "dtype (%s)", err.msg);
    sy_model_config_free(&c);

    cfg = base("LlamaForCausalLM");
    json_object_set_new(cfg, "torch_dtype", json_string("float16"));
    rc = load("torch-dtype", cfg, &c, &err);
    CHECK(rc == SY_OK && c.dtype == SY_DTYPE_F16, "torch_dtype (%s)", err.msg);
    sy_model_config_free(&c);

    cfg = base("LlamaForCausalLM");
    json_object_set_new(cfg, "dtype", json_string("bfloat16"));
    json_object_set_new(cfg, "torch_dtype", json_string("float16"));
    rc = load("dtype-both", cfg, &c, &err);
    CHECK(rc == SY_OK && c.dtype == SY_DTYPE_BF16, "dtype over torch_dtype: %d (%s)", c.dtype, err.msg);
    check_warned("dtype-both", "dtype 'bfloat16'", "torch_dtype 'float16'", "using dtype");
    sy_model_config_free(&c);
}

/* GLM-5 without indexer_types: index_topk_pattern, or index_topk_freq / index_skip_topk_offset. */
static void test_glm5_indexer_types(void)
{
    sy_model_config c;
    sy_err err;
    json_t *cfg = mla("GlmMoeDsaForCausalLM", "n_routed_experts", 4);
    json_object_set_new(cfg, "num_hidden_layers", json_integer(4));
    json_object_set_new(cfg, "index_topk_pattern", json_string("FSFS"));
    int rc = load("glm5-pattern", cfg, &c, &err);
    CHECK(rc == SY_OK && c.layer_has_indexer && c.layer_has_indexer[0] && !c.layer_has_indexer[1] &&
              c.layer_has_indexer[2] && !c.layer_has_indexer[3],
          "glm5 index_topk_pattern FSFS (%s)", err.msg);
    sy_model_config_free(&c);

    /* freq 2, offset 2: full where max(i - 1, 0) % 2 == 0, so layers 0, 1, 3. */
    cfg = mla("GlmMoeDsaForCausalLM", "n_routed_experts", 4);
    json_object_set_new(cfg, "num_hidden_layers", json_integer(4));
    json_object_set_new(cfg, "index_topk_freq", json_integer(2));
    rc = load("glm5-freq", cfg, &c, &err);
    CHECK(rc == SY_OK && c.layer_has_indexer && c.layer_has_indexer[0] && c.layer_has_indexer[1] &&
              !c.layer_has_indexer[2] && c.layer_has_indexer[3],
          "glm5 index_topk_freq 2 (%s)", err.msg);
    sy_model_config_free(&c);

    cfg = mla("GlmMoeDsaForCausalLM", "n_routed_experts", 4);
    json_object_set_new(cfg, "index_topk_pattern", json_string("FX"));
    rc = load("glm5-bad-pattern", cfg, &c, &err);
    CHECK_ERR(rc, err.msg, "index_topk_pattern", "element 1");
}

int main(void)
{
    sy_log_set_level(SY_LOG_WARN);
    if (tm_mkdtemp(tmp, sizeof tmp) != 0)
        return 1;
    test_partial_rotary();
    test_rope_theta();
    test_rope_objects();
    test_llama3();
    test_yarn();
    test_rope_refusals();
    test_experts();
    test_dtype();
    test_glm5_indexer_types();
    tm_rmtree(tmp);
    if (tm_failures) {
        fprintf(stderr, "test_model_config_layouts: %d failures\n", tm_failures);
        return 1;
    }
    printf("test_model_config_layouts: all passed\n");
    return 0;
}
