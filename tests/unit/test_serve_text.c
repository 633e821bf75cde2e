/*
 * Serving pieces that need no model: stop strings held back across token
 * boundaries, the <think> split, the penalties, and the prefix cache's
 * sharing and LRU eviction.
 */
#include "config.h"

#include "engine/sampler.h"
#include "serve/prefix_cache.h"
#include "serve/text_filter.h"
#include "test_check.h"

#include <math.h>
#include <stdlib.h>

/* Pushes pieces one at a time; returns the joined content and whether a stop matched. */
static int run_filter(const char *const *stops, size_t n_stops, bool reasoning, bool in_think, const char *const *pieces,
                      size_t n, char *content, char *reason)
{
    sy_text_filter f;
    CHECK(sy_text_filter_init(&f, stops, n_stops, reasoning, in_think) == 0);
    sy_buf c = {0}, r = {0};
    int stopped = 0;
    for (size_t i = 0; i < n && !stopped; i++)
        stopped = sy_text_filter_push(&f, pieces[i], strlen(pieces[i]), true, i + 1 == n, &c, &r);
    snprintf(content, 256, "%s", c.p ? c.p : "");
    snprintf(reason, 256, "%s", r.p ? r.p : "");
    sy_buf_free(&c);
    sy_buf_free(&r);
    sy_text_filter_fini(&f);
    return stopped;
}

static void test_stops(void)
{
    char c[256], r[256];
    const char *stops[] = {"END", "\n\n"};
    const char *p1[] = {"Hello E", "N", "D world"};
    CHECK(run_filter(stops, 2, false, false, p1, 3, c, r) == 1);
    CHECK(strcmp(c, "Hello ") == 0);
    const char *p2[] = {"a\n", "\nb"};
    CHECK(run_filter(stops, 2, false, false, p2, 2, c, r) == 1);
    CHECK(strcmp(c, "a") == 0);
    /* A partial match that does not complete is released. */
    const char *p3[] = {"EN", "x", "y"};
    CHECK(run_filter(stops, 2, false, false, p3, 3, c, r) == 0);
    CHECK(strcmp(c, "ENxy") == 0);
    /* Held-back text never splits a UTF-8 character. */
    sy_text_filter f;
    const char *s3[] = {"\xC3\xA9!"};
    CHECK(sy_text_filter_init(&f, s3, 1, false, false) == 0);
    sy_buf cb = {0}, rb = {0};
    CHECK(sy_text_filter_push(&f, "x\xC3\xA9", 3, true, false, &cb, &rb) == 0);
    CHECK(cb.len == 1 && cb.p[0] == 'x');
    CHECK(sy_text_filter_push(&f, "?", 1, true, true, &cb, &rb) == 0);
    CHECK(cb.len == 4 && memcmp(cb.p, "x\xC3\xA9?", 4) == 0);
    sy_buf_free(&cb);
    sy_buf_free(&rb);
    sy_text_filter_fini(&f);
}

static void test_think(void)
{
    char c[256], r[256];
    const char *p1[] = {"<thi", "nk>plan</th", "ink>answer"};
    run_filter(NULL, 0, true, false, p1, 3, c, r);
    CHECK(strcmp(c, "answer") == 0);
    CHECK(strcmp(r, "plan") == 0);
    const char *p2[] = {"still thinking", "</think>", "done"};
    run_filter(NULL, 0, true, true, p2, 3, c, r);
    CHECK(strcmp(r, "still thinking") == 0);
    CHECK(strcmp(c, "done") == 0);
    /* Without reasoning the tags are plain text. */
    run_filter(NULL, 0, false, false, p1, 3, c, r);
    CHECK(strcmp(c, "<think>plan</think>answer") == 0);
    const char *pr = "<|user|>hi<think>";
    CHECK(sy_text_ends_in_think(pr, strlen(pr)));
    const char *pc = "<think>a</think>b";
    CHECK(!sy_text_ends_in_think(pc, strlen(pc)));
}

