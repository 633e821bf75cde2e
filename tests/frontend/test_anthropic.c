/*
 * The Anthropic Messages API of the http frontend (POST /v1/messages and
 * /v1/messages/count_tokens) against the fake serving host: what a request
 * becomes (the messages and tools apply_chat_template gets, the
 * sy_request), Anthropic's error shape and statuses, and the answer's
 * shape, whole and streamed as SSE events.
 */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <jansson.h>

#include "fake_host.h"
#include "../unit/test_check.h"

typedef struct resp {
    char buf[1 << 17];
    size_t len;
    int status;
    char body[1 << 17]; /* de-chunked */
} resp;

static void dechunk(resp *r)
{
    const char *b = strstr(r->buf, "\r\n\r\n");
    r->body[0] = '\0';
    if (!b)
        return;
    b += 4;
    if (!strstr(r->buf, "Transfer-Encoding: chunked")) {
        snprintf(r->body, sizeof r->body, "%s", b);
        return;
    }
    size_t k = 0;
    for (;;) {
        char *end;
        unsigned long n = strtoul(b, &end, 16);
        if (end == b || n == 0 || strncmp(end, "\r\n", 2) != 0)
            break;
        b = end + 2;
        if (k + n >= sizeof r->body || strlen(b) < n)
            break;
        memcpy(r->body + k, b, n);
        k += n;
        b += n + 2;
    }
    r->body[k] = '\0';
}

/* One HTTP/1.1 request with Connection: close; reads to the end (or 5 s). */
static void post(int port, const char *path, const char *headers, const char *body, resp *r)
{
    memset(r, 0, sizeof *r);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        close(fd);
        return;
    }
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    size_t blen = strlen(body);
    char *req = malloc(blen + 1024);
    int n = snprintf(req, 1024,
                     "POST %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\nanthropic-version: 2023-06-01\r\n%s"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                     path, headers ? headers : "", blen);
    memcpy(req + n, body, blen);
    for (size_t off = 0, len = (size_t)n + blen; off < len;) {
        ssize_t k = send(fd, req + off, len - off, MSG_NOSIGNAL);
        if (k <= 0)
            break;
        off += (size_t)k;
    }
    free(req);
    for (;;) {
        ssize_t k = recv(fd, r->buf + r->len, sizeof r->buf - 1 - r->len, 0);
        if (k <= 0)
            break;
        r->len += (size_t)k;
    }
    close(fd);
    r->buf[r->len] = '\0';
    if (strncmp(r->buf, "HTTP/1.1 ", 9) == 0)
        r->status = atoi(r->buf + 9);
    dechunk(r);
}

static json_t *post_json(int port, const char *body, int want_status)
{
    static resp r;
    post(port, "/v1/messages", NULL, body, &r);
    if (r.status != want_status)
        fprintf(stderr, "expected %d for %s, got: %s\n", want_status, body, r.buf);
    CHECK(r.status == want_status);
    json_t *j = json_loads(r.body, 0, NULL);
    CHECK(j != NULL);
    return j ? j : json_object();
}

static const char *sget(json_t *o, const char *path) /* "a.b.0.c" */
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    json_t *v = o;
    for (char *tok = strtok(buf, "."); tok && v; tok = strtok(NULL, "."))
        v = json_is_array(v) ? json_array_get(v, (size_t)atoi(tok)) : json_object_get(v, tok);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

#define CHECK_STR(obj, path, want)                                                                   \
    do {                                                                                             \
        const char *got_ = sget((obj), (path));                                                      \
        CHECK(got_ && strcmp(got_, (want)) == 0);                                                    \
        if (!got_ || strcmp(got_, (want)) != 0)                                                      \
            fprintf(stderr, "  %s: expected \"%s\", found \"%s\"\n", (path), (want), got_ ? got_ : "(none)"); \
    } while (0)

static json_int_t iget(json_t *o, const char *k1, const char *k2)
{
    return json_integer_value(json_object_get(json_object_get(o, k1), k2));
}

/* The JSON text equals want (both parsed; key order free). */
static int json_text_equal(const char *text, const char *want)
{
    json_t *a = text ? json_loads(text, 0, NULL) : NULL, *b = json_loads(want, 0, NULL);
    int eq = a && b && json_equal(a, b);
    if (!eq)
        fprintf(stderr, "  expected %s\n  found    %s\n", want, text ? text : "(null)");
    json_decref(a);
    json_decref(b);
    return eq;
}

