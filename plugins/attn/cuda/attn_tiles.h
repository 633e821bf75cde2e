/*
 * Tile sizes of the CUDA attention kernels, one set per plugin variant
 * (SY_ATTN_SM = 80, 90 or 120, set by attn-cuda.mk), read by the kernels,
 * by the C glue (supports, launch) and by tools/check-cuda-smem.sh (through
 * SY_SMEM_QUERY in attn_kern.cuh). Pure integer macros, so the check can
 * evaluate them with the shell's arithmetic.
 *
 * Per-block shared memory limits (opt-in maximum): 163 KB on SM80,
 * 227 KB on SM90, 99 KB on SM120. The kernels use no static shared memory;
 * k_attend's dynamic amount at the largest supported problem (group 16,
 * head dims 256) is SY_ATTN_SMEM_MAX, k_attend_tc's SY_ATTN_TC_SMEM_MAX.
 */
#ifndef SY_ATTN_TILES_H
#define SY_ATTN_TILES_H

#define SY_ATTN_THREADS 128
#define SY_ATTN_MAX_GROUP 16 /* query heads per KV head */
#define SY_ATTN_MAX_DIM 256  /* head_dim and v_head_dim */
#define SY_ATTN_MAX_SPLITS 64 /* split-K: most splits of one token's context */

/* SY_ATTN_KV_TILE: KV positions k_attend stages per step; SY_ATTN_TC_KV_TILE: k_attend_tc's (a multiple of 16). */
#if SY_ATTN_SM == 80
#define SY_ATTN_KV_TILE 32
#define SY_ATTN_TC_KV_TILE 32 /* 72,960 B: within 8.6/8.9's 99 KB as well as 8.0's 163 KB */
#define SY_ATTN_NAME "cuda-sm80"
#elif SY_ATTN_SM == 90
#define SY_ATTN_KV_TILE 64
#define SY_ATTN_TC_KV_TILE 64
#define SY_ATTN_NAME "cuda-sm90"
#elif SY_ATTN_SM == 120
#define SY_ATTN_KV_TILE 16
#define SY_ATTN_TC_KV_TILE 32
#define SY_ATTN_NAME "cuda-sm120"
#else
#error "SY_ATTN_SM must be 80, 90 or 120"
#endif

/* Shared memory of one block: row offsets (int64) | q | K tile | V tile | scores | O | max, sum, rescale. */
#define SY_ATTN_SMEM_BYTES(G, D, DV, TILE) \
    (8 * (TILE) + 4 * ((G) * (D) + (TILE) * ((D) + (DV)) + (G) * (TILE) + (G) * (DV) + 3 * (G)))
#define SY_ATTN_SMEM_MAX \
    SY_ATTN_SMEM_BYTES(SY_ATTN_MAX_GROUP, SY_ATTN_MAX_DIM, SY_ATTN_MAX_DIM, SY_ATTN_KV_TILE)

/*
 * The tensor-core prefill kernel (k_attend_tc, attn_plan.h), head dim D:
 * row offsets (int64) | q hi, lo [64][D + 8] | K hi, lo [TILE][D + 8] |
 * V hi, lo transposed [D][TILE + 8], bf16; rows padded by 8 bf16 so the
 * fragment loads of a warp's 8 row groups fall in distinct banks. Largest
 * at D = 128.
 */
#define SY_ATTN_TC_SMEM_BYTES(D, TILE) \
    (8 * (TILE) + 4 * (64 * ((D) + 8) + (TILE) * ((D) + 8) + (D) * ((TILE) + 8)))
#define SY_ATTN_TC_SMEM_MAX SY_ATTN_TC_SMEM_BYTES(128, SY_ATTN_TC_KV_TILE)

#endif
