/* The engine's private state, shared by its set-up and forward files. */
#ifndef SY_ENGINE_INTERNAL_H
#define SY_ENGINE_INTERNAL_H

#include "engine/engine.h"
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
    sy_kv_blocks kv;

    int32_t max_batch_tokens, max_seqs, max_seq_len, max_blocks_per_seq;
    char chat_template[4096]; /* [model] chat_template: a template file overriding the model's */

    /* Activations in device memory, sized for max_batch_tokens rows. */
    sy_tensor h, xn, q, k, v, att_out, proj, gate, up, router, sel, logits;
    /* Host-side step description. */
    int32_t *ids, *pos, *tok_start, *ctx_len, *block_table, *sel_rows;
};

/* forward.c */
int sy__engine_alloc_activations(struct sy_engine *e, sy_err *err);
void sy__engine_free_activations(struct sy_engine *e);

#endif
