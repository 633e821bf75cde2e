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
#include "moe_fp4_frag.h"
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
/*
 * The block-scaled FP4 tiles (SYMK_FP4_VARIANTS order), the same report
 * (plugins/moe/cuda/moe_fp4.res): sm_120a registers (the larger of the
 * NVFP4 and MX forms', as symk_fp4_attrs reports: 40 / 46, 48 / 48,
 * 76 / 76), static shared memory (cols + rows) x (k / 2 code bytes + 16
 * padding + k / 16 scale bytes), the same in both forms.
 */
static const int fp4_regs_sm120a[SYMK_N_FP4] = {46, 48, 76};
static const int64_t fp4_smem[SYMK_N_FP4] = {6336, 8448, 16896};

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
    CHECK(SYMK_N_FMAF == 7 && SYMK_N_MMA == 3 && SYMK_N_WGMMA == 2 && SYMK_N_FP4 == 3 && SYMK_N_VARIANTS == 15);
    CHECK(SYMK_FIRST_FP4 == 12 && symt_find("fp4mma64x8x128") == SYMK_FIRST_FP4);
    CHECK(symt_find("fp4mma128x64x128") == SYMK_N_VARIANTS - 1);
    CHECK(strcmp(symt_variants[0].name, "64x32x32") == 0); /* the default: the tile before there were variants */
    CHECK(symt_find("64x32x32") == 0);
    CHECK(symt_find("128x64x16") == SYMK_N_FMAF - 1);
    CHECK(symt_find("mma64x8x32") == SYMK_N_FMAF);
    CHECK(symt_find("wgmma128x64x32") == SYMK_FIRST_FP4 - 1);
    CHECK(symt_find("64x32") == -1 && symt_find("") == -1 && symt_find("mma") == -1);
    for (int v = 0; v < SYMK_N_VARIANTS; v++) {
        const symt_variant *x = &symt_variants[v];
        const char *prefix = x->kind == SYMT_MMA     ? "mma"
                             : x->kind == SYMT_WGMMA ? "wgmma"
                             : x->kind == SYMT_FP4   ? "fp4mma"
                                                     : "";
        char name[32];
        snprintf(name, sizeof name, "%s%dx%dx%d", prefix, x->cols, x->rows, x->k);
        CHECK(strcmp(name, x->name) == 0);
        CHECK(x->kind == (v < SYMK_N_FMAF                ? SYMT_FMAF
                          : v < SYMK_N_FMAF + SYMK_N_MMA ? SYMT_MMA
                          : v < SYMK_FIRST_FP4           ? SYMT_WGMMA
                                                         : SYMT_FP4));
        CHECK(symt_find(x->name) == v);
        /* fmaf: 256 threads; mma: 32 per warp of 16 x 8 multiples; wgmma: a warpgroup of 128 per 64 columns. */
        if (x->kind == SYMT_FMAF)
            CHECK(x->threads == 256);
        else if (x->kind == SYMT_MMA)
            CHECK(x->threads % 32 == 0 && x->cols % 16 == 0 && x->rows % 8 == 0 && x->k % 16 == 0);
        else if (x->kind == SYMT_FP4) /* m16n8k64 pieces; no taller than the tallest fmaf tile (moe_cuda.c's fallback) */
            CHECK(x->threads % 32 == 0 && x->cols % 16 == 0 && x->rows % 8 == 0 && x->k % 64 == 0 && x->rows <= 64);
        else
            CHECK(x->threads == x->cols / 64 * 128 && x->cols % 64 == 0 && x->rows % 8 == 0 && x->rows <= 256 &&
                  x->k % 16 == 0);
    }
    CHECK(symt_variants[symt_find("mma64x8x32")].threads == 128 && symt_variants[symt_find("mma128x64x32")].threads == 256);
    char names[512];
    symt_names(names, sizeof names);
    CHECK_CONTAINS(names, "64x32x32, 64x8x32, 128x8x32");
    CHECK_CONTAINS(names, "128x64x16, mma64x8x32, mma64x32x32, mma128x64x32, wgmma128x16x32, wgmma128x64x32, "
                          "fp4mma64x8x128, fp4mma64x32x128, fp4mma128x64x128");
}

