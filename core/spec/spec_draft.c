/*
 * [speculative] method = draft: a separate small model with the target's
 * tokenizer proposes each step's drafts greedily.
 *
 * The draft is a second sy_engine opened by this core through the plugin
 * files the target runs, on a copy of the configuration whose [model] path
 * is the draft's directory, with its own paged-KV pool. Each sequence has
 * its own block table in that pool and a copy of the tokens whose K/V the
 * draft holds: the draft KV's valid length is the longest common prefix
 * of that copy and the sequence's accepted tokens, so a rejected draft
 * (and anything else the scheduler rolled back) falls out of it without
 * the scheduler saying which.
 *
 * A propose call first catches the draft KV up over accepted tokens it has
 * not seen (prefill-shaped chunks, batched across sequences), then runs k
 * one-token draft steps, each batched across every proposing sequence. A
 * sequence the draft pool cannot hold gets no drafts and decodes plainly.
 */
#include "config.h"

#include "serve/seq.h"
#include "spec/spec.h"
#include "util/log.h"
#include "util/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* What the source keeps per sequence, in the sequence's spec_state slot. */
typedef struct draft_seq {
    const sy_seq *seq;
    int32_t *blocks;
    int32_t n_blocks, cap_blocks;
    int32_t *held; /* tokens whose K/V the draft's blocks hold */
    int32_t n_held, cap_held;
    /* This propose call: drafts still wanted (0: none or done), the caller's index. */
    int32_t k, out;
} draft_seq;

typedef struct draft_src {
    sy_spec_source base;
    sy_engine *draft;
    sy_config *cfg; /* the draft engine's configuration (the draft engine keeps pointers into it) */
    sy_kv_blocks *kv;
    int32_t target_vocab, max_seqs, max_batch_tokens, max_seq_len;
    draft_seq **act; /* [cap_act] the sequences proposing in this call */
    int32_t cap_act;
    draft_seq **grp; /* [max_seqs] the sequences of one draft step */
    sy_step_seq *steps; /* [max_seqs] */
    int32_t *picks;     /* [max_seqs] */
    float *logits;      /* [max_seqs * draft vocab]: the step's scratch when the device does not pick */
} draft_src;

/* ------------------------------------------------------------ per-sequence state */

static void drop_blocks_from(draft_src *d, draft_seq *ds, int32_t keep)
{
    if (keep < ds->n_blocks)
        sy_kv_blocks_release(d->kv, ds->blocks + keep, ds->n_blocks - keep);
    if (keep < ds->n_blocks)
        ds->n_blocks = keep;
}

static void reset_seq(draft_src *d, draft_seq *ds)
{
    drop_blocks_from(d, ds, 0);
    ds->n_held = 0;
}

static draft_seq *get_seq(sy_seq *q)
{
    if (!q->spec_state) {
        draft_seq *ds = calloc(1, sizeof *ds);
        if (!ds)
            return NULL;
        ds->seq = q;
        q->spec_state = ds;
    }
    return q->spec_state;
}

static void free_seq(draft_src *d, draft_seq *ds)
{
    reset_seq(d, ds);
    free(ds->blocks);
    free(ds->held);
    free(ds);
}

/* Rolls the draft KV back to what still matches the sequence's accepted tokens; frees the blocks past it. */
static void sync_prefix(draft_src *d, draft_seq *ds, const sy_seq *q)
{
    const int32_t n = ds->n_held < q->n_tokens ? ds->n_held : q->n_tokens;
    int32_t i = 0;
    while (i < n && ds->held[i] == q->tokens[i])
        i++;
    ds->n_held = i;
    drop_blocks_from(d, ds, sy_kv_blocks_for(d->kv, i));
}

