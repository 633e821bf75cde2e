/*
 * libsykern: the CPU kernels shared by the cpu plugins (device, attn, moe).
 * A libtool convenience library linked into each plugin, built with hidden
 * visibility, so every plugin carries its own copy and exports nothing but
 * its entry point.
 *
 * Numerics: weights are read in their own dtype (F32, F16, BF16) and widened
 * to F32 in registers; activations stay F32; every dot product accumulates
 * in F32. The summation order of one output element depends only on the ISA
 * and on k, never on the batch size or the thread count (batch-invariant),
 * so a sequence decodes to the same bits alone or in a batch.
 */
#ifndef SY_CPU_SYKERN_H
#define SY_CPU_SYKERN_H

#include <stddef.h>
#include <stdint.h>

#include "switchyard/plugin.h"

/* ------------------------------------------------------------------ ISA */

typedef enum syk_isa {
    SYK_ISA_PORTABLE = 0, /* plain C */
    SYK_ISA_AVX2 = 1,     /* AVX2 + FMA + F16C */
    SYK_ISA_AVX512 = 2,   /* AVX-512 F/BW/VL/DQ (+ the above) */
    SYK_ISA_COUNT
} syk_isa;

/* The value of the `isa` key every cpu plugin declares. */
#define SYK_ISA_CHOICES "auto|avx512|avx2|portable"

const char *syk_isa_name(syk_isa isa);
/* Parses an `isa` key value; "auto" gives the best usable ISA. Returns 0 on success. */
int syk_isa_parse(const char *s, syk_isa *out);
/*
 * 1 if this CPU and the OS (XCR0 state enabled by XSAVE) support isa;
 * otherwise 0 and why names what is missing. why may be NULL.
 */
int syk_isa_usable(syk_isa isa, char *why, size_t why_len);
/* The best usable ISA (never fails: portable always is). */
syk_isa syk_isa_best(void);
/* Resolves an `isa` key for a plugin: SY_OK, or SY_ERR_UNSUPPORTED with the reason in err. */
int syk_isa_from_key(const char *value, syk_isa *out, sy_err *err);

/* -------------------------------------------------------------- kernels */

/* Weight dtypes the kernels read, indexed by sy_dtype (F32 = 0, F16 = 1, BF16 = 2). */
#define SYK_N_WDTYPES 3
static inline int syk_wdtype_ok(sy_dtype d)
{
    return d == SY_DTYPE_F32 || d == SY_DTYPE_F16 || d == SY_DTYPE_BF16;
}
static inline size_t syk_wdtype_size(sy_dtype d)
{
    return d == SY_DTYPE_F32 ? 4 : 2;
}

/*
 * k is summed in slices of SYK_KC elements: each slice's dot product is
 * reduced to a scalar and added to out in slice order. Fixed, so a row's
 * result never depends on how many rows were computed with it.
 */
#define SYK_KC 1024

/*
 * out[i*ldo + j] (+)= sum_kk x[i*ldx + kk] * w[j*ldw + kk]  for i < n, j < m,
 * kk < k; "+=" when accumulate. w holds elements of the table's dtype.
 * Serial; any k (sliced at SYK_KC as above, so calling once with k or once
 * per SYK_KC slice with accumulate set after the first gives the same
 * bits). Output columns are reduced in groups of 4 starting at column 0 of
 * the call, so callers keep column offsets multiples of 4.
 */
typedef void (*syk_gemm_nt_fn)(const float *x, int64_t ldx, const void *w, int64_t ldw, float *out, int64_t ldo,
                               int64_t n, int64_t m, int64_t k, int accumulate);
/* acc[i*lda + d] += sum_j p[i*ldp + j] * v[j*ldv + d]  for i < n, j < npos, d < dv. */
typedef void (*syk_gemm_nn_acc_fn)(const float *p, int64_t ldp, const void *v, int64_t ldv, float *acc, int64_t lda,
                                   int64_t n, int64_t npos, int64_t dv);
/*
 * y[i] = exp(x[i]) for softmax: within 3 ulp of exp on [-87, 88]; below,
 * 0 or a subnormal (exp(-inf) = 0); above, saturated at e^88; NaN stays
 * NaN. y may alias x.
 */
typedef void (*syk_vexp_fn)(float *y, const float *x, int64_t n);
/*
 * One online-softmax step of one query row over one KV block's scores s[0..n):
 * the positions in [jl, jh] are the row's (causal / window), the rest get 0.
 * m' = max(*m, s[jl..jh]); s[c] = exp(s[c] - m') (the table's vexp) on the
 * row's positions; if m' moved, o[0..dv) and *l are scaled by exp(*m - m')
 * (0 from -inf) and *m = m'; then *l += the sum of the new exps. jl > jh:
 * all of s becomes 0 and nothing else changes. The sum's order is fixed by
 * n, jl and jh alone, so a row's bits never depend on the rows beside it.
 */
