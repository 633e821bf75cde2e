/*
 * Fuzz target: the chat-template interpreter (core/chat): the input is a
 * template source; it is lexed and parsed, and a template that compiles is
 * rendered against a fixed conversation that reaches the usual template
 * paths (system prompt, alternating turns, an assistant tool call, a tool
 * answer, list-of-parts content, tools, kwargs, bos/eos), with and without
 * the generation prompt. A NUL byte in the input ends the template; what
 * follows, when it is a JSON array, replaces the conversation (so odd
 * values reach the evaluator: numbers as content, nested objects, ...).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "chat/chat_template.h"
#include "fuzz_common.h"

static const char conversation[] =
    "["
    "{\"role\":\"system\",\"content\":\"You are terse.\"},"
    "{\"role\":\"user\",\"content\":\"Hi \\u00e9\\u4e16 <b>\"},"
    "{\"role\":\"assistant\",\"content\":\"<think>x</think>Hello\"},"
    "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"weather?\"}]},"
    "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\","
    "\"function\":{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}}]},"
    "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"name\":\"get_weather\",\"content\":\"18C\"},"
    "{\"role\":\"user\",\"content\":\"thanks\"}"
    "]";
static const char tools_json[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Weather\","
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},"
    "\"required\":[\"city\"]}}}]";
static const char kwargs_json[] = "{\"enable_thinking\":false,\"date_string\":\"15 Jan 2025\",\"n\":3}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sy_chat_template *t = NULL;
    sy_err err = {{0}};
    const uint8_t *nul = memchr(data, '\0', size);
    size_t src_len = nul ? (size_t)(nul - data) : size;
    if (sy_chat_template_compile((const char *)data, src_len, &t, &err) != SY_OK) {
        fuzz_note("chat_template: compile: %s", err.msg);
        return 0;
    }
    json_t *msgs = NULL;
    if (nul) {
        msgs = json_loadb((const char *)nul + 1, size - src_len - 1, 0, NULL);
        if (!json_is_array(msgs)) {
            json_decref(msgs);
            msgs = NULL;
        }
    }
    if (!msgs)
        msgs = json_loads(conversation, 0, NULL);
    json_t *tools = json_loads(tools_json, 0, NULL);
    json_t *kwargs = json_loads(kwargs_json, 0, NULL);
    if (!msgs || !tools || !kwargs)
        abort(); /* the fixed inputs are valid JSON */
    for (int gen = 0; gen < 2; gen++) {
        char *out = NULL;
        size_t len = 0;
        sy_err rerr = {{0}};
        if (sy_chat_template_render(t, msgs, gen ? tools : NULL, gen, "<s>", "</s>", gen ? kwargs : NULL, &out, &len,
                                    &rerr) == SY_OK) {
            if (!out || out[len] != '\0')
                abort(); /* *out is *len bytes, then a NUL */
            fuzz_note("chat_template: rendered %zu bytes", len);
            free(out);
        } else {
            fuzz_note("chat_template: render: %s", rerr.msg);
        }
    }
    json_decref(msgs);
    json_decref(tools);
    json_decref(kwargs);
    sy_chat_template_free(t);
    return 0;
}
