/*
 * The checkpoint's MTP layer as the draft source (method = mtp), as SGLang
 * drafts with one layer (EAGLE-style chaining, topk 1).
 *
 * After each target step the layer catches up over the positions whose
 * tokens were kept ("extend": position p takes the target's final-normed
 * hidden row of p and the token at p + 1, which exists once acceptance
 * appended the next token), batched across the step's sequences; each
 * sequence keeps the MTP hidden state of its last such position, which is
 * n_tokens - 2, and that position's greedy pick d1 (a guess at the token
 * after the last accepted one). propose hands out d1, then chains k - 1
 * more MTP steps batched across the sequences, each on the previous step's
 * hidden state and pick, at positions n_tokens - 1, n_tokens, ... in the
 * target's blocks (the verify and the next extend overwrite them).
 *
 * The MTP layer's K/V sit in the target's blocks as layer n_layers, so the
 * target's rollback and the prefix cache carry them along. The entry at a
 * block's last position saw the token after the block, outside the block's
 * prefix-cache key: the scheduler shares a cached block with a speculating
 * sequence only when that token is the sequence's own (prefix_cache.h), so
 * extending from a hit's first uncached position is enough.
 */
#include "config.h"

#include "serve/seq.h"
#include "spec/spec.h"

#include <stdlib.h>
#include <string.h>

/* What the source keeps per sequence, in the sequence's spec_state slot. */
typedef struct mtp_seq_state {
    int32_t ready_at; /* the seq's n_tokens for which g and d1 hold (g at position n_tokens - 2); -1: none */
    int32_t d1;
    float g[]; /* [H] */
} mtp_seq_state;

typedef struct mtp_source {
    sy_spec_source base;
    sy_engine *e;
    int32_t H, max_seqs;
    sy_mtp_seq *batch; /* [max_seqs] */
    struct sy_seq **who; /* [max_seqs]: the sequence behind each batch entry */
    int32_t *row_of;     /* [max_seqs]: propose: the seqs[] index behind each chained entry */
    float *prev, *next;  /* [max_seqs, H]: chained hidden states in and out */
} mtp_source;

static mtp_seq_state *state_of(struct sy_seq *q, mtp_source *m, sy_err *err)
{
    if (q->spec_state)
        return q->spec_state;
    mtp_seq_state *s = malloc(sizeof *s + sizeof(float) * (size_t)m->H);
    if (!s) {
        sy_err_set(err, SY_ERR_NOMEM, "mtp: cannot keep a hidden state of %d floats", m->H);
        return NULL;
    }
    s->ready_at = -1;
    s->d1 = 0;
    q->spec_state = s;
    return s;
}

static int mtp_after_step(sy_spec_source *src, const sy_spec_fed *fed, int32_t n, sy_err *err)
{
    mtp_source *m = (mtp_source *)src;
    int32_t nb = 0;
    for (int32_t i = 0; i < n; i++) {
        const sy_spec_fed *f = &fed[i];
        struct sy_seq *q = f->seq;
        mtp_seq_state *s = state_of(q, m, err);
        if (!s)
            return SY_ERR_NOMEM;
        /* Positions whose next token exists: [pos0, min(pos0 + n_kept, n_tokens - 1)). */
        int32_t cnt = f->n_kept;
        if (f->pos0 + cnt > q->n_tokens - 1)
            cnt = q->n_tokens - 1 - f->pos0;
        /* Nothing new to extend (a step that rewrote the last token's KV in place, as bench-spec's timing loop
         * does): g and d1 still hold for the same tokens, so the state stays ready. */
        if (cnt <= 0)
            continue;
        s->ready_at = -1;
        m->who[nb] = q;
        m->batch[nb++] = (sy_mtp_seq){.tokens = q->tokens + f->pos0 + 1,
                                      .n = cnt,
                                      .pos0 = f->pos0,
                                      .blocks = q->blocks,
                                      .n_blocks = q->n_blocks,
                                      .target_row = f->row0,
                                      .hidden_out = s->g,
                                      .greedy_id = &s->d1};
    }
    if (nb == 0)
        return SY_OK;
    int rc = sy_engine_mtp_step(m->e, m->batch, nb, err);
    if (rc)
        return rc;
    for (int32_t i = 0; i < nb; i++) {
        const sy_mtp_seq *b = &m->batch[i];
        const struct sy_seq *q = m->who[i];
        /* Ready when the last extended position is n_tokens - 2 (a middle prefill chunk is not). */
        if (b->pos0 + b->n - 1 == q->n_tokens - 2)
            ((mtp_seq_state *)q->spec_state)->ready_at = q->n_tokens;
    }
    return SY_OK;
}