/* What the compiler reported for variant v on sm_120 (sm120 = 1) or sm_90 / sm_90a. */
static symt_needs needs_of(int v, int sm120)
{
    const symt_variant *x = &symt_variants[v];
    if (x->kind == SYMT_FMAF)
        return (symt_needs){(int64_t)(x->rows + x->cols) * (x->k + 1) * 4, 0, sm120 ? regs_sm120[v] : regs_sm90[v]};
    if (x->kind == SYMT_FP4) /* sm_120a code only: nothing for sm_90 */
        return (symt_needs){fp4_smem[v - SYMK_FIRST_FP4], 0, sm120 ? fp4_regs_sm120a[v - SYMK_FIRST_FP4] : -1};
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
        if (x->kind == SYMT_FP4) { /* shared memory as documented; refused on 9.0 whatever the needs */
            CHECK(n120.static_smem == (int64_t)(x->cols + x->rows) * (x->k / 2 + 16 + x->k / 16));
            CHECK(symt_check(x, &n120, &SM90, why, sizeof why) == -1);
            continue;
        }
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
    /* The fp4 tiles: sm_120a code runs on 12.0 alone (not 12.1, not 10.0's tcgen05 GPUs, not 9.0 or 8.0). */
    const int f4 = symt_find("fp4mma64x32x128");
    const symt_needs nf4 = needs_of(f4, 1);
    CHECK(symt_check(&symt_variants[f4], &nf4, &SM120, why, sizeof why) == 0);
    const symt_limits SM121 = {101376, 65536, 1024, 121};
    const symt_limits *off120[] = {&SM90, &SM80, &SM100, &SM121};
    for (int i = 0; i < 4; i++) {
        CHECK(symt_check(&symt_variants[f4], &nf4, off120[i], why, sizeof why) == -1);
        CHECK_CONTAINS(why, "tile fp4mma64x32x128: block-scaled FP4 mma.sync is built for sm_120a and runs on compute "
                            "capability 12.0 only, this GPU is ");
    }
    CHECK_CONTAINS(why, "this GPU is 12.1");
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
    symt_fit fit = {SM120, {{0}}, 0};
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
    /* An fp4 entry: taken on SM120 only while the layer's activations are NVFP4 (NVFP4 experts, the mode on). */
    snprintf(bad, sizeof bad, "%s[tokens=256]\ntile = fp4mma128x64x128\n", TABLE);
    write_file(path, bad);
    CHECK(sytune_read(path, 8, 96, 64, SY_DTYPE_BF16, &s, &t, &err) == SY_ERR_UNSUPPORTED);
    CHECK_CONTAINS(err.msg, "t.ini:12: [tokens=256] tile fp4mma128x64x128 multiplies FP4 experts by FP4-quantised "
                            "activations: it needs NVFP4 experts and [moe] activations = nvfp4, or MXFP4 experts and "
                            "activations = mxfp4");
    fit.fp4_act = 1;
    CHECK(sytune_read(path, 8, 96, 64, SY_DTYPE_BF16, &s, &t, &err) == SY_OK);
    CHECK(t.n == 4 && t.entry[3][0] == symt_find("fp4mma128x64x128"));
    fit.lim = SM90;
    CHECK(sytune_read(path, 8, 96, 64, SY_DTYPE_BF16, &s, &t, &err) == SY_ERR_UNSUPPORTED);
    CHECK_CONTAINS(err.msg, "does not fit this device: tile fp4mma128x64x128: block-scaled FP4 mma.sync is built for "
                            "sm_120a");
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
    /* The fp4 tiles go through the same verdicts: checked once, a failed one replaced by the default with one
     * warning, a passing one kept; named by the key, a failed one is an error. */
    const int f8 = symt_find("fp4mma64x8x128"), f64 = symt_find("fp4mma128x64x128");
    f.fail[f8] = 1;
    sytune_table t4 = {3, {1, 8, 64}, {{f8}, {f8}, {f64}}, "t4.ini"};
    lb.warnings = 0;
    lb.text[0] = '\0';
    CHECK(symt_table_selfcheck(&t4, &vd, fake_selfcheck, &f, &host, "cuda", &err) == SY_OK);
    CHECK(t4.entry[0][0] == 0 && t4.entry[1][0] == 0 && t4.entry[2][0] == f64);
    CHECK(f.runs[f8] == 1 && f.runs[f64] == 1 && lb.warnings == 1);
    CHECK_CONTAINS(lb.text, "tile fp4mma64x8x128 failed its self-check on this GPU (relative error 0.873 against the "
                            "fmaf tile, bound 1e-04): using 64x32x32 where t4.ini names it");
    CHECK(symt_key_selfcheck(&vd, f8, fake_selfcheck, &f, &err) == SY_ERR_UNSUPPORTED);
    CHECK_CONTAINS(err.msg, "tile = fp4mma64x8x128 failed its self-check on this GPU");
    CHECK(symt_key_selfcheck(&vd, f64, fake_selfcheck, &f, &err) == SY_OK && f.runs[f64] == 1);
}

