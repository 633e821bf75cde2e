/*
 * The BF16 dot-product path (`matmul = bf16`): the AVX512-BF16 kernels
 * against a double-precision reference on BF16-rounded x, the rounding of x
 * against an independent encoder, batch and thread invariance (a row's bits
 * do not depend on the rows computed with it), and the device plugin's key:
 * bf16 results near the exact ones, linear_multi equal to linear, f32 where
 * BF16 cannot run (isa = avx2), a bad value refused.
 *
 * Without AVX512_BF16 on this machine the kernel checks cannot run; the
 * fallback and key checks still do.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sykconv.h"
#include "sykern.h"
#include "test_cpu_harness.h"

static th_plugin dev;
static th_host host;

static sy_tensor view2(void *d, sy_dtype dt, int64_t r, int64_t c, int64_t ld)
{
    sy_tensor t = sy_tensor_2d(d, dt, r, c);
    t.stride[0] = ld;
    return t;
}

/* |a - ref| within an F32 summation bound over k terms of magnitude sum |x w|. */
static int near(double a, double ref, double sum_abs, int64_t k)
{
    const double tol = ((double)k / 16.0 + 16.0) * 0x1p-23 * sum_abs + 1e-30;
    return fabs(a - ref) <= tol;
}

static void test_rounding(const syk_bf16dot *b)
{
    th_rng r = {77};
    enum { N = 4099 };
    static float x[N];
    static uint16_t got[N];
    for (int i = 0; i < N; i++) {
        uint32_t u = (uint32_t)th_next(&r);
        if (i % 3 == 0) /* ties between two BF16 values */
            u = (u & 0xffff0000u) | 0x8000u;
        u = (u & 0x807fffffu) | ((uint32_t)th_int(&r, 1, 254) << 23); /* normal numbers */
        memcpy(&x[i], &u, 4);
    }
    for (int n = 0; n <= 70; n++) { /* every tail length around the 32- and 16-element steps */
        memset(got, 0xee, sizeof got);
        b->to_bf16(got, x, n);
        for (int i = 0; i < n; i++)
            TH_CHECK(got[i] == th_f32_to_bf16(x[i]), "to_bf16 n=%d [%d] %a -> 0x%04x, want 0x%04x", n, i,
                     (double)x[i], got[i], th_f32_to_bf16(x[i]));
        TH_CHECK(got[n] == 0xeeee, "to_bf16 n=%d wrote past the end", n);
    }
    b->to_bf16(got, x, N);
    int bad = 0;
    for (int i = 0; i < N; i++)
        if (got[i] != th_f32_to_bf16(x[i]) && bad++ < 5)
            TH_CHECK(0, "to_bf16 [%d] %a -> 0x%04x, want 0x%04x", i, (double)x[i], got[i], th_f32_to_bf16(x[i]));
}

/* The kernel through the GEMM driver on odd shapes, against double sums of the rounded operands. */
static void test_gemm(const syk_bf16dot *b, const syk_kernels *kern, const syk_par *par)
{
    th_rng r = {4242};
    const int64_t ns[] = {1, 2, 3, 6, 7, 8, 9, 37, 130};
    const int64_t ms[] = {1, 3, 4, 8, 13, 17, 33};
    const int64_t ks[] = {1, 31, 32, 33, 100, 1024, 1025, 2500};
    long checks = 0;
    for (size_t ia = 0; ia < sizeof ns / sizeof ns[0]; ia++)
        for (size_t ib = 0; ib < sizeof ms / sizeof ms[0]; ib++)
            for (size_t ic = 0; ic < sizeof ks / sizeof ks[0]; ic++) {
                const int64_t n = ns[ia], m = ms[ib], k = ks[ic];
                if (n * m * k > 3000000)
                    continue;
                const int64_t ldx = k + th_int(&r, 0, 3), ldw = k + th_int(&r, 0, 1) * 7, ldo = m + 1;
                float *x = malloc(sizeof(float) * (size_t)(n * ldx));
                uint16_t *xb = malloc(sizeof(uint16_t) * (size_t)(n * k));
                uint16_t *w = malloc(sizeof(uint16_t) * (size_t)(m * ldw));
                float *out = malloc(sizeof(float) * (size_t)(n * ldo));
                float *one = malloc(sizeof(float) * (size_t)ldo);
                float *par_out = malloc(sizeof(float) * (size_t)(n * ldo));
                for (int64_t i = 0; i < n * ldx; i++)
                    x[i] = (float)th_uniform(&r, -2, 2);
                for (int64_t i = 0; i < m * ldw; i++)
                    w[i] = th_f32_to_bf16((float)th_uniform(&r, -1, 1));
                syk_rows_to_bf16(b, xb, k, x, ldx, n, k, par);
                syk_gemm g = {.x = x, .ldx = ldx, .w = w, .wdtype = SY_DTYPE_BF16, .ldw = ldw, .out = out,
                              .ldo = ldo, .n = n, .m = m, .k = k, .bdot = b, .xb = xb, .ldxb = k};
                syk_gemm_tile(kern, &g, 0, n, 0, m);
                for (int64_t i = 0; i < n; i++)
                    for (int64_t j = 0; j < m; j++) {
                        double ref = 0, sa = 0;
                        for (int64_t kk = 0; kk < k; kk++) {
                            const double p = (double)th_bf16_to_f32(xb[i * k + kk]) * th_bf16_to_f32(w[j * ldw + kk]);
                            ref += p;
                            sa += fabs(p);
                        }
                        TH_CHECK(near(out[i * ldo + j], ref, sa, k), "n=%lld m=%lld k=%lld [%lld,%lld] = %.9g, want %.9g",
                                 (long long)n, (long long)m, (long long)k, (long long)i, (long long)j,
                                 (double)out[i * ldo + j], ref);
                    }
                /* Batch invariance: each row alone gives the bits it got in the batch. */
                for (int64_t i = 0; i < n; i++) {
                    syk_gemm g1 = g;
                    g1.xb = xb + i * k;
                    g1.out = one;
                    g1.n = 1;
                    syk_gemm_tile(kern, &g1, 0, 1, 0, m);
                    TH_CHECK(!memcmp(one, out + i * ldo, sizeof(float) * (size_t)m),
                             "n=%lld m=%lld k=%lld: row %lld alone differs from the batch", (long long)n, (long long)m,
                             (long long)k, (long long)i);
                }
                /* Thread invariance: the pool's split gives the serial bits. */
                g.out = par_out;
                syk_gemm_run(kern, &g, par);
                for (int64_t i = 0; i < n; i++)
                    TH_CHECK(!memcmp(par_out + i * ldo, out + i * ldo, sizeof(float) * (size_t)m),
                             "n=%lld m=%lld k=%lld: row %lld differs between serial and the pool", (long long)n,
                             (long long)m, (long long)k, (long long)i);
                checks++;
                free(x);
                free(xb);
                free(w);
                free(out);
                free(one);
                free(par_out);
            }
    printf("%ld kernel shapes checked\n", checks);
}

