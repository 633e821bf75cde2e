/*
 * moe/cpu internals. moe_cpu.c: descriptor, keys, supports, prepare,
 * prepare_layer. moe_route.c: expert selection. moe_cpu_fwd.c: forward.
 */
#ifndef SY_MOE_CPU_H
#define SY_MOE_CPU_H

#include "moe_tune.h"
#include "switchyard/plugin.h"
#include "sykern.h"
#include "sykmatmul.h"

#define SY_MOE_CPU_NAME "cpu"
#define SY_MOE_CPU_MAX_EXPERTS 1024 /* routing scratch lives on the stack */

typedef struct moe_layer {
    int ready;
    sy_tensor *gate, *up, *down; /* e_count views each (the caller's mmap stays valid) */
    /* With amx: each BF16 expert's three matrices repacked for the tiles, [3][e_count] (gate, up, down), else NULL. */
    syk_amx_pack **packs;
    int32_t n_packs;
    double *bias;                /* n_experts, or NULL: selection-only score bias */
    /* prepare_layer_bias (has_bias), F32 copies, e_count experts each: [e][inter], [e][inter], [e][hidden] or NULL. */
    float *gbias, *ubias, *dbias;
    int bias_ready;
} moe_layer;

/*
 * One active expert's share of a GEMM step (gate/up or down): its columns cut
 * into items of `width` columns, items [item0, item0 + ceil(cols / width)) of
 * the step. cost: one item's work, (the expert's tokens + MOE_COL_COST) x width.
 */
typedef struct moe_work {
    int64_t cost;
    int64_t item0;
    int32_t e; /* local expert index */
    int32_t width;
} moe_work;

typedef struct moe_cpu {
    const sy_host *host;
    syk_isa isa;
    const syk_kernels *kern;
    int64_t chunk_tokens; /* tokens per pass; larger batches run in several passes */

    /* Expert GEMM tiles (moe_tune.h): the `tile` key, else the table found under tuning_dir at prepare. */
    char tuning_dir[4096];
    moe_tile forced; /* token_block 0: none forced */
    int builtin;     /* tile = builtin: no table, the built-in tiles */
    moe_tune tune;
    uint64_t logged_buckets; /* bit b: bucket b's first pass was logged (debug); bit 63: the built-in tiles' */

    int prepared;
    sy_moe_problem p;
    moe_layer *layers;
    /* Expert parallelism (set_expert_range): the experts held, [e_first, e_first + e_count); the
     * layers' view arrays, counts, offsets and active use local indices (expert - e_first). */
    int32_t e_first, e_count;

    /* Scratch for one pass of chunk_tokens tokens (A = chunk_tokens * top_k assignments). */
    int32_t *ids;        /* [chunk, top_k] selected experts, best first */
    float *wts;          /* [chunk, top_k] their weights */
    int32_t *slot_of;    /* [chunk, top_k] -> assignment row; -1: an expert another rank holds */
    int32_t *assign_tok; /* [A] token of each assignment row, grouped by expert */
    int32_t *counts, *offsets; /* [n_experts + 1] */
    moe_work *work;      /* [n_experts + 1] the active experts of the current GEMM step, costliest items first */
    float *xe;           /* [A, hidden] gathered inputs */
    float *act;          /* [A, inter] gate, then silu(gate) * up */
    float *upb;          /* [A, inter] */
    float *ye;           /* [A, hidden] expert outputs */
    /* The `matmul` key resolved at create (get_proc("matmul") returns its line): matmul.bdot where it is bf16
     * (sykmatmul.h), and then xe and act also as BF16; matmul.amx where the tiles run on packed experts. */
    syk_matmul matmul;
    uint16_t *xeb;       /* [A, hidden] */
    uint16_t *actb;      /* [A, inter] */
    /* `activations = nvfp4` (W4A4) on NVFP4 experts: the GEMMs' inputs quantised per row (symoe_fp4act.h). */
    int act_nvfp4;       /* the key */
    int act_mxfp4;       /* `activations = mxfp4`: the same for MXFP4 experts, OCP MXFP4 rows (symoe_fp4act.h syx_) */
    int fp4act;          /* 1: act_nvfp4, 2: act_mxfp4, and the experts are FP4 (prepare_layer checks their scales) */
    uint8_t *qscratch;   /* [A, qrow] codes and scales of one row per assignment row */
    int64_t qrow;        /* bytes per row of qscratch: codes and scales of max(hidden, inter) elements */
} moe_cpu;

/*
 * Selects top_k experts for one token from its router logits and writes
 * ids (best first) and weights. Softmax or sigmoid scoring, optional
 * selection bias, grouped top-k and routed_scaling_factor as in sy_moe_problem
 * (DeepSeek-V3 semantics for sigmoid). Ties go to the lower expert id.
 */
void sy__moe_route(const sy_moe_problem *p, const float *logits, const double *bias, int32_t *ids, float *wts);

/*
 * *dst = *src as far as src->struct_size covers it, the rest zero (an ABI
 * 1.0 host's problem: silu, no biases); dst->struct_size is ours.
 */
void sy__moe_problem_copy(sy_moe_problem *dst, const sy_moe_problem *src);

/* Checks a problem (the ABI 1.1 fields too, when struct_size covers them); SY_OK or the reason. */
int sy__moe_check_problem(const sy_moe_problem *p, sy_err *why);

int sy__moe_cpu_forward(void *inst, int32_t layer, const sy_tensor *x, const sy_tensor *router_logits,
                        sy_tensor *out, sy_err *err);

#endif
