/*
 * The W4A4 mode's activation quantiser ([moe] activations = nvfp4), written
 * once for host C (moe/cpu quantises its expert inputs with it, which makes
 * a CPU run the reference the GPU is checked against) and the GPU (moe/cuda's
 * k_quant_rows): one token row of K F32 values becomes NVFP4, the format of
 * the checkpoints' weights (plugins/device/cuda/device_quant.h):
 *
 *   global  g = amax(row) / (6 * 448), per row, F32 (dynamic: no calibrated
 *           input_scale needed, and the largest block of the row uses the
 *           whole E4M3 x E2M1 range)
 *   scale   per block of 16 along K: s = ue4m3(bamax / 6 / g), round to
 *           nearest even, at most 448 (0x7e; 0x7f, E4M3's NaN, never made)
 *   code    per element: q = e2m1(x / (s * g)), round to nearest even on
 *           0, 0.5, 1, 1.5, 2, 3, 4, 6, saturating at 6; element 2i in the
 *           low nibble of byte i; a zero magnitude is stored as +0
 *   value   q * (s * g), with s * g rounded once in F32: the weights' decode
 *
 * A row holding a NaN or an infinity gets g = NaN, zero scales and codes:
 * every dequantised value is NaN (0 * NaN), so the token's outputs are NaN
 * rather than quietly finite. A zero row (or one whose g underflows to 0)
 * gets g = 0 and dequantises to zeros. A block whose scale rounds to 0
 * (bamax below ~2^-10 of amax) is all zero codes.
 *
 * Every operation is one IEEE F32 rounding spelled out (__fdiv_rn /
 * __fmul_rn on the device, plain operators on the host; no a * b + c to
 * contract), so host and device make the same bytes.
 */
#ifndef SY_SYMOE_FP4ACT_H
#define SY_SYMOE_FP4ACT_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define SYF_FN static __host__ __device__ __forceinline__
#else
#define SYF_FN static inline
#endif

#define SYF_BLOCK 16
#define SYF_E2M1_MAX 6.0f
#define SYF_E4M3_MAX 448.0f
#define SYF_E4M3_MAX_CODE 0x7e

SYF_FN float syf_div(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fdiv_rn(a, b);
#else
    return a / b;
#endif
}

SYF_FN float syf_mul(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}

/* Round to nearest, ties to even, of 0 <= v < 2^22 (exact: v's fraction is exact in F32). */
SYF_FN float syf_rne_int(float v)
{
    const float fl = floorf(v), frac = v - fl;
    const int odd = (int)fl & 1;
    return frac > 0.5f || (frac == 0.5f && odd) ? fl + 1.0f : fl;
}

/*
 * The ue4m3 byte nearest f >= 0 (ties to the even code, which is the even
 * mantissa), saturating at 448 (0x7e). Normal codes keep 3 of the F32
 * mantissa's 23 bits; below 2^-6 the codes are m * 2^-9 (m = 0..7, and m =
 * 8 is 0x08 = 2^-6, the first normal code, so the carry is free).
 */
SYF_FN uint8_t syf_e4m3_from(float f)
{
    if (!(f > 0.0f))
        return 0;
    if (f >= SYF_E4M3_MAX)
        return SYF_E4M3_MAX_CODE;
    if (f < 0.015625f) /* 2^-6 */
        return (uint8_t)syf_rne_int(syf_mul(f, 512.0f));
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    /* RNE to 3 mantissa bits: add half an ulp of the kept part, minus one unless the kept lsb is odd. */
    u += 0x7ffffu + ((u >> 20) & 1u);
    const uint32_t code = (u >> 20) - ((127u - 7u) << 3); /* exponent rebased from 127 to 7 */
    return (uint8_t)(code > SYF_E4M3_MAX_CODE ? SYF_E4M3_MAX_CODE : code);
}

/*
 * The e2m1 nibble nearest r (ties to the even code: 0.25 -> 0, 0.75 -> 1.0,
 * 1.25 -> 1.0, 1.75 -> 2.0, 2.5 -> 2.0, 3.5 -> 4.0, 5 -> 4.0), saturating
 * at 6; bit 3 the sign, set only for a nonzero magnitude. r must not be NaN.
 */
