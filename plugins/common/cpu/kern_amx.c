/*
 * The AMX-BF16 GEMM of the BF16 path (sykern.h): x rows already rounded to
 * BF16, weights repacked once (syk_amx_pack_new) into 16-column panels of
 * k pairs, TDPBF16PS into F32 tiles. Compiled for AMX by pragma and only
 * handed out by syk_amx_for() after CPUID and the OS said yes.
 *
 * Tiles: tmm0-3 accumulate a 2 x 2 block of 16 x 16 outputs (two row tiles
 * by two panels), tmm4-5 hold x (16 rows x 32 k), tmm6-7 the weights
 * (16 k pairs x 16 columns). From 17 rows on, every tile is configured 16
 * rows x 64 bytes; fewer rows of x, k not a multiple of 32 and columns past
 * m are zero padding, so one configuration serves every shape (up to 16
 * rows, gemm_few configures the tiles n rows tall), and the rows or panels
 * computed alongside a tile change nothing in it: an output tile's value is
 * the same TDPBF16PS sequence over its slice of k wherever it sits (rows
 * of a tile are independent dot products). Each SYK_KC slice starts from
 * zero tiles and its sum is added to out in slice order, as in the other
 * kernels: batch- and thread-invariant.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sykern.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11

#pragma GCC push_options
#pragma GCC target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512bf16")
#include <immintrin.h>

#define INL static inline __attribute__((always_inline))
#define P SYK_AMX_PANEL
#define KSTEP 32             /* k per tile step (16 pairs) */
#define RT 4                 /* row tiles of x prepared per slice: 64 rows */
#define SLICE_PAIRS (SYK_KC / 2)

typedef struct tilecfg {
    uint8_t palette, start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tilecfg;

static void tiles_config(void)
{
    tilecfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = 0; t < 8; t++) {
        c.colsb[t] = 64;
        c.rows[t] = 16;
    }
    _tile_loadconfig(&c);
}

/* out rows [0, nr) and columns [j0, j1) of the panel starting at column p0, from a 16 x 16 tile sum. */
INL void put(const float *t, float *out, int64_t ldo, int nr, int64_t p0, int64_t j0, int64_t j1, int accumulate)
{
    for (int i = 0; i < nr; i++) {
        float *o = out + (int64_t)i * ldo;
        const float *s = t + i * P;
        if (accumulate)
            for (int64_t j = j0; j < j1; j++)
                o[j] += s[j - p0];
        else
            for (int64_t j = j0; j < j1; j++)
                o[j] = s[j - p0];
    }
}

/*
 * One slice (steps tile steps of k) of a block of two row tiles (a0, a1,
 * row strides in bytes; tworow 0: a0 only) by two panels (b0, b1; twop 0: b0 only); the tile sums
 * into t[(row tile) * 2 + panel].
 */
INL void block(const uint16_t *a0, int64_t lda0, const uint16_t *a1, int64_t lda1, const uint16_t *b0, const uint16_t *b1,
               int64_t steps, float t[4][P * P], const int tworow, const int twop)
{
    _tile_zero(0);
    if (twop)
        _tile_zero(1);
    if (tworow)
        _tile_zero(2);
    if (tworow && twop)
        _tile_zero(3);
    for (int64_t s = 0; s < steps; s++) {
        _tile_loadd(4, a0 + s * KSTEP, lda0);
        _tile_loadd(6, b0 + s * (P * KSTEP), 64);
        if (twop)
            _tile_loadd(7, b1 + s * (P * KSTEP), 64);
        if (tworow)
            _tile_loadd(5, a1 + s * KSTEP, lda1);
        _tile_dpbf16ps(0, 4, 6);
        if (twop)
            _tile_dpbf16ps(1, 4, 7);
        if (tworow)
            _tile_dpbf16ps(2, 5, 6);
        if (tworow && twop)
            _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, t[0], 64);
    if (twop)
        _tile_stored(1, t[1], 64);
    if (tworow)
        _tile_stored(2, t[2], 64);
    if (tworow && twop)
        _tile_stored(3, t[3], 64);
}

