/*
 * Expert selection for one token, in double: the choice of experts is
 * discrete, so a near-tie decided differently from a float64 reference
 * would change the output by a whole expert.
 *
 *   score   softmax(logits) or sigmoid(logits)
 *   select  score + bias (bias: e_score_correction_bias, selection only)
 *   groups  (n_group > 1) rank groups by the max of their select values
 *           (softmax, DeepSeek-V2) or the sum of their best two (sigmoid,
 *           DeepSeek-V3); keep topk_group groups
 *   top-k   over the kept experts by select, ties to the lower id
 *   weight  the unbiased score; divided by their sum if norm_topk_prob;
 *           times routed_scaling_factor
 */
#include "config.h"

#include <math.h>

#include "moe_cpu.h"
#include "sykquant.h"

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
        return sy_err_set(why, SY_ERR_UNSUPPORTED, "expert weights %s: moe cpu reads F32, F16, BF16, F8_E4M3 and NVFP4",
                          sy_dtype_name(p->weight_dtype));
    return SY_OK;
}

/* Index of the largest v[i] among allowed ones; strict > keeps the lowest index on ties. */
static int argmax(const double *v, const unsigned char *allowed, int n)
{
    int best = -1;
    for (int i = 0; i < n; i++) {
        if (!allowed[i])
            continue;
        /* best < 0: the first candidate, even if NaN, so a NaN input still selects (and poisons) an expert. */
        if (best < 0 || v[i] > v[best])
            best = i;
    }
    return best;
}

void sy__moe_route(const sy_moe_problem *p, const float *logits, const double *bias, int32_t *ids, float *wts)
{
    const int E = p->n_experts, K = p->top_k;
    double score[SY_MOE_CPU_MAX_EXPERTS], sel[SY_MOE_CPU_MAX_EXPERTS];
    unsigned char allowed[SY_MOE_CPU_MAX_EXPERTS];

    if (p->scoring == SY_MOE_SOFTMAX) {
        double mx = -INFINITY;
        for (int e = 0; e < E; e++)
            mx = (double)logits[e] > mx ? (double)logits[e] : mx;
        double sum = 0.0;
        for (int e = 0; e < E; e++) {
            score[e] = exp((double)logits[e] - mx);
            sum += score[e];
        }
        for (int e = 0; e < E; e++)
            score[e] /= sum;
    } else {
        for (int e = 0; e < E; e++)
            score[e] = 1.0 / (1.0 + exp(-(double)logits[e]));
    }
    for (int e = 0; e < E; e++) {
        sel[e] = bias ? score[e] + bias[e] : score[e];
        allowed[e] = 1;
    }

    if (p->n_group > 1) {
        const int G = p->n_group, per = E / G;
        double gscore[SY_MOE_CPU_MAX_EXPERTS];
        unsigned char gallowed[SY_MOE_CPU_MAX_EXPERTS], keep[SY_MOE_CPU_MAX_EXPERTS];
        for (int g = 0; g < G; g++) {
            const double *v = sel + g * per;
            if (p->scoring == SY_MOE_SIGMOID && per >= 2) {
                /* sum of the best two */
                int b1 = 0;
                for (int i = 1; i < per; i++)
                    b1 = v[i] > v[b1] ? i : b1;
                int b2 = b1 == 0 ? 1 : 0;
                for (int i = 0; i < per; i++)
                    if (i != b1 && v[i] > v[b2])
                        b2 = i;
                gscore[g] = v[b1] + v[b2];
            } else {
                double m = v[0];
                for (int i = 1; i < per; i++)
                    m = v[i] > m ? v[i] : m;
                gscore[g] = m;
            }
            gallowed[g] = 1;
            keep[g] = 0;
        }
        for (int r = 0; r < p->topk_group; r++) {
            const int g = argmax(gscore, gallowed, G);
            keep[g] = 1;
            gallowed[g] = 0;
        }
        for (int e = 0; e < E; e++)
            allowed[e] = keep[e / per];
    }

    double wsum = 0.0;
    double w[SY_MOE_CPU_MAX_EXPERTS];
    for (int k = 0; k < K; k++) {
        const int e = argmax(sel, allowed, E);
        allowed[e] = 0;
        ids[k] = e;
        w[k] = score[e];
        wsum += w[k];
    }
    const double scale = (double)p->routed_scaling_factor;
    for (int k = 0; k < K; k++) {
        double v = w[k];
        if (p->norm_topk_prob)
            v = v / (wsum + (p->scoring == SY_MOE_SIGMOID ? 1e-20 : 0.0));
        wts[k] = (float)(v * scale);
    }
}
