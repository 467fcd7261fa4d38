/* room run/: the commands' run machinery; includes the engine (core, layers, optim, data) and run/. */
/* lines.h: reading a text file a line at a time, bounded and streaming.
 *
 * metrics.jsonl and results.csv are read through it: a line is never longer
 * than the bound in memory (a 2 GB file of one line costs the bound, not
 * 2 GB), the file is read once (linear time), and a read error or a line
 * over the bound is an error naming the file and the line, never taken for
 * the end of the file (that would drop the history after it).
 *
 *   LineReader r;
 *   if (line_open(&r, path, LINE_MAX_BYTES, &e) != 0) ...   (ENOENT: errno)
 *   while ((got = line_next(&r, &e)) > 0) ... r.line, r.len, r.number
 *   line_close(&r);                             got < 0: e says why
 */
#ifndef ATTNLAB_LINES_H
#define ATTNLAB_LINES_H

#include <stddef.h>
#include <stdio.h>

#include "util.h"

/* The longest line the readers take: metrics lines are ~200 bytes, a
 * results.csv row a few hundred. */
#define LINE_MAX_BYTES (1 << 20)

typedef struct {
    FILE *f;
    char path[1100];
    char *line;    /* the line, its newline included when it has one, then a NUL */
    size_t len;    /* its bytes (NUL bytes inside it included) */
    long number;   /* its number, from 1 */
    size_t max, cap;
} LineReader;

/* Opens path (a regular file; a FIFO is refused, never waited on). -1 with
 * e set, except a missing file: -1 with errno ENOENT and e unset. */
int line_open(LineReader *r, const char *path, size_t max, Err *e);
/* The next line: 1, 0 at the end of the file, -1 with e set ("PATH: line N:
 * longer than M bytes" or "PATH: line N: cannot read: <why>"). */
int line_next(LineReader *r, Err *e);
void line_close(LineReader *r);

#endif
