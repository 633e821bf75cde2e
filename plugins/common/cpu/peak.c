/*
 * The nominal matmul peak of each path, so benchmarks can say how far from
 * the hardware they are: FLOP per cycle per core of the path's instruction
 * at full issue rate, times the clock /proc/cpuinfo reports, times cores.
 *   F32 FMA: 2 FMA ports x lanes (16 avx512, 8 avx2) x 2 FLOP
 *   AVX512-BF16: VDPBF16PS zmm, 2 ports x 16 lanes x 2 products x 2 FLOP = 128
 *   AMX-BF16: TDPBF16PS 16 x 16 x 32 MACs (16384 FLOP) per 16 cycles = 1024
 * The port counts are Intel's for Xeons with two 512-bit FMA units (Zen 4/5
 * issue the same zmm rate through double-pumped or native 512-bit units);
 * the clock is nominal (a hypervisor reports the TSC rate; turbo runs faster).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sykern.h"

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
    default:
        if (isa == SYK_ISA_AVX512) {
            per_cycle = 64;
            what = "F32: 2 ports x FMA zmm (16 MACs) = 64";
        } else if (isa == SYK_ISA_AVX2) {
            per_cycle = 32;
            what = "F32: 2 ports x FMA ymm (8 MACs) = 32";
        }
        break;
    }
    const double mhz = cpuinfo_mhz();
    if (per_cycle == 0 || mhz <= 0) {
        snprintf(how, how_len, "no nominal peak (%s)", per_cycle == 0 ? "portable C" : "no cpu MHz in /proc/cpuinfo");
        return 0;
    }
    const double gflops = per_cycle * mhz * 1e-3 * (cores > 0 ? cores : 1);
    snprintf(how, how_len, "%s FLOP/cycle/core x %.0f MHz (/proc/cpuinfo, nominal) x %d cores = %.0f GFLOP/s", what,
             mhz, cores > 0 ? cores : 1, gflops);
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
