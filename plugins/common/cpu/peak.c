/*
 * The matmul peak of each path, so benchmarks can say how far from the
 * hardware they are: FLOP per cycle per core of the path's instruction at
 * full issue rate, times the core clock, times cores.
 *   F32 FMA: 2 FMA ports x lanes (16 avx512, 8 avx2) x 2 FLOP
 *   AVX512-BF16: VDPBF16PS zmm, 2 ports x 16 lanes x 2 products x 2 FLOP = 128
 *   AMX-BF16: TDPBF16PS 16 x 16 x 32 MACs (16384 FLOP) per 16 cycles = 1024
 * The port counts are Intel's for Xeons with two 512-bit FMA units (Zen 4/5
 * issue the same zmm rate through double-pumped or native 512-bit units).
 *
 * The clock is measured where the ISA has FMAs: under a hypervisor
 * /proc/cpuinfo reports the TSC rate, and a Zen 3 VM that said 2445 MHz
 * ran FMAs at ~2950 MHz, so kernels printed 112% of a peak taken from it.
 * The F32 peak is the FMA rate itself (fma_gflops), which also holds on a
 * part with one zmm FMA unit or one that clocks down under vector load; the
 * BF16 paths take the clock that rate implies at two ports.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sykern.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#endif

static double cpuinfo_mhz(void)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return 0;
    char line[256];
    double mhz = 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "cpu MHz", 7) == 0) {
            const char *c = strchr(line, ':');
            mhz = c ? strtod(c + 1, NULL) : 0;
            break;
        }
    fclose(f);
    return mhz;
}

/* c0..c11 in FMA_STEP: more independent chains than FMA latency x ports on any core here (4 x 2 on Zen, Intel) */
#define FMA_CHAINS 12
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define FMA_ITERS 100000

/*
 * GFLOP/s of one run of FMA_CHAINS independent chains of FMA_ITERS dependent
 * FMAs on VEC; 0 if the clock failed. The chains are named registers whose
 * address is never taken, and the runner is not instrumented: under ASan an
 * addressable accumulator array lived on the stack and the loop timed its
 * loads and stores, 7 GFLOP/s a core where the core does 95 (CI's sanitizer
 * build failed test_peak on it).
 */
#define FMA_STEP(FMADD)                                                                                        \
    do {                                                                                                       \
        c0 = FMADD(c0, m, c), c1 = FMADD(c1, m, c), c2 = FMADD(c2, m, c), c3 = FMADD(c3, m, c);                \
        c4 = FMADD(c4, m, c), c5 = FMADD(c5, m, c), c6 = FMADD(c6, m, c), c7 = FMADD(c7, m, c);                \
        c8 = FMADD(c8, m, c), c9 = FMADD(c9, m, c), c10 = FMADD(c10, m, c), c11 = FMADD(c11, m, c);            \
    } while (0)
#define FMA_RUN(VEC, SET1, FMADD, ADD, CVTSS, LANES)                                                           \
    {                                                                                                          \
        const VEC m = SET1(1.0000001f), c = SET1(1e-7f);                                                       \
        VEC c0 = SET1(0), c1 = SET1(1), c2 = SET1(2), c3 = SET1(3), c4 = SET1(4), c5 = SET1(5);                \
        VEC c6 = SET1(6), c7 = SET1(7), c8 = SET1(8), c9 = SET1(9), c10 = SET1(10), c11 = SET1(11);            \
        struct timespec t0, t1;                                                                                \
        if (clock_gettime(CLOCK_MONOTONIC, &t0) != 0)                                                          \
            return 0;                                                                                          \
        for (int i = 0; i < FMA_ITERS; i++)                                                                    \
            FMA_STEP(FMADD);                                                                                   \
        if (clock_gettime(CLOCK_MONOTONIC, &t1) != 0)                                                          \
            return 0;                                                                                          \
        const VEC s = ADD(ADD(ADD(ADD(c0, c1), ADD(c2, c3)), ADD(ADD(c4, c5), ADD(c6, c7))),                   \
                          ADD(ADD(c8, c9), ADD(c10, c11)));                                                    \
        *sink = CVTSS(s);                                                                                      \
        const double ns = (double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec);           \
        return ns > 0 ? (double)FMA_ITERS * FMA_CHAINS * LANES * 2 / ns : 0;                                   \
    }

#define FMA_RUNNER __attribute__((no_sanitize("address", "undefined"), noinline))
__attribute__((target("avx2,fma"))) FMA_RUNNER static double fma_run_avx2(volatile float *sink)
    FMA_RUN(__m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps, _mm256_cvtss_f32, 8)
__attribute__((target("avx512f"))) FMA_RUNNER static double fma_run_avx512(volatile float *sink)
    FMA_RUN(__m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps, _mm512_cvtss_f32, 16)

