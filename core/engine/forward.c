/*
 * One engine step through the plugins, llama2.c-style: read it top to
 * bottom. T = tokens in the step, H = hidden, D = head_dim, F = ffn width,
 * V = vocab, S = sequences wanting logits.
 */
#include "config.h"

#include "engine/engine_internal.h"
#include "engine/sampler.h"
#include "util/log.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int alloc_act(sy_engine *e, sy_tensor *t, int64_t rows, int64_t cols, sy_err *err)
{
    int64_t shape[2] = {rows, cols};
    sy_tensor_init(t, NULL, SY_DTYPE_F32, 2, shape);
    return e->dev->alloc(e->device->inst, t, err);
}

int sy__engine_alloc_activations(sy_engine *e, sy_err *err)
{
    const sy_model_config *c = e->mc;
    const int64_t T = e->max_batch_tokens;
    const int64_t S = e->max_seqs;
    const int64_t R = e->max_sel > S ? e->max_sel : S; /* rows that predict: more than S with verify steps */
    /* Widths of this rank's share (all of it without tensor parallelism). */
    const int64_t tp = e->tp_size;
    int64_t F = (c->intermediate > c->moe_inter ? c->intermediate : c->moe_inter) / tp;
    if ((int64_t)c->n_shared_experts * c->moe_inter / tp > F) /* the shared experts' MLP uses gate/up too */
        F = (int64_t)c->n_shared_experts * c->moe_inter / tp;
    if (F <= 0)
        F = 1;
    const int64_t Nh = c->n_heads / tp, Nkv = c->n_kv_heads / tp;
    int rc;
    if ((rc = alloc_act(e, &e->h, T, c->hidden, err)) || (rc = alloc_act(e, &e->xn, T, c->hidden, err)) ||
        (rc = alloc_act(e, &e->q, T, Nh * c->head_dim, err)) ||
        (rc = alloc_act(e, &e->k, T, Nkv * c->head_dim, err)) ||
        (rc = alloc_act(e, &e->v, T, Nkv * c->head_dim, err)) ||
        (rc = alloc_act(e, &e->att_out, T, Nh * c->head_dim, err)) ||
        (rc = alloc_act(e, &e->proj, T, c->hidden, err)) || (rc = alloc_act(e, &e->gate, T, F, err)) ||
        (rc = alloc_act(e, &e->up, T, F, err)) ||
        (rc = alloc_act(e, &e->router, T, c->n_experts > 0 ? c->n_experts : 1, err)) ||
        (rc = alloc_act(e, &e->sel, R, c->hidden, err)) || (rc = alloc_act(e, &e->logits, R, e->vocab_local, err)))
        return rc;
    if (c->n_shared_experts > 0 && (rc = alloc_act(e, &e->sh_out, T, c->hidden, err)))
        return rc;
    if (tp > 1) {
        if ((rc = alloc_act(e, &e->gathered, tp * R, e->vocab_local, err)))
            return rc;
        /* Greedy picks travel between ranks as F32 (value, id) pairs: past 2^24 an id would not be exact. */
        e->tp_pick_pairs = c->vocab <= (1 << 24);
        if (!e->tp_pick_pairs && e->dev_argmax) {
            sy_info("tensor parallelism: a vocabulary of %d tokens is past 2^24: greedy picks on the host", c->vocab);
            e->dev_argmax = false;
        }
        if ((rc = alloc_act(e, &e->picks, R, 2, err)) || (rc = alloc_act(e, &e->picks_gathered, tp * R, 2, err)))
            return rc;
        e->gathered_host = malloc(sizeof(float) * (size_t)(tp * R) * (size_t)e->vocab_local);
        e->picks_host = malloc(sizeof(float) * 2 * (size_t)(tp * R));
        e->ids_local = malloc(sizeof(int32_t) * (size_t)T);
        if (!e->gathered_host || !e->picks_host || !e->ids_local)
            return sy_err_set(err, SY_ERR_NOMEM, "cannot allocate the tensor-parallel logits for %lld sequences",
                              (long long)S);
    }
    /* Where a replayed step reads them (graphs.c): the device's host memory with graphs on. */
    e->ids = sy__engine_step_alloc(e, sizeof(int32_t) * (size_t)T);
    e->pos = sy__engine_step_alloc(e, sizeof(int32_t) * (size_t)T);
    e->tok_start = sy__engine_step_alloc(e, sizeof(int32_t) * (size_t)(S + 1));
    e->ctx_len = sy__engine_step_alloc(e, sizeof(int32_t) * (size_t)S);
    e->sel_rows = sy__engine_step_alloc(e, sizeof(int32_t) * (size_t)R);
    e->block_table = sy__engine_step_alloc(e, sizeof(int32_t) * (size_t)S * (size_t)e->max_blocks_per_seq);
    e->greedy_dst = malloc(sizeof(int32_t *) * (size_t)R);
    e->pick_ids = malloc(sizeof(int32_t) * (size_t)R);
    e->pick_vals = malloc(sizeof(float) * (size_t)R);
    e->sample_rows = malloc(sizeof(sy_sample_row) * (size_t)R);
    e->sample_prob = malloc(sizeof(float) * (size_t)c->vocab);
    e->sample_idx = malloc(sizeof(int32_t) * (size_t)c->vocab);
    if (!e->ids || !e->pos || !e->tok_start || !e->ctx_len || !e->sel_rows || !e->block_table || !e->greedy_dst ||
        !e->pick_ids || !e->pick_vals || !e->sample_rows || !e->sample_prob || !e->sample_idx)
        return sy_err_set(err, SY_ERR_NOMEM, "cannot allocate the step tables for %lld tokens", (long long)T);
    return SY_OK;
}

