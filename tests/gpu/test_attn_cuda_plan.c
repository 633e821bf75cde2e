/*
 * attn/cuda's tensor-core prefill path as host C (attn_plan.h; no GPU):
 *
 * 1. the m16n8k16 fragment maps the kernel loads and stores with, against
 *    the PTX ISA's table written out here, and each covering its matrix
 *    exactly once over the warp; the P operand taken from S's registers
 *    lands on the same (row, key) in the same lane;
 * 2. syat_plan: every row of a step in exactly one of k_attend's list and
 *    the tiles, tiles inside one sequence and at most a tile's tokens, only
 *    sequences with SYAT_TC_MIN_TOKENS new tokens tiled;
 * 3. k_attend_tc's algorithm emulated lane by lane on the host with those
 *    maps, masks and plan (tiles of KV positions, per-lane score registers,
 *    the online softmax with the 4 lanes of a row reduced, P fed from the
 *    score registers, each mma as its fragments' matrix product) against
 *    a float64 causal / sliding-window GQA attention over a paged cache:
 *    mixed prefill, chunked prefill and decode steps, group 1, 3, 4, 8, 16;
 *    once with F32 products (the algorithm: 1e-6) and once with the
 *    kernel's bf16 hi + lo split products (its accuracy on the host: within
 *    a tenth of the self-check's bound);
 * 4. the key, the fit check, the self-check's comparison (NaN never
 *    passes) and the decision table (forced on + failure = an error).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn_plan.h"

static int failures, checks;

static void expect(int ok, const char *what)
{
    checks++;
    if (!ok) {
        failures++;
        printf("FAIL %s\n", what);
    }
}

/* ------------------------------------------------ 1. fragment maps */

/* The PTX ISA table, "Matrix Fragments for mma.m16n8k16 with floating point type" (.f16/.bf16), as written there. */
static void ptx_a(int lane, int i, int *row, int *col)
{
    const int groupID = lane >> 2, threadID_in_group = lane % 4;
    *row = (i < 2 || (i >= 4 && i < 6)) ? groupID : groupID + 8;
    *col = i < 4 ? threadID_in_group * 2 + (i & 0x1) : threadID_in_group * 2 + 8 + (i & 0x1);
}
static void ptx_b(int lane, int i, int *row, int *col)
{
    const int groupID = lane >> 2, threadID_in_group = lane % 4;
    *row = i < 2 ? threadID_in_group * 2 + (i & 0x1) : threadID_in_group * 2 + 8 + (i & 0x1);
    *col = groupID;
}
static void ptx_c(int lane, int i, int *row, int *col)
{
    const int groupID = lane >> 2, threadID_in_group = lane % 4;
    *row = i < 2 ? groupID : groupID + 8;
    *col = threadID_in_group * 2 + (i & 0x1);
}

static void test_fragments(void)
{
    int a_hits[16][16] = {{0}}, b_hits[16][8] = {{0}}, c_hits[16][8] = {{0}}, bad = 0;
    for (int lane = 0; lane < 32; lane++) {
        for (int i = 0; i < 8; i++) {
            int r, c;
            ptx_a(lane, i, &r, &c);
            bad += syat_frag_a_row(lane, i) != r || syat_frag_a_col(lane, i) != c;
            a_hits[syat_frag_a_row(lane, i)][syat_frag_a_col(lane, i)]++;
            /* The kernel loads element 2r and 2r + 1 as one pair: the second is the next k of the same row. */
            if (i % 2 == 1)
                bad += syat_frag_a_row(lane, i) != syat_frag_a_row(lane, i - 1) ||
                       syat_frag_a_col(lane, i) != syat_frag_a_col(lane, i - 1) + 1;
            /* The P reuse: A element i of keys [16 kk, 16 kk + 16) is S n-tile 2 kk + syat_p_ntile(i)'s element
             * syat_p_elem(i), held by the same lane. */
            const int e = syat_p_elem(i);
            bad += syat_frag_c_row(lane, e) != syat_frag_a_row(lane, i) ||
                   8 * syat_p_ntile(i) + syat_frag_c_col(lane, e) != syat_frag_a_col(lane, i);
        }
        for (int i = 0; i < 4; i++) {
            int r, c;
            ptx_b(lane, i, &r, &c);
            bad += syat_frag_b_row(lane, i) != r || syat_frag_b_col(lane) != c;
            b_hits[r][c]++;
            if (i % 2 == 1)
                bad += syat_frag_b_row(lane, i) != syat_frag_b_row(lane, i - 1) + 1;
            ptx_c(lane, i, &r, &c);
            bad += syat_frag_c_row(lane, i) != r || syat_frag_c_col(lane, i) != c;
            c_hits[r][c]++;
        }
    }
    expect(bad == 0, "fragment maps equal the PTX table (and pairs, and the P reuse)");
    int once = 1;
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++)
            once &= a_hits[r][c] == 1 && (c >= 8 || (b_hits[r][c] == 1 && c_hits[r][c] == 1));
    expect(once, "every element of A, B and C held by exactly one lane");
}

