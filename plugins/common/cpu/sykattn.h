/*
 * Argument checks shared by the cpu attention plugins (cpu and cpu-ref), so
 * both refuse exactly the same inputs with the same messages. Only checks
 * live here: each plugin keeps its own cache layout and arithmetic, which
 * is what makes the swap test between them meaningful.
 *
 * Semantics both implement: sequence s's new rows sit at positions
 * ctx_len[s] + i; position p of sequence s lives in physical block
 * block_table[s * max_blocks + p / block_size], slot p % block_size. A query
 * at position p attends to positions j <= p, and with sliding_window W > 0
 * only to j > p - W (W tokens including itself, as Hugging Face's Mistral);
 * W is per layer when the problem has layer_window (syk_attn_window).
 */
#ifndef SY_CPU_SYKATTN_H
#define SY_CPU_SYKATTN_H

#include <stddef.h>

#include "switchyard/plugin.h"

/* The value of the `kv_dtype` key. */
#define SYK_KV_DTYPE_CHOICES "f32|bf16|f16"

/*
 * The cache dtype: the problem's kv_dtype when it asks for F16 or BF16, else
 * (F32, the engine's "no preference" that it also sizes memory for) the
 * key's. Other dtypes: SY_ERR_UNSUPPORTED with the reason.
 */
int syk_attn_kv_dtype(const char *key, sy_dtype problem, sy_dtype *out, sy_err *err);

/* Problem fields every plugin needs sane (counts > 0, GQA divides, scale > 0,
 * windows >= 0, layer_window's included). */
int syk_attn_check_problem(const sy_attn_problem *p, sy_err *why);

/* The sliding window of one layer (0: full attention): layer_window[layer]
 * when the problem is ABI 1.1 and has one, else sliding_window. */
static inline int32_t syk_attn_window(const sy_attn_problem *p, int32_t layer)
{
    const size_t need = offsetof(sy_attn_problem, layer_window) + sizeof p->layer_window;
    return p->struct_size >= need && p->layer_window ? p->layer_window[layer] : p->sliding_window;
}

/* The attention-sink logits of one layer's n_heads query heads (gpt-oss), or
 * NULL: none (ABI 1.0 problems have none). A row's softmax then has one more
 * term exp(sink - m) in its denominator, and no value for it. */
static inline const float *syk_attn_sinks(const sy_attn_problem *p, int32_t layer)
{
    const size_t need = offsetof(sy_attn_problem, sinks) + sizeof p->sinks;
    return p->struct_size >= need && p->sinks ? p->sinks + (size_t)layer * (size_t)p->n_heads : NULL;
}

/*
 * Checks one forward() call against the prepared problem: layer, batch
 * tables, every block index the step touches, and the q/k/v/out shapes
 * (F32, rows of contiguous elements; out must not overlap the inputs).
 * On success *ld_* are the row strides in elements.
 */
typedef struct syk_attn_io {
    const float *q, *k, *v;
    float *out;
    int64_t ldq, ldk, ldv, ldo;
} syk_attn_io;

int syk_attn_check_forward(const sy_attn_problem *p, int32_t layer, const sy_attn_batch *b, const sy_tensor *q,
                           const sy_tensor *k, const sy_tensor *v, const sy_tensor *out, syk_attn_io *io,
                           sy_err *err);

/* copy_blocks arguments: every index in [0, n_blocks). */
int syk_attn_check_copy(const sy_attn_problem *p, const int32_t *src, const int32_t *dst, int32_t n, sy_err *err);

#endif