static int mtp_propose(sy_spec_source *src, struct sy_seq *const *seqs, int32_t n, int32_t kmax, int32_t *drafts,
                       int32_t *n_drafts, sy_err *err)
{
    mtp_source *m = (mtp_source *)src;
    const size_t H = (size_t)m->H;
    int32_t nc = 0;
    for (int32_t i = 0; i < n; i++) {
        const mtp_seq_state *s = seqs[i]->spec_state;
        n_drafts[i] = 0;
        if (kmax <= 0 || !s || s->ready_at != seqs[i]->n_tokens)
            continue;
        drafts[(size_t)i * (size_t)kmax] = s->d1;
        n_drafts[i] = 1;
        memcpy(m->prev + (size_t)nc * H, s->g, sizeof(float) * H);
        m->row_of[nc++] = i;
    }
    /* Step j at position n_tokens - 2 + j: the pick of step j - 1 with its hidden state. */
    for (int32_t j = 1; j < kmax && nc > 0; j++) {
        for (int32_t c = 0; c < nc; c++) {
            const int32_t i = m->row_of[c];
            const struct sy_seq *q = seqs[i];
            int32_t *d = drafts + (size_t)i * (size_t)kmax;
            m->batch[c] = (sy_mtp_seq){.tokens = &d[j - 1],
                                       .n = 1,
                                       .pos0 = q->n_tokens - 2 + j,
                                       .blocks = q->blocks,
                                       .n_blocks = q->n_blocks,
                                       .target_row = -1,
                                       .hidden = m->prev + (size_t)c * H,
                                       .hidden_out = m->next + (size_t)c * H,
                                       .greedy_id = &d[j]};
        }
        int rc = sy_engine_mtp_step(m->e, m->batch, nc, err);
        if (rc)
            return rc;
        for (int32_t c = 0; c < nc; c++)
            n_drafts[m->row_of[c]] = j + 1;
        float *t = m->prev;
        m->prev = m->next;
        m->next = t;
    }
    return SY_OK;
}

static void mtp_forget(sy_spec_source *src, struct sy_seq *seq)
{
    (void)src;
    free(seq->spec_state);
    seq->spec_state = NULL;
}

static void mtp_free(sy_spec_source *src)
{
    mtp_source *m = (mtp_source *)src;
    if (!m)
        return;
    free(m->batch);
    free(m->who);
    free(m->row_of);
    free(m->prev);
    free(m->next);
    free(m);
}

static const sy_spec_source_ops mtp_ops = {
    .method = SY_SPEC_MTP,
    .after_step = mtp_after_step,
    .propose = mtp_propose,
    .forget = mtp_forget,
    .free = mtp_free,
};

int sy__spec_mtp_new(const sy_spec_config *cfg, sy_engine *target, sy_spec_source **out, sy_err *err)
{
    (void)cfg;
    *out = NULL;
    if (!sy_engine_has_mtp(target))
        return sy_err_set(err, SY_ERR_INVALID, "[speculative] method = mtp: the engine was opened without the MTP "
                          "layer (sy_engine_open reads [speculative] method to load it)");
    mtp_source *m = calloc(1, sizeof *m);
    if (!m)
        return sy_err_set(err, SY_ERR_NOMEM, "mtp: cannot allocate the source");
    m->base.ops = &mtp_ops;
    m->e = target;
    m->H = sy_engine_model_config(target)->hidden;
    m->max_seqs = sy_engine_max_seqs(target);
    const size_t S = (size_t)m->max_seqs;
    m->batch = malloc(sizeof *m->batch * S);
    m->who = malloc(sizeof *m->who * S);
    m->row_of = malloc(sizeof *m->row_of * S);
    m->prev = malloc(sizeof(float) * S * (size_t)m->H);
    m->next = malloc(sizeof(float) * S * (size_t)m->H);
    if (!m->batch || !m->who || !m->row_of || !m->prev || !m->next) {
        mtp_free(&m->base);
        return sy_err_set(err, SY_ERR_NOMEM, "mtp: cannot allocate the tables for %zu sequences", S);
    }
    *out = &m->base;
    return SY_OK;
}
