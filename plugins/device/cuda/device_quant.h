/*
 * FP8 E4M3 and NVFP4 weights on device/cuda (and MXFP4's E8M0 scales for
 * moe/cuda's tile load): the element decoders and the
 * scale indexing, written once for the kernels (quant_kern.cu) and for host
 * C (tests/unit/test_cuda_quant_index.c checks them against the CPU
 * plugin's syk_qweight_row, which defines the formats; see sykquant.h).
 *
 * Layout on the GPU (one cudaMalloc, made by prepare_weight): the packed
 * codes, row after row with no padding ([N, K] bytes for FP8, [N, K/2] for
 * NVFP4 with element 2i in the low nibble), then at SYQ_SCALE_ALIGN bytes
 * the scales, row-major [ceil(N/b0), ceil(K/b1)]: F32 for FP8, E4M3 bytes
 * for NVFP4 (b0 = 1, b1 = 16). A weight element is q * (scale * global):
 * the scale is multiplied by the global scale first, in F32, exactly as
 * the CPU kernels fold it.
 */
#ifndef SY_DEVICE_QUANT_H
#define SY_DEVICE_QUANT_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#include <cuda_fp16.h>
#define SYQ_FN static __host__ __device__ __forceinline__
#else
#define SYQ_FN static inline
#endif

/* Where the scales start after the codes (cudaMalloc's own alignment). */
#define SYQ_SCALE_ALIGN 256

/* E4M3, bias 7, the same bit arithmetic as syk_fp8_e4m3_to_f32 (0x7f/0xff read as +-480 there too). */
SYQ_FN float syq_fp8_to_f32(uint8_t b)
{
    const uint32_t e = (b >> 3) & 0xfu, man = b & 7u;
    float f;
    if (e == 0) {
        f = (float)man * 0x1p-9f;
    } else {
        const uint32_t u = ((e + 120u) << 23) | (man << 20);
        memcpy(&f, &u, sizeof f);
    }
    return (b & 0x80u) ? -f : f;
}

