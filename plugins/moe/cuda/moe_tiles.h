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

typedef struct symt_variant {
    char name[24]; /* "64x32x32": output columns x assignment rows x k slice */
    int cols, rows, k;
    int threads;
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
    int regs;                      /* per thread */
} symt_needs;

/* What a block may have on a device (cudaDeviceGetAttribute). */
typedef struct symt_limits {
    int64_t smem_per_block; /* cudaDevAttrMaxSharedMemoryPerBlockOptin: 232448 on SM90, 101376 on SM120 */
    int64_t regs_per_block; /* cudaDevAttrMaxRegistersPerBlock: 65536 */
    int max_threads;        /* cudaDevAttrMaxThreadsPerBlock: 1024 */
} symt_limits;

/*
 * 0 when a block of v fits the limits; else -1 and why says which limit,
 * with the variant's numbers and the device's.
 */
int symt_check(const symt_variant *v, const symt_needs *n, const symt_limits *l, char *why, size_t cap);

/* Every variant's needs on one device and the device's limits: what table entries are checked against. */
typedef struct symt_fit {
    symt_limits lim;
    symt_needs needs[SYMK_N_VARIANTS];
} symt_fit;

/*
 * The tuning table's entry for moe/cuda (sytune.h): one key, `tile`, a
 * variant's name (or builtin, the default), held as the variant's index;
 * every entry checked against fit (a symt_fit, which must outlive the
 * schema's use) with symt_check.
 */
sytune_schema symt_schema(const symt_fit *fit, const char *log_name);
/* The schema's check: SY_OK, or SY_ERR_UNSUPPORTED with "does not fit this device: <symt_check's why>". */
int symt_check_entry(const void *fit, const int64_t *entry, char *why, size_t cap);

#endif
