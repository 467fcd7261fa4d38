/* room analysis/: grids, their statistics, reports and pages, spectra; includes the engine and any room below. */
/* ladder.h: a claim across compute (./ablate --ladder): the same claim's
 * grid at several budgets (rungs), its paired effect at each against the
 * training FLOPs, and the trend.
 *
 * A claim is "A < B" as --expect takes it, each side the key=value terms of
 * a point (its run folders POINT_seed-<n> in each rung's grid folder) or
 * `baseline`. At each rung: the parameters, training tokens and FLOPs of
 * side B's model (memory.h's model_flops_per_token times steps x batch x
 * context), the seed pairs, the effect A - B with its interval and the
 * verdict (grid_report.h's, under the seed plan). Then the slope of the
 * pairs' effects against log10 FLOPs (least squares over every pair of every
 * rung, Student's t interval on N - 2 degrees of freedom), and one line: does
 * the first rung's verdict survive the ladder. Writes DIR/ladder.md,
 * DIR/ladder.csv, DIR/ladder.png (effect +- interval against FLOPs, one
 * line per claim) and DIR/index.html. */
#ifndef ATTNLAB_LADDER_H
#define ATTNLAB_LADDER_H

#include <stdbool.h>

#include "stats.h"
#include "util.h"

#define LADDER_MAX_RUNGS 8

typedef struct {
    const char *grids[LADDER_MAX_RUNGS]; /* the rungs' grid folders, in order of compute */
    int n_grids;
    const char *const *claims; /* "A < B" */
    int n_claims;
    const SeedPlan *plan;
    bool mixed_kernels;
    double within;
} Ladder;

/* The tables, the plot and the page into dir; a summary on stdout. 0, 2 on
 * a usage error (a claim that does not parse), or 1 with e set. */
int ladder_run(const Ladder *l, const char *dir, Err *e);

/* The spectrum claim across compute (./spectrum --ladder): arms[2i] the
 * initialisations and arms[2i + 1] the trained models of rung i, each
 * GRID/POINT with spectrum.csv in its runs. Four claims: training makes P
 * more skewed in the first and in the last layer, by c(T/4) (rises) and by
 * the k reaching 90% (falls), paired seed by seed (spectrum_pairs.h), the
 * verdict's X within_c for c and within_k for k. The same tables as
 * ladder_run. 0, 2 on a usage error, or 1 with e set. */
int ladder_spectrum_run(const char *const *arms, int n_arms, const SeedPlan *plan, double within_c,
                        double within_k, const char *dir, Err *e);

#endif
