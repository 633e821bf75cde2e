/*
 * switchyard plugin ABI.
 *
 * The one header a plugin needs. C99, no dependencies beyond the C library.
 * A plugin is a shared object that exports exactly one symbol,
 * SY_PLUGIN_ENTRY (sy_plugin_v1), returning a static descriptor. Plugins
 * never link the core nor each other: everything the host offers comes in
 * the sy_host table handed to probe() and create().
 *
 * Versioning (enforced by the host, not by plugins):
 *   - the ABI major is part of the entry symbol's name; a different major is
 *     refused with a message naming the file, its ABI and the host's;
 *   - plugin minor <= host minor, otherwise refused;
 *   - every struct that crosses the ABI starts with uint32_t struct_size;
 *     a minor release only appends fields, and the reader consults a field
 *     only when struct_size covers it.
 *
 * Ownership: nothing allocated on one side is freed on the other, except
 * through the host's alloc/free services. Errors cross as an sy_status plus
 * a message written into the caller-owned sy_err.
 *
 * Threading: one plugin instance is never called concurrently; different
 * instances may be. host->parallel_for may be called from any op.
 */
#ifndef SWITCHYARD_PLUGIN_H
#define SWITCHYARD_PLUGIN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdarg.h>
#include <string.h>
#include <stdlib.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SY_ABI_MAJOR 1
#define SY_ABI_MINOR 3

#define SY__CAT2(a, b) a##b
#define SY__CAT(a, b) SY__CAT2(a, b)
/* The exported entry point; its name carries the ABI major. */
#define SY_PLUGIN_ENTRY SY__CAT(sy_plugin_v, SY_ABI_MAJOR)
#define SY_PLUGIN_ENTRY_NAME "sy_plugin_v1"

#if defined(__GNUC__) || defined(__clang__)
#define SY_EXPORT __attribute__((visibility("default")))
#else
#define SY_EXPORT
#endif

/* ---------------------------------------------------------------- errors */

typedef enum sy_status {
    SY_OK = 0,
    SY_ERR_INVALID = -1,     /* bad argument or input: the caller's fault */
    SY_ERR_UNSUPPORTED = -2, /* can never work with this plugin/problem */
    SY_ERR_UNAVAILABLE = -3, /* cannot work now (resources, device busy) */
    SY_ERR_NOMEM = -4,       /* host or device memory exhausted */
    SY_ERR_INTERNAL = -5,    /* a bug or a device fault */
    SY_ERR_IO = -6           /* file or network I/O failed */
} sy_status;

/* Caller-owned message buffer. Ops write a one-line reason on failure. */
typedef struct sy_err {
    char msg[512];
} sy_err;

#if defined(__GNUC__) || defined(__clang__)
#define SY__PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define SY__PRINTF(a, b)
#endif

/* Writes a formatted message into err (if non-NULL) and returns code. */
static inline int sy_err_set(sy_err *err, int code, const char *fmt, ...) SY__PRINTF(3, 4);
static inline int sy_err_set(sy_err *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return code;
}

static inline const char *sy_status_str(int code)
{
    switch (code) {
    case SY_OK: return "ok";
    case SY_ERR_INVALID: return "invalid argument";
    case SY_ERR_UNSUPPORTED: return "unsupported";
    case SY_ERR_UNAVAILABLE: return "unavailable";
    case SY_ERR_NOMEM: return "out of memory";
    case SY_ERR_INTERNAL: return "internal error";
    case SY_ERR_IO: return "I/O error";
    default: return "unknown error";
    }
}

/* --------------------------------------------------------------- tensors */

typedef enum sy_dtype {
    SY_DTYPE_F32 = 0,
    SY_DTYPE_F16 = 1,
    SY_DTYPE_BF16 = 2,
    SY_DTYPE_FP8_E4M3 = 3,
    SY_DTYPE_FP4_E2M1 = 4, /* packed two per byte, low nibble first */
    SY_DTYPE_I32 = 5,
    SY_DTYPE_I64 = 6,
    SY_DTYPE_U8 = 7,
    /* ABI 1.1: an OCP MX block scale, 2^(byte - 127) (0xFF: NaN); the
     * scale_dtype of MXFP4 weights (FP4 E2M1 data, blocks of 32). */
    SY_DTYPE_E8M0 = 8,
    SY_DTYPE_COUNT
} sy_dtype;

static inline const char *sy_dtype_name(sy_dtype d)
{
    static const char *const names[] = {"F32", "F16", "BF16", "F8_E4M3", "F4_E2M1", "I32", "I64", "U8", "E8M0"};
    return (unsigned)d < SY_DTYPE_COUNT ? names[d] : "?";
}

/* Bits per element (FP4 is 4). */
static inline int sy_dtype_bits(sy_dtype d)
{
    static const int bits[] = {32, 16, 16, 8, 4, 32, 64, 8, 8};
    return (unsigned)d < SY_DTYPE_COUNT ? bits[d] : 0;
}

#define SY_MAX_DIMS 4

/*
 * A view of memory. Row-major; shape[0] is the outermost dimension.
 * stride[] is in elements; a tensor made by the core is always contiguous
 * (stride[ndim-1] == 1 and each stride the product of the inner shape).
 * device is 0 for host memory; a device plugin may use other values for
 * its own memory. Quantised dtypes carry their scales alongside.
 */
