/* test_data.c: the corpus (data/corpus.h): every way opening can fail gives one clear error,
 * the split follows its rounding rule, training batches stay inside the train split and follow
 * the seed, validation windows are fixed, evenly spaced and inside the validation split, and
 * every byte value is a token. Files live in a fresh temporary directory per test.
 *
 * Masked-LM batches (data/mlm.h): the number of chosen positions, the 80/10/10 corruption and
 * the targets, uniform choice, reproducible training masks from the data RNG, and validation
 * masks fixed by the window index alone. */
#include <check.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "data/corpus.h"
#include "data/mlm.h"
#include "test_util.h"

static char tmp_dir[512];

static void setup(void) {
    test_tmpdir(tmp_dir, sizeof tmp_dir, "data");
}

static void teardown(void) { test_rmtree(tmp_dir); }

static const char *tpath(const char *name) {
    static char buf[1024];
    snprintf(buf, sizeof buf, "%s/%s", tmp_dir, name);
    return buf;
}

static void write_bytes(const char *path, const void *bytes, size_t n) {
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(bytes, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

/* A file of n bytes, byte i = fill(i). */
static const char *make_file(const char *name, size_t n, unsigned char (*fill)(size_t)) {
    const char *path = tpath(name);
    unsigned char *buf = malloc(n ? n : 1);
    for (size_t i = 0; i < n; i++) buf[i] = fill(i);
    write_bytes(path, buf, n);
    free(buf);
    return path;
}

static unsigned char fill_text(size_t i) { return (unsigned char)('a' + (i * 7 + i / 26) % 26); }
static unsigned char fill_ramp(size_t i) { return (unsigned char)i; }

/* The file must be refused with -1, an error that starts with the path, contains `want` and is
 * one line, and a zeroed Corpus (nothing to free). */
static void expect_open_fails(const char *path, double f, int context, const char *want) {
    Corpus c;
    memset(&c, 0xab, sizeof c);
    Err e = {0};
    ck_assert_int_eq(corpus_open(&c, path, f, context, &e), -1);
    ck_assert_msg(strstr(e.msg, want) != NULL, "error '%s' lacks '%s'", e.msg, want);
    ck_assert_msg(strncmp(e.msg, path, strlen(path)) == 0, "error '%s' does not start with the path", e.msg);
    ck_assert_msg(strchr(e.msg, '\n') == NULL, "error '%s' spans lines", e.msg);
    ck_assert_ptr_null(c.path);
    ck_assert_ptr_null(c.bytes);
    ck_assert_uint_eq(c.size, 0);
    corpus_close(&c); /* harmless after a failed open */
}

static void open_ok(Corpus *c, const char *path, double f, int context) {
    Err e = {0};
    ck_assert_msg(corpus_open(c, path, f, context, &e) == 0, "%s", e.msg);
}

/* ------------------------------------------------------------------------------------ errors */

START_TEST(test_missing_file) {
    expect_open_fails(tpath("nope.txt"), 0.1, 8, "No such file");
}
END_TEST

START_TEST(test_directory) {
    expect_open_fails(tmp_dir, 0.1, 8, "is a directory");
}
END_TEST

START_TEST(test_fifo) {
    /* Opening a FIFO for reading would block until a writer comes; it must be refused at once. */
    const char *path = tpath("fifo");
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    expect_open_fails(path, 0.1, 8, "not a regular file");
}
END_TEST

START_TEST(test_empty_file) {
    const char *path = tpath("empty.txt");
    write_bytes(path, "", 0);
    expect_open_fails(path, 0.1, 8, "empty");
}
END_TEST

START_TEST(test_unreadable) {
    const char *path = make_file("secret.txt", 1000, fill_text);
    ck_assert_int_eq(chmod(path, 0), 0);
    if (geteuid() != 0) {
        expect_open_fails(path, 0.1, 8, "Permission denied");
        return;
    }
    /* Root reads a mode-000 file anyway, so the check is made as user "nobody" in a child
     * (after opening the directory to it). If the child cannot drop privileges (no CAP_SETUID in
     * a container, say), the case cannot be tested here and is skipped. */
    ck_assert_int_eq(chmod(tmp_dir, 0755), 0);
    pid_t pid = fork();
    ck_assert_int_ne(pid, -1);
    if (pid == 0) {
        if (setgid(65534) != 0 || setuid(65534) != 0) _exit(77);
        if (access(tmp_dir, X_OK) != 0) _exit(77); /* $TMPDIR itself is closed to "nobody" */
        Corpus c;
        Err e = {0};
        int rc = corpus_open(&c, path, 0.1, 8, &e);
        if (rc == -1 && strstr(e.msg, "Permission denied") && strncmp(e.msg, path, strlen(path)) == 0) _exit(0);
        fprintf(stderr, "test_unreadable: rc %d, error '%s'\n", rc, e.msg);
        _exit(1);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status));
    if (WEXITSTATUS(status) == 77) return; /* skipped: cannot become another user */
    ck_assert_msg(WEXITSTATUS(status) == 0, "an unreadable file was not refused with 'Permission denied'");
}
END_TEST

START_TEST(test_bad_val_fraction) {
    const char *path = make_file("text.txt", 1000, fill_text);
    const double bad[] = {0.0, 1.0, -0.1, 1.5, NAN};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) expect_open_fails(path, bad[k], 8, "val_fraction");
    expect_open_fails(path, 0.1, 0, "context 0");
}
END_TEST

