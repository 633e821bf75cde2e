/*
 * Recorded decode steps (CUDA graphs), [device] graphs = on.
 *
 * A decode step's body (embed through the lm_head linear) launches about
 * ten kernels per layer; for small batches the host's launch overhead is
 * most of the step. A step whose key (sequences, rows that predict, bound
 * on the context length) comes back is recorded once through the device's
 * graph ops and replayed after. The first step of a key runs op by op, so
 * every device buffer has grown to that shape before a recording (a
 * recording cannot allocate); the second records and replays; later ones
 * restage the attention tables and replay. The step's host arrays
 * (e->ids, e->pos, e->sel_rows and the batch's tables) come from the
 * device's host_alloc, so a replay reads the values forward.c wrote this
 * step. The head (greedy picks, logits downloads) waits for the device and
 * stays outside, op by op.
 *
 * Any failure while recording or replaying ends graphs for this engine:
 * one warning naming what failed and why, the step runs op by op, and so
 * does every later one.
 */
#include "config.h"

#include "engine/engine_internal.h"
#include "util/log.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

int32_t sy_graphs_ctx_bound(int64_t max_end, int64_t cap)
{
    if (max_end <= 0 || max_end > cap || cap > INT32_MAX)
        return 0;
    int64_t b = SY_GRAPHS_MIN_BOUND;
    while (b < max_end)
        b *= 2;
    return (int32_t)(b < cap ? b : cap);
}

static bool dev_has_graph_ops(const sy_device_ops *d)
{
    return d->struct_size >= offsetof(sy_device_ops, graph_free) + sizeof d->graph_free && d->host_alloc &&
           d->host_free && d->graph_begin && d->graph_end && d->graph_launch && d->graph_free;
}

static bool attn_has_stage(const sy_attn_ops *a)
{
    return a->struct_size >= offsetof(sy_attn_ops, stage) + sizeof a->stage && a->stage;
}

void sy__graphs_init(sy_engine *e, const sy_config *cfg)
{
    sy_graphs *g = &e->graphs;
    memset(g, 0, sizeof *g);
    const char *v = sy_config_get(cfg, "device", "graphs");
    if (!v || strcmp(v, "on") != 0)
        return;
    const char *dn = e->device->plugin->desc->name, *an = e->attn->plugin->desc->name;
    /* Why each case stays op by op: the plugin cannot record or restage; collectives run on the comm plugin's
     * own terms (host-side transports, their own streams); latent attention reads its cache on the host. */
    const char *why = !dev_has_graph_ops(e->dev)  ? "the device plugin has no graph ops"
                      : !attn_has_stage(e->att)   ? "the attention plugin has no stage op"
                      : e->tp_size > 1            ? "tensor parallel steps are not recorded"
                      : e->mla                    ? "multi-head latent attention (forward_mla.c) reads the host"
                                                  : NULL;
    if (why) {
        sy_warn("[device] graphs = on: decode steps run op by op: %s (device %s, attention %s)", why, dn, an);
        return;
    }
    g->on = true;
    sy_info("[device] graphs = on: repeated decode steps are recorded and replayed (device %s, attention %s)", dn, an);
}

void sy__graphs_free(sy_engine *e)
{
    sy_graphs *g = &e->graphs;
    for (int i = 0; i < g->n_slots; i++)
        if (g->slot[i].graph)
            e->dev->graph_free(e->device->inst, g->slot[i].graph);
    g->n_slots = 0;
}

void *sy__engine_step_alloc(sy_engine *e, size_t bytes)
{
    if (!e->graphs.on)
        return malloc(bytes);
    sy_err err = {{0}};
    void *p = e->dev->host_alloc(e->device->inst, bytes, &err);
    if (!p)
        sy_warn("device %s: host_alloc of %zu bytes: %s", e->device->plugin->desc->name, bytes, err.msg);
    return p;
}

void sy__engine_step_free(sy_engine *e, void *p)
{
    if (!p)
        return;
    if (e->graphs.on)
        e->dev->host_free(e->device->inst, p);
    else
        free(p);
}

/* The slot for key: a new one (the least recently used recording makes way when all are taken), or NULL when
 * the key has a slot already (then *found is it). */
