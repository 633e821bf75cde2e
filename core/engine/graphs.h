/*
 * Recorded decode steps (CUDA graphs): the engine's side. A decode step
 * (one new token per sequence) whose shape was seen before is recorded
 * once through the device's graph ops and then replayed instead of
 * calling every op again. graphs.c; the device and attention ops it uses
 * are described in include/switchyard/plugin.h.
 */
#ifndef SY_ENGINE_GRAPHS_H
#define SY_ENGINE_GRAPHS_H

#include <stdbool.h>
#include <stdint.h>

/* Most recorded steps kept per engine; the least recently used goes first. */
#define SY_GRAPHS_MAX 64
/* The smallest context bound a recording is made for. */
#define SY_GRAPHS_MIN_BOUND 256

/* What a recording is valid for: the step's sequences, rows that predict, and the bound on their lengths. */
typedef struct sy_graph_key {
    int32_t n_seqs, n_sel, ctx_bound;
} sy_graph_key;

typedef struct sy_graph_slot {
    sy_graph_key key;
    void *graph;       /* NULL: seen once, run eagerly (warming every buffer to its size); recorded next time */
    uint64_t last_use;
} sy_graph_slot;

typedef struct sy_graphs {
    bool on;     /* [device] graphs = on, and the device, attention and model allow it (sy__graphs_init) */
    bool broken; /* a recording or replay failed: every later step runs eagerly */
    sy_graph_slot slot[SY_GRAPHS_MAX];
    int n_slots;
    uint64_t tick;
    uint64_t replays, recorded, eager; /* steps replayed, recordings made, steps run op by op */
} sy_graphs;

/*
 * The context bound a recording for a step whose longest sequence ends at
 * max_end tokens is made for: the next power of two >= max_end, at least
 * SY_GRAPHS_MIN_BOUND, clamped to cap (the most a sequence can hold); 0 when
 * max_end is past cap or not positive (never recorded).
 */
int32_t sy_graphs_ctx_bound(int64_t max_end, int64_t cap);

#endif
