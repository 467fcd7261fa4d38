/* room analysis/: grids, their statistics, reports and pages, spectra; includes the engine and any room below. */
/* spectrum_pairs.h: what ./spectrum reports per layer (c(T/4), the k that
 * reaches 90% and 99%), from its measurements or from a run's spectrum.csv,
 * and ./spectrum --paired: two arms' runs compared seed by seed. */
#ifndef ATTNLAB_SPECTRUM_PAIRS_H
#define ATTNLAB_SPECTRUM_PAIRS_H

#include <stdio.h>

#include "grid_report.h"
#include "util.h"

#define SKEW_MAX_LAYERS 64

/* Per layer, over its heads: c(T/4), the mean over the heads of c at
 * k = K/4 (1 when K < 4), and the smallest k at which that mean reaches
 * 90% and 99% (K when it never does). */
typedef struct {
    int layers, values;
    double c_quarter[SKEW_MAX_LAYERS], k90[SKEW_MAX_LAYERS], k99[SKEW_MAX_LAYERS];
} LayerSkew;

/* skew from c[L][H][K], each head's c(k) averaged over the windows; the
 * per-layer mean curve, the sum over the heads then / H, into mean[L][K]
 * when mean is not NULL. Layers past SKEW_MAX_LAYERS are not summarised. */
void layer_skew(const double *c, int L, int H, int K, double *mean, LayerSkew *skew);

/* A run's spectrum.csv (layer,head,k,c,s; every layer, head and k = 1..K
 * exactly once) into *c ([L][H][K], the caller frees) and its sizes. -1 with
 * e naming the file, the line and what is wrong. */
int spectrum_csv_read(const char *path, double **c, int *L, int *H, int *K, Err *e);

/* ./spectrum --paired A B: each arm GRID/POINT, its runs the folders
 * GRID/POINT_seed-<n> with a spectrum.csv. Over the seeds both arms have,
 * per layer B - A of c(T/4) and of k 90% seed by seed, the paired 95% t
 * interval (under plan, when it has looks: the first pairs of the last look
 * reached, at its level) and the verdict rule's answer (no effect larger than X when the
 * interval lies within +-X, X at most within_c for c and within_k for k).
 * A run still on the byte plateau is set apart with its pair, unless it
 * trained at learning rate 0: an initialisation. -1 with e set. */
int spectrum_paired_report(FILE *out, const char *arm_a, const char *arm_b, double within_c, double within_k,
                           const SeedPlan *plan, Err *e);

/* One statistic of one layer, two arms paired for a ladder rung (ladder.h):
 * arm A the initialisations, arm B the trained models, each GRID/POINT.
 * which 0: c(T/4), the claim "A < B" (training makes P more skewed), the
 * pairs' A - B; which 1: k 90%, the claim "B < A", the pairs' B - A. So
 * below 0 the claim holds, as in ./ablate --ladder. layer: an index, or
 * negative from the last (-1: the last layer). Pairs as
 * spectrum_paired_report sets them apart, under plan. */
typedef struct {
    GridPaired p;
    Config cfg; /* arm B's first run's */
    int layer;  /* the layer's index */
} SpectrumPairs;
int spectrum_arm_pairs(const char *arm_a, const char *arm_b, int layer, int which, const SeedPlan *plan,
                       SpectrumPairs *out, Err *e);

#endif