typedef struct sy_tensor {
    void *data;
    sy_dtype dtype;
    int32_t ndim;
    int64_t shape[SY_MAX_DIMS];
    int64_t stride[SY_MAX_DIMS];
    int32_t device;
    /* Quantisation (unused for F32/F16/BF16): scales with one value per
     * scale_block[0] x scale_block[1] block of elements, and a global scale. */
    const void *scale;
    sy_dtype scale_dtype;
    int32_t scale_block[2];
    float global_scale;
    /* Opaque handle for a device plugin's prepared layout; the core never reads it. */
    void *priv;
} sy_tensor;

static inline int64_t sy_tensor_numel(const sy_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->shape[i];
    return n;
}

static inline size_t sy_tensor_nbytes(const sy_tensor *t)
{
    return (size_t)((sy_tensor_numel(t) * sy_dtype_bits(t->dtype) + 7) / 8);
}

/* Fills a contiguous view. */
static inline void sy_tensor_init(sy_tensor *t, void *data, sy_dtype dt, int ndim, const int64_t *shape)
{
    memset(t, 0, sizeof *t);
    t->data = data;
    t->dtype = dt;
    t->ndim = ndim;
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        t->shape[i] = shape[i];
        t->stride[i] = s;
        s *= shape[i];
    }
    t->global_scale = 1.0f;
}

/* Rows x cols helper for the common 2-D case. */
static inline sy_tensor sy_tensor_2d(void *data, sy_dtype dt, int64_t rows, int64_t cols)
{
    sy_tensor t;
    int64_t shape[2] = {rows, cols};
    sy_tensor_init(&t, data, dt, 2, shape);
    return t;
}

/* ------------------------------------------------------- serving (frontends) */

/* Declared before sy_request, whose on_event takes it: a tag first seen in a
 * parameter list would name a different, invisible type. */
struct sy_event;

/*
 * What a frontend submits: token ids (from host->serving->tokenize or
 * apply_chat_template) and the sampling and stopping rules. The host copies
 * everything it needs before submit() returns.
 */
typedef struct sy_request {
    uint32_t struct_size;
    const int32_t *prompt_ids;
    size_t n_prompt;
    int32_t max_tokens;     /* >= 1; the host clamps to the context left */
    int32_t min_tokens;     /* EOS and stop ids are ignored before this many */
    float temperature;      /* 0: greedy */
    float top_p;            /* (0, 1] */
    int32_t top_k;          /* 0: off */
    float min_p;            /* [0, 1) */
    float frequency_penalty; /* [-2, 2] */
    float presence_penalty;  /* [-2, 2] */
    float repetition_penalty; /* > 0; 1: off */
    uint64_t seed;
    int32_t has_seed;       /* 0: the host picks one */
    const int32_t *stop_ids; /* extra ids that end generation */
    size_t n_stop_ids;
    const char *const *stop_strings; /* text that ends generation (not emitted) */
    size_t n_stop_strings;
    int32_t ignore_eos;
    int32_t skip_special;   /* leave special tokens out of the text (default 1) */
    int32_t top_logprobs;   /* -1: no logprobs; 0..20: logprob of the chosen token and this many alternatives */
    int32_t reasoning;      /* 1: text inside <think>...</think> goes to reasoning events */
    /* Called on the engine thread for every event of the request, in order.
     * It must not block: copy what it needs, queue it, wake the I/O thread. */
    void (*on_event)(void *user, const struct sy_event *ev);
    void *user;
    /*
     * Appended in ABI 1.2 (the host reads them only when struct_size covers
     * them; zero means off).
     *
     * logit_bias: added to the model's logits of these token ids before
     * sampling (OpenAI's semantics: each bias in [-100, 100], ids distinct).
     */
    const int32_t *logit_bias_ids;
    const float *logit_bias;
    size_t n_logit_bias;
    /*
     * Constrained decoding (sy_constraint_kind): the output must be a text
     * of the language constraint describes, enforced by token masks. The
     * host compiles it at submit (SY_ERR_INVALID naming the offending
     * keyword, under constraint_path, e.g. "response_format.json_schema.schema").
     * With reasoning on, text inside <think>...</think> stays free and the
     * constraint starts after it.
     */
    int32_t constraint_kind;
    const char *constraint;      /* JSON_SCHEMA: the schema; REGEX: the pattern; CHOICE: a JSON array of strings; GRAMMAR: GBNF */
    const char *constraint_path; /* the request field it came from, for errors (NULL: "constraint") */
    /*
     * Tool calls: tools_json is the request's tools (a JSON array of
     * {"type": "function", "function": {"name", "description", "parameters"}}).
     * When set and tool_choice is not NONE, the host parses the model's
     * output with the model family's tool-call parser: calls arrive as
     * sy_event.tool_calls, their markup never in text, and the request ends
     * with finish_reason "tool_calls". REQUIRED and FUNCTION constrain the
     * output to a well-formed call (of tool_choice_name for FUNCTION) whose
     * arguments validate against the tool's parameters.
     */
    const char *tools_json;
    int32_t tool_choice;          /* sy_tool_choice */
    const char *tool_choice_name; /* FUNCTION: the function's name */
    int32_t parallel_tool_calls;  /* 1: several calls may come in one turn (OpenAI's default) */
    /*
     * Appended in ABI 1.3 (the host reads them only when struct_size covers
     * them). Speculative decoding's drafts per step for this request, when
     * has_num_draft_tokens is 1: 0 = none, 1..k = at most that many, where
     * k is the server's [speculative] num_draft_tokens. Without it the
     * request speculates as the server does. A value outside [0, k], or any
     * value on a server that does not speculate, is SY_ERR_INVALID naming
     * "num_draft_tokens".
     */
    int32_t has_num_draft_tokens;
    int32_t num_draft_tokens;
} sy_request;

