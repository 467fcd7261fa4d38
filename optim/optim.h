/* optim.h: AdamW, learning-rate schedules and gradient clipping.
 *
 * Everything works on a ParamSet's slabs (core/params.h): values, gradients and
 * the two AdamW moments lie side by side at the same offsets, so each function
 * is a flat loop over the slabs and never allocates.
 *
 * A training loop, in order:
 *     params_zero_grad(p);                     once, before the first backward
 *     for each step:
 *         backward(...);                       one or more micro-batches, each adding into the gradients
 *         norm = grad_norm(p);                 a pass that reads the gradients
 *         (a non-finite norm: stop, or skip the step)
 *         adamw_step(p, &cfg, lr_at(schedule, step, warmup, steps, lr, min_lr), step + 1,
 *                    clip_scale(norm, clip));  the other pass: clip, update, zero the gradients
 * which is what torch.nn.utils.clip_grad_norm_, torch.optim.AdamW's step and
 * zero_grad(set_to_none=False) do (tests/reference/adamw.py; tests/test_optim.c
 * compares the two). */
#ifndef ATTNLAB_OPTIM_H
#define ATTNLAB_OPTIM_H

#include "params.h"

typedef struct {
    float beta1, beta2, eps, weight_decay;
} AdamWConfig;

/* beta1 0.9, beta2 0.95, eps 1e-8, weight_decay 0.1 (the GPT-2/3 recipe). */
AdamWConfig adamw_default(void);

/* One AdamW step over every parameter, as one pass over the slabs; t is the
 * 1-based step number, used for the bias corrections 1 - beta^t (t < 1 is a
 * programming error).
 *
 * Per element, with g the gradient, s = grad_scale (the clipping factor,
 * clip_scale; 1 for none) and w the value:
 *     g = g s                                 clipping, as clip_grad_norm_ scales the gradients
 *     m = b1 m + (1 - b1) g
 *     v = b2 v + (1 - b2) g^2
 *     w = w (1 - lr wd)                       decoupled weight decay (Loshchilov & Hutter)
 *     w = w - lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
 * and then the gradient is set to 0, so the slab is ready for the next step's
 * backward to add into: the gradients do not survive the step. Weight decay
 * applies to matrices only (ndim >= 2: linear weights, embeddings); biases and
 * norm gains (ndim <= 1) are not decayed. This is torch.optim.AdamW with two
 * param groups (decay / no decay), foreach=False, with its order of
 * operations. Each element is independent: the same bits for any thread count. */
void adamw_step(ParamSet *p, const AdamWConfig *c, float lr, long t, float grad_scale);

/* One step's scalars, the same for every element. */
typedef struct {
    float b1, b2, one_minus_b1, one_minus_b2, eps;
    float step_size;  /* lr / (1 - b1^t) */
    float bc2_sqrt;   /* sqrt(1 - b2^t) */
    float grad_scale; /* the clipping factor, applied as each gradient is read */
    float decay;      /* 1 - lr weight_decay, for the parameters that decay */
} AdamWScalars;

/* The per-element update of elements [lo, hi) of the slabs, which all belong
 * to parameter k (whose shape decides whether they decay): the gradient
 * scaled, the moments, the decay and the step, and the gradient zeroed.
 * adamw_step calls it through adamw_update on each thread's share of each
 * parameter; a test swaps in a wrong one to show that its comparisons catch
 * it, as tests swap op_defs' backward passes, and puts adamw_elements back. */
typedef void (*AdamWUpdate)(ParamSet *p, int k, long lo, long hi, const AdamWScalars *s);
void adamw_elements(ParamSet *p, int k, long lo, long hi, const AdamWScalars *s);
extern AdamWUpdate adamw_update;

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

/* The global L2 norm of all gradients, the sum of squares accumulated in
 * double: the same bits for any thread count. In double, as summed, so that
 * clip_scale sees the norm before any rounding to float. */
double grad_norm(const ParamSet *p);

/* The factor torch.nn.utils.clip_grad_norm_ multiplies every gradient by:
 * max_norm / (norm + 1e-6) when max_norm > 0 and norm > max_norm, otherwise 1
 * (max_norm <= 0 means no clipping). A non-finite norm also gives 1 (scaling
 * by it would turn every gradient into NaN or 0): the caller sees the norm
 * and should skip the step. */
float clip_scale(double norm, float max_norm);

#endif
