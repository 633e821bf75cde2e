/*
 * moe/cuda: mixture of experts on an NVIDIA GPU. Its arch-specific tiles
 * (wgmma, sm_90a; block-scaled FP4, sm_120a) live beside the portable ones in this plugin and are
 * chosen per tile, never needed: a GPU they do not run on, or fail their
 * self-check on, gets the portable fmaf tiles.
 *
 * Per pass of up to max_tokens tokens:
 *   1. routing = device (the default): a kernel routes each token with
 *      symoe_route.h (what the CPU plugin's sy__moe_route runs, in
 *      double; tests/gpu/test_moe_route_dev.c checks it against a sorted
 *      oracle on the host), then one block groups the (token, expert) assignments by
 *      expert and cuts each group into row tiles. Nothing comes back to
 *      the host: the launches after it are sized for the most tiles a pass
 *      can have and idle past the pass's count.
 *      routing = host: the router logits come to the host, each token is
 *      routed by moe/cpu's own sy__moe_route, and the host groups and
 *      tiles the assignments and uploads them (the reference to compare
 *      the device path with; it synchronises every layer).
 *   2. on the device: gather the rows, grouped GEMMs for gate and up,
 *      silu * up (with expert biases or gpt-oss's clamped swiglu: a
 *      per-tile epilogue adding the biases, then the activation), grouped
 *      GEMM for down (its bias added per tile), and a weighted combine per
 *      token in top-k order.
 * Expert weights are uploaded once per layer into one [E, rows, cols]
 * buffer per matrix, in their own dtype: F32, F16, BF16, or FP8 E4M3 /
 * NVFP4 / MXFP4 codes packed as the checkpoint has them with their scales in a
 * second buffer (decoded in the GEMM's weight tile load). With expert
 * parallelism (set_expert_range) only the range's experts are uploaded;
 * every token is still routed among all experts, and assignments to the
 * others' experts are dropped before the GEMMs (the combine skips them).
 *
 * The grouped GEMM's tile is one of the compiled variants (moe_kern.h): the
 * `tile` key, else per token-count bucket from the tuning table for this
 * shape and GPU (plugins/common/moe/sytune.h; <arch> "cuda-sm<major><minor>",
 * <sku> the device name), else the default. Every variant a table or the key
 * names is checked against the device's limits at prepare, so none fails to
 * launch mid-run. The tensor-core variants (mma.sync on sm_80+, wgmma on
 * 9.0) are also run against the default fmaf tile on a seeded random
 * problem of the layer's dtype and K before first use (tc_selfcheck); a
 * table's variant that fails is replaced by the default with one warning,
 * a failed variant named by the key is an error.
 *
 * [moe] activations = nvfp4 on NVFP4 experts (W4A4): after the gather and
 * after silu * up, k_quant_rows quantises every row to NVFP4 with
 * symoe_fp4act.h (moe/cpu's quantiser) and writes the dequantised values
 * back, so every tile computes on the same activations; the fp4mma tiles
 * (sm_120a) multiply the codes and scales themselves. activations = mxfp4
 * does the same for MXFP4 experts with MXFP4 rows (E8M0 per 32, syx_), which
 * the fp4mma tiles' MX form (kind::mxf4, scale_vec::2X) multiplies.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include "moe_cpu.h"
#include "moe_kern.h"
#include "moe_route_dev.h"
#include "moe_tiles.h"
#include "sycuda.h"
#include "sykconv.h"
#include "sykquant.h"
#include "symoe_bias.h"
#include "symoe_range.h"
#include "sytune.h"

#define SY_MOE_CUDA_NAME "cuda"

/* One matrix (gate, up or down) of every expert this instance holds, on the device. */
typedef struct moe_cuda_mat {
    void *w;        /* [E, rows, cols] elements, or [E, rows, row bytes] codes (FP8 / NVFP4) */
    void *scale;    /* FP8 / NVFP4: [E, scale grid] (moe_kern.h, symk_qw), else NULL */
    float *global;  /* FP8 / NVFP4: [E] global scales, else NULL */
    symk_qw q;      /* points into scale and global */
    int mma_scales; /* NVFP4: every scale byte is a ue4m3 the block-scaled MMA reads as the decoder does (<= 0x7e) */
} moe_cuda_mat;

typedef struct moe_cuda_layer {
    moe_cuda_mat gate, up, down; /* [E, inter, hidden], [E, inter, hidden], [E, hidden, inter] */
    double *bias;                /* host [E] or NULL */
    double *d_bias;              /* the same on the device, or NULL */
    /* prepare_layer_bias (has_bias): one device block of F32 [EL][inter] gate, [EL][inter] up, [EL][hidden] down
     * (d_dbias NULL when the host gave none). */
    float *d_gbias, *d_ubias, *d_dbias;
} moe_cuda_layer;

/* The `tile` key: the tables, the default variant, or one variant for every pass. */
enum { TILE_TABLES = -2, TILE_BUILTIN = -1 };

typedef struct moe_cuda {
    const sy_host *host;
    int gpu; /* current at create (device cuda set it); every op enters it: the caller's thread may be on another */
    int64_t chunk_tokens;
    int prepared;
    sy_moe_problem p;
    int32_t e_first, e_count; /* the experts this instance holds (expert parallelism) */
    int tile_key;             /* TILE_TABLES, TILE_BUILTIN or a variant index */
    int route_host;           /* routing = host */
    int act_nvfp4;            /* activations = nvfp4 */
    int act_mxfp4;            /* activations = mxfp4 */
    int fp4act;               /* 1 (nvfp4) or 2 (mxfp4) when the experts are FP4: the expert GEMMs' inputs are
                               * quantised (prepare_layer checks the experts' scales match the mode) */
    char tuning_dir[4096];
    sytune_table tune;        /* entry[b][0]: bucket b's variant */
    symt_verdicts verdicts;   /* the tensor-core tiles' self-checks, for verdict_shape */
    int64_t verdict_shape[3]; /* weight dtype, hidden, inter the verdicts were found for */
    uint64_t logged_buckets;  /* bit b: bucket b's first pass was logged (debug); bit 63: the default's */
    moe_cuda_layer *layers;
    /* Host scratch for one pass (A = chunk_tokens * top_k). */
    float *logits;      /* [chunk, E] */
    int32_t *ids;       /* [chunk, K] */
    float *wts;         /* [chunk, K] */
    int32_t *counts, *offsets; /* [E + 1] */
    int32_t *meta;      /* assign_tok [A] | slot_of [A] | tiles [n_tiles * 3] */
    /* Device scratch for one pass. */
    int32_t *d_meta;    /* as meta, then a symk_counts (device routing) */
    int32_t *d_ids;     /* [A] (device routing) */
    void *d_route;      /* the routing kernel's scratch (symk_route_scratch) */
    float *d_wts, *d_xe, *d_act, *d_up, *d_ye;
    void *d_q;          /* fp4act: the two symk_qa's buffers */
    symk_qa qx, qf;     /* fp4act: xe [A, hidden] and act [A, inter] quantised */
    size_t max_tiles;
} moe_cuda;

