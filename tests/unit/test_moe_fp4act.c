/*
 * The W4A4 modes' activation quantisers (plugins/common/moe/symoe_fp4act.h)
 * and moe cpu with `activations = nvfp4` / `mxfp4`, no GPU needed.
 *
 * Quantiser: its E4M3 and E2M1 roundings against brute-force oracles
 * written here (every code decoded independently, the nearest taken, ties
 * to the even code) on every midpoint, its neighbours and random values;
 * whole rows against the oracle; hand cases: ties on both grids, subnormal
 * E4M3 scales and a scale rounding to zero, zero blocks and rows, amax and
 * elements exactly on grid points (exact round trip), saturation, NaN and
 * Inf rows (all NaN out).
 *
 * moe cpu: NVFP4 experts with activations = nvfp4 against a float64
 * reference that quantises the same rows with the header (checked above),
 * dequantises them and computes the experts in double. The down GEMM's
 * input is silu(gate) * up, which the plugin has in F32 and the reference
 * in double: where a value sits within their difference of a rounding
 * boundary the two would quantise it differently, so the test takes the
 * first seed whose data keep every such decision clear of that margin
 * (and says which). The bound: 4e-6 of each output's magnitude sum; the
 * same layer with activations = f32 must miss it by far (the mode is on).
 *
 * activations = mxfp4 the same way: the MXFP4 quantiser (syx_, E8M0 per 32)
 * against an oracle (the least power of two s with 6 s >= bamax, codes by
 * e2m1_oracle), and moe cpu on MXFP4 experts against float64.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symoe_fp4act.h"
#include "test_cpu_harness.h"

/* ------------------------------------------------------------ oracles */

/* ue4m3 code c (0..0x7e) as a double, from its definition: 2^(e-7) (1 + m/8), subnormal m 2^-9. */
static double e4m3_def(int c)
{
    const int e = (c >> 3) & 15, m = c & 7;
    return e == 0 ? m * ldexp(1, -9) : ldexp(1.0 + m / 8.0, e - 7);
}

/* The code nearest f >= 0 by search; a tie takes the even code; beyond 448 saturates. */
static int e4m3_oracle(double f)
{
    int best = 0;
    for (int c = 1; c <= 0x7e; c++) {
        const double d = fabs(e4m3_def(c) - f), db = fabs(e4m3_def(best) - f);
        if (d < db || (d == db && c % 2 == 0))
            best = c;
    }
    return best;
}

static const double E2M1[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};

/* E2M1 nibble's value from the table. */
static double e2m1_def_q(int nib)
{
    return (nib & 8 ? -1 : 1) * E2M1[nib & 7];
}

static int e2m1_oracle(double r)
{
    const double a = fabs(r);
    int best = 0;
    for (int c = 1; c < 8; c++) {
        const double d = fabs(E2M1[c] - a), db = fabs(E2M1[best] - a);
        if (d < db || (d == db && c % 2 == 0))
            best = c;
    }
    return best && r < 0 ? best | 8 : best;
}

static float next_up(float f)
{
    return nextafterf(f, INFINITY);
}

static float next_down(float f)
{
    return nextafterf(f, -INFINITY);
}

