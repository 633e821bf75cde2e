/*
 * frontend/http: which top-level fields /v1/chat/completions and
 * /v1/completions take. A field is handled (parsed by its own code),
 * accepted and ignored (only fields that by definition do not change the
 * output: who is asking, cache hints, metadata), or refused with a 400
 * naming it; anything else is 400 "unknown field". A client asking for
 * something this server does not do learns it, instead of getting an
 * answer that silently lacks it. docs/http-api.md lists the same table.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_openai.h"

enum { EP_CHAT = 1, EP_COMP = 2, EP_BOTH = 3 };
enum { F_HANDLED, F_IGNORED, F_REFUSED };

typedef struct oai_field_decl {
    const char *name;
    int endpoints;
    int kind;
    const char *why; /* F_REFUSED: the reason in the error */
} oai_field_decl;

static const oai_field_decl fields[] = {
    {"model", EP_BOTH, F_HANDLED, NULL},
    {"messages", EP_CHAT, F_HANDLED, NULL},
    {"prompt", EP_COMP, F_HANDLED, NULL},
    {"stream", EP_BOTH, F_HANDLED, NULL},
    {"stream_options", EP_BOTH, F_HANDLED, NULL},
    {"n", EP_BOTH, F_HANDLED, NULL},
    {"max_tokens", EP_BOTH, F_HANDLED, NULL},
    {"max_completion_tokens", EP_BOTH, F_HANDLED, NULL},
    {"min_tokens", EP_BOTH, F_HANDLED, NULL},
    {"temperature", EP_BOTH, F_HANDLED, NULL},
    {"top_p", EP_BOTH, F_HANDLED, NULL},
    {"top_k", EP_BOTH, F_HANDLED, NULL},
    {"min_p", EP_BOTH, F_HANDLED, NULL},
    {"frequency_penalty", EP_BOTH, F_HANDLED, NULL},
    {"presence_penalty", EP_BOTH, F_HANDLED, NULL},
    {"repetition_penalty", EP_BOTH, F_HANDLED, NULL},
    {"seed", EP_BOTH, F_HANDLED, NULL},
    {"num_draft_tokens", EP_BOTH, F_HANDLED, NULL}, /* speculative decoding, per request */
    {"stop", EP_BOTH, F_HANDLED, NULL},
    {"stop_token_ids", EP_BOTH, F_HANDLED, NULL},
    {"ignore_eos", EP_BOTH, F_HANDLED, NULL},
    {"skip_special_tokens", EP_BOTH, F_HANDLED, NULL},
    {"logprobs", EP_BOTH, F_HANDLED, NULL},
    {"top_logprobs", EP_CHAT, F_HANDLED, NULL},
    {"logit_bias", EP_BOTH, F_HANDLED, NULL},
    {"echo", EP_COMP, F_HANDLED, NULL},  /* false only (http_openai.c) */
    {"best_of", EP_COMP, F_HANDLED, NULL}, /* 1 only (below) */
    {"suffix", EP_COMP, F_HANDLED, NULL},  /* "" only (below) */
    {"chat_template_kwargs", EP_CHAT, F_HANDLED, NULL},
    {"add_generation_prompt", EP_CHAT, F_HANDLED, NULL},
    {"tools", EP_CHAT, F_HANDLED, NULL},
    {"tool_choice", EP_CHAT, F_HANDLED, NULL},
    {"parallel_tool_calls", EP_CHAT, F_HANDLED, NULL},
    {"response_format", EP_BOTH, F_HANDLED, NULL},
    {"regex", EP_BOTH, F_HANDLED, NULL},
    {"ebnf", EP_BOTH, F_HANDLED, NULL},
    {"structured_outputs", EP_BOTH, F_HANDLED, NULL},
    {"guided_json", EP_BOTH, F_HANDLED, NULL},
    {"guided_regex", EP_BOTH, F_HANDLED, NULL},
    {"guided_choice", EP_BOTH, F_HANDLED, NULL},
    {"guided_grammar", EP_BOTH, F_HANDLED, NULL},
    {"modalities", EP_CHAT, F_HANDLED, NULL}, /* ["text"] only (below) */
    {"store", EP_CHAT, F_HANDLED, NULL},      /* false only (below) */
    {"service_tier", EP_CHAT, F_HANDLED, NULL}, /* "auto" / "default" only (below) */
    {"user", EP_BOTH, F_IGNORED, NULL},
    {"safety_identifier", EP_CHAT, F_IGNORED, NULL},
    {"prompt_cache_key", EP_CHAT, F_IGNORED, NULL},
    {"metadata", EP_CHAT, F_IGNORED, NULL},
    {"prompt_cache_options", EP_CHAT, F_IGNORED, NULL},  /* the prefix cache is automatic */
    {"prompt_cache_retention", EP_CHAT, F_IGNORED, NULL},
    {"moderation", EP_CHAT, F_REFUSED, "moderation is not supported"},
    {"audio", EP_CHAT, F_REFUSED, "audio output is not supported (text only)"},
    {"prediction", EP_CHAT, F_REFUSED, "predicted outputs are not supported"},
    {"web_search_options", EP_CHAT, F_REFUSED, "web search is not supported"},
    {"functions", EP_CHAT, F_REFUSED, "the legacy function calling is not supported; use 'tools'"},
    {"function_call", EP_CHAT, F_REFUSED, "the legacy function calling is not supported; use 'tool_choice'"},
    {"reasoning_effort", EP_CHAT, F_REFUSED,
     "not supported; a template that reads it gets it through chat_template_kwargs {\"reasoning_effort\": ...}"},
    {"verbosity", EP_CHAT, F_REFUSED, "not supported"},
    {"guided_decoding_backend", EP_BOTH, F_REFUSED, "not supported (one grammar engine; use 'structured_outputs')"},
    {"guided_whitespace_pattern", EP_BOTH, F_REFUSED, "not supported (use 'structured_outputs')"},
};