static const sy_key_decl keys[] = {
    {"max_tokens", SY_KEY_INT, "1024",
     "tokens per pass, which sizes the device scratch (about max_tokens x top_k x (2 hidden + 2 inter) floats); "
     "larger batches run in several passes",
     1, 1048576, NULL},
    {"tile", SY_KEY_STRING, "",
     "the grouped GEMM's tile variant (colsxrowsxk) for every pass, overriding the tables (switchyard tune-moe "
     "sweeps them): on CUDA cores, bit-identical to each other, 64x32x32 (the default), 64x8x32, 128x8x32, "
     "64x16x32, 64x64x32, 128x32x32, 128x64x16; on tensor cores (bf16 hi + lo split products, within 1e-4 of "
     "those, self-checked on the GPU before use) mma64x8x32, mma64x32x32, mma128x64x32 (compute capability 8.0+), "
     "wgmma128x16x32, wgmma128x64x32 (9.0 only); with activations = nvfp4 on NVFP4 experts or activations = "
     "mxfp4 on MXFP4 experts, block-scaled FP4 "
     "fp4mma64x8x128, fp4mma64x32x128, fp4mma128x64x128 (12.0 only); builtin: the default; empty or auto: the tables",
     0, 0, NULL},
    {"tuning_dir", SY_KEY_STRING, SY_MOE_TUNING_DIR,
     "MoE tuning tables: <dir>/cuda-sm<cc>/<gpu name>/E=..,N=..,K=..,dtype=...ini (docs/moe-tuning.md)", 0, 0, NULL},
    /* Opt-in: it changes the numbers (W4A4); docs/gpu.md "Block-scaled FP4 MoE tiles". */
    {"activations", SY_KEY_ENUM, "f32",
     "the expert GEMMs' inputs: f32 as they are; nvfp4: each token row quantised to NVFP4 (E2M1 codes, E4M3 scale per "
     "16, F32 global scale amax / 2688) before the gate/up and the down GEMMs, for NVFP4 experts only (others stay "
     "F32), which the fp4mma tiles multiply on the block-scaled tensor cores of compute capability 12.0; mxfp4: the "
     "same for MXFP4 experts with OCP MXFP4 rows (E2M1 codes, E8M0 scale per 32, no global scale)",
     0, 0, "f32|nvfp4|mxfp4"},
    /* host stays the default until a GPU run has checked and timed device routing (docs/gpu.md). */
    {"routing", SY_KEY_ENUM, "host",
     "host: copy the router logits to the host and route there with moe cpu's code (synchronises every layer); "
     "device: route and group the tokens on the GPU (no host round trip in a layer; not yet run on a GPU)",
     0, 0, "host|device"},
    {NULL, 0, NULL, NULL, 0, 0, NULL},
};

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The installed tables, or the source tree's before `make install` (as moe/cpu). */
static const char *default_tuning_dir(void)
{
    return !is_dir(SY_MOE_TUNING_DIR) && is_dir(SY_MOE_TUNING_SRCDIR) ? SY_MOE_TUNING_SRCDIR : SY_MOE_TUNING_DIR;
}

static int probe(const sy_host *host, sy_err *why)
{
    return syc_probe_gpu(syc_probe_target(host), why) ? 50 : 0; /* the portable variant: an arch-specific one should
                                                                  * score higher */
}

static int create(const sy_host *host, const sy_kv *cfg, size_t n_cfg, void **inst, sy_err *err)
{
    const long long mt = sy_kv_int(cfg, n_cfg, "max_tokens", 1024);
    if (mt < 1 || mt > 1048576)
        return sy_err_set(err, SY_ERR_INVALID, "max_tokens = %lld: expected 1..1048576", mt);
    const char *tile = sy_kv_get(cfg, n_cfg, "tile"), *td = sy_kv_get(cfg, n_cfg, "tuning_dir");
    int tile_key = TILE_TABLES;
    if (tile && strcmp(tile, "builtin") == 0)
        tile_key = TILE_BUILTIN;
    else if (tile && *tile && strcmp(tile, "auto") != 0 && (tile_key = symt_find(tile)) < 0) {
        char names[256];
        symt_names(names, sizeof names);
        return sy_err_set(err, SY_ERR_INVALID, "tile = '%s': expected one of %s, builtin, auto or empty", tile, names);
    }
    const char *act = sy_kv_get(cfg, n_cfg, "activations");
    if (act && *act && strcmp(act, "f32") != 0 && strcmp(act, "nvfp4") != 0 && strcmp(act, "mxfp4") != 0)
        return sy_err_set(err, SY_ERR_INVALID, "activations = '%s': expected f32, nvfp4 or mxfp4", act);
    const char *routing = sy_kv_get(cfg, n_cfg, "routing");
    if (routing && *routing && strcmp(routing, "device") != 0 && strcmp(routing, "host") != 0)
        return sy_err_set(err, SY_ERR_INVALID, "routing = '%s': expected device or host", routing);
    moe_cuda *m = calloc(1, sizeof *m);
    if (!m)
        return sy_err_set(err, SY_ERR_NOMEM, "moe cuda: cannot allocate the instance");
    m->host = host;
    m->gpu = syc_current_gpu();
    m->route_host = !routing || strcmp(routing, "device") != 0;
    m->act_nvfp4 = act && strcmp(act, "nvfp4") == 0;
    m->act_mxfp4 = act && strcmp(act, "mxfp4") == 0;
    m->chunk_tokens = mt;
    m->tile_key = tile_key;
    snprintf(m->tuning_dir, sizeof m->tuning_dir, "%s",
             !td || strcmp(td, SY_MOE_TUNING_DIR) == 0 ? default_tuning_dir() : td);
    *inst = m;
    return SY_OK;
}

/* cudaFree(NULL) is a no-op, so a partly uploaded layer frees the same way. */
static void mat_free(moe_cuda_mat *M)
{
    cudaFree(M->w);
    cudaFree(M->scale);
    cudaFree(M->global);
    memset(M, 0, sizeof *M);
}

static void layer_free(moe_cuda_layer *L)
{
    mat_free(&L->gate);
    mat_free(&L->up);
    mat_free(&L->down);
    cudaFree(L->d_bias);
    cudaFree(L->d_gbias);
    free(L->bias);
    L->bias = NULL;
    L->d_bias = NULL;
    L->d_gbias = L->d_ubias = L->d_dbias = NULL;
}

static void release(moe_cuda *m)
{
    cudaSetDevice(m->gpu); /* frees go to the instance's GPU whichever thread destroys it */
    if (m->layers) {
        for (int32_t l = 0; l < m->p.n_layers; l++)
            layer_free(&m->layers[l]);
        free(m->layers);
        m->layers = NULL;
    }
    void *host[] = {m->logits, m->ids, m->wts, m->counts, m->offsets, m->meta};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++)
        free(host[i]);
    void *dev[] = {m->d_meta, m->d_ids, m->d_route, m->d_wts, m->d_xe, m->d_act, m->d_up, m->d_ye, m->d_q};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        if (dev[i])
            cudaFree(dev[i]);
    m->logits = m->wts = NULL;
    m->ids = m->counts = m->offsets = m->meta = m->d_meta = m->d_ids = NULL;
    m->d_route = m->d_q = NULL;
    m->d_wts = m->d_xe = m->d_act = m->d_up = m->d_ye = NULL;
    m->prepared = 0;
}

static void destroy(void *inst)
{
    moe_cuda *m = inst;
    if (!m)
        return;
    release(m);
    free(m);
}

static int check(const sy_moe_problem *p, sy_err *why)
{
    int rc = sy__moe_check_problem(p, why);
    if (rc)
        return rc;
    if (!syk_wdtype_ok(p->weight_dtype) && !syk_wdtype_quant(p->weight_dtype))
        return sy_err_set(why, SY_ERR_UNSUPPORTED,
                          "expert weights %s: moe cuda reads F32, F16, BF16, F8_E4M3, NVFP4 and MXFP4",
                          sy_dtype_name(p->weight_dtype));
    return SY_OK;
}

static int supports(void *inst, const sy_moe_problem *p, sy_err *why)
{
    (void)inst;
    return check(p, why) == SY_OK;
}

/* This GPU's <arch> and <sku> for the tables: "cuda-sm90", "NVIDIA-H200". */
static int tune_device(int dev, char *arch, size_t arch_len, char *sku, size_t sku_len, sy_err *err)
{
    struct cudaDeviceProp prop;
    SYC_TRY(err, cudaGetDeviceProperties(&prop, dev), "moe cuda: cudaGetDeviceProperties");
    snprintf(arch, arch_len, "cuda-sm%d%d", prop.major, prop.minor);
    sytune_sanitise(sku, sku_len, prop.name);
    return SY_OK;
}

