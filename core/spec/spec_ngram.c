/*
 * Prompt lookup (method = ngram): the request's own tokens are the draft
 * model. The longest suffix of the tokens (ngram_max down to ngram_min)
 * that occurred before proposes what followed its most recent earlier
 * occurrence, continued periodically past the end. No state per sequence:
 * everything is read from seq->tokens.
 */
#include "config.h"

#include "serve/seq.h"
#include "spec/spec.h"

#include <stdlib.h>

typedef struct ngram_source {
    sy_spec_source base;
    int32_t min, max;
} ngram_source;

/*
 * Drafts for one sequence. One backward pass over the earlier positions,
 * at most `max` comparisons each, stopping at the first match of full
 * length (the most recent one, which is the one wanted): the cost is
 * bounded by max_seq_len * ngram_max integer compares per step and
 * sequence, microseconds against a step of milliseconds, and needs no
 * index to keep in step with preemption and rollback.
 */
static int32_t lookup(const ngram_source *g, const int32_t *t, int32_t n, int32_t kmax, int32_t *out)
{
    if (n < g->min + 1)
        return 0;
    int32_t best_len = 0, best_end = -1;
    /* j: the last token of a candidate occurrence, which must end before the suffix does. */
    for (int32_t j = n - 2; j >= 0 && best_len < g->max; j--) {
        int32_t len = 0;
        while (len < g->max && len <= j && t[j - len] == t[n - 1 - len])
            len++;
        if (len > best_len) {
            best_len = len;
            best_end = j;
        }
    }
    if (best_len < g->min)
        return 0;
    /* What followed the match, copied past the end as an overlapping (LZ77-style) copy: the suffix says the
     * tokens repeat with period n - 1 - best_end, so where the copy reaches the end it goes on with the drafts
     * it has just written. A loop of one token (a match one position back) thus proposes kmax tokens, not 1;
     * the verify keeps only what the target agrees with. */
    int32_t k = 0;
    for (int32_t i = best_end + 1; k < kmax; i++, k++)
        out[k] = i < n ? t[i] : out[i - n];
    return k;
}

static int ngram_propose(sy_spec_source *src, struct sy_seq *const *seqs, int32_t n, int32_t kmax, int32_t *drafts,
                         int32_t *n_drafts, sy_err *err)
{
    (void)err;
    const ngram_source *g = (const ngram_source *)src;
    for (int32_t i = 0; i < n; i++)
        n_drafts[i] = lookup(g, seqs[i]->tokens, seqs[i]->n_tokens, kmax, drafts + (size_t)i * (size_t)kmax);
    return SY_OK;
}

static int ngram_after_step(sy_spec_source *src, const sy_spec_fed *fed, int32_t n, sy_err *err)
{
    (void)src, (void)fed, (void)n, (void)err;
    return SY_OK;
}

static void ngram_forget(sy_spec_source *src, struct sy_seq *seq) { (void)src, (void)seq; }

static void ngram_free(sy_spec_source *src) { free(src); }

static const sy_spec_source_ops ngram_ops = {
    .method = SY_SPEC_NGRAM,
    .after_step = ngram_after_step,
    .propose = ngram_propose,
    .forget = ngram_forget,
    .free = ngram_free,
};

int sy__spec_ngram_new(const sy_spec_config *cfg, sy_engine *target, sy_spec_source **out, sy_err *err)
{
    (void)target;
    *out = NULL;
    ngram_source *g = calloc(1, sizeof *g);
    if (!g)
        return sy_err_set(err, SY_ERR_NOMEM, "cannot allocate the ngram draft source");
    g->base.ops = &ngram_ops;
    g->min = cfg->ngram_min;
    g->max = cfg->ngram_max;
    *out = &g->base;
    return SY_OK;
}
