/*
 * Which instruction sets this CPU *and* its OS allow. CPUID alone is not
 * enough: a hypervisor or kernel with XSAVE off (or with the AVX-512 state
 * disabled in XCR0) reports the feature bits but faults on the first ymm or
 * zmm instruction, which is how ggml died of SIGILL in VMs.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "sykern.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define SYK_X86 1
#else
#define SYK_X86 0
#endif

const char *syk_isa_name(syk_isa isa)
{
    switch (isa) {
    case SYK_ISA_PORTABLE: return "portable";
    case SYK_ISA_AVX2: return "avx2";
    case SYK_ISA_AVX512: return "avx512";
    default: return "?";
    }
}

#if SYK_X86
typedef struct x86_caps {
    int osxsave, avx, fma, f16c, avx2;
    int avx512f, avx512bw, avx512vl, avx512dq;
    int os_ymm, os_zmm; /* XCR0 enables the state */
} x86_caps;

static unsigned long long read_xcr0(void)
{
    unsigned lo, hi;
    /* xgetbv by opcode so no -mxsave is needed; only run when OSXSAVE is set. */
    __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}

static x86_caps detect(void)
{
    x86_caps c;
    memset(&c, 0, sizeof c);
    unsigned a, b, cx, d;
    if (!__get_cpuid(1, &a, &b, &cx, &d))
        return c;
    c.fma = (cx >> 12) & 1;
    c.osxsave = (cx >> 27) & 1;
    c.avx = (cx >> 28) & 1;
    c.f16c = (cx >> 29) & 1;
    if (__get_cpuid_max(0, NULL) >= 7 && __get_cpuid_count(7, 0, &a, &b, &cx, &d)) {
        c.avx2 = (b >> 5) & 1;
        c.avx512f = (b >> 16) & 1;
        c.avx512dq = (b >> 17) & 1;
        c.avx512bw = (b >> 30) & 1;
        c.avx512vl = (b >> 31) & 1;
    }
    if (c.osxsave) {
        const unsigned long long xcr0 = read_xcr0();
        c.os_ymm = (xcr0 & 0x6) == 0x6;     /* SSE + AVX state */
        c.os_zmm = (xcr0 & 0xe6) == 0xe6;   /* + opmask, ZMM_Hi256, Hi16_ZMM */
    }
    return c;
}
#endif

int syk_isa_usable(syk_isa isa, char *why, size_t why_len)
{
    char dummy[8];
    if (!why) {
        why = dummy;
        why_len = sizeof dummy;
    }
    if (isa == SYK_ISA_PORTABLE)
        return 1;
    if (isa != SYK_ISA_AVX2 && isa != SYK_ISA_AVX512) {
        snprintf(why, why_len, "unknown ISA %d", (int)isa);
        return 0;
    }
#if SYK_X86
    if (!syk_kernels_for(isa)) {
        snprintf(why, why_len, "%s kernels were not compiled in", syk_isa_name(isa));
        return 0;
    }
    const x86_caps c = detect();
    char miss[160] = "";
#define NEED(flag, name)                                                     \
    do {                                                                     \
        if (!(flag))                                                         \
            snprintf(miss + strlen(miss), sizeof miss - strlen(miss), " %s", name); \
    } while (0)
    NEED(c.avx, "avx");
    NEED(c.avx2, "avx2");
    NEED(c.fma, "fma");
    NEED(c.f16c, "f16c");
    NEED(c.osxsave, "osxsave");
    if (isa == SYK_ISA_AVX512) {
        NEED(c.avx512f, "avx512f");
        NEED(c.avx512bw, "avx512bw");
        NEED(c.avx512vl, "avx512vl");
        NEED(c.avx512dq, "avx512dq");
    }
#undef NEED
    if (miss[0]) {
        snprintf(why, why_len, "%s needs CPU features missing here:%s", syk_isa_name(isa), miss);
        return 0;
    }
    if (!c.os_ymm) {
        snprintf(why, why_len, "%s: the CPU has it but the OS has not enabled the AVX register state (XCR0)",
                 syk_isa_name(isa));
        return 0;
    }
    if (isa == SYK_ISA_AVX512 && !c.os_zmm) {
        snprintf(why, why_len, "avx512: the CPU has it but the OS has not enabled the AVX-512 register state (XCR0)");
        return 0;
    }
    return 1;
#else
    snprintf(why, why_len, "%s needs an x86-64 CPU", syk_isa_name(isa));
    return 0;
#endif
}

int syk_cpu_has_avx512bf16(void)
{
#if SYK_X86
    unsigned a, b, cx, d;
    if (__get_cpuid_max(0, NULL) < 7 || !__get_cpuid_count(7, 1, &a, &b, &cx, &d))
        return 0;
    return (a >> 5) & 1; /* CPUID.(7,1):EAX bit 5; the zmm state is checked by syk_isa_usable(AVX512) */
#else
    return 0;
#endif
}

