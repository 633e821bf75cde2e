/*
 * The tile variants' host table, their limits check, the tensor-core
 * tiles' self-check decisions and the tuning tables' entry (moe_tiles.h).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "moe_tiles.h"
#include "syselfcheck.h"

#define SYMT_ENTRY(c, r, k, tc, tr) {#c "x" #r "x" #k, c, r, k, ((c) / (tc)) * ((r) / (tr)), SYMT_FMAF},
#define SYMT_MMA_ENTRY(c, r, k, wm, wn) {"mma" #c "x" #r "x" #k, c, r, k, (wm) * (wn) * 32, SYMT_MMA},
#define SYMT_WGMMA_ENTRY(c, r, k) {"wgmma" #c "x" #r "x" #k, c, r, k, (c) / 64 * 128, SYMT_WGMMA},
#define SYMT_FP4_ENTRY(c, r, k, wm, wn) {"fp4mma" #c "x" #r "x" #k, c, r, k, (wm) * (wn) * 32, SYMT_FP4},
const symt_variant symt_variants[SYMK_N_VARIANTS] = {SYMK_VARIANTS(SYMT_ENTRY) SYMK_MMA_VARIANTS(SYMT_MMA_ENTRY)
                                                         SYMK_WGMMA_VARIANTS(SYMT_WGMMA_ENTRY)
                                                             SYMK_FP4_VARIANTS(SYMT_FP4_ENTRY)};

int symt_find(const char *name)
{
    for (int i = 0; i < SYMK_N_VARIANTS; i++)
        if (strcmp(name, symt_variants[i].name) == 0)
            return i;
    return -1;
}

void symt_names(char *out, size_t cap)
{
    size_t o = 0;
    out[0] = '\0';
    for (int i = 0; i < SYMK_N_VARIANTS && o < cap; i++)
        o += (size_t)snprintf(out + o, cap - o, "%s%s", i ? ", " : "", symt_variants[i].name);
}

int symt_check(const symt_variant *v, const symt_needs *n, const symt_limits *l, char *why, size_t cap)
{
    const int64_t smem = n->static_smem + n->dyn_smem, regs = (int64_t)n->regs * v->threads;
    if (v->kind == SYMT_MMA && l->cc < 80) {
        snprintf(why, cap, "tile %s: mma.sync on bf16 needs compute capability 8.0 or newer, this GPU is %d.%d",
                 v->name, l->cc / 10, l->cc % 10);
        return -1;
    }
    if (v->kind == SYMT_WGMMA && l->cc != 90) {
        snprintf(why, cap, "tile %s: wgmma is built for sm_90a and runs on compute capability 9.0 only, this GPU is "
                 "%d.%d", v->name, l->cc / 10, l->cc % 10);
        return -1;
    }
    /* An sm_120a image is not forward compatible, not even to 12.1 (sm_121a would need its own image). */
    if (v->kind == SYMT_FP4 && l->cc != 120) {
        snprintf(why, cap, "tile %s: block-scaled FP4 mma.sync is built for sm_120a and runs on compute capability "
                 "12.0 only, this GPU is %d.%d", v->name, l->cc / 10, l->cc % 10);
        return -1;
    }
    if (n->regs < 0) {
        snprintf(why, cap, "tile %s: this build has no code of it for this GPU (compute capability %d.%d)", v->name,
                 l->cc / 10, l->cc % 10);
        return -1;
    }
    if (v->threads > l->max_threads) {
        snprintf(why, cap, "tile %s: %d threads per block, the device allows %d", v->name, v->threads,
                 l->max_threads);
        return -1;
    }
    if (smem > l->smem_per_block) {
        snprintf(why, cap,
                 "tile %s: %lld B static + %lld B dynamic = %lld B of shared memory per block, the device allows "
                 "%lld B",
                 v->name, (long long)n->static_smem, (long long)n->dyn_smem, (long long)smem,
                 (long long)l->smem_per_block);
        return -1;
    }
    if (regs > l->regs_per_block) {
        snprintf(why, cap, "tile %s: %d registers x %d threads = %lld registers per block, the device has %lld",
                 v->name, n->regs, v->threads, (long long)regs, (long long)l->regs_per_block);
        return -1;
    }
    return 0;
}

