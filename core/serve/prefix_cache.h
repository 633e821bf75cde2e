/*
 * Prefix reuse across requests: a table of FULL KV blocks keyed by a hash
 * chain over their tokens (block i's key covers every token of blocks
 * 0..i), so a block matches only behind the same whole prefix. The cache
 * holds one reference on each block it knows; a block only the cache holds
 * is idle and evicted least-recently-used first when the pool runs dry.
 * Only full blocks enter, and a sequence writes only past its last full
 * block, so a shared block is never written. Engine thread only.
 *
 * The MTP layer's K/V live in the same blocks, and its entry at a block's
 * last position was computed from the token AFTER the block (the MTP input
 * at p is the embedding of t[p + 1] with the target's hidden state of p),
 * which the key does not cover. So an entry also records that token
 * ("after", -1 when the block holds no valid MTP entry there), and a lookup
 * that will read the MTP K/V asks for the same one: a follower that goes on
 * differently right at the block's end misses it and computes the block
 * itself (docs/speculative.md, "MTP and the prefix cache").
 */
#ifndef SY_PREFIX_CACHE_H
#define SY_PREFIX_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/kv_blocks.h"

typedef struct sy_prefix_cache sy_prefix_cache;

/* NULL when out of memory. kv must outlive the cache. */
sy_prefix_cache *sy_prefix_cache_new(sy_kv_blocks *kv);
/* Drops every cached block (idle ones return to the pool). */
void sy_prefix_cache_free(sy_prefix_cache *pc);

/* Key of a block of block_size tokens behind the prefix whose key is parent (0 for the first block). */
uint64_t sy_prefix_hash(uint64_t parent, const int32_t *tokens, int32_t n);

/*
 * The cached block for key whose tokens equal tokens[0..block_size), or -1. Marks it recently used.
 * after >= 0: only a block whose MTP entry at its last position saw that next token; -1: any (the caller
 * does not read the MTP K/V).
 */
int32_t sy_prefix_cache_lookup(sy_prefix_cache *pc, uint64_t key, const int32_t *tokens, int32_t after);
/*
 * Registers a full block (the cache takes its own reference). after: the next token its last position's
 * MTP K/V was computed with, or -1 for none. No-op when a block with the same key and tokens is cached
 * that serves every lookup this one would (the same after, or after is -1).
 */
void sy_prefix_cache_insert(sy_prefix_cache *pc, uint64_t key, int32_t block, const int32_t *tokens, int32_t after);
/* Evicts up to n idle blocks, least recently used first; returns how many went back to the pool. */
int32_t sy_prefix_cache_evict(sy_prefix_cache *pc, int32_t n);
/* Blocks held only by the cache (free for the taking). */
int32_t sy_prefix_cache_idle(const sy_prefix_cache *pc);
/* Blocks the cache knows (idle or shared). */
int32_t sy_prefix_cache_size(const sy_prefix_cache *pc);

/*
 * Allocates n blocks, evicting idle cached blocks when the free list is
 * short. All or nothing; SY_ERR_UNAVAILABLE when even eviction cannot help.
 */
int sy_prefix_cache_alloc(sy_prefix_cache *pc, int32_t n, int32_t *out);

#endif
