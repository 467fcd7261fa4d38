/* cases_linear.c: linear attention and cosFormer (the kernel "linear") for the
 * kernel tables; see tests/cases_linear.h. */
#include "cases_linear.h"

#include <math.h>

#include "ops.h"
#include "util.h"

/* The linear kernel's options of the cases: chunk small, so that T = 5 spans
 * chunks and a partial one. */
static void case_options(ModelConfig *m, int phi, int reweight) {
    *linear_opts(m) = (LinearOpts){.phi = phi, .leaky_slope = 0.01f, .reweight = reweight, .chunk = 2};
}

AttnCall linear_call(ModelConfig *m, bool causal, int phi, int reweight) {
    AttnCall c = kernel_case_call(m, &attn_kernel_linear, causal);
    case_options(m, phi, reweight);
    return c;
}

/* A constant [T, dk] tensor (no gradient) for x [..., T, dk]. */
static Tensor *row_table(const Tensor *x, float (*value)(int i, int c)) {
    int T = x->shape[x->ndim - 2], dk = x->shape[x->ndim - 1];
    Tensor *t = tensor_2d(T, dk);
    for (int i = 0; i < T; i++)
        for (int c = 0; c < dk; c++) t->data[i * dk + c] = value(i, c);
    return t;
}

/* Column 0 is positive in q and k, so den >= sum_j q_i0 k_j0 > 0; the other
 * columns are negative in some rows, and a negative times a positive element
 * adds at most slope |q| |k| (<= 0.0225 at slope 0.01 for inputs in [0.5, 1.5])
 * against at least 0.25 from column 0. */
static float q_sign(int i, int c) { return c == 0 ? 1.0f : c == 1 ? -1.0f : (i % 2 ? -1.0f : 1.0f); }
static float k_sign(int i, int c) { return c == 0 ? 1.0f : c == 2 ? -1.0f : (i % 2 ? 1.0f : -1.0f); }
static float clamp_factor(int i, int c) {
    (void)c;
    return LINEAR_CLAMPED_ROW(i) ? LINEAR_CLAMP_FACTOR : 1.0f;
}

Tensor *linear_signs(Tensor *x, bool is_key) { return op_mul(x, row_table(x, is_key ? k_sign : q_sign)); }
Tensor *linear_clamp_rows(Tensor *q) { return op_mul(q, row_table(q, clamp_factor)); }

/* ---- gradient-check cases ------------------------------------------------------ */

typedef enum { PREP_NONE, PREP_SIGNS, PREP_CLAMP } Prep;

/* in = {q, k, v}, prepared, through the linear kernel. */
static Tensor *run_case(int phi, int reweight, bool causal, Prep prep, Tensor **in) {
    ModelConfig m;
    AttnCall c = linear_call(&m, causal, phi, reweight);
    Tensor *q = in[0], *k = in[1];
    if (prep == PREP_SIGNS) {
        q = linear_signs(q, false);
        k = linear_signs(k, true);
    }
    if (prep == PREP_CLAMP) q = linear_clamp_rows(q);
    const AttnKernel *kern = kernel_by_name("linear");
    if (!kern) DIE("no attention kernel named linear");
    return kern->forward(&c, q, k, in[2]);
}

#define CASE_FN(name, phi, reweight, prep)                                                           \
    Tensor *linear_case_##name##_causal(Tensor **in) { return run_case(phi, reweight, true, prep, in); } \
    Tensor *linear_case_##name##_bidirectional(Tensor **in) { return run_case(phi, reweight, false, prep, in); }

CASE_FN(identity, PHI_IDENTITY, REWEIGHT_NONE, PREP_NONE)
CASE_FN(identity_cos, PHI_IDENTITY, REWEIGHT_COS, PREP_NONE)
CASE_FN(relu, PHI_RELU, REWEIGHT_NONE, PREP_SIGNS)
CASE_FN(relu_cos, PHI_RELU, REWEIGHT_COS, PREP_SIGNS)
CASE_FN(leakyrelu, PHI_LEAKYRELU, REWEIGHT_NONE, PREP_SIGNS)
CASE_FN(leakyrelu_cos, PHI_LEAKYRELU, REWEIGHT_COS, PREP_SIGNS)
CASE_FN(elu, PHI_ELU, REWEIGHT_NONE, PREP_NONE)
CASE_FN(elu_cos, PHI_ELU, REWEIGHT_COS, PREP_NONE)
CASE_FN(clamp, PHI_IDENTITY, REWEIGHT_NONE, PREP_CLAMP)
CASE_FN(clamp_cos, PHI_IDENTITY, REWEIGHT_COS, PREP_CLAMP)

