/*
 * Helpers for the model and safetensors tests: checks that count failures,
 * temporary directories, and writers for safetensors files and small
 * synthetic checkpoints (independent of the loader's architecture table).
 */
#ifndef SY_TEST_MODEL_UTIL_H
#define SY_TEST_MODEL_UTIL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

extern int tm_failures;

#define CHECK(cond, ...)                                                                                              \
    do {                                                                                                              \
        if (!(cond)) {                                                                                                \
            tm_failures++;                                                                                            \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                                           \
            fprintf(stderr, __VA_ARGS__);                                                                             \
            fputc('\n', stderr);                                                                                      \
        }                                                                                                             \
    } while (0)

#define CHECK_EQ_INT(a, b) CHECK((long long)(a) == (long long)(b), "%lld != %lld", (long long)(a), (long long)(b))

/* The call failed and its message holds every given substring. */
#define CHECK_ERR(rc, msg, ...) tm_check_err(__FILE__, __LINE__, (rc), (msg), __VA_ARGS__, (const char *)NULL)
void tm_check_err(const char *file, int line, int rc, const char *msg, ...);

/* A fresh directory under $TMPDIR (or /tmp), into out (cap >= 64). */
int tm_mkdtemp(char *out, size_t cap);
/* rm -r. */
void tm_rmtree(const char *path);
int tm_write_file(const char *dir, const char *name, const void *data, size_t len);
int tm_write_text(const char *dir, const char *name, const char *text);
/* Writes cfg (taken: freed here) as <parent>/<name>/config.json; dir gets <parent>/<name>. */
int tm_write_config_dir(const char *parent, const char *name, json_t *cfg, char *dir, size_t cap);
/* A safetensors file from raw parts: hlen_override < 0 writes the real header length. */
int tm_write_st_raw(const char *path, const char *header, long long hlen_override, const void *data, size_t len);

/* Builds a safetensors file tensor by tensor. */
typedef struct tm_st {
    json_t *hdr;
    uint8_t *data;
    size_t len, cap;
} tm_st;
void tm_st_init(tm_st *b);
/* bytes NULL: a pattern (byte i of the data region is i * 7 + 1). */
void tm_st_add(tm_st *b, const char *name, const char *dtype, int ndim, const int64_t *shape, const void *bytes);
int tm_st_write(const tm_st *b, const char *path);
void tm_st_free(tm_st *b);
size_t tm_dtype_size(const char *dtype);

/* A synthetic checkpoint's tensors (config.json is written by the test). */
typedef struct tm_spec {
    const char *family; /* "llama", "mixtral", "qwen3moe" */
    int hidden, layers, heads, kv_heads, head_dim, inter, vocab;
    int experts, moe_inter;
    const uint8_t *moe_layers; /* [layers]; NULL: every layer when experts > 0 */
    bool tied, bias;
    const char *dtype; /* NULL: F32 */
    int shards;        /* > 1: model-0000i-of-0000n.safetensors + index */
    const char *omit;  /* leave this tensor out */
    const char *reshape; /* give this tensor shape reshape_to */
    int64_t reshape_to[2];
    const char *retype; /* give this tensor dtype retype_to */
    const char *retype_to;
} tm_spec;
int tm_write_checkpoint(const char *dir, const tm_spec *s);

#endif
