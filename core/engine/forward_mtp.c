/*
 * The multi-token-prediction layer (DeepSeek-V3, GLM-4.5, GLM-5) as
 * vLLM's deepseek_mtp.py and SGLang's deepseek_nextn.py run it. At position
 * p, with h_p the target's final-normed hidden state there (the row its
 * lm_head reads) and t the token at p + 1:
 *
 *   x   = eh_proj([enorm(embed(t)); hnorm(h_p)])     embedding first
 *   g_p = x after one decoder block (layer index n_layers: its own K/V in
 *         the target's blocks at position p, so the target's rollback
 *         rolls it back too)
 *   logits = shared_head.head(shared_head.norm(g_p))  predicts token p + 2
 *
 * Chained drafting feeds g_p back as the next position's hidden state.
 * T = rows of the step, H = hidden, V = vocab.
 *
 * Tensor parallelism: the block is sharded like the target's layers, the
 * embedding and head by vocabulary like the target's (a lookup summed over
 * ranks, logits or greedy picks gathered), eh_proj and the norms replicated
 * (their inputs and outputs are every rank's); g is then the same on every
 * rank, and rank 0 alone hands the outputs back.
 */
#include "config.h"

#include "engine/engine_internal.h"
#include "engine/sampler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sy_mtp_state {
    /* Prepared weights; head and embed may be the model's own (then not released here). */
    sy_tensor enorm, hnorm, eh_proj, head_norm, head, embed;
    bool own_head, own_embed;
    /* z [2T, H]: the normed embeddings in rows [0, T), the normed hidden states in [T, 2T); cat [2T, H] the
     * same rows interleaved, which read as [T, 2H] is eh_proj's input. */
    sy_tensor z, cat;
    int32_t *cat_rows;   /* [2T]: 0, T, 1, T + 1, ... */
    int32_t *src_rows;   /* [T]: target rows gathered for one sequence */
    int32_t *out_rows;   /* [T]: the rows whose outputs the caller wants */
    float *host_rows;    /* [max_seqs, H] */
    float *host_logits;  /* [max_seqs, V] */
    int32_t *pick_sink;  /* [max_seqs]: the merged picks of rows nobody asked a pick of (tensor parallel) */
};

static sy_tensor rows_of(const sy_tensor *t, int64_t first, int64_t n)
{
    sy_tensor v = *t;
    v.shape[0] = n;
    v.data = (char *)t->data + (size_t)(first * t->stride[0]) * sizeof(float);
    return v;
}

static int alloc_act(sy_engine *e, sy_tensor *t, int64_t rows, int64_t cols, sy_err *err)
{
    int64_t shape[2] = {rows, cols};
    sy_tensor_init(t, NULL, SY_DTYPE_F32, 2, shape);
    return e->dev->alloc(e->device->inst, t, err);
}

static int prep(sy_engine *e, const sy_tensor *host, sy_tensor *out, sy_err *err)
{
    const char *name = sy_model_tensor_name(e->model, host);
    int rc = e->dev->prepare_weight(e->device->inst, name ? name : "MTP layer tensor", host, out, err);
    if (rc && err) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        sy_err_set(err, rc, "device %s cannot prepare MTP tensor %s: %s", e->device->plugin->desc->name,
                   name ? name : "?", msg);
    }
    return rc;
}