/* Room for n_pos positions: blocks and the held copy; false when the draft pool is out of blocks. */
static bool reserve(draft_src *d, draft_seq *ds, int32_t n_pos)
{
    const int32_t nb = sy_kv_blocks_for(d->kv, n_pos);
    if (nb > ds->cap_blocks) {
        int32_t *p = realloc(ds->blocks, sizeof *p * (size_t)nb);
        if (!p)
            return false;
        ds->blocks = p;
        ds->cap_blocks = nb;
    }
    if (n_pos > ds->cap_held) {
        const int32_t cap = n_pos > 2 * ds->cap_held ? n_pos : 2 * ds->cap_held;
        int32_t *p = realloc(ds->held, sizeof *p * (size_t)cap);
        if (!p)
            return false;
        ds->held = p;
        ds->cap_held = cap;
    }
    if (nb > ds->n_blocks) {
        if (sy_kv_blocks_alloc(d->kv, nb - ds->n_blocks, ds->blocks + ds->n_blocks) != SY_OK)
            return false;
        ds->n_blocks = nb;
    }
    return true;
}

/* ------------------------------------------------------------ draft steps */

static int run_step(draft_src *d, int32_t ns, sy_err *err)
{
    int rc = sy_engine_step(d->draft, d->steps, ns, d->logits, err);
    if (rc && err) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        sy_err_set(err, rc, "[speculative] draft model step over %d sequences: %s", ns, msg);
    }
    /* What the step fed is in the draft KV now: the held copies follow. */
    for (int32_t s = 0; !rc && s < ns; s++) {
        draft_seq *ds = d->grp[s];
        memcpy(ds->held + ds->n_held, d->steps[s].tokens, sizeof(int32_t) * (size_t)d->steps[s].n_tokens);
        ds->n_held += d->steps[s].n_tokens;
    }
    return rc;
}

static sy_step_seq step_of(const draft_src *d, const draft_seq *ds, const int32_t *tokens, int32_t n)
{
    return (sy_step_seq){.tokens = tokens,
                         .n_tokens = n,
                         .ctx_len = ds->n_held,
                         .blocks = ds->blocks,
                         .n_blocks = sy_kv_blocks_for(d->kv, ds->n_held + n)};
}

/*
 * Feeds, without logits, all but the last unseen token of every sequence
 * with more than `small` of them (a prompt after prefill, a context after
 * preemption), in chunks that fill the draft engine's token budget.
 */
static int catch_up(draft_src *d, int32_t na, int32_t small, sy_err *err)
{
    for (;;) {
        int32_t ns = 0, budget = d->max_batch_tokens;
        for (int32_t a = 0; a < na && ns < d->max_seqs && budget > 0; a++) {
            draft_seq *ds = d->act[a];
            const int32_t pending = ds->seq->n_tokens - ds->n_held;
            if (pending <= small)
                continue;
            const int32_t c = pending - 1 < budget ? pending - 1 : budget;
            d->steps[ns] = step_of(d, ds, ds->seq->tokens + ds->n_held, c);
            d->grp[ns++] = ds;
            budget -= c;
        }
        if (ns == 0)
            return SY_OK;
        int rc = run_step(d, ns, err);
        if (rc)
            return rc;
    }
}

/* k greedy draft steps for act[g0, g1): the first feeds each one's unseen tokens, the rest its last draft. */
static int draft_group(draft_src *d, int32_t g0, int32_t g1, int32_t kmax, int32_t *drafts, int32_t *n_drafts,
                       sy_err *err)
{
    for (int32_t j = 0; j < kmax; j++) {
        int32_t ns = 0;
        for (int32_t a = g0; a < g1; a++) {
            draft_seq *ds = d->act[a];
            if (j >= ds->k)
                continue;
            if (j == 0)
                d->steps[ns] = step_of(d, ds, ds->seq->tokens + ds->n_held, ds->seq->n_tokens - ds->n_held);
            else
                d->steps[ns] = step_of(d, ds, drafts + (size_t)ds->out * (size_t)kmax + (size_t)j - 1, 1);
            d->steps[ns].want_logits = true;
            d->steps[ns].greedy_id = &d->picks[ns];
            d->grp[ns++] = ds;
        }
        if (ns == 0)
            return SY_OK;
        int rc = run_step(d, ns, err);
        if (rc)
            return rc;
        for (int32_t s = 0; s < ns; s++) {
            draft_seq *ds = d->grp[s];
            const int32_t pick = d->picks[s];
            if (pick < 0 || pick >= d->target_vocab) { /* a padded draft vocabulary's id the target has not */
                ds->k = j;
                continue;
            }
            drafts[(size_t)ds->out * (size_t)kmax + (size_t)j] = pick;
            n_drafts[ds->out] = j + 1;
        }
    }
    return SY_OK;
}

