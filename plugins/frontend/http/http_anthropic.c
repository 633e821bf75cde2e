/*
 * frontend/http: the Anthropic Messages API's requests, POST /v1/messages
 * and POST /v1/messages/count_tokens. Every field is checked before
 * anything is submitted (a 400 names the field by its path, as
 * "messages.1.content.0.type"); the conversation is converted to the
 * OpenAI-style messages the host's apply_chat_template renders (system
 * message, assistant tool_calls, role "tool" results), and the tools to
 * OpenAI function tools. What comes back is http_anthropic_out.c's.
 */
#include "config.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"

#define ANTH_MAX_STOP 16

typedef struct anth_req {
    http_stream *st;
    json_t *root;
    int count_only; /* count_tokens: no sampling fields */
    int failed;     /* an error answer went out */
    int streaming;
    int thinking_omitted;
    sy_request req;
    json_t *msgs;    /* OpenAI-style messages for the template */
    json_t *tools;   /* OpenAI function tools, or NULL */
    json_t *kwargs;  /* chat template kwargs, or NULL */
    char *tools_text;
    char *choice_name;
    char *schema_text;
    const char *stops[ANTH_MAX_STOP];
    int32_t *prompt; /* host->alloc'd */
    size_t n_prompt;
} anth_req;

static void bad(anth_req *r, const char *fmt, ...) SY__PRINTF(2, 3);
static void bad(anth_req *r, const char *fmt, ...)
{
    if (r->failed)
        return;
    r->failed = 1;
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    http_respond_error(r->st, 400, "invalid_request_error", NULL, NULL, "%s", msg);
}

static int in_list(const char *key, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(key, *list) == 0)
            return 1;
    return 0;
}

/* Every key of obj must be in allowed; path names obj in the message. */
static void check_keys(anth_req *r, json_t *obj, const char *path, const char *const *allowed)
{
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        if (r->failed)
            return;
        if (!in_list(key, allowed))
            bad(r, "%s%s%s: unknown field (accepted here: see docs/http-api.md, \"Anthropic Messages API\")", path,
                path[0] ? "." : "", key);
    }
}

/* cache_control is accepted everywhere Anthropic takes it: the engine's
 * prefix cache already reuses any shared prompt prefix. */
static void check_cache_control(anth_req *r, json_t *obj, const char *path)
{
    json_t *cc = json_object_get(obj, "cache_control");
    if (!cc || json_is_null(cc) || r->failed)
        return;
    json_t *t = json_object_get(cc, "type");
    if (!json_is_object(cc) || !json_is_string(t) || strcmp(json_string_value(t), "ephemeral") != 0)
        bad(r, "%s%scache_control: expected {\"type\": \"ephemeral\"}", path, path[0] ? "." : "");
}

/* One text block at path: its text goes to out (after sep when out has some). */
static void text_block(anth_req *r, json_t *b, const char *path, const char *sep, hbuf *out)
{
    static const char *const text_keys[] = {"type", "text", "cache_control", "citations", NULL};
    json_t *text = json_object_get(b, "text"), *cit = json_object_get(b, "citations");
    if (!json_is_string(text)) {
        bad(r, "%s.text: expected a string, found %s", path, text ? http_json_type(text) : "nothing");
        return;
    }
    if (cit && !json_is_null(cit) && !(json_is_array(cit) && json_array_size(cit) == 0)) {
        bad(r, "%s.citations: citations are not supported", path);
        return;
    }
    check_keys(r, b, path, text_keys);
    check_cache_control(r, b, path);
    if (out->len && sep)
        hbuf_puts(out, sep);
    hbuf_append(out, json_string_value(text), json_string_length(text));
}

/* Joins the text of a string or a list of text blocks. */
static void join_text(anth_req *r, json_t *v, const char *path, const char *sep, hbuf *out)
{
    if (json_is_string(v)) {
        hbuf_append(out, json_string_value(v), json_string_length(v));
        return;
    }
    if (!json_is_array(v)) {
        bad(r, "%s: expected a string or a list of text blocks, found %s", path, http_json_type(v));
        return;
    }
    for (size_t i = 0; i < json_array_size(v) && !r->failed; i++) {
        json_t *b = json_array_get(v, i);
        char p[192];
        snprintf(p, sizeof p, "%s.%zu", path, i);
        json_t *type = json_object_get(b, "type");
        if (!json_is_object(b) || !json_is_string(type))
            bad(r, "%s: expected a content block with a \"type\"", p);
        else if (strcmp(json_string_value(type), "text") != 0)
            bad(r, "%s.type: only \"text\" blocks are accepted here, found \"%s\"", p, json_string_value(type));
        else
            text_block(r, b, p, sep, out);
    }
}

static json_t *text_json(const hbuf *b)
{
    json_t *j = json_stringn(hbuf_data(b), b->len);
    return j ? j : json_string("");
}

