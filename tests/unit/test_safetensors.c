/* safetensors reader: valid files, every header error, sharded checkpoints. */
#include "config.h"

#include "model/safetensors.h"
#include "test_model_util.h"

#include "util/log.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmp[256];

static void path_in(char *out, size_t cap, const char *name) { snprintf(out, cap, "%s/%s", tmp, name); }

static void test_basic(void)
{
    tm_st b;
    tm_st_init(&b);
    float f[6] = {0, 1, 2, 3, 4, 5};
    int64_t s23[2] = {2, 3}, s4[1] = {4}, s1[1] = {1}, s3[1] = {3}, s2222[4] = {2, 2, 2, 2};
    uint16_t bf[4] = {0x3f80, 0x4000, 0x4040, 0x4080}; /* 1, 2, 3, 4 */
    int64_t i64 = -5;
    uint8_t u8[3] = {9, 8, 7};
    uint16_t h = 0x3c00; /* 1.0 */
    tm_st_add(&b, "w.f32", "F32", 2, s23, f);
    tm_st_add(&b, "w.bf16", "BF16", 1, s4, bf);
    tm_st_add(&b, "w.i64", "I64", 1, s1, &i64);
    tm_st_add(&b, "w.u8", "U8", 1, s3, u8);
    tm_st_add(&b, "w.f16.scalar", "F16", 0, NULL, &h);
    tm_st_add(&b, "w.fp8", "F8_E4M3", 4, s2222, NULL);
    tm_st_add(&b, "w.i32", "I32", 1, s1, NULL);
    char p[512];
    path_in(p, sizeof p, "basic.safetensors");
    tm_st_write(&b, p);
    tm_st_free(&b);

    sy_safetensors *st = NULL;
    sy_err err = {{0}};
    int rc = sy_st_open_file(p, &st, &err);
    CHECK(rc == SY_OK, "open: %s", err.msg);
    if (rc != SY_OK)
        return;
    CHECK_EQ_INT(sy_st_count(st), 7);
    const sy_st_entry *e = sy_st_find(st, "w.f32");
    CHECK(e && e->view.dtype == SY_DTYPE_F32 && e->view.ndim == 2 && e->view.shape[0] == 2 &&
              e->view.shape[1] == 3 && e->view.stride[0] == 3 && e->view.stride[1] == 1 && e->nbytes == 24,
          "w.f32 view");
    if (e) {
        float got[6];
        memcpy(got, e->view.data, sizeof got);
        CHECK(memcmp(got, f, sizeof f) == 0, "w.f32 data");
        CHECK(strcmp(e->name, "w.f32") == 0 && e->file == 0, "w.f32 name/file");
    }
    e = sy_st_find(st, "w.bf16");
    CHECK(e && e->view.dtype == SY_DTYPE_BF16 && e->nbytes == 8 && memcmp(e->view.data, bf, 8) == 0, "w.bf16");
    e = sy_st_find(st, "w.i64");
    CHECK(e && e->view.dtype == SY_DTYPE_I64 && memcmp(e->view.data, &i64, 8) == 0, "w.i64");
    e = sy_st_find(st, "w.u8");
    CHECK(e && e->view.dtype == SY_DTYPE_U8 && memcmp(e->view.data, u8, 3) == 0, "w.u8");
    e = sy_st_find(st, "w.f16.scalar");
    CHECK(e && e->view.dtype == SY_DTYPE_F16 && e->view.ndim == 0 && e->nbytes == 2 &&
              memcmp(e->view.data, &h, 2) == 0,
          "scalar");
    e = sy_st_find(st, "w.fp8");
    CHECK(e && e->view.dtype == SY_DTYPE_FP8_E4M3 && e->view.ndim == 4 && e->nbytes == 16, "fp8");
    e = sy_st_find(st, "w.i32");
    CHECK(e && e->view.dtype == SY_DTYPE_I32 && e->nbytes == 4, "i32");
    CHECK(sy_st_find(st, "__metadata__") == NULL, "metadata is not a tensor");
    CHECK(sy_st_find(st, "w.missing") == NULL, "absent name");
    CHECK(sy_st_file_path(st, 0) && strcmp(sy_st_file_path(st, 0), p) == 0, "file path");
    CHECK(sy_st_file_path(st, 1) == NULL, "no second file");
    CHECK(sy_st_at(st, 7) == NULL && sy_st_at(st, 6) != NULL, "sy_st_at bounds");
    sy_st_close(st);
}