/*
 * The fp4 tile's fragment addressing (moe_fp4_frag.h, what the kernel
 * loads) against the PTX ISA's tables for m16n8k64 .e2m1 (transcribed
 * there as symf_spec_*): every nibble the kernel puts in a register is the
 * element the spec says that register holds; A, B and C are each covered
 * exactly once; each row's scales come from a thread of its quad under
 * either reading of thread-id-a.
 */
static void test_fp4_fragments(void)
{
    int seen_a[16][64] = {{0}}, seen_b[64][8] = {{0}}, seen_c[16][8] = {{0}}, bad = 0;
    for (int lane = 0; lane < 32; lane++) {
        for (int r = 0; r < 4; r++) {
            int row, byte;
            symf_a_load(lane, r, &row, &byte);
            for (int n = 0; n < 8; n++) { /* nibble n of the 32-bit load: element 2 (byte + n / 2) + n % 2 */
                const int k = 2 * (byte + n / 2) + n % 2;
                int srow, sk;
                symf_spec_a(lane, 8 * r + n, &srow, &sk);
                bad += srow != row || sk != k;
                seen_a[srow][sk]++;
            }
        }
        for (int r = 0; r < 2; r++) {
            int col, byte;
            symf_b_load(lane, r, &col, &byte);
            for (int n = 0; n < 8; n++) {
                const int k = 2 * (byte + n / 2) + n % 2;
                int sk, scol;
                symf_spec_b(lane, 8 * r + n, &sk, &scol);
                bad += scol != col || sk != k;
                seen_b[sk][scol]++;
            }
        }
        for (int i = 0; i < 4; i++) {
            int row, col, srow, scol;
            symf_c_store(lane, i, &row, &col);
            symf_spec_c(lane, i, &srow, &scol);
            bad += row != srow || col != scol;
            seen_c[srow][scol]++;
        }
        /* scale_A: the quad's threads 0 and 1 (thread-id-a = 0) hold rows g and g + 8, threads 2 and 3 the same. */
        const int g = lane / 4, t = lane % 4;
        bad += symf_sfa_row(lane) != (t % 2 ? g + 8 : g);
        bad += symf_sfb_col(lane) != g;
    }
    CHECK(bad == 0);
    int once = 1;
    for (int i = 0; i < 16; i++)
        for (int k = 0; k < 64; k++)
            once &= seen_a[i][k] == 1;
    for (int k = 0; k < 64; k++)
        for (int c = 0; c < 8; c++)
            once &= seen_b[k][c] == 1;
    for (int i = 0; i < 16; i++)
        for (int c = 0; c < 8; c++)
            once &= seen_c[i][c] == 1;
    CHECK(once);
    /* Spot values from the spec's figures: lane 5 (g 1, t 1) a2 starts at row 1, k 40; b1 at k 40, column 1. */
    int srow, sk, scol;
    symf_spec_a(5, 16, &srow, &sk);
    CHECK(srow == 1 && sk == 40);
    symf_spec_a(5, 8, &srow, &sk);
    CHECK(srow == 9 && sk == 8);
    symf_spec_b(5, 8, &sk, &scol);
    CHECK(sk == 40 && scol == 1);
    /*
     * A whole m16n8k64 on the host: the kernel's loads from row-major code
     * bytes, the spec's placement of every register nibble and scale byte,
     * against the direct product of the two matrices.
     */
    uint8_t ac[16][32], bc[8][32], as[16][4], bs[8][4];
    uint64_t st = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < 16 * 32; i++) {
        st ^= st << 13, st ^= st >> 7, st ^= st << 17;
        ac[i / 32][i % 32] = (uint8_t)st;
        bc[(i / 32) % 8][i % 32] = (uint8_t)(st >> 8);
    }
    for (int i = 0; i < 16 * 4; i++) {
        as[i / 4][i % 4] = (uint8_t)(0x30 + i % 16);
        bs[(i / 4) % 8][i % 4] = (uint8_t)(0x28 + i % 24);
    }
    double d[16][8] = {{0}}, want[16][8] = {{0}};
    /* The MMA: D[m][n] = sum_k A[m][k] sA[m][k/16] B[k][n] sB[n][k/16], each operand found through the spec. */
    double A[16][64], B[64][8];
    for (int lane = 0; lane < 32; lane++) {
        for (int r = 0; r < 4; r++) {
            int row, byte;
            symf_a_load(lane, r, &row, &byte);
            uint32_t reg = 0;
            for (int b = 0; b < 4; b++)
                reg |= (uint32_t)ac[row][byte + b] << (8 * b);
            for (int n = 0; n < 8; n++) {
                int m, k;
                symf_spec_a(lane, 8 * r + n, &m, &k);
                const int nib = (int)(reg >> (4 * n)) & 15, e = (nib >> 1) & 3, mm = nib & 1;
                const double q = (nib & 8 ? -1 : 1) * (e == 0 ? 0.5 * mm : (2 + mm) * (double)(1 << e) * 0.25);
                A[m][k] = q;
            }
        }
        for (int r = 0; r < 2; r++) {
            int col, byte;
            symf_b_load(lane, r, &col, &byte);
            uint32_t reg = 0;
            for (int b = 0; b < 4; b++)
                reg |= (uint32_t)bc[col][byte + b] << (8 * b);
            for (int n = 0; n < 8; n++) {
                int k, c;
                symf_spec_b(lane, 8 * r + n, &k, &c);
                const int nib = (int)(reg >> (4 * n)) & 15, e = (nib >> 1) & 3, mm = nib & 1;
                B[k][c] = (nib & 8 ? -1 : 1) * (e == 0 ? 0.5 * mm : (2 + mm) * (double)(1 << e) * 0.25);
            }
        }
    }
    /* Scale of row m, block j: byte j of the word the quad's thread 0 (row g) or 1 (row g + 8) loaded (thread-id-a 0). */
    double sA[16][4], sB[8][4];
    for (int m = 0; m < 16; m++) {
        const int lane = 4 * (m % 8) + (m >= 8);
        CHECK(symf_sfa_row(lane) == m);
        for (int j = 0; j < 4; j++)
            sA[m][j] = (double)as[symf_sfa_row(lane)][j];
    }
    for (int c = 0; c < 8; c++)
        for (int j = 0; j < 4; j++)
            sB[c][j] = (double)bs[symf_sfb_col(4 * c)][j];
    for (int m = 0; m < 16; m++)
        for (int c = 0; c < 8; c++)
            for (int k = 0; k < 64; k++) {
                d[m][c] += A[m][k] * sA[m][k / 16] * B[k][c] * sB[c][k / 16];
                const int na = (ac[m][k / 2] >> (4 * (k % 2))) & 15, nb = (bc[c][k / 2] >> (4 * (k % 2))) & 15;
                const double qa = (na & 8 ? -1 : 1) * (((na >> 1) & 3) == 0 ? 0.5 * (na & 1)
                                                                          : (2 + (na & 1)) * (double)(1 << ((na >> 1) & 3)) * 0.25);
                const double qb = (nb & 8 ? -1 : 1) * (((nb >> 1) & 3) == 0 ? 0.5 * (nb & 1)
                                                                          : (2 + (nb & 1)) * (double)(1 << ((nb >> 1) & 3)) * 0.25);
                want[m][c] += qa * as[m][k / 16] * qb * bs[c][k / 16];
            }
    int eq = 1;
    for (int m = 0; m < 16; m++)
        for (int c = 0; c < 8; c++)
            eq &= d[m][c] == want[m][c];
    CHECK(eq);
    /*
     * The scale words of both forms (symf_sf_slot, the kernel's staging of a
     * 128-k slice) against the PTX table (symf_spec_sf_k): the scale of every
     * k lands in the word of k's m16n8k64 step, at a byte the MMA reads
     * (below vec) whose k range holds k; no two blocks share a byte.
     */
    for (int vec = 2; vec <= 4; vec += 2) {
        const int blk = 64 / vec;
        int used[8] = {0}, sbad = 0;
        for (int k = 0; k < 128; k++) {
            const int j = k / blk, slot = symf_sf_slot(vec, j), word = slot / 4, b = slot % 4;
            sbad += word != k / 64 || b >= vec || k % 64 < symf_spec_sf_k(vec, b) ||
                    k % 64 >= symf_spec_sf_k(vec, b) + blk;
            if (k % blk == 0)
                sbad += used[slot]++ != 0;
        }
        CHECK(sbad == 0);
    }
    CHECK(symf_spec_sf_k(2, 1) == 32 && symf_spec_sf_k(4, 3) == 48 && symf_sf_slot(2, 3) == 5);
    /*
     * The MX form's whole m16n8k64 (kind::mxf4, scale_vec::2X): the same
     * registers, a slice's E8M0 bytes staged into words by symf_sf_slot, the
     * MMA reading byte b of the word for k from symf_spec_sf_k(2, b),
     * against the direct product with each row's scale of k / 32.
     */
    uint8_t xa[16][4], xb[8][4], wa[16][8] = {{0}}, wb[8][8] = {{0}};
    for (int i = 0; i < 16 * 4; i++) {
        xa[i / 4][i % 4] = (uint8_t)(120 + i % 9);
        xb[(i / 4) % 8][i % 4] = (uint8_t)(118 + i % 13);
    }
    for (int m = 0; m < 16; m++)
        for (int j = 0; j < 4; j++)
            wa[m][symf_sf_slot(2, j)] = xa[m][j];
    for (int c = 0; c < 8; c++)
        for (int j = 0; j < 4; j++)
            wb[c][symf_sf_slot(2, j)] = xb[c][j];
    int mx_eq = 1;
    for (int step = 0; step < 2; step++)
        for (int m = 0; m < 16; m++)
            for (int c = 0; c < 8; c++) {
                double got = 0, ref = 0;
                const int lane_a = 4 * (m % 8) + (m >= 8), lane_b = 4 * c;
                for (int k = 0; k < 64; k++) {
                    int b = 0;
                    while (b + 1 < 2 && symf_spec_sf_k(2, b + 1) <= k)
                        b++;
                    const double sa = ldexp(1, wa[symf_sfa_row(lane_a)][4 * step + b] - 127);
                    const double sb = ldexp(1, wb[symf_sfb_col(lane_b)][4 * step + b] - 127);
                    got += A[m][k] * sa * B[k][c] * sb;
                    ref += A[m][k] * ldexp(1, xa[m][(64 * step + k) / 32] - 127) * B[k][c] *
                           ldexp(1, xb[c][(64 * step + k) / 32] - 127);
                }
                mx_eq &= got == ref;
            }
    CHECK(mx_eq);
}

static void test_lookup(const char *dir)
{
    symt_fit fit = {SM90, {{0}}, 0};
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
    test_fp4_fragments();
    test_table(dir);
    test_lookup(dir);
    char p[600];
    snprintf(p, sizeof p, "%s/t.ini", dir);
    remove(p);
    rmdir(dir);
    return sy_test_done("test_moe_cuda_tiles");
}
