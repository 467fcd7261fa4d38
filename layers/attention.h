/* attention.h: multi-head attention with a swappable kernel.
 *
 * The module owns the q/k/v/o projections and the head split/merge; a kernel
 * turns per-head q, k, v into per-head outputs. Adding a kernel is one file in
 * layers/attention/ and one line in attn_kernels (layers/attention/kernels.c). */
#ifndef ATTNLAB_ATTENTION_H
#define ATTNLAB_ATTENTION_H

#include "layers.h"
#include "tape.h"

/* What a kernel is told about the call. */
typedef struct {
    int B, H, T;
    int key_size, head_size;
    bool causal;  /* query i sees keys j <= i */
    float scale;  /* logits are scale * q.k; 1 / sqrt(key_size) */
} AttnCall;

typedef struct {
    const char *name;
    /* q, k [B, H, T, key_size], v [B, H, T, head_size] -> [B, H, T, head_size] */
    Tensor *(*forward)(const AttnCall *c, Tensor *q, Tensor *k, Tensor *v);
    /* The attention matrix P [B, H, T, T] for the same q, k, with gradients
     * off (for ./spectrum): the kernel's output is P v. */
    Tensor *(*probs)(const AttnCall *c, Tensor *q, Tensor *k);
    /* The kernel's fused op, so the tests can find and check it (NULL when
     * the kernel is made of primitive ops only). */
    OpDef *op;
} AttnKernel;

/* Indexed by AttnKind. */
extern const AttnKernel *const attn_kernels[];
extern const int n_attn_kernels;

typedef struct {
    Linear q, k, v, o;
    int heads, key_size, head_size;
    bool causal;
    const AttnKernel *kernel;
} Attention;

void attention_declare(Attention *a, ParamSet *p, const char *name, const ModelConfig *c);
/* x [B, T, d] -> [B, T, d] */
Tensor *attention_forward(const Attention *a, Tensor *x);
/* The attention matrices [B, H, T, T] of this layer for input x, gradients off. */
Tensor *attention_probs(const Attention *a, Tensor *x);

#endif
