/*
 * The AMX-BF16 path (`matmul = bf16`, `amx = auto`): the tile kernel against
 * a double-precision reference on BF16-rounded operands; bitwise batch
 * invariance (a row alone, and in batches of 2..33 rows, gives the bits it
 * got in the whole batch), column-range and thread-count invariance; the
 * device plugin (repacked weights, tied embedding lookup and lm_head from
 * one prepared tensor, an untied model's embedding pack dropped, amx = off
 * giving the AVX512-BF16 bits, the simulated OS refusal falling back with
 * one log line) and the moe plugin (AMX experts vs its own AVX512-BF16
 * path, batch invariance).
 *
 * Skips (77) on a CPU without AMX-BF16 or where Linux refuses the tiles.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sykern.h"
#include "test_cpu_harness.h"

static th_plugin dev, moe;
static th_host host;

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "test_cpu_amx: out of memory (%zu bytes)\n", n);
        exit(1);
    }
    return p;
}

/* Sequential F32 sums of up to SYK_KC products per slice: the error grows with k. */
static int near(double a, double ref, double sum_abs, int64_t k)
{
    const double tol = ((double)(k < SYK_KC ? k : SYK_KC) / 4.0 + 16.0) * 0x1p-23 * sum_abs + 1e-30;
    return fabs(a - ref) <= tol;
}

static double rel_rms(const float *a, const float *b, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)b[i] * b[i];
    }
    return sqrt(num / (den + 1e-300));
}

/* ----------------------------------------------------------------- kernel */

