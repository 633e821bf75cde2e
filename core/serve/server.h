/*
 * The serving engine thread and the host serving API (sy_serving_api).
 * The server runs the scheduler's step loop on its own thread, sleeping on
 * a condition variable when there is nothing to do. Frontend threads reach
 * it only through submit/cancel, which queue work under a mutex and wake
 * the loop; the loop never touches frontend state (events go through each
 * request's on_event, on the engine thread).
 *
 * On a tensor-parallel rank 0 the loop also wakes while idle to send the
 * followers heartbeats, and when the group breaks (a rank died or timed
 * out) it fails every request, stops accepting and raises SIGTERM in its
 * own process, which `switchyard serve` takes as its stop signal.
 */
#ifndef SY_SERVER_H
#define SY_SERVER_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/engine.h"
#include "serve/scheduler.h"

typedef struct sy_server sy_server;

typedef struct sy_server_opts {
    int32_t max_waiting;  /* submissions queued beyond this get SY_ERR_UNAVAILABLE */
    const char *model_id; /* the name /v1/models shows; NULL: the model directory's base name */
    const sy_config *config; /* read for [speculative] (sy_sched_enable_spec); NULL: no speculative decoding */
} sy_server_opts;

/*
 * Attaches a server to an engine (which it does not own, and which must
 * outlive it) and installs the serving API on the engine's host table, so
 * plugins created with that host afterwards can submit. The thread does
 * not run until sy_server_start (submissions queue until then).
 */
int sy_server_new(sy_engine *e, const sy_server_opts *opts, sy_server **out, sy_err *err);
int sy_server_start(sy_server *s, sy_err *err);
/*
 * Stops taking submissions (ready() turns 0) and waits up to timeout_s
 * seconds for every queued and running request to finish. Returns true
 * when all finished.
 */
bool sy_server_drain(sy_server *s, double timeout_s);
/* Waits up to timeout_s seconds until nothing is queued or running; true when so. */
bool sy_server_wait_idle(sy_server *s, double timeout_s);
/*
 * Stops taking submissions and ends every queued and running request
 * (DONE "abort", on the engine thread); returns once they are gone. The
 * server stays up, so frontends may still call it (cancel, metrics) while
 * they stop.
 */
void sy_server_abort_all(sy_server *s);
/* Aborts what is left, joins the thread, detaches from the host and frees. */
void sy_server_free(sy_server *s);

/* true once the tensor-parallel group failed (why gets the reason); the server then refuses work. */
bool sy_server_failed(sy_server *s, char *why, size_t n);

/* The host table frontends get (the engine's, with serving set). */
const sy_host *sy_server_host(sy_server *s);
/* The same table the host offers (for in-process callers and tests). */
const sy_serving_api *sy_server_api(sy_server *s);

/* Scheduler numbers, taken after the last step (thread-safe). */
typedef struct sy_server_stats {
    sy_sched_stats sched;
    int32_t incoming; /* submitted, not yet seen by the engine thread */
} sy_server_stats;
void sy_server_stats_get(sy_server *s, sy_server_stats *st);

#endif