void sy__engine_free_activations(sy_engine *e)
{
    sy_tensor *ts[] = {&e->h, &e->xn, &e->q, &e->k, &e->v, &e->att_out, &e->proj,
                       &e->gate, &e->up, &e->router, &e->sel, &e->logits, &e->gathered, &e->sh_out,
                       &e->picks, &e->picks_gathered};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
        if (ts[i]->data && e->dev)
            e->dev->free(e->device->inst, ts[i]);
    int32_t *step_arrays[] = {e->ids, e->pos, e->tok_start, e->ctx_len, e->sel_rows, e->block_table};
    for (size_t i = 0; i < sizeof step_arrays / sizeof step_arrays[0]; i++)
        sy__engine_step_free(e, step_arrays[i]);
    free(e->gathered_host);
    free(e->picks_host);
    free(e->greedy_dst);
    free(e->pick_ids);
    free(e->pick_vals);
    free(e->sample_rows);
    free(e->sample_prob);
    free(e->sample_idx);
    e->sample_rows = NULL;
    e->sample_prob = NULL;
    e->sample_idx = NULL;
    e->greedy_dst = NULL;
    e->pick_ids = NULL;
    e->pick_vals = NULL;
    e->picks_host = NULL;
    free(e->ids_local);
    e->gathered_host = NULL;
    e->ids_local = NULL;
    e->ids = e->pos = e->tok_start = e->ctx_len = e->sel_rows = e->block_table = NULL;
}

/* The first rows of a preallocated activation. */
static sy_tensor rows(const sy_tensor *t, int64_t n)
{
    sy_tensor v = *t;
    v.shape[0] = n;
    return v;
}

/* Rows [first, first + n) of a preallocated 2-D activation. */
static sy_tensor rows_from(const sy_tensor *t, int64_t first, int64_t n)
{
    sy_tensor v = rows(t, n);
    v.data = (char *)t->data + (size_t)(first * t->stride[0]) * sizeof(float);
    return v;
}

/* A 2-D activation seen as [rows * heads, cols / heads] (per-head ops). */
static sy_tensor per_head(const sy_tensor *t, int64_t n, int64_t heads)
{
    int64_t shape[2] = {n * heads, t->shape[1] / heads};
    sy_tensor v;
    sy_tensor_init(&v, t->data, t->dtype, 2, shape);
    v.device = t->device;
    return v;
}

/*
 * Linears of one input as one device op when the device has linear_multi
 * (decided once at open: e->linear_multi), else one call each. The results
 * are the same either way.
 */
static int linears(const sy_device_ops *dev, void *di, bool multi, const sy_tensor *x, int32_t n,
                   const sy_tensor *const *w, const sy_tensor *const *bias, sy_tensor *const *out, sy_err *err)
{
    if (n > 1 && multi)
        return dev->linear_multi(di, x, n, w, bias, out, err);
    for (int32_t i = 0; i < n; i++) {
        int rc = dev->linear(di, x, w[i], bias ? bias[i] : NULL, out[i], err);
        if (rc)
            return rc;
    }
    return SY_OK;
}

