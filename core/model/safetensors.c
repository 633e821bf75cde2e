/*
 * safetensors reader.
 *
 * File layout: 8-byte little-endian header length N, N bytes of JSON
 * ({"name": {"dtype", "shape", "data_offsets": [begin, end]}, ...,
 * "__metadata__": {...}}), then the data region; offsets are relative to
 * the data region, which starts at byte 8 + N.
 *
 * Every file is mmap'd read-only (MAP_PRIVATE) and stays mapped until
 * sy_st_close: tensor views point straight into the mappings. Names are
 * found through an open-addressing hash table (checkpoints carry thousands
 * of tensors).
 */
#include "config.h"

#include "model/safetensors.h"

#include "util/log.h"
#include "util/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The reference implementation refuses larger headers; so do we, so that a
 * corrupt length cannot make us parse gigabytes of weights as JSON. */
#define ST_MAX_HEADER ((uint64_t)100 * 1024 * 1024)

#define ST_INDEX_NAME "model.safetensors.index.json"

typedef struct st_file {
    char *path;
    const char *base; /* basename of path, for messages */
    uint8_t *map;
    size_t map_len;
    uint64_t data_start; /* 8 + header length */
} st_file;

struct sy_safetensors {
    st_file *files;
    int n_files;
    sy_st_entry *entries;
    size_t n, cap;
    uint32_t *slots; /* entry index + 1; 0 = empty */
    size_t n_slots;  /* power of two */
};

/* ------------------------------------------------------------ dtypes */

static const struct {
    const char *name;
    sy_dtype dtype;
} st_dtypes[] = {
    {"F32", SY_DTYPE_F32},         {"F16", SY_DTYPE_F16}, {"BF16", SY_DTYPE_BF16}, {"F8_E4M3", SY_DTYPE_FP8_E4M3},
    {"I32", SY_DTYPE_I32},         {"I64", SY_DTYPE_I64}, {"U8", SY_DTYPE_U8},
};
#define ST_DTYPES_LIST "F32, F16, BF16, F8_E4M3, I32, I64, U8"

static int st_dtype_parse(const char *s, sy_dtype *out)
{
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (strcmp(s, st_dtypes[i].name) == 0) {
            *out = st_dtypes[i].dtype;
            return 0;
        }
    return -1;
}

/* ------------------------------------------------------------ hash table */

static uint64_t st_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    return h;
}

static const sy_st_entry *st_lookup(const sy_safetensors *st, const char *name)
{
    if (!st->n_slots)
        return NULL;
    size_t mask = st->n_slots - 1;
    for (size_t i = (size_t)st_hash(name) & mask;; i = (i + 1) & mask) {
        uint32_t s = st->slots[i];
        if (!s)
            return NULL;
        if (strcmp(st->entries[s - 1].name, name) == 0)
            return &st->entries[s - 1];
    }
}

static void st_slot_put(uint32_t *slots, size_t n_slots, const char *name, uint32_t v)
{
    size_t mask = n_slots - 1;
    size_t i = (size_t)st_hash(name) & mask;
    while (slots[i])
        i = (i + 1) & mask;
    slots[i] = v;
}

/* Keeps the load factor at or below 1/2. */
static int st_reserve_slots(sy_safetensors *st, size_t n_entries)
{
    if (n_entries * 2 <= st->n_slots)
        return 0;
    size_t ns = st->n_slots ? st->n_slots : 64;
    while (n_entries * 2 > ns)
        ns *= 2;
    uint32_t *slots = calloc(ns, sizeof *slots);
    if (!slots)
        return -1;
    for (size_t i = 0; i < st->n; i++)
        st_slot_put(slots, ns, st->entries[i].name, (uint32_t)(i + 1));
    free(st->slots);
    st->slots = slots;
    st->n_slots = ns;
    return 0;
}

