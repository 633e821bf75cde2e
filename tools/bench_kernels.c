/*
 * bench_kernels: the cpu plugins' linear kernels against this machine.
 *
 *   tools/bench_kernels [--threads N] [--isa auto|avx512|avx2|portable] [--quick]
 *                       [--only bw|gemv|qgemv|gemm|prefill] [--gemv MxK]...
 *
 * Prints the measured read bandwidth (a parallel streaming sum), then GEMV
 * (n = 1) in GB/s of weights read, with its ratio to that bandwidth (F32,
 * F16, BF16, and the quantised FP8, NVFP4 and MXFP4 layouts), and
 * batched GEMM (n = 32, 128) in GFLOP/s, for F32, F16 and BF16 weights,
 * and prefill-like BF16 products on the F32, AVX512-BF16 and AMX paths
 * against each path's nominal peak.
 * Matrices larger than the last-level cache measure DRAM; the small ones
 * (768 x 768) measure the caches. Times are the best of several runs.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sykconv.h"
#include "sykern.h"
#include "sykpool.h"
#include "sykquant.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct sum_job {
    const uint64_t *p;
    int simd; /* 0: C, 1: avx2, 2: avx512 */
    uint64_t partial[256 * 8];
} sum_job;

/* Plain C: the fallback when AVX2 is not usable here. */
static void sum_words(const uint64_t *p, int64_t n, uint64_t *out)
{
    uint64_t s[8] = {0};
    for (int64_t i = 0; i < n; i += 8)
        for (int l = 0; l < 8; l++)
            s[l] += p[i + l];
    for (int l = 0; l < 8; l++)
        out[l] += s[l];
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
/* Eight independent accumulators of full-width loads: the loop outruns DRAM, so the time is the memory's. */
__attribute__((target("avx2"))) static void sum_words_avx2(const uint64_t *p, int64_t n, uint64_t *out)
{
    __m256i a[8];
    for (int l = 0; l < 8; l++)
        a[l] = _mm256_setzero_si256();
    for (int64_t i = 0; i < n; i += 32)
#pragma GCC unroll 8
        for (int l = 0; l < 8; l++)
            a[l] = _mm256_add_epi64(a[l], _mm256_load_si256((const __m256i *)(p + i + 4 * l)));
    for (int l = 1; l < 8; l++)
        a[0] = _mm256_add_epi64(a[0], a[l]);
    uint64_t t[4];
    _mm256_storeu_si256((__m256i *)t, a[0]);
    for (int l = 0; l < 4; l++)
        out[l] += t[l];
}

__attribute__((target("avx512f"))) static void sum_words_avx512(const uint64_t *p, int64_t n, uint64_t *out)
{
    __m512i a[8];
    for (int l = 0; l < 8; l++)
        a[l] = _mm512_setzero_si512();
    for (int64_t i = 0; i < n; i += 64)
#pragma GCC unroll 8
        for (int l = 0; l < 8; l++)
            a[l] = _mm512_add_epi64(a[l], _mm512_load_si512((const void *)(p + i + 8 * l)));
    for (int l = 1; l < 8; l++)
        a[0] = _mm512_add_epi64(a[0], a[l]);
    out[0] += (uint64_t)_mm512_reduce_add_epi64(a[0]);
}
#endif

static void sum_range(void *arg, int64_t b, int64_t e, int worker)
{
    sum_job *j = arg;
    uint64_t *out = j->partial + (worker % 256) * 8;
    const uint64_t *p = j->p + b * 64;
    const int64_t n = (e - b) * 64;
#if defined(__x86_64__) && defined(__GNUC__)
    if (j->simd == 2) {
        sum_words_avx512(p, n, out);
        return;
    }
    if (j->simd == 1) {
        sum_words_avx2(p, n, out);
        return;
    }
#endif
    sum_words(p, n, out);
}

/* Best-of-reps seconds for fn. */
typedef void (*bench_fn)(void *ctx);
static double best_time(bench_fn fn, void *ctx, double min_total)
{
    fn(ctx); /* warm up: page faults, caches, pool */
    double best = 1e30, total = 0;
    int reps = 0;
    while ((total < min_total || reps < 3) && reps < 1000) {
        const double t0 = now_s();
        fn(ctx);
        const double t = now_s() - t0;
        best = t < best ? t : best;
        total += t;
        reps++;
    }
    return best;
}

typedef struct bw_ctx {
    syk_par *par;
    sum_job *job;
    int64_t words;
} bw_ctx;

static void run_bw(void *c)
{
    bw_ctx *b = c;
    syk_par_for(b->par, b->words / 64, 1024, sum_range, b->job);
}

typedef struct gemm_ctx {
    const syk_kernels *k;
    syk_gemm g;
    syk_par *par;
} gemm_ctx;

static void run_gemm(void *c)
{
    gemm_ctx *g = c;
    syk_gemm_run(g->k, &g->g, g->par);
}

static void *alloc64(size_t n)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, n ? n : 64)) {
        fprintf(stderr, "bench_kernels: cannot allocate %zu bytes\n", n);
        exit(1);
    }
    return p;
}