/* DeepSeek-V3 / GLM: proj += the shared experts' dense MLP of xn. */
static int shared_experts(sy_engine *e, const sy_layer_weights *w, int32_t T, const sy_tensor *xn, sy_tensor *proj,
                          sy_err *err)
{
    const sy_device_ops *dev = e->dev;
    void *di = e->device->inst;
    sy_tensor gate = rows(&e->gate, T), up = rows(&e->up, T), out = rows(&e->sh_out, T);
    gate.shape[1] = up.shape[1] = w->sh_gate.shape[0];
    gate.stride[0] = up.stride[0] = gate.shape[1];
    const sy_tensor *ws[2] = {&w->sh_gate, &w->sh_up};
    sy_tensor *os[2] = {&gate, &up};
    int rc;
    if ((rc = linears(dev, di, e->linear_multi, xn, 2, ws, NULL, os, err)) ||
        (rc = dev->silu_mul(di, &gate, &up, &gate, err)) || (rc = dev->linear(di, &gate, &w->sh_down, NULL, &out, err)))
        return rc;
    return dev->add(di, proj, &out, err);
}

/* Logits rows (or picks) a sequence's share of the step produces. */
static int32_t step_rows(const sy_step_seq *q) { return q->n_logits > 1 ? q->n_logits : q->want_logits ? 1 : 0; }

static int check_step(const sy_engine *e, const sy_step_seq *seqs, int32_t n_seqs, int32_t *n_tokens, sy_err *err)
{
    if (n_seqs <= 0 || n_seqs > e->max_seqs)
        return sy_err_set(err, SY_ERR_INVALID, "a step carries 1..%d sequences, found %d", e->max_seqs, n_seqs);
    int64_t T = 0, n_rows = 0;
    for (int32_t s = 0; s < n_seqs; s++) {
        const sy_step_seq *q = &seqs[s];
        if (q->n_tokens <= 0)
            return sy_err_set(err, SY_ERR_INVALID, "sequence %d of the step has no new tokens", s);
        if (q->sample && (!q->want_logits || !q->greedy_id))
            return sy_err_set(err, SY_ERR_INVALID, "sequence %d of the step has a sample row but %s", s,
                              q->want_logits ? "no greedy_id to write the pick to" : "wants no logits");
        if (q->sample && e->tp_size > 1)
            return sy_err_set(err, SY_ERR_INVALID, "sequence %d of the step has a sample row; with tensor parallelism "
                              "(%d ranks) sampled rows travel as logits rows (leave sample NULL)", s, e->tp_size);
        if (q->n_logits < 0 || q->n_logits > q->n_tokens)
            return sy_err_set(err, SY_ERR_INVALID, "sequence %d of the step asks for %d logits rows, expected 0..%d "
                              "(its new tokens)", s, q->n_logits, q->n_tokens);
        if (q->n_logits > 1 && q->sample)
            return sy_err_set(err, SY_ERR_INVALID, "sequence %d of the step has a sample row and n_logits %d: a sampled "
                              "pick is one row (verify rows come back as logits or greedy picks)", s, q->n_logits);
        if (q->n_logits > SY_PLAN_MAX_ROWS && e->tp_size > 1)
            return sy_err_set(err, SY_ERR_INVALID, "sequence %d of the step asks for %d logits rows; a tensor-parallel "
                              "step plan carries at most %d per sequence", s, q->n_logits, SY_PLAN_MAX_ROWS);
        n_rows += step_rows(q);
        if (q->sample && q->sample->struct_size < sizeof(sy_sample_row))
            return sy_err_set(err, SY_ERR_INVALID, "sequence %d: sample row struct_size %u, expected %zu", s,
                              q->sample->struct_size, sizeof(sy_sample_row));
        const int64_t end = (int64_t)q->ctx_len + q->n_tokens;
        if (end > e->max_seq_len)
            return sy_err_set(err, SY_ERR_INVALID, "sequence %d reaches %lld tokens, over max_seq_len %d", s,
                              (long long)end, e->max_seq_len);
        if ((int64_t)q->n_blocks * e->kv.block_size < end || q->n_blocks > e->max_blocks_per_seq)
            return sy_err_set(err, SY_ERR_INVALID, "sequence %d has %d KV blocks for %lld tokens (block size %d)", s,
                              q->n_blocks, (long long)end, e->kv.block_size);
        for (int32_t i = 0; i < q->n_tokens; i++)
            if (q->tokens[i] < 0 || q->tokens[i] >= e->mc->vocab)
                return sy_err_set(err, SY_ERR_INVALID, "token id %d of sequence %d is outside the vocabulary [0, %d)",
                                  q->tokens[i], s, e->mc->vocab);
        T += q->n_tokens;
    }
    if (T > e->max_batch_tokens)
        return sy_err_set(err, SY_ERR_INVALID, "a step carries at most %d tokens (max_batch_tokens), found %lld",
                          e->max_batch_tokens, (long long)T);
    if (n_rows > e->max_sel)
        return sy_err_set(err, SY_ERR_INVALID, "a step produces at most %d logits rows (max_running%s), found %lld",
                          e->max_sel, e->max_sel > e->max_seqs ? " x (1 + [speculative] num_draft_tokens)" : "",
                          (long long)n_rows);
    *n_tokens = (int32_t)T;
    return SY_OK;
}