SYF_FN uint8_t syf_e2m1_from(float r)
{
    const float a = fabsf(r);
    const uint8_t m = a <= 0.25f ? 0 : a < 0.75f ? 1 : a <= 1.25f ? 2 : a < 1.75f ? 3 : a <= 2.5f ? 4 : a < 3.5f ? 5
                    : a <= 5.0f ? 6 : 7;
    return (uint8_t)(m && r < 0.0f ? m | 8u : m);
}

/* E4M3 byte to F32 (bias 7, subnormals m * 2^-9): device_quant.h's syq_fp8_to_f32 for positive codes. */
SYF_FN float syf_e4m3_value(uint8_t s)
{
    const uint32_t e = (s >> 3) & 0xfu, man = s & 7u;
    float f;
    if (e == 0)
        return (float)man * 0x1p-9f;
    const uint32_t u = ((e + 120u) << 23) | (man << 20);
    memcpy(&f, &u, sizeof f);
    return f;
}

/* E2M1 nibble to F32. */
SYF_FN float syf_e2m1_value(unsigned nib)
{
    const unsigned e = (nib >> 1) & 3u, m = nib & 1u;
    const float mag = e == 0 ? 0.5f * (float)m : (float)(2u + m) * (float)(1u << e) * 0.25f;
    return (nib & 8u) ? -mag : mag;
}

/* Scale bytes per row: one per 16 elements, the last block possibly partial. */
SYF_FN int64_t syf_n_scales(int64_t k)
{
    return (k + SYF_BLOCK - 1) / SYF_BLOCK;
}

/* The row's global scale from its largest magnitude (NaN when the row is not finite). */
SYF_FN float syf_global(float amax)
{
    return syf_div(amax, SYF_E2M1_MAX * SYF_E4M3_MAX);
}

/*
 * One block of n <= 16 elements x[0..n) with the row's global g: its scale
 * byte, and its codes ORed into codes (element j of the block at nibble j,
 * the block starting at an even element; codes zeroed by the caller).
 */
SYF_FN uint8_t syf_block(const float *x, int n, float g, uint8_t *codes)
{
    if (!(g > 0.0f)) /* zero row, or NaN row: all zero */
        return 0;
    float bamax = 0.0f;
    for (int j = 0; j < n; j++)
        bamax = fmaxf(bamax, fabsf(x[j]));
    const uint8_t s = syf_e4m3_from(syf_div(syf_div(bamax, SYF_E2M1_MAX), g));
    const float d = syf_mul(syf_e4m3_value(s), g);
    if (!(d > 0.0f))
        return s;
    for (int j = 0; j < n; j++)
        codes[j / 2] |= (uint8_t)(syf_e2m1_from(syf_div(x[j], d)) << ((j & 1) * 4));
    return s;
}

/*
 * Quantises one row x[0..k): codes [(k + 1) / 2] bytes, scales
 * [syf_n_scales(k)] bytes, *global. Returns the global scale.
 */
SYF_FN float syf_quant_row(const float *x, int64_t k, uint8_t *codes, uint8_t *scales, float *global)
{
    float amax = 0.0f;
    int finite = 1;
    for (int64_t i = 0; i < k; i++) {
        finite &= isfinite(x[i]) ? 1 : 0;
        amax = fmaxf(amax, fabsf(x[i]));
    }
    const float g = finite ? syf_global(amax) : NAN;
    for (int64_t i = 0; i < (k + 1) / 2; i++)
        codes[i] = 0;
    for (int64_t b = 0; b < syf_n_scales(k); b++) {
        const int64_t k0 = b * SYF_BLOCK;
        const int n = (int)(k - k0 < SYF_BLOCK ? k - k0 : SYF_BLOCK);
        scales[b] = syf_block(x + k0, n, g, codes + k0 / 2);
    }
    *global = g;
    return g;
}

/* Element i of a quantised row: q * (s * g), the weights' order of roundings. */
SYF_FN float syf_value(const uint8_t *codes, const uint8_t *scales, float g, int64_t i)
{
    const float q = syf_e2m1_value((unsigned)(codes[i / 2] >> ((i & 1) * 4)) & 0xfu);
    return syf_mul(q, syf_mul(syf_e4m3_value(scales[i / SYF_BLOCK]), g));
}

/* x[0..k) replaced by its quantised values (the portable path of the mode); codes and scales are scratch of the row's sizes. */
SYF_FN void syf_fake_quant_row(float *x, int64_t k, uint8_t *codes, uint8_t *scales)
{
    float g;
    syf_quant_row(x, k, codes, scales, &g);
    for (int64_t i = 0; i < k; i++)
        x[i] = syf_value(codes, scales, g, i);
}

