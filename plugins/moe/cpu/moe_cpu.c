/*
 * moe/cpu: mixture-of-experts on the host. Expert weights stay the caller's
 * mmap'd views in their own dtype (F32/F16/BF16); the GEMMs widen them in
 * registers (libsykern). All scratch is allocated in prepare() for
 * `max_tokens` tokens; a bigger batch runs in passes of max_tokens tokens,
 * so forward() never allocates. Every token's result is independent of the
 * others', so passes change nothing in the output.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "moe_cpu.h"
#include "symoe_fp4act.h"
#include "symoe_bias.h"
#include "symoe_range.h"
#include "sykmatmul.h"
#include "sykquant.h"
#include "sykconv.h"

static const sy_key_decl keys[] = {
    {"max_tokens", SY_KEY_INT, "256",
     "tokens per pass, which sizes the scratch (about max_tokens x top_k x (2 hidden + 2 inter) floats); larger "
     "batches run in several passes",
     1, 1048576, NULL},
    {"isa", SY_KEY_ENUM, "auto", "kernel instruction set; auto = the best the CPU and OS support", 1, 0,
     SYK_ISA_CHOICES},
    {"matmul", SY_KEY_ENUM, "auto",
     "expert products with BF16 weights: auto = bf16 where the CPU has a native BF16 dot path (AMX-BF16 granted, "
     "or AVX512_BF16 with isa avx512), else f32; f32 = exact products, F32 sums (what the tests pin); bf16 = inputs "
     "rounded to BF16 and BF16 dot products (faster prefill, slightly different results; f32 with a warning where "
     "the CPU lacks AVX512_BF16)",
     1, 0, "f32|bf16|auto"},
    {"amx", SY_KEY_ENUM, "auto",
     "with matmul = bf16 or auto: auto = AMX-BF16 tiles where the CPU has them and Linux grants the tile state (BF16 experts "
     "repacked once at prepare_layer, one more copy of them in memory), else the AVX512-BF16 kernel; off = always "
     "AVX512-BF16",
     1, 0, "auto|off"},
    {"tuning_dir", SY_KEY_STRING, SY_MOE_TUNING_DIR,
     "MoE tuning tables: <dir>/cpu-<isa>/<cpu model>/E=..,N=..,K=..,dtype=...ini (docs/moe-tuning.md)", 0, 0, NULL},
    /* Opt-in (it changes the numbers); the reference moe cuda's fp4mma tiles are checked against. */
    {"activations", SY_KEY_ENUM, "f32",
     "the expert GEMMs' inputs: f32 as they are; nvfp4: each token row quantised to NVFP4 (E2M1 codes, E4M3 scale per "
     "16, F32 global scale amax / 2688) and dequantised before the gate/up and the down GEMMs, for NVFP4 experts only "
     "(others stay F32): W4A4's numbers; mxfp4: the same for MXFP4 experts with OCP MXFP4 activations (E2M1 codes, "
     "E8M0 scale per 32, no global scale; symoe_fp4act.h)",
     1, 0, "f32|nvfp4|mxfp4"},
    {"tile", SY_KEY_STRING, "",
     "token_block,n_block,threads for every pass, overriding the tables (switchyard tune-moe sweeps it); "
     "builtin: the built-in tiles; empty: the tables",
     0, 0, NULL},
    {NULL, 0, NULL, NULL, 0, 0, NULL},
};

static int probe(const sy_host *host, sy_err *why)
{
    (void)host;
    (void)why;
    return 10 + (int)syk_isa_best();
}

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/*
 * The installed tables; before `make install` (runs from the build tree)
 * that directory does not exist and the source tree's etc/moe-tuning
 * stands in, so build-tree runs find the shipped tables too. Not a config
 * key in etc/switchyard-build.ini: [moe] there also feeds other moe
 * plugins, which refuse keys they do not declare.
 */
static const char *default_tuning_dir(void)
{
    return !is_dir(SY_MOE_TUNING_DIR) && is_dir(SY_MOE_TUNING_SRCDIR) ? SY_MOE_TUNING_SRCDIR : SY_MOE_TUNING_DIR;
}

