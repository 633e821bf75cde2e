/*
 * Portable quantised kernels: each weight row's SYK_KC slice is dequantised
 * into an F32 buffer once and dotted with every row of x, with the same
 * eight partial sums as kern_portable.c.
 */
#include "config.h"

#include "sykquant.h"

static float dot(const float *a, const float *b, int64_t n)
{
    float s[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++)
            s[l] += a[i + l] * b[i + l];
    for (int l = 0; i < n; i++, l++)
        s[l] += a[i] * b[i];
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

static void qgemm(const syk_qcall *c)
{
    float buf[SYK_KC];
    for (int64_t j = 0; j < c->m; j++)
        for (int64_t s = 0; s < c->k; s += SYK_KC) {
            const int64_t len = c->k - s < SYK_KC ? c->k - s : SYK_KC;
            syk_qweight_row(c->w, c->j0 + j, c->k0 + s, len, buf);
            for (int64_t i = 0; i < c->n; i++) {
                const float part = dot(c->x + i * c->ldx + s, buf, len);
                float *o = c->out + i * c->ldo + j;
                *o = (s == 0 && !c->accumulate) ? part : *o + part;
            }
        }
}

syk_qgemm_fn syk__qgemm_portable(sy_dtype dt)
{
    return syk_wdtype_quant(dt) ? qgemm : NULL;
}
