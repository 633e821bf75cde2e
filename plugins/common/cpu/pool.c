/*
 * The worker pool (see sykpool.h). One job at a time. The job's generation,
 * its chunk count and its next chunk index share one atomic word; a worker
 * claims a chunk with a compare-and-swap on that word, so the check "this
 * generation, a chunk still left" and the claim are one snapshot. A worker
 * that wakes late (descheduled, or still asleep) can never claim a chunk of
 * a newer job, the job's other fields are stable while any of its chunks
 * is claimed, and the caller waits only for claimed chunks, never for idle
 * workers to check in. That keeps a job cheap even when the machine is
 * oversubscribed.
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
#define GEN(w) ((uint32_t)((w) >> 32))
#define NCH(w) ((uint32_t)((w) >> 16) & 0xffffu)
#define IDX(w) ((uint32_t)(w)&0xffffu)
#define MAX_CHUNKS 0xffff

struct syk_pool {
    int n;       /* workers including the caller */
    int spin_us;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int mu_ok, cv_ok;

    /* The job, written by the caller before the generation is published;
     * read by a worker only after it claimed a chunk of that generation. */
    sy_range_fn fn;
    void *arg;
    int64_t n_items, chunk;

    _Alignas(CACHELINE) atomic_uint_fast64_t word; /* generation << 32 | chunks << 16 | next chunk */
    atomic_int stop;
    atomic_int sleepers;
    _Alignas(CACHELINE) atomic_int_fast64_t completed; /* chunks finished in this generation */
    _Alignas(CACHELINE) atomic_int busy;               /* a caller owns the pool */
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

/* Claims and runs chunks of generation gen until none is left. */
static void run_chunks(syk_pool *p, uint32_t gen, int worker)
{
    for (;;) {
        uint64_t w = atomic_load_explicit(&p->word, memory_order_acquire);
        if (GEN(w) != gen || IDX(w) >= NCH(w))
            return;
        if (!atomic_compare_exchange_weak_explicit(&p->word, &w, w + 1, memory_order_acquire, memory_order_relaxed))
            continue;
        const int64_t b = (int64_t)IDX(w) * p->chunk;
        const int64_t e = b + p->chunk < p->n_items ? b + p->chunk : p->n_items;
        p->fn(p->arg, b, e, worker);
        atomic_fetch_add_explicit(&p->completed, 1, memory_order_release);
    }
}

/* Waits until the generation moves past seen; returns it, or 0 on stop. */
static uint32_t wait_job(syk_pool *p, uint32_t seen)
{
    const int64_t until = now_us() + p->spin_us;
    for (unsigned i = 1;; i++) {
        const uint32_t g = GEN(atomic_load_explicit(&p->word, memory_order_acquire));
        if (g != seen)
            return g;
        if (atomic_load_explicit(&p->stop, memory_order_relaxed))
            return 0;
        CPU_RELAX();
        if ((i & 255) == 0) {
            if (now_us() >= until)
                break;
            sched_yield(); /* cheap when idle; lets the caller run when the cores are oversubscribed */
        }
    }
    pthread_mutex_lock(&p->mu);
    /* seq_cst pairs with the caller's publish-then-check in syk_pool_run (no lost wake-up). */
    atomic_fetch_add(&p->sleepers, 1);
    uint32_t g;
    while ((g = GEN(atomic_load(&p->word))) == seen && !atomic_load(&p->stop))
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
    uint32_t seen = 0;
    for (;;) {
        const uint32_t g = wait_job(p, seen);
        if (!g)
            break;
        seen = g;
        run_chunks(p, g, wa.id);
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
    if ((n + chunk - 1) / chunk > MAX_CHUNKS)
        chunk = (n + MAX_CHUNKS - 1) / MAX_CHUNKS;
    const int64_t n_chunks = (n + chunk - 1) / chunk;
    p->fn = fn;
    p->arg = arg;
    p->n_items = n;
    p->chunk = chunk;
    atomic_store_explicit(&p->completed, 0, memory_order_relaxed);
    uint32_t gen = GEN(atomic_load_explicit(&p->word, memory_order_relaxed)) + 1;
    if (gen == 0) /* 0 means "no job yet" to a fresh worker */
        gen = 1;
    atomic_store(&p->word, (uint64_t)gen << 32 | (uint64_t)n_chunks << 16); /* seq_cst: publishes the job */
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
    run_chunks(p, gen, 0);
    for (unsigned i = 1; atomic_load_explicit(&p->completed, memory_order_acquire) < n_chunks; i++) {
        CPU_RELAX();
        if ((i & 1023) == 0)
            sched_yield(); /* a worker holding a chunk was descheduled: give it the core */
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
    atomic_init(&p->word, 0);
    atomic_init(&p->stop, 0);
    atomic_init(&p->sleepers, 0);
    atomic_init(&p->completed, 0);
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
