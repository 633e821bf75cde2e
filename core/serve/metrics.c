#include "config.h"

#include "serve/metrics.h"
#include "switchyard/plugin.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Time to first token spans queueing and prefill: milliseconds to minutes. */
static const double TTFT_BOUNDS[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
                                     0.75,  1.0,   2.5,  5.0,  7.5,  10.0, 20.0, 40.0, 80.0};
/* Time per output token: one decode step, sub-millisecond on a GPU to a second on a big CPU model. */
static const double TPOT_BOUNDS[] = {0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04,
                                     0.05,  0.075,  0.1,   0.15,   0.2,  0.3,   0.4,  0.5,   0.75, 1.0};
/* Whole requests: up to long generations. */
static const double E2E_BOUNDS[] = {0.01, 0.05, 0.1, 0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0,
                                    15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0};

#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))

void sy_serve_metrics_init(sy_serve_metrics *m)
{
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->lock, NULL);
    m->ttft.bounds = TTFT_BOUNDS;
    m->ttft.n_bounds = N(TTFT_BOUNDS);
    m->tpot.bounds = TPOT_BOUNDS;
    m->tpot.n_bounds = N(TPOT_BOUNDS);
    m->e2e.bounds = E2E_BOUNDS;
    m->e2e.n_bounds = N(E2E_BOUNDS);
}

void sy_serve_metrics_fini(sy_serve_metrics *m) { pthread_mutex_destroy(&m->lock); }

void sy_hist_observe(sy_hist *h, double v)
{
    int i = 0;
    while (i < h->n_bounds && v > h->bounds[i])
        i++;
    h->counts[i]++;
    h->sum += v;
    h->n++;
}

