/*
 * prepare_layer_bias's checks and gathering (plugin.h), the same for every
 * moe plugin: the instance's experts' gate, up and (optional) down biases
 * as one F32 host buffer, [gate: count x inter][up: count x inter]
 * [down: count x hidden], which a plugin keeps or uploads.
 */
#ifndef SY_SYMOE_BIAS_H
#define SY_SYMOE_BIAS_H

#include "switchyard/plugin.h"
#include "sykern.h"

#include <stdlib.h>

/* loaded: the layer has its experts (prepare_layer ran). *out (malloc'd, the caller frees) holds *n floats. */
static inline int symoe_gather_biases(const char *plugin, int prepared, const sy_moe_problem *p, int32_t layer,
                                      int loaded, int32_t first, int32_t count, const sy_tensor *gate,
                                      const sy_tensor *up, const sy_tensor *down, float **out, size_t *n, sy_err *err)
{
    *out = NULL;
    *n = 0;
    if (!prepared)
        return sy_err_set(err, SY_ERR_INVALID, "moe %s: prepare_layer_bias before prepare", plugin);
    if (layer < 0 || layer >= p->n_layers || !loaded)
        return sy_err_set(err, SY_ERR_INVALID, "moe prepare_layer_bias: layer %d has no experts (prepare_layer "
                          "first; layers [0, %d))", layer, p->n_layers);
    if (!p->has_bias)
        return sy_err_set(err, SY_ERR_INVALID, "moe prepare_layer_bias: the problem's has_bias is 0");
    if (!gate || !up)
        return sy_err_set(err, SY_ERR_INVALID, "moe prepare_layer_bias: gate_bias and up_bias arrays are required "
                          "(down_bias may be NULL)");
    const int64_t F = p->inter, H = p->hidden;
    const size_t total = (size_t)count * (size_t)(2 * F + (down ? H : 0));
    float *b = malloc(sizeof(float) * total);
    if (!b)
        return sy_err_set(err, SY_ERR_NOMEM, "moe prepare_layer_bias: cannot allocate %d experts' biases", count);
    static const char *const what[3] = {"gate", "up", "down"};
    for (int32_t e = 0; e < count; e++) {
        const sy_tensor *t[3] = {&gate[e], &up[e], down ? &down[e] : NULL};
        const int64_t len[3] = {F, F, H};
        float *dst[3] = {b + (size_t)e * F, b + (size_t)(count + e) * F, b + (size_t)2 * count * F + (size_t)e * H};
        for (int i = 0; i < 3 && t[i]; i++) {
            const sy_tensor *x = t[i];
            if ((x->dtype != SY_DTYPE_F32 && x->dtype != SY_DTYPE_F16 && x->dtype != SY_DTYPE_BF16) || !x->data ||
                sy_tensor_numel(x) != len[i] || (x->ndim > 0 && x->stride[x->ndim - 1] != 1)) {
                free(b);
                return sy_err_set(err, SY_ERR_INVALID, "moe prepare_layer_bias: expert %d %s bias must be [%lld] "
                                  "F32/F16/BF16, found %s with %lld elements", first + e, what[i], (long long)len[i],
                                  sy_dtype_name(x->dtype), (long long)sy_tensor_numel(x));
            }
            syk_row_to_f32(dst[i], x->data, x->dtype, len[i]);
        }
    }
    *out = b;
    *n = total;
    return SY_OK;
}

#endif
