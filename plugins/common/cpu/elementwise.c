/*
 * The memory-bound row ops (norms, RoPE, activations, conversions). Plain C:
 * they read each byte once, so the compiler's own vectorisation is enough
 * and one code path keeps every ISA's results identical here.
 */
#include "config.h"

#include <math.h>

#include "sykconv.h"
#include "sykern.h"

void syk_row_to_f32(float *dst, const void *src, sy_dtype dt, int64_t n)
{
    if (dt == SY_DTYPE_F32) {
        memmove(dst, src, sizeof(float) * (size_t)n);
    } else if (dt == SY_DTYPE_BF16) {
        const uint16_t *s = src;
        for (int64_t i = 0; i < n; i++)
            dst[i] = syk_bf16_to_f32(s[i]);
    } else {
        const uint16_t *s = src;
        for (int64_t i = 0; i < n; i++)
            dst[i] = syk_f16_to_f32(s[i]);
    }
}

void syk_row_from_f32(void *dst, sy_dtype dt, const float *src, int64_t n)
{
    if (dt == SY_DTYPE_F32) {
        memmove(dst, src, sizeof(float) * (size_t)n);
    } else if (dt == SY_DTYPE_BF16) {
        uint16_t *d = dst;
        for (int64_t i = 0; i < n; i++)
            d[i] = syk_f32_to_bf16(src[i]);
    } else {
        uint16_t *d = dst;
        for (int64_t i = 0; i < n; i++)
            d[i] = syk_f32_to_f16(src[i]);
    }
}

static inline float wval(const void *w, sy_dtype dt, int64_t i)
{
    if (dt == SY_DTYPE_F32)
        return ((const float *)w)[i];
    if (dt == SY_DTYPE_BF16)
        return syk_bf16_to_f32(((const uint16_t *)w)[i]);
    return syk_f16_to_f32(((const uint16_t *)w)[i]);
}

void syk_rmsnorm_row(float *out, const float *x, const void *w, sy_dtype wdt, int64_t d, float eps)
{
    /* Four double partial sums: exact enough to match a float64 reference and
     * still cheap next to the GEMMs around it. */
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t i = 0;
    for (; i + 4 <= d; i += 4) {
        s0 += (double)x[i] * x[i];
        s1 += (double)x[i + 1] * x[i + 1];
        s2 += (double)x[i + 2] * x[i + 2];
        s3 += (double)x[i + 3] * x[i + 3];
    }
    for (; i < d; i++)
        s0 += (double)x[i] * x[i];
    const double ms = (s0 + s1 + s2 + s3) / (double)d;
    const float inv = (float)(1.0 / sqrt(ms + (double)eps));
    if (wdt == SY_DTYPE_F32) {
        const float *wf = w;
        for (i = 0; i < d; i++)
            out[i] = (x[i] * inv) * wf[i];
    } else {
        for (i = 0; i < d; i++)
            out[i] = (x[i] * inv) * wval(w, wdt, i);
    }
}

void syk_silu_mul(float *out, const float *gate, const float *up, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        const float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

void syk_silu_mul_vexp(const syk_kernels *k, float *out, const float *gate, const float *up, int64_t n)
{
    float e[256];
    for (int64_t i0 = 0; i0 < n; i0 += 256) {
        const int64_t m = n - i0 < 256 ? n - i0 : 256;
        for (int64_t j = 0; j < m; j++)
            e[j] = -gate[i0 + j];
        k->vexp(e, e, m);
        for (int64_t j = 0; j < m; j++) {
            const float g = gate[i0 + j];
            /* Below -87 the vector exp saturates at e^88; expf's inf gives the ~0 that silu really is there. */
            out[i0 + j] = (g < -87.0f ? g / (1.0f + expf(-g)) : g / (1.0f + e[j])) * up[i0 + j];
        }
    }
}

void syk_swiglu_clamp_vexp(const syk_kernels *k, float *out, const float *gate, const float *up, int64_t n, float alpha,
                           float limit)
{
    float e[256];
    for (int64_t i0 = 0; i0 < n; i0 += 256) {
        const int64_t m = n - i0 < 256 ? n - i0 : 256;
        for (int64_t j = 0; j < m; j++) {
            const float g = gate[i0 + j];
            e[j] = -alpha * (g > limit ? limit : g);
        }
        k->vexp(e, e, m);
        for (int64_t j = 0; j < m; j++) {
            /* g > limit keeps a NaN gate NaN, as torch's clamp does. */
            const float g0 = gate[i0 + j], g = g0 > limit ? limit : g0;
            const float u0 = up[i0 + j], u = u0 > limit ? limit : u0 < -limit ? -limit : u0;
            const float a = -alpha * g;
            /* Past 87 the vector exp saturates; expf's inf gives the ~0 that g * sigmoid(alpha g) is there. */
            const float glu = g / (1.0f + (a > 87.0f ? expf(a) : e[j]));
            out[i0 + j] = (u + 1.0f) * glu;
        }
    }
}

void syk_add(float *acc, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        acc[i] += x[i];
}

void syk_rope_row(float *x, int64_t heads, int64_t head_dim, int64_t rotary_dim, int neox, const float *cs)
{
    const int64_t half = rotary_dim / 2;
    const float *c = cs, *s = cs + half;
    for (int64_t h = 0; h < heads; h++) {
        float *v = x + h * head_dim;
        if (neox) {
            for (int64_t i = 0; i < half; i++) {
                const float a = v[i], b = v[i + half];
                v[i] = a * c[i] - b * s[i];
                v[i + half] = b * c[i] + a * s[i];
            }
        } else {
            for (int64_t i = 0; i < half; i++) {
                const float a = v[2 * i], b = v[2 * i + 1];
                v[2 * i] = a * c[i] - b * s[i];
                v[2 * i + 1] = b * c[i] + a * s[i];
            }
        }
    }
}