static void *make_weights(sy_dtype dt, int64_t m, int64_t k)
{
    const size_t es = dt == SY_DTYPE_F32 ? 4 : 2;
    void *w = alloc64((size_t)(m * k) * es);
    uint32_t r = 12345;
    for (int64_t i = 0; i < m * k; i++) {
        r = r * 1664525u + 1013904223u;
        const float f = (float)(int32_t)(r >> 8) / 8388608.0f * 0.05f;
        if (dt == SY_DTYPE_F32)
            ((float *)w)[i] = f;
        else if (dt == SY_DTYPE_BF16)
            ((uint16_t *)w)[i] = syk_f32_to_bf16(f);
        else
            ((uint16_t *)w)[i] = syk_f32_to_f16(f);
    }
    return w;
}

/*
 * Prefill-like products with BF16 weights on the three paths: F32 (x stays
 * F32, weights widened), AVX512-BF16 (matmul = bf16, amx = off) and AMX
 * (matmul = bf16; weights packed beforehand as prepare_weight does), each
 * against its nominal peak (syk_matmul_peak, peak.c). The BF16 paths'
 * times include rounding x, as the device op does.
 */
typedef struct path_ctx {
    const syk_kernels *k;
    syk_gemm g;
    syk_par *par;
    const float *x;
} path_ctx;

static void run_path(void *c)
{
    path_ctx *p = c;
    if (p->g.bdot)
        syk_rows_to_bf16(p->g.bdot, (uint16_t *)p->g.xb, p->g.ldxb, p->x, p->g.ldx, p->g.n, p->g.k, p->par);
    syk_gemm_run(p->k, &p->g, p->par);
}