static int create(const sy_host *host, const sy_kv *cfg, size_t n_cfg, void **inst, sy_err *err)
{
    syk_isa isa;
    int rc = syk_isa_from_key(sy_kv_get(cfg, n_cfg, "isa"), &isa, err);
    if (rc)
        return rc;
    const long long mt = sy_kv_int(cfg, n_cfg, "max_tokens", 256);
    if (mt < 1 || mt > 1048576)
        return sy_err_set(err, SY_ERR_INVALID, "max_tokens = %lld: expected 1..1048576", mt);
    /* As the device plugin: decided once, one log line (below, after the other keys are checked). */
    syk_matmul mm;
    if ((rc = syk_matmul_select(cfg, n_cfg, isa, &mm, err)))
        return rc;
    moe_cpu *m = calloc(1, sizeof *m);
    if (!m)
        return sy_err_set(err, SY_ERR_NOMEM, "moe cpu: cannot allocate the instance");
    m->matmul = mm;
    const char *act = sy_kv_get(cfg, n_cfg, "activations");
    if (act && *act && strcmp(act, "f32") != 0 && strcmp(act, "nvfp4") != 0 && strcmp(act, "mxfp4") != 0) {
        free(m);
        return sy_err_set(err, SY_ERR_INVALID, "activations = '%s': expected f32, nvfp4 or mxfp4", act);
    }
    m->act_nvfp4 = act && strcmp(act, "nvfp4") == 0;
    m->act_mxfp4 = act && strcmp(act, "mxfp4") == 0;
    const char *td = sy_kv_get(cfg, n_cfg, "tuning_dir"), *tile = sy_kv_get(cfg, n_cfg, "tile");
    if (!td || strcmp(td, SY_MOE_TUNING_DIR) == 0)
        td = default_tuning_dir();
    snprintf(m->tuning_dir, sizeof m->tuning_dir, "%s", td);
    m->builtin = tile && strcmp(tile, "builtin") == 0;
    if (tile && *tile && !m->builtin && (moe_tile_parse(tile, &m->forced) || m->forced.token_block < 1)) {
        free(m);
        return sy_err_set(err, SY_ERR_INVALID,
                          "tile = '%s': expected token_block,n_block,threads (token_block >= 1) or builtin", tile);
    }
    m->host = host;
    m->isa = isa;
    m->kern = syk_kernels_for(isa);
    m->chunk_tokens = mt;
    syk_matmul_log(&m->matmul, host, SY_MOE_CPU_NAME);
    *inst = m;
    return SY_OK;
}

static void free_packs(moe_cpu *m, moe_layer *L)
{
    if (!L->packs)
        return;
    for (int32_t i = 0; i < 3 * L->n_packs; i++)
        syk_amx_pack_free(m->host, L->packs[i]);
    free(L->packs);
    L->packs = NULL;
    L->n_packs = 0;
}

static void release(moe_cpu *m)
{
    if (m->layers) {
        for (int32_t l = 0; l < m->p.n_layers; l++) {
            free_packs(m, &m->layers[l]);
            free(m->layers[l].gate);
            free(m->layers[l].bias);
            free(m->layers[l].gbias);
        }
        free(m->layers);
        m->layers = NULL;
    }
    void **bufs[] = {(void **)&m->ids, (void **)&m->wts, (void **)&m->slot_of, (void **)&m->assign_tok,
                     (void **)&m->counts, (void **)&m->offsets, (void **)&m->work, (void **)&m->xe,
                     (void **)&m->act, (void **)&m->upb, (void **)&m->ye, (void **)&m->xeb, (void **)&m->actb,
                     (void **)&m->qscratch};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        syk_free(m->host, *bufs[i]);
        *bufs[i] = NULL;
    }
    m->prepared = 0;
}

static void destroy(void *inst)
{
    moe_cpu *m = inst;
    if (!m)
        return;
    release(m);
    free(m);
}

static int supports(void *inst, const sy_moe_problem *p, sy_err *why)
{
    (void)inst;
    return sy__moe_check_problem(p, why) == SY_OK;
}