/* Appends an entry whose name the caller has already checked is new. */
static int st_add(sy_safetensors *st, const sy_st_entry *e)
{
    if (st->n >= UINT32_MAX - 1)
        return -1;
    if (st->n == st->cap) {
        size_t nc = st->cap ? st->cap * 2 : 256;
        sy_st_entry *ne = realloc(st->entries, nc * sizeof *ne);
        if (!ne)
            return -1;
        st->entries = ne;
        st->cap = nc;
    }
    if (st_reserve_slots(st, st->n + 1) != 0)
        return -1;
    st->entries[st->n] = *e;
    st->n++;
    st_slot_put(st->slots, st->n_slots, e->name, (uint32_t)st->n);
    return 0;
}

/* ------------------------------------------------------------ one file */

static const char *st_json_type(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a real number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "?";
}

/* Reads one header entry into e (name not yet set). */
static int st_parse_entry(const st_file *f, uint64_t data_len, const char *name, const json_t *v, sy_st_entry *e,
                          sy_err *err)
{
    const char *fn = f->base;
    if (!json_is_object(v))
        return sy_err_set(err, SY_ERR_INVALID, "%s: header entry '%s' should be an object, found %s", fn, name,
                          st_json_type(v));
    const json_t *jd = json_object_get(v, "dtype");
    const json_t *js = json_object_get(v, "shape");
    const json_t *jo = json_object_get(v, "data_offsets");
    if (!json_is_string(jd))
        return sy_err_set(err, SY_ERR_INVALID, "%s: tensor '%s': 'dtype' should be a string, found %s", fn, name,
                          jd ? st_json_type(jd) : "nothing");
    sy_dtype dt;
    if (st_dtype_parse(json_string_value(jd), &dt) != 0)
        return sy_err_set(err, SY_ERR_UNSUPPORTED,
                          "%s: tensor '%s' has dtype '%s', which is not supported (supported: %s)", fn, name,
                          json_string_value(jd), ST_DTYPES_LIST);
    if (!json_is_array(js))
        return sy_err_set(err, SY_ERR_INVALID, "%s: tensor '%s': 'shape' should be an array, found %s", fn, name,
                          js ? st_json_type(js) : "nothing");
    size_t ndim = json_array_size(js);
    if (ndim > SY_MAX_DIMS)
        return sy_err_set(err, SY_ERR_UNSUPPORTED, "%s: tensor '%s' has %zu dimensions; at most %d are supported", fn,
                          name, ndim, SY_MAX_DIMS);
    int64_t shape[SY_MAX_DIMS] = {0};
    uint64_t numel = 1;
    for (size_t i = 0; i < ndim; i++) {
        const json_t *d = json_array_get(js, i);
        if (!json_is_integer(d) || json_integer_value(d) < 0)
            return sy_err_set(err, SY_ERR_INVALID, "%s: tensor '%s': shape[%zu] should be a non-negative integer", fn,
                              name, i);
        uint64_t dim = (uint64_t)json_integer_value(d);
        if (dim && numel > (UINT64_MAX >> 4) / dim)
            return sy_err_set(err, SY_ERR_INVALID, "%s: tensor '%s': shape is too large", fn, name);
        numel *= dim;
        shape[i] = (int64_t)dim;
    }
    if (!json_is_array(jo) || json_array_size(jo) != 2 || !json_is_integer(json_array_get(jo, 0)) ||
        !json_is_integer(json_array_get(jo, 1)))
        return sy_err_set(err, SY_ERR_INVALID, "%s: tensor '%s': 'data_offsets' should be an array of two integers", fn,
                          name);
    json_int_t b = json_integer_value(json_array_get(jo, 0));
    json_int_t en = json_integer_value(json_array_get(jo, 1));
    if (b < 0 || en < b)
        return sy_err_set(err, SY_ERR_INVALID, "%s: tensor '%s' has data_offsets [%lld, %lld): not a valid range", fn,
                          name, (long long)b, (long long)en);
    uint64_t begin = (uint64_t)b, end = (uint64_t)en;
    uint64_t nbytes = numel * (uint64_t)(sy_dtype_bits(dt) / 8);
    if (end - begin != nbytes)
        return sy_err_set(err, SY_ERR_INVALID,
                          "%s: tensor '%s' has data_offsets [%llu, %llu) (%llu bytes) but its shape and dtype %s "
                          "need %llu bytes",
                          fn, name, (unsigned long long)begin, (unsigned long long)end,
                          (unsigned long long)(end - begin), sy_dtype_name(dt), (unsigned long long)nbytes);
    if (end > data_len)
        return sy_err_set(err, SY_ERR_INVALID,
                          "%s: tensor '%s' needs bytes [%llu, %llu) but the file's data region ends at %llu (file "
                          "truncated?)",
                          fn, name, (unsigned long long)begin, (unsigned long long)end, (unsigned long long)data_len);
    memset(e, 0, sizeof *e);
    sy_tensor_init(&e->view, f->map + f->data_start + begin, dt, (int)ndim, shape);
    e->nbytes = nbytes;
    return SY_OK;
}

