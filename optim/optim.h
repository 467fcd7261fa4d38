/* optim.h: optimizers behind one contract (AdamW, SGD with momentum, Lion),
 * learning-rate schedules and gradient clipping.
 *
 * Everything works on a ParamSet's slabs (core/params.h): values, gradients and
 * the optimizer's state lie side by side at the same offsets, so each function
 * is a flat loop over the slabs and never allocates.
 *
 * A training loop, in order:
 *     params_zero_grad(p);                     once, before the first backward
 *     for each step:
 *         backward(...);                       one or more micro-batches, each adding into the gradients
 *         norm = grad_norm(p);                 a pass that reads the gradients
 *         (a non-finite norm: stop, or skip the step)
 *         opt->step(p, &(OptimStep){lr_at(schedule, step, warmup, steps, lr, min_lr), step + 1,
 *                    clip_scale(norm, clip), weight_decay, opts});
 *                                              the other pass: clip, update, zero the gradients
 * which is what torch.nn.utils.clip_grad_norm_, torch.optim's step and
 * zero_grad(set_to_none=False) do (tests/reference/adamw.py and optimizers.py;
 * tests/test_optim.c compares them). */
#ifndef ATTNLAB_OPTIM_H
#define ATTNLAB_OPTIM_H

#include <stdbool.h>

#include "option.h"
#include "params.h"
#include "util.h"

/* ---- the contract ------------------------------------------------------------ */

/* What one step is told. */
typedef struct {
    float lr;           /* this step's learning rate (the schedule's) */
    long t;             /* the 1-based step number */
    float grad_scale;   /* the clipping factor (clip_scale), applied as each gradient is read */
    float weight_decay; /* for matrices only (ndim >= 2); how it applies is the optimizer's */
    const void *opts;   /* the optimizer's own options struct (optim_options) */
} OptimStep;

/* An optimizer: its name, its state, its step and its options. Adding one is
 * a file in optim/ and a line in OPTIM_LIST (optim/optimizers.c), plus its
 * cases (docs/training.md). */
typedef struct {
    const char *name;
    const char *help; /* for --help, a few words */
    /* Its state slabs (ParamSet.state[0 .. n_state)), each saved in
     * checkpoints as <state_names[k]><parameter name> ("optim.m.tok_emb.weight");
     * state_nonneg[k]: a negative value is refused on load (a second moment). */
    int n_state;
    const char *state_names[PARAMS_STATE_SLABS];
    bool state_nonneg[PARAMS_STATE_SLABS];
    /* One step over every parameter: clip, update, zero the gradients. t < 1
     * is a programming error. The same bits for any thread count. */
    void (*step)(ParamSet *p, const OptimStep *s);
    /* Its options: the option-table rows only it reads (ended by a NULL name;
     * NULL: none), their offsets into its own struct of options_size bytes,
     * which the registry places in the config (optim_options). */
    const OptDef *option_rows;
    size_t options_size;
    /* Refuses option values that cannot work together, with the reason (0,
     * or -1 with e set); NULL: any. */
    int (*validate)(const void *opts, Err *e);
} Optimizer;

/* Every optimizer once, the default first (optim/optimizers.c). */
extern const Optimizer *const optimizers[];
extern const int n_optimizers;
/* optimizers[i]; aborts out of range. */
const Optimizer *optimizer_at(int i);
/* The index of the named one, or -1. */
int optim_find(const char *name);
/* The names, NULL-terminated, for the option table. */
const char *const *optim_names(void);
/* Room in a config for every optimizer's options struct (the registry checks it). */
#define OPTIM_OPTION_BYTES 64
/* Where optimizer i's options struct lies in the config's OPTIM_OPTION_BYTES. */
size_t optim_options_at(int i);
/* Optimizer i's rows with their offsets into those bytes. */
const OptDef *optim_rows(int i);
/* The optimizer that owns option `name`, or NULL. */
const Optimizer *optim_option_owner(const char *name);
/* Optimizer i's options struct inside `bytes` (OPTIM_OPTION_BYTES of a config). */
static inline void *optim_options(unsigned char *bytes, int i) { return bytes + optim_options_at(i); }

/* Calls update(p, k, lo, hi, ctx) on elements [lo, hi) of the slabs, all of
 * parameter k, over every element once: one contiguous share of the slab per
 * thread (one thread below OPTIM_PARALLEL_MIN elements), each walked
 * parameter by parameter. For element-wise updates, whose results do not
 * depend on the thread count. */
#define OPTIM_PARALLEL_MIN (1L << 15)
void optim_for_each(ParamSet *p, void (*update)(ParamSet *p, int k, long lo, long hi, const void *ctx),
                    const void *ctx);
/* Whether parameter t is decayed: matrices (linear weights, embeddings) are,
 * vectors (biases, norm gains) are not. */
static inline bool optim_decays(const Tensor *t) { return t->ndim >= 2; }

typedef struct {
    float beta1, beta2, eps, weight_decay;
} AdamWConfig;

/* ---- AdamW (optim/adamw.c), optimizer=adamw -------------------------------------- */

/* Its options struct (the rows beta1, beta2, eps). */
typedef struct {
    float beta1, beta2, eps;
} AdamWOpts;

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