static void bench_prefill(const syk_kernels *kern, syk_par *par, int threads, double min_t)
{
    static const int64_t shapes[][2] = {{768, 768}, {2048, 768}, {768, 2048}, {32000, 768}};
    static const int64_t ns[] = {1, 16, 128, 512};
    const syk_bf16dot *bd = syk_bf16dot_for(kern->isa, NULL, 0);
    char why[256];
    const syk_amx *amx = bd ? syk_amx_for(kern->isa, why, sizeof why) : NULL;
    if (!amx)
        printf("\nAMX rows skipped: %s\n", bd ? why : "no AVX512-BF16 either");
    const char *names[3] = {"f32", "avx512bf16", "amx"};
    double peak[3];
    printf("\nprefill products, BF16 weights: out[n, m] = x[n, k] . w[m, k]^T, %d threads\n", threads);
    for (int p = 0; p < 3; p++) {
        peak[p] = syk_matmul_peak(kern->isa, (syk_path)p, threads, why, sizeof why);
        printf("  peak %-10s %s\n", names[p], why);
    }
    printf("%-12s %-6s %-11s %10s %10s %8s\n", "m x k", "n", "path", "ms", "GFLOP/s", "of peak");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int64_t m = shapes[s][0], k = shapes[s][1];
        uint16_t *w = make_weights(SY_DTYPE_BF16, m, k);
        syk_amx_pack *pk = amx ? syk_amx_pack_new(NULL, w, m, k, k) : NULL;
        for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++) {
            const int64_t n = ns[a];
            float *x = alloc64(sizeof(float) * (size_t)(n * k)), *o = alloc64(sizeof(float) * (size_t)(n * m));
            uint16_t *xb = alloc64(sizeof(uint16_t) * (size_t)(n * k));
            for (int64_t i = 0; i < n * k; i++)
                x[i] = (float)(i % 13) * 0.01f;
            for (int p = 0; p < 3; p++) {
                if ((p >= 1 && !bd) || (p == 2 && !pk))
                    continue;
                path_ctx c = {kern, {.x = x, .ldx = k, .w = w, .wdtype = SY_DTYPE_BF16, .ldw = k,
                                     .bias_dtype = SY_DTYPE_F32, .out = o, .ldo = m, .n = n, .m = m, .k = k}, par, x};
                if (p >= 1) {
                    c.g.bdot = bd;
                    c.g.xb = xb;
                    c.g.ldxb = k;
                }
                if (p == 2) {
                    c.g.amx_w = pk;
                    c.g.amx = amx;
                }
                const double t = best_time(run_path, &c, min_t);
                const double gf = 2.0 * (double)(n * m * k) / t / 1e9;
                char shape[32], pct[16] = "";
                snprintf(shape, sizeof shape, "%lldx%lld", (long long)m, (long long)k);
                if (peak[p] > 0)
                    snprintf(pct, sizeof pct, "%.1f%%", 100.0 * gf / peak[p]);
                printf("%-12s %-6lld %-11s %10.3f %10.1f %8s\n", shape, (long long)n, names[p], t * 1e3, gf, pct);
            }
            free(x);
            free(o);
            free(xb);
        }
        syk_amx_pack_free(NULL, pk);
        free(w);
    }
}

/*
 * Quantised weights at n = 1, in the checkpoints' layouts: FP8 E4M3 with F32
 * scales per 128 x 128 block (DeepSeek-V3's), NVFP4 (E4M3 scales per 16),
 * MXFP4 (E8M0 per 32). Bytes are the weights' plus their scales', what a
 * decode step streams; "of bw" against the same bandwidth as the float rows.
 */
typedef struct qbench {
    sy_tensor t;
    uint8_t *data, *scale8;
    float *scale32;
    double bytes;
} qbench;

static void qbench_make(qbench *q, int kind, int64_t m, int64_t k)
{
    memset(q, 0, sizeof *q);
    const int64_t shape[2] = {m, k};
    const int fp8 = kind == 0;
    const size_t nb = (size_t)(fp8 ? m * k : m * k / 2);
    q->data = alloc64(nb);
    uint32_t r = 12345;
    for (size_t i = 0; i < nb; i++) {
        r = r * 1664525u + 1013904223u;
        const uint8_t b = (uint8_t)(r >> 24);
        q->data[i] = fp8 && (b & 0x7f) == 0x7f ? (uint8_t)(b ^ 1) : b; /* no FP8 NaN codes */
    }
    sy_tensor_init(&q->t, q->data, fp8 ? SY_DTYPE_FP8_E4M3 : SY_DTYPE_FP4_E2M1, 2, shape);
    q->t.global_scale = 1.0f;
    q->bytes = (double)nb;
    if (fp8) {
        const int64_t ns = ((m + 127) / 128) * ((k + 127) / 128);
        q->scale32 = alloc64(sizeof(float) * (size_t)ns);
        for (int64_t i = 0; i < ns; i++)
            q->scale32[i] = 1e-3f * (float)(1 + i % 5);
        q->t.scale = q->scale32;
        q->t.scale_dtype = SY_DTYPE_F32;
        q->t.scale_block[0] = q->t.scale_block[1] = 128;
        q->bytes += 4.0 * (double)ns;
        return;
    }
    const int64_t blk = kind == 1 ? 16 : 32, ns = m * k / blk;
    q->scale8 = alloc64((size_t)ns);
    for (int64_t i = 0; i < ns; i++)
        q->scale8[i] = (uint8_t)(kind == 1 ? 0x30 + i % 16 : 118 + i % 8); /* normal E4M3 / E8M0 scales */
    q->t.scale = q->scale8;
    q->t.scale_dtype = kind == 1 ? SY_DTYPE_FP8_E4M3 : SY_DTYPE_E8M0;
    q->t.scale_block[0] = 1;
    q->t.scale_block[1] = (int32_t)blk;
    q->bytes += (double)ns;
}