/* Every variant's needs (cudaFuncGetAttributes) and this device's limits. */
static int tile_fit_query(int dev, symt_fit *f, sy_err *err)
{
    int smem = 0, regs = 0, thr = 0, ccmaj = 0, ccmin = 0;
    SYC_TRY(err, cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev),
            "moe cuda: shared memory per block");
    SYC_TRY(err, cudaDeviceGetAttribute(&regs, cudaDevAttrMaxRegistersPerBlock, dev), "moe cuda: registers per block");
    SYC_TRY(err, cudaDeviceGetAttribute(&thr, cudaDevAttrMaxThreadsPerBlock, dev), "moe cuda: threads per block");
    SYC_TRY(err, cudaDeviceGetAttribute(&ccmaj, cudaDevAttrComputeCapabilityMajor, dev), "moe cuda: compute capability");
    SYC_TRY(err, cudaDeviceGetAttribute(&ccmin, cudaDevAttrComputeCapabilityMinor, dev), "moe cuda: compute capability");
    f->lim = (symt_limits){smem, regs, thr, ccmaj * 10 + ccmin};
    for (int v = 0; v < SYMK_N_VARIANTS; v++) {
        f->needs[v] = (symt_needs){0, 0, 0};
        /* The wgmma (fp4) tiles' module holds sm_90a (sm_120a) code alone: nothing to ask another GPU (symt_check
         * refuses them). */
        const symt_kind kind = symt_variants[v].kind;
        if ((kind == SYMT_WGMMA && f->lim.cc != 90) || (kind == SYMT_FP4 && f->lim.cc != 120))
            continue;
        symk_attrs a;
        const int e = symk_variant_attrs(v, &a);
        if (e && (kind == SYMT_WGMMA || kind == SYMT_FP4)) {
            f->needs[v].regs = -1; /* refused when named, naming this GPU; the other tiles stay usable */
            continue;
        }
        if (e)
            return syc_fail(err, (cudaError_t)e, "moe cuda: cudaFuncGetAttributes of a grouped GEMM variant");
        f->needs[v] = (symt_needs){a.static_smem, 0, a.regs};
    }
    return SY_OK;
}