/*
 * Vocab-parallel embedding: each rank looks up the ids of its slice (the
 * others hit the slice's zero row), and the sum over ranks is exact.
 */
int sy__embed_tp(sy_engine *e, const sy_tensor *table, int32_t T, sy_tensor *h, sy_err *err)
{
    for (int32_t t = 0; t < T; t++) {
        const int32_t id = e->ids[t] - e->vocab_start;
        e->ids_local[t] = id >= 0 && id < e->vocab_local ? id : e->vocab_local;
    }
    int rc = e->dev->embed(e->device->inst, table, e->ids_local, T, h, err);
    return rc ? rc : e->com->allreduce_sum(e->comm->inst, h, err);
}

/*
 * Every rank's [n, V/tp] logits gathered ([tp*n, V/tp], rank-major), then
 * laid out as [n, V] rows on the host; followers (out NULL) only take part.
 */
int sy__gather_logits(sy_engine *e, const sy_tensor *logits, int32_t n, float *out, sy_err *err)
{
    const int64_t tp = e->tp_size, Vl = e->vocab_local, V = e->mc->vocab;
    sy_tensor g = rows(&e->gathered, tp * n);
    int rc = e->com->allgather(e->comm->inst, logits, &g, err);
    if (rc || !out)
        return rc;
    const size_t bytes = sizeof(float) * (size_t)(tp * n) * (size_t)Vl;
    if ((rc = e->dev->download(e->device->inst, e->gathered_host, &g, bytes, err)))
        return rc;
    for (int64_t r = 0; r < tp; r++)
        for (int64_t s = 0; s < n; s++)
            memcpy(out + s * V + r * Vl, e->gathered_host + (r * n + s) * Vl, sizeof(float) * (size_t)Vl);
    return SY_OK;
}

/* The lowest index of the largest non-NaN value of x[0..n); -1 when all are NaN. */
static int64_t first_max_skipping_nan(const float *x, int64_t n)
{
    int64_t best = -1;
    for (int64_t i = 0; i < n; i++)
        if (x[i] == x[i] && (best < 0 || x[i] > x[best]))
            best = i;
    return best;
}

/*
 * Tensor parallelism, greedy rows [first, n_sel) of logits [n_sel, V/tp]:
 * each rank picks over its vocabulary slice on the device, the (value,
 * global id) pairs are gathered (2 floats per row and rank instead of
 * V/tp), and rank 0 merges them in rank order with a strict comparison,
 * which keeps the lowest global id among equal values. The device's rule
 * makes a NaN at a slice's column 0 that slice's pick; that is the global
 * pick only on rank 0 (global id 0 beats everything), so another rank
 * then finds its slice's largest non-NaN value on the host (only when the
 * model produced NaN logits).
 */
