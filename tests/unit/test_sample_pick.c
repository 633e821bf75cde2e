/*
 * The shared draw (syk_sample_pick via sy_sample_pick and sy_sampler_next)
 * against the host sampler as it was before it was split into "draw u" and
 * "pick given u": that code is copied below as the oracle, its one uniform
 * made a parameter. Random rows of many vocabulary sizes (past the 1024
 * prefilter bound too), logits on a coarse grid so that exact ties decide
 * the sort's tie-break, rows whose probabilities are exact dyadic values so
 * that top_p lands exactly on a cumulative sum (the cut's >=), and random
 * temperature, top_k, top_p and min_p. Also: sy_sampler_next draws one
 * uniform per token, the same one sy_sampler_row would hand the device; and
 * the prefilter no longer loses candidates when it is not applied (the old
 * code compacted in place first: a bug this file's last case shows).
 */
#include "config.h"

#include "engine/sampler.h"
#include "test_check.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* ---- the oracle: core/engine/sampler.c's sy_sampler_next before the split, u a parameter */

static void old_sort_desc(int32_t *idx, const float *prob, int32_t n)
{
    static const int32_t gaps[] = {701, 301, 132, 57, 23, 10, 4, 1};
    for (size_t g = 0; g < sizeof gaps / sizeof gaps[0]; g++) {
        int32_t gap = gaps[g];
        for (int32_t i = gap; i < n; i++) {
            int32_t v = idx[i];
            int32_t j = i;
            while (j >= gap && (prob[idx[j - gap]] < prob[v] || (prob[idx[j - gap]] == prob[v] && idx[j - gap] > v))) {
                idx[j] = idx[j - gap];
                j -= gap;
            }
            idx[j] = v;
        }
    }
}

/* *lossy: the old prefilter compacted idx and then kept n (its bug); the fixed code differs there. */
static int32_t old_next(const sy_sampling *p, int32_t V, const float *logits, double u, float *prob, int32_t *idx,
                        bool *lossy)
{
    *lossy = false;
    if (p->temperature <= 0.0f)
        return sy_greedy_pick(logits, V);
    float mx = logits[sy_greedy_pick(logits, V)];
    double sum = 0.0;
    const float inv_t = 1.0f / p->temperature;
    for (int32_t i = 0; i < V; i++) {
        prob[i] = expf((logits[i] - mx) * inv_t);
        sum += prob[i];
    }
    const float inv_sum = (float)(1.0 / sum);
    const float keep_min = p->min_p * inv_sum;
    int32_t n = 0;
    for (int32_t i = 0; i < V; i++) {
        prob[i] *= inv_sum;
        if (prob[i] >= keep_min && prob[i] > 0.0f)
            idx[n++] = i;
    }
    if (n == 0)
        return sy_greedy_pick(logits, V);
    const int need_sort = (p->top_k > 0 && p->top_k < n) || p->top_p < 1.0f;
    if (need_sort) {
        if (n > 1024) {
            int32_t m = 0;
            for (int32_t i = 0; i < n; i++)
                if (prob[idx[i]] >= 1e-6f)
                    idx[m++] = idx[i];
            if (m > 0 && (p->top_k == 0 || m >= p->top_k))
                n = m;
            else
                *lossy = m > 0 && m < n;
        }
        old_sort_desc(idx, prob, n);
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
    double total = 0.0;
    for (int32_t i = 0; i < n; i++)
        total += prob[idx[i]];
    double r = u * total;
    double acc = 0.0;
    for (int32_t i = 0; i < n; i++) {
        acc += prob[idx[i]];
        if (r < acc)
            return idx[i];
    }
    return idx[n - 1];
}

/* ---- random rows */

static uint64_t rng_state = 0x5eed5a3b1e5ull;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}
static double unif(void) { return (double)(rnd() >> 11) * 0x1.0p-53; }

/* kind 0: Gaussian-ish logits on a 1/4 grid (many exact ties); 1: k equal logits, the rest -inf (dyadic p). */
static void fill_row(float *x, int32_t V, int kind, int32_t k)
{
    if (kind == 1) {
        for (int32_t i = 0; i < V; i++)
            x[i] = -INFINITY;
        for (int32_t j = 0; j < k && j < V; j++)
            x[(int32_t)(rnd() % (uint64_t)V)] = 1.5f;
        return;
    }
    const double scale = 1.0 + 6.0 * unif();
    for (int32_t i = 0; i < V; i++) {
        const double g = unif() + unif() + unif() - 1.5; /* roughly normal */
        x[i] = (float)(floor(g * scale * 4.0) / 4.0);
    }
}

static sy_sampling random_params(int32_t V)
{
    static const float temps[] = {0.0f, 0.3f, 0.7f, 1.0f, 1.3f, 2.0f};
    static const float top_ps[] = {1.0f, 1.0f, 0.25f, 0.5f, 0.75f, 0.9f, 0.95f};
    static const float min_ps[] = {0.0f, 0.0f, 0.02f, 0.1f, 0.5f};
    static const int32_t top_ks[] = {0, 0, 1, 2, 5, 50, 1500, 5000};
    sy_sampling p = sy_sampling_default();
    p.temperature = temps[rnd() % 6];
    p.top_p = top_ps[rnd() % 7];
    p.min_p = min_ps[rnd() % 5];
    p.top_k = top_ks[rnd() % 8];
    if (p.top_k > V)
        p.top_k = V;
    return p;
}

