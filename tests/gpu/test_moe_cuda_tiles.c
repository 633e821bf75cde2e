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

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../unit/test_check.h"
#include "moe_tiles.h"
#include "sytune.h"

static const symt_limits SM120 = {101376, 65536, 1024}, SM90 = {232448, 65536, 1024};

/*
 * Registers and static shared memory per variant, in SYMK_VARIANTS order, from
 * the build's ptxas report (plugins/moe/cuda/moe_kern.res, nvcc 13.0): a
 * variant's shared memory is (rows + cols) x (k + 1) floats on every arch.
 */
static const int regs_sm120[SYMK_N_VARIANTS] = {48, 48, 48, 48, 64, 64, 74};
static const int regs_sm90[SYMK_N_VARIANTS] = {64, 32, 44, 44, 64, 64, 80};

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
    CHECK(SYMK_N_VARIANTS == 7);
    CHECK(strcmp(symt_variants[0].name, "64x32x32") == 0); /* the default: the tile before there were variants */
    CHECK(symt_find("64x32x32") == 0);
    CHECK(symt_find("128x64x16") == SYMK_N_VARIANTS - 1);
    CHECK(symt_find("64x32") == -1 && symt_find("") == -1);
    for (int v = 0; v < SYMK_N_VARIANTS; v++) {
        const symt_variant *x = &symt_variants[v];
        char name[32];
        snprintf(name, sizeof name, "%dx%dx%d", x->cols, x->rows, x->k);
        CHECK(strcmp(name, x->name) == 0);
        CHECK(x->threads == 256);
        CHECK(symt_find(x->name) == v);
    }
    char names[256];
    symt_names(names, sizeof names);
    CHECK_CONTAINS(names, "64x32x32, 64x8x32, 128x8x32");
}

static void test_limits(void)
{
    char why[300];
    /* Every compiled variant fits SM120 and SM90 as the compiler built it. */
    for (int v = 0; v < SYMK_N_VARIANTS; v++) {
        const symt_variant *x = &symt_variants[v];
        const int64_t smem = (int64_t)(x->rows + x->cols) * (x->k + 1) * 4;
        const symt_needs n120 = {smem, 0, regs_sm120[v]}, n90 = {smem, 0, regs_sm90[v]};
        CHECK(symt_check(x, &n120, &SM120, why, sizeof why) == 0);
        CHECK(symt_check(x, &n90, &SM90, why, sizeof why) == 0);
    }
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
    const symt_variant wide = {"256x16x32", 256, 16, 32, 512};
    const symt_needs r128 = {4096, 0, 128}, r128_256 = {4096, 0, 255};
    CHECK(symt_check(&wide, &r128, &SM120, why, sizeof why) == 0); /* 128 x 512 = 65536: exactly the file */
    CHECK(symt_check(&wide, &r128_256, &SM90, why, sizeof why) == -1);
    CHECK_CONTAINS(why, "tile 256x16x32: 255 registers x 512 threads = 130560 registers per block, the device has 65536");
    const symt_variant huge = {"512x64x32", 512, 64, 32, 2048};
    CHECK(symt_check(&huge, &r128, &SM90, why, sizeof why) == -1);
    CHECK_CONTAINS(why, "tile 512x64x32: 2048 threads per block, the device allows 1024");
}

static void test_table(const char *dir)
{
    symt_fit fit = {SM120, {{0}}};
    for (int v = 0; v < SYMK_N_VARIANTS; v++)
        fit.needs[v] = (symt_needs){(int64_t)(symt_variants[v].rows + symt_variants[v].cols) * (symt_variants[v].k + 1) * 4,
                                    0, regs_sm120[v]};
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
    test_table(dir);
    test_lookup(dir);
    char p[600];
    snprintf(p, sizeof p, "%s/t.ini", dir);
    remove(p);
    rmdir(dir);
    return sy_test_done("test_moe_cuda_tiles");
}
