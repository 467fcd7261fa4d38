/* sgd.c: optimizer=sgd, stochastic gradient descent with momentum (Polyak's
 * heavy ball, or Nesterov's), as torch.optim.SGD computes it with
 * dampening 0 and foreach=False:
 *     g = g s                        clipping, as clip_grad_norm_ scales the gradients
 *     g = g + wd w                   weight decay as an L2 term, matrices only (as AdamW's groups)
 *     b = mu b + g                   the momentum buffer (b starts at 0, so b = g at the first step)
 *     g = g + mu b   (nesterov)  or  g = b
 *     w = w - lr g
 * and the gradient set to 0 for the next backward. With momentum 0 the buffer
 * stays 0 and the step is plain SGD. One state slab, the buffer, saved as
 * optim.momentum_buffer.<name> (torch's name for it). Each element is
 * independent: the same bits for any thread count. */
#include <stddef.h>

#include "optim.h"

typedef struct {
    float momentum;
    bool nesterov;
} SgdOpts;

typedef struct {
    float lr, scale, decay, momentum;
    bool nesterov;
} SgdStep;

static void sgd_elements(ParamSet *p, int k, long lo, long hi, const void *ctx) {
    const SgdStep *s = ctx;
    float *restrict w = p->value, *restrict g = p->grad, *restrict b = p->state[0];
    const float wd = optim_decays(p->list[k]) ? s->decay : 0.0f, mu = s->momentum, lr = s->lr, scale = s->scale;
    for (long i = lo; i < hi; i++) {
        float gi = g[i] * scale;
        g[i] = 0.0f;
        if (wd != 0.0f) gi = gi + wd * w[i];
        if (mu != 0.0f) {
            b[i] = mu * b[i] + gi;
            gi = s->nesterov ? gi + mu * b[i] : b[i];
        }
        w[i] = w[i] - lr * gi;
    }
}

static void sgd_step(ParamSet *p, const OptimStep *s) {
    if (s->t < 1) DIE("sgd_step: step number t = %ld, but it is 1-based", s->t);
    const SgdOpts *o = s->opts;
    const SgdStep step = {s->lr, s->grad_scale, s->weight_decay, o->momentum, o->nesterov};
    optim_for_each(p, sgd_elements, &step);
}

static int sgd_validate(const void *opts, Err *e) {
    const SgdOpts *o = opts;
    if (o->nesterov && o->momentum == 0.0f)
        return err_set(e, "--nesterov needs a momentum, and --momentum is 0"), err_hint(e, "set --momentum 0.9");
    return 0;
}

static const char *const off_on[] = {"false", "true", NULL};
static const OptDef sgd_options[] = {
    {.name = "momentum", .type = OPT_FLOAT, .group = GROUP_TRAIN, .offset = offsetof(SgdOpts, momentum),
     .def = "0.9", .min = 0, .max = 0.9999, .help = "optimizer=sgd: momentum mu (0: plain SGD)"},
    {.name = "nesterov", .type = OPT_BOOL, .group = GROUP_TRAIN, .offset = offsetof(SgdOpts, nesterov),
     .def = "false", .choices = off_on, .help = "optimizer=sgd: Nesterov's momentum"},
    {.name = NULL},
};

const Optimizer optimizer_sgd = {
    .name = "sgd",
    .help = "SGD with momentum (or Nesterov's), L2 weight decay",
    .n_state = 1,
    .state_names = {"optim.momentum_buffer."},
    .step = sgd_step,
    .option_rows = sgd_options,
    .options_size = sizeof(SgdOpts),
    .validate = sgd_validate,
};
