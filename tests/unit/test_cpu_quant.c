/*
 * libsykern's quantised weights (sykquant.h), against a float64 reference
 * that decodes every code longhand: FP8 E4M3 with 128 x 128 block scales
 * (also scales near 2^121, past what a kernel may fold a 2^8 into) and
 * with one per-tensor scale, NVFP4 (E2M1, low nibble first, an E4M3
 * scale per 16 elements and a global scale), MXFP4 (the same codes, an
 * E8M0 power-of-two scale per 32). For every ISA this machine
 * runs: each decoded value exact, products on odd shapes (tails, several
 * SYK_KC slices, the few-rows and many-rows paths) within F32 accumulation
 * error of the reference, a row's bits independent of the batch it ran in,
 * and malformed layouts refused with their numbers.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sykquant.h"
#include "test_cpu_harness.h"

/* E4M3 from its definition: bias 7, subnormals m/8 * 2^-6. */
static double ref_e4m3(unsigned b)
{
    const int s = (b >> 7) & 1, e = (b >> 3) & 15, m = b & 7;
    const double v = e == 0 ? ldexp(m / 8.0, -6) : ldexp(1.0 + m / 8.0, e - 7);
    return s ? -v : v;
}

/* E8M0: 2^(b - 127), 0xFF NaN. */
static double ref_e8m0(unsigned b)
{
    return b == 0xff ? NAN : ldexp(1.0, (int)b - 127);
}

static double ref_e2m1(unsigned n)
{
    const int s = (n >> 3) & 1, e = (n >> 1) & 3, m = n & 1;
    const double v = e == 0 ? m * 0.5 : ldexp(1.0 + m / 2.0, e - 1);
    return s ? -v : v;
}

static void test_codes(void)
{
    for (unsigned b = 0; b < 256; b++) {
        const float f = syk_fp8_e4m3_to_f32((uint8_t)b);
        if ((b & 0x7f) == 0x7f) {
            TH_CHECK(fabsf(f) == 480.0f, "e4m3 NaN code 0x%02x reads %g, expected +-480", b, (double)f);
            continue;
        }
        TH_CHECK((double)f == ref_e4m3(b), "e4m3 0x%02x decodes to %a, expected %a", b, (double)f, ref_e4m3(b));
    }
    TH_CHECK(syk_fp8_e4m3_to_f32(0x7e) == 448.0f, "e4m3 max 0x7e is %g, expected 448", (double)syk_fp8_e4m3_to_f32(0x7e));
    for (unsigned b = 0; b < 256; b++) {
        const float f = syk_e8m0_to_f32((uint8_t)b);
        TH_CHECK(b == 0xff ? isnan(f) : (double)f == ref_e8m0(b), "e8m0 0x%02x decodes to %a, expected %a", b,
                 (double)f, ref_e8m0(b));
    }
    for (unsigned n = 0; n < 16; n++)
        TH_CHECK((double)syk_e2m1_to_f32(n) == ref_e2m1(n), "e2m1 0x%x decodes to %g, expected %g", n,
                 (double)syk_e2m1_to_f32(n), ref_e2m1(n));
}

/* Q_FP8_BIG: 128 x 128 blocks with scales near 2^121, where folding a kernel's 2^8 into the scale overflows. */
typedef enum qkind { Q_FP8_BLOCK, Q_FP8_TENSOR, Q_NVFP4, Q_MXFP4, Q_FP8_BIG, Q_KINDS } qkind;
static const char *const qnames[] = {"fp8 block 128x128", "fp8 per-tensor", "nvfp4", "mxfp4", "fp8 scales ~2^121"};

typedef struct qweight {
    sy_tensor t;
    uint8_t *data, *scale8;
    float *scale32;
} qweight;

