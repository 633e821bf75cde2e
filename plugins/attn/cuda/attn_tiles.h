/*
 * Tile sizes of the CUDA attention kernels, one set per plugin variant
 * (SY_ATTN_SM = 80, 90 or 120, set by attn-cuda.mk), read by the kernels,
 * by the C glue (supports, launch) and by tools/check-cuda-smem.sh (through
 * SY_SMEM_QUERY in attn_kern.cuh). Pure integer macros, so the check can
 * evaluate them with the shell's arithmetic.
 *
 * Per-block shared memory limits (opt-in maximum): 163 KB on SM80,
 * 227 KB on SM90, 99 KB on SM120. The kernels use no static shared memory;
 * the dynamic amount at the largest supported problem (group 16, head dims
 * 256) is SY_ATTN_SMEM_MAX.
 */
#ifndef SY_ATTN_TILES_H
#define SY_ATTN_TILES_H

#define SY_ATTN_THREADS 128
#define SY_ATTN_MAX_GROUP 16 /* query heads per KV head */
#define SY_ATTN_MAX_DIM 256  /* head_dim and v_head_dim */
#define SY_ATTN_MAX_SPLITS 64 /* split-K: most splits of one token's context */

#if SY_ATTN_SM == 80
#define SY_ATTN_KV_TILE 32 /* KV positions staged in shared memory per step */
#define SY_ATTN_NAME "cuda-sm80"
#elif SY_ATTN_SM == 90
#define SY_ATTN_KV_TILE 64
#define SY_ATTN_NAME "cuda-sm90"
#elif SY_ATTN_SM == 120
#define SY_ATTN_KV_TILE 16
#define SY_ATTN_NAME "cuda-sm120"
#else
#error "SY_ATTN_SM must be 80, 90 or 120"
#endif

/* Shared memory of one block: row offsets (int64) | q | K tile | V tile | scores | O | max, sum, rescale. */
#define SY_ATTN_SMEM_BYTES(G, D, DV, TILE) \
    (8 * (TILE) + 4 * ((G) * (D) + (TILE) * ((D) + (DV)) + (G) * (TILE) + (G) * (DV) + 3 * (G)))
#define SY_ATTN_SMEM_MAX \
    SY_ATTN_SMEM_BYTES(SY_ATTN_MAX_GROUP, SY_ATTN_MAX_DIM, SY_ATTN_MAX_DIM, SY_ATTN_KV_TILE)

#endif
