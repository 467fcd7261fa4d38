/* room training/: one training run, and text from a model; includes the engine, run/, outputs/, training/. */
/* trainer.h: one training run, from a config to a finished run folder.
 * ./train is its command line; ./ablate runs it once per grid point. */
#ifndef ATTNLAB_TRAINER_H
#define ATTNLAB_TRAINER_H

#include "options.h"

typedef struct {
    Config cfg;
    const char *corpus;  /* path */
    const char *run_dir; /* the run folder; created if missing */
    bool resume;         /* continue from run_dir/model.safetensors */
    bool repair;         /* on resume, keep the whole lines of a broken metrics.jsonl (train_folder.h) */
    const char *label;   /* progress label, e.g. "train" */
    bool quiet;          /* no sample print at the end (ablate) */
    bool data_parallel;  /* every MPI rank trains this run together (trainer.c); rank 0 writes it */
    bool plain_progress; /* progress as plain lines even on a terminal: ablate's ranks share one */
} TrainJob;

typedef enum { TRAIN_DONE, TRAIN_INTERRUPTED, TRAIN_DIVERGED, TRAIN_FAILED } TrainStatus;

typedef struct {
    TrainStatus status;
    long step;          /* steps completed */
    long start;         /* the step this stretch began from: 0, or the checkpoint's when resumed */
    long diverged_step; /* the step whose loss, gradient norm or update was not finite */
    char why[512];      /* what was not finite: "the loss is not finite", "parameter 'x': ..." */
    double val_bpb, best_val_bpb; /* the best over the whole run, across resumes */
    double tok_s;       /* median over this stretch's logged intervals; NAN when it trained no step */
} TrainResult;

/* Runs the job. User errors (bad corpus, a run folder in the way or in use,
 * a model too large for the memory) return -1 with e set; a diverged or
 * interrupted run returns 0 with the status. A run that diverges (a loss,
 * gradient norm, parameter or AdamW moment that is not finite) keeps the last
 * good checkpoint; one interrupted by a signal in any phase (steps,
 * evaluation, sampling) has its last completed step saved. */
int train_run(const TrainJob *job, TrainResult *r, Err *e);

/* Refuses (-1 with e set) a config that can be evaluated but not trained:
 * --bca on, an inference-time mask. */
int train_refuses(const Config *cfg, Err *e);

/* For tests: the next train_run stops exactly as if SIGINT had arrived once
 * `steps` steps were done (checkpoint saved, status TRAIN_INTERRUPTED), which a
 * real signal cannot do deterministically. Applies to that one run only; a
 * negative value clears it. */
void train_stop_after(long steps);

#endif
