/* cases_linformer.h: the Linformer kernel's entries in the kernel tables of
 * tests/layer_cases.c (the functions are in tests/cases_linformer.c).
 *
 * Every linformer_proj x linformer_share, bidirectional (the kernel has no
 * causal form). The cases use n = context = LF_N and k = LF_K, so the
 * T = KC_T = 5 positions use the first 5 of E's 6 columns, and pooling and
 * conv (stride n / k = 2) end in a partial window: k' = 3. Gradient-check
 * leaves are q, k, v, then E and F in the kernel's parameter order: E [H, k,
 * n] and F for share = none, E and F [k, n] for headwise, E alone for kv and
 * layerwise (F = E); conv has kernels [H, n/k] or [n/k] instead; mean and max
 * have no parameters whatever the share mode. Max pooling's cases add a fixed
 * pattern to k and v that keeps every window's maximum well apart from the
 * runner-up, so the finite differences never cross a kink.
 *
 * The references build the projection as a [B, H, k', T] matrix from
 * primitive ops (E's first T columns picked by a matmul with a 0/1 matrix,
 * conv kernels spread by one, pooling windows as fixed averaging weights) and
 * project k and v by batched matmul. Max pooling is no matmul; test
 * attn_linformer (tests/test_attn_linformer.c) checks it against a naive loop
 * and PyTorch. The kernel's output is P (F v), so probs_times_v is false. */
#ifndef ATTNLAB_CASES_LINFORMER_H
#define ATTNLAB_CASES_LINFORMER_H

#include "layer_cases.h"

#define LF_N 6 /* context: E has n = 6 columns, one more than KC_T */
#define LF_K 3 /* linformer_k: pooling stride n / k = 2 */

Tensor *lf_case_linear_none(Tensor **in);
Tensor *lf_case_linear_headwise(Tensor **in);
Tensor *lf_case_linear_kv(Tensor **in);
Tensor *lf_case_linear_layerwise(Tensor **in);
Tensor *lf_case_conv_none(Tensor **in);
Tensor *lf_case_conv_headwise(Tensor **in);
Tensor *lf_case_conv_kv(Tensor **in);
Tensor *lf_case_conv_layerwise(Tensor **in);
Tensor *lf_case_mean_none(Tensor **in);
Tensor *lf_case_mean_headwise(Tensor **in);
Tensor *lf_case_mean_kv(Tensor **in);
Tensor *lf_case_mean_layerwise(Tensor **in);
Tensor *lf_case_max_none(Tensor **in);
Tensor *lf_case_max_headwise(Tensor **in);
Tensor *lf_case_max_kv(Tensor **in);
Tensor *lf_case_max_layerwise(Tensor **in);

/* Reference setups: the share mode and projection, n and k (n = LF_N, k =
 * LF_K unless the name says otherwise). */
void lf_setup_linear_none(AttnCall *c, ModelConfig *m);
void lf_setup_linear_headwise(AttnCall *c, ModelConfig *m);
void lf_setup_linear_kv(AttnCall *c, ModelConfig *m);
void lf_setup_linear_layerwise(AttnCall *c, ModelConfig *m);
void lf_setup_linear_none_full(AttnCall *c, ModelConfig *m); /* n = KC_T: every column of E */
void lf_setup_conv_none(AttnCall *c, ModelConfig *m);
void lf_setup_conv_headwise(AttnCall *c, ModelConfig *m);
void lf_setup_conv_kv(AttnCall *c, ModelConfig *m);
void lf_setup_conv_layerwise(AttnCall *c, ModelConfig *m);
void lf_setup_conv_n8_k2(AttnCall *c, ModelConfig *m);   /* stride 4: windows [0, 4) and [4, 5) */
void lf_setup_mean(AttnCall *c, ModelConfig *m);
void lf_setup_mean_n10_k2(AttnCall *c, ModelConfig *m);  /* stride 5 = T: one full window */

/* The kernel from primitive ops (not for max pooling). */
Tensor *lf_compose(const AttnCall *c, Tensor *q, Tensor *k, Tensor *v, Tensor **probs);
/* The projection matrix [B, H, k', T] of w (E, F or a conv kernel; NULL for
 * mean) under c, from primitive ops; x' = this times x. */
Tensor *lf_compose_projection(const AttnCall *c, Tensor *w, int B, int T);

#define LF_QKV                                                                                        \
    {4, {KC_B, KC_H, KC_T, KC_DK}, GC_NORMAL}, {4, {KC_B, KC_H, KC_T, KC_DK}, GC_NORMAL},            \
        {4, {KC_B, KC_H, KC_T, KC_DV}, GC_NORMAL}
#define LF_E_HEADS {3, {KC_H, LF_K, LF_N}, GC_NORMAL}
#define LF_E_SHARED {2, {LF_K, LF_N}, GC_NORMAL}
#define LF_W_HEADS {2, {KC_H, LF_N / LF_K}, GC_NORMAL}
#define LF_W_SHARED {1, {LF_N / LF_K}, GC_NORMAL}

