/* The engine's private state, shared by its set-up and forward files. */
#ifndef SY_ENGINE_INTERNAL_H
#define SY_ENGINE_INTERNAL_H

#include "dist/plan.h"
#include "engine/engine.h"
#include "engine/graphs.h"
#include "plugin/host.h"
#include "plugin/loader.h"

struct sy_engine {
    sy_host_ctx host;
    sy_loader *loader;

    sy_plugin_inst *device, *attn, *moe, *comm;
    const sy_device_ops *dev;
    const sy_attn_ops *att;
    const sy_moe_ops *mo;
    const sy_comm_ops *com;
    /* The device has the optional linear_multi op and SY_ENGINE_FUSE is not "0"
     * (forcing separate calls for A/B timing or bisecting a device). */
    bool linear_multi;
    /* The device has the optional argmax op and [scheduler] device_sampling
     * is not off: greedy rows are picked on the device (forward.c). */
    bool dev_argmax;
    /* The device has the optional sample op and device_sampling is not off: sampled rows (sy_step_seq.sample)
     * are drawn on the device (forward.c). */
    bool dev_sample;
    /* Tensor parallelism: greedy rows travel as (value, id) pairs whichever way each rank picks its slice (its
     * device's argmax, or on the host without it or with device_sampling = off), so every rank runs the same
     * collective even when their configs or devices differ; false past 2^24 tokens (F32 ids), where every
     * rank gathers the logits. */
    bool tp_pick_pairs;
    uint64_t device_picks; /* rows picked so: what sy_engine_device_picks reports */
    uint64_t device_samples; /* sampled rows the device drew: sy_engine_device_samples */
    char describe[256];

    sy_model *model;
    sy_tokenizer *tok;
    const sy_model_config *mc;

    /* Weights as the device prepared them (experts went to the moe plugin). */
    sy_tensor embed, final_norm, lm_head;
    sy_layer_weights *layers;
    bool lm_head_is_embed;

    float *inv_freq;
    sy_rope_params rope;
    sy_attn_problem attn_problem;
    float *sinks; /* gpt-oss: attn_problem.sinks, this rank's heads [n_layers * n_heads / tp] */
    sy_kv_blocks kv;

    int32_t max_batch_tokens, max_seqs, max_seq_len, max_blocks_per_seq;
    int32_t max_sel; /* logits rows per step: max_seqs, more with [speculative] (verify rows, sy_step_seq.n_logits) */
    char chat_template[4096]; /* [model] chat_template: a template file overriding the model's */
    char tool_parser[64];     /* [model] tool_parser: the tool-call family; empty: from the template */

    /* Activations in device memory, sized for max_batch_tokens rows. */
    sy_tensor h, xn, q, k, v, att_out, proj, gate, up, router, sel, logits;
    /* Host-side step description. */
    int32_t *ids, *pos, *tok_start, *ctx_len, *block_table, *sel_rows;
    /* Greedy rows of a step: where each pick goes, the picks and their values ([max_seqs]). */
    int32_t **greedy_dst, *pick_ids;
    float *pick_vals;
    /* Sampled rows of a step ([max_seqs], then greedy ones as temperature 0 for one sample call) and the host
     * draw's scratch ([vocab] each) for rows the device leaves to the host. */
    sy_sample_row *sample_rows;
    float *sample_prob;
    int32_t *sample_idx;
    /* Recorded decode steps, [device] graphs (graphs.c). */
    sy_graphs graphs;
    /* Shared experts' output [T, H] (DeepSeek-V3, GLM); multi-head latent attention state (forward_mla.c). */
    sy_tensor sh_out;
    struct sy_mla *mla;

    /* [speculative] method = mtp (forward_mtp.c): the checkpoint's first MTP layer, prepared like a decoder
     * layer at index n_layers of e->layers, the attention / latent cache and the moe plugin (n_kv_layers =
     * n_layers + 1), writing its K/V into the target's blocks at the same positions. n_mtp 0: off. */
    int32_t n_mtp, n_kv_layers;
    struct sy_mtp_state *mtp;
    /* With n_mtp: the last target step's final-normed hidden rows [T, H] (the lm_head's input), and T. */
    sy_tensor mtp_hid;
    int32_t mtp_hid_rows;

    /* Tensor parallelism (tp_shard.c, tp_step.c); tp_size 1: none. Heads,
     * KV heads and the MLP widths of this rank are in attn_problem and the
     * weights' shapes; the vocabulary slice is [vocab_start, +vocab_local). */
    int tp_rank, tp_size;
    int32_t vocab_local, vocab_start;
    /* [model] moe_parallel = expert with more than one rank: this rank holds the routed experts
     * [ep_first, ep_first + ep_count) whole (tp_shard.c) instead of a slice of each. */
    bool expert_parallel;
    int32_t ep_first, ep_count;
    int32_t *ids_local;       /* ids mapped into the embedding slice (vocab_local: the zero row) */
    sy_tensor gathered;       /* [tp_size * max_seqs, vocab_local]: every rank's logits */
    float *gathered_host;
    sy_tensor picks, picks_gathered; /* [max_seqs, 2], [tp_size * max_seqs, 2]: each rank's (value, global id) */
    float *picks_host;               /* [tp_size * max_seqs * 2] */
    void **tp_bufs;           /* weight copies the prepared weights and the moe plugin point into */
    size_t n_tp_bufs, cap_tp_bufs;
    sy_plan_chan chan;
    sy_plan plan;
    bool tp_broken;           /* a collective or the plan channel failed: the group is gone */
    char tp_broken_msg[512];
    double heartbeat_s, last_plan_s;
};

