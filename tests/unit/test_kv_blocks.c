/* KV block pool: all-or-nothing allocation, release, shared references. */
#include "config.h"

#include "engine/kv_blocks.h"
#include "test_check.h"

int main(void)
{
    sy_kv_blocks kb;
    sy_err err;
    CHECK(sy_kv_blocks_init(&kb, 0, 16, &err) == SY_ERR_INVALID);
    CHECK(sy_kv_blocks_init(&kb, 8, 16, &err) == SY_OK);
    CHECK(sy_kv_blocks_for(&kb, 0) == 0);
    CHECK(sy_kv_blocks_for(&kb, 1) == 1);
    CHECK(sy_kv_blocks_for(&kb, 16) == 1);
    CHECK(sy_kv_blocks_for(&kb, 17) == 2);

    int32_t a[8], b[8];
    CHECK(sy_kv_blocks_alloc(&kb, 5, a) == SY_OK);
    CHECK(kb.n_free == 3);
    /* Too many: nothing is taken. */
    CHECK(sy_kv_blocks_alloc(&kb, 4, b) == SY_ERR_UNAVAILABLE);
    CHECK(kb.n_free == 3);
    /* Ids are distinct. */
    for (int i = 0; i < 5; i++)
        for (int j = i + 1; j < 5; j++)
            CHECK(a[i] != a[j]);

    /* A shared block returns to the pool only when its last holder lets go. */
    sy_kv_blocks_retain(&kb, a, 2);
    sy_kv_blocks_release(&kb, a, 5);
    CHECK(kb.n_free == 6);
    sy_kv_blocks_release(&kb, a, 2);
    CHECK(kb.n_free == 8);
    /* Releasing a free block again is harmless (no double entry). */
    sy_kv_blocks_release(&kb, a, 1);
    CHECK(kb.n_free == 8);
    CHECK(sy_kv_blocks_alloc(&kb, 8, b) == SY_OK);
    CHECK(kb.n_free == 0);
    sy_kv_blocks_fini(&kb);
    return sy_test_done("test_kv_blocks");
}
