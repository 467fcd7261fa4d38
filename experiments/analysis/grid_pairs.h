/* room analysis/: grids, their statistics, reports and pages, spectra; includes the engine and any room below. */
/* grid_pairs.h: what grid_report.c takes from grid_pairs.c, which also
 * holds grid_report.h's grid_paired_report and grid_arm_pairs. */
#ifndef ATTNLAB_GRID_PAIRS_H
#define ATTNLAB_GRID_PAIRS_H

#include "grid_report.h"

/* Whether run r finished with a final val bpb. */
bool grid_run_has_value(const GridRun *r);
/* Points p and q of the grid (b - a = q - p), paired by the grid's rule. */
GridPaired grid_paired_points(const Grid *g, const GridRun *runs, int n, int p, int q);

#endif