static void test_kernel(const syk_amx *amx, const syk_bf16dot *b, const syk_kernels *kern, const syk_par *par)
{
    th_rng r = {2026};
    const int64_t ns[] = {1, 2, 15, 16, 17, 33, 65, 130};
    const int64_t ms[] = {1, 5, 16, 17, 40, 100};
    const int64_t ks[] = {1, 31, 32, 33, 100, 1024, 1025, 2100};
    long shapes = 0, batches = 0;
    for (size_t ia = 0; ia < sizeof ns / sizeof ns[0]; ia++)
        for (size_t ib = 0; ib < sizeof ms / sizeof ms[0]; ib++)
            for (size_t ic = 0; ic < sizeof ks / sizeof ks[0]; ic++) {
                const int64_t n = ns[ia], m = ms[ib], k = ks[ic];
                if (n * m * k > 2500000)
                    continue;
                const int64_t ldx = k + th_int(&r, 0, 3), ldw = k + th_int(&r, 0, 1) * 5, ldo = m + 3;
                float *x = xmalloc(sizeof(float) * (size_t)(n * ldx));
                uint16_t *xb = xmalloc(sizeof(uint16_t) * (size_t)(n * k));
                uint16_t *w = xmalloc(sizeof(uint16_t) * (size_t)(m * ldw));
                float *out = xmalloc(sizeof(float) * (size_t)(n * ldo));
                float *sub = xmalloc(sizeof(float) * (size_t)(n * ldo));
                for (int64_t i = 0; i < n * ldx; i++)
                    x[i] = (float)th_uniform(&r, -2, 2);
                for (int64_t i = 0; i < m * ldw; i++)
                    w[i] = th_f32_to_bf16((float)th_uniform(&r, -1, 1));
                syk_rows_to_bf16(b, xb, k, x, ldx, n, k, par);
                syk_amx_pack *pk = syk_amx_pack_new(&host.api, w, m, k, ldw);
                TH_CHECK(pk != NULL, "pack [%lld, %lld]: out of memory", (long long)m, (long long)k);
                if (!pk)
                    continue;
                syk_gemm g = {.x = x, .ldx = ldx, .w = w, .wdtype = SY_DTYPE_BF16, .ldw = ldw, .out = out, .ldo = ldo,
                              .n = n, .m = m, .k = k, .bdot = b, .xb = xb, .ldxb = k, .amx_w = pk, .amx = amx};
                syk_gemm_tile(kern, &g, 0, n, 0, m);
                int bad = 0;
                for (int64_t i = 0; i < n && bad < 3; i++)
                    for (int64_t j = 0; j < m; j++) {
                        double ref = 0, sa = 0;
                        for (int64_t kk = 0; kk < k; kk++) {
                            const double p = (double)th_bf16_to_f32(xb[i * k + kk]) * th_bf16_to_f32(w[j * ldw + kk]);
                            ref += p;
                            sa += fabs(p);
                        }
                        if (!near(out[i * ldo + j], ref, sa, k) && bad++ < 3)
                            TH_CHECK(0, "n=%lld m=%lld k=%lld [%lld,%lld] = %.9g, want %.9g", (long long)n,
                                     (long long)m, (long long)k, (long long)i, (long long)j, (double)out[i * ldo + j],
                                     ref);
                    }
                /* Batch invariance: a row alone, and batches of 2..33 rows at several offsets, give the batch's bits. */
                for (int64_t bs = 1; bs <= 33 && bs <= n; bs++) {
                    const int64_t s = (bs * 7) % (n - bs + 1);
                    syk_gemm gb = g;
                    gb.xb = xb + s * k;
                    gb.out = sub;
                    gb.n = bs;
                    syk_gemm_tile(kern, &gb, 0, bs, 0, m);
                    for (int64_t i = 0; i < bs; i++)
                        TH_CHECK(!memcmp(sub + i * ldo, out + (s + i) * ldo, sizeof(float) * (size_t)m),
                                 "n=%lld m=%lld k=%lld: row %lld in a batch of %lld differs from the whole batch",
                                 (long long)n, (long long)m, (long long)k, (long long)(s + i), (long long)bs);
                    batches++;
                }
                /* Column ranges that cut panels give the same bits, and write nothing outside. */
                if (m > 8) {
                    for (int64_t i = 0; i < n * ldo; i++)
                        sub[i] = -7.0f;
                    syk_gemm_tile(kern, &g, 0, n, 0, 0); /* empty: no effect */
                    syk_gemm gc = g;
                    gc.out = sub;
                    syk_gemm_tile(kern, &gc, 0, n, 5, m - 3);
                    for (int64_t i = 0; i < n; i++)
                        for (int64_t j = 0; j < m; j++) {
                            const float want = j >= 5 && j < m - 3 ? out[i * ldo + j] : -7.0f;
                            TH_CHECK(memcmp(&sub[i * ldo + j], &want, 4) == 0,
                                     "n=%lld m=%lld k=%lld: columns [5, %lld) [%lld,%lld] = %g, want %g", (long long)n,
                                     (long long)m, (long long)k, (long long)(m - 3), (long long)i, (long long)j,
                                     (double)sub[i * ldo + j], (double)want);
                        }
                }
                /* Thread invariance: the pool's split (16-column chunks, row blocks) gives the serial bits. */
                syk_gemm gp = g;
                gp.out = sub;
                syk_gemm_run(kern, &gp, par);
                for (int64_t i = 0; i < n; i++)
                    TH_CHECK(!memcmp(sub + i * ldo, out + i * ldo, sizeof(float) * (size_t)m),
                             "n=%lld m=%lld k=%lld: row %lld differs between serial and the pool", (long long)n,
                             (long long)m, (long long)k, (long long)i);
                shapes++;
                syk_amx_pack_free(&host.api, pk);
                free(x);
                free(xb);
                free(w);
                free(out);
                free(sub);
            }
    printf("%ld kernel shapes, %ld sub-batches checked\n", shapes, batches);
}

/* ----------------------------------------------------------------- device */

static int amx_log_lines;

static void count_log(void *ctx, sy_log_level level, const char *plugin, const char *msg)
{
    (void)ctx;
    (void)plugin;
    if (strstr(msg, "not AMX")) {
        amx_log_lines++;
        fprintf(stderr, "[log %d] %s\n", (int)level, msg);
    }
}

static void *make_dev(const char *matmul, const char *amx, sy_err *err)
{
    const char *kv[] = {"isa", "avx512", "threads", "3", "matmul", matmul, "amx", amx, NULL};
    void *inst = NULL;
    if (th_create(&dev, &host.api, kv, &inst, err))
        return NULL;
    return inst;
}