static sy_graph_slot *slot_for(sy_engine *e, const sy_graph_key *key, sy_graph_slot **found)
{
    sy_graphs *g = &e->graphs;
    *found = NULL;
    for (int i = 0; i < g->n_slots; i++)
        if (memcmp(&g->slot[i].key, key, sizeof *key) == 0) {
            *found = &g->slot[i];
            return NULL;
        }
    sy_graph_slot *s;
    if (g->n_slots < SY_GRAPHS_MAX) {
        s = &g->slot[g->n_slots++];
    } else {
        s = &g->slot[0];
        for (int i = 1; i < g->n_slots; i++)
            if (g->slot[i].last_use < s->last_use)
                s = &g->slot[i];
        if (s->graph)
            e->dev->graph_free(e->device->inst, s->graph);
    }
    memset(s, 0, sizeof *s);
    s->key = *key;
    return s;
}

/* Records the step's body into s->graph; *what names the failing part. */
static int record(sy_engine *e, sy_graph_slot *s, const sy_attn_batch *b, int32_t T, int32_t n_sel,
                  const char **what, sy_err *err)
{
    void *di = e->device->inst;
    *what = "graph_begin";
    int rc = e->dev->graph_begin(di, err);
    if (rc)
        return rc;
    sy_err end_err = {{0}};
    const int body = sy__engine_forward_body(e, b, T, n_sel, err);
    void *graph = NULL;
    /* Always ended, so the device stops recording whatever happened in between. */
    rc = e->dev->graph_end(di, &graph, body ? &end_err : err);
    if (body) {
        *what = "recording the step";
        if (!rc && graph)
            e->dev->graph_free(di, graph);
        return body;
    }
    if (rc) {
        *what = "graph_end";
        return rc;
    }
    s->graph = graph;
    return SY_OK;
}

/* Ends graphs for this engine after a failure: the warning, the recordings freed. */
static void give_up(sy_engine *e, const char *what, const sy_err *why)
{
    sy_warn("[device] graphs: %s failed: %s; this and every later step run op by op (device %s, attention %s)", what,
            why->msg, e->device->plugin->desc->name, e->attn->plugin->desc->name);
    sy__graphs_free(e);
    e->graphs.broken = true;
}

int sy__graphs_step(sy_engine *e, const sy_attn_batch *b, int32_t T, int32_t n_sel, sy_err *err)
{
    sy_graphs *g = &e->graphs;
    int32_t bound = 0;
    /* Plain decode steps only (one token per sequence): a speculative verify step carries 1 + k tokens per
     * sequence (and as many rows that predict), so it always runs op by op. */
    if (g->on && !g->broken && T == b->n_seqs && n_sel > 0) {
        int64_t max_end = 0;
        for (int32_t s = 0; s < b->n_seqs; s++)
            max_end = (int64_t)b->ctx_len[s] + 1 > max_end ? (int64_t)b->ctx_len[s] + 1 : max_end;
        int64_t cap = (int64_t)e->max_blocks_per_seq * e->kv.block_size;
        cap = cap < e->max_seq_len ? cap : e->max_seq_len;
        bound = sy_graphs_ctx_bound(max_end, cap);
    }
    if (!bound) {
        g->eager++;
        return sy__engine_forward_body(e, b, T, n_sel, err);
    }
    const sy_graph_key key = {.n_seqs = b->n_seqs, .n_sel = n_sel, .ctx_bound = bound};
    sy_attn_batch rb = *b;
    rb.ctx_bound = bound;
    sy_graph_slot *s = NULL, *fresh = slot_for(e, &key, &s);
    if (fresh) { /* first sight: op by op with the recording's launch sizes, which grows every buffer for it */
        fresh->last_use = ++g->tick;
        g->eager++;
        return sy__engine_forward_body(e, &rb, T, n_sel, err);
    }
    s->last_use = ++g->tick;
    sy_err why = {{0}};
    const char *what = NULL;
    int rc = SY_OK;
    if (!s->graph) {
        if (!(rc = record(e, s, &rb, T, n_sel, &what, &why)))
            g->recorded++;
    }
    if (!rc) {
        what = "attention stage";
        rc = e->att->stage(e->attn->inst, &rb, &why);
    }
    if (!rc) {
        what = "graph_launch";
        rc = e->dev->graph_launch(e->device->inst, s->graph, &why);
    }
    if (!rc) {
        g->replays++;
        return SY_OK;
    }
    give_up(e, what, &why);
    g->eager++;
    return sy__engine_forward_body(e, b, T, n_sel, err);
}

void sy_engine_graph_stats(const sy_engine *e, sy_engine_graph_counts *out)
{
    out->on = e->graphs.on && !e->graphs.broken;
    out->replays = e->graphs.replays;
    out->recorded = e->graphs.recorded;
    out->eager = e->graphs.eager;
}
