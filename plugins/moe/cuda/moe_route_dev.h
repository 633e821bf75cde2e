/*
 * Grouping a pass's assignments by expert on the GPU (k_group), and the
 * routing it follows (symoe_route.h, shared with moe/cpu). Written as
 * __host__ __device__ code so that tests/gpu/test_moe_route_dev.c runs the
 * grouping on the host against the host path's.
 */
#ifndef SY_MOE_ROUTE_DEV_H
#define SY_MOE_ROUTE_DEV_H

#include <stdint.h>

#include "symoe_route.h"

/*
 * Grouping a pass's assignments (ids [A] = [tokens, top_k]) by expert, in
 * three steps that k_group runs with one thread per expert for the first
 * and last (tests/gpu/test_moe_route_dev.c runs them serially against the
 * host path's grouping). Expert e is local: ids[a] - e0 for the experts
 * [e0, e0 + EL) this instance holds; rows of expert e are off[e].. in
 * token order, so the result does not depend on thread scheduling.
 */

/* Step 1: how many assignments go to local expert e. */
SYR_FN int32_t symr_count(const int32_t *ids, int64_t A, int32_t e0, int32_t e)
{
    int32_t c = 0;
    for (int64_t a = 0; a < A; a++)
        c += ids[a] - e0 == e;
    return c;
}

/*
 * Step 2 (one thread): off[e] = rows before expert e (off[EL] = all rows);
 * tiles as (expert, first row, rows) int32 triples of at most vr rows, in
 * expert order, at most max_tiles; returns how many.
 */
SYR_FN int64_t symr_tiles(const int32_t *count, int32_t EL, int32_t vr, int64_t max_tiles, int32_t *off,
                          int32_t *tiles)
{
    off[0] = 0;
    for (int32_t e = 0; e < EL; e++)
        off[e + 1] = off[e] + count[e];
    int64_t nt = 0;
    for (int32_t e = 0; e < EL; e++)
        for (int32_t r = 0; r < count[e] && nt < max_tiles; r += vr, nt++) {
            const int32_t left = count[e] - r;
            tiles[3 * nt] = e;
            tiles[3 * nt + 1] = off[e] + r;
            tiles[3 * nt + 2] = left < vr ? left : vr;
        }
    return nt;
}

/* Step 3: local expert e's assignments get rows off_e.. in order: assign_tok[row] its token, slot_of[a] its row. */
SYR_FN void symr_place(const int32_t *ids, int64_t A, int32_t top_k, int32_t e0, int32_t e, int32_t off_e,
                       int32_t *assign_tok, int32_t *slot_of)
{
    int32_t row = off_e;
    for (int64_t a = 0; a < A; a++)
        if (ids[a] - e0 == e) {
            assign_tok[row] = (int32_t)(a / top_k);
            slot_of[a] = row++;
        }
}

/* Step 3, the others' experts (expert parallelism): slot -1, nothing added in the combine. */
SYR_FN void symr_place_foreign(const int32_t *ids, int64_t a, int32_t e0, int32_t EL, int32_t *slot_of)
{
    if (ids[a] < e0 || ids[a] >= e0 + EL)
        slot_of[a] = -1;
}

#endif
