#include "config.h"

#include "engine/engine_internal.h"
#include "engine/rope.h"
#include "plugin/loader_config.h"
#include "model/load_progress.h"
#include "util/log.h"
#include "util/util.h"
#include "spec/spec.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The core's own sections and what they accept. */
static const sy_key_decl model_keys[] = {
    {"path", SY_KEY_STRING, NULL, "Hugging Face model directory (config.json, *.safetensors, tokenizer.json)", 1, 0, NULL},
    {"tokenizer", SY_KEY_STRING, "", "directory holding tokenizer.json if not the model's", 1, 0, NULL},
    {"max_seq_len", SY_KEY_INT, "0", "longest prompt + output; 0: the model's max_position_embeddings", 0, 1 << 24, NULL},
    {"chat_template", SY_KEY_STRING, "", "a Jinja chat template file used instead of the model's own", 1, 0, NULL},
    {"tool_parser", SY_KEY_STRING, "",
     "the tool-call format of the model's output (glm45, glm47, deepseek_v3, deepseek_v31, deepseek_v32, hermes, "
     "llama3_json, mistral, kimi_k2, harmony); empty: the one its chat template writes",
     0, 0, NULL},
    {"moe_parallel", SY_KEY_ENUM, "tensor",
     "how --tp ranks split the routed experts: tensor = a slice of every expert; expert = whole experts, E/N per rank",
     1, 0, "tensor|expert"},
    {NULL, 0, NULL, NULL, 0, 0, NULL},
};

static const sy_key_decl scheduler_keys[] = {
    {"max_running", SY_KEY_INT, "64", "sequences in one engine step", 1, 65536, NULL},
    {"max_batch_tokens", SY_KEY_INT, "2048", "tokens in one engine step (bounds chunked prefill)", 1, 1 << 20, NULL},
    {"kv_block_size", SY_KEY_INT, "16", "tokens per paged-KV block", 1, 1024, NULL},
    {"kv_cache_size", SY_KEY_SIZE, "256M", "memory for the paged KV cache (all layers, K and V)", 1, 0, NULL},
    {"max_waiting", SY_KEY_INT, "1024", "requests queued beyond the running ones; more are refused (serve)", 1, 1 << 20,
     NULL},
    {"drain_timeout", SY_KEY_FLOAT, "30", "seconds serve waits for in-flight requests on SIGINT/SIGTERM", 0, 86400, NULL},
    {"device_sampling", SY_KEY_ENUM, "auto",
     "greedy picks and sampled draws by the device's argmax and sample ops when it has them (auto) or from logits "
     "copied to the host (off)", 0, 0,
     "auto|off"},
    {NULL, 0, NULL, NULL, 0, 0, NULL},
};

static const char *kv_str(const sy_kv *kv, size_t n, const char *key)
{
    const char *v = sy_kv_get(kv, n, key);
    return v ? v : "";
}

/* Resolves and creates the plugin of one section. */
int sy__engine_open_plugin(sy_engine *e, const sy_config *cfg, const char *section, sy_plugin_kind kind,
                           const char *dflt, const char *device, sy_plugin_inst **out, sy_err *err)
{
    const char *spec = sy_config_get(cfg, section, "plugin");
    if (!spec || !*spec)
        spec = dflt;
    sy_plugin *p = NULL;
    int rc = sy_loader_resolve(e->loader, kind, spec, device, &e->host.api, &p, err);
    if (rc)
        return rc;
    return sy_plugin_create(p, &e->host.api, cfg, section, out, err);
}

static int prepare(sy_engine *e, const char *name, const sy_tensor *host, sy_tensor *out, sy_err *err)
{
    if (!host->data) {
        memset(out, 0, sizeof *out);
        return SY_OK;
    }
    int rc = e->dev->prepare_weight(e->device->inst, name, host, out, err);
    if (rc && err) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        sy_err_set(err, rc, "device %s cannot prepare tensor %s: %s", e->device->plugin->desc->name, name, msg);
    }
    return rc;
}

