#include "config.h"

#include "serve/scheduler.h"
#include "serve/prefix_cache.h"
#include "spec/spec.h"
#include "util/log.h"
#include "util/util.h"

#include <stdlib.h>
#include <string.h>

typedef struct seq_list {
    sy_seq *head, *tail;
    int32_t n;
} seq_list;

struct sy_sched {
    sy_engine *e;
    sy_kv_blocks *kv;
    sy_prefix_cache *pc;
    sy_serve_metrics *m;
    sy_out_ctx out;
    int32_t max_seqs, max_batch_tokens, bs, vocab;
    seq_list waiting; /* FCFS; preempted requests go back to the front */
    seq_list running; /* by arrival, oldest first: the tail is the youngest */
    uint64_t next_order;
    /* Step scratch. */
    sy_seq **snap;  /* [max_seqs] the running list at plan time */
    sy_seq **batch; /* [max_seqs] */
    int32_t n_batch;
    sy_step_seq *steps; /* [max_seqs] */
    int32_t max_rows;   /* logits rows a step may produce (sy_engine_max_logit_rows) */
    float *logits;      /* [max_rows * vocab] */
    int32_t *picks;     /* [max_rows] picks the engine made (sy_seq_greedy_only and sy_seq_sample_only sequences) */
    int32_t *pick_at;   /* [max_seqs] each batch entry's first pick */
    sy_sample_row *sample_rows; /* [max_seqs] the draws of sy_seq_sample_only sequences */
    /* Speculative decoding ([speculative]; src NULL: off). */
    sy_spec_config spec;
    sy_spec_source *src;
    sy_seq **spec_seqs;  /* [max_seqs] the sequences asking for drafts this step */
    int32_t *drafts;     /* [max_seqs * num_draft_tokens] */
    int32_t *n_drafts;   /* [max_seqs] */
    sy_spec_fed *fed;    /* [max_seqs] */
    uint64_t spec_drafted, spec_accepted, spec_verifies;
    uint64_t n_steps, n_preempted, n_cached_tokens;
    /* Set by a preemption, cleared when a running sequence retires: the pool
     * is full, so a request admitted before blocks come back (the victim
     * itself, at the head of the queue) would only be preempted again and
     * recompute its prompt each time. */
    bool hold_admissions;
};

/* ------------------------------------------------------------ lists */

static void list_unlink(seq_list *l, sy_seq *q)
{
    if (q->prev)
        q->prev->next = q->next;
    else
        l->head = q->next;
    if (q->next)
        q->next->prev = q->prev;
    else
        l->tail = q->prev;
    q->prev = q->next = NULL;
    l->n--;
}

static void list_push_back(seq_list *l, sy_seq *q)
{
    q->next = NULL;
    q->prev = l->tail;
    if (l->tail)
        l->tail->next = q;
    else
        l->head = q;
    l->tail = q;
    l->n++;
}

static void list_push_front(seq_list *l, sy_seq *q)
{
    q->prev = NULL;
    q->next = l->head;
    if (l->head)
        l->head->prev = q;
    else
        l->tail = q;
    l->head = q;
    l->n++;
}

/* Keeps the running list in arrival order, so its tail is always the youngest. */
static void list_insert_ordered(seq_list *l, sy_seq *q)
{
    sy_seq *at = l->tail;
    while (at && at->order > q->order)
        at = at->prev;
    if (!at) {
        list_push_front(l, q);
        return;
    }
    q->prev = at;
    q->next = at->next;
    if (at->next)
        at->next->prev = q;
    else
        l->tail = q;
    at->next = q;
    l->n++;
}

/* ------------------------------------------------------------ set-up */

static void update_gauges(sy_sched *s);