int sy__mtp_open(sy_engine *e, sy_err *err)
{
    const sy_mtp_layer *ml = &e->model->mtp[0];
    const int64_t T = e->max_batch_tokens, H = e->mc->hidden, S = e->max_seqs, V = e->mc->vocab;
    struct sy_mtp_state *m = calloc(1, sizeof *m);
    if (!m)
        return sy_err_set(err, SY_ERR_NOMEM, "cannot allocate the MTP layer's state");
    e->mtp = m;
    int rc;
    if ((rc = prep(e, &ml->enorm, &m->enorm, err)) || (rc = prep(e, &ml->hnorm, &m->hnorm, err)) ||
        (rc = prep(e, &ml->eh_proj, &m->eh_proj, err)) || (rc = prep(e, &ml->head_norm, &m->head_norm, err)))
        return rc;
    /* GLM-4.5 ships no MTP embedding, GLM-4.6 no head either: the loader points them at the model's. */
    m->own_head = ml->head.data != e->model->lm_head.data;
    m->own_embed = ml->embed.data != e->model->embed.data;
    m->head = e->lm_head;
    m->embed = e->embed;
    sy_tensor head = ml->head, embed = ml->embed;
    if (e->tp_size > 1 &&
        ((m->own_head && (rc = sy__tp_vocab_head(e, &ml->head, "MTP shared_head.head", &head, err))) ||
         (m->own_embed && (rc = sy__tp_vocab_embed(e, &ml->embed, "MTP embed_tokens", &embed, err)))))
        return rc;
    if ((m->own_head && (rc = prep(e, &head, &m->head, err))) ||
        (m->own_embed && (rc = prep(e, &embed, &m->embed, err))))
        return rc;
    if ((rc = alloc_act(e, &e->mtp_hid, T, H, err)) || (rc = alloc_act(e, &m->z, 2 * T, H, err)) ||
        (rc = alloc_act(e, &m->cat, 2 * T, H, err)))
        return rc;
    m->cat_rows = malloc(sizeof(int32_t) * 2 * (size_t)T);
    m->src_rows = malloc(sizeof(int32_t) * (size_t)T);
    m->out_rows = malloc(sizeof(int32_t) * (size_t)T);
    m->host_rows = malloc(sizeof(float) * (size_t)(S * H));
    m->host_logits = malloc(sizeof(float) * (size_t)(S * V));
    m->pick_sink = malloc(sizeof(int32_t) * (size_t)S);
    if (!m->cat_rows || !m->src_rows || !m->out_rows || !m->host_rows || !m->host_logits || !m->pick_sink)
        return sy_err_set(err, SY_ERR_NOMEM, "cannot allocate the MTP step tables for %lld rows", (long long)T);
    return SY_OK;
}

void sy__mtp_close(sy_engine *e)
{
    struct sy_mtp_state *m = e->mtp;
    if (!m)
        return;
    void *di = e->device ? e->device->inst : NULL;
    if (e->dev && e->dev->release_weight) {
        sy_tensor *ws[] = {&m->enorm, &m->hnorm, &m->eh_proj, &m->head_norm, m->own_head ? &m->head : NULL,
                           m->own_embed ? &m->embed : NULL};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
            if (ws[i] && ws[i]->data)
                e->dev->release_weight(di, ws[i]);
    }
    sy_tensor *as[] = {&e->mtp_hid, &m->z, &m->cat};
    for (size_t i = 0; i < sizeof as / sizeof as[0]; i++)
        if (as[i]->data && e->dev)
            e->dev->free(di, as[i]);
    free(m->cat_rows);
    free(m->src_rows);
    free(m->out_rows);
    free(m->host_rows);
    free(m->host_logits);
    free(m->pick_sink);
    free(m);
    e->mtp = NULL;
}

bool sy_engine_has_mtp(const sy_engine *e) { return e->n_mtp > 0; }