static int prepare_weights(sy_engine *e, sy_err *err)
{
    const sy_model *m = e->model;
    int rc;
    if ((rc = prepare(e, "model.norm.weight", &m->final_norm, &e->final_norm, err)))
        return rc;
    if (e->tp_size > 1) {
        /* Vocab slices: the embedding (with its zero row) and lm_head are prepared separately even when tied. */
        sy_tensor embed, lm_head;
        e->lm_head_is_embed = false;
        if ((rc = sy__tp_shard_vocab(e, &embed, &lm_head, err)) ||
            (rc = prepare(e, "model.embed_tokens.weight", &embed, &e->embed, err)) ||
            (rc = prepare(e, "lm_head.weight", &lm_head, &e->lm_head, err)))
            return rc;
    } else {
        if ((rc = prepare(e, "model.embed_tokens.weight", &m->embed, &e->embed, err)))
            return rc;
        e->lm_head_is_embed = m->lm_head.data == m->embed.data;
        if (e->lm_head_is_embed)
            e->lm_head = e->embed;
        else if ((rc = prepare(e, "lm_head.weight", &m->lm_head, &e->lm_head, err)))
            return rc;
    }

    e->layers = calloc((size_t)e->n_kv_layers, sizeof *e->layers);
    if (!e->layers)
        return sy_err_set(err, SY_ERR_NOMEM, "cannot allocate %d layers", e->n_kv_layers);
    for (int32_t l = 0; l < e->n_kv_layers; l++) { /* the MTP layer's block last (sy__engine_host_layer) */
        const sy_layer_weights *s = sy__engine_host_layer(e, l);
        sy_layer_weights *d = &e->layers[l];
        sy_layer_weights shard;
        if (e->tp_size > 1) {
            if ((rc = sy__tp_shard_layer(e, l, s, &shard, err)))
                return rc;
            s = &shard;
        }
        char nm[160];
#define PREP(field, what)                                                                   \
    do {                                                                                    \
        snprintf(nm, sizeof nm, "layer %d %s", l, what);                                    \
        if ((rc = prepare(e, nm, &s->field, &d->field, err)))                               \
            return rc;                                                                      \
    } while (0)
        PREP(attn_norm, "input_layernorm");
        PREP(wq, "q_proj");
        PREP(wk, "k_proj");
        PREP(wv, "v_proj");
        PREP(wo, "o_proj");
        PREP(bq, "q_proj.bias");
        PREP(bk, "k_proj.bias");
        PREP(bv, "v_proj.bias");
        PREP(q_norm, "q_norm");
        PREP(k_norm, "k_norm");
        PREP(ffn_norm, "post_attention_layernorm");
        /* MLA and the DSA indexer (kv_b_proj and the indexer's key norm are read on the host: forward_mla.c) */
        PREP(q_a, "q_a_proj");
        PREP(q_a_norm, "q_a_layernorm");
        PREP(q_b, "q_b_proj");
        PREP(kv_a, "kv_a_proj_with_mqa");
        PREP(idx_wq_b, "indexer.wq_b");
        PREP(idx_wk, "indexer.wk");
        PREP(idx_wproj, "indexer.weights_proj");
        PREP(bo, "o_proj.bias");
        d->is_moe = s->is_moe;
        if (s->is_moe) {
            PREP(router, "router");
            PREP(router_bias, "router.bias");
            PREP(sh_gate, "shared_experts.gate_proj");
            PREP(sh_up, "shared_experts.up_proj");
            PREP(sh_down, "shared_experts.down_proj");
            rc = e->mo->prepare_layer(e->moe->inst, l, s->exp_gate, s->exp_up, s->exp_down,
                                      s->score_bias.data ? &s->score_bias : NULL, err);
            if (rc)
                return rc;
            /* gpt-oss: the experts' biases (setup_moe checked the op is there); down's only on one rank */
            if (s->exp_gate_bias &&
                (rc = e->mo->prepare_layer_bias(e->moe->inst, l, s->exp_gate_bias, s->exp_up_bias,
                                                s->exp_down_bias, err)))
                return rc;
        } else {
            PREP(w_gate, "gate_proj");
            PREP(w_up, "up_proj");
            PREP(w_down, "down_proj");
        }
#undef PREP
    }
    return SY_OK;
}

