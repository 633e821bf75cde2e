/*
 * The cpu device plugin's instance and its ops (internal to the plugin).
 * device_cpu.c: descriptor, keys, probe, lifetime, memory, worker pool.
 * device_ops.c: the compute ops, each checking shapes before touching data.
 */
#ifndef SY_DEVICE_CPU_H
#define SY_DEVICE_CPU_H

#include "switchyard/plugin.h"
#include "sykern.h"
#include "sykmatmul.h"
#include "sykpool.h"

#define SY_CPU_DEV_NAME "cpu"

typedef struct sy_cpu_dev {
    const sy_host *host;
    syk_isa isa;
    const syk_kernels *kern;
    syk_pool *pool;
    syk_par par; /* over pool */
    /* The `matmul` key resolved at create: the path, the log line get_proc("matmul") returns, and its kernels:
     * matmul.bdot where it is bf16 (AVX512_BF16 and isa avx512), matmul.amx too where the AMX tiles run;
     * prepare_weight then repacks BF16 matrices for them (the pack in the prepared tensor's priv). */
    syk_matmul matmul;
    syk_amx_pack *embed_pack; /* the embedding's pack, dropped when a separate lm_head arrives (untied) */
    uint16_t *xb;     /* x rounded to BF16 for the BF16 path; grows to the largest batch x k seen */
    size_t xb_cap;    /* elements */
    /* The sample op's per-worker softmax and candidate scratch (device_sample.c). */
    float *sample_prob;
    int32_t *sample_idx;
    size_t sample_cap; /* elements of each */
} sy_cpu_dev;

int sy__cpu_embed(void *inst, const sy_tensor *table, const int32_t *ids, int64_t n, sy_tensor *out, sy_err *err);
int sy__cpu_rmsnorm(void *inst, const sy_tensor *x, const sy_tensor *w, float eps, sy_tensor *out, sy_err *err);
int sy__cpu_add_rmsnorm(void *inst, sy_tensor *residual, const sy_tensor *x, const sy_tensor *w, float eps,
                        sy_tensor *out, sy_err *err);
int sy__cpu_linear(void *inst, const sy_tensor *x, const sy_tensor *w, const sy_tensor *bias, sy_tensor *out,
                   sy_err *err);
int sy__cpu_linear_multi(void *inst, const sy_tensor *x, int32_t n, const sy_tensor *const *w,
                         const sy_tensor *const *bias, sy_tensor *const *out, sy_err *err);
int sy__cpu_rope(void *inst, sy_tensor *x, const int32_t *pos, const sy_rope_params *p, sy_err *err);
int sy__cpu_silu_mul(void *inst, const sy_tensor *gate, const sy_tensor *up, sy_tensor *out, sy_err *err);
int sy__cpu_add(void *inst, sy_tensor *acc, const sy_tensor *x, sy_err *err);
int sy__cpu_argmax(void *inst, const sy_tensor *x, int32_t *ids_out, float *vals_out, sy_err *err);
int sy__cpu_sample(void *inst, const sy_tensor *x, const sy_sample_row *rows, int32_t *ids_out, sy_err *err);

#endif