static void test_whole(int port)
{
    json_t *m = post_json(port, "{\"model\":\"fake-model\",\"max_tokens\":3,\"messages\":[{\"role\":\"user\","
                                "\"content\":\"hi\"}]}", 200);
    CHECK(strncmp(sget(m, "id") ? sget(m, "id") : "", "msg_", 4) == 0);
    CHECK_STR(m, "type", "message");
    CHECK_STR(m, "role", "assistant");
    CHECK_STR(m, "model", "fake-model");
    CHECK(json_array_size(json_object_get(m, "content")) == 1);
    CHECK_STR(m, "content.0.type", "text");
    CHECK_STR(m, "content.0.text", "t60 t117 t115 ");
    CHECK_STR(m, "stop_reason", "max_tokens");
    CHECK(json_is_null(json_object_get(m, "stop_sequence")));
    /* "<user>hi\n<assistant>": one token per byte */
    CHECK(iget(m, "usage", "input_tokens") == 20);
    CHECK(iget(m, "usage", "output_tokens") == 3);
    CHECK(iget(m, "usage", "cache_read_input_tokens") == 0);
    json_decref(m);

    /* a stop sequence: named, its text not emitted */
    m = post_json(port, "{\"model\":\"fake-model\",\"max_tokens\":9,\"stop_sequences\":[\"zz\",\"t115\"],"
                        "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", 200);
    CHECK_STR(m, "content.0.text", "t60 t117 ");
    CHECK_STR(m, "stop_reason", "stop_sequence");
    CHECK_STR(m, "stop_sequence", "t115");
    json_decref(m);
    /* "stop" without a stop sequence in the output is the model's own end */
    m = post_json(port, "{\"model\":\"fake-model\",\"max_tokens\":9,\"stop_sequences\":[\"zz\"],"
                        "\"messages\":[{\"role\":\"user\",\"content\":\"eos\"}]}", 200);
    CHECK_STR(m, "stop_reason", "end_turn");
    CHECK(json_is_null(json_object_get(m, "stop_sequence")));
    CHECK(iget(m, "usage", "output_tokens") == 3);
    json_decref(m);

    /* reasoning from the host -> a thinking block before the text */
    m = post_json(port, "{\"model\":\"fake-model\",\"max_tokens\":2,\"thinking\":{\"type\":\"enabled\","
                        "\"budget_tokens\":1024},\"messages\":[{\"role\":\"user\",\"content\":\"think\"}]}", 400);
    CHECK_STR(m, "type", "error"); /* budget_tokens must be below max_tokens */
    CHECK_STR(m, "error.type", "invalid_request_error");
    CHECK(strstr(sget(m, "error.message") ? sget(m, "error.message") : "", "thinking.budget_tokens") != NULL);
    json_decref(m);
    m = post_json(port, "{\"model\":\"fake-model\",\"max_tokens\":2000,\"thinking\":{\"type\":\"enabled\","
                        "\"budget_tokens\":1024},\"messages\":[{\"role\":\"user\",\"content\":\"hmm eos\"}]}", 200);
    CHECK(json_array_size(json_object_get(m, "content")) == 2);
    CHECK_STR(m, "content.0.type", "thinking");
    CHECK_STR(m, "content.0.thinking", "pondering");
    CHECK_STR(m, "content.0.signature", "");
    CHECK_STR(m, "content.1.type", "text");
    json_decref(m);

    /* tool use from the host's tool-call pieces */
    m = post_json(port, "{\"model\":\"fake-model\",\"max_tokens\":50,\"tools\":[{\"name\":\"get_weather\","
                        "\"input_schema\":{\"type\":\"object\"}}],\"messages\":[{\"role\":\"user\","
                        "\"content\":\"calltool\"}]}", 200);
    CHECK(json_array_size(json_object_get(m, "content")) == 2);
    CHECK_STR(m, "content.0.type", "text");
    CHECK_STR(m, "content.0.text", "t60 ");
    CHECK_STR(m, "content.1.type", "tool_use");
    CHECK_STR(m, "content.1.id", "toolu_fake0");
    CHECK_STR(m, "content.1.name", "get_weather");
    CHECK_STR(m, "content.1.input.city", "Paris");
    CHECK_STR(m, "stop_reason", "tool_use");
    json_decref(m);
    /* disable_parallel_tool_use: one call; the host's "call_s0" becomes "toolu_s0" */
    m = post_json(port, "{\"model\":\"fake-model\",\"max_tokens\":500,\"tool_choice\":{\"type\":\"auto\","
                        "\"disable_parallel_tool_use\":true},\"tools\":[{\"name\":\"a\",\"input_schema\":{\"type\":"
                        "\"object\",\"properties\":{\"q\":{\"type\":\"string\"}}}},{\"name\":\"b\",\"input_schema\":"
                        "{\"type\":\"object\"}}],\"messages\":[{\"role\":\"user\",\"content\":\"calltwo\"}]}", 200);
    CHECK(json_array_size(json_object_get(m, "content")) == 2);
    CHECK_STR(m, "content.0.text", "Let me check. ");
    CHECK_STR(m, "content.1.id", "toolu_s0");
    CHECK_STR(m, "content.1.name", "a");
    CHECK_STR(m, "content.1.input.q", "x");
    CHECK_STR(m, "stop_reason", "tool_use");
    json_decref(m);
}