/* ------------------------------------------------ 2. the plan */

static void test_plan(void)
{
    const int32_t tok_start[6] = {0, 1, 17, 30, 130, 131}; /* 1 (decode), 16, 13, 100, 1 tokens */
    int32_t rows[131], tiles[262], nr = 0, nt = 0;
    for (int group = 1; group <= 16; group++) {
        syat_plan(5, tok_start, group, SYAT_TC_MIN_TOKENS, rows, &nr, tiles, &nt);
        int seen[131] = {0}, ok = 1;
        for (int i = 0; i < nr; i++)
            seen[rows[i]]++;
        const int per = syat_tc_tokens_per_tile(group);
        for (int i = 0; i < nt; i++) {
            const int32_t t0 = tiles[2 * i], n = tiles[2 * i + 1];
            int s = 0;
            while (tok_start[s + 1] <= t0)
                s++;
            ok &= n >= 1 && n <= per && n * group <= SYAT_TC_ROWS && t0 + n <= tok_start[s + 1];
            ok &= tok_start[s + 1] - tok_start[s] >= SYAT_TC_MIN_TOKENS;
            for (int32_t t = t0; t < t0 + n; t++)
                seen[t]++;
        }
        for (int t = 0; t < 131; t++)
            ok &= seen[t] == 1;
        /* The 1-, 13- and 1-token sequences stay on k_attend; 16 and 100 are tiled. */
        ok &= nr == 15 && nt == (16 + per - 1) / per + (100 + per - 1) / per;
        char what[96];
        snprintf(what, sizeof what, "plan at group %d: each row once, tiles in one prefill sequence", group);
        expect(ok, what);
    }
    syat_plan(5, tok_start, 4, 0, rows, &nr, tiles, &nt);
    expect(nr == 131 && nt == 0, "plan with min_tokens 0: every row on k_attend");
}

/* ------------------------------------------------ 3. the kernel, emulated */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float frand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

typedef struct emu_problem {
    int S, HK, G, D, bs, MB, window, tile;
    int split; /* products of bf16 hi + lo splits, as the kernel's */
    float scale;
    const int32_t *tok_start, *ctx;
    const int32_t *bt;  /* [S][MB] */
    const float *kc, *vc; /* [HK][block][slot][D] */
    const float *q;     /* [T][HK * G * D] */
} emu_problem;

static int64_t cache_at(const emu_problem *p, int s, int kvh, int64_t pos)
{
    const int32_t blk = p->bt[s * p->MB + pos / p->bs];
    return (((int64_t)kvh * p->S * p->MB + blk) * p->bs + pos % p->bs) * p->D;
}

/* x rounded to bf16 (nearest, ties to even), back in F32: what __float2bfloat16_rn keeps. */
static float bf16_round(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) == 0x7f800000u)
        return x;
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&x, &u, 4);
    return x;
}

/* The kernel's operand split: hi = bf16(x), lo = bf16(x - hi). */
static void split(float x, float *hi, float *lo)
{
    *hi = bf16_round(x);
    *lo = isfinite(x) ? bf16_round(x - *hi) : 0.0f;
}

/*
 * D (16 x 8, per lane) += A B with A, B given per lane as fragment
 * elements: the product the mma computes; with split, as the kernel feeds
 * it: hi x lo + lo x hi + hi x hi of the bf16 halves, summed in F32.
 */