/* Blocks no text-only model can take, with what they are. */
static int refused_block(anth_req *r, const char *type, const char *path)
{
    static const char *const media[] = {"image", "document", "search_result", "container_upload", NULL};
    static const char *const server[] = {"server_tool_use", "web_search_tool_result", "web_fetch_tool_result",
                                         "code_execution_tool_result", "bash_code_execution_tool_result",
                                         "text_editor_code_execution_tool_result", "mcp_tool_use",
                                         "mcp_tool_result", "tool_search_tool_result", NULL};
    if (in_list(type, media))
        bad(r, "%s.type: \"%s\" blocks are not supported (this server takes text only)", path, type);
    else if (in_list(type, server))
        bad(r, "%s.type: \"%s\" blocks belong to Anthropic's server tools, which this server does not run", path,
            type);
    else
        return 0;
    return 1;
}

static void convert_user(anth_req *r, json_t *content, const char *path)
{
    hbuf text = {0};
    for (size_t i = 0; i < json_array_size(content) && !r->failed; i++) {
        json_t *b = json_array_get(content, i);
        char p[128];
        snprintf(p, sizeof p, "%s.%zu", path, i);
        json_t *type = json_object_get(b, "type");
        if (!json_is_object(b) || !json_is_string(type)) {
            bad(r, "%s: expected a content block with a \"type\"", p);
            break;
        }
        const char *t = json_string_value(type);
        if (strcmp(t, "text") == 0) {
            text_block(r, b, p, "\n\n", &text);
        } else if (strcmp(t, "tool_result") == 0) {
            static const char *const keys[] = {"type", "tool_use_id", "content", "is_error", "cache_control", NULL};
            check_keys(r, b, p, keys);
            check_cache_control(r, b, p);
            json_t *id = json_object_get(b, "tool_use_id"), *c = json_object_get(b, "content");
            json_t *err = json_object_get(b, "is_error");
            if (!r->failed && !json_is_string(id))
                bad(r, "%s.tool_use_id: expected a string, found %s", p, id ? http_json_type(id) : "nothing");
            if (!r->failed && err && !json_is_null(err) && !json_is_boolean(err))
                bad(r, "%s.is_error: expected a boolean, found %s", p, http_json_type(err));
            hbuf out = {0};
            char cp[144];
            snprintf(cp, sizeof cp, "%s.content", p);
            if (!r->failed && c && !json_is_null(c))
                join_text(r, c, cp, "\n\n", &out);
            if (!r->failed)
                json_array_append_new(r->msgs, json_pack("{s:s, s:O, s:o}", "role", "tool", "tool_call_id", id,
                                                         "content", text_json(&out)));
            hbuf_free(&out);
        } else if (!refused_block(r, t, p)) {
            bad(r, "%s.type: a user message takes \"text\" and \"tool_result\" blocks, found \"%s\"", p, t);
        }
    }
    /* Tool results go first: templates expect them right after the assistant's calls. */
    if (!r->failed && text.len)
        json_array_append_new(r->msgs, json_pack("{s:s, s:o}", "role", "user", "content", text_json(&text)));
    hbuf_free(&text);
}

static void convert_assistant(anth_req *r, json_t *content, const char *path)
{
    hbuf text = {0}, reasoning = {0};
    json_t *calls = json_array();
    for (size_t i = 0; i < json_array_size(content) && !r->failed; i++) {
        json_t *b = json_array_get(content, i);
        char p[128];
        snprintf(p, sizeof p, "%s.%zu", path, i);
        json_t *type = json_object_get(b, "type");
        if (!json_is_object(b) || !json_is_string(type)) {
            bad(r, "%s: expected a content block with a \"type\"", p);
            break;
        }
        const char *t = json_string_value(type);
        if (strcmp(t, "text") == 0) {
            text_block(r, b, p, "", &text);
        } else if (strcmp(t, "tool_use") == 0) {
            static const char *const keys[] = {"type", "id", "name", "input", "cache_control", NULL};
            check_keys(r, b, p, keys);
            check_cache_control(r, b, p);
            json_t *id = json_object_get(b, "id"), *name = json_object_get(b, "name");
            json_t *input = json_object_get(b, "input");
            if (!r->failed && !json_is_string(id))
                bad(r, "%s.id: expected a string, found %s", p, id ? http_json_type(id) : "nothing");
            if (!r->failed && !json_is_string(name))
                bad(r, "%s.name: expected a string, found %s", p, name ? http_json_type(name) : "nothing");
            if (!r->failed && !json_is_object(input))
                bad(r, "%s.input: expected an object, found %s", p, input ? http_json_type(input) : "nothing");
            if (!r->failed)
                json_array_append_new(calls, json_pack("{s:O, s:s, s:{s:O, s:O}}", "id", id, "type", "function",
                                                       "function", "name", name, "arguments", input));
        } else if (strcmp(t, "thinking") == 0) {
            static const char *const keys[] = {"type", "thinking", "signature", NULL};
            check_keys(r, b, p, keys);
            json_t *th = json_object_get(b, "thinking");
            if (!r->failed && !json_is_string(th))
                bad(r, "%s.thinking: expected a string, found %s", p, th ? http_json_type(th) : "nothing");
            if (!r->failed)
                hbuf_append(&reasoning, json_string_value(th), json_string_length(th));
        } else if (strcmp(t, "redacted_thinking") == 0) {
            /* Anthropic's encrypted reasoning: nothing a local model can read. */
        } else if (!refused_block(r, t, p)) {
            bad(r, "%s.type: an assistant message takes \"text\", \"tool_use\", \"thinking\" and "
                   "\"redacted_thinking\" blocks, found \"%s\"", p, t);
        }
    }
    if (!r->failed) {
        json_t *m = json_pack("{s:s, s:o}", "role", "assistant", "content", text_json(&text));
        if (reasoning.len)
            json_object_set_new(m, "reasoning_content", text_json(&reasoning));
        if (json_array_size(calls))
            json_object_set(m, "tool_calls", calls);
        json_array_append_new(r->msgs, m);
    }
    json_decref(calls);
    hbuf_free(&text);
    hbuf_free(&reasoning);
}