/* What the body becomes: the template's messages, tools and kwargs, and the sy_request. */
static void test_conversion(int port, fake_host *fh)
{
    json_t *m = post_json(
        port,
        "{\"model\":\"fake-model\",\"max_tokens\":100000,\"temperature\":0.5,\"top_p\":0.9,\"top_k\":7,"
        "\"stop_sequences\":[\"t1\"],\"metadata\":{\"user_id\":\"u1\"},\"service_tier\":\"auto\","
        "\"system\":[{\"type\":\"text\",\"text\":\"Be brief.\",\"cache_control\":{\"type\":\"ephemeral\"}},"
        "{\"type\":\"text\",\"text\":\"Use tools.\"}],"
        "\"tools\":[{\"name\":\"get_weather\",\"description\":\"Weather now\",\"input_schema\":{\"type\":\"object\","
        "\"properties\":{\"city\":{\"type\":\"string\"}}}},{\"name\":\"noop\",\"input_schema\":{\"type\":\"object\"}}],"
        "\"tool_choice\":{\"type\":\"tool\",\"name\":\"noop\",\"disable_parallel_tool_use\":true},"
        "\"thinking\":{\"type\":\"disabled\"},"
        "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Weather?\"}]},"
        "{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\",\"thinking\":\"look it up\",\"signature\":\"s\"},"
        "{\"type\":\"redacted_thinking\",\"data\":\"x\"},{\"type\":\"text\",\"text\":\"Checking.\"},"
        "{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"get_weather\",\"input\":{\"city\":\"Paris\"}}]},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_1\",\"content\":"
        "[{\"type\":\"text\",\"text\":\"18C\"}],\"is_error\":false},{\"type\":\"text\",\"text\":\"Thanks\"}]}]}",
        200);
    json_decref(m);
    pthread_mutex_lock(&fh->mu);
    CHECK(json_text_equal(
        fh->last_messages,
        "[{\"role\":\"system\",\"content\":\"Be brief.\\n\\nUse tools.\"},{\"role\":\"user\",\"content\":\"Weather?\"},"
        "{\"role\":\"assistant\",\"content\":\"Checking.\",\"reasoning_content\":\"look it up\",\"tool_calls\":"
        "[{\"id\":\"toolu_1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":"
        "{\"city\":\"Paris\"}}}]},{\"role\":\"tool\",\"tool_call_id\":\"toolu_1\",\"content\":\"18C\"},"
        "{\"role\":\"user\",\"content\":\"Thanks\"}]"));
    const char *tools = "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Weather now\","
                        "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}}}}},"
                        "{\"type\":\"function\",\"function\":{\"name\":\"noop\",\"parameters\":{\"type\":\"object\"}}}]";
    CHECK(json_text_equal(fh->last_tools, tools));
    CHECK(json_text_equal(fh->last_req_tools, tools));
    CHECK(json_text_equal(fh->last_kwargs, "{\"enable_thinking\":false}"));
    const sy_request *q = &fh->last_req;
    CHECK(q->tool_choice == SY_TOOL_CHOICE_FUNCTION);
    CHECK(fh->last_req_choice_name && strcmp(fh->last_req_choice_name, "noop") == 0);
    CHECK(q->parallel_tool_calls == 0);
    CHECK(q->temperature == 0.5f && q->top_p == 0.9f && q->top_k == 7);
    CHECK(q->n_stop_strings == 1);
    CHECK(q->reasoning == 1);
    CHECK(q->max_tokens == 4096); /* a maximum: clamped to the context */
    CHECK(q->constraint_kind == SY_CONSTRAINT_NONE);
    CHECK(q->struct_size == sizeof(sy_request) && q->has_num_draft_tokens == 0); /* left out: the server's k */
    pthread_mutex_unlock(&fh->mu);
    /* num_draft_tokens reaches the host as given (the host checks it against [speculative]). */
    m = post_json(port, "{\"model\":\"fake-model\",\"max_tokens\":8,\"num_draft_tokens\":2,"
                        "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", 200);
    json_decref(m);
    pthread_mutex_lock(&fh->mu);
    CHECK(fh->last_req.has_num_draft_tokens == 1 && fh->last_req.num_draft_tokens == 2);
    pthread_mutex_unlock(&fh->mu);

    /* any -> REQUIRED, parallel by default; no thinking field: no kwargs; a JSON-schema output format */
    m = post_json(port, "{\"model\":\"fake-model\",\"max_tokens\":1,\"tools\":[{\"name\":\"a\",\"input_schema\":"
                        "{\"type\":\"object\"}}],\"tool_choice\":{\"type\":\"any\"},\"output_config\":{\"effort\":"
                        "\"high\",\"format\":{\"type\":\"json_schema\",\"schema\":{\"type\":\"object\"}}},"
                        "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", 200);
    json_decref(m);
    pthread_mutex_lock(&fh->mu);
    CHECK(fh->last_req.tool_choice == SY_TOOL_CHOICE_REQUIRED);
    CHECK(fh->last_req.parallel_tool_calls == 1);
    CHECK(fh->last_kwargs == NULL);
    CHECK(fh->last_req.constraint_kind == SY_CONSTRAINT_JSON_SCHEMA);
    CHECK(json_text_equal(fh->last_req_constraint, "{\"type\":\"object\"}"));
    CHECK(fh->last_req.temperature == 1.0f);
    pthread_mutex_unlock(&fh->mu);
    /* context_management clear_thinking (as Claude Code sends it): keep the last thinking turn */
    m = post_json(port, "{\"model\":\"fake-model\",\"max_tokens\":1,\"context_management\":{\"edits\":[{\"type\":"
                        "\"clear_thinking_20251015\",\"keep\":{\"type\":\"thinking_turns\",\"value\":1}}]},\"messages\":["
                        "{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\","
                        "\"thinking\":\"t1\",\"signature\":\"\"},{\"type\":\"text\",\"text\":\"b\"}]},{\"role\":\"user\","
                        "\"content\":\"c\"},{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\",\"thinking\":\"t2\","
                        "\"signature\":\"\"},{\"type\":\"text\",\"text\":\"d\"}]},{\"role\":\"user\",\"content\":\"e\"}]}",
                  200);
    json_decref(m);
    pthread_mutex_lock(&fh->mu);
    CHECK(json_text_equal(fh->last_messages,
                          "[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"assistant\",\"content\":\"b\"},"
                          "{\"role\":\"user\",\"content\":\"c\"},{\"role\":\"assistant\",\"content\":\"d\","
                          "\"reasoning_content\":\"t2\"},{\"role\":\"user\",\"content\":\"e\"}]"));
    CHECK(json_text_equal(fh->last_kwargs, "{\"clear_thinking\":false}"));
    pthread_mutex_unlock(&fh->mu);
    /* none: the tools still reach the template, the host parses nothing */
    m = post_json(port, "{\"model\":\"fake-model\",\"max_tokens\":1,\"tools\":[{\"name\":\"a\",\"input_schema\":"
                        "{\"type\":\"object\"}}],\"tool_choice\":{\"type\":\"none\"},\"thinking\":{\"type\":"
                        "\"enabled\",\"budget_tokens\":1024},\"messages\":[{\"role\":\"user\",\"content\":\"calltool\"}]}",
                  400);
    json_decref(m); /* budget_tokens 1024 >= max_tokens 1 */
    m = post_json(port, "{\"model\":\"fake-model\",\"max_tokens\":3,\"tools\":[{\"name\":\"a\",\"input_schema\":"
                        "{\"type\":\"object\"}}],\"tool_choice\":{\"type\":\"none\"},"
                        "\"messages\":[{\"role\":\"user\",\"content\":\"calltool\"}]}", 200);
    CHECK_STR(m, "stop_reason", "max_tokens");
    CHECK_STR(m, "content.0.type", "text");
    json_decref(m);
    pthread_mutex_lock(&fh->mu);
    CHECK(fh->last_req.tool_choice == SY_TOOL_CHOICE_NONE);
    CHECK(fh->last_tools != NULL);
    pthread_mutex_unlock(&fh->mu);
}

