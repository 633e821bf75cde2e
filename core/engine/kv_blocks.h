/*
 * The pool of paged-KV block ids. The attention plugin owns the memory;
 * the core owns which block belongs to whom. Blocks are reference-counted
 * so that later a shared prefix can be held by several sequences.
 */
#ifndef SY_KV_BLOCKS_H
#define SY_KV_BLOCKS_H

#include <stdint.h>

#include "switchyard/plugin.h"

typedef struct sy_kv_blocks {
    int32_t n_blocks;
    int32_t block_size; /* tokens per block */
    int32_t *free_stack; /* [n_blocks] */
    int32_t n_free;
    int32_t *refcount; /* [n_blocks] */
} sy_kv_blocks;

int sy_kv_blocks_init(sy_kv_blocks *kb, int32_t n_blocks, int32_t block_size, sy_err *err);
void sy_kv_blocks_fini(sy_kv_blocks *kb);
/* Takes n blocks into out; all or nothing. SY_ERR_UNAVAILABLE when too few are free. */
int sy_kv_blocks_alloc(sy_kv_blocks *kb, int32_t n, int32_t *out);
/* Drops one reference to each; a block returns to the pool at zero. */
void sy_kv_blocks_release(sy_kv_blocks *kb, const int32_t *ids, int32_t n);
void sy_kv_blocks_retain(sy_kv_blocks *kb, const int32_t *ids, int32_t n);
/* Blocks needed to hold n_tokens. */
static inline int32_t sy_kv_blocks_for(const sy_kv_blocks *kb, int64_t n_tokens)
{
    return (int32_t)((n_tokens + kb->block_size - 1) / kb->block_size);
}

#endif
