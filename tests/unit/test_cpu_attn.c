/*
 * attn/cpu and attn/cpu-ref against a dense double-precision reference
 * (and so against each other: the swap test), over multi-step scenarios:
 * several sequences, prefill and decode mixed in one call, block tables
 * drawn from a shuffled free list (never contiguous), two layers, GQA / MQA
 * / MHA, head_dim not a multiple of 16, v_head_dim != head_dim, odd block
 * sizes, a sliding window, F32/BF16/F16 caches, copy_blocks forks, and
 * every ISA attn/cpu accepts here.
 *
 * Bound: |out - ref| <= 4e-6 * max |v| over the row's context (softmax
 * output is a convex combination of v rows; F32 scores err by ~1e-6).
 * Also: a decode row computed alone equals the same row in a batch,
 * bitwise; bad block tables are refused before anything is written.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_cpu_harness.h"

#define MAX_SEQS 6
#define MAX_LEN 400
#define N_LAYERS 2

static th_plugin dev, fast, ref;
static th_host host;

typedef struct seq {
    int used;
    int32_t len;
    int32_t blocks[64];
    float *k[N_LAYERS], *v[N_LAYERS]; /* history rounded to the cache dtype: [MAX_LEN][n_kv * dim] */
} seq;

typedef struct scenario {
    sy_attn_problem p;
    const char *kv_key;
    sy_dtype kvt; /* what the plugins should store */
    seq s[MAX_SEQS];
    int32_t free_list[1024];
    int n_free;
    th_rng rng;
    void *a_fast, *a_ref;
    const sy_attn_ops *of, *orf;
    const char *tag;
    double worst;
} scenario;