static void convert_messages(anth_req *r)
{
    json_t *msgs = json_object_get(r->root, "messages");
    if (!msgs) {
        bad(r, "messages: field required");
        return;
    }
    if (!json_is_array(msgs) || !json_array_size(msgs)) {
        bad(r, "messages: expected a non-empty list of messages, found %s",
            json_is_array(msgs) ? "an empty list" : http_json_type(msgs));
        return;
    }
    json_t *sys = json_object_get(r->root, "system");
    if (sys && !json_is_null(sys)) {
        hbuf text = {0};
        join_text(r, sys, "system", "\n\n", &text);
        if (!r->failed)
            json_array_append_new(r->msgs, json_pack("{s:s, s:o}", "role", "system", "content", text_json(&text)));
        hbuf_free(&text);
    }
    size_t n = json_array_size(msgs);
    for (size_t i = 0; i < n && !r->failed; i++) {
        json_t *m = json_array_get(msgs, i);
        char p[64];
        snprintf(p, sizeof p, "messages.%zu", i);
        if (!json_is_object(m)) {
            bad(r, "%s: expected an object, found %s", p, http_json_type(m));
            return;
        }
        static const char *const keys[] = {"role", "content", NULL};
        check_keys(r, m, p, keys);
        json_t *role = json_object_get(m, "role"), *content = json_object_get(m, "content");
        if (!r->failed && !json_is_string(role))
            bad(r, "%s.role: expected \"user\" or \"assistant\", found %s", p, role ? http_json_type(role) : "nothing");
        if (r->failed)
            return;
        const char *rs = json_string_value(role);
        int user = strcmp(rs, "user") == 0;
        if (!user && strcmp(rs, "assistant") != 0) {
            bad(r, "%s.role: expected \"user\" or \"assistant\", found \"%s\" (the system prompt goes in the "
                   "top-level \"system\" field)", p, rs);
            return;
        }
        if (!user && i + 1 == n) {
            bad(r, "%s: the last message must be the user's (prefilling the assistant's answer is not supported)",
                p);
            return;
        }
        char cp[80];
        snprintf(cp, sizeof cp, "%s.content", p);
        if (json_is_string(content)) {
            json_array_append_new(r->msgs, json_pack("{s:s, s:O}", "role", rs, "content", content));
        } else if (json_is_array(content)) {
            if (user)
                convert_user(r, content, cp);
            else
                convert_assistant(r, content, cp);
        } else {
            bad(r, "%s: expected a string or a list of content blocks, found %s", cp,
                content ? http_json_type(content) : "nothing");
        }
    }
}

