/* cases_linear.h: linear attention's entries in the kernel tables of
 * tests/layer_cases.c (the functions are in tests/cases_linear.c): the kernel
 * "linear" with phi = identity | relu | leakyrelu | elu, reweight = none | cos
 * (cosFormer), causal and bidirectional.
 *
 * Gradient-check inputs keep every denominator clear of 0 and of the clamp at
 * 1e-6, whatever the seed, so that central differences stay valid:
 *  - elu: q, k drawn GC_NONZERO (no kink within a step); the features are
 *    > 0, so den is a sum of positive terms;
 *  - identity: q, k drawn GC_POSITIVE;
 *  - relu, leakyrelu: q, k drawn GC_POSITIVE, then given a fixed sign pattern
 *    (linear_signs) that sends some elements through the negative branch
 *    while column 0, positive in both, keeps den > 0 (with N(0, 1) inputs a
 *    relu row with one small positive element has a tiny den);
 *  - clamp (identity): GC_POSITIVE q with rows 1 and 3 multiplied by -1e-6
 *    (linear_clamp_rows): those rows have den < 0 and are clamped, the others
 *    are not, so the backward is checked on both sides of the clamp. The tiny
 *    factor keeps the clamped rows' outputs (num / 1e-6) of order 1.
 * The cases' chunk = 2 (linear_call, and the references' setups) makes T = 5
 * three chunks, one of them partial. */
#ifndef ATTNLAB_CASES_LINEAR_H
#define ATTNLAB_CASES_LINEAR_H

#include "layer_cases.h"

/* The cosFormer reference's clamp on the denominator (layers/attention/linear.c). */
#define LINEAR_EPS 1e-6f

/* The factor linear_clamp_rows gives the clamped rows, and which rows. */
#define LINEAR_CLAMP_FACTOR (-1e-6f)
#define LINEAR_CLAMPED_ROW(i) ((i) == 1 || (i) == 3)

/* q, k [..., T, dk] times fixed patterns [T, dk] (primitive ops, on the tape):
 * signs for relu and leakyrelu; the clamp factor on rows 1 and 3 of q. */
Tensor *linear_signs(Tensor *x, bool is_key);
Tensor *linear_clamp_rows(Tensor *q);

/* The call for one variant, its config in *m: kernel_case_call on the linear
 * kernel with phi and reweight set, and chunk 2. */
AttnCall linear_call(ModelConfig *m, bool causal, int phi, int reweight);

/* The same attention from primitive ops, the O(T^2) way: A = phi(q) phi(k)^T
 * times the causal mask and the cos re-weighting, den = A 1 clamped, P = A /
 * den, out = P v. Uses q's T (any length). */
Tensor *linear_compose(const AttnCall *c, Tensor *q, Tensor *k, Tensor *v, Tensor **probs);

Tensor *linear_case_identity_causal(Tensor **in);
Tensor *linear_case_identity_bidirectional(Tensor **in);
Tensor *linear_case_identity_cos_causal(Tensor **in);
Tensor *linear_case_identity_cos_bidirectional(Tensor **in);
Tensor *linear_case_relu_causal(Tensor **in);
Tensor *linear_case_relu_bidirectional(Tensor **in);
Tensor *linear_case_relu_cos_causal(Tensor **in);
Tensor *linear_case_relu_cos_bidirectional(Tensor **in);
Tensor *linear_case_leakyrelu_causal(Tensor **in);
Tensor *linear_case_leakyrelu_bidirectional(Tensor **in);
Tensor *linear_case_leakyrelu_cos_causal(Tensor **in);
Tensor *linear_case_leakyrelu_cos_bidirectional(Tensor **in);
Tensor *linear_case_elu_causal(Tensor **in);
Tensor *linear_case_elu_bidirectional(Tensor **in);
Tensor *linear_case_elu_cos_causal(Tensor **in);
Tensor *linear_case_elu_cos_bidirectional(Tensor **in);
Tensor *linear_case_clamp_causal(Tensor **in);
Tensor *linear_case_clamp_bidirectional(Tensor **in);
Tensor *linear_case_clamp_cos_causal(Tensor **in);
Tensor *linear_case_clamp_cos_bidirectional(Tensor **in);