static void release_weights(sy_engine *e)
{
    /* A device without release_weight (it may hand back host views) still
     * leaves the engine's own layer table to free. */
    if (!e->dev || !e->dev->release_weight) {
        free(e->layers);
        e->layers = NULL;
        return;
    }
    void *di = e->device->inst;
    if (e->layers) {
        for (int32_t l = 0; l < e->n_kv_layers; l++) {
            sy_tensor *ts[] = {&e->layers[l].attn_norm, &e->layers[l].wq,     &e->layers[l].wk,
                               &e->layers[l].wv,        &e->layers[l].wo,     &e->layers[l].bq,
                               &e->layers[l].bk,        &e->layers[l].bv,     &e->layers[l].q_norm,
                               &e->layers[l].k_norm,    &e->layers[l].ffn_norm, &e->layers[l].w_gate,
                               &e->layers[l].w_up,      &e->layers[l].w_down, &e->layers[l].router,
                               &e->layers[l].sh_gate,   &e->layers[l].sh_up,  &e->layers[l].sh_down,
                               &e->layers[l].q_a,       &e->layers[l].q_a_norm, &e->layers[l].q_b,
                               &e->layers[l].kv_a,      &e->layers[l].idx_wq_b, &e->layers[l].idx_wk,
                               &e->layers[l].idx_wproj, &e->layers[l].bo,     &e->layers[l].router_bias};
            for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
                if (ts[i]->data)
                    e->dev->release_weight(di, ts[i]);
        }
        free(e->layers);
        e->layers = NULL;
    }
    if (!e->lm_head_is_embed && e->lm_head.data)
        e->dev->release_weight(di, &e->lm_head);
    if (e->embed.data)
        e->dev->release_weight(di, &e->embed);
    if (e->final_norm.data)
        e->dev->release_weight(di, &e->final_norm);
}

/*
 * Bytes of one cached K or V element: `[attention] kv_dtype`, the key every
 * shipped attention plugin declares (docs/plugin-guide.md), else F32, which
 * any other choice fits into. Counting 4 bytes for a BF16 cache held half
 * the tokens the operator paid for.
 */
static unsigned kv_elem_bytes(const sy_config *cfg)
{
    const char *v = sy_config_get(cfg, "attention", "kv_dtype");
    if (!v)
        return 4;
    if (!strcmp(v, "bf16") || !strcmp(v, "f16"))
        return 2;
    if (!strcmp(v, "fp8") || !strcmp(v, "f8_e4m3"))
        return 1;
    return 4;
}

