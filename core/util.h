/* util.h: error reporting and checked system calls.
 *
 * Three kinds of failure, kept apart on purpose:
 *  - user errors (bad file, bad option): the function fills an Err and returns -1;
 *    the command prints "error: <what>: <why>" once and exits non-zero.
 *  - running out of memory: the commands check what a model needs before
 *    allocating it (experiments/run/memory.h); an allocation that fails all the
 *    same prints one error line and exits 1 (die_oom), never aborts.
 *  - programming errors (shape mismatch): print where and abort. */
#ifndef ATTNLAB_UTIL_H
#define ATTNLAB_UTIL_H

#include <stddef.h>
#include <stdio.h>

/* One error message, "<what>: <why>", optionally followed by a hint line. */
typedef struct {
    char msg[512];
    char hint[256];
} Err;

/* Formats the message into e (if e is not NULL) and returns -1, so callers can
 * write `return err_set(e, "%s: not found", path);`. Control characters in
 * it (a newline in a name a file gave) become '?': an error is one line. */
int err_set(Err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Adds a hint ("try: ...") to an error already set; returns -1. */
int err_hint(Err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints "error: <msg>" (and "hint: <hint>") to stderr. */
void err_print(const Err *e);

/* Programming errors: print file:line and the message, then abort. */
void die_at(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));
#define DIE(...) die_at(__FILE__, __LINE__, __VA_ARGS__)

/* An allocation of `bytes` failed: prints "error: out of memory: ..." with
 * the caller's file and line and a hint, and exits 1. */
void die_oom(size_t bytes, const char *file, int line) __attribute__((noreturn));
#define DIE_OOM(bytes) die_oom((bytes), __FILE__, __LINE__)

/* Checked wrappers: on failure they report the caller's file and line, and
 * exit 1 (out of memory, die_oom) or abort. Use them where failure means the
 * machine is out of resources or broken (a write to an already-open file
 * failing), not for files a user named: those go through functions that
 * return an Err. */
void *malloc_check(size_t size, const char *file, int line);
void *calloc_check(size_t n, size_t size, const char *file, int line);
FILE *fopen_check(const char *path, const char *mode, const char *file, int line);
void fread_check(void *ptr, size_t size, size_t n, FILE *f, const char *file, int line);
void fwrite_check(const void *ptr, size_t size, size_t n, FILE *f, const char *file, int line);
void fclose_check(FILE *f, const char *file, int line);
#define xmalloc(size) malloc_check((size), __FILE__, __LINE__)
#define xcalloc(n, size) calloc_check((n), (size), __FILE__, __LINE__)
#define xfopen(path, mode) fopen_check((path), (mode), __FILE__, __LINE__)
#define xfread(ptr, size, n, f) fread_check((ptr), (size), (n), (f), __FILE__, __LINE__)
#define xfwrite(ptr, size, n, f) fwrite_check((ptr), (size), (n), (f), __FILE__, __LINE__)
#define xfclose(f) fclose_check((f), __FILE__, __LINE__)

/* Duplicates a string with xmalloc. */
char *xstrdup(const char *s);

#endif
