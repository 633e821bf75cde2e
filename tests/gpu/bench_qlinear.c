/*
 * bench_qlinear: device linear on one [m, k] weight in BF16, FP8 E4M3
 * (128x128 block scales) and NVFP4, at a few activation batches n, through
 * the device plugin exactly as the engine calls it. Prints a table of
 * microseconds per call and the weight bytes read per second. Random codes
 * and scales: speed only, the values are not checked (test_cuda_ops does).
 * A table printer, not a test: it asserts nothing about speed.
 *
 * usage: bench_qlinear [--plugin-dir DIR] [--device NAME] [--m M] [--k K] [--iters N]
 *        (defaults: $SY_PLUGIN_DIR, cuda, 14336 x 4096, 50)
 */
#include "config.h"

#include "plugin/config.h"
#include "plugin/host.h"
#include "plugin/loader.h"
#include "util/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void die(const char *what, const sy_err *err)
{
    fprintf(stderr, "bench_qlinear: %s: %s\n", what, err->msg);
    exit(1);
}

int main(int argc, char **argv)
{
    const char *dir = getenv("SY_PLUGIN_DIR"), *dev_name = "cuda";
    int64_t m = 14336, k = 4096;
    int iters = 50;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--plugin-dir") == 0)
            dir = argv[i + 1];
        else if (strcmp(argv[i], "--device") == 0)
            dev_name = argv[i + 1];
        else if (strcmp(argv[i], "--m") == 0)
            m = atoll(argv[i + 1]);
        else if (strcmp(argv[i], "--k") == 0)
            k = atoll(argv[i + 1]);
        else if (strcmp(argv[i], "--iters") == 0)
            iters = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "usage: bench_qlinear [--plugin-dir DIR] [--device NAME] [--m M] [--k K] [--iters N]\n");
            return 2;
        }
    }
    if (!dir || m < 1 || k < 16 || k % 16 || iters < 1) {
        fprintf(stderr, "bench_qlinear: need a plugin directory, m >= 1, k a multiple of 16, iters >= 1\n");
        return 2;
    }
    sy_err err = {{0}};
    sy_loader *ld = sy_loader_new(dir, NULL);
    sy_config *cfg = sy_config_new();
    sy_host_ctx host;
    sy_host_init(&host);
    sy_plugin *p = NULL;
    sy_plugin_inst *pi = NULL;
    if (!ld || !cfg || sy_loader_resolve(ld, SY_KIND_DEVICE, dev_name, NULL, &host.api, &p, &err) ||
        sy_plugin_create(p, &host.api, cfg, "device", &pi, &err))
        die(dev_name, &err);
    const sy_device_ops *d = pi->ops;
    void *inst = pi->inst;

    const size_t nel = (size_t)(m * k);
    uint8_t *codes = malloc(nel * 2);
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < nel * 2; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        codes[i] = (uint8_t)(s >> 32) & 0x77; /* small positive/negative codes: no Inf/NaN in any format */
    }
    const int64_t sc_n = (m + 127) / 128 * ((k + 127) / 128), sc4_n = m * (k / 16);
    float *sc8 = malloc(sizeof(float) * (size_t)sc_n);
    uint8_t *sc4 = malloc((size_t)sc4_n);
    for (int64_t i = 0; i < sc_n; i++)
        sc8[i] = 1.0f / 64;
    memset(sc4, 0x38, (size_t)sc4_n); /* E4M3 1.0 */

    static const int64_t ns[] = {1, 2, 4, 8, 16, 64};
    static const sy_dtype dts[] = {SY_DTYPE_BF16, SY_DTYPE_FP8_E4M3, SY_DTYPE_FP4_E2M1};
    printf("device %s, weight [%lld x %lld], %d calls each\n\n", pi->plugin->desc->name, (long long)m, (long long)k,
           iters);
    printf("| weights | n | us/call | weight GB/s |\n|---|---:|---:|---:|\n");
    for (size_t di = 0; di < sizeof dts / sizeof dts[0]; di++) {
        sy_tensor h = sy_tensor_2d(codes, dts[di], m, k), w;
        if (dts[di] == SY_DTYPE_FP8_E4M3) {
            h.scale = sc8, h.scale_dtype = SY_DTYPE_F32, h.scale_block[0] = 128, h.scale_block[1] = 128;
        } else if (dts[di] == SY_DTYPE_FP4_E2M1) {
            h.scale = sc4, h.scale_dtype = SY_DTYPE_FP8_E4M3, h.scale_block[0] = 1, h.scale_block[1] = 16;
        }
        if (d->prepare_weight(inst, "w", &h, &w, &err))
            die("prepare_weight", &err);
        const double wbytes = (double)sy_tensor_nbytes(&h) +
                              (dts[di] == SY_DTYPE_FP8_E4M3 ? 4.0 * (double)sc_n
                               : dts[di] == SY_DTYPE_FP4_E2M1 ? (double)sc4_n : 0.0);
        for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
            const int64_t n = ns[ni];
            sy_tensor x = sy_tensor_2d(NULL, SY_DTYPE_F32, n, k), o = sy_tensor_2d(NULL, SY_DTYPE_F32, n, m);
            float *xh = calloc((size_t)(n * k), sizeof(float));
            for (int64_t i = 0; i < n * k; i++)
                xh[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
            if (d->alloc(inst, &x, &err) || d->alloc(inst, &o, &err) ||
                d->upload(inst, &x, xh, sizeof(float) * (size_t)(n * k), &err))
                die("alloc", &err);
            int rc = d->linear(inst, &x, &w, NULL, &o, &err) || d->synchronize(inst, &err); /* warm-up */
            const double t0 = now_s();
            for (int it = 0; !rc && it < iters; it++)
                rc = d->linear(inst, &x, &w, NULL, &o, &err);
            rc = rc || d->synchronize(inst, &err);
            const double us = (now_s() - t0) / iters * 1e6;
            if (rc)
                die("linear", &err);
            printf("| %s | %lld | %.1f | %.0f |\n", sy_dtype_name(dts[di]), (long long)n, us, wbytes / us * 1e-3);
            d->free(inst, &x);
            d->free(inst, &o);
            free(xh);
        }
        d->release_weight(inst, &w);
    }
    free(codes), free(sc8), free(sc4);
    sy_plugin_inst_destroy(pi);
    sy_host_fini(&host);
    sy_config_free(cfg);
    sy_loader_free(ld);
    return 0;
}
