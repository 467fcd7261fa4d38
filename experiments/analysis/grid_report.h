/* room analysis/: grids, their statistics, reports and pages, spectra; includes the engine and any room below. */
/* grid_report.h: an ablation grid's report, from its runs' results
 * (grid.h): the tables, with paired intervals where points share seeds
 * (stats.h), and the overlaid validation curves. */
#ifndef ATTNLAB_GRID_REPORT_H
#define ATTNLAB_GRID_REPORT_H

#include "grid.h"

/* results.md and results.csv (one column per axis, one row per run) into
 * md and csv, which the caller frees. With seeds, results.md opens with one
 * row per point: the mean final val bpb of its finished runs, their standard
 * deviation and 95% interval, the difference from the baseline with Welch's
 * interval, and the seed-matched difference from the baseline (or the first
 * point) with its paired interval and power; summary (if not NULL) gets the
 * same as CSV. Then the effects table, the claims' verdict lines (--expect)
 * and the runs set apart for being on the byte plateau. */
void grid_tables(const Grid *g, const GridRun *runs, int n, char **md, char **csv, char **summary);
/* results.md, results.csv (and with seeds summary.csv) and curves.png in dir;
 * with seeds, curves.png draws each point's mean curve between faint lines
 * one standard deviation away. */
/* -1 with e set when a claim (--expect) names no two points of the runs. */
int grid_check_claims(const Grid *g, const GridRun *runs, int n, Err *e);
/* ./ablate --paired: B - A over the seeds two arms share, seed by seed, with
 * the runs still on the byte plateau set apart, the paired interval and the
 * verdict rule's answer (within: its largest X). An arm is DIR/POINT, its
 * runs the folders DIR/POINT_seed-<n>. -1 with e set when an arm has no runs. */
int grid_paired_report(FILE *out, const char *arm_a, const char *arm_b, double within, Err *e);
int grid_write_outputs(const char *dir, const Grid *g, const GridRun *runs, int n, Err *e);

#endif
