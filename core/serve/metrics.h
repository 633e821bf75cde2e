/*
 * Serving metrics: counters, gauges and latency histograms, written by the
 * engine thread and read by frontends (GET /metrics) on theirs, hence the
 * lock. Rendered in the Prometheus text exposition format.
 */
#ifndef SY_SERVE_METRICS_H
#define SY_SERVE_METRICS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "serve/text_filter.h"

#define SY_HIST_MAX_BUCKETS 24

typedef struct sy_hist {
    const double *bounds; /* upper bounds in seconds, ascending */
    int n_bounds;
    uint64_t counts[SY_HIST_MAX_BUCKETS]; /* per bucket (not cumulative); [n_bounds] is +Inf */
    double sum;
    uint64_t n;
} sy_hist;

typedef struct sy_serve_metrics {
    pthread_mutex_t lock;
    /* Gauges, set after each step. */
    int64_t running, waiting, kv_used, kv_total, kv_cached;
    /* Counters. */
    uint64_t prompt_tokens, generation_tokens, cached_tokens, preemptions, steps;
    uint64_t requests_ok, requests_aborted, requests_failed;
    /* [device] graphs, copied from sy_engine_graph_stats after each step: whether
     * recording is in use (a gauge: it drops to 0 when a recording or replay failed),
     * decode steps replayed, recordings made, steps run op by op. */
    bool graphs_on;
    uint64_t graph_replays, graph_recordings, graph_eager_steps;
    /* Speculative decoding, indexed by sy_spec_method (core/spec/spec.h; [0], none, stays 0): drafts
     * verified, drafts accepted, sequence verifications. */
    uint64_t spec_draft_tokens[4], spec_accepted_tokens[4], spec_verifies[4];
    sy_hist ttft, tpot, e2e;
} sy_serve_metrics;

void sy_serve_metrics_init(sy_serve_metrics *m);
void sy_serve_metrics_fini(sy_serve_metrics *m);
/* Caller holds m->lock. */
void sy_hist_observe(sy_hist *h, double v);
/* Renders the exposition text; 0, or -1 when out of memory. */
int sy_serve_metrics_render(sy_serve_metrics *m, const char *model, sy_buf *out);

#endif