/*
 * Few rows (decode, n <= 16): one row tile configured n rows tall, so x is
 * read in place (no zero-padded copy per slice, and each TDPBF16PS does n
 * rows of work, not 16), and panels outermost, so a worker's column chunk
 * is one contiguous stream in address order. A row's outputs are the same
 * TDPBF16PS sequence over the same k slices as in the 16-row tiles below
 * (the rows of a tile are independent dot products): a row has the same
 * bits alone or in any batch. Two panels per pass measured faster than
 * three, and software prefetch of the weight lines ahead measured slower
 * (the hardware streamer already follows the contiguous panels): see
 * docs/benchmarks.md.
 */
#ifndef SYK_AMX_FEW_ROWS
#define SYK_AMX_FEW_ROWS 16 /* up to this many rows, gemm_few; -D to 0 to time the 16-row tiles alone */
#endif

static void tiles_config_few(int nr)
{
    tilecfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = 0; t < 8; t++) {
        c.colsb[t] = 64;
        c.rows[t] = t == 0 || t == 1 || t == 4 ? (uint8_t)nr : 16; /* tmm0-1 sums, tmm4 x: nr rows */
    }
    _tile_loadconfig(&c);
}

/* One slice of nr rows (tmm4) by one or two panels (b, b + panel_elems): full steps of x in place, then the tail. */
INL void few_block(const uint16_t *a, int64_t lda, const uint16_t *atail, const uint16_t *b, int64_t panel_elems,
                   int64_t full, int tail, float t[4][P * P], const int twop)
{
    _tile_zero(0);
    if (twop)
        _tile_zero(1);
    for (int64_t s = 0; s < full + tail; s++) {
        if (s < full)
            _tile_loadd(4, a + s * KSTEP, lda);
        else
            _tile_loadd(4, atail, KSTEP * 2);
        _tile_loadd(6, b + s * (P * KSTEP), 64);
        if (twop)
            _tile_loadd(7, b + panel_elems + s * (P * KSTEP), 64);
        _tile_dpbf16ps(0, 4, 6);
        if (twop)
            _tile_dpbf16ps(1, 4, 7);
    }
    _tile_stored(0, t[0], 64);
    if (twop)
        _tile_stored(1, t[1], 64);
}

static void gemm_few(const uint16_t *xb, int64_t ldx, const syk_amx_pack *w, float *out, int64_t ldo, int nr,
                     int64_t c0, int64_t c1)
{
    uint16_t atail[16 * KSTEP] __attribute__((aligned(64)));
    float t[4][P * P] __attribute__((aligned(64)));
    const int64_t k = w->k, panel_elems = w->kpad * P;
    const int64_t p_first = c0 / P, p_last = (c1 - 1) / P;
    tiles_config_few(nr);
    for (int64_t p = p_first; p <= p_last; p += 2) {
        const int twop = p + 1 <= p_last;
        for (int64_t kb = 0; kb < k; kb += SYK_KC) {
            const int64_t kc = k - kb < SYK_KC ? k - kb : SYK_KC;
            const int64_t full = kc / KSTEP;
            const int tail = kc % KSTEP != 0;
            if (tail) { /* the last step of k past the row's end: a zero-padded copy, as the weights are padded */
                memset(atail, 0, sizeof atail);
                for (int i = 0; i < nr; i++)
                    memcpy(atail + i * KSTEP, xb + i * ldx + kb + full * KSTEP,
                           sizeof(uint16_t) * (size_t)(kc - full * KSTEP));
            }
            const uint16_t *a = xb + kb, *b = w->p + p * panel_elems + kb * P;
            if (twop)
                few_block(a, ldx * 2, atail, b, panel_elems, full, tail, t, 1);
            else
                few_block(a, ldx * 2, atail, b, panel_elems, full, tail, t, 0);
            for (int q = 0; q < 1 + twop; q++) {
                const int64_t p0 = (p + q) * P;
                const int64_t j0 = p0 > c0 ? p0 : c0, j1 = p0 + P < c1 ? p0 + P : c1;
                put(t[q], out, ldo, nr, p0, j0, j1, kb > 0);
            }
        }
    }
    _tile_release();
}

