/* optim.h: AdamW, learning-rate schedules and gradient clipping.
 *
 * Everything works on a ParamSet's slabs (core/params.h): values, gradients and
 * the two AdamW moments lie side by side at the same offsets, so each function
 * is a flat loop over one or two slabs and never allocates.
 *
 * One training step, in order:
 *     norm = clip_grad_norm(p, clip);
 *     adamw_step(p, &cfg, lr_at(schedule, step, warmup, steps, lr, min_lr), step + 1);
 * which is what torch.nn.utils.clip_grad_norm_ then torch.optim.AdamW do
 * (tests/reference/adamw.py; tests/test_optim.c compares the two). */
#ifndef ATTNLAB_OPTIM_H
#define ATTNLAB_OPTIM_H

#include "params.h"

typedef struct {
    float beta1, beta2, eps, weight_decay;
} AdamWConfig;

/* beta1 0.9, beta2 0.95, eps 1e-8, weight_decay 0.1 (the GPT-2/3 recipe). */
AdamWConfig adamw_default(void);

/* One AdamW step over every parameter; t is the 1-based step number, used for
 * the bias corrections 1 - beta^t (t < 1 is a programming error).
 *
 * Per element, with g the gradient (after clipping) and w the value:
 *     m = b1 m + (1 - b1) g
 *     v = b2 v + (1 - b2) g^2
 *     w = w (1 - lr wd)                       decoupled weight decay (Loshchilov & Hutter)
 *     w = w - lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
 * Weight decay applies to matrices only (ndim >= 2: linear weights,
 * embeddings); biases and norm gains (ndim <= 1) are not decayed. This is
 * torch.optim.AdamW with two param groups (decay / no decay), foreach=False,
 * with its order of operations. */
void adamw_step(ParamSet *p, const AdamWConfig *c, float lr, long t);

typedef enum { SCHEDULE_COSINE, SCHEDULE_LINEAR, SCHEDULE_CONSTANT, SCHEDULE_COUNT } Schedule;

/* "cosine", "linear", "constant". */
const char *schedule_name(Schedule s);

/* The learning rate at 0-based `step` of a run of `total` steps, peak `lr`:
 *
 *   step < warmup             lr * (step + 1) / warmup   (linear warmup from 0: the first step
 *                                                          gets lr / warmup, step warmup-1 gets lr)
 *   SCHEDULE_CONSTANT         lr for every step after warmup (total and min_lr are not used)
 *   warmup <= step < total    with progress p = (step - warmup) / (total - warmup), in [0, 1):
 *                               cosine: min_lr + (lr - min_lr) * (1 + cos(pi p)) / 2
 *                               linear: min_lr + (lr - min_lr) * (1 - p)
 *                             so step == warmup gets exactly lr, and the last step (total - 1)
 *                             gets slightly more than min_lr (as in nanoGPT and llm.c)
 *   step >= total             min_lr (the end value of the decay; steps beyond it clamp)
 *
 * warmup = 0 means no warmup. When warmup >= total the warmup runs to its end and
 * steps from then on get min_lr. Computed in double. Negative step, warmup or
 * total is a programming error. */
float lr_at(Schedule s, long step, long warmup, long total, float lr, float min_lr);

/* The global L2 norm of all gradients, sum of squares accumulated in double.
 * If max_norm > 0 and the norm exceeds it, every gradient is multiplied by
 * max_norm / (norm + 1e-6), as torch.nn.utils.clip_grad_norm_ does; max_norm <= 0
 * means no clipping. A non-finite norm leaves the gradients untouched (scaling
 * by it would turn them all into NaN or 0): the caller sees it in the return
 * value and should skip the step. Returns the norm before clipping. */
float clip_grad_norm(ParamSet *p, float max_norm);

#endif