/* A seeded xorshift in [-1, 1): the self-check's problem is the same on every run. */
static float check_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (float)((double)(*s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* Row tiles of at most rows rows over two experts holding 36 rows and 1 row (37 assignment rows). */
static int64_t check_tiles(int rows, symk_tile *t)
{
    static const int32_t count[2] = {36, 1};
    int64_t n = 0;
    for (int32_t e = 0, row0 = 0; e < 2; row0 += count[e], e++)
        for (int32_t r = 0; r < count[e]; r += rows)
            t[n++] = (symk_tile){e, row0 + r, count[e] - r < rows ? count[e] - r : rows};
    return n;
}

/*
 * One self-check problem: out[37, M] = x . W_e^T over two experts of
 * dtype dt with the variant and with the default fmaf tile, compared by
 * symt_compare. Weights and activations seeded random in [-1, 1) (FP8:
 * random codes and F32 scales per 128 x 128; NVFP4: random codes, E4M3
 * scales per 16, a global scale; with mx, MXFP4: E8M0 scales per 32, 2^-3
 * .. 2^0, global 1, and an fp4 tile's activations as MXFP4 rows).
 */
static int check_shape(int variant, sy_dtype dt, int mx, int64_t M, int64_t K, uint64_t seed, int *pass,
                       double *worst, sy_err *err)
{
    enum { E = 2, A = 37 };
    const int fp8 = dt == SY_DTYPE_FP8_E4M3, fp4 = dt == SY_DTYPE_FP4_E2M1;
    if (fp4)
        K &= ~(int64_t)1; /* two codes a byte */
    mx = mx && fp4;
    const int32_t b0 = fp8 ? 128 : 1, b1 = fp8 ? 128 : mx ? 32 : 16;
    const int64_t n_scales = (fp8 || fp4) ? ((M + b0 - 1) / b0) * ((K + b1 - 1) / b1) : 0;
    const size_t wbytes = fp8 ? (size_t)(M * K) : fp4 ? (size_t)(M * K / 2) : (size_t)(M * K) * (size_t)sy_dtype_bits(dt) / 8;
    const size_t sbytes = (size_t)n_scales * (fp8 ? sizeof(float) : 1);
    uint8_t *w = malloc(wbytes * E), *sc = malloc(sbytes * E + 1);
    float *x = malloc(sizeof(float) * (size_t)(A * K)), *got = malloc(sizeof(float) * (size_t)(A * M)),
          *ref = malloc(sizeof(float) * (size_t)(A * M));
    const float global[E] = {fp4 && !mx ? 0.01f : 1.0f, fp4 && !mx ? 0.02f : 1.0f};
    symk_tile tiles[2][64];
    void *d[9] = {NULL};
    /* An fp4 tile multiplies x quantised to NVFP4; the fmaf reference then runs on x's dequantised values. */
    const int fp4mma = symt_variants[variant].kind == SYMT_FP4;
    const int64_t ldc = SYMK_QA_LD_CODES(K), lds = SYMK_QA_LD_SCALES(K);
    int rc = SY_OK;
    if (!w || !sc || !x || !got || !ref) {
        rc = sy_err_set(err, SY_ERR_NOMEM, "moe cuda: self-check of tile %s: host memory", symt_variants[variant].name);
        goto out;
    }
    uint64_t s = seed;
    for (int64_t i = 0; i < A * K; i++)
        x[i] = check_rand(&s);
    for (size_t i = 0; i < (size_t)(M * K) * E && !fp8 && !fp4; i++) {
        const float v = check_rand(&s);
        if (dt == SY_DTYPE_F32)
            memcpy(w + 4 * i, &v, 4);
        else {
            const uint16_t h = dt == SY_DTYPE_BF16 ? syk_f32_to_bf16(v) : syk_f32_to_f16(v);
            memcpy(w + 2 * i, &h, 2);
        }
    }
    for (size_t i = 0; i < wbytes * E && (fp8 || fp4); i++)
        w[i] = (uint8_t)(check_rand(&s) * 128.0f + 128.0f);
    for (int64_t i = 0; i < n_scales * E; i++) {
        if (fp8) {
            const float v = (1.5f + 0.5f * check_rand(&s)) * 0x1p-7f;
            memcpy(sc + 4 * i, &v, 4);
        } else if (mx)
            sc[i] = (uint8_t)(124 + (int)((check_rand(&s) + 1.0f) * 2.0f) % 4); /* E8M0 2^-3 .. 2^0 */
        else
            sc[i] = (uint8_t)(0x30 + (int)((check_rand(&s) + 1.0f) * 8.0f) % 16); /* E4M3 0.5 .. 1.9 */
    }
    const int64_t nt_ref = check_tiles(symt_variants[0].rows, tiles[0]);
    const int64_t nt = check_tiles(symt_variants[variant].rows, tiles[1]);
    const size_t sizes[9] = {sizeof(float) * (size_t)(A * K), wbytes * E, sbytes * E + 1, sizeof global,
                             sizeof tiles[0], sizeof tiles[1], sizeof(float) * (size_t)(A * M),
                             sizeof(float) * (size_t)(A * M), (size_t)(A * (ldc + lds)) + sizeof(float) * A};
    const void *src[6] = {x, w, sc, global, tiles[0], tiles[1]};
    cudaError_t ce = cudaSuccess;
    for (int i = 0; i < 8 + fp4mma && ce == cudaSuccess; i++) {
        ce = cudaMalloc(&d[i], sizes[i]);
        if (ce == cudaSuccess && i < 6)
            ce = cudaMemcpy(d[i], src[i], sizes[i], cudaMemcpyHostToDevice);
    }
    if (ce == cudaSuccess) {
        const symk_qw q = {d[2], d[3], n_scales, b0, b1, mx};
        const int quant = fp8 || fp4;
        const symk_qa qa = {d[8], fp4mma ? (uint8_t *)d[8] + A * ldc : NULL,
                            fp4mma ? (float *)((uint8_t *)d[8] + A * (ldc + lds)) : NULL, ldc, lds, mx};
        if (fp4mma)
            symk_quant_rows(d[0], A, K, &qa, NULL);
        symk_grouped_gemm(0, d[0], NULL, K, d[1], (int)dt, quant ? &q : NULL, M, d[4], nt_ref, NULL, d[6]);
        symk_grouped_gemm(variant, d[0], &qa, K, d[1], (int)dt, quant ? &q : NULL, M, d[5], nt, NULL, d[7]);
        ce = cudaGetLastError();
        if (ce == cudaSuccess)
            ce = cudaMemcpy(ref, d[6], sizes[6], cudaMemcpyDeviceToHost);
        if (ce == cudaSuccess)
            ce = cudaMemcpy(got, d[7], sizes[7], cudaMemcpyDeviceToHost);
    }
    if (ce != cudaSuccess) {
        rc = syc_fail(err, ce, "moe cuda: self-check of a tensor-core tile");
        goto out;
    }
    *pass = symt_compare(got, ref, (size_t)(A * M), SYMT_TC_BOUND, worst) == 0;
out:
    for (int i = 0; i < 9; i++)
        if (d[i])
            cudaFree(d[i]);
    free(w), free(sc), free(x), free(got), free(ref);
    return rc;
}

/*
 * symt_selfcheck_fn of moe cuda: the variant against the default fmaf
 * tile on both matrix shapes of the prepared layer (gate/up: K = hidden,
 * down: K = inter; output columns cut to 200, so partial column tiles of
 * every width and the layer's own k slices and tail), 37 rows over two
 * experts (partial row tiles, a one-row expert), the layer's weight dtype.
 */
static int tc_selfcheck(void *ctx, int variant, int *pass, double *worst, sy_err *err)
{
    const moe_cuda *m = ctx;
    const int64_t shape[2][2] = {{m->p.inter, m->p.hidden}, {m->p.hidden, m->p.inter}};
    *pass = 1;
    *worst = 0;
    for (int i = 0; i < 2; i++) {
        int ok = 0;
        double w = INFINITY;
        const int rc = check_shape(variant, m->p.weight_dtype, m->fp4act == 2, shape[i][0] < 200 ? shape[i][0] : 200,
                                   shape[i][1],
                                   0x5eed0000u + (uint64_t)i, &ok, &w, err);
        if (rc)
            return rc;
        *pass &= ok;
        if (!(w <= *worst))
            *worst = w;
    }
    sy_logf(m->host, SY_LOG_INFO, SY_MOE_CUDA_NAME, "tile %s self-check: relative error %.3g against %s (bound %.0e): %s",
            symt_variants[variant].name, *worst, symt_variants[0].name, SYMT_TC_BOUND, *pass ? "ok" : "FAILED");
    return SY_OK;
}

/* The tiles of the grouped GEMM: the `tile` key, else the tuning table for this shape and GPU. */
static int load_tiles(moe_cuda *m, sy_err *err)
{
    const sy_moe_problem *p = &m->p;
    memset(&m->tune, 0, sizeof m->tune);
    m->logged_buckets = 0;
    /* The self-checks stand while the dtype and the K of both matrices do (one warning per instance). */
    const int64_t shape[3] = {p->weight_dtype, p->hidden, p->inter};
    if (memcmp(shape, m->verdict_shape, sizeof shape) != 0) {
        memset(&m->verdicts, 0, sizeof m->verdicts);
        memcpy(m->verdict_shape, shape, sizeof shape);
    }
    symt_fit fit;
    int rc = tile_fit_query(m->gpu, &fit, err);
    if (rc)
        return rc;
    fit.fp4_act = m->fp4act;
    if (m->tile_key == TILE_BUILTIN) {
        snprintf(m->tune.source, sizeof m->tune.source, "built-in (tile = builtin)");
        return SY_OK;
    }
    if (m->tile_key >= 0) {
        const int64_t entry[SYTUNE_MAX_KEYS] = {m->tile_key};
        char why[400];
        if ((rc = symt_check_entry(&fit, entry, why, sizeof why)))
            return sy_err_set(err, rc, "moe cuda: tile = %s %s", symt_variants[m->tile_key].name, why);
        if ((rc = symt_key_selfcheck(&m->verdicts, m->tile_key, tc_selfcheck, m, err)))
            return rc;
        m->tune.n = 1;
        m->tune.tokens[0] = 1;
        m->tune.entry[0][0] = m->tile_key;
        snprintf(m->tune.source, sizeof m->tune.source, "the tile key");
        return SY_OK;
    }
    char arch[64], sku[256];
    if ((rc = tune_device(m->gpu, arch, sizeof arch, sku, sizeof sku, err)))
        return rc;
    const sytune_schema s = symt_schema(&fit, SY_MOE_CUDA_NAME);
    if ((rc = sytune_load(m->tuning_dir, arch, sku, p->n_experts, p->inter, p->hidden, p->weight_dtype, &s, m->host,
                          &m->tune, err)))
        return rc;
    return symt_table_selfcheck(&m->tune, &m->verdicts, tc_selfcheck, m, m->host, SY_MOE_CUDA_NAME, err);
}

/* The variant a pass of n tokens runs with (logged at debug on a bucket's first pass). */
static int pass_variant(moe_cuda *m, int64_t n)
{
    const int b = sytune_bucket(m->tune.tokens, m->tune.n, n);
    const int v = b < 0 ? 0 : (int)m->tune.entry[b][0];
    const uint64_t bit = (uint64_t)1 << (b < 0 ? 63 : b);
    if (!(m->logged_buckets & bit)) {
        m->logged_buckets |= bit;
        if (b < 0)
            sy_logf(m->host, SY_LOG_DEBUG, SY_MOE_CUDA_NAME, "pass of %lld tokens: default tile %s", (long long)n,
                    symt_variants[v].name);
        else
            sy_logf(m->host, SY_LOG_DEBUG, SY_MOE_CUDA_NAME, "pass of %lld tokens: bucket tokens=%lld, tile %s (%s)",
                    (long long)n, (long long)m->tune.tokens[b], symt_variants[v].name, m->tune.source);
    }
    return v;
}

static int prepare(void *inst, const sy_moe_problem *p, sy_err *err)
{
    moe_cuda *m = inst;
    int rc = check(p, err);
    if (rc || (rc = syc_enter(m->gpu, err, "moe cuda")))
        return rc;
    release(m);
    sy__moe_problem_copy(&m->p, p);
    m->e_first = 0;
    m->e_count = p->n_experts;
    if (!m->route_host && p->n_experts > SYMK_GROUP_MAX_EXPERTS) {
        /* Known now rather than at the first forward, when serve would already be taking requests. */
        sy_logf(m->host, SY_LOG_WARN, SY_MOE_CUDA_NAME, "%d experts: device routing groups up to %d; routing on the "
                "host ([moe] routing = host)", p->n_experts, SYMK_GROUP_MAX_EXPERTS);
        m->route_host = 1;
    }
    m->fp4act = p->weight_dtype != SY_DTYPE_FP4_E2M1 ? 0 : m->act_nvfp4 ? 1 : m->act_mxfp4 ? 2 : 0;
    if ((m->act_nvfp4 || m->act_mxfp4) && !m->fp4act)
        sy_logf(m->host, SY_LOG_WARN, SY_MOE_CUDA_NAME, "activations = %s applies to %s experts; these are %s: "
                "their inputs stay F32", m->act_nvfp4 ? "nvfp4" : "mxfp4", m->act_nvfp4 ? "NVFP4" : "MXFP4",
                sy_dtype_name(p->weight_dtype));
    if ((rc = load_tiles(m, err)))
        return rc;
    const size_t C = (size_t)m->chunk_tokens, K = (size_t)p->top_k, A = C * K, E = (size_t)p->n_experts;
    const size_t H = (size_t)p->hidden, F = (size_t)p->inter;
    /* Row tiles: at most one partial tile per expert beyond A / rows full ones, rows >= the smallest variant's. */
    int min_rows = symt_variants[0].rows;
    for (int v = 1; v < SYMK_N_VARIANTS; v++)
        min_rows = symt_variants[v].rows < min_rows ? symt_variants[v].rows : min_rows;
    m->max_tiles = A / (size_t)min_rows + E + 1;
    m->layers = calloc((size_t)p->n_layers, sizeof *m->layers);
    m->logits = malloc(sizeof(float) * C * E);
    m->ids = malloc(sizeof(int32_t) * A);
    m->wts = malloc(sizeof(float) * A);
    m->counts = malloc(sizeof(int32_t) * (E + 1));
    m->offsets = malloc(sizeof(int32_t) * (E + 1));
    m->meta = malloc(sizeof(int32_t) * (2 * A + 3 * m->max_tiles));
    if (!m->layers || !m->logits || !m->ids || !m->wts || !m->counts || !m->offsets || !m->meta) {
        release(m);
        return sy_err_set(err, SY_ERR_NOMEM, "moe cuda: cannot allocate host scratch for %zu tokens", C);
    }
    const size_t route_bytes = m->route_host ? 0 : symk_route_scratch((int64_t)C, p->n_experts, p->n_group);
    cudaError_t e = cudaMalloc((void **)&m->d_meta, sizeof(int32_t) * (2 * A + 3 * m->max_tiles) + sizeof(symk_counts));
    if (e == cudaSuccess && !m->route_host)
        e = cudaMalloc((void **)&m->d_ids, sizeof(int32_t) * A);
    if (e == cudaSuccess && !m->route_host)
        e = cudaMalloc(&m->d_route, route_bytes);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&m->d_wts, sizeof(float) * A);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&m->d_xe, sizeof(float) * A * H);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&m->d_act, sizeof(float) * A * F);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&m->d_up, sizeof(float) * A * F);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&m->d_ye, sizeof(float) * A * H);
    /* fp4act: every row's codes, scales and global scale for xe (K = hidden) and act (K = inter); codes first, then
     * scales, then globals, each part a multiple of 16 bytes long, so the kernels' 8-byte code loads stay aligned. */
    const size_t ldcx = (size_t)SYMK_QA_LD_CODES(p->hidden), ldsx = (size_t)SYMK_QA_LD_SCALES(p->hidden);
    const size_t ldcf = (size_t)SYMK_QA_LD_CODES(p->inter), ldsf = (size_t)SYMK_QA_LD_SCALES(p->inter);
    if (e == cudaSuccess && m->fp4act)
        e = cudaMalloc(&m->d_q, A * (ldcx + ldcf + ldsx + ldsf + 2 * sizeof(float)));
    if (e == cudaSuccess && m->fp4act) {
        uint8_t *cx = m->d_q, *cf = cx + A * ldcx, *sx = cf + A * ldcf, *sf = sx + A * ldsx;
        float *gx = (float *)(sf + A * ldsf);
        m->qx = (symk_qa){cx, sx, gx, (int64_t)ldcx, (int64_t)ldsx, m->fp4act == 2};
        m->qf = (symk_qa){cf, sf, gx + A, (int64_t)ldcf, (int64_t)ldsf, m->fp4act == 2};
    }
    if (e != cudaSuccess) {
        release(m);
        return sy_err_set(err, SY_ERR_NOMEM, "moe cuda: device scratch for %zu tokens x top_k %zu (%.1f MiB): %s; "
                          "lower max_tokens", C, K,
                          (double)(sizeof(float) * A * (2 * H + 2 * F) + route_bytes) / 1048576.0,
                          cudaGetErrorString(e));
    }
    m->prepared = 1;
    sy_logf(m->host, SY_LOG_INFO, SY_MOE_CUDA_NAME, "%d experts top-%d, device scratch for %zu tokens per pass "
            "(%.1f MiB), %s experts%s, routing on the %s, expert GEMM tiles: %s (%d buckets)", p->n_experts, p->top_k, C,
            (double)(sizeof(float) * A * (2 * H + 2 * F) + route_bytes) / 1048576.0, sy_dtype_name(p->weight_dtype),
            m->fp4act == 1 ? " x NVFP4 activations (W4A4)" : m->fp4act == 2 ? " x MXFP4 activations (W4A4)" : "",
            m->route_host ? "host" : "device", m->tune.source,
            m->tune.n);
    return SY_OK;
}