static void expect_error(int port, const char *path, const char *headers, const char *body, int status,
                         const char *type, const char *needle)
{
    resp r;
    post(port, path, headers, body, &r);
    if (r.status != status)
        fprintf(stderr, "expected %d for %s, got: %s\n", status, body, r.buf);
    CHECK(r.status == status);
    json_t *j = json_loads(r.body, 0, NULL);
    CHECK_STR(j, "type", "error");
    CHECK_STR(j, "error.type", type);
    const char *msg = sget(j, "error.message");
    if (needle) {
        CHECK(msg && strstr(msg, needle));
        if (!msg || !strstr(msg, needle))
            fprintf(stderr, "  expected \"%s\" in the message of %s\n", needle, r.body);
    }
    json_decref(j);
}

static void test_errors(int port)
{
    const char *p = "/v1/messages", *ir = "invalid_request_error";
#define MSGS "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"
    expect_error(port, p, NULL, "{\"messages\": [", 400, ir, "not valid JSON");
    expect_error(port, p, NULL, "{\"model\":\"fake-model\"," MSGS "}", 400, ir, "max_tokens: field required");
    expect_error(port, p, NULL, "{\"model\":\"fake-model\",\"max_tokens\":0," MSGS "}", 400, ir, "max_tokens");
    expect_error(port, p, NULL, "{\"model\":\"fake-model\",\"max_tokens\":4,\"num_draft_tokens\":\"3\"," MSGS "}",
                 400, ir, "num_draft_tokens: expected an integer (0: no drafts; 1..k: at most that many per step), "
                          "found a string");
    expect_error(port, p, NULL, "{\"model\":\"fake-model\",\"max_tokens\":4,\"num_draft_tokens\":2.5," MSGS "}",
                 400, ir, "num_draft_tokens: expected an integer (0: no drafts; 1..k: at most that many per step), "
                          "found a number with a fraction");
    expect_error(port, "/v1/messages/count_tokens", NULL,
                 "{\"model\":\"fake-model\",\"num_draft_tokens\":1," MSGS "}", 400, ir,
                 "num_draft_tokens: count_tokens does not take this field");
    expect_error(port, p, NULL, "{\"model\":\"fake-model\",\"max_tokens\":5,\"frobnicate\":1," MSGS "}", 400, ir,
                 "frobnicate: unknown field");
    expect_error(port, p, NULL, "{\"model\":\"fake-model\",\"max_tokens\":5,\"mcp_servers\":[]," MSGS "}", 400, ir,
                 "mcp_servers: not supported");
    expect_error(port, p, NULL, "{\"model\":\"claude-x\",\"max_tokens\":5," MSGS "}", 404, "not_found_error",
                 "claude-x");
    expect_error(port, p, NULL, "{\"model\":\"fake-model\",\"max_tokens\":5,\"messages\":[{\"role\":\"system\","
                                "\"content\":\"x\"}]}", 400, ir, "messages.0.role");
    expect_error(port, p, NULL, "{\"model\":\"fake-model\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\","
                                "\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"image\",\"source\":{}}]}]}",
                 400, ir, "messages.0.content.1.type: \"image\"");
    expect_error(port, p, NULL, "{\"model\":\"fake-model\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\","
                                "\"content\":\"a\"},{\"role\":\"assistant\",\"content\":\"b\"}]}", 400, ir, "prefill");
    expect_error(port, p, NULL, "{\"model\":\"fake-model\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\","
                                "\"content\":[{\"type\":\"tool_result\",\"content\":\"x\"}]}]}", 400, ir,
                 "messages.0.content.0.tool_use_id");
    expect_error(port, p, NULL, "{\"model\":\"fake-model\",\"max_tokens\":5,\"temperature\":1.5," MSGS "}", 400, ir,
                 "temperature");
    expect_error(port, p, NULL, "{\"model\":\"fake-model\",\"max_tokens\":5,\"tools\":[{\"type\":\"bash_20250124\","
                                "\"name\":\"bash\"}]," MSGS "}", 400, ir, "tools.0.type");
    expect_error(port, p, NULL, "{\"model\":\"fake-model\",\"max_tokens\":5,\"tools\":[{\"name\":\"a\","
                                "\"input_schema\":{}}],\"tool_choice\":{\"type\":\"tool\",\"name\":\"b\"}," MSGS "}",
                 400, ir, "no tool named \"b\"");
    expect_error(port, p, NULL, "{\"model\":\"fake-model\",\"max_tokens\":5,\"tool_choice\":{\"type\":\"any\"}," MSGS
                                "}", 400, ir, "needs \"tools\"");
    expect_error(port, p, NULL, "{\"model\":\"fake-model\",\"max_tokens\":5,\"context_management\":{\"edits\":[{"
                                "\"type\":\"clear_tool_uses_20250919\"}]}," MSGS "}", 400, ir,
                 "context_management.edits.0.type: only clear_thinking");
    expect_error(port, p, NULL, "{\"model\":\"fake-model\",\"max_tokens\":5,\"tools\":[{\"name\":\"a\",\"strict\":true,"
                                "\"input_schema\":{}}]," MSGS "}", 400, ir, "tools.0.strict");
    expect_error(port, p, NULL, "{\"model\":\"fake-model\",\"max_tokens\":5,\"stop_sequences\":[\"\"]," MSGS "}", 400,
                 ir, "stop_sequences.0");
    expect_error(port, "/v1/messages/count_tokens", NULL, "{\"model\":\"fake-model\",\"max_tokens\":5," MSGS "}", 400,
                 ir, "max_tokens: count_tokens does not take");
    expect_error(port, p, NULL, "{\"model\":\"fake-model\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\","
                                "\"content\":\"busy\"}]}", 529, "overloaded_error", "busy");
    expect_error(port, p, NULL, "{\"model\":\"fake-model\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\","
                                "\"content\":\"fail\"}]}", 500, "api_error", "fake engine fault");
    resp r;
    post(port, "/v1/messages/nothing", NULL, "{}", &r);
    CHECK(r.status == 404);
    CHECK_CONTAINS(r.body, "\"type\":\"not_found_error\"");
#undef MSGS
}

