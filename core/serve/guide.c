/*
 * Constraints and tool calls for the scheduler's requests: set-up at
 * submit (grammars through the host-wide cache, the vocabulary built on
 * first use, the tool family chosen once per server) and the per-token
 * work on the engine thread (mask, advance, the wait for </think>, the
 * tool parser).
 */
#include "config.h"

#include "serve/guide.h"
#include "util/util.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Compiled grammars kept for reuse; a service with more distinct schemas than this recompiles the oldest. */
#define SY_GUIDE_CACHE_ENTRIES 256

static const char THINK_OPEN[] = "<think>";
static const char THINK_CLOSE[] = "</think>";

/* ABI 1.2 fields are read only when the caller's struct covers them. */
#define HAS_FIELD(r, f) ((r)->struct_size >= offsetof(sy_request, f) + sizeof((r)->f))

int sy_guide_init(sy_guide *g, sy_engine *e, const char *tool_parser, const char *template_source, sy_err *err)
{
    memset(g, 0, sizeof *g);
    g->tok = sy_engine_tokenizer(e);
    const sy_model_config *c = sy_engine_model_config(e);
    g->vocab = c->vocab;
    g->think_open = sy_tokenizer_token_id(g->tok, THINK_OPEN);
    const int32_t *tids = NULL;
    const size_t nt = sy_tokenizer_eos(g->tok, &tids);
    g->eos = malloc(sizeof(int32_t) * ((size_t)c->n_eos + nt + 1));
    g->cache = sy_grammar_cache_new(SY_GUIDE_CACHE_ENTRIES);
    if (!g->eos || !g->cache) {
        free(g->eos);
        sy_grammar_cache_free(g->cache);
        memset(g, 0, sizeof *g);
        return sy_err_set(err, SY_ERR_NOMEM, "cannot allocate the grammar cache");
    }
    for (int32_t i = 0; i < c->n_eos; i++)
        g->eos[g->n_eos++] = c->eos_ids[i];
    for (size_t i = 0; i < nt; i++) {
        bool dup = false;
        for (size_t j = 0; j < g->n_eos; j++)
            dup |= g->eos[j] == tids[i];
        if (!dup)
            g->eos[g->n_eos++] = tids[i];
    }
    pthread_mutex_init(&g->lock, NULL);

    if (tool_parser && *tool_parser) {
        g->family = sy_tool_family_by_name(tool_parser);
        if (!g->family) {
            int rc = sy_err_set(err, SY_ERR_INVALID, "[model] tool_parser: expected one of %s, found \"%s\"",
                                sy_tool_family_list(), tool_parser);
            sy_guide_fini(g);
            return rc;
        }
        snprintf(g->family_from, sizeof g->family_from, "[model] tool_parser");
    } else if (template_source) {
        g->family = sy_tool_family_detect(template_source);
        snprintf(g->family_from, sizeof g->family_from, "the chat template");
    }
    if (g->family) {
        const char *const *m = sy_tool_family_markers(g->family);
        size_t n = 0;
        while (m && m[n])
            n++;
        if (n && !(g->marker_ids = malloc(sizeof(int32_t) * n))) {
            sy_guide_fini(g);
            return sy_err_set(err, SY_ERR_NOMEM, "cannot allocate the tool-call markers");
        }
        /* Markup spelt by ordinary tokens reaches the parser as text anyway. */
        for (size_t i = 0; i < n; i++) {
            const int32_t id = sy_tokenizer_token_id(g->tok, m[i]);
            if (id >= 0 && sy_tokenizer_is_special(g->tok, id))
                g->marker_ids[g->n_marker_ids++] = id;
        }
    }
    return SY_OK;
}

void sy_guide_fini(sy_guide *g)
{
    if (!g->cache && !g->eos)
        return;
    sy_gvocab_free(g->gvocab);
    sy_grammar_cache_free(g->cache);
    free(g->eos);
    free(g->marker_ids);
    pthread_mutex_destroy(&g->lock);
    memset(g, 0, sizeof *g);
}