/* The tiles of the expert GEMMs: the `tile` key, else the tuning table for this shape and CPU. */
static int load_tiles(moe_cpu *m, sy_err *err)
{
    moe_limits lim;
    moe_limits_cpu(&lim);
    const sy_moe_problem *p = &m->p;
    if (m->builtin) {
        memset(&m->tune, 0, sizeof m->tune);
        snprintf(m->tune.source, sizeof m->tune.source, "built-in (tile = builtin)");
        return SY_OK;
    }
    if (m->forced.token_block > 0) {
        char why[320];
        if (moe_tile_check(&m->forced, p->hidden, sy_dtype_bits(p->weight_dtype), &lim, why, sizeof why) ||
            moe_tile_check(&m->forced, p->inter, sy_dtype_bits(p->weight_dtype), &lim, why, sizeof why))
            return sy_err_set(err, SY_ERR_UNSUPPORTED, "moe cpu: tile = %lld,%lld,%lld does not fit this device: %s",
                              (long long)m->forced.token_block, (long long)m->forced.n_block,
                              (long long)m->forced.threads, why);
        memset(&m->tune, 0, sizeof m->tune);
        m->tune.n = 1;
        m->tune.tokens[0] = 1;
        m->tune.tile[0] = m->forced;
        snprintf(m->tune.source, sizeof m->tune.source, "the tile key");
        return SY_OK;
    }
    char arch[64], sku[256];
    moe_tune_device(syk_isa_name(m->isa), arch, sizeof arch, sku, sizeof sku);
    return moe_tune_load(m->tuning_dir, arch, sku, p->n_experts, p->inter, p->hidden, p->weight_dtype, &lim, m->host,
                         &m->tune, err);
}

static int prepare(void *inst, const sy_moe_problem *p, sy_err *err)
{
    moe_cpu *m = inst;
    int rc = sy__moe_check_problem(p, err);
    if (rc)
        return rc;
    release(m);
    sy__moe_problem_copy(&m->p, p);
    m->e_first = 0;
    m->e_count = p->n_experts;
    m->layers = calloc((size_t)p->n_layers, sizeof *m->layers);
    const size_t C = (size_t)m->chunk_tokens, K = (size_t)p->top_k, A = C * K;
    const size_t E1 = (size_t)p->n_experts + 1, H = (size_t)p->hidden, F = (size_t)p->inter;
    m->ids = syk_alloc(m->host, sizeof(int32_t) * A, 64);
    m->wts = syk_alloc(m->host, sizeof(float) * A, 64);
    m->slot_of = syk_alloc(m->host, sizeof(int32_t) * A, 64);
    m->assign_tok = syk_alloc(m->host, sizeof(int32_t) * A, 64);
    m->counts = syk_alloc(m->host, sizeof(int32_t) * E1, 64);
    m->offsets = syk_alloc(m->host, sizeof(int32_t) * E1, 64);
    m->work = syk_alloc(m->host, sizeof(moe_work) * E1, 64);
    m->xe = syk_alloc(m->host, sizeof(float) * A * H, 64);
    m->act = syk_alloc(m->host, sizeof(float) * A * F, 64);
    m->upb = syk_alloc(m->host, sizeof(float) * A * F, 64);
    m->ye = syk_alloc(m->host, sizeof(float) * A * H, 64);
    if (m->matmul.bdot) {
        m->xeb = syk_alloc(m->host, sizeof(uint16_t) * A * H, 64);
        m->actb = syk_alloc(m->host, sizeof(uint16_t) * A * F, 64);
    }
    m->fp4act = p->weight_dtype != SY_DTYPE_FP4_E2M1 ? 0 : m->act_nvfp4 ? 1 : m->act_mxfp4 ? 2 : 0;
    if ((m->act_nvfp4 || m->act_mxfp4) && !m->fp4act)
        sy_logf(m->host, SY_LOG_WARN, SY_MOE_CPU_NAME, "activations = %s applies to %s experts; these are %s: "
                "their inputs stay F32", m->act_nvfp4 ? "nvfp4" : "mxfp4", m->act_nvfp4 ? "NVFP4" : "MXFP4",
                sy_dtype_name(p->weight_dtype));
    if (m->fp4act) {
        const int64_t kmax = p->hidden > p->inter ? p->hidden : p->inter;
        m->qrow = (kmax + 1) / 2 + syf_n_scales(kmax);
        m->qscratch = syk_alloc(m->host, (size_t)m->qrow * A, 64);
    }
    if (!m->layers || !m->ids || !m->wts || !m->slot_of || !m->assign_tok || !m->counts || !m->offsets ||
        !m->work || !m->xe || !m->act || !m->upb || !m->ye || (m->matmul.bdot && (!m->xeb || !m->actb)) ||
        (m->fp4act && !m->qscratch)) {
        release(m);
        return sy_err_set(err, SY_ERR_NOMEM, "moe cpu: cannot allocate scratch for %zu tokens x top_k %zu "
                          "(%.1f MiB); lower max_tokens",
                          C, K, (double)(sizeof(float) * A * (2 * H + 2 * F)) / 1048576.0);
    }
    if ((rc = load_tiles(m, err))) {
        release(m);
        return rc;
    }
    sy_logf(m->host, SY_LOG_INFO, SY_MOE_CPU_NAME, "expert GEMM tiles: %s (%d buckets)", m->tune.source, m->tune.n);
    m->logged_buckets = 0;
    m->prepared = 1;
    sy_logf(m->host, SY_LOG_INFO, SY_MOE_CPU_NAME, "%d experts top-%d, scratch for %zu tokens per pass (%.1f MiB), %s kernels%s%s",
            p->n_experts, p->top_k, C, (double)(sizeof(float) * A * (2 * H + 2 * F)) / 1048576.0,
            syk_isa_name(m->isa), m->matmul.bdot ? ", BF16 dot products for BF16 experts" : "",
            m->fp4act == 1 ? ", NVFP4-quantised expert inputs (W4A4)"
            : m->fp4act == 2 ? ", MXFP4-quantised expert inputs (W4A4)" : "");
    return SY_OK;
}