static void qweight_make(qweight *q, qkind kind, int64_t N, int64_t K, th_rng *r)
{
    memset(q, 0, sizeof *q);
    int64_t shape[2] = {N, K};
    if (kind == Q_NVFP4) {
        q->data = malloc((size_t)(N * K / 2));
        for (int64_t i = 0; i < N * K / 2; i++)
            q->data[i] = (uint8_t)th_next(r);
        q->scale8 = malloc((size_t)(N * K / 16));
        for (int64_t i = 0; i < N * K / 16; i++) /* normal E4M3 scales, 2^-5 .. 2^3, either sign never */
            q->scale8[i] = (uint8_t)th_int(r, 0x10, 0x57);
        sy_tensor_init(&q->t, q->data, SY_DTYPE_FP4_E2M1, 2, shape);
        q->t.scale = q->scale8;
        q->t.scale_dtype = SY_DTYPE_FP8_E4M3;
        q->t.scale_block[0] = 1;
        q->t.scale_block[1] = 16;
        q->t.global_scale = 0.0123f;
        return;
    }
    if (kind == Q_MXFP4) {
        q->data = malloc((size_t)(N * K / 2));
        for (int64_t i = 0; i < N * K / 2; i++)
            q->data[i] = (uint8_t)th_next(r);
        q->scale8 = malloc((size_t)(N * K / 32));
        for (int64_t i = 0; i < N * K / 32; i++) /* 2^-12 .. 2^3; row 3 all code 0 (2^-127, not zero) */
            q->scale8[i] = i / (K / 32) == 3 ? 0 : (uint8_t)th_int(r, 115, 130);
        sy_tensor_init(&q->t, q->data, SY_DTYPE_FP4_E2M1, 2, shape);
        q->t.scale = q->scale8;
        q->t.scale_dtype = SY_DTYPE_E8M0;
        q->t.scale_block[0] = 1;
        q->t.scale_block[1] = 32;
        return;
    }
    q->data = malloc((size_t)(N * K));
    for (int64_t i = 0; i < N * K; i++) {
        uint8_t b = (uint8_t)th_next(r);
        q->data[i] = (b & 0x7f) == 0x7f ? (uint8_t)(b ^ 1) : b; /* no NaN codes */
        if (kind == Q_FP8_BIG) /* |q| < 32, so q * 2^122 stays finite */
            q->data[i] = (uint8_t)((b & 0x87) | ((b & 0x78) % 0x60));
    }
    const int64_t b0 = kind == Q_FP8_TENSOR ? N : 128, b1 = kind == Q_FP8_TENSOR ? K : 128;
    const int64_t ns = ((N + b0 - 1) / b0) * ((K + b1 - 1) / b1);
    q->scale32 = malloc(sizeof(float) * (size_t)ns);
    for (int64_t i = 0; i < ns; i++)
        q->scale32[i] = kind == Q_FP8_BIG ? (float)th_uniform(r, 0x1p121, 0x1p122) : (float)th_uniform(r, 1e-4, 3e-3);
    sy_tensor_init(&q->t, q->data, SY_DTYPE_FP8_E4M3, 2, shape);
    q->t.scale = q->scale32;
    q->t.scale_dtype = SY_DTYPE_F32;
    q->t.scale_block[0] = (int32_t)b0;
    q->t.scale_block[1] = (int32_t)b1;
}

static void qweight_free(qweight *q)
{
    free(q->data);
    free(q->scale8);
    free(q->scale32);
}

/* W[j][k] in float64, decoded longhand. */
static double ref_w(const qweight *q, int64_t j, int64_t k)
{
    const int64_t K = q->t.shape[1], b0 = q->t.scale_block[0], b1 = q->t.scale_block[1];
    const int64_t si = (j / b0) * ((K + b1 - 1) / b1) + k / b1;
    if (q->t.dtype == SY_DTYPE_FP4_E2M1) {
        const unsigned nib = (q->data[(j * K + k) / 2] >> (((j * K + k) & 1) * 4)) & 15u;
        const double s = q->t.scale_dtype == SY_DTYPE_E8M0 ? ref_e8m0(q->scale8[si]) : ref_e4m3(q->scale8[si]);
        return ref_e2m1(nib) * s * (double)q->t.global_scale;
    }
    return ref_e4m3(q->data[j * K + k]) * (double)q->scale32[si];
}

