/*
 * The context bound a recorded decode step is made for (graphs.c): a
 * recording is reused while every sequence stays within it, so it must
 * cover the step (>= its longest sequence), stay within what a sequence can
 * hold, and be a power of two from 256 up (few recordings per batch size).
 */
#include "config.h"

#include "engine/graphs.h"
#include "test_check.h"

int main(void)
{
    /* Below the smallest bound: 256. */
    CHECK(sy_graphs_ctx_bound(1, 4096) == 256);
    CHECK(sy_graphs_ctx_bound(256, 4096) == 256);
    /* Just past a power of two: the next one. */
    CHECK(sy_graphs_ctx_bound(257, 4096) == 512);
    CHECK(sy_graphs_ctx_bound(1000, 4096) == 1024);
    CHECK(sy_graphs_ctx_bound(4096, 4096) == 4096);
    /* Clamped to what a sequence holds (not a power of two). */
    CHECK(sy_graphs_ctx_bound(3000, 3072) == 3072);
    CHECK(sy_graphs_ctx_bound(10, 100) == 100);
    /* Past the cap, or empty: never recorded. */
    CHECK(sy_graphs_ctx_bound(4097, 4096) == 0);
    CHECK(sy_graphs_ctx_bound(0, 4096) == 0);
    /* Every bound covers its step, across the range. */
    int ok = 1;
    for (int64_t end = 1; end <= 70000; end += 7) {
        const int32_t b = sy_graphs_ctx_bound(end, 65536);
        if (end <= 65536 ? (b < end || b > 65536 || (b & (b - 1)) != 0) : b != 0)
            ok = 0;
    }
    CHECK(ok);
    return sy_test_done("test_graphs_bound");
}