/* Splits an SSE body into its events; checks each "event:" names its data's "type". */
static json_t *sse_events(const char *body)
{
    json_t *evs = json_array();
    const char *p = body;
    while (*p) {
        const char *end = strstr(p, "\n\n");
        if (!end)
            break;
        char name[64] = "";
        const char *data = NULL;
        for (const char *line = p; line < end;) {
            const char *nl = memchr(line, '\n', (size_t)(end - line));
            if (!nl)
                nl = end;
            if (strncmp(line, "event: ", 7) == 0)
                snprintf(name, sizeof name, "%.*s", (int)(nl - line - 7), line + 7);
            else if (strncmp(line, "data: ", 6) == 0)
                data = line + 6;
            line = nl + 1;
        }
        json_t *d = data ? json_loadb(data, (size_t)(end - data), 0, NULL) : NULL;
        CHECK(d != NULL);
        CHECK(d && name[0] && sget(d, "type") && strcmp(sget(d, "type"), name) == 0);
        if (d)
            json_array_append_new(evs, d);
        p = end + 2;
    }
    return evs;
}

static void event_names(json_t *evs, char *out, size_t n)
{
    out[0] = '\0';
    for (size_t i = 0; i < json_array_size(evs); i++)
        snprintf(out + strlen(out), n - strlen(out), "%s%s", i ? " " : "",
                 sget(json_array_get(evs, i), "type") ? sget(json_array_get(evs, i), "type") : "?");
}

