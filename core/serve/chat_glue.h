/*
 * The serving API's apply_chat_template on top of core/chat: the model's
 * template compiled once at server start, JSON texts from the frontend
 * parsed here, bos/eos token strings from the tokenizer.
 */
#ifndef SY_SERVE_CHAT_GLUE_H
#define SY_SERVE_CHAT_GLUE_H

#include <stddef.h>

#include "chat/chat_template.h"
#include "tokenizer/tokenizer.h"

/* Loads the template of model_dir (ChatML with one warning when it has none). */
int sy_serve_chat_load(const char *model_dir, sy_chat_template **out, sy_err *err);
/* Compiles the template file an operator configured ([model] chat_template). */
int sy_serve_chat_load_file(const char *path, sy_chat_template **out, sy_err *err);

/* Renders; *out is malloc'd. Errors: SY_ERR_INVALID for bad JSON (with line:column) or a template error. */
int sy_serve_chat_render(const sy_chat_template *t, const sy_tokenizer *tok, const char *messages_json,
                         const char *tools_json, int add_generation_prompt, const char *kwargs_json, char **out,
                         size_t *len, sy_err *err);

#endif
