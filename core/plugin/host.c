/*
 * The sy_host service table handed to every plugin: logging into the
 * core's log, aligned allocation, the device's worker pool (or a serial
 * loop until a device plugin offers one), and named counters.
 */
#include "config.h"

#include "plugin/host.h"
#include "util/log.h"
#include "util/util.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct sy_host_metric {
    char *name;
    double value;
};

static void host_log(void *ctx, sy_log_level level, const char *plugin, const char *msg)
{
    (void)ctx;
    if ((int)level < SY_LOG_ERROR)
        level = SY_LOG_ERROR;
    if ((int)level > SY_LOG_DEBUG)
        level = SY_LOG_DEBUG;
    if (level > sy_log_get_level())
        return;
    /* Keep one message on one line, whatever the plugin sent. */
    char line[1024];
    size_t n = 0;
    for (const char *p = msg ? msg : ""; *p && n + 1 < sizeof line; p++)
        line[n++] = ((unsigned char)*p < 0x20 || *p == 0x7f) ? ' ' : *p;
    while (n && line[n - 1] == ' ')
        n--;
    line[n] = '\0';
    sy_log(level, "[%s] %s", plugin && *plugin ? plugin : "plugin", line);
}

static void *host_alloc(void *ctx, size_t size, size_t align)
{
    (void)ctx;
    if (align < sizeof(void *))
        align = sizeof(void *);
    if (align & (align - 1))
        return NULL;
    void *p = NULL;
    if (posix_memalign(&p, align, size ? size : 1) != 0)
        return NULL;
    return p;
}

static void host_free(void *ctx, void *ptr)
{
    (void)ctx;
    free(ptr);
}

static void host_parallel_for(void *ctx, int64_t n, int64_t grain, sy_range_fn fn, void *arg)
{
    sy_host_ctx *h = ctx;
    if (n <= 0 || !fn)
        return;
    if (h && h->pool_run) {
        h->pool_run(h->pool_inst, n, grain, fn, arg);
        return;
    }
    fn(arg, 0, n, 0);
}

static int host_n_workers(void *ctx)
{
    sy_host_ctx *h = ctx;
    if (h && h->pool_run && h->pool_n_workers) {
        int n = h->pool_n_workers(h->pool_inst);
        return n > 0 ? n : 1;
    }
    return 1;
}

static void host_metric_add(void *ctx, const char *name, double v)
{
    sy_host_ctx *h = ctx;
    if (!h || !name || !h->metrics_lock)
        return;
    pthread_mutex_lock(h->metrics_lock);
    size_t i = 0;
    while (i < h->n_metrics && strcmp(h->metrics[i].name, name) != 0)
        i++;
    if (i == h->n_metrics) {
        /* Grow by one: the table holds a handful of counters. */
        struct sy_host_metric *m = realloc(h->metrics, (h->n_metrics + 1) * sizeof *m);
        char *copy = m ? sy_strdup(name) : NULL;
        if (m)
            h->metrics = m;
        if (!copy) {
            pthread_mutex_unlock(h->metrics_lock);
            return; /* out of memory: the sample is dropped, never fatal */
        }
        h->metrics[i].name = copy;
        h->metrics[i].value = 0;
        h->n_metrics++;
    }
    h->metrics[i].value += v;
    pthread_mutex_unlock(h->metrics_lock);
}

void sy_host_init(sy_host_ctx *h)
{
    if (!h)
        return;
    memset(h, 0, sizeof *h);
    h->api.struct_size = (uint32_t)sizeof h->api;
    h->api.abi_major = SY_ABI_MAJOR;
    h->api.abi_minor = SY_ABI_MINOR;
    h->api.ctx = h;
    h->api.log = host_log;
    h->api.alloc = host_alloc;
    h->api.free = host_free;
    h->api.parallel_for = host_parallel_for;
    h->api.n_workers = host_n_workers;
    h->api.metric_add = host_metric_add;
    pthread_mutex_t *mu = malloc(sizeof *mu);
    if (mu && pthread_mutex_init(mu, NULL) == 0)
        h->metrics_lock = mu;
    else
        free(mu); /* metrics are then dropped; nothing else depends on them */
}

void sy_host_fini(sy_host_ctx *h)
{
    if (!h)
        return;
    for (size_t i = 0; i < h->n_metrics; i++)
        free(h->metrics[i].name);
    free(h->metrics);
    h->metrics = NULL;
    h->n_metrics = 0;
    if (h->metrics_lock) {
        pthread_mutex_destroy(h->metrics_lock);
        free(h->metrics_lock);
        h->metrics_lock = NULL;
    }
    h->pool_run = NULL;
    h->pool_n_workers = NULL;
    h->pool_inst = NULL;
}

void sy_host_set_pool(sy_host_ctx *h, sy_device_parallel_for_fn run, sy_device_n_workers_fn n_workers, void *inst)
{
    if (!h)
        return;
    h->pool_run = run;
    h->pool_n_workers = run ? n_workers : NULL;
    h->pool_inst = run ? inst : NULL;
}

double sy_host_metric(const sy_host_ctx *h, const char *name)
{
    if (!h || !name || !h->metrics_lock)
        return 0;
    double v = 0;
    pthread_mutex_lock(h->metrics_lock);
    for (size_t i = 0; i < h->n_metrics; i++)
        if (strcmp(h->metrics[i].name, name) == 0)
            v = h->metrics[i].value;
    pthread_mutex_unlock(h->metrics_lock);
    return v;
}