static int prep(void *inst, const char *name, const sy_tensor *host_view, sy_tensor *out)
{
    sy_err err;
    const int rc = ((const sy_device_ops *)dev.desc->ops)->prepare_weight(inst, name, host_view, out, &err);
    TH_CHECK(rc == SY_OK, "prepare_weight %s: %s", name, err.msg);
    return rc;
}

static void linear(void *inst, const sy_tensor *x, const sy_tensor *w, float *o, int64_t n, int64_t m)
{
    sy_err err;
    sy_tensor O = sy_tensor_2d(o, SY_DTYPE_F32, n, m);
    th_host_set_pool(&host, dev.desc, inst);
    TH_CHECK(((const sy_device_ops *)dev.desc->ops)->linear(inst, x, w, NULL, &O, &err) == SY_OK, "linear: %s", err.msg);
    th_host_clear_pool(&host);
}

static void test_device(void)
{
    const sy_device_ops *ops = dev.desc->ops;
    sy_err err;
    TH_CHECK(!make_dev("bf16", "on", &err) && strstr(err.msg, "amx"), "amx = on accepted or unclear: %s", err.msg);
    const long live0 = atomic_load(&host.live_allocs);
    void *da = make_dev("bf16", "auto", &err), *db = make_dev("bf16", "off", &err), *df = make_dev("f32", "auto", &err);
    TH_CHECK(da && db && df, "create: %s", err.msg);
    if (!da || !db || !df)
        return;
    th_rng r = {31337};
    /* A tied table: vocab V rows of hidden H, the lm_head of hidden states. */
    const int64_t V = 333, H = 200, n = 37;
    uint16_t *tab = xmalloc(sizeof(uint16_t) * (size_t)(V * H)), *tab2 = xmalloc(sizeof(uint16_t) * (size_t)(V * H));
    float *x = xmalloc(sizeof(float) * (size_t)(n * H));
    float *oa = xmalloc(sizeof(float) * (size_t)(n * V)), *ob = xmalloc(sizeof(float) * (size_t)(n * V));
    float *of = xmalloc(sizeof(float) * (size_t)(n * V)), *o1 = xmalloc(sizeof(float) * (size_t)V);
    float *emb = xmalloc(sizeof(float) * (size_t)(n * H));
    for (int64_t i = 0; i < V * H; i++) {
        tab[i] = th_f32_to_bf16((float)th_uniform(&r, -1, 1));
        tab2[i] = th_f32_to_bf16((float)th_uniform(&r, -1, 1));
    }
    for (int64_t i = 0; i < n * H; i++)
        x[i] = (float)th_uniform(&r, -1, 1);
    const sy_tensor T = sy_tensor_2d(tab, SY_DTYPE_BF16, V, H), T2 = sy_tensor_2d(tab2, SY_DTYPE_BF16, V, H);
    const sy_tensor X = sy_tensor_2d(x, SY_DTYPE_F32, n, H);
    sy_tensor pa, pb, pf;
    if (prep(da, "model.embed_tokens.weight", &T, &pa) || prep(db, "model.embed_tokens.weight", &T, &pb) ||
        prep(df, "model.embed_tokens.weight", &T, &pf))
        return;
    TH_CHECK(syk_amx_pack_of(&pa) != NULL, "amx = auto: prepare_weight made no AMX copy of a BF16 matrix");
    TH_CHECK(syk_amx_pack_of(&pb) == NULL && syk_amx_pack_of(&pf) == NULL, "amx = off / f32 repacked the weights");
    TH_CHECK(pa.data == tab, "the prepared tensor's data is not the row-major view the embedding reads");
    linear(da, &X, &pa, oa, n, V);
    linear(db, &X, &pb, ob, n, V);
    linear(df, &X, &pf, of, n, V);
    const double rab = rel_rms(oa, ob, n * V), raf = rel_rms(oa, of, n * V);
    printf("lm_head amx vs avx512-bf16: relative RMS %.2e; amx vs f32: %.2e\n", rab, raf);
    TH_CHECK(rab < 1e-5, "amx vs avx512-bf16 relative RMS %.3g: expected < 1e-5 (same rounded x, F32 sums)", rab);
    TH_CHECK(raf > 1e-6 && raf < 4e-3, "amx vs f32 relative RMS %.3g: expected 1e-6..4e-3", raf);
    TH_CHECK(memcmp(oa, ob, sizeof(float) * (size_t)(n * V)) != 0, "amx gave the avx512-bf16 bits: AMX did not run");
    for (int64_t i = 0; i < n; i += 9) {
        const sy_tensor Xi = sy_tensor_2d(x + i * H, SY_DTYPE_F32, 1, H);
        linear(da, &Xi, &pa, o1, 1, V);
        TH_CHECK(!memcmp(o1, oa + i * V, sizeof(float) * (size_t)V), "amx: row %lld alone differs from the batch",
                 (long long)i);
    }
    /* The embedding lookup reads the same prepared tensor: exact rows. */
    int32_t ids[37];
    for (int64_t i = 0; i < n; i++)
        ids[i] = (int32_t)th_int(&r, 0, (int)V - 1);
    sy_tensor E = sy_tensor_2d(emb, SY_DTYPE_F32, n, H);
    th_host_set_pool(&host, dev.desc, da);
    TH_CHECK(ops->embed(da, &pa, ids, n, &E, &err) == SY_OK, "embed: %s", err.msg);
    th_host_clear_pool(&host);
    int exact = 1;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < H; j++)
            exact &= emb[i * H + j] == th_bf16_to_f32(tab[(int64_t)ids[i] * H + j]);
    TH_CHECK(exact, "embed through the AMX-prepared (tied) table is not the table's rows");
    /* linear_multi: the parts' bits are separate linears'. */
    if (ops->linear_multi) {
        sy_tensor pa2;
        if (!prep(da, "layer 0 up_proj", &T2, &pa2)) {
            float *m1 = xmalloc(sizeof(float) * (size_t)(n * V)), *m2 = xmalloc(sizeof(float) * (size_t)(n * V));
            float *s2 = xmalloc(sizeof(float) * (size_t)(n * V));
            sy_tensor M1 = sy_tensor_2d(m1, SY_DTYPE_F32, n, V), M2 = sy_tensor_2d(m2, SY_DTYPE_F32, n, V);
            const sy_tensor *wp[2] = {&pa, &pa2};
            sy_tensor *op[2] = {&M1, &M2};
            th_host_set_pool(&host, dev.desc, da);
            TH_CHECK(ops->linear_multi(da, &X, 2, wp, NULL, op, &err) == SY_OK, "linear_multi: %s", err.msg);
            th_host_clear_pool(&host);
            linear(da, &X, &pa2, s2, n, V);
            TH_CHECK(!memcmp(m1, oa, sizeof(float) * (size_t)(n * V)) && !memcmp(m2, s2, sizeof(float) * (size_t)(n * V)),
                     "amx: linear_multi differs from linear");
            ops->release_weight(da, &pa2);
            free(m1);
            free(m2);
            free(s2);
        }
    }
    /* Untied: a separate lm_head.weight drops the embedding's pack; the table then multiplies on AVX512-BF16. */
    sy_tensor ph;
    if (!prep(da, "lm_head.weight", &T2, &ph)) {
        TH_CHECK(syk_amx_pack_of(&pa) == NULL, "the untied embedding kept its AMX copy");
        TH_CHECK(syk_amx_pack_of(&ph) != NULL, "lm_head.weight got no AMX copy");
        linear(da, &X, &pa, oa, n, V);
        TH_CHECK(!memcmp(oa, ob, sizeof(float) * (size_t)(n * V)),
                 "the embedding without its pack does not give the avx512-bf16 bits");
        ops->release_weight(da, &ph);
    }
    ops->release_weight(da, &pa);
    ops->release_weight(db, &pb);
    ops->release_weight(df, &pf);
    dev.desc->destroy(da);
    dev.desc->destroy(db);
    dev.desc->destroy(df);
    TH_CHECK(atomic_load(&host.live_allocs) == live0, "%ld host allocations left after release and destroy",
             atomic_load(&host.live_allocs) - live0);

    /* The OS refusing the tile state (simulated): one log line, and the AVX512-BF16 bits. */
    setenv("SY_CPU_AMX_REFUSE", "1", 1);
    char why[256];
    TH_CHECK(!syk_amx_for(SYK_ISA_AVX512, why, sizeof why) && strstr(why, "refused"),
             "simulated refusal not reported: %s", why);
    void (*const saved)(void *, sy_log_level, const char *, const char *) = host.api.log;
    host.api.log = count_log;
    amx_log_lines = 0;
    void *dr = make_dev("bf16", "auto", &err);
    host.api.log = saved;
    unsetenv("SY_CPU_AMX_REFUSE");
    TH_CHECK(dr != NULL, "create with the tiles refused: %s", err.msg);
    TH_CHECK(amx_log_lines == 1, "refusal logged %d lines about AMX, expected exactly 1", amx_log_lines);
    if (dr) {
        sy_tensor pr;
        if (!prep(dr, "model.embed_tokens.weight", &T, &pr)) {
            TH_CHECK(syk_amx_pack_of(&pr) == NULL, "refused tiles, yet the weights were repacked");
            linear(dr, &X, &pr, of, n, V);
            TH_CHECK(!memcmp(of, ob, sizeof(float) * (size_t)(n * V)), "refused tiles: not the avx512-bf16 bits");
            ops->release_weight(dr, &pr);
        }
        dev.desc->destroy(dr);
    }
    free(tab);
    free(tab2);
    free(x);
    free(oa);
    free(ob);
    free(of);
    free(o1);
    free(emb);
}

