#include "config.h"

#include "serve/scheduler.h"
#include "serve/prefix_cache.h"
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
    float *logits;      /* [max_seqs * vocab] */
    int32_t *picks;     /* [max_seqs] picks the engine made (sy_seq_greedy_only and sy_seq_sample_only sequences) */
    sy_sample_row *sample_rows; /* [max_seqs] the draws of sy_seq_sample_only sequences */
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
    s->logits = malloc(sizeof(float) * (size_t)s->max_seqs * (size_t)s->vocab);
    s->picks = malloc(sizeof(int32_t) * (size_t)s->max_seqs);
    s->sample_rows = malloc(sizeof(sy_sample_row) * (size_t)s->max_seqs);
    if (!s->pc || !s->snap || !s->batch || !s->steps || !s->logits || !s->picks || !s->sample_rows) {
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
    free(s->sample_rows);
    free(s);
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

/* Shares the cached full blocks that start q's tokens; always leaves at least one token to compute. */
static void match_prefix(sy_sched *s, sy_seq *q)
{
    const int32_t limit = (q->n_tokens - 1) / s->bs;
    for (int32_t i = 0; i < limit; i++) {
        int32_t b = sy_prefix_cache_lookup(s->pc, block_key(s, q, i), q->tokens + (size_t)i * s->bs);
        if (b < 0)
            break;
        sy_kv_blocks_retain(s->kv, &b, 1);
        q->blocks[q->n_blocks++] = b;
    }
    q->n_computed = q->n_registered = q->n_blocks;
    q->n_computed *= s->bs;
}

/* Offers q's newly completed full blocks to the prefix cache. */
static void register_full_blocks(sy_sched *s, sy_seq *q)
{
    const int32_t full = q->n_computed / s->bs;
    for (; q->n_registered < full; q->n_registered++) {
        const int32_t i = q->n_registered;
        sy_prefix_cache_insert(s->pc, block_key(s, q, i), q->blocks[i], q->tokens + (size_t)i * s->bs);
    }
}

/* Frees q's blocks and puts it at the front of the queue: it is recomputed when blocks allow. */
static void preempt(sy_sched *s, sy_seq *q)
{
    list_unlink(&s->running, q);
    drop_blocks(s, q);
    q->running = false;
    q->step_tokens = 0;
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
            q->step_tokens = 0;
            s->snap[n_snap++] = q;
        }
        plan_decodes(s, n_snap, &budget);
        plan_prefills(s, n_snap, &budget);
        plan_admissions(s, &budget);
        if (s->n_batch > 0 || s->running.n == 0)
            return;
        /* Every running prefill is stuck on blocks: free the youngest's and try again. */
        preempt(s, s->running.tail);
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
    for (int32_t i = 0; i < s->n_batch; i++) {
        sy_seq *q = s->batch[i];
        s->steps[i] = (sy_step_seq){.tokens = q->tokens + q->n_computed,
                                    .n_tokens = q->step_tokens,
                                    .ctx_len = q->n_computed,
                                    .blocks = q->blocks,
                                    .n_blocks = sy_kv_blocks_for(s->kv, q->n_computed + q->step_tokens),
                                    .want_logits = q->n_computed + q->step_tokens == q->n_tokens};
        if (!s->steps[i].want_logits)
            continue;
        if (sy_seq_greedy_only(q)) {
            s->steps[i].greedy_id = &s->picks[i];
        } else if (sy_seq_sample_only(q) && sy_engine_tp_size(s->e) == 1) {
            /* The uniform is drawn now, once, as sy_sampler_next would: the seed's sequence stays the same. */
            s->sample_rows[i] = sy_sampler_row(&q->sampler);
            s->steps[i].greedy_id = &s->picks[i];
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
    uint64_t generated = 0;
    int32_t row = 0;
    for (int32_t i = 0; i < n; i++) {
        sy_seq *q = s->batch[i];
        const bool want = s->steps[i].want_logits;
        q->n_computed += q->step_tokens;
        q->step_tokens = 0;
        register_full_blocks(s, q);
        if (!want)
            continue;
        sy_err oerr = {{0}};
        /* Greedy sequences got their pick and no logits row (rows are packed). */
        int r = s->steps[i].greedy_id ? sy_seq_on_pick(q, &s->out, s->picks[i], &oerr)
                                      : sy_seq_on_logits(q, &s->out, s->logits + (size_t)row++ * (size_t)s->vocab, &oerr);
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
        if (r == 1)
            retire(s, q, OUT_OK);
        else if (r < 0)
            fail_seq(s, q, oerr.msg);
    }
    if (s->m) {
        pthread_mutex_lock(&s->m->lock);
        s->m->generation_tokens += generated;
        s->m->steps++;
        pthread_mutex_unlock(&s->m->lock);
    }
    update_gauges(s);
    return n;
}
