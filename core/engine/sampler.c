#include "config.h"

#include "engine/sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sykargmax.h" /* the scan the cpu device plugin's argmax uses too */
#include "syksample.h" /* the draw its sample op makes too */

sy_sampling sy_sampling_default(void)
{
    sy_sampling p = {.temperature = 0.0f, .top_p = 1.0f, .top_k = 0, .min_p = 0.0f, .seed = 0};
    return p;
}

int sy_sampling_check(const sy_sampling *p, sy_err *err)
{
    if (!(p->temperature >= 0.0f) || p->temperature > 100.0f)
        return sy_err_set(err, SY_ERR_INVALID, "temperature must be in [0, 100], found %g", (double)p->temperature);
    if (!(p->top_p > 0.0f && p->top_p <= 1.0f))
        return sy_err_set(err, SY_ERR_INVALID, "top_p must be in (0, 1], found %g", (double)p->top_p);
    if (p->top_k < 0)
        return sy_err_set(err, SY_ERR_INVALID, "top_k must be >= 0 (0 disables it), found %d", p->top_k);
    if (!(p->min_p >= 0.0f && p->min_p < 1.0f))
        return sy_err_set(err, SY_ERR_INVALID, "min_p must be in [0, 1), found %g", (double)p->min_p);
    return SY_OK;
}

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

/* xoshiro256**: small, fast, and good enough for sampling. */
static uint64_t rng_next(uint64_t s[4])
{
    uint64_t r = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

/* Uniform in [0, 1) with 53 random bits. */
static double rng_uniform(uint64_t s[4]) { return (double)(rng_next(s) >> 11) * 0x1.0p-53; }

int sy_sampler_init(sy_sampler *s, const sy_sampling *p, int32_t vocab, sy_err *err)
{
    memset(s, 0, sizeof *s);
    int rc = sy_sampling_check(p, err);
    if (rc)
        return rc;
    s->p = *p;
    s->vocab = vocab;
    uint64_t x = p->seed;
    for (int i = 0; i < 4; i++)
        s->rng[i] = splitmix64(&x);
    if (p->temperature > 0.0f) {
        s->idx = malloc(sizeof(int32_t) * (size_t)vocab);
        s->prob = malloc(sizeof(float) * (size_t)vocab);
        if (!s->idx || !s->prob) {
            sy_sampler_fini(s);
            return sy_err_set(err, SY_ERR_NOMEM, "cannot allocate sampler scratch for %d tokens", vocab);
        }
    }
    return SY_OK;
}

void sy_sampler_fini(sy_sampler *s)
{
    free(s->idx);
    free(s->prob);
    s->idx = NULL;
    s->prob = NULL;
}

/*
 * The lowest id among the largest logits; NaNs never win, but a NaN at id 0
 * does (nothing compares greater than it), as in the plain loop
 *     best = 0; for i: if (x[i] > x[best]) best = i;
 * which syk_first_max computes in two vector passes: the maximum (maxps
 * keeps the running maximum when x is NaN), then its first occurrence
 * (-0 == +0, as the loop's ties). A greedy decode step calls it over the
 * whole vocabulary.
 */
int32_t sy_greedy_pick(const float *x, int32_t n)
{
    if (n <= 1 || x[0] != x[0])
        return 0;
    return (int32_t)syk_first_max(x, n); /* x[0] is a number, so there is a largest one */
}

sy_sample_row sy_sampler_row(sy_sampler *s)
{
    sy_sample_row r = {.struct_size = sizeof(sy_sample_row),
                       .temperature = s->p.temperature,
                       .top_p = s->p.top_p,
                       .min_p = s->p.min_p,
                       .top_k = s->p.top_k};
    if (s->p.temperature > 0.0f)
        r.u = rng_uniform(s->rng);
    return r;
}

int32_t sy_sample_pick(const float *logits, int32_t vocab, const sy_sample_row *row, float *prob, int32_t *idx)
{
    return syk_sample_pick(logits, vocab, row, prob, idx);
}

int32_t sy_sampler_next(sy_sampler *s, const float *logits)
{
    const sy_sample_row r = sy_sampler_row(s);
    return syk_sample_pick(logits, s->vocab, &r, s->prob, s->idx);
}

int32_t sy_spec_verify_pick(const float *logits, int32_t vocab, const sy_sample_row *row, int32_t draft,
                            double u_accept, double u_resid, float *prob, int32_t *idx, bool *accepted)
{
    const int32_t n = row->temperature > 0.0f ? syk_sample_filter(logits, vocab, row, prob, idx) : 0;
    if (n == 0) { /* greedy, or a distribution of NaN/infinite logits that sy_sample_pick draws greedily too */
        const int32_t t = sy_greedy_pick(logits, vocab);
        *accepted = t == draft;
        return t;
    }
    double total = 0.0, pd = 0.0;
    for (int32_t i = 0; i < n; i++) {
        total += prob[idx[i]];
        if (idx[i] == draft)
            pd = prob[idx[i]];
    }
    if (u_accept * total < pd) { /* probability p(d) = pd / total */
        *accepted = true;
        return draft;
    }
    *accepted = false;
    const double r = u_resid * (total - pd);
    double acc = 0.0;
    int32_t last = draft; /* only when d held all the mass, which the test above always accepts */
    for (int32_t i = 0; i < n; i++) {
        if (idx[i] == draft)
            continue;
        acc += prob[idx[i]];
        last = idx[i];
        if (r < acc)
            return idx[i];
    }
    return last;
}

int32_t sy_sampler_verify(sy_sampler *s, const float *logits, int32_t draft, bool *accepted)
{
    const sy_sample_row r = sy_sampler_row(s);
    /* Two uniforms per sampled row whether the residual is needed or not: a seed still reproduces. */
    const double u_resid = r.temperature > 0.0f ? rng_uniform(s->rng) : 0.0;
    return sy_spec_verify_pick(logits, s->vocab, &r, draft, r.u, u_resid, s->prob, s->idx, accepted);
}

float sy_logprob(const float *logits, int32_t vocab, int32_t id)
{
    float mx = logits[sy_greedy_pick(logits, vocab)];
    double sum = 0.0;
    for (int32_t i = 0; i < vocab; i++)
        sum += exp((double)logits[i] - mx);
    return (float)((double)logits[id] - mx - log(sum));
}

void sy_apply_penalties(float *logits, int32_t *counts, const int32_t *tokens, int32_t n, float frequency,
                        float presence, float repetition)
{
    /* Counting first, then one pass over the distinct tokens: each token is
     * penalised once however often it occurs. */
    for (int32_t i = 0; i < n; i++)
        counts[tokens[i]]++;
    for (int32_t i = 0; i < n; i++) {
        const int32_t t = tokens[i];
        const int32_t c = counts[t];
        if (c == 0)
            continue; /* already done */
        float x = logits[t];
        if (repetition != 1.0f)
            x = x > 0.0f ? x / repetition : x * repetition;
        x -= frequency * (float)c + presence;
        logits[t] = x;
        counts[t] = 0;
    }
}
