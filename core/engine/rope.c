#include "config.h"

#include "engine/rope.h"

#include <math.h>

/* transformers' get_mscale. */
static double yarn_mscale(double factor, double mscale)
{
    return factor <= 1.0 ? 1.0 : 0.1 * mscale * log(factor) + 1.0;
}

/*
 * yarn (transformers' _compute_yarn_parameters): the dimensions whose
 * wavelength is short against the original context keep their frequency,
 * long ones are divided by factor, with a linear ramp between the
 * correction dimensions of beta_fast and beta_slow rotations (floored /
 * ceiled unless rope_truncate is false, as gpt-oss has it).
 */
static void yarn_inv_freq(const sy_model_config *c, float *inv_freq)
{
    const int dim = c->rotary_dim, half = dim / 2;
    const double base = c->rope_theta, f = c->rope_factor, orig = c->rope_original_max_pos;
    const double beta_fast = c->rope_beta_fast > 0 ? c->rope_beta_fast : 32.0;
    const double beta_slow = c->rope_beta_slow > 0 ? c->rope_beta_slow : 1.0;
    double lo = dim * log(orig / (beta_fast * 2.0 * M_PI)) / (2.0 * log(base));
    double hi = dim * log(orig / (beta_slow * 2.0 * M_PI)) / (2.0 * log(base));
    if (c->rope_truncate) {
        lo = floor(lo);
        hi = ceil(hi);
    }
    lo = lo < 0 ? 0 : lo;
    hi = hi > dim - 1 ? dim - 1 : hi;
    if (lo == hi)
        hi += 0.001;
    for (int i = 0; i < half; i++) {
        const double extra = 1.0 / pow(base, (2.0 * i) / dim), inter = extra / f;
        double ramp = (i - lo) / (hi - lo);
        ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
        const double keep = 1.0 - ramp; /* share of the unscaled frequency */
        inv_freq[i] = (float)(inter * (1.0 - keep) + extra * keep);
    }
}

float sy_rope_attention_factor(const sy_model_config *c)
{
    if (c->rope_scaling != SY_ROPE_SCALING_YARN)
        return 1.0f;
    if (c->rope_attention_factor > 0)
        return c->rope_attention_factor;
    const double f = c->rope_factor;
    if (c->rope_mscale > 0 && c->rope_mscale_all_dim > 0)
        return (float)(yarn_mscale(f, c->rope_mscale) / yarn_mscale(f, c->rope_mscale_all_dim));
    return (float)yarn_mscale(f, 1.0);
}

void sy_rope_inv_freq(const sy_model_config *c, float *inv_freq)
{
    const int half = c->rotary_dim / 2;
    if (c->rope_scaling == SY_ROPE_SCALING_YARN) {
        yarn_inv_freq(c, inv_freq);
        return;
    }
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
        case SY_ROPE_SCALING_YARN: /* above */
        default:
            break;
        }
        inv_freq[i] = (float)f;
    }
}
