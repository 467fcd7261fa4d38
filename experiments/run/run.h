/* room run/: the commands' run machinery; includes the engine (core, layers, optim, data) and run/. */
/* run.h: what the commands share about files and time. */
#ifndef ATTNLAB_RUN_H
#define ATTNLAB_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "util.h"

/* mkdir -p. */
int make_dirs(const char *path, Err *e);
/* Writes text to path through "<path>.tmp", flushed and renamed. */
int write_file_atomic(const char *path, const char *text, Err *e);
/* The same for n bytes that may contain zeros. */
int write_bytes_atomic(const char *path, const void *data, size_t n, Err *e);
/* Opens a file that must be a regular one if it exists, without blocking on
 * a FIFO: mode "r", "w" or "a" as fopen takes them. NULL with e set, except
 * that a missing file opened "r" gives NULL with errno ENOENT and e unset. */
FILE *fopen_regular(const char *path, const char *mode, Err *e);
/* Takes a folder's lock (an flock on dir/.lock, held until run_unlock or the
 * process ends, even by kill -9): the one lock of every command that writes
 * into a folder (./train and ./ablate for their life, ./spectrum and
 * ./extrapolate while they work), so that no two write into one at once.
 * The file descriptor, or -1 with e set when another process holds it
 * ("DIR: in use by another command (./train, pid 123)") or the file cannot
 * be made. */
int run_lock(const char *dir, Err *e);
void run_unlock(int fd);
bool file_exists(const char *path);
bool is_directory(const char *path);
/* Seconds on a monotonic clock. */
double now_seconds(void);
/* The median of x[0, n) (n > 0); sorts x. */
double median_of(double *x, int n);
/* Joins a folder and a file name into buf (size bytes); error when too long. */
int path_join(char *buf, size_t size, const char *dir, const char *name, Err *e);

/* The name a run is known by: a folder's last component (trailing slashes
 * dropped), the folder of a .../NAME/model.safetensors, or another file's
 * name without ".safetensors". */
void run_name_of(const char *path, char *out, size_t size);

/* Parses the value of an integer flag (v may be NULL when the flag was last);
 * on error prints "error: <flag>: expected an integer in [lo, hi], got '<v>'"
 * and returns -1. */
int parse_int_arg(const char *flag, const char *v, int lo, int hi, int *out);

#endif