/* Maps path into f and checks the header length. */
static int st_map(const char *path, st_file *f, sy_err *err)
{
    memset(f, 0, sizeof *f);
    f->path = sy_strdup(path);
    if (!f->path)
        return sy_err_set(err, SY_ERR_NOMEM, "%s: out of memory", path);
    const char *slash = strrchr(f->path, '/');
    f->base = slash ? slash + 1 : f->path;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return sy_err_set(err, errno == ENOMEM ? SY_ERR_NOMEM : SY_ERR_IO, "%s: cannot open: %s", path,
                          strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return sy_err_set(err, SY_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return sy_err_set(err, SY_ERR_IO, "%s: not a regular file", path);
    }
    uint64_t size = (uint64_t)sb.st_size;
    if (size < 8) {
        close(fd);
        return sy_err_set(err, SY_ERR_INVALID,
                          "%s: file is %llu bytes, too short for the 8-byte header length (file truncated?)", path,
                          (unsigned long long)size);
    }
    if (size > SIZE_MAX) {
        close(fd);
        return sy_err_set(err, SY_ERR_UNSUPPORTED, "%s: file too large to map", path);
    }
    void *p = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED)
        return sy_err_set(err, e == ENOMEM ? SY_ERR_NOMEM : SY_ERR_IO, "%s: cannot mmap %llu bytes: %s", path,
                          (unsigned long long)size, strerror(e));
    f->map = p;
    f->map_len = (size_t)size;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = (hlen << 8) | f->map[i];
    if (hlen > size - 8)
        return sy_err_set(err, SY_ERR_INVALID,
                          "%s: header length %llu is larger than the file allows (%llu bytes after the 8-byte length; "
                          "file truncated or not safetensors?)",
                          path, (unsigned long long)hlen, (unsigned long long)(size - 8));
    if (hlen > ST_MAX_HEADER)
        return sy_err_set(err, SY_ERR_INVALID, "%s: header length %llu exceeds the %llu-byte limit", path,
                          (unsigned long long)hlen, (unsigned long long)ST_MAX_HEADER);
    if (hlen < 2)
        return sy_err_set(err, SY_ERR_INVALID, "%s: header length %llu is too small for a JSON object", path,
                          (unsigned long long)hlen);
    f->data_start = 8 + hlen;
    return SY_OK;
}

static void st_unmap(st_file *f)
{
    if (f->map)
        munmap(f->map, f->map_len);
    free(f->path);
    memset(f, 0, sizeof *f);
}