static int emit(sy_buf *out, const char *fmt, ...) SY__PRINTF(2, 3);
static int emit(sy_buf *out, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -1;
    return sy_buf_append(out, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

static int metric(sy_buf *out, const char *name, const char *type, const char *help, const char *model, double v)
{
    return emit(out, "# HELP %s %s\n# TYPE %s %s\n%s{model_name=\"%s\"} %.17g\n", name, help, name, type, name, model,
                v);
}

static int hist(sy_buf *out, const char *name, const char *help, const char *model, const sy_hist *h)
{
    if (emit(out, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name))
        return -1;
    uint64_t cum = 0;
    for (int i = 0; i < h->n_bounds; i++) {
        cum += h->counts[i];
        if (emit(out, "%s_bucket{model_name=\"%s\",le=\"%g\"} %llu\n", name, model, h->bounds[i],
                 (unsigned long long)cum))
            return -1;
    }
    cum += h->counts[h->n_bounds];
    return emit(out, "%s_bucket{model_name=\"%s\",le=\"+Inf\"} %llu\n%s_sum{model_name=\"%s\"} %.17g\n"
                     "%s_count{model_name=\"%s\"} %llu\n",
                name, model, (unsigned long long)cum, name, model, h->sum, name, model, (unsigned long long)h->n);
}

int sy_serve_metrics_render(sy_serve_metrics *m, const char *model, sy_buf *out)
{
    pthread_mutex_lock(&m->lock);
    const double usage = m->kv_total > 0 ? (double)m->kv_used / (double)m->kv_total : 0.0;
    int rc = 0;
    rc |= metric(out, "switchyard_num_requests_running", "gauge", "Requests in the running batch.", model,
                 (double)m->running);
    rc |= metric(out, "switchyard_num_requests_waiting", "gauge", "Requests waiting to be scheduled.", model,
                 (double)m->waiting);
    rc |= metric(out, "switchyard_kv_blocks_used", "gauge", "KV cache blocks held by requests.", model,
                 (double)m->kv_used);
    rc |= metric(out, "switchyard_kv_blocks_total", "gauge", "KV cache blocks in the pool.", model,
                 (double)m->kv_total);
    rc |= metric(out, "switchyard_kv_blocks_cached", "gauge", "Idle KV blocks kept for prefix reuse (evictable).",
                 model, (double)m->kv_cached);
    rc |= metric(out, "switchyard_kv_cache_usage_ratio", "gauge", "Fraction of KV blocks held by requests.", model,
                 usage);
    rc |= metric(out, "switchyard_prompt_tokens_total", "counter", "Prompt tokens received.", model,
                 (double)m->prompt_tokens);
    rc |= metric(out, "switchyard_generation_tokens_total", "counter", "Tokens generated.", model,
                 (double)m->generation_tokens);
    rc |= metric(out, "switchyard_prefix_cache_hit_tokens_total", "counter",
                 "Prompt tokens served from the prefix cache instead of computed.", model, (double)m->cached_tokens);
    rc |= metric(out, "switchyard_num_preemptions_total", "counter", "Requests preempted for KV blocks (recomputed).",
                 model, (double)m->preemptions);
    rc |= metric(out, "switchyard_engine_steps_total", "counter", "Engine steps run.", model, (double)m->steps);
    rc |= metric(out, "switchyard_graphs_enabled", "gauge",
                 "1 while [device] graphs records and replays decode steps; 0 when off, not possible with these "
                 "plugins, or after a recording or replay failed.",
                 model, m->graphs_on ? 1.0 : 0.0);
    rc |= metric(out, "switchyard_graph_replays_total", "counter", "Engine steps replayed from a recorded graph.",
                 model, (double)m->graph_replays);
    rc |= metric(out, "switchyard_graph_recordings_total", "counter", "Decode steps recorded as graphs.", model,
                 (double)m->graph_recordings);
    rc |= metric(out, "switchyard_graph_eager_steps_total", "counter",
                 "Engine steps run op by op (graphs off, a step shape seen the first time, prefill, a fallback).",
                 model, (double)m->graph_eager_steps);
    static const char *const spec_names[4] = {"none", "ngram", "mtp", "draft"};
    static const struct {
        const char *name, *help;
        size_t off;
    } spec_counters[] = {
        {"switchyard_spec_draft_tokens_total", "Speculative draft tokens proposed and verified.",
         offsetof(sy_serve_metrics, spec_draft_tokens)},
        {"switchyard_spec_accepted_tokens_total", "Speculative draft tokens accepted.",
         offsetof(sy_serve_metrics, spec_accepted_tokens)},
        {"switchyard_spec_verifies_total", "Speculative verifications (one per speculating sequence and step).",
         offsetof(sy_serve_metrics, spec_verifies)},
    };
    for (size_t c = 0; c < sizeof spec_counters / sizeof spec_counters[0]; c++) {
        const uint64_t *v = (const uint64_t *)(const void *)((const char *)m + spec_counters[c].off);
        rc |= emit(out, "# HELP %s %s\n# TYPE %s counter\n", spec_counters[c].name, spec_counters[c].help,
                   spec_counters[c].name);
        for (int k = 1; k < 4; k++)
            rc |= emit(out, "%s{model_name=\"%s\",method=\"%s\"} %llu\n", spec_counters[c].name, model, spec_names[k],
                       (unsigned long long)v[k]);
    }
    rc |= emit(out, "# HELP switchyard_requests_total Finished requests by outcome.\n"
                    "# TYPE switchyard_requests_total counter\n"
                    "switchyard_requests_total{model_name=\"%s\",outcome=\"finished\"} %llu\n"
                    "switchyard_requests_total{model_name=\"%s\",outcome=\"aborted\"} %llu\n"
                    "switchyard_requests_total{model_name=\"%s\",outcome=\"failed\"} %llu\n",
               model, (unsigned long long)m->requests_ok, model, (unsigned long long)m->requests_aborted, model,
               (unsigned long long)m->requests_failed);
    rc |= hist(out, "switchyard_time_to_first_token_seconds", "Time from submission to the first token.", model,
               &m->ttft);
    rc |= hist(out, "switchyard_time_per_output_token_seconds", "Time between consecutive output tokens.", model,
               &m->tpot);
    rc |= hist(out, "switchyard_e2e_request_latency_seconds", "Time from submission to the last event.", model,
               &m->e2e);
    pthread_mutex_unlock(&m->lock);
    return rc ? -1 : 0;
}
