/*
 * attn/cpu internals. attn_cpu.c: descriptor, keys, supports, prepare,
 * copy_blocks. attn_cpu_fwd.c: forward (cache writes, then flash-style
 * attention over the paged blocks).
 *
 * Cache layout: per layer, per KV head, per physical block, block_size
 * rows of head_dim (K) or v_head_dim (V) elements of kv_dtype. One KV
 * head's block is one contiguous tile, which the score and PV kernels read
 * as a small row-major matrix; a head's consecutive block ids are adjacent,
 * so a sequence whose blocks were handed out in order streams from memory.
 */
#ifndef SY_ATTN_CPU_H
#define SY_ATTN_CPU_H

#include "switchyard/plugin.h"
#include "sykattn.h"
#include "sykern.h"

#define SY_ATTN_CPU_NAME "cpu"
#define SY_ATTN_CPU_MAX_DIM 256    /* head_dim and v_head_dim */
#define SY_ATTN_CPU_MAX_BLOCK 4096 /* block_size */
#define SY_ATTN_CPU_ROWS 48        /* query rows (tokens x group heads) per work item, a multiple of 6 */

typedef struct attn_cpu {
    const sy_host *host;
    syk_isa isa;
    const syk_kernels *kern;
    char kv_key[8];

    int prepared;
    sy_attn_problem p;
    sy_dtype kvt;
    size_t es;                   /* bytes per cache element */
    size_t k_tile, v_tile;       /* elements of one (block, KV head) tile */
    char *kc, *vc;

    /* Per-worker scratch, sized at prepare for rows_max query rows. */
    int64_t rows_max;
    int n_scratch;
    size_t scratch_floats; /* per worker */
    float *scratch;
} attn_cpu;

/* (Re)allocates the per-worker scratch for n workers. */
int sy__attn_cpu_scratch(attn_cpu *a, int n_workers, sy_err *err);

int sy__attn_cpu_forward(void *inst, int32_t layer, const sy_attn_batch *b, const sy_tensor *q, const sy_tensor *k,
                         const sy_tensor *v, sy_tensor *out, sy_err *err);

#endif
