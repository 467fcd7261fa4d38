/* attention.h: multi-head attention with a swappable kernel.
 *
 * The module owns the q/k/v/o projections and the head split/merge, and runs
 * a kernel (attention/kernel.h) between them; a kernel with forward_qkv takes
 * q, k and v as one fused projection gives them, and the module splits
 * nothing. The module stands above the kernels: it calls them through the
 * contract, and no kernel file includes this header. */
#ifndef ATTNLAB_ATTENTION_H
#define ATTNLAB_ATTENTION_H

#include "attention/kernel.h"
#include "attention/positions.h"
#include "layers.h"

typedef struct {
    Linear q, k, v, o;
    int heads, key_size, head_size;
    bool causal;
    const AttnKernel *kernel;
    ModelConfig cfg; /* the layer's config, its attn preset applied (attn_effective) */
    /* The call every forward gets, B and T aside (attention_call): made once
     * when the layer is built, pointing at cfg and at the kernel's options in
     * it, with the kernel's parameters. So the layer must stay where
     * attention_declare put it. */
    AttnCall call;
} Attention;

/* Declares the projections and the kernel's parameters of layer `layer`, and
 * resolves the layer's config and the kernel's options once. */
void attention_declare(Attention *a, ParamSet *p, const char *name, int layer, const ModelConfig *c);
/* Runs the kernel's init hook (if any) on layer `layer`'s parameters. */
void attention_init(Attention *a, int layer, Rng *rng);
/* The kernel's call for an input of B rows of length T. */
AttnCall attention_call(const Attention *a, int B, int T);
/* x [B, T, d] -> [B, T, d] */
Tensor *attention_forward(const Attention *a, Tensor *x);
/* The attention matrices [B, H, T, T] of this layer for input x, gradients off. */
Tensor *attention_probs(const Attention *a, Tensor *x);

#endif