typedef enum sy_constraint_kind {
    SY_CONSTRAINT_NONE = 0,
    SY_CONSTRAINT_JSON_OBJECT = 1, /* any JSON object (response_format json_object) */
    SY_CONSTRAINT_JSON_SCHEMA = 2, /* JSON valid against constraint (a JSON schema) */
    SY_CONSTRAINT_REGEX = 3,       /* a full match of constraint */
    SY_CONSTRAINT_CHOICE = 4,      /* exactly one of the strings in constraint (a JSON array) */
    SY_CONSTRAINT_GRAMMAR = 5      /* constraint in GBNF (docs/structured-outputs.md), root rule "root" */
} sy_constraint_kind;

typedef enum sy_tool_choice {
    SY_TOOL_CHOICE_AUTO = 0,     /* the model decides; calls are parsed */
    SY_TOOL_CHOICE_NONE = 1,     /* no parsing: the output is text */
    SY_TOOL_CHOICE_REQUIRED = 2, /* at least one call, constrained */
    SY_TOOL_CHOICE_FUNCTION = 3  /* one call of tool_choice_name, constrained */
} sy_tool_choice;

/* One piece of a tool call (ABI 1.2), in order: a call's first piece has
 * its id and name, later pieces continue its arguments. Concatenating a
 * call's arguments pieces gives a JSON object text. */
typedef struct sy_tool_call_delta {
    int32_t index;          /* the call's place in this request's output, from 0 */
    const char *id;         /* first piece only; NULL otherwise */
    const char *name;       /* first piece only; NULL otherwise */
    const char *arguments;  /* a piece of the arguments text; may be empty */
    size_t arguments_len;
} sy_tool_call_delta;

typedef enum sy_event_type {
    SY_EV_TEXT = 0,  /* new text (and its tokens) */
    SY_EV_DONE = 1,  /* finished; finish_reason and usage are set; last event */
    SY_EV_ERROR = 2  /* failed; error and status are set; last event */
} sy_event_type;

typedef struct sy_event {
    uint32_t struct_size;
    int32_t type;            /* sy_event_type */
    uint64_t request_id;
    const char *text;        /* UTF-8, never half a character; may be empty */
    size_t text_len;
    const char *reasoning;   /* reasoning text (request.reasoning), may be empty */
    size_t reasoning_len;
    const int32_t *tokens;   /* the tokens behind this event */
    const float *logprobs;   /* their log-probabilities (top_logprobs >= 0) */
    size_t n_tokens;
    const int32_t *top_ids;  /* n_tokens x n_top alternatives, row-major */
    const float *top_logprobs;
    int32_t n_top;
    const char *finish_reason; /* DONE: "stop", "length", "tool_calls" ("abort" when cancelled) */
    int32_t prompt_tokens, completion_tokens, cached_tokens;
    const char *error;       /* ERROR: one line */
    int32_t status;          /* ERROR: an HTTP-like status (400, 429, 500, 503) */
    /* Appended in ABI 1.2 (read them only when struct_size covers them):
     * tool-call pieces parsed from this event's output (request.tools_json). */
    const sy_tool_call_delta *tool_calls;
    size_t n_tool_calls;
} sy_event;

typedef struct sy_model_info {
    uint32_t struct_size;
    const char *id;          /* the served model's name */
    int32_t max_seq_len;
    int32_t vocab;
    int64_t created;         /* unix time the model was loaded */
} sy_model_info;

/* Services for frontend plugins, reached through host->serving. */
typedef struct sy_serving_api {
    uint32_t struct_size;
    /* Queues a request; *id names it. SY_ERR_UNAVAILABLE: the waiting queue is
     * full (answer 429); SY_ERR_INVALID: the request is bad (err says which field). */
    int (*submit)(void *ctx, const sy_request *req, uint64_t *id, sy_err *err);
    /* Ends a request early (client gone); its KV blocks are freed within one
     * step and it gets a DONE event with finish_reason "abort". Unknown ids are ignored. */
    void (*cancel)(void *ctx, uint64_t id);
    /* *ids is allocated with host->alloc; free it with host->free. */
    int (*tokenize)(void *ctx, const char *text, size_t len, int add_special, int32_t **ids, size_t *n, sy_err *err);
    int (*detokenize)(void *ctx, const int32_t *ids, size_t n, char **text, size_t *len, sy_err *err);
    /* Renders the model's chat template. messages/tools/kwargs are JSON texts
     * (tools and kwargs may be NULL). *out is allocated with host->alloc. */
    int (*apply_chat_template)(void *ctx, const char *messages_json, const char *tools_json, int add_generation_prompt,
                               const char *kwargs_json, char **out, size_t *len, sy_err *err);
    int (*model_info)(void *ctx, sy_model_info *out);
    /* 1 when ready to serve, 0 while loading or draining. */
    int (*ready)(void *ctx);
    /* Prometheus text exposition; *out allocated with host->alloc. */
    int (*metrics_text)(void *ctx, char **out, size_t *len, sy_err *err);
} sy_serving_api;

/* ------------------------------------------------------------ host table */

typedef enum sy_log_level {
    SY_LOG_ERROR = 0,
    SY_LOG_WARN = 1,
    SY_LOG_INFO = 2,
    SY_LOG_DEBUG = 3
} sy_log_level;

/* Work item for parallel_for: handles [begin, end). worker < n_workers. */
typedef void (*sy_range_fn)(void *arg, int64_t begin, int64_t end, int worker);