static int check_expert(const sy_tensor *t, const char *what, int32_t e, int64_t rows, int64_t cols, sy_err *err)
{
    int64_t r, c, ld;
    char why[160];
    if (syk_wdtype_quant(t->dtype) && syk_qweight_check(t, why, sizeof why))
        return sy_err_set(err, SY_ERR_UNSUPPORTED, "moe prepare_layer: expert %d %s: %s", e, what, why);
    if (!syk_wdtype_ok(t->dtype) && !syk_wdtype_quant(t->dtype))
        return sy_err_set(err, SY_ERR_UNSUPPORTED,
                          "moe prepare_layer: expert %d %s is %s; expected F32, F16, BF16, F8_E4M3, NVFP4 or MXFP4", e,
                          what, sy_dtype_name(t->dtype));
    if (syk_view2d(t, &r, &c, &ld) || t->ndim != 2)
        return sy_err_set(err, SY_ERR_INVALID, "moe prepare_layer: expert %d %s must be a 2-D matrix with contiguous "
                          "rows", e, what);
    if (r != rows || c != cols)
        return sy_err_set(err, SY_ERR_INVALID, "moe prepare_layer: expert %d %s must be [%lld, %lld], found "
                          "[%lld, %lld]", e, what, (long long)rows, (long long)cols, (long long)r, (long long)c);
    if (!t->data)
        return sy_err_set(err, SY_ERR_INVALID, "moe prepare_layer: expert %d %s has no data", e, what);
    return SY_OK;
}