int sy_sched_new(sy_engine *e, sy_serve_metrics *metrics, sy_sched **out, sy_err *err)
{
    *out = NULL;
    sy_sched *s = calloc(1, sizeof *s);
    if (!s)
        return sy_err_set(err, SY_ERR_NOMEM, "cannot allocate the scheduler");
    s->e = e;
    s->kv = sy_engine_kv(e);
    s->m = metrics;
    s->max_seqs = sy_engine_max_seqs(e);
    s->max_batch_tokens = sy_engine_max_batch_tokens(e);
    s->bs = s->kv->block_size;
    s->vocab = sy_engine_model_config(e)->vocab;
    int rc = sy_out_ctx_init(&s->out, e, err);
    if (rc) {
        free(s);
        return rc;
    }
    s->pc = sy_prefix_cache_new(s->kv);
    s->snap = malloc(sizeof(sy_seq *) * (size_t)s->max_seqs);
    s->batch = malloc(sizeof(sy_seq *) * (size_t)s->max_seqs);
    s->steps = malloc(sizeof(sy_step_seq) * (size_t)s->max_seqs);
    s->max_rows = sy_engine_max_logit_rows(e);
    s->logits = malloc(sizeof(float) * (size_t)s->max_rows * (size_t)s->vocab);
    s->picks = malloc(sizeof(int32_t) * (size_t)s->max_rows);
    s->pick_at = malloc(sizeof(int32_t) * (size_t)s->max_seqs);
    s->sample_rows = malloc(sizeof(sy_sample_row) * (size_t)s->max_seqs);
    s->fed = malloc(sizeof(sy_spec_fed) * (size_t)s->max_seqs);
    if (!s->pc || !s->snap || !s->batch || !s->steps || !s->logits || !s->picks || !s->pick_at || !s->sample_rows ||
        !s->fed) {
        sy_sched_free(s);
        return sy_err_set(err, SY_ERR_NOMEM, "cannot allocate scheduler buffers for %d sequences x %d logits",
                          s->max_seqs, s->vocab);
    }
    /* /metrics is right before the first request: the pool's size, whether graphs are on. */
    update_gauges(s);
    *out = s;
    return SY_OK;
}

static void drop_blocks(sy_sched *s, sy_seq *q)
{
    sy_kv_blocks_release(s->kv, q->blocks, q->n_blocks);
    q->n_blocks = 0;
    q->n_computed = 0;
    q->n_registered = 0;
}

static void update_gauges(sy_sched *s)
{
    if (!s->m)
        return;
    const int32_t idle = sy_prefix_cache_idle(s->pc);
    sy_engine_graph_counts gc;
    sy_engine_graph_stats(s->e, &gc);
    pthread_mutex_lock(&s->m->lock);
    s->m->graphs_on = gc.on;
    s->m->graph_replays = gc.replays;
    s->m->graph_recordings = gc.recorded;
    s->m->graph_eager_steps = gc.eager;
    s->m->running = s->running.n;
    s->m->waiting = s->waiting.n;
    s->m->kv_total = s->kv->n_blocks;
    s->m->kv_cached = idle;
    s->m->kv_used = s->kv->n_blocks - s->kv->n_free - idle;
    pthread_mutex_unlock(&s->m->lock);
}

typedef enum outcome { OUT_OK, OUT_ABORT, OUT_FAILED } outcome;

/* Takes q out of its list, frees its blocks, counts it and frees it. Its final event is already sent. */
static void retire(sy_sched *s, sy_seq *q, outcome how)
{
    if (q->running)
        s->hold_admissions = false;
    if (s->src)
        s->src->ops->forget(s->src, q);
    list_unlink(q->running ? &s->running : &s->waiting, q);
    drop_blocks(s, q);
    if (s->m) {
        pthread_mutex_lock(&s->m->lock);
        if (how == OUT_OK) {
            s->m->requests_ok++;
            sy_hist_observe(&s->m->e2e, sy_now() - q->t_arrival);
        } else if (how == OUT_ABORT) {
            s->m->requests_aborted++;
        } else {
            s->m->requests_failed++;
        }
        pthread_mutex_unlock(&s->m->lock);
    }
    sy_seq_free(q);
}

void sy_sched_abort_all(sy_sched *s)
{
    while (s->running.head) {
        sy_seq_emit_done(s->running.head, "abort");
        retire(s, s->running.head, OUT_ABORT);
    }
    while (s->waiting.head) {
        sy_seq_emit_done(s->waiting.head, "abort");
        retire(s, s->waiting.head, OUT_ABORT);
    }
    update_gauges(s);
}

void sy_sched_free(sy_sched *s)
{
    if (!s)
        return;
    sy_sched_abort_all(s);
    sy_prefix_cache_free(s->pc);
    sy_out_ctx_fini(&s->out);
    free(s->snap);
    free(s->batch);
    free(s->steps);
    free(s->logits);
    free(s->picks);
    free(s->pick_at);
    free(s->sample_rows);
    free(s->fed);
    if (s->src)
        s->src->ops->free(s->src);
    free(s->spec_seqs);
    free(s->drafts);
    free(s->n_drafts);
    free(s);
}