/*
 * [moe] activations = mxfp4, for MXFP4 experts (gpt-oss): one row becomes
 * OCP MXFP4 (E2M1 codes, an E8M0 scale per 32 along K, no global scale):
 *
 *   scale   per block of 32: s = 2^e, e the least integer with
 *           6 * 2^e >= bamax (so no code saturates), clamped to
 *           [-127, 127]; byte e + 127. An all-zero block gets 127 (1.0).
 *   code    e2m1(x / s), exact division by a power of two, then
 *           syf_e2m1_from's round to nearest even
 *   value   q * s (exact: a power-of-two scale)
 *
 * A row holding a NaN or an infinity gets scale bytes 0xff (E8M0's NaN) and
 * zero codes: every value is NaN. SYX_ names the per-32 layout.
 */
#define SYX_BLOCK 32
#define SYX_E8M0_NAN 0xff

/* E8M0 byte to F32: 2^(b - 127), b = 0 the F32 subnormal 2^-127, 0xff NaN (device_quant.h's syq_e8m0_to_f32). */
SYF_FN float syx_e8m0_value(uint8_t b)
{
    if (b == SYX_E8M0_NAN)
        return NAN;
    const uint32_t u = b ? (uint32_t)b << 23 : 0x00400000u;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* The E8M0 byte of a block whose largest magnitude is bamax (finite, >= 0). */
SYF_FN uint8_t syx_e8m0_from(float bamax)
{
    if (!(bamax > 0.0f))
        return 127;
    int x;
    const float m = frexpf(bamax, &x); /* bamax = m 2^x, 0.5 <= m < 1: 6 2^(x-3) = 0.75 2^x */
    int e = m <= 0.75f ? x - 3 : x - 2;
    e = e < -127 ? -127 : e > 127 ? 127 : e;
    return (uint8_t)(e + 127);
}

/* Scale bytes per row: one per 32 elements, the last block possibly partial. */
SYF_FN int64_t syx_n_scales(int64_t k)
{
    return (k + SYX_BLOCK - 1) / SYX_BLOCK;
}

/* One block of n <= 32 elements (finite row: finite = 1): its scale byte, codes ORed in as syf_block's. */
SYF_FN uint8_t syx_block(const float *x, int n, int finite, uint8_t *codes)
{
    if (!finite)
        return SYX_E8M0_NAN;
    float bamax = 0.0f;
    for (int j = 0; j < n; j++)
        bamax = fmaxf(bamax, fabsf(x[j]));
    const uint8_t s = syx_e8m0_from(bamax);
    const float d = syx_e8m0_value(s);
    for (int j = 0; j < n; j++)
        codes[j / 2] |= (uint8_t)(syf_e2m1_from(syf_div(x[j], d)) << ((j & 1) * 4));
    return s;
}

/* Quantises one row x[0..k) to MXFP4: codes [(k + 1) / 2] bytes, scales [syx_n_scales(k)] bytes. */
SYF_FN void syx_quant_row(const float *x, int64_t k, uint8_t *codes, uint8_t *scales)
{
    int finite = 1;
    for (int64_t i = 0; i < k; i++)
        finite &= isfinite(x[i]) ? 1 : 0;
    for (int64_t i = 0; i < (k + 1) / 2; i++)
        codes[i] = 0;
    for (int64_t b = 0; b < syx_n_scales(k); b++) {
        const int64_t k0 = b * SYX_BLOCK;
        const int n = (int)(k - k0 < SYX_BLOCK ? k - k0 : SYX_BLOCK);
        scales[b] = syx_block(x + k0, n, finite, codes + k0 / 2);
    }
}

/* Element i of an MXFP4 row: q * 2^e. */
SYF_FN float syx_value(const uint8_t *codes, const uint8_t *scales, int64_t i)
{
    const float q = syf_e2m1_value((unsigned)(codes[i / 2] >> ((i & 1) * 4)) & 0xfu);
    return syf_mul(q, syx_e8m0_value(scales[i / SYX_BLOCK]));
}

/* x[0..k) replaced by its MXFP4 values; codes and scales are scratch of the row's sizes. */
SYF_FN void syx_fake_quant_row(float *x, int64_t k, uint8_t *codes, uint8_t *scales)
{
    syx_quant_row(x, k, codes, scales);
    for (int64_t i = 0; i < k; i++)
        x[i] = syx_value(codes, scales, i);
}

#endif
