/*
 * Seeded normal samples: splitmix64 uniforms, Marsaglia's polar form of the
 * Box-Muller transform. The log is computed here from + - * / and sqrt (all
 * correctly rounded in IEEE-754), so the bits do not depend on the C
 * library's libm.
 */
#include "config.h"

#include "mkmodel.h"

#include <math.h>

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void mk_rng_init(mk_rng *r, uint64_t seed, const char *name)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 0x100000001b3ull;
    r->state = mix64(seed + 0x9e3779b97f4a7c15ull) ^ mix64(h);
    r->spare = 0.0;
    r->has_spare = 0;
}

uint64_t mk_rng_next(mk_rng *r)
{
    r->state += 0x9e3779b97f4a7c15ull;
    return mix64(r->state);
}

double mk_log(double x)
{
    /* x = m * 2^e with m in [sqrt(1/2), sqrt(2)); log(m) = 2 atanh(s),
     * s = (m-1)/(m+1), |s| <= 0.1716: 12 terms of the series reach 1e-19. */
    int e;
    double m = frexp(x, &e); /* exact: only moves the exponent */
    if (m < 0.70710678118654752440) {
        m *= 2.0;
        e--;
    }
    static const double inv_odd[12] = {1.0,       1.0 / 3,  1.0 / 5,  1.0 / 7,  1.0 / 9,  1.0 / 11,
                                       1.0 / 13,  1.0 / 15, 1.0 / 17, 1.0 / 19, 1.0 / 21, 1.0 / 23};
    double s = (m - 1.0) / (m + 1.0);
    double s2 = s * s;
    double p = inv_odd[11];
    for (int k = 10; k >= 0; k--)
        p = p * s2 + inv_odd[k];
    return (double)e * 0.69314718055994530942 + 2.0 * s * p;
}

double mk_rng_normal(mk_rng *r)
{
    if (r->has_spare) {
        r->has_spare = 0;
        return r->spare;
    }
    double u, v, q;
    do {
        u = (double)(mk_rng_next(r) >> 11) * 0x1.0p-52 - 1.0;
        v = (double)(mk_rng_next(r) >> 11) * 0x1.0p-52 - 1.0;
        q = u * u + v * v;
    } while (q >= 1.0 || q == 0.0);
    double f = sqrt(-2.0 * mk_log(q) / q);
    r->spare = v * f;
    r->has_spare = 1;
    return u * f;
}
