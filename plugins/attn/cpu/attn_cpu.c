/*
 * attn/cpu: paged attention on the host, parallel over (sequence, KV head,
 * query chunk) through host->parallel_for. Lifetime and cache management
 * here; the forward pass is in attn_cpu_fwd.c.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn_cpu.h"

static const sy_key_decl keys[] = {
    {"kv_dtype", SY_KEY_ENUM, "f32",
     "KV cache element type when the engine has no preference (the problem's F16/BF16 wins)", 1, 0,
     SYK_KV_DTYPE_CHOICES},
    {"isa", SY_KEY_ENUM, "auto", "kernel instruction set; auto = the best the CPU and OS support", 1, 0,
     SYK_ISA_CHOICES},
    {NULL, 0, NULL, NULL, 0, 0, NULL},
};

static int probe(const sy_host *host, sy_err *why)
{
    (void)host;
    (void)why;
    return 10 + (int)syk_isa_best();
}

static int create(const sy_host *host, const sy_kv *cfg, size_t n_cfg, void **inst, sy_err *err)
{
    const char *kv = sy_kv_get(cfg, n_cfg, "kv_dtype");
    sy_dtype dt;
    syk_isa isa;
    int rc;
    if ((rc = syk_attn_kv_dtype(kv, SY_DTYPE_F32, &dt, err)) ||
        (rc = syk_isa_from_key(sy_kv_get(cfg, n_cfg, "isa"), &isa, err)))
        return rc;
    attn_cpu *a = calloc(1, sizeof *a);
    if (!a)
        return sy_err_set(err, SY_ERR_NOMEM, "attn cpu: cannot allocate the instance");
    a->host = host;
    a->isa = isa;
    a->kern = syk_kernels_for(isa);
    snprintf(a->kv_key, sizeof a->kv_key, "%s", kv ? kv : "f32");
    *inst = a;
    return SY_OK;
}

static void release(attn_cpu *a)
{
    syk_free(a->host, a->kc);
    syk_free(a->host, a->vc);
    syk_free(a->host, a->scratch);
    a->kc = a->vc = NULL;
    a->scratch = NULL;
    a->n_scratch = 0;
    a->prepared = 0;
}

static void destroy(void *inst)
{
    attn_cpu *a = inst;
    if (!a)
        return;
    release(a);
    free(a);
}

static int check(const attn_cpu *a, const sy_attn_problem *p, sy_dtype *dt, sy_err *why)
{
    int rc;
    if ((rc = syk_attn_check_problem(p, why)) || (rc = syk_attn_kv_dtype(a->kv_key, p->kv_dtype, dt, why)))
        return rc;
    if (p->head_dim > SY_ATTN_CPU_MAX_DIM || p->v_head_dim > SY_ATTN_CPU_MAX_DIM)
        return sy_err_set(why, SY_ERR_UNSUPPORTED, "head_dim %d / v_head_dim %d: attn cpu handles up to %d",
                          p->head_dim, p->v_head_dim, SY_ATTN_CPU_MAX_DIM);
    if (p->block_size > SY_ATTN_CPU_MAX_BLOCK)
        return sy_err_set(why, SY_ERR_UNSUPPORTED, "block_size %d: attn cpu handles up to %d", p->block_size,
                          SY_ATTN_CPU_MAX_BLOCK);
    return SY_OK;
}

static int supports(void *inst, const sy_attn_problem *p, sy_err *why)
{
    sy_dtype dt;
    return check(inst, p, &dt, why) == SY_OK;
}

int sy__attn_cpu_scratch(attn_cpu *a, int n_workers, sy_err *err)
{
    if (n_workers < 1)
        n_workers = 1;
    float *s = syk_alloc(a->host, a->scratch_floats * sizeof(float) * (size_t)n_workers, 64);
    if (!s)
        return sy_err_set(err, SY_ERR_NOMEM, "attn cpu: cannot allocate scratch for %d workers", n_workers);
    syk_free(a->host, a->scratch);
    a->scratch = s;
    a->n_scratch = n_workers;
    return SY_OK;
}

static int prepare(void *inst, const sy_attn_problem *p, sy_err *err)
{
    attn_cpu *a = inst;
    sy_dtype dt;
    int rc = check(a, p, &dt, err);
    if (rc)
        return rc;
    release(a);
    a->p = *p;
    a->kvt = dt;
    a->es = syk_wdtype_size(dt);
    a->k_tile = (size_t)p->block_size * (size_t)p->head_dim;
    a->v_tile = (size_t)p->block_size * (size_t)p->v_head_dim;
    const size_t tiles = (size_t)p->n_layers * (size_t)p->n_blocks * (size_t)p->n_kv_heads;
    const size_t kbytes = tiles * a->k_tile * a->es, vbytes = tiles * a->v_tile * a->es;
    a->kc = syk_alloc(a->host, kbytes, 64);
    a->vc = syk_alloc(a->host, vbytes, 64);
    if (!a->kc || !a->vc) {
        release(a);
        return sy_err_set(err, SY_ERR_NOMEM, "attn cpu: cannot allocate a KV cache of %zu bytes", kbytes + vbytes);
    }
    /* Zeroed so a read of a never-written slot (a caller bug) is at least finite and deterministic. */
    memset(a->kc, 0, kbytes);
    memset(a->vc, 0, vbytes);

    /* Query rows per work item: whole tokens (all heads of one KV group). */
    const int64_t group = p->n_heads / p->n_kv_heads;
    const int64_t tokens = SY_ATTN_CPU_ROWS / group > 0 ? SY_ATTN_CPU_ROWS / group : 1;
    a->rows_max = tokens * group;
    /* q pack, one block of scores, the output accumulators, m and l; 16 floats of slack per array for alignment. */
    a->scratch_floats = (size_t)a->rows_max * ((size_t)p->head_dim + (size_t)p->block_size + (size_t)p->v_head_dim + 2) +
                        5 * 16;
    const syk_par par = syk_par_from_host(a->host);
    if ((rc = sy__attn_cpu_scratch(a, par.n_workers, err))) {
        release(a);
        return rc;
    }
    a->prepared = 1;
    sy_logf(a->host, SY_LOG_INFO, SY_ATTN_CPU_NAME, "KV cache %.1f MiB (%s), %d layers x %d blocks x %d tokens, %s kernels",
            (double)(kbytes + vbytes) / 1048576.0, sy_dtype_name(dt), p->n_layers, p->n_blocks, p->block_size,
            syk_isa_name(a->isa));
    return SY_OK;
}

