/*
 * Fuzz target: the safetensors header parser and the sharded-checkpoint
 * index (core/model/safetensors.c). An input starting with '{' is a
 * model.safetensors.index.json, opened in a directory that also holds two
 * valid shards (model-00001-of-00002.safetensors with tensor "a",
 * model-00002-of-00002.safetensors with "b"); any other input is a whole
 * .safetensors file. Whatever opens is walked: every tensor is found again
 * by name and its first and last data bytes are read.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "model/safetensors.h"

/* Writes a one-tensor F32 shard: 8-byte length, JSON header, 8 data bytes. */
static void write_shard(const char *name, const char *tensor)
{
    char header[128];
    int hlen = snprintf(header, sizeof header, "{\"%s\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
                        tensor);
    unsigned char file[8 + sizeof header + 8];
    for (int i = 0; i < 8; i++)
        file[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    memcpy(file + 8, header, (size_t)hlen);
    memset(file + 8 + hlen, 0x3f, 8);
    fuzz_write(name, file, 8 + (size_t)hlen + 8);
}

static void walk(const sy_safetensors *st)
{
    volatile unsigned sum = 0;
    for (size_t i = 0; i < sy_st_count(st); i++) {
        const sy_st_entry *e = sy_st_at(st, i);
        if (!e || sy_st_find(st, e->name) != e || !sy_st_file_path(st, e->file))
            abort(); /* every listed tensor is found again, in a known shard */
        if (e->nbytes) {
            const unsigned char *p = e->view.data;
            sum += p[0] + p[e->nbytes - 1];
        }
    }
    (void)sum;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sy_safetensors *st = NULL;
    sy_err err = {{0}};
    char dir[4096];
    if (size && data[0] == '{') {
        static int shards_written;
        if (!shards_written) {
            write_shard("index/model-00001-of-00002.safetensors", "a");
            write_shard("index/model-00002-of-00002.safetensors", "b");
            shards_written = 1;
        }
        fuzz_write("index/model.safetensors.index.json", data, size);
        snprintf(dir, sizeof dir, "%s/index", fuzz_scratch_dir());
    } else {
        fuzz_write("single/model.safetensors", data, size);
        snprintf(dir, sizeof dir, "%s/single", fuzz_scratch_dir());
    }
    if (sy_st_open_dir(dir, &st, &err) == SY_OK) {
        fuzz_note("safetensors: %zu tensors", sy_st_count(st));
        walk(st);
        sy_st_close(st);
    } else {
        fuzz_note("safetensors: %s", err.msg);
    }
    return 0;
}