static void convert_tools(anth_req *r)
{
    json_t *tools = json_object_get(r->root, "tools");
    if (!tools || json_is_null(tools))
        return;
    if (!json_is_array(tools)) {
        bad(r, "tools: expected a list of tools, found %s", http_json_type(tools));
        return;
    }
    if (!json_array_size(tools))
        return;
    r->tools = json_array();
    for (size_t i = 0; i < json_array_size(tools) && !r->failed; i++) {
        json_t *t = json_array_get(tools, i);
        char p[48];
        snprintf(p, sizeof p, "tools.%zu", i);
        if (!json_is_object(t)) {
            bad(r, "%s: expected an object, found %s", p, http_json_type(t));
            return;
        }
        json_t *type = json_object_get(t, "type");
        if (type && !json_is_null(type) && !(json_is_string(type) && strcmp(json_string_value(type), "custom") == 0)) {
            bad(r, "%s.type: only client tools (\"custom\", or no type) are supported, found %s%s%s", p,
                json_is_string(type) ? "\"" : "", json_is_string(type) ? json_string_value(type) : http_json_type(type),
                json_is_string(type) ? "\" (Anthropic's server-defined tools run on Anthropic's servers)" : "");
            return;
        }
        static const char *const keys[] = {"type", "name", "description", "input_schema", "cache_control",
                                           "eager_input_streaming", "strict", NULL};
        check_keys(r, t, p, keys);
        check_cache_control(r, t, p);
        /* Arguments already stream as the parser produces them. */
        json_t *eager = json_object_get(t, "eager_input_streaming"), *strict = json_object_get(t, "strict");
        if (!r->failed && eager && !json_is_null(eager) && !json_is_boolean(eager))
            bad(r, "%s.eager_input_streaming: expected a boolean, found %s", p, http_json_type(eager));
        if (!r->failed && strict && !json_is_null(strict) && !json_is_false(strict))
            bad(r, "%s.strict: only false is supported (arguments are constrained to the schema with tool_choice "
                   "\"any\" or \"tool\", not per tool)", p);
        json_t *name = json_object_get(t, "name"), *desc = json_object_get(t, "description");
        json_t *schema = json_object_get(t, "input_schema");
        if (!r->failed && (!json_is_string(name) || !json_string_length(name)))
            bad(r, "%s.name: expected a non-empty string, found %s", p, name ? http_json_type(name) : "nothing");
        if (!r->failed && desc && !json_is_null(desc) && !json_is_string(desc))
            bad(r, "%s.description: expected a string, found %s", p, http_json_type(desc));
        if (!r->failed && !json_is_object(schema))
            bad(r, "%s.input_schema: expected a JSON schema object, found %s", p,
                schema ? http_json_type(schema) : "nothing");
        if (r->failed)
            return;
        json_t *fn = json_pack("{s:O, s:O}", "name", name, "parameters", schema);
        if (json_is_string(desc))
            json_object_set(fn, "description", desc);
        json_array_append_new(r->tools, json_pack("{s:s, s:o}", "type", "function", "function", fn));
    }
}

static int tool_named(const json_t *tools, const char *name)
{
    for (size_t i = 0; i < json_array_size(tools); i++) {
        const char *n = json_string_value(json_object_get(json_object_get(json_array_get(tools, i), "function"),
                                                          "name"));
        if (n && strcmp(n, name) == 0)
            return 1;
    }
    return 0;
}

static void parse_tool_choice(anth_req *r)
{
    r->req.tool_choice = SY_TOOL_CHOICE_AUTO;
    r->req.parallel_tool_calls = 1;
    json_t *tc = json_object_get(r->root, "tool_choice");
    if (!tc || json_is_null(tc) || r->failed)
        return;
    json_t *type = json_object_get(tc, "type");
    if (!json_is_object(tc) || !json_is_string(type)) {
        bad(r, "tool_choice: expected {\"type\": \"auto\" | \"any\" | \"tool\" | \"none\"}");
        return;
    }
    const char *t = json_string_value(type);
    static const char *const keys[] = {"type", "name", "disable_parallel_tool_use", NULL};
    static const char *const keys_none[] = {"type", NULL};
    check_keys(r, tc, "tool_choice", strcmp(t, "none") == 0 ? keys_none : keys);
    json_t *dp = json_object_get(tc, "disable_parallel_tool_use"), *name = json_object_get(tc, "name");
    if (!r->failed && dp && !json_is_null(dp) && !json_is_boolean(dp))
        bad(r, "tool_choice.disable_parallel_tool_use: expected a boolean, found %s", http_json_type(dp));
    if (!r->failed && name && strcmp(t, "tool") != 0)
        bad(r, "tool_choice.name: only with \"type\": \"tool\"");
    if (r->failed)
        return;
    if (json_is_true(dp))
        r->req.parallel_tool_calls = 0;
    if (strcmp(t, "auto") == 0) {
        r->req.tool_choice = SY_TOOL_CHOICE_AUTO;
    } else if (strcmp(t, "none") == 0) {
        r->req.tool_choice = SY_TOOL_CHOICE_NONE;
    } else if (strcmp(t, "any") == 0 || strcmp(t, "tool") == 0) {
        int any = t[0] == 'a';
        if (!r->tools) {
            bad(r, "tool_choice: \"%s\" needs \"tools\"", t);
            return;
        }
        r->req.tool_choice = any ? SY_TOOL_CHOICE_REQUIRED : SY_TOOL_CHOICE_FUNCTION;
        if (any)
            return;
        if (!json_is_string(name)) {
            bad(r, "tool_choice.name: expected the name of one of \"tools\", found %s",
                name ? http_json_type(name) : "nothing");
        } else if (!tool_named(r->tools, json_string_value(name))) {
            bad(r, "tool_choice.name: no tool named \"%s\" in \"tools\"", json_string_value(name));
        } else {
            r->choice_name = strdup(json_string_value(name));
            r->req.tool_choice_name = r->choice_name;
        }
    } else {
        bad(r, "tool_choice.type: expected \"auto\", \"any\", \"tool\" or \"none\", found \"%s\"", t);
    }
}

/* One chat-template kwarg (the template ignores those it does not use). */
static void set_kwarg(anth_req *r, const char *key, json_t *v)
{
    if (!r->kwargs)
        r->kwargs = json_object();
    json_object_set_new(r->kwargs, key, v);
}

