/*
 * The serving API's apply_chat_template on top of core/chat: the model's
 * template compiled once at server start, JSON texts from the frontend
 * parsed and normalised here (the OpenAI wire's shapes into what the
 * template reads), bos/eos token strings from the tokenizer.
 */
#ifndef SY_SERVE_CHAT_GLUE_H
#define SY_SERVE_CHAT_GLUE_H

#include <stdbool.h>
#include <stddef.h>

#include "chat/chat_template.h"
#include "tokenizer/tokenizer.h"

/*
 * What a template's source shows about the messages it takes, so that
 * every frontend's messages are put in the shape the template reads
 * (sy_chat_normalize). Decided once, at load.
 */
typedef struct sy_chat_norm {
    bool keep_developer;   /* it has its own "developer" role (gpt-oss, DeepSeek-V3.2); else developer -> system */
    bool takes_parts;      /* it reads content given as a list of parts; else text parts are joined */
    bool string_arguments; /* it joins arguments to text: objects -> JSON text; else JSON-string arguments -> objects */
    bool null_content;     /* it tells a null content from an empty one; else an assistant's null -> "" */
} sy_chat_norm;

void sy_chat_norm_detect(const char *source, sy_chat_norm *n);
/* Rewrites messages (a JSON array) in place. Errors: SY_ERR_INVALID naming messages[i]... */
int sy_chat_normalize(const sy_chat_norm *n, json_t *messages, sy_err *err);

/* A loaded template with its source (tool-call family detection reads it). */
typedef struct sy_serve_chat {
    sy_chat_template *t;
    char *source;
    sy_chat_norm norm;
} sy_serve_chat;

/* Loads the template of model_dir (ChatML with one warning when it has none). */
int sy_serve_chat_load(const char *model_dir, sy_serve_chat **out, sy_err *err);
/* Compiles the template file an operator configured ([model] chat_template). */
int sy_serve_chat_load_file(const char *path, sy_serve_chat **out, sy_err *err);
void sy_serve_chat_free(sy_serve_chat *c);

/* Normalises and renders; *out is malloc'd. Errors: SY_ERR_INVALID for bad JSON (with line:column),
 * a message the normalisation refuses, or a template error. */
int sy_serve_chat_render(const sy_serve_chat *c, const sy_tokenizer *tok, const char *messages_json,
                         const char *tools_json, int add_generation_prompt, const char *kwargs_json, char **out,
                         size_t *len, sy_err *err);

#endif