/* For kernel_cases[]. */
#define LINFORMER_KERNEL_CASES                                                                                   \
    {{"attn_linformer_linear_none", 5, {LF_QKV, LF_E_HEADS, LF_E_HEADS}, lf_case_linear_none}, "linformer",      \
     false},                                                                                                     \
        {{"attn_linformer_linear_headwise", 5, {LF_QKV, LF_E_SHARED, LF_E_SHARED}, lf_case_linear_headwise},     \
         "linformer", false},                                                                                    \
        {{"attn_linformer_linear_kv", 4, {LF_QKV, LF_E_SHARED}, lf_case_linear_kv}, "linformer", false},         \
        {{"attn_linformer_linear_layerwise", 4, {LF_QKV, LF_E_SHARED}, lf_case_linear_layerwise}, "linformer",   \
         false},                                                                                                 \
        {{"attn_linformer_conv_none", 5, {LF_QKV, LF_W_HEADS, LF_W_HEADS}, lf_case_conv_none}, "linformer",      \
         false},                                                                                                 \
        {{"attn_linformer_conv_headwise", 5, {LF_QKV, LF_W_SHARED, LF_W_SHARED}, lf_case_conv_headwise},         \
         "linformer", false},                                                                                    \
        {{"attn_linformer_conv_kv", 4, {LF_QKV, LF_W_SHARED}, lf_case_conv_kv}, "linformer", false},             \
        {{"attn_linformer_conv_layerwise", 4, {LF_QKV, LF_W_SHARED}, lf_case_conv_layerwise}, "linformer",       \
         false},                                                                                                 \
        {{"attn_linformer_mean_none", 3, {LF_QKV}, lf_case_mean_none}, "linformer", false},                      \
        {{"attn_linformer_mean_headwise", 3, {LF_QKV}, lf_case_mean_headwise}, "linformer", false},              \
        {{"attn_linformer_mean_kv", 3, {LF_QKV}, lf_case_mean_kv}, "linformer", false},                          \
        {{"attn_linformer_mean_layerwise", 3, {LF_QKV}, lf_case_mean_layerwise}, "linformer", false},            \
        {{"attn_linformer_max_none", 3, {LF_QKV}, lf_case_max_none}, "linformer", false},                        \
        {{"attn_linformer_max_headwise", 3, {LF_QKV}, lf_case_max_headwise}, "linformer", false},                \
        {{"attn_linformer_max_kv", 3, {LF_QKV}, lf_case_max_kv}, "linformer", false},                            \
        {{"attn_linformer_max_layerwise", 3, {LF_QKV}, lf_case_max_layerwise}, "linformer", false}

/* For kernel_refs[]. */
#define LINFORMER_KERNEL_REFS                                                                                    \
    {"linformer linear share=none", "linformer", false, lf_setup_linear_none, 2, {LF_E_HEADS, LF_E_HEADS},      \
     lf_compose, false},                                                                                         \
        {"linformer linear share=headwise", "linformer", false, lf_setup_linear_headwise, 2,                     \
         {LF_E_SHARED, LF_E_SHARED}, lf_compose, false},                                                         \
        {"linformer linear share=kv", "linformer", false, lf_setup_linear_kv, 1, {LF_E_SHARED}, lf_compose,      \
         false},                                                                                                 \
        {"linformer linear share=layerwise", "linformer", false, lf_setup_linear_layerwise, 1, {LF_E_SHARED},    \
         lf_compose, false},                                                                                     \
        {"linformer linear share=none T=n", "linformer", false, lf_setup_linear_none_full, 2,                    \
         {{3, {KC_H, LF_K, KC_T}, GC_NORMAL}, {3, {KC_H, LF_K, KC_T}, GC_NORMAL}}, lf_compose, false},           \
        {"linformer conv share=none", "linformer", false, lf_setup_conv_none, 2, {LF_W_HEADS, LF_W_HEADS},       \
         lf_compose, false},                                                                                     \
        {"linformer conv share=headwise", "linformer", false, lf_setup_conv_headwise, 2,                         \
         {LF_W_SHARED, LF_W_SHARED}, lf_compose, false},                                                         \
        {"linformer conv share=kv", "linformer", false, lf_setup_conv_kv, 1, {LF_W_SHARED}, lf_compose, false},  \
        {"linformer conv share=layerwise", "linformer", false, lf_setup_conv_layerwise, 1, {LF_W_SHARED},        \
         lf_compose, false},                                                                                     \
        {"linformer conv n=8 k=2", "linformer", false, lf_setup_conv_n8_k2, 1, {{1, {4}, GC_NORMAL}}, lf_compose, \
         false},                                                                                                 \
        {"linformer mean", "linformer", false, lf_setup_mean, 0, {{0}}, lf_compose, false},                      \
        {"linformer mean n=10 k=2", "linformer", false, lf_setup_mean_n10_k2, 0, {{0}}, lf_compose, false}

#endif