int sy__pick_tp(sy_engine *e, const sy_tensor *logits, int32_t n_sel, int32_t first, sy_err *err)
{
    const int64_t tp = e->tp_size, Vl = e->vocab_local;
    void *di = e->device->inst;
    int rc;
    bool fetched = false;
    if (e->dev_argmax) {
        rc = e->dev->argmax(di, logits, e->pick_ids, e->pick_vals, err);
    } else { /* this rank picks its slice on the host: the exchange stays the same for every rank */
        rc = e->dev->download(di, e->gathered_host, logits, sizeof(float) * (size_t)n_sel * (size_t)Vl, err);
        fetched = true;
        for (int32_t i = 0; !rc && i < n_sel; i++) {
            const float *row = e->gathered_host + (size_t)i * (size_t)Vl;
            e->pick_ids[i] = sy_greedy_pick(row, (int32_t)Vl);
            e->pick_vals[i] = row[e->pick_ids[i]];
        }
    }
    if (rc)
        return rc;
    for (int32_t i = 0; i < n_sel; i++) {
        float v = e->pick_vals[i];
        int64_t id = e->pick_ids[i];
        if (i >= first && e->tp_rank > 0 && id == 0 && v != v) {
            const size_t bytes = sizeof(float) * (size_t)n_sel * (size_t)Vl;
            if (!fetched && (rc = e->dev->download(di, e->gathered_host, logits, bytes, err)))
                return rc;
            fetched = true;
            const float *row = e->gathered_host + (size_t)i * (size_t)Vl;
            id = first_max_skipping_nan(row, Vl);
            v = id < 0 ? v : row[id]; /* all NaN: the NaN value never wins the merge */
            id = id < 0 ? 0 : id;
        }
        e->picks_host[2 * i] = v;
        e->picks_host[2 * i + 1] = (float)(e->vocab_start + id);
    }
    sy_tensor p = rows(&e->picks, n_sel), g = rows(&e->picks_gathered, tp * n_sel);
    if ((rc = e->dev->upload(di, &p, e->picks_host, sizeof(float) * 2 * (size_t)n_sel, err)) ||
        (rc = e->com->allgather(e->comm->inst, &p, &g, err)))
        return rc;
    if (e->tp_rank != 0)
        return SY_OK;
    if ((rc = e->dev->download(di, e->picks_host, &g, sizeof(float) * 2 * (size_t)(tp * n_sel), err)))
        return rc;
    for (int32_t i = first; i < n_sel; i++) {
        float best = e->picks_host[2 * i];
        int32_t id = (int32_t)e->picks_host[2 * i + 1];
        if (!(id == 0 && best != best)) /* else global column 0 is NaN: the host loop's pick too */
            for (int64_t r = 1; r < tp; r++) {
                const float *pr = e->picks_host + 2 * (r * n_sel + i);
                if (pr[0] > best) {
                    best = pr[0];
                    id = (int32_t)pr[1];
                }
            }
        *e->greedy_dst[i - first] = id;
    }
    return SY_OK;
}

/* The host's pick of picked row k (sampled rows first, then greedy ones) from its logits. */
static int32_t host_pick(sy_engine *e, int32_t k, int32_t n_samp, const float *row)
{
    const int32_t V = e->mc->vocab;
    return k < n_samp ? sy_sample_pick(row, V, &e->sample_rows[k], e->sample_prob, e->sample_idx)
                      : sy_greedy_pick(row, V);
}

/*
 * The picked rows [n_full, n_sel) with the device's sample op: sampled rows
 * [0, n_samp) of them and the greedy ones (as temperature 0) in one call.
 * A row the device leaves to the host (-1) is downloaded alone, into the
 * caller's buffer at its place, and drawn there with the same uniform.
 */
static int sample_on_device(sy_engine *e, int32_t n_sel, int32_t n_full, int32_t n_samp, float *out, sy_err *err)
{
    const int64_t V = e->mc->vocab;
    const int32_t n_pick = n_sel - n_full;
    void *di = e->device->inst;
    for (int32_t k = n_samp; k < n_pick; k++)
        e->sample_rows[k] = (sy_sample_row){.struct_size = sizeof(sy_sample_row), .temperature = 0.0f, .top_p = 1.0f};
    const sy_tensor pv = rows_from(&e->logits, n_full, n_pick);
    int rc = e->dev->sample(di, &pv, e->sample_rows, e->pick_ids, err);
    if (rc)
        return rc;
    for (int32_t k = 0; k < n_pick; k++) {
        int32_t id = e->pick_ids[k];
        if (id < -1 || id >= V)
            return sy_err_set(err, SY_ERR_INTERNAL, "the device's sample op returned id %d for row %d, outside "
                              "[-1, %lld)", id, k, (long long)V);
        if (id < 0) {
            if (!out)
                return sy_err_set(err, SY_ERR_INVALID, "the device left row %d to the host, but the step has no "
                                  "logits buffer", k);
            float *row = out + (size_t)(n_full + k) * (size_t)V;
            const sy_tensor one = rows_from(&e->logits, n_full + k, 1);
            if ((rc = e->dev->download(di, row, &one, sizeof(float) * (size_t)V, err)))
                return rc;
            id = host_pick(e, k, n_samp, row);
        } else if (k < n_samp) {
            e->device_samples++;
        } else {
            e->device_picks++;
        }
        *e->greedy_dst[k] = id;
    }
    if (e->device_samples > 0 && e->device_samples <= (uint64_t)n_samp)
        sy_debug("sampled picks: on the device (sample op); their logits rows stay there");
    return SY_OK;
}