int main(void)
{
    static const int32_t vocabs[] = {1, 2, 3, 7, 64, 500, 1024, 1025, 1100, 3000, 20000};
    const int32_t VMAX = 20000;
    float *x = malloc(sizeof(float) * VMAX), *prob = malloc(sizeof(float) * VMAX);
    float *prob2 = malloc(sizeof(float) * VMAX);
    int32_t *idx = malloc(sizeof(int32_t) * VMAX), *idx2 = malloc(sizeof(int32_t) * VMAX);
    CHECK(x && prob && prob2 && idx && idx2);
    int compared = 0, lossy_rows = 0, sampled_rows = 0, mismatches = 0;
    for (int it = 0; it < 6000; it++) {
        const int32_t V = vocabs[rnd() % (sizeof vocabs / sizeof vocabs[0])];
        const int kind = V >= 4 && rnd() % 3 == 0;
        fill_row(x, V, kind, 2 + (int32_t)(rnd() % 3) * 2 - 2 * (rnd() % 2)); /* 2 or 4 (or 6) equal logits */
        const sy_sampling p = random_params(V);
        double u = unif();
        if (it % 50 == 0)
            u = it % 100 == 0 ? 0.0 : 1.0 - 0x1.0p-53;
        if (kind == 1 && rnd() % 2)
            u = (double)(rnd() % 8) / 8.0; /* exactly on the dyadic boundaries */
        bool lossy;
        const int32_t want = old_next(&p, V, x, u, prob, idx, &lossy);
        const sy_sample_row row = {.struct_size = sizeof row, .temperature = p.temperature, .top_p = p.top_p,
                                   .min_p = p.min_p, .top_k = p.top_k, .u = u};
        const int32_t got = sy_sample_pick(x, V, &row, prob2, idx2);
        if (lossy) {
            lossy_rows++;
            continue;
        }
        compared++;
        sampled_rows += p.temperature > 0.0f;
        if (got != want && mismatches++ < 5)
            fprintf(stderr, "FAIL V=%d kind=%d T=%g top_k=%d top_p=%g min_p=%g u=%.17g: shared pick %d, old %d\n", V,
                    kind, (double)p.temperature, p.top_k, (double)p.top_p, (double)p.min_p, u, got, want);
    }
    CHECK(mismatches == 0);
    CHECK(sampled_rows > 4000);
    printf("shared pick = old sampler on %d rows (%d sampled; %d rows the old prefilter lost candidates on)\n", compared,
           sampled_rows, lossy_rows);

    /* sy_sampler_next and sy_sampler_row: one uniform per token, the same stream for the same seed. */
    {
        const int32_t V = 3000;
        sy_sampling p = sy_sampling_default();
        p.temperature = 0.9f;
        p.top_p = 0.9f;
        p.top_k = 40;
        p.seed = 1234;
        sy_sampler a, b;
        sy_err err = {{0}};
        CHECK(sy_sampler_init(&a, &p, V, &err) == SY_OK);
        CHECK(sy_sampler_init(&b, &p, V, &err) == SY_OK);
        int same = 0;
        for (int t = 0; t < 200; t++) {
            fill_row(x, V, 0, 0);
            const int32_t via_next = sy_sampler_next(&a, x);
            const sy_sample_row row = sy_sampler_row(&b);
            bool lossy;
            same += via_next == sy_sample_pick(x, V, &row, prob2, idx2) &&
                    via_next == old_next(&p, V, x, row.u, prob, idx, &lossy);
        }
        CHECK(same == 200);
        sy_sampler_fini(&a);
        sy_sampler_fini(&b);
    }

    /* The prefilter's bug: 10 logits of 12 and 1990 of 0, whose probabilities (e^-12 / 10 ~ 6e-7) are below
     * the 1e-6 prefilter, top_k 100. The filter would leave 10 < top_k, so it is not applied and the kept set
     * is the 10 large ids, then the 90 lowest small ids (equal logits: ties by id), 0..89. A uniform that
     * lands half-way into the first small one's share draws id 0. The old code had compacted ids 1000..1009
     * over ids 0..9 and kept n: ids 0..9 were gone and 1000..1009 counted twice, so it drew 1009. */
    {
        const int32_t V = 2000;
        for (int32_t i = 0; i < V; i++)
            x[i] = 0.0f;
        for (int32_t i = 0; i < 10; i++)
            x[1000 + i] = 12.0f;
        const double e12 = exp(-12.0), sum = 10.0 + 1990.0 * e12, big = 1.0 / sum, small = e12 / sum;
        const double u = (10.0 * big + 0.5 * small) / (10.0 * big + 90.0 * small);
        const sy_sample_row row = {.struct_size = sizeof row, .temperature = 1.0f, .top_p = 1.0f, .top_k = 100, .u = u};
        CHECK(sy_sample_pick(x, V, &row, prob2, idx2) == 0);
        bool lossy;
        sy_sampling p = sy_sampling_default();
        p.temperature = 1.0f;
        p.top_k = 100;
        CHECK(old_next(&p, V, x, u, prob, idx, &lossy) == 1009 && lossy);
    }
    free(x);
    free(prob);
    free(prob2);
    free(idx);
    free(idx2);
    return sy_test_done("test_sample_pick");
}