typedef void (*syk_softmax_step_fn)(float *s, int64_t n, int64_t jl, int64_t jh, float *m, float *l, float *o,
                                    int64_t dv);

typedef struct syk_kernels {
    syk_isa isa;
    syk_gemm_nt_fn gemm_nt[SYK_N_WDTYPES];
    syk_gemm_nn_acc_fn gemm_nn_acc[SYK_N_WDTYPES];
    syk_vexp_fn vexp;
    syk_softmax_step_fn softmax_step;
} syk_kernels;

/* Constant tables, one per ISA; NULL when the ISA is not compiled in. */
const syk_kernels *syk_kernels_for(syk_isa isa);
/* Per-ISA tables, defined in kern_<isa>.c (NULL off x86-64). */
const syk_kernels *syk__kernels_portable(void);
const syk_kernels *syk__kernels_avx2(void);
const syk_kernels *syk__kernels_avx512(void);
/* AVX2's softmax step, which the AVX-512 table shares: 16 scores a row gain nothing from wider vectors. */
void syk__softmax_step_avx2(float *s, int64_t n, int64_t jl, int64_t jh, float *m, float *l, float *o, int64_t dv);

/* ------------------------------------------------------ BF16 dot products */

/*
 * The opt-in BF16 path (key `matmul = bf16` of the cpu plugins), for BF16
 * weights: activations are rounded to BF16 (nearest even) and multiplied
 * with AVX512-BF16 dot products (vdpbf16ps: two exact products added into
 * each F32 lane), twice the products per instruction of the F32 FMA path,
 * as llama.cpp's CPU backend does. k is sliced at SYK_KC and columns are
 * reduced in groups of 4 as in gemm_nt, so this path is batch-invariant
 * too; its results differ from the F32 path's (x lost its low 16 bits).
 */
typedef void (*syk_gemm_nt_xbf16_fn)(const uint16_t *xb, int64_t ldx, const uint16_t *w, int64_t ldw, float *out,
                                     int64_t ldo, int64_t n, int64_t m, int64_t k, int accumulate);
/* dst[i] = src[i] rounded to BF16, nearest even (denormals flush to zero). */
typedef void (*syk_to_bf16_fn)(uint16_t *dst, const float *src, int64_t n);
typedef struct syk_bf16dot {
    syk_gemm_nt_xbf16_fn gemm_nt;
    syk_to_bf16_fn to_bf16;
} syk_bf16dot;

/* 1 if the CPU reports AVX512_BF16 (CPUID leaf 7, subleaf 1). */
int syk_cpu_has_avx512bf16(void);
/*
 * The BF16 kernels for plugins running isa, or NULL with the reason in why
 * (isa is not avx512, or the CPU lacks AVX512_BF16). why may be NULL.
 */
const syk_bf16dot *syk_bf16dot_for(syk_isa isa, char *why, size_t why_len);

/* ---------------------------------------------------------- AMX-BF16 tiles */

/*
 * The AMX path of `matmul = bf16` (kern_amx.c): x rounded to BF16 as above,
 * BF16 weights repacked once at load into the tile layout, TDPBF16PS with
 * F32 accumulation in tiles. Layout: 16-column panels; within a panel, row
 * r holds k elements 2r and 2r+1 of each of the 16 columns ("VNNI" pairs),
 * k padded with zeros to a multiple of 32, columns past m zero.
 * k is summed in SYK_KC slices (each slice's tile sum added to out in
 * order) and every 16 x 16 output tile sees the same instruction sequence
 * whatever the rows or columns computed with it, so the path is batch- and
 * thread-invariant; its bits differ from the AVX512-BF16 kernel's.
 */
#define SYK_AMX_PANEL 16 /* output columns per panel; column chunks should start at multiples of it */
#define SYK_AMX_MAGIC 0x414d5850u /* "AMXP": priv is one of these */
typedef struct syk_amx_pack {
    uint32_t magic;
    const void *src; /* the row-major weights it was made from: a tensor whose data differs is not this pack */
    int64_t m, k;    /* the source's rows and columns */
    int64_t ldw;     /* and its row stride */
    int64_t kpad;    /* k rounded up to 32 */
    uint16_t *p;     /* [ceil(m / 16)][kpad / 2][16][2]; NULL once dropped (the tensor then runs AVX512-BF16) */
    size_t bytes;
} syk_amx_pack;