static int draft_propose(sy_spec_source *src, struct sy_seq *const *seqs, int32_t n, int32_t kmax, int32_t *drafts,
                         int32_t *n_drafts, sy_err *err)
{
    draft_src *d = (draft_src *)src;
    for (int32_t i = 0; i < n; i++)
        n_drafts[i] = 0;
    if (kmax <= 0 || n <= 0)
        return SY_OK;
    if (n > d->cap_act) {
        draft_seq **p = realloc(d->act, sizeof *p * (size_t)n);
        if (!p)
            return sy_err_set(err, SY_ERR_NOMEM, "[speculative] draft: cannot allocate the state of %d sequences", n);
        d->act = p;
        d->cap_act = n;
    }
    int32_t na = 0;
    for (int32_t i = 0; i < n; i++) {
        sy_seq *q = seqs[i];
        if (q->n_tokens < 1)
            continue;
        draft_seq *ds = get_seq(q);
        if (!ds)
            return sy_err_set(err, SY_ERR_NOMEM, "[speculative] draft: cannot allocate a sequence's state");
        sync_prefix(d, ds, q);
        if (ds->n_held == q->n_tokens)
            ds->n_held--; /* the last token is fed again: its logits give the first draft */
        int32_t k = kmax;
        if ((int64_t)q->n_tokens + k - 1 > d->max_seq_len)
            k = d->max_seq_len - q->n_tokens + 1;
        if (k <= 0)
            continue;
        /* The last draft is never fed: the draft KV reaches n_tokens + k - 1 positions. */
        if (!reserve(d, ds, q->n_tokens + k - 1)) {
            reset_seq(d, ds); /* no drafts this time; the blocks it held go to the others */
            continue;
        }
        ds->k = k;
        ds->out = i;
        d->act[na++] = ds;
    }
    /* A normal step has at most k + 1 unseen tokens (all k accepted, and the target's own pick). */
    const int32_t small = kmax + 1 < d->max_batch_tokens ? kmax + 1 : d->max_batch_tokens;
    int rc = catch_up(d, na, small, err);
    for (int32_t g0 = 0; !rc && g0 < na;) {
        int32_t g1 = g0, tokens = 0;
        while (g1 < na && g1 - g0 < d->max_seqs) {
            const int32_t p = d->act[g1]->seq->n_tokens - d->act[g1]->n_held;
            if (g1 > g0 && tokens + p > d->max_batch_tokens)
                break;
            tokens += p;
            g1++;
        }
        rc = draft_group(d, g0, g1, kmax, drafts, n_drafts, err);
        g0 = g1;
    }
    return rc;
}

static int draft_after_step(sy_spec_source *src, const sy_spec_fed *fed, int32_t n, sy_err *err)
{
    (void)err;
    draft_src *d = (draft_src *)src;
    for (int32_t i = 0; i < n; i++) {
        draft_seq *ds = fed[i].seq->spec_state;
        if (ds)
            sync_prefix(d, ds, fed[i].seq); /* rejected drafts leave the draft KV at once */
    }
    return SY_OK;
}

static void draft_forget(sy_spec_source *src, struct sy_seq *seq)
{
    if (!seq->spec_state)
        return;
    free_seq((draft_src *)src, seq->spec_state);
    seq->spec_state = NULL;
}

static void draft_free(sy_spec_source *src)
{
    draft_src *d = (draft_src *)src;
    if (!d)
        return;
    free(d->act);
    free(d->grp);
    free(d->steps);
    free(d->picks);
    free(d->logits);
    sy_engine_close(d->draft);
    sy_config_free(d->cfg);
    free(d);
}

static const sy_spec_source_ops draft_ops = {
    .method = SY_SPEC_DRAFT,
    .after_step = draft_after_step,
    .propose = draft_propose,
    .forget = draft_forget,
    .free = draft_free,
};

/* ------------------------------------------------------------ opening */

static const char *piece_or(const sy_tokenizer *t, int32_t id)
{
    const char *p = sy_tokenizer_piece(t, id);
    return p ? p : "(none)";
}

