/*
 * Synthetic checkpoints written by the test: config parsing (defaults,
 * family rules, every kind of bad field), binding errors (missing tensor,
 * wrong shape, wrong dtype) and sharded full-model loads.
 */
#include "config.h"

#include "model/model.h"
#include "test_model_util.h"

#include "util/log.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char tmp[256];

/* hidden 8, 2 layers, 2 heads / 1 kv head, head_dim 4, inter 16, vocab 32. */
static json_t *llama_cfg(void)
{
    return json_pack("{s:[s], s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:f, s:f, s:n, s:b, s:s, s:i, s:i, s:s}",
                     "architectures", "LlamaForCausalLM", "model_type", "llama", "hidden_size", 8,
                     "intermediate_size", 16, "num_hidden_layers", 2, "num_attention_heads", 2,
                     "num_key_value_heads", 1, "head_dim", 4, "vocab_size", 32, "max_position_embeddings", 64,
                     "rms_norm_eps", 1e-5, "rope_theta", 10000.0, "rope_scaling", "tie_word_embeddings", 0,
                     "hidden_act", "silu", "bos_token_id", 1, "eos_token_id", 2, "torch_dtype", "float32");
}

static const tm_spec llama_spec = {
    .family = "llama", .hidden = 8, .layers = 2, .heads = 2, .kv_heads = 1, .head_dim = 4, .inter = 16, .vocab = 32};

/* Writes <tmp>/<name>/{config.json, generation_config.json, weights}; takes cfg. */
static void make_dir(char *dir, size_t cap, const char *name, json_t *cfg, const char *gen, const tm_spec *spec)
{
    snprintf(dir, cap, "%s/%s", tmp, name);
    mkdir(dir, 0700);
    if (cfg) {
        char *text = json_dumps(cfg, JSON_INDENT(2));
        tm_write_text(dir, "config.json", text);
        free(text);
        json_decref(cfg);
    }
    if (gen)
        tm_write_text(dir, "generation_config.json", gen);
    if (spec)
        tm_write_checkpoint(dir, spec);
}

static int load(const char *name, json_t *cfg, const char *gen, const tm_spec *spec, sy_model **m, sy_err *err)
{
    char dir[512];
    make_dir(dir, sizeof dir, name, cfg, gen, spec);
    *m = NULL;
    memset(err, 0, sizeof *err);
    return sy_model_load(dir, NULL, NULL, m, err);
}

static int config(const char *name, json_t *cfg, const char *gen, sy_model_config *c, sy_err *err)
{
    char dir[512];
    make_dir(dir, sizeof dir, name, cfg, gen, NULL);
    memset(err, 0, sizeof *err);
    return sy_model_config_load(dir, c, err);
}