/*
 * context_management: clear_thinking edits (Claude Code sends one) drop the
 * reasoning of all but the last `keep` assistant turns that have some;
 * keep "all" drops none. What is kept is meant to be rendered: templates
 * with a clear_thinking kwarg (GLM) get it false. Other edits are refused.
 */
static void apply_context_management(anth_req *r)
{
    json_t *cm = json_object_get(r->root, "context_management");
    if (!cm || json_is_null(cm) || r->failed)
        return;
    static const char *const keys[] = {"edits", NULL};
    json_t *edits = json_object_get(cm, "edits");
    if (!json_is_object(cm)) {
        bad(r, "context_management: expected an object, found %s", http_json_type(cm));
        return;
    }
    check_keys(r, cm, "context_management", keys);
    if (!r->failed && edits && !json_is_null(edits) && !json_is_array(edits))
        bad(r, "context_management.edits: expected a list, found %s", http_json_type(edits));
    for (size_t i = 0; i < json_array_size(edits) && !r->failed; i++) {
        json_t *e = json_array_get(edits, i);
        char p[64];
        snprintf(p, sizeof p, "context_management.edits.%zu", i);
        const char *type = json_string_value(json_object_get(e, "type"));
        if (!type || strncmp(type, "clear_thinking_", 15) != 0) {
            bad(r, "%s.type: only clear_thinking edits are supported, found %s%s%s", p, type ? "\"" : "",
                type ? type : "no type", type ? "\"" : "");
            return;
        }
        static const char *const ekeys[] = {"type", "keep", NULL};
        check_keys(r, e, p, ekeys);
        json_t *keep = json_object_get(e, "keep");
        long long n = 1; /* Anthropic's default: the last thinking turn */
        if (r->failed)
            return;
        set_kwarg(r, "clear_thinking", json_false());
        if (json_is_string(keep) && strcmp(json_string_value(keep), "all") == 0)
            continue;
        if (keep && !json_is_null(keep)) {
            json_t *kt = json_object_get(keep, "type"), *kv = json_object_get(keep, "value");
            if (!json_is_object(keep) || !json_is_string(kt) || strcmp(json_string_value(kt), "thinking_turns") != 0 ||
                !json_is_integer(kv) || json_integer_value(kv) < 0) {
                bad(r, "%s.keep: expected \"all\" or {\"type\": \"thinking_turns\", \"value\": N >= 0}", p);
                return;
            }
            n = json_integer_value(kv);
        }
        for (size_t k = json_array_size(r->msgs); k-- > 0;) {
            json_t *m = json_array_get(r->msgs, k);
            if (!json_object_get(m, "reasoning_content"))
                continue;
            if (n > 0)
                n--;
            else
                json_object_del(m, "reasoning_content");
        }
    }
}

static long long max_tokens_of(anth_req *r)
{
    json_t *mt = json_object_get(r->root, "max_tokens");
    return json_is_integer(mt) ? json_integer_value(mt) : 0;
}

/* thinking -> the template's enable_thinking; omitted: the template's default. */
static void parse_thinking(anth_req *r)
{
    json_t *th = json_object_get(r->root, "thinking");
    if (!th || json_is_null(th) || r->failed)
        return;
    json_t *type = json_object_get(th, "type");
    if (!json_is_object(th) || !json_is_string(type)) {
        bad(r, "thinking: expected {\"type\": \"enabled\" | \"adaptive\" | \"disabled\", ...}");
        return;
    }
    const char *t = json_string_value(type);
    static const char *const keys_on[] = {"type", "budget_tokens", "display", NULL};
    static const char *const keys_adaptive[] = {"type", "display", NULL};
    static const char *const keys_off[] = {"type", NULL};
    if (strcmp(t, "enabled") == 0) {
        check_keys(r, th, "thinking", keys_on);
        json_t *b = json_object_get(th, "budget_tokens");
        if (r->failed)
            return;
        if (!json_is_integer(b)) {
            bad(r, "thinking.budget_tokens: expected an integer, found %s", b ? http_json_type(b) : "nothing");
            return;
        }
        long long v = json_integer_value(b);
        if (v < 1024) {
            bad(r, "thinking.budget_tokens: expected at least 1024, found %lld", v);
            return;
        }
        if (!r->count_only && v >= max_tokens_of(r)) {
            bad(r, "thinking.budget_tokens: expected less than max_tokens (%lld), found %lld", max_tokens_of(r), v);
            return;
        }
        set_kwarg(r, "enable_thinking", json_true());
    } else if (strcmp(t, "adaptive") == 0) {
        check_keys(r, th, "thinking", keys_adaptive);
    } else if (strcmp(t, "disabled") == 0) {
        check_keys(r, th, "thinking", keys_off);
        set_kwarg(r, "enable_thinking", json_false());
    } else {
        bad(r, "thinking.type: expected \"enabled\", \"adaptive\" or \"disabled\", found \"%s\"", t);
        return;
    }
    json_t *d = json_object_get(th, "display");
    if (r->failed || !d || json_is_null(d))
        return;
    if (!json_is_string(d) ||
        (strcmp(json_string_value(d), "summarized") != 0 && strcmp(json_string_value(d), "omitted") != 0))
        bad(r, "thinking.display: expected \"summarized\" or \"omitted\"");
    else
        r->thinking_omitted = strcmp(json_string_value(d), "omitted") == 0;
}