static void emu_mma(float d[32][4], float a[32][8], float b[32][4], int with_split)
{
    float A[16][16], B[16][8];
    for (int lane = 0; lane < 32; lane++) {
        for (int i = 0; i < 8; i++)
            A[syat_frag_a_row(lane, i)][syat_frag_a_col(lane, i)] = a[lane][i];
        for (int i = 0; i < 4; i++)
            B[syat_frag_b_row(lane, i)][syat_frag_b_col(lane)] = b[lane][i];
    }
    for (int lane = 0; lane < 32; lane++)
        for (int i = 0; i < 4; i++) {
            const int r = syat_frag_c_row(lane, i), c = syat_frag_c_col(lane, i);
            float acc = d[lane][i];
            for (int k = 0; k < 16; k++) {
                if (!with_split) {
                    acc += A[r][k] * B[k][c];
                    continue;
                }
                float ah, al, bh, bl;
                split(A[r][k], &ah, &al);
                split(B[k][c], &bh, &bl);
                acc += ah * bl + al * bh + ah * bh;
            }
            d[lane][i] = acc;
        }
}

enum { EMU_MAX_TILE = 64, EMU_MAX_D = 128 };

/* One tile (t0, nt) of sequence s for KV head kvh, as k_attend_tc runs it, into out. */
static void emu_tile(const emu_problem *p, int s, int kvh, int t0, int nt, float *out)
{
    const int G = p->G, D = p->D, TILE = p->tile, NS = TILE / 8, NO = D / 8, used = nt * G;
    const int64_t pos0 = (int64_t)p->ctx[s] + (t0 - p->tok_start[s]), ldq = (int64_t)p->HK * G * D;
    int64_t lo, hi;
    syat_tile_kv_range(pos0, nt, p->window, &lo, &hi);
    for (int warp = 0; warp < SYAT_TC_WARPS; warp++) {
        const int wr = 16 * warp;
        if (wr >= used)
            continue;
        static float o[32][EMU_MAX_D / 8][4], sc[32][EMU_MAX_TILE / 8][4];
        float m[32][2], l[32][2];
        memset(o, 0, sizeof o);
        for (int lane = 0; lane < 32; lane++)
            m[lane][0] = m[lane][1] = -INFINITY, l[lane][0] = l[lane][1] = 0;
        for (int64_t j0 = lo; j0 <= hi; j0 += TILE) {
            const int nv = (int)(hi + 1 - j0 < TILE ? hi + 1 - j0 : TILE);
            memset(sc, 0, sizeof sc);
            for (int kk = 0; kk < D; kk += 16)
                for (int j = 0; j < NS; j++) {
                    float a[32][8], b[32][4], d[32][4];
                    for (int lane = 0; lane < 32; lane++) {
                        for (int i = 0; i < 8; i++) {
                            const int r = wr + syat_frag_a_row(lane, i), dd = kk + syat_frag_a_col(lane, i);
                            a[lane][i] = r < used ? p->q[(t0 + r / G) * ldq + ((int64_t)kvh * G + r % G) * D + dd] *
                                                        p->scale
                                                  : 0.0f;
                        }
                        for (int i = 0; i < 4; i++) {
                            const int jj = 8 * j + syat_frag_b_col(lane), dd = kk + syat_frag_b_row(lane, i);
                            b[lane][i] = jj < nv ? p->kc[cache_at(p, s, kvh, j0 + jj) + dd] : 0.0f;
                        }
                        memcpy(d[lane], sc[lane][j], sizeof d[lane]);
                    }
                    emu_mma(d, a, b, p->split);
                    for (int lane = 0; lane < 32; lane++)
                        memcpy(sc[lane][j], d[lane], sizeof d[lane]);
                }
            float mx[32][2];
            for (int lane = 0; lane < 32; lane++) {
                mx[lane][0] = m[lane][0], mx[lane][1] = m[lane][1];
                for (int j = 0; j < NS; j++)
                    for (int c = 0; c < 4; c++) {
                        const int jj = 8 * j + syat_frag_c_col(lane, c), r = wr + syat_frag_c_row(lane, c);
                        if (jj >= nv || r >= used || !syat_row_sees(pos0, G, r, p->window, j0 + jj))
                            sc[lane][j][c] = -INFINITY;
                        mx[lane][c >> 1] = fmaxf(mx[lane][c >> 1], sc[lane][j][c]);
                    }
            }
            for (int lane = 0; lane < 32; lane++) {
                float alpha[2], psum[2] = {0, 0};
                for (int h = 0; h < 2; h++) { /* the shuffles: the max over the 4 lanes of the row (idempotent) */
                    float v = -INFINITY;
                    for (int x = 0; x < 4; x++)
                        v = fmaxf(v, mx[(lane & ~3) + x][h]);
                    mx[lane][h] = v;
                    alpha[h] = m[lane][h] == -INFINITY ? 0.0f : expf(m[lane][h] - v);
                }
                for (int j = 0; j < NS; j++)
                    for (int c = 0; c < 4; c++) {
                        const float e = sc[lane][j][c] == -INFINITY ? 0.0f : expf(sc[lane][j][c] - mx[lane][c >> 1]);
                        sc[lane][j][c] = e;
                        psum[c >> 1] += e;
                    }
                for (int h = 0; h < 2; h++) {
                    l[lane][h] = l[lane][h] * alpha[h] + psum[h];
                    m[lane][h] = mx[lane][h];
                }
                for (int n = 0; n < NO; n++)
                    for (int c = 0; c < 4; c++)
                        o[lane][n][c] *= alpha[c >> 1];
            }
            for (int kk = 0; kk < TILE / 16; kk++)
                for (int n = 0; n < NO; n++) {
                    float a[32][8], b[32][4], d[32][4];
                    for (int lane = 0; lane < 32; lane++) {
                        for (int i = 0; i < 8; i++)
                            a[lane][i] = sc[lane][2 * kk + syat_p_ntile(i)][syat_p_elem(i)];
                        for (int i = 0; i < 4; i++) {
                            const int jj = 16 * kk + syat_frag_b_row(lane, i), dd = 8 * n + syat_frag_b_col(lane);
                            b[lane][i] = jj < nv ? p->vc[cache_at(p, s, kvh, j0 + jj) + dd] : 0.0f;
                        }
                        memcpy(d[lane], o[lane][n], sizeof d[lane]);
                    }
                    emu_mma(d, a, b, p->split);
                    for (int lane = 0; lane < 32; lane++)
                        memcpy(o[lane][n], d[lane], sizeof d[lane]);
                }
        }
        for (int lane = 0; lane < 32; lane++)
            for (int n = 0; n < NO; n++)
                for (int c = 0; c < 4; c++) {
                    const int r = wr + syat_frag_c_row(lane, c);
                    float lsum = 0;
                    for (int x = 0; x < 4; x++)
                        lsum += l[(lane & ~3) + x][c >> 1];
                    if (r < used)
                        out[(t0 + r / G) * ldq + ((int64_t)kvh * G + r % G) * D + 8 * n + syat_frag_c_col(lane, c)] =
                            o[lane][n][c] / lsum;
                }
    }
}

