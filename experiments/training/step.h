/* room training/: one training run, and text from a model; includes the engine, run/, outputs/, training/. */
/* step.h: one training step, the one ./train (trainer.c) and ./bench (bench_train.c,
 * bench_mpi.c) both take.
 *
 *   loss = step_loss(s, ids, targets, B, T);    the arena and the tape reset, the model's loss
 *   step_backward(s, loss);                     the gradients, added into the slabs
 *   step_average(s);                            data parallel: the mean of the ranks' gradients
 *   norm = step_norm(s);                        the global gradient norm (the log, the clip)
 *   step_update(s, lr, step, norm);             clip, the optimizer's step (which zeroes the
 *                                               gradients), the weights' bf16 copy made again
 * Nothing in it allocates after the first step: activations come from its
 * arena, reset by step_loss. A caller that finds the loss or the norm not
 * finite stops before step_update, and no update is made. */
#ifndef ATTNLAB_STEP_H
#define ATTNLAB_STEP_H

#include "model.h"
#include "optim.h"
#include "options.h"

typedef struct {
    Model *m;
    Arena arena;     /* the step's activations */
    const Optimizer *opt;    /* the run's --optimizer (optim.h), with its options: */
    const void *opt_options; /* inside opt_config */
    unsigned char opt_config[OPTIM_OPTION_BYTES];
    float weight_decay;      /* --weight_decay */
    float clip;      /* --clip: the gradient norm's bound (0: none) */
    int ranks;       /* > 1: data parallel over that many MPI ranks */
} TrainStep;

/* The step on model m with tc's optimizer options over `ranks` ranks: its
 * arena made and set as the engine's, gradients on, and m's gradients
 * zeroed once (from then on each update leaves them at 0). */
void step_init(TrainStep *s, Model *m, const TrainConfig *tc, int ranks);
/* The mean loss of ids [B, T] against targets (model_loss), with the arena
 * and the tape reset first and the kernels' counters (attn_stats) zeroed. */
Tensor *step_loss(TrainStep *s, const int *ids, const int *targets, int B, int T);
void step_backward(TrainStep *s, Tensor *loss);
/* Over s->ranks > 1 ranks, every rank's gradients replaced by their mean:
 * the gradient of the mean loss over all the ranks' rows. Nothing for one. */
void step_average(TrainStep *s);
double step_norm(const TrainStep *s);
/* The update of 0-based step `step` at learning rate lr: the gradients
 * scaled by clip_scale(norm, clip), the optimizer's step, the gradients zeroed, and the
 * bf16 copy of the weights made again when the run's precision keeps one. */
void step_update(TrainStep *s, float lr, long step, double norm);
void step_free(TrainStep *s);

#endif