static void *make_dev(const char *isa, const char *matmul, sy_err *err)
{
    const char *kv[] = {"isa", isa, "threads", "3", "matmul", matmul, NULL};
    void *inst = NULL;
    if (th_create(&dev, &host.api, kv, &inst, err))
        return NULL;
    return inst;
}

static void test_device(int have_bf16)
{
    const sy_device_ops *ops = dev.desc->ops;
    sy_err err;
    void *bad = make_dev("auto", "fp8", &err);
    TH_CHECK(!bad && strstr(err.msg, "matmul") && strstr(err.msg, "fp8"), "matmul = fp8 accepted or unclear: %s",
             err.msg);

    th_rng r = {999};
    const int64_t n = 67, m = 45, k = 1500;
    float *x = malloc(sizeof(float) * n * k);
    uint16_t *w = malloc(sizeof(uint16_t) * m * k), *w2 = malloc(sizeof(uint16_t) * m * k);
    float *o_exact = malloc(sizeof(float) * n * m), *o_b = malloc(sizeof(float) * n * m);
    float *o_row = malloc(sizeof(float) * m), *o_multi = malloc(sizeof(float) * n * m);
    float *o_avx2 = malloc(sizeof(float) * n * m), *o_avx2b = malloc(sizeof(float) * n * m);
    for (int64_t i = 0; i < n * k; i++)
        x[i] = (float)th_uniform(&r, -1, 1);
    for (int64_t i = 0; i < m * k; i++) {
        w[i] = th_f32_to_bf16((float)th_uniform(&r, -1, 1));
        w2[i] = th_f32_to_bf16((float)th_uniform(&r, -1, 1));
    }
    sy_tensor X = view2(x, SY_DTYPE_F32, n, k, k), W = view2(w, SY_DTYPE_BF16, m, k, k),
              W2 = view2(w2, SY_DTYPE_BF16, m, k, k);

    /* isa = avx2 cannot run the BF16 kernels: matmul = bf16 gives the f32 bits there. */
    void *a2 = make_dev("avx2", "f32", &err);
    void *a2b = make_dev("avx2", "bf16", &err);
    if (a2 && a2b) {
        th_host_set_pool(&host, dev.desc, a2);
        sy_tensor O = view2(o_avx2, SY_DTYPE_F32, n, m, m);
        TH_CHECK(ops->linear(a2, &X, &W, NULL, &O, &err) == 0, "linear: %s", err.msg);
        th_host_set_pool(&host, dev.desc, a2b);
        sy_tensor Ob = view2(o_avx2b, SY_DTYPE_F32, n, m, m);
        TH_CHECK(ops->linear(a2b, &X, &W, NULL, &Ob, &err) == 0, "linear: %s", err.msg);
        TH_CHECK(!memcmp(o_avx2, o_avx2b, sizeof(float) * n * m), "isa=avx2 matmul=bf16 did not fall back to f32");
        th_host_clear_pool(&host);
    } else
        printf("no avx2 here: fallback check skipped (%s)\n", err.msg);
    if (a2)
        dev.desc->destroy(a2);
    if (a2b)
        dev.desc->destroy(a2b);

    if (have_bf16) {
        void *ex = make_dev("avx512", "f32", &err), *bd = make_dev("avx512", "bf16", &err);
        TH_CHECK(ex && bd, "create avx512: %s", err.msg);
        if (ex && bd) {
            th_host_set_pool(&host, dev.desc, ex);
            sy_tensor O = view2(o_exact, SY_DTYPE_F32, n, m, m);
            TH_CHECK(ops->linear(ex, &X, &W, NULL, &O, &err) == 0, "linear: %s", err.msg);
            th_host_set_pool(&host, dev.desc, bd);
            sy_tensor Ob = view2(o_b, SY_DTYPE_F32, n, m, m);
            TH_CHECK(ops->linear(bd, &X, &W, NULL, &Ob, &err) == 0, "linear: %s", err.msg);
            /* What a user sees: close to the exact product (x lost 8 of its 24 bits), yet not the same bits. */
            double num = 0, den = 0;
            int same = 1;
            for (int64_t i = 0; i < n * m; i++) {
                num += ((double)o_b[i] - o_exact[i]) * ((double)o_b[i] - o_exact[i]);
                den += (double)o_exact[i] * o_exact[i];
                same &= o_b[i] == o_exact[i];
            }
            const double rel = sqrt(num / den);
            printf("matmul=bf16 vs f32: relative RMS difference %.2e\n", rel);
            TH_CHECK(rel < 4e-3 && rel > 1e-6 && !same, "bf16 vs f32 relative RMS %.3g: expected 1e-6..4e-3", rel);
            /* A row alone gives the bits it got in the batch (decode alone == decode batched). */
            for (int64_t i = 0; i < n; i += 11) {
                sy_tensor Xi = view2(x + i * k, SY_DTYPE_F32, 1, k, k), Oi = view2(o_row, SY_DTYPE_F32, 1, m, m);
                TH_CHECK(ops->linear(bd, &Xi, &W, NULL, &Oi, &err) == 0, "linear: %s", err.msg);
                TH_CHECK(!memcmp(o_row, o_b + i * m, sizeof(float) * m), "bf16: row %lld alone differs from the batch",
                         (long long)i);
            }
            /* linear_multi shares one rounded x between the parts: the bits of separate linears. */
            if (ops->linear_multi) {
                float *o_multi2 = malloc(sizeof(float) * n * m), *o_sep2 = malloc(sizeof(float) * n * m);
                sy_tensor Om = view2(o_multi, SY_DTYPE_F32, n, m, m), Om2 = view2(o_multi2, SY_DTYPE_F32, n, m, m),
                          Os2 = view2(o_sep2, SY_DTYPE_F32, n, m, m);
                const sy_tensor *wp[2] = {&W, &W2};
                sy_tensor *op[2] = {&Om, &Om2};
                TH_CHECK(ops->linear_multi(bd, &X, 2, wp, NULL, op, &err) == 0, "linear_multi: %s", err.msg);
                TH_CHECK(ops->linear(bd, &X, &W2, NULL, &Os2, &err) == 0, "linear: %s", err.msg);
                TH_CHECK(!memcmp(o_multi, o_b, sizeof(float) * n * m) && !memcmp(o_multi2, o_sep2, sizeof(float) * n * m),
                         "bf16: linear_multi differs from linear");
                free(o_multi2);
                free(o_sep2);
            }
            th_host_clear_pool(&host);
        }
        if (ex)
            dev.desc->destroy(ex);
        if (bd)
            dev.desc->destroy(bd);
    }
    free(x);
    free(w);
    free(w2);
    free(o_exact);
    free(o_b);
    free(o_row);
    free(o_multi);
    free(o_avx2);
    free(o_avx2b);
}

int main(void)
{
    th_load("sy-device-cpu", &dev);
    th_host_init(&host);
    host.quiet = 1;
    char why[200];
    const syk_bf16dot *b = syk_bf16dot_for(SYK_ISA_AVX512, why, sizeof why);
    TH_CHECK(!syk_bf16dot_for(SYK_ISA_AVX2, NULL, 0), "BF16 kernels handed out for isa avx2");
    if (b) {
        test_rounding(b);
        /* A pool from the device plugin for the thread-invariance check. */
        sy_err err;
        void *inst = make_dev("avx512", "bf16", &err);
        TH_CHECK(inst != NULL, "create: %s", err.msg);
        if (inst) {
            th_host_set_pool(&host, dev.desc, inst);
            const syk_par par = syk_par_from_host(&host.api);
            TH_CHECK(par.n_workers == 3, "pool has %d workers, expected 3", par.n_workers);
            test_gemm(b, syk_kernels_for(SYK_ISA_AVX512), &par);
            th_host_clear_pool(&host);
            dev.desc->destroy(inst);
        }
    } else {
        printf("BF16 kernel checks not run: %s\n", why);
    }
    test_device(b != NULL);
    th_unload(&dev);
    return th_done("test_cpu_bf16dot");
}
