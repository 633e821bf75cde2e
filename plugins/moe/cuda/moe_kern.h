/*
 * Launchers of the moe/cuda kernels (moe_kern.cu), callable from C. All
 * pointers are device memory. A is the number of (token, expert)
 * assignments of the pass, grouped by expert.
 */
#ifndef SY_MOE_KERN_H
#define SY_MOE_KERN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The grouped GEMM's compiled tile variants, one X-macro so that the
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

#define SYMK_COUNT_VARIANT(c, r, k, tc, tr) +1
enum { SYMK_N_VARIANTS = 0 SYMK_VARIANTS(SYMK_COUNT_VARIANT) };

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

/* 0 on success; else the cudaError_t of cudaFuncGetAttributes. */
int symk_variant_attrs(int variant, symk_attrs *out);

/* xe[a] = x[tok[a]] for a < A. */
void symk_gather(const float *x, int64_t ldx, const int32_t *tok, int64_t A, int64_t hidden, float *xe);
/*
 * out[a, :M] = xe[a, :K] . W_e^T for the tiles' rows, W_e = w + e * M * K
 * (row-major [M, K] of dtype wdt per expert); n_tiles tiles on the device,
 * each of at most the variant's rows.
 */
void symk_grouped_gemm(int variant, const float *xe, int64_t K, const void *w, int wdt, int64_t M,
                       const symk_tile *tiles, int64_t n_tiles, float *out);
/* g = silu(g) * u over A x n. */
void symk_silu_mul(float *g, const float *u, int64_t n);
/* out[t] = sum_k wts[t * K + k] * ye[slot[t * K + k]] for t < T; a slot < 0 (an expert another rank holds) adds nothing. */
void symk_combine(const float *ye, int64_t hidden, const int32_t *slot, const float *wts, int64_t T, int top_k,
                  float *out, int64_t ldo);

#ifdef __cplusplus
}
#endif

#endif