/*
 * The model head's outputs: logits rows [0, n_full) go to the caller (or
 * take part in the gather), rows [n_full, n_sel) only need their pick:
 * sampled rows (e->sample_rows) first, then greedy ones. With the device's
 * sample op (when there are sampled rows) or argmax op (greedy rows) those
 * rows never leave the device; without it (or device_sampling = off) they
 * are copied like the others, into the caller's buffer past its rows, and
 * picked on the host by the same rule with the same uniform.
 */
static int head_outputs(sy_engine *e, int32_t n_sel, int32_t n_full, int32_t n_samp, float *out, sy_err *err)
{
    const int64_t V = e->mc->vocab;
    const int32_t n_greedy = n_sel - n_full - n_samp;
    const bool tp = e->tp_size > 1;
    void *di = e->device->inst;
    int rc;
    int32_t n_copy = n_sel;
    if (tp && n_greedy > 0 && e->tp_pick_pairs) { /* no sampled rows with tensor parallelism (check_step) */
        sy_tensor all = rows(&e->logits, n_sel);
        if ((rc = sy__pick_tp(e, &all, n_sel, n_full, err)))
            return rc;
        if (e->dev_argmax && e->device_picks == 0)
            sy_debug("greedy picks: on the device (argmax op); their logits rows stay there");
        e->device_picks += e->dev_argmax ? (uint64_t)n_greedy : 0;
        n_copy = n_full;
    } else if (!tp && n_samp > 0 && e->dev_sample) {
        if ((rc = sample_on_device(e, n_sel, n_full, n_samp, out, err)))
            return rc;
        n_copy = n_full;
    } else if (!tp && n_greedy > 0 && e->dev_argmax) {
        const sy_tensor gv = rows_from(&e->logits, n_full + n_samp, n_greedy);
        if ((rc = e->dev->argmax(di, &gv, e->pick_ids, NULL, err)))
            return rc;
        for (int32_t g = 0; g < n_greedy; g++)
            *e->greedy_dst[n_samp + g] = e->pick_ids[g];
        if (e->device_picks == 0)
            sy_debug("greedy picks: on the device (argmax op); their logits rows stay there");
        e->device_picks += (uint64_t)n_greedy;
        n_copy = n_full + n_samp;
    }
    if (n_copy > 0) {
        sy_tensor lr = rows(&e->logits, n_copy);
        rc = tp ? sy__gather_logits(e, &lr, n_copy, out, err)
                : e->dev->download(di, out, &lr, sizeof(float) * (size_t)n_copy * (size_t)V, err);
        if (rc)
            return rc;
    }
    if (out)
        for (int32_t r = n_full; r < n_copy; r++)
            *e->greedy_dst[r - n_full] = host_pick(e, r - n_full, n_samp, out + (size_t)r * (size_t)V);
    return SY_OK;
}

/*
 * One decoder block (see engine_internal.h): the layer loop's body, and the
 * MTP layer's (forward_mtp.c) with l = n_layers.
 */