static void parse_output_config(anth_req *r)
{
    json_t *oc = json_object_get(r->root, "output_config");
    if (!oc || json_is_null(oc) || r->failed)
        return;
    if (!json_is_object(oc)) {
        bad(r, "output_config: expected an object, found %s", http_json_type(oc));
        return;
    }
    static const char *const keys[] = {"effort", "format", NULL};
    check_keys(r, oc, "output_config", keys);
    json_t *effort = json_object_get(oc, "effort"), *fmt = json_object_get(oc, "format");
    static const char *const efforts[] = {"low", "medium", "high", "xhigh", "max", NULL};
    if (!r->failed && effort && !json_is_null(effort) &&
        !(json_is_string(effort) && in_list(json_string_value(effort), efforts)))
        bad(r, "output_config.effort: expected \"low\", \"medium\", \"high\", \"xhigh\" or \"max\"");
    if (r->failed || !fmt || json_is_null(fmt))
        return;
    static const char *const fkeys[] = {"type", "schema", NULL};
    json_t *type = json_object_get(fmt, "type"), *schema = json_object_get(fmt, "schema");
    if (!json_is_object(fmt) || !json_is_string(type) || strcmp(json_string_value(type), "json_schema") != 0) {
        bad(r, "output_config.format: expected {\"type\": \"json_schema\", \"schema\": {...}}");
        return;
    }
    check_keys(r, fmt, "output_config.format", fkeys);
    if (!r->failed && !json_is_object(schema))
        bad(r, "output_config.format.schema: expected a JSON schema object, found %s",
            schema ? http_json_type(schema) : "nothing");
    if (r->failed)
        return;
    r->schema_text = json_dumps(schema, JSON_COMPACT);
    r->req.constraint_kind = SY_CONSTRAINT_JSON_SCHEMA;
    r->req.constraint = r->schema_text;
    r->req.constraint_path = "output_config.format.schema";
}

static void get_number(anth_req *r, const char *key, double lo, double hi, int lo_open, float *out)
{
    json_t *v = json_object_get(r->root, key);
    if (!v || json_is_null(v) || r->failed)
        return;
    double d = json_number_value(v);
    if (!json_is_number(v))
        bad(r, "%s: expected a number, found %s", key, http_json_type(v));
    else if (!isfinite(d) || d < lo || d > hi || (lo_open && d == lo))
        bad(r, "%s: expected a number in %s%g, %g], found %g", key, lo_open ? "(" : "[", lo, hi, d);
    else
        *out = (float)d;
}

