/*
 * The `matmul` decision of the device and moe cpu plugins (sykmatmul.h).
 *
 * `auto` (the default) is bf16 exactly where the CPU has a native BF16 dot
 * product the plugin can run (AVX512_BF16 with the avx512 kernels; AMX-BF16
 * tiles on top where Linux grants them), because that is where bf16 is the
 * fast path (docs/config.md has the measurements); elsewhere a "bf16" would
 * be f32 with a warning, so `auto` is f32 there with one info line.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sykmatmul.h"

const char *syk_matmul_req_name(syk_matmul_req r)
{
    switch (r) {
    case SYK_MATMUL_F32: return "f32";
    case SYK_MATMUL_BF16: return "bf16";
    case SYK_MATMUL_AUTO: return "auto";
    default: return "?";
    }
}

int syk_matmul_parse(const char *s, syk_matmul_req *out)
{
    static const syk_matmul_req all[] = {SYK_MATMUL_F32, SYK_MATMUL_BF16, SYK_MATMUL_AUTO};
    for (size_t i = 0; s && i < sizeof all / sizeof all[0]; i++)
        if (strcmp(s, syk_matmul_req_name(all[i])) == 0) {
            *out = all[i];
            return 0;
        }
    return -1;
}

/* 1 if the instance can run the BF16 dot products: its kernels are avx512 and the CPU has AVX512_BF16. */
static int bf16_native(const syk_matmul_caps *c)
{
    return c->isa == SYK_ISA_AVX512 && c->avx512bf16;
}

/* Why bf16_native(c) is 0. */
static void why_not_bf16(const syk_matmul_caps *c, char *why, size_t cap)
{
    if (c->isa != SYK_ISA_AVX512)
        snprintf(why, cap, "no native BF16 dot product with the %s kernels (needs AVX512_BF16 and isa avx512)",
                 syk_isa_name(c->isa));
    else
        snprintf(why, cap, "this CPU lacks AVX512_BF16 (CPUID leaf 7.1 EAX bit 5)");
}

int syk_matmul_wants_amx(syk_matmul_req req, int amx_off, const syk_matmul_caps *caps)
{
    return req != SYK_MATMUL_F32 && !amx_off && caps->amx && bf16_native(caps);
}

void syk_matmul_decide(syk_matmul_req req, int amx_off, const syk_matmul_caps *caps, syk_matmul_choice *out)
{
    memset(out, 0, sizeof *out);
    out->req = req;
    out->path = SYK_PATH_F32;
    const char *asked = syk_matmul_req_name(req);
    if (req == SYK_MATMUL_F32) {
        snprintf(out->line, sizeof out->line, "matmul = f32: F32 products (exact, the reference's numerics)");
        return;
    }
    if (!bf16_native(caps)) {
        char why[240];
        why_not_bf16(caps, why, sizeof why);
        /* Named bf16 and cannot have it: say so loudly. auto: f32 is the expected answer here, not a fault. */
        out->warn = req == SYK_MATMUL_BF16;
        if (req == SYK_MATMUL_BF16)
            snprintf(out->line, sizeof out->line, "matmul = bf16 falls back to f32: %s", why);
        else
            snprintf(out->line, sizeof out->line, "matmul = auto: f32, %s", why);
        return;
    }
    if (!amx_off && caps->amx && caps->amx_granted) {
        out->path = SYK_PATH_AMX;
        snprintf(out->line, sizeof out->line,
                 "matmul = %s: bf16 on AMX-BF16 tiles (the CPU has AMX-BF16 and Linux granted the tile state)",
                 asked);
        return;
    }
    out->path = SYK_PATH_AVX512BF16;
    /* A CPU with AMX whose tile state was refused runs at a fraction of its peak: worth a warning. */
    out->warn = !amx_off && caps->amx;
    snprintf(out->line, sizeof out->line, "matmul = %s: bf16 on the AVX512-BF16 kernel, not AMX: %s", asked,
             amx_off ? "amx = off" : caps->amx_why && *caps->amx_why ? caps->amx_why : "no AMX-BF16 here");
}

int syk_matmul_select(const sy_kv *cfg, size_t n_cfg, syk_isa isa, syk_matmul *out, sy_err *err)
{
    memset(out, 0, sizeof *out);
    const char *matmul = sy_kv_get(cfg, n_cfg, "matmul"), *amx = sy_kv_get(cfg, n_cfg, "amx");
    syk_matmul_req req = SYK_MATMUL_AUTO;
    if (matmul && syk_matmul_parse(matmul, &req))
        return sy_err_set(err, SY_ERR_INVALID, "matmul = %s: expected one of f32, bf16, auto", matmul);
    if (amx && strcmp(amx, "auto") != 0 && strcmp(amx, "off") != 0)
        return sy_err_set(err, SY_ERR_INVALID, "amx = %s: expected auto or off", amx);
    const int amx_off = amx && strcmp(amx, "off") == 0;
    char amx_why[240] = "";
    syk_matmul_caps caps = {isa, 0, 0, 0, amx_why};
    if (req != SYK_MATMUL_F32) {
        caps.avx512bf16 = isa == SYK_ISA_AVX512 && syk_bf16dot_for(isa, NULL, 0) != NULL;
        caps.amx = syk_cpu_has_amx_bf16(amx_why, sizeof amx_why);
    }
    const syk_amx *tiles = NULL;
    if (syk_matmul_wants_amx(req, amx_off, &caps)) {
        /* Asks Linux for the tile state (or reads SY_CPU_AMX_REFUSE): the decision's one side effect. */
        tiles = syk_amx_for(isa, amx_why, sizeof amx_why);
        caps.amx_granted = tiles != NULL;
    }
    syk_matmul_decide(req, amx_off, &caps, &out->choice);
    if (out->choice.path != SYK_PATH_F32)
        out->bdot = syk_bf16dot_for(isa, NULL, 0);
    if (out->choice.path == SYK_PATH_AMX)
        out->amx = tiles;
    return SY_OK;
}

void syk_matmul_log(const syk_matmul *m, const sy_host *host, const char *plugin)
{
    sy_logf(host, m->choice.warn ? SY_LOG_WARN : SY_LOG_INFO, plugin, "%s", m->choice.line);
}