/*
 * Services the host offers. The table outlives every plugin instance.
 * ctx is the host's; pass it back as the first argument.
 */
typedef struct sy_host {
    uint32_t struct_size;
    uint16_t abi_major;
    uint16_t abi_minor;
    void *ctx;

    /* msg is one line without a trailing newline; plugin is the caller's name. */
    void (*log)(void *ctx, sy_log_level level, const char *plugin, const char *msg);

    /* Aligned host memory (align a power of two >= sizeof(void*)); NULL on failure. */
    void *(*alloc)(void *ctx, size_t size, size_t align);
    void (*free)(void *ctx, void *ptr);

    /*
     * Splits [0, n) into chunks of at least grain items and runs fn on the
     * host's worker threads (which the cpu device plugin provides); returns
     * when all chunks are done. Never oversubscribes the cores: plugins must
     * not start compute threads of their own.
     */
    void (*parallel_for)(void *ctx, int64_t n, int64_t grain, sy_range_fn fn, void *arg);
    /* Upper bound on the worker index passed to sy_range_fn, plus one. */
    int (*n_workers)(void *ctx);

    /* Adds v to the named counter in the host's metrics (created on first use). */
    void (*metric_add)(void *ctx, const char *name, double v);

    /* Serving services for frontend plugins; NULL when the host serves
     * nothing (generate, benchmarks). */
    const sy_serving_api *serving;

    /*
     * Appended (read it only when struct_size covers it): this process's
     * place among the group's ranks on its node, 0..ranks on the node - 1
     * (0 for one process). `--tp N` forks local ranks 0..N-1, `--nnodes`
     * numbers each node's ranks from 0, mpirun gives its local rank. A
     * plugin that drives one of several accelerators takes it as its
     * default device index, so that N ranks land on N devices.
     */
    int32_t local_rank;
} sy_host;

static inline void sy_logf(const sy_host *h, sy_log_level lvl, const char *plugin, const char *fmt, ...) SY__PRINTF(4, 5);
static inline void sy_logf(const sy_host *h, sy_log_level lvl, const char *plugin, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (h && h->log)
        h->log(h->ctx, lvl, plugin, buf);
}

/* ------------------------------------------------------------ config keys */

typedef enum sy_key_type {
    SY_KEY_STRING = 0,
    SY_KEY_INT = 1,   /* decimal integer within [min, max] */
    SY_KEY_FLOAT = 2, /* within [min, max] */
    SY_KEY_BOOL = 3,  /* true/false/yes/no/on/off/1/0 */
    SY_KEY_ENUM = 4,  /* one of choices, separated by '|' */
    SY_KEY_SIZE = 5   /* bytes with optional K/M/G/T suffix (powers of 1024) */
} sy_key_type;

/* One key a plugin accepts in its INI section. Arrays end with name == NULL. */
typedef struct sy_key_decl {
    const char *name;
    sy_key_type type;
    const char *default_value; /* NULL: required */
    const char *help;
    double min, max;     /* INT/FLOAT/SIZE bounds; ignored when min > max */
    const char *choices; /* ENUM: "a|b|c" */
} sy_key_decl;

/*
 * The validated configuration handed to create(): every declared key is
 * present (defaults filled in), values are as written in the INI file and
 * already checked against their declaration.
 */
typedef struct sy_kv {
    const char *key;
    const char *value;
} sy_kv;

static inline const char *sy_kv_get(const sy_kv *kv, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(kv[i].key, key) == 0)
            return kv[i].value;
    return NULL;
}

static inline long long sy_kv_int(const sy_kv *kv, size_t n, const char *key, long long dflt)
{
    const char *v = sy_kv_get(kv, n, key);
    return v ? strtoll(v, NULL, 10) : dflt;
}

static inline double sy_kv_float(const sy_kv *kv, size_t n, const char *key, double dflt)
{
    const char *v = sy_kv_get(kv, n, key);
    return v ? strtod(v, NULL) : dflt;
}

/* A SY_KEY_SIZE value in bytes: digits and an optional K, M, G or T (powers of 1024), the form the core checked. */
static inline size_t sy_kv_size(const sy_kv *kv, size_t n, const char *key, size_t dflt)
{
    const char *v = sy_kv_get(kv, n, key);
    if (!v)
        return dflt;
    char *end;
    unsigned long long b = strtoull(v, &end, 10);
    switch (*end) {
    case 'K': case 'k': b <<= 10; break;
    case 'M': case 'm': b <<= 20; break;
    case 'G': case 'g': b <<= 30; break;
    case 'T': case 't': b <<= 40; break;
    default: break;
    }
    return (size_t)b;
}

static inline int sy_kv_bool(const sy_kv *kv, size_t n, const char *key, int dflt)
{
    const char *v = sy_kv_get(kv, n, key);
    if (!v)
        return dflt;
    return !(strcmp(v, "false") == 0 || strcmp(v, "no") == 0 || strcmp(v, "off") == 0 || strcmp(v, "0") == 0);
}

/* ------------------------------------------------------------ descriptor */

typedef enum sy_plugin_kind {
    SY_KIND_DEVICE = 1,
    SY_KIND_ATTN = 2,
    SY_KIND_MOE = 3,
    SY_KIND_COMM = 4,
    SY_KIND_FRONTEND = 5
} sy_plugin_kind;

static inline const char *sy_kind_name(int k)
{
    switch (k) {
    case SY_KIND_DEVICE: return "device";
    case SY_KIND_ATTN: return "attn";
    case SY_KIND_MOE: return "moe";
    case SY_KIND_COMM: return "comm";
    case SY_KIND_FRONTEND: return "frontend";
    default: return "?";
    }
}