static void test_stream(int port)
{
    resp r;
    post(port, "/v1/messages", NULL, "{\"model\":\"fake-model\",\"max_tokens\":2,\"stream\":true,\"messages\":"
                                     "[{\"role\":\"user\",\"content\":\"think\"}]}", &r);
    CHECK(r.status == 200);
    CHECK_CONTAINS(r.buf, "Content-Type: text/event-stream");
    CHECK(strstr(r.body, "[DONE]") == NULL);
    json_t *evs = sse_events(r.body);
    char names[1024];
    event_names(evs, names, sizeof names);
    CHECK(strcmp(names, "message_start ping content_block_start content_block_delta content_block_stop "
                        "content_block_start content_block_delta content_block_delta content_block_stop "
                        "message_delta message_stop") == 0);
    if (strncmp(names, "message_start ping", 18) != 0)
        fprintf(stderr, "  events: %s\n", names);
    json_t *start = json_array_get(evs, 0);
    CHECK(strncmp(sget(start, "message.id") ? sget(start, "message.id") : "", "msg_", 4) == 0);
    CHECK(json_array_size(json_object_get(json_object_get(start, "message"), "content")) == 0);
    CHECK(json_is_null(json_object_get(json_object_get(start, "message"), "stop_reason")));
    CHECK(iget(json_object_get(start, "message"), "usage", "input_tokens") == 23);
    CHECK_STR(json_array_get(evs, 2), "content_block.type", "thinking");
    CHECK_STR(json_array_get(evs, 3), "delta.type", "thinking_delta");
    CHECK_STR(json_array_get(evs, 3), "delta.thinking", "pondering");
    CHECK_STR(json_array_get(evs, 5), "content_block.type", "text");
    CHECK(json_integer_value(json_object_get(json_array_get(evs, 5), "index")) == 1);
    CHECK_STR(json_array_get(evs, 6), "delta.type", "text_delta");
    CHECK_STR(json_array_get(evs, 6), "delta.text", "t60 ");
    CHECK_STR(json_array_get(evs, 7), "delta.text", "t117 ");
    json_t *md = json_array_get(evs, 9);
    CHECK_STR(md, "delta.stop_reason", "max_tokens");
    CHECK(iget(md, "usage", "output_tokens") == 2);
    json_decref(evs);

    /* tool use streamed: input_json_delta pieces of the arguments */
    post(port, "/v1/messages", NULL, "{\"model\":\"fake-model\",\"max_tokens\":50,\"stream\":true,\"tools\":[{\"name\":"
                                     "\"get_weather\",\"input_schema\":{\"type\":\"object\"}}],\"messages\":"
                                     "[{\"role\":\"user\",\"content\":\"calltool\"}]}", &r);
    evs = sse_events(r.body);
    event_names(evs, names, sizeof names);
    CHECK(strcmp(names, "message_start ping content_block_start content_block_delta content_block_stop "
                        "content_block_start content_block_delta content_block_delta content_block_stop "
                        "message_delta message_stop") == 0);
    json_t *ts = json_array_get(evs, 5);
    CHECK_STR(ts, "content_block.type", "tool_use");
    CHECK_STR(ts, "content_block.id", "toolu_fake0");
    CHECK_STR(ts, "content_block.name", "get_weather");
    CHECK(json_object_size(json_object_get(json_object_get(ts, "content_block"), "input")) == 0);
    char args[128];
    snprintf(args, sizeof args, "%s%s", sget(json_array_get(evs, 6), "delta.partial_json"),
             sget(json_array_get(evs, 7), "delta.partial_json"));
    CHECK(strcmp(args, "{\"city\": \"Paris\"}") == 0);
    CHECK_STR(json_array_get(evs, 6), "delta.type", "input_json_delta");
    CHECK_STR(json_array_get(evs, 9), "delta.stop_reason", "tool_use");
    json_decref(evs);

    /* two calls (parallel), arguments in 3-byte pieces that split "é": each block's pieces are whole
     * characters and join to its input */
    post(port, "/v1/messages", NULL, "{\"model\":\"fake-model\",\"max_tokens\":500,\"stream\":true,\"tools\":["
                                     "{\"name\":\"a\",\"input_schema\":{\"type\":\"object\",\"properties\":{\"mood\":"
                                     "{\"enum\":[\"caf\u00e9 cr\u00e8me\"]}}}},{\"name\":\"b\",\"input_schema\":{\"type\":"
                                     "\"object\",\"properties\":{\"n\":{\"type\":\"integer\"}}}}],\"messages\":"
                                     "[{\"role\":\"user\",\"content\":\"calltwo\"}]}", &r);
    evs = sse_events(r.body);
    char joined[3][256] = {"", "", ""};
    int starts = 0;
    for (size_t i = 0; i < json_array_size(evs); i++) {
        json_t *e = json_array_get(evs, i);
        size_t idx = (size_t)json_integer_value(json_object_get(e, "index"));
        if (strcmp(sget(e, "type"), "content_block_start") == 0)
            starts++;
        const char *pj = sget(e, "delta.partial_json");
        if (pj && idx < 3)
            snprintf(joined[idx] + strlen(joined[idx]), sizeof joined[idx] - strlen(joined[idx]), "%s", pj);
    }
    CHECK(starts == 3);
    CHECK_STR(json_array_get(evs, 2), "content_block.type", "text");
    CHECK(json_text_equal(joined[1], "{\"mood\":\"caf\u00e9 cr\u00e8me\"}"));
    CHECK(json_text_equal(joined[2], "{\"n\":1}"));
    CHECK_STR(json_array_get(evs, json_array_size(evs) - 2), "delta.stop_reason", "tool_use");
    json_decref(evs);

    /* a stop sequence streamed */
    post(port, "/v1/messages", NULL, "{\"model\":\"fake-model\",\"max_tokens\":9,\"stream\":true,\"stop_sequences\":"
                                     "[\"t115\"],\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", &r);
    evs = sse_events(r.body);
    json_t *last = json_array_get(evs, json_array_size(evs) - 2);
    CHECK_STR(last, "delta.stop_reason", "stop_sequence");
    CHECK_STR(last, "delta.stop_sequence", "t115");
    json_decref(evs);

    /* an error after the stream started: Anthropic's error event */
    post(port, "/v1/messages", NULL, "{\"model\":\"fake-model\",\"max_tokens\":9,\"stream\":true,\"messages\":"
                                     "[{\"role\":\"user\",\"content\":\"fail\"}]}", &r);
    CHECK(r.status == 200);
    evs = sse_events(r.body);
    last = json_array_get(evs, json_array_size(evs) - 1);
    CHECK_STR(last, "type", "error");
    CHECK_STR(last, "error.type", "api_error");
    CHECK_STR(last, "error.message", "fake engine fault");
    json_decref(evs);
}

