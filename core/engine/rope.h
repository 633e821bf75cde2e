/* RoPE frequency tables, computed once per model (the scaling rules live
 * here, so device plugins only rotate by the table they are given). */
#ifndef SY_ROPE_H
#define SY_ROPE_H

#include "model/model.h"

/* Fills inv_freq[rotary_dim / 2] for the model's theta and rope_scaling. */
void sy_rope_inv_freq(const sy_model_config *c, float *inv_freq);
/* What cos and sin are multiplied by (yarn's attention factor, else 1): sy_rope_params.mscale. */
float sy_rope_attention_factor(const sy_model_config *c);

#endif