START_TEST(test_train_split_too_short) {
    /* 100 bytes, 0.9 held out: the train split has 10 bytes, context 20 needs 21. */
    const char *path = make_file("short.txt", 100, fill_text);
    expect_open_fails(path, 0.9, 20, "train split has 10 bytes");
    expect_open_fails(path, 0.9, 20, "needs at least 21");
    Corpus c;
    Err e = {0};
    ck_assert_int_eq(corpus_open(&c, path, 0.9, 20, &e), -1);
    ck_assert_msg(strstr(e.hint, "context") && strstr(e.hint, "val_fraction"), "hint '%s'", e.hint);
    /* One byte shorter than a window is too short; exactly one window is enough. */
    expect_open_fails(path, 0.9, 10, "train split has 10 bytes");
    open_ok(&c, path, 0.9, 9);
    corpus_close(&c);
}
END_TEST

START_TEST(test_val_split_too_short) {
    /* 100 bytes, 0.05 held out: the validation split has 5 bytes, context 10 needs 11. */
    const char *path = make_file("short.txt", 100, fill_text);
    expect_open_fails(path, 0.05, 10, "validation split has 5 bytes");
    expect_open_fails(path, 0.05, 10, "needs at least 11");
    Corpus c;
    Err e = {0};
    ck_assert_int_eq(corpus_open(&c, path, 0.05, 10, &e), -1);
    ck_assert_msg(strstr(e.hint, "context") && strstr(e.hint, "val_fraction"), "hint '%s'", e.hint);
    /* A fraction that rounds to no byte at all leaves an empty validation split. */
    expect_open_fails(path, 0.004, 1, "validation split has 0 bytes");
    open_ok(&c, path, 0.05, 4);
    corpus_close(&c);
}
END_TEST

/* A corpus too short for any split says so, not "context 1 needs at least 2"
 * (./extrapolate opens corpora at context 1, which no user chose). */
START_TEST(test_corpus_too_short) {
    const char *path = make_file("one.txt", 1, fill_text);
    expect_open_fails(path, 0.1, 1, "the corpus is too short: 1 byte,");
    Corpus c;
    Err e = {0};
    ck_assert_int_eq(corpus_open(&c, path, 0.1, 1, &e), -1);
    ck_assert_msg(!strstr(e.msg, "context"), "error '%s' blames the context", e.msg);
    ck_assert_msg(strstr(e.hint, "longer"), "hint '%s'", e.hint);
    /* just long enough for one window on each side, at context 1 */
    path = make_file("four.txt", 4, fill_text);
    open_ok(&c, path, 0.5, 1);
    corpus_close(&c);
    path = make_file("three.txt", 3, fill_text);
    expect_open_fails(path, 0.5, 1, "the corpus is too short: 3 bytes,");
}
END_TEST

