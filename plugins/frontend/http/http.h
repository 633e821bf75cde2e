/*
 * frontend/http: internal declarations shared by the plugin's files.
 *
 * Threads: each I/O loop (http_loop.c) owns its connections, streams and
 * jobs; nothing of a loop is touched by another thread except its event
 * queue (mutex + eventfd), which the engine thread fills through
 * sy_request.on_event (http_job.c).
 *
 * Layers, bottom up:
 *   http_buf.c     byte buffers
 *   http_loop.c    listener, epoll loop per thread, connection I/O, timeouts
 *   http_tls.c     OpenSSL context, ALPN
 *   http_h1.c      HTTP/1.1 parser and response framing
 *   http_h2.c      HTTP/2 through nghttp2's session API
 *   http_stream.c  protocol-independent response API (respond, SSE)
 *   http_routes.c  routing, auth, the small endpoints, error objects
 *   http_openai.c  OpenAI request parsing into sy_request (with http_openai_fields.c,
 *                  http_openai_chat.c, http_openai_format.c; http_openai.h)
 *   http_job.c     submitted requests: events -> JSON / SSE chunks
 *   http_anthropic.c, http_anthropic_out.c  the Anthropic Messages API
 */
#ifndef SY_FRONTEND_HTTP_H
#define SY_FRONTEND_HTTP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <jansson.h>
#include <nghttp2/nghttp2.h>

#include "switchyard/plugin.h"

#define HTTP_NAME "http"

