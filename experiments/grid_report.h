/* grid_report.h: an ablation grid's report, from its runs' results
 * (grid.h): the tables, with paired intervals where points share seeds
 * (stats.h), and the overlaid validation curves. */
#ifndef ATTNLAB_GRID_REPORT_H
#define ATTNLAB_GRID_REPORT_H

#include "grid.h"

/* results.md and results.csv (one column per axis, one row per run) into
 * md and csv, which the caller frees. With seeds, results.md opens with one
 * row per point: the mean final val bpb of its finished runs, their standard
 * deviation and 95% interval, and the difference from the baseline with
 * Welch's interval; summary (if not NULL) gets the same as CSV. */
void grid_tables(const Grid *g, const GridRun *runs, int n, char **md, char **csv, char **summary);
/* results.md, results.csv (and with seeds summary.csv) and curves.png in dir;
 * with seeds, curves.png draws each point's mean curve between faint lines
 * one standard deviation away. */
int grid_write_outputs(const char *dir, const Grid *g, const GridRun *runs, int n, Err *e);

#endif