static int prepare_layer(void *inst, int32_t layer, const sy_tensor *gate, const sy_tensor *up, const sy_tensor *down,
                         const sy_tensor *score_bias, sy_err *err)
{
    moe_cpu *m = inst;
    if (!m->prepared)
        return sy_err_set(err, SY_ERR_INVALID, "moe cpu: prepare_layer before prepare");
    if (layer < 0 || layer >= m->p.n_layers)
        return sy_err_set(err, SY_ERR_INVALID, "moe prepare_layer: layer %d outside [0, %d)", layer, m->p.n_layers);
    if (!gate || !up || !down)
        return sy_err_set(err, SY_ERR_INVALID, "moe prepare_layer: gate, up and down arrays are required");
    const int32_t E = m->p.n_experts, EL = m->e_count, e0 = m->e_first;
    int rc;
    for (int32_t e = 0; e < EL; e++)
        if ((rc = check_expert(&gate[e], "gate", e0 + e, m->p.inter, m->p.hidden, err)) ||
            (rc = check_expert(&up[e], "up", e0 + e, m->p.inter, m->p.hidden, err)) ||
            (rc = check_expert(&down[e], "down", e0 + e, m->p.hidden, m->p.inter, err)))
            return rc;
    /* Each mode's activations match its experts' format (nvfp4: E4M3 per 16; mxfp4: E8M0 per 32). */
    for (int32_t e = 0; e < EL && m->fp4act; e++) {
        const int mx = gate[e].scale_dtype == SY_DTYPE_E8M0, want_mx = m->fp4act == 2;
        if (mx != want_mx || (up[e].scale_dtype == SY_DTYPE_E8M0) != want_mx ||
            (down[e].scale_dtype == SY_DTYPE_E8M0) != want_mx)
            return sy_err_set(err, SY_ERR_UNSUPPORTED, "moe prepare_layer: expert %d is %s; activations = %s takes "
                              "%s experts only: set [moe] activations = %s or f32", e0 + e,
                              want_mx ? "not MXFP4 (E8M0 scales) throughout" : "MXFP4 (E8M0 scales)",
                              want_mx ? "mxfp4" : "nvfp4", want_mx ? "MXFP4" : "NVFP4", want_mx ? "nvfp4" : "mxfp4");
    }
    double *bias = NULL;
    if (score_bias) {
        int64_t r, c, ld;
        if (!syk_wdtype_ok(score_bias->dtype) || syk_view2d(score_bias, &r, &c, &ld) || r != 1 || c != E ||
            !score_bias->data)
            return sy_err_set(err, SY_ERR_INVALID, "moe prepare_layer: score_bias must be [%d] F32/F16/BF16", E);
        bias = malloc(sizeof(double) * (size_t)E);
        float tmp[SY_MOE_CPU_MAX_EXPERTS];
        if (!bias)
            return sy_err_set(err, SY_ERR_NOMEM, "moe prepare_layer: cannot allocate the score bias");
        syk_row_to_f32(tmp, score_bias->data, score_bias->dtype, E);
        for (int32_t e = 0; e < E; e++)
            bias[e] = tmp[e];
    }
    /* One block for the three arrays of views. */
    sy_tensor *views = malloc(sizeof(sy_tensor) * 3 * (size_t)EL);
    if (!views) {
        free(bias);
        return sy_err_set(err, SY_ERR_NOMEM, "moe prepare_layer: cannot allocate %d expert views", 3 * EL);
    }
    memcpy(views, gate, sizeof(sy_tensor) * (size_t)EL);
    memcpy(views + EL, up, sizeof(sy_tensor) * (size_t)EL);
    memcpy(views + 2 * EL, down, sizeof(sy_tensor) * (size_t)EL);
    syk_amx_pack **packs = NULL;
    if (m->matmul.amx && m->p.weight_dtype == SY_DTYPE_BF16) {
        /* Once per expert at load; forward then only reads the packs (the views' pages are not touched again). */
        packs = calloc(3 * (size_t)EL, sizeof *packs);
        for (int32_t i = 0; packs && i < 3 * EL; i++) {
            int64_t r, c, ld;
            syk_view2d(&views[i], &r, &c, &ld);
            if (!(packs[i] = syk_amx_pack_new(m->host, views[i].data, r, c, ld))) {
                for (int32_t j = 0; j < i; j++)
                    syk_amx_pack_free(m->host, packs[j]);
                free(packs);
                packs = NULL;
            }
        }
        if (!packs) {
            free(views);
            free(bias);
            return sy_err_set(err, SY_ERR_NOMEM, "moe prepare_layer: layer %d: cannot allocate the AMX copies of %d "
                              "experts (amx = off runs without them)", layer, EL);
        }
    }
    moe_layer *L = &m->layers[layer];
    free_packs(m, L);
    L->packs = packs;
    L->n_packs = packs ? EL : 0;
    free(L->gate);
    free(L->bias);
    L->gate = views;
    L->up = views + EL;
    L->down = views + 2 * EL;
    L->bias = bias;
    free(L->gbias); /* new experts: their biases come after them */
    L->gbias = L->ubias = L->dbias = NULL;
    L->bias_ready = 0;
    L->ready = 1;
    return SY_OK;
}