/* The reference: each row of q over its sequence's visible positions, in double. */
static void ref_row(const emu_problem *p, int s, int kvh, int t, int g, double *o)
{
    const int D = p->D;
    const int64_t pos = (int64_t)p->ctx[s] + (t - p->tok_start[s]), lo = syat_visible_lo(pos, p->window);
    const float *qr = p->q + (int64_t)t * p->HK * p->G * D + ((int64_t)kvh * p->G + g) * D;
    double mx = -INFINITY, sum = 0;
    double *w = malloc(sizeof(double) * (size_t)(pos + 1));
    for (int64_t j = lo; j <= pos; j++) {
        double acc = 0;
        for (int d = 0; d < D; d++)
            acc += (double)qr[d] * p->scale * p->kc[cache_at(p, s, kvh, j) + d];
        w[j] = acc;
        mx = fmax(mx, acc);
    }
    for (int d = 0; d < D; d++)
        o[d] = 0;
    for (int64_t j = lo; j <= pos; j++) {
        const double e = exp(w[j] - mx);
        sum += e;
        for (int d = 0; d < D; d++)
            o[d] += e * p->vc[cache_at(p, s, kvh, j) + d];
    }
    for (int d = 0; d < D; d++)
        o[d] /= sum;
    free(w);
}

static void test_emulated(int G, int D, int window, int tile, int with_split)
{
    enum { S = 3, HK = 2, BS = 8, MB = 16 };
    /* Step: a 40-token prefill from 0, a 23-token chunk after 60 cached positions, a decode token at 30. */
    const int32_t tok_start[S + 1] = {0, 40, 63, 64}, ctx[S] = {0, 60, 30};
    int32_t bt[S * MB];
    for (int i = 0; i < S * MB; i++)
        bt[i] = (i * 29 + 7) % (S * MB); /* scattered: 29 is prime to 48 */
    const int T = tok_start[S];
    const int64_t ldq = (int64_t)HK * G * D, nc = (int64_t)HK * S * MB * BS * D;
    float *q = malloc(sizeof(float) * (size_t)(T * ldq)), *kc = malloc(sizeof(float) * (size_t)nc);
    float *vc = malloc(sizeof(float) * (size_t)nc), *out = malloc(sizeof(float) * (size_t)(T * ldq));
    for (int64_t i = 0; i < T * ldq; i++)
        q[i] = frand(), out[i] = NAN;
    for (int64_t i = 0; i < nc; i++)
        kc[i] = frand(), vc[i] = frand();
    const emu_problem p = {S,         HK,  G,  D,  BS, MB, window, tile, with_split, 1.0f / sqrtf((float)D),
                           tok_start, ctx, bt, kc, vc, q};
    int32_t rows[64], tiles[128], nr, nt;
    syat_plan(S, tok_start, G, SYAT_TC_MIN_TOKENS, rows, &nr, tiles, &nt);
    for (int i = 0; i < nt; i++) {
        int s = 0;
        while (tok_start[s + 1] <= tiles[2 * i])
            s++;
        for (int kvh = 0; kvh < HK; kvh++)
            emu_tile(&p, s, kvh, tiles[2 * i], tiles[2 * i + 1], out);
    }
    /* Tiled rows against the reference; k_attend's rows (the decode token) must be untouched by the tiles. */
    double worst = 0, mx = 0;
    int untouched = 1;
    double o[EMU_MAX_D];
    for (int s = 0; s < S; s++)
        for (int t = tok_start[s]; t < tok_start[s + 1]; t++)
            for (int kvh = 0; kvh < HK; kvh++)
                for (int g = 0; g < G; g++) {
                    const float *got = out + t * ldq + ((int64_t)kvh * G + g) * D;
                    if (tok_start[s + 1] - tok_start[s] < SYAT_TC_MIN_TOKENS) {
                        for (int d = 0; d < D; d++)
                            untouched &= isnan(got[d]);
                        continue;
                    }
                    ref_row(&p, s, kvh, t, g, o);
                    for (int d = 0; d < D; d++) {
                        worst = isfinite(got[d]) ? fmax(worst, fabs(got[d] - o[d])) : INFINITY;
                        mx = fmax(mx, fabs(o[d]));
                    }
                }
    /* F32 products: the order of the sums alone (1e-6); bf16 splits: within the self-check's bound with room. */
    const double rel = worst / mx, bound = with_split ? SYAT_TC_BOUND / 10 : 1e-6;
    char what[160];
    snprintf(what, sizeof what, "emulated k_attend_tc%s, group %d, D %d, window %d, KV tile %d: relative error %.2e "
             "(bound %.0e)", with_split ? " (bf16 splits)" : "", G, D, window, tile, rel, bound);
    const int ok = rel <= bound && untouched && nr == 1;
    expect(ok, what);
    printf("%s %s\n", ok ? "ok  " : "FAIL", what);
    free(q), free(kc), free(vc), free(out);
}