void sy__sched_set_spec_source(sy_sched *s, sy_spec_source *src)
{
    if (s->src) { /* the old source's per-sequence slots go with it */
        for (sy_seq *q = s->running.head; q; q = q->next)
            s->src->ops->forget(s->src, q);
        for (sy_seq *q = s->waiting.head; q; q = q->next)
            s->src->ops->forget(s->src, q);
        s->src->ops->free(s->src);
    }
    s->src = src;
}

void sy__sched_set_verify_rule(sy_sched *s, int32_t (*rule)(sy_sampler *smp, const float *dist, int32_t draft,
                                                             bool *accepted))
{
    s->out.verify = rule;
}

int32_t sy_sched_spec_k(const sy_sched *s)
{
    return s->src ? s->spec.num_draft_tokens : 0;
}

int sy_sched_enable_spec(sy_sched *s, const sy_config *cfg, sy_err *err)
{
    if (s->src)
        return sy_err_set(err, SY_ERR_INVALID, "speculative decoding is already on for this scheduler");
    int rc = sy_spec_config_read(cfg, &s->spec, err);
    if (rc || s->spec.method == SY_SPEC_NONE)
        return rc;
    const int32_t k = s->spec.num_draft_tokens;
    if (s->max_rows < s->max_seqs * (1 + k) && s->max_rows < s->max_batch_tokens)
        return sy_err_set(err, SY_ERR_INVALID, "[speculative] is on, but the engine was opened without it (%d logits "
                          "rows per step, a verify needs %d): open the engine with the same configuration",
                          s->max_rows, s->max_seqs * (1 + k));
    s->spec_seqs = malloc(sizeof(sy_seq *) * (size_t)s->max_seqs);
    s->drafts = malloc(sizeof(int32_t) * (size_t)s->max_seqs * (size_t)k);
    s->n_drafts = malloc(sizeof(int32_t) * (size_t)s->max_seqs);
    if (!s->spec_seqs || !s->drafts || !s->n_drafts)
        return sy_err_set(err, SY_ERR_NOMEM, "cannot allocate draft buffers for %d sequences x %d drafts",
                          s->max_seqs, k);
    if ((rc = sy_spec_source_new(&s->spec, cfg, s->e, &s->src, err)))
        return rc;
    sy_info("speculative decoding: method %s, %d drafts per step, off above %d decoding sequences or under %.2f "
            "acceptance per %d drafts", sy_spec_method_name(s->spec.method), k, s->spec.max_batch,
            (double)s->spec.min_acceptance, s->spec.policy_window);
    return SY_OK;
}

void sy_sched_add(sy_sched *s, sy_seq *q)
{
    q->order = s->next_order++;
    q->running = false;
    list_push_back(&s->waiting, q);
    if (s->m) {
        pthread_mutex_lock(&s->m->lock);
        s->m->prompt_tokens += (uint64_t)q->n_prompt;
        pthread_mutex_unlock(&s->m->lock);
    }
    update_gauges(s);
}

bool sy_sched_cancel(sy_sched *s, uint64_t id)
{
    seq_list *lists[] = {&s->running, &s->waiting};
    for (int i = 0; i < 2; i++)
        for (sy_seq *q = lists[i]->head; q; q = q->next)
            if (q->id == id) {
                sy_seq_emit_done(q, "abort");
                retire(s, q, OUT_ABORT);
                update_gauges(s);
                return true;
            }
    return false;
}

bool sy_sched_idle(const sy_sched *s) { return s->running.n == 0 && s->waiting.n == 0; }

void sy_sched_stats_get(const sy_sched *s, sy_sched_stats *st)
{
    memset(st, 0, sizeof *st);
    st->running = s->running.n;
    st->waiting = s->waiting.n;
    st->kv_total = s->kv->n_blocks;
    st->kv_free = s->kv->n_free;
    st->kv_cached_idle = sy_prefix_cache_idle(s->pc);
    st->kv_cached = sy_prefix_cache_size(s->pc);
    st->steps = s->n_steps;
    st->preemptions = s->n_preempted;
    st->cached_tokens = s->n_cached_tokens;
    st->spec_draft_tokens = s->spec_drafted;
    st->spec_accepted_tokens = s->spec_accepted;
    st->spec_verifies = s->spec_verifies;
    st->spec_method = sy_spec_method_name(s->src ? s->spec.method : SY_SPEC_NONE);
}