/* ------------------------------------------------------------------------------------- split */

START_TEST(test_split_rule) {
    /* val_bytes = round(val_fraction * size) to nearest, halves up; train_end = size - val_bytes. */
    const struct {
        size_t size;
        double f;
        size_t train_end;
    } cases[] = {
        {1000, 0.1, 900},  /* exact */
        {1001, 0.1, 901},  /* 100.1 rounds down */
        {1009, 0.1, 908},  /* 100.9 rounds up */
        {100, 0.29, 71},   /* 0.29 * 100 is 28.999999999999996 in binary: rounding gives 29 */
        {7, 0.5, 3},       /* 3.5 rounds up to 4 held out */
        {4096, 0.25, 3072},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const char *path = make_file("split.txt", cases[k].size, fill_ramp);
        Corpus c;
        open_ok(&c, path, cases[k].f, 1);
        ck_assert_str_eq(c.path, path);
        ck_assert_uint_eq(c.size, cases[k].size);
        ck_assert_uint_eq(c.train_end, cases[k].train_end);
        ck_assert_uint_eq(corpus_train_size(&c), cases[k].train_end);
        ck_assert_uint_eq(corpus_val_size(&c), cases[k].size - cases[k].train_end);
        for (size_t i = 0; i < c.size; i++) ck_assert_uint_eq(c.bytes[i], (unsigned char)i);
        corpus_close(&c);
        ck_assert_ptr_null(c.bytes);
        ck_assert_ptr_null(c.path);
        corpus_close(&c); /* twice is harmless */
    }
}
END_TEST

/* ----------------------------------------------------------------------------------- batches */

/* 100 bytes: the train split (80 bytes) holds 0..79, so a window's offset is its first byte;
 * the validation split holds 0x80 and up, so a window that reaches into it shows. */
static unsigned char fill_marked(size_t i) { return (unsigned char)(i < 80 ? i : 0x80 + (i - 80)); }

START_TEST(test_train_batch_windows) {
    const char *path = make_file("marked.txt", 100, fill_marked);
    Corpus c;
    open_ok(&c, path, 0.2, 8);
    ck_assert_uint_eq(c.train_end, 80);
    enum { B = 7, T = 5, ROUNDS = 500 };
    const int max_off = 80 - T - 1;
    int inputs[B * T], targets[B * T];
    int seen[80] = {0};
    Rng rng;
    rng_seed(&rng, 1234);
    for (int r = 0; r < ROUNDS; r++) {
        corpus_train_batch(&c, &rng, B, T, inputs, targets);
        for (int b = 0; b < B; b++) {
            int off = inputs[b * T];
            ck_assert_int_ge(off, 0);
            ck_assert_int_le(off, max_off);
            seen[off]++;
            for (int t = 0; t < T; t++) {
                ck_assert_int_eq(inputs[b * T + t], off + t);        /* consecutive train bytes */
                ck_assert_int_eq(targets[b * T + t], off + t + 1);   /* shifted by one */
                ck_assert_int_lt(targets[b * T + t], 80);            /* never into validation */
                if (t + 1 < T) ck_assert_int_eq(targets[b * T + t], inputs[b * T + t + 1]);
            }
        }
    }
    /* Uniform over [0, train_end - T - 1]: both ends and everything between are drawn. */
    for (int off = 0; off <= max_off; off++) ck_assert_msg(seen[off] > 0, "offset %d never drawn", off);
    for (int off = max_off + 1; off < 80; off++) ck_assert_int_eq(seen[off], 0);
    corpus_close(&c);
}
END_TEST