/* ------------------------------------------------ 4. key, fit, check, decision */

static void test_decisions(void)
{
    char why[300];
    int warn;
    expect(syat_tc_mode_parse(NULL) == SYAT_TC_CUDA_CORES && syat_tc_mode_parse("auto") == SYAT_TC_AUTO &&
               syat_tc_mode_parse("tensor-cores") == SYAT_TC_FORCE &&
               syat_tc_mode_parse("cuda-cores") == SYAT_TC_CUDA_CORES && syat_tc_mode_parse("tensor") == -1,
           "prefill_kernel values");
    expect(syat_tc_fits(64, 64, 8, why, sizeof why) && syat_tc_fits(128, 128, 1, why, sizeof why) &&
               syat_tc_fits(128, 128, 16, NULL, 0),
           "fits: head dims 64 and 128, groups 1..16");
    expect(!syat_tc_fits(256, 256, 4, why, sizeof why) && strstr(why, "head_dim 256") != NULL,
           "head_dim 256 stays on k_attend, saying so");
    expect(!syat_tc_fits(192, 128, 4, why, sizeof why) && !syat_tc_fits(96, 96, 4, why, sizeof why) &&
               !syat_tc_fits(128, 128, 17, why, sizeof why),
           "unequal dims, 96, group 17 stay on k_attend");

    const float ref[3] = {1, -2, 0.5f}, near[3] = {1.00001f, -2, 0.5f}, far[3] = {1.1f, -2, 0.5f},
                nan3[3] = {NAN, -2, 0.5f}, zero[3] = {0, 0, 0};
    double w;
    expect(syat_compare(near, ref, 3, SYAT_TC_BOUND, &w) == 0 && w < 1e-5, "compare: within the bound");
    expect(syat_compare(far, ref, 3, SYAT_TC_BOUND, &w) != 0 && w > 0.04, "compare: outside the bound");
    expect(syat_compare(nan3, ref, 3, SYAT_TC_BOUND, &w) != 0 && isinf(w), "compare: NaN never passes");
    expect(syat_compare(nan3, nan3, 3, 1e30, &w) != 0, "compare: NaN in both never passes");
    expect(syat_compare(zero, zero, 3, 0, &w) == 0 && syat_compare(ref, zero, 3, 1e30, &w) != 0,
           "compare: all-zero reference");
    expect(syat_compare(ref, ref, 0, 1, &w) != 0, "compare: nothing compared fails");

    expect(syat_tc_decide(SYAT_TC_AUTO, 1, "", 1, 1e-6, &warn, why, sizeof why) == 1 && !warn, "auto, passed: on");
    expect(syat_tc_decide(SYAT_TC_AUTO, 1, "", 0, 0.5, &warn, why, sizeof why) == 0 && warn,
           "auto, failed: off with one warning");
    expect(syat_tc_decide(SYAT_TC_AUTO, 0, "x", 0, INFINITY, &warn, why, sizeof why) == 0 && !warn,
           "auto, does not fit: off, no warning");
    expect(syat_tc_decide(SYAT_TC_FORCE, 1, "", 1, 1e-6, &warn, why, sizeof why) == 1, "forced, passed: on");
    expect(syat_tc_decide(SYAT_TC_FORCE, 1, "", 0, 0.5, &warn, why, sizeof why) == -1 &&
               strstr(why, "failed its self-check") && strstr(why, "0.5"),
           "forced, failed: an error with the error found");
    expect(syat_tc_decide(SYAT_TC_FORCE, 0, "head_dim 256 ...", 0, INFINITY, &warn, why, sizeof why) == -1 &&
               strstr(why, "head_dim 256"),
           "forced, does not fit: an error saying why");
    expect(syat_tc_decide(SYAT_TC_CUDA_CORES, 1, "", 1, 0, &warn, why, sizeof why) == 0, "cuda-cores: off");
}

int main(void)
{
    test_fragments();
    test_plan();
    /* {group, head dim, window, KV tile}: the kernel's head dims, and KV tiles of 16, 32 and 64 positions (the
     * variants' 32 and 64, and a walk cut finer). */
    const int cases[][4] = {{1, 64, 0, 32}, {3, 64, 0, 16}, {4, 128, 0, 32}, {8, 64, 5, 16},
                            {16, 128, 0, 64}, {4, 64, 24, 32}, {2, 128, 70, 64}};
    for (int with_split = 0; with_split < 2; with_split++)
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            test_emulated(cases[i][0], cases[i][1], cases[i][2], cases[i][3], with_split);
    test_decisions();
    printf("test_attn_cuda_plan: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
