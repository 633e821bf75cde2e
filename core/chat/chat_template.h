/* Jinja-subset chat-template interpreter (Hugging Face apply_chat_template
 * semantics: trim_blocks, lstrip_blocks, loopcontrols, transformers' tojson,
 * raise_exception, strftime_now frozen at 2025-01-15 12:00:00).
 * See docs/chat-templates.md for the supported subset. */
#ifndef SY_CHAT_TEMPLATE_H
#define SY_CHAT_TEMPLATE_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "switchyard/plugin.h"

typedef struct sy_chat_template sy_chat_template;

/* Compiles a template. Syntax errors name line:col, what was expected and
 * what was found. Returns 0 or a negative SY_ERR_* code. Never aborts. */
int sy_chat_template_compile(const char *source, size_t len, sy_chat_template **out, sy_err *err);
void sy_chat_template_free(sy_chat_template *t);

/* Renders. messages: JSON array; tools: array or NULL (passed as none);
 * bos/eos: NULL leaves them undefined; kwargs: object of extra variables or
 * NULL. *out is malloc'd, NUL-terminated, *len bytes. raise_exception(msg)
 * yields an error whose message contains msg. The template is not modified
 * (one compiled template may be rendered from several threads). */
int sy_chat_template_render(const sy_chat_template *t, json_t *messages, json_t *tools,
                            int add_generation_prompt, const char *bos_token,
                            const char *eos_token, json_t *kwargs, char **out, size_t *len,
                            sy_err *err);
/* As render, with strftime_now() reading now_unix (UTC seconds) instead of
 * the frozen test clock: what a server uses, so "Today Date" is today. */
int sy_chat_template_render_at(const sy_chat_template *t, json_t *messages, json_t *tools,
                               int add_generation_prompt, const char *bos_token,
                               const char *eos_token, json_t *kwargs, int64_t now_unix, char **out,
                               size_t *len, sy_err *err);
/* The frozen clock of render() (2025-01-15 12:00:00 UTC), as transformers'
 * test oracle uses: rendering is reproducible byte for byte. */
#define SY_CHAT_FROZEN_TIME 1736942400

/* The ChatML template used when a model ships none. */
const char *sy_chat_template_chatml(void);

/* Loads the template source of a model directory: tokenizer_config.json
 * "chat_template" (a string, or a list of {name, template} of which "default"
 * is taken), else chat_template.jinja, else the ChatML default with
 * *is_fallback = 1 (the caller warns once). *source is malloc'd. */
int sy_chat_template_load_source(const char *model_dir, char **source, int *is_fallback,
                                 sy_err *err);
/* load_source + compile. */
int sy_chat_template_load(const char *model_dir, sy_chat_template **out, int *is_fallback,
                          sy_err *err);

#endif
