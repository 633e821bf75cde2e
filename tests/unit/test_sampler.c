/* Sampler: greedy ties, seeded reproducibility, filters, distribution, errors. */
#include "config.h"

#include "engine/sampler.h"
#include "test_check.h"

#include <math.h>
#include <stdlib.h>

#define V 8

static int32_t draw(const sy_sampling *p, const float *logits)
{
    sy_sampler s;
    sy_err err;
    if (sy_sampler_init(&s, p, V, &err))
        return -1;
    int32_t t = sy_sampler_next(&s, logits);
    sy_sampler_fini(&s);
    return t;
}

int main(void)
{
    const float logits[V] = {1.0f, 3.0f, 3.0f, 0.5f, 2.0f, -1.0f, 0.0f, 2.9f};
    sy_sampling p = sy_sampling_default();

    /* Greedy: the lowest id wins an exact tie (1 and 2 both 3.0). */
    CHECK(draw(&p, logits) == 1);

    /* top_k = 1 and a tiny top_p both reduce to the greedy choice. */
    p.temperature = 1.0f;
    p.top_k = 1;
    for (uint64_t seed = 0; seed < 20; seed++) {
        p.seed = seed;
        CHECK(draw(&p, logits) == 1);
    }
    p.top_k = 0;
    p.top_p = 1e-6f;
    for (uint64_t seed = 0; seed < 20; seed++) {
        p.seed = seed;
        CHECK(draw(&p, logits) == 1);
    }

    /* Same seed, same stream; another seed, another stream. */
    p.top_p = 1.0f;
    sy_sampler a, b, c;
    sy_err err;
    p.seed = 42;
    CHECK(sy_sampler_init(&a, &p, V, &err) == SY_OK);
    CHECK(sy_sampler_init(&b, &p, V, &err) == SY_OK);
    p.seed = 43;
    CHECK(sy_sampler_init(&c, &p, V, &err) == SY_OK);
    int same = 1, differ = 0;
    for (int i = 0; i < 200; i++) {
        int32_t x = sy_sampler_next(&a, logits), y = sy_sampler_next(&b, logits), z = sy_sampler_next(&c, logits);
        same &= x == y;
        differ |= x != z;
    }
    CHECK(same);
    CHECK(differ);

    /* The empirical distribution follows softmax(logits / T). */
    p.temperature = 0.7f;
    p.seed = 7;
    sy_sampler d;
    CHECK(sy_sampler_init(&d, &p, V, &err) == SY_OK);
    int counts[V] = {0};
    const int N = 40000;
    for (int i = 0; i < N; i++)
        counts[sy_sampler_next(&d, logits)]++;
    double z = 0, probs[V];
    for (int i = 0; i < V; i++)
        z += exp(logits[i] / 0.7);
    for (int i = 0; i < V; i++) {
        probs[i] = exp(logits[i] / 0.7) / z;
        double sd = sqrt(N * probs[i] * (1 - probs[i])) + 1;
        CHECK(fabs(counts[i] - N * probs[i]) < 5 * sd);
    }

    /* min_p drops tokens under min_p * p_max: only 1, 2 and 7 survive 0.8. */
    p.temperature = 1.0f;
    p.min_p = 0.8f;
    for (uint64_t seed = 0; seed < 200; seed++) {
        p.seed = seed;
        int32_t t = draw(&p, logits);
        CHECK(t == 1 || t == 2 || t == 7);
    }

    /* Bad parameters are refused, naming the parameter and the range. */
    sy_sampling bad = sy_sampling_default();
    bad.top_p = 0.0f;
    CHECK(sy_sampling_check(&bad, &err) == SY_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "top_p");
    bad = sy_sampling_default();
    bad.temperature = -1.0f;
    CHECK(sy_sampling_check(&bad, &err) == SY_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "temperature");
    bad = sy_sampling_default();
    bad.min_p = 1.5f;
    CHECK(sy_sampling_check(&bad, &err) == SY_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "min_p");

    /* logprob is a log-softmax. */
    double zs = 0;
    for (int i = 0; i < V; i++)
        zs += exp(logits[i]);
    CHECK(fabs(exp(sy_logprob(logits, V, 1)) - exp(3.0) / zs) < 1e-6);

    sy_sampler_fini(&a);
    sy_sampler_fini(&b);
    sy_sampler_fini(&c);
    sy_sampler_fini(&d);
    return sy_test_done("test_sampler");
}
