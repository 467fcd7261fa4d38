/* test_safetensors.c: round trips, and every way a file can be broken must give one
 * clear error (never a crash, never a half-written file). Corrupt files are built byte by
 * byte in a fresh temporary directory per test. */
#include <check.h>
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "safetensors.h"
#include "test_util.h"

static char tmp_dir[512];

static void setup(void) {
    test_tmpdir(tmp_dir, sizeof tmp_dir, "st");
}

static void teardown(void) { test_rmtree(tmp_dir); }

/* A path inside the test's temporary directory (one of two rotating buffers). */
static const char *tpath(const char *name) {
    static char bufs[2][1024];
    static int k;
    k ^= 1;
    snprintf(bufs[k], sizeof bufs[k], "%s/%s", tmp_dir, name);
    return bufs[k];
}

static int exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

static void write_bytes(const char *path, const void *bytes, size_t n) {
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(bytes, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

/* Writes an 8-byte little-endian header length `len`, the header text, then data_len
 * bytes of data (a simple ramp). len is separate so tests can lie about it. */
static void write_file_len(const char *path, uint64_t len, const char *header, size_t data_len) {
    size_t hl = strlen(header);
    unsigned char *buf = malloc(8 + hl + data_len + 1);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(len >> (8 * i));
    memcpy(buf + 8, header, hl);
    for (size_t i = 0; i < data_len; i++) buf[8 + hl + i] = (unsigned char)i;
    write_bytes(path, buf, 8 + hl + data_len);
    free(buf);
}

static void write_file(const char *path, const char *header, size_t data_len) {
    write_file_len(path, strlen(header), header, data_len);
}

static void expect_open_fails(const char *path, const char *want) {
    StFile sf;
    Err e = {0};
    ck_assert_int_eq(st_open(&sf, path, &e), -1);
    ck_assert_msg(strstr(e.msg, want) != NULL, "error '%s' lacks '%s'", e.msg, want);
    ck_assert_msg(strncmp(e.msg, path, strlen(path)) == 0, "error '%s' does not start with the path", e.msg);
    ck_assert_msg(strchr(e.msg, '\n') == NULL, "error '%s' spans lines", e.msg);
    /* "on failure sf holds nothing to free" */
    ck_assert_ptr_null(sf.f);
    ck_assert_ptr_null(sf.entries);
    ck_assert_ptr_null(sf.path);
    st_close(&sf);
}

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* --------------------------------------------------------------------------------------- */

START_TEST(test_round_trip) {
    /* Values include the awkward ones: -0, inf, a NaN with a payload, a denormal. */
    float a[5] = {1.0f, -0.0f, from_bits(0x7f800000u), from_bits(0x7fc01234u), from_bits(0x00000001u)};
    float b[12], c[12], d[12], s[1] = {3.25f};
    for (int i = 0; i < 12; i++) {
        b[i] = (float)i * 0.5f - 2.0f;
        c[i] = 1.0f / (float)(i + 1);
        d[i] = (float)(i * i) - 7.75f;
    }
    const int sa[1] = {5}, sb[2] = {3, 4}, sc[3] = {2, 3, 2}, sd[4] = {2, 1, 3, 2}, sz[2] = {0, 3};
    const StTensor t[] = {
        {"blocks.0.attn.q.weight", 2, sb, b},
        {"a", 1, sa, a},
        {"c3", 3, sc, c},
        {"d4", 4, sd, d},
        {"scalar", 0, NULL, s},
        {"empty", 2, sz, NULL},
    };
    const int n = (int)(sizeof t / sizeof t[0]);
    const StMeta meta[] = {
        {"format", "attnlab"},
        {"config", "{\"attn\": \"softmax\", \"note\": \"quote \\\" and\\nnewline, \xe4\xb8\xad\xe6\x96\x87\"}"},
        {"step", "1200"},
    };
    const char *path = tpath("model.safetensors");
    Err e = {0};
    ck_assert_msg(st_save(path, t, n, meta, 3, &e) == 0, "%s", e.msg);
    ck_assert(!exists(tpath("model.safetensors.tmp")));

    StFile sf;
    ck_assert_msg(st_open(&sf, path, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(sf.n_entries, n);
    ck_assert_uint_eq(sf.data_start % 8, 0);
    ck_assert_int_eq(sf.n_meta, 3);
    for (int i = 0; i < 3; i++) ck_assert_str_eq(st_meta(&sf, meta[i].key), meta[i].value);
    ck_assert_ptr_null(st_meta(&sf, "missing"));
    ck_assert_ptr_null(st_find(&sf, "missing"));

    for (int i = 0; i < n; i++) {
        const StEntry *en = &sf.entries[i];
        ck_assert_str_eq(en->name, t[i].name);   /* header order is kept */
        ck_assert_ptr_eq(st_find(&sf, t[i].name), en);
        ck_assert_int_eq(en->ndim, t[i].ndim);
        size_t numel = 1;
        for (int k = 0; k < t[i].ndim; k++) {
            ck_assert_int_eq(en->shape[k], t[i].shape[k]);
            numel *= (size_t)t[i].shape[k];
        }
        ck_assert_uint_eq(en->numel, numel);
        float got[12];
        memset(got, 0xAB, sizeof got);
        ck_assert_msg(st_read_expect(&sf, t[i].name, t[i].ndim, t[i].shape, got, &e) == 0, "%s", e.msg);
        if (numel) ck_assert_msg(memcmp(got, t[i].data, numel * sizeof(float)) == 0, "%s differs", t[i].name);
    }
    st_close(&sf);
    st_close(&sf);   /* harmless twice */
}
END_TEST

START_TEST(test_save_overwrites) {
    const char *path = tpath("m.safetensors");
    const int s1[1] = {2}, s2[1] = {3};
    const float x1[2] = {1, 2}, x2[3] = {4, 5, 6};
    Err e = {0};
    const StTensor t1 = {"x", 1, s1, x1}, t2 = {"y", 1, s2, x2};
    ck_assert(st_save(path, &t1, 1, NULL, 0, &e) == 0);
    ck_assert(st_save(path, &t2, 1, NULL, 0, &e) == 0);
    StFile sf;
    ck_assert_msg(st_open(&sf, path, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(sf.n_entries, 1);
    ck_assert_int_eq(sf.n_meta, 0);
    float got[3];
    ck_assert(st_read_expect(&sf, "y", 1, s2, got, &e) == 0);
    ck_assert(memcmp(got, x2, sizeof got) == 0);
    st_close(&sf);
}
END_TEST

/* A file written by another tool: whitespace in the JSON, no padding (data not aligned),
 * tensors stored out of header order, a zero-size tensor, an empty metadata map. */
START_TEST(test_read_foreign_layout) {
    const char *hdr =
        "{\n  \"b\": {\"shape\": [2], \"dtype\": \"F32\", \"data_offsets\": [0, 8]},\n"
        "  \"a\": {\"dtype\": \"F32\", \"shape\": [1, 1], \"data_offsets\": [8, 12], \"extra\": null},\n"
        "  \"z\": {\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": [12, 12]},\n"
        "  \"__metadata__\": {}\n}";
    const char *path = tpath("foreign.safetensors");
    write_file(path, hdr, 12);
    StFile sf;
    Err e = {0};
    ck_assert_msg(st_open(&sf, path, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(sf.n_entries, 3);
    ck_assert_int_eq(sf.n_meta, 0);
    float b[2], a[1];
    const int sb[1] = {2}, sa[2] = {1, 1};
    ck_assert(st_read_expect(&sf, "b", 1, sb, b, &e) == 0);
    ck_assert(st_read_expect(&sf, "a", 2, sa, a, &e) == 0);
    unsigned char want_b[8] = {0, 1, 2, 3, 4, 5, 6, 7}, want_a[4] = {8, 9, 10, 11};
    ck_assert(memcmp(b, want_b, 8) == 0);
    ck_assert(memcmp(a, want_a, 4) == 0);
    st_close(&sf);
}
END_TEST

START_TEST(test_missing_file) {
    expect_open_fails(tpath("nope.safetensors"), "No such file");
}
END_TEST

START_TEST(test_directory) {
    expect_open_fails(tmp_dir, "is a directory");
}
END_TEST

START_TEST(test_empty_file) {
    const char *path = tpath("empty.safetensors");
    write_bytes(path, "", 0);
    expect_open_fails(path, "too short");
}
END_TEST

START_TEST(test_truncated_short) {
    const char *path = tpath("short.safetensors");
    write_bytes(path, "\x10\0\0\0\0", 5);
    expect_open_fails(path, "too short");
}
END_TEST

/* A valid file cut short inside its data section: the offsets no longer fit. */
START_TEST(test_truncated_data) {
    const char *path = tpath("cut.safetensors");
    const int s[1] = {16};
    float x[16] = {0};
    const StTensor t = {"x", 1, s, x};
    Err e = {0};
    ck_assert(st_save(path, &t, 1, NULL, 0, &e) == 0);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(truncate(path, st.st_size - 4), 0);
    expect_open_fails(path, "out of range");
}
END_TEST

/* The file shrinks after st_open validated it: st_read must report, not crash. */
START_TEST(test_truncated_after_open) {
    const char *path = tpath("shrink.safetensors");
    const int s[1] = {16};
    float x[16] = {0};
    const StTensor t = {"x", 1, s, x};
    Err e = {0};
    ck_assert(st_save(path, &t, 1, NULL, 0, &e) == 0);
    StFile sf;
    ck_assert(st_open(&sf, path, &e) == 0);
    ck_assert_int_eq(truncate(path, (off_t)sf.data_start + 10), 0);
    float got[16];
    ck_assert_int_eq(st_read_expect(&sf, "x", 1, s, got, &e), -1);
    ck_assert_msg(strstr(e.msg, "short read") && strstr(e.msg, "'x'"), "got '%s'", e.msg);
    st_close(&sf);
}
END_TEST

START_TEST(test_huge_header_length) {
    const char *path = tpath("huge.safetensors");
    write_file_len(path, 1ULL << 60, "{}", 0);
    expect_open_fails(path, "exceeds");
    /* Over the cap but inside a (sparse) file: still refused before allocating. */
    write_file_len(path, ST_MAX_HEADER_BYTES + 1, "{}", 0);
    ck_assert_int_eq(truncate(path, (off_t)(ST_MAX_HEADER_BYTES + 64)), 0);
    expect_open_fails(path, "exceeds");
}
END_TEST

START_TEST(test_header_past_end) {
    const char *path = tpath("past.safetensors");
    write_file_len(path, 100, "{}", 10);
    expect_open_fails(path, "runs past the end of the file");
}
END_TEST

START_TEST(test_bad_json) {
    const char *path = tpath("bad.safetensors");
    write_file(path, "{\"x\": {\"dtype\": \"F32\",", 0);
    expect_open_fails(path, "not valid JSON");
}
END_TEST

START_TEST(test_not_object) {
    const char *path = tpath("arr.safetensors");
    write_file(path, "[1, 2, 3]", 0);
    expect_open_fails(path, "not a JSON object");
}
END_TEST

START_TEST(test_offsets_out_of_range) {
    const char *path = tpath("range.safetensors");
    write_file(path, "{\"x\":{\"dtype\":\"F32\",\"shape\":[100],\"data_offsets\":[0,400]}}", 16);
    expect_open_fails(path, "out of range");
}
END_TEST

START_TEST(test_end_before_begin) {
    const char *path = tpath("order.safetensors");
    write_file(path, "{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", 16);
    expect_open_fails(path, "end before begin");
}
END_TEST

START_TEST(test_wrong_dtype) {
    const char *path = tpath("f16.safetensors");
    write_file(path, "{\"x\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4);
    expect_open_fails(path, "tensor 'x': dtype F16 not supported (only F32)");
}
END_TEST

START_TEST(test_size_mismatch) {
    const char *path = tpath("size.safetensors");
    write_file(path, "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,20]}}", 24);
    expect_open_fails(path, "shape [2, 3] needs 24 bytes but data_offsets span 20");
}
END_TEST

START_TEST(test_expect_shape_mismatch) {
    const char *path = tpath("shape.safetensors");
    const int s[2] = {3, 4}, want[2] = {4, 3};
    float x[12] = {0};
    const StTensor t = {"w", 2, s, x};
    Err e = {0};
    ck_assert(st_save(path, &t, 1, NULL, 0, &e) == 0);
    StFile sf;
    ck_assert(st_open(&sf, path, &e) == 0);
    ck_assert_int_eq(st_read_expect(&sf, "w", 2, want, x, &e), -1);
    ck_assert_msg(strstr(e.msg, "tensor 'w': shape [3, 4] in file, expected [4, 3]"), "got '%s'", e.msg);
    const int want1[1] = {12};
    ck_assert_int_eq(st_read_expect(&sf, "w", 1, want1, x, &e), -1);
    ck_assert_msg(strstr(e.msg, "shape [3, 4] in file, expected [12]"), "got '%s'", e.msg);
    st_close(&sf);
}
END_TEST

START_TEST(test_expect_missing_tensor) {
    const char *path = tpath("missing.safetensors");
    const int s[1] = {2};
    float x[2] = {0};
    const StTensor t = {"w", 1, s, x};
    Err e = {0};
    ck_assert(st_save(path, &t, 1, NULL, 0, &e) == 0);
    StFile sf;
    ck_assert(st_open(&sf, path, &e) == 0);
    ck_assert_int_eq(st_read_expect(&sf, "ln_f.weight", 1, s, x, &e), -1);
    ck_assert_msg(strstr(e.msg, "tensor 'ln_f.weight' not found"), "got '%s'", e.msg);
    st_close(&sf);
}
END_TEST

START_TEST(test_meta_not_string) {
    const char *path = tpath("meta.safetensors");
    write_file(path, "{\"__metadata__\":{\"format\":\"attnlab\",\"step\":12}}", 0);
    expect_open_fails(path, "value for 'step' is not a string");
}
END_TEST

START_TEST(test_save_duplicate_name) {
    const char *path = tpath("dup.safetensors");
    const int s[1] = {1};
    const float x[1] = {1};
    const StTensor t[3] = {{"a", 1, s, x}, {"b", 1, s, x}, {"a", 1, s, x}};
    Err e = {0};
    ck_assert_int_eq(st_save(path, t, 3, NULL, 0, &e), -1);
    ck_assert_msg(strstr(e.msg, "'a' given more than once"), "got '%s'", e.msg);
    ck_assert(!exists(path));
    ck_assert(!exists(tpath("dup.safetensors.tmp")));
}
END_TEST

START_TEST(test_save_bad_names) {
    const char *path = tpath("names.safetensors");
    const int s[1] = {1};
    const float x[1] = {1};
    Err e = {0};
    const StTensor empty = {"", 1, s, x}, reserved = {"__metadata__", 1, s, x};
    ck_assert_int_eq(st_save(path, &empty, 1, NULL, 0, &e), -1);
    ck_assert_msg(strstr(e.msg, "empty name"), "got '%s'", e.msg);
    ck_assert_int_eq(st_save(path, &reserved, 1, NULL, 0, &e), -1);
    ck_assert_msg(strstr(e.msg, "reserved"), "got '%s'", e.msg);
    const StMeta meta[2] = {{"k", "1"}, {"k", "2"}};
    ck_assert_int_eq(st_save(path, NULL, 0, meta, 2, &e), -1);
    ck_assert_msg(strstr(e.msg, "metadata key 'k' given more than once"), "got '%s'", e.msg);
    ck_assert(!exists(path));
}
END_TEST

START_TEST(test_save_no_dir) {
    char path[1024];
    snprintf(path, sizeof path, "%s/no/such/dir/model.safetensors", tmp_dir);
    const int s[1] = {1};
    const float x[1] = {1};
    const StTensor t = {"a", 1, s, x};
    Err e = {0};
    ck_assert_int_eq(st_save(path, &t, 1, NULL, 0, &e), -1);
    ck_assert_msg(strstr(e.msg, "cannot create") && strstr(e.msg, "No such file"), "got '%s'", e.msg);
    ck_assert(!exists(path));
    snprintf(path, sizeof path, "%s/no", tmp_dir);
    ck_assert(!exists(path));
}
END_TEST

/* A FIFO (or any file that is not a regular one) is refused at once: opening
 * one for reading would block until a writer came. */
START_TEST(test_fifo_refused) {
    const char *path = tpath("fifo.safetensors");
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    expect_open_fails(path, "not a regular file");
}
END_TEST

/* A text file is "not a safetensors file", not a header length in the
 * quintillions. */
START_TEST(test_text_file) {
    const char *path = tpath("corpus.txt");
    const char *text = "The Fulton County Grand Jury said Friday an investigation of recent primary election...\n";
    write_bytes(path, text, strlen(text));
    expect_open_fails(path, "not a safetensors file");
}
END_TEST

/* A header length one byte short (the JSON still parses: the padding absorbs
 * it) shifts the data section by a byte: every tensor would read garbage, and
 * the last byte belongs to none. */
START_TEST(test_header_length_off_by_one) {
    const char *path = tpath("shift.safetensors");
    const int s[1] = {4};
    const float x[4] = {1, 2, 3, 4};
    const StTensor t = {"abc", 1, s, x}; /* a 57-byte JSON, padded with 7 spaces */
    Err e = {0};
    ck_assert(st_save(path, &t, 1, NULL, 0, &e) == 0);
    FILE *f = fopen(path, "r+b");
    ck_assert_ptr_nonnull(f);
    unsigned char len[8], last;
    ck_assert_uint_eq(fread(len, 1, 8, f), 8);
    ck_assert_int_eq(fseek(f, 8 + len[0] - 1, SEEK_SET), 0);
    ck_assert_uint_eq(fread(&last, 1, 1, f), 1);
    ck_assert_msg(last == ' ', "the header is not padded, so this case tests nothing");
    len[0]--;
    ck_assert_int_eq(fseek(f, 0, SEEK_SET), 0);
    ck_assert_uint_eq(fwrite(len, 1, 8, f), 8);
    ck_assert_int_eq(fclose(f), 0);
    expect_open_fails(path, "data section bytes [16, 17) belong to no tensor");
}
END_TEST

/* More broken headers, one loop iteration each. */
/* header_len 0 means strlen(header); data_len zero bytes follow the header. */
static const struct { const char *header; size_t header_len, data_len; const char *want; } bad_headers[] = {
    {"{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
     "\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 0, 8, "'x' appears more than once"},
    {"{\"x\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 0, 4, "not a non-negative integer"},
    {"{\"x\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 0, 4, "not a non-negative integer"},
    {"{\"x\":{\"dtype\":\"F32\",\"shape\":[\"2\"],\"data_offsets\":[0,8]}}", 0, 8, "not a non-negative integer"},
    {"{\"x\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1],\"data_offsets\":[0,4]}}", 0, 4, "5 dims"},
    {"{\"x\":{\"dtype\":\"F32\",\"shape\":{},\"data_offsets\":[0,4]}}", 0, 4, "non-array shape"},
    {"{\"x\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 0, 4, "non-string dtype"},
    {"{\"x\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 0, 8, "dtype I64 not supported"},
    {"{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 0, 4, "two non-negative integers"},
    {"{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 0, 8, "two non-negative integers"},
    {"{\"x\":{\"dtype\":\"F32\",\"shape\":[1]}}", 0, 4, "two non-negative integers"},
    {"{\"x\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],\"data_offsets\":[0,4]}}", 0, 4,
     "too many elements"},
    {"{\"x\":[1,2]}", 0, 0, "entry is not a JSON object"},
    {"{\"__metadata__\":[\"a\"]}", 0, 0, "__metadata__ is not a JSON object"},
    {"{\"__metadata__\":{\"a\":\"1\",\"a\":\"2\"}}", 0, 0, "'a' appears more than once"},
    {"{}  x", 0, 0, "stray bytes after the JSON"},
    {"{}\0\0", 4, 0, "stray bytes after the JSON"},
    {"", 0, 0, "not valid JSON"},
    /* the tensors must tile the data section: no overlap, no gap, nothing after */
    {"{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
     "\"y\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 0, 12,
     "tensors 'x' and 'y' overlap (data_offsets [0, 8] and [4, 12])"},
    {"{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
     "\"y\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 0, 4, "tensors 'x' and 'y' overlap"},
    {"{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
     "\"y\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", 0, 12,
     "data section bytes [4, 8) belong to no tensor (before 'y')"},
    {"{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 0, 8,
     "data section bytes [0, 4) belong to no tensor (before 'x')"},
    {"{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 0, 5,
     "data section bytes [4, 5) belong to no tensor (after the last one)"},
    {"{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
     "\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]}}", 0, 8, "tensors 'x' and 'z' overlap"},
    {"{}", 0, 4, "data section bytes [0, 4) belong to no tensor"},
    /* a name with a newline (found by the fuzzer): the error stays one line */
    {"{\"x\\ny\\u001b[2J\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]}}", 0, 4,
     "tensor 'x?y?[2J': dtype F16 not supported"},
};

START_TEST(test_bad_headers) {
    const char *path = tpath("bad.safetensors");
    const char *h = bad_headers[_i].header;
    size_t hl = bad_headers[_i].header_len ? bad_headers[_i].header_len : strlen(h);
    size_t dl = bad_headers[_i].data_len;
    unsigned char buf[512];
    ck_assert_uint_le(8 + hl + dl, sizeof buf);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(buf + 8, h, hl);
    memset(buf + 8 + hl, 0, dl);
    write_bytes(path, buf, 8 + hl + dl);
    expect_open_fails(path, bad_headers[_i].want);
}
END_TEST

Suite *safetensors_suite(void) {
    Suite *s = suite_create("safetensors");
    TCase *tc = tcase_create("safetensors");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_round_trip);
    tcase_add_test(tc, test_save_overwrites);
    tcase_add_test(tc, test_read_foreign_layout);
    tcase_add_test(tc, test_missing_file);
    tcase_add_test(tc, test_directory);
    tcase_add_test(tc, test_empty_file);
    tcase_add_test(tc, test_truncated_short);
    tcase_add_test(tc, test_truncated_data);
    tcase_add_test(tc, test_truncated_after_open);
    tcase_add_test(tc, test_huge_header_length);
    tcase_add_test(tc, test_header_past_end);
    tcase_add_test(tc, test_bad_json);
    tcase_add_test(tc, test_not_object);
    tcase_add_test(tc, test_offsets_out_of_range);
    tcase_add_test(tc, test_end_before_begin);
    tcase_add_test(tc, test_wrong_dtype);
    tcase_add_test(tc, test_size_mismatch);
    tcase_add_test(tc, test_expect_shape_mismatch);
    tcase_add_test(tc, test_expect_missing_tensor);
    tcase_add_test(tc, test_meta_not_string);
    tcase_add_test(tc, test_save_duplicate_name);
    tcase_add_test(tc, test_save_bad_names);
    tcase_add_test(tc, test_save_no_dir);
    tcase_add_test(tc, test_fifo_refused);
    tcase_add_test(tc, test_text_file);
    tcase_add_test(tc, test_header_length_off_by_one);
    tcase_add_loop_test(tc, test_bad_headers, 0, (int)(sizeof bad_headers / sizeof bad_headers[0]));
    suite_add_tcase(s, tc);
    return s;
}