/* The same stream over HTTP/2 (h2c, curl with prior knowledge). */
static void test_h2(int port)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "curl -sS -N --http2-prior-knowledge -H 'content-type: application/json' -d '{\"model\":\"fake-model\","
             "\"max_tokens\":2,\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}' "
             "http://127.0.0.1:%d/v1/messages 2>&1",
             port);
    FILE *p = popen(cmd, "r");
    CHECK(p != NULL);
    if (!p)
        return;
    static char out[1 << 16];
    size_t len = fread(out, 1, sizeof out - 1, p);
    out[len] = '\0';
    pclose(p);
    json_t *evs = sse_events(out);
    char names[512];
    event_names(evs, names, sizeof names);
    CHECK(strcmp(names, "message_start ping content_block_start content_block_delta content_block_delta "
                        "content_block_stop message_delta message_stop") == 0);
    if (strncmp(names, "message_start", 13) != 0)
        fprintf(stderr, "  h2: %s\n", out);
    json_decref(evs);
}

static void test_count_tokens(int port)
{
    resp r;
    post(port, "/v1/messages/count_tokens", NULL,
         "{\"model\":\"fake-model\",\"system\":\"S\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", &r);
    CHECK(r.status == 200);
    /* "<system>S\n<user>hi\n<assistant>" */
    CHECK(strcmp(r.body, "{\"input_tokens\":30}") == 0);
    if (strcmp(r.body, "{\"input_tokens\":30}") != 0)
        fprintf(stderr, "  count_tokens: %s\n", r.buf);
}