static void check_roundings(th_rng *r)
{
    int bad = 0;
    /* E4M3: every code, every midpoint between neighbours (exact in F32: 5 significant bits) and their neighbours. */
    for (int c = 0; c <= 0x7e; c++) {
        const float v = (float)e4m3_def(c);
        TH_CHECK(syf_e4m3_from(v) == c, "e4m3(%g) = 0x%02x, expected 0x%02x", (double)v, syf_e4m3_from(v), c);
        TH_CHECK(syf_e4m3_value((uint8_t)c) == v, "e4m3 value of 0x%02x", c);
        if (c == 0x7e)
            break;
        const float mid = (float)((e4m3_def(c) + e4m3_def(c + 1)) / 2);
        const float probes[3] = {next_down(mid), mid, next_up(mid)};
        for (int i = 0; i < 3; i++)
            bad += syf_e4m3_from(probes[i]) != e4m3_oracle(probes[i]);
        TH_CHECK(syf_e4m3_from(mid) == (c % 2 ? c + 1 : c), "e4m3 tie %g: 0x%02x, expected the even code", (double)mid,
                 syf_e4m3_from(mid));
    }
    TH_CHECK(syf_e4m3_from(448.0f) == 0x7e && syf_e4m3_from(463.0f) == 0x7e && syf_e4m3_from(1e30f) == 0x7e &&
                 syf_e4m3_from(INFINITY) == 0x7e,
             "E4M3 saturates at 448 (0x7e), never 0x7f");
    TH_CHECK(syf_e4m3_from(0.0f) == 0 && syf_e4m3_from(-1.0f) == 0 && syf_e4m3_from(1e-30f) == 0, "E4M3 of <= 0, tiny");
    TH_CHECK(syf_e4m3_from(0x1p-10f) == 0 && syf_e4m3_from(next_up(0x1p-10f)) == 1, "half the least subnormal ties to 0");
    TH_CHECK(syf_e4m3_from(3 * 0x1p-10f) == 2 && syf_e4m3_from(0x1p-6f - 0x1p-10f) == 8,
             "subnormal ties to even, 7.5 x 2^-9 carries into the first normal code");
    for (int i = 0; i < 200000; i++) {
        const float f = (float)ldexp(th_uniform(r, 1, 2), th_int(r, -14, 9));
        bad += syf_e4m3_from(f) != e4m3_oracle(f);
    }
    TH_CHECK(bad == 0, "E4M3 rounding: %d values differ from the brute-force oracle", bad);
    /* E2M1: the grid, the midpoints (ties), their neighbours, both signs. */
    bad = 0;
    for (int c = 0; c < 8; c++)
        for (int s = 0; s < 2; s++) {
            const float v = (float)(s ? -E2M1[c] : E2M1[c]);
            TH_CHECK(syf_e2m1_from(v) == (c && s ? c | 8 : c), "e2m1(%g)", (double)v);
            TH_CHECK(syf_e2m1_value(syf_e2m1_from(v)) == v, "e2m1 round trip %g", (double)v);
            if (c == 7)
                continue;
            const float mid = (float)(s ? -(E2M1[c] + E2M1[c + 1]) / 2 : (E2M1[c] + E2M1[c + 1]) / 2);
            const float probes[3] = {next_down(mid), mid, next_up(mid)};
            for (int i = 0; i < 3; i++)
                bad += syf_e2m1_from(probes[i]) != e2m1_oracle(probes[i]);
        }
    static const float ties[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
    static const float want[] = {0.0f, 1.0f, 1.0f, 2.0f, 2.0f, 4.0f, 4.0f};
    for (int i = 0; i < 7; i++)
        TH_CHECK(syf_e2m1_value(syf_e2m1_from(ties[i])) == want[i] && syf_e2m1_value(syf_e2m1_from(-ties[i])) == -want[i],
                 "e2m1 tie %g -> %g, expected %g", (double)ties[i], (double)syf_e2m1_value(syf_e2m1_from(ties[i])),
                 (double)want[i]);
    TH_CHECK(syf_e2m1_from(-0.25f) == 0 && syf_e2m1_from(-0.0f) == 0, "a zero magnitude is stored as +0");
    TH_CHECK(syf_e2m1_from(6.5f) == 7 && syf_e2m1_from(-1e9f) == 15, "E2M1 saturates at 6");
    for (int i = 0; i < 200000; i++) {
        const float f = (float)th_uniform(r, -7, 7);
        bad += syf_e2m1_from(f) != e2m1_oracle(f);
    }
    TH_CHECK(bad == 0, "E2M1 rounding: %d values differ from the brute-force oracle", bad);
}

/* Quantises x[0..k) with the header; values into out. Returns g. */
static float quant_mx(const float *x, int k, uint8_t *codes, uint8_t *scales, float *out)
{
    syx_quant_row(x, k, codes, scales);
    for (int i = 0; i < k; i++)
        out[i] = syx_value(codes, scales, i);
    return 1.0f;
}

/* MXFP4 rows against the oracle: scale bytes and every element's code; NaN rows all NaN, zero blocks zero. */
static void check_mx_rows(th_rng *r)
{
    enum { K = 96 };
    float x[K], v[K];
    uint8_t codes[K / 2], sc[K / 32];
    for (int it = 0; it < 3000; it++) {
        const double mag = ldexp(1, th_int(r, -140, 120));
        for (int i = 0; i < K; i++)
            x[i] = (float)(th_uniform(r, -6, 6) * mag);
        if (it % 7 == 0) /* exact grid points: a block whose amax is 6 * 2^e round-trips */
            for (int i = 0; i < 32; i++)
                x[i] = i == 0 ? 48.0f : (float)(E2M1[th_int(r, 0, 7)] * 8 * (i & 1 ? -1 : 1));
        if (it % 11 == 0)
            for (int i = 32; i < 64; i++)
                x[i] = 0.0f;
        quant_mx(x, K, codes, sc, v);
        for (int b = 0; b < K / 32; b++) {
            double bamax = 0;
            for (int j = 32 * b; j < 32 * b + 32; j++)
                bamax = fmax(bamax, fabs(x[j]));
            int e = -127;
            while (e < 127 && 6 * ldexp(1, e) < bamax)
                e++;
            const int want = bamax > 0 ? e + 127 : 127;
            TH_CHECK(sc[b] == want, "mxfp4 block %d (bamax %.9g): scale byte %d, oracle %d", b, bamax, sc[b], want);
            const double s = ldexp(1, sc[b] - 127);
            for (int j = 32 * b; j < 32 * b + 32; j++) {
                const int nib = (codes[j / 2] >> (4 * (j & 1))) & 15, o = e2m1_oracle(x[j] / s);
                TH_CHECK(nib == o, "mxfp4 x = %.9g, scale 2^%d: code %d, oracle %d", x[j], sc[b] - 127, nib, o);
                TH_CHECK((double)v[j] == e2m1_def_q(o) * s, "mxfp4 value %.9g, expected %.9g", v[j], e2m1_def_q(o) * s);
            }
        }
        if (it % 7 == 0)
            for (int i = 0; i < 32; i++)
                TH_CHECK(v[i] == x[i], "mxfp4 grid point %.9g came back as %.9g", x[i], v[i]);
    }
    x[17] = INFINITY;
    quant_mx(x, K, codes, sc, v);
    for (int i = 0; i < K; i++)
        TH_CHECK(isnan(v[i]), "mxfp4 Inf row: element %d is %g, expected NaN", i, v[i]);
}

static float quant(const float *x, int k, uint8_t *codes, uint8_t *scales, float *out)
{
    float g;
    syf_quant_row(x, k, codes, scales, &g);
    for (int i = 0; i < k; i++)
        out[i] = syf_value(codes, scales, g, i);
    return g;
}

static void check_rows(th_rng *r)
{
    enum { K = 64 };
    float x[K], v[K];
    uint8_t codes[K / 2], sc[K / 16];
    /* Zero row. */
    memset(x, 0, sizeof x);
    float g = quant(x, K, codes, sc, v);
    int nz = 0;
    for (int i = 0; i < K; i++)
        nz += v[i] != 0.0f || (i < K / 2 && codes[i]) || (i < K / 16 && sc[i]);
    TH_CHECK(g == 0.0f && nz == 0, "a zero row: g %g, %d nonzero values/codes/scales", (double)g, nz);
    /* NaN and Inf rows: g NaN, every value NaN. */
    for (int t = 0; t < 3; t++) {
        for (int i = 0; i < K; i++)
            x[i] = (float)th_uniform(r, -1, 1);
        x[37] = t == 0 ? NAN : t == 1 ? INFINITY : -INFINITY;
        g = quant(x, K, codes, sc, v);
        int nan = 0;
        for (int i = 0; i < K; i++)
            nan += isnan(v[i]);
        TH_CHECK(isnan(g) && nan == K, "a row with %s: g %g, %d of %d values NaN", t ? "Inf" : "NaN", (double)g, nan, K);
    }
    /* amax 2688 = 6 x 448: g = 1. Block 0 holds the grid times 448 (scale 0x7e), block 1 the grid times 0.5,
     * block 2 times 2^-8 (subnormal scale 2 x 2^-9), block 3 bamax 6 x 2^-11: its scale rounds to 0. */
    static const float grid[16] = {6, 4, 3, 2, 1.5f, 1, 0.5f, 0, -6, -4, -3, -2, -1.5f, -1, -0.5f, 0};
    const float mul[4] = {448.0f, 0.5f, 0x1p-8f, 0x1p-11f};
    for (int b = 0; b < 4; b++)
        for (int j = 0; j < 16; j++)
            x[16 * b + j] = grid[j] * mul[b];
    g = quant(x, K, codes, sc, v);
    TH_CHECK(g == 1.0f, "amax 2688: g %g, expected 1", (double)g);
    TH_CHECK(sc[0] == 0x7e && sc[1] == 0x30 && sc[2] == 0x02 && sc[3] == 0x00,
             "scales 0x%02x 0x%02x 0x%02x 0x%02x, expected 0x7e 0x30 0x02 0x00", sc[0], sc[1], sc[2], sc[3]);
    int off = 0;
    for (int i = 0; i < 48; i++)
        off += v[i] != x[i];
    for (int i = 48; i < 64; i++)
        off += v[i] != 0.0f;
    TH_CHECK(off == 0, "grid points round-trip exactly (a block whose scale is 0 gives zeros): %d differ", off);
    TH_CHECK(codes[0] == (0x7 | 0x6 << 4) && codes[4] == (0xf | 0xe << 4), "codes 0x%02x 0x%02x: element 2i in the low "
             "nibble, bit 3 the sign", codes[0], codes[4]);
    /* Ties inside a block of scale 1 (bamax 6, g 1 from amax 2688 elsewhere in the row). */
    memset(x, 0, sizeof x);
    x[63] = 2688.0f;
    static const float tie_in[10] = {6, 0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5, -0.25f, -5};
    static const float tie_out[10] = {6, 0, 1, 1, 2, 2, 4, 4, 0, -4};
    memcpy(x, tie_in, sizeof tie_in);
    g = quant(x, K, codes, sc, v);
    for (int i = 0; i < 10; i++)
        TH_CHECK(v[i] == tie_out[i], "tie %g -> %g, expected %g", (double)tie_in[i], (double)v[i], (double)tie_out[i]);
    TH_CHECK(sc[0] == 0x38 && (codes[4] & 0xf) == 0, "scale 1 is 0x38; -0.25 stored as +0");
    /* A partial last block (k = 40): 16, 16, 8 elements. */
    for (int i = 0; i < 40; i++)
        x[i] = (float)th_uniform(r, -3, 3);
    g = quant(x, 40, codes, sc, v);
    TH_CHECK(syf_n_scales(40) == 3 && g > 0, "k = 40: three scales");
    /* Random rows of wide dynamic range against the oracles applied to the same F32 steps. */
    int bad = 0;
    for (int t = 0; t < 2000; t++) {
        const int k = th_int(r, 1, K);
        for (int i = 0; i < k; i++)
            x[i] = (float)(th_uniform(r, -1, 1) * ldexp(1, th_int(r, -20, 20)));
        g = quant(x, k, codes, sc, v);
        float amax = 0;
        for (int i = 0; i < k; i++)
            amax = fmaxf(amax, fabsf(x[i]));
        const float go = amax / 2688.0f;
        bad += g != go;
        for (int b = 0; b * 16 < k; b++) {
            float bamax = 0;
            for (int j = b * 16; j < k && j < b * 16 + 16; j++)
                bamax = fmaxf(bamax, fabsf(x[j]));
            const float sf = bamax / 6.0f / go;
            const int so = e4m3_oracle(sf);
            bad += sc[b] != so;
            const float d = (float)e4m3_def(so) * go;
            for (int j = b * 16; j < k && j < b * 16 + 16; j++) {
                const int co = d > 0 ? e2m1_oracle(x[j] / d) : 0;
                bad += ((codes[j / 2] >> (4 * (j & 1))) & 15) != co;
            }
        }
    }
    TH_CHECK(bad == 0, "random rows: %d global scales, scales or codes differ from the oracles", bad);
}

/* ------------------------------------------------------------ moe cpu */

enum { E = 4, TOPK = 2, H = 64, F = 32, NT = 13 };

static th_plugin moe;
static th_host host;

typedef struct nvw {
    uint8_t codes[H * F / 2], scales[H * F / 16];
    sy_tensor t;
    double *v; /* dequantised, q * (s * global) in F32 as the plugins read it */
} nvw;

/* Independent of the plugins' decoders: E2M1 from its table, E4M3 from its definition. */
static double e2m1_def(int nib)
{
    return (nib & 8 ? -1 : 1) * E2M1[nib & 7];
}

/* MXFP4: E8M0 scales per 32, 2^-9 .. 2^-5, global 1; v as make_nvw's. */
static void make_mxw(th_rng *r, nvw *w, int64_t rows, int64_t cols)
{
    for (int64_t i = 0; i < rows * cols / 2; i++)
        w->codes[i] = (uint8_t)th_int(r, 0, 255);
    for (int64_t i = 0; i < rows * cols / 32; i++)
        w->scales[i] = (uint8_t)th_int(r, 127 - 9, 127 - 5);
    w->t = sy_tensor_2d(w->codes, SY_DTYPE_FP4_E2M1, rows, cols);
    w->t.scale = w->scales;
    w->t.scale_dtype = SY_DTYPE_E8M0;
    w->t.scale_block[0] = 1;
    w->t.scale_block[1] = 32;
    w->t.global_scale = 1.0f;
    w->v = malloc(sizeof(double) * (size_t)(rows * cols));
    for (int64_t i = 0; i < rows * cols; i++) {
        const int nib = (w->codes[i / 2] >> (4 * (i & 1))) & 15;
        w->v[i] = e2m1_def(nib) * ldexp(1, w->scales[i / 32] - 127);
    }
}

static void make_nvw(th_rng *r, nvw *w, int64_t rows, int64_t cols, float global)
{
    for (int64_t i = 0; i < rows * cols / 2; i++)
        w->codes[i] = (uint8_t)th_int(r, 0, 255);
    for (int64_t i = 0; i < rows * cols / 16; i++)
        w->scales[i] = (uint8_t)th_int(r, 0x30, 0x3f);
    w->t = sy_tensor_2d(w->codes, SY_DTYPE_FP4_E2M1, rows, cols);
    w->t.scale = w->scales;
    w->t.scale_dtype = SY_DTYPE_FP8_E4M3;
    w->t.scale_block[0] = 1;
    w->t.scale_block[1] = 16;
    w->t.global_scale = global;
    w->v = malloc(sizeof(double) * (size_t)(rows * cols));
    for (int64_t i = 0; i < rows * cols; i++) {
        const int nib = (w->codes[i / 2] >> (4 * (i & 1))) & 15;
        const float s = (float)e4m3_def(w->scales[i / 16]) * global;
        w->v[i] = (double)((float)e2m1_def(nib) * s);
    }
}

/* How close a row's quantisation decisions come to a rounding boundary, in units of their F32 uncertainty (< 1: unsafe). */
static double row_margin_mx(const float *a, int k)
{
    float amax = 0;
    for (int i = 0; i < k; i++)
        amax = fmaxf(amax, fabsf(a[i]));
    const double rel = 1e-5;
    double worst = INFINITY;
    static const double bnd[7] = {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5};
    for (int b = 0; b * 32 < k; b++) {
        float bamax = 0;
        for (int j = b * 32; j < k && j < b * 32 + 32; j++)
            bamax = fmaxf(bamax, fabsf(a[j]));
        if (!(bamax > 0))
            continue;
        const double l = log2(bamax / 6.0); /* the scale's decision: bamax / 6 against powers of two */
        worst = fmin(worst, fabs(ldexp(1, (int)round(l)) * 6 - bamax) / (2 * rel * bamax + 1e-300));
        const double d = ldexp(1, syx_e8m0_from(bamax) - 127);
        for (int j = b * 32; j < k && j < b * 32 + 32; j++) {
            const double rr = fabs(a[j]) / d, unc = rel * amax / d + 2 * rel * rr;
            for (int i = 0; i < 7; i++)
                worst = fmin(worst, fabs(rr - bnd[i]) / unc);
        }
    }
    return worst;
}

static double row_margin(const float *a, int k)
{
    float amax = 0;
    for (int i = 0; i < k; i++)
        amax = fmaxf(amax, fabsf(a[i]));
    const double rel = 1e-5; /* a generous bound on the plugin's F32 act against the double reference's */
    const float g = amax / 2688.0f;
    double worst = INFINITY;
    static const double bnd[7] = {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5};
    for (int b = 0; b * 16 < k; b++) {
        float bamax = 0;
        for (int j = b * 16; j < k && j < b * 16 + 16; j++)
            bamax = fmaxf(bamax, fabsf(a[j]));
        const float sf = bamax / 6.0f / g;
        for (int c = 0; c < 0x7e; c++) { /* the scale's decision: sf against the midpoints of E4M3 */
            const double mid = (e4m3_def(c) + e4m3_def(c + 1)) / 2;
            worst = fmin(worst, fabs(sf - mid) / (2 * rel * sf + 1e-300));
        }
        const double d = e4m3_def(syf_e4m3_from(sf)) * g;
        for (int j = b * 16; j < k && j < b * 16 + 16 && d > 0; j++) {
            const double rr = fabs(a[j]) / d, unc = rel * amax / d + 2 * rel * rr;
            for (int i = 0; i < 7; i++)
                worst = fmin(worst, fabs(rr - bnd[i]) / unc);
        }
    }
    return worst;
}

typedef struct layer {
    nvw gate[E], up[E], down[E];
    float x[NT * H], logits[NT * E];
} layer;

/*
 * The reference of token t: softmax top-2 (normalised), each expert on the
 * quantised input in double, its silu * up rounded to F32 and quantised,
 * down in double. *margin: the smallest row_margin of the act rows.
 */
static void ref_token(const layer *L, int mx, int t, double *out, double *mag, double *margin)
{
    float xq[H], aq[F];
    uint8_t codes[H / 2], sc[H / 16];
    (mx ? quant_mx : quant)(L->x + t * H, H, codes, sc, xq);
    const float *lg = L->logits + t * E;
    double p[E], lmax = -INFINITY, sum = 0;
    for (int e = 0; e < E; e++)
        lmax = fmax(lmax, lg[e]);
    for (int e = 0; e < E; e++)
        sum += p[e] = exp(lg[e] - lmax);
    int ids[TOPK];
    double w[TOPK], ws = 0;
    for (int k = 0; k < TOPK; k++) {
        int best = -1;
        for (int e = 0; e < E; e++)
            if ((k == 0 || e != ids[0]) && (best < 0 || p[e] > p[best]))
                best = e;
        ids[k] = best;
        ws += w[k] = p[best] / sum;
    }
    for (int i = 0; i < H; i++)
        out[i] = mag[i] = 0;
    for (int k = 0; k < TOPK; k++) {
        const int e = ids[k];
        float a[F];
        for (int j = 0; j < F; j++) {
            double gs = 0, us = 0;
            for (int i = 0; i < H; i++) {
                gs += L->gate[e].v[j * H + i] * xq[i];
                us += L->up[e].v[j * H + i] * xq[i];
            }
            a[j] = (float)(gs / (1 + exp(-gs)) * us);
        }
        *margin = fmin(*margin, mx ? row_margin_mx(a, F) : row_margin(a, F));
        uint8_t c2[F / 2], s2[F / 16];
        (mx ? quant_mx : quant)(a, F, c2, s2, aq);
        for (int i = 0; i < H; i++) {
            double y = 0, ym = 0;
            for (int j = 0; j < F; j++) {
                y += L->down[e].v[i * F + j] * aq[j];
                ym += fabs(L->down[e].v[i * F + j] * aq[j]);
            }
            out[i] += w[k] / ws * y;
            mag[i] += w[k] / ws * ym;
        }
    }
}

static void free_layer(layer *L)
{
    for (int e = 0; e < E; e++)
        free(L->gate[e].v), free(L->up[e].v), free(L->down[e].v);
}

/* The plugin's outputs for every token (activations = mode). */
static int run_plugin(const layer *L, const char *mode, float *out)
{
    const char *kv[] = {"activations", mode, "max_tokens", "8", NULL};
    const sy_moe_ops *ops = moe.desc->ops;
    sy_moe_problem p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.n_layers = 1, p.n_experts = E, p.top_k = TOPK, p.hidden = H, p.inter = F, p.scoring = SY_MOE_SOFTMAX;
    p.norm_topk_prob = 1, p.routed_scaling_factor = 1.0f, p.weight_dtype = SY_DTYPE_FP4_E2M1;
    void *inst = NULL;
    sy_err err;
    if (th_create(&moe, &host.api, kv, &inst, &err)) {
        TH_CHECK(0, "create activations=%s: %s", mode, err.msg);
        return -1;
    }
    sy_tensor g[E], u[E], d[E];
    for (int e = 0; e < E; e++)
        g[e] = L->gate[e].t, u[e] = L->up[e].t, d[e] = L->down[e].t;
    int rc = ops->prepare(inst, &p, &err);
    if (!rc)
        rc = ops->prepare_layer(inst, 0, g, u, d, NULL, &err);
    sy_tensor tx = sy_tensor_2d((void *)L->x, SY_DTYPE_F32, NT, H), tl = sy_tensor_2d((void *)L->logits, SY_DTYPE_F32, NT, E);
    sy_tensor to = sy_tensor_2d(out, SY_DTYPE_F32, NT, H);
    if (!rc)
        rc = ops->forward(inst, 0, &tx, &tl, &to, &err);
    TH_CHECK(rc == SY_OK, "moe cpu activations=%s: %s", mode, err.msg);
    moe.desc->destroy(inst);
    return rc;
}

static void check_moe_cpu(int mx)
{
    const char *mode = mx ? "mxfp4" : "nvfp4";
    static layer L;
    double margin = 0;
    uint64_t seed = 0;
    static double ref[NT][H], mag[NT][H];
    for (seed = 1; seed <= 20 && margin < 1; seed++) {
        th_rng r = {0x5eedf4a0u + seed};
        if (seed > 1)
            free_layer(&L);
        for (int e = 0; e < E; e++) {
            if (mx) {
                make_mxw(&r, &L.gate[e], F, H);
                make_mxw(&r, &L.up[e], F, H);
                make_mxw(&r, &L.down[e], H, F);
                continue;
            }
            make_nvw(&r, &L.gate[e], F, H, 0.01f);
            make_nvw(&r, &L.up[e], F, H, 0.01f);
            make_nvw(&r, &L.down[e], H, F, 0.02f);
        }
        for (int i = 0; i < NT * H; i++)
            L.x[i] = (float)th_uniform(&r, -2, 2);
        for (int i = 0; i < NT * E; i++)
            L.logits[i] = (float)th_uniform(&r, -2, 2);
        L.x[5 * H + 3] = NAN; /* token 5: a NaN input makes its outputs NaN */
        margin = INFINITY;
        for (int t = 0; t < NT; t++)
            if (t != 5)
                ref_token(&L, mx, t, ref[t], mag[t], &margin);
    }
    seed--;
    TH_CHECK(margin >= 1, "no seed of 20 keeps the act rows' rounding decisions clear of F32 error (best margin %.3g)",
             margin);
    printf("  seed %llu: act rows' rounding decisions at least %.3g x their F32 uncertainty from a boundary\n",
           (unsigned long long)seed, margin);
    static float got[NT * H], f32[NT * H];
    if (run_plugin(&L, mode, got) || run_plugin(&L, "f32", f32)) {
        free_layer(&L);
        return;
    }
    double worst = 0, f32_worst = 0;
    int nan5 = 0;
    for (int t = 0; t < NT; t++)
        for (int i = 0; i < H; i++) {
            if (t == 5) {
                nan5 += isnan(got[t * H + i]);
                continue;
            }
            const double bound = 4e-6 * mag[t][i] + 1e-30;
            worst = fmax(worst, fabs(got[t * H + i] - ref[t][i]) / bound);
            f32_worst = fmax(f32_worst, fabs(f32[t * H + i] - ref[t][i]) / bound);
        }
    TH_CHECK(worst <= 1, "activations=%s: worst error %.3g x the bound against the float64 reference", mode, worst);
    TH_CHECK(f32_worst > 100, "activations=f32 is only %.3g x the bound from the W4A4 reference: is the mode applied?",
             f32_worst);
    TH_CHECK(nan5 == H, "token 5 (a NaN input): %d of %d outputs NaN, expected all", nan5, H);
    printf("  moe cpu activations=%s: worst error %.3f of the bound (4e-6 x magnitude); activations=f32 is %.3g x "
           "it from the W4A4 reference\n", mode, worst, f32_worst);
    free_layer(&L);
}

/* Each mode refuses the other format's experts: mxfp4 on NVFP4 experts, nvfp4 on MXFP4 ones. */
static void check_mismatch(void)
{
    static layer L;
    th_rng r = {0x5eedf4a1u};
    for (int e = 0; e < E; e++) {
        make_nvw(&r, &L.gate[e], F, H, 0.01f);
        make_mxw(&r, &L.up[e], F, H);
        make_mxw(&r, &L.down[e], H, F);
    }
    for (int m = 0; m < 2; m++) {
        const char *kv[] = {"activations", m ? "mxfp4" : "nvfp4", "max_tokens", "8", NULL};
        sy_moe_problem p;
        memset(&p, 0, sizeof p);
        p.struct_size = sizeof p;
        p.n_layers = 1, p.n_experts = E, p.top_k = TOPK, p.hidden = H, p.inter = F, p.scoring = SY_MOE_SOFTMAX;
        p.norm_topk_prob = 1, p.routed_scaling_factor = 1.0f, p.weight_dtype = SY_DTYPE_FP4_E2M1;
        void *inst = NULL;
        sy_err err;
        if (th_create(&moe, &host.api, kv, &inst, &err)) {
            TH_CHECK(0, "create: %s", err.msg);
            break;
        }
        sy_tensor g[E], u[E], d[E];
        for (int e = 0; e < E; e++)
            g[e] = L.gate[e].t, u[e] = L.up[e].t, d[e] = L.down[e].t;
        const sy_moe_ops *ops = moe.desc->ops;
        int rc = ops->prepare(inst, &p, &err);
        TH_CHECK(rc == SY_OK, "prepare: %s", err.msg);
        rc = ops->prepare_layer(inst, 0, g, u, d, NULL, &err);
        TH_CHECK(rc == SY_ERR_UNSUPPORTED && strstr(err.msg, m ? "activations = mxfp4 takes MXFP4" :
                                                        "activations = nvfp4 takes NVFP4"),
                 "mixed NVFP4 / MXFP4 experts with activations = %s: rc %d (%s), expected a refusal",
                 m ? "mxfp4" : "nvfp4", rc, err.msg);
        moe.desc->destroy(inst);
    }
    free_layer(&L);
}

int main(void)
{
    th_rng r = {0xf4a0f4a0u};
    check_roundings(&r);
    check_rows(&r);
    check_mx_rows(&r);
    th_host_init(&host);
    host.quiet = 1;
    th_load("sy-moe-cpu", &moe);
    check_moe_cpu(0);
    check_moe_cpu(1);
    check_mismatch();
    th_unload(&moe);
    return th_done("test_moe_fp4act");
}
