/*
 * frontend/http: what the OpenAI request parser's files share. One
 * request is parsed into an oai_req by
 *   http_openai.c         the flow, sampling fields, prompt, submit
 *   http_openai_fields.c  which top-level fields exist (strict table), logit_bias, the accepted-and-ignored ones
 *   http_openai_chat.c    messages, tools, tool_choice
 *   http_openai_format.c  response_format and the other constraint fields -> sy_request.constraint*
 * Every check answers the first error (400, "param" = the JSON path) and
 * sets failed; later checks see failed and do nothing.
 */
#ifndef SY_FRONTEND_HTTP_OPENAI_H
#define SY_FRONTEND_HTTP_OPENAI_H

#include "http.h"

#define OAI_MAX_N 128
#define OAI_MAX_STOP 16
#define OAI_PATH 192 /* room for a JSON path in errors */

typedef struct oai_req {
    http_stream *st;
    json_t *root;
    int chat;
    int failed; /* an error answer went out */
    sy_request req;
    int n;
    int streaming, include_usage;
    int32_t *prompt;
    size_t n_prompt;
    int prompt_alloc_host; /* prompt came from host->alloc */
    const char *stops[OAI_MAX_STOP];
    int32_t *stop_ids;
    int32_t vocab; /* model_info's vocabulary size, 0 when unknown */
    /* owned copies behind sy_request's 1.2 pointers */
    int32_t *bias_ids;
    float *bias;
    char *constraint;
    char *tools_json;
    json_t *tools;   /* the request's tools (borrowed from root), NULL when none */
} oai_req;

/* 400 invalid_request_error naming param; fmt has one %s (arg, or param when arg is NULL). */
void oai_bad(oai_req *r, const char *param, const char *fmt, const char *arg);
/* The same with an error code ("unknown_parameter", "unsupported_parameter"...). */
void oai_bad_code(oai_req *r, const char *param, const char *code, const char *fmt, const char *arg);
/* A JSON path for an error into out (OAI_PATH bytes; a longer one is cut). */
void oai_path(char *out, const char *fmt, ...) SY__PRINTF(2, 3);
/* root[key], with null read as absent. */
json_t *oai_field(oai_req *r, const char *key);
/* Every key of obj (at path, "" for the body) must be in allowed (NULL-terminated): else 400 "unknown field". */
void oai_check_keys(oai_req *r, json_t *obj, const char *path, const char *const *allowed);
/* OpenAI's rule for function and json_schema names: 1-64 of a-z A-Z 0-9 _ -. */
int oai_valid_name(const char *s);

/* http_openai_fields.c: the strict table (unknown and refused fields), the
 * ignored-by-definition fields' shapes, logit_bias. */
void oai_check_fields(oai_req *r);
void oai_parse_logit_bias(oai_req *r);

/* http_openai_chat.c: messages[i] (roles, parts, tool_calls, tool_call_id),
 * tools, tool_choice, parallel_tool_calls -> req.tools_json/tool_choice*. */
void oai_check_messages(oai_req *r, json_t *msgs);
void oai_parse_tools(oai_req *r);

/* http_openai_format.c: response_format, regex, ebnf, structured_outputs,
 * guided_* -> req.constraint_kind/constraint/constraint_path (at most one). */
void oai_parse_constraint(oai_req *r);

#endif
