/*
 * Launchers of the CUDA attention kernels (attn_kern.cuh, compiled once per
 * variant), callable from C. All pointers are device memory.
 */
#ifndef SY_ATTN_KERN_H
#define SY_ATTN_KERN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct syat_params {
    const float *q, *k, *v;
    float *out;
    int64_t ldq, ldk, ldv, ldo;
    void *kc, *vc; /* the cache: [layer][kv head][block][slot][dim] */
    int kvt;       /* cache dtype (sy_dtype: F32, F16, BF16) */
    /* Device copy of the step's tables: seq_of[T] | tok_start[S+1] | ctx_len[S] | block_table[S * max_blocks]. */
    const int32_t *meta;
    int n_tokens, n_seqs, max_blocks;
    int n_kv_heads, group, head_dim, v_head_dim, block_size, n_blocks, layer, window;
    float scale;
    /* gpt-oss's attention-sink logits of this layer's query heads ([n_kv_heads * group], device), or NULL:
     * one more exp(sink - m) in each row's denominator. k_attend_tc has none (the plugin keeps such
     * problems off it). */
    const float *sinks;
    /* Split-K (flash-decoding): positions [i * split_len, (i + 1) * split_len) go to split i, each a block
     * of its own, and k_combine merges the splits' partial softmax. n_splits 1: no partials, no merge. */
    int n_splits, split_len;
    float *part; /* [n_tokens][n_kv_heads * group][n_splits][v_head_dim + 2]: unnormalised O, max, sum */
    /* The step's split (attn_plan.h syat_plan), device copies: k_attend takes rows[0 .. n_rows) (NULL: every
     * token, n_rows ignored), k_attend_tc the n_tiles tiles (first row, tokens). Disjoint: each output row is
     * written by one kernel. */
    const int32_t *rows;
    int n_rows;
    const int32_t *tiles;
    int n_tiles;
} syat_params;

/* Writes the step's k/v rows into the cache, then attends (and merges the splits); returns the dynamic shared
 * memory k_attend used, or -1 when a kernel cannot be given what it needs (the opt-ins are per instance). */
int syat_forward(const syat_params *p, int *smem_opted_in, int *tc_opted_in);
/*
 * Copies whole blocks, pairs[2i] -> pairs[2i+1] (a host array), in order, for
 * each of the `heads` (layers x KV heads) tiles of a block; k_tile/v_tile are
 * elements per tile.
 */
void syat_copy_blocks(void *kc, void *vc, int kvt, const int32_t *pairs, int n, int64_t heads, int n_blocks,
                      int64_t k_tile, int64_t v_tile);

#ifdef __cplusplus
}
#endif

#endif
