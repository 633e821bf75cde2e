/*
 * The host side of the plugin ABI: the sy_host service table. One per
 * engine; plugins receive a pointer to its `api` member.
 */
#ifndef SY_HOST_H
#define SY_HOST_H

#include "switchyard/plugin.h"

typedef struct sy_host_ctx {
    sy_host api; /* handed to plugins; api.ctx points back here */

    /* The device plugin's worker pool, once a device instance exists. */
    sy_device_parallel_for_fn pool_run;
    sy_device_n_workers_fn pool_n_workers;
    void *pool_inst;

    /* Simple named counters (metric_add); replaced by the metrics module later. */
    struct sy_host_metric *metrics;
    size_t n_metrics;
    void *metrics_lock; /* pthread_mutex_t* */
} sy_host_ctx;

/* Fills the table; without a pool parallel_for runs serially on the caller. */
void sy_host_init(sy_host_ctx *h);
void sy_host_fini(sy_host_ctx *h);
/* Installs the device's worker pool (from get_proc("parallel_for") / "n_workers"). */
void sy_host_set_pool(sy_host_ctx *h, sy_device_parallel_for_fn run, sy_device_n_workers_fn n_workers, void *inst);
/* Value of a counter added through metric_add (0 if never added). */
double sy_host_metric(const sy_host_ctx *h, const char *name);

#endif
