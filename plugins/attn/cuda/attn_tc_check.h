/*
 * The tensor-core prefill kernel's self-check on the GPU (attn_tc_check.c),
 * run by prepare before any step may use it (attn_plan.h's key decides
 * what a failure means).
 */
#ifndef SY_ATTN_TC_CHECK_H
#define SY_ATTN_TC_CHECK_H

#include "switchyard/plugin.h"

/* The instance's shape the check copies: its group, head dim, cache dtype, block size, window and scale. */
typedef struct syat_tc_check_in {
    const char *name; /* the plugin's, for messages */
    int group, head_dim, block_size, window;
    sy_dtype kvt;
    float scale;
} syat_tc_check_in;

/*
 * SY_OK with *pass (every output within SYAT_TC_BOUND of k_attend's and
 * finite) and *worst (the relative error); an error when the GPU failed
 * (not the kernel). tc_opted_in: the instance's opt-in flags.
 */
int syat_tc_selfcheck(const syat_tc_check_in *in, int *tc_opted_in, int *pass, double *worst, sy_err *err);

#endif
