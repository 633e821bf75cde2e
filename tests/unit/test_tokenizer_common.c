/* Helpers shared by the tokenizer tests. */
#include "config.h"

#include "test_tokenizer_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const char *sy_tt_shared_dir(void)
{
    const char *d = getenv("SY_SHARED_DIR");
    struct stat st;
    if (!d || !*d) {
        fprintf(stderr, "FAIL: SY_SHARED_DIR is not set; it must name the shared test data directory "
                        "(run through make check, or configure --with-shared-dir)\n");
        return NULL;
    }
    if (stat(d, &st) || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "FAIL: SY_SHARED_DIR=%s is not a directory\n", d);
        return NULL;
    }
    return d;
}

json_t *sy_tt_read_json(const char *path)
{
    json_error_t je;
    json_t *j = json_load_file(path, JSON_ALLOW_NUL, &je);
    if (!j)
        fprintf(stderr, "FAIL: %s:%d:%d: %s\n", path, je.line, je.column, je.text);
    return j;
}

json_t *sy_tt_read_jsonl(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "FAIL: cannot open %s\n", path);
        return NULL;
    }
    json_t *arr = json_array();
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int lineno = 0;
    while ((n = getline(&line, &cap, f)) > 0) {
        lineno++;
        if (n == 1 && line[0] == '\n')
            continue;
        json_error_t je;
        json_t *j = json_loadb(line, (size_t)n, JSON_ALLOW_NUL, &je);
        if (!j) {
            fprintf(stderr, "FAIL: %s:%d: %s\n", path, lineno, je.text);
            json_decref(arr);
            arr = NULL;
            break;
        }
        json_array_append_new(arr, j);
    }
    free(line);
    fclose(f);
    return arr;
}

int32_t *sy_tt_ids(const json_t *arr, size_t *n)
{
    if (!json_is_array(arr))
        return NULL;
    *n = json_array_size(arr);
    int32_t *v = malloc((*n + 1) * sizeof *v);
    for (size_t i = 0; v && i < *n; i++)
        v[i] = (int32_t)json_integer_value(json_array_get(arr, i));
    return v;
}

void sy_tt_print_escaped(const char *label, const char *s, size_t n, size_t max)
{
    fprintf(stderr, "%s\"", label);
    for (size_t i = 0; i < n && i < max; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n')
            fputs("\\n", stderr);
        else if (c == '\t')
            fputs("\\t", stderr);
        else if (c == '"' || c == '\\')
            fprintf(stderr, "\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            fprintf(stderr, "\\x%02x", c);
        else
            fputc(c, stderr);
    }
    fprintf(stderr, "\"%s\n", n > max ? "..." : "");
}

void sy_tt_print_ids(const char *label, const int32_t *ids, size_t n)
{
    fprintf(stderr, "%s[", label);
    for (size_t i = 0; i < n && i < 64; i++)
        fprintf(stderr, "%s%d", i ? ", " : "", ids[i]);
    fprintf(stderr, "%s]\n", n > 64 ? ", ..." : "");
}
