/*
 * MoE tuning tables for moe/cpu: the tiles of the expert GEMMs, per
 * token-count bucket, for one (experts, N, K, dtype) shape on one device.
 *
 * The file, its lookup and its buckets are every moe plugin's
 * (plugins/common/moe/sytune.h); for this plugin <arch> is "cpu-<isa>"
 * (cpu-avx512, cpu-avx2, cpu-portable) and <sku> the CPU's model name with
 * every run of other characters than [A-Za-z0-9] made one '-'.
 *
 *   [table]
 *   matmul = bf16      ; informational, as tool, device, arch: the [moe] matmul it was timed with
 *   experts = 8        ; must match the file name, as n, k and dtype
 *   n = 1024           ; expert intermediate size (gate/up rows)
 *   k = 768            ; hidden size
 *   dtype = BF16
 *   [tokens=16]        ; one section per bucket: tokens in one pass
 *   token_block = 8    ; an expert's tokens per syk_gemm_tile call (its rows of x); 0: built-in tiles
 *   n_block = 64       ; output columns per work item (multiple of 4); 0 = cut by cost over the workers
 *   threads = 0        ; workers for the expert GEMMs; 0 = all
 *
 * A pass of n tokens uses the bucket nearest to n (by ratio; ties to the
 * smaller). k is not tunable: it is summed in fixed SYK_KC slices so that
 * results stay batch-invariant whichever bucket a batch falls in.
 *
 * Every entry is checked against the device's limits at load (the same
 * shape a GPU plugin checks with shared memory per block and registers):
 * the weight panel an item re-reads for each token block plus that token
 * block of x (n_block x K weights + token_block x K floats) must fit in the
 * per-core L2, token_block <= 4096, threads <= the CPUs online.
 */
#ifndef SY_MOE_TUNE_H
#define SY_MOE_TUNE_H

#include <stddef.h>
#include <stdint.h>

#include "switchyard/plugin.h"
#include "sytune.h"

#define MOE_TUNE_MAX_BUCKETS SYTUNE_MAX_BUCKETS
#define MOE_TUNE_MAX_TOKEN_BLOCK 4096

typedef struct moe_tile {
    int64_t token_block; /* 0: the built-in path (all of an expert's tokens in one call) */
    int64_t n_block;     /* 0: columns cut by cost, about eight items per worker (moe_cpu_fwd.c plan_items) */
    int64_t threads;     /* 0: every worker */
} moe_tile;

typedef struct moe_tune {
    int n;
    int64_t tokens[MOE_TUNE_MAX_BUCKETS];
    moe_tile tile[MOE_TUNE_MAX_BUCKETS];
    char source[4096]; /* the table file, or "built-in" */
} moe_tune;

/* What a tile must fit in, for the checker. */
typedef struct moe_limits {
    const char *fast_what; /* "L2 per core" (a GPU: "shared memory per block") */
    int64_t fast_bytes;
    int64_t max_threads;
} moe_limits;

/* This CPU's limits (L2 from sysconf, 1 MiB when unknown). */
void moe_limits_cpu(moe_limits *l);
/* 0 if t fits for a K-wide weight of wbits per element; else -1 and why holds the numbers. */
int moe_tile_check(const moe_tile *t, int64_t K, int wbits, const moe_limits *l, char *why, size_t why_len);

/* "cpu-avx512" and the sanitised model name of this CPU. */
void moe_tune_device(const char *isa_name, char *arch, size_t arch_len, char *sku, size_t sku_len);
/* "E=8,N=1024,K=768,dtype=BF16.ini" */
void moe_tune_file_name(char *out, size_t cap, int64_t E, int64_t N, int64_t K, sy_dtype dt);

/*
 * Finds and reads the table for the shape (see above). On success *t holds
 * it (t->n == 0: built-in tiles) and the warning, if any, is logged on host.
 * A malformed table or an entry that does not fit is an error naming the
 * file, line and numbers.
 */
int moe_tune_load(const char *dir, const char *arch, const char *sku, int64_t E, int64_t N, int64_t K, sy_dtype dt,
                  const moe_limits *l, const sy_host *host, moe_tune *t, sy_err *err);
/* Reads one table file (the shape is checked against its [table] section). */
int moe_tune_read(const char *path, int64_t E, int64_t N, int64_t K, sy_dtype dt, const moe_limits *l, moe_tune *t,
                  sy_err *err);
/* The bucket a pass of n tokens takes (index into tokens/tile), or -1 when the table is empty. */
int moe_tune_bucket(const moe_tune *t, int64_t n);
/* The tile for a pass of n tokens (the built-in one when the table is empty). */
moe_tile moe_tune_pick(const moe_tune *t, int64_t n);
/* Parses "token_block,n_block,threads" (the `tile` key); 0 or -1. */
int moe_tile_parse(const char *s, moe_tile *t);

#endif
