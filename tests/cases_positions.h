/* cases_positions.h: positions inside the plain softmax kernel (windows, bca,
 * log-n scaling and the score biases of the position schemes' bias hooks) for the
 * kernel tables of tests/layer_cases.c (the functions are in
 * tests/cases_positions.c).
 *
 * Gradient-check leaves are q, k, v, then for pos = kerple_* its two [H]
 * parameters, drawn GC_POSITIVE (in [0.5, 1.5], inside every clamp). The
 * "clamp" cases multiply them by a fixed pattern on the tape first, so that
 * head 0 stays inside the clamps and head 1 is outside (a, r1, r2 negative,
 * p above 2): the check then covers both sides. kernel_case_call's T = 5 is
 * one query block; tests/test_attn_positions.c runs the same cases with
 * blocks of 2 rows (positions_query_block). context = 4: bca blocks of 2 keys, and log-n factors
 * above 1 for rows that see more than 4 keys. */
#ifndef ATTNLAB_CASES_POSITIONS_H
#define ATTNLAB_CASES_POSITIONS_H

#include "layer_cases.h"

#define POS_CONTEXT 4

/* The softmax kernel's query_block that the variants' calls get (0: the
 * kernel's default); a test sets it to run the cases in several blocks. */
extern int positions_query_block;

/* The call of a variant, its config in *m: kernel_case_call on the softmax
 * kernel with the position options. */
AttnCall positions_call(ModelConfig *m, bool causal, int pos, int window, bool bca, bool logn);

/* The mask, the log-n factors and the bias of a call, computed here the plain
 * way (in double, from the definitions), for the references and the tests:
 * mask[i T + j] = 0 or -INFINITY, lambda[i], bias[(h T + i) T + j]. */
void positions_reference(const AttnCall *c, const float *p0, const float *p1, float *mask, float *lambda, float *bias);

/* The same attention from primitive ops: scale q k^T, times lambda (logn),
 * plus the bias, softmax with the mask, times v. kerple parameters come from
 * c->params as constants. */
Tensor *positions_compose(const AttnCall *c, Tensor *q, Tensor *k, Tensor *v, Tensor **probs);

Tensor *pos_alibi_causal(Tensor **in);
Tensor *pos_alibi_bidirectional(Tensor **in);
Tensor *pos_kerple_power_causal(Tensor **in);
Tensor *pos_kerple_power_bidirectional(Tensor **in);
Tensor *pos_kerple_power_clamp(Tensor **in);
Tensor *pos_kerple_log_causal(Tensor **in);
Tensor *pos_kerple_log_bidirectional(Tensor **in);
Tensor *pos_kerple_log_clamp(Tensor **in);
Tensor *pos_sandwich_causal(Tensor **in);
Tensor *pos_sandwich_bidirectional(Tensor **in);
Tensor *pos_window1(Tensor **in);
Tensor *pos_window2(Tensor **in);
Tensor *pos_window3(Tensor **in);
Tensor *pos_window8(Tensor **in);
Tensor *pos_window1_bidirectional(Tensor **in);
Tensor *pos_window2_bidirectional(Tensor **in);
Tensor *pos_alibi_window_logn_bidirectional(Tensor **in);
Tensor *pos_bca(Tensor **in);
Tensor *pos_logn_causal(Tensor **in);
Tensor *pos_logn_bidirectional(Tensor **in);
Tensor *pos_alibi_window_logn(Tensor **in);
Tensor *pos_kerple_bca(Tensor **in);

void pos_setup_alibi(AttnCall *c, ModelConfig *m);
void pos_setup_kerple_power(AttnCall *c, ModelConfig *m);
void pos_setup_kerple_log(AttnCall *c, ModelConfig *m);
void pos_setup_sandwich(AttnCall *c, ModelConfig *m);
void pos_setup_window2(AttnCall *c, ModelConfig *m);
void pos_setup_bca(AttnCall *c, ModelConfig *m);
void pos_setup_logn(AttnCall *c, ModelConfig *m);
void pos_setup_alibi_window_logn(AttnCall *c, ModelConfig *m);
void pos_setup_kerple_bca(AttnCall *c, ModelConfig *m);

#define POS_Q {4, {KC_B, KC_H, KC_T, KC_DK}, GC_NORMAL}
#define POS_V {4, {KC_B, KC_H, KC_T, KC_DV}, GC_NORMAL}
#define POS_P {1, {KC_H}, GC_POSITIVE}
#define POS_QKV {POS_Q, POS_Q, POS_V}
#define POS_QKVPP {POS_Q, POS_Q, POS_V, POS_P, POS_P}