static void test_rows(qkind kind)
{
    th_rng r = {77 + kind};
    qweight q;
    const int64_t N = 37, K = kind == Q_NVFP4 || kind == Q_MXFP4 ? 2080 : 2100;
    qweight_make(&q, kind, N, K, &r);
    char why[160];
    TH_CHECK(syk_qweight_check(&q.t, why, sizeof why) == 0, "%s: layout refused: %s", qnames[kind], why);
    float *row = malloc(sizeof(float) * (size_t)K);
    int bad = 0;
    for (int64_t j = 0; j < N; j++) {
        syk_qweight_row(&q.t, j, 0, K, row);
        for (int64_t k = 0; k < K; k++) {
            const double ref = ref_w(&q, j, k);
            /* FP8: q * scale is exact in double, so the F32 product is its rounding; NVFP4 rounds twice; MXFP4's
             * code times a power of two is exact. */
            const int ok = kind == Q_NVFP4 ? fabs(row[k] - ref) <= fabs(ref) * 0x1p-23 : (double)row[k] == (double)(float)ref;
            if (!ok && bad++ < 5)
                TH_CHECK(0, "%s: W[%lld][%lld] = %.9g, expected %.17g", qnames[kind], (long long)j, (long long)k,
                         (double)row[k], ref);
        }
    }
    free(row);
    qweight_free(&q);
}

/* out = x . W^T on kern for shapes that reach every path; checks against float64 and batch invariance. */
static void test_gemm(const syk_kernels *kern, qkind kind, int64_t N, int64_t K, int64_t n)
{
    th_rng r = {1000 + (uint64_t)(kind * 7 + N + K + n)};
    qweight q;
    qweight_make(&q, kind, N, K, &r);
    float *x = malloc(sizeof(float) * (size_t)(n * K));
    float *out = malloc(sizeof(float) * (size_t)(n * N));
    float *one = malloc(sizeof(float) * (size_t)N);
    for (int64_t i = 0; i < n * K; i++) /* Q_FP8_BIG: x small enough that every product is finite */
        x[i] = (float)th_uniform(&r, -1, 1) * (kind == Q_FP8_BIG ? 0x1p-100f : 1.0f);
    syk_gemm g = {.x = x, .ldx = K, .w = q.t.data, .wdtype = q.t.dtype, .ldw = K, .out = out, .ldo = N, .n = n,
                  .m = N, .k = K, .wq = &q.t};
    syk_gemm_run(kern, &g, NULL);
    int bad = 0;
    double worst = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < N; j++) {
            double ref = 0, mag = 0;
            for (int64_t k = 0; k < K; k++) {
                const double p = (double)x[i * K + k] * ref_w(&q, j, k);
                ref += p;
                mag += fabs(p);
            }
            const double e = fabs(out[i * N + j] - ref) / (mag > 0 ? mag : 1);
            worst = e > worst ? e : worst;
            if (!(e <= 2e-6) && bad++ < 5)
                TH_CHECK(0, "%s %s [%lld x %lld] n=%lld: out[%lld][%lld] = %.9g, float64 %.12g (error %.2g of sum |x w|)",
                         syk_isa_name(kern->isa), qnames[kind], (long long)N, (long long)K, (long long)n, (long long)i,
                         (long long)j, (double)out[i * N + j], ref, e);
        }
    /* Each row alone (decode) gives the bits it got in the batch. */
    for (int64_t i = 0; i < n; i += (n > 8 ? 7 : 1)) {
        syk_gemm g1 = g;
        g1.x = x + i * K;
        g1.out = one;
        g1.n = 1;
        syk_gemm_run(kern, &g1, NULL);
        TH_CHECK(memcmp(one, out + i * N, sizeof(float) * (size_t)N) == 0,
                 "%s %s [%lld x %lld]: row %lld alone differs from the same row in a batch of %lld",
                 syk_isa_name(kern->isa), qnames[kind], (long long)N, (long long)K, (long long)i, (long long)n);
    }
    /* AVX-512 spreads FP4 nibbles with vpmultishiftqb where the CPU has VBMI, else vpshufb + vpsrlvd: the
     * same bits. Runs the other variant (both where this CPU has VBMI) over the whole product. */
    if (kern->isa == SYK_ISA_AVX512 && n <= 8)
        for (int vb = 0; vb < 2; vb++) {
            syk_qgemm_fn fn = syk__qgemm_avx512_variant(q.t.dtype, vb);
            if (!fn)
                continue;
            float *o2 = malloc(sizeof(float) * (size_t)(n * N));
            syk_qcall qc = {.x = x, .ldx = K, .w = &q.t, .out = o2, .ldo = N, .n = n, .m = N, .k = K};
            fn(&qc);
            TH_CHECK(memcmp(o2, out, sizeof(float) * (size_t)(n * N)) == 0,
                     "avx512 %s [%lld x %lld] n=%lld: the %s nibble spread gives other bits", qnames[kind],
                     (long long)N, (long long)K, (long long)n, vb ? "VBMI" : "vpshufb");
            free(o2);
        }
    printf("  %-8s %-18s [%4lld x %4lld] n=%3lld: worst error %.2g of sum |x w|\n", syk_isa_name(kern->isa),
           qnames[kind], (long long)N, (long long)K, (long long)n, worst);
    free(x);
    free(out);
    free(one);
    qweight_free(&q);
}

