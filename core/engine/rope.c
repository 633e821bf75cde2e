#include "config.h"

#include "engine/rope.h"

#include <math.h>

void sy_rope_inv_freq(const sy_model_config *c, float *inv_freq)
{
    const int half = c->rotary_dim / 2;
    for (int i = 0; i < half; i++) {
        double f = 1.0 / pow((double)c->rope_theta, (2.0 * i) / (double)c->rotary_dim);
        switch (c->rope_scaling) {
        case SY_ROPE_SCALING_LINEAR:
            f /= c->rope_factor;
            break;
        case SY_ROPE_SCALING_LLAMA3: {
            /* Llama 3.1: long wavelengths are slowed by factor, short ones kept,
             * and the band between is blended (transformers' _compute_llama3_parameters). */
            const double old_ctx = c->rope_original_max_pos;
            const double low_wl = old_ctx / c->rope_low_freq_factor;
            const double high_wl = old_ctx / c->rope_high_freq_factor;
            const double wl = 2.0 * M_PI / f;
            if (wl > low_wl) {
                f /= c->rope_factor;
            } else if (wl >= high_wl) {
                double smooth = (old_ctx / wl - c->rope_low_freq_factor) /
                                (c->rope_high_freq_factor - c->rope_low_freq_factor);
                f = (1.0 - smooth) * f / c->rope_factor + smooth * f;
            }
            break;
        }
        case SY_ROPE_SCALING_NONE:
        default:
            break;
        }
        inv_freq[i] = (float)f;
    }
}