/* Uploads E [rows, cols] F32/F16/BF16 views into one device buffer. */
static int upload_float(const sy_moe_problem *p, int32_t E, const sy_tensor *v, int64_t rows, int64_t cols,
                        moe_cuda_mat *out, sy_err *err)
{
    const size_t es = (size_t)sy_dtype_bits(p->weight_dtype) / 8;
    const size_t mat = (size_t)rows * (size_t)cols * es;
    SYC_TRY(err, cudaMalloc(&out->w, mat * (size_t)E), "moe prepare_layer: expert weights");
    for (int32_t e = 0; e < E; e++)
        SYC_TRY(err,
                cudaMemcpy2D((char *)out->w + mat * (size_t)e, (size_t)cols * es, v[e].data,
                             (size_t)v[e].stride[0] * es, (size_t)cols * es, (size_t)rows, cudaMemcpyHostToDevice),
                "moe prepare_layer: expert upload");
    return SY_OK;
}

/*
 * Uploads E quantised views: their codes into one buffer, their scales
 * into another (each expert's grid after the previous one's), their
 * global scales into a third. The kernels index every expert's scales
 * with one block shape, so all experts of a matrix must share it.
 */
static int upload_quant(const sy_moe_problem *p, int32_t E, int32_t e0, const sy_tensor *v, const char *what,
                        int64_t rows, int64_t cols, moe_cuda_mat *out, sy_err *err)
{
    const int fp4 = p->weight_dtype == SY_DTYPE_FP4_E2M1, e8m0 = fp4 && v[0].scale_dtype == SY_DTYPE_E8M0;
    const int32_t b0 = v[0].scale_block[0], b1 = v[0].scale_block[1];
    for (int32_t e = 1; e < E; e++)
        if (v[e].scale_block[0] != b0 || v[e].scale_block[1] != b1 || v[e].scale_dtype != v[0].scale_dtype)
            return sy_err_set(err, SY_ERR_UNSUPPORTED,
                              "moe prepare_layer: expert %d %s has %s scales per [%d, %d], expert %d %s per [%d, %d]; "
                              "moe cuda expects one scale layout for all experts of a matrix",
                              e0 + e, what, sy_dtype_name(v[e].scale_dtype), v[e].scale_block[0],
                              v[e].scale_block[1], e0, sy_dtype_name(v[0].scale_dtype), b0, b1);
    const size_t row_bytes = (size_t)(fp4 ? cols / 2 : cols), codes = (size_t)rows * row_bytes;
    const size_t n_scales = (size_t)((rows + b0 - 1) / b0) * (size_t)((cols + b1 - 1) / b1);
    const size_t sb = n_scales * (fp4 ? 1 : sizeof(float));
    float *globals = malloc(sizeof(float) * (size_t)E);
    if (!globals)
        return sy_err_set(err, SY_ERR_NOMEM, "moe prepare_layer: cannot allocate %d global scales", E);
    for (int32_t e = 0; e < E; e++)
        globals[e] = v[e].global_scale;
    cudaError_t ce = cudaMalloc(&out->w, codes * (size_t)E);
    if (ce == cudaSuccess)
        ce = cudaMalloc(&out->scale, sb * (size_t)E);
    if (ce == cudaSuccess)
        ce = cudaMalloc((void **)&out->global, sizeof(float) * (size_t)E);
    if (ce == cudaSuccess)
        ce = cudaMemcpy(out->global, globals, sizeof(float) * (size_t)E, cudaMemcpyHostToDevice);
    free(globals);
    for (int32_t e = 0; e < E && ce == cudaSuccess; e++) {
        ce = cudaMemcpy((char *)out->w + codes * (size_t)e, v[e].data, codes, cudaMemcpyHostToDevice);
        if (ce == cudaSuccess)
            ce = cudaMemcpy((char *)out->scale + sb * (size_t)e, v[e].scale, sb, cudaMemcpyHostToDevice);
    }
    if (ce != cudaSuccess)
        return syc_fail(err, ce, "moe prepare_layer: quantised expert upload");
    out->q = (symk_qw){out->scale, out->global, (int64_t)n_scales, b0, b1, e8m0};
    /* The decoders read a sign bit and 0x7f (480) where the MMA's ue4m3 has neither, and E8M0's NaN (0xff) is kept
     * off the MMA's MX form: such a matrix takes a CUDA-core tile (run_pass). */
    out->mma_scales = fp4;
    for (int32_t e = 0; e < E && out->mma_scales; e++)
        for (size_t i = 0; i < n_scales && out->mma_scales; i++)
            out->mma_scales = e8m0 ? ((const uint8_t *)v[e].scale)[i] != 0xff
                                   : ((const uint8_t *)v[e].scale)[i] <= 0x7e;
    return SY_OK;
}