static void test_llama_ok(void)
{
    sy_model *m;
    sy_err err;
    int rc = load("llama-ok", llama_cfg(), NULL, &llama_spec, &m, &err);
    CHECK(rc == SY_OK && m, "%s", err.msg);
    if (!m)
        return;
    const sy_model_config *c = &m->cfg;
    CHECK(c->hidden == 8 && c->n_layers == 2 && c->n_heads == 2 && c->n_kv_heads == 1 && c->head_dim == 4 &&
              c->rotary_dim == 4 && c->max_pos == 64 && c->vocab == 32 && !c->tie_embeddings,
          "config");
    /* embed + lm_head 2*256, norm 8, per layer norms 2*8 + q,k,v,o 64+32+32+64 + MLP 3*128 */
    CHECK_EQ_INT(m->n_params, 2 * 256 + 8 + 2 * (16 + 192 + 384));
    CHECK(m->layers[1].wo.shape[0] == 8 && m->layers[1].wo.shape[1] == 8 && m->layers[1].w_down.shape[1] == 16,
          "shapes");
    CHECK(m->lm_head.data != m->embed.data, "untied");
    /* Views point at the bytes the writer put there (byte i = i * 7 + 1). */
    const uint8_t *e0 = m->embed.data;
    CHECK(e0[0] == 1 && e0[1] == 8, "embedding bytes %u %u", e0[0], e0[1]);
    sy_model_free(m);

    /* The same model in three shards. */
    tm_spec s = llama_spec;
    s.shards = 3;
    rc = load("llama-sharded", llama_cfg(), NULL, &s, &m, &err);
    CHECK(rc == SY_OK && m, "sharded: %s", err.msg);
    if (m) {
        CHECK_EQ_INT(m->n_params, 2 * 256 + 8 + 2 * (16 + 192 + 384));
        sy_model_free(m);
    }

    /* Tied: no lm_head in the file, lm_head is the embedding. */
    json_t *cfg = llama_cfg();
    json_object_set_new(cfg, "tie_word_embeddings", json_true());
    s = llama_spec;
    s.tied = true;
    rc = load("llama-tied", cfg, NULL, &s, &m, &err);
    CHECK(rc == SY_OK && m && m->lm_head.data == m->embed.data, "tied: %s", err.msg);
    if (m) {
        CHECK_EQ_INT(m->n_params, 256 + 8 + 2 * (16 + 192 + 384));
        sy_model_free(m);
    }
    /* Tied, and the file still carries an lm_head: the embedding is used, as transformers does. */
    cfg = llama_cfg();
    json_object_set_new(cfg, "tie_word_embeddings", json_true());
    rc = load("llama-tied-extra", cfg, NULL, &llama_spec, &m, &err);
    CHECK(rc == SY_OK && m && m->lm_head.data == m->embed.data, "tied with lm_head: %s", err.msg);
    sy_model_free(m);

    /* F16 weights stay F16. */
    s = llama_spec;
    s.dtype = "F16";
    rc = load("llama-f16", llama_cfg(), NULL, &s, &m, &err);
    CHECK(rc == SY_OK && m && m->layers[0].wq.dtype == SY_DTYPE_F16 && m->weight_bytes == m->n_params * 2,
          "f16: %s", err.msg);
    sy_model_free(m);

    /* Tensors nothing uses (biases without attention_bias) are reported, not fatal. */
    s = llama_spec;
    s.bias = true;
    rc = load("llama-extra", llama_cfg(), NULL, &s, &m, &err);
    CHECK(rc == SY_OK && m && !m->layers[0].bq.data, "extra tensors: %s", err.msg);
    sy_model_free(m);

    /* Attention biases. */
    cfg = llama_cfg();
    json_object_set_new(cfg, "attention_bias", json_true());
    s = llama_spec;
    s.bias = true;
    rc = load("llama-bias", cfg, NULL, &s, &m, &err);
    CHECK(rc == SY_OK && m && m->layers[1].bq.shape[0] == 8 && m->layers[1].bv.shape[0] == 4 &&
              m->layers[1].bo.shape[0] == 8,
          "bias: %s", err.msg);
    sy_model_free(m);
    cfg = llama_cfg();
    json_object_set_new(cfg, "attention_bias", json_true());
    rc = load("llama-bias-missing", cfg, NULL, &llama_spec, &m, &err);
    CHECK_ERR(rc, err.msg, "'model.layers.0.self_attn.q_proj.bias'", "query bias of layer 0", "missing");
}