static int copy_blocks(void *inst, const int32_t *src, const int32_t *dst, int32_t n, sy_err *err)
{
    attn_cpu *a = inst;
    if (!a->prepared)
        return sy_err_set(err, SY_ERR_INVALID, "attn cpu: copy_blocks before prepare");
    int rc = syk_attn_check_copy(&a->p, src, dst, n, err);
    if (rc)
        return rc;
    /* One tile per (layer, KV head); see attn_cpu.h for the layout. */
    const size_t kb = a->k_tile * a->es, vb = a->v_tile * a->es;
    const size_t heads = (size_t)a->p.n_layers * (size_t)a->p.n_kv_heads;
    for (int32_t i = 0; i < n; i++) {
        if (src[i] == dst[i])
            continue;
        for (size_t h = 0; h < heads; h++) {
            const size_t s = h * (size_t)a->p.n_blocks + (size_t)src[i];
            const size_t d = h * (size_t)a->p.n_blocks + (size_t)dst[i];
            memcpy(a->kc + d * kb, a->kc + s * kb, kb);
            memcpy(a->vc + d * vb, a->vc + s * vb, vb);
        }
    }
    return SY_OK;
}

static const sy_attn_ops ops = {
    .struct_size = sizeof(sy_attn_ops),
    .supports = supports,
    .prepare = prepare,
    .forward = sy__attn_cpu_forward,
    .copy_blocks = copy_blocks,
};

static const sy_plugin_desc desc = {
    .struct_size = sizeof(sy_plugin_desc),
    .abi_major = SY_ABI_MAJOR,
    .abi_minor = SY_ABI_MINOR,
    .kind = SY_KIND_ATTN,
    .name = SY_ATTN_CPU_NAME,
    .version = PACKAGE_VERSION,
    .device = "cpu",
    .description = "paged flash-style attention on the host: GQA, sliding windows, attention sinks, F32/BF16/F16 KV "
                   "cache, portable/AVX2/AVX-512",
    .keys = keys,
    .probe = probe,
    .create = create,
    .destroy = destroy,
    .ops = &ops,
    .get_proc = NULL,
};

SY_EXPORT const sy_plugin_desc *SY_PLUGIN_ENTRY(void);
SY_EXPORT const sy_plugin_desc *SY_PLUGIN_ENTRY(void)
{
    return &desc;
}
