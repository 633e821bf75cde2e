/*
 * The tensor-core prefill path's host decisions (attn_plan.h): the key,
 * the problem's fit, the step's split into tiles and k_attend rows, the
 * self-check's comparison and verdict.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "attn_plan.h"
#include "syselfcheck.h"

int syat_tc_mode_parse(const char *v)
{
    /* The default stays cuda-cores until the tensor-core kernel has run on a GPU (docs/gpu.md). */
    if (!v || strcmp(v, "cuda-cores") == 0)
        return SYAT_TC_CUDA_CORES;
    if (strcmp(v, "auto") == 0)
        return SYAT_TC_AUTO;
    if (strcmp(v, "tensor-cores") == 0)
        return SYAT_TC_FORCE;
    return -1;
}

int syat_tc_fits(int head_dim, int v_head_dim, int group, char *why, size_t cap)
{
    if (head_dim != v_head_dim || (head_dim != 64 && head_dim != 128)) {
        if (why)
            snprintf(why, cap, "head_dim %d / v_head_dim %d: the tensor-core prefill kernel takes equal head dims of 64 "
                     "or 128", head_dim, v_head_dim);
        return 0;
    }
    if (group < 1 || group > 16) {
        if (why)
            snprintf(why, cap, "%d query heads per KV head: the tensor-core prefill kernel takes 1 to 16", group);
        return 0;
    }
    return 1;
}

void syat_plan(int32_t n_seqs, const int32_t *tok_start, int group, int min_tokens, int32_t *rows, int32_t *n_rows,
               int32_t *tiles, int32_t *n_tiles)
{
    const int per = syat_tc_tokens_per_tile(group);
    int32_t nr = 0, nt = 0;
    for (int32_t s = 0; s < n_seqs; s++) {
        const int32_t t0 = tok_start[s], n = tok_start[s + 1] - t0;
        if (min_tokens > 0 && n >= min_tokens) {
            for (int32_t i = 0; i < n; i += per) {
                tiles[2 * nt] = t0 + i;
                tiles[2 * nt + 1] = n - i < per ? n - i : per;
                nt++;
            }
        } else {
            for (int32_t i = 0; i < n; i++)
                rows[nr++] = t0 + i;
        }
    }
    *n_rows = nr;
    *n_tiles = nt;
}

int syat_compare(const float *got, const float *ref, size_t n, double bound, double *worst)
{
    return syc_rel_compare(got, ref, n, bound, worst);
}

int syat_tc_decide(int mode, int fits, const char *why_fit, int pass, double worst, int *warn, char *why,
                   size_t cap)
{
    *warn = 0;
    if (mode == SYAT_TC_CUDA_CORES)
        return 0;
    if (!fits) {
        if (mode != SYAT_TC_FORCE)
            return 0;
        snprintf(why, cap, "prefill_kernel = tensor-cores: %s; use auto or cuda-cores", why_fit);
        return -1;
    }
    if (pass)
        return 1;
    if (mode == SYAT_TC_FORCE) {
        snprintf(why, cap, "prefill_kernel = tensor-cores failed its self-check on this GPU: relative error %.3g "
                 "against k_attend (bound %.0e); use auto or cuda-cores", worst, SYAT_TC_BOUND);
        return -1;
    }
    *warn = 1;
    return 0;
}
