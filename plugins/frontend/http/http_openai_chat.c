/*
 * frontend/http: the chat parts of an OpenAI request: messages (roles,
 * text content parts, the assistant's tool_calls and the tool messages
 * answering them, as OpenAI checks them) and tools / tool_choice /
 * parallel_tool_calls, which become sy_request.tools_json and friends.
 * The host normalises what templates expect (developer read as system,
 * null content, arguments text parsed); this file only refuses what is
 * malformed or not implemented.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_openai.h"

#define MAX_PENDING 128 /* tool calls of one assistant message awaiting their answers */

static void need_string(oai_req *r, json_t *obj, const char *key, const char *path, int required)
{
    json_t *v = json_object_get(obj, key);
    if (r->failed || (!required && (!v || json_is_null(v))))
        return;
    char p[OAI_PATH];
    oai_path(p, "%s.%s", path, key);
    if (!v || json_is_null(v))
        oai_bad(r, p, "'%s' is required", p);
    else if (!json_is_string(v))
        oai_bad(r, p, "'%s' must be a string", p);
}

/* A string, or a list of {"type": "text", "text": "..."} parts. */
static void check_content(oai_req *r, json_t *content, const char *path)
{
    char p[OAI_PATH];
    oai_path(p, "%s.content", path);
    if (json_is_string(content))
        return;
    if (!json_is_array(content)) {
        oai_bad(r, p, "'%s' must be a string or a list of text parts", p);
        return;
    }
    static const char *const part_keys[] = {"type", "text", "prompt_cache_breakpoint", NULL}; /* a cache hint */
    for (size_t k = 0; k < json_array_size(content) && !r->failed; k++) {
        json_t *part = json_array_get(content, k);
        char pp[OAI_PATH];
        oai_path(pp, "%s[%zu]", p, k);
        if (!json_is_object(part)) {
            oai_bad(r, pp, "'%s' must be an object", pp);
            return;
        }
        json_t *type = json_object_get(part, "type");
        char tp[OAI_PATH];
        oai_path(tp, "%s.type", pp);
        if (!json_is_string(type)) {
            oai_bad(r, tp, type ? "'%s' must be a string" : "'%s' is required", tp);
            return;
        }
        if (strcmp(json_string_value(type), "text") != 0) {
            char msg[OAI_PATH + 96];
            snprintf(msg, sizeof msg, "'%s': '%%s' content parts are not supported (text only)", tp);
            oai_bad_code(r, tp, "unsupported_value", msg, json_string_value(type));
            return;
        }
        oai_check_keys(r, part, pp, part_keys);
        need_string(r, part, "text", pp, 1);
    }
}

static void check_tool_calls(oai_req *r, json_t *calls, const char *path, json_t **pending, size_t *n_pending)
{
    char p[OAI_PATH];
    oai_path(p, "%s.tool_calls", path);
    if (!json_is_array(calls)) {
        oai_bad(r, p, "'%s' must be a list", p);
        return;
    }
    static const char *const call_keys[] = {"id", "type", "function", NULL};
    static const char *const fn_keys[] = {"name", "arguments", NULL};
    for (size_t j = 0; j < json_array_size(calls) && !r->failed; j++) {
        json_t *c = json_array_get(calls, j);
        char cp[OAI_PATH];
        oai_path(cp, "%s[%zu]", p, j);
        if (!json_is_object(c)) {
            oai_bad(r, cp, "'%s' must be an object", cp);
            return;
        }
        oai_check_keys(r, c, cp, call_keys);
        need_string(r, c, "id", cp, 1);
        need_string(r, c, "type", cp, 1);
        const char *type = json_string_value(json_object_get(c, "type"));
        if (!r->failed && strcmp(type, "function") != 0) {
            char tp[OAI_PATH];
            oai_path(tp, "%s.type", cp);
            oai_bad_code(r, tp, "unsupported_value", "'%s' must be \"function\"", tp);
        }
        json_t *fn = json_object_get(c, "function");
        char fp[OAI_PATH];
        oai_path(fp, "%s.function", cp);
        if (!r->failed && !json_is_object(fn))
            oai_bad(r, fp, fn ? "'%s' must be an object" : "'%s' is required", fp);
        if (r->failed)
            return;
        oai_check_keys(r, fn, fp, fn_keys);
        need_string(r, fn, "name", fp, 1);
        json_t *args = json_object_get(fn, "arguments");
        if (!json_is_object(args)) /* OpenAI sends the JSON text; transformers' convention, an object, is read too */
            need_string(r, fn, "arguments", fp, 1);
        if (r->failed)
            return;
        if (*n_pending == MAX_PENDING) {
            oai_bad(r, p, "'%s': at most 128 tool calls per message", p);
            return;
        }
        pending[(*n_pending)++] = json_object_get(c, "id");
    }
}

