/*
 * plugin-check's shared pieces: the result table, the seeded generator, the
 * error measure and 16-bit float conversions for the reference.
 */
#include "config.h"

#include "plugincheck/check.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

void sy_pc_row(sy_pc *pc, const char *op, const char *cas, int verdict, double err, double tol, const char *note)
{
    static const char *const names[] = {"OK", "FAIL", "SKIP"};
    char e[32] = "-", t[32] = "-";
    if (err >= 0 || isnan(err))
        snprintf(e, sizeof e, "%.2e", err);
    if (tol >= 0)
        snprintf(t, sizeof t, "%.0e", tol);
    printf("%-8s %-14s %-48s %-4s %9s %6s%s%s\n", sy_kind_name(pc->desc->kind), op, cas, names[verdict], e, t,
           note && *note ? "  " : "", note ? note : "");
    fflush(stdout);
    if (verdict == SY_PC_OK)
        pc->n_ok++;
    else if (verdict == SY_PC_FAIL)
        pc->n_fail++;
    else
        pc->n_skip++;
}

void sy_pc_time_row(sy_pc *pc, const char *op, const char *cas, double us, long runs, double work, const char *unit)
{
    sy_pc_time_row_note(pc, op, cas, us, runs, work, unit, NULL);
}

void sy_pc_time_row_note(sy_pc *pc, const char *op, const char *cas, double us, long runs, double work, const char *unit,
                         const char *note)
{
    char rate[48] = "";
    if (work > 0 && us > 0)
        snprintf(rate, sizeof rate, "%10.2f %s", work / us / 1e3, unit);
    printf("%-8s %-14s %-48s %12.2f us/run %7ld runs %s%s%s\n", sy_kind_name(pc->desc->kind), op, cas, us, runs, rate,
           note && *note ? " " : "", note ? note : "");
    fflush(stdout);
    pc->n_ok++;
}

uint32_t sy_pc_rand_u32(sy_pc *pc)
{
    /* xorshift64*: reproducible from --seed on every platform. */
    uint64_t x = pc->rng ? pc->rng : 0x9e3779b97f4a7c15ull;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    pc->rng = x;
    return (uint32_t)((x * 0x2545f4914f6cdd1dull) >> 32);
}

float sy_pc_rand(sy_pc *pc)
{
    return (float)((double)sy_pc_rand_u32(pc) / 2147483648.0 - 1.0);
}

void sy_pc_fill(sy_pc *pc, float *x, size_t n, float scale)
{
    for (size_t i = 0; i < n; i++)
        x[i] = scale * sy_pc_rand(pc);
}

double sy_pc_err(const float *got, const double *ref, size_t n)
{
    double mx = 0, big = 1;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - ref[i]);
        if (isnan(d))
            return NAN;
        mx = d > mx ? d : mx;
        big = fabs(ref[i]) > big ? fabs(ref[i]) : big;
    }
    return mx / big;
}

double sy_pc_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

uint16_t sy_pc_f32_to_half(float f, sy_dtype dt)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if (dt == SY_DTYPE_BF16) /* round to nearest even; inputs here are finite */
        return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    /* IEEE half, round to nearest even; plugin-check's inputs are small
     * normal numbers or zero, so no NaN/overflow handling is needed. */
    uint32_t sign = (u >> 16) & 0x8000u;
    int32_t exp = (int32_t)((u >> 23) & 0xff) - 127 + 15;
    uint32_t mant = u & 0x7fffffu;
    if (exp <= 0) {
        if (exp < -10)
            return (uint16_t)sign;
        mant |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - exp);
        uint32_t half = mant >> shift, rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1u)))
            half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = sign | ((uint32_t)exp << 10) | (mant >> 13);
    uint32_t rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (half & 1u)))
        half++;
    return (uint16_t)half;
}

float sy_pc_half_to_f32(uint16_t h, sy_dtype dt)
{
    uint32_t u;
    if (dt == SY_DTYPE_BF16) {
        u = (uint32_t)h << 16;
    } else {
        uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu;
        if (exp == 0) {
            float v = ldexpf((float)mant, -24);
            return sign ? -v : v;
        }
        u = sign | ((exp - 15 + 127) << 23) | (mant << 13);
    }
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

void *sy_pc_create(sy_pc *pc, const char *op, const char *cas)
{
    sy_err err;
    memset(&err, 0, sizeof err);
    void *inst = NULL;
    int rc = pc->desc->create(pc->host, pc->cfg, pc->n_cfg, &inst, &err);
    if (rc != SY_OK || !inst) {
        char note[600];
        err.msg[sizeof err.msg - 1] = '\0';
        snprintf(note, sizeof note, "create: %s: %s", sy_status_str(rc), err.msg[0] ? err.msg : "(no message)");
        sy_pc_row(pc, op, cas, SY_PC_FAIL, -1, -1, note);
        if (rc == SY_OK && !inst)
            return NULL;
        return NULL;
    }
    if (pc->desc->kind == SY_KIND_DEVICE && pc->on_device)
        pc->on_device(pc->user, pc->desc, inst);
    return inst;
}

void sy_pc_destroy(sy_pc *pc, void *inst)
{
    if (!inst)
        return;
    if (pc->desc->kind == SY_KIND_DEVICE && pc->on_device)
        pc->on_device(pc->user, pc->desc, NULL);
    pc->desc->destroy(inst);
}