static int check_mtp(const sy_engine *e, const sy_mtp_seq *seqs, int32_t n_seqs, int32_t *rows, sy_err *err)
{
    if (!e->n_mtp)
        return sy_err_set(err, SY_ERR_INVALID, "an MTP step on an engine opened without [speculative] method = mtp");
    if (n_seqs <= 0 || n_seqs > e->max_seqs)
        return sy_err_set(err, SY_ERR_INVALID, "an MTP step carries 1..%d sequences, found %d", e->max_seqs, n_seqs);
    int64_t T = 0;
    for (int32_t s = 0; s < n_seqs; s++) {
        const sy_mtp_seq *q = &seqs[s];
        const int64_t end = (int64_t)q->pos0 + q->n;
        if (q->n <= 0 || q->pos0 < 0)
            return sy_err_set(err, SY_ERR_INVALID, "MTP sequence %d: %d rows at position %d (expected rows > 0 and "
                              "position >= 0)", s, q->n, q->pos0);
        if (q->n_out < 0 || q->n_out > q->n)
            return sy_err_set(err, SY_ERR_INVALID, "MTP sequence %d: n_out %d outside [0, %d]", s, q->n_out, q->n);
        if (end > e->max_seq_len || (int64_t)q->n_blocks * e->kv.block_size < end ||
            q->n_blocks > e->max_blocks_per_seq)
            return sy_err_set(err, SY_ERR_INVALID, "MTP sequence %d reaches position %lld with %d KV blocks of %d "
                              "(max_seq_len %d)", s, (long long)end - 1, q->n_blocks, e->kv.block_size,
                              e->max_seq_len);
        if (q->target_row >= 0 ? (int64_t)q->target_row + q->n > e->mtp_hid_rows : !q->hidden)
            return sy_err_set(err, SY_ERR_INVALID, "MTP sequence %d: %s", s,
                              q->target_row >= 0 ? "its target rows are past the last step's rows"
                                                 : "neither target rows (target_row >= 0) nor host hidden rows");
        for (int32_t i = 0; i < q->n; i++)
            if (q->tokens[i] < 0 || q->tokens[i] >= e->mc->vocab)
                return sy_err_set(err, SY_ERR_INVALID, "MTP sequence %d: token id %d is outside the vocabulary "
                                  "[0, %d)", s, q->tokens[i], e->mc->vocab);
        T += q->n;
    }
    if (T > e->max_batch_tokens)
        return sy_err_set(err, SY_ERR_INVALID, "an MTP step carries at most %d rows (max_batch_tokens), found %lld",
                          e->max_batch_tokens, (long long)T);
    *rows = (int32_t)T;
    return SY_OK;
}

/* Where output k of the step goes: its sequence and its place among that sequence's outputs. */
typedef struct out_ref {
    int32_t seq, k;
} out_ref;