START_TEST(test_train_batch_seeded) {
    const char *path = make_file("text.txt", 5000, fill_ramp);
    Corpus c;
    open_ok(&c, path, 0.1, 32);
    enum { B = 16, T = 32 };
    static int in1[B * T], tg1[B * T], in2[B * T], tg2[B * T];
    Rng r1, r2;
    rng_seed(&r1, 42);
    rng_seed(&r2, 42);
    for (int step = 0; step < 3; step++) {
        corpus_train_batch(&c, &r1, B, T, in1, tg1);
        corpus_train_batch(&c, &r2, B, T, in2, tg2);
        ck_assert_mem_eq(in1, in2, sizeof in1);
        ck_assert_mem_eq(tg1, tg2, sizeof tg1);
    }
    ck_assert_mem_eq(&r1, &r2, sizeof r1);
    /* A batch draws exactly B offsets, one rng_below each (documented, so a resumed run that
     * restores the RNG state continues the same stream). */
    Rng r3;
    rng_seed(&r3, 7);
    Rng replay = r3;
    corpus_train_batch(&c, &r3, B, T, in1, tg1);
    for (int b = 0; b < B; b++) {
        uint32_t off = rng_below(&replay, (uint32_t)(c.train_end - T));
        ck_assert_int_eq(in1[b * T], c.bytes[off]);
    }
    ck_assert_mem_eq(&r3, &replay, sizeof r3);

    rng_seed(&r1, 42);
    rng_seed(&r2, 43);
    corpus_train_batch(&c, &r1, B, T, in1, tg1);
    corpus_train_batch(&c, &r2, B, T, in2, tg2);
    ck_assert_msg(memcmp(in1, in2, sizeof in1) != 0, "seeds 42 and 43 gave the same batch");
    corpus_close(&c);
}
END_TEST

START_TEST(test_train_rows) {
    /* The ranks of a data-parallel run: rank r's rows of a batch of N B are rows [r B, (r + 1) B)
     * of the batch one process draws, clm and mlm alike, and every rank's RNG ends where that
     * process's does, so the ranks' rows together are its batch, step after step. */
    const char *path = make_file("ramp.txt", 5000, fill_ramp);
    Corpus c;
    open_ok(&c, path, 0.1, 32);
    enum { N = 3, B = 4, T = 32 };
    static int whole_in[N * B * T], whole_tg[N * B * T], in[B * T], tg[B * T], scratch[2 * T];
    for (int mlm = 0; mlm <= 1; mlm++) {
        Rng one, rank[N];
        rng_seed(&one, 42);
        for (int r = 0; r < N; r++) rng_seed(&rank[r], 42);
        for (int step = 0; step < 3; step++) {
            if (mlm)
                mlm_train_batch(&c, &one, N * B, T, whole_in, whole_tg);
            else
                corpus_train_batch(&c, &one, N * B, T, whole_in, whole_tg);
            for (int r = 0; r < N; r++) {
                if (mlm)
                    mlm_train_rows(&c, &rank[r], N * B, r * B, B, T, in, tg, scratch);
                else
                    corpus_train_rows(&c, &rank[r], N * B, r * B, B, T, in, tg);
                ck_assert_mem_eq(in, whole_in + r * B * T, sizeof in);
                ck_assert_mem_eq(tg, whole_tg + r * B * T, sizeof tg);
                ck_assert_mem_eq(&rank[r], &one, sizeof one);
            }
        }
    }
    corpus_close(&c);
}
END_TEST

/* -------------------------------------------------------------------------------- validation */

START_TEST(test_val_count) {
    /* 1000 bytes, 0.3 held out: a validation split of 300 bytes at 700. */
    const char *path = make_file("text.txt", 1000, fill_ramp);
    Corpus c;
    open_ok(&c, path, 0.3, 16);
    ck_assert_uint_eq(c.train_end, 700);
    ck_assert_int_eq(corpus_val_count(&c, 16, 0), 300 / 17);   /* 17 windows of 17 bytes */
    ck_assert_int_eq(corpus_val_count(&c, 16, 100), 17);       /* capped by what fits */
    ck_assert_int_eq(corpus_val_count(&c, 16, 17), 17);
    ck_assert_int_eq(corpus_val_count(&c, 16, 5), 5);
    ck_assert_int_eq(corpus_val_count(&c, 16, 1), 1);
    ck_assert_int_eq(corpus_val_count(&c, 9, 0), 30);          /* 300 / 10 exactly */
    ck_assert_int_eq(corpus_val_count(&c, 299, 0), 1);         /* one window of the whole split */
    ck_assert_int_eq(corpus_val_count(&c, 300, 0), 0);         /* longer than the split */
    corpus_close(&c);
}
END_TEST

