/* gradcheck.h: compares hand-written backward passes with central differences.
 *
 * A case builds an output from leaf tensors. The check draws random leaves,
 * reduces the output to the scalar f = sum(out * R) with a fixed random R, and
 * compares every leaf gradient from backward (seeded with R) against
 * (f(x + eps) - f(x - eps)) / (2 eps), element by element. A case may use a
 * leaf more than once; both contributions must then arrive. */
#ifndef ATTNLAB_GRADCHECK_H
#define ATTNLAB_GRADCHECK_H

#include <stdbool.h>
#include <stdint.h>

#include "ops.h"

/* as many leaves as an op has inputs (NODE_MAX_IN) */
#define GC_MAX_IN 5

typedef enum {
    GC_NORMAL,    /* N(0, 1) */
    GC_NONZERO,   /* N(0, 1) pushed to |x| >= 0.1, away from kinks at 0 */
    GC_POSITIVE,  /* uniform in [0.5, 1.5] */
} GcInit;

typedef struct {
    int ndim;
    int shape[TENSOR_MAX_DIMS];
    GcInit init;
} GcInput;

typedef struct {
    const char *name;
    int n_in;
    GcInput in[GC_MAX_IN];
    /* Builds the output from the leaves; called many times, in a fresh arena. */
    Tensor *(*build)(Tensor **in);
} GradCase;

typedef struct {
    double eps;   /* finite-difference step (default 1e-2) */
    double atol;  /* pass when |analytic - numeric| <= atol + rtol * max(|analytic|, |numeric|) */
    double rtol;  /* (defaults 1e-3 and 1e-2) */
    int max_per_input; /* elements checked per leaf, spread evenly (default 256) */
} GcOptions;

typedef struct {
    bool ok;
    int checked;             /* elements compared */
    double worst_ratio;      /* max over elements of error / tolerance; ok means < 1 */
    int worst_in;            /* where the worst element is */
    long worst_index;
    double worst_analytic, worst_numeric;
    char why[200];           /* why it failed, empty when ok */
    bool covered[OP_COUNT];  /* primitive ops the case put on the tape */
} GcResult;

/* Runs the check; returns r->ok. opt may be NULL for the defaults. */
bool gradcheck(const GradCase *c, uint64_t seed, const GcOptions *opt, GcResult *r);

#endif
