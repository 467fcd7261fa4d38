/* room run/: the commands' run machinery; includes the engine (core, layers, optim, data) and run/. */
/* progress.h: a progress line with elapsed time and ETA for long loops (training steps,
 * ablation runs).
 *
 * On a terminal it redraws one line in place (at most 10 times a second):
 *     train: 200/1000 [####................]  20% loss 1.234 lr 3.0e-4 | 12s eta 48s
 * Elsewhere (a pipe, a file, CI logs) it prints plain lines, one per 10% of the work or every
 * 30 seconds, whichever comes first, and always the final line:
 *     train: step 200/1000 (20%) loss 1.234 lr 3.0e-4 elapsed 12s eta 48s
 * Nothing is allocated; everything lives in the struct. */
#ifndef ATTNLAB_PROGRESS_H
#define ATTNLAB_PROGRESS_H

#include <stddef.h>
#include <stdio.h>

typedef struct {
    FILE *out;          /* NULL: print nothing */
    char label[400];    /* ablate's "run i/n NAME (all runs: eta T)" whole */
    long total;         /* <= 0: unknown (no percentage, bar or ETA) */
    long done;
    long first;         /* the count the work resumed from (progress_from): the ETA's rate counts from it */
    int tty;            /* redraw in place */
    int columns;        /* terminal width */
    int last_len;       /* tty: length of the line on screen, to blank what a shorter one leaves */
    int finished;
    double start;       /* monotonic seconds */
    double last_draw;   /* tty: time of the last redraw */
    double last_print;  /* plain: time of the last line */
    long next_print;    /* plain: print when done reaches this (the next 10% mark) */
} Progress;

/* total units of work (e.g. steps); label printed in front (e.g. "train" or "run 3/9"). */
void progress_init(Progress *p, const char *label, long total, FILE *out);
/* The work resumes at done units (a run from its checkpoint's step): the
 * count starts there, and the ETA's rate counts only the units done since. */
void progress_from(Progress *p, long done);
/* done units so far; extra is a short status (may be NULL) of tab-separated fields, most
 * important first, e.g. "loss 1.78 bpb\tval 2.45 bpb @1500\tlr 3.0e-4\t9876 tok/s": they are
 * printed two spaces apart, and a terminal too narrow for all drops the last ones whole. */
void progress_update(Progress *p, long done, const char *extra);
/* Prints the final line (with the last done count) and ends it with a newline. */
void progress_finish(Progress *p, const char *extra);
/* Formats seconds as "1h02m", "3m05s", "42s" into buf ("--" if not finite). Returns buf. */
const char *format_duration(double seconds, char *buf, size_t size);

#endif