/* The engine's vocabulary as the matcher sees it, built by the first request that needs it. */
static int guide_vocab(sy_guide *g, const sy_gvocab **out, sy_err *err)
{
    pthread_mutex_lock(&g->lock);
    if (!g->gvocab && !g->gvocab_rc) {
        sy_err verr = {{0}};
        g->gvocab_rc = sy_gvocab_from_tokenizer(g->tok, g->eos, g->n_eos, &g->gvocab, &verr);
        if (g->gvocab_rc)
            snprintf(g->gvocab_err, sizeof g->gvocab_err, "%s", verr.msg);
    }
    const int rc = g->gvocab_rc;
    *out = g->gvocab;
    pthread_mutex_unlock(&g->lock);
    if (rc)
        return sy_err_set(err, rc, "constraint: the tokenizer's vocabulary cannot be used for token masks: %s",
                          g->gvocab_err);
    return SY_OK;
}

/* ------------------------------------------------------------ grammars */

typedef struct build_arg {
    int32_t kind;
    const char *text, *path;
    /* Tool calls. */
    const sy_tool_family *family;
    const sy_tools *tools;
    const char *only_name;
    bool parallel;
} build_arg;

/* Puts path in front of a builder's message unless it already starts with it. */
static int with_path(sy_err *err, int rc, const char *path)
{
    if (rc == SY_OK || strncmp(err->msg, path, strlen(path)) == 0)
        return rc;
    char why[sizeof err->msg];
    snprintf(why, sizeof why, "%s", err->msg);
    return sy_err_set(err, rc, "%s: %s", path, why);
}

static int build_choice(sy_gsrc *src, const char *text, const char *path, sy_err *err)
{
    json_error_t je;
    json_t *a = json_loads(text, JSON_DECODE_ANY, &je);
    int rc = SY_OK;
    if (!a)
        return sy_err_set(err, SY_ERR_INVALID,
                          "%s: expected a JSON array of strings, found invalid JSON (%s at column %d)", path, je.text,
                          je.column);
    const size_t n = json_is_array(a) ? json_array_size(a) : 0;
    const char **choices = n ? malloc(sizeof(char *) * n) : NULL;
    if (!json_is_array(a) || n == 0) {
        rc = sy_err_set(err, SY_ERR_INVALID, "%s: expected a non-empty JSON array of strings, found %s", path,
                        json_is_array(a) ? "an empty array" : "another JSON value");
        goto out;
    }
    if (!choices) {
        rc = sy_err_set(err, SY_ERR_NOMEM, "%s: cannot allocate %zu choices", path, n);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        choices[i] = json_string_value(json_array_get(a, i));
        if (!choices[i]) {
            rc = sy_err_set(err, SY_ERR_INVALID, "%s[%zu]: expected a string", path, i);
            goto out;
        }
    }
    rc = with_path(err, sy_gsrc_add_choice(src, "root", choices, n, err), path);
out:
    free(choices);
    json_decref(a);
    return rc;
}

static int build_grammar(void *arg, sy_gsrc *src, sy_err *err)
{
    const build_arg *b = arg;
    if (b->tools)
        return sy_tool_family_grammar(b->family, b->tools, b->only_name, b->parallel, src, err);
    switch (b->kind) {
    case SY_CONSTRAINT_JSON_OBJECT: return with_path(err, sy_gsrc_add_json_any(src, "root", true, err), b->path);
    case SY_CONSTRAINT_JSON_SCHEMA:
        return with_path(err, sy_gsrc_add_json_schema(src, "root", b->text, b->path, err), b->path);
    case SY_CONSTRAINT_REGEX: return with_path(err, sy_gsrc_add_regex(src, "root", b->text, b->path, err), b->path);
    case SY_CONSTRAINT_CHOICE: return build_choice(src, b->text, b->path, err);
    case SY_CONSTRAINT_GRAMMAR: return with_path(err, sy_gsrc_add_gbnf(src, b->text, b->path, err), b->path);
    default: return sy_err_set(err, SY_ERR_INVALID, "%s: unknown constraint kind %d", b->path, b->kind);
    }
}