/*
 * out[i*ldo + j] = sum_kk xb[i*ldx + kk] * w[j][kk]  for i < n, c0 <= j < c1
 * (whole k, no accumulate). Loads its tile configuration itself and
 * releases the tiles before it returns, so any thread may call it.
 */
typedef void (*syk_amx_gemm_fn)(const uint16_t *xb, int64_t ldx, const syk_amx_pack *w, float *out, int64_t ldo,
                                int64_t n, int64_t c0, int64_t c1);
typedef struct syk_amx {
    syk_amx_gemm_fn gemm;
} syk_amx;

/* 1 if CPUID reports AMX-TILE and AMX-BF16 with the 16 x 64-byte palette; else 0 and why. */
int syk_cpu_has_amx_bf16(char *why, size_t why_len);
/*
 * Asks Linux for the tile data state (arch_prctl ARCH_REQ_XCOMP_PERM,
 * XFEATURE_XTILEDATA) and checks that it was granted and that XCR0 enables
 * XTILECFG and XTILEDATA. Process-wide and idempotent; call before the first
 * tile instruction. simulate_refusal: behave as if the kernel refused (tests).
 * Returns 1 when tiles may be used, else 0 and why.
 */
int syk_amx_request(int simulate_refusal, char *why, size_t why_len);
/*
 * The AMX kernels for plugins running isa with the BF16 path on, after
 * syk_cpu_has_amx_bf16 and syk_amx_request; NULL with why otherwise. The
 * environment variable SY_CPU_AMX_REFUSE=1 simulates the OS refusing.
 */
const syk_amx *syk_amx_for(syk_isa isa, char *why, size_t why_len);
/* Repacks row-major BF16 w [m, k] (row stride ldw) into a new pack; NULL when out of memory. */
syk_amx_pack *syk_amx_pack_new(const sy_host *host, const uint16_t *w, int64_t m, int64_t k, int64_t ldw);
/* Frees the packed copy (the pack then stands for nothing: p = NULL). */
void syk_amx_pack_drop(const sy_host *host, syk_amx_pack *pk);
void syk_amx_pack_free(const sy_host *host, syk_amx_pack *pk);
/* The pack of t when t->priv is one made from t's own data and shape; else NULL. */
const syk_amx_pack *syk_amx_pack_of(const sy_tensor *t);

/* ---------------------------------------------------------------- peaks */

typedef enum syk_path {
    SYK_PATH_F32 = 0,        /* F32 FMAs (weights widened) */
    SYK_PATH_AVX512BF16 = 1, /* matmul = bf16, amx = off or no AMX */
    SYK_PATH_AMX = 2         /* matmul = bf16 on AMX tiles */
} syk_path;
/*
 * Peak GFLOP/s of path on `cores` cores (peak.c says how): for F32, one
 * core's measured FMA rate x cores; for the BF16 paths, FLOP/cycle/core of
 * their instruction x the clock that FMA rate implies. Without a measured
 * rate (portable kernels, not x86-64) the /proc/cpuinfo clock; 0 when
 * unknown. Takes ~1 ms. how (may be NULL) receives the derivation.
 */
double syk_matmul_peak(syk_isa isa, syk_path path, int cores, char *how, size_t how_len);
/*
 * get_proc("matmul_peak") of the device and moe cpu plugins: the path a
 * product on weights of wdtype takes in an instance whose matmul choice has
 * BF16 dot products (bdot) and AMX tiles (amx), its name into path ("f32-avx2",
 * "avx512-bf16", "amx-bf16"; may be NULL) and its peak on `workers` cores.
 */
double syk_matmul_peak_of(syk_isa isa, int bdot, int amx, sy_dtype wdtype, int workers, char *path, size_t path_len);

/* ------------------------------------------------------------ parallelism */

/*
 * A parallel_for: the device pool's (syk_pool_run) or host->parallel_for,
 * with its context. run == NULL runs serially on the caller (worker 0).
 */
typedef struct syk_par {
    void (*run)(void *ctx, int64_t n, int64_t grain, sy_range_fn fn, void *arg);
    void *ctx;
    int n_workers;
} syk_par;

/* Runs fn over [0, n), in parallel when par allows. */
void syk_par_for(const syk_par *par, int64_t n, int64_t grain, sy_range_fn fn, void *arg);
/* A syk_par over the host's parallel_for (serial when the host has none). */
syk_par syk_par_from_host(const sy_host *host);

/* ---------------------------------------------------------------- GEMM */