/* Checks E views of one matrix against the problem and uploads them into out. */
static int upload_experts(const sy_moe_problem *p, int fp4act, int32_t E, int32_t e0, const sy_tensor *v,
                          const char *what, int64_t rows, int64_t cols, moe_cuda_mat *out, sy_err *err)
{
    const int quant = syk_wdtype_quant(p->weight_dtype);
    for (int32_t e = 0; e < E; e++) {
        const sy_tensor *t = &v[e];
        char why[200];
        if (t->dtype != p->weight_dtype)
            return sy_err_set(err, SY_ERR_INVALID, "moe prepare_layer: expert %d %s is %s; the problem says %s", e0 + e,
                              what, sy_dtype_name(t->dtype), sy_dtype_name(p->weight_dtype));
        if (t->ndim != 2 || t->shape[0] != rows || t->shape[1] != cols || t->stride[1] != 1 || t->stride[0] < cols ||
            (quant && t->stride[0] != cols) || !t->data)
            return sy_err_set(err, SY_ERR_INVALID,
                              "moe prepare_layer: expert %d %s must be a [%lld, %lld] matrix with contiguous rows%s, "
                              "found ndim %d [%lld, %lld]", e0 + e, what, (long long)rows, (long long)cols,
                              quant ? " and no padding" : "", t->ndim, (long long)t->shape[0],
                              (long long)(t->ndim > 1 ? t->shape[1] : 0));
        if (quant && syk_qweight_check(t, why, sizeof why))
            return sy_err_set(err, SY_ERR_UNSUPPORTED, "moe prepare_layer: expert %d %s: %s", e0 + e, what, why);
        if (fp4act == 1 && t->scale_dtype == SY_DTYPE_E8M0)
            return sy_err_set(err, SY_ERR_UNSUPPORTED, "moe prepare_layer: expert %d %s is MXFP4 (E8M0 scales); "
                              "activations = nvfp4 takes NVFP4 experts only: set [moe] activations = mxfp4 or f32",
                              e0 + e, what);
        if (fp4act == 2 && t->scale_dtype != SY_DTYPE_E8M0)
            return sy_err_set(err, SY_ERR_UNSUPPORTED, "moe prepare_layer: expert %d %s is NVFP4 (%s scales); "
                              "activations = mxfp4 takes MXFP4 experts only: set [moe] activations = nvfp4 or f32",
                              e0 + e, what, sy_dtype_name(t->scale_dtype));
    }
    return quant ? upload_quant(p, E, e0, v, what, rows, cols, out, err) : upload_float(p, E, v, rows, cols, out, err);
}

static int prepare_layer(void *inst, int32_t layer, const sy_tensor *gate, const sy_tensor *up, const sy_tensor *down,
                         const sy_tensor *score_bias, sy_err *err)
{
    moe_cuda *m = inst;
    if (!m->prepared)
        return sy_err_set(err, SY_ERR_INVALID, "moe cuda: prepare_layer before prepare");
    int enter = syc_enter(m->gpu, err, "moe cuda");
    if (enter)
        return enter;
    if (layer < 0 || layer >= m->p.n_layers)
        return sy_err_set(err, SY_ERR_INVALID, "moe prepare_layer: layer %d outside [0, %d)", layer, m->p.n_layers);
    if (!gate || !up || !down)
        return sy_err_set(err, SY_ERR_INVALID, "moe prepare_layer: gate, up and down arrays are required");
    const int32_t E = m->p.n_experts;
    double *bias = NULL;
    if (score_bias) {
        if (score_bias->ndim != 1 || score_bias->shape[0] != E || !score_bias->data ||
            (score_bias->dtype != SY_DTYPE_F32 && score_bias->dtype != SY_DTYPE_F16 &&
             score_bias->dtype != SY_DTYPE_BF16))
            return sy_err_set(err, SY_ERR_INVALID, "moe prepare_layer: score_bias must be [%d] F32/F16/BF16", E);
        float *tmp = malloc(sizeof(float) * (size_t)E);
        if (!tmp || !(bias = malloc(sizeof(double) * (size_t)E))) {
            free(tmp);
            return sy_err_set(err, SY_ERR_NOMEM, "moe prepare_layer: cannot allocate the score bias");
        }
        syk_row_to_f32(tmp, score_bias->data, score_bias->dtype, E);
        for (int32_t e = 0; e < E; e++)
            bias[e] = tmp[e];
        free(tmp);
    }
    moe_cuda_layer L = {.bias = bias};
    int rc;
    if (bias) {
        cudaError_t ce = cudaMalloc((void **)&L.d_bias, sizeof(double) * (size_t)E);
        if (ce == cudaSuccess)
            ce = cudaMemcpy(L.d_bias, bias, sizeof(double) * (size_t)E, cudaMemcpyHostToDevice);
        if (ce != cudaSuccess) {
            layer_free(&L);
            return syc_fail(err, ce, "moe prepare_layer: score bias upload");
        }
    }
    const int32_t EL = m->e_count, e0 = m->e_first;
    if ((rc = upload_experts(&m->p, m->fp4act, EL, e0, gate, "gate", m->p.inter, m->p.hidden, &L.gate, err)) ||
        (rc = upload_experts(&m->p, m->fp4act, EL, e0, up, "up", m->p.inter, m->p.hidden, &L.up, err)) ||
        (rc = upload_experts(&m->p, m->fp4act, EL, e0, down, "down", m->p.hidden, m->p.inter, &L.down, err))) {
        layer_free(&L);
        return rc;
    }
    int fp4_tiles = 0;
    for (int b = 0; b < m->tune.n; b++)
        fp4_tiles |= symt_variants[m->tune.entry[b][0]].kind == SYMT_FP4;
    const moe_cuda_mat *mats[3] = {&L.gate, &L.up, &L.down};
    for (int i = 0; i < 3 && fp4_tiles; i++)
        if (!mats[i]->mma_scales)
            sy_logf(m->host, SY_LOG_WARN, SY_MOE_CUDA_NAME, "layer %d %s: %s: its GEMMs run on a CUDA-core tile of "
                    "the same height instead of the fp4mma tiles", layer, i == 0 ? "gate" : i == 1 ? "up" : "down",
                    mats[i]->q.e8m0 ? "an MXFP4 scale byte 0xff (E8M0's NaN)"
                                    : "an NVFP4 scale byte above 0x7e (a sign bit or E4M3's NaN, which the "
                                      "block-scaled MMA reads differently from the decoder)");
    layer_free(&m->layers[layer]);
    m->layers[layer] = L;
    return SY_OK;
}

