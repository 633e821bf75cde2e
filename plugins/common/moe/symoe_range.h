/*
 * set_expert_range's checks (plugin.h), the same for every moe plugin that
 * can hold a subset of the experts: after prepare, a range inside
 * [0, n_experts), and before any layer has its experts (prepare_layer then
 * gets the range's views).
 */
#ifndef SY_SYMOE_RANGE_H
#define SY_SYMOE_RANGE_H

#include "switchyard/plugin.h"

/* loaded_layer: a layer that already has its experts, or -1. */
static inline int symoe_check_range(const char *plugin, int prepared, const sy_moe_problem *p, int32_t first,
                                    int32_t count, int32_t loaded_layer, sy_err *err)
{
    if (!prepared)
        return sy_err_set(err, SY_ERR_INVALID, "moe %s: set_expert_range before prepare", plugin);
    if (first < 0 || count < 1 || (int64_t)first + count > p->n_experts)
        return sy_err_set(err, SY_ERR_INVALID, "moe set_expert_range: experts [%d, %lld) are not inside [0, %d)", first,
                          (long long)first + count, p->n_experts);
    if (loaded_layer >= 0)
        return sy_err_set(err, SY_ERR_INVALID,
                          "moe set_expert_range: layer %d already has its experts; set the range before prepare_layer",
                          loaded_layer);
    return SY_OK;
}

#endif
