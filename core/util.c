#include "util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* An error is one line whatever it quotes: a tensor name or a metadata key
 * from a hostile file may hold a newline or an escape sequence, shown as '?'. */
static void one_line(char *s) {
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) *s = '?';
}

/* fmt's text into buf, on one line. */
static void line_into(char *buf, size_t size, const char *fmt, va_list ap) {
    vsnprintf(buf, size, fmt, ap);
    one_line(buf);
}

int err_set(Err *e, const char *fmt, ...) {
    if (!e) return -1;
    va_list ap;
    va_start(ap, fmt);
    line_into(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    e->hint[0] = '\0';
    return -1;
}

int err_hint(Err *e, const char *fmt, ...) {
    if (!e) return -1;
    va_list ap;
    va_start(ap, fmt);
    line_into(e->hint, sizeof e->hint, fmt, ap);
    va_end(ap);
    return -1;
}

void err_print(const Err *e) {
    fprintf(stderr, "error: %s\n", e->msg);
    if (e->hint[0]) fprintf(stderr, "hint: %s\n", e->hint);
}

void die_at(const char *file, int line, const char *fmt, ...) {
    fflush(stdout);
    fprintf(stderr, "fatal: %s:%d: ", file, line);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}

void die_oom(size_t bytes, const char *file, int line) {
    fflush(stdout);
    if (bytes)
        fprintf(stderr, "error: out of memory: allocating %.1f MiB failed (%s:%d)\n", (double)bytes / (1 << 20), file,
                line);
    else
        fprintf(stderr, "error: out of memory: an allocation failed (%s:%d)\n", file, line);
    fprintf(stderr, "hint: close other programs, or use a smaller model, batch or length\n");
    exit(1);
}

void *malloc_check(size_t size, const char *file, int line) {
    void *p = malloc(size ? size : 1);
    if (!p) die_oom(size, file, line);
    return p;
}

void *calloc_check(size_t n, size_t size, const char *file, int line) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) die_oom(n > SIZE_MAX / (size ? size : 1) ? SIZE_MAX : n * size, file, line);
    return p;
}

FILE *fopen_check(const char *path, const char *mode, const char *file, int line) {
    FILE *f = fopen(path, mode);
    if (!f) die_at(file, line, "cannot open %s (mode %s): %s", path, mode, strerror(errno));
    return f;
}

void fread_check(void *ptr, size_t size, size_t n, FILE *f, const char *file, int line) {
    size_t got = fread(ptr, size, n, f);
    if (got != n) {
        die_at(file, line, "short read: %zu of %zu items (%s)", got, n,
               feof(f) ? "end of file" : strerror(errno));
    }
}

void fwrite_check(const void *ptr, size_t size, size_t n, FILE *f, const char *file, int line) {
    size_t put = fwrite(ptr, size, n, f);
    if (put != n) die_at(file, line, "short write: %zu of %zu items: %s", put, n, strerror(errno));
}

void fclose_check(FILE *f, const char *file, int line) {
    if (fclose(f) != 0) die_at(file, line, "close failed: %s", strerror(errno));
}

char *xstrdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = xmalloc(n);
    memcpy(p, s, n);
    return p;
}
