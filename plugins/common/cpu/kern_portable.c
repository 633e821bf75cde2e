/*
 * Portable C kernels: the fallback for CPUs (or VMs) without AVX2, and the
 * path the tests hold the SIMD paths against. Weight rows are widened into
 * an F32 buffer once and reused for every row of x.
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include "sykconv.h"
#include "sykern.h"

#define CHUNK SYK_KC /* the slices every ISA sums k in (sykern.h) */

static void widen(float *dst, const void *src, sy_dtype dt, int64_t n)
{
    syk_row_to_f32(dst, src, dt, n);
}

/* Eight partial sums let the compiler keep several multiply-adds in flight. */
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

static void gemm_nt(sy_dtype dt, const float *x, int64_t ldx, const void *w, int64_t ldw, float *out, int64_t ldo,
                    int64_t n, int64_t m, int64_t k, int accumulate)
{
    float buf[CHUNK];
    const size_t es = syk_wdtype_size(dt);
    for (int64_t j = 0; j < m; j++) {
        const char *wr = (const char *)w + (size_t)j * (size_t)ldw * es;
        for (int64_t c = 0; c < k; c += CHUNK) {
            const int64_t len = k - c < CHUNK ? k - c : CHUNK;
            const float *wf;
            if (dt == SY_DTYPE_F32) {
                wf = (const float *)wr + c;
            } else {
                widen(buf, wr + (size_t)c * es, dt, len);
                wf = buf;
            }
            for (int64_t i = 0; i < n; i++) {
                const float part = dot(x + i * ldx + c, wf, len);
                float *o = out + i * ldo + j;
                *o = (c == 0 && !accumulate) ? part : *o + part;
            }
        }
        if (k == 0 && !accumulate)
            for (int64_t i = 0; i < n; i++)
                out[i * ldo + j] = 0.0f;
    }
}

static void gemm_nn_acc(sy_dtype dt, const float *p, int64_t ldp, const void *v, int64_t ldv, float *acc, int64_t lda,
                        int64_t n, int64_t npos, int64_t dv)
{
    float buf[CHUNK];
    const size_t es = syk_wdtype_size(dt);
    for (int64_t c = 0; c < dv; c += CHUNK) {
        const int64_t len = dv - c < CHUNK ? dv - c : CHUNK;
        for (int64_t j = 0; j < npos; j++) {
            const char *vr = (const char *)v + ((size_t)j * (size_t)ldv + (size_t)c) * es;
            const float *vf;
            if (dt == SY_DTYPE_F32) {
                vf = (const float *)vr;
            } else {
                widen(buf, vr, dt, len);
                vf = buf;
            }
            for (int64_t i = 0; i < n; i++) {
                const float a = p[i * ldp + j];
                float *y = acc + i * lda + c;
                for (int64_t d = 0; d < len; d++)
                    y[d] += a * vf[d];
            }
        }
    }
}

static void vexp(float *y, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        const float v = x[i];
        y[i] = expf(v > 88.0f ? 88.0f : v); /* saturate like the SIMD paths; a NaN falls through */
    }
}

static void softmax_step(float *s, int64_t n, int64_t jl, int64_t jh, float *m, float *l, float *o, int64_t dv)
{
    if (jl > jh) {
        memset(s, 0, sizeof(float) * (size_t)n);
        return;
    }
    float mx = *m;
    for (int64_t c = jl; c <= jh; c++)
        mx = s[c] > mx ? s[c] : mx;
    for (int64_t c = jl; c <= jh; c++)
        s[c] -= mx;
    vexp(s + jl, s + jl, jh - jl + 1);
    for (int64_t c = 0; c < jl; c++)
        s[c] = 0.0f;
    for (int64_t c = jh + 1; c < n; c++)
        s[c] = 0.0f;
    float sum = 0.0f;
    for (int64_t c = jl; c <= jh; c++)
        sum += s[c];
    if (*m != mx) {
        const float alpha = *m == -INFINITY ? 0.0f : expf(*m - mx);
        for (int64_t d = 0; d < dv; d++)
            o[d] *= alpha;
        *l *= alpha;
        *m = mx;
    }
    *l += sum;
}

#define WRAP(DT, SUF)                                                                                              \
    static void gemm_nt_##SUF(const float *x, int64_t ldx, const void *w, int64_t ldw, float *out, int64_t ldo,   \
                              int64_t n, int64_t m, int64_t k, int accumulate)                                     \
    {                                                                                                              \
        gemm_nt(DT, x, ldx, w, ldw, out, ldo, n, m, k, accumulate);                                                \
    }                                                                                                              \
    static void gemm_nn_acc_##SUF(const float *p, int64_t ldp, const void *v, int64_t ldv, float *acc,            \
                                  int64_t lda, int64_t n, int64_t npos, int64_t dv)                                \
    {                                                                                                              \
        gemm_nn_acc(DT, p, ldp, v, ldv, acc, lda, n, npos, dv);                                                    \
    }
WRAP(SY_DTYPE_F32, f32)
WRAP(SY_DTYPE_F16, f16)
WRAP(SY_DTYPE_BF16, bf16)
#undef WRAP

static const syk_kernels kernels = {
    .isa = SYK_ISA_PORTABLE,
    .gemm_nt = {gemm_nt_f32, gemm_nt_f16, gemm_nt_bf16},
    .gemm_nn_acc = {gemm_nn_acc_f32, gemm_nn_acc_f16, gemm_nn_acc_bf16},
    .vexp = vexp,
    .softmax_step = softmax_step,
};

const syk_kernels *syk__kernels_portable(void)
{
    return &kernels;
}