static int setup_attention(sy_engine *e, const sy_config *cfg, const sy_kv *sk, size_t nsk, sy_err *err)
{
    const sy_model_config *c = e->mc;
    /* The core keeps the latent cache itself (forward_mla.c); no MLA family has a sliding window or sinks
     * (their config hooks set none), so the latent attention needs neither. */
    if (c->mla)
        return sy__mla_open(e, sk, nsk, err);
    sy_attn_problem *p = &e->attn_problem;
    memset(p, 0, sizeof *p);
    p->struct_size = sizeof *p;
    p->n_layers = e->n_kv_layers; /* with the MTP layer: its K/V as one more layer */
    p->n_heads = c->n_heads / e->tp_size; /* this rank's heads: its KV cache holds only those */
    p->n_kv_heads = c->n_kv_heads / e->tp_size;
    p->head_dim = c->head_dim;
    p->v_head_dim = c->head_dim;
    p->block_size = (int32_t)sy_kv_int(sk, nsk, "kv_block_size", 16);
    p->kv_dtype = SY_DTYPE_F32;
    p->scale = 1.0f / sqrtf((float)c->head_dim);
    p->sliding_window = c->sliding_window;
    p->layer_window = c->layer_window; /* the model config outlives the attention instance */
    if (c->attn_sinks) { /* gpt-oss: this rank's heads' sink logits, F32, every layer */
        const int32_t nh = p->n_heads, h0 = e->tp_rank * nh;
        e->sinks = malloc(sizeof(float) * (size_t)c->n_layers * (size_t)nh);
        if (!e->sinks)
            return sy_err_set(err, SY_ERR_NOMEM, "cannot allocate the attention sinks");
        for (int32_t l = 0; l < c->n_layers; l++) {
            const sy_tensor *t = &e->model->layers[l].sinks;
            for (int32_t h = 0; h < nh; h++)
                e->sinks[(size_t)l * (size_t)nh + (size_t)h] =
                    t->dtype == SY_DTYPE_BF16  ? sy_bf16_to_f32(((const uint16_t *)t->data)[h0 + h])
                    : t->dtype == SY_DTYPE_F16 ? sy_f16_to_f32(((const uint16_t *)t->data)[h0 + h])
                                               : ((const float *)t->data)[h0 + h];
        }
        p->sinks = e->sinks;
    }

    unsigned long long cache_bytes = 0;
    sy_parse_size(kv_str(sk, nsk, "kv_cache_size"), &cache_bytes);
    const unsigned long long per_block =
        2ull * (unsigned long long)e->n_kv_layers * (unsigned long long)p->block_size * (unsigned long long)p->n_kv_heads *
        (unsigned long long)c->head_dim * kv_elem_bytes(cfg);
    unsigned long long n_blocks = cache_bytes / per_block;
    /* No point in more blocks than every running sequence at full length needs. */
    const unsigned long long useful = (unsigned long long)e->max_seqs * (unsigned long long)e->max_blocks_per_seq;
    if (n_blocks > useful)
        n_blocks = useful;
    if (n_blocks < (unsigned long long)e->max_blocks_per_seq)
        return sy_err_set(err, SY_ERR_INVALID,
                          "[scheduler] kv_cache_size %s holds %llu KV blocks of %d tokens, but one sequence of "
                          "max_seq_len %d needs %d; raise kv_cache_size or lower [model] max_seq_len",
                          kv_str(sk, nsk, "kv_cache_size"), n_blocks, p->block_size, e->max_seq_len,
                          e->max_blocks_per_seq);
    if (n_blocks > INT32_MAX)
        n_blocks = INT32_MAX;
    p->n_blocks = (int32_t)n_blocks;

    /* A plugin built against ABI 1.0 would read neither field and attend over every position. */
    const uint16_t minor = e->attn->plugin->desc->abi_minor;
    if (minor < 1 && (p->layer_window || p->sinks))
        return sy_err_set(err, SY_ERR_UNSUPPORTED,
                          "attention plugin %s (%s) is built against ABI %u.%u, but %s needs %s (ABI 1.1); use an "
                          "attention plugin built against ABI 1.1 or later",
                          e->attn->plugin->desc->name, e->attn->plugin->path, (unsigned)SY_ABI_MAJOR, (unsigned)minor,
                          c->arch_name,
                          p->layer_window && p->sinks ? "per-layer sliding windows and attention sinks"
                          : p->layer_window           ? "per-layer sliding windows"
                                                      : "attention sinks");
    int rc = e->att->supports(e->attn->inst, p, err);
    if (rc != 1) {
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err->msg);
        return sy_err_set(err, SY_ERR_UNSUPPORTED, "attention plugin %s (%s) cannot serve this model: %s",
                          e->attn->plugin->desc->name, e->attn->plugin->path, why);
    }
    if ((rc = e->att->prepare(e->attn->inst, p, err)))
        return rc;
    return sy_kv_blocks_init(&e->kv, p->n_blocks, p->block_size, err);
}