START_TEST(test_val_windows_all) {
    /* With no cap the windows tile the split from its start, each T + 1 bytes, none overlapping. */
    const char *path = make_file("text.txt", 1000, fill_text);
    Corpus c;
    open_ok(&c, path, 0.3, 16);
    enum { T = 16 };
    long n = corpus_val_count(&c, T, 0);
    int in[T], tg[T];
    for (long i = 0; i < n; i++) {
        size_t off = corpus_val_offset(&c, T, 0, i);
        ck_assert_uint_eq(off, c.train_end + (size_t)i * (T + 1));
        ck_assert_uint_le(off + T + 1, c.size);
        corpus_val_window(&c, T, 0, i, in, tg);
        for (int t = 0; t < T; t++) {
            ck_assert_int_eq(in[t], c.bytes[off + t]);
            ck_assert_int_eq(tg[t], c.bytes[off + t + 1]);
        }
    }
    corpus_close(&c);
}
END_TEST

START_TEST(test_val_windows_spaced) {
    /* 10000 bytes, 0.25 held out: 2500 bytes at 7500; T = 31 gives a grid of 78 windows. */
    const char *path = make_file("text.txt", 10000, fill_text);
    Corpus c;
    open_ok(&c, path, 0.25, 64);
    enum { T = 31 };
    const size_t L = T + 1;
    const long full = 2500 / L;
    const long caps[] = {1, 2, 5, 7, 13, 40, 77};
    for (size_t k = 0; k < sizeof caps / sizeof caps[0]; k++) {
        long n = corpus_val_count(&c, T, caps[k]);
        ck_assert_int_eq(n, caps[k]);
        ck_assert_uint_eq(corpus_val_offset(&c, T, caps[k], 0), c.train_end); /* starts the split */
        for (long i = 0; i < n; i++) {
            size_t off = corpus_val_offset(&c, T, caps[k], i);
            /* the documented rule: grid slot floor(i * full / count) */
            ck_assert_uint_eq(off, c.train_end + (size_t)(i * full / n) * L);
            ck_assert_uint_ge(off, c.train_end);
            ck_assert_uint_le(off + L, c.size);
            ck_assert_uint_eq((off - c.train_end) % L, 0);
            if (i > 0) {
                /* evenly spaced: gaps between starts are floor or ceil of full / n slots */
                size_t gap = (off - corpus_val_offset(&c, T, caps[k], i - 1)) / L;
                ck_assert_uint_ge(gap, (size_t)(full / n));
                ck_assert_uint_le(gap, (size_t)((full + n - 1) / n));
            }
        }
        /* spread over the whole split: the last window lies in the last full / n slots */
        size_t last = (corpus_val_offset(&c, T, caps[k], n - 1) - c.train_end) / L;
        ck_assert_uint_ge(last + (size_t)((full + n - 1) / n), (size_t)full);
    }
    corpus_close(&c);
}
END_TEST

START_TEST(test_val_windows_deterministic) {
    /* The same file, split and T give the same windows: across opens, and whatever the train
     * side of the program has drawn meanwhile. */
    const char *path = make_file("text.txt", 3000, fill_text);
    enum { T = 20, CAP = 9 };
    int in1[CAP][T], tg1[CAP][T], in2[T], tg2[T], bi[4 * T], bt[4 * T];
    Corpus c;
    open_ok(&c, path, 0.2, T);
    ck_assert_int_eq(corpus_val_count(&c, T, CAP), CAP);
    for (long i = 0; i < CAP; i++) corpus_val_window(&c, T, CAP, i, in1[i], tg1[i]);
    corpus_close(&c);

    open_ok(&c, path, 0.2, 64); /* the context given at open does not move the windows */
    Rng rng;
    rng_seed(&rng, 99);
    for (long i = 0; i < CAP; i++) {
        corpus_train_batch(&c, &rng, 4, T, bi, bt);
        corpus_val_window(&c, T, CAP, i, in2, tg2);
        ck_assert_mem_eq(in1[i], in2, sizeof in2);
        ck_assert_mem_eq(tg1[i], tg2, sizeof tg2);
    }
    corpus_close(&c);
}
END_TEST