/* Drafts are token ids: the draft's tokenizer must be the target's, id for id. */
static int check_tokenizers(const sy_tokenizer *tt, const char *tpath, const sy_tokenizer *dt, const char *dpath,
                            sy_err *err)
{
    const int32_t nt = sy_tokenizer_vocab_size(tt), nd = sy_tokenizer_vocab_size(dt);
    if (nt != nd)
        return sy_err_set(err, SY_ERR_INVALID,
                          "[speculative] draft_model %s: its tokenizer has %d tokens, the target's (%s) %d; a draft "
                          "model must have the target's tokenizer",
                          dpath, nd, tpath, nt);
    if (sy_tokenizer_bos(tt) != sy_tokenizer_bos(dt))
        return sy_err_set(err, SY_ERR_INVALID,
                          "[speculative] draft_model %s: its BOS id is %d, the target's (%s) %d; a draft model must "
                          "have the target's tokenizer",
                          dpath, sy_tokenizer_bos(dt), tpath, sy_tokenizer_bos(tt));
    const int32_t *te, *de;
    const size_t nte = sy_tokenizer_eos(tt, &te), nde = sy_tokenizer_eos(dt, &de);
    if (nte != nde || (nte && memcmp(te, de, sizeof *te * nte) != 0))
        return sy_err_set(err, SY_ERR_INVALID,
                          "[speculative] draft_model %s: its EOS ids (%zu, the first %d) differ from the target's "
                          "(%s: %zu, the first %d); a draft model must have the target's tokenizer",
                          dpath, nde, nde ? de[0] : -1, tpath, nte, nte ? te[0] : -1);
    /* Every id, not a sample: it costs a string compare per token, once. */
    for (int32_t id = 0; id < nt; id++) {
        const char *a = sy_tokenizer_piece(tt, id), *b = sy_tokenizer_piece(dt, id);
        if ((!a != !b) || (a && strcmp(a, b) != 0) || sy_tokenizer_is_special(tt, id) != sy_tokenizer_is_special(dt, id))
            return sy_err_set(err, SY_ERR_INVALID,
                              "[speculative] draft_model %s: token %d is \"%.60s\"%s in its tokenizer but \"%.60s\"%s "
                              "in the target's (%s); a draft model must have the target's tokenizer",
                              dpath, id, piece_or(dt, id), sy_tokenizer_is_special(dt, id) ? " (special)" : "",
                              piece_or(tt, id), sy_tokenizer_is_special(tt, id) ? " (special)" : "", tpath);
    }
    return SY_OK;
}

static int set_key(sy_config *c, const char *section, const char *key, const char *value, sy_err *err)
{
    size_t len = strlen(section) + strlen(key) + strlen(value) + 3;
    char *a = malloc(len);
    if (!a)
        return sy_err_set(err, SY_ERR_NOMEM, "out of memory");
    snprintf(a, len, "%s.%s=%s", section, key, value);
    int rc = sy_config_set(c, a, err);
    free(a);
    return rc;
}

