/* room analysis/: grids, their statistics, reports and pages, spectra; includes the engine and any room below. */
/* grid.h: an ablation grid (./ablate): its axes, its runs and their results.
 *
 * The words key=v1/v2/... make the axes, key=v fixes an option for every run;
 * the runs are the axes' cartesian product, plus a baseline with the default
 * kernel. Everything here comes from the option table and the kernel
 * registry: a key that only one kernel reads implies that kernel, and the
 * tables get one column per axis. The report made from the results is in
 * grid_report.h. */
#ifndef ATTNLAB_GRID_H
#define ATTNLAB_GRID_H

#include <stdbool.h>

#include "attention/kernel.h"
#include "options.h"
#include "stats.h"
#include "trainer.h"

#define GRID_MAX_AXES 8
#define GRID_MAX_VALUES 32
#define GRID_MAX_RUNS 512
#define GRID_MAX_SEEDS 32
#define GRID_MAX_LINKED 4

/* An axis: one option, or options linked by ':' that vary together
 * (d_model:key_size=128:16/96:64, for comparisons at equal parameters). */
typedef struct {
    const OptDef *opts[GRID_MAX_LINKED];
    int n_opts;
    char name[128];                 /* "phi", or "d_model:key_size" */
    char *values[GRID_MAX_VALUES];  /* "relu", or "128:16" */
    int n;
} GridAxis;

#define GRID_MAX_CLAIMS 16

/* A claim to test (--expect "reweight=cos < reweight=none"): the points of
 * side 0 have a lower val bpb than the points of side 1 that agree with them
 * on every other axis. A side fixes some axes (a value index each, -1 for an
 * axis it leaves free) or is the baseline. */
typedef struct {
    char text[200];                /* as given */
    int value[2][GRID_MAX_AXES];   /* [side][axis] */
    bool baseline[2];
} GridClaim;

typedef struct {
    Config base; /* what every run shares: defaults, --key value and key=v */
    GridAxis axes[GRID_MAX_AXES];
    int n_axes;
    int seeds;                    /* runs per point, seeds seed, seed + 1, ... (--seeds; 1) */
    bool attn_given, eval_given;  /* attn and eval_every were set, as a key or an option */
    const AttnKernel *implied;    /* the kernel the first kernel-owned key names */
    GridClaim claims[GRID_MAX_CLAIMS];
    int n_claims;
    double within; /* the verdict rule's largest "no effect larger than X" (--within; 0.02 bpb) */
    SeedPlan plan;      /* --plan 3,6,12: the looks the paired intervals follow (stats.h); none by default */
    bool mixed_kernels; /* --mixed-kernels: count seed pairs whose runs ran under different kernels */
} Grid;

typedef struct {
    char name[256];    /* "phi=relu,reweight=cos", or "baseline attn=softmax" */
    char folder[1024]; /* its run folder */
    Config cfg;
    const char *values[GRID_MAX_AXES]; /* its value on each axis (NULL for the baseline) */
    int point;         /* its grid point (the baseline's is the last) */
    int seed_index;    /* 0 .. seeds - 1 */
    bool skipped;
    bool pending;      /* ./ablate --tables-only: not trained yet (skipped is set too) */
    char why[512];     /* why it was skipped */
    TrainResult result;
    double den_clamped;  /* mean over logged steps; NAN when the kernel counts none */
    double *steps, *bpb; /* the validation curve */
    int n_points;
    double time_s;     /* the last metrics line's time_s: its training time, NAN when not logged */
    double logged_tok_s; /* the median of its metrics lines' tok_s: the whole run's, across resumes; NAN when none */
    char kernel[320];  /* where it ran (provenance.h): its kernel line, "" when the run did not record it */
    char commit[24];   /* the commit it was built from, "+dirty" when from changed files; "" unrecorded */
    bool kernel_mixed; /* its segments (a resume) ran under different kernels */
} GridRun;

/* The defaults, no axes. */
void grid_init(Grid *g);
/* One word of the command line: key=v1/v2/... (an axis) or key=v (fixed).
 * -1 with e set on a bad key or value. */
