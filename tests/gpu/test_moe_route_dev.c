/*
 * Expert routing (plugins/common/moe/symoe_route.h: moe/cpu's sy__moe_route
 * and moe/cuda's k_route kernel both run it) against an oracle that states
 * the rule the other way round (sort, then take the first K): the same
 * expert ids in the same order and the same weights, bit for bit. Configs:
 * softmax and sigmoid scoring, with and without the selection bias,
 * norm_topk_prob on and off, routed_scaling_factor, no groups and grouped
 * top-k (DeepSeek-V2 softmax max, DeepSeek-V3 / GLM sigmoid best-two),
 * single-expert groups; rows: random logits, logits on a coarse grid (ties
 * between experts and between groups everywhere), all-equal rows, saturated
 * sigmoids, NaN and infinities.
 *
 * Then the device's grouping of the assignments by expert (moe_route_dev.h's
 * three steps, run serially here as k_group runs them over threads)
 * against the host path's grouping (moe_cuda.c's route_on_host, restated
 * below): the same rows per token, slots, tiles and counts, for all
 * experts and for expert ranges, at every tile height.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moe_cpu.h"
#include "moe_route_dev.h"

static uint64_t rng = 0x243f6a8885a308d3ull;

static double urand(void) /* [0, 1) */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) * 0x1p-53;
}

/* Row r of a config's rows: its kind is r mod 6. */
static void fill_row(float *l, int E, int r)
{
    for (int e = 0; e < E; e++)
        l[e] = (float)(urand() * 8.0 - 4.0);
    switch (r % 6) {
    case 1: /* coarse grid: many equal scores, equal group maxima and pair sums */
        for (int e = 0; e < E; e++)
            l[e] = floorf(l[e]);
        break;
    case 2: /* one value everywhere */
        for (int e = 0; e < E; e++)
            l[e] = 0.5f;
        break;
    case 3: /* sigmoids saturated to 1.0 in double: ties among distinct logits */
        for (int e = 0; e < E; e++)
            l[e] = 30.0f + 20.0f * (float)urand();
        break;
    case 4: /* a NaN and infinities */
        l[(r / 6) % E] = NAN;
        l[(r / 6 + 3) % E] = INFINITY;
        l[(r / 6 + 5) % E] = -INFINITY;
        break;
    default:
        break;
    }
}

typedef struct cfg {
    int E, K, scoring, n_group, topk_group, norm, bias;
    float scale;
} cfg;

/*
 * The routing rule restated the other way round, as the oracle: every
 * kept expert sorted by (select descending, id ascending) and the first K
 * taken, where sy__moe_route picks K times the first largest. Groups are
 * kept the same way. Rows with NaN or infinities (scores NaN) are checked
 * for K distinct experts in range only.
 */
static int before(const double *v, int a, int b) /* a sorts before b */
{
    return v[a] > v[b] || (v[a] == v[b] && a < b);
}

static void sort_desc(int *idx, int n, const double *v)
{
    for (int i = 1; i < n; i++) /* insertion: stable and small */
        for (int j = i; j > 0 && before(v, idx[j], idx[j - 1]); j--) {
            const int t = idx[j];
            idx[j] = idx[j - 1];
            idx[j - 1] = t;
        }
}

