/* layer_cases.h: the checks every attention kernel of attn_kernels
 * (layers/attention/kernels.c) must pass, and what they need per kernel.
 *
 * A kernel needs, listed in tests/layer_cases.c (the cases themselves may live
 * in a file of their own, e.g. tests/cases_linear.c):
 *  - gradient-check cases of its forward on small q, k, v (and its own
 *    parameters, as further leaves), causal and bidirectional, that between
 *    them run every one of its fused ops (kernel_cases);
 *  - references: the same attention built from primitive ops, which also
 *    give the attention matrix (kernel_refs), one per variant worth checking.
 * tests/test_model.c walks attn_kernels and fails for a kernel that lacks
 * either. */
#ifndef ATTNLAB_LAYER_CASES_H
#define ATTNLAB_LAYER_CASES_H

#include "attention.h"
#include "attention/kernels.h"
#include "gradcheck.h"

/* The shapes of every kernel case: q, k [B, H, T, DK], v [B, H, T, DV]. */
#define KC_B 2
#define KC_H 2
#define KC_T 5
#define KC_DK 3
#define KC_DV 4

typedef struct {
    GradCase gc;        /* leaves q, k, v, then the kernel's parameters; build runs the kernel */
    const char *kernel; /* its name in attn_kernels */
    bool causal;
} KernelCase;

extern const KernelCase kernel_cases[];
extern const int n_kernel_cases;

typedef struct {
    const char *name;   /* the variant, e.g. "linear phi=elu causal" */
    const char *kernel;
    bool causal;
    /* Sets the variant's options in m, the config c points to, and its
     * parameters on c (NULL: none). */
    void (*setup)(AttnCall *c, ModelConfig *m);
    /* The kernel's own parameters: random leaves of these shapes go to c->params. */
    int n_params;
    GcInput params[ATTN_MAX_PARAMS];
    /* The kernel's output from primitive ops only; *probs gets the attention
     * matrix P [B, H, T, T or k] (output = P v, or P times v's projection). */
    Tensor *(*compose)(const AttnCall *c, Tensor *q, Tensor *k, Tensor *v, Tensor **probs);
    /* P v is the output only when the kernel mixes v as given (not Linformer's F v). */
    bool probs_times_v;
} KernelRef;

extern const KernelRef kernel_refs[];
extern const int n_kernel_refs;

/* The kernel of attn_kernels with this name, or NULL. */
const AttnKernel *kernel_by_name(const char *name);
/* The call the kernel cases use on kernel kern, its config in *m (which must
 * outlive the call): the shapes above, scale 1 / sqrt(KC_DK), no positions or
 * masks, and every kernel's options at the option table's defaults (the rows
 * each kernel declares). A kernel's cases set what they need beyond that
 * (e.g. linear's chunk, Linformer's k). */
AttnCall kernel_case_call(ModelConfig *m, const AttnKernel *kern, bool causal);

#endif