/* has_bias: the experts' projection biases as F32 on the device, added in the expert epilogue (symk_bias_act). */
static int prepare_layer_bias(void *inst, int32_t layer, const sy_tensor *gate_bias, const sy_tensor *up_bias,
                              const sy_tensor *down_bias, sy_err *err)
{
    moe_cuda *m = inst;
    if (!m->prepared)
        return sy_err_set(err, SY_ERR_INVALID, "moe cuda: prepare_layer_bias before prepare");
    int rc = syc_enter(m->gpu, err, "moe cuda");
    if (rc)
        return rc;
    const int loaded = layer >= 0 && layer < m->p.n_layers && m->layers[layer].gate.w;
    float *b = NULL;
    size_t n = 0;
    if ((rc = symoe_gather_biases("cuda", m->prepared, &m->p, layer, loaded, m->e_first, m->e_count, gate_bias,
                                  up_bias, down_bias, &b, &n, err)))
        return rc;
    float *d = NULL;
    cudaError_t ce = cudaMalloc((void **)&d, sizeof(float) * n);
    if (ce == cudaSuccess)
        ce = cudaMemcpy(d, b, sizeof(float) * n, cudaMemcpyHostToDevice);
    free(b);
    if (ce != cudaSuccess) {
        cudaFree(d);
        return syc_fail(err, ce, "moe prepare_layer_bias: expert bias upload");
    }
    const size_t EL = (size_t)m->e_count, F = (size_t)m->p.inter;
    moe_cuda_layer *L = &m->layers[layer];
    cudaFree(L->d_gbias);
    L->d_gbias = d;
    L->d_ubias = d + EL * F;
    L->d_dbias = down_bias ? d + 2 * EL * F : NULL;
    return SY_OK;
}

static int f32_2d(const sy_tensor *t, const char *what, int64_t cols, int64_t *rows, int64_t *ld, sy_err *err)
{
    if (!t || t->dtype != SY_DTYPE_F32 || t->ndim != 2 || t->stride[1] != 1 || t->shape[1] != cols ||
        (t->shape[0] > 1 && t->stride[0] < cols) || (!t->data && t->shape[0] > 0))
        return sy_err_set(err, SY_ERR_INVALID, "moe forward: %s must be F32 [n, %lld] with contiguous rows", what,
                          (long long)cols);
    *rows = t->shape[0];
    *ld = t->shape[0] > 1 ? t->stride[0] : cols;
    return SY_OK;
}

/*
 * routing = host: route the pass's n tokens with sy__moe_route, group and tile the assignments on the host and
 * upload them; *nt the tile count.
 */
static int route_on_host(moe_cuda *m, const moe_cuda_layer *L, const float *logits, int64_t ldl, int64_t n, int vr,
                         int64_t *nt_out, sy_err *err)
{
    const int64_t E = m->p.n_experts, K = m->p.top_k, A = n * K;
    const int64_t e0 = m->e_first, EL = m->e_count;
    SYC_TRY(err,
            cudaMemcpy2D(m->logits, sizeof(float) * (size_t)E, logits, sizeof(float) * (size_t)ldl,
                         sizeof(float) * (size_t)E, (size_t)n, cudaMemcpyDeviceToHost),
            "moe forward: router logits download");
    for (int64_t i = 0; i < n; i++)
        sy__moe_route(&m->p, m->logits + i * E, L->bias, m->ids + i * K, m->wts + i * K);
    /* Group the assignments to this instance's experts by (local) expert, tokens ascending within one; the
     * others' (expert parallelism) get slot -1 and add nothing in the combine. */
    memset(m->counts, 0, sizeof(int32_t) * (size_t)(EL + 1));
    for (int64_t a = 0; a < A; a++)
        if (m->ids[a] >= e0 && m->ids[a] < e0 + EL)
            m->counts[m->ids[a] - e0]++;
    m->offsets[0] = 0;
    for (int64_t e = 0; e < EL; e++)
        m->offsets[e + 1] = m->offsets[e] + m->counts[e];
    int32_t *assign_tok = m->meta, *slot_of = m->meta + A;
    symk_tile *tiles = (symk_tile *)(m->meta + 2 * A);
    memset(m->counts, 0, sizeof(int32_t) * (size_t)(EL + 1));
    for (int64_t a = 0; a < A; a++) {
        const int32_t e = m->ids[a] - (int32_t)e0;
        if (e < 0 || e >= EL) {
            slot_of[a] = -1;
            continue;
        }
        const int32_t row = m->offsets[e] + m->counts[e]++;
        assign_tok[row] = (int32_t)(a / K);
        slot_of[a] = row;
    }
    int64_t nt = 0;
    for (int64_t e = 0; e < EL; e++)
        for (int32_t r = 0; r < m->counts[e]; r += vr) {
            const int32_t left = m->counts[e] - r;
            tiles[nt++] = (symk_tile){(int32_t)e, m->offsets[e] + r, left < vr ? left : vr};
        }
    /* assign_tok past the pass's rows is not read (the launches take the exact counts). */
    SYC_TRY(err, cudaMemcpy(m->d_meta, m->meta, sizeof(int32_t) * (size_t)(2 * A + 3 * nt), cudaMemcpyHostToDevice),
            "moe forward: assignment upload");
    SYC_TRY(err, cudaMemcpy(m->d_wts, m->wts, sizeof(float) * (size_t)A, cudaMemcpyHostToDevice),
            "moe forward: weight upload");
    *nt_out = nt;
    return SY_OK;
}

/* The first CUDA-core tile of at least rows rows (the row tiles of a pass are cut for its variant). */
static int fmaf_cover(int rows)
{
    for (int v = 0; v < SYMK_N_FMAF; v++)
        if (symt_variants[v].rows >= rows)
            return v;
    return 0; /* unreachable: SYMK_VARIANTS has 64-row tiles, the tallest of any kind */
}

/* One pass over tokens [t0, t0 + n). */
static int run_pass(moe_cuda *m, const moe_cuda_layer *L, const float *x, int64_t ldx, const float *logits,
                    int64_t ldl, float *out, int64_t ldo, int64_t t0, int64_t n, sy_err *err)
{
    const int64_t K = m->p.top_k, H = m->p.hidden, F = m->p.inter, A = n * K;
    const int variant = pass_variant(m, n), vr = symt_variants[variant].rows;
    symk_tile *d_tiles = (symk_tile *)(m->d_meta + 2 * A);
    int64_t rows = 0, nt = 0;
    const symk_counts *cnt = NULL; /* device routing: the exact counts, on the device */
    int rc;
    if (m->route_host) {
        if ((rc = route_on_host(m, L, logits + t0 * ldl, ldl, n, vr, &nt, err)))
            return rc;
        rows = m->offsets[m->e_count];
    } else {
        /* The most this pass can have: every assignment ours, and one partial tile per expert. */
        rows = A;
        nt = A / vr + m->e_count;
        nt = nt < (int64_t)m->max_tiles ? nt : (int64_t)m->max_tiles;
        symk_counts *d_cnt = (symk_counts *)(m->d_meta + 2 * A + 3 * (int64_t)m->max_tiles);
        const symr_params rp = {m->p.n_experts, m->p.top_k, m->p.scoring == SY_MOE_SIGMOID, m->p.n_group,
                                m->p.topk_group, m->p.norm_topk_prob, m->p.routed_scaling_factor};
        if (symk_route_group(&rp, logits + t0 * ldl, ldl, n, L->d_bias, m->d_route, m->d_ids, m->d_wts, m->e_first,
                             m->e_count, vr, (int64_t)m->max_tiles, m->d_meta, m->d_meta + A, d_tiles, d_cnt))
            return sy_err_set(err, SY_ERR_UNSUPPORTED, "moe forward: device routing groups up to %d experts, this "
                              "instance holds %d; set routing = host", SYMK_GROUP_MAX_EXPERTS, m->e_count);
        cnt = d_cnt;
    }
    const int wdt = (int)m->p.weight_dtype;
    const int q = syk_wdtype_quant(m->p.weight_dtype);
    /* A matrix the block-scaled MMA cannot read (mma_scales) takes an fmaf tile at least as tall as the row tiles. */
    const int fp4v = symt_variants[variant].kind == SYMT_FP4, alt = fp4v ? fmaf_cover(vr) : variant;
    const int vg = fp4v && !L->gate.mma_scales ? alt : variant, vu = fp4v && !L->up.mma_scales ? alt : variant;
    const int vd = fp4v && !L->down.mma_scales ? alt : variant;
    symk_gather(x + t0 * ldx, ldx, m->d_meta, rows, H, m->d_xe, cnt);
    if (m->fp4act) /* W4A4: every tile then reads the same quantised inputs (codes, or their values) */
        symk_quant_rows(m->d_xe, rows, H, &m->qx, cnt);
    symk_grouped_gemm(vg, m->d_xe, &m->qx, H, L->gate.w, wdt, q ? &L->gate.q : NULL, F, d_tiles, nt, cnt, m->d_act);
    symk_grouped_gemm(vu, m->d_xe, &m->qx, H, L->up.w, wdt, q ? &L->up.q : NULL, F, d_tiles, nt, cnt, m->d_up);
    if (L->d_gbias || m->p.activation != SY_MOE_ACT_SILU)
        symk_bias_act(m->p.activation == SY_MOE_ACT_SWIGLU_CLAMP ? SYMK_ACT_SWIGLU_CLAMP : SYMK_ACT_SILU,
                      m->p.swiglu_alpha, m->p.swiglu_limit, m->d_act, m->d_up, L->d_gbias, L->d_ubias, F, d_tiles, nt,
                      cnt);
    else
        symk_silu_mul(m->d_act, m->d_up, rows, F, cnt);
    if (m->fp4act)
        symk_quant_rows(m->d_act, rows, F, &m->qf, cnt);
    symk_grouped_gemm(vd, m->d_act, &m->qf, F, L->down.w, wdt, q ? &L->down.q : NULL, H, d_tiles, nt, cnt, m->d_ye);
    if (L->d_dbias) /* before the routing weight, as the model adds it */
        symk_add_bias(m->d_ye, L->d_dbias, H, d_tiles, nt, cnt);
    symk_combine(m->d_ye, H, m->d_meta + A, m->d_wts, n, (int)K, out + t0 * ldo, ldo);
    return syc_launched(err, "moe forward");
}

