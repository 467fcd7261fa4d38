/* room training/: one training run, and text from a model; includes the engine, run/, outputs/, training/. */
/* train_folder.h: a training run's folder, as the training loop (trainer.c)
 * keeps it: its paths, its lock, config.json, metrics.jsonl and loss.png.
 * docs/formats.md describes each file.
 *
 * The loop opens it (train_folder_paths, then train_folder_lock before
 * anything is written, train_folder_files), writes a metrics line per logged
 * step (train_folder_log), draws loss.png at the end (train_folder_plot) and
 * closes it. The checkpoint and samples.txt are the loop's: it writes them
 * to the paths kept here. */
#ifndef ATTNLAB_TRAIN_FOLDER_H
#define ATTNLAB_TRAIN_FOLDER_H

#include <stdio.h>

#include "options.h"

/* The metrics kept in memory for the plot (and re-read on resume). */
typedef struct {
    double *step, *loss_bits, *val_step, *val_bits;
    int n, n_val, cap;
    double time_s; /* the last line's time_s (0 if none): where a resumed run's clock starts */
} Curves;

typedef struct {
    const char *dir;
    char ckpt[1100], metrics_path[1100], plot_path[1100], config_path[1100], samples_path[1100];
    int lock;      /* run_lock's descriptor, -1 when not held */
    FILE *metrics; /* metrics.jsonl, open for appending lines */
    Curves cv;
    double t0; /* now_seconds() at which time_s was cv.time_s */
} TrainFolder;

/* One logged step: what its metrics line holds. val is its validation loss
 * (NAN when it did not evaluate). */
typedef struct {
    long step;
    double loss, val;
    float lr, grad_norm;
    double den_clamped; /* the fraction of linear-attention denominators clamped at eps in this step's
                           forward; NAN for kernels without denominators */
    double tok_s;
} StepLog;

/* The folder's paths, made from dir (-1 with e set when one is too long).
 * Nothing is touched yet: f->lock is -1. */
int train_folder_paths(TrainFolder *f, const char *dir, Err *e);
/* -1 with e set when a checkpoint is in the folder and the run is not a resume. */
int train_folder_taken(const TrainFolder *f, bool resume, Err *e);
/* Makes the folder (unless resuming) and takes its lock for the run's life,
 * then checks again, under the lock, that no other run has saved there. */
int train_folder_lock(TrainFolder *f, bool resume, Err *e);
/* config.json (the config, the corpus, and the ranks when data parallel),
 * and metrics.jsonl: new, or on resume cut back to the lines up to step
 * `start` (later ones will be made again, identically), which refill the
 * curves. A line that is cut short, binary or not a metrics line refuses
 * the resume ("<path>: line N: <why>", a hint naming --repair) before
 * anything is written; with `repair`, the lines before it are kept and the
 * original stays beside as metrics.jsonl.broken-<date>-<time> (a note says
 * so). *best, when not finite, gets the best validation bpb of the kept
 * lines (checkpoints of older versions did not record it). */
int train_folder_files(TrainFolder *f, const Config *cfg, const char *corpus, int ranks, long start, bool repair,
                       double *best, Err *e);
/* One metrics line, and its point on the curves. */
void train_folder_log(TrainFolder *f, const StepLog *l);
/* The progress line's fields for the last logged step: the loss and the last
 * validation bpb with its step ("loss 2.101 bpb\tval 2.310 bpb @250\t..."). */
void train_folder_progress_text(const TrainFolder *f, const StepLog *l, char *buf, size_t size);
/* Closes metrics.jsonl and draws loss.png from the curves (none when empty). */
int train_folder_plot(TrainFolder *f, Err *e);
/* Closes what is open and frees the curves; releases the lock. */
void train_folder_close(TrainFolder *f);

#endif
