/*
 * test_cuda_quant_decode: the CUDA device plugin's FP8 / NVFP4 decoding
 * and moe cuda's MXFP4 element load (plugins/device/cuda/device_quant.h:
 * the code the kernels run, compiled here as host C) against the CPU
 * plugin's definition of the formats (syk_fp8_e4m3_to_f32,
 * syk_e8m0_to_f32, syk_e2m1_to_f32, syk_qweight_row). Runs without a
 * GPU, in every `make check`: the element values, the nibble order, the
 * scale indexing of partial blocks and the folding of the F16 decode's
 * power of two into the scale must all give the CPU's bits exactly.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device_quant.h"
#include "sykquant.h"

static int failures, checks;

static void expect_same(float got, float want, const char *what, long long a, long long b)
{
    checks++;
    if (memcmp(&got, &want, sizeof got) != 0) {
        if (failures < 20)
            fprintf(stderr, "FAIL %s [%lld, %lld]: device decode %.9g, cpu %.9g\n", what, a, b, (double)got,
                    (double)want);
        failures++;
    }
}

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint32_t next_u32(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}

static void test_codes(void)
{
    for (unsigned b = 0; b < 256; b++) {
        expect_same(syq_fp8_to_f32((uint8_t)b), syk_fp8_e4m3_to_f32((uint8_t)b), "fp8 code", b, 0);
        float lo, hi; /* the fast path: code in both halves, the 2^-8 undone */
        syq_f16x2_to_f32(syq_fp8x2_to_f16x2(b | (b ^ 0x80u) << 16), &lo, &hi);
        expect_same(lo * SYQ_FP8_F16_UNSCALE, syk_fp8_e4m3_to_f32((uint8_t)b), "fp8 code via f16, low half", b, 0);
        expect_same(hi * SYQ_FP8_F16_UNSCALE, syk_fp8_e4m3_to_f32((uint8_t)(b ^ 0x80u)), "fp8 code via f16, high half",
                    b, 1);
    }
    for (unsigned b = 0; b < 256; b++) { /* 0xFF: both NaN */
        const float got = syq_e8m0_to_f32((uint8_t)b), want = syk_e8m0_to_f32((uint8_t)b);
        if (b == 0xffu) {
            checks++;
            if (!isnan(got) || !isnan(want)) {
                fprintf(stderr, "FAIL e8m0 0xff: %g and %g, expected NaN twice\n", (double)got, (double)want);
                failures++;
            }
        } else
            expect_same(got, want, "e8m0 code", b, 0);
    }
    for (unsigned n = 0; n < 16; n++) {
        expect_same(syq_e2m1_to_f32(n), syk_e2m1_to_f32(n), "e2m1 code", n, 0);
        float lo, hi;
        syq_f16x2_to_f32(syq_fp4x2_to_f16x2(n | (15u - n) << 16), &lo, &hi);
        expect_same(lo * SYQ_FP4_F16_UNSCALE, syk_e2m1_to_f32(n), "e2m1 code via f16, low half", n, 0);
        expect_same(hi * SYQ_FP4_F16_UNSCALE, syk_e2m1_to_f32(15u - n), "e2m1 code via f16, high half", n, 1);
    }
}

/* Every element of a random [N, K] weight through the kernels' chunk walk against syk_qweight_row. */
static void test_weight(const char *what, sy_dtype dt, int64_t N, int64_t K, int32_t b0, int32_t b1, float global)
{
    const int fp4 = dt == SY_DTYPE_FP4_E2M1;
    const size_t nc = (size_t)(N * syq_row_bytes(fp4, K)), ns = (size_t)((N + b0 - 1) / b0 * ((K + b1 - 1) / b1));
    uint8_t *codes = malloc(nc), *sc8 = malloc(ns);
    float *sc32 = malloc(sizeof(float) * ns), *want = malloc(sizeof(float) * (size_t)K);
    for (size_t i = 0; i < nc; i++)
        codes[i] = (uint8_t)next_u32();
    for (size_t i = 0; i < ns; i++) {
        sc8[i] = (uint8_t)(((2 + next_u32() % 12) << 3) | (next_u32() & 7)); /* positive, 2^-5 .. 2^6 */
        sc32[i] = (float)(next_u32() % 1000 + 1) * 1e-5f;
    }
    sy_tensor w = sy_tensor_2d(codes, dt, N, K);
    w.scale = fp4 ? (const void *)sc8 : (const void *)sc32;
    w.scale_dtype = fp4 ? SY_DTYPE_FP8_E4M3 : SY_DTYPE_F32;
    w.scale_block[0] = b0;
    w.scale_block[1] = b1;
    w.global_scale = global;
    char why[160];
    if (syk_qweight_check(&w, why, sizeof why)) {
        fprintf(stderr, "FAIL %s: the CPU refuses the test weight: %s\n", what, why);
        failures++;
        return;
    }
    const int vec8 = K % 16 == 0;
    const int f0 = failures;
    for (int64_t row = 0; row < N; row++) {
        syk_qweight_row(&w, row, 0, K, want);
        const int64_t srow = syq_scale_row_base(row, K, b0, b1);
        for (int64_t k0 = 0; k0 < K; k0 += 16) {
            float got[16];
            syq_load16(codes + row * syq_row_bytes(fp4, K), fp4, vec8, k0, K,
                       syq_chunk_scale(w.scale, fp4, srow, k0, b1, global), got);
            for (int64_t b = 0; b < 16 && k0 + b < K; b++)
                expect_same(got[b], want[k0 + b], what, (long long)row, (long long)(k0 + b));
            for (int64_t b = K - k0; b < 16; b++)
                expect_same(got[b], 0.0f, "past the row's end", (long long)row, (long long)(k0 + b));
            /* the prefill path's per-element indexing */
            for (int64_t b = 0; b < 16 && k0 + b < K; b++)
                expect_same(syq_mul(syq_code(codes + row * syq_row_bytes(fp4, K), fp4, k0 + b),
                                    syq_scale(w.scale, fp4, row, k0 + b, K, b0, b1, global)),
                            want[k0 + b], what, (long long)row, (long long)(k0 + b));
        }
    }
    printf("%-4s %s\n", failures == f0 ? "ok" : "FAIL", what);
    free(codes), free(sc8), free(sc32), free(want);
}

