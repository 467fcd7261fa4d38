/* lion.c: optimizer=lion, Lion (Chen et al. 2023, "Symbolic Discovery of
 * Optimization Algorithms", Algorithm 2): the sign of an interpolation of
 * the momentum and the gradient, with decoupled weight decay,
 *     g = g s                              clipping, as clip_grad_norm_ scales the gradients
 *     c = b1 m + (1 - b1) g                the update's direction
 *     w = w - lr (sign(c) + wd w)          wd for matrices only (as AdamW's groups)
 *     m = b2 m + (1 - b2) g                the momentum, tracked with the slower b2
 * sign(0) = 0, and the gradient set to 0 for the next backward. Every element
 * moves by lr (plus the decay), so Lion wants a learning rate 3-10x below
 * AdamW's (the paper's advice). One state slab, m, saved as
 * optim.exp_avg.<name>. Each element is independent: the same bits for any
 * thread count. */
#include <stddef.h>

#include "optim.h"

typedef struct {
    float beta1, beta2;
} LionOpts;

typedef struct {
    float lr, scale, decay, b1, b2, one_minus_b1, one_minus_b2;
} LionStep;

static void lion_elements(ParamSet *p, int k, long lo, long hi, const void *ctx) {
    const LionStep *s = ctx;
    float *restrict w = p->value, *restrict g = p->grad, *restrict m = p->state[0];
    const float wd = optim_decays(p->list[k]) ? s->decay : 0.0f, lr = s->lr;
    for (long i = lo; i < hi; i++) {
        const float gi = g[i] * s->scale;
        g[i] = 0.0f;
        const float c = s->b1 * m[i] + s->one_minus_b1 * gi;
        const float sign = c > 0.0f ? 1.0f : c < 0.0f ? -1.0f : 0.0f;
        w[i] = w[i] - lr * (sign + wd * w[i]);
        m[i] = s->b2 * m[i] + s->one_minus_b2 * gi;
    }
}

static void lion_step(ParamSet *p, const OptimStep *s) {
    if (s->t < 1) DIE("lion_step: step number t = %ld, but it is 1-based", s->t);
    const LionOpts *o = s->opts;
    const LionStep step = {s->lr, s->grad_scale, s->weight_decay, o->beta1, o->beta2,
                           (float)(1.0 - o->beta1), (float)(1.0 - o->beta2)};
    optim_for_each(p, lion_elements, &step);
}

static int lion_validate(const void *opts, Err *e) {
    const LionOpts *o = opts;
    if (o->beta1 >= 1.0f || o->beta2 >= 1.0f)
        return err_set(e, "--lion_beta1 %g, --lion_beta2 %g: decays must be below 1", (double)o->beta1,
                       (double)o->beta2);
    return 0;
}

static const OptDef lion_options[] = {
    {.name = "lion_beta1", .type = OPT_FLOAT, .group = GROUP_TRAIN, .offset = offsetof(LionOpts, beta1),
     .def = "0.9", .min = 0, .max = 1, .help = "optimizer=lion: weight of the momentum in the update's sign"},
    {.name = "lion_beta2", .type = OPT_FLOAT, .group = GROUP_TRAIN, .offset = offsetof(LionOpts, beta2),
     .def = "0.99", .min = 0, .max = 1, .help = "optimizer=lion: decay of the momentum"},
    {.name = NULL},
};

const Optimizer optimizer_lion = {
    .name = "lion",
    .help = "Lion: the sign of interpolated momentum, decoupled decay",
    .n_state = 1,
    .state_names = {"optim.exp_avg."},
    .step = lion_step,
    .option_rows = lion_options,
    .options_size = sizeof(LionOpts),
    .validate = lion_validate,
};