int syk_cpu_has_amx_bf16(char *why, size_t why_len)
{
    char dummy[8];
    if (!why) {
        why = dummy;
        why_len = sizeof dummy;
    }
#if SYK_X86
    unsigned a, b, cx, d;
    if (__get_cpuid_max(0, NULL) < 0x1d || !__get_cpuid_count(7, 0, &a, &b, &cx, &d)) {
        snprintf(why, why_len, "this CPU has no AMX (CPUID has no leaf 0x1d)");
        return 0;
    }
    const int tile = (d >> 24) & 1, bf16 = (d >> 22) & 1; /* CPUID.(7,0):EDX bits 24 AMX-TILE, 22 AMX-BF16 */
    if (!tile || !bf16) {
        snprintf(why, why_len, "this CPU lacks%s%s (CPUID leaf 7 EDX bits 24, 22)", tile ? "" : " AMX-TILE",
                 bf16 ? "" : " AMX-BF16");
        return 0;
    }
    /* Palette 1 must be the 8 tiles of 16 rows x 64 bytes the kernel configures (leaf 0x1d, subleaf 1). */
    if (!__get_cpuid_count(0x1d, 1, &a, &b, &cx, &d) || (b & 0xffff) < 64 || (b >> 16) < 8 || (cx & 0xffff) < 16) {
        snprintf(why, why_len, "AMX palette 1 is not 8 tiles of 16 rows x 64 bytes (CPUID 0x1d.1: EBX 0x%x ECX 0x%x)",
                 b, cx);
        return 0;
    }
    return 1;
#else
    snprintf(why, why_len, "AMX needs an x86-64 CPU");
    return 0;
#endif
}

#if SYK_X86 && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#define SYK_ARCH_GET_XCOMP_PERM 0x1022
#define SYK_ARCH_REQ_XCOMP_PERM 0x1023
#define SYK_XFEATURE_XTILEDATA 18
#endif

int syk_amx_request(int simulate_refusal, char *why, size_t why_len)
{
    char dummy[8];
    if (!why) {
        why = dummy;
        why_len = sizeof dummy;
    }
#if SYK_X86 && defined(__linux__)
    if (simulate_refusal) {
        snprintf(why, why_len, "arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) refused (simulated by "
                 "SY_CPU_AMX_REFUSE)");
        return 0;
    }
    /* Linux keeps the 8 KiB tile state off until the process asks: a tile instruction before this faults. */
    if (syscall(SYS_arch_prctl, SYK_ARCH_REQ_XCOMP_PERM, SYK_XFEATURE_XTILEDATA) != 0) {
        snprintf(why, why_len, "the kernel refused the tile state: arch_prctl(ARCH_REQ_XCOMP_PERM, "
                 "XFEATURE_XTILEDATA) failed (needs Linux 5.16+ with AMX enabled)");
        return 0;
    }
    unsigned long perm = 0;
    if (syscall(SYS_arch_prctl, SYK_ARCH_GET_XCOMP_PERM, &perm) != 0 || !((perm >> SYK_XFEATURE_XTILEDATA) & 1)) {
        snprintf(why, why_len, "arch_prctl(ARCH_GET_XCOMP_PERM) does not list XTILEDATA (permitted 0x%lx)", perm);
        return 0;
    }
    unsigned a, b, cx, d;
    if (!__get_cpuid(1, &a, &b, &cx, &d) || !((cx >> 27) & 1)) {
        snprintf(why, why_len, "OSXSAVE is off: XCR0 cannot be read");
        return 0;
    }
    const unsigned long long xcr0 = read_xcr0();
    if (((xcr0 >> 17) & 3) != 3) {
        snprintf(why, why_len, "XCR0 does not enable XTILECFG and XTILEDATA (bits 17, 18; XCR0 = 0x%llx)", xcr0);
        return 0;
    }
    return 1;
#else
    (void)simulate_refusal;
    snprintf(why, why_len, "AMX tiles are only requested on Linux x86-64");
    return 0;
#endif
}

syk_isa syk_isa_best(void)
{
    if (syk_isa_usable(SYK_ISA_AVX512, NULL, 0))
        return SYK_ISA_AVX512;
    if (syk_isa_usable(SYK_ISA_AVX2, NULL, 0))
        return SYK_ISA_AVX2;
    return SYK_ISA_PORTABLE;
}

int syk_isa_parse(const char *s, syk_isa *out)
{
    if (!s || strcmp(s, "auto") == 0) {
        *out = syk_isa_best();
        return 0;
    }
    for (int i = 0; i < SYK_ISA_COUNT; i++)
        if (strcmp(s, syk_isa_name((syk_isa)i)) == 0) {
            *out = (syk_isa)i;
            return 0;
        }
    return -1;
}

int syk_isa_from_key(const char *value, syk_isa *out, sy_err *err)
{
    if (syk_isa_parse(value, out))
        return sy_err_set(err, SY_ERR_INVALID, "isa = %s: expected one of %s", value, SYK_ISA_CHOICES);
    char why[256];
    if (!syk_isa_usable(*out, why, sizeof why))
        return sy_err_set(err, SY_ERR_UNSUPPORTED, "isa = %s cannot run here: %s", value, why);
    return SY_OK;
}

const syk_kernels *syk_kernels_for(syk_isa isa)
{
    switch (isa) {
    case SYK_ISA_PORTABLE: return syk__kernels_portable();
    case SYK_ISA_AVX2: return syk__kernels_avx2();
    case SYK_ISA_AVX512: return syk__kernels_avx512();
    default: return NULL;
    }
}