static int setup_moe(sy_engine *e, const sy_config *cfg, sy_err *err)
{
    const sy_model_config *c = e->mc;
    int rc = sy__engine_open_plugin(e, cfg, "moe", SY_KIND_MOE, "auto", e->device->plugin->desc->device, &e->moe, err);
    if (rc)
        return rc;
    e->mo = e->moe->ops;
    sy_moe_problem p = {0};
    p.struct_size = sizeof p;
    p.n_layers = e->n_kv_layers; /* the MTP layer's experts under layer index n_layers */
    p.n_experts = c->n_experts;
    p.top_k = c->top_k;
    p.hidden = c->hidden;
    p.inter = e->expert_parallel ? c->moe_inter : c->moe_inter / e->tp_size; /* expert parallel: whole experts */
    p.scoring = c->moe_scoring;
    p.norm_topk_prob = c->norm_topk_prob;
    p.routed_scaling_factor = c->routed_scaling_factor;
    p.n_group = c->n_group > 1 ? c->n_group : 0;
    p.topk_group = c->n_group > 1 ? c->topk_group : 0;
    p.activation = c->moe_activation;
    p.swiglu_alpha = c->swiglu_alpha;
    p.swiglu_limit = c->swiglu_limit;
    p.has_bias = c->expert_bias;
    const size_t bias_op_end = offsetof(sy_moe_ops, prepare_layer_bias) + sizeof e->mo->prepare_layer_bias;
    if (p.has_bias && (e->mo->struct_size < bias_op_end || !e->mo->prepare_layer_bias))
        return sy_err_set(err, SY_ERR_UNSUPPORTED,
                          "moe plugin %s (%s) has no prepare_layer_bias op (ABI 1.1), but %s's experts have biases; "
                          "use a moe plugin built against ABI 1.1 that has it",
                          e->moe->plugin->desc->name, e->moe->plugin->path, c->arch_name);
    for (int32_t l = 0; l < c->n_layers; l++)
        if (e->model->layers[l].is_moe) {
            p.weight_dtype = e->model->layers[l].exp_gate[0].dtype;
            break;
        }
    rc = e->mo->supports(e->moe->inst, &p, err);
    if (rc != 1) {
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err->msg);
        return sy_err_set(err, SY_ERR_UNSUPPORTED, "moe plugin %s (%s) cannot serve this model: %s",
                          e->moe->plugin->desc->name, e->moe->plugin->path, why);
    }
    if ((rc = e->mo->prepare(e->moe->inst, &p, err)) || !e->expert_parallel)
        return rc;
    if (e->mo->struct_size < offsetof(sy_moe_ops, set_expert_range) + sizeof e->mo->set_expert_range ||
        !e->mo->set_expert_range)
        return sy_err_set(err, SY_ERR_UNSUPPORTED,
                          "[model] moe_parallel = expert: moe plugin %s (%s) has no set_expert_range op, so it cannot "
                          "hold a subset of the experts; use moe_parallel = tensor or a plugin that has it",
                          e->moe->plugin->desc->name, e->moe->plugin->path);
    return e->mo->set_expert_range(e->moe->inst, e->ep_first, e->ep_count, err);
}

/* A verify step carries 1 + k logits rows per speculating sequence: the head's buffers are sized for it only when
 * [speculative] is on, so memory stays as it was without it. */
static int size_logit_rows(sy_engine *e, const sy_config *cfg, sy_err *err)
{
    sy_spec_config spec;
    int rc = sy_spec_config_read(cfg, &spec, err);
    if (rc)
        return rc;
    int64_t rows = e->max_seqs;
    if (spec.method != SY_SPEC_NONE)
        rows *= 1 + spec.num_draft_tokens;
    const int64_t most = e->max_batch_tokens > e->max_seqs ? e->max_batch_tokens : e->max_seqs;
    e->max_sel = (int32_t)(rows < most ? rows : most); /* a row is a token of the step */
    return SY_OK;
}

/* The checkpoint's layers stored after the decoder layers serve [speculative] method = mtp. */
static int mtp_wanted(const sy_config *cfg, bool *want, sy_err *err)
{
    sy_spec_config spec;
    int rc = sy_spec_config_read(cfg, &spec, err);
    *want = rc == SY_OK && spec.method == SY_SPEC_MTP;
    return rc;
}