typedef struct sy_plugin_desc {
    uint32_t struct_size;
    uint16_t abi_major; /* SY_ABI_MAJOR the plugin was built against */
    uint16_t abi_minor; /* SY_ABI_MINOR the plugin was built against */
    int32_t kind;       /* sy_plugin_kind */
    const char *name;   /* e.g. "cpu", "cuda-sm120" */
    const char *version;
    const char *device; /* which device plugin's memory it works on: "cpu", "cuda" */
    const char *description;
    const sy_key_decl *keys; /* terminated by name == NULL; may be NULL */

    /*
     * > 0: can run here, higher is better (auto takes the highest).
     * 0: cannot run here; why holds the reason.
     * Must be cheap and side-effect free; never initialises a device.
     */
    int (*probe)(const sy_host *host, sy_err *why);

    /* Makes an instance from the validated keys of the plugin's section. */
    int (*create)(const sy_host *host, const sy_kv *cfg, size_t n_cfg, void **inst, sy_err *err);
    void (*destroy)(void *inst);

    /* The kind's operation table: sy_device_ops, sy_attn_ops, ... */
    const void *ops;

    /* Optional extras by name (ggml's get_proc_address); NULL if unknown. */
    void *(*get_proc)(const char *name);
} sy_plugin_desc;

typedef const sy_plugin_desc *(*sy_plugin_entry_fn)(void);

/* ------------------------------------------------------------ device ops */

/*
 * Rotary embedding: for each row (token) and head, the pairs of the first
 * rotary_dim elements of each head are rotated by pos * inv_freq[i].
 * neox = 1 pairs (i, i + rotary_dim/2) (Hugging Face rotate_half);
 * neox = 0 pairs (2i, 2i + 1) (GPT-J interleaved).
 */
typedef struct sy_rope_params {
    uint32_t struct_size;
    int32_t head_dim;
    int32_t rotary_dim;
    int32_t neox;
    const float *inv_freq; /* rotary_dim / 2 values, host memory */
    float mscale;          /* multiplies cos and sin (YaRN); 1 otherwise */
} sy_rope_params;

/*
 * One row of the device sample op: the request's sampling parameters and
 * the uniform the host drew from the request's own random state, so the
 * state advances the same wherever the row is sampled.
 */
typedef struct sy_sample_row {
    uint32_t struct_size;
    float temperature; /* <= 0: the greedy pick */
    float top_p;       /* (0, 1]; 1: off */
    float min_p;       /* [0, 1); 0: off */
    int32_t top_k;     /* 0: off */
    double u;          /* in [0, 1) */
} sy_sample_row;

/*
 * Glue ops between blocks. Activations are F32 in the device's memory.
 * Weights come from prepare_weight. Shapes: x [n, k], w [m, k], out [n, m].
 * Every op returns sy_status and writes err on failure.
 */