int grid_word(Grid *g, const char *word, Err *e);
/* Marks an option given as --key value (attn, eval_every). */
void grid_option_given(Grid *g, const char *name);
/* After the last word: the implied kernel, and ten or so validation points
 * per run unless eval_every was given. -1 with e set when there is no axis. */
int grid_settle(Grid *g, Err *e);
/* A claim, after grid_settle: "A < B" or "A > B", each side the baseline or
 * key=value terms joined by ',' on axes of the grid (both sides naming the
 * same axes). -1 with e naming what is wrong. */
int grid_expect(Grid *g, const char *text, Err *e);
/* The folder a run of that name gets under the grid's folder: '=' as '-',
 * ',' and ' ' as '_', '/' as '-', ':' as '+' ("phi=relu,seed=1" ->
 * "phi-relu_seed-1"). */
void grid_folder_name(const char *name, char *out, size_t size);
/* runs/ablate-<axis>-<axis>... */
void grid_default_dir(const Grid *g, char *dir, size_t size);
/* The runs in dir, the baseline last (unless !baseline or it equals a grid
 * point); combinations config_validate refuses are marked skipped with the
 * reason. *runs is allocated; returns the count, or -1 with e set. */
int grid_plan(const Grid *g, bool baseline, const char *dir, GridRun **runs, Err *e);
void grid_free(GridRun *runs, int n);
/* Frees what grid_word kept of the axes' values. */
void grid_release(Grid *g);

typedef enum { GRID_NEW, GRID_UNFINISHED, GRID_FINISHED } GridRunState;
/* What run r's folder holds. A folder holding a run of other options (its
 * config.json differs in a model or training option, or in the corpus) is
 * refused: -1 with e naming the options that differ. GRID_FINISHED also reads
 * the result and the curve. */
int grid_run_state(GridRun *r, const char *corpus, Err *e);
/* After training run r: writes its result.json and reads its curve. */
int grid_record(GridRun *r, Err *e);
/* A run ./train trained into r's folder with the grid's options (no
 * result.json): when its metrics.jsonl has the validation of its last step,
 * records it from there (that val bpb, the best of its validations, the
 * median of its logged throughput) without opening the model, and returns 0;
 * 1 when the log ends before the last step; -1 with e set when it cannot be
 * read or written. */
int grid_record_logged(GridRun *r, Err *e);
/* Trains run r for ./ablate (resuming its checkpoint when unfinished; lines
 * as plain text when plain_progress) and writes its result.json. 0 when
 * trained or diverged (said on stdout, recorded in its result), 1 when a
 * signal stopped it, -1 when it failed: recorded in its result, not fatal
 * (the table says why, and running the command again retries it). */
int grid_train(GridRun *r, const char *corpus, bool unfinished, const char *label, bool plain_progress);

/* Whether finished run r is still on the byte plateau (EXPERIMENTS.md): its
 * last val bpb above 3.3 (causal) or 3.9 (masked LM), or first below that
 * level only in the last quarter of its steps, so that its final value says
 * mostly when it left the plateau. A run without a curve is judged by its
 * final value alone. If so, why says which. */
bool grid_plateau(const GridRun *r, char *why, size_t size);
/* A run folder read as a finished run of its own (no grid): its objective,
 * steps and lr from config.json, its curve from metrics.jsonl and its final val
 * bpb the curve's last (n_points 0 when it has none), unrounded from
 * result.json when that has it. -1 with e set when its config.json is not one. */
int grid_read_folder(GridRun *r, const char *folder, Err *e);

/* An arm of a paired comparison, DIR/POINT: its run folders DIR/POINT_seed-<n>,
 * by seed, into folders[0..max) with their seeds. The count, or -1 with e set
 * (no such folder DIR, more than max runs, or none). */
typedef struct {
    char folder[1300];
    long long seed;
} GridArmRun;
int grid_arm_folders(const char *arm, GridArmRun *out, int max, Err *e);
#endif