static void test_bind_errors(void)
{
    sy_model *m = (sy_model *)1;
    sy_err err;
    tm_spec s = llama_spec;
    s.omit = "model.layers.1.mlp.up_proj.weight";
    int rc = load("missing-tensor", llama_cfg(), NULL, &s, &m, &err);
    CHECK(rc == SY_ERR_INVALID && m == NULL, "rc %d", rc);
    CHECK_ERR(rc, err.msg, "tensor 'model.layers.1.mlp.up_proj.weight'", "MLP up projection of layer 1",
              "missing from the checkpoint", "missing-tensor");

    s = llama_spec;
    s.reshape = "model.layers.0.self_attn.q_proj.weight";
    s.reshape_to[0] = 8;
    s.reshape_to[1] = 4;
    rc = load("wrong-shape", llama_cfg(), NULL, &s, &m, &err);
    CHECK(rc == SY_ERR_INVALID, "rc %d", rc);
    CHECK_ERR(rc, err.msg, "tensor 'model.layers.0.self_attn.q_proj.weight'", "has shape [8, 4]",
              "[num_attention_heads*head_dim, hidden_size] = [8, 8]");

    s = llama_spec;
    s.reshape = "lm_head.weight";
    s.reshape_to[0] = 31;
    s.reshape_to[1] = 8;
    rc = load("wrong-vocab", llama_cfg(), NULL, &s, &m, &err);
    CHECK_ERR(rc, err.msg, "'lm_head.weight'", "[31, 8]", "[vocab_size, hidden_size] = [32, 8]");

    s = llama_spec;
    s.retype = "model.norm.weight";
    s.retype_to = "I32";
    rc = load("wrong-dtype", llama_cfg(), NULL, &s, &m, &err);
    CHECK(rc == SY_ERR_UNSUPPORTED, "rc %d", rc);
    CHECK_ERR(rc, err.msg, "'model.norm.weight'", "dtype I32", "F32, F16 or BF16");

    s = llama_spec;
    s.omit = "lm_head.weight";
    rc = load("no-lm-head", llama_cfg(), NULL, &s, &m, &err);
    CHECK_ERR(rc, err.msg, "'lm_head.weight'", "output projection", "missing");

    /* Config fine, no weights at all. */
    rc = load("no-weights", llama_cfg(), NULL, NULL, &m, &err);
    CHECK(rc == SY_ERR_IO, "rc %d", rc);
    CHECK_ERR(rc, err.msg, "no-weights", "no model.safetensors");

    /* Weights, no config. */
    rc = load("no-config", NULL, NULL, &llama_spec, &m, &err);
    CHECK(rc == SY_ERR_IO, "rc %d", rc);
    CHECK_ERR(rc, err.msg, "no-config", "no config.json");
}

