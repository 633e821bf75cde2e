/*
 * The worker pool (see sykpool.h). One job at a time: the caller publishes
 * the job and bumps a generation counter; workers grab chunks from an
 * atomic cursor; the caller works too and then waits for every worker to
 * check in, so the job description is never rewritten under a late reader.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sykpool.h"

#if defined(__x86_64__) || defined(__i386__)
#define CPU_RELAX() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define CPU_RELAX() __asm__ volatile("yield")
#else
#define CPU_RELAX() ((void)0)
#endif

/* Fields written by workers each job sit on their own cache lines. */
#define CACHELINE 64

struct syk_pool {
    int n;       /* workers including the caller */
    int spin_us;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int mu_ok, cv_ok;

    /* The job, written by the caller before gen is bumped. */
    sy_range_fn fn;
    void *arg;
    int64_t n_items, chunk, n_chunks;

    _Alignas(CACHELINE) atomic_uint_fast64_t gen;
    atomic_int stop;
    atomic_int sleepers;
    _Alignas(CACHELINE) atomic_int_fast64_t next; /* next chunk to hand out */
    _Alignas(CACHELINE) atomic_int done;          /* workers done with this gen */
    _Alignas(CACHELINE) atomic_int busy;          /* a caller owns the pool */
};

typedef struct worker_arg {
    syk_pool *pool;
    int id;
} worker_arg;

int syk_online_cpus(void)
{
#ifdef CPU_COUNT
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int c = CPU_COUNT(&set);
        if (c > 0)
            return c;
    }
#endif
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    return c > 0 ? (int)c : 1;
}

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void do_chunks(syk_pool *p, int worker)
{
    const int64_t n_chunks = p->n_chunks;
    for (;;) {
        const int64_t c = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
        if (c >= n_chunks)
            return;
        const int64_t b = c * p->chunk;
        const int64_t e = b + p->chunk < p->n_items ? b + p->chunk : p->n_items;
        p->fn(p->arg, b, e, worker);
    }
}

/* Waits until gen moves past seen; returns the new gen, or 0 on stop. */
static uint64_t wait_job(syk_pool *p, uint64_t seen)
{
    const int64_t until = now_us() + p->spin_us;
    for (unsigned i = 1;; i++) {
        const uint64_t g = atomic_load_explicit(&p->gen, memory_order_acquire);
        if (g != seen)
            return g;
        if (atomic_load_explicit(&p->stop, memory_order_relaxed))
            return 0;
        CPU_RELAX();
        if ((i & 255) == 0 && now_us() >= until)
            break;
    }
    pthread_mutex_lock(&p->mu);
    /* seq_cst pairs with the caller's bump-then-check in syk_pool_run (no lost wake-up). */
    atomic_fetch_add(&p->sleepers, 1);
    uint64_t g;
    while ((g = atomic_load(&p->gen)) == seen && !atomic_load(&p->stop))
        pthread_cond_wait(&p->cv, &p->mu);
    atomic_fetch_sub(&p->sleepers, 1);
    pthread_mutex_unlock(&p->mu);
    return atomic_load(&p->stop) ? 0 : g;
}

static void *worker_main(void *a)
{
    worker_arg wa = *(worker_arg *)a;
    free(a);
    syk_pool *p = wa.pool;
    uint64_t seen = 0;
    for (;;) {
        const uint64_t g = wait_job(p, seen);
        if (!g)
            break;
        seen = g;
        do_chunks(p, wa.id);
        atomic_fetch_add_explicit(&p->done, 1, memory_order_acq_rel);
    }
    return NULL;
}

int syk_pool_size(const syk_pool *p)
{
    return p ? p->n : 1;
}