static void bench_qgemv(const syk_kernels *kern, syk_par *par, double bw, const int64_t (*shapes)[2],
                        size_t n_shapes, int quick, double min_t)
{
    static const char *const names[] = {"FP8", "NVFP4", "MXFP4"};
    printf("\nquantised GEMV (n = 1): weight and scale bytes read per second\n");
    printf("%-8s %-14s %10s %10s %10s %8s %10s\n", "dtype", "m x k", "MiB", "us", "GB/s", "of bw", "Gweight/s");
    for (int kind = 0; kind < 3; kind++)
        for (size_t s = 0; s < n_shapes; s++) {
            const int64_t m = shapes[s][0], k = shapes[s][1];
            if (quick && m * k > 4096 * 4096)
                continue;
            if (k % 32 != 0) { /* MXFP4's blocks are 32 wide; NVFP4's and FP8's would run, but all rows or none */
                if (kind == 0)
                    printf("%lldx%lld skipped: the quantised rows need k a multiple of 32\n", (long long)m, (long long)k);
                continue;
            }
            qbench q;
            qbench_make(&q, kind, m, k);
            float *x = alloc64(sizeof(float) * (size_t)k), *o = alloc64(sizeof(float) * (size_t)m);
            for (int64_t i = 0; i < k; i++)
                x[i] = (float)(i % 7) * 0.1f;
            gemm_ctx g = {kern,
                          {.x = x, .ldx = k, .w = q.data, .wdtype = q.t.dtype, .ldw = k, .bias_dtype = SY_DTYPE_F32,
                           .out = o, .ldo = m, .n = 1, .m = m, .k = k, .wq = &q.t},
                          par};
            const double t = best_time(run_gemm, &g, min_t);
            char shape[32];
            snprintf(shape, sizeof shape, "%lldx%lld", (long long)m, (long long)k);
            printf("%-8s %-14s %10.1f %10.1f %10.1f %7.0f%% %10.2f\n", names[kind], shape, q.bytes / 1048576.0,
                   t * 1e6, q.bytes / t / 1e9, bw > 0 ? 100.0 * q.bytes / t / 1e9 / bw : 0.0,
                   (double)(m * k) / t / 1e9);
            free(q.data);
            free(q.scale8);
            free(q.scale32);
            free(x);
            free(o);
        }
}