/* E8M0 (MXFP4's block scale): 2^(b - 127), b = 0 the F32 subnormal 2^-127, 0xFF NaN (as syk_e8m0_to_f32). */
SYQ_FN float syq_e8m0_to_f32(uint8_t b)
{
    const uint32_t u = b == 0 ? 0x00400000u : b == 0xffu ? 0x7fc00000u : (uint32_t)b << 23;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* E2M1 nibble: 0, 0.5, 1, 1.5, 2, 3, 4, 6 (bit 3 the sign), computed instead of a table so device code needs no constant. */
SYQ_FN float syq_e2m1_to_f32(unsigned nib)
{
    const unsigned e = (nib >> 1) & 3u, m = nib & 1u;
    const float mag = e == 0 ? 0.5f * (float)m : (float)(2u + m) * (float)(1u << e) * 0.25f;
    return (nib & 8u) ? -mag : mag;
}

/* Bytes of codes in one weight row. */
SYQ_FN int64_t syq_row_bytes(int fp4, int64_t k)
{
    return fp4 ? k / 2 : k;
}

/* Index of the first scale of a row's block of rows (the scale grid is [ceil(N/b0), ceil(K/b1)]). */
SYQ_FN int64_t syq_scale_row_base(int64_t row, int64_t k, int64_t b0, int64_t b1)
{
    return (row / b0) * ((k + b1 - 1) / b1);
}

/* The scale column of element col; 32-bit division (linear refuses K beyond INT32_MAX), once per 16 elements. */
SYQ_FN int64_t syq_scale_col(int64_t col, int64_t b1)
{
    return (int64_t)((uint32_t)col / (uint32_t)b1);
}

/* Index into the scale grid of element (row, col). */
SYQ_FN int64_t syq_scale_index(int64_t row, int64_t col, int64_t k, int64_t b0, int64_t b1)
{
    return syq_scale_row_base(row, k, b0, b1) + syq_scale_col(col, b1);
}

/*
 * The kernels' fast decode: codes become F16 bit patterns by shifts alone,
 * then the hardware widens F16 to F32 exactly. Each 16-bit half of v holds
 * one code in its low bits; the result's halves hold code * 2^-8 (E4M3: its
 * exponent and mantissa moved into F16's, bias 15 instead of 7, subnormals
 * and 0x7f = 480 included) or code * 2^-14 (E2M1). The power of two goes
 * into the scale, so q * scale is still one rounding of the same product
 * the CPU computes.
 */
#define SYQ_FP8_F16_UNSCALE 256.0f
#define SYQ_FP4_F16_UNSCALE 16384.0f

SYQ_FN uint32_t syq_fp8x2_to_f16x2(uint32_t v)
{
    return ((v & 0x00800080u) << 8) | ((v & 0x007f007fu) << 7);
}

SYQ_FN uint32_t syq_fp4x2_to_f16x2(uint32_t v)
{
    return ((v & 0x00080008u) << 12) | ((v & 0x00070007u) << 9);
}

/* The scale of element (row, col) with the global scale folded in (F32 scales for FP8, E4M3 for NVFP4). */
SYQ_FN float syq_scale(const void *scale, int fp4, int64_t row, int64_t col, int64_t k, int64_t b0, int64_t b1,
                       float global)
{
    const int64_t i = syq_scale_index(row, col, k, b0, b1);
    const float s = fp4 ? syq_fp8_to_f32(((const uint8_t *)scale)[i]) : ((const float *)scale)[i];
    return s * global;
}

/* MXFP4: the E8M0 scale of element (row, col) times the global scale, in F32 (as syk__qscale folds it). */
SYQ_FN float syq_e8m0_scale(const void *scale, int64_t row, int64_t col, int64_t k, int64_t b0, int64_t b1, float global)
{
    return syq_e8m0_to_f32(((const uint8_t *)scale)[syq_scale_index(row, col, k, b0, b1)]) * global;
}

/* The code of element col of a row (NVFP4: element 2i in the low nibble of byte i, as the CPU reads it). */
SYQ_FN float syq_code(const uint8_t *row, int fp4, int64_t col)
{
    if (fp4)
        return syq_e2m1_to_f32((unsigned)(row[col / 2] >> ((col & 1) * 4)) & 0xfu);
    return syq_fp8_to_f32(row[col]);
}

/* The two F16 values of u (low half first) widened to F32, exactly. */
SYQ_FN void syq_f16x2_to_f32(uint32_t u, float *lo, float *hi)
{
#ifdef __CUDA_ARCH__
    __half2 h;
    memcpy(&h, &u, sizeof h);
    const float2 f = __half22float2(h);
    *lo = f.x;
    *hi = f.y;
#else
    for (int i = 0; i < 2; i++) {
        const uint32_t b = (u >> (16 * i)) & 0xffffu, e = (b >> 10) & 31u, m = b & 1023u;
        /* F16 normal (1024 + m) * 2^(e - 25), subnormal m * 2^-24; the decoders never make e = 31 */
        float v = (float)(e ? m | 1024u : m) * (1.0f / 16777216.0f);
        for (uint32_t j = 1; j < e; j++)
            v *= 2.0f;
        v = (b & 0x8000u) ? -v : v;
        *(i ? hi : lo) = v;
    }
#endif
}

/* One rounding of a * b: no contraction into a neighbouring add on either side. */
SYQ_FN float syq_mul(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}

/*
 * Sixteen weights of row wr from column k0 (a multiple of 16) times their
 * scale s (global folded in); zeros past k. vec8: k % 16 == 0, so every
 * FP8 row starts 16-byte aligned (NVFP4 rows, K % 16 == 0 always, 8-byte
 * aligned) and a whole chunk is one vector load on the GPU.
 */
SYQ_FN void syq_load16(const uint8_t *wr, int fp4, int vec8, int64_t k0, int64_t k, float s, float *w)
{
    if (fp4) {
        uint32_t words[2];
#ifdef __CUDA_ARCH__
        const uint2 v = *(const uint2 *)(wr + k0 / 2);
        words[0] = v.x, words[1] = v.y;
#else
        memcpy(words, wr + k0 / 2, sizeof words); /* little-endian, as the GPU reads it */
#endif
        const float su = s * SYQ_FP4_F16_UNSCALE;
        for (int h = 0; h < 2; h++)     /* nibble t of word h is element 8h + t: pairs (t, t + 4) share one F16x2 */
            for (int t = 0; t < 4; t++) {
                float lo, hi;
                syq_f16x2_to_f32(syq_fp4x2_to_f16x2(words[h] >> (4 * t)), &lo, &hi);
                w[8 * h + t] = syq_mul(lo, su);
                w[8 * h + t + 4] = syq_mul(hi, su);
            }
    } else if (vec8 && k0 + 16 <= k) {
        uint32_t words[4];
#ifdef __CUDA_ARCH__
        const uint4 v = *(const uint4 *)(wr + k0);
        words[0] = v.x, words[1] = v.y, words[2] = v.z, words[3] = v.w;
#else
        memcpy(words, wr + k0, sizeof words);
#endif
        const float su = s * SYQ_FP8_F16_UNSCALE;
        for (int h = 0; h < 4; h++)     /* byte t of word h is element 4h + t: pairs (t, t + 2) share one F16x2 */
            for (int t = 0; t < 2; t++) {
                float lo, hi;
                syq_f16x2_to_f32(syq_fp8x2_to_f16x2(words[h] >> (8 * t)), &lo, &hi);
                w[4 * h + t] = syq_mul(lo, su);
                w[4 * h + t + 2] = syq_mul(hi, su);
            }
    } else {
        for (int b = 0; b < 16; b++)
            w[b] = k0 + b < k ? syq_mul(syq_fp8_to_f32(wr[k0 + b]), s) : 0.0f;
    }
}

/* The scale of the chunk at column k0 of a row whose scale row starts at srow (syq_scale_row_base), global folded in. */
SYQ_FN float syq_chunk_scale(const void *scale, int fp4, int64_t srow, int64_t k0, int64_t b1, float global)
{
    const int64_t i = srow + syq_scale_col(k0, b1);
    const float s = fp4 ? syq_fp8_to_f32(((const uint8_t *)scale)[i]) : ((const float *)scale)[i];
    return s * global;
}

#endif
