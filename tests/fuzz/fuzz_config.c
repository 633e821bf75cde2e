/*
 * Fuzz target: the INI configuration loader (core/plugin/config.c) and what
 * the core does next with a loaded file: list sections, bind each one
 * against a declaration table with every key type (so values go through
 * sy_key_check and unknown keys through the "did you mean" search), and
 * re-apply every entry as a --set assignment.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "plugin/config.h"

static const sy_key_decl decls[] = {
    {"threads", SY_KEY_INT, "0", "worker threads", 0, 1024, NULL},
    {"temperature", SY_KEY_FLOAT, "1.0", "sampling", 0, 2, NULL},
    {"enabled", SY_KEY_BOOL, "true", "on/off", 1, 0, NULL},
    {"mode", SY_KEY_ENUM, "auto", "how", 1, 0, "auto|fast|slow"},
    {"kv_cache", SY_KEY_SIZE, "64M", "memory", 1024, 1e15, NULL},
    {"path", SY_KEY_STRING, NULL, "a required key", 1, 0, NULL},
    {NULL, 0, NULL, NULL, 0, 0, NULL},
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write("switchyard.ini", data, size);
    sy_config *c = NULL;
    sy_err err = {{0}};
    if (sy_config_load(path, &c, &err) != SY_OK) {
        fuzz_note("config: %s", err.msg);
        return 0;
    }
    const char *const *names = NULL;
    size_t n_sections = sy_config_sections(c, &names);
    static const char *const reserved[] = {"plugin", NULL};
    for (size_t i = 0; i < n_sections; i++) {
        sy_kv *kv = NULL;
        size_t n_kv = 0;
        sy_err berr = {{0}};
        if (sy_config_bind(c, names[i], decls, reserved, &kv, &n_kv, &berr) == SY_OK)
            free(kv);
        else
            fuzz_note("config: bind [%s]: %s", names[i], berr.msg);
        const sy_config_entry *const *ents = NULL;
        size_t n = sy_config_section(c, names[i], &ents);
        for (size_t k = 0; k < n; k++) {
            unsigned long long bytes;
            (void)sy_parse_size(ents[k]->value, &bytes);
            if (sy_config_find(c, ents[k]->section, ents[k]->key) != ents[k])
                abort(); /* a key that was loaded must be found again */
        }
    }
    /* --set of every entry into a fresh config must reproduce the values. */
    sy_config *copy = sy_config_new();
    for (size_t i = 0; copy && i < n_sections; i++) {
        const sy_config_entry *const *ents = NULL;
        size_t n = sy_config_section(c, names[i], &ents);
        for (size_t k = 0; k < n; k++) {
            size_t len = strlen(ents[k]->section) + strlen(ents[k]->key) + strlen(ents[k]->value) + 3;
            char *a = malloc(len);
            if (!a)
                continue;
            snprintf(a, len, "%s.%s=%s", ents[k]->section, ents[k]->key, ents[k]->value);
            sy_err serr = {{0}};
            (void)sy_config_set(copy, a, &serr);
            free(a);
        }
    }
    fuzz_note("config: loaded, %zu sections", n_sections);
    sy_config_free(copy);
    sy_config_free(c);
    return 0;
}
