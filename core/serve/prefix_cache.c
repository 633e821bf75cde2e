#include "config.h"

#include "serve/prefix_cache.h"

#include <stdlib.h>
#include <string.h>

/* One entry per block id: a block is cached at most once. */
typedef struct entry {
    uint64_t key;
    int32_t after;            /* the token the block's last MTP K/V entry saw; -1: none */
    int32_t next;             /* bucket chain */
    int32_t lru_prev, lru_next; /* most recent at head */
    bool cached;
} entry;

struct sy_prefix_cache {
    sy_kv_blocks *kv;
    entry *e;        /* [n_blocks] */
    int32_t *tokens; /* [n_blocks * block_size]: exact check behind the hash */
    int32_t *bucket; /* [n_buckets] */
    uint32_t n_buckets;
    int32_t lru_head, lru_tail;
    int32_t n_cached;
};

sy_prefix_cache *sy_prefix_cache_new(sy_kv_blocks *kv)
{
    sy_prefix_cache *pc = calloc(1, sizeof *pc);
    if (!pc)
        return NULL;
    pc->kv = kv;
    uint32_t nb = 16;
    while (nb < (uint32_t)kv->n_blocks * 2u && nb < (1u << 30))
        nb <<= 1;
    pc->n_buckets = nb;
    pc->e = calloc((size_t)kv->n_blocks, sizeof *pc->e);
    pc->tokens = malloc(sizeof(int32_t) * (size_t)kv->n_blocks * (size_t)kv->block_size);
    pc->bucket = malloc(sizeof(int32_t) * nb);
    if (!pc->e || !pc->tokens || !pc->bucket) {
        sy_prefix_cache_free(pc);
        return NULL;
    }
    for (uint32_t i = 0; i < nb; i++)
        pc->bucket[i] = -1;
    pc->lru_head = pc->lru_tail = -1;
    return pc;
}

static void lru_unlink(sy_prefix_cache *pc, int32_t b)
{
    entry *x = &pc->e[b];
    if (x->lru_prev >= 0)
        pc->e[x->lru_prev].lru_next = x->lru_next;
    else
        pc->lru_head = x->lru_next;
    if (x->lru_next >= 0)
        pc->e[x->lru_next].lru_prev = x->lru_prev;
    else
        pc->lru_tail = x->lru_prev;
}

static void lru_push_front(sy_prefix_cache *pc, int32_t b)
{
    entry *x = &pc->e[b];
    x->lru_prev = -1;
    x->lru_next = pc->lru_head;
    if (pc->lru_head >= 0)
        pc->e[pc->lru_head].lru_prev = b;
    pc->lru_head = b;
    if (pc->lru_tail < 0)
        pc->lru_tail = b;
}

static void remove_entry(sy_prefix_cache *pc, int32_t b)
{
    entry *x = &pc->e[b];
    int32_t *link = &pc->bucket[x->key & (pc->n_buckets - 1)];
    while (*link >= 0 && *link != b)
        link = &pc->e[*link].next;
    if (*link == b)
        *link = x->next;
    lru_unlink(pc, b);
    x->cached = false;
    pc->n_cached--;
    sy_kv_blocks_release(pc->kv, &b, 1);
}

void sy_prefix_cache_free(sy_prefix_cache *pc)
{
    if (!pc)
        return;
    if (pc->e && pc->bucket)
        while (pc->lru_head >= 0)
            remove_entry(pc, pc->lru_head);
    free(pc->e);
    free(pc->tokens);
    free(pc->bucket);
    free(pc);
}

uint64_t sy_prefix_hash(uint64_t parent, const int32_t *tokens, int32_t n)
{
    /* FNV-1a over the parent key and the tokens, then a final mix so the
     * low bits (the bucket index) depend on every input bit. */
    uint64_t h = 0xcbf29ce484222325ull ^ parent;
    for (int32_t i = 0; i < n; i++) {
        uint32_t t = (uint32_t)tokens[i];
        for (int k = 0; k < 4; k++) {
            h ^= (t >> (8 * k)) & 0xff;
            h *= 0x100000001b3ull;
        }
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h ? h : 1;
}

int32_t sy_prefix_cache_lookup(sy_prefix_cache *pc, uint64_t key, const int32_t *tokens, int32_t after)
{
    const int32_t bs = pc->kv->block_size;
    for (int32_t b = pc->bucket[key & (pc->n_buckets - 1)]; b >= 0; b = pc->e[b].next) {
        if (pc->e[b].key != key || (after >= 0 && pc->e[b].after != after) ||
            memcmp(pc->tokens + (size_t)b * bs, tokens, sizeof(int32_t) * (size_t)bs) != 0)
            continue;
        lru_unlink(pc, b);
        lru_push_front(pc, b);
        return b;
    }
    return -1;
}

void sy_prefix_cache_insert(sy_prefix_cache *pc, uint64_t key, int32_t block, const int32_t *tokens, int32_t after)
{
    const int32_t bs = pc->kv->block_size;
    if (pc->e[block].cached)
        return;
    /* Another sequence computed the same block first: ours stays private, unless ours serves a follower that
     * the cached copy cannot (its MTP entry saw another token, or none). */
    for (int32_t b = pc->bucket[key & (pc->n_buckets - 1)]; b >= 0; b = pc->e[b].next)
        if (pc->e[b].key == key && (after < 0 || pc->e[b].after == after) &&
            memcmp(pc->tokens + (size_t)b * bs, tokens, sizeof(int32_t) * (size_t)bs) == 0)
            return;
    entry *x = &pc->e[block];
    x->key = key;
    x->after = after;
    x->cached = true;
    memcpy(pc->tokens + (size_t)block * bs, tokens, sizeof(int32_t) * (size_t)bs);
    uint32_t h = (uint32_t)(key & (pc->n_buckets - 1));
    x->next = pc->bucket[h];
    pc->bucket[h] = block;
    lru_push_front(pc, block);
    pc->n_cached++;
    sy_kv_blocks_retain(pc->kv, &block, 1);
}

int32_t sy_prefix_cache_evict(sy_prefix_cache *pc, int32_t n)
{
    int32_t done = 0;
    for (int32_t b = pc->lru_tail; b >= 0 && done < n;) {
        int32_t prev = pc->e[b].lru_prev;
        if (pc->kv->refcount[b] == 1) { /* only the cache holds it */
            remove_entry(pc, b);
            done++;
        }
        b = prev;
    }
    return done;
}

int32_t sy_prefix_cache_idle(const sy_prefix_cache *pc)
{
    int32_t n = 0;
    for (int32_t b = pc->lru_head; b >= 0; b = pc->e[b].lru_next)
        n += pc->kv->refcount[b] == 1;
    return n;
}

int32_t sy_prefix_cache_size(const sy_prefix_cache *pc) { return pc->n_cached; }

int sy_prefix_cache_alloc(sy_prefix_cache *pc, int32_t n, int32_t *out)
{
    if (n <= 0)
        return SY_OK;
    if (pc->kv->n_free < n && pc->kv->n_free + sy_prefix_cache_idle(pc) < n)
        return SY_ERR_UNAVAILABLE;
    if (pc->kv->n_free < n)
        sy_prefix_cache_evict(pc, n - pc->kv->n_free);
    return sy_kv_blocks_alloc(pc->kv, n, out);
}
