/*
 * The engine on the CPU plugins with a [scheduler] device_sampling mode,
 * for the tests that compare device picks with host picks
 * (test_device_sampling.c, test_device_sampled.c). NULL with the reason on
 * stderr.
 */
#ifndef SY_TEST_ENGINE_SAMPLING_H
#define SY_TEST_ENGINE_SAMPLING_H

#include <stdio.h>
#include <stdlib.h>

#include "engine/engine.h"

static sy_engine *open_engine(const char *model, const char *mode)
{
    sy_err err = {{0}};
    sy_config *cfg = sy_config_new();
    char path[4200], ds[64];
    snprintf(path, sizeof path, "model.path=%s", model);
    snprintf(ds, sizeof ds, "scheduler.device_sampling=%s", mode);
    const char *sets[] = {"device.plugin=cpu", "attention.plugin=cpu", "moe.plugin=cpu", "comm.plugin=local",
                          path, ds};
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++)
        if (sy_config_set(cfg, sets[i], &err)) {
            fprintf(stderr, "FAIL --set %s: %s\n", sets[i], err.msg);
            sy_config_free(cfg);
            return NULL;
        }
    sy_engine *e = NULL;
    const sy_engine_opts eo = {.plugin_dirs = getenv("SY_PLUGIN_DIR")};
    if (sy_engine_open(cfg, &eo, &e, &err)) {
        fprintf(stderr, "FAIL engine on %s (device_sampling %s): %s\n", model, mode, err.msg);
        e = NULL;
    }
    sy_config_free(cfg);
    return e;
}

#endif
