/*
 * [speculative]: which draft source proposes, how many drafts a step
 * verifies, and when the scheduler does not speculate.
 */
#include "config.h"

#include "spec/spec.h"

#include <stdlib.h>
#include <string.h>

/*
 * Keys of every method in one table (the draft and MTP sources add theirs
 * here, one line each): a key a method does not use is accepted and
 * ignored, so switching method is one line of the file.
 */
static const sy_key_decl spec_keys[] = {
    {"method", SY_KEY_ENUM, "none", "draft source: none, ngram (prompt lookup), mtp (the checkpoint's MTP layers), "
     "draft (a separate small model)", 0, 0, "none|ngram|mtp|draft"},
    {"num_draft_tokens", SY_KEY_INT, "4", "drafts proposed and verified per sequence and step (k)", 1, 16, NULL},
    {"max_batch", SY_KEY_INT, "32",
     "no speculation in a step with more decoding sequences than this (machine-dependent: `switchyard bench-spec "
     "--batch` prints the batch where the verify step stops paying for itself)", 0, 65536, NULL},
    {"min_acceptance", SY_KEY_FLOAT, "0.1",
     "a request whose acceptance over a policy_window of drafted tokens is below this stops speculating", 0, 1, NULL},
    {"policy_window", SY_KEY_INT, "32", "drafted tokens per acceptance check of the per-request switch-off", 1,
     1 << 20, NULL},
    {"ngram_min", SY_KEY_INT, "1", "ngram: shortest suffix matched (vLLM's prompt_lookup_min)", 1, 64, NULL},
    {"ngram_max", SY_KEY_INT, "4", "ngram: longest suffix matched, tried first (vLLM's prompt_lookup_max)", 1, 64,
     NULL},
    {"draft_model", SY_KEY_STRING, "", "draft: Hugging Face directory of the draft model (same tokenizer)", 0, 0,
     NULL},
    {"draft_kv_cache_size", SY_KEY_SIZE, "0",
     "draft: memory for the draft model's own paged KV cache; 0: [scheduler] kv_cache_size", 1, 0, NULL},
    {NULL, 0, NULL, NULL, 0, 0, NULL},
};

static const char *const method_names[] = {"none", "ngram", "mtp", "draft"};

const char *sy_spec_method_name(sy_spec_method m)
{
    return (unsigned)m < sizeof method_names / sizeof method_names[0] ? method_names[m] : "unknown";
}

/* "file:line" of a key, for errors about combinations the table cannot check. */
static void where(const sy_config *cfg, const char *key, char *buf, size_t cap)
{
    const sy_config_entry *ent = sy_config_find(cfg, "speculative", key);
    if (!ent)
        snprintf(buf, cap, "its default");
    else if (ent->line > 0)
        snprintf(buf, cap, "%s:%d", ent->file, ent->line);
    else
        snprintf(buf, cap, "%s", ent->file);
}

int sy_spec_config_read(const sy_config *cfg, sy_spec_config *out, sy_err *err)
{
    memset(out, 0, sizeof *out);
    out->method = SY_SPEC_NONE;
    out->num_draft_tokens = 4;
    out->max_batch = 32; /* bench-spec --batch on a 2-core AMX Xeon: docs/benchmarks.md */
    out->min_acceptance = 0.1f;
    out->policy_window = 32;
    out->ngram_min = 1;
    out->ngram_max = 4;
    if (!cfg || !sy_config_has_section(cfg, "speculative"))
        return SY_OK;
    static const char *const no_reserved[] = {NULL};
    sy_kv *kv = NULL;
    size_t n = 0;
    int rc = sy_config_bind(cfg, "speculative", spec_keys, no_reserved, &kv, &n, err);
    if (rc)
        return rc;
    const char *m = sy_kv_get(kv, n, "method");
    for (size_t i = 0; i < sizeof method_names / sizeof method_names[0]; i++)
        if (strcmp(m, method_names[i]) == 0)
            out->method = (sy_spec_method)i;
    out->num_draft_tokens = (int32_t)sy_kv_int(kv, n, "num_draft_tokens", 4);
    out->max_batch = (int32_t)sy_kv_int(kv, n, "max_batch", 32);
    out->min_acceptance = (float)sy_kv_float(kv, n, "min_acceptance", 0.1);
    out->policy_window = (int32_t)sy_kv_int(kv, n, "policy_window", 32);
    out->ngram_min = (int32_t)sy_kv_int(kv, n, "ngram_min", 1);
    out->ngram_max = (int32_t)sy_kv_int(kv, n, "ngram_max", 4);
    const char *dm = sy_kv_get(kv, n, "draft_model");
    const size_t dl = strlen(dm);
    free(kv);
    char at[512];
    if (out->ngram_min > out->ngram_max) {
        where(cfg, "ngram_min", at, sizeof at);
        return sy_err_set(err, SY_ERR_INVALID, "[speculative] \"ngram_min\" = %d in %s is larger than ngram_max = %d; "
                          "expected ngram_min <= ngram_max", out->ngram_min, at, out->ngram_max);
    }
    if (dl >= sizeof out->draft_model) {
        where(cfg, "draft_model", at, sizeof at);
        return sy_err_set(err, SY_ERR_INVALID, "[speculative] \"draft_model\" in %s is %zu bytes long, at most %zu",
                          at, dl, sizeof out->draft_model - 1);
    }
    memcpy(out->draft_model, dm, dl + 1);
    if (out->method == SY_SPEC_DRAFT && !out->draft_model[0]) {
        where(cfg, "method", at, sizeof at);
        return sy_err_set(err, SY_ERR_INVALID, "[speculative] method = draft in %s needs \"draft_model\" (the draft "
                          "model's directory), found none", at);
    }
    return SY_OK;
}

bool sy_spec_policy_says_off(const sy_spec_config *cfg, int32_t *win_drafted, int32_t *win_accepted,
                             int32_t drafted, int32_t accepted)
{
    *win_drafted += drafted;
    *win_accepted += accepted;
    if (*win_drafted < cfg->policy_window)
        return false;
    const bool off = (double)*win_accepted < (double)cfg->min_acceptance * (double)*win_drafted;
    *win_drafted = *win_accepted = 0;
    return off;
}