/* Loads the model, with its MTP layers when [speculative] method = mtp (which then needs some). */
static int load_model(sy_engine *e, const sy_config *cfg, const char *dir, sy_load_progress *progress, sy_err *err)
{
    bool want_mtp = false;
    int rc = mtp_wanted(cfg, &want_mtp, err);
    if (rc)
        return rc;
    const sy_model_load_opts lo = {.progress = sy_load_progress_report, .progress_arg = progress, .load_mtp = want_mtp};
    if ((rc = sy_model_load_with(dir, &lo, &e->model, err)))
        return rc;
    const sy_model_config *c = &e->model->cfg;
    if (want_mtp && e->model->n_mtp <= 0)
        return sy_err_set(err, SY_ERR_INVALID,
                          "[speculative] method = mtp needs the checkpoint's multi-token-prediction layers, but %s/"
                          "config.json has num_nextn_predict_layers %d (%s); use method = ngram or draft",
                          dir, c->n_mtp_layers, c->arch_name);
    /* SGLang's chaining with one layer: the first MTP layer drafts every step, whatever the checkpoint has. */
    e->n_mtp = want_mtp ? 1 : 0;
    e->n_kv_layers = c->n_layers + e->n_mtp;
    return SY_OK;
}

/* The host views of layer l: a decoder layer, or (l == n_layers) the MTP layer's block. */
const sy_layer_weights *sy__engine_host_layer(const sy_engine *e, int32_t l)
{
    return l < e->mc->n_layers ? &e->model->layers[l] : &e->model->mtp[l - e->mc->n_layers].block;
}