static void test_config_errors(void)
{
    sy_model_config c;
    sy_err err;
    json_t *cfg = llama_cfg();
    json_array_set_new(json_object_get(cfg, "architectures"), 0, json_string("GPT2LMHeadModel"));
    int rc = config("unknown-arch", cfg, NULL, &c, &err);
    CHECK(rc == SY_ERR_UNSUPPORTED, "rc %d", rc);
    CHECK_ERR(rc, err.msg, "config.json", "architecture 'GPT2LMHeadModel' is not supported", "LlamaForCausalLM",
              "MistralForCausalLM", "MixtralForCausalLM", "Qwen3MoeForCausalLM");

    cfg = llama_cfg();
    json_object_del(cfg, "hidden_size");
    rc = config("missing-field", cfg, NULL, &c, &err);
    CHECK(rc == SY_ERR_INVALID, "rc %d", rc);
    CHECK_ERR(rc, err.msg, "missing-field/config.json", "required field 'hidden_size'", "an integer", "missing");

    cfg = llama_cfg();
    json_object_set_new(cfg, "vocab_size", json_null());
    rc = config("null-field", cfg, NULL, &c, &err);
    CHECK_ERR(rc, err.msg, "'vocab_size'", "is null");

    cfg = llama_cfg();
    json_object_del(cfg, "architectures");
    rc = config("no-arch", cfg, NULL, &c, &err);
    CHECK_ERR(rc, err.msg, "'architectures'", "missing");

    cfg = llama_cfg();
    json_object_set_new(cfg, "architectures", json_string("LlamaForCausalLM"));
    rc = config("arch-string", cfg, NULL, &c, &err);
    CHECK_ERR(rc, err.msg, "'architectures'", "a list of strings", "found a string");

    cfg = llama_cfg();
    json_object_set_new(cfg, "num_attention_heads", json_string("2"));
    rc = config("wrong-type", cfg, NULL, &c, &err);
    CHECK(rc == SY_ERR_INVALID, "rc %d", rc);
    CHECK_ERR(rc, err.msg, "wrong-type/config.json", "field 'num_attention_heads'", "should be an integer",
              "found a string");

    cfg = llama_cfg();
    json_object_set_new(cfg, "hidden_size", json_real(8.0));
    rc = config("real-for-int", cfg, NULL, &c, &err);
    CHECK_ERR(rc, err.msg, "'hidden_size'", "an integer", "a real number");

    cfg = llama_cfg();
    json_object_set_new(cfg, "tie_word_embeddings", json_string("yes"));
    rc = config("wrong-bool", cfg, NULL, &c, &err);
    CHECK_ERR(rc, err.msg, "'tie_word_embeddings'", "a boolean", "a string");

    cfg = llama_cfg();
    json_object_set_new(cfg, "rope_theta", json_string("1e4"));
    rc = config("wrong-float", cfg, NULL, &c, &err);
    CHECK_ERR(rc, err.msg, "'rope_theta'", "a number", "a string");

    cfg = llama_cfg();
    json_object_set_new(cfg, "rope_scaling", json_string("linear"));
    rc = config("wrong-object", cfg, NULL, &c, &err);
    CHECK_ERR(rc, err.msg, "'rope_scaling'", "an object or null", "a string");

    cfg = llama_cfg();
    json_object_set_new(cfg, "num_key_value_heads", json_integer(3));
    rc = config("kv-range", cfg, NULL, &c, &err);
    CHECK_ERR(rc, err.msg, "'num_key_value_heads' is 3", "[1, 2]");

    cfg = llama_cfg();
    json_object_set_new(cfg, "num_attention_heads", json_integer(4));
    json_object_set_new(cfg, "num_key_value_heads", json_integer(3));
    rc = config("kv-multiple", cfg, NULL, &c, &err);
    CHECK_ERR(rc, err.msg, "num_attention_heads (4)", "num_key_value_heads (3)", "multiple");

    cfg = llama_cfg();
    json_object_set_new(cfg, "num_hidden_layers", json_integer(0));
    rc = config("zero-layers", cfg, NULL, &c, &err);
    CHECK_ERR(rc, err.msg, "'num_hidden_layers' is 0");

    cfg = llama_cfg();
    json_object_set_new(cfg, "hidden_act", json_string("gelu"));
    rc = config("gelu", cfg, NULL, &c, &err);
    CHECK(rc == SY_ERR_UNSUPPORTED, "rc %d", rc);
    CHECK_ERR(rc, err.msg, "hidden_act 'gelu'", "silu");

    cfg = llama_cfg();
    json_object_set_new(cfg, "mlp_bias", json_true());
    rc = config("mlp-bias", cfg, NULL, &c, &err);
    CHECK_ERR(rc, err.msg, "'mlp_bias'", "not supported");

    cfg = llama_cfg();
    json_object_set_new(cfg, "rope_scaling", json_pack("{s:s, s:f}", "rope_type", "longrope", "factor", 4.0));
    rc = config("longrope", cfg, NULL, &c, &err);
    CHECK(rc == SY_ERR_UNSUPPORTED, "rc %d", rc);
    CHECK_ERR(rc, err.msg, "rope_scaling.rope_type 'longrope' is not supported", "linear, llama3, yarn");

    cfg = llama_cfg();
    json_object_set_new(cfg, "rope_scaling", json_pack("{s:s, s:f}", "type", "dynamic", "factor", 2.0));
    rc = config("dynamic", cfg, NULL, &c, &err);
    CHECK_ERR(rc, err.msg, "rope_scaling.type 'dynamic'");

    cfg = llama_cfg();
    json_object_set_new(cfg, "rope_scaling", json_pack("{s:s, s:f, s:f, s:i}", "rope_type", "llama3", "factor", 8.0,
                                                       "high_freq_factor", 4.0, "original_max_position_embeddings",
                                                       8192));
    rc = config("llama3-missing", cfg, NULL, &c, &err);
    CHECK_ERR(rc, err.msg, "'rope_scaling.low_freq_factor'", "missing");

    cfg = llama_cfg();
    json_object_set_new(cfg, "rope_scaling", json_pack("{s:f}", "factor", 8.0));
    rc = config("rope-no-type", cfg, NULL, &c, &err);
    CHECK_ERR(rc, err.msg, "'rope_scaling'", "neither 'rope_type' nor 'type'");

    cfg = llama_cfg();
    json_object_set_new(cfg, "partial_rotary_factor", json_real(0.25)); /* 4 * 0.25 = 1: odd */
    rc = config("rotary-odd", cfg, NULL, &c, &err);
    CHECK_ERR(rc, err.msg, "partial_rotary_factor", "rotary dimension 1");

    cfg = llama_cfg();
    json_object_del(cfg, "head_dim");
    json_object_set_new(cfg, "num_attention_heads", json_integer(3));
    json_object_set_new(cfg, "num_key_value_heads", json_integer(1));
    rc = config("head-dim-indivisible", cfg, NULL, &c, &err);
    CHECK_ERR(rc, err.msg, "no head_dim", "hidden_size (8)", "num_attention_heads (3)");

    char dir[512];
    make_dir(dir, sizeof dir, "bad-json", NULL, NULL, NULL);
    tm_write_text(dir, "config.json", "{\n  \"hidden_size\": 8,\n  oops\n}");
    memset(&err, 0, sizeof err);
    rc = sy_model_config_load(dir, &c, &err);
    CHECK_ERR(rc, err.msg, "bad-json/config.json", "not valid JSON", "line 3");

    make_dir(dir, sizeof dir, "not-object", NULL, NULL, NULL);
    tm_write_text(dir, "config.json", "[1]");
    memset(&err, 0, sizeof err);
    rc = sy_model_config_load(dir, &c, &err);
    CHECK_ERR(rc, err.msg, "config.json", "a JSON object", "an array");

    /* generation_config.json problems name that file. */
    rc = config("gen-type", llama_cfg(), "{\"eos_token_id\": \"2\"}", &c, &err);
    CHECK_ERR(rc, err.msg, "generation_config.json", "'eos_token_id'", "an integer or a list of integers",
              "a string");
    rc = config("gen-elem", llama_cfg(), "{\"eos_token_id\": [2, \"x\"]}", &c, &err);
    CHECK_ERR(rc, err.msg, "generation_config.json", "'eos_token_id'", "element 1 is a string");
    rc = config("gen-json", llama_cfg(), "{", &c, &err);
    CHECK_ERR(rc, err.msg, "generation_config.json", "not valid JSON");
    cfg = llama_cfg();
    json_object_set_new(cfg, "bos_token_id", json_pack("[i,i]", 1, 2));
    rc = config("bos-list", cfg, NULL, &c, &err);
    CHECK_ERR(rc, err.msg, "'bos_token_id'", "one integer");
}