/* Parses the header of st->files[fi] and adds its tensors. */
static int st_load_header(sy_safetensors *st, int fi, sy_err *err)
{
    st_file *f = &st->files[fi];
    uint64_t hlen = f->data_start - 8;
    uint64_t data_len = f->map_len - f->data_start;
    json_error_t jerr;
    json_t *root = json_loadb((const char *)f->map + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return sy_err_set(err, SY_ERR_INVALID, "%s: header is not valid JSON (line %d, column %d: %s)", f->path,
                          jerr.line, jerr.column, jerr.text);
    int rc = SY_OK;
    if (!json_is_object(root)) {
        rc = sy_err_set(err, SY_ERR_INVALID, "%s: header should be a JSON object, found %s", f->path,
                        st_json_type(root));
        goto out;
    }
    size_t n_unaligned = 0;
    const char *first_unaligned = NULL;
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v)
    {
        if (strcmp(key, "__metadata__") == 0) {
            if (!json_is_object(v) && !json_is_null(v)) {
                rc = sy_err_set(err, SY_ERR_INVALID, "%s: '__metadata__' should be an object, found %s", f->base,
                                st_json_type(v));
                goto out;
            }
            continue;
        }
        sy_st_entry e;
        rc = st_parse_entry(f, data_len, key, v, &e, err);
        if (rc != SY_OK)
            goto out;
        const sy_st_entry *dup = st_lookup(st, key);
        if (dup) {
            rc = sy_err_set(err, SY_ERR_INVALID, "tensor '%s' appears in both %s and %s", key,
                            st->files[dup->file].base, f->base);
            goto out;
        }
        e.file = fi;
        e.name = sy_strdup(key);
        if (!e.name || st_add(st, &e) != 0) {
            free((char *)e.name);
            rc = sy_err_set(err, SY_ERR_NOMEM, "%s: out of memory adding tensor '%s'", f->base, key);
            goto out;
        }
        int align = sy_dtype_bits(e.view.dtype) / 8;
        if (align > 1 && ((uintptr_t)e.view.data % (uintptr_t)align) != 0) {
            if (!n_unaligned)
                first_unaligned = st->entries[st->n - 1].name;
            n_unaligned++;
        }
    }
    if (n_unaligned)
        sy_debug("%s: %zu tensors are not aligned to their element size (first: '%s'); kernels read them with "
                 "unaligned loads",
                 f->base, n_unaligned, first_unaligned);
out:
    json_decref(root);
    return rc;
}

static sy_safetensors *st_new(void) { return calloc(1, sizeof(sy_safetensors)); }

/* Maps path as a new shard of st and reads its header. */
static int st_add_file(sy_safetensors *st, const char *path, sy_err *err)
{
    st_file *nf = realloc(st->files, (size_t)(st->n_files + 1) * sizeof *nf);
    if (!nf)
        return sy_err_set(err, SY_ERR_NOMEM, "%s: out of memory", path);
    st->files = nf;
    int fi = st->n_files++;
    int rc = st_map(path, &st->files[fi], err);
    if (rc != SY_OK)
        return rc;
    return st_load_header(st, fi, err);
}

void sy_st_close(sy_safetensors *st)
{
    if (!st)
        return;
    for (size_t i = 0; i < st->n; i++)
        free((char *)st->entries[i].name);
    for (int i = 0; i < st->n_files; i++)
        st_unmap(&st->files[i]);
    free(st->files);
    free(st->entries);
    free(st->slots);
    free(st);
}

int sy_st_open_file(const char *path, sy_safetensors **out, sy_err *err)
{
    *out = NULL;
    sy_safetensors *st = st_new();
    if (!st)
        return sy_err_set(err, SY_ERR_NOMEM, "%s: out of memory", path);
    int rc = st_add_file(st, path, err);
    if (rc != SY_OK) {
        sy_st_close(st);
        return rc;
    }
    *out = st;
    return SY_OK;
}

/* ------------------------------------------------------------ sharded */

/* A shard name from the index must stay inside the checkpoint directory. */
static bool st_shard_name_ok(const char *s)
{
    if (!*s || s[0] == '/')
        return false;
    for (const char *p = s; *p;) {
        const char *slash = strchr(p, '/');
        size_t len = slash ? (size_t)(slash - p) : strlen(p);
        if (len == 2 && p[0] == '.' && p[1] == '.')
            return false;
        if (!slash)
            break;
        p = slash + 1;
    }
    return true;
}

