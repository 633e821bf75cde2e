/*
 * The moe problem's checks and expert selection for one token: the
 * selection itself is plugins/common/moe/symoe_route.h, which moe/cuda's
 * routing kernel runs too, so both plugins pick the same experts.
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include "moe_cpu.h"
#include "sykquant.h"
#include "symoe_route.h"

int sy__moe_check_problem(const sy_moe_problem *p, sy_err *why)
{
    if (!p || p->struct_size < offsetof(sy_moe_problem, weight_dtype) + sizeof p->weight_dtype)
        return sy_err_set(why, SY_ERR_INVALID, "moe problem missing or too old (struct_size %u)", p ? p->struct_size : 0u);
    if (p->n_layers <= 0 || p->n_experts <= 0 || p->hidden <= 0 || p->inter <= 0)
        return sy_err_set(why, SY_ERR_INVALID, "moe problem: n_layers %d, n_experts %d, hidden %d, inter %d must be > 0",
                          p->n_layers, p->n_experts, p->hidden, p->inter);
    if (p->n_experts > SY_MOE_CPU_MAX_EXPERTS)
        return sy_err_set(why, SY_ERR_UNSUPPORTED, "n_experts %d: moe cpu routes up to %d", p->n_experts,
                          SY_MOE_CPU_MAX_EXPERTS);
    if (p->top_k <= 0 || p->top_k > p->n_experts)
        return sy_err_set(why, SY_ERR_INVALID, "top_k %d: expected 1..n_experts (%d)", p->top_k, p->n_experts);
    if (p->scoring != SY_MOE_SOFTMAX && p->scoring != SY_MOE_SIGMOID)
        return sy_err_set(why, SY_ERR_UNSUPPORTED, "scoring %d: moe cpu knows softmax (0) and sigmoid (1)", p->scoring);
    if (!(p->routed_scaling_factor > 0.0f) || isinf(p->routed_scaling_factor))
        return sy_err_set(why, SY_ERR_INVALID, "routed_scaling_factor %g: expected a finite value > 0 (1 when unused)",
                          (double)p->routed_scaling_factor);
    if (p->n_group > 1) {
        if (p->n_experts % p->n_group)
            return sy_err_set(why, SY_ERR_INVALID, "n_group %d does not divide n_experts %d", p->n_group,
                              p->n_experts);
        if (p->topk_group < 1 || p->topk_group > p->n_group)
            return sy_err_set(why, SY_ERR_INVALID, "topk_group %d: expected 1..n_group (%d)", p->topk_group,
                              p->n_group);
        if ((int64_t)p->topk_group * (p->n_experts / p->n_group) < p->top_k)
            return sy_err_set(why, SY_ERR_INVALID, "top_k %d is more than the %d experts of topk_group %d groups",
                              p->top_k, p->topk_group * (p->n_experts / p->n_group), p->topk_group);
    } else if (p->n_group < 0) {
        return sy_err_set(why, SY_ERR_INVALID, "n_group %d: expected 0 or 1 (none) or a group count", p->n_group);
    }
    if (!syk_wdtype_ok(p->weight_dtype) && !syk_wdtype_quant(p->weight_dtype))
        return sy_err_set(why, SY_ERR_UNSUPPORTED,
                          "expert weights %s: moe cpu reads F32, F16, BF16, F8_E4M3, NVFP4 and MXFP4",
                          sy_dtype_name(p->weight_dtype));
    sy_moe_problem q;
    sy__moe_problem_copy(&q, p);
    if (q.activation != SY_MOE_ACT_SILU && q.activation != SY_MOE_ACT_SWIGLU_CLAMP)
        return sy_err_set(why, SY_ERR_UNSUPPORTED, "activation %d: moe cpu knows silu (%d) and gpt-oss's clamped "
                          "swiglu (%d)", q.activation, SY_MOE_ACT_SILU, SY_MOE_ACT_SWIGLU_CLAMP);
    if (q.activation == SY_MOE_ACT_SWIGLU_CLAMP &&
        (!(q.swiglu_alpha > 0.0f) || isinf(q.swiglu_alpha) || !(q.swiglu_limit > 0.0f) || isinf(q.swiglu_limit)))
        return sy_err_set(why, SY_ERR_INVALID, "swiglu_alpha %g, swiglu_limit %g: expected finite values > 0 "
                          "(gpt-oss: 1.702 and 7)", (double)q.swiglu_alpha, (double)q.swiglu_limit);
    if (q.has_bias != 0 && q.has_bias != 1)
        return sy_err_set(why, SY_ERR_INVALID, "has_bias %d: expected 0 or 1", q.has_bias);
    return SY_OK;
}

void sy__moe_problem_copy(sy_moe_problem *dst, const sy_moe_problem *src)
{
    memset(dst, 0, sizeof *dst);
    const size_t n = src->struct_size < sizeof *dst ? src->struct_size : sizeof *dst;
    memcpy(dst, src, n);
    dst->struct_size = (uint32_t)sizeof *dst;
}

void sy__moe_route(const sy_moe_problem *p, const float *logits, const double *bias, int32_t *ids, float *wts)
{
    double score[SY_MOE_CPU_MAX_EXPERTS], sel[SY_MOE_CPU_MAX_EXPERTS], gscore[SY_MOE_CPU_MAX_EXPERTS];
    unsigned char allowed[SY_MOE_CPU_MAX_EXPERTS], gflag[2 * SY_MOE_CPU_MAX_EXPERTS];
    const symr_params rp = {p->n_experts, p->top_k, p->scoring == SY_MOE_SIGMOID, p->n_group, p->topk_group,
                            p->norm_topk_prob, p->routed_scaling_factor};
    const symr_scratch s = {score, sel, gscore, allowed, gflag};
    symr_route(&rp, logits, bias, &s, ids, wts);
}