static const oai_field_decl *lookup(const char *key, int ep)
{
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if ((fields[i].endpoints & ep) && strcmp(fields[i].name, key) == 0)
            return &fields[i];
    return NULL;
}

static void check_string(oai_req *r, const char *key, size_t max_len)
{
    json_t *v = oai_field(r, key);
    if (!v)
        return;
    if (!json_is_string(v))
        oai_bad(r, key, "'%s' must be a string", NULL);
    else if (json_string_length(v) > max_len) {
        char msg[96];
        snprintf(msg, sizeof msg, "'%%s' must be at most %zu characters", max_len);
        oai_bad(r, key, msg, NULL);
    }
}

/* OpenAI's limits: 16 pairs, keys up to 64 characters, values up to 512. */
static void check_metadata(oai_req *r)
{
    json_t *md = oai_field(r, "metadata");
    if (!md)
        return;
    if (!json_is_object(md)) {
        oai_bad(r, "metadata", "'%s' must be an object of strings", NULL);
        return;
    }
    if (json_object_size(md) > 16) {
        oai_bad(r, "metadata", "'%s' takes at most 16 pairs", NULL);
        return;
    }
    const char *key;
    json_t *v;
    json_object_foreach(md, key, v) {
        char p[OAI_PATH];
        oai_path(p, "metadata.%.64s", key);
        if (strlen(key) > 64)
            oai_bad(r, p, "'%s': keys are at most 64 characters", p);
        else if (!json_is_string(v) || json_string_length(v) > 512)
            oai_bad(r, p, "'%s' must be a string of at most 512 characters", p);
        if (r->failed)
            return;
    }
}

/* Fields handled by refusing every value but the one that asks for nothing. */
static void check_values(oai_req *r)
{
    json_t *v;
    if ((v = oai_field(r, "best_of"))) {
        if (!json_is_integer(v))
            oai_bad(r, "best_of", "'%s' must be an integer", NULL);
        else if (json_integer_value(v) != 1)
            oai_bad_code(r, "best_of", "unsupported_value",
                         "'%s' other than 1 is not supported (use n and pick on the client)", NULL);
    }
    if ((v = oai_field(r, "suffix"))) {
        if (!json_is_string(v))
            oai_bad(r, "suffix", "'%s' must be a string", NULL);
        else if (json_string_length(v))
            oai_bad_code(r, "suffix", "unsupported_value", "'%s' is not supported (no fill-in-the-middle)", NULL);
    }
    if ((v = oai_field(r, "store"))) {
        if (!json_is_boolean(v))
            oai_bad(r, "store", "'%s' must be a boolean", NULL);
        else if (json_is_true(v))
            oai_bad_code(r, "store", "unsupported_value",
                         "'%s': true is not supported (this server keeps no stored completions)", NULL);
    }
    if ((v = oai_field(r, "service_tier"))) {
        const char *t = json_string_value(v);
        if (!t)
            oai_bad(r, "service_tier", "'%s' must be a string", NULL);
        else if (strcmp(t, "auto") != 0 && strcmp(t, "default") != 0)
            oai_bad_code(r, "service_tier", "unsupported_value",
                         "'service_tier' '%s' is not supported (one tier: \"auto\" or \"default\")", t);
    }
    if ((v = oai_field(r, "modalities"))) {
        if (!json_is_array(v)) {
            oai_bad(r, "modalities", "'%s' must be a list of strings", NULL);
            return;
        }
        for (size_t i = 0; i < json_array_size(v) && !r->failed; i++) {
            const char *m = json_string_value(json_array_get(v, i));
            char p[OAI_PATH];
            oai_path(p, "modalities[%zu]", i);
            if (!m || strcmp(m, "text") != 0)
                oai_bad_code(r, p, "unsupported_value", "'%s': only \"text\" output is supported", p);
        }
    }
}

