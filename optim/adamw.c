/* adamw.c: one AdamW step over the parameter slabs.
 *
 * Loshchilov & Hutter, "Decoupled Weight Decay Regularization": the decay
 * shrinks the weights directly, w <- w (1 - lr wd), instead of being added to
 * the gradient, so it is not rescaled by Adam's 1 / sqrt(v). The per-element
 * arithmetic follows torch.optim.AdamW's single-tensor path (torch 1.13,
 * foreach=False) operation for operation; the scalars are computed in double
 * and rounded to float once, as PyTorch does with its Python-float scalars. */
#include <math.h>

#include "optim.h"
#include "util.h"

/* Below this many elements a parameter is updated by one thread: starting the
 * team costs more than the loop. Each element is independent, so the result
 * is bitwise the same for any thread count. */
#define ADAMW_PARALLEL_MIN (1L << 15)

AdamWConfig adamw_default(void) {
    return (AdamWConfig){.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f};
}

/* Matrices (linear weights, embeddings) are decayed; vectors (biases, norm gains) are not. */
static bool adamw_decays(const Tensor *t) { return t->ndim >= 2; }

void adamw_step(ParamSet *p, const AdamWConfig *c, float lr, long t) {
    if (t < 1) DIE("adamw_step: step number t = %ld, but it is 1-based", t);
    if (!p->value) DIE("adamw_step: the parameter slabs are not allocated (params_alloc)");
    const float b1 = c->beta1, b2 = c->beta2, eps = c->eps;
    const float one_minus_b1 = (float)(1.0 - b1), one_minus_b2 = (float)(1.0 - b2);
    /* bias corrections 1 - b^t: m and v start at 0, so early averages are too small by this factor */
    const double bc1 = 1.0 - pow(b1, (double)t), bc2 = 1.0 - pow(b2, (double)t);
    const float step_size = (float)((double)lr / bc1);
    const float bc2_sqrt = (float)sqrt(bc2);
    for (int k = 0; k < params_count(p); k++) {
        const Tensor *tn = p->list[k];
        const float decay = adamw_decays(tn) ? (float)(1.0 - (double)lr * c->weight_decay) : 1.0f;
        const long n = tn->n;
        float *w = p->value + p->offset[k], *g = p->grad + p->offset[k];
        float *m = p->m + p->offset[k], *v = p->v + p->offset[k];
#pragma omp parallel for schedule(static) if (n >= ADAMW_PARALLEL_MIN)
        for (long i = 0; i < n; i++) {
            const float gi = g[i];
            m[i] = b1 * m[i] + one_minus_b1 * gi;
            v[i] = b2 * v[i] + one_minus_b2 * gi * gi;
            const float denom = sqrtf(v[i]) / bc2_sqrt + eps;
            w[i] = w[i] * decay;
            w[i] = w[i] - step_size * m[i] / denom;
        }
    }
}