/* ------------------------------------------------------------ blocks */

/* Hash-chain key of q's full block i (computed once, kept across preemption). */
static uint64_t block_key(sy_sched *s, sy_seq *q, int32_t i)
{
    while (q->n_hashed <= i) {
        const int32_t j = q->n_hashed;
        q->hashes[j] = sy_prefix_hash(j ? q->hashes[j - 1] : 0, q->tokens + (size_t)j * s->bs, s->bs);
        q->n_hashed++;
    }
    return q->hashes[i];
}

/* Grows q's block table to cover n_tokens; all or nothing. */
static int grow_blocks(sy_sched *s, sy_seq *q, int32_t n_tokens)
{
    const int32_t need = sy_kv_blocks_for(s->kv, n_tokens) - q->n_blocks;
    if (need <= 0)
        return SY_OK;
    int rc = sy_prefix_cache_alloc(s->pc, need, q->blocks + q->n_blocks);
    if (rc == SY_OK)
        q->n_blocks += need;
    return rc;
}

/* Most tokens q could hold with its blocks plus every free or evictable one. */
static int32_t coverable_tokens(sy_sched *s, const sy_seq *q)
{
    const int64_t avail = (int64_t)s->kv->n_free + sy_prefix_cache_idle(s->pc);
    int64_t n = ((int64_t)q->n_blocks + avail) * s->bs;
    return n > INT32_MAX ? INT32_MAX : (int32_t)n;
}

/*
 * The token after q's block i when q's MTP K/V at the block's last position holds (or is about to hold) the
 * entry computed from it, else -1: the MTP source writes its K/V in the target's blocks, and the entry at
 * position p depends on t[p + 1], outside the block's key. A sequence that does not speculate (spec_off)
 * neither reads nor writes the MTP K/V.
 */
static int32_t mtp_after(const sy_sched *s, const sy_seq *q, int32_t i)
{
    if (!s->src || s->src->ops->method != SY_SPEC_MTP || q->spec_off)
        return -1;
    const int32_t p = (i + 1) * s->bs;
    return p < q->n_tokens ? q->tokens[p] : -1;
}

/* Shares the cached full blocks that start q's tokens; always leaves at least one token to compute. */
static void match_prefix(sy_sched *s, sy_seq *q)
{
    const int32_t limit = (q->n_tokens - 1) / s->bs;
    for (int32_t i = 0; i < limit; i++) {
        int32_t b = sy_prefix_cache_lookup(s->pc, block_key(s, q, i), q->tokens + (size_t)i * s->bs,
                                           mtp_after(s, q, i));
        if (b < 0)
            break;
        sy_kv_blocks_retain(s->kv, &b, 1);
        q->blocks[q->n_blocks++] = b;
    }
    q->n_computed = q->n_registered = q->n_blocks;
    q->n_computed *= s->bs;
}

/* Offers q's newly completed full blocks to the prefix cache (for a fed sequence, after the source's after_step). */
static void register_full_blocks(sy_sched *s, sy_seq *q)
{
    const int32_t full = q->n_computed / s->bs;
    for (; q->n_registered < full; q->n_registered++) {
        const int32_t i = q->n_registered;
        sy_prefix_cache_insert(s->pc, block_key(s, q, i), q->blocks[i], q->tokens + (size_t)i * s->bs,
                               mtp_after(s, q, i));
    }
}

/* Frees q's blocks and puts it at the front of the queue: it is recomputed when blocks allow. */
static void preempt(sy_sched *s, sy_seq *q)
{
    if (s->src)
        s->src->ops->forget(s->src, q);
    list_unlink(&s->running, q);
    drop_blocks(s, q);
    q->running = false;
    q->step_tokens = q->spec_k = 0;
    q->n_preempted++;
    list_push_front(&s->waiting, q);
    s->n_preempted++;
    s->hold_admissions = true;
    if (s->m) {
        pthread_mutex_lock(&s->m->lock);
        s->m->preemptions++;
        pthread_mutex_unlock(&s->m->lock);
    }
}

