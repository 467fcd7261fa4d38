#include "corpus.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The split's size check, with the numbers a user needs to fix it. */
static int check_split(const char *path, const char *which, size_t have, int context, double f,
                       size_t size, const char *hint, Err *e) {
    size_t need = (size_t)context + 1;
    if (have >= need) return 0;
    err_set(e, "%s: the %s split has %zu bytes (val_fraction %g of %zu bytes) but context %d needs at least %zu",
            path, which, have, f, size, context, need);
    return err_hint(e, "%s", hint);
}

int corpus_open(Corpus *c, const char *path, double val_fraction, int context, Err *e) {
    memset(c, 0, sizeof *c);
    if (!(val_fraction > 0.0 && val_fraction < 1.0)) {
        err_set(e, "%s: val_fraction %g is outside (0, 1)", path, val_fraction);
        return err_hint(e, "a typical value is 0.1");
    }
    if (context < 1) return err_set(e, "%s: context %d must be at least 1", path, context);

    /* O_NONBLOCK so that a FIFO named by mistake is refused below instead of blocking here. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return err_set(e, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int err = errno;
        close(fd);
        return err_set(e, "%s: cannot stat: %s", path, strerror(err));
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return err_set(e, "%s: is a directory, not a text file", path);
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return err_set(e, "%s: not a regular file", path);
    }
    if (st.st_size == 0) { /* mmap refuses length 0 */
        char byte;
        bool content = read(fd, &byte, 1) > 0; /* /proc's files report 0 bytes and have content */
        close(fd);
        if (content)
            return err_set(e, "%s: reports a size of 0 bytes but has content (a file the kernel makes as it is "
                              "read, as in /proc)", path),
                   err_hint(e, "copy it to a plain file first: cat %s > corpus.txt", path);
        return err_set(e, "%s: the file is empty (0 bytes)", path);
    }
    if ((uintmax_t)st.st_size > SIZE_MAX) {
        close(fd);
        return err_set(e, "%s: %jd bytes is too large to map", path, (intmax_t)st.st_size);
    }
    size_t size = (size_t)st.st_size;

    /* Too short for any split: say so, rather than blame one split and the context. */
    size_t window = (size_t)context + 1;
    if (size < 2 * window) {
        close(fd);
        err_set(e, "%s: the corpus is too short: %zu byte%s, and a training and a validation window of %zu bytes "
                "each need %zu", path, size, size == 1 ? "" : "s", window, 2 * window);
        return err_hint(e, "use a longer text file");
    }
    size_t val_bytes = (size_t)floor(val_fraction * (double)size + 0.5);
    if (val_bytes > size) val_bytes = size;
    size_t train_end = size - val_bytes;
    if (check_split(path, "validation", val_bytes, context, val_fraction, size,
                    "lower context or raise val_fraction, or use a larger corpus", e) ||
        check_split(path, "train", train_end, context, val_fraction, size,
                    "lower context or val_fraction, or use a larger corpus", e)) {
        close(fd);
        return -1;
    }

    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int map_err = errno;
    close(fd); /* the mapping keeps the file alive */
    if (map == MAP_FAILED) return err_set(e, "%s: cannot map: %s", path, strerror(map_err));

    c->path = xstrdup(path);
    c->bytes = map;
    c->size = size;
    c->train_end = train_end;
    return 0;
}

void corpus_close(Corpus *c) {
    if (c->bytes) munmap((void *)c->bytes, c->size);
    free(c->path);
    memset(c, 0, sizeof *c);
}

void corpus_window(const Corpus *c, size_t off, int T, int *inputs, int *targets) {
    if (T < 1 || off >= c->size || (size_t)T >= c->size - off) {
        DIE("corpus_window: window at %zu of length %d + 1 does not fit in %zu bytes", off, T, c->size);
    }
    const unsigned char *p = c->bytes + off;
    for (int t = 0; t < T; t++) {
        inputs[t] = p[t];
        targets[t] = p[t + 1];
    }
}

/* Uniform in [0, n) for n beyond 32 bits: rejection on the top multiple of n. */
static uint64_t below_u64(Rng *rng, uint64_t n) {
    uint64_t limit = UINT64_MAX - UINT64_MAX % n; /* accept x < limit */
    uint64_t x;
    do x = rng_u64(rng);
    while (x >= limit);
    return x % n;
}

void corpus_train_rows(const Corpus *c, Rng *rng, int B, int first, int rows, int T, int *inputs, int *targets) {
    if (B < 1 || T < 1 || (size_t)T >= c->train_end) {
        DIE("corpus_train_batch: B %d, T %d with a train split of %zu bytes (needs B >= 1, 1 <= T < %zu)", B, T,
            c->train_end, c->train_end);
    }
    if (first < 0 || rows < 0 || first > B - rows) DIE("corpus_train_rows: rows [%d, %d) of %d", first, first + rows, B);
    uint64_t n_off = (uint64_t)(c->train_end - (size_t)T); /* offsets 0 .. train_end - T - 1 */
    for (int b = 0; b < B; b++) {
        size_t off = n_off <= UINT32_MAX ? rng_below(rng, (uint32_t)n_off) : (size_t)below_u64(rng, n_off);
        if (b >= first && b < first + rows)
            corpus_window(c, off, T, inputs + (size_t)(b - first) * T, targets + (size_t)(b - first) * T);
    }
}

void corpus_train_batch(const Corpus *c, Rng *rng, int B, int T, int *inputs, int *targets) {
    corpus_train_rows(c, rng, B, 0, B, T, inputs, targets);
}

/* The grid of non-overlapping windows of T + 1 bytes over the validation split. */
static size_t val_grid(const Corpus *c, int T) {
    if (T < 1) DIE("corpus validation windows: T %d must be at least 1", T);
    return (c->size - c->train_end) / ((size_t)T + 1);
}

long corpus_val_count(const Corpus *c, int T, long max_windows) {
    if (max_windows < 0) DIE("corpus_val_count: max_windows %ld must be >= 0", max_windows);
    size_t full = val_grid(c, T);
    if (full > (size_t)LONG_MAX) full = (size_t)LONG_MAX;
    if (max_windows == 0 || (size_t)max_windows >= full) return (long)full;
    return max_windows;
}

size_t corpus_val_offset(const Corpus *c, int T, long max_windows, long i) {
    long count = corpus_val_count(c, T, max_windows);
    if (i < 0 || i >= count) DIE("corpus validation window %ld out of range [0, %ld) for T %d", i, count, T);
    /* slot = floor(i * full / count), computed as i*q + i*r/count (full = q*count + r) so that
     * nothing overflows while count < 2^32. */
    uint64_t full = val_grid(c, T), n = (uint64_t)count, k = (uint64_t)i;
    uint64_t slot = k * (full / n) + k * (full % n) / n;
    return c->train_end + (size_t)slot * ((size_t)T + 1);
}

void corpus_val_window(const Corpus *c, int T, long max_windows, long i, int *inputs, int *targets) {
    corpus_window(c, corpus_val_offset(c, T, max_windows, i), T, inputs, targets);
}
