/*
 * Which layers slide, read from config.json as transformers 5 decides it:
 * Qwen2Config / Qwen3Config (use_sliding_window, sliding_window,
 * max_window_layers, layer_types), with Qwen2's fixed q/k/v biases and
 * Qwen3's attention_bias over o_proj and its head_dim default of 128. A
 * model whose layers differ gets layer_window; equal windows stay one
 * sliding_window (which an ABI 1.0 attention plugin can still serve).
 */
#include "config.h"

#include "model/model.h"
#include "test_model_util.h"

#include "util/log.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char tmp[256];

/* hidden 8, 4 layers, 2 heads / 1 kv head, head_dim 4, max_pos 64. */
static json_t *qwen_cfg(const char *arch)
{
    return json_pack("{s:[s], s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:f, s:s}", "architectures", arch,
                     "hidden_size", 8, "intermediate_size", 16, "num_hidden_layers", 4, "num_attention_heads", 2,
                     "num_key_value_heads", 1, "head_dim", 4, "vocab_size", 32, "max_position_embeddings", 64,
                     "rms_norm_eps", 1e-6, "hidden_act", "silu");
}

/* Loads cfg (taken) as <tmp>/<name>/config.json. */
static int config(const char *name, json_t *cfg, sy_model_config *c, sy_err *err)
{
    char dir[512];
    tm_write_config_dir(tmp, name, cfg, dir, sizeof dir);
    memset(err, 0, sizeof *err);
    return sy_model_config_load(dir, c, err);
}

/* The windows of every layer as "w0,w1,..." (layer_window, else sliding_window for all). */
static const char *windows(const sy_model_config *c, char *buf, size_t cap)
{
    size_t o = 0;
    buf[0] = '\0';
    for (int i = 0; i < c->n_layers && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%d", i ? "," : "",
                              c->layer_window ? c->layer_window[i] : c->sliding_window);
    return buf;
}

static void expect(const char *name, json_t *cfg, const char *want, int per_layer)
{
    sy_model_config c;
    sy_err err;
    char got[128];
    int rc = config(name, cfg, &c, &err);
    CHECK(rc == SY_OK, "%s: %s", name, err.msg);
    if (rc != SY_OK)
        return;
    CHECK(strcmp(windows(&c, got, sizeof got), want) == 0 && (c.layer_window != NULL) == per_layer,
          "%s: windows %s (%s), expected %s (%s)", name, got, c.layer_window ? "per layer" : "one for all", want,
          per_layer ? "per layer" : "one for all");
    sy_model_config_free(&c);
}

static void test_qwen_windows(void)
{
    /* No use_sliding_window: sliding_window and max_window_layers mean nothing. */
    json_t *cfg = qwen_cfg("Qwen2ForCausalLM");
    json_object_set_new(cfg, "sliding_window", json_integer(8));
    json_object_set_new(cfg, "max_window_layers", json_integer(1));
    expect("qwen2-off", cfg, "0,0,0,0", 0);
    /* Layers >= max_window_layers slide. */
    cfg = qwen_cfg("Qwen2ForCausalLM");
    json_object_set_new(cfg, "use_sliding_window", json_true());
    json_object_set_new(cfg, "sliding_window", json_integer(8));
    json_object_set_new(cfg, "max_window_layers", json_integer(2));
    expect("qwen2-from-2", cfg, "0,0,8,8", 1);
    /* max_window_layers 0: every layer slides, one window. */
    cfg = qwen_cfg("Qwen3ForCausalLM");
    json_object_set_new(cfg, "use_sliding_window", json_true());
    json_object_set_new(cfg, "sliding_window", json_integer(6));
    json_object_set_new(cfg, "max_window_layers", json_integer(0));
    expect("qwen3-all", cfg, "6,6,6,6", 0);
    /* Defaults: sliding_window 4096 (past max_pos 64: it never cuts) and max_window_layers 28 (> 4 layers). */
    cfg = qwen_cfg("Qwen3ForCausalLM");
    json_object_set_new(cfg, "use_sliding_window", json_true());
    json_object_set_new(cfg, "max_window_layers", json_integer(1));
    expect("qwen3-default-window", cfg, "0,0,0,0", 0);
    cfg = qwen_cfg("Qwen2ForCausalLM");
    json_object_set_new(cfg, "use_sliding_window", json_true());
    json_object_set_new(cfg, "sliding_window", json_integer(8));
    expect("qwen2-default-max-window-layers", cfg, "0,0,0,0", 0);
    /* transformers 5's saved layer_types decide over max_window_layers. */
    cfg = qwen_cfg("Qwen2ForCausalLM");
    json_object_set_new(cfg, "use_sliding_window", json_true());
    json_object_set_new(cfg, "sliding_window", json_integer(8));
    json_object_set_new(cfg, "max_window_layers", json_integer(0));
    json_object_set_new(cfg, "layer_types", json_pack("[s,s,s,s]", "sliding_attention", "full_attention",
                                                      "sliding_attention", "full_attention"));
    expect("qwen2-layer-types", cfg, "8,0,8,0", 1);

    sy_model_config c;
    sy_err err;
    cfg = qwen_cfg("Qwen2ForCausalLM");
    json_object_set_new(cfg, "layer_types", json_pack("[s,s,s,s]", "full_attention", "sliding_attention",
                                                      "full_attention", "full_attention"));
    int rc = config("qwen2-types-no-window", cfg, &c, &err);
    CHECK_ERR(rc, err.msg, "layer_types[1] is \"sliding_attention\", but there is no window",
              "use_sliding_window false or absent");
    cfg = qwen_cfg("Qwen3ForCausalLM");
    json_object_set_new(cfg, "use_sliding_window", json_true());
    json_object_set_new(cfg, "layer_types", json_pack("[s,s]", "full_attention", "sliding_attention"));
    rc = config("qwen3-types-short", cfg, &c, &err);
    CHECK_ERR(rc, err.msg, "field 'layer_types' should list 4 strings", "a list of another length");
    cfg = qwen_cfg("Qwen3ForCausalLM");
    json_object_set_new(cfg, "use_sliding_window", json_true());
    json_object_set_new(cfg, "layer_types", json_pack("[s,s,s,s]", "full_attention", "chunked_attention",
                                                      "full_attention", "full_attention"));
    rc = config("qwen3-types-bad", cfg, &c, &err);
    CHECK_ERR(rc, err.msg, "layer_types[1] should be \"sliding_attention\" or \"full_attention\"",
              "chunked_attention");
}