/* Thousands of names: every one found through the hash table. */
static void test_many(void)
{
    enum { N = 5000 };
    tm_st b;
    tm_st_init(&b);
    int64_t s1[1] = {1};
    for (int i = 0; i < N; i++) {
        char name[64];
        uint8_t v = (uint8_t)(i % 251);
        snprintf(name, sizeof name, "model.layers.%d.t", i);
        tm_st_add(&b, name, "U8", 1, s1, &v);
    }
    char p[512];
    path_in(p, sizeof p, "many.safetensors");
    tm_st_write(&b, p);
    tm_st_free(&b);
    sy_safetensors *st = NULL;
    sy_err err = {{0}};
    int rc = sy_st_open_file(p, &st, &err);
    CHECK(rc == SY_OK, "open: %s", err.msg);
    if (rc != SY_OK)
        return;
    CHECK_EQ_INT(sy_st_count(st), N);
    int bad = 0;
    for (int i = 0; i < N; i++) {
        char name[64];
        snprintf(name, sizeof name, "model.layers.%d.t", i);
        const sy_st_entry *e = sy_st_find(st, name);
        if (!e || strcmp(e->name, name) != 0 || *(const uint8_t *)e->view.data != (uint8_t)(i % 251))
            bad++;
    }
    CHECK(bad == 0, "%d of %d lookups wrong", bad, N);
    CHECK(sy_st_find(st, "model.layers.5000.t") == NULL, "absent");
    sy_st_close(st);
}

/* Writes header + data as name and expects open to fail naming the given parts. */
static void expect_fail(const char *name, const char *header, long long hlen, size_t data_len, int want_rc,
                        const char *s1, const char *s2, const char *s3)
{
    char p[512];
    path_in(p, sizeof p, name);
    uint8_t data[256] = {0};
    tm_write_st_raw(p, header, hlen, data, data_len);
    sy_safetensors *st = (sy_safetensors *)1;
    sy_err err = {{0}};
    int rc = sy_st_open_file(p, &st, &err);
    CHECK(st == NULL, "%s: out not cleared", name);
    CHECK(rc == want_rc, "%s: rc %d, expected %d (%s)", name, rc, want_rc, err.msg);
    CHECK_ERR(rc, err.msg, s1, s2 ? s2 : s1, s3 ? s3 : s1);
    if (rc == SY_OK)
        sy_st_close(st);
}