/*
 * One core's F32 FMA rate on isa's vectors in GFLOP/s: the best of 5 runs of
 * ~0.2 ms (a run that was preempted or caught the core ramping up only reads
 * low). A best below half of nominal_gflops (the /proc/cpuinfo clock at two
 * ports) is taken for a preempted core (a measurement can undercount, never
 * overcount), and up to 45 more runs (~10 ms) are made. 0 for the portable
 * kernels. Only called for an ISA the caller runs, so the CPU has its
 * instructions.
 */
static double fma_gflops(syk_isa isa, double nominal_gflops)
{
    if (isa != SYK_ISA_AVX2 && isa != SYK_ISA_AVX512)
        return 0;
    volatile float sink = 0;
    double best = 0;
    for (int run = 0; run < 50 && (run < 5 || best < nominal_gflops * 0.5); run++) {
        const double g = isa == SYK_ISA_AVX512 ? fma_run_avx512(&sink) : fma_run_avx2(&sink);
        best = g > best ? g : best;
    }
    return best;
}
#else
static double fma_gflops(syk_isa isa, double nominal_gflops)
{
    (void)isa;
    (void)nominal_gflops;
    return 0;
}
#endif

/* FLOP per cycle per core of isa's F32 FMAs at two ports, 0 for portable C; what (may be NULL) gets the sum. */
static double f32_per_cycle(syk_isa isa, const char **what)
{
    const char *w = "";
    double f = 0;
    if (isa == SYK_ISA_AVX512) {
        f = 64;
        w = "F32: 2 ports x FMA zmm (16 MACs) = 64";
    } else if (isa == SYK_ISA_AVX2) {
        f = 32;
        w = "F32: 2 ports x FMA ymm (8 MACs) = 32";
    }
    if (what)
        *what = w;
    return f;
}

double syk_matmul_peak(syk_isa isa, syk_path path, int cores, char *how, size_t how_len)
{
    char dummy[8];
    if (!how) {
        how = dummy;
        how_len = sizeof dummy;
    }
    double per_cycle = 0;
    const char *what = "";
    switch (path) {
    case SYK_PATH_AMX: per_cycle = 1024; what = "AMX-BF16: TDPBF16PS 16x16x32 MACs per 16 cycles = 1024"; break;
    case SYK_PATH_AVX512BF16: per_cycle = 128; what = "AVX512-BF16: 2 ports x VDPBF16PS zmm (32 MACs) = 128"; break;
    default: per_cycle = f32_per_cycle(isa, &what); break;
    }
    if (per_cycle == 0) {
        snprintf(how, how_len, "no peak (portable C)");
        return 0;
    }
    const int n = cores > 0 ? cores : 1;
    const double nominal = cpuinfo_mhz();
    const double rate = fma_gflops(isa, f32_per_cycle(isa, NULL) * nominal * 1e-3); /* one core, GFLOP/s */
    char was[64] = "";
    if (nominal > 0)
        snprintf(was, sizeof was, "; /proc/cpuinfo's %.0f MHz would give %.0f", nominal, per_cycle * nominal * 1e-3 * n);
    if (rate > 0 && path != SYK_PATH_AMX && path != SYK_PATH_AVX512BF16) {
        snprintf(how, how_len, "F32: one core's measured FMA rate (%d chains of %s FMAs) %.1f GFLOP/s x %d cores = %.0f GFLOP/s%s",
                 FMA_CHAINS, isa == SYK_ISA_AVX512 ? "zmm" : "ymm", rate, n, rate * n, was);
        return rate * n;
    }
    const double mhz = rate > 0 ? rate / f32_per_cycle(isa, NULL) * 1e3 : nominal;
    if (mhz <= 0) {
        snprintf(how, how_len, "no peak (no FMA rate measured and no cpu MHz in /proc/cpuinfo)");
        return 0;
    }
    const double gflops = per_cycle * mhz * 1e-3 * n;
    snprintf(how, how_len, "%s FLOP/cycle/core x %.0f MHz (%s) x %d cores = %.0f GFLOP/s%s", what, mhz,
             rate > 0 ? "the FMA rate at 2 ports" : "/proc/cpuinfo, nominal", n, gflops, rate > 0 ? was : "");
    return gflops;
}

double syk_matmul_peak_of(syk_isa isa, int bdot, int amx, sy_dtype wdtype, int workers, char *path, size_t path_len)
{
    /* Only BF16 weights take the BF16 paths; F16, F32 and the quantised dtypes are widened to F32 FMAs. */
    const syk_path p = wdtype == SY_DTYPE_BF16 && bdot ? (amx ? SYK_PATH_AMX : SYK_PATH_AVX512BF16) : SYK_PATH_F32;
    if (path && path_len)
        snprintf(path, path_len, "%s%s", p == SYK_PATH_AMX ? "amx-bf16" : p == SYK_PATH_AVX512BF16 ? "avx512-bf16" : "f32-",
                 p == SYK_PATH_F32 ? syk_isa_name(isa) : "");
    return syk_matmul_peak(isa, p, workers, NULL, 0);
}