static void ref_route(const cfg *c, const float *l, const double *bias, int32_t *ids, float *wts)
{
    const int E = c->E, K = c->K;
    double score[1024], sel[1024], gs[1024];
    int idx[1024], gidx[1024], n = 0;
    if (c->scoring == SY_MOE_SOFTMAX) {
        double mx = -INFINITY, sum = 0.0;
        for (int e = 0; e < E; e++)
            mx = (double)l[e] > mx ? (double)l[e] : mx;
        for (int e = 0; e < E; e++)
            sum += score[e] = exp((double)l[e] - mx);
        for (int e = 0; e < E; e++)
            score[e] /= sum;
    } else {
        for (int e = 0; e < E; e++)
            score[e] = 1.0 / (1.0 + exp(-(double)l[e]));
    }
    for (int e = 0; e < E; e++)
        sel[e] = bias ? score[e] + bias[e] : score[e];
    if (c->n_group > 1) {
        const int G = c->n_group, per = E / G;
        for (int g = 0; g < G; g++) {
            for (int i = 0; i < per; i++)
                idx[i] = g * per + i;
            sort_desc(idx, per, sel);
            gs[g] = c->scoring == SY_MOE_SIGMOID && per >= 2 ? sel[idx[0]] + sel[idx[1]] : sel[idx[0]];
            gidx[g] = g;
        }
        sort_desc(gidx, G, gs);
        for (int r = 0; r < c->topk_group; r++)
            for (int i = 0; i < per; i++)
                idx[n++] = gidx[r] * per + i;
    } else {
        for (int e = 0; e < E; e++)
            idx[n++] = e;
    }
    sort_desc(idx, n, sel);
    double wsum = 0.0;
    for (int k = 0; k < K; k++)
        wsum += score[ids[k] = idx[k]];
    for (int k = 0; k < K; k++) {
        double v = score[ids[k]];
        if (c->norm)
            v = v / (wsum + (c->scoring == SY_MOE_SIGMOID ? 1e-20 : 0.0));
        wts[k] = (float)(v * (double)c->scale);
    }
}

static int run(const cfg *c, int rows, int *checked)
{
    sy_moe_problem p = {.struct_size = sizeof p, .n_layers = 1, .n_experts = c->E, .top_k = c->K, .hidden = 8,
                        .inter = 8, .scoring = c->scoring, .norm_topk_prob = c->norm,
                        .routed_scaling_factor = c->scale, .n_group = c->n_group, .topk_group = c->topk_group,
                        .weight_dtype = SY_DTYPE_F32};
    sy_err err = {{0}};
    if (sy__moe_check_problem(&p, &err)) {
        fprintf(stderr, "FAIL config E %d K %d groups %d/%d refused: %s\n", c->E, c->K, c->n_group, c->topk_group,
                err.msg);
        return 1;
    }
    float *l = malloc(sizeof(float) * (size_t)c->E), wa[64], wb[64];
    double *bias = malloc(sizeof(double) * (size_t)c->E);
    int32_t ia[64], ib[64];
    int bad = 0;
    for (int r = 0; r < rows; r++) {
        fill_row(l, c->E, r);
        for (int e = 0; e < c->E; e++) /* sometimes equal biases, so ties survive the bias */
            bias[e] = r % 2 ? 0.25 : (double)(float)(urand() * 0.2 - 0.1);
        memset(ia, 0xff, sizeof ia);
        memset(ib, 0xff, sizeof ib);
        sy__moe_route(&p, l, c->bias ? bias : NULL, ia, wa);
        (*checked)++;
        int wrong = 0;
        if (r % 6 == 4) { /* NaN scores: K distinct experts in range, nothing more is defined */
            for (int k = 0; k < c->K; k++) {
                wrong |= ia[k] < 0 || ia[k] >= c->E;
                for (int j = 0; j < k; j++)
                    wrong |= ia[j] == ia[k];
            }
        } else {
            ref_route(c, l, c->bias ? bias : NULL, ib, wb);
            wrong = memcmp(ia, ib, sizeof(int32_t) * (size_t)c->K) || memcmp(wa, wb, sizeof(float) * (size_t)c->K);
        }
        if (wrong && bad++ < 3) {
            fprintf(stderr, "FAIL E %d K %d %s groups %d/%d norm %d bias %d, row %d (kind %d):", c->E, c->K,
                    c->scoring ? "sigmoid" : "softmax", c->n_group, c->topk_group, c->norm, c->bias, r, r % 6);
            for (int k = 0; k < c->K; k++)
                fprintf(stderr, " routed %d %.9g / oracle %d %.9g;", ia[k], (double)wa[k], ib[k], (double)wb[k]);
            fprintf(stderr, "\n");
        }
    }
    free(l);
    free(bias);
    return bad;
}