/* ------------------------------------------------------------ planning */

static void add_to_batch(sy_sched *s, sy_seq *q, int32_t n, int32_t *budget)
{
    q->step_tokens = n;
    s->batch[s->n_batch++] = q;
    *budget -= n;
}

/* Decodes: one token for every running sequence past its prefill, oldest first, preempting the youngest for blocks. */
static void plan_decodes(sy_sched *s, int32_t n_snap, int32_t *budget)
{
    for (int32_t i = 0; i < n_snap && s->n_batch < s->max_seqs && *budget > 0; i++) {
        sy_seq *q = s->snap[i];
        if (!q->running || q->n_tokens - q->n_computed != 1)
            continue;
        while (q->running && grow_blocks(s, q, q->n_computed + 1) != SY_OK) {
            /* The youngest not already in this step; q itself when it is the youngest. */
            sy_seq *victim = s->running.tail;
            while (victim && victim->step_tokens > 0)
                victim = victim->prev;
            if (!victim)
                break;
            preempt(s, victim);
        }
        if (q->running && q->n_blocks * s->bs >= q->n_computed + 1)
            add_to_batch(s, q, 1, budget);
    }
}

/* ------------------------------------------------------------ drafts */

/* Asks the source for drafts of seqs[0..n), each allowed kmax, and puts them behind each sequence's tokens. */
static void propose(sy_sched *s, sy_seq *const *seqs, int32_t n, int32_t kmax, int32_t *budget)
{
    sy_err err = {{0}};
    if (s->src->ops->propose(s->src, seqs, n, kmax, s->drafts, s->n_drafts, &err) != SY_OK) {
        sy_warn("speculative decoding (%s): proposing drafts failed: %s; these sequences decode plainly this step",
                sy_spec_method_name(s->spec.method), err.msg);
        for (int32_t i = 0; i < n; i++)
            s->n_drafts[i] = 0;
    }
    for (int32_t i = 0; i < n; i++) {
        sy_seq *q = seqs[i];
        int32_t m = s->n_drafts[i];
        m = m < 0 ? 0 : m > kmax ? kmax : m;
        for (int32_t j = 0; j < m; j++) /* a source's bad id must not reach the engine */
            if (s->drafts[(size_t)i * (size_t)kmax + (size_t)j] < 0 ||
                s->drafts[(size_t)i * (size_t)kmax + (size_t)j] >= s->vocab)
                m = j;
        /* The verify step's tokens are contiguous: the last accepted token, then the drafts after it. */
        memcpy(q->tokens + q->n_tokens, s->drafts + (size_t)i * (size_t)kmax, sizeof(int32_t) * (size_t)m);
        *budget += q->spec_k - m; /* what the source did not use goes back to the prefills */
        q->spec_k = m;
        q->step_tokens = 1 + m;
        if (m > 0 && sy_log_get_level() >= SY_LOG_DEBUG) { /* -v: the drafts themselves, for comparing sources */
            char ids[256];
            int at = 0;
            for (int32_t j = 0; j < m && at < (int)sizeof ids - 12; j++)
                at += snprintf(ids + at, sizeof ids - (size_t)at, " %d", q->tokens[q->n_tokens + j]);
            sy_debug("speculative (%s): request %llu at %d drafts%s", sy_spec_method_name(s->spec.method),
                     (unsigned long long)q->id, q->n_tokens, ids);
        }
    }
}

/*
 * Drafts for the step's decodes, when it has at most max_batch of them:
 * each speculating sequence gets up to num_draft_tokens (or its request's
 * smaller num_draft_tokens, spec_max), as far as the
 * token budget, its max_tokens (a verify yields at most k + 1 tokens) and
 * the free blocks go. Drafts never preempt anyone: a sequence that cannot
 * get the blocks decodes plainly.
 */