/* The cache key: every input that changes the grammar, NUL-separated. */
static char *grammar_key(const build_arg *b, size_t *len)
{
    char head[96];
    int hn;
    const char *name = b->only_name ? b->only_name : "";
    const char *text = b->tools ? b->text : (b->text ? b->text : "");
    if (b->tools)
        hn = snprintf(head, sizeof head, "tools%c%s%c%d%c", 0, sy_tool_family_name(b->family), 0, b->parallel, 0);
    else
        hn = snprintf(head, sizeof head, "kind%c%d%c", 0, b->kind, 0);
    const size_t nl = strlen(name), tl = strlen(text);
    char *k = malloc((size_t)hn + nl + 1 + tl + 1);
    if (!k)
        return NULL;
    memcpy(k, head, (size_t)hn);
    memcpy(k + hn, name, nl + 1);
    memcpy(k + hn + nl + 1, text, tl + 1);
    *len = (size_t)hn + nl + 1 + tl;
    return k;
}

static int attach_grammar(sy_guide *g, sy_seq *s, const build_arg *b, sy_err *err)
{
    const sy_gvocab *v = NULL;
    int rc = guide_vocab(g, &v, err);
    if (rc)
        return rc;
    size_t klen = 0;
    char *key = grammar_key(b, &klen);
    if (!key)
        return sy_err_set(err, SY_ERR_NOMEM, "constraint: out of memory");
    rc = sy_grammar_cache_get(g->cache, key, klen, build_grammar, (void *)b, &s->grammar, err);
    free(key);
    if (rc)
        return rc;
    s->guide = g;
    return sy_gmatcher_new(s->grammar, v, &s->matcher, err);
}

/* ------------------------------------------------------------ set-up */

static int setup_tools(sy_guide *g, const sy_request *r, sy_seq *s, int32_t kind, uint64_t seed, sy_err *err)
{
    const int32_t choice = r->tool_choice;
    if (choice < SY_TOOL_CHOICE_AUTO || choice > SY_TOOL_CHOICE_FUNCTION)
        return sy_err_set(err, SY_ERR_INVALID, "tool_choice: expected auto, none, required or a function, found %d",
                          choice);
    if (!r->tools_json)
        return choice == SY_TOOL_CHOICE_REQUIRED || choice == SY_TOOL_CHOICE_FUNCTION
                   ? sy_err_set(err, SY_ERR_INVALID, "tool_choice: \"%s\" needs tools, and the request has none",
                                choice == SY_TOOL_CHOICE_REQUIRED ? "required" : "function")
                   : SY_OK;
    if (choice == SY_TOOL_CHOICE_NONE)
        return SY_OK;
    int rc = sy_tools_parse(r->tools_json, &s->tools, err);
    if (rc)
        return rc;
    if (!g->family)
        return sy_err_set(err, SY_ERR_INVALID,
                          "tools: this model's chat template writes no tool-call format switchyard knows; set [model] "
                          "tool_parser (one of %s)",
                          sy_tool_family_list());
    const bool forced = choice == SY_TOOL_CHOICE_REQUIRED || choice == SY_TOOL_CHOICE_FUNCTION;
    if (forced && kind != SY_CONSTRAINT_NONE)
        return sy_err_set(err, SY_ERR_INVALID,
                          "tool_choice: \"%s\" constrains the output to a tool call, so it cannot be combined with %s",
                          choice == SY_TOOL_CHOICE_REQUIRED ? "required" : "function",
                          r->constraint_path ? r->constraint_path : "a constraint");
    if (forced && sy_tools_count(s->tools) == 0)
        return sy_err_set(err, SY_ERR_INVALID, "tools: tool_choice \"%s\" needs at least one tool, found none",
                          choice == SY_TOOL_CHOICE_REQUIRED ? "required" : "function");
    if (choice == SY_TOOL_CHOICE_FUNCTION) {
        if (!r->tool_choice_name || !*r->tool_choice_name)
            return sy_err_set(err, SY_ERR_INVALID,
                              "tool_choice.function.name: expected the name of a tool, found none");
        if (sy_tools_find(s->tools, r->tool_choice_name) < 0)
            return sy_err_set(err, SY_ERR_INVALID,
                              "tool_choice.function.name: \"%s\" is not one of the request's tools",
                              r->tool_choice_name);
    }
    if ((rc = sy_tool_parser_new(g->family, s->tools, seed, &s->tparser, err)))
        return rc;
    s->guide = g;
    if (!forced)
        return SY_OK;
    build_arg b = {.text = r->tools_json,
                   .path = "tools",
                   .family = g->family,
                   .tools = s->tools,
                   .only_name = choice == SY_TOOL_CHOICE_FUNCTION ? r->tool_choice_name : NULL,
                   .parallel = r->parallel_tool_calls != 0 && choice == SY_TOOL_CHOICE_REQUIRED};
    return attach_grammar(g, s, &b, err);
}

