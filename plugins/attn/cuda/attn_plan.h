/*
 * The tensor-core prefill path of attn/cuda as plain C (no CUDA headers),
 * so tests/gpu/test_attn_cuda_plan.c runs it on any build:
 *
 * - which rows of a step go to the tensor-core kernel (k_attend_tc: tiles
 *   of SYAT_TC_ROWS (token, query head) rows of one sequence and one KV
 *   head) and which stay on k_attend (one block per token and KV head);
 * - the KV positions a tile walks and each row's visible range (causal,
 *   sliding window), exactly as k_attend derives them;
 * - the m16n8k16 fragment index maps the kernel loads and stores with, and
 *   the element of the S accumulator each P operand element is taken from;
 * - the self-check's comparison and the prefill_kernel key's decision.
 *
 * The inline functions are __host__ __device__ under nvcc: the kernel calls
 * these very definitions.
 */
#ifndef SY_ATTN_PLAN_H
#define SY_ATTN_PLAN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define SYAT_HD __host__ __device__ __forceinline__
#else
#define SYAT_HD static inline
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Rows of one tensor-core block: 4 warps of 16 rows (an m16 slice each). */
#define SYAT_TC_WARPS 4
#define SYAT_TC_ROWS (16 * SYAT_TC_WARPS)
/* A sequence with at least this many new tokens in a step is a prefill: its rows go to the tensor-core kernel. */
#define SYAT_TC_MIN_TOKENS 16
/*
 * The tensor-core kernel's self-check bound: max |tc - k_attend| / max
 * |k_attend| over the outputs. The split products keep ~2^-17 of each
 * factor (Q, K, P and V as bf16 hi + lo, the lo x lo product dropped), so
 * scores and outputs come within a few 1e-6; a wrong fragment map or mask
 * gives errors of order 1.
 */
#define SYAT_TC_BOUND 1e-4

/* [attention] prefill_kernel. */
typedef enum syat_tc_mode {
    SYAT_TC_AUTO,       /* tensor cores where the problem fits and the self-check passed, else k_attend */
    SYAT_TC_FORCE,      /* tensor-cores: an error when the problem does not fit or the self-check fails */
    SYAT_TC_CUDA_CORES, /* k_attend for every row */
} syat_tc_mode;

/* "auto" | "tensor-cores" | "cuda-cores" (NULL: auto); -1 for anything else. */
int syat_tc_mode_parse(const char *v);

/*
 * Whether the tensor-core kernel handles a problem: head_dim == v_head_dim,
 * 64 or 128 (one compiled kernel each), group 1..16. NULL-safe why.
 */
int syat_tc_fits(int head_dim, int v_head_dim, int group, char *why, size_t cap);

/* Query tokens per tile: the (token, head) rows of a KV head's group fill SYAT_TC_ROWS, whole tokens only. */
SYAT_HD int syat_tc_tokens_per_tile(int group)
{
    return SYAT_TC_ROWS / group;
}

/*
 * Splits a step's rows: sequences with >= min_tokens new tokens are cut
 * into tiles of syat_tc_tokens_per_tile(group) tokens, tiles[2i] the tile's
 * first row of q, tiles[2i + 1] its token count; every other row goes to
 * rows (k_attend's list), in order. Each row lands in exactly one of the
 * two. rows needs n_tokens entries, tiles 2 * n_tokens (a tile holds at
 * least one token). min_tokens <= 0: no tiles.
 */
void syat_plan(int32_t n_seqs, const int32_t *tok_start, int group, int min_tokens, int32_t *rows, int32_t *n_rows,
               int32_t *tiles, int32_t *n_tiles);

/* The first position a query at pos sees (k_attend's lo): pos - window + 1, or 0 without a window. */
SYAT_HD int64_t syat_visible_lo(int64_t pos, int window)
{
    return window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
}

/*
 * The KV positions a tile of n tokens whose first sits at position pos0
 * walks: [*lo, *hi], the union of its rows' visible ranges (the first
 * row's lo, the last row's own position).
 */
SYAT_HD void syat_tile_kv_range(int64_t pos0, int n, int window, int64_t *lo, int64_t *hi)
{
    *lo = syat_visible_lo(pos0, window);
    *hi = pos0 + n - 1;
}

/* Whether row r of a tile (token r / group, at pos0 + r / group) sees position j. */
SYAT_HD int syat_row_sees(int64_t pos0, int group, int r, int window, int64_t j)
{
    const int64_t pos = pos0 + r / group;
    return j <= pos && j >= syat_visible_lo(pos, window);
}

/*
 * m16n8k16 fragments (bf16 in, F32 accumulate), per lane of the warp;
 * element i of a fragment is half (i & 1) of register i / 2. A is 16 x 16
 * (row, k), B 16 x 8 (k, column), C/D 16 x 8 (row, column). The test holds
 * these against the PTX ISA's table ("Matrix Fragments for mma.m16n8k16
 * with floating point type").
 */
SYAT_HD int syat_frag_a_row(int lane, int i)
{
    return (lane >> 2) + ((i >> 1) & 1) * 8;
}
SYAT_HD int syat_frag_a_col(int lane, int i)
{
    return (lane & 3) * 2 + (i & 1) + (i >> 2) * 8;
}
SYAT_HD int syat_frag_b_row(int lane, int i)
{
    return (lane & 3) * 2 + (i & 1) + (i >> 1) * 8;
}
SYAT_HD int syat_frag_b_col(int lane)
{
    return lane >> 2;
}
SYAT_HD int syat_frag_c_row(int lane, int i)
{
    return (lane >> 2) + (i >> 1) * 8;
}
SYAT_HD int syat_frag_c_col(int lane, int i)
{
    return (lane & 3) * 2 + (i & 1);
}

/*
 * Flash-attention's register reuse: the P operand of O += P V for keys
 * [16 kk, 16 kk + 16) is the softmaxed S accumulator of n-tiles 2 kk and
 * 2 kk + 1, without leaving the lane. A element i comes from n-tile
 * 2 kk + syat_p_ntile(i), accumulator element syat_p_elem(i).
 */
SYAT_HD int syat_p_ntile(int i)
{
    return i >> 2;
}
SYAT_HD int syat_p_elem(int i)
{
    return (i & 1) + ((i >> 1) & 1) * 2;
}

/*
 * 0 when got is within bound of ref (max |got - ref| / max |ref|), every
 * value of both finite and n > 0; else -1. *worst: the relative error,
 * INFINITY for a NaN or infinity (or ref all zero while got is not).
 */
int syat_compare(const float *got, const float *ref, size_t n, double bound, double *worst);

/*
 * Whether steps use the tensor-core kernel, from the key, the problem's fit
 * (fits, why_fit) and the self-check (run: 1 when it ran, pass, worst):
 * 1 yes, 0 no (auto: *warn set to 1 when the self-check failed, the caller
 * warns once), -1 an error in why (forced on a problem that does not fit,
 * or whose self-check failed).
 */
int syat_tc_decide(int mode, int fits, const char *why_fit, int pass, double worst, int *warn, char *why,
                   size_t cap);

#ifdef __cplusplus
}
#endif

#endif
