/* step.c: one training step (step.h). */
#include "step.h"

#include <string.h>

#include "dist.h"
#include "gemm.h"

void step_init(TrainStep *s, Model *m, const TrainConfig *tc, int ranks) {
    s->m = m;
    arena_init(&s->arena, 0);
    engine_set_arena(&s->arena);
    s->opt = optimizer_at(tc->optimizer);
    memcpy(s->opt_config, tc->optim_options, sizeof s->opt_config);
    s->opt_options = optim_options(s->opt_config, tc->optimizer);
    s->weight_decay = tc->weight_decay;
    s->clip = tc->clip;
    s->ranks = ranks;
    grad_set(true);
    params_zero_grad(&m->params);
}

Tensor *step_loss(TrainStep *s, const int *ids, const int *targets, int B, int T) {
    arena_reset(&s->arena);
    tape_reset();
    attn_stats_reset();
    return model_loss(s->m, ids, targets, B, T);
}

void step_backward(TrainStep *s, Tensor *loss) {
    (void)s;
    backward(loss);
}

void step_average(TrainStep *s) {
    if (s->ranks > 1) dist_allreduce_mean(s->m->params.grad, s->m->params.total);
}

double step_norm(const TrainStep *s) { return grad_norm(&s->m->params); }

void step_update(TrainStep *s, float lr, long step, double norm) {
    /* clipping, the update and the zeroing of the gradients, in one pass */
    s->opt->step(&s->m->params, &(OptimStep){lr, step + 1, clip_scale(norm, s->clip), s->weight_decay, s->opt_options});
    gemm_weights_changed(); /* the weights' bf16 copy, when precision_begin bound one */
}

void step_free(TrainStep *s) {
    tape_reset();
    engine_set_arena(NULL);
    arena_free(&s->arena);
}
