/*
 * safetensors reader: one file or a sharded set (model.safetensors.index.json),
 * each file mmap'd read-only. Tensor views point into the mappings.
 */
#ifndef SY_SAFETENSORS_H
#define SY_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "switchyard/plugin.h"

typedef struct sy_safetensors sy_safetensors;

typedef struct sy_st_entry {
    const char *name;
    sy_tensor view; /* data points into the mapping; contiguous */
    uint64_t nbytes;
    int file; /* index of the shard */
} sy_st_entry;

/*
 * Opens <dir>/model.safetensors.index.json if present (and every shard it
 * names), else the single *.safetensors file in dir. Validates headers:
 * JSON well-formed, dtype known, offsets inside the file and consistent
 * with shape and dtype (a truncated file is reported with its name and the
 * sizes involved).
 */
int sy_st_open_dir(const char *dir, sy_safetensors **out, sy_err *err);
/*
 * sy_st_open_dir, but the tensors skip(name, arg) is true for need not be
 * there: a shard the index maps only such tensors to is neither opened nor
 * required to exist. A shard opened for other tensors still lists them
 * (their bytes are never read unless the caller reads them).
 */
int sy_st_open_dir_skip(const char *dir, bool (*skip)(const char *name, void *arg), void *skip_arg,
                        sy_safetensors **out, sy_err *err);
/* Opens one file. */
int sy_st_open_file(const char *path, sy_safetensors **out, sy_err *err);
void sy_st_close(sy_safetensors *st);

size_t sy_st_count(const sy_safetensors *st);
const sy_st_entry *sy_st_at(const sy_safetensors *st, size_t i);
/* NULL if absent. */
const sy_st_entry *sy_st_find(const sy_safetensors *st, const char *name);
/* Path of shard i. */
const char *sy_st_file_path(const sy_safetensors *st, int i);

#endif