/* ---- references ------------------------------------------------------------------ */

void linear_setup_elu(AttnCall *c, ModelConfig *m) {
    (void)c;
    case_options(m, PHI_ELU, REWEIGHT_NONE);
}
void linear_setup_elu_cos(AttnCall *c, ModelConfig *m) {
    (void)c;
    case_options(m, PHI_ELU, REWEIGHT_COS);
}

static Tensor *phi_op(const AttnCall *c, Tensor *x) {
    const LinearOpts *o = c->opts;
    switch (o->phi) {
        case PHI_IDENTITY: return op_identity(x);
        case PHI_RELU: return op_relu(x);
        case PHI_LEAKYRELU: return op_leakyrelu(x, o->leaky_slope);
        case PHI_ELU: return op_elu(x, 1.0f, 1.0f);
        default: DIE("linear_compose: unknown phi %d", o->phi);
    }
}

static Tensor *filled(int ndim, const int *shape, float value) {
    Tensor *t = tensor_new(ndim, shape);
    for (long i = 0; i < t->n; i++) t->data[i] = value;
    return t;
}

Tensor *linear_compose(const AttnCall *c, Tensor *q, Tensor *k, Tensor *v, Tensor **probs) {
    int T = q->shape[2];
    bool cos_reweight = ((const LinearOpts *)c->opts)->reweight == REWEIGHT_COS;
    Tensor *A = op_matmul(phi_op(c, q), phi_op(c, k), false, true); /* [B, H, T, T] */
    if (c->causal || cos_reweight) {
        /* W_ij = [j <= i when causal] cos(pi (i - j) / 2T): q~_i . k~_j = phi(q_i) . phi(k_j) W_ij */
        Tensor *W = tensor_2d(T, T);
        for (int i = 0; i < T; i++)
            for (int j = 0; j < T; j++)
                W->data[i * T + j] = c->causal && j > i ? 0.0f
                                     : cos_reweight ? (float)cos(M_PI * (i - j) / (2.0 * T))
                                                    : 1.0f;
        A = op_mul(A, W);
    }
    Tensor *den = op_matmul(A, filled(2, (int[]){T, 1}, 1.0f), false, false); /* [B, H, T, 1] */
    /* max(den, eps), written as den * keep + eps * (1 - keep) with keep = [den >= eps]
     * read off the values: the gradient through a clamped row is 0. */
    Tensor *keep = tensor_new(den->ndim, den->shape), *floor = tensor_new(den->ndim, den->shape);
    for (long i = 0; i < den->n; i++) {
        bool k = den->data[i] >= LINEAR_EPS;
        keep->data[i] = k ? 1.0f : 0.0f;
        floor->data[i] = k ? 0.0f : LINEAR_EPS;
    }
    Tensor *d = op_add(op_mul(den, keep), floor);
    /* 1 / d without a division op: one Newton step r = r0 (2 - d r0) from the
     * constant r0 = 1 / d (read off the values). Its value is 1 / d to
     * rounding, and its derivative -r0^2 = -1 / d^2 is that of 1 / d, which
     * is all backward sees. */
    Tensor *r0 = tensor_new(d->ndim, d->shape);
    for (long i = 0; i < d->n; i++) r0->data[i] = 1.0f / d->data[i];
    Tensor *r = op_mul(op_add(op_scale(op_mul(d, r0), -1.0f), filled(d->ndim, d->shape, 2.0f)), r0);
    /* P_ij = A_ij r_i: r times a row of ones spreads r_i along row i */
    Tensor *P = op_mul(A, op_matmul(r, filled(2, (int[]){1, T}, 1.0f), false, false));
    *probs = P;
    return op_matmul(P, v, false, false);
}
