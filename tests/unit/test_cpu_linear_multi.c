/*
 * linear_multi (the optional device op the engine uses for q/k/v and gate/up)
 * equals separate linear calls bit for bit, on every ISA the machine has,
 * every weight dtype, 1 and 3 threads, with and without biases, on strided
 * views; and refuses n out of 1..8 and overlapping outputs.
 */
#include "config.h"
#include "test_cpu_harness.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static th_plugin dev;
static th_host host;
static const sy_device_ops *ops;
static sy_tensor view2(void *d, sy_dtype dt, int64_t r, int64_t c, int64_t ld) {
    sy_tensor t = sy_tensor_2d(d, dt, r, c);
    t.stride[0] = ld;
    return t;
}
int main(void) {
    th_load("sy-device-cpu", &dev);
    th_host_init(&host);
    ops = dev.desc->ops;
    TH_CHECK(ops->struct_size >= offsetof(sy_device_ops, linear_multi) + sizeof ops->linear_multi && ops->linear_multi,
             "no linear_multi");
    const char *isas[3];
    int ni = th_isas(&dev, &host.api, isas, 3);
    const sy_dtype dts[3] = {SY_DTYPE_F32, SY_DTYPE_F16, SY_DTYPE_BF16};
    long checks = 0;
    for (int ii = 0; ii < ni; ii++)
        for (int th = 1; th <= 3; th += 2) {
            char ts[8];
            snprintf(ts, sizeof ts, "%d", th);
            const char *kv[] = {"isa", isas[ii], "threads", ts, NULL};
            void *inst = NULL;
            sy_err err;
            if (th_create(&dev, &host.api, kv, &inst, &err)) {
                TH_CHECK(0, "create %s", err.msg);
                continue;
            }
            th_host_set_pool(&host, dev.desc, inst);
            th_rng r = {0x1234u + (uint64_t)ii};
            for (int di = 0; di < 3; di++) {
                sy_dtype dt = dts[di];
                const int64_t ns[] = {1, 2, 3, 5, 6, 7, 9, 130, 257};
                for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++) {
                    int64_t n = ns[a];
                    int np = 1 + th_int(&r, 0, 4);
                    int64_t k = th_int(&r, 1, 2100);
                    int64_t ldx = k + th_int(&r, 0, 3);
                    int64_t m[8];
                    const sy_tensor *wp[8], *bp[8];
                    sy_tensor W[8], B[8], O1[8], O2[8];
                    sy_tensor *op1[8], *op2[8];
                    float *x = malloc(sizeof(float) * n * ldx);
                    for (int64_t i = 0; i < n * ldx; i++)
                        x[i] = (float)th_uniform(&r, -1, 1);
                    sy_tensor X = view2(x, SY_DTYPE_F32, n, k, ldx);
                    void *wb[8], *bb[8];
                    float *o1[8], *o2[8];
                    int withb = th_int(&r, 0, 1);
                    for (int p = 0; p < np; p++) {
                        m[p] = th_int(&r, 1, 300);
                        int64_t ldw = k + th_int(&r, 0, 2);
                        wb[p] = malloc((size_t)(m[p] * ldw) * (dt == SY_DTYPE_F32 ? 4 : 2));
                        for (int64_t i = 0; i < m[p] * ldw; i++)
                            th_put(wb[p], dt, i, (float)th_uniform(&r, -1, 1));
                        W[p] = view2(wb[p], dt, m[p], k, ldw);
                        wp[p] = &W[p];
                        bb[p] = NULL;
                        bp[p] = NULL;
                        if (withb && th_int(&r, 0, 2)) {
                            bb[p] = malloc((size_t)m[p] * 4);
                            for (int64_t i = 0; i < m[p]; i++)
                                th_put(bb[p], dt, i, (float)th_uniform(&r, -1, 1));
                            sy_tensor_init(&B[p], bb[p], dt, 1, &m[p]);
                            bp[p] = &B[p];
                        }
                        int64_t ldo = m[p] + th_int(&r, 0, 2);
                        o1[p] = malloc(sizeof(float) * n * ldo);
                        o2[p] = malloc(sizeof(float) * n * ldo);
                        for (int64_t i = 0; i < n * ldo; i++) {
                            o1[p][i] = NAN;
                            o2[p][i] = NAN;
                        }
                        O1[p] = view2(o1[p], SY_DTYPE_F32, n, m[p], ldo);
                        O2[p] = view2(o2[p], SY_DTYPE_F32, n, m[p], ldo);
                        op1[p] = &O1[p];
                        op2[p] = &O2[p];
                        int rc = ops->linear(inst, &X, wp[p], bp[p], op1[p], &err);
                        TH_CHECK(rc == 0, "linear %s", err.msg);
                    }
                    int rc = ops->linear_multi(inst, &X, np, wp, withb ? bp : NULL, op2, &err);
                    TH_CHECK(rc == 0, "linear_multi %s", err.msg);
                    for (int p = 0; p < np; p++) {
                        int64_t ldo = O1[p].stride[0];
                        for (int64_t i = 0; i < n; i++) {
                            if (memcmp(o1[p] + i * ldo, o2[p] + i * ldo, sizeof(float) * m[p])) {
                                TH_CHECK(0, "%s th%d %s n=%lld part %d m=%lld k=%lld row %lld differs", isas[ii], th,
                                         sy_dtype_name(dt), (long long)n, p, (long long)m[p], (long long)k,
                                         (long long)i);
                                break;
                            }
                            /* withb==0 -> bias NULL in multi but separate linear also NULL */
                        }
                        checks++;
                        free(wb[p]);
                        free(bb[p]);
                        free(o1[p]);
                        free(o2[p]);
                    }
                    free(x);
                }
            }
            /* errors: n out of range, overlapping outputs */
            {
                float x[4] = {1, 2, 3, 4}, w[8] = {0}, o[4];
                sy_tensor X = view2(x, SY_DTYPE_F32, 1, 4, 4), Wt = view2(w, SY_DTYPE_F32, 2, 4, 4),
                          O = view2(o, SY_DTYPE_F32, 1, 2, 2);
                const sy_tensor *wp[2] = {&Wt, &Wt};
                sy_tensor *op[2] = {&O, &O};
                TH_CHECK(ops->linear_multi(inst, &X, 0, wp, NULL, op, &err) == SY_ERR_INVALID, "n=0 accepted");
                TH_CHECK(ops->linear_multi(inst, &X, 9, wp, NULL, op, &err) == SY_ERR_INVALID, "n=9 accepted");
                TH_CHECK(ops->linear_multi(inst, &X, 2, wp, NULL, op, &err) == SY_ERR_INVALID &&
                             strstr(err.msg, "overlaps"),
                         "overlap accepted: %s", err.msg);
            }
            th_host_clear_pool(&host);
            dev.desc->destroy(inst);
        }
    printf("%ld part checks\n", checks);
    th_unload(&dev);
    return th_done("test_cpu_linear_multi");
}
