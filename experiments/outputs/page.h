/* room outputs/: the plots and pages a run leaves; includes the engine, run/ and outputs/. */
/* page.h: the browsable pages, index.html, of a run folder, of a grid folder
 * and of ./report.
 *
 * A page is one self-contained HTML file: its data as JSON, read from the
 * folder's own files (config.json, metrics.jsonl, samples.txt, spectrum.csv,
 * extrapolate.csv; a grid's results.csv, summary.csv, results.md and its run
 * folders), the script that draws it (experiments/outputs/page/page.js, built into
 * the commands) and the charting library, uPlot, inlined. It needs no
 * network and opens from file://. When uPlot is not installed (`make uplot`
 * fetches it into vendor/uplot/), the page is written with its tables and
 * without charts, and the command says so once.
 *
 * Every page is written to a temporary file and renamed. What a folder lacks
 * (a metrics line cut short, a run that failed or has not finished) is shown
 * on the page as missing rather than refused. */
#ifndef ATTNLAB_PAGE_H
#define ATTNLAB_PAGE_H

#include <stddef.h>

#include "util.h"

/* A run's state as ./train knows it while writing the page. */
typedef struct {
    const char *state; /* "running", "done", "interrupted", "diverged" */
    long step, steps;
} PageStatus;

/* dir/index.html for the run folder dir. st: the state (NULL: read from the
 * folder: result.json, the run's lock, metrics.jsonl against its steps). A
 * running run's page reloads itself every few seconds. */
int page_write_run(const char *dir, const PageStatus *st, Err *e);
/* dir/index.html for the grid folder dir (./ablate's), and the page of every
 * run folder in it that has none. */
int page_write_grid(const char *dir, Err *e);
/* dir/index.html for a ladder folder (./ablate --ladder): its ladder.md and
 * the effects of ladder.csv against FLOPs. */
int page_write_ladder(const char *dir, Err *e);
/* One page at out comparing the run folders and grids in dirs[0, n), runs
 * grouped by the options that differ between them; links to their pages
 * (written where missing). -1 with e set when a folder is neither: "DIR:
 * not a run folder or grid: <why>". */
int page_write_report(const char *out, char *const *dirs, int n, Err *e);

enum { PAGE_NONE, PAGE_RUN, PAGE_GRID };
/* What dir is: PAGE_RUN (it has config.json), PAGE_GRID (results.csv, or run
 * folders under it) or PAGE_NONE with why (size bytes) saying why not. */
int page_kind(const char *dir, char *why, size_t size);

/* The charting library, read once: NULL when it is not installed (and a
 * note printed, once, on stderr). Its path: $ATTNLAB_UPLOT, else
 * vendor/uplot/ beside the command. */
const char *page_library(void);

#endif
