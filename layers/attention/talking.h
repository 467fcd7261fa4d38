/* attention/talking.h: Talking-Heads attention (talking.c), the softmax
 * kernel (softmax.c) under talking_heads = pre, post or both. */
#ifndef ATTNLAB_ATTENTION_TALKING_H
#define ATTNLAB_ATTENTION_TALKING_H

#include "attention/kernel.h"

/* The kernel's output and P' [B, H, T, T], the mixing matrices in c->params
 * (talking_pre's, then talking_post's), and its fused op. */
Tensor *attn_talking(const AttnCall *c, Tensor *q, Tensor *k, Tensor *v);
Tensor *attn_talking_probs(const AttnCall *c, Tensor *q, Tensor *k);
extern OpDef attn_talking_op;
/* Declares the layer's mixing matrices [H, H] under prefix into params,
 * talking_pre's (pre, both) then talking_post's (post, both); and sets them
 * to the identity, so that a new layer computes plain attention. */
void talking_declare(ParamSet *p, const char *prefix, int talking_heads, int H, Tensor **params);
void talking_init(Tensor **params);

#endif
