/*
 * Shared scaffolding for the cpu plugin tests: loading a plugin from
 * $SY_PLUGIN_DIR with dlopen, a minimal sy_host (log, counted alloc/free,
 * parallel_for over the device plugin's pool once installed), a seeded RNG,
 * 16-bit float encoders written independently of the plugins' own, and
 * failure reporting that keeps going and counts.
 */
#ifndef SY_TEST_CPU_HARNESS_H
#define SY_TEST_CPU_HARNESS_H

#include <stdatomic.h>
#include <stdint.h>

#include "switchyard/plugin.h"

/* ---------------------------------------------------------------- reports */

void th_fail(const char *file, int line, const char *fmt, ...) SY__PRINTF(3, 4);
#define TH_CHECK(cond, ...)                                  \
    do {                                                     \
        if (!(cond))                                         \
            th_fail(__FILE__, __LINE__, __VA_ARGS__);        \
    } while (0)
/* Number of failures so far. */
int th_failures(void);
/* Prints the summary; the process exit code. */
int th_done(const char *name);

/* ---------------------------------------------------------------- plugins */

typedef struct th_plugin {
    char path[4096];
    void *dl;
    const sy_plugin_desc *desc;
} th_plugin;

/* Loads $SY_PLUGIN_DIR/<base>.so; exits the test (failure) when impossible. */
void th_load(const char *base, th_plugin *p);
void th_unload(th_plugin *p);

typedef struct th_host {
    sy_host api;
    atomic_long live_allocs;
    sy_device_parallel_for_fn pool_run;
    sy_device_n_workers_fn pool_n;
    void *pool_inst;
    int quiet; /* drop INFO/DEBUG log lines */
} th_host;

void th_host_init(th_host *h);
/* Routes host->parallel_for to a device plugin instance's pool (get_proc). */
void th_host_set_pool(th_host *h, const sy_plugin_desc *dev, void *inst);
void th_host_clear_pool(th_host *h);

/*
 * Creates an instance with the plugin's declared defaults, overridden by
 * $SWITCHYARD_SET's assignments for the plugin's section (keys it declares,
 * as the engine binds them: make check pins device.matmul / moe.matmul =
 * f32 there), overridden by kv = {"key", "value", ..., NULL}. Returns the
 * status; *inst on success.
 */
int th_create(const th_plugin *p, const sy_host *h, const char *const *kv, void **inst, sy_err *err);
/*
 * The value th_create would give key: kv's, else $SWITCHYARD_SET's for the
 * plugin's section, else the declared default. Copied into buf; NULL when
 * the plugin declares no such key.
 */
const char *th_key_value(const th_plugin *p, const char *const *kv, const char *key, char *buf, size_t cap);

/* ------------------------------------------------------------------- data */

typedef struct th_rng {
    uint64_t s;
} th_rng;
uint64_t th_next(th_rng *r);
double th_uniform(th_rng *r, double lo, double hi);
int th_int(th_rng *r, int lo, int hi); /* inclusive */

uint16_t th_f32_to_bf16(float f); /* round to nearest even */
float th_bf16_to_f32(uint16_t h);
uint16_t th_f32_to_f16(float f);  /* round to nearest even (the compiler's _Float16) */
float th_f16_to_f32(uint16_t h);
/* Rounds f through dtype and back (identity for F32). */
float th_round_to(sy_dtype dt, float f);
/* Element i of a F32/F16/BF16 buffer, as double. */
double th_get(const void *buf, sy_dtype dt, int64_t i);
/* Stores f into element i of a F32/F16/BF16 buffer. */
void th_put(void *buf, sy_dtype dt, int64_t i, float f);

/* Names of the ISAs to test: every one the plugin accepts here (create succeeds). */
int th_isas(const th_plugin *dev, const sy_host *h, const char **out, int max);

#endif