static void plan_drafts(sy_sched *s, int32_t *budget)
{
    if (!s->src)
        return;
    const int32_t K = s->spec.num_draft_tokens;
    int32_t n_decodes = s->n_batch, n_full = 0, n_short = 0;
    if (n_decodes > s->spec.max_batch)
        return;
    for (int32_t i = 0; i < n_decodes; i++) {
        sy_seq *q = s->batch[i];
        if (q->spec_off)
            continue;
        int32_t k = q->spec_max > 0 && q->spec_max < K ? q->spec_max : K; /* the request's num_draft_tokens */
        if (k > q->max_tokens - q->n_generated - 1)
            k = q->max_tokens - q->n_generated - 1;
        if (k > *budget)
            k = *budget;
        if (k <= 0 || grow_blocks(s, q, q->n_tokens + k) != SY_OK)
            continue;
        q->spec_k = k;
        *budget -= k;
        /* Full-length asks go to the source together; the few shorter ones (near max_tokens, a short budget)
         * one by one, so that each call's kmax is what its sequences' blocks cover. */
        if (k == K)
            s->spec_seqs[n_full++] = q;
        else
            s->spec_seqs[s->max_seqs - 1 - n_short++] = q;
    }
    if (n_full)
        propose(s, s->spec_seqs, n_full, K, budget);
    for (int32_t i = 0; i < n_short; i++) {
        sy_seq *q = s->spec_seqs[s->max_seqs - 1 - i];
        propose(s, &q, 1, q->spec_k, budget);
    }
}

/* Prefill chunks of running sequences, as far as the token budget and the free blocks go. */
static void plan_prefills(sy_sched *s, int32_t n_snap, int32_t *budget)
{
    for (int32_t i = 0; i < n_snap && s->n_batch < s->max_seqs && *budget > 0; i++) {
        sy_seq *q = s->snap[i];
        if (!q->running || q->step_tokens > 0 || q->n_tokens - q->n_computed <= 1)
            continue;
        int32_t n = q->n_tokens - q->n_computed;
        if (n > *budget)
            n = *budget;
        const int32_t room = coverable_tokens(s, q) - q->n_computed;
        if (n > room)
            n = room;
        if (n > 0 && grow_blocks(s, q, q->n_computed + n) == SY_OK)
            add_to_batch(s, q, n, budget);
    }
}

/* Admits waiting requests in FCFS order while sequences, tokens and blocks allow. */
static void plan_admissions(sy_sched *s, int32_t *budget)
{
    if (s->hold_admissions && s->running.n > 0)
        return;
    while (s->waiting.head && s->running.n < s->max_seqs && s->n_batch < s->max_seqs && *budget > 0) {
        sy_seq *q = s->waiting.head;
        match_prefix(s, q);
        const int32_t hit = q->n_computed;
        int32_t n = q->n_tokens - q->n_computed;
        if (n > *budget)
            n = *budget;
        const int32_t room = coverable_tokens(s, q) - q->n_computed;
        if (n > room)
            n = room;
        if (n <= 0 || grow_blocks(s, q, q->n_computed + n) != SY_OK) {
            drop_blocks(s, q); /* head-of-line waits: FCFS */
            return;
        }
        list_unlink(&s->waiting, q);
        q->running = true;
        list_insert_ordered(&s->running, q);
        if (q->n_preempted == 0)
            q->cached_tokens = hit;
        s->n_cached_tokens += (uint64_t)hit;
        if (s->m && hit) {
            pthread_mutex_lock(&s->m->lock);
            s->m->cached_tokens += (uint64_t)hit;
            pthread_mutex_unlock(&s->m->lock);
        }
        add_to_batch(s, q, n, budget);
    }
}

static void plan(sy_sched *s)
{
    for (;;) {
        s->n_batch = 0;
        int32_t budget = s->max_batch_tokens, n_snap = 0;
        for (sy_seq *q = s->running.head; q; q = q->next) {
            q->step_tokens = q->spec_k = 0;
            s->snap[n_snap++] = q;
        }
        plan_decodes(s, n_snap, &budget);
        plan_drafts(s, &budget);
        plan_prefills(s, n_snap, &budget);
        plan_admissions(s, &budget);
        if (s->n_batch > 0 || s->running.n == 0)
            return;
        /* Every running prefill is stuck on blocks: free the youngest's and try again. */
        preempt(s, s->running.tail);
    }
}

/* ------------------------------------------------------------ verification */

/*
 * Frees q's blocks wholly past the tokens it holds (a verify grew them for
 * its drafts; the rejected ones' K/V is garbage). Those blocks were never
 * offered to the prefix cache (only blocks below n_computed are), so each
 * is q's alone and goes back to the pool.
 */
