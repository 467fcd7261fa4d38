/* room run/: the commands' run machinery; includes the engine (core, layers, optim, data) and run/. */
/* checkpoint.h: a run's model.safetensors.
 *
 * Tensors: every parameter under its PyTorch name, then AdamW's moments as
 * optim.m.<name> and optim.v.<name>. Metadata: format = attnlab, the format
 * version, the config as JSON, the step, the data RNG's state and the corpus
 * path, the best validation bpb so far, and for a data-parallel run its rank
 * count (ranks; absent for one process). Resuming from it continues the run
 * exactly, on the same number of ranks.
 *
 * Nothing non-finite is saved or loaded: checkpoint_save refuses parameters
 * or moments that are not finite (the trainer checks first, and stops the run
 * as diverged), and checkpoint_load refuses a file holding any, or a negative
 * second moment. A data RNG state that xoshiro cannot have (all zero) is
 * refused on open. */
#ifndef ATTNLAB_CHECKPOINT_H
#define ATTNLAB_CHECKPOINT_H

#include "model.h"
#include "options.h"
#include "safetensors.h"

#define CHECKPOINT_FORMAT "attnlab"
#define CHECKPOINT_VERSION "1"

typedef struct {
    Config cfg;
    long step;
    Rng data_rng;
    char corpus[1024];
    double best_val_bpb; /* NAN when none was recorded */
    int ranks;           /* the data-parallel ranks that trained it; 1 for one process */
    bool has_optim;
} CheckpointInfo;

/* data_rng is the data stream's state, which every rank shares (each takes its
 * rows of the same batches: corpus_train_rows). */
int checkpoint_save(const char *path, const Model *m, const Config *c, long step, const Rng *data_rng,
                    const char *corpus, double best_val_bpb, int ranks, Err *e);
/* 0 when every parameter and both AdamW moments of it are finite; otherwise
 * -1 with e naming the first that is not. */
int checkpoint_check_finite(const Model *m, Err *e);
/* Opens and checks a checkpoint, and reads its metadata into info. On
 * success st is open; the caller closes it. */
int checkpoint_open(StFile *st, const char *path, CheckpointInfo *info, Err *e);
/* Reads every parameter (and the optimizer moments when with_optim) into a
 * model made with model_init(&info.cfg.model). */
int checkpoint_load(StFile *st, Model *m, bool with_optim, Err *e);

#endif