static void parse_sampling(anth_req *r, const sy_model_info *mi)
{
    sy_request *q = &r->req;
    json_t *mt = json_object_get(r->root, "max_tokens");
    if (!mt) {
        bad(r, "max_tokens: field required");
        return;
    }
    if (!json_is_integer(mt) || json_integer_value(mt) < 1) {
        bad(r, "max_tokens: expected a positive integer, found %s", json_is_integer(mt) ? "a number below 1"
                                                                                        : http_json_type(mt));
        return;
    }
    /* A maximum, as Anthropic means it: the host clamps it to the context
     * left (clients such as Claude Code ask for more than a local model's
     * context holds). */
    long long ctx = mi->max_seq_len > 0 ? mi->max_seq_len : INT32_MAX;
    q->max_tokens = (int32_t)(json_integer_value(mt) < ctx ? json_integer_value(mt) : ctx);
    q->temperature = 1.0f;
    get_number(r, "temperature", 0, 1, 0, &q->temperature);
    q->top_p = 1.0f;
    get_number(r, "top_p", 0, 1, 1, &q->top_p);
    json_t *k = json_object_get(r->root, "top_k");
    if (k && !json_is_null(k) && !r->failed) {
        if (!json_is_integer(k))
            bad(r, "top_k: expected an integer, found %s", http_json_type(k));
        else if (json_integer_value(k) < 0 || json_integer_value(k) > (1 << 20))
            bad(r, "top_k: expected an integer in [0, 1048576], found %lld", (long long)json_integer_value(k));
        else
            q->top_k = (int32_t)json_integer_value(k);
    }
    /* The type here; the range (up to the server's [speculative] num_draft_tokens) in the host, which knows it. */
    json_t *nd = json_object_get(r->root, "num_draft_tokens");
    if (nd && !json_is_null(nd) && !r->failed) {
        if (!json_is_integer(nd))
            bad(r, "num_draft_tokens: expected an integer (0: no drafts; 1..k: at most that many per step), found %s",
                http_json_type(nd));
        else if (json_integer_value(nd) < INT32_MIN || json_integer_value(nd) > INT32_MAX)
            bad(r, "num_draft_tokens: expected an integer, found %lld (out of range)",
                (long long)json_integer_value(nd));
        else {
            q->has_num_draft_tokens = 1;
            q->num_draft_tokens = (int32_t)json_integer_value(nd);
        }
    }
    q->repetition_penalty = 1.0f;
    q->skip_special = 1;
    q->top_logprobs = -1;
    json_t *s = json_object_get(r->root, "stream");
    if (s && !json_is_null(s) && !r->failed) {
        if (!json_is_boolean(s))
            bad(r, "stream: expected a boolean, found %s", http_json_type(s));
        r->streaming = json_is_true(s);
    }
    json_t *stops = json_object_get(r->root, "stop_sequences");
    if (stops && !json_is_null(stops) && !r->failed) {
        if (!json_is_array(stops) || json_array_size(stops) > ANTH_MAX_STOP) {
            bad(r, "stop_sequences: expected a list of at most %d strings, found %s", ANTH_MAX_STOP,
                json_is_array(stops) ? "a longer list" : http_json_type(stops));
            return;
        }
        for (size_t i = 0; i < json_array_size(stops); i++) {
            json_t *one = json_array_get(stops, i);
            if (!json_is_string(one) || !json_string_length(one)) {
                bad(r, "stop_sequences.%zu: expected a non-empty string, found %s", i,
                    json_is_string(one) ? "an empty string" : http_json_type(one));
                return;
            }
            r->stops[i] = json_string_value(one);
        }
        q->stop_strings = r->stops;
        q->n_stop_strings = json_array_size(stops);
    }
    json_t *md = json_object_get(r->root, "metadata");
    if (md && !json_is_null(md) && !r->failed) {
        static const char *const keys[] = {"user_id", NULL};
        json_t *u = json_object_get(md, "user_id");
        if (!json_is_object(md))
            bad(r, "metadata: expected an object, found %s", http_json_type(md));
        check_keys(r, md, "metadata", keys);
        if (!r->failed && u && !json_is_null(u) && !json_is_string(u))
            bad(r, "metadata.user_id: expected a string, found %s", http_json_type(u));
    }
    json_t *tier = json_object_get(r->root, "service_tier");
    if (tier && !json_is_null(tier) && !r->failed &&
        !(json_is_string(tier) && (strcmp(json_string_value(tier), "auto") == 0 ||
                                   strcmp(json_string_value(tier), "standard_only") == 0)))
        bad(r, "service_tier: expected \"auto\" or \"standard_only\"");
}

