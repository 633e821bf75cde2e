/*
 * moe/cuda's host-side tile logic, no GPU needed: the compiled variants'
 * names, the check of a variant against a device's limits (SM120: 101376
 * bytes of shared memory per block, SM90: 232448, 65536 registers, 1024
 * threads) on the needs the compiler reports for them, and the tuning
 * table's `tile` entry read through the shared reader (plugins/common/moe/
 * sytune.c): nearest bucket, an unknown variant and an entry too big for
 * the device refused at load with file:line and numbers, and the warnings
 * of the lookup (another SKU of the arch; none at all).
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../unit/test_check.h"
#include "moe_tiles.h"
#include "sytune.h"

static const symt_limits SM120 = {101376, 65536, 1024, 120}, SM90 = {232448, 65536, 1024, 90};

/*
 * Registers and static shared memory per variant, in SYMK_VARIANTS order, from
 * the build's ptxas report (plugins/moe/cuda/moe_kern.res, nvcc 13.0): a
 * variant's shared memory is (rows + cols) x (k + 1) floats on every arch.
 */
static const int regs_sm120[SYMK_N_FMAF] = {48, 48, 48, 48, 64, 64, 74};
static const int regs_sm90[SYMK_N_FMAF] = {64, 32, 44, 44, 64, 64, 80};
/*
 * The tensor-core tiles (mma in SYMK_MMA_VARIANTS order, then wgmma), the
 * same report: registers on sm_120 and on sm_90 (sm_90a for wgmma, which
 * has no sm_120 code: 0), static shared memory in bytes (the same on every
 * arch: mma (cols + rows) x (k + 8) x 2 bf16 x 2 bytes, wgmma (cols + rows)
 * x k x 2 x 2).
 */
static const int tc_regs_sm120[SYMK_N_MMA + SYMK_N_WGMMA] = {78, 80, 114, 0, 0};
static const int tc_regs_sm90[SYMK_N_MMA + SYMK_N_WGMMA] = {56, 64, 100, 40, 72};
static const int64_t tc_smem[SYMK_N_MMA + SYMK_N_WGMMA] = {11520, 15360, 30720, 18432, 24576};

/* The warnings sytune_load logs, collected. */
typedef struct log_buf {
    char text[4096];
    int warnings;
} log_buf;

static void log_fn(void *ctx, sy_log_level lvl, const char *plugin, const char *msg)
{
    log_buf *b = ctx;
    (void)plugin;
    if (lvl == SY_LOG_WARN)
        b->warnings++;
    const size_t o = strlen(b->text);
    snprintf(b->text + o, sizeof b->text - o, "%s\n", msg);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        exit(1);
    }
    fputs(text, f);
    fclose(f);
}

static const char *TABLE = "[table]\n"
                           "experts = 8\nn = 96\nk = 64\ndtype = BF16\n"
                           "[tokens=64]\n"
                           "tile = 128x32x32\n"
                           "[tokens=1]\n"
                           "tile = 64x8x32\n"
                           "[tokens=8]\n"
                           "tile = builtin\n";