/* The keys each role may carry (OpenAI's, plus reasoning_content: the
 * assistant's earlier reasoning, which templates such as Qwen3's and
 * DeepSeek's render). */
static const char *const *role_keys(const char *role)
{
    static const char *const sys[] = {"role", "content", "name", NULL};
    static const char *const asst[] = {"role", "content", "name", "tool_calls", "refusal", "reasoning_content", NULL};
    /* name on a tool message: vLLM accepts it, some templates render it */
    static const char *const tool[] = {"role", "content", "tool_call_id", "name", NULL};
    if (!strcmp(role, "system") || !strcmp(role, "developer") || !strcmp(role, "user"))
        return sys;
    if (!strcmp(role, "assistant"))
        return asst;
    if (!strcmp(role, "tool"))
        return tool;
    return NULL;
}

static void unanswered(oai_req *r, size_t asst, json_t **pending, size_t n_pending)
{
    for (size_t j = 0; j < n_pending; j++)
        if (pending[j]) {
            char p[OAI_PATH];
            oai_path(p, "messages[%zu].tool_calls", asst);
            char msg[OAI_PATH + 160];
            snprintf(msg, sizeof msg,
                     "'%s': the call '%%s' has no answer: an assistant message with tool_calls must be followed by "
                     "one tool message per call (tool_call_id)",
                     p);
            oai_bad(r, p, msg, json_string_value(pending[j]));
            return;
        }
}

void oai_check_messages(oai_req *r, json_t *msgs)
{
    if (!msgs) {
        oai_bad(r, "messages", "'%s' is required", NULL);
        return;
    }
    if (!json_is_array(msgs)) {
        oai_bad(r, "messages", "'%s' must be a list of messages", NULL);
        return;
    }
    if (!json_array_size(msgs)) {
        oai_bad(r, "messages", "'%s' must not be empty", NULL);
        return;
    }
    json_t *pending[MAX_PENDING]; /* ids of the last assistant message's calls not yet answered (NULL: answered) */
    size_t n_pending = 0, asst = 0;
    for (size_t i = 0; i < json_array_size(msgs) && !r->failed; i++) {
        json_t *m = json_array_get(msgs, i);
        char p[OAI_PATH], rp[OAI_PATH];
        oai_path(p, "messages[%zu]", i);
        oai_path(rp, "messages[%zu].role", i);
        if (!json_is_object(m)) {
            oai_bad(r, p, "'%s' must be an object", p);
            return;
        }
        json_t *rv = json_object_get(m, "role");
        if (!json_is_string(rv)) {
            oai_bad(r, rp, rv ? "'%s' must be a string" : "'%s' is required", rp);
            return;
        }
        const char *role = json_string_value(rv);
        const char *const *keys = role_keys(role);
        if (!keys) {
            char msg[OAI_PATH + 160];
            snprintf(msg, sizeof msg,
                     "'%s': the role '%%s' is not supported (system, developer, user, assistant, tool)",
                     rp);
            oai_bad_code(r, rp, "unsupported_value", msg, role);
            return;
        }
        int is_tool = !strcmp(role, "tool"), is_asst = !strcmp(role, "assistant");
        if (!is_tool) {
            unanswered(r, asst, pending, n_pending);
            n_pending = 0;
        }
        oai_check_keys(r, m, p, keys);
        need_string(r, m, "name", p, 0);
        json_t *content = json_object_get(m, "content");
        json_t *calls = json_object_get(m, "tool_calls");
        if (is_asst) {
            need_string(r, m, "refusal", p, 0);
            need_string(r, m, "reasoning_content", p, 0);
            if (calls && !json_is_null(calls)) {
                asst = i;
                check_tool_calls(r, calls, p, pending, &n_pending);
            }
        }
        if (r->failed)
            return;
        if (content && !json_is_null(content)) {
            check_content(r, content, p);
        } else if (!is_asst || !(json_array_size(calls) || json_is_string(json_object_get(m, "refusal")))) {
            char cp[OAI_PATH];
            oai_path(cp, "messages[%zu].content", i);
            oai_bad(r, cp, is_asst ? "'%s' is required unless the message has tool_calls" : "'%s' is required",
                    cp);
        }
        if (is_tool && !r->failed) {
            need_string(r, m, "tool_call_id", p, 1);
            if (r->failed)
                return;
            json_t *id = json_object_get(m, "tool_call_id");
            size_t j = 0;
            while (j < n_pending && !(pending[j] && json_equal(pending[j], id)))
                j++;
            char ip[OAI_PATH];
            oai_path(ip, "messages[%zu].tool_call_id", i);
            if (j == n_pending) {
                char msg[OAI_PATH + 160];
                snprintf(msg, sizeof msg,
                         "'%s': '%%s' answers no pending call: a tool message must answer a tool call of the "
                         "assistant message before it, once",
                         ip);
                oai_bad(r, ip, msg, json_string_value(id));
                return;
            }
            pending[j] = NULL;
        }
    }
    unanswered(r, asst, pending, n_pending);
}