static int forward(void *inst, int32_t layer, const sy_tensor *x, const sy_tensor *router_logits, sy_tensor *out,
                   sy_err *err)
{
    moe_cuda *m = inst;
    if (!m->prepared)
        return sy_err_set(err, SY_ERR_INVALID, "moe cuda: forward before prepare");
    int rc = syc_enter(m->gpu, err, "moe cuda");
    if (rc)
        return rc;
    if (layer < 0 || layer >= m->p.n_layers || !m->layers[layer].gate.w)
        return sy_err_set(err, SY_ERR_INVALID, "moe forward: layer %d has no experts (prepare_layer first)", layer);
    if (m->p.has_bias && !m->layers[layer].d_gbias)
        return sy_err_set(err, SY_ERR_INVALID, "moe forward: layer %d has no expert biases (the problem's has_bias is "
                          "set; prepare_layer_bias not called after prepare_layer)", layer);
    if (m->route_host && syc_capturing())
        return sy_err_set(err, SY_ERR_UNSUPPORTED, "moe cuda: [moe] routing = host copies each layer's router logits "
                          "to the host, which a recorded step (CUDA graph) cannot hold; set [moe] routing = device to "
                          "record decode steps");
    int64_t n, nl, no, ldx, ldl, ldo;
    if ((rc = f32_2d(x, "x", m->p.hidden, &n, &ldx, err)) ||
        (rc = f32_2d(router_logits, "router_logits", m->p.n_experts, &nl, &ldl, err)) ||
        (rc = f32_2d(out, "out", m->p.hidden, &no, &ldo, err)))
        return rc;
    if (nl != n || no != n)
        return sy_err_set(err, SY_ERR_INVALID, "moe forward: x has %lld rows, router_logits %lld, out %lld; expected "
                          "the same", (long long)n, (long long)nl, (long long)no);
    for (int64_t t0 = 0; t0 < n; t0 += m->chunk_tokens) {
        const int64_t len = n - t0 < m->chunk_tokens ? n - t0 : m->chunk_tokens;
        if ((rc = run_pass(m, &m->layers[layer], x->data, ldx, router_logits->data, ldl, out->data, ldo, t0, len, err)))
            return rc;
    }
    return SY_OK;
}

/* Expert parallelism: routing stays global, only the range's experts are uploaded and computed. */
static int set_expert_range(void *inst, int32_t first, int32_t count, sy_err *err)
{
    moe_cuda *m = inst;
    int32_t loaded = -1;
    for (int32_t l = 0; m->prepared && l < m->p.n_layers && loaded < 0; l++)
        loaded = m->layers[l].gate.w ? l : -1;
    const int rc = symoe_check_range(SY_MOE_CUDA_NAME, m->prepared, &m->p, first, count, loaded, err);
    if (rc)
        return rc;
    m->e_first = first;
    m->e_count = count;
    return SY_OK;
}

static const sy_moe_ops ops = {
    .struct_size = sizeof(sy_moe_ops),
    .supports = supports,
    .prepare = prepare,
    .prepare_layer = prepare_layer,
    .forward = forward,
    .set_expert_range = set_expert_range,
    .prepare_layer_bias = prepare_layer_bias,
};

/*
 * get_proc("tuning_table"): the path this GPU's table for the prepared
 * shape has (where `switchyard tune-moe` writes it) and, in *source, where
 * the instance took its tiles from. Same signature as moe/cpu's.
 */
static int tuning_table(void *inst, char *path, size_t cap, const char **source)
{
    const moe_cuda *m = inst;
    char arch[64], sku[256], fname[128];
    sy_err err = {{0}};
    if (!m->prepared || tune_device(m->gpu, arch, sizeof arch, sku, sizeof sku, &err))
        return -1;
    sytune_file_name(fname, sizeof fname, m->p.n_experts, m->p.inter, m->p.hidden, m->p.weight_dtype);
    if (snprintf(path, cap, "%s/%s/%s/%s", m->tuning_dir, arch, sku, fname) >= (int)cap)
        return -1;
    if (source)
        *source = m->tune.source;
    return 0;
}

/*
 * get_proc("tile_candidates"): the values of the `tile` key tune-moe times,
 * default first; returns how many it wrote into names (at most cap).
 */
static int tile_candidates(void *inst, const char **names, int cap)
{
    (void)inst;
    int n = 0;
    for (int v = 0; v < SYMK_N_VARIANTS && n < cap; v++)
        names[n++] = symt_variants[v].name;
    return n;
}

static void *get_proc(const char *name)
{
    if (strcmp(name, "tuning_table") == 0)
        return (void *)tuning_table;
    return strcmp(name, "tile_candidates") == 0 ? (void *)tile_candidates : NULL;
}

static const sy_plugin_desc desc = {
    .struct_size = sizeof(sy_plugin_desc),
    .abi_major = SY_ABI_MAJOR,
    .abi_minor = SY_ABI_MINOR,
    .kind = SY_KIND_MOE,
    .name = SY_MOE_CUDA_NAME,
    .version = PACKAGE_VERSION,
    .device = "cuda",
    .description = "mixture of experts on NVIDIA GPUs (portable): the CPU plugin's routing on the device (or the host), "
                   "grouped expert GEMMs on F32/F16/BF16, FP8 E4M3, NVFP4 and MXFP4 weights with F32 accumulation on CUDA "
                   "cores or tensor cores (mma.sync, wgmma on sm_90a; self-checked), silu or gpt-oss's clamped swiglu "
                   "with expert biases, NVFP4- or MXFP4-quantised activations (W4A4) "
                   "with block-scaled FP4 tensor cores on sm_120a, tiles from tuning tables, expert parallelism",
    .keys = keys,
    .probe = probe,
    .create = create,
    .destroy = destroy,
    .ops = &ops,
    .get_proc = get_proc,
};

SY_EXPORT const sy_plugin_desc *SY_PLUGIN_ENTRY(void);
SY_EXPORT const sy_plugin_desc *SY_PLUGIN_ENTRY(void)
{
    return &desc;
}