static void test_variants(void)
{
    CHECK(SYMK_N_FMAF == 7 && SYMK_N_MMA == 3 && SYMK_N_WGMMA == 2 && SYMK_N_VARIANTS == 12);
    CHECK(strcmp(symt_variants[0].name, "64x32x32") == 0); /* the default: the tile before there were variants */
    CHECK(symt_find("64x32x32") == 0);
    CHECK(symt_find("128x64x16") == SYMK_N_FMAF - 1);
    CHECK(symt_find("mma64x8x32") == SYMK_N_FMAF);
    CHECK(symt_find("wgmma128x64x32") == SYMK_N_VARIANTS - 1);
    CHECK(symt_find("64x32") == -1 && symt_find("") == -1 && symt_find("mma") == -1);
    for (int v = 0; v < SYMK_N_VARIANTS; v++) {
        const symt_variant *x = &symt_variants[v];
        const char *prefix = x->kind == SYMT_MMA ? "mma" : x->kind == SYMT_WGMMA ? "wgmma" : "";
        char name[32];
        snprintf(name, sizeof name, "%s%dx%dx%d", prefix, x->cols, x->rows, x->k);
        CHECK(strcmp(name, x->name) == 0);
        CHECK(x->kind == (v < SYMK_N_FMAF ? SYMT_FMAF : v < SYMK_N_FMAF + SYMK_N_MMA ? SYMT_MMA : SYMT_WGMMA));
        CHECK(symt_find(x->name) == v);
        /* fmaf: 256 threads; mma: 32 per warp of 16 x 8 multiples; wgmma: a warpgroup of 128 per 64 columns. */
        if (x->kind == SYMT_FMAF)
            CHECK(x->threads == 256);
        else if (x->kind == SYMT_MMA)
            CHECK(x->threads % 32 == 0 && x->cols % 16 == 0 && x->rows % 8 == 0 && x->k % 16 == 0);
        else
            CHECK(x->threads == x->cols / 64 * 128 && x->cols % 64 == 0 && x->rows % 8 == 0 && x->rows <= 256 &&
                  x->k % 16 == 0);
    }
    CHECK(symt_variants[symt_find("mma64x8x32")].threads == 128 && symt_variants[symt_find("mma128x64x32")].threads == 256);
    char names[512];
    symt_names(names, sizeof names);
    CHECK_CONTAINS(names, "64x32x32, 64x8x32, 128x8x32");
    CHECK_CONTAINS(names, "128x64x16, mma64x8x32, mma64x32x32, mma128x64x32, wgmma128x16x32, wgmma128x64x32");
}

/* What the compiler reported for variant v on sm_120 (sm120 = 1) or sm_90 / sm_90a. */
static symt_needs needs_of(int v, int sm120)
{
    const symt_variant *x = &symt_variants[v];
    if (x->kind == SYMT_FMAF)
        return (symt_needs){(int64_t)(x->rows + x->cols) * (x->k + 1) * 4, 0, sm120 ? regs_sm120[v] : regs_sm90[v]};
    const int t = v - SYMK_N_FMAF;
    return (symt_needs){tc_smem[t], 0, sm120 ? tc_regs_sm120[t] : tc_regs_sm90[t]};
}

static void test_limits(void)
{
    char why[300];
    /* Every compiled variant fits SM120 and SM90 as the compiler built it (wgmma: SM90 only). */
    for (int v = 0; v < SYMK_N_VARIANTS; v++) {
        const symt_variant *x = &symt_variants[v];
        const symt_needs n120 = needs_of(v, 1), n90 = needs_of(v, 0);
        if (x->kind != SYMT_WGMMA)
            CHECK(symt_check(x, &n120, &SM120, why, sizeof why) == 0);
        CHECK(symt_check(x, &n90, &SM90, why, sizeof why) == 0);
        if (x->kind != SYMT_FMAF) { /* the tensor-core tiles' numbers as documented in docs/gpu.md */
            const int64_t bf16_pairs = (int64_t)(x->cols + x->rows) * (x->k + (x->kind == SYMT_MMA ? 8 : 0)) * 2 * 2;
            CHECK(n90.static_smem == bf16_pairs);
            CHECK(n90.regs > 0 && n90.regs <= 255);
        }
    }
    /* Which GPUs run which kind: wgmma only on 9.0 (its sm_90a code), mma on 8.0 and newer. */
    const int wg = symt_find("wgmma128x16x32"), mma = symt_find("mma64x8x32");
    const symt_needs nwg = needs_of(wg, 0), nmma = needs_of(mma, 1);
    CHECK(symt_check(&symt_variants[wg], &nwg, &SM120, why, sizeof why) == -1);
    CHECK_CONTAINS(why, "tile wgmma128x16x32: wgmma is built for sm_90a and runs on compute capability 9.0 only, this "
                        "GPU is 12.0");
    const symt_limits SM100 = {232448, 65536, 1024, 100}, SM80 = {166912, 65536, 1024, 80}, SM75 = {65536, 65536, 1024, 75};
    CHECK(symt_check(&symt_variants[wg], &nwg, &SM100, why, sizeof why) == -1);
    CHECK(symt_check(&symt_variants[wg], &nwg, &SM80, why, sizeof why) == -1);
    CHECK(symt_check(&symt_variants[mma], &nmma, &SM80, why, sizeof why) == 0);
    CHECK(symt_check(&symt_variants[mma], &nmma, &SM75, why, sizeof why) == -1);
    CHECK_CONTAINS(why, "tile mma64x8x32: mma.sync on bf16 needs compute capability 8.0 or newer, this GPU is 7.5");
    CHECK(symt_check(&symt_variants[0], &nmma, &SM75, why, sizeof why) == 0); /* fmaf tiles run anywhere */
    CHECK(symt_variants[0].rows == 32 && (32 + 64) * 33 * 4 == 12672); /* ptxas: 12672 bytes smem */
    /* 90000 B static + 20000 B dynamic: over SM120's 101376, within SM90's 232448. */
    const symt_variant *v0 = &symt_variants[0];
    const symt_needs big = {90000, 20000, 64};
    CHECK(symt_check(v0, &big, &SM120, why, sizeof why) == -1);
    CHECK_CONTAINS(why, "tile 64x32x32: 90000 B static + 20000 B dynamic = 110000 B of shared memory per block, "
                        "the device allows 101376 B");
    CHECK(symt_check(v0, &big, &SM90, why, sizeof why) == 0);
    const symt_needs edge = {101376, 0, 64}, over = {101377, 0, 64};
    CHECK(symt_check(v0, &edge, &SM120, why, sizeof why) == 0);
    CHECK(symt_check(v0, &over, &SM120, why, sizeof why) == -1);
    /* Registers x threads against the 65536 per block; threads against 1024. */
    const symt_variant wide = {"256x16x32", 256, 16, 32, 512, SYMT_FMAF};
    const symt_needs r128 = {4096, 0, 128}, r128_256 = {4096, 0, 255};
    CHECK(symt_check(&wide, &r128, &SM120, why, sizeof why) == 0); /* 128 x 512 = 65536: exactly the file */
    CHECK(symt_check(&wide, &r128_256, &SM90, why, sizeof why) == -1);
    CHECK_CONTAINS(why, "tile 256x16x32: 255 registers x 512 threads = 130560 registers per block, the device has 65536");
    const symt_variant huge = {"512x64x32", 512, 64, 32, 2048, SYMT_FMAF};
    CHECK(symt_check(&huge, &r128, &SM90, why, sizeof why) == -1);
    CHECK_CONTAINS(why, "tile 512x64x32: 2048 threads per block, the device allows 1024");
}

