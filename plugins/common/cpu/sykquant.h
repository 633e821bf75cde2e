/*
 * Quantised weights in libsykern: FP8 E4M3 (per-tensor or block scales, as
 * DeepSeek-V3 ships them), NVFP4 (E2M1 nibbles, an FP8 scale per 16
 * elements and a global F32 scale, as NVIDIA ModelOpt writes them) and
 * MXFP4 (the same nibbles, an E8M0 power-of-two scale per 32, as gpt-oss
 * ships its experts). NVFP4 and MXFP4 are one FP4 path: only the scale's
 * decode and block width differ.
 *
 * The weight keeps its checkpoint bytes; the kernels dequantise in
 * registers (w = q * scale, one F32 multiply per element) and accumulate in
 * F32 like the float kernels. The arithmetic of one output element depends
 * only on the ISA and on k (slices of SYK_KC, see sykern.h), never on the
 * batch or on which tile shape computed it: batch-invariant.
 *
 * Layout, carried by the weight's sy_tensor:
 *  - dtype FP8_E4M3: data [N, K] bytes; scale F32 [ceil(N/b0), ceil(K/b1)],
 *    scale_block = {b0, b1}; per-tensor is b0 = N, b1 = K (one scale).
 *  - dtype FP4_E2M1: logical shape [N, K], data K/2 bytes a row (element 2i
 *    in the low nibble); scale FP8_E4M3 [N, K/16] (scale_block {1, 16});
 *    global_scale multiplies every element. MXFP4: the same data, scale
 *    E8M0 [N, K/32] (scale_block {1, 32}; 2^(byte - 127), 0xFF NaN).
 * In all, b1 is a multiple of 16 or covers all of K, so a 16-element
 * vector never straddles two scales.
 */
#ifndef SY_CPU_SYKQUANT_H
#define SY_CPU_SYKQUANT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "sykern.h"

static inline int syk_wdtype_quant(sy_dtype d)
{
    return d == SY_DTYPE_FP8_E4M3 || d == SY_DTYPE_FP4_E2M1;
}

/*
 * 0 if w's quantisation fields describe a layout the kernels read (above);
 * else -1 and why says what was expected and found.
 */
int syk_qweight_check(const sy_tensor *w, char *why, size_t why_len);

/* E4M3 (bias 7, no infinities); the NaN codes 0x7f/0xff read as +-480, as the SIMD paths read them. */
static inline float syk_fp8_e4m3_to_f32(uint8_t b)
{
    const uint32_t e = (b >> 3) & 0xfu, man = b & 7u;
    float f;
    if (e == 0) {
        f = (float)man * 0x1p-9f; /* subnormal: man * 2^-6 / 8 */
    } else {
        const uint32_t u = ((e + 120u) << 23) | (man << 20);
        memcpy(&f, &u, sizeof f);
    }
    return (b & 0x80u) ? -f : f;
}

/* E8M0 (OCP MX): 2^(b - 127); b = 0 is 2^-127 (an F32 subnormal), 0xFF NaN. */
static inline float syk_e8m0_to_f32(uint8_t b)
{
    const uint32_t u = b == 0 ? 0x00400000u : b == 0xffu ? 0x7fc00000u : (uint32_t)b << 23;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* E2M1: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives (bit 3 the sign). */
static inline float syk_e2m1_to_f32(unsigned nibble)
{
    static const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    const float f = mag[nibble & 7u];
    return (nibble & 8u) ? -f : f;
}

/*
 * dst[i] = W[row][k0 + i] for i < n, dequantised exactly as the kernels do
 * (F32 q times the F32 scale). For tests, references and tools.
 */
void syk_qweight_row(const sy_tensor *w, int64_t row, int64_t k0, int64_t n, float *dst);

/*
 * One serial piece of a quantised product:
 *   out[i*ldo + j] (+)= sum_kk x[i*ldx + kk] * W[j0 + j][k0 + kk]
 * for i < n, j < m, kk < k; "+=" when accumulate. k0 is 0 or a multiple of
 * SYK_KC, and k is summed in SYK_KC slices like the float kernels.
 */
typedef struct syk_qcall {
    const float *x;
    int64_t ldx;
    const sy_tensor *w;
    int64_t j0, k0;
    float *out;
    int64_t ldo;
    int64_t n, m, k;
    int accumulate;
} syk_qcall;

typedef void (*syk_qgemm_fn)(const syk_qcall *c);

/* The kernel for (isa, dtype), or NULL when that ISA is not compiled in or dtype is not quantised. */
syk_qgemm_fn syk_qgemm_for(syk_isa isa, sy_dtype dt);
syk_qgemm_fn syk__qgemm_portable(sy_dtype dt);
syk_qgemm_fn syk__qgemm_avx2(sy_dtype dt);
syk_qgemm_fn syk__qgemm_avx512(sy_dtype dt);
/* avx512 with (vbmi = 1) or without the AVX512_VBMI nibble spread; NULL where vbmi is asked and absent. For tests. */
syk_qgemm_fn syk__qgemm_avx512_variant(sy_dtype dt, int vbmi);

/*
 * syk_gemm_tile for a quantised g (g->wq carries the scales): output rows
 * [r0, r1) and columns [c0, c1). Called by syk_gemm_tile.
 */
void syk_gemm_tile_q(const syk_kernels *kern, const syk_gemm *g, int64_t r0, int64_t r1, int64_t c0, int64_t c1);

/* Scale of weight row `row` for the vector starting at column kcol (global folded in). */
static inline float syk__qscale(const sy_tensor *w, int64_t row, int64_t kcol)
{
    const int64_t b0 = w->scale_block[0], b1 = w->scale_block[1];
    const int64_t ldsc = (w->shape[1] + b1 - 1) / b1;
    const int64_t idx = (row / b0) * ldsc + kcol / b1;
    if (w->scale_dtype == SY_DTYPE_F32)
        return ((const float *)w->scale)[idx] * w->global_scale;
    if (w->scale_dtype == SY_DTYPE_E8M0)
        return syk_e8m0_to_f32(((const uint8_t *)w->scale)[idx]) * w->global_scale;
    return syk_fp8_e4m3_to_f32(((const uint8_t *)w->scale)[idx]) * w->global_scale;
}

#endif