static void gemm(const uint16_t *xb, int64_t ldx, const syk_amx_pack *w, float *out, int64_t ldo, int64_t n,
                 int64_t c0, int64_t c1)
{
    if (n <= 0 || c1 <= c0)
        return;
    if (n <= SYK_AMX_FEW_ROWS) {
        gemm_few(xb, ldx, w, out, ldo, (int)n, c0, c1);
        return;
    }
    /* x for tiles with fewer than 16 rows or a partial last step of k: zero-padded copies of one slice. */
    uint16_t abuf[RT][16 * SYK_KC] __attribute__((aligned(64)));
    float t[4][P * P] __attribute__((aligned(64)));
    const uint16_t *ap[RT];
    int64_t lda[RT];
    const int64_t k = w->k, kpad = w->kpad, panel_elems = kpad * P;
    const int64_t p_first = c0 / P, p_last = (c1 - 1) / P; /* panels covering [c0, c1) */
    tiles_config();
    for (int64_t r0 = 0; r0 < n; r0 += RT * 16) {
        const int64_t rows = n - r0 < RT * 16 ? n - r0 : RT * 16;
        const int ntiles = (int)((rows + 15) / 16);
        for (int64_t kb = 0; kb < k; kb += SYK_KC) {
            const int64_t kc = k - kb < SYK_KC ? k - kb : SYK_KC;
            const int64_t steps = (kc + KSTEP - 1) / KSTEP;
            for (int rt = 0; rt < ntiles; rt++) {
                const int64_t tr = rows - rt * 16 < 16 ? rows - rt * 16 : 16;
                const uint16_t *src = xb + (r0 + rt * 16) * ldx + kb;
                if (tr == 16 && kc % KSTEP == 0) {
                    ap[rt] = src;
                    lda[rt] = ldx * 2;
                    continue;
                }
                const int64_t kp = steps * KSTEP;
                uint16_t *dst = abuf[rt];
                for (int64_t i = 0; i < 16; i++) {
                    if (i < tr)
                        memcpy(dst + i * kp, src + i * ldx, sizeof(uint16_t) * (size_t)kc);
                    memset(dst + i * kp + (i < tr ? kc : 0), 0, sizeof(uint16_t) * (size_t)(i < tr ? kp - kc : kp));
                }
                ap[rt] = dst;
                lda[rt] = kp * 2;
            }
            const int acc = kb > 0;
            for (int64_t p = p_first; p <= p_last; p += 2) {
                const int twop = p + 1 <= p_last;
                const uint16_t *b0 = w->p + p * panel_elems + kb * P, *b1 = b0 + panel_elems;
                for (int rt = 0; rt < ntiles; rt += 2) {
                    const int tworow = rt + 1 < ntiles;
                    if (tworow && twop)
                        block(ap[rt], lda[rt], ap[rt + 1], lda[rt + 1], b0, b1, steps, t, 1, 1);
                    else if (tworow)
                        block(ap[rt], lda[rt], ap[rt + 1], lda[rt + 1], b0, b1, steps, t, 1, 0);
                    else if (twop)
                        block(ap[rt], lda[rt], ap[rt], lda[rt], b0, b1, steps, t, 0, 1);
                    else
                        block(ap[rt], lda[rt], ap[rt], lda[rt], b0, b1, steps, t, 0, 0);
                    for (int q = 0; q < 1 + tworow; q++) {
                        const int64_t rr = r0 + (rt + q) * 16;
                        const int nr = (int)(n - rr < 16 ? n - rr : 16);
                        for (int pp = 0; pp < 1 + twop; pp++) {
                            const int64_t p0 = (p + pp) * P;
                            const int64_t j0 = p0 > c0 ? p0 : c0, j1 = p0 + P < c1 ? p0 + P : c1;
                            put(t[q * 2 + pp], out + rr * ldo, ldo, nr, p0, j0, j1, acc);
                        }
                    }
                }
            }
        }
    }
    _tile_release();
}