/* Resolves [section] plugin (dflt when unset) for the device and creates the instance. */
int sy__engine_open_plugin(struct sy_engine *e, const sy_config *cfg, const char *section, sy_plugin_kind kind,
                           const char *dflt, const char *device, sy_plugin_inst **out, sy_err *err);
/*
 * Opens [comm] and joins the tensor-parallel group (dist NULL or a world of
 * one: a group of one), then sets this rank's share; group.c.
 */
int sy__engine_join_group(struct sy_engine *e, const sy_config *cfg, const sy_engine_dist *dist, const char *device,
                          sy_err *err);
/* forward.c */
int sy__engine_alloc_activations(struct sy_engine *e, sy_err *err);
void sy__engine_free_activations(struct sy_engine *e);
/* The step itself on this rank (sy_engine_step in tp_step.c sends the plan first). */
int sy__engine_forward(struct sy_engine *e, const sy_step_seq *seqs, int32_t n_seqs, float *logits, sy_err *err);

/* The step's body, embed through the lm_head linear into e->logits (n_sel rows; none when n_sel is 0): what
 * a recording holds. */
int sy__engine_forward_body(struct sy_engine *e, const sy_attn_batch *b, int32_t T, int32_t n_sel, sy_err *err);

/* graphs.c: [device] graphs. init after the plugins open, before the step arrays are allocated. */
void sy__graphs_init(struct sy_engine *e, const sy_config *cfg);
void sy__graphs_free(struct sy_engine *e);
/* The body of an eligible decode step replayed from a recording, else op by op. */
int sy__graphs_step(struct sy_engine *e, const sy_attn_batch *b, int32_t T, int32_t n_sel, sy_err *err);
/* The step's host arrays: the device's host_alloc with graphs on (a replay reads them), else malloc. */
void *sy__engine_step_alloc(struct sy_engine *e, size_t bytes);
void sy__engine_step_free(struct sy_engine *e, void *p);

/* One decoder block of layer l (n_layers: the MTP layer) over xn = attn_norm(h): attention, h += it,
 * xn = ffn_norm(h), proj = the MLP of xn (summed over ranks). h then needs proj added (the next layer's
 * add_rmsnorm does it). forward.c */
int sy__engine_block(struct sy_engine *e, int32_t l, const sy_attn_batch *b, int32_t T, sy_tensor *h, sy_tensor *xn,
                     sy_tensor *proj, sy_err *err);
/* The host views of layer l's weights as the checkpoint holds them (l == n_layers: the MTP layer's block). */
const sy_layer_weights *sy__engine_host_layer(const struct sy_engine *e, int32_t l);

/* forward_mtp.c: the MTP layer's prepared weights and activations */
int sy__mtp_open(struct sy_engine *e, sy_err *err);
void sy__mtp_close(struct sy_engine *e);
/* This rank's share of sy_engine_mtp_step (tp_step.c sends the plan first); only rank 0 writes the outputs. */
int sy__engine_mtp_forward(struct sy_engine *e, const sy_mtp_seq *seqs, int32_t n_seqs, sy_err *err);

/* forward.c, for the MTP head under tensor parallelism: h [T, H] = the vocab-parallel lookup of e->ids in table
 * (a slice with its zero row, tp_shard.c), summed over ranks; every rank's [n, V/tp] logits gathered into out
 * [n, V] (NULL on followers); the greedy picks of rows [first, n_sel) merged over ranks into *e->greedy_dst[]
 * (rank 0). */
int sy__embed_tp(struct sy_engine *e, const sy_tensor *table, int32_t T, sy_tensor *h, sy_err *err);
int sy__gather_logits(struct sy_engine *e, const sy_tensor *logits, int32_t n, float *out, sy_err *err);
int sy__pick_tp(struct sy_engine *e, const sy_tensor *logits, int32_t n_sel, int32_t first, sy_err *err);

/* forward_mla.c: the latent KV cache and pool instead of the attention plugin's (MLA models) */
int sy__mla_open(struct sy_engine *e, const sy_kv *sk, size_t nsk, sy_err *err);
void sy__mla_close(struct sy_engine *e);
/* Copy-on-write of whole blocks of the latent (and indexer key) cache. */
int sy__mla_copy_blocks(struct sy_engine *e, const int32_t *src, const int32_t *dst, int32_t n, sy_err *err);
/* proj [T, H] = o_proj(MLA attention of xn [T, H]) for one layer, caching the step's latents. */
int sy__mla_attention(struct sy_engine *e, int32_t layer, const sy_attn_batch *b, int32_t T, const sy_tensor *xn,
                      sy_tensor *proj, sy_err *err);

/* tp_shard.c */
int sy__tp_shard_vocab(struct sy_engine *e, sy_tensor *embed, sy_tensor *lm_head, sy_err *err);
/* This rank's vocabulary rows of an embedding table with the zero row after them, and of an output head. */
int sy__tp_vocab_embed(struct sy_engine *e, const sy_tensor *src, const char *name, sy_tensor *out, sy_err *err);
int sy__tp_vocab_head(struct sy_engine *e, const sy_tensor *src, const char *name, sy_tensor *out, sy_err *err);
int sy__tp_shard_layer(struct sy_engine *e, int32_t layer, const sy_layer_weights *src, sy_layer_weights *dst,
                       sy_err *err);
void sy__tp_free_bufs(struct sy_engine *e);

/* tp_step.c */
void sy__tp_shutdown(struct sy_engine *e);

#endif