/* --------------------------------------------------------------------------------- raw bytes */

START_TEST(test_binary_bytes) {
    /* Every byte value, NUL and 0xff included, is a token 0..255; nothing is decoded, and
     * invalid UTF-8 is as good as any other text. */
    const char *path = make_file("binary.bin", 2048, fill_ramp);
    Corpus c;
    open_ok(&c, path, 0.5, 255);
    ck_assert_uint_eq(c.train_end, 1024);
    enum { T = 255 };
    int in[T], tg[T];
    /* validation window 0 starts at 1024 = 4 * 256, so it reads 0x00, 0x01, ..., 0xff */
    corpus_val_window(&c, T, 0, 0, in, tg);
    for (int t = 0; t < T; t++) {
        ck_assert_int_eq(in[t], t);
        ck_assert_int_eq(tg[t], t + 1);
    }
    ck_assert_int_eq(in[0], 0x00);
    ck_assert_int_eq(tg[T - 1], 0xff);
    /* and the training side: 0xff is followed by 0x00, never a negative (signed char) token */
    Rng rng;
    rng_seed(&rng, 5);
    int bi[8 * T], bt[8 * T];
    for (int r = 0; r < 20; r++) {
        corpus_train_batch(&c, &rng, 8, T, bi, bt);
        for (int k = 0; k < 8 * T; k++) {
            ck_assert_int_ge(bi[k], 0);
            ck_assert_int_le(bi[k], 255);
            ck_assert_int_eq(bt[k], (bi[k] + 1) & 0xff);
        }
    }
    corpus_close(&c);
}
END_TEST

START_TEST(test_utf8_text) {
    /* UTF-8 text (here Chinese, 3 bytes a character) is read byte by byte. */
    const char *text = "\xe4\xb8\xad\xe6\x96\x87\xe6\x96\x87\xe6\x9c\xac abc \xe4\xb8\xad\xe6\x96\x87\n";
    const char *path = tpath("zh.txt");
    write_bytes(path, text, strlen(text));
    Corpus c;
    open_ok(&c, path, 0.4, 4);
    int in[4], tg[4];
    corpus_window(&c, 0, 4, in, tg);
    ck_assert_int_eq(in[0], 0xe4);
    ck_assert_int_eq(in[1], 0xb8);
    ck_assert_int_eq(tg[0], 0xb8);
    ck_assert_int_eq(tg[3], 0x96);
    corpus_close(&c);
}
END_TEST


/* --------------------------------------------------------------------------------- masked LM */

START_TEST(test_mlm_count) {
    /* max(1, round(0.15 T)), halves away from zero */
    static const int T[] = {1, 2, 6, 7, 10, 32, 100, 128, 1024};
    static const int want[] = {1, 1, 1, 1, 2, 5, 15, 19, 154};
    for (int i = 0; i < 9; i++) ck_assert_int_eq(mlm_count(T[i]), want[i]);
}
END_TEST