static void test_config_values(void)
{
    sy_model_config c;
    sy_err err;
    /* Defaults: head_dim, num_key_value_heads, rope_theta, max_pos, eps, tie. */
    json_t *cfg = llama_cfg();
    json_object_del(cfg, "head_dim");
    json_object_del(cfg, "num_key_value_heads");
    json_object_del(cfg, "rope_theta");
    json_object_del(cfg, "max_position_embeddings");
    json_object_del(cfg, "rms_norm_eps");
    json_object_del(cfg, "tie_word_embeddings");
    json_object_del(cfg, "torch_dtype");
    json_object_set_new(cfg, "dtype", json_string("bfloat16"));
    int rc = config("defaults", cfg, NULL, &c, &err);
    CHECK(rc == SY_OK, "%s", err.msg);
    CHECK(c.head_dim == 4 && c.n_kv_heads == 2 && c.rope_theta == 10000.0f && c.max_pos == 2048 &&
              c.rms_eps == 1e-6f && !c.tie_embeddings && c.rotary_dim == 4 && c.dtype == SY_DTYPE_BF16,
          "defaults: head_dim %d kv %d theta %g max_pos %d", c.head_dim, c.n_kv_heads, (double)c.rope_theta,
          c.max_pos);
    sy_model_config_free(&c);

    cfg = llama_cfg();
    json_object_set_new(cfg, "head_dim", json_null()); /* null means "use the default" */
    json_object_set_new(cfg, "partial_rotary_factor", json_real(0.5));
    json_object_set_new(cfg, "rope_scaling", json_pack("{s:s, s:i}", "type", "linear", "factor", 4));
    rc = config("linear", cfg, NULL, &c, &err);
    CHECK(rc == SY_OK && c.head_dim == 4 && c.rotary_dim == 2 && c.rope_scaling == SY_ROPE_SCALING_LINEAR &&
              c.rope_factor == 4.0f,
          "linear: %s", err.msg);
    sy_model_config_free(&c);

    cfg = llama_cfg();
    json_object_set_new(cfg, "rope_scaling",
                        json_pack("{s:s, s:f, s:f, s:f, s:i}", "rope_type", "llama3", "factor", 8.0, "low_freq_factor",
                                  1.0, "high_freq_factor", 4.0, "original_max_position_embeddings", 8192));
    rc = config("llama3", cfg, NULL, &c, &err);
    CHECK(rc == SY_OK && c.rope_scaling == SY_ROPE_SCALING_LLAMA3 && c.rope_factor == 8.0f &&
              c.rope_low_freq_factor == 1.0f && c.rope_high_freq_factor == 4.0f && c.rope_original_max_pos == 8192,
          "llama3: %s", err.msg);
    sy_model_config_free(&c);

    cfg = llama_cfg();
    json_object_set_new(cfg, "rope_scaling", json_pack("{s:s}", "rope_type", "default"));
    rc = config("rope-default", cfg, NULL, &c, &err);
    CHECK(rc == SY_OK && c.rope_scaling == SY_ROPE_SCALING_NONE, "rope default: %s", err.msg);
    sy_model_config_free(&c);

    /* generation_config.json's eos wins; its bos fills a missing one. */
    cfg = llama_cfg();
    json_object_set_new(cfg, "bos_token_id", json_null());
    rc = config("gen-eos", cfg, "{\"bos_token_id\": 1, \"eos_token_id\": [2, 7, 9]}", &c, &err);
    CHECK(rc == SY_OK && c.bos_id == 1 && c.n_eos == 3 && c.eos_ids[0] == 2 && c.eos_ids[1] == 7 &&
              c.eos_ids[2] == 9,
          "gen eos: %s (bos %d, %d eos)", err.msg, c.bos_id, c.n_eos);
    sy_model_config_free(&c);
    cfg = llama_cfg();
    json_object_set_new(cfg, "eos_token_id", json_pack("[i,i]", 5, 6));
    rc = config("cfg-eos", cfg, "{\"do_sample\": false}", &c, &err);
    CHECK(rc == SY_OK && c.bos_id == 1 && c.n_eos == 2 && c.eos_ids[0] == 5 && c.eos_ids[1] == 6, "cfg eos: %s",
          err.msg);
    sy_model_config_free(&c);
    cfg = llama_cfg();
    json_object_set_new(cfg, "eos_token_id", json_null());
    json_object_del(cfg, "bos_token_id");
    rc = config("no-ids", cfg, NULL, &c, &err);
    CHECK(rc == SY_OK && c.bos_id == -1 && c.n_eos == 0, "no ids: %s", err.msg);
    sy_model_config_free(&c);

    /* Mistral: sliding_window defaults to 4096; null turns it off. */
    cfg = llama_cfg();
    json_array_set_new(json_object_get(cfg, "architectures"), 0, json_string("MistralForCausalLM"));
    json_object_set_new(cfg, "max_position_embeddings", json_integer(32768));
    rc = config("mistral", cfg, NULL, &c, &err);
    CHECK(rc == SY_OK && c.arch == SY_ARCH_LLAMA && c.sliding_window == 4096 &&
              strcmp(c.arch_name, "MistralForCausalLM") == 0,
          "mistral: %s (window %d)", err.msg, c.sliding_window);
    sy_model_config_free(&c);
    cfg = llama_cfg();
    json_array_set_new(json_object_get(cfg, "architectures"), 0, json_string("MistralForCausalLM"));
    json_object_set_new(cfg, "sliding_window", json_null());
    rc = config("mistral-null", cfg, NULL, &c, &err);
    CHECK(rc == SY_OK && c.sliding_window == 0, "mistral null window: %s", err.msg);
    sy_model_config_free(&c);
    CHECK(strcmp(sy_arch_name(SY_ARCH_LLAMA), "LlamaForCausalLM") == 0 &&
              strcmp(sy_arch_name(SY_ARCH_MIXTRAL), "MixtralForCausalLM") == 0 &&
              strcmp(sy_arch_name(SY_ARCH_QWEN3_MOE), "Qwen3MoeForCausalLM") == 0,
          "sy_arch_name");
}

