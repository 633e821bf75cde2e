/*
 * Expert selection for one token, in double, written once for host C
 * (moe/cpu's sy__moe_route runs it) and the GPU (moe/cuda's k_route, one
 * thread per token): the choice of experts is discrete, so a near-tie
 * decided differently from a float64 reference, or between the plugins,
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
 *
 * The scratch is the caller's (global memory on the GPU: a per-thread array
 * of n_experts doubles would make the runtime reserve it for every resident
 * thread). No a * b + c appears, so no FMA contraction can change a bit;
 * the one function that can differ between host and device is exp (glibc's
 * and CUDA's are both within 1 ulp), which only matters for two scores
 * within 1 ulp of each other that are not equal.
 */
#ifndef SY_SYMOE_ROUTE_H
#define SY_SYMOE_ROUTE_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define SYR_FN static __host__ __device__ __forceinline__
#else
#define SYR_FN static inline
#endif

/* The routing fields of sy_moe_problem, without plugin.h (the kernels do not include it). */
typedef struct symr_params {
    int32_t n_experts, top_k;
    int32_t sigmoid; /* 0 softmax, 1 sigmoid (sy_moe_scoring) */
    int32_t n_group, topk_group;
    int32_t norm_topk_prob;
    float routed_scaling_factor;
} symr_params;

/* Scratch of one token: score and sel [n_experts], allowed [n_experts], gscore [n_group], gflag [2 n_group]. */
typedef struct symr_scratch {
    double *score, *sel, *gscore;
    unsigned char *allowed, *gflag;
} symr_scratch;

/* Index of the largest v[i] among allowed ones; strict > keeps the lowest index; the first candidate even if NaN. */
SYR_FN int symr_argmax(const double *v, const unsigned char *allowed, int n)
{
    int best = -1;
    for (int i = 0; i < n; i++) {
        if (!allowed[i])
            continue;
        if (best < 0 || v[i] > v[best])
            best = i;
    }
    return best;
}

/* ids[0..top_k) and wts[0..top_k) of one token from its n_experts logits; bias [n_experts] or NULL. */
SYR_FN void symr_route(const symr_params *p, const float *logits, const double *bias, const symr_scratch *s,
                       int32_t *ids, float *wts)
{
    const int E = p->n_experts, K = p->top_k;
    double *score = s->score, *sel = s->sel;
    unsigned char *allowed = s->allowed;
    if (!p->sigmoid) {
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
        double *gscore = s->gscore;
        unsigned char *gallowed = s->gflag, *keep = s->gflag + G;
        for (int g = 0; g < G; g++) {
            const double *v = sel + g * per;
            if (p->sigmoid && per >= 2) {
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
            const int g = symr_argmax(gscore, gallowed, G);
            keep[g] = 1;
            gallowed[g] = 0;
        }
        for (int e = 0; e < E; e++)
            allowed[e] = keep[e / per];
    }

    double wsum = 0.0;
    for (int k = 0; k < K; k++) {
        const int e = symr_argmax(sel, allowed, E);
        allowed[e] = 0;
        ids[k] = e;
        wsum += score[e];
    }
    const double scale = (double)p->routed_scaling_factor;
    for (int k = 0; k < K; k++) {
        double v = score[ids[k]];
        if (p->norm_topk_prob)
            v = v / (wsum + (p->sigmoid ? 1e-20 : 0.0));
        wts[k] = (float)(v * scale);
    }
}

#endif