/* has_bias: the experts' projection biases, kept as F32 and added by the GEMMs after each dot product. */
static int prepare_layer_bias(void *inst, int32_t layer, const sy_tensor *gate_bias, const sy_tensor *up_bias,
                              const sy_tensor *down_bias, sy_err *err)
{
    moe_cpu *m = inst;
    const int loaded = m->prepared && layer >= 0 && layer < m->p.n_layers && m->layers[layer].ready;
    float *b = NULL;
    size_t n = 0;
    int rc = symoe_gather_biases(SY_MOE_CPU_NAME, m->prepared, &m->p, layer, loaded, m->e_first, m->e_count,
                                 gate_bias, up_bias, down_bias, &b, &n, err);
    if (rc)
        return rc;
    const size_t EL = (size_t)m->e_count, F = (size_t)m->p.inter;
    moe_layer *L = &m->layers[layer];
    free(L->gbias);
    L->gbias = b;
    L->ubias = b + EL * F;
    L->dbias = down_bias ? b + 2 * EL * F : NULL;
    L->bias_ready = 1;
    return SY_OK;
}

/* Expert parallelism: routing stays global (moe_route.c on all n_experts), forward skips the others' experts. */
static int set_expert_range(void *inst, int32_t first, int32_t count, sy_err *err)
{
    moe_cpu *m = inst;
    int32_t loaded = -1;
    for (int32_t l = 0; m->prepared && l < m->p.n_layers && loaded < 0; l++)
        loaded = m->layers[l].ready ? l : -1;
    const int rc = symoe_check_range(SY_MOE_CPU_NAME, m->prepared, &m->p, first, count, loaded, err);
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
    .forward = sy__moe_cpu_forward,
    .set_expert_range = set_expert_range,
    .prepare_layer_bias = prepare_layer_bias,
};

/*
 * get_proc("tuning_table"): the path this CPU's table for the prepared
 * shape has (where `switchyard tune-moe` writes it) and, in *source, the
 * table (or "built-in", "the tile key") the instance took its tiles from.
 */
static int tuning_table(void *inst, char *path, size_t cap, const char **source)
{
    const moe_cpu *m = inst;
    if (!m->prepared)
        return -1;
    char arch[64], sku[256], fname[128];
    moe_tune_device(syk_isa_name(m->isa), arch, sizeof arch, sku, sizeof sku);
    moe_tune_file_name(fname, sizeof fname, m->p.n_experts, m->p.inter, m->p.hidden, m->p.weight_dtype);
    if (snprintf(path, cap, "%s/%s/%s/%s", m->tuning_dir, arch, sku, fname) >= (int)cap)
        return -1;
    if (source)
        *source = m->tune.source;
    return 0;
}

/* get_proc("matmul"): the numerics the instance resolved, as its start-up log line ("matmul = auto: f32, ..."). */
static const char *matmul_line(void *inst)
{
    const moe_cpu *m = inst;
    return m ? m->matmul.choice.line : "?";
}

/*
 * get_proc("matmul_peak") (sy_device_matmul_peak_fn, on this instance): the peak of the path the expert
 * GEMMs take on weights of wdtype, over the host's workers, for plugin-check --speed to print achieved against it.
 */
static double matmul_peak(void *inst, sy_dtype wdtype, char *path, size_t path_len)
{
    const moe_cpu *m = inst;
    if (!m)
        return 0;
    const syk_par par = syk_par_from_host(m->host);
    return syk_matmul_peak_of(m->isa, m->matmul.bdot != NULL, m->matmul.amx != NULL, wdtype, par.n_workers, path,
                              path_len);
}

static void *get_proc(const char *name)
{
    if (name && strcmp(name, "matmul") == 0) {
        const char *(*f)(void *) = matmul_line;
        return (void *)f;
    }
    if (name && strcmp(name, "matmul_peak") == 0) {
        sy_device_matmul_peak_fn f = matmul_peak;
        return (void *)f;
    }
    return name && strcmp(name, "tuning_table") == 0 ? (void *)tuning_table : NULL;
}

static const sy_plugin_desc desc = {
    .struct_size = sizeof(sy_plugin_desc),
    .abi_major = SY_ABI_MAJOR,
    .abi_minor = SY_ABI_MINOR,
    .kind = SY_KIND_MOE,
    .name = SY_MOE_CPU_NAME,
    .version = PACKAGE_VERSION,
    .device = "cpu",
    .description = "mixture of experts on the host: softmax/sigmoid routing, grouped top-k, grouped expert GEMMs "
                   "on F32/F16/BF16, FP8, NVFP4 and MXFP4 weights, silu or gpt-oss's clamped swiglu, expert biases, tiles "
                   "from tuning tables",
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