static void test_errors(void)
{
    /* Truncated: the tensor needs 24 bytes, the file holds 16. */
    expect_fail("model-00002-of-00003.safetensors",
                "{\"model.layers.3.mlp.up_proj.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}",
                -1, 16, SY_ERR_INVALID, "model-00002-of-00003.safetensors: tensor 'model.layers.3.mlp.up_proj.weight'",
                "needs bytes [0, 24) but the file's data region ends at 16", "truncated");
    /* Offsets past the end of the data region. */
    expect_fail("range.safetensors", "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[100,104]}}", -1, 8,
                SY_ERR_INVALID, "tensor 'a'", "[100, 104)", "ends at 8");
    /* end < begin. */
    expect_fail("inverted.safetensors", "{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[8,4]}}", -1, 8,
                SY_ERR_INVALID, "tensor 'a'", "[8, 4)", "not a valid range");
    /* Offsets that disagree with shape x dtype. */
    expect_fail("size.safetensors", "{\"a\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[0,8]}}", -1, 8,
                SY_ERR_INVALID, "tensor 'a'", "8 bytes", "need 6 bytes");
    /* Unknown dtype. */
    expect_fail("dtype.safetensors", "{\"w.q\":{\"dtype\":\"Q4_K\",\"shape\":[1],\"data_offsets\":[0,1]}}", -1, 8,
                SY_ERR_UNSUPPORTED, "tensor 'w.q'", "dtype 'Q4_K'", "supported: F32");
    expect_fail("f64.safetensors", "{\"w.d\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", -1, 8,
                SY_ERR_UNSUPPORTED, "'F64'", "w.d", NULL);
    /* Not JSON. */
    expect_fail("json.safetensors", "{\"a\": {\"dtype\": \"F32\",, }", -1, 8, SY_ERR_INVALID, "json.safetensors",
                "header is not valid JSON", "line 1");
    expect_fail("array.safetensors", "[1, 2]", -1, 0, SY_ERR_INVALID, "header should be a JSON object",
                "an array", NULL);
    /* Header length beyond the file. */
    expect_fail("hlen.safetensors", "{}", 1000000, 0, SY_ERR_INVALID, "hlen.safetensors", "header length 1000000",
                "larger than the file allows");
    /* Shorter than the length field itself. */
    {
        char p[512];
        path_in(p, sizeof p, "tiny.safetensors");
        tm_write_file(tmp, "tiny.safetensors", "abc", 3);
        sy_safetensors *st = NULL;
        sy_err err = {{0}};
        int rc = sy_st_open_file(p, &st, &err);
        CHECK_ERR(rc, err.msg, "tiny.safetensors", "3 bytes", "8-byte header length");
    }
    /* Malformed entries. */
    expect_fail("shape.safetensors", "{\"a\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,0]}}", -1, 0,
                SY_ERR_INVALID, "tensor 'a'", "shape[0]", "non-negative");
    expect_fail("shapetype.safetensors", "{\"a\":{\"dtype\":\"U8\",\"shape\":\"4\",\"data_offsets\":[0,4]}}", -1, 8,
                SY_ERR_INVALID, "tensor 'a'", "'shape' should be an array", "a string");
    expect_fail("dims.safetensors", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1],\"data_offsets\":[0,1]}}", -1, 8,
                SY_ERR_UNSUPPORTED, "tensor 'a'", "5 dimensions", NULL);
    expect_fail("offs.safetensors", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0]}}", -1, 8,
                SY_ERR_INVALID, "tensor 'a'", "data_offsets", NULL);
    expect_fail("nodtype.safetensors", "{\"a\":{\"shape\":[1],\"data_offsets\":[0,1]}}", -1, 8, SY_ERR_INVALID,
                "tensor 'a'", "'dtype' should be a string", "found nothing");
    expect_fail("dup.safetensors",
                "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}",
                -1, 8, SY_ERR_INVALID, "dup.safetensors", "duplicate", NULL);
    expect_fail("meta.safetensors", "{\"__metadata__\":[1]}", -1, 0, SY_ERR_INVALID, "__metadata__", "an array", NULL);
    /* An empty header is a valid, empty file. */
    {
        char p[512];
        path_in(p, sizeof p, "empty.safetensors");
        tm_write_st_raw(p, "{}      ", -1, NULL, 0);
        sy_safetensors *st = NULL;
        sy_err err = {{0}};
        int rc = sy_st_open_file(p, &st, &err);
        CHECK(rc == SY_OK && st && sy_st_count(st) == 0, "empty header: %s", err.msg);
        sy_st_close(st);
    }
    /* A file that does not exist. */
    {
        char p[512];
        path_in(p, sizeof p, "nope.safetensors");
        sy_safetensors *st = NULL;
        sy_err err = {{0}};
        int rc = sy_st_open_file(p, &st, &err);
        CHECK(rc == SY_ERR_IO, "rc %d", rc);
        CHECK_ERR(rc, err.msg, "nope.safetensors", "cannot open");
    }
}

/* A directory with one shard list in an index and the given shard files. */
static void make_shards(const char *dir, const char *index, bool write_second, bool omit_b2)
{
    tm_st a, b;
    tm_st_init(&a);
    tm_st_init(&b);
    int64_t s2[1] = {2};
    uint8_t v1[2] = {1, 2}, v2[2] = {3, 4}, v3[2] = {5, 6};
    tm_st_add(&a, "a.1", "U8", 1, s2, v1);
    tm_st_add(&a, "a.2", "U8", 1, s2, v2);
    if (!omit_b2)
        tm_st_add(&b, "b.2", "U8", 1, s2, v3);
    tm_st_add(&b, "b.1", "U8", 1, s2, v1);
    char p[600];
    snprintf(p, sizeof p, "%s/model-00001-of-00002.safetensors", dir);
    tm_st_write(&a, p);
    if (write_second) {
        snprintf(p, sizeof p, "%s/model-00002-of-00002.safetensors", dir);
        tm_st_write(&b, p);
    }
    tm_st_free(&a);
    tm_st_free(&b);
    tm_write_text(dir, "model.safetensors.index.json", index);
}

static const char *good_index = "{\"metadata\": {\"total_size\": 8}, \"weight_map\": {"
                                "\"a.1\": \"model-00001-of-00002.safetensors\","
                                "\"b.1\": \"model-00002-of-00002.safetensors\","
                                "\"a.2\": \"model-00001-of-00002.safetensors\","
                                "\"b.2\": \"model-00002-of-00002.safetensors\"}}";