void linear_setup_elu(AttnCall *c, ModelConfig *m);
void linear_setup_elu_cos(AttnCall *c, ModelConfig *m);

#define LINEAR_QK(init) {4, {KC_B, KC_H, KC_T, KC_DK}, init}
#define LINEAR_V {4, {KC_B, KC_H, KC_T, KC_DV}, GC_NORMAL}
#define LINEAR_CASE(name, causal, init) \
    {{"attn_linear_" #name, 3, {LINEAR_QK(init), LINEAR_QK(init), LINEAR_V}, linear_case_##name}, "linear", causal}

/* For kernel_cases[]. */
#define LINEAR_KERNEL_CASES \
    LINEAR_CASE(identity_causal, true, GC_POSITIVE), \
    LINEAR_CASE(identity_bidirectional, false, GC_POSITIVE), \
    LINEAR_CASE(identity_cos_causal, true, GC_POSITIVE), \
    LINEAR_CASE(identity_cos_bidirectional, false, GC_POSITIVE), \
    LINEAR_CASE(relu_causal, true, GC_POSITIVE), \
    LINEAR_CASE(relu_bidirectional, false, GC_POSITIVE), \
    LINEAR_CASE(relu_cos_causal, true, GC_POSITIVE), \
    LINEAR_CASE(relu_cos_bidirectional, false, GC_POSITIVE), \
    LINEAR_CASE(leakyrelu_causal, true, GC_POSITIVE), \
    LINEAR_CASE(leakyrelu_bidirectional, false, GC_POSITIVE), \
    LINEAR_CASE(leakyrelu_cos_causal, true, GC_POSITIVE), \
    LINEAR_CASE(leakyrelu_cos_bidirectional, false, GC_POSITIVE), \
    LINEAR_CASE(elu_causal, true, GC_NONZERO), \
    LINEAR_CASE(elu_bidirectional, false, GC_NONZERO), \
    LINEAR_CASE(elu_cos_causal, true, GC_NONZERO), \
    LINEAR_CASE(elu_cos_bidirectional, false, GC_NONZERO), \
    LINEAR_CASE(clamp_causal, true, GC_POSITIVE), \
    LINEAR_CASE(clamp_bidirectional, false, GC_POSITIVE), \
    LINEAR_CASE(clamp_cos_causal, true, GC_POSITIVE), \
    LINEAR_CASE(clamp_cos_bidirectional, false, GC_POSITIVE)

/* For kernel_refs[]: the variants that the N(0, 1) inputs of tests/test_model.c
 * keep well conditioned. With elu+1 every feature is > 0, so den is a sum of
 * positive terms. With identity, leakyrelu and relu, such inputs give rows
 * with den near 0 in a few percent of seeds, where float32 loses the
 * gradient to cancellation (relu: a row with one small positive element of q
 * has a den of that size and an output that does not depend on it, so its
 * gradient is the difference of two terms ~ 1 / den); the table cannot choose
 * inputs, so those variants, cosFormer included, are compared with
 * linear_compose on prepared inputs in tests/test_attn_linear.c. */
#define LINEAR_KERNEL_REFS \
    {"linear phi=elu causal", "linear", true, linear_setup_elu, 0, {{0}}, linear_compose, true}, \
    {"linear phi=elu bidirectional", "linear", false, linear_setup_elu, 0, {{0}}, linear_compose, true}, \
    {"linear phi=elu reweight=cos causal", "linear", true, linear_setup_elu_cos, 0, {{0}}, linear_compose, true}, \
    {"linear phi=elu reweight=cos bidirectional", "linear", false, linear_setup_elu_cos, 0, {{0}}, linear_compose, \
     true}

#endif