static void test_table(const char *dir)
{
    symt_fit fit = {SM120, {{0}}};
    for (int v = 0; v < SYMK_N_VARIANTS; v++)
        fit.needs[v] = needs_of(v, 1);
    const sytune_schema s = symt_schema(&fit, "cuda");
    sytune_table t;
    sy_err err = {{0}};
    char path[512];
    snprintf(path, sizeof path, "%s/t.ini", dir);
    write_file(path, TABLE);
    CHECK(sytune_read(path, 8, 96, 64, SY_DTYPE_BF16, &s, &t, &err) == SY_OK);
    CHECK(t.n == 3 && t.tokens[0] == 1 && t.tokens[1] == 8 && t.tokens[2] == 64); /* sorted */
    CHECK(t.entry[0][0] == symt_find("64x8x32") && t.entry[1][0] == 0 && t.entry[2][0] == symt_find("128x32x32"));
    /* Nearest bucket by ratio: 2 -> 1 (2x vs 4x), 3 -> 8 (3x vs 2.7x), 22 -> 8, 23 -> 64 (2.88x vs 2.78x). */
    CHECK(sytune_bucket(t.tokens, t.n, 2) == 0);
    CHECK(sytune_bucket(t.tokens, t.n, 3) == 1);
    CHECK(sytune_bucket(t.tokens, t.n, 22) == 1);
    CHECK(sytune_bucket(t.tokens, t.n, 23) == 2);
    CHECK(sytune_bucket(t.tokens, t.n, 1000) == 2);
    CHECK(sytune_bucket(t.tokens, 0, 5) == -1);
    /* The shape must be the model's. */
    CHECK(sytune_read(path, 8, 96, 128, SY_DTYPE_BF16, &s, &t, &err) == SY_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "t.ini:4: k = 64, but the model has 128");
    /* An unknown variant: file:line and the names there are. */
    char bad[1024];
    snprintf(bad, sizeof bad, "%s[tokens=256]\ntile = 256x256x64\n", TABLE);
    write_file(path, bad);
    CHECK(sytune_read(path, 8, 96, 64, SY_DTYPE_BF16, &s, &t, &err) == SY_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "t.ini:13: tile = '256x256x64': expected one of 64x32x32, 64x8x32,");
    /* The CPU's keys are not the GPU's. */
    snprintf(bad, sizeof bad, "%s[tokens=256]\ntoken_block = 4\n", TABLE);
    write_file(path, bad);
    CHECK(sytune_read(path, 8, 96, 64, SY_DTYPE_BF16, &s, &t, &err) == SY_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "t.ini:13: unknown key 'token_block' in [tokens=256] (expected tile)");
    /* A variant that would not fit this device is refused at load, with its numbers and the entry's line. */
    fit.needs[symt_find("128x32x32")].dyn_smem = 90000;
    write_file(path, TABLE);
    CHECK(sytune_read(path, 8, 96, 64, SY_DTYPE_BF16, &s, &t, &err) == SY_ERR_UNSUPPORTED);
    CHECK_CONTAINS(err.msg, "t.ini:6: [tokens=64] does not fit this device: tile 128x32x32: 21120 B static + 90000 B "
                            "dynamic = 111120 B of shared memory per block, the device allows 101376 B");
    fit.lim = SM90; /* the same entry on SM90's 232448 bytes */
    CHECK(sytune_read(path, 8, 96, 64, SY_DTYPE_BF16, &s, &t, &err) == SY_OK);
    /* A wgmma entry in an sm120 table is refused at load, naming the line (an SM90 table's is taken). */
    snprintf(bad, sizeof bad, "%s[tokens=256]\ntile = wgmma128x64x32\n", TABLE);
    write_file(path, bad);
    CHECK(sytune_read(path, 8, 96, 64, SY_DTYPE_BF16, &s, &t, &err) == SY_OK);
    CHECK(t.n == 4 && t.entry[3][0] == symt_find("wgmma128x64x32"));
    fit.lim = SM120;
    fit.needs[symt_find("128x32x32")].dyn_smem = 0;
    CHECK(sytune_read(path, 8, 96, 64, SY_DTYPE_BF16, &s, &t, &err) == SY_ERR_UNSUPPORTED);
    CHECK_CONTAINS(err.msg, "t.ini:12: [tokens=256] does not fit this device: tile wgmma128x64x32: wgmma is built for "
                            "sm_90a");
}