static const syk_amx amx = {gemm};

#pragma GCC pop_options

#define SYK_HAVE_AMX 1
#else
#define SYK_HAVE_AMX 0
#endif

const syk_amx *syk_amx_for(syk_isa isa, char *why, size_t why_len)
{
    char dummy[8];
    if (!why) {
        why = dummy;
        why_len = sizeof dummy;
    }
#if SYK_HAVE_AMX
    if (!syk_bf16dot_for(isa, why, why_len)) /* x is rounded by its to_bf16, and it is the fallback */
        return NULL;
    if (!syk_cpu_has_amx_bf16(why, why_len))
        return NULL;
    const char *refuse = getenv("SY_CPU_AMX_REFUSE");
    if (!syk_amx_request(refuse && strcmp(refuse, "1") == 0, why, why_len))
        return NULL;
    return &amx;
#else
    (void)isa;
    snprintf(why, why_len, "the AMX kernels were not compiled in (needs gcc 11+ on x86-64)");
    return NULL;
#endif
}

syk_amx_pack *syk_amx_pack_new(const sy_host *host, const uint16_t *w, int64_t m, int64_t k, int64_t ldw)
{
    if (m <= 0 || k <= 0)
        return NULL;
    syk_amx_pack *pk = calloc(1, sizeof *pk);
    if (!pk)
        return NULL;
    const int64_t np = (m + SYK_AMX_PANEL - 1) / SYK_AMX_PANEL, kpad = (k + 31) / 32 * 32;
    pk->magic = SYK_AMX_MAGIC;
    pk->src = w;
    pk->m = m;
    pk->k = k;
    pk->ldw = ldw;
    pk->kpad = kpad;
    pk->bytes = (size_t)np * (size_t)kpad * SYK_AMX_PANEL * sizeof(uint16_t);
    pk->p = syk_alloc(host, pk->bytes, 64);
    if (!pk->p) {
        free(pk);
        return NULL;
    }
    /* Panel p, pair row r, column c, element e holds w[16p + c][2r + e]: one weight row read at a time. */
    for (int64_t p = 0; p < np; p++) {
        uint16_t *dst = pk->p + p * kpad * SYK_AMX_PANEL;
        for (int64_t c = 0; c < SYK_AMX_PANEL; c++) {
            const int64_t j = p * SYK_AMX_PANEL + c;
            const uint16_t *row = j < m ? w + j * ldw : NULL;
            for (int64_t kk = 0; kk < kpad; kk++)
                dst[(kk / 2) * (2 * SYK_AMX_PANEL) + c * 2 + (kk & 1)] = row && kk < k ? row[kk] : 0;
        }
    }
    return pk;
}

void syk_amx_pack_drop(const sy_host *host, syk_amx_pack *pk)
{
    if (pk && pk->p) {
        syk_free(host, pk->p);
        pk->p = NULL;
        pk->bytes = 0;
    }
}

void syk_amx_pack_free(const sy_host *host, syk_amx_pack *pk)
{
    if (!pk)
        return;
    syk_amx_pack_drop(host, pk);
    free(pk);
}

const syk_amx_pack *syk_amx_pack_of(const sy_tensor *t)
{
    if (!t || !t->priv || t->dtype != SY_DTYPE_BF16)
        return NULL;
    const syk_amx_pack *pk = t->priv;
    int64_t r, c, ld;
    if (pk->magic != SYK_AMX_MAGIC || !pk->p || pk->src != t->data || syk_view2d(t, &r, &c, &ld) || r != pk->m ||
        c != pk->k || ld != pk->ldw)
        return NULL;
    return pk;
}