int sy__engine_block(sy_engine *e, int32_t l, const sy_attn_batch *b, int32_t T, sy_tensor *h, sy_tensor *xn,
                     sy_tensor *proj, sy_err *err)
{
    const sy_model_config *c = e->mc;
    const sy_device_ops *dev = e->dev;
    void *di = e->device->inst;
    const sy_layer_weights *w = &e->layers[l];
    const int tp = e->com->size(e->comm->inst) > 1;
    const bool multi = e->linear_multi;
    sy_tensor q = rows(&e->q, T), k = rows(&e->k, T), v = rows(&e->v, T), att = rows(&e->att_out, T);
    int rc;
    if (e->mla) { /* DeepSeek-V3, GLM-5: latent attention over the core's own cache (forward_mla.c) */
        if ((rc = sy__mla_attention(e, l, b, T, xn, proj, err)))
            return rc;
        goto attention_done;
    }
    /* q [T, Nh*D], k/v [T, Nkv*D]: one op */
    {
        const sy_tensor *ws[3] = {&w->wq, &w->wk, &w->wv};
        const sy_tensor *bs[3] = {w->bq.data ? &w->bq : NULL, w->bk.data ? &w->bk : NULL,
                                  w->bv.data ? &w->bv : NULL};
        sy_tensor *os[3] = {&q, &k, &v};
        if ((rc = linears(dev, di, multi, xn, 3, ws, bs, os, err)))
            return rc;
    }
    if (w->q_norm.data) { /* Qwen3: RMSNorm of each head before RoPE */
        sy_tensor qh = per_head(&q, T, c->n_heads / e->tp_size), kh = per_head(&k, T, c->n_kv_heads / e->tp_size);
        if ((rc = dev->rmsnorm(di, &qh, &w->q_norm, c->rms_eps, &qh, err)) ||
            (rc = dev->rmsnorm(di, &kh, &w->k_norm, c->rms_eps, &kh, err)))
            return rc;
    }
    if ((rc = dev->rope(di, &q, e->pos, &e->rope, err)) || (rc = dev->rope(di, &k, e->pos, &e->rope, err)))
        return rc;
    /* att [T, Nh*D]: writes k/v into the paged cache, then attends */
    if ((rc = e->att->forward(e->attn->inst, l, b, &q, &k, &v, &att, err)))
        return rc;
    /* proj [T,H] = att . Wo^T, summed over ranks */
    if ((rc = dev->linear(di, &att, &w->wo, w->bo.data ? &w->bo : NULL, proj, err)))
        return rc;
attention_done:
    if (tp && (rc = e->com->allreduce_sum(e->comm->inst, proj, err)))
        return rc;
    /* h += proj; xn = norm(h) */
    if ((rc = dev->add_rmsnorm(di, h, proj, &w->ffn_norm, c->rms_eps, xn, err)))
        return rc;
    if (w->is_moe) {
        /* router [T,E]; proj [T,H] = sum of the chosen experts */
        sy_tensor router = rows(&e->router, T);
        if ((rc = dev->linear(di, xn, &w->router, w->router_bias.data ? &w->router_bias : NULL, &router, err)) ||
            (rc = e->mo->forward(e->moe->inst, l, xn, &router, proj, err)))
            return rc;
        if (w->sh_gate.data && (rc = shared_experts(e, w, T, xn, proj, err)))
            return rc;
    } else {
        /* gate/up [T,F]; proj [T,H] = down(silu(gate) * up) */
        sy_tensor gate = rows(&e->gate, T), up = rows(&e->up, T);
        gate.shape[1] = up.shape[1] = w->w_gate.shape[0];
        gate.stride[0] = up.stride[0] = gate.shape[1];
        const sy_tensor *ws[2] = {&w->w_gate, &w->w_up};
        sy_tensor *os[2] = {&gate, &up};
        if ((rc = linears(dev, di, multi, xn, 2, ws, NULL, os, err)) ||
            (rc = dev->silu_mul(di, &gate, &up, &gate, err)) ||
            (rc = dev->linear(di, &gate, &w->w_down, NULL, proj, err)))
            return rc;
    }
    if (tp && (rc = e->com->allreduce_sum(e->comm->inst, proj, err)))
        return rc;
    return SY_OK;
}

/*
 * The step's body: embed through the lm_head linear, leaving the n_sel
 * predicting rows' logits in e->logits. Reads the host arrays forward
 * filled (e->ids, e->pos, e->sel_rows, b's tables) and waits for nothing,
 * so that graphs.c can record it and replay it.
 */
int sy__engine_forward_body(sy_engine *e, const sy_attn_batch *b, int32_t T, int32_t n_sel, sy_err *err)
{
    const sy_model_config *c = e->mc;
    const sy_device_ops *dev = e->dev;
    void *di = e->device->inst;
    int rc;
    sy_tensor h = rows(&e->h, T), xn = rows(&e->xn, T), proj = rows(&e->proj, T);
    const int tp = e->com->size(e->comm->inst) > 1;

    /* h [T,H] = embed(ids) */
    if ((rc = tp ? sy__embed_tp(e, &e->embed, T, &h, err) : dev->embed(di, &e->embed, e->ids, T, &h, err)))
        return rc;
    for (int32_t l = 0; l < c->n_layers; l++) {
        /* xn [T,H] = norm(h), first folding in the previous layer's MLP output */
        if (l == 0)
            rc = dev->rmsnorm(di, &h, &e->layers[l].attn_norm, c->rms_eps, &xn, err);
        else
            rc = dev->add_rmsnorm(di, &h, &proj, &e->layers[l].attn_norm, c->rms_eps, &xn, err);
        if (rc || (rc = sy__engine_block(e, l, b, T, &h, &xn, &proj, err)))
            return rc;
    }
    /* With the MTP layer on, every row's final-normed hidden is kept for it (e->mtp_hid), logits or not. */
    if (e->n_mtp)
        xn = rows(&e->mtp_hid, T);
    e->mtp_hid_rows = e->n_mtp ? T : 0;
    if (n_sel == 0 && !e->n_mtp)
        return SY_OK;
    /* xn = norm(h + proj); sel [S,H] = the rows that predict; logits [S,V] */
    if ((rc = dev->add_rmsnorm(di, &h, &proj, &e->final_norm, c->rms_eps, &xn, err)))
        return rc;
    if (n_sel == 0)
        return SY_OK;
    sy_tensor sel = rows(&e->sel, n_sel), logits = rows(&e->logits, n_sel);
    if ((rc = dev->embed(di, &xn, e->sel_rows, n_sel, &sel, err)) ||
        (rc = dev->linear(di, &sel, &e->lm_head, NULL, &logits, err)))
        return rc;
    return SY_OK;
}