typedef struct sy_device_ops {
    uint32_t struct_size;

    /* Memory: fills t->data for t's dtype/shape. */
    int (*alloc)(void *inst, sy_tensor *t, sy_err *err);
    void (*free)(void *inst, sy_tensor *t);
    int (*upload)(void *inst, sy_tensor *dst, const void *src, size_t bytes, sy_err *err);
    int (*download)(void *inst, void *dst, const sy_tensor *src, size_t bytes, sy_err *err);

    /*
     * Makes a weight usable by this device from a host view (which stays
     * valid, mmap'd, for the plugin's lifetime). May return the same view,
     * a repacked copy or an upload. name is the checkpoint's tensor name.
     */
    int (*prepare_weight)(void *inst, const char *name, const sy_tensor *host, sy_tensor *out, sy_err *err);
    void (*release_weight)(void *inst, sy_tensor *w);

    /* out[i] = table[ids[i]] widened to F32; ids in host memory. */
    int (*embed)(void *inst, const sy_tensor *table, const int32_t *ids, int64_t n, sy_tensor *out, sy_err *err);
    /* out = x / rms(x) * w, rows of x normalised independently; out may alias x. */
    int (*rmsnorm)(void *inst, const sy_tensor *x, const sy_tensor *w, float eps, sy_tensor *out, sy_err *err);
    /* residual += x; out = rmsnorm(residual) * w. */
    int (*add_rmsnorm)(void *inst, sy_tensor *residual, const sy_tensor *x, const sy_tensor *w, float eps,
                       sy_tensor *out, sy_err *err);
    /* out[n, m] = x[n, k] . w[m, k]^T (+ bias[m] when bias != NULL). */
    int (*linear)(void *inst, const sy_tensor *x, const sy_tensor *w, const sy_tensor *bias, sy_tensor *out,
                  sy_err *err);
    /* In place on x [n, heads * head_dim]; pos[n] in host memory. */
    int (*rope)(void *inst, sy_tensor *x, const int32_t *pos, const sy_rope_params *p, sy_err *err);
    /* out = silu(gate) * up, elementwise. */
    int (*silu_mul)(void *inst, const sy_tensor *gate, const sy_tensor *up, sy_tensor *out, sy_err *err);
    /* acc += x. */
    int (*add)(void *inst, sy_tensor *acc, const sy_tensor *x, sy_err *err);
    /* Waits for queued work. */
    int (*synchronize)(void *inst, sy_err *err);
    /*
     * Optional (appended in ABI 1.0's device table; a caller checks that
     * struct_size covers it, and that it is non-NULL, before calling it,
     * else calls linear once per part). n (1..8) linears of the same x as
     * one op: out[i][n, m_i] = x[n, k] . w[i][m_i, k]^T (+ bias[i] when
     * bias and bias[i] are non-NULL), each out[i] its own tensor. Results
     * must equal n separate linear calls; the op only saves the per-op
     * overheads (one pass of the device's workers; the core uses it for
     * q/k/v and gate/up).
     */
    int (*linear_multi)(void *inst, const sy_tensor *x, int32_t n, const sy_tensor *const *w,
                        const sy_tensor *const *bias, sy_tensor *const *out, sy_err *err);
    /*
     * Optional (appended after linear_multi; the same struct_size and
     * non-NULL check), else the core downloads the logits and picks on the
     * host. The greedy pick of each row of x [n, V] F32 (device memory,
     * rows of contiguous elements): ids_out[i] is the column the loop
     *     best = 0; for (j = 1; j < V; j++) if (x[j] > x[best]) best = j;
     * ends on, i.e. the lowest column among the largest values, -0 equal
     * to +0, NaN never larger than anything, and so a NaN at column 0 is
     * picked (the host sampler's greedy rule). vals_out[i] = x[i][ids_out[i]]
     * (vals_out may be NULL). Both are host arrays of n, filled when the
     * call returns (it waits for queued work). The core calls it on the
     * logits rows of greedy requests instead of copying V floats per row.
     */
    int (*argmax)(void *inst, const sy_tensor *x, int32_t *ids_out, float *vals_out, sy_err *err);
    /*
     * Optional (appended after argmax; the same struct_size and non-NULL
     * check), else the core downloads the rows and samples on the host.
     * The host sampler's draw for each row of x [n, V] F32 (device memory)
     * with the parameters and the uniform u of rows[i] (a host array of n;
     * read row i at (const char *)rows + i * rows[0].struct_size, so rows
     * written by a newer host still index right). The rule, which
     * plugins/common/cpu/syksample.h states as code: temperature <= 0 is
     * argmax's pick; else p = softmax(x / temperature) (expf of (x - max) *
     * (1 / temperature), the sum in double), keep p >= min_p * p_max and
     * p > 0; when top_k cuts or top_p < 1, past 1024 kept ones keep only
     * p >= 1e-6 (unless that leaves none or fewer than top_k), sort by p
     * descending, ties by id ascending, keep top_k, then the shortest prefix
     * whose double sum reaches top_p; finally the first kept id whose running
     * double sum of p exceeds u * (their total). ids_out (host, n) is
     * filled when the call returns. A device that cannot finish a row (too
     * many candidates to sort on chip) writes -1 for it: the core then
     * downloads that row and samples it on the host with the same u.
     */
    int (*sample)(void *inst, const sy_tensor *x, const sy_sample_row *rows, int32_t *ids_out, sy_err *err);
    /*
     * Optional, appended after sample (the same struct_size and non-NULL
     * check; all six or none): replaying a recorded decode step (CUDA
     * graphs). The core uses them only when the device's section says
     * `graphs = on` (a key the plugin declares).
     *
     * host_alloc/host_free: host memory the device reads while replaying a
     * recording (pinned). The core keeps the step's host arrays (ids, pos,
     * sel_rows and the attention batch's tables) there and refills them
     * before a replay: a recorded op given one of them must copy from that
     * very address at each replay. Without them the core uses malloc.
     *
     * graph_begin: from now on this thread's ops are recorded, not run (the
     * core then calls every op of the step exactly as it would to run it).
     * An op that cannot be recorded (one that waits for the device, grows a
     * buffer, reads back to the host) fails with a message naming itself.
     * graph_end: stops recording; on success *graph is a replayable step;
     * on failure (an op failed since begin, or the device refuses the
     * recording) it has ended the recording, freed what it made, and
     * returns the error. graph_launch queues one replay (it does not wait);
     * graph_free releases a graph. The host arrays given to recorded ops,
     * device buffers and weights must stay where they are until then.
     */
    void *(*host_alloc)(void *inst, size_t bytes, sy_err *err);
    void (*host_free)(void *inst, void *p);
    int (*graph_begin)(void *inst, sy_err *err);
    int (*graph_end)(void *inst, void **graph, sy_err *err);
    int (*graph_launch)(void *inst, void *graph, sy_err *err);
    void (*graph_free)(void *inst, void *graph);
} sy_device_ops;

/*
 * Optional device extra, looked up with get_proc("parallel_for"): the
 * device's worker pool, which the host then offers to every plugin as
 * host->parallel_for.
 */
typedef void (*sy_device_parallel_for_fn)(void *inst, int64_t n, int64_t grain, sy_range_fn fn, void *arg);
typedef int (*sy_device_n_workers_fn)(void *inst);
/*
 * Optional device extra get_proc("matmul_peak"): the hardware's peak GFLOP/s
 * of the instance's matmul path for weights of wdtype, over all its workers
 * (0: unknown), for benchmarks to print achieved against it (cpu measures
 * one core's FMA rate rather than trust a nominal clock); path (may be NULL)
 * receives the path's name, e.g. "amx-bf16". A moe plugin may offer the
 * same get_proc with this signature on its own instance (its expert GEMMs).
 */
typedef double (*sy_device_matmul_peak_fn)(void *inst, sy_dtype wdtype, char *path, size_t path_len);

/* -------------------------------------------------------------- attn ops */