/* out[n, m] = x[n, k] . w[m, k]^T (+ bias[m]). Row strides in elements. */
typedef struct syk_gemm {
    const float *x;
    int64_t ldx;
    const void *w;
    sy_dtype wdtype;
    int64_t ldw;
    const void *bias; /* NULL or [m] of bias_dtype */
    sy_dtype bias_dtype;
    float *out;
    int64_t ldo;
    int64_t n, m, k;
    /* wdtype FP8_E4M3 / FP4_E2M1: the weight tensor, whose scales the kernels read (sykquant.h). */
    const sy_tensor *wq;
    /*
     * The BF16 path, for wdtype BF16 only: x already rounded into xb (row
     * stride ldxb) by syk_rows_to_bf16. NULL: the F32 path.
     */
    const syk_bf16dot *bdot;
    const uint16_t *xb;
    int64_t ldxb;
    /* With bdot and xb: the weights' AMX pack and kernels (kern_amx.c), else NULL. */
    const syk_amx_pack *amx_w;
    const syk_amx *amx;
} syk_gemm;

/* xb[i*ldxb + kk] = x[i*ldx + kk] rounded to BF16, for i < n, kk < k, rows split over par. */
void syk_rows_to_bf16(const syk_bf16dot *b, uint16_t *xb, int64_t ldxb, const float *x, int64_t ldx, int64_t n,
                      int64_t k, const syk_par *par);

/* Serial: output rows [r0, r1) and columns [c0, c1), c0 a multiple of 4. */
void syk_gemm_tile(const syk_kernels *kern, const syk_gemm *g, int64_t r0, int64_t r1, int64_t c0, int64_t c1);
/* The whole product, split over par's workers by row blocks and column chunks. */
void syk_gemm_run(const syk_kernels *kern, const syk_gemm *g, const syk_par *par);
/*
 * n products (up to SYK_GEMM_MULTI_MAX), usually of one x, as one split
 * over par's workers: one pass of the pool instead of n. Each product's
 * bits are those syk_gemm_run gives it alone.
 */
#define SYK_GEMM_MULTI_MAX 8
void syk_gemm_run_multi(const syk_kernels *kern, const syk_gemm *g, int n, const syk_par *par);

/* ---------------------------------------------------------- elementwise */

/* dst[i] = src[i] widened to F32 (src of dtype F32/F16/BF16). */
void syk_row_to_f32(float *dst, const void *src, sy_dtype dt, int64_t n);
/* dst[i] = src[i] narrowed to dtype (round to nearest even). */
void syk_row_from_f32(void *dst, sy_dtype dt, const float *src, int64_t n);
/* out = x / sqrt(mean(x^2) + eps) * w; sums in double. out may alias x. */
void syk_rmsnorm_row(float *out, const float *x, const void *w, sy_dtype wdt, int64_t d, float eps);
/* out = silu(gate) * up; out may alias either input. */
void syk_silu_mul(float *out, const float *gate, const float *up, int64_t n);
/* The same with k's vector exp (within 3 ulp): the exp was most of the op's time. */
void syk_silu_mul_vexp(const syk_kernels *k, float *out, const float *gate, const float *up, int64_t n);
/*
 * gpt-oss's clamped SwiGLU with k's vector exp: g = min(gate, limit),
 * u = clamp(up, -limit, limit), out = (u + 1) * g * sigmoid(alpha * g).
 * out may alias either input.
 */
void syk_swiglu_clamp_vexp(const syk_kernels *k, float *out, const float *gate, const float *up, int64_t n, float alpha,
                           float limit);
/* acc += x. */
void syk_add(float *acc, const float *x, int64_t n);
/*
 * Rotates the first rotary_dim elements of each of `heads` heads of one
 * token in place; cs holds rotary_dim/2 cosines then rotary_dim/2 sines
 * (already multiplied by mscale).
 */
void syk_rope_row(float *x, int64_t heads, int64_t head_dim, int64_t rotary_dim, int neox, const float *cs);

/* ---------------------------------------------------------------- memory */

/* Aligned memory through the host's allocator when it has one, else posix_memalign. */
void *syk_alloc(const sy_host *host, size_t size, size_t align);
void syk_free(const sy_host *host, void *p);

/* ---------------------------------------------------------------- shapes */

/*
 * Views a tensor as rows x cols (cols = last dim, rows = product of the
 * others) with a row stride; fails unless the innermost stride is 1 and the
 * outer dims collapse into one stride. Returns 0 on success.
 */
int syk_view2d(const sy_tensor *t, int64_t *rows, int64_t *cols, int64_t *ld);

#endif