int sy_engine_open(const sy_config *cfg, const sy_engine_opts *opts, sy_engine **out, sy_err *err)
{
    *out = NULL;
    sy_engine *e = calloc(1, sizeof *e);
    if (!e)
        return sy_err_set(err, SY_ERR_NOMEM, "cannot allocate the engine");
    sy_host_init(&e->host);
    /* Before the device opens: a GPU device plugin takes it as its default GPU. */
    if (opts && opts->dist)
        e->host.api.local_rank = opts->dist->local_rank;

    sy_kv *mk = NULL, *sk = NULL;
    size_t nmk = 0, nsk = 0;
    static const char *const no_reserved[] = {NULL};
    int rc;
    if ((rc = sy_config_bind(cfg, "model", model_keys, no_reserved, &mk, &nmk, err)) ||
        (rc = sy_config_bind(cfg, "scheduler", scheduler_keys, no_reserved, &sk, &nsk, err)) ||
        (rc = sy_loader_from_config(cfg, opts ? opts->plugin_dirs : NULL, NULL, &e->loader, err)))
        goto fail;

    /* Device first: its worker pool serves every other plugin. */
    if ((rc = sy__engine_open_plugin(e, cfg, "device", SY_KIND_DEVICE, "auto", NULL, &e->device, err)))
        goto fail;
    e->dev = e->device->ops;
    const char *fuse = getenv("SY_ENGINE_FUSE");
    e->linear_multi = (!fuse || strcmp(fuse, "0") != 0) &&
                      e->dev->struct_size >= offsetof(sy_device_ops, linear_multi) + sizeof e->dev->linear_multi &&
                      e->dev->linear_multi;
    const sy_plugin_desc *dd = e->device->plugin->desc;
    if (dd->get_proc) {
        sy_device_parallel_for_fn run = (sy_device_parallel_for_fn)dd->get_proc("parallel_for");
        sy_device_n_workers_fn nw = (sy_device_n_workers_fn)dd->get_proc("n_workers");
        if (run && nw)
            sy_host_set_pool(&e->host, run, nw, e->device->inst);
    }
    const char *device_name = dd->device;

    const char *model_dir = kv_str(mk, nmk, "path");
    sy_info("loading model from %s", model_dir);
    sy_load_progress progress;
    sy_load_progress_init(&progress, opts && opts->progress);
    rc = load_model(e, cfg, model_dir, &progress, err);
    sy_load_progress_done(&progress);
    if (rc)
        goto fail;
    e->mc = &e->model->cfg;
    const char *tok_dir = *kv_str(mk, nmk, "tokenizer") ? kv_str(mk, nmk, "tokenizer") : model_dir;
    if ((rc = sy_tokenizer_load_dir(tok_dir, &e->tok, err)))
        goto fail;

    snprintf(e->chat_template, sizeof e->chat_template, "%s", kv_str(mk, nmk, "chat_template"));
    snprintf(e->tool_parser, sizeof e->tool_parser, "%s", kv_str(mk, nmk, "tool_parser"));
    e->expert_parallel = strcmp(kv_str(mk, nmk, "moe_parallel"), "expert") == 0;
    e->max_seq_len = (int32_t)sy_kv_int(mk, nmk, "max_seq_len", 0);
    if (e->max_seq_len <= 0 || e->max_seq_len > e->mc->max_pos)
        e->max_seq_len = e->mc->max_pos;
    e->max_batch_tokens = (int32_t)sy_kv_int(sk, nsk, "max_batch_tokens", 2048);
    e->dev_argmax = strcmp(kv_str(sk, nsk, "device_sampling"), "off") != 0 &&
                    e->dev->struct_size >= offsetof(sy_device_ops, argmax) + sizeof e->dev->argmax && e->dev->argmax;
    e->dev_sample = strcmp(kv_str(sk, nsk, "device_sampling"), "off") != 0 &&
                    e->dev->struct_size >= offsetof(sy_device_ops, sample) + sizeof e->dev->sample && e->dev->sample;
    e->max_seqs = (int32_t)sy_kv_int(sk, nsk, "max_running", 64);
    if (e->max_seqs > e->max_batch_tokens)
        e->max_seqs = e->max_batch_tokens;
    if ((rc = size_logit_rows(e, cfg, err)))
        goto fail;
    const int32_t bs = (int32_t)sy_kv_int(sk, nsk, "kv_block_size", 16);
    e->max_blocks_per_seq = (e->max_seq_len + bs - 1) / bs;

    /* The group first: how the weights are split depends on this rank's place in it. */
    if ((rc = sy__engine_join_group(e, cfg, opts ? opts->dist : NULL, device_name, err)))
        goto fail;
    if ((rc = sy__engine_open_plugin(e, cfg, "attention", SY_KIND_ATTN, "auto", device_name, &e->attn, err)))
        goto fail;
    e->att = e->attn->ops;
    if ((rc = setup_attention(e, cfg, sk, nsk, err)))
        goto fail;
    if (e->mc->n_experts > 0 && (rc = setup_moe(e, cfg, err)))
        goto fail;

    e->inv_freq = malloc(sizeof(float) * (size_t)(e->mc->rotary_dim / 2 + 1));
    if (!e->inv_freq) {
        rc = sy_err_set(err, SY_ERR_NOMEM, "cannot allocate the RoPE table");
        goto fail;
    }
    sy_rope_inv_freq(e->mc, e->inv_freq);
    e->rope = (sy_rope_params){.struct_size = sizeof(sy_rope_params),
                               .head_dim = e->mc->head_dim,
                               .rotary_dim = e->mc->rotary_dim,
                               .neox = 1,
                               .inv_freq = e->inv_freq,
                               .mscale = sy_rope_attention_factor(e->mc)};

    sy__graphs_init(e, cfg); /* before the step arrays: with graphs on they are the device's host memory */
    if ((rc = prepare_weights(e, err)) || (rc = sy__engine_alloc_activations(e, err)) ||
        (e->n_mtp && (rc = sy__mtp_open(e, err))))
        goto fail;
    /* Steps may run on another thread (serve), and a GPU plugin's work queued while loading (uploads, cache
     * clearing) is ordered only with that thread's later work: let it finish first. */
    if (e->dev->synchronize && (rc = e->dev->synchronize(e->device->inst, err)))
        goto fail;

    snprintf(e->describe, sizeof e->describe, "device=%s attention=%s moe=%s comm=%s%s", dd->name,
             e->attn->plugin->desc->name, e->moe ? e->moe->plugin->desc->name : "-", e->comm->plugin->desc->name,
             e->tp_size <= 1      ? ""
             : e->expert_parallel ? " (tensor parallel, expert parallel MoE)"
                                  : " (tensor parallel)");
    if (e->tp_size > 1)
        sy_info("tensor parallel rank %d of %d: %d of %d heads, %d of %d KV heads, vocab [%d, %d)", e->tp_rank,
                e->tp_size, e->attn_problem.n_heads, e->mc->n_heads, e->attn_problem.n_kv_heads, e->mc->n_kv_heads,
                e->vocab_start, e->vocab_start + e->vocab_local);
    if (e->expert_parallel)
        sy_info("expert parallel rank %d of %d: routed experts [%d, %d) of %d, whole", e->tp_rank, e->tp_size,
                e->ep_first, e->ep_first + e->ep_count, e->mc->n_experts);
    sy_info("model %s: %d layers, hidden %d, %d heads (%d KV), vocab %d, %.1fM parameters; %s; KV pool %d blocks x %d "
            "tokens",
            e->mc->arch_name, e->mc->n_layers, e->mc->hidden, e->mc->n_heads, e->mc->n_kv_heads, e->mc->vocab,
            (double)e->model->n_params / 1e6, e->describe, e->kv.n_blocks, e->kv.block_size);
    free(mk);
    free(sk);
    *out = e;
    return SY_OK;

fail:
    free(mk);
    free(sk);
    sy_engine_close(e);
    return rc;
}