/* symt_compare: the self-check's pass/fail decision. */
static void test_compare(void)
{
    const float ref[4] = {1.0f, -2.0f, 0.5f, 4.0f};
    float got[4] = {1.0f, -2.0f, 0.5f, 4.0f};
    double worst = -1;
    CHECK(symt_compare(got, ref, 4, SYMT_TC_BOUND, &worst) == 0 && worst == 0.0);
    got[2] = 0.5f + 3e-4f; /* 3e-4 / max |ref| 4 = 7.5e-5: within 1e-4 */
    CHECK(symt_compare(got, ref, 4, SYMT_TC_BOUND, &worst) == 0 && worst > 7.4e-5 && worst < 7.6e-5);
    got[2] = 0.5f + 5e-4f; /* 1.25e-4: over */
    CHECK(symt_compare(got, ref, 4, SYMT_TC_BOUND, &worst) == -1 && worst > 1.2e-4 && worst < 1.3e-4);
    got[2] = 0.5f;
    got[1] = NAN; /* NaN never passes, whatever the bound */
    CHECK(symt_compare(got, ref, 4, 1e30, &worst) == -1 && isinf(worst));
    got[1] = INFINITY;
    CHECK(symt_compare(got, ref, 4, 1e30, &worst) == -1 && isinf(worst));
    got[1] = -2.0f;
    const float ref_nan[4] = {1.0f, NAN, 0.5f, 4.0f};
    CHECK(symt_compare(got, ref_nan, 4, 1e30, &worst) == -1);
    const float zeros[2] = {0.0f, 0.0f}, tiny[2] = {0.0f, 1e-30f};
    CHECK(symt_compare(zeros, zeros, 2, SYMT_TC_BOUND, &worst) == 0);
    CHECK(symt_compare(tiny, zeros, 2, SYMT_TC_BOUND, &worst) == -1);
    CHECK(symt_compare(got, ref, 0, SYMT_TC_BOUND, &worst) == -1); /* nothing compared is no pass */
    /* A transposed fragment: same values in other places, an error of order 1. */
    const float swapped[4] = {-2.0f, 1.0f, 0.5f, 4.0f};
    CHECK(symt_compare(swapped, ref, 4, SYMT_TC_BOUND, &worst) == -1 && worst > 0.7);
}

