/* attention.h: multi-head attention with a swappable kernel.
 *
 * The module owns the q/k/v/o projections and the head split/merge, and runs
 * a kernel (attention/kernel.h) between them; a kernel with forward_qkv takes
 * q, k and v as one fused projection gives them, and the module splits
 * nothing. */
#ifndef ATTNLAB_ATTENTION_H
#define ATTNLAB_ATTENTION_H

#include "attention/kernel.h"
#include "attention/positions.h"

struct Attention {
    Linear q, k, v, o;
    int heads, key_size, head_size;
    bool causal;
    const AttnKernel *kernel;
    AttnCall call;                   /* the options every call gets */
    Tensor *params[ATTN_MAX_PARAMS]; /* the kernel's own parameters */
};

/* Declares the projections and the kernel's parameters of layer `layer`. */
void attention_declare(Attention *a, ParamSet *p, const char *name, int layer, const ModelConfig *c);
/* Runs the kernel's init hook (if any) on layer `layer`'s parameters. */
void attention_init(Attention *a, int layer, Rng *rng);
/* x [B, T, d] -> [B, T, d] */
Tensor *attention_forward(const Attention *a, Tensor *x);
/* The attention matrices [B, H, T, T] of this layer for input x, gradients off. */
Tensor *attention_probs(const Attention *a, Tensor *x);

#endif