typedef struct sy_attn_problem {
    uint32_t struct_size;
    int32_t n_layers;
    int32_t n_heads;
    int32_t n_kv_heads;
    int32_t head_dim;   /* of q and k */
    int32_t v_head_dim; /* of v and the output */
    int32_t block_size; /* tokens per KV block */
    int32_t n_blocks;   /* KV blocks per layer */
    sy_dtype kv_dtype;
    float scale; /* softmax scale, usually 1/sqrt(head_dim) */
    int32_t sliding_window; /* 0: none */
    /*
     * Appended in ABI 1.1 (read them only when struct_size covers them;
     * NULL: absent). Host memory, valid for the instance's life.
     * layer_window [n_layers]: the sliding window of each layer (0: full
     * attention there), overriding sliding_window when non-NULL (gpt-oss
     * alternates sliding and full layers; Qwen2 windows only some). A query
     * at position p sees positions max(0, p - w + 1) .. p.
     * sinks [n_layers * n_heads]: learned attention-sink logits per layer
     * and query head (gpt-oss): one more term exp(sink - m) in each row's
     * softmax denominator, with no value (the row's weights sum to less
     * than 1). A plugin that cannot honour a non-NULL field refuses it in
     * supports(); the host refuses plugins built against ABI 1.0 for
     * models that need either.
     */
    const int32_t *layer_window;
    const float *sinks;
} sy_attn_problem;

/*
 * One engine step. Sequence s owns rows [tok_start[s], tok_start[s+1]) of
 * q/k/v; they sit at positions ctx_len[s] .. ctx_len[s] + len - 1, after
 * the ctx_len[s] tokens already in its KV blocks. block_table holds
 * max_blocks entries per sequence (row-major), enough for the new tokens.
 * All arrays in host memory.
 */
typedef struct sy_attn_batch {
    uint32_t struct_size;
    int32_t n_seqs;
    int32_t n_tokens;
    const int32_t *tok_start;
    const int32_t *ctx_len;
    const int32_t *block_table;
    int32_t max_blocks;
    /*
     * Appended (read it only when struct_size covers it). 0: a plain step.
     * > 0: a step of a shape the core records (the device's graph_begin)
     * and replays: the run just before its recording (which must grow
     * every buffer the recording needs), the recorded forward itself, and
     * stage. Every sequence's ctx_len + its tokens stays <= ctx_bound in
     * all of them, so launch sizes (split-K counts) must come from
     * ctx_bound, never from this step's lengths; the forward of layer 0
     * must copy the tables to the device itself (from memory the device
     * reads at replay, pinned), and later forwards of the step may rely
     * on that copy. The core waits for such a step before the next one.
     */
    int32_t ctx_bound;
} sy_attn_batch;

typedef struct sy_attn_ops {
    uint32_t struct_size;
    /* 1 if the instance can serve the problem; else 0 with the reason. */
    int (*supports)(void *inst, const sy_attn_problem *p, sy_err *why);
    /* Allocates the paged KV cache for the problem. */
    int (*prepare)(void *inst, const sy_attn_problem *p, sy_err *err);
    /*
     * Writes k/v rows into the cache, then causal attention of each q row
     * over its sequence's positions 0..pos. q [n_tokens, n_heads*head_dim],
     * k/v [n_tokens, n_kv_heads*head_dim], out [n_tokens, n_heads*v_head_dim].
     */
    int (*forward)(void *inst, int32_t layer, const sy_attn_batch *b, const sy_tensor *q, const sy_tensor *k,
                   const sy_tensor *v, sy_tensor *out, sy_err *err);
    /* Copies whole blocks (copy-on-write for shared prefixes); pairs src[i] -> dst[i]. */
    int (*copy_blocks)(void *inst, const int32_t *src, const int32_t *dst, int32_t n, sy_err *err);
    /*
     * Optional (appended; struct_size and non-NULL check; without it the
     * core never records a step). Before a replay of a recorded step (see
     * sy_attn_batch.ctx_bound), writes this step's tables where the
     * recorded forward reads them. b has the recorded step's n_seqs,
     * n_tokens, max_blocks and ctx_bound; its arrays hold this step's values.
     */
    int (*stage)(void *inst, const sy_attn_batch *b, sy_err *err);
} sy_attn_ops;

/* --------------------------------------------------------------- moe ops */

typedef enum sy_moe_scoring {
    SY_MOE_SOFTMAX = 0,
    SY_MOE_SIGMOID = 1
} sy_moe_scoring;

typedef struct sy_moe_problem {
    uint32_t struct_size;
    int32_t n_layers;
    int32_t n_experts;
    int32_t top_k;
    int32_t hidden;
    int32_t inter; /* expert intermediate size */
    int32_t scoring; /* sy_moe_scoring */
    int32_t norm_topk_prob; /* renormalise the top-k weights to sum 1 */
    float routed_scaling_factor; /* 1 when unused */
    int32_t n_group;    /* grouped top-k; 0 or 1: none */
    int32_t topk_group;
    sy_dtype weight_dtype;
    /*
     * Appended in ABI 1.1 (read them only when struct_size covers them).
     * activation (sy_moe_activation): SILU is silu(g) * u. SWIGLU_CLAMP is
     * gpt-oss's: g = min(g, limit), u = clamp(u, -limit, limit),
     * (u + 1) * g * sigmoid(alpha * g). has_bias: the experts' gate, up and
     * down projections have biases, handed over by prepare_layer_bias.
     */
    int32_t activation;
    float swiglu_alpha;
    float swiglu_limit;
    int32_t has_bias;
} sy_moe_problem;