/* The target's configuration with the draft's directory, its KV budget, and the target's plugin files. */
static int draft_config(const sy_spec_config *cfg, const sy_config *full_cfg, sy_engine *target, sy_config **out,
                        sy_err *err)
{
    sy_config *c = sy_config_copy(full_cfg);
    if (!c)
        return sy_err_set(err, SY_ERR_NOMEM, "[speculative] draft: cannot copy the configuration");
    int rc = set_key(c, "model", "path", cfg->draft_model, err);
    /* The draft engine itself does not speculate (nor size verify rows for it). */
    if (!rc)
        rc = set_key(c, "speculative", "method", "none", err);
    /* The draft reads its own tokenizer.json (compared below); without one, the target's [model] tokenizer. */
    char tj[4200];
    struct stat sb;
    snprintf(tj, sizeof tj, "%s/tokenizer.json", cfg->draft_model);
    if (!rc && stat(tj, &sb) == 0)
        rc = set_key(c, "model", "tokenizer", "", err);
    const char *kvs = sy_config_get(full_cfg, "speculative", "draft_kv_cache_size");
    unsigned long long bytes = 0;
    if (!rc && kvs && sy_parse_size(kvs, &bytes) == 0 && bytes > 0)
        rc = set_key(c, "scheduler", "kv_cache_size", kvs, err);
    static const struct {
        int kind;
        const char *section;
    } kinds[] = {{SY_KIND_DEVICE, "device"}, {SY_KIND_ATTN, "attention"}, {SY_KIND_MOE, "moe"}, {SY_KIND_COMM, "comm"}};
    for (size_t i = 0; !rc && i < sizeof kinds / sizeof kinds[0]; i++) {
        const char *path = sy_engine_plugin_path(target, kinds[i].kind);
        /* A tensor-parallel target's comm joins its group; the draft runs on this rank alone. */
        if (kinds[i].kind == SY_KIND_COMM && sy_engine_tp_size(target) > 1)
            path = "local";
        if (path)
            rc = set_key(c, kinds[i].section, "plugin", path, err);
    }
    if (rc) {
        sy_config_free(c);
        return rc;
    }
    *out = c;
    return SY_OK;
}

int sy__spec_draft_new(const sy_spec_config *cfg, const sy_config *full_cfg, sy_engine *target,
                       sy_spec_source **out, sy_err *err)
{
    *out = NULL;
    char at[600] = "";
    const sy_config_entry *ent = sy_config_find(full_cfg, "speculative", "draft_model");
    if (ent && ent->line > 0)
        snprintf(at, sizeof at, " (%s:%d)", ent->file, ent->line);
    else if (ent)
        snprintf(at, sizeof at, " (%s)", ent->file);
    if (!cfg->draft_model[0])
        return sy_err_set(err, SY_ERR_INVALID,
                          "[speculative] method = draft needs draft_model = DIR (the draft model's directory), found "
                          "none");
    draft_src *d = calloc(1, sizeof *d);
    if (!d)
        return sy_err_set(err, SY_ERR_NOMEM, "[speculative] draft: out of memory");
    d->base.ops = &draft_ops;
    int rc = draft_config(cfg, full_cfg, target, &d->cfg, err);
    if (!rc && (rc = sy_engine_open(d->cfg, &(sy_engine_opts){0}, &d->draft, err)) != SY_OK) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        sy_err_set(err, rc, "[speculative] draft_model %s%s: %s", cfg->draft_model, at, msg);
    }
    if (!rc) {
        const char *tp = sy_config_get(full_cfg, "model", "tokenizer");
        if (!tp || !*tp)
            tp = sy_config_get(full_cfg, "model", "path");
        rc = check_tokenizers(sy_engine_tokenizer(target), tp ? tp : "?", sy_engine_tokenizer(d->draft),
                              cfg->draft_model, err);
    }
    if (rc) {
        draft_free(&d->base);
        return rc;
    }
    d->kv = sy_engine_kv(d->draft);
    d->target_vocab = sy_engine_model_config(target)->vocab;
    d->max_seqs = sy_engine_max_seqs(d->draft);
    d->max_batch_tokens = sy_engine_max_batch_tokens(d->draft);
    d->max_seq_len = sy_engine_max_seq_len(d->draft);
    const int32_t dv = sy_engine_model_config(d->draft)->vocab;
    d->grp = malloc(sizeof *d->grp * (size_t)d->max_seqs);
    d->steps = calloc((size_t)d->max_seqs, sizeof *d->steps);
    d->picks = malloc(sizeof *d->picks * (size_t)d->max_seqs);
    d->logits = malloc(sizeof *d->logits * (size_t)d->max_seqs * (size_t)dv);
    if (!d->grp || !d->steps || !d->picks || !d->logits) {
        draft_free(&d->base);
        return sy_err_set(err, SY_ERR_NOMEM, "[speculative] draft: cannot allocate step buffers for %d sequences x %d "
                          "logits", d->max_seqs, dv);
    }
    sy_info("speculative draft model %s: %s; KV pool %d blocks x %d tokens", cfg->draft_model,
            sy_engine_describe(d->draft), d->kv->n_blocks, d->kv->block_size);
    *out = &d->base;
    return SY_OK;
}
