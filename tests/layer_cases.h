/* layer_cases.h: the checks every attention kernel of attn_kernels
 * (layers/attention/kernels.c) must pass, and what they need per kernel.
 *
 * A kernel needs, here in tests/layer_cases.c:
 *  - gradient-check cases of its forward on small q, k, v, one causal and one
 *    bidirectional (kernel_cases);
 *  - a reference: the same attention built from primitive ops, which also
 *    gives the attention matrix (kernel_refs).
 * tests/test_model.c walks attn_kernels and fails for a kernel that lacks
 * either. */
#ifndef ATTNLAB_LAYER_CASES_H
#define ATTNLAB_LAYER_CASES_H

#include "attention.h"
#include "gradcheck.h"

/* The shapes of every kernel case: q, k [B, H, T, DK], v [B, H, T, DV]. */
#define KC_B 2
#define KC_H 2
#define KC_T 5
#define KC_DK 3
#define KC_DV 4

typedef struct {
    GradCase gc;        /* leaves q, k, v; build runs the kernel's forward */
    const char *kernel; /* its name in attn_kernels */
    bool causal;
} KernelCase;

extern const KernelCase kernel_cases[];
extern const int n_kernel_cases;

typedef struct {
    const char *kernel;
    /* The kernel's output from primitive ops only; *probs gets the attention
     * matrix P [B, H, T, T] (output = P v). */
    Tensor *(*compose)(const AttnCall *c, Tensor *q, Tensor *k, Tensor *v, Tensor **probs);
} KernelRef;

extern const KernelRef kernel_refs[];
extern const int n_kernel_refs;

/* The kernel of attn_kernels with this name, or NULL. */
const AttnKernel *kernel_by_name(const char *name);
/* The call the kernel cases use: the shapes above, scale 1 / sqrt(KC_DK). */
AttnCall kernel_case_call(bool causal);

#endif