/* What a JSON value was found to be, for the 400s of both APIs ("expected an integer, found a string"). */
static inline const char *http_json_type(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "a list";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number with a fraction";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

#if defined(__has_include)
#if __has_include(<openssl/ssl.h>)
#define SY_HTTP_TLS 1
#endif
#endif
#ifndef SY_HTTP_TLS
#define SY_HTTP_TLS 0
#endif

/* ------------------------------------------------------------- buffers */

typedef struct hbuf {
    char *p;
    size_t len; /* bytes held, starting at p + off */
    size_t off; /* bytes already consumed at the front */
    size_t cap;
} hbuf;

int hbuf_append(hbuf *b, const void *data, size_t n);
int hbuf_puts(hbuf *b, const char *s);
int hbuf_printf(hbuf *b, const char *fmt, ...) SY__PRINTF(2, 3);
static inline const char *hbuf_data(const hbuf *b) { return b->p ? b->p + b->off : ""; }
void hbuf_consume(hbuf *b, size_t n);
void hbuf_reset(hbuf *b);
void hbuf_free(hbuf *b);

/* ------------------------------------------------------------- config */

typedef struct http_cfg {
    char host[256];
    char port[16];
    char **api_keys;
    size_t n_api_keys;
    char *tls_cert, *tls_key;
    size_t max_body;
    size_t max_header_bytes;
    size_t max_pending_output; /* per response: unsent bytes before a slow reader is dropped */
    int io_threads;
    int header_timeout; /* seconds */
    int idle_timeout;   /* seconds */
    char *model_name;   /* NULL: model_info id */
} http_cfg;

int http_cfg_parse(http_cfg *cfg, const sy_kv *kv, size_t n, sy_err *err);
void http_cfg_free(http_cfg *cfg);
extern const sy_key_decl http_keys[];

/* ------------------------------------------------------------- objects */

typedef struct http_server http_server;
typedef struct http_loop http_loop;
typedef struct http_conn http_conn;
typedef struct http_stream http_stream;
typedef struct http_job http_job;
typedef struct http_evitem http_evitem;

enum { HTTP_PROTO_UNKNOWN = 0, HTTP_PROTO_H1 = 1, HTTP_PROTO_H2 = 2 };

/* One request/response exchange, whatever the protocol. */
struct http_stream {
    http_conn *conn;
    int32_t h2_id;          /* 0 on HTTP/1.1 */
    char method[16];
    char path[512];
    char *authorization;    /* header value or NULL */
    char *x_api_key;        /* x-api-key header (Anthropic clients) or NULL */
    int anthropic_errors;   /* errors in Anthropic's shape ({"type":"error","error":{...}}) */
    char request_id[80];    /* X-Request-Id (echoed) or generated */
    int has_content_length;
    uint64_t content_length;
    int chunked;            /* h1: chunked request body */
    int body_too_large;
    int expect_continue;
    int dispatched;         /* handed to http_route */
    int h1_cstate;          /* h1 chunked body decoder state */
    uint64_t h1_cleft;      /* bytes left in the current chunk */
    hbuf body;
    size_t header_bytes;
    /* response */
    int resp_started;       /* headers went out */
    int resp_ended;         /* the last body byte is queued */
    int resp_chunked;       /* h1: chunked transfer coding */
    int h2_deferred;        /* h2: the data provider returned DEFERRED */
    int retry_after;        /* > 0: Retry-After header on the response */
    hbuf out;               /* h2: body bytes not yet taken by nghttp2 */
    int out_overflow;       /* the client fell max_pending_output behind: output stops */
    int overflow_handled;   /* the overflow was acted on (stream reset / connection closed) */
    http_job *job;          /* a generation attached to this stream */
    http_stream *next;      /* h2: the connection's list */
};

struct http_conn {
    http_loop *loop;
    int fd;
    int proto;
    void *ssl;              /* SSL * when TLS */
    int tls_handshaking;
    hbuf rbuf;
    hbuf wbuf;
    nghttp2_session *h2;
    http_stream *streams;   /* h2: open streams; h1: the current one */
    int want_close;         /* close once wbuf is flushed */
    int closed;
    int h1_keepalive;
    time_t started, last_active, req_started;
    time_t last_write;      /* wbuf last empty or last drained a little */
    http_conn *prev, *next; /* loop's list */
};

struct http_loop {
    http_server *srv;
    int index;
    int epfd;
    int evfd;
    pthread_t thread;
    int running;
    pthread_mutex_t qlock;
    http_evitem *qhead, *qtail; /* guarded by qlock */
    int qsignalled;             /* guarded by qlock: eventfd already written */
    http_conn *conns;
    int live_jobs;              /* jobs with requests still in the engine */
    unsigned long seq;          /* request id generator */
};

struct http_server {
    const sy_host *host;
    const sy_serving_api *api;
    http_cfg cfg;
    int lfd;
    void *ssl_ctx;              /* SSL_CTX * when TLS */
    http_loop *loops;
    int n_loops;
    atomic_int stopping;
    int started;
};

/* http_loop.c */
int http_server_listen(http_server *s, sy_err *err);
int http_loops_start(http_server *s, sy_err *err);
void http_loops_stop(http_server *s);
void http_conn_flush(http_conn *c);     /* moves pending output to the socket */
void http_conn_close(http_conn *c);     /* tears the connection down now */
time_t http_now(void);

/* http_tls.c */
int http_tls_init(http_server *s, sy_err *err);
void http_tls_free(http_server *s);
int http_tls_accept(http_conn *c);      /* sets up the SSL object; -1 on failure */
/* Drives the handshake: 1 done, 0 needs more I/O, -1 failed. */
int http_tls_handshake(http_conn *c);
long http_tls_read(http_conn *c, void *buf, size_t n);   /* >0, 0 eof, -1 again, -2 error */
long http_tls_write(http_conn *c, const void *buf, size_t n);
void http_tls_conn_free(http_conn *c);

/* http_h1.c */
int http_h1_on_read(http_conn *c);      /* parses rbuf; -1: close */
/* Top level only (never under a job or route): retires a finished
 * response and parses the next pipelined request. */
void http_h1_after(http_conn *c);
int http_h1_send_head(http_stream *st, int status, const char *ctype, long long content_length);
int http_h1_send_body(http_stream *st, const char *data, size_t n);
int http_h1_end(http_stream *st);

/* http_h2.c */
int http_h2_init(http_conn *c);
int http_h2_on_read(http_conn *c);      /* feeds rbuf to nghttp2; -1: close */
int http_h2_pump(http_conn *c);         /* moves nghttp2's output to wbuf */
int http_h2_submit(http_stream *st, int status, const char *ctype);
void http_h2_resume(http_stream *st);

/* http_stream.c */
http_stream *http_stream_new(http_conn *c, int32_t h2_id);
void http_stream_free(http_stream *st);  /* detaches its job first */
int http_stream_header(http_stream *st, const char *name, size_t nlen, const char *value, size_t vlen);
void http_respond(http_stream *st, int status, const char *ctype, const char *body, size_t len);
void http_respond_json(http_stream *st, int status, json_t *obj); /* steals obj */
void http_respond_error(http_stream *st, int status, const char *type, const char *param, const char *code,
                        const char *fmt, ...) SY__PRINTF(6, 7);
void http_sse_begin(http_stream *st);
void http_sse_data(http_stream *st, const char *data, size_t len); /* one "data: ...\n\n" event */
void http_sse_end(http_stream *st);
/* "event: NAME\ndata: ...\n\n" (Anthropic's SSE), and the end of such a stream (no [DONE]). */
void http_sse_event(http_stream *st, const char *event, const char *data, size_t len);
void http_sse_close(http_stream *st);
/* Top level only: drops the responses whose reader fell max_pending_output
 * behind (HTTP/2: the stream is reset; HTTP/1.1: the connection closes),
 * cancelling their requests. */
void http_conn_enforce_output_cap(http_conn *c);
const char *http_status_text(int status);

/* http_routes.c */
void http_route(http_stream *st);       /* the request is complete: answer it */

/* The served model's name (model_name, else model_info's id); fills *mi. */
const char *http_model_name(http_server *s, sy_model_info *mi);
/* The field path a host error message starts with ("tools[0].function: ..."), copied to out; NULL if none. */
const char *http_err_param(const char *msg, char *out, size_t cap);
/* Parses a JSON object body; answers 400 and returns NULL when it is not one. */
json_t *http_parse_body(http_stream *st);
/* How an API shapes the errors of a request the host cannot take (OpenAI's
 * and Anthropic's differ in status, type and code; the messages are shared). */
typedef struct http_api_errors {
    const char *not_ready_type, *not_ready_code; /* 503 while loading or draining */
    int busy_status;                             /* queue full: 429, or Anthropic's 529 "overloaded" */
    const char *busy_type, *busy_code;
    const char *server_type; /* any other failure: 500, or 503 when out of memory */
    int invalid_param;       /* a 400's param is the field path the host's message starts with */
} http_api_errors;
/* Loading or draining: a 503 with Retry-After, which clients and load balancers retry. */
void http_respond_not_ready(http_stream *st, const http_api_errors *how);
/* Answers the failure rc (message err) of sy_host_api.submit. */
void http_respond_submit_error(http_stream *st, int rc, const sy_err *err, const http_api_errors *how);
/* The host is ready and the body is a JSON object: returns it; otherwise answers and returns NULL. */
json_t *http_ready_body(http_stream *st, const http_api_errors *how);

/* http_openai.c */
void http_openai_handle(http_stream *st, int chat);

/* http_job.c */
enum { JOB_CHAT = 1, JOB_COMPLETION = 0, JOB_ANTHROPIC = 2 };

typedef struct http_choice {
    http_job *job;
    int index;
    uint64_t rid;
    int submitted;
    int finished;
    int cancelled;
    hbuf text;
    hbuf reasoning;
    json_t *logprobs;       /* accumulated logprob entries (non-stream) */
    size_t text_offset;     /* completions logprobs text_offset */
    char finish_reason[16];
    int prompt_tokens, completion_tokens, cached_tokens;
    int sent_first;         /* stream: role delta sent */
    /* The tool calls so far, OpenAI's shape: [{"id", "type": "function",
     * "function": {"name", "arguments"}}], arguments growing piece by piece
     * (http_choice_tool_piece); NULL until the first call. Filled for
     * streaming and whole answers alike, for every format's use. */
    json_t *tool_calls;
    size_t *tool_sent;      /* per call: bytes of its arguments already handed out (whole UTF-8 characters) */
} http_choice;


struct http_job {
    http_loop *loop;        /* immutable after creation: read by the engine thread */
    http_server *srv;
    http_stream *stream;    /* NULL once the client is gone */
    int kind;               /* JOB_CHAT or JOB_COMPLETION */
    int streaming;
    int include_usage;
    int top_logprobs;       /* -1: no logprobs */
    int n;
    int live;               /* choices whose last event has not arrived */
    int finished_choices;
    int failed;             /* an error was reported */
    int prompt_tokens;
    char id[64];
    char *model;
    int64_t created;
    http_choice *ch;
    struct http_anth *anth; /* JOB_ANTHROPIC: its content blocks (http_anthropic_out.c) */
};

http_job *http_job_new(http_stream *st, int kind, int n);
void http_job_free(http_job *job);
/* The engine-thread callback installed in sy_request.on_event (user = choice). */
void http_job_on_event(void *user, const sy_event *ev);
/* Loop thread: drains the event queue. */
void http_loop_drain_events(http_loop *l);
/* The stream is going away: cancel what is still running. */
void http_job_detach(http_job *job);
/* Cancels every submitted choice (used when a later submit fails). */
void http_job_cancel_all(http_job *job);
/* Adds a piece to ch->tool_calls: a first piece (an id or a name, or an index
 * not seen yet) opens a call, the rest extend its arguments. Returns the
 * call's place in ch->tool_calls, *opened = 1 when this piece opened it;
 * ready, ready_len: the arguments bytes not handed out before that end on
 * a whole UTF-8 character (what a stream sends now; valid until the next
 * piece). -1 when out of memory. */
int http_choice_tool_piece(http_choice *ch, const sy_tool_call_delta *p, int *opened, const char **ready,
                           size_t *ready_len);

/* Constant-time comparison of two byte strings (length leaks only). */
int http_ct_equal(const char *a, size_t alen, const char *b, size_t blen);

/* ------------------------------------------------------------- Anthropic Messages API */

/* http_anthropic.c: POST /v1/messages and /v1/messages/count_tokens. */
void http_anthropic_messages(http_stream *st);
void http_anthropic_count_tokens(http_stream *st);

/* http_anthropic_out.c: a JOB_ANTHROPIC job's events -> content blocks, SSE events or one message. */
typedef struct http_anth http_anth;
http_anth *http_anth_new(const char *const *stops, size_t n_stops, int thinking_omitted);
void http_anthropic_free(http_anth *a);
/* Handles one event of the job's (only) choice; 1: the answer is complete (or failed). */
int http_anthropic_on_event(http_job *job, http_stream *st, const sy_event *ev);
/* Anthropic's error type for an HTTP status ("invalid_request_error", "overloaded_error", ...). */
const char *http_anthropic_error_type(int status);

#endif
