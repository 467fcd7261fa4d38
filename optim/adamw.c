/* adamw.c: one AdamW step over the parameter slabs, in one pass.
 *
 * Loshchilov & Hutter, "Decoupled Weight Decay Regularization": the decay
 * shrinks the weights directly, w <- w (1 - lr wd), instead of being added to
 * the gradient, so it is not rescaled by Adam's 1 / sqrt(v). The per-element
 * arithmetic follows torch.optim.AdamW's single-tensor path (torch 1.13,
 * foreach=False) operation for operation; the scalars are computed in double
 * and rounded to float once, as PyTorch does with its Python-float scalars.
 * (PyTorch's vectorised CPU kernels fuse the multiply-adds of m and v into
 * FMAs on AVX2, so its float32 moments can differ from these in the last bit;
 * tests/test_optim.c compares with PyTorch run in float64.)
 *
 * The step is memory-bound: per element it reads g, m, v and w and writes
 * them back. So everything that touches an element is done in the one visit:
 * the clipping factor is applied as g is read (the same float product as
 * scaling the gradients first), and g is zeroed for the next backward, which
 * would otherwise be two more passes over the gradient slab (the clip's
 * scaling and a memset). The slab is cut into one contiguous share per
 * thread, whatever the parameters; each share is walked parameter by
 * parameter, so the decay factor is chosen once per piece, not per element. */
#include <math.h>
#include <omp.h>

#include "optim.h"
#include "util.h"

#include <stddef.h>

/* Below this many elements the step runs on one thread: starting the team
 * costs more than the loop. Each element is independent, so the result is
 * bitwise the same for any thread count. */
#define ADAMW_PARALLEL_MIN OPTIM_PARALLEL_MIN

AdamWUpdate adamw_update = adamw_elements;

AdamWConfig adamw_default(void) {
    return (AdamWConfig){.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f};
}

/* Matrices (linear weights, embeddings) are decayed; vectors (biases, norm gains) are not. */
static bool adamw_decays(const Tensor *t) { return optim_decays(t); }

/* Elements [lo, hi) of the slabs, all of parameter k: one decay factor. */
void adamw_elements(ParamSet *p, int k, long lo, long hi, const AdamWScalars *s) {
    float *restrict w = p->value, *restrict g = p->grad, *restrict m = p->state[0], *restrict v = p->state[1];
    const float b1 = s->b1, b2 = s->b2, one_minus_b1 = s->one_minus_b1, one_minus_b2 = s->one_minus_b2;
    const float eps = s->eps, step_size = s->step_size, bc2_sqrt = s->bc2_sqrt, scale = s->grad_scale;
    const float decay = adamw_decays(p->list[k]) ? s->decay : 1.0f;
    for (long i = lo; i < hi; i++) {
        const float gi = g[i] * scale;
        g[i] = 0.0f;
        m[i] = b1 * m[i] + one_minus_b1 * gi;
        v[i] = b2 * v[i] + one_minus_b2 * gi * gi;
        const float denom = sqrtf(v[i]) / bc2_sqrt + eps;
        w[i] = w[i] * decay;
        w[i] = w[i] - step_size * m[i] / denom;
    }
}

void adamw_step(ParamSet *p, const AdamWConfig *c, float lr, long t, float grad_scale) {
    if (t < 1) DIE("adamw_step: step number t = %ld, but it is 1-based", t);
    if (!p->value) DIE("adamw_step: the parameter slabs are not allocated (params_alloc)");
    const float b1 = c->beta1, b2 = c->beta2;
    /* bias corrections 1 - b^t: m and v start at 0, so early averages are too small by this factor */
    const double bc1 = 1.0 - pow(b1, (double)t), bc2 = 1.0 - pow(b2, (double)t);
    const AdamWScalars s = {
        .b1 = b1,
        .b2 = b2,
        .one_minus_b1 = (float)(1.0 - b1),
        .one_minus_b2 = (float)(1.0 - b2),
        .eps = c->eps,
        .step_size = (float)((double)lr / bc1),
        .bc2_sqrt = (float)sqrt(bc2),
        .grad_scale = grad_scale,
        .decay = (float)(1.0 - (double)lr * c->weight_decay),
    };
    const long n = p->total;
    const int count = params_count(p);
    const AdamWUpdate update = adamw_update;
#pragma omp parallel if (n >= ADAMW_PARALLEL_MIN)
    {
        /* this thread's share of the slab, and the pieces of it each parameter holds */
        const long id = omp_get_thread_num(), threads = omp_get_num_threads();
        const long lo = n * id / threads, hi = n * (id + 1) / threads;
        for (int k = 0; k < count; k++) {
            const long start = p->offset[k], end = start + p->list[k]->n;
            const long from = start > lo ? start : lo, to = end < hi ? end : hi;
            if (from < to) update(p, k, from, to, &s);
        }
    }
}

/* ---- the optimizer ------------------------------------------------------------ */

static void adamw_optim_step(ParamSet *p, const OptimStep *s) {
    const AdamWOpts *o = s->opts;
    const AdamWConfig c = {.beta1 = o->beta1, .beta2 = o->beta2, .eps = o->eps, .weight_decay = s->weight_decay};
    adamw_step(p, &c, s->lr, s->t, s->grad_scale);
}

static int adamw_validate(const void *opts, Err *e) {
    const AdamWOpts *o = opts;
    if (o->beta1 >= 1.0f || o->beta2 >= 1.0f)
        return err_set(e, "--beta1 %g, --beta2 %g: moment decays must be below 1", (double)o->beta1, (double)o->beta2);
    return 0;
}

static const OptDef adamw_options[] = {
    {.name = "beta1", .type = OPT_FLOAT, .group = GROUP_TRAIN, .offset = offsetof(AdamWOpts, beta1), .def = "0.9",
     .min = 0, .max = 1, .help = "optimizer=adamw: decay of the first moment m"},
    {.name = "beta2", .type = OPT_FLOAT, .group = GROUP_TRAIN, .offset = offsetof(AdamWOpts, beta2), .def = "0.95",
     .min = 0, .max = 1, .help = "optimizer=adamw: decay of the second moment v"},
    {.name = "eps", .type = OPT_FLOAT, .group = GROUP_TRAIN, .offset = offsetof(AdamWOpts, eps), .def = "1e-8",
     .min = 0, .max = 1, .help = "optimizer=adamw: added to sqrt(v)"},
    {.name = NULL},
};

const Optimizer optimizer_adamw = {
    .name = "adamw",
    .help = "Adam with decoupled weight decay",
    .n_state = 2,
    .state_names = {"optim.m.", "optim.v."},
    .state_nonneg = {false, true},
    .step = adamw_optim_step,
    .option_rows = adamw_options,
    .options_size = sizeof(AdamWOpts),
    .validate = adamw_validate,
};