/* A pretend GPU self-check: per variant pass or fail, and how often it ran. */
typedef struct fake_check {
    int fail[SYMK_N_VARIANTS];
    int runs[SYMK_N_VARIANTS];
    int gpu_error;
} fake_check;

static int fake_selfcheck(void *ctx, int variant, int *pass, double *worst, sy_err *err)
{
    fake_check *f = ctx;
    if (f->gpu_error)
        return sy_err_set(err, SY_ERR_INTERNAL, "moe cuda: self-check of tile %s: an illegal memory access",
                          symt_variants[variant].name);
    f->runs[variant]++;
    *pass = !f->fail[variant];
    *worst = f->fail[variant] ? 0.873 : 2.5e-7;
    return SY_OK;
}

static void test_selfcheck(void)
{
    const int mma8 = symt_find("mma64x8x32"), mma64 = symt_find("mma128x64x32"), wg = symt_find("wgmma128x16x32");
    fake_check f;
    memset(&f, 0, sizeof f);
    f.fail[mma8] = 1;
    symt_verdicts vd;
    memset(&vd, 0, sizeof vd);
    log_buf lb = {"", 0};
    sy_host host;
    memset(&host, 0, sizeof host);
    host.log = log_fn;
    host.ctx = &lb;
    sy_err err = {{0}};
    /* A table naming the failing mma tile in two buckets, a passing one and an fmaf tile. */
    sytune_table t = {4, {1, 8, 64, 256}, {{mma8}, {mma8}, {mma64}, {symt_find("64x16x32")}}, "t.ini"};
    CHECK(symt_table_selfcheck(&t, &vd, fake_selfcheck, &f, &host, "cuda", &err) == SY_OK);
    CHECK(t.entry[0][0] == 0 && t.entry[1][0] == 0); /* fell back to the fmaf default */
    CHECK(t.entry[2][0] == mma64 && t.entry[3][0] == symt_find("64x16x32"));
    CHECK(f.runs[mma8] == 1 && f.runs[mma64] == 1 && f.runs[symt_find("64x16x32")] == 0); /* each once; fmaf never */
    CHECK(lb.warnings == 1);
    CHECK_CONTAINS(lb.text, "tile mma64x8x32 failed its self-check on this GPU (relative error 0.873 against the fmaf "
                            "tile, bound 1e-04): using 64x32x32 where t.ini names it");
    /* The verdicts stay: a second table costs no run and no second warning. */
    sytune_table t2 = {1, {16}, {{mma8}}, "t2.ini"};
    CHECK(symt_table_selfcheck(&t2, &vd, fake_selfcheck, &f, &host, "cuda", &err) == SY_OK);
    CHECK(t2.entry[0][0] == 0 && f.runs[mma8] == 1 && lb.warnings == 1);
    /* tile = <failed>: an error naming it and its error, never a quiet fallback; a passing one is fine. */
    CHECK(symt_key_selfcheck(&vd, mma8, fake_selfcheck, &f, &err) == SY_ERR_UNSUPPORTED);
    CHECK_CONTAINS(err.msg, "tile = mma64x8x32 failed its self-check on this GPU: relative error 0.873 against the fmaf "
                            "tile 64x32x32 (bound 1e-04)");
    CHECK(symt_key_selfcheck(&vd, mma64, fake_selfcheck, &f, &err) == SY_OK);
    CHECK(symt_key_selfcheck(&vd, 0, fake_selfcheck, &f, &err) == SY_OK);
    /* The GPU failing the check run (not the tile failing it) is an error, and no verdict is kept. */
    f.gpu_error = 1;
    CHECK(symt_key_selfcheck(&vd, wg, fake_selfcheck, &f, &err) == SY_ERR_INTERNAL);
    CHECK_CONTAINS(err.msg, "self-check of tile wgmma128x16x32: an illegal memory access");
    CHECK(vd.state[wg] == SYMT_UNCHECKED);
    f.gpu_error = 0;
    f.fail[wg] = 1;
    sytune_table t3 = {2, {1, 64}, {{wg}, {mma64}}, "t3.ini"};
    lb.warnings = 0;
    CHECK(symt_table_selfcheck(&t3, &vd, fake_selfcheck, &f, &host, "cuda", &err) == SY_OK);
    CHECK(t3.entry[0][0] == 0 && t3.entry[1][0] == mma64 && lb.warnings == 1 && f.runs[mma64] == 1);
}