void sy_engine_close(sy_engine *e)
{
    if (!e)
        return;
    sy__tp_shutdown(e); /* rank 0 releases the followers before its collectives go away */
    sy__graphs_free(e);
    sy__engine_free_activations(e);
    sy__mtp_close(e);
    sy__mla_close(e);
    release_weights(e);
    sy_kv_blocks_fini(&e->kv);
    if (e->comm)
        sy_plugin_inst_destroy(e->comm);
    if (e->moe)
        sy_plugin_inst_destroy(e->moe);
    if (e->attn)
        sy_plugin_inst_destroy(e->attn);
    /* The device last: the others may use its pool until they are gone. */
    sy_host_set_pool(&e->host, NULL, NULL, NULL);
    if (e->device)
        sy_plugin_inst_destroy(e->device);
    sy__tp_free_bufs(e); /* after the plugins that pointed into the copies */
    sy_plan_free(&e->plan);
    sy_model_free(e->model);
    sy_tokenizer_free(e->tok);
    free(e->inv_freq);
    free(e->sinks);
    sy_loader_free(e->loader);
    sy_host_fini(&e->host);
    free(e);
}

const sy_model_config *sy_engine_model_config(const sy_engine *e) { return e->mc; }
const sy_tokenizer *sy_engine_tokenizer(const sy_engine *e) { return e->tok; }
sy_kv_blocks *sy_engine_kv(sy_engine *e) { return &e->kv; }
int32_t sy_engine_max_seq_len(const sy_engine *e) { return e->max_seq_len; }
int32_t sy_engine_max_batch_tokens(const sy_engine *e) { return e->max_batch_tokens; }
int32_t sy_engine_max_seqs(const sy_engine *e) { return e->max_seqs; }
int32_t sy_engine_max_logit_rows(const sy_engine *e) { return e->max_sel; }
const char *sy_engine_describe(const sy_engine *e) { return e->describe; }

const char *sy_engine_plugin_path(const sy_engine *e, int kind)
{
    const sy_plugin_inst *pi = kind == SY_KIND_DEVICE ? e->device
                               : kind == SY_KIND_ATTN ? e->attn
                               : kind == SY_KIND_MOE  ? e->moe
                               : kind == SY_KIND_COMM ? e->comm
                                                      : NULL;
    return pi ? pi->plugin->path : NULL;
}