int sy_guide_seq_setup(sy_guide *g, const sy_request *r, sy_seq *s, bool in_think, uint64_t seed, sy_err *err)
{
    const int32_t kind = HAS_FIELD(r, constraint_path) ? r->constraint_kind : SY_CONSTRAINT_NONE;
    const char *path = HAS_FIELD(r, constraint_path) && r->constraint_path ? r->constraint_path : "constraint";
    const bool tools = HAS_FIELD(r, parallel_tool_calls) && (r->tools_json || r->tool_choice != SY_TOOL_CHOICE_AUTO);
    if (kind < SY_CONSTRAINT_NONE || kind > SY_CONSTRAINT_GRAMMAR)
        return sy_err_set(err, SY_ERR_INVALID, "%s: unknown constraint kind %d (expected 0-5, sy_constraint_kind)",
                          path, kind);
    if (kind != SY_CONSTRAINT_NONE && kind != SY_CONSTRAINT_JSON_OBJECT && !r->constraint)
        return sy_err_set(err, SY_ERR_INVALID, "%s: the constraint's text is missing", path);
    if (!g && (kind != SY_CONSTRAINT_NONE || tools))
        return sy_err_set(err, SY_ERR_UNSUPPORTED, "%s: this host runs no grammar engine",
                          kind != SY_CONSTRAINT_NONE ? path : "tools");
    int rc;
    if (tools && (rc = setup_tools(g, r, s, kind, seed, err)))
        return rc;
    if (kind != SY_CONSTRAINT_NONE) {
        build_arg b = {.kind = kind, .text = r->constraint, .path = path};
        if ((rc = attach_grammar(g, s, &b, err)))
            return rc;
    }
    if (s->matcher) {
        s->wait_think = in_think;
        /* A reasoning model whose template leaves <think> to it may open one first. */
        s->may_open_think = r->reasoning && !in_think && g->think_open >= 0;
    }
    return SY_OK;
}

void sy_guide_seq_free(sy_seq *s)
{
    sy_gmatcher_free(s->matcher);
    if (s->grammar)
        sy_grammar_cache_release(s->guide->cache, s->grammar);
    sy_tool_parser_free(s->tparser);
    sy_tools_free(s->tools);
    sy_tool_out_fini(&s->tout);
    s->matcher = NULL;
    s->grammar = NULL;
    s->tparser = NULL;
    s->tools = NULL;
}

/* ------------------------------------------------------------ per token */

bool sy_guide_masks(const sy_seq *s) { return s->matcher && !s->wait_think; }

bool sy_guide_can_end(const sy_seq *s) { return !sy_guide_masks(s) || sy_gmatcher_can_end(s->matcher); }

int sy_guide_apply_mask(sy_seq *s, sy_out_ctx *o, float *work, sy_err *err)
{
    const sy_gvocab *v = s->guide->gvocab;
    const size_t words = sy_gmask_words(v);
    if (words > o->mask_words)
        return sy_err_set(err, SY_ERR_INTERNAL, "constraint: a mask of %zu words does not fit the %zu allocated", words,
                          o->mask_words);
    int rc = sy_gmatcher_fill_mask(s->matcher, o->mask, err);
    if (rc)
        return rc;
    const int32_t think = s->guide->think_open;
    if (s->may_open_think && think >= 0 && (size_t)think / 32 < words)
        o->mask[think / 32] |= 1u << (think % 32);
    const int32_t V = o->vocab, nv = sy_gvocab_size(v);
    bool any = false;
    for (int32_t w = 0; w * 32 < V; w++) {
        const uint32_t m = w * 32 < nv ? o->mask[w] : 0;
        const int32_t end = w * 32 + 32 < V ? w * 32 + 32 : V;
        if (m == UINT32_MAX && end <= nv) {
            any = true;
            continue;
        }
        for (int32_t i = w * 32; i < end; i++) {
            if (i < nv && (m >> (i - w * 32) & 1u))
                any = true;
            else
                work[i] = -INFINITY;
        }
    }
    if (!any)
        return sy_err_set(err, SY_ERR_INTERNAL,
                          "constraint: no token of the vocabulary may come next (after %d tokens)", s->n_generated);
    return SY_OK;
}

