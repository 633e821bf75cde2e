/*
 * Fuzz target: the Anthropic Messages API of the HTTP frontend
 * (plugins/frontend/http/http_anthropic.c, http_anthropic_out.c), which
 * turns a JSON body into OpenAI-style messages, an sy_request or a 4xx
 * naming the field's path. The input is the request body; it is handled
 * as POST /v1/messages and as POST /v1/messages/count_tokens on the
 * in-process fake server, whose engine checks every submitted sy_request
 * against the plugin.h contract and answers it (text, a tool call in
 * pieces that split a UTF-8 character, DONE or ERROR) so the content-block
 * and SSE paths run too.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "fuzz_http_env.h"

static fuzz_http_env *env; /* libFuzzer gives no context: one server per process */

static void free_env(void) { fuzz_http_env_free(env); }

static void one(const uint8_t *data, size_t size, int count)
{
    http_conn *c = fuzz_http_reconnect(env);
    if (!c)
        abort();
    http_stream *st = http_stream_new(c, 0);
    if (!st)
        abort();
    strcpy(st->method, "POST");
    strcpy(st->path, count ? "/v1/messages/count_tokens" : "/v1/messages");
    st->anthropic_errors = 1; /* as http_route sets it for these paths */
    st->has_content_length = 1;
    st->content_length = size;
    if (hbuf_append(&st->body, data, size) < 0)
        abort();
    c->streams = st;
    st->dispatched = 1;
    if (count)
        http_anthropic_count_tokens(st);
    else
        http_anthropic_messages(st);
    fuzz_http_flush(env);
    if (fuzz_http_conn(env))
        fuzz_http_run_engine(env);
    fuzz_http_reset(env);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!env) {
        env = fuzz_http_env_new();
        if (!env)
            abort();
        atexit(free_env);
    }
    one(data, size, 0);
    one(data, size, 1);
    return 0;
}
