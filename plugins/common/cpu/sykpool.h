/*
 * A persistent worker pool: n-1 threads plus the calling thread. Workers
 * spin briefly after each job (the next op of a forward pass usually comes
 * within microseconds) and then sleep on a condition variable, so an idle
 * server costs no CPU. No allocation and no thread creation per job.
 *
 * A job that arrives while another runs (a second plugin instance on
 * another thread, or a nested call from inside a job) runs serially on its
 * caller as worker 0 instead of waiting: the pool never deadlocks and never
 * oversubscribes the cores.
 */
#ifndef SY_CPU_SYKPOOL_H
#define SY_CPU_SYKPOOL_H

#include <stddef.h>
#include <stdint.h>

#include "switchyard/plugin.h"

typedef struct syk_pool syk_pool;

/* Number of CPUs this process may run on (affinity mask), at least 1. */
int syk_online_cpus(void);

/*
 * n_threads: total workers including the caller (>= 1). spin_us: how long
 * an idle worker polls before sleeping. SY_OK, or SY_ERR_NOMEM /
 * SY_ERR_UNAVAILABLE (thread creation failed) with the reason in err.
 */
int syk_pool_create(int n_threads, int spin_us, syk_pool **out, sy_err *err);
/* Joins the workers. The pool must be idle. */
void syk_pool_destroy(syk_pool *p);
/*
 * Splits [0, n) into chunks of at least grain items and runs fn on them,
 * the caller included; returns when every chunk is done. Signature of
 * sy_device_parallel_for_fn with the pool as the instance.
 */
void syk_pool_run(void *pool, int64_t n, int64_t grain, sy_range_fn fn, void *arg);
/* Workers including the caller: the bound on fn's worker argument. */
int syk_pool_size(const syk_pool *p);

#endif