/* The outputs of rows out_rows[first, first + n) of g: hidden rows, then the head's logits and picks. */
static int head_chunk(sy_engine *e, const sy_mtp_seq *seqs, const out_ref *refs, int32_t first, int32_t n,
                      const sy_tensor *g, sy_err *err)
{
    struct sy_mtp_state *m = e->mtp;
    const sy_device_ops *dev = e->dev;
    void *di = e->device->inst;
    const int64_t H = e->mc->hidden, V = e->mc->vocab;
    sy_tensor sel = rows_of(&e->sel, 0, n), logits = rows_of(&e->logits, 0, n);
    int rc;
    if ((rc = dev->embed(di, g, m->out_rows + first, n, &sel, err)))
        return rc;
    bool want_hidden = false, want_logits = false;
    for (int32_t i = 0; i < n; i++) {
        const sy_mtp_seq *q = &seqs[refs[first + i].seq];
        want_hidden |= q->hidden_out != NULL;
        want_logits |= q->logits != NULL || (q->greedy_id && (e->tp_size > 1 ? !e->tp_pick_pairs : !e->dev_argmax));
    }
    if (want_hidden && e->tp_rank == 0) {
        if ((rc = dev->download(di, m->host_rows, &sel, sizeof(float) * (size_t)(n * H), err)))
            return rc;
        for (int32_t i = 0; i < n; i++) {
            const sy_mtp_seq *q = &seqs[refs[first + i].seq];
            if (q->hidden_out)
                memcpy(q->hidden_out + (size_t)refs[first + i].k * (size_t)H, m->host_rows + (size_t)i * (size_t)H,
                       sizeof(float) * (size_t)H);
        }
    }
    if ((rc = dev->rmsnorm(di, &sel, &m->head_norm, e->mc->rms_eps, &sel, err)) ||
        (rc = dev->linear(di, &sel, &m->head, NULL, &logits, err)))
        return rc;
    const bool tp = e->tp_size > 1, lead = e->tp_rank == 0;
    bool want_greedy = false;
    for (int32_t i = 0; i < n; i++)
        want_greedy |= seqs[refs[first + i].seq].greedy_id != NULL;
    /* The greedy picks come from the merge of every rank's slice (sy__pick_tp) unless the logits are gathered
     * anyway; the same choice on every rank, so that all make the same collectives. */
    const bool tp_picks = tp && want_greedy && e->tp_pick_pairs && !want_logits;
    if (tp_picks) {
        for (int32_t i = 0; i < n; i++) { /* a row that wants no pick still takes part: its pick goes to the sink */
            const sy_mtp_seq *q = &seqs[refs[first + i].seq];
            e->greedy_dst[i] = lead && q->greedy_id ? q->greedy_id + refs[first + i].k : &m->pick_sink[i];
        }
        if ((rc = sy__pick_tp(e, &logits, n, 0, err)))
            return rc;
    } else if (tp) {
        if (want_logits && (rc = sy__gather_logits(e, &logits, n, lead ? m->host_logits : NULL, err)))
            return rc;
    } else {
        if (e->dev_argmax && (rc = dev->argmax(di, &logits, e->pick_ids, NULL, err)))
            return rc;
        if (want_logits && (rc = dev->download(di, m->host_logits, &logits, sizeof(float) * (size_t)(n * V), err)))
            return rc;
    }
    if (!lead)
        return SY_OK;
    for (int32_t i = 0; i < n; i++) {
        const sy_mtp_seq *q = &seqs[refs[first + i].seq];
        const int32_t k = refs[first + i].k;
        const float *row = m->host_logits + (size_t)i * (size_t)V;
        if (q->logits)
            memcpy(q->logits + (size_t)k * (size_t)V, row, sizeof(float) * (size_t)V);
        if (q->greedy_id && !tp_picks)
            q->greedy_id[k] = e->dev_argmax && !tp ? e->pick_ids[i] : sy_greedy_pick(row, (int32_t)V);
    }
    return SY_OK;
}