static void check_tool(oai_req *r, json_t *t, size_t i)
{
    static const char *const tool_keys[] = {"type", "function", NULL};
    static const char *const fn_keys[] = {"name", "description", "parameters", "strict", NULL};
    char p[OAI_PATH], fp[OAI_PATH], np[OAI_PATH];
    oai_path(p, "tools[%zu]", i);
    oai_path(fp, "tools[%zu].function", i);
    oai_path(np, "tools[%zu].function.name", i);
    if (!json_is_object(t)) {
        oai_bad(r, p, "'%s' must be an object", p);
        return;
    }
    need_string(r, t, "type", p, 1);
    if (r->failed)
        return;
    const char *type = json_string_value(json_object_get(t, "type"));
    if (strcmp(type, "function") != 0) {
        char tp[OAI_PATH], msg[OAI_PATH + 160];
        oai_path(tp, "tools[%zu].type", i);
        snprintf(msg, sizeof msg, "'%s': '%%s' tools are not supported (only \"function\")", tp);
        oai_bad_code(r, tp, "unsupported_value", msg, type);
        return;
    }
    oai_check_keys(r, t, p, tool_keys);
    json_t *fn = json_object_get(t, "function");
    if (!json_is_object(fn)) {
        oai_bad(r, fp, fn ? "'%s' must be an object" : "'%s' is required", fp);
        return;
    }
    oai_check_keys(r, fn, fp, fn_keys);
    need_string(r, fn, "name", fp, 1);
    need_string(r, fn, "description", fp, 0);
    if (r->failed)
        return;
    if (!oai_valid_name(json_string_value(json_object_get(fn, "name")))) {
        oai_bad(r, np, "'%s' must match [a-zA-Z0-9_-]{1,64}", np);
        return;
    }
    json_t *params = json_object_get(fn, "parameters"), *strict = json_object_get(fn, "strict");
    if (params && !json_is_null(params) && !json_is_object(params)) {
        char pp[OAI_PATH];
        oai_path(pp, "tools[%zu].function.parameters", i);
        oai_bad(r, pp, "'%s' must be a JSON schema object", pp);
    } else if (strict && !json_is_null(strict) && !json_is_boolean(strict)) {
        char sp[OAI_PATH];
        oai_path(sp, "tools[%zu].function.strict", i);
        oai_bad(r, sp, "'%s' must be a boolean", sp);
    }
}

static const char *tool_name(json_t *t)
{
    return json_string_value(json_object_get(json_object_get(t, "function"), "name"));
}

