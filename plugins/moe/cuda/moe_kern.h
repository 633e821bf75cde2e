/*
 * Launchers of the moe/cuda kernels (moe_kern.cu), callable from C. All
 * pointers are device memory. A is the number of (token, expert)
 * assignments of the pass, grouped by expert.
 */
#ifndef SY_MOE_KERN_H
#define SY_MOE_KERN_H

#include <stddef.h>
#include <stdint.h>

#include "moe_route_dev.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The grouped GEMM's CUDA-core (fmaf) tile variants, one X-macro so that the
 * kernels (moe_kern.cu) and the host's table of names and limits
 * (moe_tiles.c) cannot disagree:
 *   X(cols, rows, k, thread_cols, thread_rows)
 * cols: output columns per block, rows: assignment rows per block (an
 * expert's tokens), k: the slice of K staged in shared memory per step;
 * each of (cols / thread_cols) x (rows / thread_rows) threads computes
 * thread_cols x thread_rows outputs. Every variant sums k sequentially per
 * output (one running fmaf from k = 0 up), so all give bit-identical
 * results; they differ in work per block only. The first is the default:
 * today's 64x32x32, good for prefill and fine for decode; the 8-row tiles
 * waste fewer threads when an expert has one or two tokens (decode), the
 * 64-row ones reuse each weight tile over more tokens (long prefill).
 */
#define SYMK_VARIANTS(X)  \
    X(64, 32, 32, 4, 2)   \
    X(64, 8, 32, 2, 1)    \
    X(128, 8, 32, 4, 1)   \
    X(64, 16, 32, 4, 1)   \
    X(64, 64, 32, 4, 4)   \
    X(128, 32, 32, 4, 4)  \
    X(128, 64, 16, 8, 4)

/*
 * Tensor-core tiles (not bit-identical to the fmaf ones: within
 * SYMT_TC_BOUND of them, moe_tiles.h). Each activation x is fed as
 * bf16(x) + bf16(x - bf16(x)) and each weight w, unless it is BF16, as
 * the same pair (F16 fits such a pair exactly; F32, FP8 and NVFP4
 * elements, q * scale * global in F32, keep ~16 significant bits), with
 * F32 accumulation: hi*hi + lo*hi + hi*lo, about 2^-17 relative per
 * product.
 *   X(cols, rows, k, warps_m, warps_n): mma.sync.m16n8k16 (sm_80 and
 *   newer, compiled with the fmaf tiles), warps_m x warps_n warps, each
 *   (cols / warps_m) x (rows / warps_n) outputs.
 */
#define SYMK_MMA_VARIANTS(X) \
    X(64, 8, 32, 4, 1)       \
    X(64, 32, 32, 2, 2)      \
    X(128, 64, 32, 4, 2)
/*
 *   X(cols, rows, k): wgmma.mma_async.m64n<rows>k16 (sm_90a only,
 *   moe_wgmma.cu), cols / 64 warpgroups of 128 threads, operands from
 *   shared memory through matrix descriptors.
 */
#define SYMK_WGMMA_VARIANTS(X) \
    X(128, 16, 32)             \
    X(128, 64, 32)
/*
 * Block-scaled FP4 tiles ([moe] activations = nvfp4 on NVFP4 experts,
 * or activations = mxfp4 on MXFP4 experts, each tile's MX form:
 * kind::mxf4 .scale_vec::2X with ue8m0 scales per 32 k, global 1):
 * mma.sync.m16n8k64 kind::mxf4nvf4 with ue4m3 scales per 16 k
 * (sm_120a only, moe_fp4.cu), the experts' codes and scales as stored times
 * the activations' NVFP4 codes and scales (symoe_fp4act.h); each product
 * of two e2m1 codes and two ue4m3 scales is exact in F32, the global
 * scales multiply the sum. Within SYMT_TC_BOUND of the fmaf tiles run on
 * the dequantised activations (only the order of the sum differs).
 *   X(cols, rows, k, warps_m, warps_n): k the slice of K staged per step
 *   (a multiple of 64), warps as the mma.sync tiles.
 */
#define SYMK_FP4_VARIANTS(X) \
    X(64, 8, 128, 4, 1)      \
    X(64, 32, 128, 2, 2)     \
    X(128, 64, 128, 4, 2)

#define SYMK_COUNT_VARIANT(c, r, k, tc, tr) +1
#define SYMK_COUNT_VARIANT3(c, r, k) +1
enum {
    SYMK_N_FMAF = 0 SYMK_VARIANTS(SYMK_COUNT_VARIANT),
    SYMK_N_MMA = 0 SYMK_MMA_VARIANTS(SYMK_COUNT_VARIANT),
    SYMK_N_WGMMA = 0 SYMK_WGMMA_VARIANTS(SYMK_COUNT_VARIANT3),
    SYMK_N_FP4 = 0 SYMK_FP4_VARIANTS(SYMK_COUNT_VARIANT),
    /* Indices: the fmaf tiles, then the mma ones, the wgmma ones, the fp4 ones. */
    SYMK_FIRST_FP4 = SYMK_N_FMAF + SYMK_N_MMA + SYMK_N_WGMMA,
    SYMK_N_VARIANTS = SYMK_FIRST_FP4 + SYMK_N_FP4
};

/* One block row of the grouped GEMM: rows [row0, row0 + rows) of the assignments, all routed to expert. */
typedef struct symk_tile {
    int32_t expert, row0, rows;
} symk_tile;

/* What the compiler made of a variant's kernel on this device (cudaFuncGetAttributes). */
typedef struct symk_attrs {
    int64_t static_smem; /* bytes of __shared__ arrays */
    int regs;            /* registers per thread */
    int max_threads;     /* the most threads per block this kernel can launch with */
} symk_attrs;

/*
 * 0 on success; else the cudaError_t of cudaFuncGetAttributes (for a wgmma
 * variant on a GPU other than 9.0: cudaErrorInvalidDeviceFunction or
 * cudaErrorNoKernelImageForDevice, its module holding only sm_90a code).
 */
int symk_variant_attrs(int variant, symk_attrs *out);
/* The wgmma variants (moe_wgmma.cu), v counted from 0 among them. */
int symk_wgmma_attrs(int v, symk_attrs *out);
/* The fp4 variants (moe_fp4.cu), v counted from 0 among them; only sm_120a code. */
int symk_fp4_attrs(int v, symk_attrs *out);

/* Weight dtypes beyond syc_load's F32/F16/BF16 (sy_dtype's numbers). */
#define SYMK_FP8 3
#define SYMK_FP4 4

/*
 * The scales of one matrix of every expert (FP8 / NVFP4 / MXFP4, device
 * memory): expert e's are scale + e * scale_stride (elements: F32 for FP8,
 * E4M3 bytes for NVFP4, E8M0 bytes for MXFP4 when e8m0 is set, b1 = 32),
 * row-major [ceil(M/b0), ceil(K/b1)]; its codes are
 * w + e * M * row_bytes, row after row (plugins/device/cuda/device_quant.h's
 * layout); global[e] its global scale. An element is q * (scale * global),
 * the CPU plugin's value.
 */
typedef struct symk_qw {
    const void *scale;
    const float *global;
    int64_t scale_stride;
    int32_t b0, b1;
    int32_t e8m0; /* FP4 data with E8M0 scales (MXFP4); the fp4mma tiles then run their MX form */
} symk_qw;

/*
 * The pass's sizes the device routing wrote (symk_route_group): how many
 * assignment rows this instance computes and how many row tiles they make.
 * With NULL the launchers take their count arguments as exact.
 */
typedef struct symk_counts {
    int32_t rows, tiles;
} symk_counts;

/*
 * Activation rows quantised to NVFP4 (symoe_fp4act.h), device memory: row
 * a's codes at codes + a * ld_codes (element 2i in the low nibble of byte
 * i), its scales at scales + a * ld_scales (E4M3, one per 16 elements),
 * its global scale global[a]. With mx set, MXFP4 rows instead (syx_: E8M0
 * scales, one per 32 elements; global[a] = 1), for MXFP4 experts.
 */
typedef struct symk_qa {
    uint8_t *codes, *scales;
    float *global;
    int64_t ld_codes, ld_scales;
    int32_t mx;
} symk_qa;

/* ld_codes and ld_scales for rows of K elements (multiples of 16 bytes). */
#define SYMK_QA_LD_CODES(K) (((K) + 31) / 32 * 16)
#define SYMK_QA_LD_SCALES(K) (((K) + 255) / 256 * 16)

/*
 * Quantises rows [0, rows) of x [rows, K] (cnt->rows when cnt is not NULL)
 * into qa and replaces each by its dequantised values, which the other
 * tiles then multiply: every tile computes on the same activations.
 */
void symk_quant_rows(float *x, int64_t rows, int64_t K, const symk_qa *qa, const symk_counts *cnt);

/* xe[a] = x[tok[a]] for a < A (a < cnt->rows when cnt is not NULL). */
void symk_gather(const float *x, int64_t ldx, const int32_t *tok, int64_t A, int64_t hidden, float *xe,
                 const symk_counts *cnt);
/*
 * out[a, :M] = xe[a, :K] . W_e^T for the tiles' rows, W_e = w + e * M * K
 * (row-major [M, K] of dtype wdt per expert; FP8 / NVFP4 with q, else q is
 * NULL); n_tiles tiles on the device (at most n_tiles, the first
 * cnt->tiles of them, when cnt is not NULL), each of at most the
 * variant's rows. An fp4 variant reads xq (xe quantised by
 * symk_quant_rows; NVFP4 weights, K a multiple of 16) instead of xe; the
 * others ignore xq.
 */
void symk_grouped_gemm(int variant, const float *xe, const symk_qa *xq, int64_t K, const void *w, int wdt,
                       const symk_qw *q, int64_t M, const symk_tile *tiles, int64_t n_tiles, const symk_counts *cnt,
                       float *out);
/* The fp4 part of symk_grouped_gemm (moe_fp4.cu), v counted from 0 among the fp4 variants. */
void symk_fp4_gemm(int v, const symk_qa *xq, int64_t K, const void *w, const symk_qw *q, int64_t M,
                   const symk_tile *tiles, int64_t n_tiles, const symk_counts *cnt, float *out);
/* The wgmma part of symk_grouped_gemm (moe_wgmma.cu), v counted from 0 among the wgmma variants. */
void symk_wgmma_gemm(int v, const float *xe, int64_t K, const void *w, int wdt, const symk_qw *q, int64_t M,
                     const symk_tile *tiles, int64_t n_tiles, const symk_counts *cnt, float *out);
/* g = silu(g) * u over rows x n (rows: at most A, cnt->rows when cnt is not NULL). */
void symk_silu_mul(float *g, const float *u, int64_t rows, int64_t n, const symk_counts *cnt);
/* The activations of sy_moe_activation (plugin.h). */
#define SYMK_ACT_SILU 0
#define SYMK_ACT_SWIGLU_CLAMP 1
/*
 * The expert epilogue after the gate and up GEMMs, per row tile (n_tiles,
 * the first cnt->tiles when cnt is not NULL): gb and ub (F32 [experts][n],
 * device memory, both or neither NULL) added to g and u of the tile's
 * expert, then g = act(g, u): silu(g) * u, or gpt-oss's
 * (clamp(u, -limit, limit) + 1) * min(g, limit) * sigmoid(alpha min(g, limit)).
 */
void symk_bias_act(int act, float alpha, float limit, float *g, const float *u, const float *gb, const float *ub,
                   int64_t n, const symk_tile *tiles, int64_t n_tiles, const symk_counts *cnt);
/* y[row] += db[expert] over each tile's rows (db F32 [experts][n], device memory): the down projection's bias. */
void symk_add_bias(float *y, const float *db, int64_t n, const symk_tile *tiles, int64_t n_tiles, const symk_counts *cnt);
/*
 * Device routing of T tokens (moe_route_dev.h per token, one thread each;
 * logits [T, ldl], bias [E] or NULL, scratch sized by symk_route_scratch)
 * into ids and wts [T, top_k]; then one block groups the assignments to
 * experts [e0, e0 + EL) by expert, tokens ascending (the host path's
 * order): assign_tok [A], slot_of [A] (-1: another rank's expert), tiles of
 * at most rows_per_tile rows (at most max_tiles), and *cnt. Returns 0,
 * or -1 when EL is over SYMK_GROUP_MAX_EXPERTS.
 */
#define SYMK_GROUP_MAX_EXPERTS 1024
int symk_route_group(const symr_params *rp, const float *logits, int64_t ldl, int64_t T, const double *bias, void *scratch,
                     int32_t *ids, float *wts, int32_t e0, int32_t EL, int32_t rows_per_tile, int64_t max_tiles,
                     int32_t *assign_tok, int32_t *slot_of, symk_tile *tiles, symk_counts *cnt);
/* Bytes of device scratch symk_route_group needs for T tokens of E experts in n_group groups. */
size_t symk_route_scratch(int64_t T, int32_t E, int32_t n_group);
/* out[t] = sum_k wts[t * K + k] * ye[slot[t * K + k]] for t < T; a slot < 0 (an expert another rank holds) adds nothing. */
void symk_combine(const float *ye, int64_t hidden, const int32_t *slot, const float *wts, int64_t T, int top_k,
                  float *out, int64_t ldo);

#ifdef __cplusplus
}
#endif

#endif