static int parse_variant(const void *ctx, int key, const char *v, int64_t *out, char *why, size_t cap)
{
    (void)ctx;
    (void)key;
    const int i = strcmp(v, "builtin") == 0 ? 0 : symt_find(v);
    if (i < 0) {
        char names[256];
        symt_names(names, sizeof names);
        snprintf(why, cap, "expected one of %s, or builtin", names);
        return -1;
    }
    *out = i;
    return 0;
}

int symt_check_entry(const void *fit, const int64_t *entry, char *why, size_t cap)
{
    const symt_fit *f = fit;
    const int v = (int)entry[0];
    char lim[300];
    if (symt_variants[v].kind == SYMT_FP4 && !f->fp4_act) {
        snprintf(why, cap, "tile %s multiplies FP4 experts by FP4-quantised activations: it needs NVFP4 experts "
                 "and [moe] activations = nvfp4, or MXFP4 experts and activations = mxfp4", symt_variants[v].name);
        return SY_ERR_UNSUPPORTED;
    }
    if (symt_check(&symt_variants[v], &f->needs[v], &f->lim, lim, sizeof lim)) {
        snprintf(why, cap, "does not fit this device: %s", lim);
        return SY_ERR_UNSUPPORTED;
    }
    return SY_OK;
}

sytune_schema symt_schema(const symt_fit *fit, const char *log_name)
{
    return (sytune_schema){{"tile", NULL}, parse_variant, symt_check_entry, fit, log_name, "GPU"};
}

int symt_compare(const float *got, const float *ref, size_t n, double bound, double *worst)
{
    return syc_rel_compare(got, ref, n, bound, worst);
}

int symt_verdict(symt_verdicts *vd, int variant, symt_selfcheck_fn fn, void *ctx, int *pass, sy_err *err)
{
    if (symt_variants[variant].kind == SYMT_FMAF) {
        *pass = 1;
        return SY_OK;
    }
    if (vd->state[variant] == SYMT_UNCHECKED) {
        int ok = 0;
        double worst = INFINITY;
        const int rc = fn(ctx, variant, &ok, &worst, err);
        if (rc)
            return rc;
        vd->state[variant] = ok ? SYMT_PASSED : SYMT_FAILED;
        vd->worst[variant] = worst;
    }
    *pass = vd->state[variant] == SYMT_PASSED;
    return SY_OK;
}

int symt_key_selfcheck(symt_verdicts *vd, int variant, symt_selfcheck_fn fn, void *ctx, sy_err *err)
{
    int pass = 0;
    const int rc = symt_verdict(vd, variant, fn, ctx, &pass, err);
    if (rc || pass)
        return rc;
    return sy_err_set(err, SY_ERR_UNSUPPORTED,
                      "tile = %s failed its self-check on this GPU: relative error %.3g against the fmaf tile 64x32x32 "
                      "(bound %.0e); choose another tile or leave tile empty",
                      symt_variants[variant].name, vd->worst[variant], SYMT_TC_BOUND);
}

int symt_table_selfcheck(sytune_table *t, symt_verdicts *vd, symt_selfcheck_fn fn, void *ctx, const sy_host *host,
                         const char *log_name, sy_err *err)
{
    for (int b = 0; b < t->n; b++) {
        const int v = (int)t->entry[b][0];
        const int fresh = vd->state[v] == SYMT_UNCHECKED;
        int pass = 0;
        const int rc = symt_verdict(vd, v, fn, ctx, &pass, err);
        if (rc)
            return rc;
        if (pass)
            continue;
        if (fresh) /* once per variant, whatever number of buckets name it */
            sy_logf(host, SY_LOG_WARN, log_name,
                    "tile %s failed its self-check on this GPU (relative error %.3g against the fmaf tile, bound %.0e): "
                    "using %s where %s names it", symt_variants[v].name, vd->worst[v], SYMT_TC_BOUND,
                    symt_variants[0].name, t->source);
        for (int c = b; c < t->n; c++)
            if (t->entry[c][0] == v)
                t->entry[c][0] = 0;
    }
    return SY_OK;
}