/* Fields Anthropic defines that this server cannot honour, with why. */
static const char *refused_field(const char *key)
{
    static const struct { const char *key, *why; } refused[] = {
        {"container", "code execution containers run on Anthropic's servers"},
        {"mcp_servers", "this server does not connect to MCP servers"},
        {"speed", "there is one speed"},
        {"inference_geo", "there is one place"},
        {"diagnostics", "not implemented"},
        {"user_profile_id", "not implemented"},
        {"workspace_id", "not implemented"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        if (strcmp(key, refused[i].key) == 0)
            return refused[i].why;
    return NULL;
}

static void check_top_level(anth_req *r)
{
    static const char *const create_keys[] = {"model", "max_tokens", "messages", "system", "stop_sequences",
                                              "stream", "temperature", "top_p", "top_k", "tools", "tool_choice",
                                              "metadata", "thinking", "service_tier", "cache_control",
                                              "output_config", "context_management", "num_draft_tokens", NULL};
    static const char *const count_keys[] = {"model", "messages", "system", "tools", "tool_choice", "thinking",
                                             "cache_control", "output_config", "context_management", NULL};
    const char *key;
    json_t *v;
    json_object_foreach(r->root, key, v) {
        if (in_list(key, r->count_only ? count_keys : create_keys))
            continue;
        const char *why = refused_field(key);
        if (why)
            bad(r, "%s: not supported by this server (%s)", key, why);
        else if (r->count_only && in_list(key, create_keys))
            bad(r, "%s: count_tokens does not take this field", key);
        else
            bad(r, "%s: unknown field", key);
        return;
    }
    check_cache_control(r, r->root, "");
}

/* Anthropic's error types; "overloaded" (529) is what its SDK retries when the queue is full. */
static const http_api_errors anth_errors = {
    .not_ready_type = "overloaded_error",
    .busy_status = 529,
    .busy_type = "overloaded_error",
    .server_type = "api_error",
};

static void check_model(anth_req *r, const char *served, const sy_model_info *mi)
{
    json_t *m = json_object_get(r->root, "model");
    if (!m) {
        bad(r, "model: field required");
    } else if (!json_is_string(m)) {
        bad(r, "model: expected a string, found %s", http_json_type(m));
    } else if (strcmp(json_string_value(m), served) != 0 && !(mi->id && strcmp(json_string_value(m), mi->id) == 0)) {
        r->failed = 1;
        http_respond_error(r->st, 404, "not_found_error", "model", NULL,
                           "model: %s (this server serves '%s'; Claude Code: set ANTHROPIC_MODEL and "
                           "ANTHROPIC_SMALL_FAST_MODEL, or ANTHROPIC_DEFAULT_*_MODEL, to it)", json_string_value(m), served);
    }
}

/* Renders the conversation and tokenizes it into r->prompt. */
static void render(anth_req *r)
{
    http_server *s = r->st->conn->loop->srv;
    char *mj = json_dumps(r->msgs, JSON_COMPACT);
    r->tools_text = r->tools ? json_dumps(r->tools, JSON_COMPACT) : NULL;
    char *kj = r->kwargs ? json_dumps(r->kwargs, JSON_COMPACT) : NULL;
    char *text = NULL;
    size_t len = 0;
    sy_err err = {{0}};
    int rc = mj ? s->api->apply_chat_template(s->host->ctx, mj, r->tools_text, 1, kj, &text, &len, &err)
                : SY_ERR_NOMEM;
    free(mj);
    free(kj);
    if (rc == SY_OK) {
        /* The template writes its own special tokens (BOS and the like). */
        rc = s->api->tokenize(s->host->ctx, text, len, 0, &r->prompt, &r->n_prompt, &err);
        s->host->free(s->host->ctx, text);
    }
    if (rc != SY_OK) {
        r->failed = 1;
        int st = rc == SY_ERR_INVALID ? 400 : rc == SY_ERR_UNAVAILABLE ? 503 : 500;
        http_respond_error(r->st, st, rc == SY_ERR_INVALID ? "invalid_request_error" : "api_error", NULL, NULL,
                           "messages: the chat template or the tokenizer failed: %s", err.msg);
    }
}

static void submit(anth_req *r, const char *model)
{
    http_stream *st = r->st;
    http_server *s = st->conn->loop->srv;
    http_job *job = http_job_new(st, JOB_ANTHROPIC, 1);
    http_anth *a = job ? http_anth_new(r->stops, r->req.n_stop_strings, r->thinking_omitted) : NULL;
    if (!a) {
        if (job)
            http_job_detach(job);
        http_respond_error(st, 503, "overloaded_error", NULL, NULL, "out of memory");
        return;
    }
    job->anth = a;
    job->streaming = r->streaming;
    job->prompt_tokens = (int)r->n_prompt;
    job->created = (int64_t)time(NULL);
    job->model = strdup(model);
    snprintf(job->id, sizeof job->id, "msg_%lx%02x%06lx", (unsigned long)job->created, (unsigned)job->loop->index,
             ++job->loop->seq);
    http_choice *ch = &job->ch[0];
    sy_request q = r->req;
    q.prompt_ids = r->prompt;
    q.n_prompt = r->n_prompt;
    q.tools_json = r->tools_text;
    q.reasoning = 1;
    q.on_event = http_job_on_event;
    q.user = ch;
    sy_err err = {{0}};
    int rc = s->api->submit(s->host->ctx, &q, &ch->rid, &err);
    if (rc == SY_OK) {
        ch->submitted = 1;
        job->live = 1;
        job->loop->live_jobs++;
        return;
    }
    http_respond_submit_error(st, rc, &err, &anth_errors);
    http_job_detach(job);
}

static void handle(http_stream *st, int count_only)
{
    http_server *s = st->conn->loop->srv;
    anth_req r;
    memset(&r, 0, sizeof r);
    r.st = st;
    r.count_only = count_only;
    r.req.struct_size = sizeof r.req;
    r.root = http_ready_body(st, &anth_errors);
    if (!r.root)
        return;
    r.msgs = json_array();
    sy_model_info mi;
    const char *model = http_model_name(s, &mi);
    check_top_level(&r);
    if (!r.failed)
        check_model(&r, model, &mi);
    if (!r.failed && !count_only)
        parse_sampling(&r, &mi);
    if (!r.failed)
        convert_messages(&r);
    apply_context_management(&r);
    if (!r.failed)
        convert_tools(&r);
    parse_tool_choice(&r);
    parse_thinking(&r);
    parse_output_config(&r);
    if (!r.failed)
        render(&r);
    if (!r.failed && mi.max_seq_len > 0 && r.n_prompt >= (size_t)mi.max_seq_len && !count_only) {
        r.failed = 1;
        http_respond_error(st, 400, "invalid_request_error", NULL, NULL,
                           "prompt is too long: %zu tokens > %d maximum (the model's context)", r.n_prompt,
                           mi.max_seq_len - 1);
    }
    if (!r.failed && count_only)
        http_respond_json(st, 200, json_pack("{s:I}", "input_tokens", (json_int_t)r.n_prompt));
    else if (!r.failed)
        submit(&r, model);
    if (r.prompt)
        s->host->free(s->host->ctx, r.prompt);
    json_decref(r.msgs);
    json_decref(r.tools);
    json_decref(r.kwargs);
    free(r.tools_text);
    free(r.choice_name);
    free(r.schema_text);
    json_decref(r.root);
}

void http_anthropic_messages(http_stream *st) { handle(st, 0); }
void http_anthropic_count_tokens(http_stream *st) { handle(st, 1); }
