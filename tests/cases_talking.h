/* cases_talking.h: Talking-Heads attention's entries in the kernel tables of
 * tests/layer_cases.c (the functions are in tests/cases_talking.c).
 *
 * The softmax kernel with talking_heads = pre, post or both, causal and
 * bidirectional. Gradient-check leaves are q, k, v, then the [H, H] mixing
 * matrices in the kernel's parameter order (talking_pre, then talking_post);
 * gradcheck draws them N(0, 1), the references N(0, 0.5), so none is the
 * identity and every mix changes the result. */
#ifndef ATTNLAB_CASES_TALKING_H
#define ATTNLAB_CASES_TALKING_H

#include "layer_cases.h"

Tensor *talking_pre_causal(Tensor **in);
Tensor *talking_pre_bidirectional(Tensor **in);
Tensor *talking_post_causal(Tensor **in);
Tensor *talking_post_bidirectional(Tensor **in);
Tensor *talking_both_causal(Tensor **in);
Tensor *talking_both_bidirectional(Tensor **in);

void talking_setup_pre(AttnCall *c, ModelConfig *m);
void talking_setup_post(AttnCall *c, ModelConfig *m);
void talking_setup_both(AttnCall *c, ModelConfig *m);

/* The same attention from primitive ops: the mixes are row-times-matrix
 * products with the head axis moved last. */
Tensor *talking_compose(const AttnCall *c, Tensor *q, Tensor *k, Tensor *v, Tensor **probs);

#define TALKING_Q {4, {KC_B, KC_H, KC_T, KC_DK}, GC_NORMAL}
#define TALKING_V {4, {KC_B, KC_H, KC_T, KC_DV}, GC_NORMAL}
#define TALKING_W {2, {KC_H, KC_H}, GC_NORMAL}

/* For kernel_cases[]. */
#define TALKING_QKVW {TALKING_Q, TALKING_Q, TALKING_V, TALKING_W}
#define TALKING_QKVWW {TALKING_Q, TALKING_Q, TALKING_V, TALKING_W, TALKING_W}
#define TALKING_KERNEL_CASES \
    {{"attn_talking_pre_causal", 4, TALKING_QKVW, talking_pre_causal}, "softmax", true}, \
    {{"attn_talking_pre_bidirectional", 4, TALKING_QKVW, talking_pre_bidirectional}, "softmax", false}, \
    {{"attn_talking_post_causal", 4, TALKING_QKVW, talking_post_causal}, "softmax", true}, \
    {{"attn_talking_post_bidirectional", 4, TALKING_QKVW, talking_post_bidirectional}, "softmax", false}, \
    {{"attn_talking_both_causal", 5, TALKING_QKVWW, talking_both_causal}, "softmax", true}, \
    {{"attn_talking_both_bidirectional", 5, TALKING_QKVWW, talking_both_bidirectional}, "softmax", false}

/* For kernel_refs[]. */
#define TALKING_KERNEL_REFS \
    {"talking_heads=pre causal", "softmax", true, talking_setup_pre, 1, {TALKING_W}, talking_compose, true}, \
    {"talking_heads=pre bidirectional", "softmax", false, talking_setup_pre, 1, {TALKING_W}, talking_compose, true}, \
    {"talking_heads=post causal", "softmax", true, talking_setup_post, 1, {TALKING_W}, talking_compose, true}, \
    {"talking_heads=post bidirectional", "softmax", false, talking_setup_post, 1, {TALKING_W}, talking_compose, true}, \
    {"talking_heads=both causal", "softmax", true, talking_setup_both, 2, {TALKING_W, TALKING_W}, talking_compose, \
     true}, \
    {"talking_heads=both bidirectional", "softmax", false, talking_setup_both, 2, {TALKING_W, TALKING_W}, \
     talking_compose, true}

#endif