START_TEST(test_mlm_mask_rule) {
    /* Many windows of T = 40 bytes: exactly 6 chosen each; targets the original byte there and
     * -1 elsewhere; unchosen inputs untouched; chosen ones masked ~80%, a random byte ~10%,
     * unchanged ~10%; every position and every replacement byte equally likely. */
    enum { T = 40, ROWS = 20000 };
    const int n = mlm_count(T);
    ck_assert_int_eq(n, 6);
    Rng rng;
    rng_seed(&rng, 5);
    int in[T], tg[T], orig[T];
    long per_pos[T] = {0}, masked = 0, kept = 0, swapped = 0, chosen = 0;
    long byte_seen[256] = {0};
    /* plain ifs in the loop: a ck_assert per element costs a write to Check's pipe */
    char bad[160] = "";
    for (int r = 0; r < ROWS && !bad[0]; r++) {
        for (int t = 0; t < T; t++) orig[t] = in[t] = (int)((r * 31 + t * 7) % 256);
        mlm_mask_row(&rng, in, tg, T);
        int row_chosen = 0;
        for (int t = 0; t < T && !bad[0]; t++) {
            if (tg[t] < 0) {
                if (tg[t] != -1 || in[t] != orig[t])
                    snprintf(bad, sizeof bad, "row %d position %d: unchosen, but target %d, input %d (was %d)", r, t, tg[t],
                             in[t], orig[t]);
                continue;
            }
            row_chosen++;
            per_pos[t]++;
            if (tg[t] != orig[t]) snprintf(bad, sizeof bad, "row %d position %d: target %d, byte %d", r, t, tg[t], orig[t]);
            if (in[t] == MLM_MASK_ID) {
                masked++;
            } else if (in[t] < 0 || in[t] > 255) {
                snprintf(bad, sizeof bad, "row %d position %d: input %d", r, t, in[t]);
            } else {
                if (in[t] == orig[t])
                    kept++;
                else
                    swapped++;
                byte_seen[in[t]]++;
            }
        }
        if (!bad[0] && row_chosen != n) snprintf(bad, sizeof bad, "row %d: %d positions chosen, want %d", r, row_chosen, n);
        chosen += row_chosen;
    }
    ck_assert_msg(!bad[0], "%s", bad);
    ck_assert_int_eq(chosen, (long)ROWS * n);
    /* 120000 chosen: the fractions' standard deviations are about 0.001 */
    double fm = (double)masked / chosen, fk = (double)kept / chosen, fs = (double)swapped / chosen;
    ck_assert_msg(fabs(fm - 0.8) < 0.01, "masked fraction %g, want 0.8", fm);
    ck_assert_msg(fabs(fk - (0.1 + 0.1 / 256)) < 0.01, "unchanged fraction %g, want 0.1", fk);
    ck_assert_msg(fabs(fs - 0.1 * 255 / 256) < 0.01, "random-byte fraction %g, want 0.1", fs);
    /* each position is chosen with probability n / T = 0.15: 3000 of 20000, sd 50 */
    for (int t = 0; t < T; t++)
        ck_assert_msg(labs(per_pos[t] - ROWS * n / T) < 300, "position %d chosen %ld times, want ~%d", t, per_pos[t],
                      ROWS * n / T);
    /* the random bytes cover every value (about 47 draws each) */
    for (int b = 0; b < 256; b++) ck_assert_msg(byte_seen[b] > 0, "byte %d never drawn", b);
}
END_TEST

START_TEST(test_mlm_train_batch) {
    /* The windows of corpus_train_batch (the same offsets from the same seed), masked; the same
     * seed gives the same batches and leaves the RNG in the same state; the masks come after the
     * offsets in the stream. */
    const char *path = make_file("ramp.txt", 5000, fill_ramp);
    Corpus c;
    open_ok(&c, path, 0.1, 32);
    enum { B = 8, T = 32 };
    int in1[B * T], tg1[B * T], in2[B * T], tg2[B * T], plain[B * T], shifted[B * T];
    Rng r1, r2, r3;
    rng_seed(&r1, 42);
    rng_seed(&r2, 42);
    rng_seed(&r3, 42);
    for (int step = 0; step < 5; step++) {
        mlm_train_batch(&c, &r1, B, T, in1, tg1);
        mlm_train_batch(&c, &r2, B, T, in2, tg2);
        ck_assert_mem_eq(in1, in2, sizeof in1);
        ck_assert_mem_eq(tg1, tg2, sizeof tg1);
        /* replay: the offsets, then one mask per row */
        corpus_train_batch(&c, &r3, B, T, plain, shifted);
        for (int b = 0; b < B; b++) mlm_mask_row(&r3, plain + b * T, shifted + b * T, T);
        ck_assert_mem_eq(in1, plain, sizeof in1);
        ck_assert_mem_eq(tg1, shifted, sizeof tg1);
        for (int b = 0; b < B; b++) {
            int chosen = 0;
            for (int t = 0; t < T; t++) {
                int i = b * T + t;
                /* the window's first byte, from an unchosen or a chosen position */
                int first = tg1[b * T] >= 0 ? tg1[b * T] : in1[b * T];
                int byte = (first + t) % 256; /* a ramp: byte at off + t */
                if (tg1[i] >= 0) {
                    chosen++;
                    ck_assert_int_eq(tg1[i], byte);
                } else {
                    ck_assert_int_eq(in1[i], byte);
                }
            }
            ck_assert_int_eq(chosen, mlm_count(T));
        }
    }
    ck_assert_mem_eq(&r1, &r2, sizeof r1);
    ck_assert_mem_eq(&r1, &r3, sizeof r1);
    corpus_close(&c);
}
END_TEST