static void test_penalties(void)
{
    float l[5] = {1.0f, 2.0f, -1.0f, 0.5f, 0.0f};
    int32_t counts[5] = {0};
    const int32_t toks[] = {1, 1, 2};
    sy_apply_penalties(l, counts, toks, 3, 0.5f, 0.25f, 2.0f);
    CHECK(fabsf(l[1] - (2.0f / 2.0f - 0.5f * 2 - 0.25f)) < 1e-6f);
    CHECK(fabsf(l[2] - (-1.0f * 2.0f - 0.5f - 0.25f)) < 1e-6f);
    CHECK(l[0] == 1.0f && l[3] == 0.5f);
    for (int i = 0; i < 5; i++)
        CHECK(counts[i] == 0);
}

static void test_prefix_cache(void)
{
    sy_kv_blocks kv;
    sy_err err;
    CHECK(sy_kv_blocks_init(&kv, 4, 2, &err) == SY_OK);
    sy_prefix_cache *pc = sy_prefix_cache_new(&kv);
    int32_t b[4];
    CHECK(sy_prefix_cache_alloc(pc, 2, b) == SY_OK);
    const int32_t t0[] = {5, 6}, t1[] = {7, 8};
    uint64_t k0 = sy_prefix_hash(0, t0, 2), k1 = sy_prefix_hash(k0, t1, 2);
    CHECK(k1 != sy_prefix_hash(0, t1, 2)); /* the chain makes position part of the key */
    sy_prefix_cache_insert(pc, k0, b[0], t0, 7);
    sy_prefix_cache_insert(pc, k1, b[1], t1, -1);
    CHECK(sy_prefix_cache_lookup(pc, k0, t0, -1) == b[0]);
    CHECK(sy_prefix_cache_lookup(pc, k1, t0, -1) == -1); /* same key, other tokens: no */
    /* An MTP follower needs the block's last MTP entry computed from its own next token. */
    CHECK(sy_prefix_cache_lookup(pc, k1, t1, 5) == -1); /* registered without a valid MTP entry */
    CHECK(sy_prefix_cache_lookup(pc, k1, t1, -1) == b[1]);
    CHECK(sy_prefix_cache_lookup(pc, k0, t0, 9) == -1);
    CHECK(sy_prefix_cache_lookup(pc, k0, t0, 7) == b[0]);
    sy_kv_blocks_release(&kv, b, 2);
    CHECK(kv.n_free == 2 && sy_prefix_cache_idle(pc) == 2);
    /* Taking all four evicts the two idle ones, least recently used first. */
    CHECK(sy_prefix_cache_alloc(pc, 3, b) == SY_OK);
    CHECK(sy_prefix_cache_size(pc) == 1);
    CHECK(sy_prefix_cache_lookup(pc, k0, t0, -1) >= 0); /* k0 was used more recently */
    CHECK(sy_prefix_cache_alloc(pc, 2, b + 3) == SY_ERR_UNAVAILABLE);
    sy_kv_blocks_release(&kv, b, 3);
    sy_prefix_cache_free(pc);
    CHECK(kv.n_free == 4);
    /* Two copies of one block whose MTP entries saw different next tokens both serve; a third adds nothing. */
    pc = sy_prefix_cache_new(&kv);
    CHECK(sy_prefix_cache_alloc(pc, 3, b) == SY_OK);
    sy_prefix_cache_insert(pc, k0, b[0], t0, 7);
    sy_prefix_cache_insert(pc, k0, b[1], t0, 9);
    sy_prefix_cache_insert(pc, k0, b[2], t0, -1);
    CHECK(sy_prefix_cache_size(pc) == 2);
    CHECK(sy_prefix_cache_lookup(pc, k0, t0, 7) == b[0] && sy_prefix_cache_lookup(pc, k0, t0, 9) == b[1]);
    sy_kv_blocks_release(&kv, b, 3);
    sy_prefix_cache_free(pc);
    CHECK(kv.n_free == 4);
    sy_kv_blocks_fini(&kv);
}

int main(void)
{
    test_stops();
    test_think();
    test_penalties();
    test_prefix_cache();
    return sy_test_done("test_serve_text");
}
