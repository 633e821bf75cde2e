/*
 * The grouped GEMM's tile variants as the host sees them (names, shapes)
 * and the check of a variant against a device's limits. Plain C without
 * CUDA headers, so tests/unit/test_moe_cuda_tiles.c runs it on any build
 * with SM90's and SM120's numbers.
 */
#ifndef SY_MOE_TILES_H
#define SY_MOE_TILES_H

#include <stddef.h>
#include <stdint.h>

#include "moe_kern.h"
#include "sytune.h"

/* How a variant computes (moe_kern.h): which GPUs run it and whether it gives the fmaf tiles' bits. */
typedef enum symt_kind {
    SYMT_FMAF,  /* CUDA cores, one fmaf chain per output: every such tile gives the same bits */
    SYMT_MMA,   /* mma.sync bf16 split products (sm_80+), within SYMT_TC_BOUND of the fmaf tiles */
    SYMT_WGMMA, /* wgmma bf16 split products, sm_90a code: compute capability 9.0 only */
    SYMT_FP4,   /* block-scaled FP4 mma.sync (W4A4), sm_120a code: compute capability 12.0 only, and only for
                 * NVFP4 experts with [moe] activations = nvfp4 or MXFP4 ones with activations = mxfp4 (MX form) */
} symt_kind;

typedef struct symt_variant {
    char name[24]; /* "64x32x32", "mma64x8x32", "wgmma128x16x32", "fp4mma64x8x128": output columns x assignment
                    * rows x k slice */
    int cols, rows, k;
    int threads;
    symt_kind kind;
} symt_variant;

/* The variants in SYMK_VARIANTS order; index 0 is the default. */
extern const symt_variant symt_variants[SYMK_N_VARIANTS];

/* The index of the variant called name, or -1. */
int symt_find(const char *name);
/* "64x32x32, 64x8x32, ..." (every variant's name) into out. */
void symt_names(char *out, size_t cap);

/* What one block of a variant needs, from the compiler (cudaFuncGetAttributes or ptxas -v). */
typedef struct symt_needs {
    int64_t static_smem, dyn_smem; /* bytes */
    int regs;                      /* per thread; -1: the build has no image of the variant for this GPU */
} symt_needs;

/* What a block may have on a device (cudaDeviceGetAttribute). */
typedef struct symt_limits {
    int64_t smem_per_block; /* cudaDevAttrMaxSharedMemoryPerBlockOptin: 232448 on SM90, 101376 on SM120 */
    int64_t regs_per_block; /* cudaDevAttrMaxRegistersPerBlock: 65536 */
    int max_threads;        /* cudaDevAttrMaxThreadsPerBlock: 1024 */
    int cc;                 /* compute capability x 10: 90 on H100/H200, 120 on RTX PRO 6000 */
} symt_limits;

/*
 * 0 when v runs on the device (its kind's compute capability) and a block
 * of it fits the limits; else -1 and why says which, with the variant's
 * numbers and the device's.
 */
int symt_check(const symt_variant *v, const symt_needs *n, const symt_limits *l, char *why, size_t cap);

/*
 * The tensor-core tiles' self-check (moe_cuda.c runs it on the GPU before a
 * variant's first use): its output against the default fmaf tile's on a
 * seeded random problem of the layer's dtype and K. Pass: max |got - ref|
 * / max |ref| <= SYMT_TC_BOUND and every value finite; a wrong fragment
 * layout gives errors of order 1, the split products about 1e-6.
 */
#define SYMT_TC_BOUND 1e-4
/*
 * 0 when got is within bound of ref (relative to max |ref|, both finite
 * everywhere, n > 0), else -1; *worst the relative error (INFINITY when a
 * value is NaN or infinite, or ref is all zero while got is not).
 */
int symt_compare(const float *got, const float *ref, size_t n, double bound, double *worst);

/* Per variant: not yet checked, passed or failed its self-check (with its worst error). */
enum { SYMT_UNCHECKED, SYMT_PASSED, SYMT_FAILED };
typedef struct symt_verdicts {
    int state[SYMK_N_VARIANTS];
    double worst[SYMK_N_VARIANTS];
} symt_verdicts;

/* Runs variant's self-check: SY_OK with *pass and *worst, or an error (the GPU failed, not the variant). */
typedef int (*symt_selfcheck_fn)(void *ctx, int variant, int *pass, double *worst, sy_err *err);

/* The verdict of variant (running fn once when unchecked; fmaf tiles always pass): SY_OK with *pass, or fn's error. */
int symt_verdict(symt_verdicts *vd, int variant, symt_selfcheck_fn fn, void *ctx, int *pass, sy_err *err);
/*
 * `tile = NAME` naming a tensor-core variant: SY_OK when it passes its
 * self-check, else SY_ERR_UNSUPPORTED saying it failed, with its worst
 * error and the bound (a variant forced by name never falls back quietly).
 */
int symt_key_selfcheck(symt_verdicts *vd, int variant, symt_selfcheck_fn fn, void *ctx, sy_err *err);
/*
 * A tuning table's buckets: each tensor-core variant they name is checked
 * once; a failed one is replaced by the default fmaf tile (index 0) in
 * every bucket, with one warning on host naming it and its worst error.
 */
int symt_table_selfcheck(sytune_table *t, symt_verdicts *vd, symt_selfcheck_fn fn, void *ctx, const sy_host *host,
                         const char *log_name, sy_err *err);

/* Every variant's needs on one device and the device's limits: what table entries are checked against. */
typedef struct symt_fit {
    symt_limits lim;
    symt_needs needs[SYMK_N_VARIANTS];
    int fp4_act; /* the layer's activations are quantised (NVFP4 experts with activations = nvfp4, or MXFP4 ones with
                  * activations = mxfp4) */
} symt_fit;

/*
 * The tuning table's entry for moe/cuda (sytune.h): one key, `tile`, a
 * variant's name (or builtin, the default), held as the variant's index;
 * every entry checked against fit (a symt_fit, which must outlive the
 * schema's use) with symt_check.
 */
sytune_schema symt_schema(const symt_fit *fit, const char *log_name);
/*
 * The schema's check: SY_OK, or SY_ERR_UNSUPPORTED with "does not fit this
 * device: <symt_check's why>", or for an fp4 tile without fit->fp4_act
 * "needs NVFP4 experts and [moe] activations = nvfp4, or MXFP4 experts and
 * activations = mxfp4".
 */
int symt_check_entry(const void *fit, const int64_t *entry, char *why, size_t cap);

#endif