static void *xcalloc(size_t n)
{
    void *p = calloc(1, n ? n : 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return p;
}

static int32_t take_block(scenario *sc)
{
    if (sc->n_free == 0) {
        fprintf(stderr, "test bug: out of blocks\n");
        exit(1);
    }
    return sc->free_list[--sc->n_free];
}

static void ensure_blocks(scenario *sc, seq *s, int32_t upto)
{
    const int32_t bs = sc->p.block_size;
    for (int32_t b = 0; b < (upto + bs - 1) / bs; b++)
        if (s->blocks[b] < 0)
            s->blocks[b] = take_block(sc);
}

static void seq_init(scenario *sc, seq *s)
{
    s->used = 1;
    s->len = 0;
    for (int i = 0; i < 64; i++)
        s->blocks[i] = -1;
    for (int l = 0; l < N_LAYERS; l++) {
        s->k[l] = xcalloc(sizeof(float) * MAX_LEN * (size_t)(sc->p.n_kv_heads * sc->p.head_dim));
        s->v[l] = xcalloc(sizeof(float) * MAX_LEN * (size_t)(sc->p.n_kv_heads * sc->p.v_head_dim));
    }
}

/* Dense reference for one row: token at position pos of sequence s, all heads. */
static void dense_ref(const scenario *sc, const seq *s, int layer, int64_t pos, const float *q, double *out,
                      double *vmax)
{
    const sy_attn_problem *p = &sc->p;
    const int64_t D = p->head_dim, DV = p->v_head_dim, KW = p->n_kv_heads * D, VW = p->n_kv_heads * DV;
    const int group = p->n_heads / p->n_kv_heads;
    const int64_t lo = p->sliding_window > 0 && pos - p->sliding_window + 1 > 0 ? pos - p->sliding_window + 1 : 0;
    double sc_row[MAX_LEN];
    for (int h = 0; h < p->n_heads; h++) {
        const int kvh = h / group;
        double mx = -INFINITY;
        for (int64_t j = lo; j <= pos; j++) {
            double d = 0;
            for (int64_t e = 0; e < D; e++)
                d += (double)q[h * D + e] * s->k[layer][j * KW + kvh * D + e];
            sc_row[j] = d * p->scale;
            mx = sc_row[j] > mx ? sc_row[j] : mx;
        }
        double sum = 0;
        for (int64_t j = lo; j <= pos; j++)
            sum += (sc_row[j] = exp(sc_row[j] - mx));
        vmax[h] = 0;
        for (int64_t e = 0; e < DV; e++) {
            double acc = 0;
            for (int64_t j = lo; j <= pos; j++) {
                const double vv = s->v[layer][j * VW + kvh * DV + e];
                acc += sc_row[j] * vv;
                vmax[h] = fabs(vv) > vmax[h] ? fabs(vv) : vmax[h];
            }
            out[h * DV + e] = acc / sum;
        }
    }
}

/*
 * One engine step: (seq index, new tokens) pairs, every layer. Returns the
 * fast plugin's outputs of the last layer in last_out (if non-NULL).
 */
static void step(scenario *sc, const int (*plan)[2], int n_plan, float *last_out)
{
    const sy_attn_problem *p = &sc->p;
    const int64_t QW = (int64_t)p->n_heads * p->head_dim, KW = (int64_t)p->n_kv_heads * p->head_dim;
    const int64_t VW = (int64_t)p->n_kv_heads * p->v_head_dim, OW = (int64_t)p->n_heads * p->v_head_dim;
    int32_t T = 0, tok_start[MAX_SEQS + 1], ctx[MAX_SEQS], bt[MAX_SEQS * 64];
    const int max_blocks = 40; /* fewer than the 64 a seq may hold: max_blocks is the table's row width */
    for (int i = 0; i < n_plan; i++) {
        seq *s = &sc->s[plan[i][0]];
        tok_start[i] = T;
        ctx[i] = s->len;
        ensure_blocks(sc, s, s->len + plan[i][1]);
        for (int b = 0; b < max_blocks; b++)
            bt[i * max_blocks + b] = s->blocks[b] >= 0 ? s->blocks[b] : 1000000; /* garbage past the used ones */
        T += plan[i][1];
    }
    tok_start[n_plan] = T;
    sy_attn_batch batch = {sizeof batch, n_plan, T, tok_start, ctx, bt, max_blocks, 0};
    float *q = xcalloc(sizeof(float) * (size_t)(T * QW)), *k = xcalloc(sizeof(float) * (size_t)(T * KW));
    float *v = xcalloc(sizeof(float) * (size_t)(T * VW));
    float *of = xcalloc(sizeof(float) * (size_t)(T * OW)), *orf = xcalloc(sizeof(float) * (size_t)(T * OW));
    double *dref = xcalloc(sizeof(double) * (size_t)OW), vmax[512];
    for (int layer = 0; layer < N_LAYERS; layer++) {
        for (int64_t i = 0; i < T * QW; i++)
            q[i] = (float)th_uniform(&sc->rng, -1.5, 1.5);
        for (int64_t i = 0; i < T * KW; i++)
            k[i] = (float)th_uniform(&sc->rng, -1.5, 1.5);
        for (int64_t i = 0; i < T * VW; i++)
            v[i] = (float)th_uniform(&sc->rng, -2, 2);
        for (int64_t i = 0; i < T * OW; i++)
            of[i] = orf[i] = NAN;
        sy_tensor tq = sy_tensor_2d(q, SY_DTYPE_F32, T, QW), tk = sy_tensor_2d(k, SY_DTYPE_F32, T, KW);
        sy_tensor tv = sy_tensor_2d(v, SY_DTYPE_F32, T, VW), tof = sy_tensor_2d(of, SY_DTYPE_F32, T, OW);
        sy_tensor tor = sy_tensor_2d(orf, SY_DTYPE_F32, T, OW);
        sy_err err;
        TH_CHECK(sc->of->forward(sc->a_fast, layer, &batch, &tq, &tk, &tv, &tof, &err) == SY_OK, "%s cpu forward: %s",
                 sc->tag, err.msg);
        TH_CHECK(sc->orf->forward(sc->a_ref, layer, &batch, &tq, &tk, &tv, &tor, &err) == SY_OK,
                 "%s cpu-ref forward: %s", sc->tag, err.msg);
        /* the reference's own history of what the cache holds */
        for (int i = 0; i < n_plan; i++) {
            seq *s = &sc->s[plan[i][0]];
            for (int t = 0; t < plan[i][1]; t++) {
                const int64_t row = tok_start[i] + t, pos = ctx[i] + t;
                for (int64_t e = 0; e < KW; e++)
                    s->k[layer][pos * KW + e] = th_round_to(sc->kvt, k[row * KW + e]);
                for (int64_t e = 0; e < VW; e++)
                    s->v[layer][pos * VW + e] = th_round_to(sc->kvt, v[row * VW + e]);
            }
        }
        for (int i = 0; i < n_plan; i++) {
            seq *s = &sc->s[plan[i][0]];
            for (int t = 0; t < plan[i][1]; t++) {
                const int64_t row = tok_start[i] + t, pos = ctx[i] + t;
                dense_ref(sc, s, layer, pos, q + row * QW, dref, vmax);
                for (int64_t e = 0; e < OW; e++) {
                    const int h = (int)(e / p->v_head_dim);
                    const double bound = 4e-6 * vmax[h] + 1e-30;
                    const double ef = fabs(of[row * OW + e] - dref[e]), er = fabs(orf[row * OW + e] - dref[e]);
                    if (!(ef <= bound) || !(er <= bound)) {
                        TH_CHECK(0, "%s layer %d seq %d pos %lld out[%lld]: cpu %.9g cpu-ref %.9g dense %.9g (bound %.3g)",
                                 sc->tag, layer, plan[i][0], (long long)pos, (long long)e, (double)of[row * OW + e],
                                 (double)orf[row * OW + e], dref[e], bound);
                        e = OW;
                        t = plan[i][1];
                        i = n_plan;
                        break;
                    }
                    if (ef / bound > sc->worst)
                        sc->worst = ef / bound;
                }
            }
        }
    }
    for (int i = 0; i < n_plan; i++)
        sc->s[plan[i][0]].len += plan[i][1];
    if (last_out)
        memcpy(last_out, of, sizeof(float) * (size_t)(T * OW));
    free(q);
    free(k);
    free(v);
    free(of);
    free(orf);
    free(dref);
}

/* Decode of one sequence alone must equal its row in the batch just run (same q/k/v rewritten). */
static void check_alone(scenario *sc)
{
    const sy_attn_problem *p = &sc->p;
    const int64_t QW = (int64_t)p->n_heads * p->head_dim, KW = (int64_t)p->n_kv_heads * p->head_dim;
    const int64_t VW = (int64_t)p->n_kv_heads * p->v_head_dim, OW = (int64_t)p->n_heads * p->v_head_dim;
    /* batch: seq 0 prefill 3 + seq 1 decode 1 + seq 2 decode 1, all on layer 0 */
    const int32_t lens[3] = {3, 1, 1};
    int32_t tok_start[4] = {0, 3, 4, 5}, ctx[3], bt[3 * 40];
    for (int i = 0; i < 3; i++) {
        seq *s = &sc->s[i];
        ctx[i] = s->len;
        ensure_blocks(sc, s, s->len + lens[i]);
        for (int b = 0; b < 40; b++)
            bt[i * 40 + b] = s->blocks[b] >= 0 ? s->blocks[b] : 0;
    }
    float q[5 * 4096], k[5 * 1024], v[5 * 1024], out[5 * 4096], one[4096];
    if (5 * QW > 5 * 4096 || 5 * KW > 5 * 1024 || 5 * VW > 5 * 1024 || OW > 4096)
        return;
    for (int64_t i = 0; i < 5 * QW; i++)
        q[i] = (float)th_uniform(&sc->rng, -1, 1);
    for (int64_t i = 0; i < 5 * KW; i++)
        k[i] = (float)th_uniform(&sc->rng, -1, 1);
    for (int64_t i = 0; i < 5 * VW; i++)
        v[i] = (float)th_uniform(&sc->rng, -1, 1);
    sy_attn_batch b = {sizeof b, 3, 5, tok_start, ctx, bt, 40, 0};
    sy_tensor tq = sy_tensor_2d(q, SY_DTYPE_F32, 5, QW), tk = sy_tensor_2d(k, SY_DTYPE_F32, 5, KW);
    sy_tensor tv = sy_tensor_2d(v, SY_DTYPE_F32, 5, VW), to = sy_tensor_2d(out, SY_DTYPE_F32, 5, OW);
    sy_err err;
    TH_CHECK(sc->of->forward(sc->a_fast, 0, &b, &tq, &tk, &tv, &to, &err) == SY_OK, "%s: %s", sc->tag, err.msg);
    for (int i = 1; i < 3; i++) {
        const int32_t row = tok_start[i];
        int32_t ts1[2] = {0, 1}, ctx1 = ctx[i];
        sy_attn_batch b1 = {sizeof b1, 1, 1, ts1, &ctx1, bt + i * 40, 40, 0};
        sy_tensor q1 = sy_tensor_2d(q + row * QW, SY_DTYPE_F32, 1, QW), k1 = sy_tensor_2d(k + row * KW, SY_DTYPE_F32, 1, KW);
        sy_tensor v1 = sy_tensor_2d(v + row * VW, SY_DTYPE_F32, 1, VW), o1 = sy_tensor_2d(one, SY_DTYPE_F32, 1, OW);
        TH_CHECK(sc->of->forward(sc->a_fast, 0, &b1, &q1, &k1, &v1, &o1, &err) == SY_OK, "%s: %s", sc->tag, err.msg);
        TH_CHECK(memcmp(one, out + row * OW, sizeof(float) * (size_t)OW) == 0,
                 "%s: sequence %d decoded alone differs from the same row in a batch", sc->tag, i);
    }
    /* keep the reference history in step with what was written (layer 0 only, then mark layer 1 too) */
    for (int i = 0; i < 3; i++) {
        seq *s = &sc->s[i];
        for (int t = 0; t < lens[i]; t++) {
            const int64_t row = tok_start[i] + t, pos = ctx[i] + t;
            for (int64_t e = 0; e < KW; e++)
                s->k[0][pos * KW + e] = th_round_to(sc->kvt, k[row * KW + e]);
            for (int64_t e = 0; e < VW; e++)
                s->v[0][pos * VW + e] = th_round_to(sc->kvt, v[row * VW + e]);
        }
    }
    /* cpu-ref must see the same writes (layer 0), and layer 1 gets the same rows in both. */
    float junk[5 * 4096];
    sy_tensor tj = sy_tensor_2d(junk, SY_DTYPE_F32, 5, OW);
    TH_CHECK(sc->orf->forward(sc->a_ref, 0, &b, &tq, &tk, &tv, &tj, &err) == SY_OK, "%s: %s", sc->tag, err.msg);
    TH_CHECK(sc->of->forward(sc->a_fast, 1, &b, &tq, &tk, &tv, &tj, &err) == SY_OK, "%s: %s", sc->tag, err.msg);
    TH_CHECK(sc->orf->forward(sc->a_ref, 1, &b, &tq, &tk, &tv, &tj, &err) == SY_OK, "%s: %s", sc->tag, err.msg);
    for (int i = 0; i < 3; i++) {
        seq *s = &sc->s[i];
        for (int t = 0; t < lens[i]; t++) {
            const int64_t row = tok_start[i] + t, pos = ctx[i] + t;
            memcpy(s->k[1] + pos * KW, s->k[0] + pos * KW, sizeof(float) * (size_t)KW);
            memcpy(s->v[1] + pos * VW, s->v[0] + pos * VW, sizeof(float) * (size_t)VW);
            (void)row;
        }
        s->len += lens[i];
    }
}

/* Forks sequence `from` into `to` with copy_blocks (whole blocks, all layers). */
static void fork_seq(scenario *sc, int from, int to)
{
    seq *a = &sc->s[from], *d = &sc->s[to];
    seq_init(sc, d);
    const int32_t nb = (a->len + sc->p.block_size - 1) / sc->p.block_size;
    int32_t src[64], dst[64];
    for (int32_t b = 0; b < nb; b++) {
        src[b] = a->blocks[b];
        dst[b] = d->blocks[b] = take_block(sc);
    }
    sy_err err;
    TH_CHECK(sc->of->copy_blocks(sc->a_fast, src, dst, nb, &err) == SY_OK, "%s copy_blocks: %s", sc->tag, err.msg);
    TH_CHECK(sc->orf->copy_blocks(sc->a_ref, src, dst, nb, &err) == SY_OK, "%s copy_blocks: %s", sc->tag, err.msg);
    d->len = a->len;
    const size_t kw = (size_t)sc->p.n_kv_heads * (size_t)sc->p.head_dim, vw = (size_t)sc->p.n_kv_heads * (size_t)sc->p.v_head_dim;
    for (int l = 0; l < N_LAYERS; l++) {
        memcpy(d->k[l], a->k[l], sizeof(float) * kw * (size_t)a->len);
        memcpy(d->v[l], a->v[l], sizeof(float) * vw * (size_t)a->len);
    }
}

static void check_refusals(scenario *sc)
{
    const sy_attn_problem *p = &sc->p;
    const int64_t QW = (int64_t)p->n_heads * p->head_dim, KW = (int64_t)p->n_kv_heads * p->head_dim;
    const int64_t VW = (int64_t)p->n_kv_heads * p->v_head_dim, OW = (int64_t)p->n_heads * p->v_head_dim;
    static float q[4096], k[1024], v[1024], o[4096];
    int32_t ts[2] = {0, 1}, ctx = 0, bt[2] = {p->n_blocks, 0};
    sy_attn_batch b = {sizeof b, 1, 1, ts, &ctx, bt, 2, 0};
    sy_tensor tq = sy_tensor_2d(q, SY_DTYPE_F32, 1, QW), tk = sy_tensor_2d(k, SY_DTYPE_F32, 1, KW);
    sy_tensor tv = sy_tensor_2d(v, SY_DTYPE_F32, 1, VW), to = sy_tensor_2d(o, SY_DTYPE_F32, 1, OW);
    sy_err err;
    const void *insts[2] = {sc->a_fast, sc->a_ref};
    const sy_attn_ops *ops[2] = {sc->of, sc->orf};
    for (int i = 0; i < 2; i++) {
        bt[0] = p->n_blocks;
        TH_CHECK(ops[i]->forward((void *)insts[i], 0, &b, &tq, &tk, &tv, &to, &err) == SY_ERR_INVALID,
                 "%s: block index %d accepted", sc->tag, p->n_blocks);
        bt[0] = 0;
        ctx = -1;
        TH_CHECK(ops[i]->forward((void *)insts[i], 0, &b, &tq, &tk, &tv, &to, &err) == SY_ERR_INVALID,
                 "%s: ctx_len -1 accepted", sc->tag);
        ctx = 2 * p->block_size; /* needs 3 blocks, table holds 2 */
        TH_CHECK(ops[i]->forward((void *)insts[i], 0, &b, &tq, &tk, &tv, &to, &err) == SY_ERR_INVALID,
                 "%s: a position past the block table accepted", sc->tag);
        ctx = 0;
        sy_tensor short_q = sy_tensor_2d(q, SY_DTYPE_F32, 1, QW - 1);
        TH_CHECK(ops[i]->forward((void *)insts[i], 0, &b, &short_q, &tk, &tv, &to, &err) == SY_ERR_INVALID &&
                     strstr(err.msg, "q"),
                 "%s: a short q accepted", sc->tag);
        TH_CHECK(ops[i]->forward((void *)insts[i], N_LAYERS, &b, &tq, &tk, &tv, &to, &err) == SY_ERR_INVALID,
                 "%s: layer %d accepted", sc->tag, N_LAYERS);
        int32_t bad_src = -1, dst = 0;
        TH_CHECK(ops[i]->copy_blocks((void *)insts[i], &bad_src, &dst, 1, &err) == SY_ERR_INVALID,
                 "%s: copy_blocks from -1 accepted", sc->tag);
    }
}

static void run_scenario(const char *isa, const sy_attn_problem *prob, const char *kv_key, sy_dtype expect,
                         uint64_t seed)
{
    scenario *sc = xcalloc(sizeof *sc);
    sc->p = *prob;
    sc->kv_key = kv_key;
    sc->kvt = expect;
    sc->rng.s = seed;
    sc->of = fast.desc->ops;
    sc->orf = ref.desc->ops;
    char tag[160];
    snprintf(tag, sizeof tag, "[%s h%d/kv%d d%d/%d bs%d win%d %s]", isa, prob->n_heads, prob->n_kv_heads,
             prob->head_dim, prob->v_head_dim, prob->block_size, prob->sliding_window, sy_dtype_name(expect));
    sc->tag = tag;
    /* a shuffled free list: tables are never contiguous */
    sc->n_free = prob->n_blocks;
    for (int i = 0; i < sc->n_free; i++)
        sc->free_list[i] = i;
    for (int i = sc->n_free - 1; i > 0; i--) {
        const int j = th_int(&sc->rng, 0, i);
        const int32_t t = sc->free_list[i];
        sc->free_list[i] = sc->free_list[j];
        sc->free_list[j] = t;
    }
    const char *kvf[] = {"kv_dtype", kv_key, "isa", isa, NULL}, *kvr[] = {"kv_dtype", kv_key, NULL};
    sy_err err;
    if (th_create(&fast, &host.api, kvf, &sc->a_fast, &err) || th_create(&ref, &host.api, kvr, &sc->a_ref, &err)) {
        TH_CHECK(0, "%s create: %s", tag, err.msg);
        free(sc);
        return;
    }
    TH_CHECK(sc->of->supports(sc->a_fast, &sc->p, &err) == 1, "%s cpu supports: %s", tag, err.msg);
    TH_CHECK(sc->orf->supports(sc->a_ref, &sc->p, &err) == 1, "%s cpu-ref supports: %s", tag, err.msg);
    TH_CHECK(sc->of->prepare(sc->a_fast, &sc->p, &err) == SY_OK, "%s cpu prepare: %s", tag, err.msg);
    TH_CHECK(sc->orf->prepare(sc->a_ref, &sc->p, &err) == SY_OK, "%s cpu-ref prepare: %s", tag, err.msg);
    for (int i = 0; i < 4; i++)
        seq_init(sc, &sc->s[i]);

    static const int s0[][2] = {{0, 37}, {1, 5}};
    static const int s1[][2] = {{0, 1}, {1, 20}, {2, 3}};
    static const int s2[][2] = {{2, 1}, {0, 1}, {1, 1}};
    static const int s3[][2] = {{3, 1}, {2, 50}, {0, 1}};
    static const int s4[][2] = {{4, 2}, {0, 1}, {3, 9}};
    static const int s5[][2] = {{4, 1}, {3, 1}, {2, 1}, {1, 1}, {0, 1}};
    step(sc, s0, 2, NULL);
    step(sc, s1, 3, NULL);
    step(sc, s2, 3, NULL);
    step(sc, s3, 3, NULL);
    fork_seq(sc, 0, 4);
    step(sc, s4, 3, NULL);
    check_alone(sc);
    step(sc, s5, 5, NULL);
    check_refusals(sc);
    step(sc, s5, 5, NULL); /* refusals wrote nothing: still consistent */
    /* A long prompt next to a decode and a short prefill of other lengths: many query chunks of one sequence
     * over many KV blocks (as long as the 40-block table row allows), so every chunk's online softmax crosses
     * block boundaries and a wrong chunk start, block walk or rescale shows against the dense reference. */
    seq_init(sc, &sc->s[5]);
    const int long_len = 40 * prob->block_size - 8 < 300 ? 40 * prob->block_size - 8 : 300;
    const int s6[][2] = {{5, long_len}, {2, 1}, {1, 7}};
    step(sc, s6, 3, NULL);
    printf("  %s worst error %.2f of the bound\n", tag, sc->worst);

    fast.desc->destroy(sc->a_fast);
    ref.desc->destroy(sc->a_ref);
    for (int i = 0; i < MAX_SEQS; i++)
        for (int l = 0; l < N_LAYERS; l++) {
            free(sc->s[i].k[l]);
            free(sc->s[i].v[l]);
        }
    free(sc);
}

static sy_attn_problem problem(int heads, int kv, int d, int dv, int bs, int win, sy_dtype kvt)
{
    sy_attn_problem p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.n_layers = N_LAYERS;
    p.n_heads = heads;
    p.n_kv_heads = kv;
    p.head_dim = d;
    p.v_head_dim = dv;
    p.block_size = bs;
    p.n_blocks = 200;
    p.kv_dtype = kvt;
    p.scale = 1.0f / sqrtf((float)d);
    p.sliding_window = win;
    return p;
}

static void check_supports(void)
{
    void *a = NULL, *r = NULL;
    sy_err err;
    if (th_create(&fast, &host.api, NULL, &a, &err) || th_create(&ref, &host.api, NULL, &r, &err)) {
        TH_CHECK(0, "create: %s", err.msg);
        return;
    }
    const sy_attn_ops *of = fast.desc->ops, *orf = ref.desc->ops;
    sy_attn_problem p = problem(4, 2, 512, 512, 16, 0, SY_DTYPE_F32);
    err.msg[0] = 0;
    TH_CHECK(of->supports(a, &p, &err) == 0 && strstr(err.msg, "head_dim"), "cpu: head_dim 512 accepted (\"%s\")",
             err.msg);
    TH_CHECK(orf->supports(r, &p, &err) == 1, "cpu-ref should take any head_dim: %s", err.msg);
    p = problem(6, 4, 16, 16, 16, 0, SY_DTYPE_F32);
    TH_CHECK(of->supports(a, &p, &err) == 0 && orf->supports(r, &p, &err) == 0, "6 heads over 4 KV heads accepted");
    p = problem(4, 2, 16, 16, 16, 0, SY_DTYPE_FP8_E4M3);
    TH_CHECK(of->supports(a, &p, &err) == 0 && strstr(err.msg, "F8"), "FP8 KV cache accepted (\"%s\")", err.msg);
    p = problem(4, 2, 16, 16, 16, 0, SY_DTYPE_F32);
    p.scale = 0;
    TH_CHECK(of->supports(a, &p, &err) == 0 && orf->supports(r, &p, &err) == 0, "scale 0 accepted");
    p = problem(4, 2, 16, 16, 16, 0, SY_DTYPE_F32);
    int32_t ts[2] = {0, 1}, ctx = 0, bt = 0;
    sy_attn_batch b = {sizeof b, 1, 1, ts, &ctx, &bt, 1, 0};
    float q[64], k[32], v[32], o[64];
    sy_tensor tq = sy_tensor_2d(q, SY_DTYPE_F32, 1, 64), tk = sy_tensor_2d(k, SY_DTYPE_F32, 1, 32);
    sy_tensor tv = sy_tensor_2d(v, SY_DTYPE_F32, 1, 32), to = sy_tensor_2d(o, SY_DTYPE_F32, 1, 64);
    TH_CHECK(of->forward(a, 0, &b, &tq, &tk, &tv, &to, &err) == SY_ERR_INVALID, "forward before prepare accepted");
    fast.desc->destroy(a);
    ref.desc->destroy(r);
}

int main(void)
{
    th_load("sy-device-cpu", &dev);
    th_load("sy-attn-cpu", &fast);
    th_load("sy-attn-cpu-ref", &ref);
    th_host_init(&host);
    sy_err why;
    TH_CHECK(fast.desc->probe(&host.api, &why) > ref.desc->probe(&host.api, &why),
             "attn cpu must outrank cpu-ref for `auto`");
    const char *kvd[] = {"threads", "3", NULL};
    void *d = NULL;
    if (th_create(&dev, &host.api, kvd, &d, &why)) {
        fprintf(stderr, "FAIL: device create: %s\n", why.msg);
        return 1;
    }
    th_host_set_pool(&host, dev.desc, d);
    check_supports();

    const char *isas[3];
    const int n_isa = th_isas(&fast, &host.api, isas, 3);
    struct {
        sy_attn_problem p;
        const char *key;
        sy_dtype expect;
    } cases[] = {
        {problem(4, 2, 16, 16, 16, 0, SY_DTYPE_F32), "f32", SY_DTYPE_F32},
        {problem(8, 1, 64, 64, 8, 0, SY_DTYPE_BF16), "f32", SY_DTYPE_BF16}, /* the problem's BF16 wins */
        {problem(6, 6, 40, 24, 5, 0, SY_DTYPE_F32), "f16", SY_DTYPE_F16},
        {problem(4, 2, 128, 128, 16, 7, SY_DTYPE_F32), "f32", SY_DTYPE_F32},
        {problem(16, 2, 256, 256, 32, 0, SY_DTYPE_F32), "bf16", SY_DTYPE_BF16},
        {problem(64, 1, 16, 16, 16, 0, SY_DTYPE_F32), "f32", SY_DTYPE_F32},
        {problem(4, 4, 33, 33, 3, 20, SY_DTYPE_F32), "bf16", SY_DTYPE_BF16},
        {problem(8, 2, 64, 64, 160, 0, SY_DTYPE_F32), "bf16", SY_DTYPE_BF16}, /* PV over more than 128 positions */
    };
    for (int i = 0; i < n_isa; i++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
            run_scenario(isas[i], &cases[c].p, cases[c].key, cases[c].expect, 0xa77e0000u + c * 7 + (uint64_t)i);

    th_host_clear_pool(&host);
    dev.desc->destroy(d);
    TH_CHECK(atomic_load(&host.live_allocs) == 0, "%ld host allocations leaked", atomic_load(&host.live_allocs));
    th_unload(&fast);
    th_unload(&ref);
    th_unload(&dev);
    return th_done("test_cpu_attn");
}