int sy__engine_mtp_forward(sy_engine *e, const sy_mtp_seq *seqs, int32_t n_seqs, sy_err *err)
{
    int32_t T = 0;
    int rc = check_mtp(e, seqs, n_seqs, &T, err);
    if (rc)
        return rc;
    struct sy_mtp_state *m = e->mtp;
    const sy_device_ops *dev = e->dev;
    void *di = e->device->inst;
    const sy_model_config *c = e->mc;
    const int64_t H = c->hidden;
    const int32_t MB = e->max_blocks_per_seq;

    /* The step's tables, as a target step lays them out; out_rows lists the rows with outputs. */
    int32_t n_out = 0;
    for (int32_t s = 0, t = 0; s < n_seqs; s++) {
        const sy_mtp_seq *q = &seqs[s];
        e->tok_start[s] = t;
        e->ctx_len[s] = q->pos0;
        memcpy(e->block_table + (size_t)s * MB, q->blocks, sizeof(int32_t) * (size_t)q->n_blocks);
        const int32_t outs = q->n_out > 0 ? q->n_out : 1;
        for (int32_t i = 0; i < q->n; i++, t++) {
            e->ids[t] = q->tokens[i];
            e->pos[t] = q->pos0 + i;
            if (i >= q->n - outs)
                m->out_rows[n_out++] = t;
        }
    }
    e->tok_start[n_seqs] = T;
    const sy_attn_batch batch = {.struct_size = sizeof(sy_attn_batch),
                                 .n_seqs = n_seqs,
                                 .n_tokens = T,
                                 .tok_start = e->tok_start,
                                 .ctx_len = e->ctx_len,
                                 .block_table = e->block_table,
                                 .max_blocks = MB};

    /* z[0, T) = enorm(embed(tokens)); z[T, 2T) = hnorm(hidden rows) */
    sy_tensor ze = rows_of(&m->z, 0, T), zh = rows_of(&m->z, T, T);
    if ((rc = e->tp_size > 1 ? sy__embed_tp(e, &m->embed, T, &ze, err) : dev->embed(di, &m->embed, e->ids, T, &ze, err)) ||
        (rc = dev->rmsnorm(di, &ze, &m->enorm, c->rms_eps, &ze, err)))
        return rc;
    const sy_tensor hid = rows_of(&e->mtp_hid, 0, e->mtp_hid_rows > 0 ? e->mtp_hid_rows : 1);
    for (int32_t s = 0; s < n_seqs; s++) {
        const sy_mtp_seq *q = &seqs[s];
        sy_tensor dst = rows_of(&m->z, (int64_t)T + e->tok_start[s], q->n);
        if (q->target_row >= 0) {
            for (int32_t i = 0; i < q->n; i++)
                m->src_rows[i] = q->target_row + i;
            rc = dev->embed(di, &hid, m->src_rows, q->n, &dst, err);
        } else {
            rc = dev->upload(di, &dst, q->hidden, sizeof(float) * (size_t)q->n * (size_t)H, err);
        }
        if (rc)
            return rc;
    }
    if ((rc = dev->rmsnorm(di, &zh, &m->hnorm, c->rms_eps, &zh, err)))
        return rc;
    /* cat [T, 2H] = [enorm(e) | hnorm(h)] row by row: z's rows interleaved by a gather */
    for (int32_t t = 0; t < T; t++) {
        m->cat_rows[2 * t] = t;
        m->cat_rows[2 * t + 1] = T + t;
    }
    sy_tensor zall = rows_of(&m->z, 0, 2 * (int64_t)T), call = rows_of(&m->cat, 0, 2 * (int64_t)T);
    if ((rc = dev->embed(di, &zall, m->cat_rows, 2 * (int64_t)T, &call, err)))
        return rc;
    int64_t cat_shape[2] = {T, 2 * H};
    sy_tensor cat;
    sy_tensor_init(&cat, m->cat.data, SY_DTYPE_F32, 2, cat_shape);
    cat.device = m->cat.device;

    /* h = eh_proj(cat); the block; g = h + its MLP output */
    sy_tensor h = rows_of(&e->h, 0, T), xn = rows_of(&e->xn, 0, T), proj = rows_of(&e->proj, 0, T);
    const int32_t L = c->n_layers;
    if ((rc = dev->linear(di, &cat, &m->eh_proj, NULL, &h, err)) ||
        (rc = dev->rmsnorm(di, &h, &e->layers[L].attn_norm, c->rms_eps, &xn, err)) ||
        (rc = sy__engine_block(e, L, &batch, T, &h, &xn, &proj, err)) || (rc = dev->add(di, &h, &proj, err)))
        return rc;

    /* The outputs, max_seqs rows at a time (what the head's buffers hold). */
    out_ref *refs = malloc(sizeof(out_ref) * (size_t)n_out);
    if (!refs)
        return sy_err_set(err, SY_ERR_NOMEM, "cannot allocate %d MTP output rows", n_out);
    for (int32_t s = 0, k = 0; s < n_seqs; s++) {
        const int32_t outs = seqs[s].n_out > 0 ? seqs[s].n_out : 1;
        for (int32_t i = 0; i < outs; i++, k++)
            refs[k] = (out_ref){.seq = s, .k = i};
    }
    for (int32_t first = 0; first < n_out && !rc; first += e->max_seqs) {
        const int32_t n = n_out - first < e->max_seqs ? n_out - first : e->max_seqs;
        rc = head_chunk(e, seqs, refs, first, n, &h, err);
    }
    free(refs);
    if (rc)
        return rc;
    return dev->synchronize ? dev->synchronize(di, err) : SY_OK;
}
