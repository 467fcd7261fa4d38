/* corpus.h: a text corpus as byte tokens, its train/validation split and its batches.
 *
 * The file is memory-mapped read-only and never copied. Every byte is a token (0..255), so any
 * text works (UTF-8 of any script, or binary); nothing is decoded.
 *
 * The split. With n = size bytes and f = val_fraction (0 < f < 1):
 *     val_bytes = round(f * n)      (to nearest, halves away from zero)
 *     train_end = n - val_bytes
 * [0, train_end) is the train split, [train_end, n) the validation split: the last f of the file
 * is held out. Rounding (not truncation) keeps f = 0.29 of 100 bytes at 29, not 28.
 *
 * Validation windows. A window of length T is T + 1 consecutive bytes (T inputs, each predicting
 * the next byte). The validation split is cut into a grid of full = val_bytes / (T + 1)
 * non-overlapping windows, starting at train_end (a remainder shorter than T + 1 at the end is
 * unused). With count = min(full, max_windows) (max_windows = 0 means full), window i
 * (0 <= i < count) is grid slot floor(i * full / count): evenly spaced, the first one at the start
 * of the split, and a function of (train_end, size, T, max_windows) alone, so every run and variant
 * with the same T and split is scored on the same bytes.
 *
 * Only data/ and the core error and RNG helpers are used; data/ depends on nothing else. */
#ifndef ATTNLAB_CORPUS_H
#define ATTNLAB_CORPUS_H

#include <stddef.h>

#include "rng.h"
#include "util.h"

typedef struct {
    char *path;
    const unsigned char *bytes; /* the whole file, memory-mapped read-only */
    size_t size;
    size_t train_end; /* [0, train_end) is the train split, [train_end, size) validation */
} Corpus;

/* Opens and maps the file and splits it: the last val_fraction (0 < f < 1) of the bytes is held
 * out (the rule above). Both splits must hold at least context + 1 bytes (one window).
 * On error returns -1 with e set ("<path>: <why>", plus a hint where one helps) and c zeroed, with
 * nothing to free: missing or unreadable file, a directory or other non-regular file, an empty
 * file, val_fraction outside (0, 1), context < 1, a file shorter than two windows (2 (context + 1)
 * bytes: "the corpus is too short"), a split shorter than context + 1 bytes. */
int corpus_open(Corpus *c, const char *path, double val_fraction, int context, Err *e);
/* Unmaps and frees; c is zeroed. Safe on a zeroed Corpus and when called twice. */
void corpus_close(Corpus *c);

/* Bytes in each split. */
static inline size_t corpus_train_size(const Corpus *c) { return c->train_end; }
static inline size_t corpus_val_size(const Corpus *c) { return c->size - c->train_end; }

/* B training windows of T + 1 bytes from the train split, at offsets drawn with rng, uniform over
 * [0, train_end - T - 1] and in row order; inputs[b*T + t] = byte at off + t,
 * targets[b*T + t] = byte at off + t + 1. Needs B >= 1 and 1 <= T < train_end (aborts otherwise:
 * callers check T against the context given to corpus_open). Draws exactly B offsets, each with
 * one rng_below call when train_end - T < 2^32, so the stream is reproducible from the seed. */
void corpus_train_batch(const Corpus *c, Rng *rng, int B, int T, int *inputs, int *targets);

/* Rows [first, first + rows) of the batch corpus_train_batch(c, rng, B, ...) would draw, into
 * inputs and targets (rows x T each); rng advances exactly as it would for the whole batch. The
 * ranks of a data-parallel run each take their rows of one batch of B = ranks x batch rows. */
void corpus_train_rows(const Corpus *c, Rng *rng, int B, int first, int rows, int T, int *inputs, int *targets);

/* Number of fixed validation windows of length T (the rule above): at most max_windows
 * (0 = as many non-overlapping windows as fit). 0 when the validation split is shorter than
 * T + 1 bytes (possible when T is larger than the context the corpus was opened with). */
long corpus_val_count(const Corpus *c, int T, long max_windows);
/* Byte offset in the file of validation window i (0 <= i < corpus_val_count(c, T, max_windows)). */
size_t corpus_val_offset(const Corpus *c, int T, long max_windows, long i);
/* Window i of those, written like one row of corpus_train_batch (T inputs, T targets). */
void corpus_val_window(const Corpus *c, int T, long max_windows, long i, int *inputs, int *targets);

/* One row from any offset: inputs[t] = byte at off + t, targets[t] = byte at off + t + 1, for
 * 0 <= t < T. Needs off + T < size (aborts otherwise). */
void corpus_window(const Corpus *c, size_t off, int T, int *inputs, int *targets);

#endif
