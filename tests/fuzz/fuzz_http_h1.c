/*
 * Fuzz target: the HTTP/1.1 request parser of the HTTP frontend
 * (plugins/frontend/http/http_h1.c) and everything a parsed request reaches
 * (routing, auth, the small endpoints, the OpenAI handlers, response
 * framing), over one connection of the in-process fake server.
 *
 * The input is the byte stream a client sends. It arrives in pieces, as
 * from a socket: a piece ends after each "\r\n\r\n" and at most every 997
 * bytes, so bodies, pipelined requests and chunk boundaries get split
 * differently as the input changes. After each piece the loop's work runs
 * (parse, flush, engine events), as conn_on_readable does.
 *
 * Oracle beyond the sanitizers: a first request whose framing a proxy in
 * front could read differently (see first_head_is_invalid) must be refused
 * (400, or 505 for a bad version), never answered: that is request smuggling.
 */
#include "config.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fuzz_common.h"
#include "fuzz_http_env.h"

static fuzz_http_env *env; /* libFuzzer gives no context: one server per process */

static void free_env(void) { fuzz_http_env_free(env); }

/* Value of header line [l, e) named name (case-insensitive), trimmed of
 * SP/HTAB; NULL when the line is another header. */
static const uint8_t *header_value(const uint8_t *l, const uint8_t *e, const char *name, const uint8_t **ve)
{
    size_t n = strlen(name);
    if ((size_t)(e - l) <= n || l[n] != ':' || strncasecmp((const char *)l, name, n) != 0)
        return NULL;
    const uint8_t *v = l + n + 1;
    while (v < e && (*v == ' ' || *v == '\t'))
        v++;
    while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
    *ve = e;
    return v;
}

/*
 * 1 when the first head in data is complete and its framing is something a
 * proxy in front could read differently: a bare CR, a bare LF or a NUL;
 * whitespace before a header's colon; a Content-Length that is not 1*DIGIT; a Transfer-Encoding whose last coding
 * is not exactly "chunked"; a first chunk-size that is not 1*HEXDIG.
 */
static int first_head_is_invalid(const uint8_t *data, size_t size)
{
    size_t i = 0;
    while (i + 1 < size && data[i] == '\r' && data[i + 1] == '\n')
        i += 2;
    size_t end = i;
    while (end + 3 < size && memcmp(data + end, "\r\n\r\n", 4) != 0)
        end++;
    if (end + 3 >= size)
        return 0; /* incomplete: no answer is due */
    for (size_t k = i; k < end; k++) {
        if (data[k] == '\0' || (data[k] == '\r' && data[k + 1] != '\n') ||
            (data[k] == '\n' && (k == i || data[k - 1] != '\r')))
            return 1;
    }
    int chunked = 0;
    const uint8_t *l = memchr(data + i, '\n', end - i);
    for (l = l ? l + 1 : data + end; l < data + end;) {
        const uint8_t *e = memchr(l, '\r', (size_t)(data + end - l));
        e = e ? e : data + end;
        const uint8_t *colon = memchr(l, ':', (size_t)(e - l));
        if (colon && colon > l && (colon[-1] == ' ' || colon[-1] == '\t'))
            return 1;
        const uint8_t *v, *ve;
        if ((v = header_value(l, e, "content-length", &ve)) != NULL) {
            if (v == ve)
                return 1;
            for (; v < ve; v++)
                if (*v < '0' || *v > '9')
                    return 1;
        } else if ((v = header_value(l, e, "transfer-encoding", &ve)) != NULL) {
            size_t n = (size_t)(ve - v);
            if (n < 7 || strncasecmp((const char *)ve - 7, "chunked", 7) != 0 ||
                (n > 7 && ve[-8] != ',' && ve[-8] != ' ' && ve[-8] != '\t'))
                return 1;
            chunked = 1;
        }
        l = e + 2;
    }
    const uint8_t *body = data + end + 4;
    if (chunked && body < data + size && !isxdigit(body[0]))
        return 1;
    if (chunked && body + 1 < data + size && body[0] == '0' && (body[1] == 'x' || body[1] == 'X'))
        return 1;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!env) {
        env = fuzz_http_env_new();
        if (!env)
            abort();
        atexit(free_env);
    }
    http_conn *c = fuzz_http_reconnect(env);
    if (!c)
        abort();
    size_t pos = 0;
    while (pos < size && fuzz_http_conn(env) == c) {
        size_t end = pos;
        while (end < size && end - pos < 997) {
            end++;
            if (end - pos >= 4 && memcmp(data + end - 4, "\r\n\r\n", 4) == 0)
                break;
        }
        if (hbuf_append(&c->rbuf, data + pos, end - pos) < 0)
            abort();
        pos = end;
        if (http_h1_on_read(c) < 0)
            c->closed = 1;
        fuzz_http_flush(env);
        if (fuzz_http_conn(env) == c)
            fuzz_http_run_engine(env);
    }
    int status = fuzz_http_first_status(env);
    /* status 0: no answer yet (the input ended inside a chunk-size line). */
    if (status && status < 400 && first_head_is_invalid(data, size)) {
        fprintf(stderr, "fuzz_http_h1: a request with ambiguous framing got status %d, expected a refusal\n", status);
        abort();
    }
    fuzz_http_reset(env);
    return 0;
}