/* Qwen3MoeConfig: use_sliding_window makes every layer slide (it has no max_window_layers); it was refused. */
static void test_qwen3moe_windows(void)
{
    json_t *cfg = qwen_cfg("Qwen3MoeForCausalLM");
    json_object_set_new(cfg, "num_experts", json_integer(0));
    expect("qwen3moe-off", json_deep_copy(cfg), "0,0,0,0", 0);
    json_object_set_new(cfg, "sliding_window", json_integer(8));
    expect("qwen3moe-unused", json_deep_copy(cfg), "0,0,0,0", 0);
    json_object_set_new(cfg, "use_sliding_window", json_true());
    json_object_set_new(cfg, "max_window_layers", json_integer(2)); /* not Qwen3-MoE's: ignored, as transformers does */
    expect("qwen3moe-window", json_deep_copy(cfg), "8,8,8,8", 0);
    json_object_del(cfg, "sliding_window");
    json_object_set_new(cfg, "max_position_embeddings", json_integer(8192));
    expect("qwen3moe-default", cfg, "4096,4096,4096,4096", 0);
}

static void test_qwen_attention(void)
{
    sy_model_config c;
    sy_err err;
    /* Qwen2: q/k/v biases whatever attention_bias says (Qwen2Attention has no such switch), no o_proj bias. */
    json_t *cfg = qwen_cfg("Qwen2ForCausalLM");
    json_object_set_new(cfg, "attention_bias", json_false());
    int rc = config("qwen2-bias", cfg, &c, &err);
    CHECK(rc == SY_OK && c.arch == SY_ARCH_QWEN2 && c.attention_bias && !c.o_bias && !c.qk_norm,
          "qwen2: %s (bias %d, o bias %d, qk norm %d)", err.msg, c.attention_bias, c.o_bias, c.qk_norm);
    sy_model_config_free(&c);
    /* Qwen3: q/k norm; attention_bias covers o_proj; head_dim 128 when absent, whatever hidden/heads is. */
    cfg = qwen_cfg("Qwen3ForCausalLM");
    json_object_del(cfg, "head_dim");
    json_object_set_new(cfg, "attention_bias", json_true());
    rc = config("qwen3-bias", cfg, &c, &err);
    CHECK(rc == SY_OK && c.arch == SY_ARCH_QWEN3 && c.attention_bias && c.o_bias && c.qk_norm &&
              c.head_dim == 128 && c.rotary_dim == 128,
          "qwen3: %s (bias %d, o bias %d, qk norm %d, head_dim %d)", err.msg, c.attention_bias, c.o_bias,
          c.qk_norm, c.head_dim);
    sy_model_config_free(&c);
    cfg = qwen_cfg("Qwen3ForCausalLM");
    rc = config("qwen3-nobias", cfg, &c, &err);
    CHECK(rc == SY_OK && !c.attention_bias && !c.o_bias && c.head_dim == 4, "qwen3 no bias: %s", err.msg);
    sy_model_config_free(&c);
    CHECK(strcmp(sy_arch_name(SY_ARCH_QWEN2), "Qwen2ForCausalLM") == 0 &&
              strcmp(sy_arch_name(SY_ARCH_QWEN3), "Qwen3ForCausalLM") == 0,
          "sy_arch_name");
}

int main(void)
{
    sy_log_set_level(SY_LOG_ERROR);
    if (tm_mkdtemp(tmp, sizeof tmp) != 0)
        return 1;
    test_qwen_windows();
    test_qwen3moe_windows();
    test_qwen_attention();
    tm_rmtree(tmp);
    if (tm_failures) {
        fprintf(stderr, "test_model_windows: %d failures\n", tm_failures);
        return 1;
    }
    printf("test_model_windows: all passed\n");
    return 0;
}
