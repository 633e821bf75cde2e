/* The tile variants' host table, their limits check and the tuning tables' entry (moe_tiles.h). */
#include <stdio.h>
#include <string.h>

#include "moe_tiles.h"

#define SYMT_ENTRY(c, r, k, tc, tr) {#c "x" #r "x" #k, c, r, k, ((c) / (tc)) * ((r) / (tr))},
const symt_variant symt_variants[SYMK_N_VARIANTS] = {SYMK_VARIANTS(SYMT_ENTRY)};

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