static void test_sharded(void)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/sharded", tmp);
    mkdir(dir, 0700);
    make_shards(dir, good_index, true, false);
    sy_safetensors *st = NULL;
    sy_err err = {{0}};
    int rc = sy_st_open_dir(dir, &st, &err);
    CHECK(rc == SY_OK, "sharded open: %s", err.msg);
    if (rc == SY_OK) {
        CHECK_EQ_INT(sy_st_count(st), 4);
        const sy_st_entry *e = sy_st_find(st, "b.2");
        CHECK(e && e->file == 1 && ((const uint8_t *)e->view.data)[0] == 5, "b.2 in shard 2");
        e = sy_st_find(st, "a.2");
        CHECK(e && e->file == 0 && ((const uint8_t *)e->view.data)[1] == 4, "a.2 in shard 1");
        const char *p1 = sy_st_file_path(st, 1);
        CHECK(p1 && strstr(p1, "model-00002-of-00002.safetensors"), "shard path");
        CHECK(sy_st_file_path(st, 2) == NULL, "two shards");
        sy_st_close(st);
    }

    /* The second shard is missing. */
    snprintf(dir, sizeof dir, "%s/sharded-missing", tmp);
    mkdir(dir, 0700);
    make_shards(dir, good_index, false, false);
    rc = sy_st_open_dir(dir, &st, &err);
    CHECK(rc == SY_ERR_IO && st == NULL, "rc %d", rc);
    CHECK_ERR(rc, err.msg, "model.safetensors.index.json", "shard 'model-00002-of-00002.safetensors'",
              "does not exist");

    /* The index names a tensor its shard does not hold. */
    snprintf(dir, sizeof dir, "%s/sharded-absent", tmp);
    mkdir(dir, 0700);
    make_shards(dir, good_index, true, true);
    rc = sy_st_open_dir(dir, &st, &err);
    CHECK(rc == SY_ERR_INVALID && st == NULL, "rc %d", rc);
    CHECK_ERR(rc, err.msg, "tensor 'b.2'", "shard 'model-00002-of-00002.safetensors'", "no such tensor");

    /* The index puts a tensor in the wrong shard. */
    snprintf(dir, sizeof dir, "%s/sharded-wrong", tmp);
    mkdir(dir, 0700);
    make_shards(dir,
                "{\"weight_map\": {\"a.1\": \"model-00001-of-00002.safetensors\","
                "\"b.1\": \"model-00001-of-00002.safetensors\", \"b.2\": \"model-00002-of-00002.safetensors\"}}",
                true, false);
    rc = sy_st_open_dir(dir, &st, &err);
    CHECK_ERR(rc, err.msg, "tensor 'b.1'", "'model-00001-of-00002.safetensors'", "but it is in",
              "model-00002-of-00002.safetensors");

    /* Index problems. */
    snprintf(dir, sizeof dir, "%s/sharded-badindex", tmp);
    mkdir(dir, 0700);
    make_shards(dir, "{\"weight_map\": [", true, false);
    rc = sy_st_open_dir(dir, &st, &err);
    CHECK_ERR(rc, err.msg, "model.safetensors.index.json", "not valid JSON");
    make_shards(dir, "{\"weight_map\": {\"a.1\": 3}}", true, false);
    rc = sy_st_open_dir(dir, &st, &err);
    CHECK_ERR(rc, err.msg, "weight_map['a.1']", "an integer");
    make_shards(dir, "{\"weight_map\": {\"a.1\": \"../../etc/passwd\"}}", true, false);
    rc = sy_st_open_dir(dir, &st, &err);
    CHECK_ERR(rc, err.msg, "'../../etc/passwd'", "outside");
    make_shards(dir, "{\"metadata\": {}}", true, false);
    rc = sy_st_open_dir(dir, &st, &err);
    CHECK_ERR(rc, err.msg, "'weight_map' should be an object", "found nothing");

    /* A tensor held by two shards. */
    snprintf(dir, sizeof dir, "%s/sharded-dup", tmp);
    mkdir(dir, 0700);
    make_shards(dir, good_index, true, false);
    {
        tm_st b;
        tm_st_init(&b);
        int64_t s2[1] = {2};
        tm_st_add(&b, "b.2", "U8", 1, s2, NULL);
        tm_st_add(&b, "b.1", "U8", 1, s2, NULL);
        tm_st_add(&b, "a.1", "U8", 1, s2, NULL);
        char p[600];
        snprintf(p, sizeof p, "%s/model-00002-of-00002.safetensors", dir);
        tm_st_write(&b, p);
        tm_st_free(&b);
    }
    rc = sy_st_open_dir(dir, &st, &err);
    CHECK_ERR(rc, err.msg, "tensor 'a.1'", "appears in both", "model-00001-of-00002.safetensors",
              "model-00002-of-00002.safetensors");
}

