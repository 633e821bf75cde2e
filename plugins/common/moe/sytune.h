/*
 * MoE tuning tables, the part every moe plugin shares: where a table is
 * looked for, the file's syntax, and the token-count bucket a pass takes.
 * What a bucket's entry holds (its keys and values) and whether it fits the
 * device are the plugin's, given as a schema.
 *
 * File: <tuning_dir>/<arch>/<sku>/E=<experts>,N=<inter>,K=<hidden>,dtype=<DTYPE>.ini
 * <arch> and <sku> are the plugin's ("cpu-avx512" and the CPU model name;
 * "cuda-sm90" and the GPU name), the SKU sanitised by sytune_sanitise.
 * Lookup: the SKU's own table; else a table of another SKU of the same arch
 * (first in name order, with a warning); else none (the plugin's built-in
 * tiles, with one warning naming the files looked for).
 *
 *   [table]
 *   experts = 8        ; must match the file name, as n, k and dtype
 *   n = 1024           ; expert intermediate size (gate/up rows)
 *   k = 768            ; hidden size
 *   dtype = BF16
 *   tool = ..., device = ..., arch = ..., matmul = ...   ; informational
 *   [tokens=16]        ; one section per bucket: tokens in one pass
 *   <the schema's keys> = <values>   ; a key left out is 0
 *
 * A pass of n tokens takes the bucket nearest to n by ratio (ties to the
 * smaller).
 */
#ifndef SY_SYTUNE_H
#define SY_SYTUNE_H

#include <stddef.h>
#include <stdint.h>

#include "switchyard/plugin.h"

#define SYTUNE_MAX_BUCKETS 32
#define SYTUNE_MAX_KEYS 4

typedef struct sytune_schema {
    const char *keys[SYTUNE_MAX_KEYS + 1]; /* a bucket's keys, NULL-terminated */
    /* value of keys[key] into *out: 0, or -1 with what was expected in why */
    int (*parse)(const void *ctx, int key, const char *value, int64_t *out, char *why, size_t cap);
    /* a whole entry against the device: SY_OK, or a status with why */
    int (*check)(const void *ctx, const int64_t *entry, char *why, size_t cap);
    const void *ctx;
    const char *log_name;    /* the plugin's name in log lines: "cpu", "cuda" */
    const char *device_word; /* in the warnings: "CPU", "GPU" */
} sytune_schema;

typedef struct sytune_table {
    int n;                                           /* buckets; 0: no table (built-in tiles) */
    int64_t tokens[SYTUNE_MAX_BUCKETS];              /* ascending */
    int64_t entry[SYTUNE_MAX_BUCKETS][SYTUNE_MAX_KEYS]; /* in schema key order */
    char source[4096];                               /* the file, or "built-in" */
} sytune_table;

/* dst = src with every run of characters other than [A-Za-z0-9] made one '-' ("unknown" when empty). */
void sytune_sanitise(char *dst, size_t cap, const char *src);
/* "E=8,N=1024,K=768,dtype=BF16.ini" */
void sytune_file_name(char *out, size_t cap, int64_t E, int64_t N, int64_t K, sy_dtype dt);
/* Reads one table file; a malformed one, or an entry the schema's check refuses, is an error naming file:line. */
int sytune_read(const char *path, int64_t E, int64_t N, int64_t K, sy_dtype dt, const sytune_schema *s,
                sytune_table *t, sy_err *err);
/* Finds (see above) and reads the table for the shape; the warning, if any, is logged on host. */
int sytune_load(const char *dir, const char *arch, const char *sku, int64_t E, int64_t N, int64_t K, sy_dtype dt,
                const sytune_schema *s, const sy_host *host, sytune_table *t, sy_err *err);
/* The bucket of tokens[0..n) a pass of count tokens takes, or -1 when n == 0. */
int sytune_bucket(const int64_t *tokens, int n, int64_t count);

#endif
