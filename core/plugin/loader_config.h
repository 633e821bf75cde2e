/*
 * The [plugins] section: where plugins are searched. Shared by the engine
 * and the `plugins` command so both search the same directories.
 */
#ifndef SY_LOADER_CONFIG_H
#define SY_LOADER_CONFIG_H

#include "plugin/config.h"
#include "plugin/loader.h"

/* [plugins] keys: path (colon-separated dirs searched before the install dir). */
extern const sy_key_decl sy_plugins_section_keys[];

/*
 * Builds a loader searching, in order: extra_dirs (colon-separated, e.g.
 * from --plugin-dir; may be NULL), [plugins] path (a relative entry is
 * taken relative to the directory of the INI file that set it; from --set,
 * relative to the working directory), then install_dir (NULL: the build's
 * install dir). cfg may be NULL. Errors: unknown [plugins] keys, a listed
 * directory that does not exist (naming where it was set), out of memory.
 */
int sy_loader_from_config(const sy_config *cfg, const char *extra_dirs, const char *install_dir, sy_loader **out,
                          sy_err *err);

/*
 * The directories a loader searches, in order (the install dir last), for
 * the `plugins` command. Returns the count; *dirs points into ld.
 */
size_t sy__loader_dirs(const sy_loader *ld, const char *const **dirs, const char **install_dir);

#endif
