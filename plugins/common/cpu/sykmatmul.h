/*
 * Which numerics the BF16-weight products of a cpu plugin instance run:
 * the `matmul` (f32 | bf16 | auto) and `amx` (auto | off) keys of the device
 * and moe plugins, resolved once per instance (matmul_choice.c).
 *
 * The decision is a pure function of the ISA features (syk_matmul_decide),
 * so tests/unit/test_cpu_matmul_choice covers every branch on any machine;
 * syk_matmul_select is the glue that probes CPUID, asks Linux for the AMX
 * tile state when the decision may use it, and hands out the kernels.
 */
#ifndef SYKMATMUL_H
#define SYKMATMUL_H

#include "sykern.h"

typedef enum syk_matmul_req {
    SYK_MATMUL_F32 = 0,  /* exact products, F32 sums: the reference's numerics */
    SYK_MATMUL_BF16 = 1, /* activations rounded to BF16; warns where the CPU cannot */
    SYK_MATMUL_AUTO = 2  /* bf16 where the CPU has a native BF16 dot path, else f32, silently */
} syk_matmul_req;

/* What the instance and its CPU offer; the inputs of the decision. */
typedef struct syk_matmul_caps {
    syk_isa isa;         /* the kernels the instance runs (its `isa` key, resolved) */
    int avx512bf16;      /* CPUID reports AVX512_BF16 */
    int amx;             /* CPUID reports AMX-TILE and AMX-BF16 with the palette the kernel configures */
    int amx_granted;     /* Linux granted the tile state (asked only where syk_matmul_wants_amx says so) */
    const char *amx_why; /* why not, when amx or amx_granted is 0 (may be NULL) */
} syk_matmul_caps;

typedef struct syk_matmul_choice {
    syk_matmul_req req; /* what the key asked for */
    syk_path path;      /* what runs: F32, AVX512-BF16 or AMX tiles */
    int warn;           /* log at WARN: bf16 asked for and impossible, or an AMX CPU whose tile state was refused */
    char line[400];     /* the one start-up log line: asked, got, why */
} syk_matmul_choice;

#define SYK_MATMUL_CHOICES "f32|bf16|auto"

const char *syk_matmul_req_name(syk_matmul_req r);
/* Parses a `matmul` value; 0 on success. */
int syk_matmul_parse(const char *s, syk_matmul_req *out);
/* 1 if the decision would run AMX tiles should Linux grant them (so the plugin must ask first). */
int syk_matmul_wants_amx(syk_matmul_req req, int amx_off, const syk_matmul_caps *caps);
/* The decision: no I/O, no CPUID, no environment. */
void syk_matmul_decide(syk_matmul_req req, int amx_off, const syk_matmul_caps *caps, syk_matmul_choice *out);

/* An instance's resolved `matmul`: the decision and the kernels of the path it chose. */
typedef struct syk_matmul {
    syk_matmul_choice choice;
    const syk_bf16dot *bdot; /* both BF16 paths (AVX512-BF16 and AMX); NULL for f32 */
    const syk_amx *amx;      /* the AMX path only; NULL otherwise */
} syk_matmul;

/*
 * The `matmul` and `amx` keys of cfg for an instance running isa: validated
 * (SY_ERR_INVALID naming the key otherwise), decided on this CPU, and the
 * kernels of the chosen path. The device and moe cpu plugins share it, so
 * both resolve a key the same way. SY_CPU_AMX_REFUSE=1 simulates a refused
 * tile state.
 */
int syk_matmul_select(const sy_kv *cfg, size_t n_cfg, syk_isa isa, syk_matmul *out, sy_err *err);
/* The decision's one start-up line, at WARN where choice.warn says so, else INFO. */
void syk_matmul_log(const syk_matmul *m, const sy_host *host, const char *plugin);

#endif