/* The host path's grouping (moe_cuda.c, route_on_host): counts, offsets, rows in token order, tiles. */
static int64_t ref_group(const int32_t *ids, int64_t A, int32_t K, int32_t e0, int32_t EL, int32_t vr,
                         int32_t *assign_tok, int32_t *slot_of, int32_t *tiles, int32_t *rows)
{
    int32_t *counts = calloc((size_t)EL + 1, sizeof(int32_t)), *offsets = calloc((size_t)EL + 1, sizeof(int32_t));
    for (int64_t a = 0; a < A; a++)
        if (ids[a] >= e0 && ids[a] < e0 + EL)
            counts[ids[a] - e0]++;
    for (int32_t e = 0; e < EL; e++)
        offsets[e + 1] = offsets[e] + counts[e];
    memset(counts, 0, sizeof(int32_t) * ((size_t)EL + 1));
    for (int64_t a = 0; a < A; a++) {
        const int32_t e = ids[a] - e0;
        if (e < 0 || e >= EL) {
            slot_of[a] = -1;
            continue;
        }
        const int32_t row = offsets[e] + counts[e]++;
        assign_tok[row] = (int32_t)(a / K);
        slot_of[a] = row;
    }
    int64_t nt = 0;
    for (int32_t e = 0; e < EL; e++)
        for (int32_t r = 0; r < counts[e]; r += vr, nt++) {
            tiles[3 * nt] = e;
            tiles[3 * nt + 1] = offsets[e] + r;
            tiles[3 * nt + 2] = counts[e] - r < vr ? counts[e] - r : vr;
        }
    *rows = offsets[EL];
    free(counts), free(offsets);
    return nt;
}

/* The device's grouping, k_group's steps run serially. */
static int64_t dev_group(const int32_t *ids, int64_t A, int32_t K, int32_t e0, int32_t EL, int32_t vr,
                         int64_t max_tiles, int32_t *assign_tok, int32_t *slot_of, int32_t *tiles, int32_t *rows)
{
    int32_t *count = malloc(sizeof(int32_t) * (size_t)EL), *off = malloc(sizeof(int32_t) * ((size_t)EL + 1));
    for (int32_t e = 0; e < EL; e++)
        count[e] = symr_count(ids, A, e0, e);
    const int64_t nt = symr_tiles(count, EL, vr, max_tiles, off, tiles);
    *rows = off[EL];
    for (int32_t e = EL - 1; e >= 0; e--) /* any order: each expert's rows are its own */
        symr_place(ids, A, K, e0, e, off[e], assign_tok, slot_of);
    for (int64_t a = 0; a < A; a++)
        symr_place_foreign(ids, a, e0, EL, slot_of);
    free(count), free(off);
    return nt;
}

/* Routes T tokens of random logits with sy__moe_route and groups them both ways for several ranges and tile heights. */
static int test_grouping(int32_t E, int32_t K, int64_t T, int *checked)
{
    sy_moe_problem p = {.struct_size = sizeof p, .n_layers = 1, .n_experts = E, .top_k = K, .hidden = 8, .inter = 8,
                        .scoring = SY_MOE_SOFTMAX, .norm_topk_prob = 1, .routed_scaling_factor = 1.0f,
                        .weight_dtype = SY_DTYPE_F32};
    const int64_t A = T * K;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)A);
    float *l = malloc(sizeof(float) * (size_t)E), w[64];
    for (int64_t t = 0; t < T; t++) {
        fill_row(l, E, (int)(t % 6 == 4 ? 0 : t)); /* no NaN rows: they pick expert 0 anyway */
        if (t % 3 == 0) /* skew: some experts get many tokens, so tiles split */
            l[t % 4] = 50.0f;
        sy__moe_route(&p, l, NULL, ids + t * K, w);
    }
    const int32_t ranges[][2] = {{0, E}, {0, E / 3}, {E / 3, E - E / 3}, {E - 1, 1}};
    const int32_t heights[] = {8, 16, 32, 64};
    const int64_t max_tiles = A / 8 + E + 1;
    int32_t *ta = malloc(sizeof(int32_t) * (size_t)A), *tb = malloc(sizeof(int32_t) * (size_t)A);
    int32_t *sa = malloc(sizeof(int32_t) * (size_t)A), *sb = malloc(sizeof(int32_t) * (size_t)A);
    int32_t *xa = malloc(sizeof(int32_t) * 3 * (size_t)max_tiles), *xb = malloc(sizeof(int32_t) * 3 * (size_t)max_tiles);
    int bad = 0;
    for (size_t r = 0; r < sizeof ranges / sizeof ranges[0]; r++)
        for (size_t h = 0; h < sizeof heights / sizeof heights[0]; h++) {
            const int32_t e0 = ranges[r][0], EL = ranges[r][1], vr = heights[h];
            int32_t ra, rb;
            memset(sb, 0x5a, sizeof(int32_t) * (size_t)A);
            const int64_t na = ref_group(ids, A, K, e0, EL, vr, ta, sa, xa, &ra);
            const int64_t nb = dev_group(ids, A, K, e0, EL, vr, max_tiles, tb, sb, xb, &rb);
            (*checked)++;
            if (na != nb || ra != rb || memcmp(ta, tb, sizeof(int32_t) * (size_t)ra) ||
                memcmp(sa, sb, sizeof(int32_t) * (size_t)A) || memcmp(xa, xb, sizeof(int32_t) * 3 * (size_t)na)) {
                bad++;
                fprintf(stderr, "FAIL grouping E %d K %d T %lld, experts [%d, %d), %d-row tiles: host %lld rows %lld "
                        "tiles, device %lld rows %lld tiles\n", E, K, (long long)T, e0, e0 + EL, vr, (long long)ra,
                        (long long)na, (long long)rb, (long long)nb);
            }
        }
    free(ids), free(l), free(ta), free(tb), free(sa), free(sb), free(xa), free(xb);
    return bad;
}