static json_t *qwen3_cfg(void)
{
    json_t *cfg = llama_cfg();
    json_array_set_new(json_object_get(cfg, "architectures"), 0, json_string("Qwen3MoeForCausalLM"));
    json_object_set_new(cfg, "num_hidden_layers", json_integer(4));
    json_object_set_new(cfg, "num_experts", json_integer(3));
    json_object_set_new(cfg, "num_experts_per_tok", json_integer(2));
    json_object_set_new(cfg, "moe_intermediate_size", json_integer(12));
    json_object_set_new(cfg, "decoder_sparse_step", json_integer(2));
    json_object_set_new(cfg, "mlp_only_layers", json_pack("[i]", 3));
    json_object_set_new(cfg, "head_dim", json_integer(6)); /* != hidden / heads */
    return cfg;
}

static void test_moe(void)
{
    /* Qwen3-MoE: layer i is MoE iff i not in mlp_only_layers and (i+1) % step == 0. */
    static const uint8_t moe_layers[4] = {0, 1, 0, 0};
    tm_spec s = {.family = "qwen3moe", .hidden = 8, .layers = 4, .heads = 2, .kv_heads = 1, .head_dim = 6,
                 .inter = 16, .vocab = 32, .experts = 3, .moe_inter = 12, .moe_layers = moe_layers, .dtype = "BF16"};
    sy_model *m;
    sy_err err;
    int rc = load("qwen3", qwen3_cfg(), NULL, &s, &m, &err);
    CHECK(rc == SY_OK && m, "qwen3: %s", err.msg);
    if (m) {
        const sy_model_config *c = &m->cfg;
        CHECK(c->qk_norm && c->n_experts == 3 && c->top_k == 2 && c->moe_inter == 12 && !c->norm_topk_prob &&
                  c->decoder_sparse_step == 2,
              "qwen3 config");
        for (int l = 0; l < 4; l++) {
            CHECK(c->layer_is_moe[l] == moe_layers[l] && m->layers[l].is_moe == (moe_layers[l] != 0),
                  "layer %d kind", l);
            CHECK((m->layers[l].w_gate.data != NULL) == !moe_layers[l], "layer %d dense MLP", l);
            CHECK(m->layers[l].q_norm.shape[0] == 6 && m->layers[l].wq.shape[0] == 12, "layer %d q", l);
        }
        const sy_layer_weights *w = &m->layers[1];
        CHECK(w->router.shape[0] == 3 && w->exp_gate && w->exp_gate[2].shape[0] == 12 &&
                  w->exp_down[2].shape[1] == 12 && w->exp_up[0].dtype == SY_DTYPE_BF16,
              "experts");
        CHECK(m->layers[3].exp_gate == NULL && m->layers[3].w_down.shape[1] == 16, "mlp_only layer 3 is dense");
        sy_model_free(m);
    }

    /* Missing expert tensor names layer and expert. */
    s.omit = "model.layers.1.mlp.experts.2.down_proj.weight";
    rc = load("qwen3-missing-expert", qwen3_cfg(), NULL, &s, &m, &err);
    CHECK_ERR(rc, err.msg, "'model.layers.1.mlp.experts.2.down_proj.weight'",
              "expert down projection of layer 1, expert 2");
    s.omit = "model.layers.3.self_attn.k_norm.weight";
    rc = load("qwen3-missing-knorm", qwen3_cfg(), NULL, &s, &m, &err);
    CHECK_ERR(rc, err.msg, "'model.layers.3.self_attn.k_norm.weight'", "per-head key norm");

    sy_model_config c;
    json_t *cfg = qwen3_cfg();
    json_object_del(cfg, "moe_intermediate_size");
    rc = config("qwen3-no-moe-inter", cfg, NULL, &c, &err);
    CHECK_ERR(rc, err.msg, "'moe_intermediate_size'", "missing");
    cfg = qwen3_cfg();
    json_object_set_new(cfg, "mlp_only_layers", json_pack("[i]", 4));
    rc = config("qwen3-only-range", cfg, NULL, &c, &err);
    CHECK_ERR(rc, err.msg, "'mlp_only_layers'", "holds 4", "[0, 3]");
    cfg = qwen3_cfg();
    json_object_set_new(cfg, "mlp_only_layers", json_integer(1));
    rc = config("qwen3-only-type", cfg, NULL, &c, &err);
    CHECK_ERR(rc, err.msg, "'mlp_only_layers'", "a list of integers", "an integer");
    cfg = qwen3_cfg();
    json_object_set_new(cfg, "norm_topk_prob", json_true());
    json_object_del(cfg, "decoder_sparse_step");
    json_object_del(cfg, "mlp_only_layers");
    rc = config("qwen3-defaults", cfg, NULL, &c, &err);
    CHECK(rc == SY_OK && c.norm_topk_prob && c.decoder_sparse_step == 1 && c.layer_is_moe[0] && c.layer_is_moe[3],
          "qwen3 defaults: %s", err.msg);
    sy_model_config_free(&c);
    /* use_sliding_window is read now: tests/unit/test_model_windows.c. */

    /* Mixtral: every layer MoE, experts sized by intermediate_size. */
    cfg = llama_cfg();
    json_array_set_new(json_object_get(cfg, "architectures"), 0, json_string("MixtralForCausalLM"));
    json_object_set_new(cfg, "num_local_experts", json_integer(3));
    json_object_set_new(cfg, "num_experts_per_tok", json_integer(2));
    json_object_set_new(cfg, "sliding_window", json_integer(4096)); /* >= max_pos: no window */
    tm_spec mx = {.family = "mixtral", .hidden = 8, .layers = 2, .heads = 2, .kv_heads = 1, .head_dim = 4,
                  .inter = 16, .vocab = 32, .experts = 3, .moe_inter = 16};
    rc = load("mixtral", json_deep_copy(cfg), NULL, &mx, &m, &err);
    CHECK(rc == SY_OK && m, "mixtral: %s", err.msg);
    if (m) {
        CHECK(m->cfg.norm_topk_prob && m->cfg.moe_inter == 16 && m->cfg.sliding_window == 0 &&
                  m->layers[0].is_moe && m->layers[1].exp_up[2].shape[0] == 16,
              "mixtral config");
        sy_model_free(m);
    }
    mx.omit = "model.layers.1.block_sparse_moe.gate.weight";
    rc = load("mixtral-no-router", json_deep_copy(cfg), NULL, &mx, &m, &err);
    CHECK_ERR(rc, err.msg, "'model.layers.1.block_sparse_moe.gate.weight'", "MoE router of layer 1");
    json_object_set_new(cfg, "num_experts_per_tok", json_integer(4));
    rc = config("mixtral-topk", cfg, NULL, &c, &err);
    CHECK_ERR(rc, err.msg, "'num_experts_per_tok' is 4", "[1, 3]");
}

int main(void)
{
    sy_log_set_level(SY_LOG_ERROR);
    if (tm_mkdtemp(tmp, sizeof tmp) != 0)
        return 1;
    test_llama_ok();
    test_bind_errors();
    test_config_errors();
    test_config_values();
    test_moe();
    tm_rmtree(tmp);
    if (tm_failures) {
        fprintf(stderr, "test_model_errors: %d failures\n", tm_failures);
        return 1;
    }
    printf("test_model_errors: all passed\n");
    return 0;
}
