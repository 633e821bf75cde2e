/*
 * Private to core/plugin (and the `plugins` command): what config.c offers
 * the loader beyond the public config.h, and the section <-> plugin kind map.
 */
#ifndef SY_CONFIG_INTERNAL_H
#define SY_CONFIG_INTERNAL_H

#include <stddef.h>

#include "plugin/config.h"

/*
 * sy_config_bind with a name for the owner of the keys, used in the
 * unknown-key message: "plugin cpu (/x/attn-cpu.so) accepts: ...". owner
 * NULL gives "[section] accepts: ...". c may be NULL (an empty config).
 */
int sy__config_bind(const sy_config *c, const char *section, const sy_key_decl *decls, const char *const *reserved,
                    const char *owner, sy_kv **kv, size_t *n_kv, sy_err *err);

/*
 * Checks a plugin's key table: terminated within max entries, known types,
 * ENUM choices present, defaults that pass their own check, no key named
 * in reserved. why gets `key "x": ...`.
 */
int sy__decls_validate(const sy_key_decl *decls, size_t max, const char *const *reserved, sy_err *why);

/* Levenshtein distance, capped at cap + 1 (for "did you mean"). */
int sy__edit_distance(const char *a, const char *b, int cap);

/* Path of the file the config was loaded from; NULL for sy_config_new(). */
const char *sy__config_path(const sy_config *c);

/*
 * The plugin kind a section selects: [device] device, [attention] attn,
 * [moe] moe, [comm] comm, [frontend:NAME] frontend; 0 for the core's own
 * sections and unknown names.
 */
int sy_section_kind(const char *section);
/* "[attention]" for attn, "[frontend:NAME]" for frontend, for messages. */
const char *sy_kind_section(int kind);

#endif