/* MXFP4 (E8M0 per 32): moe cuda's element load (moe_tc.cuh: syq_code times syq_e8m0_scale) against syk_qweight_row. */
static void test_mxfp4(const char *what, int64_t N, int64_t K, float global)
{
    const size_t nc = (size_t)(N * K / 2), ns = (size_t)(N * K / 32);
    uint8_t *codes = malloc(nc), *sc = malloc(ns);
    float *want = malloc(sizeof(float) * (size_t)K);
    for (size_t i = 0; i < nc; i++)
        codes[i] = (uint8_t)next_u32();
    for (size_t i = 0; i < ns; i++) /* 2^-20 .. 2^11, with the subnormal 2^-127 now and then */
        sc[i] = next_u32() % 50 == 0 ? 0 : (uint8_t)(107 + next_u32() % 32);
    sy_tensor w = sy_tensor_2d(codes, SY_DTYPE_FP4_E2M1, N, K);
    w.scale = sc;
    w.scale_dtype = SY_DTYPE_E8M0;
    w.scale_block[0] = 1;
    w.scale_block[1] = 32;
    w.global_scale = global;
    char why[200];
    if (syk_qweight_check(&w, why, sizeof why)) {
        fprintf(stderr, "FAIL %s: the CPU refuses the test weight: %s\n", what, why);
        failures++;
        return;
    }
    const int f0 = failures;
    for (int64_t row = 0; row < N; row++) {
        syk_qweight_row(&w, row, 0, K, want);
        for (int64_t k = 0; k < K; k++)
            expect_same(syq_mul(syq_code(codes + row * (K / 2), 1, k), syq_e8m0_scale(sc, row, k, K, 1, 32, global)),
                        want[k], what, (long long)row, (long long)k);
    }
    printf("%-4s %s\n", failures == f0 ? "ok" : "FAIL", what);
    free(codes), free(sc), free(want);
}

int main(void)
{
    test_codes();
    printf("%-4s every FP8, E8M0 and E2M1 code, direct and via F16\n", failures ? "FAIL" : "ok");
    test_weight("F8_E4M3 per-tensor scale, 300 x 400", SY_DTYPE_FP8_E4M3, 300, 400, 300, 400, 1.0f);
    test_weight("F8_E4M3 128x128 scales, 300 x 400 (partial last blocks)", SY_DTYPE_FP8_E4M3, 300, 400, 128, 128, 1.0f);
    test_weight("F8_E4M3 128x128 scales, 300 x 392 (K % 16 != 0)", SY_DTYPE_FP8_E4M3, 300, 392, 128, 128, 1.0f);
    test_weight("F8_E4M3 per-tensor scale, 7 x 40 (K % 16 != 0), global 0.5", SY_DTYPE_FP8_E4M3, 7, 40, 7, 40, 0.5f);
    test_weight("NVFP4, 300 x 400, global 0.01", SY_DTYPE_FP4_E2M1, 300, 400, 1, 16, 0.01f);
    test_weight("NVFP4, 3 x 16, global 3", SY_DTYPE_FP4_E2M1, 3, 16, 1, 16, 3.0f);
    test_mxfp4("MXFP4, 300 x 416", 300, 416, 1.0f);
    test_mxfp4("MXFP4, 5 x 32, global 0.25", 5, 32, 0.25f);
    printf("test_cuda_quant_decode: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