int main(void)
{
    static const cfg cfgs[] = {
        {8, 2, SY_MOE_SOFTMAX, 0, 0, 1, 0, 1.0f},      /* Mixtral */
        {8, 2, SY_MOE_SOFTMAX, 0, 0, 0, 0, 1.0f},
        {60, 4, SY_MOE_SOFTMAX, 0, 0, 0, 0, 1.0f},     /* Qwen2-MoE */
        {128, 8, SY_MOE_SOFTMAX, 1, 1, 1, 0, 1.0f},    /* Qwen3-MoE; n_group 1 is no grouping */
        {64, 6, SY_MOE_SOFTMAX, 8, 3, 0, 0, 16.0f},    /* DeepSeek-V2: group max */
        {64, 6, SY_MOE_SOFTMAX, 8, 3, 1, 1, 2.5f},
        {256, 8, SY_MOE_SIGMOID, 8, 4, 1, 1, 2.5f},    /* DeepSeek-V3 */
        {160, 8, SY_MOE_SIGMOID, 1, 1, 1, 1, 2.5f},    /* GLM-4.5: no groups, bias */
        {32, 4, SY_MOE_SIGMOID, 4, 2, 1, 1, 1.8f},
        {16, 3, SY_MOE_SIGMOID, 16, 5, 1, 1, 1.0f},    /* one expert per group: the group score is its max */
        {16, 4, SY_MOE_SIGMOID, 2, 2, 0, 0, 1.0f},
        {1024, 8, SY_MOE_SIGMOID, 32, 4, 1, 1, 2.5f},  /* the most experts moe cpu routes */
        {5, 5, SY_MOE_SOFTMAX, 0, 0, 1, 1, 1.0f},      /* top_k = n_experts */
    };
    int failed = 0, rows = 0;
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++)
        failed += run(&cfgs[i], 600, &rows) != 0;
    printf("test_moe_route_dev: %d rows in %zu configs, %d configs where the routing differs from the sorted oracle\n",
           rows,
           sizeof cfgs / sizeof cfgs[0], failed);
    static const int32_t shapes[][3] = {{8, 2, 1}, {8, 2, 37}, {64, 6, 300}, {256, 8, 1024}, {5, 5, 9}};
    int groupings = 0, gfailed = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        gfailed += test_grouping(shapes[i][0], shapes[i][1], shapes[i][2], &groupings);
    printf("test_moe_route_dev: %d groupings (experts, ranges, tile heights), %d differ from the host path's\n",
           groupings, gfailed);
    return failed || gfailed ? 1 : 0;
}