int main(int argc, char **argv)
{
    int threads = 0, quick = 0;
    const char *isa_s = "auto", *only = "";
    int64_t user_shapes[16][2];
    int n_user = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (strcmp(argv[i], "--isa") == 0 && i + 1 < argc)
            isa_s = argv[++i];
        else if (strcmp(argv[i], "--quick") == 0)
            quick = 1;
        else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
            only = argv[++i];
        else if (strcmp(argv[i], "--gemv") == 0 && i + 1 < argc && n_user < 16) {
            long long m, k;
            if (sscanf(argv[++i], "%lldx%lld", &m, &k) != 2 || m <= 0 || k <= 0) {
                fprintf(stderr, "bench_kernels: --gemv wants MxK, e.g. 14336x4096\n");
                return 2;
            }
            user_shapes[n_user][0] = m;
            user_shapes[n_user++][1] = k;
        }
        else {
            fprintf(stderr, "usage: %s [--threads N] [--isa auto|avx512|avx2|portable] [--quick] [--only bw|gemv|qgemv|gemm|prefill] [--gemv MxK]\n",
                    argv[0]);
            return 2;
        }
    }
    syk_isa isa;
    sy_err err;
    if (syk_isa_from_key(isa_s, &isa, &err)) {
        fprintf(stderr, "bench_kernels: %s\n", err.msg);
        return 1;
    }
    if (threads <= 0)
        threads = syk_online_cpus();
    syk_pool *pool = NULL;
    if (syk_pool_create(threads, 200, &pool, &err)) {
        fprintf(stderr, "bench_kernels: %s\n", err.msg);
        return 1;
    }
    syk_par par = {syk_pool_run, pool, syk_pool_size(pool)};
    const syk_kernels *kern = syk_kernels_for(isa);
    const double min_t = quick ? 0.05 : 0.3;
    printf("bench_kernels: %d threads, %s kernels\n\n", threads, syk_isa_name(isa));

    /* read bandwidth: 1 GiB streamed (512 MiB with --quick) */
    double bw = 0;
    if (!*only || strcmp(only, "gemm") != 0) {
    const int64_t words = (quick ? 64ll : 128ll) << 20;
    uint64_t *buf = alloc64((size_t)words * 8);
    for (int64_t i = 0; i < words; i++)
        buf[i] = (uint64_t)i;
    sum_job *sj = calloc(1, sizeof *sj);
    sj->p = buf;
    sj->simd = syk_isa_usable(SYK_ISA_AVX512, NULL, 0) ? 2 : syk_isa_usable(SYK_ISA_AVX2, NULL, 0) ? 1 : 0;
    bw_ctx bc = {&par, sj, words};
    const double tbw = best_time(run_bw, &bc, min_t);
    bw = (double)words * 8 / tbw / 1e9;
    printf("read bandwidth (parallel streaming sum, %s, %lld MiB): %.1f GB/s\n\n", sj->simd == 2 ? "avx512" : sj->simd ? "avx2" : "C",
           (long long)(words * 8 >> 20), bw);
    free(buf);
    free(sj);
    }

    static const int64_t gemv_shapes[][2] = {{768, 768}, {2304, 768}, {32000, 768}, {4096, 4096}, {14336, 4096}};
    static const sy_dtype dts[] = {SY_DTYPE_BF16, SY_DTYPE_F16, SY_DTYPE_F32};
    if (!*only || strcmp(only, "gemv") == 0) {
    printf("GEMV (n = 1): weights read per second\n");
    printf("%-8s %-14s %10s %10s %10s %8s\n", "dtype", "m x k", "MiB", "us", "GB/s", "of bw");
    const int64_t(*shapes)[2] = n_user ? (const int64_t(*)[2])user_shapes : gemv_shapes;
    const size_t n_shapes = n_user ? (size_t)n_user : sizeof gemv_shapes / sizeof gemv_shapes[0];
    for (size_t d = 0; d < 3; d++)
        for (size_t s = 0; s < n_shapes; s++) {
            const int64_t m = shapes[s][0], k = shapes[s][1];
            if (quick && m * k > 4096 * 4096)
                continue;
            void *w = make_weights(dts[d], m, k);
            float *x = alloc64(sizeof(float) * (size_t)k), *o = alloc64(sizeof(float) * (size_t)m);
            for (int64_t i = 0; i < k; i++)
                x[i] = (float)(i % 7) * 0.1f;
            gemm_ctx g = {kern, {.x = x, .ldx = k, .w = w, .wdtype = dts[d], .ldw = k, .bias_dtype = SY_DTYPE_F32, .out = o, .ldo = m, .n = 1, .m = m, .k = k}, &par};
            const double t = best_time(run_gemm, &g, min_t);
            const double bytes = (double)(m * k) * (dts[d] == SY_DTYPE_F32 ? 4 : 2);
            char shape[32];
            snprintf(shape, sizeof shape, "%lldx%lld", (long long)m, (long long)k);
            printf("%-8s %-14s %10.1f %10.1f %10.1f %7.0f%%\n", sy_dtype_name(dts[d]), shape, bytes / 1048576.0, t * 1e6,
                   bytes / t / 1e9, 100.0 * bytes / t / 1e9 / bw);
            free(w);
            free(x);
            free(o);
        }

    }
    if (!*only || strcmp(only, "qgemv") == 0)
        bench_qgemv(kern, &par, bw, n_user ? (const int64_t(*)[2])user_shapes : gemv_shapes,
                    n_user ? (size_t)n_user : sizeof gemv_shapes / sizeof gemv_shapes[0], quick, min_t);
    if (!*only || strcmp(only, "gemm") == 0) {
    printf("\nbatched GEMM: out[n, m] = x[n, k] . w[m, k]^T\n");
    printf("%-8s %-6s %-12s %10s %10s\n", "dtype", "n", "m x k", "ms", "GFLOP/s");
    static const int64_t ns[] = {32, 128};
    static const int64_t gemm_shapes[][2] = {{4096, 4096}, {768, 768}};
    for (size_t d = 0; d < 3; d++)
        for (size_t s = 0; s < 2; s++)
            for (size_t a = 0; a < 2; a++) {
                const int64_t n = ns[a], m = gemm_shapes[s][0], k = gemm_shapes[s][1];
                void *w = make_weights(dts[d], m, k);
                float *x = alloc64(sizeof(float) * (size_t)(n * k)), *o = alloc64(sizeof(float) * (size_t)(n * m));
                for (int64_t i = 0; i < n * k; i++)
                    x[i] = (float)(i % 13) * 0.01f;
                gemm_ctx g = {kern, {.x = x, .ldx = k, .w = w, .wdtype = dts[d], .ldw = k, .bias_dtype = SY_DTYPE_F32, .out = o, .ldo = m, .n = n, .m = m, .k = k}, &par};
                const double t = best_time(run_gemm, &g, min_t);
                char shape[32];
                snprintf(shape, sizeof shape, "%lldx%lld", (long long)m, (long long)k);
                printf("%-8s %-6lld %-12s %10.3f %10.1f\n", sy_dtype_name(dts[d]), (long long)n, shape, t * 1e3,
                       2.0 * (double)(n * m * k) / t / 1e9);
                free(w);
                free(x);
                free(o);
            }
    /* matmul = bf16: x rounded to BF16 beforehand (the device does it once per op), vdpbf16ps. */
    const syk_bf16dot *bd = syk_bf16dot_for(kern->isa, NULL, 0);
    for (size_t s = 0; bd && s < 2; s++)
        for (size_t a = 0; a < 2; a++) {
            const int64_t n = ns[a], m = gemm_shapes[s][0], k = gemm_shapes[s][1];
            void *w = make_weights(SY_DTYPE_BF16, m, k);
            float *x = alloc64(sizeof(float) * (size_t)(n * k)), *o = alloc64(sizeof(float) * (size_t)(n * m));
            uint16_t *xb = alloc64(sizeof(uint16_t) * (size_t)(n * k));
            for (int64_t i = 0; i < n * k; i++)
                x[i] = (float)(i % 13) * 0.01f;
            syk_rows_to_bf16(bd, xb, k, x, k, n, k, &par);
            gemm_ctx g = {kern, {.x = x, .ldx = k, .w = w, .wdtype = SY_DTYPE_BF16, .ldw = k, .bias_dtype = SY_DTYPE_F32,
                                 .out = o, .ldo = m, .n = n, .m = m, .k = k, .bdot = bd, .xb = xb, .ldxb = k}, &par};
            const double t = best_time(run_gemm, &g, min_t);
            char shape[32];
            snprintf(shape, sizeof shape, "%lldx%lld", (long long)m, (long long)k);
            printf("%-8s %-6lld %-12s %10.3f %10.1f\n", "BF16dot", (long long)n, shape, t * 1e3,
                   2.0 * (double)(n * m * k) / t / 1e9);
            free(w);
            free(x);
            free(o);
            free(xb);
        }
    }
    if (!*only || strcmp(only, "prefill") == 0)
        bench_prefill(kern, &par, threads, min_t);
    syk_pool_destroy(pool);
    return 0;
}