static void test_dir_single(void)
{
    char dir[512];
    sy_safetensors *st = NULL;
    sy_err err = {{0}};
    /* No model.safetensors, but exactly one other *.safetensors file. */
    snprintf(dir, sizeof dir, "%s/single", tmp);
    mkdir(dir, 0700);
    tm_st b;
    tm_st_init(&b);
    int64_t s1[1] = {1};
    tm_st_add(&b, "x", "U8", 1, s1, NULL);
    char p[600];
    snprintf(p, sizeof p, "%s/consolidated.safetensors", dir);
    tm_st_write(&b, p);
    int rc = sy_st_open_dir(dir, &st, &err);
    CHECK(rc == SY_OK && st && sy_st_find(st, "x"), "single other file: %s", err.msg);
    sy_st_close(st);
    /* Two of them and no index: ambiguous. */
    snprintf(p, sizeof p, "%s/other.safetensors", dir);
    tm_st_write(&b, p);
    rc = sy_st_open_dir(dir, &st, &err);
    CHECK_ERR(rc, err.msg, "2 *.safetensors files", "model.safetensors.index.json");
    /* model.safetensors wins over the others. */
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    tm_st_write(&b, p);
    rc = sy_st_open_dir(dir, &st, &err);
    CHECK(rc == SY_OK && st && strstr(sy_st_file_path(st, 0), "/model.safetensors"), "model.safetensors: %s",
          err.msg);
    sy_st_close(st);
    tm_st_free(&b);
    /* Nothing at all. */
    snprintf(dir, sizeof dir, "%s/nothing", tmp);
    mkdir(dir, 0700);
    rc = sy_st_open_dir(dir, &st, &err);
    CHECK(rc == SY_ERR_IO, "rc %d", rc);
    CHECK_ERR(rc, err.msg, "nothing", "no model.safetensors");
}

/* Every header byte corrupted, and every truncation: open fails cleanly or succeeds. */
static void test_corruption(void)
{
    tm_st b;
    tm_st_init(&b);
    int64_t s23[2] = {2, 3}, s4[1] = {4};
    tm_st_add(&b, "a.weight", "F32", 2, s23, NULL);
    tm_st_add(&b, "b.weight", "BF16", 1, s4, NULL);
    char p[512];
    path_in(p, sizeof p, "good.safetensors");
    tm_st_write(&b, p);
    tm_st_free(&b);
    FILE *f = fopen(p, "rb");
    uint8_t buf[1024];
    size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f)
        fclose(f);
    CHECK(n > 8 && n < sizeof buf, "good file %zu bytes", n);
    static const uint8_t vals[] = {0x00, 0xff, '"', '9', '-', '['};
    char q[512];
    path_in(q, sizeof q, "bad.safetensors");
    int opened = 0, failed = 0;
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < sizeof vals; k++) {
            uint8_t c[1024];
            memcpy(c, buf, n);
            c[i] = vals[k];
            tm_write_file(tmp, "bad.safetensors", c, n);
            sy_safetensors *st = NULL;
            sy_err err = {{0}};
            int rc = sy_st_open_file(q, &st, &err);
            if (rc == SY_OK) {
                for (size_t j = 0; j < sy_st_count(st); j++) {
                    const sy_st_entry *e = sy_st_at(st, j);
                    volatile uint8_t sink = 0;
                    for (uint64_t o = 0; o < e->nbytes; o++)
                        sink ^= ((const uint8_t *)e->view.data)[o];
                    (void)sink;
                }
                opened++;
            } else {
                CHECK(err.msg[0] && st == NULL, "byte %zu: failure without a message", i);
                failed++;
            }
            sy_st_close(st);
        }
    }
    for (size_t len = 0; len < n; len++) {
        tm_write_file(tmp, "bad.safetensors", buf, len);
        sy_safetensors *st = NULL;
        sy_err err = {{0}};
        int rc = sy_st_open_file(q, &st, &err);
        CHECK(rc != SY_OK && err.msg[0], "truncated to %zu bytes but opened", len);
        sy_st_close(st);
    }
    CHECK(opened > 0 && failed > 0, "corruption: %d opened, %d failed", opened, failed);
}

int main(void)
{
    sy_log_set_level(SY_LOG_WARN);
    if (tm_mkdtemp(tmp, sizeof tmp) != 0)
        return 1;
    test_basic();
    test_many();
    test_errors();
    test_sharded();
    test_dir_single();
    test_corruption();
    tm_rmtree(tmp);
    if (tm_failures) {
        fprintf(stderr, "test_safetensors: %d failures\n", tm_failures);
        return 1;
    }
    printf("test_safetensors: all passed\n");
    return 0;
}