static void test_auth(void)
{
    fake_host fh;
    sy_err err = {{0}};
    const char *kv[] = {"listen=127.0.0.1:0", "api_keys=k1,k2", NULL};
    if (fake_host_start(&fh, kv, &err) != 0 || fh.port <= 0) {
        fprintf(stderr, "auth server: %s\n", err.msg);
        CHECK(0);
        fake_host_stop(&fh);
        return;
    }
    const char *body = "{\"model\":\"fake-model\",\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}";
    resp r;
    post(fh.port, "/v1/messages", "x-api-key: k2\r\n", body, &r);
    CHECK(r.status == 200);
    post(fh.port, "/v1/messages", "Authorization: Bearer k1\r\n", body, &r);
    CHECK(r.status == 200);
    post(fh.port, "/v1/messages", "Authorization: Bearer nope\r\nx-api-key: k1\r\n", body, &r);
    CHECK(r.status == 200); /* either header may carry the key */
    expect_error(fh.port, "/v1/messages", "x-api-key: k3\r\n", body, 401, "authentication_error", NULL);
    expect_error(fh.port, "/v1/messages/count_tokens", NULL, body, 401, "authentication_error", NULL);
    fake_host_stop(&fh);
}

int main(void)
{
    fake_host fh;
    sy_err err = {{0}};
    const char *kv[] = {"listen=127.0.0.1:0", "io_threads=1", NULL};
    if (fake_host_start(&fh, kv, &err) != 0 || fh.port <= 0) {
        fprintf(stderr, "test_anthropic: cannot start the plugin: %s\n", err.msg);
        fake_host_stop(&fh);
        return 1;
    }
    test_whole(fh.port);
    test_conversion(fh.port, &fh);
    test_errors(fh.port);
    test_stream(fh.port);
    test_count_tokens(fh.port);
    test_h2(fh.port);
    fake_host_stop(&fh);
    CHECK(fh.n_active == 0);
    test_auth();
    return sy_test_done("test_anthropic");
}
