/* room analysis/: grids, their statistics, reports and pages, spectra; includes the engine and any room below. */
/* grid_report.h: an ablation grid's report, from its runs' results
 * (grid.h): the tables, with paired intervals where points share seeds
 * (stats.h), and the overlaid validation curves; the seed pairs behind
 * them, and ./ablate --paired's, are in grid_pairs.c. */
#ifndef ATTNLAB_GRID_REPORT_H
#define ATTNLAB_GRID_REPORT_H

#include "grid.h"

/* A seed-matched difference b - a: over the seeds where both runs have a
 * value, neither is on the plateau (apart: those where both have a value
 * but one is on it) and, unless mixed kernels are allowed, both ran under
 * one kernel (mixed: those that did not); under a seed plan, over the first
 * pairs of the last look they reach, at the plan's level (beyond: the pairs
 * past it). With its power: the smallest difference the pairs resolve at 95%
 * with 80% power, and the pairs that would resolve the difference seen. */
#define GRID_MAX_PAIRS 256
typedef struct {
    Difference d;
    double sd, resolvable, level;
    int pairs, apart, mixed, beyond, needed;
    int look, next_look; /* under a plan: the look reached (-1: none yet), the next one's pairs (-1: none) */
    bool planned;
    double diffs[GRID_MAX_PAIRS]; /* the pairs used, b - a, by seed */
    double time_s;                /* grid_arm_pairs: the training time of both arms' runs, summed */
} GridPaired;

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
 * runs the folders DIR/POINT_seed-<n>. The pairs follow plan (its looks;
 * NULL or none: one 95% interval) and leave out those whose runs ran under
 * different kernels unless mixed_kernels. -1 with e set when an arm has no
 * runs. */
int grid_paired_report(FILE *out, const char *arm_a, const char *arm_b, double within, const SeedPlan *plan,
                       bool mixed_kernels, Err *e);
int grid_write_outputs(const char *dir, const Grid *g, const GridRun *runs, int n, Err *e);

/* Two arms' pairs, as grid_paired_report counts them (no printing): *out
 * the difference b - a, *cfg the first run of arm a's config. -1 with e set
 * when an arm has no runs. */
int grid_arm_pairs(const char *arm_a, const char *arm_b, const SeedPlan *plan, bool mixed_kernels, GridPaired *out,
                   Config *cfg, Err *e);
/* The pairs (x[i], y[i]) already matched and counted, as paired_of counts
 * them: y - x under plan (its looks; NULL or none: one 95% interval), with
 * the interval's power; apart, mixed and time_s are left 0. */
GridPaired grid_paired_values(const double *x, const double *y, int found, const SeedPlan *plan);
/* The verdict rule's words for a claim "b < a" tested on b - a (agrees,
 * disagrees, no effect larger than X, inconclusive with what would decide). */
void grid_verdict_words(const GridPaired *p, double within, char *buf, size_t size);

#endif