/*
 * While waiting for </think>: scans the token's text; past the tag the
 * constraint starts. The tag may straddle the held tail (fewer bytes than
 * the tag) and this text, so the tail and the text's first bytes are
 * looked at together in a small buffer, then the text itself: nothing is
 * allocated per token.
 */
static int wait_think(sy_seq *s, const char *text, size_t len, sy_err *err)
{
    const size_t tl = sizeof THINK_CLOSE - 1;
    char edge[2 * sizeof THINK_CLOSE];
    const size_t head = len < tl - 1 ? len : tl - 1;
    memcpy(edge, s->think_tail, s->n_think_tail);
    if (head)
        memcpy(edge + s->n_think_tail, text, head);
    const size_t ne = s->n_think_tail + head;
    const char *rest = NULL; /* the text after the tag */
    for (size_t i = 0; i + tl <= ne && !rest; i++)
        if (memcmp(edge + i, THINK_CLOSE, tl) == 0)
            rest = text + (i + tl - s->n_think_tail); /* the tail is shorter than the tag: the match ends in text */
    if (!rest && len >= tl) {
        const char *hit = memmem(text, len, THINK_CLOSE, tl);
        rest = hit ? hit + tl : NULL;
    }
    if (!rest) {
        const size_t keep = ne < tl - 1 ? ne : tl - 1;
        memcpy(s->think_tail, len >= tl - 1 ? text + len - keep : edge + ne - keep, keep);
        s->n_think_tail = keep;
        return SY_OK;
    }
    s->wait_think = false;
    s->n_think_tail = 0;
    /* The constraint reads the answer, not the blank line a model puts after </think>. */
    const char *end = text + len;
    while (rest < end && (*rest == ' ' || *rest == '\n' || *rest == '\r' || *rest == '\t'))
        rest++;
    if (rest < end && !sy_gmatcher_accept_bytes(s->matcher, rest, (size_t)(end - rest)))
        return sy_err_set(err, SY_ERR_INTERNAL,
                          "constraint: the token that closed </think> goes on with \"%.*s\", which the constraint "
                          "does not allow",
                          (int)(end - rest < 40 ? end - rest : 40), rest);
    return SY_OK;
}

int sy_guide_accept(sy_seq *s, int32_t tok, const char *text, size_t len, bool *done, sy_err *err)
{
    *done = false;
    if (!s->matcher)
        return SY_OK;
    if (s->may_open_think) {
        s->may_open_think = false;
        if (tok == s->guide->think_open) {
            s->wait_think = true;
            return SY_OK;
        }
    }
    if (s->wait_think)
        return wait_think(s, text, len, err);
    sy_err merr = {{0}};
    if (sy_gmatcher_accept_token(s->matcher, tok, &merr))
        return sy_err_set(err, SY_ERR_INTERNAL, "constraint: token %d was picked but the grammar refuses it: %s", tok,
                          merr.msg);
    *done = sy_gmatcher_done(s->matcher);
    return SY_OK;
}

bool sy_guide_is_marker(const sy_seq *s, int32_t tok)
{
    if (!s->tparser)
        return false;
    for (size_t i = 0; i < s->guide->n_marker_ids; i++)
        if (s->guide->marker_ids[i] == tok)
            return true;
    return false;
}

int sy_guide_route(sy_seq *s, const char *text, size_t len, bool special, bool final, sy_err *err)
{
    if (!len && !final)
        return SY_OK;
    return sy_tool_parser_push(s->tparser, text ? text : "", len, special, final, &s->tout, err);
}