void syk_pool_run(void *pool, int64_t n, int64_t grain, sy_range_fn fn, void *arg)
{
    syk_pool *p = pool;
    if (n <= 0)
        return;
    if (grain < 1)
        grain = 1;
    int expect = 0;
    if (!p || p->n <= 1 || n <= grain ||
        !atomic_compare_exchange_strong_explicit(&p->busy, &expect, 1, memory_order_acquire, memory_order_relaxed)) {
        fn(arg, 0, n, 0);
        return;
    }
    /* About four chunks per worker balances uneven chunks without much cursor traffic. */
    int64_t chunk = (n + (int64_t)p->n * 4 - 1) / ((int64_t)p->n * 4);
    if (chunk < grain)
        chunk = grain;
    p->fn = fn;
    p->arg = arg;
    p->n_items = n;
    p->chunk = chunk;
    p->n_chunks = (n + chunk - 1) / chunk;
    atomic_store_explicit(&p->next, 0, memory_order_relaxed);
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    atomic_fetch_add(&p->gen, 1); /* seq_cst: publishes the job */
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
    do_chunks(p, 0);
    const int others = p->n - 1;
    for (unsigned i = 1; atomic_load_explicit(&p->done, memory_order_acquire) < others; i++) {
        CPU_RELAX();
        /* A worker descheduled by another process: give it the core. */
        if ((i & 4095) == 0)
            sched_yield();
    }
    atomic_store_explicit(&p->busy, 0, memory_order_release);
}

int syk_pool_create(int n_threads, int spin_us, syk_pool **out, sy_err *err)
{
    *out = NULL;
    if (n_threads < 1)
        n_threads = 1;
    syk_pool *p = aligned_alloc(CACHELINE, (sizeof *p + CACHELINE - 1) / CACHELINE * CACHELINE);
    if (!p)
        return sy_err_set(err, SY_ERR_NOMEM, "cannot allocate a worker pool");
    memset(p, 0, sizeof *p);
    p->n = 1;
    p->spin_us = spin_us < 0 ? 0 : spin_us;
    atomic_init(&p->gen, 0);
    atomic_init(&p->stop, 0);
    atomic_init(&p->sleepers, 0);
    atomic_init(&p->next, 0);
    atomic_init(&p->done, 0);
    atomic_init(&p->busy, 0);
    if (pthread_mutex_init(&p->mu, NULL) == 0)
        p->mu_ok = 1;
    if (pthread_cond_init(&p->cv, NULL) == 0)
        p->cv_ok = 1;
    if (!p->mu_ok || !p->cv_ok) {
        syk_pool_destroy(p);
        return sy_err_set(err, SY_ERR_UNAVAILABLE, "cannot initialise the worker pool's mutex/condvar");
    }
    if (n_threads > 1) {
        p->threads = calloc((size_t)n_threads - 1, sizeof *p->threads);
        if (!p->threads) {
            syk_pool_destroy(p);
            return sy_err_set(err, SY_ERR_NOMEM, "cannot allocate %d worker threads", n_threads - 1);
        }
    }
    for (int i = 1; i < n_threads; i++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (!wa) {
            syk_pool_destroy(p);
            return sy_err_set(err, SY_ERR_NOMEM, "cannot allocate worker %d", i);
        }
        wa->pool = p;
        wa->id = i;
        const int rc = pthread_create(&p->threads[i - 1], NULL, worker_main, wa);
        if (rc) {
            free(wa);
            syk_pool_destroy(p);
            return sy_err_set(err, SY_ERR_UNAVAILABLE, "cannot start worker thread %d of %d: %s", i, n_threads - 1,
                              strerror(rc));
        }
        p->n = i + 1; /* destroy joins exactly the threads started so far */
    }
    *out = p;
    return SY_OK;
}

void syk_pool_destroy(syk_pool *p)
{
    if (!p)
        return;
    if (p->mu_ok && p->cv_ok) {
        pthread_mutex_lock(&p->mu);
        atomic_store(&p->stop, 1);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
    for (int i = 1; i < p->n; i++)
        pthread_join(p->threads[i - 1], NULL);
    free(p->threads);
    if (p->cv_ok)
        pthread_cond_destroy(&p->cv);
    if (p->mu_ok)
        pthread_mutex_destroy(&p->mu);
    free(p);
}
