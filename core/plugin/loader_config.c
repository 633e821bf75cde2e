#include "config.h"

#include "plugin/loader_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const sy_key_decl sy_plugins_section_keys[] = {
    {"path", SY_KEY_STRING, "",
     "colon-separated directories searched for plugins, in order, before the install dir; relative ones are "
     "relative to this file's directory",
     1, 0, NULL},
    {NULL, SY_KEY_STRING, NULL, NULL, 1, 0, NULL},
};

int sy_loader_from_config(const sy_config *cfg, const char *extra_dirs, const char *install_dir, sy_loader **out,
                          sy_err *err)
{
    if (!out)
        return sy_err_set(err, SY_ERR_INVALID, "sy_loader_from_config: out is NULL");
    *out = NULL;
    sy_kv *kv = NULL;
    size_t nkv = 0;
    int rc = sy_config_bind(cfg, "plugins", sy_plugins_section_keys, NULL, &kv, &nkv, err);
    if (rc)
        return rc;
    free(kv);
    sy_loader *ld = sy_loader_new(extra_dirs, install_dir);
    if (!ld)
        return sy_err_set(err, SY_ERR_NOMEM, "out of memory");
    const sy_config_entry *e = sy_config_find(cfg, "plugins", "path");
    /* The directory of the file that set path, for relative entries. */
    char base[4096] = "";
    if (e && e->line > 0) {
        const char *slash = strrchr(e->file, '/');
        if (slash)
            snprintf(base, sizeof base, "%.*s", (int)(slash - e->file), e->file);
        if (!base[0] && slash)
            snprintf(base, sizeof base, "/");
    }
    for (const char *p = e ? e->value : ""; *p;) {
        const char *colon = strchr(p, ':');
        size_t len = colon ? (size_t)(colon - p) : strlen(p);
        if (len) {
            char dir[4096];
            int n = (p[0] == '/' || !base[0]) ? snprintf(dir, sizeof dir, "%.*s", (int)len, p)
                                              : snprintf(dir, sizeof dir, "%s/%.*s", base, (int)len, p);
            sy_err why;
            if (n < 0 || (size_t)n >= sizeof dir)
                rc = sy_err_set(err, SY_ERR_INVALID, "[plugins] path: entry too long");
            else if ((rc = sy_loader_add_dir(ld, dir, &why))) {
                if (e->line > 0)
                    sy_err_set(err, rc, "%s, from [plugins] path at %s:%d", why.msg, e->file, e->line);
                else
                    sy_err_set(err, rc, "%s, from --set plugins.path", why.msg);
            }
            if (rc) {
                sy_loader_free(ld);
                return rc;
            }
        }
        p = colon ? colon + 1 : p + len;
    }
    *out = ld;
    return SY_OK;
}
