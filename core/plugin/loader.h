/*
 * Finding, loading and instantiating plugins.
 *
 * A file is a plugin because it exports SY_PLUGIN_ENTRY_NAME, never because
 * of its name. Search order: the configured plugin dirs, then the install
 * dir. `auto` probes every candidate of the kind (and device) and takes
 * the best score. Every refusal names the file.
 */
#ifndef SY_LOADER_H
#define SY_LOADER_H

#include <stddef.h>

#include "plugin/config.h"
#include "switchyard/plugin.h"

typedef struct sy_loader sy_loader;

/* A loaded shared object and its descriptor (not yet instantiated). */
typedef struct sy_plugin {
    char path[4096];
    void *dl;
    const sy_plugin_desc *desc;
} sy_plugin;

/* A created instance of a plugin. */
typedef struct sy_plugin_inst {
    sy_plugin *plugin;
    void *inst;
    const void *ops; /* == plugin->desc->ops */
    sy_kv *cfg;      /* the validated keys it was created with */
    size_t n_cfg;
} sy_plugin_inst;

/*
 * dirs: colon-separated extra search dirs (may be NULL), searched before
 * the install dir. install_dir NULL means SY_PLUGIN_INSTALL_DIR.
 */
sy_loader *sy_loader_new(const char *dirs, const char *install_dir);
/* Adds a dir to search (before the install dir, after earlier ones). */
int sy_loader_add_dir(sy_loader *ld, const char *dir, sy_err *err);
void sy_loader_free(sy_loader *ld);

/*
 * Loads and validates one file: the entry symbol exists, the ABI major
 * equals ours and the minor is not newer, struct sizes are sane, the kind
 * is known, required ops are present. Errors name the file.
 */
int sy_plugin_open(const char *path, sy_plugin **out, sy_err *err);
void sy_plugin_close(sy_plugin *p);

/*
 * Resolves `spec` (a plugin name, a path containing '/', or "auto") for a
 * kind. device, when non-NULL, is the device the plugin must run on (a
 * plugin for another device is refused naming its file). For "auto", every
 * candidate's probe runs with host and the best positive score wins; when
 * none can run, err lists each candidate and its reason.
 */
int sy_loader_resolve(sy_loader *ld, sy_plugin_kind kind, const char *spec, const char *device, const sy_host *host,
                      sy_plugin **out, sy_err *err);

/* One plugin `auto` could take, with its probe score (> 0). */
typedef struct sy_plugin_candidate {
    sy_plugin *plugin; /* the caller's: sy_plugin_create takes it (set it to NULL then) */
    int score;
} sy_plugin_candidate;

/*
 * Every plugin `auto` could take for a kind and device (probe score > 0,
 * not shadowed by an earlier file of the same name), best score first; on
 * a tie, the search order, so candidates[0] is what sy_loader_resolve's
 * auto picks. For a caller that falls back to the next when one refuses
 * later (comm setup). *out is malloc'd, free it with
 * sy_loader_candidates_free, which closes the plugins not taken. When none
 * can run: the same error as auto's, listing each plugin and why.
 */
int sy_loader_candidates(sy_loader *ld, sy_plugin_kind kind, const char *device, const sy_host *host,
                         sy_plugin_candidate **out, size_t *n, sy_err *err);
void sy_loader_candidates_free(sy_plugin_candidate *c, size_t n);

/*
 * Creates an instance from the keys of config section `section` (validated
 * against the plugin's declared keys; "plugin" is reserved).
 * Takes ownership of p, success or not: sy_plugin_inst_destroy closes it
 * (resolve again for a second instance). The instance keeps its own copy
 * of its keys, so cfg may be freed once this returns.
 */
int sy_plugin_create(sy_plugin *p, const sy_host *host, const sy_config *cfg, const char *section,
                     sy_plugin_inst **out, sy_err *err);
void sy_plugin_inst_destroy(sy_plugin_inst *pi);

/* Every plugin file found in the search path, for `switchyard plugins`. */
typedef struct sy_plugin_listing {
    char path[4096];
    const sy_plugin_desc *desc; /* NULL when the file was refused */
    char error[512];            /* why refused, when desc == NULL */
    int score;                  /* probe result when desc != NULL */
    char why[512];              /* probe's reason when score == 0 */
} sy_plugin_listing;

/* *out is malloc'd; the listing keeps its plugins open until freed. */
int sy_loader_list(sy_loader *ld, const sy_host *host, sy_plugin_listing **out, size_t *n, sy_err *err);
void sy_loader_list_free(sy_loader *ld, sy_plugin_listing *l, size_t n);

#endif
