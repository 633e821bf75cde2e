/*
 * The INI configuration (parsed with inih). Sections:
 *   [model] [scheduler] [plugins]                 keys owned by the core
 *   [device] [attention] [moe] [comm]             `plugin = NAME|PATH|auto`,
 *   [frontend:NAME] (zero or more)                the rest go to that plugin
 * Every value remembers the file:line it came from (or "--set") so errors
 * can point at it.
 */
#ifndef SY_CONFIG_H
#define SY_CONFIG_H

#include <stddef.h>

#include "switchyard/plugin.h"

typedef struct sy_config sy_config;

typedef struct sy_config_entry {
    const char *section;
    const char *key;
    const char *value;
    const char *file; /* path of the INI file, "--set" or SY_CONFIG_ENV */
    int line;         /* 0 for --set */
} sy_config_entry;

/* An empty configuration (every section absent). */
sy_config *sy_config_new(void);
/*
 * Parses an INI file. Syntax errors, unknown sections and duplicate keys
 * fail with file:line. Keys are not checked against declarations here.
 */
int sy_config_load(const char *path, sy_config **out, sy_err *err);
void sy_config_free(sy_config *c);
/* A deep copy (entries keep their file:line), to change a few keys for a second engine
 * (a speculative draft model). NULL when out of memory. */
sy_config *sy_config_copy(const sy_config *c);

/* Applies "section.key=value" (a --set argument); replaces an existing value. */
int sy_config_set(sy_config *c, const char *assignment, sy_err *err);

/*
 * The environment variable of configuration overrides: white-space separated
 * "section.key=value" assignments that every command applies after its
 * config file and before --model and --set (docs/config.md). make check
 * exports it to pin the tests' numerics (`device.matmul=f32 moe.matmul=f32`).
 * Its entries have file SY_CONFIG_ENV and line 0. A plugin that does not
 * declare one of its keys ignores it (sy_config_bind), so one value serves
 * every device: `device.matmul` means nothing to the cuda plugin.
 */
#define SY_CONFIG_ENV "SWITCHYARD_SET"
/* Applies SY_CONFIG_ENV's assignments to c (none when it is unset or empty); errors name the variable. */
int sy_config_apply_env(sy_config *c, sy_err *err);
/* sy_config_set of sets[0..n) in order ("section.key=value", as --set takes them), so the last word wins; stops at
 * the first bad one with an error that names it ("--set ENTRY: why"). */
int sy_config_set_all(sy_config *c, const char *const *sets, size_t n, sy_err *err);
/* What a program does after its config file: SY_CONFIG_ENV's assignments, then sy_config_set_all(sets). */
int sy_config_apply_overrides(sy_config *c, const char *const *sets, size_t n, sy_err *err);
/* True if e came from SY_CONFIG_ENV. */
int sy_config_entry_from_env(const sy_config_entry *e);

/* The section of a plugin kind: "device", "attention", "moe" or "comm"; NULL for a frontend ([frontend:NAME]). */
const char *sy_kind_config_section(int kind);

/* NULL when absent. */
const sy_config_entry *sy_config_find(const sy_config *c, const char *section, const char *key);
const char *sy_config_get(const sy_config *c, const char *section, const char *key);
/* True if the section appears (with or without keys). */
int sy_config_has_section(const sy_config *c, const char *section);

/* All entries of one section, in file order. Returns the count; *out points into c. */
size_t sy_config_section(const sy_config *c, const char *section, const sy_config_entry *const **out);
/* Names of the sections present, in file order ([frontend:api] -> "frontend:api"). */
size_t sy_config_sections(const sy_config *c, const char *const **out);

/*
 * Validates a section's keys against a declaration table (NULL-terminated)
 * and builds the sy_kv array handed to a plugin: declared keys with their
 * value or default, in declaration order. Keys listed in `reserved` (e.g.
 * "plugin") are skipped. An unknown key, a bad value or a missing required
 * key fails with `"key" <why> in file:line` and the accepted keys.
 * *kv is malloc'd (one block; free() it); strings point into c or decls.
 */
int sy_config_bind(const sy_config *c, const char *section, const sy_key_decl *decls, const char *const *reserved,
                   sy_kv **kv, size_t *n_kv, sy_err *err);

/* Checks one value against a declaration; why gets the reason. */
int sy_key_check(const sy_key_decl *d, const char *value, sy_err *why);

/* Parses SY_KEY_SIZE values ("64M", "2G", "4096"). */
int sy_parse_size(const char *s, unsigned long long *out);

#endif