typedef struct st_skip {
    bool (*fn)(const char *name, void *arg);
    void *arg;
} st_skip;

static bool st_skipped(const st_skip *sk, const char *name) { return sk->fn && sk->fn(name, sk->arg); }

static int st_open_index(const char *dir, const char *index_path, const st_skip *sk, sy_safetensors *st,
                         sy_err *err)
{
    char *text = NULL;
    size_t len = 0;
    int rc = sy_read_file(index_path, &text, &len, err);
    if (rc != SY_OK)
        return rc;
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    free(text);
    if (!root)
        return sy_err_set(err, SY_ERR_INVALID, "%s: not valid JSON (line %d, column %d: %s)", index_path, jerr.line,
                          jerr.column, jerr.text);
    const char **shards = NULL; /* distinct shard names, in order of first mention */
    int n_shards = 0;
    json_t *wm = json_is_object(root) ? json_object_get(root, "weight_map") : NULL;
    if (!json_is_object(wm)) {
        rc = sy_err_set(err, SY_ERR_INVALID, "%s: 'weight_map' should be an object, found %s", index_path,
                        wm ? st_json_type(wm) : json_is_object(root) ? "nothing" : "a non-object document");
        goto out;
    }
    if (json_object_size(wm) == 0) {
        rc = sy_err_set(err, SY_ERR_INVALID, "%s: 'weight_map' is empty", index_path);
        goto out;
    }
    const char *key;
    json_t *v;
    json_object_foreach(wm, key, v)
    {
        if (!json_is_string(v)) {
            rc = sy_err_set(err, SY_ERR_INVALID, "%s: weight_map['%s'] should be a shard file name, found %s",
                            index_path, key, st_json_type(v));
            goto out;
        }
        const char *s = json_string_value(v);
        if (!st_shard_name_ok(s)) {
            rc = sy_err_set(err, SY_ERR_INVALID, "%s: weight_map['%s'] names shard '%s', which is outside %s",
                            index_path, key, s, dir);
            goto out;
        }
        if (st_skipped(sk, key)) /* its shard is opened only if a tensor we read lives there too */
            continue;
        int k = 0;
        while (k < n_shards && strcmp(shards[k], s) != 0)
            k++;
        if (k < n_shards)
            continue;
        const char **ns = realloc(shards, (size_t)(n_shards + 1) * sizeof *ns);
        if (!ns) {
            rc = sy_err_set(err, SY_ERR_NOMEM, "%s: out of memory", index_path);
            goto out;
        }
        shards = ns;
        shards[n_shards++] = s;
        char path[4096];
        if (sy_path_join(path, sizeof path, dir, s) != 0) {
            rc = sy_err_set(err, SY_ERR_INVALID, "%s: path of shard '%s' is too long", index_path, s);
            goto out;
        }
        if (!sy_file_exists(path)) {
            rc = sy_err_set(err, SY_ERR_IO, "%s: shard '%s' (holding tensor '%s') does not exist: %s",
                            ST_INDEX_NAME, s, key, path);
            goto out;
        }
        rc = st_add_file(st, path, err);
        if (rc != SY_OK)
            goto out;
    }
    /* Every tensor the index names must be in the shard it names. */
    json_object_foreach(wm, key, v)
    {
        const char *s = json_string_value(v);
        const sy_st_entry *e = st_lookup(st, key);
        int k = 0;
        while (k < n_shards && strcmp(shards[k], s) != 0)
            k++;
        if (k == n_shards) /* a skipped tensor in a shard nothing else needed */
            continue;
        if (!e) {
            rc = sy_err_set(err, SY_ERR_INVALID, "%s maps tensor '%s' to shard '%s', but that file has no such tensor",
                            ST_INDEX_NAME, key, s);
            goto out;
        }
        if (e->file != k) {
            rc = sy_err_set(err, SY_ERR_INVALID, "%s maps tensor '%s' to shard '%s', but it is in '%s'",
                            ST_INDEX_NAME, key, s, st->files[e->file].base);
            goto out;
        }
    }
    if (st->n > json_object_size(wm))
        sy_debug("%s: the shards hold %zu tensors that %s does not list", dir, st->n - json_object_size(wm),
                 ST_INDEX_NAME);
    rc = SY_OK;
out:
    free(shards);
    json_decref(root);
    return rc;
}