/* For kernel_cases[]. */
#define POSITIONS_KERNEL_CASES \
    {{"attn_pos_alibi_causal", 3, POS_QKV, pos_alibi_causal}, "softmax", true}, \
    {{"attn_pos_alibi_bidirectional", 3, POS_QKV, pos_alibi_bidirectional}, "softmax", false}, \
    {{"attn_pos_kerple_power_causal", 5, POS_QKVPP, pos_kerple_power_causal}, "softmax", true}, \
    {{"attn_pos_kerple_power_bidirectional", 5, POS_QKVPP, pos_kerple_power_bidirectional}, "softmax", false}, \
    {{"attn_pos_kerple_power_clamp", 5, POS_QKVPP, pos_kerple_power_clamp}, "softmax", true}, \
    {{"attn_pos_kerple_log_causal", 5, POS_QKVPP, pos_kerple_log_causal}, "softmax", true}, \
    {{"attn_pos_kerple_log_bidirectional", 5, POS_QKVPP, pos_kerple_log_bidirectional}, "softmax", false}, \
    {{"attn_pos_kerple_log_clamp", 5, POS_QKVPP, pos_kerple_log_clamp}, "softmax", false}, \
    {{"attn_pos_sandwich_causal", 3, POS_QKV, pos_sandwich_causal}, "softmax", true}, \
    {{"attn_pos_sandwich_bidirectional", 3, POS_QKV, pos_sandwich_bidirectional}, "softmax", false}, \
    {{"attn_pos_window1", 3, POS_QKV, pos_window1}, "softmax", true}, \
    {{"attn_pos_window2", 3, POS_QKV, pos_window2}, "softmax", true}, \
    {{"attn_pos_window3", 3, POS_QKV, pos_window3}, "softmax", true}, \
    {{"attn_pos_window8", 3, POS_QKV, pos_window8}, "softmax", true}, \
    {{"attn_pos_window1_bidirectional", 3, POS_QKV, pos_window1_bidirectional}, "softmax", false}, \
    {{"attn_pos_window2_bidirectional", 3, POS_QKV, pos_window2_bidirectional}, "softmax", false}, \
    {{"attn_pos_alibi_window_logn_bidirectional", 3, POS_QKV, pos_alibi_window_logn_bidirectional}, "softmax", false}, \
    {{"attn_pos_bca", 3, POS_QKV, pos_bca}, "softmax", true}, \
    {{"attn_pos_logn_causal", 3, POS_QKV, pos_logn_causal}, "softmax", true}, \
    {{"attn_pos_logn_bidirectional", 3, POS_QKV, pos_logn_bidirectional}, "softmax", false}, \
    {{"attn_pos_alibi_window_logn", 3, POS_QKV, pos_alibi_window_logn}, "softmax", true}, \
    {{"attn_pos_kerple_bca", 5, POS_QKVPP, pos_kerple_bca}, "softmax", true}

/* For kernel_refs[]: kerple's parameters are fixed constants the setup
 * makes (one head inside the clamps, one outside); their gradients are
 * checked by the gradient check and the PyTorch fixture. */
#define POSITIONS_KERNEL_REFS \
    {"pos=alibi causal", "softmax", true, pos_setup_alibi, 0, {{0}}, positions_compose, true}, \
    {"pos=alibi bidirectional", "softmax", false, pos_setup_alibi, 0, {{0}}, positions_compose, true}, \
    {"pos=kerple_power causal", "softmax", true, pos_setup_kerple_power, 0, {{0}}, positions_compose, true}, \
    {"pos=kerple_power bidirectional", "softmax", false, pos_setup_kerple_power, 0, {{0}}, positions_compose, true}, \
    {"pos=kerple_log causal", "softmax", true, pos_setup_kerple_log, 0, {{0}}, positions_compose, true}, \
    {"pos=kerple_log bidirectional", "softmax", false, pos_setup_kerple_log, 0, {{0}}, positions_compose, true}, \
    {"pos=sandwich causal", "softmax", true, pos_setup_sandwich, 0, {{0}}, positions_compose, true}, \
    {"pos=sandwich bidirectional", "softmax", false, pos_setup_sandwich, 0, {{0}}, positions_compose, true}, \
    {"window=2", "softmax", true, pos_setup_window2, 0, {{0}}, positions_compose, true}, \
    {"window=2 bidirectional", "softmax", false, pos_setup_window2, 0, {{0}}, positions_compose, true}, \
    {"alibi window=2 logn bidirectional", "softmax", false, pos_setup_alibi_window_logn, 0, {{0}}, positions_compose, true}, \
    {"bca", "softmax", true, pos_setup_bca, 0, {{0}}, positions_compose, true}, \
    {"logn causal", "softmax", true, pos_setup_logn, 0, {{0}}, positions_compose, true}, \
    {"logn bidirectional", "softmax", false, pos_setup_logn, 0, {{0}}, positions_compose, true}, \
    {"alibi window=2 logn", "softmax", true, pos_setup_alibi_window_logn, 0, {{0}}, positions_compose, true}, \
    {"kerple_power bca", "softmax", true, pos_setup_kerple_bca, 0, {{0}}, positions_compose, true}

#endif