static void test_refusals(void)
{
    th_rng r = {5};
    qweight q;
    char why[160];
    qweight_make(&q, Q_NVFP4, 8, 64, &r);
    q.t.shape[1] = 40; /* 40 elements a row: not a whole number of 16-element scale groups */
    q.t.stride[0] = 40;
    TH_CHECK(syk_qweight_check(&q.t, why, sizeof why) != 0 && strstr(why, "K = 40"),
             "nvfp4 K = 40 accepted or unclear: %s", why);
    q.t.shape[1] = 64;
    q.t.stride[0] = 64;
    q.t.scale = NULL;
    TH_CHECK(syk_qweight_check(&q.t, why, sizeof why) != 0 && strstr(why, "no scales"), "missing scales: %s", why);
    qweight_free(&q);
    qweight_make(&q, Q_FP8_BLOCK, 8, 256, &r);
    q.t.scale_block[1] = 100;
    TH_CHECK(syk_qweight_check(&q.t, why, sizeof why) != 0 && strstr(why, "100"), "fp8 block 100 accepted: %s", why);
    qweight_free(&q);
    qweight_make(&q, Q_MXFP4, 8, 64, &r);
    q.t.shape[1] = 48; /* 48 elements a row: not a whole number of 32-element scale groups */
    q.t.stride[0] = 48;
    TH_CHECK(syk_qweight_check(&q.t, why, sizeof why) != 0 && strstr(why, "MXFP4") && strstr(why, "K = 48"),
             "mxfp4 K = 48 accepted or unclear: %s", why);
    q.t.shape[1] = 64;
    q.t.stride[0] = 64;
    q.t.scale_block[1] = 16; /* E8M0 scales per 16: neither NVFP4 nor MXFP4 */
    TH_CHECK(syk_qweight_check(&q.t, why, sizeof why) != 0 && strstr(why, "E8M0"), "e8m0 per 16 accepted: %s", why);
    qweight_free(&q);
}

int main(void)
{
    test_codes();
    for (int k = 0; k < Q_KINDS; k++)
        test_rows((qkind)k);
    test_refusals();
    static const int64_t shapes[][3] = {
        /* N, K, n: tails in N and K, two KC slices, decode, batched decode, the many-rows path */
        {37, 300, 1}, {37, 2100, 1}, {130, 2100, 3}, {21, 1040, 5}, {40, 2064, 9}, {9, 1056, 130},
    };
    for (int i = 0; i < SYK_ISA_COUNT; i++) {
        char why[128];
        if (!syk_isa_usable((syk_isa)i, why, sizeof why)) {
            printf("  %s not testable here: %s\n", syk_isa_name((syk_isa)i), why);
            continue;
        }
        const syk_kernels *kern = syk_kernels_for((syk_isa)i);
        TH_CHECK(syk_qgemm_for((syk_isa)i, SY_DTYPE_FP8_E4M3) && syk_qgemm_for((syk_isa)i, SY_DTYPE_FP4_E2M1),
                 "%s has no quantised kernels", syk_isa_name((syk_isa)i));
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int k = 0; k < Q_KINDS; k++) {
                int64_t K = shapes[s][1];
                if (k == Q_NVFP4)
                    K = K / 16 * 16;
                if (k == Q_MXFP4)
                    K = K / 32 * 32;
                test_gemm(kern, (qkind)k, shapes[s][0], K, shapes[s][2]);
            }
    }
    return th_done("test_cpu_quant");
}