/* The one *.safetensors file in dir when there is no model.safetensors. */
static int st_find_single(const char *dir, char *path, size_t cap, sy_err *err)
{
    if (sy_path_join(path, cap, dir, "model.safetensors") != 0)
        return sy_err_set(err, SY_ERR_INVALID, "%s: path too long", dir);
    if (sy_file_exists(path))
        return SY_OK;
    DIR *d = opendir(dir);
    if (!d)
        return sy_err_set(err, SY_ERR_IO, "%s: cannot open directory: %s", dir, strerror(errno));
    int found = 0;
    char first[256] = "", second[256] = "";
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        size_t n = strlen(de->d_name);
        if (n > 12 && strcmp(de->d_name + n - 12, ".safetensors") == 0) {
            snprintf(found ? second : first, sizeof first, "%s", de->d_name);
            found++;
            if (found == 1 && sy_path_join(path, cap, dir, de->d_name) != 0) {
                closedir(d);
                return sy_err_set(err, SY_ERR_INVALID, "%s: path too long", dir);
            }
        }
    }
    closedir(d);
    if (found == 0)
        return sy_err_set(err, SY_ERR_IO, "%s: no model.safetensors, no %s and no other *.safetensors file", dir,
                          ST_INDEX_NAME);
    if (found > 1)
        return sy_err_set(err, SY_ERR_INVALID,
                          "%s: %d *.safetensors files (%s, %s%s) but no %s to say how they fit together", dir,
                          found, first, second, found > 2 ? ", ..." : "", ST_INDEX_NAME);
    return SY_OK;
}

int sy_st_open_dir(const char *dir, sy_safetensors **out, sy_err *err)
{
    return sy_st_open_dir_skip(dir, NULL, NULL, out, err);
}

int sy_st_open_dir_skip(const char *dir, bool (*skip)(const char *name, void *arg), void *skip_arg,
                        sy_safetensors **out, sy_err *err)
{
    const st_skip sk = {skip, skip_arg};
    *out = NULL;
    char path[4096];
    if (sy_path_join(path, sizeof path, dir, ST_INDEX_NAME) != 0)
        return sy_err_set(err, SY_ERR_INVALID, "%s: path too long", dir);
    sy_safetensors *st = st_new();
    if (!st)
        return sy_err_set(err, SY_ERR_NOMEM, "%s: out of memory", dir);
    int rc;
    if (sy_file_exists(path)) {
        rc = st_open_index(dir, path, &sk, st, err);
    } else {
        rc = st_find_single(dir, path, sizeof path, err);
        if (rc == SY_OK)
            rc = st_add_file(st, path, err);
    }
    if (rc != SY_OK) {
        sy_st_close(st);
        return rc;
    }
    *out = st;
    return SY_OK;
}

/* ------------------------------------------------------------ queries */

size_t sy_st_count(const sy_safetensors *st) { return st->n; }

const sy_st_entry *sy_st_at(const sy_safetensors *st, size_t i) { return i < st->n ? &st->entries[i] : NULL; }

const sy_st_entry *sy_st_find(const sy_safetensors *st, const char *name) { return st_lookup(st, name); }

const char *sy_st_file_path(const sy_safetensors *st, int i)
{
    return i >= 0 && i < st->n_files ? st->files[i].path : NULL;
}