static void trim_blocks(sy_sched *s, sy_seq *q)
{
    const int32_t keep = sy_kv_blocks_for(s->kv, q->n_tokens);
    if (q->n_blocks > keep) {
        sy_kv_blocks_release(s->kv, q->blocks + keep, q->n_blocks - keep);
        q->n_blocks = keep;
    }
}

/*
 * The per-request switch-off: every policy_window drafted tokens, a request
 * that accepted fewer than min_acceptance of them stops speculating for
 * good (its verifies cost k + 1 positions for about one token); the source
 * forgets it.
 */
static void update_policy(sy_sched *s, sy_seq *q, int32_t drafted, int32_t accepted)
{
    if (sy_spec_policy_says_off(&s->spec, &q->spec_win_drafted, &q->spec_win_accepted, drafted, accepted)) {
        q->spec_off = true;
        s->src->ops->forget(s->src, q);
    }
}

/* The source catches up with the step; one that fails stops speculating for those sequences, which go on plainly. */
static void after_step(sy_sched *s, int32_t n_fed)
{
    sy_err err = {{0}};
    if (s->src->ops->after_step(s->src, s->fed, n_fed, &err) == SY_OK)
        return;
    sy_warn("speculative decoding (%s): the draft source failed after a step: %s; its %d sequences go on without "
            "speculation", sy_spec_method_name(s->spec.method), err.msg, n_fed);
    for (int32_t i = 0; i < n_fed; i++) {
        s->fed[i].seq->spec_off = true;
        s->src->ops->forget(s->src, s->fed[i].seq);
    }
}

/* ------------------------------------------------------------ the step */

static void fail_seq(sy_sched *s, sy_seq *q, const char *msg)
{
    sy_seq_emit_error(q, 500, msg);
    retire(s, q, OUT_FAILED);
}

