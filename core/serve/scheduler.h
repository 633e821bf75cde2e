/*
 * Continuous batching on one engine. Between steps requests join (FCFS
 * from a waiting queue) and leave (finished, cancelled). A step carries
 * every running decode first, then prefill chunks filling what is left of
 * max_batch_tokens. KV blocks are taken from the pool as sequences grow;
 * full blocks are shared across requests through the prefix cache. When
 * blocks run out the youngest running request is preempted: its blocks are
 * freed and it goes back to the front of the queue to be recomputed.
 * Engine thread only.
 */
#ifndef SY_SCHEDULER_H
#define SY_SCHEDULER_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/engine.h"
#include "serve/metrics.h"
#include "serve/seq.h"

typedef struct sy_sched sy_sched;

/* metrics may be NULL. The engine and metrics must outlive the scheduler. */
int sy_sched_new(sy_engine *e, sy_serve_metrics *metrics, sy_sched **out, sy_err *err);
/*
 * Speculative decoding: reads [speculative] from cfg (absent or method =
 * none: nothing changes) and builds its draft source on the scheduler's
 * engine; decoding sequences then verify drafts (core/spec/spec.h). Call
 * once, before the first step. Errors name the key and file:line.
 */
int sy_sched_enable_spec(sy_sched *s, const sy_config *cfg, sy_err *err);
/* The [speculative] num_draft_tokens this scheduler drafts per sequence and step; 0 when it does not speculate.
 * Fixed once sy_sched_enable_spec returned, so another thread may read it (a submit checking a request). */
int32_t sy_sched_spec_k(const sy_sched *s);
/* Tests only: replaces the verification rule (sy_sampler_verify) to show that a broken one is caught. */
void sy__sched_set_verify_rule(sy_sched *s, int32_t (*rule)(sy_sampler *smp, const float *dist, int32_t draft,
                                                             bool *accepted));
/* Tests only: replaces the draft source sy_sched_enable_spec built (freed here); the scheduler owns src now. */
struct sy_spec_source;
void sy__sched_set_spec_source(sy_sched *s, struct sy_spec_source *src);
/* Aborts whatever is left (DONE "abort") and frees everything. */
void sy_sched_free(sy_sched *s);

/* Queues a request at the back of the waiting queue (the scheduler owns it now). */
void sy_sched_add(sy_sched *s, sy_seq *q);
/* Ends a request now: frees its blocks, sends DONE "abort". False when unknown. */
bool sy_sched_cancel(sy_sched *s, uint64_t id);
/* Ends every request with DONE "abort". */
void sy_sched_abort_all(sy_sched *s);

/*
 * Plans and runs one step, then processes its outputs (events on this
 * thread). Returns the number of sequences stepped (0 when there was
 * nothing to do). An engine failure fails the step's requests (ERROR
 * events) and is returned (< 0) with err set; the scheduler stays usable.
 */
int sy_sched_step(sy_sched *s, sy_err *err);

typedef struct sy_sched_stats {
    int32_t running, waiting;
    int32_t kv_total, kv_free, kv_cached_idle, kv_cached;
    uint64_t steps, preemptions, cached_tokens;
    /* Speculative decoding (0 when off): drafts verified, of them accepted, sequence verifications. */
    uint64_t spec_draft_tokens, spec_accepted_tokens, spec_verifies;
    const char *spec_method; /* "none", "ngram", "mtp", "draft" */
} sy_sched_stats;
void sy_sched_stats_get(const sy_sched *s, sy_sched_stats *st);
/* No running or waiting request. */
bool sy_sched_idle(const sy_sched *s);

#endif