static void parse_tool_choice(oai_req *r)
{
    json_t *tc = oai_field(r, "tool_choice");
    sy_request *q = &r->req;
    q->tool_choice = SY_TOOL_CHOICE_AUTO;
    if (!tc)
        return;
    const char *s = json_string_value(tc);
    if (s && !strcmp(s, "auto")) {
        q->tool_choice = SY_TOOL_CHOICE_AUTO;
    } else if (s && !strcmp(s, "none")) {
        q->tool_choice = SY_TOOL_CHOICE_NONE;
    } else if (s && !strcmp(s, "required")) {
        q->tool_choice = SY_TOOL_CHOICE_REQUIRED;
    } else if (s) {
        oai_bad(r, "tool_choice", "'tool_choice' must be \"auto\", \"none\", \"required\" or "
                                  "{\"type\": \"function\", \"function\": {\"name\": ...}}, found \"%s\"", s);
        return;
    } else if (json_is_object(tc)) {
        static const char *const keys[] = {"type", "function", NULL};
        static const char *const fn_keys[] = {"name", NULL};
        oai_check_keys(r, tc, "tool_choice", keys);
        need_string(r, tc, "type", "tool_choice", 1);
        if (r->failed)
            return;
        const char *type = json_string_value(json_object_get(tc, "type"));
        if (strcmp(type, "function") != 0) {
            oai_bad_code(r, "tool_choice.type", "unsupported_value",
                         "'tool_choice.type' '%s' is not supported (only \"function\")", type);
            return;
        }
        json_t *fn = json_object_get(tc, "function");
        if (!json_is_object(fn)) {
            oai_bad(r, "tool_choice.function", fn ? "'%s' must be an object" : "'%s' is required", NULL);
            return;
        }
        oai_check_keys(r, fn, "tool_choice.function", fn_keys);
        need_string(r, fn, "name", "tool_choice.function", 1);
        if (r->failed)
            return;
        const char *name = json_string_value(json_object_get(fn, "name"));
        size_t i = 0;
        while (i < json_array_size(r->tools) && strcmp(tool_name(json_array_get(r->tools, i)), name) != 0)
            i++;
        if (i == json_array_size(r->tools)) {
            oai_bad(r, "tool_choice.function.name", "'tool_choice.function.name': '%s' is not one of the tools",
                    name);
            return;
        }
        q->tool_choice = SY_TOOL_CHOICE_FUNCTION;
        q->tool_choice_name = name;
    } else {
        oai_bad(r, "tool_choice", "'%s' must be a string or an object", NULL);
        return;
    }
    int forced = q->tool_choice == SY_TOOL_CHOICE_REQUIRED || q->tool_choice == SY_TOOL_CHOICE_FUNCTION;
    if (forced && !r->tools)
        oai_bad(r, "tool_choice", "'%s' requires 'tools' (a call is forced, but no tool is declared)", NULL);
    else if (forced && q->constraint_kind != SY_CONSTRAINT_NONE)
        oai_bad(r, "tool_choice", "'%s' that forces a call cannot be combined with a constraint on the text "
                                  "(response_format, regex, ebnf, structured_outputs, guided_*): both decide the "
                                  "whole output",
                NULL);
}

void oai_parse_tools(oai_req *r)
{
    sy_request *q = &r->req;
    q->parallel_tool_calls = 1;
    json_t *ptc = oai_field(r, "parallel_tool_calls");
    if (ptc && !json_is_boolean(ptc)) {
        oai_bad(r, "parallel_tool_calls", "'%s' must be a boolean", NULL);
        return;
    }
    if (ptc)
        q->parallel_tool_calls = json_is_true(ptc);
    json_t *tools = oai_field(r, "tools");
    if (tools && !json_is_array(tools)) {
        oai_bad(r, "tools", "'%s' must be a list of tools", NULL);
        return;
    }
    for (size_t i = 0; i < json_array_size(tools) && !r->failed; i++) {
        check_tool(r, json_array_get(tools, i), i);
        for (size_t j = 0; j < i && !r->failed; j++)
            if (!strcmp(tool_name(json_array_get(tools, i)), tool_name(json_array_get(tools, j)))) {
                char np[OAI_PATH];
                oai_path(np, "tools[%zu].function.name", i);
                oai_bad(r, np, "'%s' repeats the name of an earlier tool", np);
            }
    }
    if (r->failed)
        return;
    if (json_array_size(tools))
        r->tools = tools; /* an empty list declares nothing: no parsing, nothing for the template */
    parse_tool_choice(r);
    if (r->failed || !r->tools)
        return;
    r->tools_json = json_dumps(r->tools, JSON_COMPACT);
    if (!r->tools_json) {
        r->failed = 1;
        http_respond_error(r->st, 503, "server_error", NULL, NULL, "out of memory");
        return;
    }
    q->tools_json = r->tools_json;
}