START_TEST(test_mlm_val_fixed) {
    /* Validation masks depend on the window index alone: the same across calls, across opens
     * and whatever the training side draws meanwhile; different between windows; the targets
     * are the window's bytes. */
    const char *path = make_file("text.txt", 6000, fill_text);
    enum { T = 40, CAP = 6 };
    int in1[CAP][T], tg1[CAP][T], in2[T], tg2[T], raw[T], rawt[T], bi[4 * T], bt[4 * T];
    Corpus c;
    open_ok(&c, path, 0.2, T);
    for (long i = 0; i < CAP; i++) {
        mlm_val_window(&c, T, CAP, i, in1[i], tg1[i]);
        corpus_val_window(&c, T, CAP, i, raw, rawt);
        int chosen = 0;
        for (int t = 0; t < T; t++) {
            if (tg1[i][t] >= 0) {
                chosen++;
                ck_assert_int_eq(tg1[i][t], raw[t]);
            } else {
                ck_assert_int_eq(in1[i][t], raw[t]);
            }
        }
        ck_assert_int_eq(chosen, mlm_count(T));
    }
    ck_assert_msg(memcmp(tg1[0], tg1[1], sizeof tg1[0]) != 0 || memcmp(in1[0], in1[1], sizeof in1[0]) != 0,
                  "windows 0 and 1 masked alike");
    corpus_close(&c);

    open_ok(&c, path, 0.2, 64);
    Rng rng;
    rng_seed(&rng, 3);
    for (long i = CAP - 1; i >= 0; i--) { /* any order */
        mlm_train_batch(&c, &rng, 4, T, bi, bt);
        mlm_val_window(&c, T, CAP, i, in2, tg2);
        ck_assert_mem_eq(in1[i], in2, sizeof in2);
        ck_assert_mem_eq(tg1[i], tg2, sizeof tg2);
    }
    corpus_close(&c);
}
END_TEST

Suite *data_suite(void) {
    Suite *s = suite_create("data");
    TCase *tc = tcase_create("corpus");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_missing_file);
    tcase_add_test(tc, test_directory);
    tcase_add_test(tc, test_fifo);
    tcase_add_test(tc, test_empty_file);
    tcase_add_test(tc, test_unreadable);
    tcase_add_test(tc, test_bad_val_fraction);
    tcase_add_test(tc, test_train_split_too_short);
    tcase_add_test(tc, test_val_split_too_short);
    tcase_add_test(tc, test_corpus_too_short);
    tcase_add_test(tc, test_split_rule);
    tcase_add_test(tc, test_train_batch_windows);
    tcase_add_test(tc, test_train_batch_seeded);
    tcase_add_test(tc, test_val_count);
    tcase_add_test(tc, test_val_windows_all);
    tcase_add_test(tc, test_val_windows_spaced);
    tcase_add_test(tc, test_val_windows_deterministic);
    tcase_add_test(tc, test_binary_bytes);
    tcase_add_test(tc, test_utf8_text);
    suite_add_tcase(s, tc);
    TCase *mlm = tcase_create("mlm");
    tcase_add_checked_fixture(mlm, setup, teardown);
    tcase_add_test(mlm, test_mlm_count);
    tcase_add_test(mlm, test_mlm_mask_rule);
    tcase_add_test(mlm, test_mlm_train_batch);
    tcase_add_test(mlm, test_train_rows);
    tcase_add_test(mlm, test_mlm_val_fixed);
    suite_add_tcase(s, mlm);
    return s;
}
