#include "config.h"

#include "engine/kv_blocks.h"

#include <stdlib.h>

int sy_kv_blocks_init(sy_kv_blocks *kb, int32_t n_blocks, int32_t block_size, sy_err *err)
{
    if (n_blocks <= 0 || block_size <= 0)
        return sy_err_set(err, SY_ERR_INVALID, "KV pool needs at least one block of at least one token, found %d x %d",
                          n_blocks, block_size);
    kb->n_blocks = n_blocks;
    kb->block_size = block_size;
    kb->free_stack = malloc(sizeof(int32_t) * (size_t)n_blocks);
    kb->refcount = calloc((size_t)n_blocks, sizeof(int32_t));
    if (!kb->free_stack || !kb->refcount) {
        sy_kv_blocks_fini(kb);
        return sy_err_set(err, SY_ERR_NOMEM, "cannot allocate the KV block table (%d blocks)", n_blocks);
    }
    /* Lowest ids on top so a fresh pool hands out 0, 1, 2, ... */
    for (int32_t i = 0; i < n_blocks; i++)
        kb->free_stack[i] = n_blocks - 1 - i;
    kb->n_free = n_blocks;
    return SY_OK;
}

void sy_kv_blocks_fini(sy_kv_blocks *kb)
{
    free(kb->free_stack);
    free(kb->refcount);
    kb->free_stack = NULL;
    kb->refcount = NULL;
    kb->n_free = 0;
}

int sy_kv_blocks_alloc(sy_kv_blocks *kb, int32_t n, int32_t *out)
{
    if (n > kb->n_free)
        return SY_ERR_UNAVAILABLE;
    for (int32_t i = 0; i < n; i++) {
        int32_t id = kb->free_stack[--kb->n_free];
        kb->refcount[id] = 1;
        out[i] = id;
    }
    return SY_OK;
}

void sy_kv_blocks_retain(sy_kv_blocks *kb, const int32_t *ids, int32_t n)
{
    for (int32_t i = 0; i < n; i++)
        kb->refcount[ids[i]]++;
}

void sy_kv_blocks_release(sy_kv_blocks *kb, const int32_t *ids, int32_t n)
{
    for (int32_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (kb->refcount[id] > 0 && --kb->refcount[id] == 0)
            kb->free_stack[kb->n_free++] = id;
    }
}