int sy_sched_step(sy_sched *s, sy_err *err)
{
    plan(s);
    if (s->n_batch == 0) {
        if (s->waiting.head) {
            /* Nothing runs and the head cannot get blocks: it can never run (a pool smaller than
             * one sequence); answer it rather than wait forever. */
            sy_seq *q = s->waiting.head;
            sy_seq_emit_error(q, 503, "the KV cache cannot hold this request");
            retire(s, q, OUT_FAILED);
        }
        update_gauges(s);
        return 0;
    }
    int32_t n_picks = 0;
    for (int32_t i = 0; i < s->n_batch; i++) {
        sy_seq *q = s->batch[i];
        const bool verify = q->spec_k > 0;
        s->steps[i] = (sy_step_seq){.tokens = q->tokens + q->n_computed,
                                    .n_tokens = q->step_tokens,
                                    .ctx_len = q->n_computed,
                                    .blocks = q->blocks,
                                    .n_blocks = sy_kv_blocks_for(s->kv, q->n_computed + q->step_tokens),
                                    .want_logits = verify || q->n_computed + q->step_tokens == q->n_tokens,
                                    .n_logits = verify ? 1 + q->spec_k : 0};
        s->pick_at[i] = n_picks;
        if (!s->steps[i].want_logits)
            continue;
        /* sy_seq_greedy_only holds for every row of a verify when it holds for the first (min_tokens is reached). */
        if (sy_seq_greedy_only(q)) {
            s->steps[i].greedy_id = &s->picks[n_picks];
            n_picks += verify ? 1 + q->spec_k : 1;
        } else if (!verify && sy_seq_sample_only(q) && sy_engine_tp_size(s->e) == 1) {
            /* The uniform is drawn now, once, as sy_sampler_next would: the seed's sequence stays the same. */
            s->sample_rows[i] = sy_sampler_row(&q->sampler);
            s->steps[i].greedy_id = &s->picks[n_picks++];
            s->steps[i].sample = &s->sample_rows[i];
        }
    }
    const int32_t n = s->n_batch;
    int rc = sy_engine_step(s->e, s->steps, n, s->logits, err);
    s->n_steps++;
    if (rc) {
        for (int32_t i = 0; i < n; i++)
            fail_seq(s, s->batch[i], err->msg);
        update_gauges(s);
        return rc;
    }
    const double now = sy_now();
    uint64_t generated = 0, drafted = 0, accepted = 0, verifies = 0;
    int32_t row = 0, token_row = 0, n_fed = 0;
    for (int32_t i = 0; i < n; i++) {
        sy_seq *q = s->batch[i];
        const sy_step_seq *st = &s->steps[i];
        const int32_t pos0 = q->n_computed, k = q->spec_k, row0 = token_row;
        token_row += st->n_tokens;
        q->step_tokens = q->spec_k = 0;
        if (!st->want_logits) {
            q->n_computed += st->n_tokens;
            if (s->src && !q->spec_off)
                s->fed[n_fed++] = (sy_spec_fed){.seq = q, .pos0 = pos0, .n_fed = st->n_tokens,
                                                .n_kept = st->n_tokens, .row0 = row0};
            else
                register_full_blocks(s, q);
            continue;
        }
        /* Row j predicts the token after position pos0 + st->n_tokens - rows + j; a verify's rows are walked in
         * order and stop at the first rejected draft or when the request finishes (the rest are dropped). */
        const int32_t rows = k > 0 ? 1 + k : 1;
        const int32_t base = q->n_tokens; /* with k > 0: the drafts are tokens[base .. base + k) */
        sy_err oerr = {{0}};
        int r = 0;
        int32_t kept = 0; /* drafts accepted */
        for (int32_t j = 0; j < rows; j++) {
            const int32_t draft = j < k ? q->tokens[base + j] : -1;
            bool ok = false;
            /* Greedy sequences got their picks and no logits rows (rows are packed). */
            if (st->greedy_id) {
                const int32_t tok = st->greedy_id[j];
                ok = draft >= 0 && tok == draft;
                r = sy_seq_on_pick(q, &s->out, tok, &oerr);
            } else if (k > 0) {
                r = sy_seq_on_verify(q, &s->out, s->logits + (size_t)(row + j) * (size_t)s->vocab, draft, &ok, &oerr);
            } else {
                r = sy_seq_on_logits(q, &s->out, s->logits + (size_t)row * (size_t)s->vocab, &oerr);
            }
            generated++;
            if (s->m) {
                pthread_mutex_lock(&s->m->lock);
                if (q->n_generated == 1)
                    sy_hist_observe(&s->m->ttft, now - q->t_arrival);
                else
                    sy_hist_observe(&s->m->tpot, now - q->t_last);
                pthread_mutex_unlock(&s->m->lock);
            }
            if (q->n_generated == 1)
                q->t_first = now;
            q->t_last = now;
            kept += ok;
            if (r != 0 || !ok)
                break;
        }
        if (!st->greedy_id)
            row += rows;
        /* The KV of the last accepted token and of the accepted drafts stays; the rest is rolled back. */
        q->n_computed = k > 0 ? pos0 + 1 + kept : pos0 + st->n_tokens;
        if (k > 0) {
            drafted += (uint64_t)k;
            accepted += (uint64_t)kept;
            verifies++;
            update_policy(s, q, k, kept);
        }
        if (r == 1) {
            retire(s, q, OUT_OK);
            continue;
        }
        if (r < 0) {
            fail_seq(s, q, oerr.msg);
            continue;
        }
        trim_blocks(s, q);
        if (s->src && !q->spec_off)
            s->fed[n_fed++] = (sy_spec_fed){.seq = q, .pos0 = pos0, .n_fed = st->n_tokens,
                                            .n_kept = q->n_computed - pos0, .row0 = row0};
        else
            register_full_blocks(s, q);
    }
    /* A fed sequence's blocks enter the cache once the source has written their MTP K/V (mtp_after): one whose
     * source failed is spec_off by then and registers them as holding none. */
    if (n_fed)
        after_step(s, n_fed);
    for (int32_t i = 0; i < n_fed; i++)
        register_full_blocks(s, s->fed[i].seq);
    s->spec_drafted += drafted;
    s->spec_accepted += accepted;
    s->spec_verifies += verifies;
    if (s->m) {
        pthread_mutex_lock(&s->m->lock);
        s->m->generation_tokens += generated;
        s->m->steps++;
        s->m->spec_draft_tokens[s->spec.method] += drafted;
        s->m->spec_accepted_tokens[s->spec.method] += accepted;
        s->m->spec_verifies[s->spec.method] += verifies;
        pthread_mutex_unlock(&s->m->lock);
    }
    update_gauges(s);
    return n;
}