typedef enum sy_moe_activation {
    SY_MOE_ACT_SILU = 0,
    SY_MOE_ACT_SWIGLU_CLAMP = 1
} sy_moe_activation;

typedef struct sy_moe_ops {
    uint32_t struct_size;
    int (*supports)(void *inst, const sy_moe_problem *p, sy_err *why);
    int (*prepare)(void *inst, const sy_moe_problem *p, sy_err *err);
    /*
     * Hands over one layer's experts: gate/up [inter, hidden], down
     * [hidden, inter], arrays of n_experts host views (mmap'd, valid for the
     * instance's life). score_bias [n_experts] or NULL (sigmoid routing's
     * e_score_correction_bias, used for selection only).
     */
    int (*prepare_layer)(void *inst, int32_t layer, const sy_tensor *gate, const sy_tensor *up,
                         const sy_tensor *down, const sy_tensor *score_bias, sy_err *err);
    /*
     * out [n, hidden] = sum over the selected experts e of
     * w_e * down_e(silu(gate_e x) * up_e x); router_logits [n, n_experts].
     */
    int (*forward)(void *inst, int32_t layer, const sy_tensor *x, const sy_tensor *router_logits, sy_tensor *out,
                   sy_err *err);
    /*
     * Optional (expert parallelism; the host calls it only when struct_size
     * covers it and it is non-NULL, and otherwise refuses expert parallel):
     * this instance holds only experts [first, first + count) of the
     * problem's n_experts. Called after prepare, before prepare_layer, which
     * then gets arrays of `count` views (index i is expert first + i;
     * score_bias stays [n_experts]). forward still takes router_logits
     * [n, n_experts] and selects among all experts exactly as without it, then
     * sums only the selected experts it holds: out is this rank's partial sum
     * (zero for a token none of whose experts are here), which the host
     * allreduces. prepare resets the range to all experts.
     */
    int (*set_expert_range)(void *inst, int32_t first, int32_t count, sy_err *err);
    /*
     * Appended in ABI 1.1; required when the problem's has_bias is set (the
     * host refuses a plugin without it). After prepare_layer of the same
     * layer: arrays of one view per expert prepare_layer had (n_experts, or
     * the range's count), gate_bias and up_bias [inter], down_bias [hidden]
     * (down_bias may be NULL: with tensor parallelism only rank 0 adds it).
     * Host views, valid for the instance's life. Each is added to its
     * projection's output before the activation (gate, up) or the routing
     * weight (down).
     */
    int (*prepare_layer_bias)(void *inst, int32_t layer, const sy_tensor *gate_bias, const sy_tensor *up_bias,
                              const sy_tensor *down_bias, sy_err *err);
} sy_moe_ops;

/* -------------------------------------------------------------- comm ops */

typedef struct sy_comm_ops {
    uint32_t struct_size;
    int (*rank)(void *inst);
    int (*size)(void *inst);
    /* In-place sum over all ranks of an F32 tensor. */
    int (*allreduce_sum)(void *inst, sy_tensor *t, sy_err *err);
    /* out = concat over ranks of in (along dim 0). */
    int (*allgather)(void *inst, const sy_tensor *in, sy_tensor *out, sy_err *err);
    int (*broadcast)(void *inst, void *buf, size_t bytes, int root, sy_err *err);
    int (*barrier)(void *inst, sy_err *err);
    /*
     * Optional (appended in ABI 1.0's comm table; a caller checks that
     * struct_size covers it, and that it is non-NULL, before calling it).
     * Joins the group: this process is `rank` of `world_size`. rendezvous is
     * an opaque string the launcher gives every rank of one run, unique per
     * run (a shared-memory name, "host:port", ...). rank < 0 or
     * world_size <= 0 asks the plugin to take them from its launcher where it
     * has one (mpi); otherwise a plugin that knows them checks they agree.
     * timeout_s (> 0) bounds the rendezvous and every collective afterwards:
     * a dead or stuck peer makes the op fail with SY_ERR_UNAVAILABLE and a
     * message naming the rank, never hang (<= 0: no time limit, dead peers
     * are still detected where the transport can tell). Called once, before
     * any collective; after a failed collective the instance only reports
     * errors, destroy it.
     * A refusal with SY_ERR_UNAVAILABLE (this transport cannot link these
     * ranks: no peer access, too slow, a peer gave up) or
     * SY_ERR_UNSUPPORTED, with the reason, must be seen by every rank, so
     * that [comm] plugin = auto can fall back: each rank then destroys the
     * instance and runs the next plugin's setup, and a rank that returned
     * SY_OK while a peer refused would wait for it until the timeout. A
     * check only one rank can make must reach the others before setup
     * returns (cuda-p2p fails its shared segment, so every peer fails its
     * next barrier). Any other code is an error that ends the run even
     * under auto. For the same reason a comm plugin's probe must answer
     * alike on every rank of a node (not by host->local_rank): under auto
     * each rank walks its own list of candidates, and ranks whose lists
     * differ would meet at different rendezvous and wait out the timeout.
     */
    int (*setup)(void *inst, int rank, int world_size, const char *rendezvous, double timeout_s, sy_err *err);
} sy_comm_ops;

/* ---------------------------------------------------------- frontend ops */

typedef struct sy_frontend_ops {
    uint32_t struct_size;
    /* Starts serving (own I/O threads); returns once listening. */
    int (*start)(void *inst, sy_err *err);
    /* Stops accepting, drains, joins threads. */
    void (*stop)(void *inst);
} sy_frontend_ops;

#ifdef __cplusplus
}
#endif

#endif /* SWITCHYARD_PLUGIN_H */