/* -------------------------------------------------------------------- moe */

static void test_moe(void)
{
    const sy_moe_ops *mo = moe.desc->ops;
    sy_err err;
    const int E = 8, K = 2, H = 200, F = 72;
    sy_moe_problem p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.n_layers = 1;
    p.n_experts = E;
    p.top_k = K;
    p.hidden = H;
    p.inter = F;
    p.scoring = SY_MOE_SOFTMAX;
    p.norm_topk_prob = 1;
    p.routed_scaling_factor = 1;
    p.weight_dtype = SY_DTYPE_BF16;
    th_rng r = {555};
    uint16_t *wbuf = xmalloc(sizeof(uint16_t) * (size_t)(3 * E * H * F));
    for (int64_t i = 0; i < 3 * E * H * F; i++)
        wbuf[i] = th_f32_to_bf16((float)th_uniform(&r, -0.3, 0.3));
    sy_tensor gate[8], up[8], down[8];
    for (int e = 0; e < E; e++) {
        gate[e] = sy_tensor_2d(wbuf + (size_t)(3 * e) * H * F, SY_DTYPE_BF16, F, H);
        up[e] = sy_tensor_2d(wbuf + (size_t)(3 * e + 1) * H * F, SY_DTYPE_BF16, F, H);
        down[e] = sy_tensor_2d(wbuf + (size_t)(3 * e + 2) * H * F, SY_DTYPE_BF16, H, F);
    }
    void *d = make_dev("f32", "auto", &err);
    TH_CHECK(d != NULL, "device: %s", err.msg);
    if (!d)
        return;
    th_host_set_pool(&host, dev.desc, d);
    void *inst[2] = {NULL, NULL};
    const char *amx[2] = {"auto", "off"};
    for (int v = 0; v < 2; v++) {
        const char *kv[] = {"isa", "avx512", "matmul", "bf16", "amx", amx[v], "max_tokens", "64", NULL};
        TH_CHECK(th_create(&moe, &host.api, kv, &inst[v], &err) == SY_OK, "moe create amx=%s: %s", amx[v], err.msg);
        TH_CHECK(inst[v] && mo->prepare(inst[v], &p, &err) == SY_OK, "moe prepare: %s", err.msg);
        TH_CHECK(inst[v] && mo->prepare_layer(inst[v], 0, gate, up, down, NULL, &err) == SY_OK,
                 "moe prepare_layer: %s", err.msg);
    }
    if (inst[0] && inst[1]) {
        const int64_t counts[] = {1, 7, 40, 100};
        for (size_t c = 0; c < 4; c++) {
            const int64_t n = counts[c];
            float *x = xmalloc(sizeof(float) * (size_t)(n * H)), *lg = xmalloc(sizeof(float) * (size_t)(n * E));
            float *o[2] = {xmalloc(sizeof(float) * (size_t)(n * H)), xmalloc(sizeof(float) * (size_t)(n * H))};
            float one[200];
            for (int64_t i = 0; i < n * H; i++)
                x[i] = (float)th_uniform(&r, -1, 1);
            for (int64_t i = 0; i < n * E; i++)
                lg[i] = (float)th_uniform(&r, -2, 2);
            const sy_tensor tx = sy_tensor_2d(x, SY_DTYPE_F32, n, H), tl = sy_tensor_2d(lg, SY_DTYPE_F32, n, E);
            for (int v = 0; v < 2; v++) {
                sy_tensor to = sy_tensor_2d(o[v], SY_DTYPE_F32, n, H);
                TH_CHECK(mo->forward(inst[v], 0, &tx, &tl, &to, &err) == SY_OK, "moe forward: %s", err.msg);
            }
            const double rel = rel_rms(o[0], o[1], n * H);
            printf("moe n=%lld: amx vs avx512-bf16 relative RMS %.2e\n", (long long)n, rel);
            /* The sums differ in order, so a few BF16 roundings of the down input flip: 2^-8 each. */
            TH_CHECK(rel < 1e-3, "moe n=%lld: amx vs avx512-bf16 relative RMS %.3g, expected < 1e-3", (long long)n, rel);
            TH_CHECK(memcmp(o[0], o[1], sizeof(float) * (size_t)(n * H)) != 0,
                     "moe n=%lld: amx gave the avx512-bf16 bits: AMX did not run", (long long)n);
            for (int64_t t = 0; t < n; t += 13) {
                const sy_tensor x1 = sy_tensor_2d(x + t * H, SY_DTYPE_F32, 1, H);
                const sy_tensor l1 = sy_tensor_2d(lg + t * E, SY_DTYPE_F32, 1, E);
                sy_tensor o1 = sy_tensor_2d(one, SY_DTYPE_F32, 1, H);
                TH_CHECK(mo->forward(inst[0], 0, &x1, &l1, &o1, &err) == SY_OK, "moe forward: %s", err.msg);
                TH_CHECK(!memcmp(one, o[0] + t * H, sizeof(float) * (size_t)H),
                         "moe amx n=%lld: token %lld alone differs from the batch", (long long)n, (long long)t);
            }
            free(x);
            free(lg);
            free(o[0]);
            free(o[1]);
        }
    }
    for (int v = 0; v < 2; v++)
        if (inst[v])
            moe.desc->destroy(inst[v]);
    th_host_clear_pool(&host);
    dev.desc->destroy(d);
    free(wbuf);
}

