/*
 * The host sampler's draw given its uniform, shared by the core's sampler
 * (core/engine/sampler.c) and the cpu device plugin's sample op, so that a
 * row sampled on either side gives the same id bit for bit. The rule is
 * the one plugin.h states for sy_device_ops.sample.
 */
#ifndef SY_SYKSAMPLE_H
#define SY_SYKSAMPLE_H

#include <math.h>
#include <stdint.h>

#include "switchyard/plugin.h"
#include "sykargmax.h"

/* argmax's rule: the lowest index of the largest value; a NaN at index 0 is picked, other NaNs never are. */
static inline int32_t syk_greedy_row(const float *x, int32_t n)
{
    if (n <= 1 || x[0] != x[0])
        return 0;
    return (int32_t)syk_first_max(x, n); /* x[0] is a number, so there is a largest one */
}

/* Sorts idx[0..n) by prob descending, ties by id ascending. */
static inline void syk_sort_desc(int32_t *idx, const float *prob, int32_t n)
{
    /* Shell sort: no comparator context is needed (qsort has none in C11). */
    static const int32_t gaps[] = {701, 301, 132, 57, 23, 10, 4, 1};
    for (size_t g = 0; g < sizeof gaps / sizeof gaps[0]; g++) {
        const int32_t gap = gaps[g];
        for (int32_t i = gap; i < n; i++) {
            const int32_t v = idx[i];
            int32_t j = i;
            while (j >= gap && (prob[idx[j - gap]] < prob[v] || (prob[idx[j - gap]] == prob[v] && idx[j - gap] > v))) {
                idx[j] = idx[j - gap];
                j -= gap;
            }
            idx[j] = v;
        }
    }
}

/*
 * The distribution a draw at temperature > 0 is made from: the tokens kept
 * by min_p, top_k and top_p are idx[0..n) (highest first when top_k or top_p
 * sorted them, else by id), each with weight prob[idx[i]] (renormalise by
 * their sum); 0 only with NaN or infinite logits (then the draw is the
 * greedy pick). prob and idx are V-element scratch. Speculative decoding's
 * rejection rule (core/engine/sampler.c) reads the same distribution.
 */
static inline int32_t syk_sample_filter(const float *logits, int32_t V, const sy_sample_row *p, float *prob,
                                        int32_t *idx)
{
    /* Softmax at temperature T over all tokens. */
    const float mx = logits[syk_greedy_row(logits, V)];
    double sum = 0.0;
    const float inv_t = 1.0f / p->temperature;
    for (int32_t i = 0; i < V; i++) {
        prob[i] = expf((logits[i] - mx) * inv_t);
        sum += prob[i];
    }
    const float inv_sum = (float)(1.0 / sum);
    /* min_p: keep tokens with p >= min_p * p_max (p_max = 1/sum after scaling). */
    const float keep_min = p->min_p * inv_sum;
    int32_t n = 0;
    for (int32_t i = 0; i < V; i++) {
        prob[i] *= inv_sum;
        if (prob[i] >= keep_min && prob[i] > 0.0f)
            idx[n++] = i;
    }
    if (n == 0) /* only with NaN or infinite logits */
        return 0;

    const int need_sort = (p->top_k > 0 && p->top_k < n) || p->top_p < 1.0f;
    if (need_sort) {
        /* Only the top of the distribution matters: pre-filter to tokens above a
         * tiny threshold so the sort stays cheap on large vocabularies. */
        if (n > 1024) {
            /* Counted before compacting: a filter that would leave fewer than
             * top_k is not applied, and idx must then still hold every one. */
            int32_t m = 0;
            for (int32_t i = 0; i < n; i++)
                m += prob[idx[i]] >= 1e-6f;
            if (m > 0 && (p->top_k == 0 || m >= p->top_k)) {
                m = 0;
                for (int32_t i = 0; i < n; i++)
                    if (prob[idx[i]] >= 1e-6f)
                        idx[m++] = idx[i];
                n = m;
            }
        }
        syk_sort_desc(idx, prob, n);
        if (p->top_k > 0 && p->top_k < n)
            n = p->top_k;
        if (p->top_p < 1.0f) {
            double c = 0.0;
            int32_t cut = n;
            for (int32_t i = 0; i < n; i++) {
                c += prob[idx[i]];
                if (c >= p->top_p) {
                    cut = i + 1;
                    break;
                }
            }
            n = cut;
        }
    }
    return n;
}

/*
 * The id drawn from logits[0..V) with the row's parameters and uniform u;
 * prob and idx are V-element scratch. Temperature <= 0 is the greedy pick.
 */
static inline int32_t syk_sample_pick(const float *logits, int32_t V, const sy_sample_row *p, float *prob,
                                      int32_t *idx)
{
    if (p->temperature <= 0.0f)
        return syk_greedy_row(logits, V);
    const int32_t n = syk_sample_filter(logits, V, p, prob, idx);
    if (n == 0) /* only with NaN or infinite logits */
        return syk_greedy_row(logits, V);
    double total = 0.0;
    for (int32_t i = 0; i < n; i++)
        total += prob[idx[i]];
    const double r = p->u * total;
    double acc = 0.0;
    for (int32_t i = 0; i < n; i++) {
        acc += prob[idx[i]];
        if (r < acc)
            return idx[i];
    }
    return idx[n - 1];
}

#endif
