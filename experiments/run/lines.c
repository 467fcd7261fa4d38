/* lines.c: the bounded line reader (lines.h). */
#include "lines.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "run.h"

int line_open(LineReader *r, const char *path, size_t max, Err *e) {
    memset(r, 0, sizeof *r);
    if (snprintf(r->path, sizeof r->path, "%s", path) >= (int)sizeof r->path)
        return err_set(e, "%.60s...: path too long", path);
    r->max = max;
    r->f = fopen_regular(path, "r", e);
    return r->f ? 0 : -1;
}

int line_next(LineReader *r, Err *e) {
    r->len = 0;
    r->number++;
    int c;
    errno = 0;
    while ((c = getc_unlocked(r->f)) != EOF) {
        if (r->len + 2 > r->cap) {
            size_t cap = r->cap ? 2 * r->cap : 256;
            if (cap > r->max + 2) cap = r->max + 2;
            if (r->len + 2 > cap) /* the bound reached without a newline */
                return err_set(e, "%s: line %ld: longer than %zu bytes", r->path, r->number, r->max);
            char *grown = realloc(r->line, cap);
            if (!grown) DIE_OOM(cap);
            r->line = grown, r->cap = cap;
        }
        r->line[r->len++] = (char)c;
        if (c == '\n') break;
    }
    if (ferror(r->f)) {
        int err = errno ? errno : EIO;
        return err_set(e, "%s: line %ld: cannot read: %s", r->path, r->number, strerror(err));
    }
    if (!r->len) {
        r->number--;
        return 0;
    }
    r->line[r->len] = '\0';
    return 1;
}

void line_close(LineReader *r) {
    if (r->f) fclose(r->f);
    free(r->line);
    memset(r, 0, sizeof *r);
}