static void test_lookup(const char *dir)
{
    symt_fit fit = {SM90, {{0}}};
    const sytune_schema s = symt_schema(&fit, "cuda");
    log_buf lb = {"", 0};
    sy_host host;
    memset(&host, 0, sizeof host);
    host.log = log_fn;
    host.ctx = &lb;
    char sku[64], path[1100], sub[512];
    sytune_sanitise(sku, sizeof sku, "NVIDIA H200 NVL");
    CHECK(strcmp(sku, "NVIDIA-H200-NVL") == 0);
    sytune_sanitise(sku, sizeof sku, " -- ");
    CHECK(strcmp(sku, "unknown") == 0);
    sytune_table t;
    sy_err err = {{0}};
    /* None: the default tiles, one warning naming both places looked. */
    CHECK(sytune_load(dir, "cuda-sm90", "NVIDIA-H200", 8, 96, 64, SY_DTYPE_BF16, &s, &host, &t, &err) == SY_OK);
    CHECK(t.n == 0 && strcmp(t.source, "built-in") == 0 && lb.warnings == 1);
    char want[1024];
    snprintf(want, sizeof want, "no MoE tuning table: looked for %s/cuda-sm90/NVIDIA-H200/E=8,N=96,K=64,dtype=BF16.ini "
             "and %s/cuda-sm90/*/E=8,N=96,K=64,dtype=BF16.ini", dir, dir);
    CHECK_CONTAINS(lb.text, want);
    /* Another SKU of the arch: used, with a warning. */
    snprintf(sub, sizeof sub, "%s/cuda-sm90", dir);
    mkdir(sub, 0777);
    snprintf(sub, sizeof sub, "%s/cuda-sm90/NVIDIA-H100-80GB-HBM3", dir);
    mkdir(sub, 0777);
    snprintf(path, sizeof path, "%s/E=8,N=96,K=64,dtype=BF16.ini", sub);
    write_file(path, TABLE);
    lb.text[0] = '\0';
    lb.warnings = 0;
    CHECK(sytune_load(dir, "cuda-sm90", "NVIDIA-H200", 8, 96, 64, SY_DTYPE_BF16, &s, &host, &t, &err) == SY_OK);
    CHECK(t.n == 3 && strcmp(t.source, path) == 0 && lb.warnings == 1);
    CHECK_CONTAINS(lb.text, "no MoE tuning table for this GPU (NVIDIA-H200): using ");
    CHECK_CONTAINS(lb.text, "tuned on another cuda-sm90 GPU");
    /* Its own: silent. Another arch's table is never taken. */
    lb.text[0] = '\0';
    lb.warnings = 0;
    CHECK(sytune_load(dir, "cuda-sm90", "NVIDIA-H100-80GB-HBM3", 8, 96, 64, SY_DTYPE_BF16, &s, &host, &t, &err) ==
          SY_OK);
    CHECK(t.n == 3 && lb.warnings == 0);
    CHECK(sytune_load(dir, "cuda-sm120", "NVIDIA-H100-80GB-HBM3", 8, 96, 64, SY_DTYPE_BF16, &s, &host, &t, &err) ==
          SY_OK);
    CHECK(t.n == 0 && lb.warnings == 1);
    remove(path);
    rmdir(sub);
    snprintf(sub, sizeof sub, "%s/cuda-sm90", dir);
    rmdir(sub);
}

int main(void)
{
    char dir[] = "/tmp/sy-moe-tiles-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_variants();
    test_limits();
    test_compare();
    test_selfcheck();
    test_table(dir);
    test_lookup(dir);
    char p[600];
    snprintf(p, sizeof p, "%s/t.ini", dir);
    remove(p);
    rmdir(dir);
    return sy_test_done("test_moe_cuda_tiles");
}