int main(void)
{
    char why[256];
    if (!syk_cpu_has_amx_bf16(why, sizeof why)) {
        printf("test_cpu_amx: SKIP: %s\n", why);
        return 77;
    }
    const syk_amx *amx = syk_amx_for(SYK_ISA_AVX512, why, sizeof why);
    if (!amx) {
        printf("test_cpu_amx: SKIP: the CPU has AMX-BF16 but it cannot run here: %s\n", why);
        return 77;
    }
    const syk_bf16dot *b = syk_bf16dot_for(SYK_ISA_AVX512, why, sizeof why);
    TH_CHECK(b != NULL, "AMX without the AVX512-BF16 rounding: %s", why);
    th_load("sy-device-cpu", &dev);
    th_load("sy-moe-cpu", &moe);
    th_host_init(&host);
    host.quiet = 1;
    sy_err err;
    void *inst = make_dev("bf16", "auto", &err);
    TH_CHECK(inst != NULL, "create: %s", err.msg);
    if (inst && b) {
        th_host_set_pool(&host, dev.desc, inst);
        const syk_par par = syk_par_from_host(&host.api);
        TH_CHECK(par.n_workers == 3, "pool has %d workers, expected 3", par.n_workers);
        test_kernel(amx, b, syk_kernels_for(SYK_ISA_AVX512), &par);
        th_host_clear_pool(&host);
        dev.desc->destroy(inst);
    }
    test_device();
    test_moe();
    th_unload(&moe);
    th_unload(&dev);
    return th_done("test_cpu_amx");
}