int sy__engine_forward(sy_engine *e, const sy_step_seq *seqs, int32_t n_seqs, float *logits_out, sy_err *err)
{
    const sy_device_ops *dev = e->dev;
    void *di = e->device->inst;
    int32_t T = 0;
    int rc = check_step(e, seqs, n_seqs, &T, err);
    if (rc)
        return rc;

    /* Flatten the batch: token ids, positions, per-sequence tables. The rows
     * that predict are selected full-logits rows first, then sampled rows,
     * greedy rows last (head_outputs copies only a prefix of them). */
    int32_t n_samp = 0, n_greedy = 0;
    for (int32_t s = 0; s < n_seqs; s++)
        if (seqs[s].want_logits && seqs[s].greedy_id && seqs[s].sample) {
            e->sample_rows[n_samp] = *seqs[s].sample;
            e->sample_rows[n_samp].struct_size = sizeof(sy_sample_row);
            e->greedy_dst[n_samp++] = seqs[s].greedy_id;
        }
    for (int32_t s = 0; s < n_seqs; s++)
        if (step_rows(&seqs[s]) && seqs[s].greedy_id && !seqs[s].sample)
            for (int32_t j = 0; j < step_rows(&seqs[s]); j++) /* a verify's picks: one per row, in order */
                e->greedy_dst[n_samp + n_greedy++] = seqs[s].greedy_id + j;
    int32_t n_sel = 0, n_full = 0;
    for (int32_t s = 0; s < n_seqs; s++)
        n_full += seqs[s].greedy_id ? 0 : step_rows(&seqs[s]);
    int32_t next_full = 0, next_samp = n_full, next_greedy = n_full + n_samp;
    const int32_t MB = e->max_blocks_per_seq;
    for (int32_t s = 0, t = 0; s < n_seqs; s++) {
        const sy_step_seq *q = &seqs[s];
        e->tok_start[s] = t;
        e->ctx_len[s] = q->ctx_len;
        memcpy(e->block_table + (size_t)s * MB, q->blocks, sizeof(int32_t) * (size_t)q->n_blocks);
        for (int32_t i = 0; i < q->n_tokens; i++, t++) {
            e->ids[t] = q->tokens[i];
            e->pos[t] = q->ctx_len + i;
        }
        for (int32_t j = step_rows(q); j > 0; j--)
            e->sel_rows[!q->greedy_id ? next_full++ : q->sample ? next_samp++ : next_greedy++] = t - j;
    }
    n_sel = n_full + n_samp + n_greedy;
    e->tok_start[n_seqs] = T;
    const sy_attn_batch batch = {.struct_size = sizeof(sy_attn_batch),
                                 .n_seqs = n_seqs,
                                 .n_tokens = T,
                                 .tok_start = e->tok_start,
                                 .ctx_len = e->ctx_len,
                                 .block_table = e->block_table,
                                 .max_blocks = MB};

    /* Replayed from a recording when graphs are on and the step's shape came before (graphs.c). */
    if ((rc = sy__graphs_step(e, &batch, T, n_sel, err)))
        return rc;
    if (n_sel == 0)
        return dev->synchronize ? dev->synchronize(di, err) : SY_OK;
    return head_outputs(e, n_sel, n_full, n_samp, logits_out, err);
}

uint64_t sy_engine_device_picks(const sy_engine *e) { return e->device_picks; }
uint64_t sy_engine_device_samples(const sy_engine *e) { return e->device_samples; }
