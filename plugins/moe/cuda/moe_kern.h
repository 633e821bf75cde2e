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

/* The grouped GEMM's tile (compiled in; see moe_kern.cu). */
#define SYMK_TILE_M 64 /* output columns per block */
#define SYMK_TILE_N 32 /* assignment rows per block */
#define SYMK_TILE_K 32

/* One block row of the grouped GEMM: rows [row0, row0 + rows) of the assignments, all routed to expert. */
typedef struct symk_tile {
    int32_t expert, row0, rows;
} symk_tile;

/* xe[a] = x[tok[a]] for a < A. */
void symk_gather(const float *x, int64_t ldx, const int32_t *tok, int64_t A, int64_t hidden, float *xe);
/*
 * out[a, :M] = xe[a, :K] . W_e^T for the tiles' rows, W_e = w + e * M * K
 * (row-major [M, K] of dtype wdt per expert); n_tiles tiles on the device.
 */
void symk_grouped_gemm(const float *xe, int64_t K, const void *w, int wdt, int64_t M, const symk_tile *tiles,
                       int64_t n_tiles, float *out);
/* g = silu(g) * u over A x n. */
void symk_silu_mul(float *g, const float *u, int64_t n);
/* out[t] = sum_k wts[t * K + k] * ye[slot[t * K + k]] for t < T. */
void symk_combine(const float *ye, int64_t hidden, const int32_t *slot, const float *wts, int64_t T, int top_k,
                  float *out, int64_t ldo);

#ifdef __cplusplus
}
#endif

#endif
