/*
 * `switchyard plugin-check`: runs a plugin's operations against a float64
 * reference on seeded random inputs and prints one row per op and case.
 * The reference is written here, independently of every plugin, so the
 * in-tree CPU plugins are checked by the same yardstick as third-party ones.
 */
#ifndef SY_PLUGINCHECK_H
#define SY_PLUGINCHECK_H

#include <stddef.h>
#include <stdint.h>

#include "switchyard/plugin.h"

typedef struct sy_pc {
    const sy_plugin_desc *desc;
    const char *path;
    const sy_host *host;
    /* The validated keys the first instance was created with; every case
     * makes a fresh instance from them, so one case's state cannot hide or
     * cause another's failure. */
    const sy_kv *cfg;
    size_t n_cfg;
    int speed;        /* time each op instead of checking it */
    double min_time;  /* seconds each timed op runs for, at least */
    uint64_t rng;
    int n_ok, n_fail, n_skip;
    /* Called after a device instance is created, so the host's
     * parallel_for runs on its workers as it does in the engine. */
    void (*on_device)(void *user, const sy_plugin_desc *d, void *inst);
    void *user;
    /* A moe plugin of a device other than the host's (--device): its
     * tensors are allocated, filled and read back through this device
     * plugin; NULL: host memory. */
    const sy_device_ops *dev_ops;
    void *dev_inst;
} sy_pc;

enum { SY_PC_OK = 0, SY_PC_FAIL = 1, SY_PC_SKIP = 2 };

/* Prints a result row and counts it. err/tol < 0: not applicable. */
void sy_pc_row(sy_pc *pc, const char *op, const char *cas, int verdict, double err, double tol, const char *note);
/* Prints a timing row: microseconds per call and, when work > 0, work/us in the unit. */
void sy_pc_time_row(sy_pc *pc, const char *op, const char *cas, double us, long runs, double work, const char *unit);
/* The same with note (NULL or "": none) after the rate, e.g. "of 2400 peak (amx-bf16)". */
void sy_pc_time_row_note(sy_pc *pc, const char *op, const char *cas, double us, long runs, double work, const char *unit,
                         const char *note);

/* Uniform in [-1, 1). */
float sy_pc_rand(sy_pc *pc);
uint32_t sy_pc_rand_u32(sy_pc *pc);
/* Fills n floats with scale * uniform[-1, 1). */
void sy_pc_fill(sy_pc *pc, float *x, size_t n, float scale);

/* max |got - ref| / max(1, max |ref|): one number that is an absolute error
 * for small values and a relative one for large, over a whole output. */
double sy_pc_err(const float *got, const double *ref, size_t n);

/* Monotonic seconds. */
double sy_pc_now(void);

/* Rounds an F32 value through a 16-bit dtype (what a weight stored as F16
 * or BF16 holds), and converts between F32 arrays and those dtypes. */
uint16_t sy_pc_f32_to_half(float f, sy_dtype dt);
float sy_pc_half_to_f32(uint16_t h, sy_dtype dt);

int sy_pc_check_device(sy_pc *pc);
int sy_pc_check_attn(sy_pc *pc);
int sy_pc_check_moe(sy_pc *pc);
int sy_pc_check_comm(sy_pc *pc);
int sy_pc_check_frontend(sy_pc *pc);
/* What a frontend gets as host->serving here: never ready, serves nothing. */
const sy_serving_api *sy_pc_fake_serving(void);

/* Instance helpers: create from pc->cfg; errors become a FAIL row for op. */
void *sy_pc_create(sy_pc *pc, const char *op, const char *cas);
void sy_pc_destroy(sy_pc *pc, void *inst);

#endif
