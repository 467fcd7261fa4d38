#include "gradcheck.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"
#include "util.h"

static void fill_leaf(Rng *rng, Tensor *t, GcInit init) {
    for (long i = 0; i < t->n; i++) {
        float x = rng_normal(rng);
        if (init == GC_NONZERO && fabsf(x) < 0.1f) x = x < 0 ? x - 0.1f : x + 0.1f;
        if (init == GC_POSITIVE) x = 0.5f + rng_uniform(rng);
        t->data[i] = x;
    }
}

/* f = sum(out * R), forward only, in a fresh arena. */
static double reduced(const GradCase *c, Tensor **leaves, Arena *work, const float *R) {
    arena_reset(work);
    Tensor *out = c->build(leaves);
    double f = 0.0;
    for (long i = 0; i < out->n; i++) f += (double)out->data[i] * R[i];
    return f;
}

/* Numeric gradients by central differences, compared with the analytic ones
 * as they come: r's worst ratio, or r->ok false at a non-finite one. */
static void numeric_compare(const GradCase *c, Tensor **leaves, float *const *analytic, Arena *work, const float *R,
                            const GcOptions *o, GcResult *r) {
    for (int k = 0; k < c->n_in && r->ok; k++) {
        Tensor *x = leaves[k];
        long step = x->n > o->max_per_input ? (x->n + o->max_per_input - 1) / o->max_per_input : 1;
        for (long i = 0; i < x->n; i += step) {
            float saved = x->data[i];
            x->data[i] = saved + (float)o->eps;
            double fp = reduced(c, leaves, work, R);
            x->data[i] = saved - (float)o->eps;
            double fm = reduced(c, leaves, work, R);
            x->data[i] = saved;
            /* The step actually taken, after rounding to float. */
            double h = (double)(saved + (float)o->eps) - (double)(saved - (float)o->eps);
            double num = (fp - fm) / h, ana = analytic[k][i];
            r->checked++;
            if (!isfinite(ana)) {
                r->ok = false;
                snprintf(r->why, sizeof r->why, "input %d [%ld]: analytic gradient is not finite", k, i);
            }
            double tol = o->atol + o->rtol * fmax(fabs(ana), fabs(num));
            double ratio = fabs(ana - num) / tol;
            if (!(ratio <= r->worst_ratio) && isfinite(ana)) {
                r->worst_ratio = ratio;
                r->worst_in = k;
                r->worst_index = i;
                r->worst_analytic = ana;
                r->worst_numeric = num;
            }
            if (!r->ok) break;
        }
    }
}

bool gradcheck(const GradCase *c, uint64_t seed, const GcOptions *opt, GcResult *r) {
    GcOptions o = {1e-2, 1e-3, 1e-2, 256};
    if (opt) {
        if (opt->eps > 0) o.eps = opt->eps;
        if (opt->atol > 0) o.atol = opt->atol;
        if (opt->rtol > 0) o.rtol = opt->rtol;
        if (opt->max_per_input > 0) o.max_per_input = opt->max_per_input;
    }
    memset(r, 0, sizeof *r);
    r->ok = true;

    Arena *outer = engine_arena_or_null();
    bool grad_was = grad_set(false);
    Arena leaf_arena, work;
    arena_init(&leaf_arena, 1 << 16);
    arena_init(&work, 1 << 20);
    Rng rng;
    rng_seed(&rng, seed);

    engine_set_arena(&leaf_arena);
    Tensor *leaves[GC_MAX_IN];
    for (int k = 0; k < c->n_in; k++) {
        leaves[k] = tensor_new(c->in[k].ndim, c->in[k].shape);
        fill_leaf(&rng, leaves[k], c->in[k].init);
        leaves[k]->requires_grad = true;
    }

    /* One forward to learn the output size, then the weights R. */
    engine_set_arena(&work);
    long n_out = c->build(leaves)->n;
    float *R = xmalloc((size_t)n_out * sizeof(float));
    rng_fill_normal(&rng, R, n_out, 0.0f, 1.0f);

    /* Analytic gradients: backward seeded with R. */
    arena_reset(&work);
    tape_reset();
    grad_set(true);
    for (int k = 0; k < c->n_in; k++) leaves[k]->grad = NULL;
    Tensor *out = c->build(leaves);
    if (!out->requires_grad) DIE("gradcheck %s: the output does not depend on the leaves", c->name);
    backward_seeded(out, R);
    for (Node *n = tape_last(); n; n = n->prev) {
        int id = op_id(n);
        if (id >= 0) r->covered[id] = true;
    }
    float *analytic[GC_MAX_IN];
    for (int k = 0; k < c->n_in; k++) {
        size_t bytes = (size_t)leaves[k]->n * sizeof(float);
        analytic[k] = xcalloc(1, bytes);
        if (leaves[k]->grad) memcpy(analytic[k], leaves[k]->grad, bytes);
        leaves[k]->grad = NULL;
    }
    tape_reset();
    grad_set(false);

    numeric_compare(c, leaves, analytic, &work, R, &o, r);
    if (r->ok && !(r->worst_ratio < 1.0)) {
        r->ok = false;
        snprintf(r->why, sizeof r->why, "input %d [%ld]: analytic %.6g, numeric %.6g", r->worst_in,
                 r->worst_index, r->worst_analytic, r->worst_numeric);
    }

    for (int k = 0; k < c->n_in; k++) free(analytic[k]);
    free(R);
    arena_free(&work);
    arena_free(&leaf_arena);
    engine_set_arena(outer);
    grad_set(grad_was);
    return r->ok;
}