void oai_check_fields(oai_req *r)
{
    int ep = r->chat ? EP_CHAT : EP_COMP;
    const char *key;
    json_t *v;
    json_object_foreach(r->root, key, v) {
        const oai_field_decl *f = lookup(key, ep);
        char p[OAI_PATH];
        oai_path(p, "%.96s", key);
        if (!f) {
            char msg[OAI_PATH + 64];
            snprintf(msg, sizeof msg, "unknown field '%%s' (not a field of %s)",
                     r->chat ? "/v1/chat/completions" : "/v1/completions");
            oai_bad_code(r, p, "unknown_parameter", msg, p);
        } else if (f->kind == F_REFUSED && !json_is_null(v)) {
            char msg[256];
            snprintf(msg, sizeof msg, "'%%s' is not supported: %s", f->why);
            oai_bad_code(r, p, "unsupported_parameter", msg, p);
        }
        if (r->failed)
            return;
    }
    check_string(r, "user", 256);
    check_string(r, "safety_identifier", 256);
    check_string(r, "prompt_cache_key", 1024);
    check_string(r, "prompt_cache_retention", 64);
    check_metadata(r);
    json_t *pco = oai_field(r, "prompt_cache_options");
    if (pco && !json_is_object(pco))
        oai_bad(r, "prompt_cache_options", "'%s' must be an object", NULL);
    check_values(r);
}

/* A token id as OpenAI spells it: decimal, no sign, no leading zero (so
 * two keys cannot name one id). -1 when it is not one. */
static long long parse_id(const char *s)
{
    if (!s[0] || (s[0] == '0' && s[1]) || strlen(s) > 10)
        return -1;
    long long x = 0;
    for (const char *c = s; *c; c++) {
        if (*c < '0' || *c > '9')
            return -1;
        x = x * 10 + (*c - '0');
    }
    return x <= INT32_MAX ? x : -1;
}

void oai_parse_logit_bias(oai_req *r)
{
    json_t *lb = oai_field(r, "logit_bias");
    if (!lb)
        return;
    if (!json_is_object(lb)) {
        oai_bad(r, "logit_bias", "'%s' must be an object of token id (a string) -> bias in [-100, 100]", NULL);
        return;
    }
    size_t n = json_object_size(lb);
    if (!n)
        return;
    r->bias_ids = calloc(n, sizeof *r->bias_ids);
    r->bias = calloc(n, sizeof *r->bias);
    if (!r->bias_ids || !r->bias) {
        r->failed = 1;
        http_respond_error(r->st, 503, "server_error", NULL, NULL, "out of memory");
        return;
    }
    size_t k = 0;
    const char *key;
    json_t *v;
    json_object_foreach(lb, key, v) {
        char p[OAI_PATH];
        oai_path(p, "logit_bias.%.64s", key);
        long long id = parse_id(key);
        if (id < 0) {
            oai_bad(r, p, "'%s': the key must be a token id (decimal digits, no leading zeros)", p);
            return;
        }
        if (r->vocab > 0 && id >= r->vocab) {
            char msg[160];
            snprintf(msg, sizeof msg, "'%%s': token id %lld is outside the vocabulary (0..%d)", id, r->vocab - 1);
            oai_bad(r, p, msg, p);
            return;
        }
        if (!json_is_number(v)) {
            oai_bad(r, p, "'%s' must be a number in [-100, 100]", p);
            return;
        }
        double b = json_number_value(v);
        if (!(b >= -100 && b <= 100)) {
            char msg[160];
            snprintf(msg, sizeof msg, "'%%s' must be in [-100, 100], found %g", b);
            oai_bad(r, p, msg, p);
            return;
        }
        r->bias_ids[k] = (int32_t)id;
        r->bias[k] = (float)b;
        k++;
    }
    r->req.logit_bias_ids = r->bias_ids;
    r->req.logit_bias = r->bias;
    r->req.n_logit_bias = k;
}
